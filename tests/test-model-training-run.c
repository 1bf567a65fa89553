/* test-model-training-run.c: DcTrainingRun, the worker-thread training run
 * behind the Train view.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "dc-test-utils.h"
#include "model/dc-gpt-model.h"
#include "data/dc-dataset.h"
#include "model/dc-model-error.h"
#include "train/dc-training-run.h"
#include "train/dc-training-run-private.h"

#define TIMEOUT_MS 120000

/* The hog test's repetitions: enough that a report racing the owner's
 * ownership of its context (the fault this guards against) shows up, few
 * enough that 2-step runs finish well under a minute on two loaded cores. */
#define N_HOG_ROUNDS 200

typedef struct
{
  GThread *owner;           /* the thread whose context the run reports to */
  guint    n_steps_seen;
  guint64  last_step;
  gboolean steps_in_order;
  guint    n_logs;
  gint     n_foreign;       /* atomic: reports delivered on another thread */
} Seen;

static void
seen_init (Seen *seen)
{
  *seen = (Seen) { g_thread_self (), 0, 0, TRUE, 0, 0 };
}

static void
step_cb (DcTrainingRun *run,
         guint64        step,
         double         loss,
         double         tokens_per_s,
         const char    *hash,
         Seen          *seen)
{
  /* Counted, not asserted: an assertion on the worker thread would abort
   * with a less useful message than the count's check on the main thread. */
  if (g_thread_self () != seen->owner)
    {
      g_atomic_int_inc (&seen->n_foreign);
      return;
    }
  if (step != seen->last_step + 1)
    seen->steps_in_order = FALSE;
  seen->last_step = step;
  seen->n_steps_seen++;
  g_assert_true (loss > 0.0 && loss < 20.0);
  g_assert_cmpfloat (tokens_per_s, >, 0.0);
  g_assert_cmpuint (strlen (hash), ==, 16);
}

static void
log_cb (DcTrainingRun *run,
        const char    *line,
        Seen          *seen)
{
  if (g_thread_self () != seen->owner)
    {
      g_atomic_int_inc (&seen->n_foreign);
      return;
    }
  seen->n_logs++;
}

static void
connect_seen (DcTrainingRun *run,
              Seen          *seen)
{
  seen_init (seen);
  g_signal_connect (run, "step", G_CALLBACK (step_cb), seen);
  g_signal_connect (run, "log", G_CALLBACK (log_cb), seen);
}

static gboolean
is_ready (gpointer user_data)
{
  return dc_training_run_get_state (DC_TRAINING_RUN (user_data)) == DC_TRAINING_STATE_READY;
}

static gboolean
is_failed (gpointer user_data)
{
  return dc_training_run_get_state (DC_TRAINING_RUN (user_data)) == DC_TRAINING_STATE_FAILED;
}

static gboolean
is_done (gpointer user_data)
{
  return is_ready (user_data) || is_failed (user_data);
}

static gboolean
reached_step_1 (gpointer user_data)
{
  return dc_training_run_get_step (DC_TRAINING_RUN (user_data)) >= 1;
}

static DcTrainingRequest
small_request (void)
{
  DcTrainingRequest request = {
    .width = 16, .seq = 16, .batch = 2, .steps = 100, .lr_x1000 = 10, .seed = 7,
    .n_threads = 2,
  };

  request.data = g_test_build_filename (G_TEST_DIST, "data", "train-corpus.txt", NULL);
  return request;
}

/* One run that stops after @stop_at steps (the deterministic stop: no race
 * with the worker), then a save and a load that restore the same weights.
 * Everything the run reported must have arrived on this thread. */
static void
run_save_load_once (const char *dir,
                    guint       stop_at,
                    gboolean    thorough)
{
  g_autoptr(DcTrainingRun) run = dc_training_run_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *pt = g_build_filename (dir, "model.pt", NULL);
  g_autofree char *hf = g_build_filename (dir, "hf", NULL);
  g_autofree char *config = g_build_filename (hf, "config.json", NULL);
  g_autofree char *hash_at_stop = NULL;
  DcTrainingRequest request = small_request ();
  Seen seen;

  connect_seen (run, &seen);
  request.stop_at = stop_at;

  /* Nothing to save or generate from before a model exists. */
  g_assert_false (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);

  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_RUNNING);
  g_assert_cmpuint (dc_training_run_get_steps (run), ==, 100);

  /* A second start and a save are refused while the worker runs (it has
   * not finished: its last report waits for this thread's context). */
  g_assert_false (dc_training_run_start (run, &request, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);

  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_assert_cmpstr (dc_training_run_get_message (run), ==, NULL);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);
  g_assert_cmpint (g_atomic_int_get (&seen.n_foreign), ==, 0);
  g_assert_cmpuint (dc_training_run_get_step (run), ==, stop_at);
  g_assert_cmpuint (seen.n_steps_seen, ==, stop_at);
  g_assert_true (seen.steps_in_order);
  g_assert_cmpuint (seen.n_logs, >=, 2);  /* the start line and the stop line */
  hash_at_stop = g_strdup (dc_training_run_get_hash (run));
  g_assert_nonnull (hash_at_stop);

  if (thorough)
    {
      g_autofree char *text = NULL;
      g_autofree char *text_again = NULL;

      /* Generation is reproducible with the same seed. */
      text = dc_training_run_generate (run, "The ", 20, 0.8f, 42, &error);
      g_assert_no_error (error);
      g_assert_nonnull (text);
      g_assert_cmpuint (strlen (text), >=, 20);
      text_again = dc_training_run_generate (run, "The ", 20, 0.8f, 42, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (text, ==, text_again);
    }

  g_assert_true (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_no_error (error);
  if (thorough)
    {
      g_assert_true (dc_training_run_export_hf (run, hf, &error));
      g_assert_no_error (error);
      g_assert_true (g_file_test (config, G_FILE_TEST_IS_REGULAR));

      /* A bad file leaves the model in place. */
      g_assert_false (dc_training_run_load_checkpoint (run, config, &error));
      g_assert_nonnull (error);
      g_clear_error (&error);
      g_assert_cmpstr (dc_training_run_get_hash (run), ==, hash_at_stop);
    }

  /* The good one restores the same weights. */
  g_assert_true (dc_training_run_load_checkpoint (run, pt, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (dc_training_run_get_hash (run), ==, hash_at_stop);
  g_assert_cmpuint (dc_training_run_get_step (run), ==, stop_at);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);
  g_assert_cmpint (g_atomic_int_get (&seen.n_foreign), ==, 0);

  g_free (request.data);
  /* No queued report holds the run: the last reference is this one. */
  g_assert_finalize_object (g_steal_pointer (&run));
}

static void
test_run_stop_save_load (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);

  run_save_load_once (dir, 20, TRUE);
  dc_test_remove_tree (dir);
}

/* dc_training_run_stop: the run ends READY after the step in progress. The
 * run is as long as runs may be, so the stop lands long before its end. */
static void
test_stop (void)
{
  g_autoptr(DcTrainingRun) run = dc_training_run_new ();
  g_autoptr(GError) error = NULL;
  DcTrainingRequest request = small_request ();
  Seen seen;
  guint64 stopped_at;

  connect_seen (run, &seen);
  request.steps = DC_TRAIN_STEPS_MAX;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  dc_training_run_stop (run);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_STOPPING);
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);

  stopped_at = dc_training_run_get_step (run);
  g_assert_cmpuint (stopped_at, <, DC_TRAIN_STEPS_MAX);
  g_assert_cmpuint (seen.n_steps_seen, ==, stopped_at);
  g_assert_true (seen.steps_in_order);
  g_assert_cmpint (g_atomic_int_get (&seen.n_foreign), ==, 0);
  g_free (request.data);
}

/* A context that nobody owns between iterations, iterated by hand only
 * when something is pending. On the global default context (the worker
 * has no thread-default, so it is the worker's too) g_main_context_invoke
 * would run the reports at once on the worker, which then emits "step" off
 * this thread and joins itself at the end. Every report must wait for this
 * thread instead, and the run must end READY. */
static void
check_unowned_context (GMainContext *context)
{
  g_autoptr(GError) error = NULL;
  DcTrainingRequest request = small_request ();
  DcTrainingRun *run;
  gpointer weak = NULL;
  gint64 deadline;
  Seen seen;

  run = dc_training_run_new ();
  weak = run;
  g_object_add_weak_pointer (G_OBJECT (run), &weak);
  connect_seen (run, &seen);
  request.stop_at = 20;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);

  /* The 1 ms pause only keeps this loop from spinning; it leaves the
   * context unowned nearly all the time, which is the case under test. The
   * result does not depend on it. */
  deadline = g_get_monotonic_time () + (gint64) TIMEOUT_MS * 1000;
  while (!is_done (run))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      if (g_main_context_pending (context))
        g_main_context_iteration (context, FALSE);
      else
        g_usleep (1000);
    }

  g_assert_cmpint (g_atomic_int_get (&seen.n_foreign), ==, 0);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);
  g_assert_cmpuint (dc_training_run_get_step (run), ==, 20);
  g_assert_cmpuint (seen.n_steps_seen, ==, 20);
  g_assert_true (seen.steps_in_order);
  g_assert_cmpuint (seen.n_logs, >=, 2);

  g_object_unref (run);
  while (g_main_context_iteration (context, FALSE))
    ;
  g_assert_null (weak);
  g_free (request.data);
}

static void
test_unowned_default_context (void)
{
  check_unowned_context (g_main_context_default ());
}

/* The same with a context of the test's own, pushed as thread-default. */
static void
test_unowned_pushed_context (void)
{
  g_autoptr(GMainContext) context = g_main_context_new ();

  g_main_context_push_thread_default (context);
  check_unowned_context (context);
  g_main_context_pop_thread_default (context);
}

static gpointer
hog_worker (gpointer user_data)
{
  gint *stop = user_data;
  volatile guint64 spins = 0;

  while (!g_atomic_int_get (stop))
    spins++;
  return NULL;
}

/* The run/stop/save/load cycle, N_HOG_ROUNDS times while one spinning
 * thread per core competes for the CPU: preemption then lands anywhere,
 * including between the test's main-context iterations, where a report
 * posted with g_main_context_invoke would run on the worker. */
static void
test_repeat_under_load (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);
  g_autoptr(GPtrArray) hogs = g_ptr_array_new ();
  gint stop = 0;

  for (guint i = 0; i < MAX (g_get_num_processors (), 1); i++)
    g_ptr_array_add (hogs, g_thread_new ("test-hog", hog_worker, &stop));

  for (guint round = 0; round < N_HOG_ROUNDS; round++)
    run_save_load_once (dir, 2, FALSE);

  g_atomic_int_set (&stop, 1);
  for (guint i = 0; i < hogs->len; i++)
    g_thread_join (hogs->pdata[i]);
  dc_test_remove_tree (dir);
}

static void
test_bad_requests (void)
{
  g_autoptr(DcTrainingRun) run = dc_training_run_new ();
  g_autoptr(GError) error = NULL;
  DcTrainingRequest request = small_request ();
  DcTrainingRequest wide = request;
  DcTrainingRequest missing = request;

  wide.width = 1000;
  g_assert_false (dc_training_run_start (run, &wide, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);

  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_IDLE);

  /* The worker reads the data: a missing file ends the run as FAILED, saying why. */
  missing.data = (char *) "/nonexistent/corpus.txt";
  g_assert_true (dc_training_run_start (run, &missing, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (is_failed, run, TIMEOUT_MS));
  g_assert_nonnull (strstr (dc_training_run_get_message (run), "/nonexistent/corpus.txt"));
  g_assert_null (dc_training_run_get_hash (run));
  g_free (request.data);
}

/* A stand-in Hugging Face hub: every request gets 200 and an empty JSON
 * array (a dataset with no files), enough for a client to read a body. */
static void
empty_hub_cb (SoupServer        *server,
              SoupServerMessage *msg,
              const char        *path,
              GHashTable        *query,
              gpointer           user_data)
{
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_STATIC, "[]", 2);
  soup_server_message_set_status (msg, 200, NULL);
}

/* The worker reads a dataset through a DcHfClient it makes; the client's
 * bytes-received notifications go to its thread-default context. They must
 * not land on the global default context (the main thread's, and the
 * worker's default when it pushes none): nothing of the worker's is touched
 * there. The run reports to a pushed context, and the hub is served there,
 * so the global default context must have nothing pending afterwards. */
static void
test_worker_objects_stay_off_main (void)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(SoupServer) server = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr(DcTrainingRun) run = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  DcTrainingRequest request = small_request ();
  GSList *uris;

  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_main_context_push_thread_default (context);
  server = soup_server_new (NULL, NULL);
  soup_server_add_handler (server, NULL, empty_hub_cb, NULL, NULL);
  soup_server_listen (server, address, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (server);
  url = g_uri_to_string (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

  g_setenv ("HF_ENDPOINT", url, TRUE);
  g_free (request.data);
  request.data = g_strdup ("test/empty");
  request.stop_at = 1;
  run = dc_training_run_new ();
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_unsetenv ("HF_ENDPOINT");
  g_test_message ("run ended %s: %s",
                  is_ready (run) ? "READY" : "FAILED",
                  dc_training_run_get_message (run) != NULL
                  ? dc_training_run_get_message (run) : "built-in corpus");

  g_assert_false (g_main_context_pending (g_main_context_default ()));
  g_assert_finalize_object (g_steal_pointer (&run));
  soup_server_disconnect (server);
  g_main_context_pop_thread_default (context);
  g_free (request.data);
}

typedef struct
{
  gpointer run;
  guint    n_emitted;
} Emitted;

/* An emission hook sees "step" and "log" even after dispose has destroyed
 * the run's handlers: it is how the test sees an emission that should not
 * happen. */
static gboolean
count_emission_hook (GSignalInvocationHint *hint,
                     guint                  n_values,
                     const GValue          *values,
                     gpointer               user_data)
{
  Emitted *emitted = user_data;

  if (g_value_get_object (&values[0]) == emitted->run)
    emitted->n_emitted++;
  return TRUE;
}

static void
test_dispose_mid_run (void)
{
  DcTrainingRun *run = dc_training_run_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);
  g_autofree char *pt = g_build_filename (dir, "model.pt", NULL);
  DcTrainingRequest request = small_request ();
  Emitted emitted = { run, 0 };
  gpointer weak = run;
  guint step_id = g_signal_lookup ("step", DC_TYPE_TRAINING_RUN);
  guint log_id = g_signal_lookup ("log", DC_TYPE_TRAINING_RUN);
  gulong step_hook, log_hook;
  guint emitted_at_dispose;

  g_object_add_weak_pointer (G_OBJECT (run), &weak);
  step_hook = g_signal_add_emission_hook (step_id, 0, count_emission_hook, &emitted, NULL);
  log_hook = g_signal_add_emission_hook (log_id, 0, count_emission_hook, &emitted, NULL);

  /* As long as runs may be: the worker is mid-run when dispose comes. */
  request.steps = DC_TRAIN_STEPS_MAX;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (reached_step_1, run, TIMEOUT_MS));
  g_assert_cmpuint (emitted.n_emitted, >=, 2);  /* the start line and step 1 */

  /* Dispose stops and joins the worker: once it returns, the model is no
   * longer the worker's and may be saved (a running worker's is refused).
   * The test holds its context meanwhile, as a main loop does while it
   * dispatches: the worker's last reports are queued, not run at once. */
  g_assert_true (g_main_context_acquire (NULL));
  g_object_run_dispose (G_OBJECT (run));
  g_main_context_release (NULL);
  g_assert_true (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_no_error (error);
  emitted_at_dispose = emitted.n_emitted;  /* the save's own log line */

  /* The worker's reports queued before the join (its last step, its stop
   * line, its end) are dropped, never delivered, and do not keep the run. */
  g_object_unref (run);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_null (weak);
  g_assert_cmpuint (emitted.n_emitted, ==, emitted_at_dispose);

  g_signal_remove_emission_hook (step_id, step_hook);
  g_signal_remove_emission_hook (log_id, log_hook);
  g_free (request.data);
  dc_test_remove_tree (dir);
}


static void
collect_line_cb (DcTrainingRun *run,
                 const char    *line,
                 GPtrArray     *lines)
{
  g_ptr_array_add (lines, g_strdup (line));
}

static gboolean
has_line_containing (GPtrArray  *lines,
                     const char *needle)
{
  for (guint i = 0; i < lines->len; i++)
    if (strstr (lines->pdata[i], needle) != NULL)
      return TRUE;
  return FALSE;
}

/* The backend comes from the front end's context: a run made for a context
 * of cpu-scalar sends its products there and says so (before the training
 * layer, the app's runs always ran on the CPU whatever the preference). */
static void
test_context_backend (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcContext) context = dc_context_new (DC_BACKEND_CPU_SCALAR, &error);
  g_autoptr(DcTrainingRun) run = NULL;
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);
  DcTrainingRequest request = small_request ();
  g_autofree char *hash_scalar = NULL;

  g_assert_no_error (error);
  g_assert_cmpint (dc_context_get_backend_kind (context), ==, DC_BACKEND_CPU_SCALAR);
  g_assert_cmpuint (strlen (dc_context_get_probe_hash (context)), ==, 64);
  run = dc_training_run_new_for_context (context);
  g_signal_connect (run, "log", G_CALLBACK (collect_line_cb), lines);
  request.stop_at = 2;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);
  g_assert_true (has_line_containing (lines, "multiply-adds on cpu-scalar"));
  hash_scalar = g_strdup (dc_training_run_get_hash (run));

  /* Every run of the same DcTrainingRun keeps the context's backend. */
  g_ptr_array_set_size (lines, 0);
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_assert_true (has_line_containing (lines, "multiply-adds on cpu-scalar"));
  g_assert_cmpstr (dc_training_run_get_hash (run), ==, hash_scalar);
  g_clear_object (&run);

  /* Every backend computes the same bits. */
  run = dc_training_run_new ();
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_assert_cmpstr (dc_training_run_get_hash (run), ==, hash_scalar);
  g_free (request.data);
}

/* Start after Load continues the loaded model, as the CLI's --resume does:
 * 2 steps, save, load into a new run, 2 more steps equal 4 straight steps,
 * and the first step reported is 3. Before the training layer, Start threw
 * the loaded model away and began again at step 1. */
static void
test_start_after_load (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);
  g_autofree char *pt = g_build_filename (dir, "half.pt", NULL);
  g_autofree char *hash_straight = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcTrainingRun) straight = dc_training_run_new ();
  g_autoptr(DcTrainingRun) first = dc_training_run_new ();
  g_autoptr(DcTrainingRun) second = dc_training_run_new ();
  DcTrainingRequest request = small_request ();
  Seen seen;

  request.stop_at = 4;
  g_assert_true (dc_training_run_start (straight, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, straight, TIMEOUT_MS));
  g_assert_cmpuint (dc_training_run_get_step (straight), ==, 4);
  hash_straight = g_strdup (dc_training_run_get_hash (straight));

  request.stop_at = 2;
  g_assert_true (dc_training_run_start (first, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, first, TIMEOUT_MS));
  g_assert_true (dc_training_run_save_checkpoint (first, pt, &error));
  g_assert_no_error (error);

  g_assert_true (dc_training_run_load_checkpoint (second, pt, &error));
  g_assert_no_error (error);
  connect_seen (second, &seen);
  seen.last_step = 2;  /* the next step reported must be 3 */
  request.stop_at = 4;
  g_assert_true (dc_training_run_start (second, &request, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (is_done, second, TIMEOUT_MS));
  g_assert_cmpint (dc_training_run_get_state (second), ==, DC_TRAINING_STATE_READY);
  g_assert_true (seen.steps_in_order);
  g_assert_cmpuint (seen.n_steps_seen, ==, 2);
  g_assert_cmpuint (dc_training_run_get_step (second), ==, 4);
  g_assert_cmpstr (dc_training_run_get_hash (second), ==, hash_straight);
  g_free (request.data);
  dc_test_remove_tree (dir);
}

static void
async_done_cb (GObject      *object,
               GAsyncResult *result,
               gpointer      user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (result);
}

static gboolean
has_result (gpointer user_data)
{
  return *(GAsyncResult **) user_data != NULL;
}

static void
generated_cb (DcTrainingRun *run,
              GBytes        *bytes,
              GByteArray    *all)
{
  g_byte_array_append (all, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
}

/* The _async calls work on a snapshot: a save started before a run keeps
 * the weights of that moment, whatever the run does meanwhile; streamed
 * generation equals the synchronous one; a cancelled load keeps the model;
 * a saved file replaces its path only when the save was not cancelled. */
static void
test_async_snapshot (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);
  g_autofree char *pt = g_build_filename (dir, "before.pt", NULL);
  g_autofree char *other = g_build_filename (dir, "other.pt", NULL);
  g_autofree char *hash_before = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_async = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcTrainingRun) run = dc_training_run_new ();
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GByteArray) streamed = g_byte_array_new ();
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  DcTrainingRequest request = small_request ();

  request.stop_at = 2;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  hash_before = g_strdup (dc_training_run_get_hash (run));

  /* Save, then start training at once: the file holds step 2's weights. */
  dc_training_run_save_checkpoint_async (run, pt, NULL, async_done_cb, &result);
  request.stop_at = 4;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_true (dc_training_run_save_checkpoint_finish (run, result, &error));
  g_assert_no_error (error);
  g_clear_object (&result);
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_assert_cmpuint (dc_training_run_get_step (run), ==, 4);
  g_assert_cmpstr (dc_training_run_get_hash (run), !=, hash_before);
  {
    g_autoptr(DcTrainingRun) check = dc_training_run_new ();

    g_assert_true (dc_training_run_load_checkpoint (check, pt, &error));
    g_assert_no_error (error);
    g_assert_cmpstr (dc_training_run_get_hash (check), ==, hash_before);
    g_assert_cmpuint (dc_training_run_get_step (check), ==, 2);
  }

  /* Streamed generation: the same text as one call, sampled. */
  g_signal_connect (run, "generated", G_CALLBACK (generated_cb), streamed);
  text = dc_training_run_generate (run, "The ", 30, 0.8f, 42, &error);
  g_assert_no_error (error);
  dc_training_run_generate_async (run, "The ", 30, 0.8f, 42, NULL, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  text_async = dc_training_run_generate_finish (run, result, &error);
  g_assert_no_error (error);
  g_clear_object (&result);
  g_assert_cmpstr (text_async, ==, text);
  /* Every streamed byte arrived before the result (same context, posted
   * first). */
  g_assert_cmpuint (streamed->len, ==, 30);

  /* A cancelled load keeps the model; a cancelled save leaves no file. */
  g_cancellable_cancel (cancellable);
  dc_training_run_load_checkpoint_async (run, pt, cancellable, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_false (dc_training_run_load_checkpoint_finish (run, result, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_clear_object (&result);
  g_assert_cmpuint (dc_training_run_get_step (run), ==, 4);
  dc_training_run_save_checkpoint_async (run, other, cancellable, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_false (dc_training_run_save_checkpoint_finish (run, result, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_clear_object (&result);
  g_assert_false (g_file_test (other, G_FILE_TEST_EXISTS));

  g_free (request.data);
  dc_test_remove_tree (dir);
}

static void
record_thread_cb (gpointer thread,
                  gpointer user_data)
{
  g_atomic_pointer_set ((gpointer *) user_data, thread);
}

static void
fraction_cb (DcTrainingRun *run,
             GParamSpec    *pspec,
             GArray        *seen)
{
  double fraction = dc_training_run_get_job_fraction (run);

  g_array_append_val (seen, fraction);
}

/* The jobs' share of the main thread: Save and Export copy the model on
 * their own thread (the copy of a large model took 102 ms of the frame
 * clock), Save and Load report their progress, rising to 1; a cancelled
 * Export leaves no partial folder and the older export as it was. */
static void
test_jobs_off_main (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);
  g_autofree char *pt = g_build_filename (dir, "model.pt", NULL);
  g_autofree char *hf = g_build_filename (dir, "hf", NULL);
  g_autofree char *weights = g_build_filename (hf, "model.safetensors", NULL);
  g_autofree char *old_bytes = NULL, *new_bytes = NULL;
  gsize old_len = 0, new_len = 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcTrainingRun) run = dc_training_run_new ();
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GArray) fractions = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  DcTrainingRequest request = small_request ();
  gpointer copied_on = NULL;

  request.stop_at = 2;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  _dc_training_run_set_snapshot_hook (run, record_thread_cb, &copied_on);
  g_signal_connect (run, "notify::job-fraction", G_CALLBACK (fraction_cb), fractions);

  dc_training_run_save_checkpoint_async (run, pt, NULL, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_true (dc_training_run_save_checkpoint_finish (run, result, &error));
  g_assert_no_error (error);
  g_clear_object (&result);
  g_assert_nonnull (g_atomic_pointer_get (&copied_on));
  g_assert_true (g_atomic_pointer_get (&copied_on) != g_thread_self ());
  /* Reported on this thread, never backwards, ending at 1. */
  g_assert_cmpuint (fractions->len, >=, 1);
  for (guint i = 1; i < fractions->len; i++)
    g_assert_cmpfloat (g_array_index (fractions, double, i), >=,
                       g_array_index (fractions, double, i - 1));
  g_assert_cmpfloat (dc_training_run_get_job_fraction (run), ==, 1.0);

  g_array_set_size (fractions, 0);
  dc_training_run_load_checkpoint_async (run, pt, NULL, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_true (dc_training_run_load_checkpoint_finish (run, result, &error));
  g_assert_no_error (error);
  g_clear_object (&result);
  /* Reset to 0 at the start, then up to 1. */
  g_assert_cmpuint (fractions->len, >=, 2);
  g_assert_cmpfloat (g_array_index (fractions, double, 0), ==, 0.0);
  g_assert_cmpfloat (dc_training_run_get_job_fraction (run), ==, 1.0);

  /* An export, then a cancelled one over it. */
  copied_on = NULL;
  dc_training_run_export_hf_async (run, hf, NULL, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_true (dc_training_run_export_hf_finish (run, result, &error));
  g_assert_no_error (error);
  g_clear_object (&result);
  g_assert_true (g_atomic_pointer_get (&copied_on) != g_thread_self ());
  g_assert_true (g_file_get_contents (weights, &old_bytes, &old_len, &error));
  request.stop_at = 3;
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_cancellable_cancel (cancellable);
  dc_training_run_export_hf_async (run, hf, cancellable, async_done_cb, &result);
  g_assert_true (dc_test_wait_until (has_result, &result, TIMEOUT_MS));
  g_assert_false (dc_training_run_export_hf_finish (run, result, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_clear_object (&result);
  g_assert_true (g_file_get_contents (weights, &new_bytes, &new_len, &error));
  g_assert_cmpmem (new_bytes, new_len, old_bytes, old_len);
  {
    g_autoptr(GDir) listing = g_dir_open (dir, 0, NULL);
    const char *name;

    /* Only model.pt and hf: no hidden partial folder. */
    while ((name = g_dir_read_name (listing)) != NULL)
      g_assert_true (g_str_equal (name, "model.pt") || g_str_equal (name, "hf"));
  }

  g_free (request.data);
  dc_test_remove_tree (dir);
}

static guint n_fallback_logged;

static void
count_fallback_log_cb (const char     *log_domain,
                       GLogLevelFlags  log_level,
                       const char     *message,
                       gpointer        user_data)
{
  if (strstr (message, DC_DATASET_UNREACHABLE_MESSAGE) != NULL)
    n_fallback_logged++;
}

/* An unreachable dataset falls back to the built-in corpus: decided once
 * and logged once (the data layer's line), while the UI still gets its
 * "log" line. Before the training layer the run logged it a second time. */
static void
test_fallback_logged_once (void)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(SoupServer) server = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr(DcTrainingRun) run = NULL;
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  const char *domains[] = { "dc-data", "dc-train", "dc-model" };
  guint handlers[G_N_ELEMENTS (domains)];
  DcTrainingRequest request = small_request ();
  GSList *uris;

  g_main_context_push_thread_default (context);
  server = soup_server_new (NULL, NULL);
  soup_server_add_handler (server, NULL, empty_hub_cb, NULL, NULL);
  soup_server_listen (server, address, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (server);
  url = g_uri_to_string (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

  n_fallback_logged = 0;
  for (guint i = 0; i < G_N_ELEMENTS (domains); i++)
    handlers[i] = g_log_set_handler (domains[i], G_LOG_LEVEL_MESSAGE, count_fallback_log_cb, NULL);
  g_setenv ("HF_ENDPOINT", url, TRUE);
  g_free (request.data);
  request.data = g_strdup ("test/empty");
  request.stop_at = 1;
  run = dc_training_run_new ();
  g_signal_connect (run, "log", G_CALLBACK (collect_line_cb), lines);
  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_true (dc_test_wait_until (is_done, run, TIMEOUT_MS));
  g_unsetenv ("HF_ENDPOINT");
  for (guint i = 0; i < G_N_ELEMENTS (domains); i++)
    g_log_remove_handler (domains[i], handlers[i]);

  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);
  g_assert_cmpuint (n_fallback_logged, ==, 1);
  g_assert_true (has_line_containing (lines, DC_DATASET_UNREACHABLE_MESSAGE));
  g_clear_object (&run);
  soup_server_disconnect (server);
  g_main_context_pop_thread_default (context);
  g_free (request.data);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/model/training-run/run-stop-save-load", test_run_stop_save_load);
  g_test_add_func ("/dc/model/training-run/stop", test_stop);
  g_test_add_func ("/dc/model/training-run/unowned-default-context",
                   test_unowned_default_context);
  g_test_add_func ("/dc/model/training-run/unowned-pushed-context",
                   test_unowned_pushed_context);
  g_test_add_func ("/dc/model/training-run/repeat-under-load", test_repeat_under_load);
  g_test_add_func ("/dc/model/training-run/bad-requests", test_bad_requests);
  g_test_add_func ("/dc/model/training-run/worker-objects-stay-off-main",
                   test_worker_objects_stay_off_main);
  g_test_add_func ("/dc/model/training-run/dispose-mid-run", test_dispose_mid_run);
  g_test_add_func ("/dc/train/training-run/context-backend", test_context_backend);
  g_test_add_func ("/dc/train/training-run/start-after-load", test_start_after_load);
  g_test_add_func ("/dc/train/training-run/async-snapshot", test_async_snapshot);
  g_test_add_func ("/dc/train/training-run/jobs-off-main", test_jobs_off_main);
  g_test_add_func ("/dc/train/training-run/fallback-logged-once", test_fallback_logged_once);

  return g_test_run ();
}
