/* test-infer-session.c: the inference session on a fake model: the queue,
 * Stop, the order and thread of signals, JSON output, the context window.
 *
 * The fake forward runs on the session's generation thread; a gate lets the
 * test hand it one call at a time, so nothing here depends on timing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "infer/dc-infer-session-private.h"
#include "model/dc-model-error.h"
#include "model/dc-rng.h"

#define VOCAB 1024
#define WAIT_MS 60000   /* a safety net against a hang, never a measurement */

typedef struct
{
  GMutex   lock;
  GCond    cond;
  gboolean gated;        /* calls wait until granted */
  guint    granted;
  guint    calls;
  GThread *thread;       /* the thread forward ran on */
  GArray  *starts;       /* guint: START of each call */
  GArray  *lengths;      /* guint: N_IDS of each call */
  guint    window_end;   /* the largest start + n seen */
  guint32  last_seen;    /* the last id of the last call */
} Fake;

typedef struct
{
  guint    kind;         /* 's'tarted, 't'oken, 'f'inished */
  guint    prompt_id;
  guint    value;
  char    *text;
  gboolean stopped;
} Seen;

typedef struct
{
  GMainContext   *context;
  GThread        *thread;
  Fake            fake;
  DcInferSession *session;
  GArray         *seen;   /* Seen */
  gboolean        wrong_thread;
} Fixture;

static gboolean
fake_forward (gpointer        user_data,
              const guint32  *ids,
              gsize           n_ids,
              guint           start,
              float          *logits,
              GError        **error)
{
  Fake *fake = user_data;
  guint position = start + (guint) n_ids - 1;

  g_mutex_lock (&fake->lock);
  fake->calls++;
  while (fake->gated && fake->granted < fake->calls)
    g_cond_wait (&fake->cond, &fake->lock);
  fake->thread = g_thread_self ();
  g_array_append_val (fake->starts, start);
  g_array_append_val (fake->lengths, (guint) { (guint) n_ids });
  fake->window_end = MAX (fake->window_end, start + (guint) n_ids);
  fake->last_seen = ids[n_ids - 1];
  g_mutex_unlock (&fake->lock);

  /* Logits that depend on the last id and its position, as a model's do. */
  for (guint k = 0; k < VOCAB; k++)
    logits[k] = 3.0f * dc_rng_normal (ids[n_ids - 1], 77, (guint64) position << 20 | k);
  logits[0] = -100.0f;   /* the end-of-text id: runs go to their token count */
  return TRUE;
}

static void
grant (Fixture *f,
       guint    n)
{
  g_mutex_lock (&f->fake.lock);
  f->fake.granted += n;
  g_cond_broadcast (&f->fake.cond);
  g_mutex_unlock (&f->fake.lock);
}

static void
ungate (Fixture *f)
{
  g_mutex_lock (&f->fake.lock);
  f->fake.gated = FALSE;
  g_cond_broadcast (&f->fake.cond);
  g_mutex_unlock (&f->fake.lock);
}

static void
check_thread (Fixture *f)
{
  if (g_thread_self () != f->thread || !g_main_context_is_owner (f->context))
    f->wrong_thread = TRUE;
}

static void
started_cb (DcInferSession *session, guint id, guint n, Fixture *f)
{
  Seen s = { 's', id, n, NULL, FALSE };

  check_thread (f);
  g_array_append_val (f->seen, s);
}

static void
token_cb (DcInferSession *session, guint id, guint token, const char *text, double tps,
          Fixture *f)
{
  Seen s = { 't', id, token, g_strdup (text), FALSE };

  check_thread (f);
  g_assert_true (g_utf8_validate (text, -1, NULL));
  g_assert_cmpfloat (tps, >=, 0.0);
  g_array_append_val (f->seen, s);
}

static void
finished_cb (DcInferSession *session, guint id, gboolean stopped, const char *message,
             double tps, Fixture *f)
{
  /* The queue as the creator reads it when told: the next prompt has left it. */
  Seen s = { 'f', id, dc_infer_session_get_queue_length (session), g_strdup (message), stopped };

  check_thread (f);
  g_array_append_val (f->seen, s);
}

static void
seen_clear (Seen *s)
{
  g_free (s->text);
}

static DcBpeTokenizer *
load_tokenizer (void)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                   "tokenizer.json", NULL);
  g_autoptr(GError) error = NULL;
  DcBpeTokenizer *tokenizer = dc_bpe_tokenizer_new_from_file (path, &error);

  g_assert_no_error (error);
  return tokenizer;
}

static void
fixture_setup (Fixture       *f,
               gconstpointer  data)
{
  DcInferFakeModel fake = {
    .vocab_size = VOCAB, .max_positions = 256, .eos_id = 0, .bos_id = 0,
    .forward = fake_forward, .user_data = &f->fake,
  };

  /* The session's creator runs its own context: signals must come there. */
  f->context = g_main_context_new ();
  g_main_context_push_thread_default (f->context);
  f->thread = g_thread_self ();
  g_mutex_init (&f->fake.lock);
  g_cond_init (&f->fake.cond);
  f->fake.starts = g_array_new (FALSE, FALSE, sizeof (guint));
  f->fake.lengths = g_array_new (FALSE, FALSE, sizeof (guint));
  f->seen = g_array_new (FALSE, TRUE, sizeof (Seen));
  g_array_set_clear_func (f->seen, (GDestroyNotify) seen_clear);
  f->session = _dc_infer_session_new_fake (load_tokenizer (), &fake);
  g_signal_connect (f->session, "started", G_CALLBACK (started_cb), f);
  g_signal_connect (f->session, "token", G_CALLBACK (token_cb), f);
  g_signal_connect (f->session, "finished", G_CALLBACK (finished_cb), f);
}

static void
fixture_teardown (Fixture       *f,
                  gconstpointer  data)
{
  ungate (f);
  g_clear_object (&f->session);   /* joins the generation thread */
  g_assert_false (f->wrong_thread);
  g_array_unref (f->seen);
  g_array_unref (f->fake.starts);
  g_array_unref (f->fake.lengths);
  g_mutex_clear (&f->fake.lock);
  g_cond_clear (&f->fake.cond);
  g_main_context_pop_thread_default (f->context);
  g_main_context_unref (f->context);
}

typedef struct
{
  Fixture *f;
  guint    kind;
  guint    prompt_id;
  guint    count;
} Wanted;

static gboolean
have_seen (gpointer user_data)
{
  Wanted *w = user_data;
  guint n = 0;

  for (guint i = 0; i < w->f->seen->len; i++)
    {
      Seen *s = &g_array_index (w->f->seen, Seen, i);

      if (s->kind == w->kind && s->prompt_id == w->prompt_id)
        n++;
    }
  return n >= w->count;
}

static void
wait_for (Fixture *f,
          guint    kind,
          guint    prompt_id,
          guint    count)
{
  Wanted w = { f, kind, prompt_id, count };

  g_assert_true (dc_test_wait_until (have_seen, &w, WAIT_MS));
}

static guint
count_seen (Fixture *f,
            guint    kind,
            guint    prompt_id)
{
  Wanted w = { f, kind, prompt_id, 0 };
  guint n = 0;

  for (guint i = 0; i < f->seen->len; i++)
    {
      Seen *s = &g_array_index (f->seen, Seen, i);

      n += s->kind == w.kind && s->prompt_id == w.prompt_id;
    }
  return n;
}

static Seen *
find_finished (Fixture *f,
               guint    prompt_id)
{
  for (guint i = 0; i < f->seen->len; i++)
    {
      Seen *s = &g_array_index (f->seen, Seen, i);

      if (s->kind == 'f' && s->prompt_id == prompt_id)
        return s;
    }
  g_error ("prompt %u has not finished", prompt_id);
}

static DcInferSettings
settings_with (guint n_tokens,
               guint context)
{
  DcInferSettings s;

  dc_infer_settings_init_default (&s);
  s.n_tokens = n_tokens;
  s.context = context;
  return s;
}

/* Each prompt's signals in order (started, its tokens, finished), prompts in
 * the order submitted, every signal on the creator's thread and context. */
static void
test_streaming_order_and_thread (Fixture *f, gconstpointer data)
{
  DcInferSettings s = settings_with (12, 64);
  guint a, b;
  gint current = -1;
  guint tokens_a = 0;

  ungate (f);
  a = dc_infer_session_submit (f->session, "The secret of", &s);
  b = dc_infer_session_submit (f->session, "Another prompt", &s);
  g_assert_cmpuint (a, ==, 1);
  g_assert_cmpuint (b, ==, 2);
  wait_for (f, 'f', b, 1);

  for (guint i = 0; i < f->seen->len; i++)
    {
      Seen *e = &g_array_index (f->seen, Seen, i);

      if (e->kind == 's')
        {
          g_assert_cmpint (current, ==, -1);
          current = (gint) e->prompt_id;
          g_assert_cmpuint (e->prompt_id, ==, i == 0 ? a : b);
          g_assert_cmpuint (e->value, >, 0);
        }
      else if (e->kind == 't')
        {
          g_assert_cmpint ((gint) e->prompt_id, ==, current);
          tokens_a += e->prompt_id == a;
        }
      else
        {
          g_assert_cmpint ((gint) e->prompt_id, ==, current);
          g_assert_null (e->text);
          g_assert_false (e->stopped);
          current = -1;
        }
    }
  g_assert_cmpuint (tokens_a, ==, 12);
  g_assert_cmpuint (count_seen (f, 't', b), ==, 12);
  g_assert_false (f->wrong_thread);
  /* The model ran on another thread. */
  g_assert_true (f->fake.thread != NULL && f->fake.thread != g_thread_self ());
}

/* Signals wait for the creator's context: nothing arrives while only the
 * global default context is iterated. */
static void
test_signals_only_on_creator_context (Fixture *f, gconstpointer data)
{
  DcInferSettings s = settings_with (3, 64);
  guint id;

  ungate (f);
  id = dc_infer_session_submit (f->session, "x", &s);
  /* Let the generation finish (its calls are counted by the fake). */
  for (;;)
    {
      gboolean done;

      g_mutex_lock (&f->fake.lock);
      done = f->fake.calls >= 3;
      g_mutex_unlock (&f->fake.lock);
      if (done)
        break;
      g_thread_yield ();
    }
  while (g_main_context_iteration (NULL, FALSE))
    ;
  /* Nothing came on the wrong context. (Events may still be on their way to
   * the right one; they are never delivered anywhere else.) */
  g_assert_cmpuint (f->seen->len, ==, 0);
  wait_for (f, 'f', id, 1);
  g_assert_cmpuint (count_seen (f, 't', id), ==, 3);
}

/* Prompts submitted while one runs wait in order; Stop ends the running one
 * after the token in progress and keeps the queue. */
static void
test_queue_and_stop (Fixture *f, gconstpointer data)
{
  DcInferSettings s = settings_with (50, 64);
  guint a, b, c, tokens_before;

  f->fake.gated = TRUE;
  a = dc_infer_session_submit (f->session, "first", &s);
  /* Idle: the prompt runs at once, it does not wait. */
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 0);
  b = dc_infer_session_submit (f->session, "second", &s);
  c = dc_infer_session_submit (f->session, "third", &s);
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 2);
  /* A's prefill and two tokens' forward calls. */
  grant (f, 3);
  wait_for (f, 't', a, 2);
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 2);
  tokens_before = count_seen (f, 't', a);

  /* The worker is now waiting inside the next forward call. */
  dc_infer_session_stop (f->session);
  grant (f, 1);
  wait_for (f, 'f', a, 1);
  g_assert_true (find_finished (f, a)->stopped);
  g_assert_cmpuint (find_finished (f, a)->value, ==, 1);   /* B left the queue first */
  /* Stopped after the call in progress: no token past it. */
  g_assert_cmpuint (count_seen (f, 't', a), <=, tokens_before + 1);
  g_assert_cmpuint (count_seen (f, 't', a), <, 50);

  /* B runs next, then C, to the end. */
  ungate (f);
  wait_for (f, 'f', c, 1);
  g_assert_false (find_finished (f, b)->stopped);
  g_assert_cmpuint (find_finished (f, b)->value, ==, 0);
  g_assert_cmpuint (count_seen (f, 't', b), ==, 50);
  g_assert_cmpuint (count_seen (f, 't', c), ==, 50);
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 0);
}

static void
test_clear_queue (Fixture *f, gconstpointer data)
{
  DcInferSettings s = settings_with (5, 64);
  guint a, b, c, d;

  f->fake.gated = TRUE;
  a = dc_infer_session_submit (f->session, "first", &s);
  b = dc_infer_session_submit (f->session, "second", &s);
  c = dc_infer_session_submit (f->session, "third", &s);
  grant (f, 1);
  wait_for (f, 't', a, 1);
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 2);
  dc_infer_session_clear_queue (f->session);
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 0);
  ungate (f);
  wait_for (f, 'f', a, 1);
  /* A later prompt runs; the cleared ones never start. */
  d = dc_infer_session_submit (f->session, "fourth", &s);
  wait_for (f, 'f', d, 1);
  g_assert_cmpuint (count_seen (f, 's', b) + count_seen (f, 's', c), ==, 0);
  g_assert_cmpuint (count_seen (f, 'f', b) + count_seen (f, 'f', c), ==, 0);
  g_assert_cmpuint (count_seen (f, 't', d), ==, 5);
}

static char *
joined_text (Fixture *f,
             guint    prompt_id)
{
  GString *text = g_string_new (NULL);

  for (guint i = 0; i < f->seen->len; i++)
    {
      Seen *s = &g_array_index (f->seen, Seen, i);

      if (s->kind == 't' && s->prompt_id == prompt_id)
        g_string_append (text, s->text);
    }
  return g_string_free (text, FALSE);
}

/* With output JSON and sampling on random logits, the streamed text is
 * valid JSON for json-glib, whatever the token count. */
static void
test_json_output (Fixture *f, gconstpointer data)
{
  const guint counts[] = { 1, 2, 7, 30, 90 };

  ungate (f);
  for (guint i = 0; i < G_N_ELEMENTS (counts); i++)
    for (guint64 seed = 1; seed <= 3; seed++)
      {
        DcInferSettings s = settings_with (counts[i], 128);
        g_autoptr(JsonParser) parser = json_parser_new ();
        g_autoptr(GError) error = NULL;
        g_autofree char *text = NULL;
        guint id;

        s.output = DC_INFER_OUTPUT_JSON;
        s.temperature = 150;
        s.seed = seed;
        id = dc_infer_session_submit (f->session, "{\"answer\":", &s);
        wait_for (f, 'f', id, 1);
        g_assert_null (find_finished (f, id)->text);
        text = joined_text (f, id);
        {
          g_autofree char *shown = g_strescape (text, NULL);

          g_test_message ("%u tokens, seed %" G_GUINT64_FORMAT ": %s", counts[i], seed, shown);
        }
        g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
        g_assert_no_error (error);
        g_assert_nonnull (json_parser_get_root (parser));
      }
}

/* The same seed and prompt give the same ids, whatever ran before; another
 * seed gives others. */
static void
test_seeded_runs_repeat (Fixture *f, gconstpointer data)
{
  DcInferSettings s = settings_with (20, 64);
  g_autoptr(GString) first = g_string_new (NULL), again = g_string_new (NULL);
  g_autoptr(GString) other = g_string_new (NULL);
  GString *into[] = { first, again, other };
  guint64 seeds[] = { 99, 99, 100 };

  ungate (f);
  s.temperature = 100;
  for (guint r = 0; r < 3; r++)
    {
      guint id;

      s.seed = seeds[r];
      /* Something else in between, at another temperature. */
      s.temperature = 60;
      wait_for (f, 'f', dc_infer_session_submit (f->session, "noise", &s), 1);
      s.temperature = 100;
      id = dc_infer_session_submit (f->session, "Once upon", &s);
      wait_for (f, 'f', id, 1);
      for (guint i = 0; i < f->seen->len; i++)
        {
          Seen *e = &g_array_index (f->seen, Seen, i);

          if (e->kind == 't' && e->prompt_id == id)
            g_string_append_printf (into[r], "%u,", e->value);
        }
    }
  g_assert_cmpstr (first->str, ==, again->str);
  g_assert_cmpstr (first->str, !=, other->str);
}

/* The window: the model never reads past the context; when it is full it
 * starts again from the last context/2 tokens, and a long prompt is cut to them. */
static void
test_context_window (Fixture *f, gconstpointer data)
{
  DcInferSettings s = settings_with (20, 8);
  guint id, restarts = 0;
  Seen *started = NULL;

  ungate (f);
  id = dc_infer_session_submit (f->session, "one two three", &s);
  wait_for (f, 'f', id, 1);
  g_assert_cmpuint (count_seen (f, 't', id), ==, 20);
  g_assert_cmpuint (f->fake.window_end, <=, 8);
  for (guint i = 0; i < f->fake.starts->len; i++)
    if (g_array_index (f->fake.starts, guint, i) == 0)
      {
        restarts++;
        if (i > 0)
          g_assert_cmpuint (g_array_index (f->fake.lengths, guint, i), ==, 4);
      }
  g_assert_cmpuint (restarts, >, 2);

  /* A prompt of more than 8 tokens keeps its last 4. */
  g_array_set_size (f->seen, 0);
  id = dc_infer_session_submit (f->session,
                                "a much longer prompt than eight tokens, with many words in it",
                                &s);
  wait_for (f, 'f', id, 1);
  for (guint i = 0; i < f->seen->len; i++)
    if (g_array_index (f->seen, Seen, i).kind == 's')
      started = &g_array_index (f->seen, Seen, i);
  g_assert_nonnull (started);
  g_assert_cmpuint (started->value, ==, 4);
  g_assert_cmpuint (f->fake.window_end, <=, 8);
}

/* A prompt that cannot run is answered by "finished" with the reason, never
 * synchronously, and the session goes on. */
static void
test_refusals (Fixture *f, gconstpointer data)
{
  DcInferSettings bad_tokens = settings_with (0, 64);
  DcInferSettings bad_context = settings_with (5, 257);
  DcInferSettings bad_temperature = settings_with (5, 64);
  DcInferSettings good = settings_with (2, 64);
  guint a, b, c, d, e;

  ungate (f);
  bad_temperature.temperature = 1001;
  a = dc_infer_session_submit (f->session, "x", &bad_tokens);
  b = dc_infer_session_submit (f->session, "x", &bad_context);
  c = dc_infer_session_submit (f->session, "x", &bad_temperature);
  g_assert_cmpuint (f->seen->len, ==, 0);
  d = dc_infer_session_submit (f->session, "", &good);   /* starts from BOS */
  e = dc_infer_session_submit (f->session, "x", NULL);   /* defaults */
  wait_for (f, 'f', e, 1);
  wait_for (f, 'f', a, 1);
  wait_for (f, 'f', b, 1);
  wait_for (f, 'f', c, 1);
  g_assert_nonnull (strstr (find_finished (f, a)->text, "tokens must be 1–4096"));
  g_assert_nonnull (strstr (find_finished (f, b)->text, "context length must be 2–256"));
  g_assert_nonnull (strstr (find_finished (f, c)->text, "temperature ÷100 must be 0–1000"));
  g_assert_null (find_finished (f, d)->text);
  g_assert_cmpuint (count_seen (f, 't', d), ==, 2);
  g_assert_cmpuint (count_seen (f, 't', e), ==, 60);
}

/* Teacher forcing: one forward per id, the top list best first. */
static void
test_score (Fixture *f, gconstpointer data)
{
  const guint32 ids[] = { 317, 418, 67, 262 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) scores = NULL;

  ungate (f);
  scores = dc_infer_session_score (f->session, ids, G_N_ELEMENTS (ids), 10, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (scores->len, ==, 40);
  for (guint p = 0; p < 4; p++)
    {
      const DcInferScore *top = &g_array_index (scores, DcInferScore, p * 10);
      float logits[VOCAB];
      guint32 best = 0;

      g_assert_cmpuint (g_array_index (f->fake.starts, guint, p), ==, p);
      g_assert_cmpuint (g_array_index (f->fake.lengths, guint, p), ==, 1);
      fake_forward (&f->fake, &ids[p], 1, p, logits, NULL);
      for (guint k = 1; k < VOCAB; k++)
        if (logits[k] > logits[best])
          best = k;
      g_assert_cmpuint (top[0].id, ==, best);
      for (guint k = 1; k < 10; k++)
        g_assert_cmpfloat (top[k].logit, <=, top[k - 1].logit);
    }
  g_clear_pointer (&scores, g_array_unref);
  scores = dc_infer_session_score (f->session, (const guint32[]) { VOCAB }, 1, 10, NULL, &error);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_assert_null (scores);
}

static void
load_done_cb (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_infer_session_load_finish (DC_INFER_SESSION (source), result, &error));
  g_assert_no_error (error);
  *(gboolean *) user_data = TRUE;
}

static void
progress_cb (DcInferSession *session, guint64 done, guint64 total, guint *count)
{
  g_assert_cmpuint (done, <=, total);
  (*count)++;
}

static gboolean
is_true (gpointer flag)
{
  return *(gboolean *) flag;
}

/* Prompts submitted before the weights are loaded wait for the load, then
 * run in order; load-progress comes on the creator's context. */
static void
test_prompts_wait_for_load (Fixture *f, gconstpointer data)
{
  DcInferFakeModel fake = {
    .vocab_size = VOCAB, .max_positions = 256, .eos_id = 0, .bos_id = 0,
    .forward = fake_forward, .user_data = &f->fake, .load_later = TRUE,
  };
  DcInferSettings s = settings_with (4, 64);
  gboolean loaded = FALSE;
  guint progress = 0, a, b;

  g_clear_object (&f->session);
  f->session = _dc_infer_session_new_fake (load_tokenizer (), &fake);
  g_signal_connect (f->session, "started", G_CALLBACK (started_cb), f);
  g_signal_connect (f->session, "token", G_CALLBACK (token_cb), f);
  g_signal_connect (f->session, "finished", G_CALLBACK (finished_cb), f);
  g_signal_connect (f->session, "load-progress", G_CALLBACK (progress_cb), &progress);
  g_assert_false (dc_infer_session_is_loaded (f->session));

  a = dc_infer_session_submit (f->session, "first", &s);
  b = dc_infer_session_submit (f->session, "second", &s);
  g_assert_cmpuint (dc_infer_session_get_queue_length (f->session), ==, 2);
  while (g_main_context_iteration (f->context, FALSE))
    ;
  g_assert_cmpuint (f->seen->len, ==, 0);
  g_assert_cmpuint (f->fake.calls, ==, 0);

  dc_infer_session_load_async (f->session, NULL, load_done_cb, &loaded);
  g_assert_true (dc_test_wait_until (is_true, &loaded, WAIT_MS));
  g_assert_true (dc_infer_session_is_loaded (f->session));
  wait_for (f, 'f', b, 1);
  g_assert_cmpuint (progress, ==, 1);
  g_assert_cmpuint (count_seen (f, 't', a), ==, 4);
  g_assert_cmpuint (count_seen (f, 't', b), ==, 4);
  g_assert_cmpuint (g_array_index (f->seen, Seen, 0).prompt_id, ==, a);
}

/* Greedy: 9, 9, then 5 on the third call, whatever the ids. */
static gboolean
second_eos_forward (gpointer        user_data,
                    const guint32  *ids,
                    gsize           n_ids,
                    guint           start,
                    float          *logits,
                    GError        **error)
{
  guint *calls = user_data;

  for (guint k = 0; k < VOCAB; k++)
    logits[k] = -100.0f;
  logits[++*calls >= 3 ? 5 : 9] = 10.0f;
  return TRUE;
}

/* A model that lists several end-of-text ids (Llama 3.1 lists three) stops
 * a turn at any of them, not only the first: here the second, id 5, ends
 * the turn after two tokens of the ten asked for. With the first id alone
 * the turn ran to its ten tokens. */
static void
test_any_eos_stops (Fixture *f, gconstpointer data)
{
  guint calls = 0;
  DcInferFakeModel fake = {
    .vocab_size = VOCAB, .max_positions = 256, .eos_id = 0, .bos_id = 0,
    .n_eos_ids = 2, .eos_ids = { 0, 5 },
    .forward = second_eos_forward, .user_data = &calls,
  };
  DcInferSettings s = settings_with (10, 64);
  guint id;

  g_clear_object (&f->session);
  f->session = _dc_infer_session_new_fake (load_tokenizer (), &fake);
  g_signal_connect (f->session, "started", G_CALLBACK (started_cb), f);
  g_signal_connect (f->session, "token", G_CALLBACK (token_cb), f);
  g_signal_connect (f->session, "finished", G_CALLBACK (finished_cb), f);
  id = dc_infer_session_submit (f->session, "hello", &s);
  wait_for (f, 'f', id, 1);
  g_assert_cmpuint (count_seen (f, 't', id), ==, 2);
  g_clear_object (&f->session);   /* joins the thread before CALLS goes */
}

/* ---- draft spans --------------------------------------------------------- */

typedef struct
{
  guint calls;        /* forward calls: laps of a ring */
  guint positions;    /* positions computed */
} Cycle;

/* A model that mostly cycles through 7 ids (200 + (last·3 + 1) mod 7) with
 * noise that depends on the position: greedy text repeats, so draft spans
 * are proposed and accepted; sampled text leaves the cycle now and then,
 * so spans are also rejected part-way. */
static void
cycle_logits (guint32  last,
              guint    position,
              float   *logits)
{
  for (guint k = 0; k < VOCAB; k++)
    logits[k] = 0.7f * dc_rng_normal (5, 11, (guint64) position << 20 | k);
  logits[200 + (last * 3 + 1) % 7] += 9.0f;
  logits[0] = -100.0f;
}

static gboolean
cycle_forward (gpointer        user_data,
               const guint32  *ids,
               gsize           n_ids,
               guint           start,
               float          *logits,
               GError        **error)
{
  Cycle *cycle = user_data;

  cycle->calls++;
  cycle->positions += (guint) n_ids;
  if (logits != NULL)
    cycle_logits (ids[n_ids - 1], start + (guint) n_ids - 1, logits);
  return TRUE;
}

static gboolean
cycle_forward_rows (gpointer        user_data,
                    const guint32  *ids,
                    gsize           n_ids,
                    guint           start,
                    float          *logits,
                    GError        **error)
{
  Cycle *cycle = user_data;

  cycle->calls++;
  cycle->positions += (guint) n_ids;
  for (gsize i = 0; i < n_ids; i++)
    cycle_logits (ids[i], start + (guint) i, logits + i * VOCAB);
  return TRUE;
}

static void
draft_count_cb (DcInferSession *session, guint id, guint proposed, guint accepted,
                guint *counts)
{
  counts[0] += proposed;
  counts[1] += accepted;
}

/* 40 tokens of the cycle model with DRAFT_SPAN; the ids, the forward calls
 * and the draft counts [proposed, accepted]. */
static GArray *
run_cycle (Fixture  *f,
           guint     draft_span,
           guint     temperature,
           gboolean  rows,
           guint    *calls,
           guint    *counts)
{
  Cycle cycle = { 0 };
  DcInferFakeModel fake = {
    .vocab_size = VOCAB, .max_positions = 256, .eos_id = 0, .bos_id = 0,
    .forward = cycle_forward, .forward_rows = rows ? cycle_forward_rows : NULL,
    .user_data = &cycle,
  };
  DcInferSettings s = settings_with (40, 64);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  guint id;

  s.draft_span = draft_span;
  s.temperature = temperature;
  s.seed = 99;
  g_clear_object (&f->session);
  g_array_set_size (f->seen, 0);
  f->session = _dc_infer_session_new_fake (load_tokenizer (), &fake);
  g_signal_connect (f->session, "token", G_CALLBACK (token_cb), f);
  g_signal_connect (f->session, "finished", G_CALLBACK (finished_cb), f);
  g_signal_connect (f->session, "draft", G_CALLBACK (draft_count_cb), counts);
  id = dc_infer_session_submit (f->session, "The ring of devices", &s);
  wait_for (f, 'f', id, 1);
  g_assert_null (find_finished (f, id)->text);
  for (guint i = 0; i < f->seen->len; i++)
    if (g_array_index (f->seen, Seen, i).kind == 't')
      g_array_append_val (ids, g_array_index (f->seen, Seen, i).value);
  g_clear_object (&f->session);   /* joins the thread before CYCLE goes */
  *calls = cycle.calls;
  return ids;
}

/* A draft span changes how many forward calls a text takes, never the
 * text: the same ids with and without spans, greedy and sampled, and each
 * accepted token is one call (one lap of a ring) saved. Spans scored a
 * position at a time (a forward without rows) give the same ids too. */
static void
test_draft_span (Fixture *f, gconstpointer data)
{
  const guint temperatures[] = { 0, 80 };

  for (guint t = 0; t < G_N_ELEMENTS (temperatures); t++)
    {
      guint plain_calls = 0, draft_calls = 0, emulated_calls = 0;
      guint none[2] = { 0, 0 }, counts[2] = { 0, 0 }, emulated[2] = { 0, 0 };
      g_autoptr(GArray) plain = run_cycle (f, 0, temperatures[t], TRUE, &plain_calls, none);
      g_autoptr(GArray) drafted = run_cycle (f, 8, temperatures[t], TRUE, &draft_calls, counts);
      g_autoptr(GArray) slow = run_cycle (f, 8, temperatures[t], FALSE, &emulated_calls,
                                          emulated);

      g_assert_cmpuint (plain->len, ==, 40);
      g_assert_cmpuint (drafted->len, ==, plain->len);
      g_assert_cmpmem (drafted->data, drafted->len * 4, plain->data, plain->len * 4);
      g_assert_cmpmem (slow->data, slow->len * 4, plain->data, plain->len * 4);
      g_assert_cmpuint (none[0], ==, 0);
      g_assert_cmpuint (counts[1], >, 0);
      g_assert_cmpuint (counts[1], <=, counts[0]);
      g_assert_cmpuint (plain_calls - draft_calls, ==, counts[1]);
      g_assert_cmpuint (emulated[1], ==, counts[1]);
      if (temperatures[t] > 0)
        g_assert_cmpuint (counts[1], <, counts[0]);   /* some span was cut short */
    }
}

static void
test_settings_defaults (void)
{
  DcInferSettings s;
  g_autoptr(GError) error = NULL;

  dc_infer_settings_init_default (&s);
  g_assert_cmpuint (s.n_tokens, ==, 60);
  g_assert_cmpuint (s.context, ==, 64);
  g_assert_cmpuint (s.temperature, ==, 0);
  g_assert_cmpuint (s.seed, ==, 1234);
  g_assert_cmpint (s.output, ==, DC_INFER_OUTPUT_FREE);
  g_assert_cmpuint (s.draft_span, ==, 0);
  s.draft_span = DC_INFER_MAX_DRAFT_SPAN + 1;
  g_assert_false (dc_infer_settings_validate (&s, 64, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);
  s.draft_span = DC_INFER_MAX_DRAFT_SPAN;
  g_assert_true (dc_infer_settings_validate (&s, 64, &error));
  g_assert_false (dc_infer_settings_validate (&s, 63, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, func) \
  g_test_add ("/infer/session/" path, Fixture, NULL, fixture_setup, func, fixture_teardown)
  ADD ("streaming-order-and-thread", test_streaming_order_and_thread);
  ADD ("signals-only-on-creator-context", test_signals_only_on_creator_context);
  ADD ("queue-and-stop", test_queue_and_stop);
  ADD ("clear-queue", test_clear_queue);
  ADD ("json-output", test_json_output);
  ADD ("seeded-runs-repeat", test_seeded_runs_repeat);
  ADD ("context-window", test_context_window);
  ADD ("refusals", test_refusals);
  ADD ("score", test_score);
  ADD ("prompts-wait-for-load", test_prompts_wait_for_load);
  ADD ("any-eos-stops", test_any_eos_stops);
  ADD ("draft-span", test_draft_span);
#undef ADD
  g_test_add_func ("/infer/session/settings-defaults", test_settings_defaults);
  return g_test_run ();
}
