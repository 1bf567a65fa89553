/* dc-cli-bench-decode.c: `daisychain-cli bench decode`, prefill and decode
 * tokens per second of a Hugging Face model on one device, next to PyTorch.
 *
 * The model defaults to a SmolLM-135M-shaped one with random weights
 * (hidden 576, 30 layers, 9 heads, 3 key-value heads, FFN 1536, tied,
 * vocabulary 49,152, BF16), written once in the Hub layout by
 * scripts/make-bench-model.py into the user's cache directory. Both scripts
 * travel inside the program as resources; PyTorch's side
 * (scripts/bench-decode-torch.py, a plain Llama forward with a KV cache in
 * f32) runs in the same invocation with as many threads as ours. The anchor
 * users would pick instead, llama.cpp's Q8_0, is measured beside this by
 * ../shared/anchors/llamacpp/run.sh (docs/BENCHMARKS.md).
 *
 * Work: a 64-token prompt (ids from a fixed seed) in one forward (prefill),
 * then 128 greedy steps of one token each (decode), the median of --runs
 * runs after one warm-up. Peak memory is this process's maximum resident
 * set (getrusage), which includes loading.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>
#include <sys/resource.h>

#include "dc-cli.h"
#include "dc-cli-python.h"
#include "dc-cli-resources.h"
#include "dc-context.h"
#include "engine/dc-math.h"
#include "model/dc-hf-config.h"
#include "model/dc-hf-model.h"
#include "model/dc-rng.h"
#include "model/dc-tensor-source-files.h"

/* The prompt and decode lengths of the llama.cpp anchor's measurement. */
#define BENCH_PROMPT 64
#define BENCH_DECODE 128

typedef struct
{
  double prefill_tok_s;
  double decode_tok_s;
  double peak_rss_mib;
  char  *version;
} TorchResult;

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
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double
peak_rss_mib (void)
{
  struct rusage usage;

  if (getrusage (RUSAGE_SELF, &usage) != 0)
    return -1;
  return usage.ru_maxrss / 1024.0;   /* kilobytes on Linux */
}

/* The default model, made once in the cache directory. */
static char *
ensure_default_model (GError **error)
{
  g_autofree char *dir = g_build_filename (g_get_user_cache_dir (), "daisychain", "bench",
                                           "smollm-135m-random", NULL);
  g_autofree char *weights = g_build_filename (dir, "model.safetensors", NULL);
  g_autofree char *out = NULL;
  const char *args[] = { dir, NULL };

  if (g_file_test (weights, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer (&dir);
  g_printerr (_("bench decode: writing the SmolLM-135M-shaped random model to %s (once)…\n"), dir);
  out = dc_cli_python_run (RESOURCE_BASE "/cli/make-bench-model.py", args, error);
  if (out == NULL)
    {
      g_prefix_error (error, _("cannot write the benchmark model: "));
      return NULL;
    }
  return g_steal_pointer (&dir);
}

static gboolean
bench_torch (const char   *model_dir,
             guint         threads,
             guint         runs,
             TorchResult  *result,
             GError      **error)
{
  g_autofree char *threads_s = g_strdup_printf ("%u", threads);
  g_autofree char *runs_s = g_strdup_printf ("%u", runs);
  g_autofree char *prompt_s = g_strdup_printf ("%u", BENCH_PROMPT);
  g_autofree char *decode_s = g_strdup_printf ("%u", BENCH_DECODE);
  const char *args[] = { model_dir, "--threads", threads_s, "--runs", runs_s, "--prompt",
                         prompt_s, "--decode", decode_s, NULL };
  g_autofree char *out = dc_cli_python_run (RESOURCE_BASE "/cli/bench-decode-torch.py", args, error);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *o;

  if (out == NULL)
    return FALSE;
  if (!json_parser_load_from_data (parser, g_strstrip (out), -1, error)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      g_prefix_error (error, _("PyTorch's answer: "));
      return FALSE;
    }
  o = json_node_get_object (json_parser_get_root (parser));
  result->prefill_tok_s = json_object_get_double_member_with_default (o, "prefill_tok_s", -1);
  result->decode_tok_s = json_object_get_double_member_with_default (o, "decode_tok_s", -1);
  result->peak_rss_mib = json_object_get_double_member_with_default (o, "peak_rss_mib", -1);
  result->version = g_strdup_printf ("torch %s",
                                     json_object_get_string_member_with_default (o, "torch", "?"));
  return TRUE;
}

static gboolean
bench_ours (DcContext  *context,
            const char *model_dir,
            guint       runs,
            double     *prefill_tok_s,
            double     *decode_tok_s,
            char      **architecture,
            GError    **error)
{
  g_autofree char *config_path = g_build_filename (model_dir, "config.json", NULL);
  g_autoptr(DcHfConfig) config = dc_hf_config_new_from_file (config_path, error);
  g_autoptr(DcTensorSource) source = NULL;
  g_autofree float *logits = NULL;
  g_autofree double *prefill = NULL, *decode = NULL;
  DcHfModel *model;
  guint32 prompt[BENCH_PROMPT];
  gboolean ok = TRUE;

  if (config == NULL)
    return FALSE;
  source = dc_tensor_source_files_new (model_dir, error);
  if (source == NULL)
    return FALSE;
  model = dc_hf_model_load (config, source, dc_context_get_backend (context), NULL, NULL, NULL,
                            error);
  if (model == NULL)
    return FALSE;
  *architecture = g_strdup (config->architecture);
  for (guint i = 0; i < BENCH_PROMPT; i++)
    prompt[i] = (guint32) (dc_rng_u64 (64, 0x50524d54 /* "PRMT" */, i) % config->vocab_size);
  logits = g_new (float, config->vocab_size);
  prefill = g_new (double, runs);
  decode = g_new (double, runs);
  /* Run 0 warms up (page faults, thread start) and is not counted. */
  for (guint r = 0; r <= runs && ok; r++)
    {
      DcHfKvCache *cache = dc_hf_kv_cache_new (model, BENCH_PROMPT + BENCH_DECODE, error);
      gint64 t0, t1, t2;

      if (cache == NULL)
        {
          ok = FALSE;
          break;
        }
      t0 = g_get_monotonic_time ();
      ok = dc_hf_model_forward (model, cache, prompt, BENCH_PROMPT, logits, error);
      t1 = g_get_monotonic_time ();
      for (guint s = 0; s < BENCH_DECODE && ok; s++)
        {
          guint32 next = 0;

          for (guint v = 1; v < config->vocab_size; v++)
            if (logits[v] > logits[next])
              next = v;
          ok = dc_hf_model_forward (model, cache, &next, 1, logits, error);
        }
      t2 = g_get_monotonic_time ();
      dc_hf_kv_cache_free (cache);
      if (r > 0)
        {
          prefill[r - 1] = BENCH_PROMPT / ((t1 - t0) / 1e6);
          decode[r - 1] = BENCH_DECODE / ((t2 - t1) / 1e6);
        }
    }
  dc_hf_model_free (model);
  if (!ok)
    return FALSE;
  *prefill_tok_s = median (prefill, runs);
  *decode_tok_s = median (decode, runs);
  return TRUE;
}

static void
add_rate (JsonBuilder *builder,
          const char  *name,
          double       value)
{
  json_builder_set_member_name (builder, name);
  if (value > 0)
    json_builder_add_double_value (builder, value);
  else
    json_builder_add_null_value (builder);
}

int
dc_cli_bench_decode_run (const DcCliCommand  *command,
                         DcCliOptions        *options,
                         int                  argc,
                         char               **argv)
{
  int threads = 0, runs = 5;
  gboolean no_torch = FALSE;
  g_autofree char *model_arg = NULL;
  g_autofree char *model_dir = NULL;
  g_autofree char *architecture = NULL;
  const GOptionEntry entries[] = {
    { "model", 0, 0, G_OPTION_ARG_FILENAME, &model_arg,
      N_("A model folder in the Hub layout (a SmolLM-135M-shaped random one)"), "DIR" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, N_("Threads for us and PyTorch (all cores)"),
      "N" },
    { "runs", 0, 0, G_OPTION_ARG_INT, &runs, N_("Measured runs; the median is reported (5)"), "N" },
    { "no-torch", 0, 0, G_OPTION_ARG_NONE, &no_torch, N_("Skip the PyTorch reference"), NULL },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcContext) context = NULL;
  TorchResult torch = { -1, -1, -1, NULL };
  double prefill = -1, decode = -1, rss;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (threads <= 0)
    threads = g_get_num_processors ();
  if (runs < 1 || runs > 100)
    return dc_cli_usage_error (command, _("--runs must be in [1, 100]"));
  if (!dc_math_check_fp_environment (&error))
    return dc_cli_fail (options, error);

  model_dir = model_arg != NULL ? g_strdup (model_arg) : ensure_default_model (&error);
  if (model_dir == NULL)
    return dc_cli_fail (options, error);

  context = dc_context_new (DC_BACKEND_CPU, &error);
  if (context == NULL)
    return dc_cli_fail (options, error);
  dc_gemm_backend_set_n_threads (dc_context_get_backend (context), threads);
  if (!bench_ours (context, model_dir, runs, &prefill, &decode, &architecture, &error))
    return dc_cli_fail (options, error);
  rss = peak_rss_mib ();   /* before PyTorch: its process is not ours */

  if (!no_torch)
    {
      g_autoptr(GError) torch_error = NULL;

      if (!bench_torch (model_dir, threads, runs, &torch, &torch_error))
        g_printerr (_("bench decode: no PyTorch figures: %s\n"), torch_error->message);
    }

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "model");
      json_builder_add_string_value (builder, model_arg != NULL ? model_arg
                                                                : "smollm-135m-shaped-random");
      json_builder_set_member_name (builder, "architecture");
      json_builder_add_string_value (builder, architecture);
      json_builder_set_member_name (builder, "threads");
      json_builder_add_int_value (builder, threads);
      json_builder_set_member_name (builder, "prompt_tokens");
      json_builder_add_int_value (builder, BENCH_PROMPT);
      json_builder_set_member_name (builder, "decode_tokens");
      json_builder_add_int_value (builder, BENCH_DECODE);
      add_rate (builder, "prefill_tok_s", prefill);
      add_rate (builder, "decode_tok_s", decode);
      add_rate (builder, "peak_rss_mib", rss);
      add_rate (builder, "torch_prefill_tok_s", torch.prefill_tok_s);
      add_rate (builder, "torch_decode_tok_s", torch.decode_tok_s);
      add_rate (builder, "torch_peak_rss_mib", torch.peak_rss_mib);
      json_builder_set_member_name (builder, "torch");
      if (torch.version != NULL)
        json_builder_add_string_value (builder, torch.version);
      else
        json_builder_add_null_value (builder);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("%s, %d threads: prefill %.0f tokens/s, decode %.1f tokens/s, peak %.0f MiB\n",
               architecture, threads, prefill, decode, rss);
      if (torch.version != NULL)
        g_print ("PyTorch (%s, f32): prefill %.0f tokens/s, decode %.1f tokens/s\n",
                 torch.version, torch.prefill_tok_s, torch.decode_tok_s);
    }
  g_free (torch.version);
  return DC_CLI_EXIT_OK;
}
