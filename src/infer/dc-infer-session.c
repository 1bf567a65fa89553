/* dc-infer-session.c: loading, the prompt queue and generation (see the header).
 *
 * Threads: the session lives on its creator's thread. One generation thread
 * per session takes prompts from the queue; a GTask thread loads the
 * weights. Both talk to the creator only through Shared: a mutex-guarded
 * queue of events drained by one idle GSource attached to the creator's
 * main context, so signals come in order and on that thread. The threads
 * hold Shared, never the session (a GWeakRef finds it when events are
 * delivered), so the last unref is always on the creator's thread, and
 * dispose, which joins the generation thread, never runs on it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-infer-session.h"
#include "dc-infer-session-private.h"

#include <string.h>

#include "dc-json-constraint.h"
#include "dc-sampler.h"
#include "model/dc-hf-model.h"
#include "model/dc-model-error.h"

/* Prompt tokens read per forward call: a Stop waits at most one chunk, and a
 * chunk costs about what one decoded token does on a CPU. */
#define PREFILL_CHUNK 16
/* A draft span is the continuation of the latest earlier occurrence of the
 * text's longest repeated suffix of 2 to 8 tokens: one token repeats by
 * chance too often to predict anything, and past 8 the match is as good. */
#define DRAFT_MATCH_MIN 2
#define DRAFT_MATCH_MAX 8

typedef struct
{
  guint            id;
  DcInferSettings  settings;
  GArray          *ids;         /* guint32: the prompt's tokens */
  int              stop;        /* atomic */
} Turn;

typedef enum
{
  EVENT_STARTED,
  EVENT_TOKEN,
  EVENT_FINISHED,
  EVENT_DRAFT,
} EventKind;

typedef struct
{
  EventKind  kind;
  guint      prompt_id;
  guint      value;       /* STARTED: prompt tokens; TOKEN: the id; DRAFT: proposed */
  guint      value2;      /* DRAFT: accepted */
  char      *text;        /* TOKEN: the text; FINISHED: the error or NULL */
  gboolean   stopped;
  double     tokens_per_s;
} Event;

typedef struct
{
  gint               ref_count;
  GMutex             lock;
  GCond              cond;
  GMainContext      *context;     /* the creator's */
  GWeakRef           session;

  /* Set before the generation thread starts, then read-only. */
  DcBpeTokenizer    *tokenizer;   /* borrowed from the repo, or owned_tokenizer */
  DcBpeTokenizer    *owned_tokenizer;
  DcModelRepo       *repo;        /* keeps the tokenizer alive */
  DcGemmBackend     *backend;     /* borrowed from the context (held by the session) */
  const DcHfConfig  *config;
  guint              vocab_size;
  guint              max_positions;
  gint64             eos_id;       /* the first: what the JSON constraint ends with */
  gint64             eos_ids[DC_HF_MAX_EOS_IDS];  /* any of them ends a turn */
  guint              n_eos_ids;
  gint64             bos_id;
  gboolean           fake;
  DcInferFakeModel   fake_model;
  gboolean           fake_loaded;   /* under lock */
  gboolean           prefill_without_logits;  /* the forward takes NULL logits mid-prompt */
  DcInferForwardFunc forward_rows;  /* NULL: a span is scored a position at a time */

  /* Under lock. */
  DcHfModel         *model;
  gboolean           loading;
  gboolean           shutdown;
  GQueue             waiting;     /* Turn* */
  Turn              *running;
  GQueue             events;      /* Event* */
  GSource           *event_source;
  gboolean           progress_pending;
  guint64            progress_done;
  guint64            progress_total;

  /* Generation thread only. */
  DcHfKvCache       *cache;
  guint              cache_context;
  guint8            *base_allowed;  /* ids with a token: the only ones ever drawn */
  DcJsonConstraint  *constraint;
} Shared;

static gboolean
is_eos (const Shared *sh,
        guint32       id)
{
  for (guint i = 0; i < sh->n_eos_ids; i++)
    if ((gint64) id == sh->eos_ids[i])
      return TRUE;
  return FALSE;
}

struct _DcInferSession
{
  GObject      parent_instance;

  /* owned references */
  DcContext   *context;
  Shared      *shared;
  GThread     *worker;

  /* state */
  guint        next_id;
};

G_DEFINE_FINAL_TYPE (DcInferSession, dc_infer_session, G_TYPE_OBJECT)

enum
{
  SIGNAL_LOAD_PROGRESS,
  SIGNAL_STARTED,
  SIGNAL_TOKEN,
  SIGNAL_FINISHED,
  SIGNAL_DRAFT,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
turn_free (Turn *turn)
{
  g_clear_pointer (&turn->ids, g_array_unref);
  g_free (turn);
}

static void
event_free (Event *event)
{
  g_free (event->text);
  g_free (event);
}

static Shared *
shared_ref (Shared *sh)
{
  g_atomic_int_inc (&sh->ref_count);
  return sh;
}

static void
shared_unref (Shared *sh)
{
  if (!g_atomic_int_dec_and_test (&sh->ref_count))
    return;
  g_queue_clear_full (&sh->waiting, (GDestroyNotify) turn_free);
  /* A prompt claimed but never started when the session went away. */
  g_clear_pointer (&sh->running, turn_free);
  g_queue_clear_full (&sh->events, (GDestroyNotify) event_free);
  g_clear_pointer (&sh->cache, dc_hf_kv_cache_free);
  g_clear_pointer (&sh->model, dc_hf_model_free);
  g_clear_pointer (&sh->constraint, dc_json_constraint_free);
  g_clear_pointer (&sh->base_allowed, g_free);
  g_clear_pointer (&sh->owned_tokenizer, dc_bpe_tokenizer_free);
  g_clear_object (&sh->repo);
  g_weak_ref_clear (&sh->session);
  g_main_context_unref (sh->context);
  g_mutex_clear (&sh->lock);
  g_cond_clear (&sh->cond);
  g_free (sh);
}

/* ---- events, delivered on the creator's context ---------------------- */

static gboolean
dispatch_events_cb (gpointer user_data)
{
  Shared *sh = user_data;
  g_autoptr(DcInferSession) self = NULL;
  GQueue events = G_QUEUE_INIT;
  gboolean progress;
  guint64 done, total;
  Event *event;

  g_mutex_lock (&sh->lock);
  events = sh->events;
  g_queue_init (&sh->events);
  progress = sh->progress_pending;
  done = sh->progress_done;
  total = sh->progress_total;
  sh->progress_pending = FALSE;
  g_clear_pointer (&sh->event_source, g_source_unref);
  g_mutex_unlock (&sh->lock);

  self = g_weak_ref_get (&sh->session);
  if (self != NULL && progress)
    g_signal_emit (self, signals[SIGNAL_LOAD_PROGRESS], 0, done, total);
  while ((event = g_queue_pop_head (&events)) != NULL)
    {
      if (self != NULL)
        switch (event->kind)
          {
          case EVENT_STARTED:
            g_signal_emit (self, signals[SIGNAL_STARTED], 0, event->prompt_id, event->value);
            break;
          case EVENT_TOKEN:
            g_signal_emit (self, signals[SIGNAL_TOKEN], 0, event->prompt_id, event->value,
                           event->text, event->tokens_per_s);
            break;
          case EVENT_FINISHED:
            g_signal_emit (self, signals[SIGNAL_FINISHED], 0, event->prompt_id,
                           event->stopped, event->text, event->tokens_per_s);
            break;
          case EVENT_DRAFT:
            g_signal_emit (self, signals[SIGNAL_DRAFT], 0, event->prompt_id, event->value,
                           event->value2);
            break;
          }
      event_free (event);
    }
  return G_SOURCE_REMOVE;
}

/* Called with the lock held: one pending source drains everything queued. */
static void
schedule_dispatch_locked (Shared *sh)
{
  if (sh->event_source != NULL)
    return;
  sh->event_source = g_idle_source_new ();
  g_source_set_priority (sh->event_source, G_PRIORITY_DEFAULT);
  g_source_set_callback (sh->event_source, dispatch_events_cb, shared_ref (sh),
                         (GDestroyNotify) shared_unref);
  g_source_set_static_name (sh->event_source, "[dc] infer session events");
  g_source_attach (sh->event_source, sh->context);
}

static void
post_event_locked (Shared    *sh,
                   EventKind  kind,
                   guint      prompt_id,
                   guint      value,
                   char      *text,          /* taken */
                   gboolean   stopped,
                   double     tokens_per_s)
{
  Event *event = g_new0 (Event, 1);

  event->kind = kind;
  event->prompt_id = prompt_id;
  event->value = value;
  event->text = text;
  event->stopped = stopped;
  event->tokens_per_s = tokens_per_s;
  g_queue_push_tail (&sh->events, event);
  schedule_dispatch_locked (sh);
}

static void
post_event (Shared    *sh,
            EventKind  kind,
            guint      prompt_id,
            guint      value,
            char      *text,          /* taken */
            gboolean   stopped,
            double     tokens_per_s)
{
  g_mutex_lock (&sh->lock);
  post_event_locked (sh, kind, prompt_id, value, text, stopped, tokens_per_s);
  g_mutex_unlock (&sh->lock);
}

static void
post_draft (Shared *sh,
            guint   prompt_id,
            guint   proposed,
            guint   accepted)
{
  Event *event = g_new0 (Event, 1);

  event->kind = EVENT_DRAFT;
  event->prompt_id = prompt_id;
  event->value = proposed;
  event->value2 = accepted;
  g_mutex_lock (&sh->lock);
  g_queue_push_tail (&sh->events, event);
  schedule_dispatch_locked (sh);
  g_mutex_unlock (&sh->lock);
}

/* The next waiting prompt becomes the running one as soon as the model is
 * there and nothing runs, decided under the lock by whoever changes those
 * (submit, the load, the end of a turn): so what the creator reads right
 * after submit or after "finished" does not depend on the worker's timing. */
static gboolean
is_loaded_locked (Shared *sh)
{
  return sh->fake ? sh->fake_loaded : sh->model != NULL;
}

static void
claim_next_locked (Shared *sh)
{
  if (sh->running != NULL || sh->shutdown || !is_loaded_locked (sh))
    return;
  sh->running = g_queue_pop_head (&sh->waiting);
  if (sh->running != NULL)
    g_cond_broadcast (&sh->cond);
}

static void
load_progress_cb (guint64  done,
                  guint64  total,
                  gpointer user_data)
{
  Shared *sh = user_data;

  /* Coalesced: the creator sees the latest figures, once per iteration. */
  g_mutex_lock (&sh->lock);
  sh->progress_pending = TRUE;
  sh->progress_done = done;
  sh->progress_total = total;
  schedule_dispatch_locked (sh);
  g_mutex_unlock (&sh->lock);
}

/* ---- text as it is made -------------------------------------------- */

/* Bytes of a character not yet complete; a token may end mid-character. */
typedef struct
{
  guint8 pending[4];
  guint  n_pending;
} Utf8Stream;

#define REPLACEMENT "\xef\xbf\xbd"

static char *
utf8_stream_push (Utf8Stream   *u,
                  const guint8 *bytes,
                  gsize         len)
{
  g_autoptr(GByteArray) buf = g_byte_array_sized_new ((guint) (u->n_pending + len));
  GString *out = g_string_new (NULL);
  gsize i = 0;

  g_byte_array_append (buf, u->pending, u->n_pending);
  g_byte_array_append (buf, bytes, (guint) len);
  u->n_pending = 0;
  while (i < buf->len)
    {
      const char *p = (const char *) buf->data + i;
      gsize left = buf->len - i;
      gunichar c;

      if (*p == '\0')
        {
          /* A NUL would end the text for every C reader. */
          g_string_append (out, REPLACEMENT);
          i++;
          continue;
        }
      c = g_utf8_get_char_validated (p, (gssize) left);
      if (c == (gunichar) -2 && left < 4)
        {
          memcpy (u->pending, p, left);
          u->n_pending = (guint) left;
          break;
        }
      if (c == (gunichar) -1 || c == (gunichar) -2)
        {
          g_string_append (out, REPLACEMENT);
          i++;
          continue;
        }
      g_string_append_len (out, p, g_utf8_skip[*(const guchar *) p]);
      i += g_utf8_skip[*(const guchar *) p];
    }
  return g_string_free (out, FALSE);
}

/* ---- generation ------------------------------------------------------ */

static gboolean
run_forward (Shared         *sh,
             const guint32  *ids,
             gsize           n_ids,
             guint           start,
             float          *logits,
             GError        **error)
{
  if (sh->fake)
    return sh->fake_model.forward (sh->fake_model.user_data, ids, n_ids, start, logits, error);
  if (start == 0)
    dc_hf_kv_cache_reset (sh->cache);
  else
    dc_hf_kv_cache_truncate (sh->cache, start);   /* a draft span's rejected tail */
  return dc_hf_model_forward (sh->model, sh->cache, ids, n_ids, logits, error);
}

/* The logits of every position of IDS (N_IDS × vocab_size floats) into
 * ROWS: a draft span scored in one call (one lap of a ring). The model's
 * part and head give the bits its forward gives for each position. */
static gboolean
run_forward_rows (Shared         *sh,
                  const guint32  *ids,
                  gsize           n_ids,
                  guint           start,
                  float          *rows,
                  GError        **error)
{
  const gsize V = sh->vocab_size;
  g_autofree float *x = NULL;
  gsize C;

  if (sh->fake && sh->forward_rows != NULL)
    return sh->forward_rows (sh->fake_model.user_data, ids, n_ids, start, rows, error);
  if (sh->fake)
    {
      for (gsize i = 0; i < n_ids; i++)
        if (!sh->fake_model.forward (sh->fake_model.user_data, ids + i, 1, start + (guint) i,
                                     rows + i * V, error))
          return FALSE;
      return TRUE;
    }
  if (start == 0)
    dc_hf_kv_cache_reset (sh->cache);
  else
    dc_hf_kv_cache_truncate (sh->cache, start);
  C = dc_hf_model_get_config (sh->model)->hidden_size;
  x = g_new (float, n_ids * C);
  if (!dc_hf_model_forward_part (sh->model, sh->cache, ids, x, n_ids, error))
    return FALSE;
  for (gsize i = 0; i < n_ids; i++)
    if (!dc_hf_model_head (sh->model, x + i * C, rows + i * V, error))
      return FALSE;
  return TRUE;
}

/* A draft: the tokens that followed the latest earlier occurrence of the
 * longest repeated suffix of SEQ (LEN tokens), MAX of them, into DRAFT.
 * Past the end of SEQ the text is taken to go on repeating with the
 * occurrence's period ("a a a" drafts "a a …", not one "a"). Returns how
 * many (0: no suffix repeats). */
static guint
propose_draft (const guint32 *seq,
               guint          len,
               guint          max,
               guint32       *draft)
{
  for (guint m = MIN (DRAFT_MATCH_MAX, len > 0 ? len - 1 : 0); m >= DRAFT_MATCH_MIN; m--)
    for (guint start = len - m; start-- > 0;)
      if (memcmp (seq + start, seq + len - m, m * sizeof (guint32)) == 0)
        {
          const guint period = len - m - start;

          for (guint j = 0; j < max; j++)
            draft[j] = j < period ? seq[start + m + j] : draft[j - period];
          return max;
        }
  return 0;
}

static gboolean
prepare_cache (Shared   *sh,
               guint     context,
               GError  **error)
{
  if (sh->fake || (sh->cache != NULL && sh->cache_context == context))
    return TRUE;
  g_clear_pointer (&sh->cache, dc_hf_kv_cache_free);
  sh->cache = dc_hf_kv_cache_new (sh->model, context, error);
  if (sh->cache == NULL)
    return FALSE;
  sh->cache_context = context;
  return TRUE;
}

static void
ensure_masks (Shared *sh)
{
  if (sh->base_allowed != NULL)
    return;
  sh->base_allowed = g_new0 (guint8, sh->vocab_size);
  for (guint i = 0; i < sh->vocab_size; i++)
    {
      g_autofree guint8 *bytes = NULL;
      gsize len;

      bytes = dc_bpe_tokenizer_dup_token_bytes (sh->tokenizer, i, &len);
      sh->base_allowed[i] = bytes != NULL;
    }
}

static double
rate (gint64 t0,
      guint  n)
{
  gint64 elapsed = g_get_monotonic_time () - t0;

  return elapsed > 0 ? n / (elapsed / (double) G_USEC_PER_SEC) : 0.0;
}

/* Runs TURN; returns its end for "finished": the error (or NULL) in
 * *MESSAGE, whether Stop ended it, and the rate. */
static void
generate (Shared    *sh,
          Turn      *turn,
          char     **message,
          gboolean  *stopped_out,
          double    *rate_out)
{
  const DcInferSettings *s = &turn->settings;
  g_autoptr(GArray) seq = g_array_copy (turn->ids);
  g_autofree float *logits = g_new (float, sh->vocab_size);
  g_autofree float *scratch = g_new (float, sh->vocab_size);
  g_autofree guint8 *allowed = g_new (guint8, sh->vocab_size);
  g_autoptr(GError) error = NULL;
  guint keep = MAX (1, s->context / 2), base = 0, fed = 0, made = 0;
  /* A draft span: DRAFT[0, n_draft) scored in one call after the last
   * token, ROWS its logits; draft_at of them accepted so far (a token drawn
   * from row r that equals DRAFT[r] is already in the cache). */
  guint32 draft[DC_INFER_MAX_DRAFT_SPAN];
  g_autofree float *rows = NULL;
  guint n_draft = 0, draft_at = 0;
  gboolean draft_live = FALSE;
  gboolean stopped = FALSE;
  Utf8Stream utf8 = { { 0 }, 0 };
  gint64 t0 = g_get_monotonic_time ();

  if (!prepare_cache (sh, s->context, &error))
    goto out;
  ensure_masks (sh);
  if (s->output == DC_INFER_OUTPUT_JSON)
    {
      if (sh->constraint == NULL)
        sh->constraint = dc_json_constraint_new_for_tokenizer (sh->tokenizer, sh->vocab_size,
                                                               sh->eos_id);
      dc_json_constraint_reset (sh->constraint);
    }
  if (seq->len > s->context)
    {
      base = seq->len - keep;
      g_message ("prompt %u: %u tokens do not fit the context of %u; the model reads the last %u",
                 turn->id, seq->len, s->context, keep);
    }
  post_event (sh, EVENT_STARTED, turn->id, seq->len - base, NULL, FALSE, 0.0);

  for (guint i = 0; i < s->n_tokens; i++)
    {
      guint32 next;

      if (seq->len - base > s->context)
        {
          base = seq->len - keep;
          fed = 0;
          n_draft = 0;
          draft_live = FALSE;
          g_message ("prompt %u: the context of %u tokens is full; the window moves on "
                     "and the model reads the last %u again", turn->id, s->context, keep);
        }
      if (draft_live)
        {
          /* The token just drawn was the span's next: its logits are ready. */
          fed++;
          memcpy (logits, rows + (gsize) draft_at * sh->vocab_size,
                  sh->vocab_size * sizeof (float));
        }
      else if (s->draft_span > 0 && made > 0 && base + fed + 1 == seq->len &&
               seq->len - base < s->context)
        {
          /* Room for the span in the window and in the tokens still to make. */
          guint max = MIN (MIN (s->draft_span, DC_INFER_MAX_DRAFT_SPAN),
                           MIN (s->context - (seq->len - base), s->n_tokens - i - 1));

          n_draft = max > 0 ? propose_draft (&g_array_index (seq, guint32, base),
                                             seq->len - base, max, draft)
                            : 0;
        }
      if (!draft_live && n_draft > 0)
        {
          guint32 span[DC_INFER_MAX_DRAFT_SPAN + 1];

          if (g_atomic_int_get (&turn->stop))
            {
              stopped = TRUE;
              goto out;
            }
          span[0] = g_array_index (seq, guint32, seq->len - 1);
          memcpy (span + 1, draft, n_draft * sizeof (guint32));
          if (rows == NULL)
            rows = g_new (float, (gsize) (DC_INFER_MAX_DRAFT_SPAN + 1) * sh->vocab_size);
          if (!run_forward_rows (sh, span, n_draft + 1, fed, rows, &error))
            goto out;
          fed++;
          draft_at = 0;
          memcpy (logits, rows, sh->vocab_size * sizeof (float));
        }
      while (base + fed < seq->len)
        {
          guint chunk = MIN (PREFILL_CHUNK, seq->len - base - fed);

          if (g_atomic_int_get (&turn->stop))
            {
              stopped = TRUE;
              goto out;
            }
          /* A ring needs no logits before the prompt's last chunk: it can
           * send the next chunk before the last one came back. */
          if (!run_forward (sh, &g_array_index (seq, guint32, base + fed), chunk, fed,
                            sh->prefill_without_logits && base + fed + chunk < seq->len
                            ? NULL : logits, &error))
            goto out;
          fed += chunk;
        }
      if (g_atomic_int_get (&turn->stop))
        {
          stopped = TRUE;
          goto out;
        }

      if (s->output == DC_INFER_OUTPUT_JSON)
        {
          if (dc_json_constraint_allowed (sh->constraint, s->n_tokens - i, allowed) == 0)
            {
              g_set_error (&error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                           "no token of this model's vocabulary can continue the JSON output");
              goto out;
            }
        }
      else
        memcpy (allowed, sh->base_allowed, sh->vocab_size);
      next = dc_sampler_pick (logits, allowed, sh->vocab_size, s->temperature, s->seed,
                              seq->len, scratch);
      if (next == DC_SAMPLER_NONE)
        {
          g_set_error (&error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "the model gave no finite logit for any token it may write");
          goto out;
        }
      if (n_draft > 0)
        {
          if (draft_at < n_draft && next == draft[draft_at] && !is_eos (sh, next))
            {
              draft_at++;
              draft_live = TRUE;
            }
          else
            {
              /* The span ends here; the cache past the last accepted token
               * is dropped by the next forward (it starts at FED). */
              g_message ("prompt %u: draft span: %u tokens from a repeated suffix scored in "
                         "one lap, %u accepted", turn->id, n_draft, draft_at);
              post_draft (sh, turn->id, n_draft, draft_at);
              n_draft = 0;
              draft_live = FALSE;
            }
        }
      if (is_eos (sh, next))
        break;
      if (s->output == DC_INFER_OUTPUT_JSON)
        dc_json_constraint_accept (sh->constraint, next);
      g_array_append_val (seq, next);
      made++;

      {
        g_autofree guint8 *bytes = NULL;
        gsize len = 0;
        char *text;

        bytes = dc_bpe_tokenizer_dup_token_bytes (sh->tokenizer, next, &len);
        text = utf8_stream_push (&utf8, bytes, len);
        post_event (sh, EVENT_TOKEN, turn->id, next, text, FALSE, rate (t0, made));
      }
    }

out:
  if (n_draft > 0)
    post_draft (sh, turn->id, n_draft, draft_at);
  *message = error != NULL ? g_strdup (error->message) : NULL;
  *stopped_out = stopped;
  *rate_out = rate (t0, made);
}

static gpointer
generation_worker (gpointer data)
{
  Shared *sh = data;

  g_mutex_lock (&sh->lock);
  for (;;)
    {
      Turn *turn;
      char *message;
      gboolean stopped;
      double tokens_per_s;

      while (!sh->shutdown && sh->running == NULL)
        g_cond_wait (&sh->cond, &sh->lock);
      if (sh->shutdown)
        break;
      turn = sh->running;
      g_mutex_unlock (&sh->lock);

      generate (sh, turn, &message, &stopped, &tokens_per_s);

      /* The next prompt is claimed before "finished" is posted: the
       * creator, seeing "finished", reads a queue without it. */
      g_mutex_lock (&sh->lock);
      sh->running = NULL;
      claim_next_locked (sh);
      post_event_locked (sh, EVENT_FINISHED, turn->id, 0, message, stopped, tokens_per_s);
      g_mutex_unlock (&sh->lock);
      turn_free (turn);
      g_mutex_lock (&sh->lock);
    }
  g_mutex_unlock (&sh->lock);
  shared_unref (sh);
  return NULL;
}

/* ---- the object ------------------------------------------------------ */

static void
dc_infer_session_dispose (GObject *object)
{
  DcInferSession *self = DC_INFER_SESSION (object);

  if (self->shared != NULL)
    {
      Shared *sh = self->shared;

      g_mutex_lock (&sh->lock);
      sh->shutdown = TRUE;
      if (sh->running != NULL)
        g_atomic_int_set (&sh->running->stop, 1);
      g_queue_clear_full (&sh->waiting, (GDestroyNotify) turn_free);
      g_cond_broadcast (&sh->cond);
      g_mutex_unlock (&sh->lock);
    }
  /* At most one token's (or chunk's) work away: stop is checked between them. */
  g_clear_pointer (&self->worker, g_thread_join);
  g_clear_pointer (&self->shared, shared_unref);
  g_clear_object (&self->context);

  G_OBJECT_CLASS (dc_infer_session_parent_class)->dispose (object);
}

static void
dc_infer_session_class_init (DcInferSessionClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_infer_session_dispose;

  /**
   * DcInferSession::load-progress:
   * @done: bytes of weights read so far
   * @total: bytes in all
   */
  signals[SIGNAL_LOAD_PROGRESS] =
    g_signal_new ("load-progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT64, G_TYPE_UINT64);
  /**
   * DcInferSession::started:
   * @prompt_id: the id submit returned
   * @n_prompt_tokens: the prompt's tokens the model reads (after the window's cut)
   */
  signals[SIGNAL_STARTED] =
    g_signal_new ("started", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_UINT);
  /**
   * DcInferSession::token:
   * @text: the UTF-8 text this token completes ("" while a character is incomplete)
   * @tokens_per_s: tokens made so far over the time since the prompt started
   */
  signals[SIGNAL_TOKEN] =
    g_signal_new ("token", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 4,
                  G_TYPE_UINT, G_TYPE_UINT, G_TYPE_STRING, G_TYPE_DOUBLE);
  /**
   * DcInferSession::finished:
   * @stopped: Stop ended it
   * @error_message: (nullable): why it failed, or NULL
   */
  signals[SIGNAL_FINISHED] =
    g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 4,
                  G_TYPE_UINT, G_TYPE_BOOLEAN, G_TYPE_STRING, G_TYPE_DOUBLE);
  /**
   * DcInferSession::draft:
   * @proposed: tokens of a draft span (a repeated suffix's continuation)
   * @accepted: how many of them the model drew itself: forward passes (laps) saved
   *
   * Emitted when a span ends, before the token that ended it.
   */
  signals[SIGNAL_DRAFT] =
    g_signal_new ("draft", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                  NULL, NULL, NULL, G_TYPE_NONE, 3, G_TYPE_UINT, G_TYPE_UINT, G_TYPE_UINT);
}

static void
dc_infer_session_init (DcInferSession *self)
{
  Shared *sh = g_new0 (Shared, 1);

  sh->ref_count = 1;
  g_mutex_init (&sh->lock);
  g_cond_init (&sh->cond);
  sh->context = g_main_context_ref_thread_default ();
  g_weak_ref_init (&sh->session, self);
  g_queue_init (&sh->waiting);
  g_queue_init (&sh->events);
  self->shared = sh;
  self->next_id = 1;
}

static void
start_worker (DcInferSession *self)
{
  self->worker = g_thread_new ("dc-infer", generation_worker, shared_ref (self->shared));
}

/**
 * dc_infer_session_new:
 * @context: what the front end shares (the GEMM backend)
 * @repo: an opened model; its config and tokenizer are used at once
 *
 * Returns: (transfer full): a session whose weights are not loaded yet
 */
DcInferSession *
dc_infer_session_new (DcContext   *context,
                      DcModelRepo *repo)
{
  DcInferSession *self;
  Shared *sh;

  g_return_val_if_fail (DC_IS_CONTEXT (context), NULL);
  g_return_val_if_fail (DC_IS_MODEL_REPO (repo), NULL);
  g_return_val_if_fail (dc_model_repo_get_config (repo) != NULL, NULL);
  g_return_val_if_fail (dc_model_repo_get_tokenizer (repo) != NULL, NULL);

  self = g_object_new (DC_TYPE_INFER_SESSION, NULL);
  sh = self->shared;
  self->context = g_object_ref (context);
  sh->repo = g_object_ref (repo);
  sh->tokenizer = dc_model_repo_get_tokenizer (repo);
  sh->backend = dc_context_get_backend (context);
  sh->config = dc_model_repo_get_config (repo);
  sh->vocab_size = sh->config->vocab_size;
  sh->max_positions = sh->config->max_positions;
  sh->eos_id = sh->config->eos_token_id;
  sh->n_eos_ids = sh->config->n_eos_token_ids;
  memcpy (sh->eos_ids, sh->config->eos_token_ids, sizeof sh->eos_ids);
  sh->bos_id = sh->config->bos_token_id;
  start_worker (self);
  return self;
}

/**
 * dc_infer_session_new_with_forward:
 * @forward: (scope notified): the forward pass, called on the generation thread
 *
 * Returns: (transfer full): a loaded session whose forward pass is @forward
 */
DcInferSession *
dc_infer_session_new_with_forward (DcContext          *context,
                                   DcModelRepo        *repo,
                                   DcInferForwardFunc  forward,
                                   gpointer            user_data)
{
  DcInferSession *self;
  Shared *sh;

  g_return_val_if_fail (DC_IS_CONTEXT (context) && DC_IS_MODEL_REPO (repo), NULL);
  g_return_val_if_fail (forward != NULL, NULL);

  self = g_object_new (DC_TYPE_INFER_SESSION, NULL);
  sh = self->shared;
  self->context = g_object_ref (context);
  sh->repo = g_object_ref (repo);
  sh->tokenizer = dc_model_repo_get_tokenizer (repo);
  sh->backend = dc_context_get_backend (context);
  sh->config = dc_model_repo_get_config (repo);
  sh->vocab_size = sh->config->vocab_size;
  sh->max_positions = sh->config->max_positions;
  sh->eos_id = sh->config->eos_token_id;
  sh->n_eos_ids = sh->config->n_eos_token_ids;
  memcpy (sh->eos_ids, sh->config->eos_token_ids, sizeof sh->eos_ids);
  sh->bos_id = sh->config->bos_token_id;
  /* The fake model's seam: generation calls FORWARD instead of a DcHfModel. */
  sh->fake = TRUE;
  sh->fake_model.vocab_size = sh->vocab_size;
  sh->fake_model.max_positions = sh->max_positions;
  sh->fake_model.forward = forward;
  sh->fake_model.user_data = user_data;
  sh->fake_loaded = TRUE;
  sh->prefill_without_logits = TRUE;
  start_worker (self);
  return self;
}

void
dc_infer_session_set_forward_rows (DcInferSession     *self,
                                   DcInferForwardFunc  forward_rows)
{
  g_return_if_fail (DC_IS_INFER_SESSION (self) && self->shared->fake);

  /* Read by the generation thread only while a turn runs, which it cannot
   * before the first submit. */
  g_mutex_lock (&self->shared->lock);
  self->shared->forward_rows = forward_rows;
  g_mutex_unlock (&self->shared->lock);
}

DcInferSession *
_dc_infer_session_new_fake (DcBpeTokenizer         *tokenizer,
                            const DcInferFakeModel *fake)
{
  DcInferSession *self;
  Shared *sh;

  g_return_val_if_fail (tokenizer != NULL && fake != NULL && fake->forward != NULL, NULL);
  g_return_val_if_fail (fake->vocab_size > 0 && fake->max_positions >= DC_INFER_MIN_CONTEXT,
                        NULL);

  self = g_object_new (DC_TYPE_INFER_SESSION, NULL);
  sh = self->shared;
  sh->fake = TRUE;
  sh->fake_model = *fake;
  sh->forward_rows = fake->forward_rows;
  sh->fake_loaded = !fake->load_later;
  sh->owned_tokenizer = tokenizer;
  sh->tokenizer = tokenizer;
  sh->vocab_size = fake->vocab_size;
  sh->max_positions = fake->max_positions;
  sh->eos_id = fake->eos_id;
  if (fake->n_eos_ids > 0)
    {
      sh->n_eos_ids = MIN (fake->n_eos_ids, DC_HF_MAX_EOS_IDS);
      memcpy (sh->eos_ids, fake->eos_ids, sh->n_eos_ids * sizeof (gint64));
    }
  else if (fake->eos_id >= 0)
    sh->eos_ids[sh->n_eos_ids++] = fake->eos_id;
  sh->bos_id = fake->bos_id;
  start_worker (self);
  return self;
}

DcModelRepo *
dc_infer_session_get_repo (DcInferSession *self)
{
  g_return_val_if_fail (DC_IS_INFER_SESSION (self), NULL);

  return self->shared->repo;
}

guint
dc_infer_session_get_max_context (DcInferSession *self)
{
  g_return_val_if_fail (DC_IS_INFER_SESSION (self), 0);

  return self->shared->max_positions;
}

/* ---- settings -------------------------------------------------------- */

void
dc_infer_settings_init_default (DcInferSettings *settings)
{
  g_return_if_fail (settings != NULL);

  /* The seed's defaults (docs/ARCHITECTURE.md, "Generation"). */
  settings->n_tokens = 60;
  settings->context = 64;
  settings->temperature = 0;
  settings->seed = 1234;
  settings->output = DC_INFER_OUTPUT_FREE;
  settings->draft_span = 0;
}

gboolean
dc_infer_settings_validate (const DcInferSettings  *settings,
                            guint                   max_positions,
                            GError                **error)
{
  g_return_val_if_fail (settings != NULL, FALSE);

  if (settings->n_tokens < 1 || settings->n_tokens > DC_INFER_MAX_TOKENS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "tokens must be 1–%d, not %u", DC_INFER_MAX_TOKENS, settings->n_tokens);
      return FALSE;
    }
  if (settings->context < DC_INFER_MIN_CONTEXT || settings->context > max_positions)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "context length must be %d–%u (the model's limit), not %u",
                   DC_INFER_MIN_CONTEXT, max_positions, settings->context);
      return FALSE;
    }
  if (settings->temperature > DC_SAMPLER_MAX_TEMPERATURE)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "temperature ÷100 must be 0–%d, not %u", DC_SAMPLER_MAX_TEMPERATURE,
                   settings->temperature);
      return FALSE;
    }
  if (settings->draft_span > DC_INFER_MAX_DRAFT_SPAN)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "draft span must be 0–%d tokens, not %u", DC_INFER_MAX_DRAFT_SPAN,
                   settings->draft_span);
      return FALSE;
    }
  if (settings->output != DC_INFER_OUTPUT_FREE && settings->output != DC_INFER_OUTPUT_JSON)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "output must be free or JSON");
      return FALSE;
    }
  return TRUE;
}

/* ---- loading --------------------------------------------------------- */

static void
load_worker (GTask        *task,
             gpointer      source_object,
             gpointer      task_data,
             GCancellable *cancellable)
{
  Shared *sh = task_data;
  g_autoptr(GError) error = NULL;
  DcHfModel *model;

  model = dc_hf_model_load (sh->config, DC_TENSOR_SOURCE (sh->repo), sh->backend,
                            load_progress_cb, sh, cancellable, &error);
  g_mutex_lock (&sh->lock);
  sh->loading = FALSE;
  if (model != NULL)
    {
      sh->model = model;
      claim_next_locked (sh);
    }
  g_mutex_unlock (&sh->lock);
  if (model == NULL)
    g_task_return_error (task, g_steal_pointer (&error));
  else
    g_task_return_boolean (task, TRUE);
}

void
dc_infer_session_load_async (DcInferSession      *self,
                             GCancellable        *cancellable,
                             GAsyncReadyCallback  callback,
                             gpointer             user_data)
{
  g_autoptr(GTask) task = NULL;
  Shared *sh;

  g_return_if_fail (DC_IS_INFER_SESSION (self));

  sh = self->shared;
  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, dc_infer_session_load_async);
  g_mutex_lock (&sh->lock);
  if (sh->fake && !sh->fake_loaded)
    {
      /* The fake's weights "load" at once, with one progress report. */
      sh->fake_loaded = TRUE;
      sh->progress_pending = TRUE;
      sh->progress_done = sh->progress_total = 1;
      schedule_dispatch_locked (sh);
      claim_next_locked (sh);
    }
  if (is_loaded_locked (sh))
    {
      g_mutex_unlock (&sh->lock);
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (sh->loading)
    {
      g_mutex_unlock (&sh->lock);
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_PENDING,
                               "the model is already loading");
      return;
    }
  sh->loading = TRUE;
  g_mutex_unlock (&sh->lock);
  g_task_set_task_data (task, shared_ref (sh), (GDestroyNotify) shared_unref);
  g_task_run_in_thread (task, load_worker);
}

gboolean
dc_infer_session_load_finish (DcInferSession  *self,
                              GAsyncResult    *result,
                              GError         **error)
{
  g_return_val_if_fail (DC_IS_INFER_SESSION (self), FALSE);
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);

  return g_task_propagate_boolean (G_TASK (result), error);
}

gboolean
dc_infer_session_is_loaded (DcInferSession *self)
{
  gboolean loaded;

  g_return_val_if_fail (DC_IS_INFER_SESSION (self), FALSE);

  g_mutex_lock (&self->shared->lock);
  loaded = is_loaded_locked (self->shared);
  g_mutex_unlock (&self->shared->lock);
  return loaded;
}

/* ---- the queue ------------------------------------------------------- */

static GArray *
tokenize_prompt (Shared      *sh,
                 const char  *prompt,
                 GError     **error)
{
  g_autoptr(GArray) ids = NULL;
  gsize len = strlen (prompt);

  if (len > DC_INFER_MAX_PROMPT_BYTES)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "the prompt is larger than %u KiB", DC_INFER_MAX_PROMPT_BYTES / 1024);
      return NULL;
    }
  ids = dc_bpe_tokenizer_encode (sh->tokenizer, prompt, (gssize) len, TRUE, error);
  if (ids == NULL)
    return NULL;
  if (ids->len == 0 && sh->bos_id >= 0 && (guint64) sh->bos_id < sh->vocab_size)
    {
      guint32 bos = (guint32) sh->bos_id;

      /* An empty prompt starts from the beginning-of-text token, as transformers does. */
      g_array_append_val (ids, bos);
    }
  if (ids->len == 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the prompt is empty and this model has no beginning-of-text token");
      return NULL;
    }
  for (guint i = 0; i < ids->len; i++)
    if (g_array_index (ids, guint32, i) >= sh->vocab_size)
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOKENIZER,
                     "the tokenizer gave id %u, outside the model's vocabulary of %u",
                     g_array_index (ids, guint32, i), sh->vocab_size);
        return NULL;
      }
  return g_steal_pointer (&ids);
}

/**
 * dc_infer_session_submit:
 * @prompt: UTF-8 text (an empty one starts from the beginning-of-text token)
 * @settings: (nullable): NULL for the defaults
 *
 * The prompt is tokenized now; a prompt that cannot run (settings out of
 * range, the queue full, a tokenizer error) gets "finished" with the reason,
 * later, on the creator's context like every signal.
 *
 * Returns: the prompt's id
 */
guint
dc_infer_session_submit (DcInferSession        *self,
                         const char            *prompt,
                         const DcInferSettings *settings)
{
  Shared *sh;
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) ids = NULL;
  DcInferSettings defaults;
  Turn *turn;
  guint id;

  g_return_val_if_fail (DC_IS_INFER_SESSION (self), 0);
  g_return_val_if_fail (prompt != NULL, 0);

  sh = self->shared;
  id = self->next_id++;
  if (settings == NULL)
    {
      dc_infer_settings_init_default (&defaults);
      defaults.context = MIN (defaults.context, sh->max_positions);
      settings = &defaults;
    }
  if (!dc_infer_settings_validate (settings, sh->max_positions, &error)
      || (ids = tokenize_prompt (sh, prompt, &error)) == NULL)
    {
      post_event (sh, EVENT_FINISHED, id, 0, g_strdup (error->message), FALSE, 0.0);
      return id;
    }

  turn = g_new0 (Turn, 1);
  turn->id = id;
  turn->settings = *settings;
  turn->ids = g_steal_pointer (&ids);
  g_mutex_lock (&sh->lock);
  if (sh->waiting.length >= DC_INFER_MAX_QUEUE)
    {
      g_mutex_unlock (&sh->lock);
      turn_free (turn);
      post_event (sh, EVENT_FINISHED, id, 0,
                  g_strdup_printf ("%d prompts are already waiting; this one was not queued",
                                   DC_INFER_MAX_QUEUE),
                  FALSE, 0.0);
      return id;
    }
  g_queue_push_tail (&sh->waiting, turn);
  claim_next_locked (sh);
  g_mutex_unlock (&sh->lock);
  return id;
}

guint
dc_infer_session_get_queue_length (DcInferSession *self)
{
  guint n;

  g_return_val_if_fail (DC_IS_INFER_SESSION (self), 0);

  g_mutex_lock (&self->shared->lock);
  n = self->shared->waiting.length;
  g_mutex_unlock (&self->shared->lock);
  return n;
}

void
dc_infer_session_stop (DcInferSession *self)
{
  g_return_if_fail (DC_IS_INFER_SESSION (self));

  g_mutex_lock (&self->shared->lock);
  if (self->shared->running != NULL)
    g_atomic_int_set (&self->shared->running->stop, 1);
  g_mutex_unlock (&self->shared->lock);
}

/* Waiting prompts are dropped without signals: they never started. */
void
dc_infer_session_clear_queue (DcInferSession *self)
{
  g_return_if_fail (DC_IS_INFER_SESSION (self));

  g_mutex_lock (&self->shared->lock);
  g_queue_clear_full (&self->shared->waiting, (GDestroyNotify) turn_free);
  g_mutex_unlock (&self->shared->lock);
}

/* ---- scoring --------------------------------------------------------- */

static gint
compare_scores (gconstpointer a,
                gconstpointer b)
{
  const DcInferScore *x = a, *y = b;

  if (x->logit != y->logit)
    return x->logit > y->logit ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The TOP_K best of LOGITS (n,), best first; NaN never counts. */
static void
append_top (GArray      *out,
            const float *logits,
            guint        n,
            guint        top_k)
{
  guint start = out->len, have = 0;

  g_array_set_size (out, start + top_k);
  for (guint i = 0; i < n; i++)
    {
      DcInferScore *top = &g_array_index (out, DcInferScore, start);
      DcInferScore cand = { i, logits[i] };
      guint j;

      if (logits[i] != logits[i])
        continue;
      if (have == top_k && compare_scores (&cand, &top[top_k - 1]) >= 0)
        continue;
      /* Insertion into the sorted list: k is small. */
      j = have < top_k ? have++ : top_k - 1;
      while (j > 0 && compare_scores (&cand, &top[j - 1]) < 0)
        {
          top[j] = top[j - 1];
          j--;
        }
      top[j] = cand;
    }
  for (guint j = have; j < top_k; j++)
    g_array_index (out, DcInferScore, start + j) = (DcInferScore) { G_MAXUINT32, 0.0f };
}

GArray *
dc_infer_session_score (DcInferSession  *self,
                        const guint32   *ids,
                        gsize            n_ids,
                        guint            top_k,
                        GCancellable    *cancellable,
                        GError         **error)
{
  Shared *sh;
  g_autoptr(GArray) out = NULL;
  g_autofree float *logits = NULL;
  DcHfKvCache *cache = NULL;
  gboolean busy;

  g_return_val_if_fail (DC_IS_INFER_SESSION (self), NULL);
  g_return_val_if_fail (ids != NULL || n_ids == 0, NULL);

  sh = self->shared;
  if (n_ids == 0 || n_ids > sh->max_positions)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "scoring takes 1–%u token ids (the model's limit), not %" G_GSIZE_FORMAT,
                   sh->max_positions, n_ids);
      return NULL;
    }
  if (top_k < 1 || top_k > MIN (DC_INFER_MAX_TOP_K, sh->vocab_size))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the top list holds 1–%u ids", MIN (DC_INFER_MAX_TOP_K, sh->vocab_size));
      return NULL;
    }
  for (gsize i = 0; i < n_ids; i++)
    if (ids[i] >= sh->vocab_size)
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                     "token id %u is outside the vocabulary of %u", ids[i], sh->vocab_size);
        return NULL;
      }
  g_mutex_lock (&sh->lock);
  busy = sh->running != NULL || sh->waiting.length > 0 || !is_loaded_locked (sh);
  g_mutex_unlock (&sh->lock);
  if (busy)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_BUSY,
                   "scoring needs the model loaded and no prompt running");
      return NULL;
    }

  if (!sh->fake && (cache = dc_hf_kv_cache_new (sh->model, (guint) n_ids, error)) == NULL)
    return NULL;
  logits = g_new (float, sh->vocab_size);
  out = g_array_sized_new (FALSE, FALSE, sizeof (DcInferScore), (guint) (n_ids * top_k));
  for (gsize i = 0; i < n_ids; i++)
    {
      gboolean ok;

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        {
          g_clear_pointer (&cache, dc_hf_kv_cache_free);
          return NULL;
        }
      if (sh->fake)
        ok = sh->fake_model.forward (sh->fake_model.user_data, &ids[i], 1, (guint) i, logits,
                                     error);
      else
        ok = dc_hf_model_forward (sh->model, cache, &ids[i], 1, logits, error);
      if (!ok)
        {
          g_clear_pointer (&cache, dc_hf_kv_cache_free);
          return NULL;
        }
      append_top (out, logits, sh->vocab_size, top_k);
    }
  g_clear_pointer (&cache, dc_hf_kv_cache_free);
  return g_steal_pointer (&out);
}
