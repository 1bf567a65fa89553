/* dc-cli-infer.c: `daisychain-cli infer`, text from a Hugging Face model.
 *
 * The same DcInferSession the Infer view uses: the model from the Hub (its
 * HF_ENDPOINT and cache directory honoured through the context's client) or
 * a local folder, weights loaded with progress on stderr, then either one
 * generation streamed to stdout or, with --score, each position's top-10
 * for a given list of ids (teacher forcing). A token is read only when the
 * Hub asks for one, from --token-file or $HF_TOKEN, as `data` does; it is
 * never printed.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <glib/gi18n.h>
#include <glib-unix.h>
#include <gio/gunixinputstream.h>

#include "dc-cli.h"
#include "dc-cli-hub-token.h"
#include "dc-context.h"
#include "dc-regular-file.h"
#include "infer/dc-infer-session.h"
#include "infer/dc-sampler.h"
#include "model/dc-model-error.h"

/* A prompt on standard input, as the session accepts it. */
#define STDIN_MAX_BYTES DC_INFER_MAX_PROMPT_BYTES
/* Ids to score: the largest context of the models this build runs is far
 * below 2^24 positions; 65,536 ids is an hour of CPU and past that a mistake. */
#define SCORE_MAX_IDS 65536
/* The top list --score prints, as other implementations' comparisons use. */
#define SCORE_TOP_K 10

typedef struct
{
  GMainLoop   *loop;
  DcCliOptions *options;
  gboolean     loaded;
  GError      *error;
  guint        prompt_id;
  gboolean     finished;
  gboolean     stopped;
  double       tokens_per_s;
  guint        n_prompt_tokens;
  GArray      *ids;        /* guint32 */
  GString     *text;
  int          last_percent;
} InferState;

static char *
read_stdin (GError **error)
{
  g_autoptr(GInputStream) in = g_unix_input_stream_new (0, FALSE);
  g_autoptr(GByteArray) text = g_byte_array_new ();
  guint8 buffer[65536];

  for (;;)
    {
      gssize n = g_input_stream_read (in, buffer, sizeof buffer, NULL, error);

      if (n < 0)
        return NULL;
      if (n == 0)
        break;
      if (text->len + (gsize) n > STDIN_MAX_BYTES)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "the prompt on standard input is larger than %u KiB",
                       STDIN_MAX_BYTES / 1024);
          return NULL;
        }
      g_byte_array_append (text, buffer, (guint) n);
    }
  g_byte_array_append (text, (const guint8 *) "", 1);
  if (!g_utf8_validate ((const char *) text->data, -1, NULL)
      || strlen ((const char *) text->data) + 1 != text->len)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the prompt on standard input is not UTF-8 text");
      return NULL;
    }
  return (char *) g_byte_array_free (g_steal_pointer (&text), FALSE);
}

/* "1,2,3": the ids, or NULL (a usage error, said by the caller). */
static GArray *
parse_ids (const char *text)
{
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);

  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 v;
      const char *part = g_strstrip (parts[i]);

      if (ids->len >= SCORE_MAX_IDS
          || !g_ascii_string_to_unsigned (part, 10, 0, G_MAXUINT32 - 1, &v, NULL))
        return NULL;
      g_array_append_val (ids, (guint32) { (guint32) v });
    }
  if (ids->len == 0)
    return NULL;
  return g_steal_pointer (&ids);
}

static void
load_progress_cb (DcInferSession *session,
                  guint64         done,
                  guint64         total,
                  InferState     *state)
{
  int percent = total > 0 ? (int) (done * 100 / total) : 100;

  /* One line per tenth (and the end), so a pipe is not flooded. */
  if (percent / 10 == state->last_percent / 10 && percent != 100)
    return;
  if (percent == state->last_percent)
    return;
  state->last_percent = percent;
  g_printerr ("daisychain-cli: loading weights: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
              " MB (%d%%)\n", done / 1000000, total / 1000000, percent);
}

static void
load_done_cb (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  InferState *state = user_data;

  state->loaded = dc_infer_session_load_finish (DC_INFER_SESSION (source), result,
                                                &state->error);
  g_main_loop_quit (state->loop);
}

static void
started_cb (DcInferSession *session,
            guint           prompt_id,
            guint           n_prompt_tokens,
            InferState     *state)
{
  if (prompt_id == state->prompt_id)
    state->n_prompt_tokens = n_prompt_tokens;
}

static void
token_cb (DcInferSession *session,
          guint           prompt_id,
          guint           token_id,
          const char     *text,
          double          tokens_per_s,
          InferState     *state)
{
  if (prompt_id != state->prompt_id)
    return;
  g_array_append_val (state->ids, token_id);
  g_string_append (state->text, text);
  if (!state->options->json)
    {
      /* Streamed as made. */
      fputs (text, stdout);
      fflush (stdout);
    }
}

static void
finished_cb (DcInferSession *session,
             guint           prompt_id,
             gboolean        stopped,
             const char     *error_message,
             double          tokens_per_s,
             InferState     *state)
{
  if (prompt_id != state->prompt_id)
    return;
  state->finished = TRUE;
  state->stopped = stopped;
  state->tokens_per_s = tokens_per_s;
  if (error_message != NULL)
    state->error = g_error_new_literal (DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID, error_message);
  g_main_loop_quit (state->loop);
}

static gboolean
sigint_cb (gpointer user_data)
{
  /* Ctrl+C ends the generation after the token in progress, with its output. */
  dc_infer_session_stop (user_data);
  return G_SOURCE_CONTINUE;
}

static int
print_scores (DcInferSession *session,
              DcCliOptions   *options,
              GArray         *ids)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) scores = NULL;

  scores = dc_infer_session_score (session, (const guint32 *) ids->data, ids->len,
                                   SCORE_TOP_K, NULL, &error);
  if (scores == NULL)
    return dc_cli_fail (options, error);
  for (guint pos = 0; pos < ids->len; pos++)
    {
      const DcInferScore *top = &g_array_index (scores, DcInferScore, pos * SCORE_TOP_K);

      if (options->json)
        {
          g_autoptr(JsonBuilder) builder = json_builder_new ();

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "pos");
          json_builder_add_int_value (builder, pos);
          json_builder_set_member_name (builder, "top");
          json_builder_begin_array (builder);
          for (guint k = 0; k < SCORE_TOP_K && top[k].id != G_MAXUINT32; k++)
            {
              json_builder_begin_array (builder);
              json_builder_add_int_value (builder, top[k].id);
              json_builder_add_double_value (builder, top[k].logit);
              json_builder_end_array (builder);
            }
          json_builder_end_array (builder);
          json_builder_end_object (builder);
          dc_cli_print_json (builder);
        }
      else
        {
          g_autoptr(GString) line = g_string_new (NULL);

          g_string_append_printf (line, "%u:", pos);
          for (guint k = 0; k < SCORE_TOP_K && top[k].id != G_MAXUINT32; k++)
            g_string_append_printf (line, " %u %.6g", top[k].id, top[k].logit);
          g_print ("%s\n", line->str);
        }
    }
  return DC_CLI_EXIT_OK;
}

int
dc_cli_infer_run (const DcCliCommand  *command,
                  DcCliOptions        *options,
                  int                  argc,
                  char               **argv)
{
  g_autofree char *model = NULL, *prompt = NULL, *output = NULL, *score = NULL;
  g_autofree char *backend = NULL, *token_file = NULL;
  int tokens = 60, context_length = 64, temperature = 0;
  gint64 seed = 1234;
  const GOptionEntry entries[] = {
    { "model", 0, 0, G_OPTION_ARG_FILENAME, &model,
      N_("A Hugging Face repo id (owner/name[@revision]) or a local model folder"), "REPO|DIR" },
    { "prompt", 0, 0, G_OPTION_ARG_STRING, &prompt,
      N_("The prompt (read from standard input when not given)"), "P" },
    { "tokens", 0, 0, G_OPTION_ARG_INT, &tokens, N_("Tokens to generate (60)"), "N" },
    { "context", 0, 0, G_OPTION_ARG_INT, &context_length,
      N_("Context length (64, up to the model's limit)"), "N" },
    { "temperature", 0, 0, G_OPTION_ARG_INT, &temperature,
      N_("Temperature ÷100: 0 greedy (default), 100 = 1.0, at most 1000"), "N" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed,
      N_("Seed of the draws above temperature 0 (1234)"), "N" },
    { "output", 0, 0, G_OPTION_ARG_STRING, &output,
      N_("free (default) or json: the completion is valid JSON"), "free|json" },
    { "score", 0, 0, G_OPTION_ARG_STRING, &score,
      N_("Instead of generating: each position's top-10 ids and logits for these ids"), "IDS" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
      N_("cpu (default), cpu-scalar or vulkan"), "B" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Read a Hugging Face token from FILE if the Hub asks for one (else $HF_TOKEN)"),
      "FILE" },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcContext) context = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(DcInferSession) session = NULL;
  g_autoptr(GArray) score_ids = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  DcBackendKind kind = DC_BACKEND_CPU;
  DcInferSettings settings;
  InferState state = { 0 };
  guint sigint_id;
  int status;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (model == NULL || *model == '\0')
    return dc_cli_usage_error (command, _("--model is required"));
  if (tokens < 1 || tokens > DC_INFER_MAX_TOKENS)
    return dc_cli_usage_error (command, _("--tokens must be 1–%d"), DC_INFER_MAX_TOKENS);
  if (context_length < DC_INFER_MIN_CONTEXT)
    return dc_cli_usage_error (command, _("--context must be at least %d"),
                               DC_INFER_MIN_CONTEXT);
  if (temperature < 0 || temperature > DC_SAMPLER_MAX_TEMPERATURE)
    return dc_cli_usage_error (command, _("--temperature must be 0–%d (hundredths)"),
                               DC_SAMPLER_MAX_TEMPERATURE);
  if (seed < 0)
    return dc_cli_usage_error (command, _("--seed must not be negative"));
  dc_infer_settings_init_default (&settings);
  if (output == NULL || g_str_equal (output, "free"))
    settings.output = DC_INFER_OUTPUT_FREE;
  else if (g_str_equal (output, "json"))
    settings.output = DC_INFER_OUTPUT_JSON;
  else
    return dc_cli_usage_error (command, _("--output takes free or json"));
  if (score != NULL && (score_ids = parse_ids (score)) == NULL)
    return dc_cli_usage_error (command, _("--score takes 1–%d comma-separated token ids"),
                               SCORE_MAX_IDS);
  if (score != NULL && prompt != NULL)
    return dc_cli_usage_error (command, _("--score and --prompt do not go together"));
  if (prompt != NULL && strlen (prompt) > DC_INFER_MAX_PROMPT_BYTES)
    return dc_cli_usage_error (command, _("--prompt is larger than %u KiB"),
                               DC_INFER_MAX_PROMPT_BYTES / 1024);
  if (backend != NULL && !dc_backend_kind_from_string (backend, &kind))
    return dc_cli_usage_error (command, _("unknown backend “%s” (cpu, cpu-scalar, vulkan)"),
                               backend);
  settings.n_tokens = (guint) tokens;
  settings.context = (guint) context_length;
  settings.temperature = (guint) temperature;
  settings.seed = (guint64) seed;

  /* The prompt is read before the model loads: a script piping it learns of
   * a bad prompt at once. */
  if (score == NULL && prompt == NULL && (prompt = read_stdin (&error)) == NULL)
    return dc_cli_fail (options, error);

  context = dc_context_new (kind, &error);
  if (context == NULL)
    return dc_cli_fail (options, error);
  dc_cli_hub_token_attach (dc_context_get_hf_client (context), token_file);
  repo = dc_model_repo_open (dc_context_get_hf_client (context), model, NULL, &error);
  if (repo == NULL)
    return dc_cli_fail (options, error);
  session = dc_infer_session_new (context, repo);
  if (!dc_infer_settings_validate (&settings, dc_infer_session_get_max_context (session),
                                   &error))
    return dc_cli_fail (options, error);

  loop = g_main_loop_new (NULL, FALSE);
  state.loop = loop;
  state.options = options;
  state.last_percent = -10;
  state.ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  state.text = g_string_new (NULL);
  g_signal_connect (session, "load-progress", G_CALLBACK (load_progress_cb), &state);
  g_signal_connect (session, "started", G_CALLBACK (started_cb), &state);
  g_signal_connect (session, "token", G_CALLBACK (token_cb), &state);
  g_signal_connect (session, "finished", G_CALLBACK (finished_cb), &state);

  dc_infer_session_load_async (session, NULL, load_done_cb, &state);
  g_main_loop_run (loop);
  if (!state.loaded)
    {
      status = dc_cli_fail (options, state.error);
      goto out;
    }

  if (score_ids != NULL)
    {
      status = print_scores (session, options, score_ids);
      goto out;
    }

  sigint_id = g_unix_signal_add (SIGINT, sigint_cb, session);
  state.prompt_id = dc_infer_session_submit (session, prompt, &settings);
  while (!state.finished)
    g_main_loop_run (loop);
  g_source_remove (sigint_id);
  if (state.error != NULL)
    {
      if (!options->json)
        g_print ("\n");
      status = dc_cli_fail (options, state.error);
      goto out;
    }

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "ids");
      json_builder_begin_array (builder);
      for (guint i = 0; i < state.ids->len; i++)
        json_builder_add_int_value (builder, g_array_index (state.ids, guint32, i));
      json_builder_end_array (builder);
      json_builder_set_member_name (builder, "text");
      json_builder_add_string_value (builder, state.text->str);
      json_builder_set_member_name (builder, "tokens_per_s");
      json_builder_add_double_value (builder, state.tokens_per_s);
      json_builder_set_member_name (builder, "prompt_tokens");
      json_builder_add_int_value (builder, state.n_prompt_tokens);
      json_builder_set_member_name (builder, "stopped");
      json_builder_add_boolean_value (builder, state.stopped);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("\n");
      g_printerr ("daisychain-cli: %u tokens after a prompt of %u, %.1f tokens/s%s\n",
                  state.ids->len, state.n_prompt_tokens, state.tokens_per_s,
                  state.stopped ? " (stopped)" : "");
    }
  status = DC_CLI_EXIT_OK;

out:
  g_signal_handlers_disconnect_by_data (session, &state);
  g_clear_error (&state.error);
  g_array_unref (state.ids);
  g_string_free (state.text, TRUE);
  return status;
}
