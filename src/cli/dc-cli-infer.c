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
#include "dc-cli-answers.h"
#include "dc-cli-hub-token.h"
#include "dc-context.h"
#include "dc-regular-file.h"
#include "infer/dc-infer-ring.h"
#include "infer/dc-infer-session.h"
#include "infer/dc-ring-server.h"
#include "infer/dc-sampler.h"
#include "mesh/dc-room.h"
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
  guint        draft[2];   /* tokens proposed and accepted in draft spans */
} InferState;

/* "draft": a span of the running prompt ended; ACCEPTED forward passes saved. */
static void
draft_cb (DcInferSession *session,
          guint           prompt_id,
          guint           proposed,
          guint           accepted,
          guint          *counts)   /* [proposed, accepted] */
{
  counts[0] += proposed;
  counts[1] += accepted;
}

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


/* ---- the ring: this device as the head of a group's ring --------------- */

/* The ring's options, beside the single-device ones. */
typedef struct
{
  char     *room;
  char     *signal_url;
  char     *name;
  char     *approve;
  char     *probe_hash;
  char     *test_fault;
  GStrv     ice_addresses;
  int       min_peers;
  double    memory_mb;
  gboolean  verify;
  gboolean  test_lie;
  gboolean  test_lie_files;
} RingArgs;

static void
ring_args_clear (RingArgs *args)
{
  g_free (args->room);
  g_free (args->signal_url);
  g_free (args->name);
  g_free (args->approve);
  g_free (args->probe_hash);
  g_free (args->test_fault);
  g_strfreev (args->ice_addresses);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (RingArgs, ring_args_clear)

typedef struct
{
  DcCliOptions  *options;
  GMainLoop     *loop;
  DcGroup       *group;
  DcInferRing   *ring;
  DcCliAnswers   answers;
  guint          need_offers;
  gboolean       waiting_offers;
  gboolean       joined;
  GError        *error;
  gboolean       prepared;
  gboolean       done;
  /* The generation. */
  guint          prompt_id;
  guint          n_prompt_tokens;
  guint          index;        /* tokens of this attempt so far */
  GArray        *ids;          /* guint32: tokens shown (across a replay) */
  GString       *text;
  gboolean       stopped;
  double         tokens_per_s;
  char          *failure;
  guint          draft[2];     /* tokens proposed and accepted in draft spans */
} RingState;

static void
print_pairs (DcCliOptions *options,
             const char   *event,
             ...) G_GNUC_NULL_TERMINATED;

/* JSON: {"event": EVENT, KEY: VALUE, …} with string values; text: "EVENT: VALUE …". */
static void
print_pairs (DcCliOptions *options,
             const char   *event,
             ...)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(GString) line = g_string_new (event);
  const char *key;
  va_list args;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "event");
  json_builder_add_string_value (builder, event);
  va_start (args, event);
  while ((key = va_arg (args, const char *)) != NULL)
    {
      const char *value = va_arg (args, const char *);

      json_builder_set_member_name (builder, key);
      json_builder_add_string_value (builder, value != NULL ? value : "");
      g_string_append_printf (line, "%s%s", line->len == strlen (event) ? ": " : " ",
                              value != NULL ? value : "");
    }
  va_end (args);
  json_builder_end_object (builder);
  if (options->json)
    dc_cli_print_json (builder);
  else
    g_printerr ("daisychain-cli: %s\n", line->str);
}

static void
add_plan (JsonBuilder *builder,
          DcInferRing *ring)
{
  const DcRingPlan *plan = dc_infer_ring_get_plan (ring);

  json_builder_begin_array (builder);
  for (guint i = 0; plan != NULL && i < dc_ring_plan_get_n_stages (plan); i++)
    {
      const DcRingStage *s = dc_ring_plan_get_stage (plan, i);

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "name");
      json_builder_add_string_value (builder, dc_infer_ring_get_stage_name (ring, i));
      json_builder_set_member_name (builder, "layers");
      json_builder_begin_array (builder);
      if (s->last > s->first)
        {
          json_builder_add_int_value (builder, s->first);
          json_builder_add_int_value (builder, s->last - 1);
        }
      json_builder_end_array (builder);
      json_builder_set_member_name (builder, "mb");
      json_builder_add_double_value (builder, s->download_bytes / 1e6);
      json_builder_set_member_name (builder, "hold_mb");
      json_builder_add_double_value (builder, s->hold_bytes / 1e6);
      json_builder_set_member_name (builder, "ms_per_token");
      json_builder_add_double_value (builder, s->ms_per_token);
      json_builder_set_member_name (builder, "head");
      json_builder_add_boolean_value (builder, s->ends);
      /* Weight bytes this device sent the stage from its model cache. */
      json_builder_set_member_name (builder, "served_bytes");
      json_builder_add_int_value (builder, (gint64) dc_infer_ring_get_stage_served (ring, i));
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
}

static void
print_plan (RingState *state)
{
  const DcRingPlan *plan = dc_infer_ring_get_plan (state->ring);

  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "plan");
      json_builder_set_member_name (builder, "plan");
      add_plan (builder, state->ring);
      json_builder_set_member_name (builder, "lap_ms");
      json_builder_add_double_value (builder, plan->lap_ms);
      json_builder_set_member_name (builder, "hop_ms");
      json_builder_add_double_value (builder, plan->hop_ms);
      json_builder_set_member_name (builder, "hop_measured");
      json_builder_add_boolean_value (builder, dc_infer_ring_get_hop_ms (state->ring) >= 0.0);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
      return;
    }
  for (guint i = 0; i < dc_ring_plan_get_n_stages (plan); i++)
    {
      const DcRingStage *s = dc_ring_plan_get_stage (plan, i);

      if (s->last > s->first)
        /* Translators: a device's share of the ring: its name, its layers, the MB it
         * downloads and holds, its estimated compute per token. */
        g_printerr (_("daisychain-cli: plan: “%s” layers %u–%u%s, %.1f MB to download, "
                      "%.1f MB held, %.1f ms per token\n"),
                    dc_infer_ring_get_stage_name (state->ring, i), s->first, s->last - 1,
                    s->ends ? _(" and the embedding and head") : "", s->download_bytes / 1e6,
                    s->hold_bytes / 1e6, s->ms_per_token);
      else
        g_printerr (_("daisychain-cli: plan: “%s” the embedding and head, %.1f MB to "
                      "download, %.1f MB held, %.1f ms per token\n"),
                    dc_infer_ring_get_stage_name (state->ring, i), s->download_bytes / 1e6,
                    s->hold_bytes / 1e6, s->ms_per_token);
    }
  g_printerr (_("daisychain-cli: lap estimate: %.1f ms per token over %u devices\n"),
              plan->lap_ms, dc_ring_plan_get_n_stages (plan));
  if (dc_ring_plan_get_n_stages (plan) > 1)
    g_printerr (dc_infer_ring_get_hop_ms (state->ring) >= 0.0
                ? _("daisychain-cli: hop cost: %.2f ms, half the median measured round trip\n")
                : _("daisychain-cli: hop cost: %.2f ms assumed (no round trip measured yet)\n"),
                plan->hop_ms);
}

static void
ring_event_cb (DcInferRing *ring,
               const char  *kind,
               const char  *detail,
               guint64      value,
               RingState   *state)
{
  g_autofree char *number = g_strdup_printf ("%" G_GUINT64_FORMAT, value);

  if (g_str_equal (kind, "offer"))
    print_pairs (state->options, "offer", "peer", detail, "memory", number, NULL);
  else if (g_str_equal (kind, "stage-ready"))
    print_pairs (state->options, "stage-ready", "peer", detail, "downloaded", number, NULL);
  else if (g_str_equal (kind, "excluded") || g_str_equal (kind, "refused") ||
           g_str_equal (kind, "peer-left"))
    print_pairs (state->options, g_str_equal (kind, "peer-left") ? "ring-peer-left" : kind,
                 "message", detail, NULL);
  /* Every device's round trips are in before the plan (a few ms after its offer). */
  if (state->waiting_offers && dc_infer_ring_get_n_offers (ring) >= state->need_offers &&
      dc_infer_ring_get_n_measured (ring) >= state->need_offers)
    g_main_loop_quit (state->loop);
}

static void
ring_group_event_cb (DcGroup    *group,
                     const char *event,
                     const char *peer,
                     guint       n_peers,
                     const char *reason,
                     RingState  *state)
{
  if (g_str_equal (event, "joined"))
    state->joined = TRUE;
  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, event);
      if (peer != NULL)
        {
          json_builder_set_member_name (builder, "peer");
          json_builder_add_string_value (builder, peer);
        }
      json_builder_set_member_name (builder, "peers");
      json_builder_add_int_value (builder, n_peers);
      if (reason != NULL)
        {
          json_builder_set_member_name (builder, "reason");
          json_builder_add_string_value (builder, reason);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
}

static void
ring_group_failed_cb (DcGroup      *group,
                      const GError *error,
                      RingState    *state)
{
  if (state->error == NULL)
    state->error = g_error_copy (error);
  state->done = TRUE;
  g_main_loop_quit (state->loop);
}

static void
ring_approval_cb (DcGroup    *group,
                  const char *id,
                  const char *name,
                  const char *fingerprint,
                  const char *address,
                  const char *via,
                  RingState  *state)
{
  print_pairs (state->options, "request-details", "peer", name, "fingerprint", fingerprint,
               "address", address, NULL);
  if (!state->options->json)
    g_print (_("Type accept or decline: "));
  fflush (stdout);
  dc_cli_answers_ask (&state->answers, id);
}

static void
ring_prepared_cb (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  RingState *state = user_data;

  state->prepared = dc_infer_ring_prepare_finish (DC_INFER_RING (source), result,
                                                  &state->error);
  g_main_loop_quit (state->loop);
}

static void
ring_started_cb (DcInferSession *session,
                 guint           prompt_id,
                 guint           n_prompt_tokens,
                 RingState      *state)
{
  state->n_prompt_tokens = n_prompt_tokens;
  state->index = 0;
}

static void
ring_token_cb (DcInferSession *session,
               guint           prompt_id,
               guint           token_id,
               const char     *text,
               double          tokens_per_s,
               RingState      *state)
{
  guint index = state->index++;

  /* A replay makes the shown tokens again: the same ids, not shown twice. */
  if (index < state->ids->len)
    {
      if (g_array_index (state->ids, guint32, index) != token_id && state->failure == NULL)
        {
          state->failure = g_strdup_printf ("the replay made token %u where the first attempt "
                                            "made %u, at token %u", token_id,
                                            g_array_index (state->ids, guint32, index), index);
          dc_infer_session_stop (session);
        }
      return;
    }
  g_array_append_val (state->ids, token_id);
  g_string_append (state->text, text);
  if (state->options->json)
    {
      g_autofree char *id = g_strdup_printf ("%u", token_id);

      print_pairs (state->options, "token", "id", id, "text", text, NULL);
    }
  else
    {
      fputs (text, stdout);
      fflush (stdout);
    }
}

static void
ring_finished_cb (DcInferSession *session,
                  guint           prompt_id,
                  gboolean        stopped,
                  const char     *error_message,
                  double          tokens_per_s,
                  RingState      *state)
{
  if (prompt_id != state->prompt_id)
    return;
  state->stopped = stopped;
  state->tokens_per_s = tokens_per_s;
  if (error_message != NULL && state->failure == NULL)
    state->failure = g_strdup (error_message);
  state->done = TRUE;
  g_main_loop_quit (state->loop);
}

static gboolean
ring_sigint_cb (gpointer user_data)
{
  RingState *state = user_data;
  DcInferSession *session = state->ring != NULL ? dc_infer_ring_get_session (state->ring) : NULL;

  if (session != NULL)
    dc_infer_session_stop (session);
  else
    {
      state->done = TRUE;
      if (state->error == NULL)
        state->error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED, "interrupted");
      g_main_loop_quit (state->loop);
    }
  return G_SOURCE_CONTINUE;
}

/* Plans and loads the ring, then runs PROMPT through it; FALSE with
 * state->error or state->failure set when it failed. */
static gboolean
ring_generate (RingState             *state,
               const char            *prompt,
               const DcInferSettings *settings)
{
  DcInferSession *session;

  state->prepared = FALSE;
  dc_infer_ring_prepare_async (state->ring, settings->context, NULL, ring_prepared_cb, state);
  g_main_loop_run (state->loop);
  if (!state->prepared)
    return FALSE;
  print_plan (state);
  session = dc_infer_ring_get_session (state->ring);
  g_signal_connect (session, "started", G_CALLBACK (ring_started_cb), state);
  g_signal_connect (session, "token", G_CALLBACK (ring_token_cb), state);
  g_signal_connect (session, "finished", G_CALLBACK (ring_finished_cb), state);
  g_signal_connect (session, "draft", G_CALLBACK (draft_cb), state->draft);
  state->done = FALSE;
  state->prompt_id = dc_infer_session_submit (session, prompt, settings);
  while (!state->done)
    g_main_loop_run (state->loop);
  g_signal_handlers_disconnect_by_data (session, state);
  g_signal_handlers_disconnect_by_data (session, state->draft);
  return state->failure == NULL;
}

typedef struct
{
  GMainLoop *loop;
  gboolean   loaded;
  GError    *error;
  guint      prompt_id;
  gboolean   done;
  GArray    *ids;
  char      *failure;
} VerifyState;

static void
verify_loaded_cb (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  VerifyState *v = user_data;

  v->loaded = dc_infer_session_load_finish (DC_INFER_SESSION (source), result, &v->error);
  g_main_loop_quit (v->loop);
}

static void
verify_token_cb (DcInferSession *session,
                 guint           prompt_id,
                 guint           token_id,
                 const char     *text,
                 double          tokens_per_s,
                 VerifyState    *v)
{
  g_array_append_val (v->ids, token_id);
}

static void
verify_finished_cb (DcInferSession *session,
                    guint           prompt_id,
                    gboolean        stopped,
                    const char     *error_message,
                    double          tokens_per_s,
                    VerifyState    *v)
{
  v->failure = g_strdup (error_message);
  v->done = TRUE;
  g_main_loop_quit (v->loop);
}

/* Runs PROMPT again with every layer here; the message, and whether the
 * ids were identical, in *VERIFIED. */
static char *
ring_verify (DcContext             *context,
             DcModelRepo           *repo,
             const char            *prompt,
             const DcInferSettings *settings,
             GArray                *ring_ids,
             gboolean              *verified,
             GError               **error)
{
  g_autoptr(DcInferSession) session = dc_infer_session_new (context, repo);
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  VerifyState v = { loop, FALSE, NULL, 0, FALSE, ids, NULL };

  *verified = FALSE;
  dc_infer_session_load_async (session, NULL, verify_loaded_cb, &v);
  g_main_loop_run (loop);
  if (!v.loaded)
    {
      g_propagate_error (error, v.error);
      return NULL;
    }
  g_signal_connect (session, "token", G_CALLBACK (verify_token_cb), &v);
  g_signal_connect (session, "finished", G_CALLBACK (verify_finished_cb), &v);
  v.prompt_id = dc_infer_session_submit (session, prompt, settings);
  while (!v.done)
    g_main_loop_run (loop);
  g_signal_handlers_disconnect_by_data (session, &v);
  if (v.failure != NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the single-device run for Verify failed: %s", v.failure);
      g_free (v.failure);
      return NULL;
    }
  return dc_infer_ring_compare_ids (ring_ids, ids, verified);
}

static int
ring_run (DcCliOptions          *options,
          DcContext             *context,
          DcModelRepo           *repo,
          const char            *prompt,
          const DcInferSettings *settings,
          RingArgs              *args)
{
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcInferRing) ring = NULL;
  g_autoptr(GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autofree char *room = g_strdup (args->room);
  g_autofree char *verify_message = NULL;
  gboolean verified = FALSE, replayed = FALSE;
  RingState state = { 0 };
  guint sigint, sigterm;
  int status;

  if (!dc_mesh_check_plugins (&state.error))
    return dc_cli_fail (options, state.error);
  config.create = TRUE;
  if (args->approve == NULL || g_str_equal (args->approve, "ask"))
    config.approve = DC_MESH_APPROVE_ASK;
  else
    config.approve = g_str_equal (args->approve, "all") ? DC_MESH_APPROVE_ALL
                                                        : DC_MESH_APPROVE_NONE;
  config.hello = dc_context_new_hello (context, args->name != NULL ? args->name
                                                                   : g_get_host_name ());
  if (args->probe_hash != NULL)
    {
      g_free (config.hello->probe_hash);
      config.hello->probe_hash = g_strdup (args->probe_hash);
    }
  config.peer.ice_addresses = g_strdupv (args->ice_addresses);
  group = dc_group_new (&config);
  ring = dc_infer_ring_new (context, group, repo, config.hello->probe_hash,
                            (guint64) (args->memory_mb * 1e6));
  if (args->test_fault != NULL)
    _dc_infer_ring_set_test_fault (ring, args->test_fault);
  _dc_infer_ring_set_test_lie (ring, args->test_lie);
  _dc_infer_ring_set_test_lie_files (ring, args->test_lie_files);

  if (room == NULL)
    {
      room = dc_room_generate_code ();
      print_pairs (options, "room", "room", room, NULL);
    }
  state.options = options;
  state.loop = loop;
  state.group = group;
  state.ring = ring;
  state.need_offers = (guint) args->min_peers - 1;
  state.ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  state.text = g_string_new (NULL);
  dc_cli_answers_init (&state.answers, group);
  g_signal_connect (group, "event", G_CALLBACK (ring_group_event_cb), &state);
  g_signal_connect (group, "failed", G_CALLBACK (ring_group_failed_cb), &state);
  g_signal_connect (group, "approval-requested", G_CALLBACK (ring_approval_cb), &state);
  g_signal_connect (ring, "event", G_CALLBACK (ring_event_cb), &state);
  sigint = g_unix_signal_add (SIGINT, ring_sigint_cb, &state);
  sigterm = g_unix_signal_add (SIGTERM, ring_sigint_cb, &state);

  if (!dc_group_join_room (group, args->signal_url, room, &state.error))
    goto out;
  /* Wait for K devices, this one included, that offer layers. */
  if ((dc_infer_ring_get_n_offers (ring) < state.need_offers ||
       dc_infer_ring_get_n_measured (ring) < state.need_offers) && state.error == NULL)
    {
      state.waiting_offers = TRUE;
      g_main_loop_run (loop);
      state.waiting_offers = FALSE;
    }
  if (state.error != NULL)
    goto out;

  if (!ring_generate (&state, prompt, settings) && state.error == NULL &&
      dc_infer_ring_lost_peer (ring))
    {
      /* One replay on the devices that are left (the first message said who went). */
      print_pairs (options, "replay", "message", state.failure, NULL);
      g_clear_pointer (&state.failure, g_free);
      replayed = TRUE;
      ring_generate (&state, prompt, settings);
    }
  if (state.error == NULL && state.failure != NULL)
    state.error = g_error_new (DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID, "%s%s", state.failure,
                               replayed ? " (after one replay; run it again)" : "");
  if (state.error == NULL && args->verify)
    {
      verify_message = ring_verify (context, repo, prompt, settings, state.ids, &verified,
                                    &state.error);
      if (verify_message != NULL)
        print_pairs (options, "verify", "message", verify_message, NULL);
    }

out:
  dc_infer_ring_close (ring);
  g_source_remove (sigint);
  g_source_remove (sigterm);
  if (state.error != NULL)
    {
      if (!options->json)
        g_print ("\n");
      status = dc_cli_fail (options, state.error);
    }
  else if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "result");
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
      json_builder_set_member_name (builder, "plan");
      add_plan (builder, ring);
      json_builder_set_member_name (builder, "replayed");
      json_builder_add_boolean_value (builder, replayed);
      json_builder_set_member_name (builder, "draft_proposed");
      json_builder_add_int_value (builder, state.draft[0]);
      json_builder_set_member_name (builder, "draft_accepted");
      json_builder_add_int_value (builder, state.draft[1]);
      if (args->verify)
        {
          json_builder_set_member_name (builder, "verified");
          json_builder_add_boolean_value (builder, verified);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
      status = verified || !args->verify ? DC_CLI_EXIT_OK : DC_CLI_EXIT_FAILED;
    }
  else
    {
      g_print ("\n");
      g_printerr ("daisychain-cli: %u tokens after a prompt of %u, %.1f tokens/s%s\n",
                  state.ids->len, state.n_prompt_tokens, state.tokens_per_s,
                  state.stopped ? " (stopped)" : "");
      if (verify_message != NULL)
        g_printerr ("daisychain-cli: %s\n", verify_message);
      status = verified || !args->verify ? DC_CLI_EXIT_OK : DC_CLI_EXIT_FAILED;
    }
  /* The close and the byes leave before the process ends. */
  dc_group_leave (group);
  {
    g_autoptr(GMainContext) main_context = g_main_context_ref_thread_default ();
    gint64 until = g_get_monotonic_time () + DC_GROUP_LEAVE_GRACE_MS * 1000;

    while (g_get_monotonic_time () < until)
      g_main_context_iteration (main_context, FALSE) || (g_usleep (5000), TRUE);
  }
  g_signal_handlers_disconnect_by_data (group, &state);
  g_signal_handlers_disconnect_by_data (ring, &state);
  dc_cli_answers_clear (&state.answers);
  g_clear_error (&state.error);
  g_free (state.failure);
  g_array_unref (state.ids);
  g_string_free (state.text, TRUE);
  return status;
}

int
dc_cli_infer_run (const DcCliCommand  *command,
                  DcCliOptions        *options,
                  int                  argc,
                  char               **argv)
{
  g_autofree char *model = NULL, *prompt = NULL, *output = NULL, *score = NULL;
  g_autofree char *backend = NULL, *token_file = NULL, *vulkan_device = NULL;
  int tokens = 60, context_length = 64, temperature = 0, draft_span = 0;
  gint64 seed = 1234;
  g_auto(RingArgs) ring = { 0 };
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
    { "draft-span", 0, 0, G_OPTION_ARG_INT, &draft_span,
      N_("Score up to N tokens that continue a repeated suffix in one forward pass (0: off)"),
      "N" },
    { "output", 0, 0, G_OPTION_ARG_STRING, &output,
      N_("free (default) or json: the completion is valid JSON"), "free|json" },
    { "score", 0, 0, G_OPTION_ARG_STRING, &score,
      N_("Instead of generating: each position's top-10 ids and logits for these ids"), "IDS" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
      N_("cpu (default), cpu-scalar or vulkan"), "B" },
    { "vulkan-device", 0, 0, G_OPTION_ARG_STRING, &vulkan_device,
      N_("The Vulkan device, by the id “daisychain-cli info” shows (implies --backend vulkan; "
         "default: the best device)"), "ID" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("Read a Hugging Face token from FILE if the Hub asks for one (else $HF_TOKEN)"),
      "FILE" },
    { "room", 0, 0, G_OPTION_ARG_STRING, &ring.room,
      N_("Run as the head of a ring of the group in this room (default with --signal: "
         "generate a code)"), "CODE" },
    { "signal", 0, 0, G_OPTION_ARG_STRING, &ring.signal_url,
      N_("Signaling service URL of the ring's room (ws:// or wss://…/signal)"), "URL" },
    { "min-peers", 0, 0, G_OPTION_ARG_INT, &ring.min_peers,
      N_("Wait for this many devices offering layers, this one included (1)"), "K" },
    { "ice-address", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ring.ice_addresses,
      N_("Use only this local address for ICE (repeatable)"), "ADDRESS" },
    { "name", 0, 0, G_OPTION_ARG_STRING, &ring.name,
      N_("This device's name in the group (default: host name)"), "NAME" },
    { "approve", 0, 0, G_OPTION_ARG_STRING, &ring.approve,
      N_("As the room's host: admit all, none, or ask on stdin (default: ask)"), "all|none|ask" },
    { "memory-mb", 0, 0, G_OPTION_ARG_DOUBLE, &ring.memory_mb,
      N_("Memory this device holds for the ring (default: half of what is installed)"), "MB" },
    { "verify", 0, 0, G_OPTION_ARG_NONE, &ring.verify,
      N_("After a ring run, run the prompt again with every layer here and compare ids"),
      NULL },
    { "test-probe-hash", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &ring.probe_hash,
      N_("Test: claim this kernel probe hash"), "HEX" },
    { "test-hop-fault", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &ring.test_fault,
      N_("Test: the first hop carries a NaN (nan) or another model's id (model)"), "nan|model" },
    { "test-serve-lie", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &ring.test_lie,
      N_("Test: weight bytes sent to the stages do not match their sha256"), NULL },
    { "test-serve-lie-files", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &ring.test_lie_files,
      N_("Test: model files sent to the stages do not match their sha256"), NULL },
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

  ring.min_peers = 1;
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
  if (draft_span < 0 || draft_span > DC_INFER_MAX_DRAFT_SPAN)
    return dc_cli_usage_error (command, _("--draft-span must be 0–%d"), DC_INFER_MAX_DRAFT_SPAN);
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
  if (vulkan_device != NULL && backend == NULL)
    kind = DC_BACKEND_VULKAN;
  else if (vulkan_device != NULL && kind != DC_BACKEND_VULKAN)
    return dc_cli_usage_error (command, _("--vulkan-device needs --backend vulkan"));
  if ((ring.room != NULL || ring.min_peers != 1 || ring.verify) && ring.signal_url == NULL)
    return dc_cli_usage_error (command, _("--room, --min-peers and --verify need --signal"));
  if (ring.signal_url != NULL && score != NULL)
    return dc_cli_usage_error (command, _("--score runs on this device only; leave out --signal"));
  if (ring.min_peers < 1 || ring.min_peers > DC_RING_PLAN_MAX_DEVICES)
    return dc_cli_usage_error (command, _("--min-peers must be 1–%d"), DC_RING_PLAN_MAX_DEVICES);
  if (ring.memory_mb < 0 || ring.memory_mb > 1e9)
    return dc_cli_usage_error (command, _("--memory-mb must be a positive number"));
  if (ring.approve != NULL && !g_str_equal (ring.approve, "all")
      && !g_str_equal (ring.approve, "none") && !g_str_equal (ring.approve, "ask"))
    return dc_cli_usage_error (command, _("--approve takes all, none or ask"));
  if (ring.signal_url != NULL && prompt == NULL
      && (ring.approve == NULL || g_str_equal (ring.approve, "ask")))
    return dc_cli_usage_error (command, _("--approve ask reads standard input: give the prompt "
                                          "with --prompt"));
  if (ring.name != NULL && !g_utf8_validate (ring.name, -1, NULL))
    return dc_cli_usage_error (command, _("--name must be UTF-8 text"));
  settings.n_tokens = (guint) tokens;
  settings.context = (guint) context_length;
  settings.temperature = (guint) temperature;
  settings.seed = (guint64) seed;
  settings.draft_span = (guint) draft_span;

  /* The prompt is read before the model loads: a script piping it learns of
   * a bad prompt at once. */
  if (score == NULL && prompt == NULL && (prompt = read_stdin (&error)) == NULL)
    return dc_cli_fail (options, error);

  context = dc_context_new_for_device (kind, vulkan_device, &error);
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

  if (ring.signal_url != NULL)
    {
      status = ring_run (options, context, repo, prompt, &settings, &ring);
      goto ring_out;
    }

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
  g_signal_connect (session, "draft", G_CALLBACK (draft_cb), state.draft);

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
      json_builder_set_member_name (builder, "draft_proposed");
      json_builder_add_int_value (builder, state.draft[0]);
      json_builder_set_member_name (builder, "draft_accepted");
      json_builder_add_int_value (builder, state.draft[1]);
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
ring_out:
  return status;
}
