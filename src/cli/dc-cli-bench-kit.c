/* dc-cli-bench-kit.c: `daisychain-cli bench kit`, the inference kit's
 * tokens/s in headless Chromium next to dc_generate ()'s in this process.
 *
 * For the seeds' default size (width 32, context 32) and the largest (width
 * 128, context 128), an untrained model (weights from a fixed seed) is
 * exported as a kit into a temporary folder and opened once with run=1 for 8
 * tokens (the worker loads the model and the JavaScript engine warms up);
 * dc_generate () warms up the same way. Then --rounds rounds (default 3)
 * each run the native side and the kit (the page's Generate, clicked over
 * DevTools) for --tokens greedy tokens after "The "; the page reports the
 * tokens/s its worker measured around the whole generation, as
 * dc_generate () is timed here. Medians are reported, and the ratio is the
 * median of each round's ratio, so that a shared machine slowing down
 * between rounds moves both sides of a ratio together. The ids of both are
 * compared too (same_ids), so a fast kit that computes something else is
 * seen.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <math.h>
#include <string.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "dc-cli.h"
#include "dc-cli-chromium.h"
#include "model/dc-generate.h"
#include "model/dc-gpt-model.h"
#include "model/dc-kit-export.h"

#define BENCH_PROMPT "The "
/* Chromium's start and one DevTools command on a busy 2-core machine. */
#define BENCH_BROWSER_TIMEOUT_MS 90000
/* One kit generation: 4096 tokens of the largest model at a few tokens/s
 * would take longer; the default 128 takes seconds. */
#define BENCH_RUN_TIMEOUT_MS 600000

typedef struct
{
  const char *name;
  guint       width;
  guint       seq;
} KitSize;

static const KitSize sizes[] = {
  { "default", 32, 32 },     /* the seeds' default, as bench train */
  { "w128", 128, 128 },      /* the largest */
};

typedef struct
{
  double     native_tps;   /* medians over the rounds */
  double     kit_tps;
  double     ratio;        /* the median of each round's kit ÷ native */
  gboolean   same_ids;     /* in every round */
  gsize      kit_bytes;
  char      *engine;       /* the page's "Engine" fact */
} KitResult;

static double
median (double *v,
        guint   n)
{
  for (guint i = 1; i < n; i++)
    for (guint j = i; j > 0 && v[j - 1] > v[j]; j--)
      {
        double t = v[j];

        v[j] = v[j - 1];
        v[j - 1] = t;
      }
  return n == 0 ? -1 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Waits for the page's next finished generation: its tokens/s and ids. */
static gboolean
wait_kit_run (DcChromium  *browser,
              double      *tps,
              char       **ids,
              GError     **error)
{
  g_autofree char *text = NULL;

  text = dc_chromium_wait_string (browser,
                                  "document.body && document.body.dataset.state === 'error' ? "
                                  "'error: ' + document.getElementById ('status').textContent : "
                                  "(document.getElementById ('result-tokens-per-s') || {}).textContent || ''",
                                  BENCH_RUN_TIMEOUT_MS, error);
  if (text == NULL)
    return FALSE;
  if (g_str_has_prefix (text, "error: "))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "the kit failed in Chromium: %s", text + 7);
      return FALSE;
    }
  *tps = g_ascii_strtod (text, NULL);
  *ids = dc_chromium_wait_string (browser, "document.getElementById ('result-ids').textContent",
                                  BENCH_BROWSER_TIMEOUT_MS, error);
  return *ids != NULL;
}

static gboolean
bench_size (const KitSize  *size,
            guint           tokens,
            guint           rounds,
            DcChromium     *browser,
            const char     *dir,
            KitResult      *out,
            GError        **error)
{
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GByteArray) ids = g_byte_array_new ();
  g_autofree char *path = g_strdup_printf ("%s/kit-%s.html", dir, size->name);
  g_autofree char *uri = NULL, *url = NULL, *warm_ids = NULL, *click = NULL;
  g_autofree double *native = g_new0 (double, rounds);
  g_autofree double *kit = g_new0 (double, rounds);
  g_autofree double *ratio = g_new0 (double, rounds);
  DcGptConfig config;
  GStatBuf st;
  double warm_tps;

  dc_gpt_config_init_derived (&config, size->width, size->seq);
  model = dc_gpt_model_new (&config, error);
  if (model == NULL)
    return FALSE;
  dc_gpt_model_init_weights (model, 1);
  if (!dc_kit_export (model, NAN, path, NULL, error))
    return FALSE;
  out->kit_bytes = g_stat (path, &st) == 0 ? (gsize) st.st_size : 0;

  /* Warm-ups: 8 tokens each. */
  if (!dc_generate (model, (const guint8 *) BENCH_PROMPT, strlen (BENCH_PROMPT), 8, 0, 1, ids,
                    error))
    return FALSE;
  uri = g_filename_to_uri (path, NULL, error);
  if (uri == NULL)
    return FALSE;
  url = g_strdup_printf ("%s?prompt=The%%20&tokens=8&temperature=0&seed=1&run=1", uri);
  if (!dc_chromium_navigate (browser, url, BENCH_BROWSER_TIMEOUT_MS, error)
      || !wait_kit_run (browser, &warm_tps, &warm_ids, error))
    return FALSE;

  {
    g_autoptr(JsonNode) engine = dc_chromium_evaluate (browser, "document.getElementById "
                                                       "('fact-engine').textContent",
                                                       BENCH_BROWSER_TIMEOUT_MS, error);

    if (engine == NULL)
      return FALSE;
    out->engine = JSON_NODE_HOLDS_VALUE (engine) ? json_node_dup_string (engine) : NULL;
  }

  /* Generate's click handler clears the previous results before it starts. */
  click = g_strdup_printf ("document.getElementById ('tokens').value = '%u';"
                           "document.getElementById ('generate').click (); 'ok'", tokens);
  out->same_ids = TRUE;
  for (guint r = 0; r < rounds; r++)
    {
      g_autoptr(GString) native_ids = g_string_new ("[");
      g_autoptr(JsonNode) clicked = NULL;
      g_autofree char *page_ids = NULL;
      gint64 t0;

      g_byte_array_set_size (ids, 0);
      t0 = g_get_monotonic_time ();
      if (!dc_generate (model, (const guint8 *) BENCH_PROMPT, strlen (BENCH_PROMPT), tokens, 0, 1,
                        ids, error))
        return FALSE;
      native[r] = ids->len / ((g_get_monotonic_time () - t0) / 1e6);
      for (guint i = 0; i < ids->len; i++)
        g_string_append_printf (native_ids, "%s%u", i > 0 ? "," : "", ids->data[i]);
      g_string_append_c (native_ids, ']');

      clicked = dc_chromium_evaluate (browser, click, BENCH_BROWSER_TIMEOUT_MS, error);
      if (clicked == NULL || !wait_kit_run (browser, &kit[r], &page_ids, error))
        return FALSE;
      out->same_ids = out->same_ids && g_str_equal (page_ids, native_ids->str);
      ratio[r] = native[r] > 0 ? kit[r] / native[r] : 0;
    }
  out->native_tps = median (native, rounds);
  out->kit_tps = median (kit, rounds);
  out->ratio = median (ratio, rounds);
  return TRUE;
}

int
dc_cli_bench_kit_run (const DcCliCommand  *command,
                      DcCliOptions        *options,
                      int                  argc,
                      char               **argv)
{
  int tokens = 128, rounds = 3;
  const GOptionEntry entries[] = {
    { "tokens", 0, 0, G_OPTION_ARG_INT, &tokens, N_("Tokens to generate per run (128)"), "N" },
    { "rounds", 0, 0, G_OPTION_ARG_INT, &rounds,
      N_("Native and kit runs per size; medians are reported (3)"), "N" },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcChromium) browser = NULL;
  g_autofree char *program = NULL, *dir = NULL;
  int status = DC_CLI_EXIT_OK;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (tokens < 1 || tokens > DC_GENERATE_MAX_TOKENS)
    return dc_cli_usage_error (command, _("--tokens must be 1–%d"), DC_GENERATE_MAX_TOKENS);
  /* 101 rounds of the largest size at a few tokens/s already take hours. */
  if (rounds < 1 || rounds > 101)
    return dc_cli_usage_error (command, _("--rounds must be 1–101"));

  program = dc_chromium_find_program ();
  if (program == NULL)
    {
      g_set_error_literal (&error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                           "bench kit needs Chromium (the chromium package), which is not installed");
      return dc_cli_fail (options, error);
    }
  dir = g_dir_make_tmp ("dc-bench-kit-XXXXXX", &error);
  if (dir == NULL)
    return dc_cli_fail (options, error);
  browser = dc_chromium_new (program, BENCH_BROWSER_TIMEOUT_MS, &error);
  if (browser == NULL)
    {
      g_rmdir (dir);
      return dc_cli_fail (options, error);
    }

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      KitResult r = { 0 };

      if (!bench_size (&sizes[i], tokens, rounds, browser, dir, &r, &error))
        {
          g_free (r.engine);
          g_prefix_error (&error, "bench kit (%s): ", sizes[i].name);
          status = dc_cli_fail (options, error);
          break;
        }
      if (options->json)
        {
          g_autoptr(JsonBuilder) b = json_builder_new ();

          json_builder_begin_object (b);
          json_builder_set_member_name (b, "size");
          json_builder_add_string_value (b, sizes[i].name);
          json_builder_set_member_name (b, "width");
          json_builder_add_int_value (b, sizes[i].width);
          json_builder_set_member_name (b, "seq");
          json_builder_add_int_value (b, sizes[i].seq);
          json_builder_set_member_name (b, "tokens");
          json_builder_add_int_value (b, tokens);
          json_builder_set_member_name (b, "rounds");
          json_builder_add_int_value (b, rounds);
          json_builder_set_member_name (b, "kit_bytes");
          json_builder_add_int_value (b, r.kit_bytes);
          json_builder_set_member_name (b, "kit_tokens_per_s");
          json_builder_add_double_value (b, r.kit_tps);
          json_builder_set_member_name (b, "native_tokens_per_s");
          json_builder_add_double_value (b, r.native_tps);
          json_builder_set_member_name (b, "ratio");
          json_builder_add_double_value (b, r.ratio);
          json_builder_set_member_name (b, "same_ids");
          json_builder_add_boolean_value (b, r.same_ids);
          json_builder_set_member_name (b, "kit_engine");
          json_builder_add_string_value (b, r.engine);
          json_builder_end_object (b);
          dc_cli_print_json (b);
        }
      else
        g_print ("%-8s width %3u  kit %8.1f tokens/s (%s)  native %8.1f tokens/s  ratio %.2f%s\n",
                 sizes[i].name, sizes[i].width, r.kit_tps, r.engine != NULL ? r.engine : "?",
                 r.native_tps, r.ratio, r.same_ids ? "" : "  (ids differ!)");
      g_free (r.engine);
    }

  g_clear_pointer (&browser, dc_chromium_free);
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autofree char *path = g_strdup_printf ("%s/kit-%s.html", dir, sizes[i].name);

      g_unlink (path);
    }
  g_rmdir (dir);
  return status;
}
