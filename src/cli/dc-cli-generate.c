/* dc-cli-generate.c: `daisychain-cli generate`, text from a checkpoint.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "dc-cli.h"
#include "model/dc-checkpoint.h"
#include "model/dc-generate.h"
#include "model/dc-gpt.h"

/* The prompt's logits, for comparisons with other implementations (the H200
 * check against transformers, docs/TEST_RESULTS.md). */
static gboolean
write_logits (const DcGptModel  *model,
              const char        *prompt,
              const char        *precision,
              const char        *path,
              GError           **error)
{
  g_autoptr(DcGptRun) run = NULL;
  gsize len = prompt != NULL ? strlen (prompt) : 0;
  DcGptPrecision p = precision != NULL && g_str_equal (precision, "f32")
                     ? DC_GPT_PRECISION_F32 : DC_GPT_PRECISION_INT8;

  if (len == 0 || len > model->config.seq)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--dump-logits needs a prompt of 1–%u bytes", model->config.seq);
      return FALSE;
    }
  run = dc_gpt_run_new (&model->config, 1, p, 1);
  if (!dc_gpt_run_forward (run, model->params, (const guint8 *) prompt, NULL, 1, len, NULL, error))
    return FALSE;
  return g_file_set_contents (path, (const char *) dc_gpt_run_get_logits (run),
                              len * model->config.vocab * sizeof (float), error);
}

int
dc_cli_generate_run (const DcCliCommand  *command,
                     DcCliOptions        *options,
                     int                  argc,
                     char               **argv)
{
  g_autofree char *checkpoint = NULL, *prompt = NULL;
  int tokens = 64;
  double temperature = 0.0;
  gint64 seed = 1;
  g_autofree char *dump_logits = NULL, *precision = NULL;
  const GOptionEntry entries[] = {
    { "checkpoint", 0, 0, G_OPTION_ARG_FILENAME, &checkpoint, N_("The .pt file"), "FILE" },
    { "prompt", 0, 0, G_OPTION_ARG_STRING, &prompt, N_("Text to continue"), "TEXT" },
    { "tokens", 0, 0, G_OPTION_ARG_INT, &tokens, N_("Tokens (bytes) to generate (64)"), "N" },
    { "temperature", 0, 0, G_OPTION_ARG_DOUBLE, &temperature,
      N_("0 for greedy (default), else 0.01–10"), "T" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, N_("Seed of the sampling draws (1)"), "N" },
    { "dump-logits", 0, 0, G_OPTION_ARG_FILENAME, &dump_logits,
      N_("Also write the prompt's logits (positions × 256 float32, little-endian)"), "FILE" },
    { "precision", 0, 0, G_OPTION_ARG_STRING, &precision,
      N_("Products for --dump-logits: int8 (default) or f32 (the test reference)"), "P" },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GByteArray) ids = g_byte_array_new ();
  g_autofree char *text = NULL;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (checkpoint == NULL)
    return dc_cli_usage_error (command, _("--checkpoint is required"));
  if (tokens < 0 || tokens > DC_GENERATE_MAX_TOKENS)
    return dc_cli_usage_error (command, _("--tokens must be 0–%d"), DC_GENERATE_MAX_TOKENS);

  if (precision != NULL && !g_str_equal (precision, "int8") && !g_str_equal (precision, "f32"))
    return dc_cli_usage_error (command, _("--precision must be int8 or f32"));

  model = dc_checkpoint_load (checkpoint, NULL, &error);
  if (model == NULL)
    return dc_cli_fail (options, error);
  if (dump_logits != NULL && !write_logits (model, prompt, precision, dump_logits, &error))
    return dc_cli_fail (options, error);
  if (!dc_generate (model, (const guint8 *) (prompt != NULL ? prompt : ""),
                    prompt != NULL ? strlen (prompt) : 0, tokens, (float) temperature,
                    (guint64) seed, ids, &error))
    return dc_cli_fail (options, error);
  /* Bytes need not form UTF-8; the text shows U+FFFD where they do not. */
  text = g_utf8_make_valid (ids->len > 0 ? (const char *) ids->data : "", ids->len);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "ids");
      json_builder_begin_array (builder);
      for (guint i = 0; i < ids->len; i++)
        json_builder_add_int_value (builder, ids->data[i]);
      json_builder_end_array (builder);
      json_builder_set_member_name (builder, "text");
      json_builder_add_string_value (builder, text);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    g_print ("%s%s\n", prompt != NULL ? prompt : "", text);
  return DC_CLI_EXIT_OK;
}
