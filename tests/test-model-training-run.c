/* test-model-training-run.c: DcTrainingRun, the worker-thread training run
 * behind the Train view.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <glib/gstdio.h>

#include "dc-test-utils.h"
#include "model/dc-model-error.h"
#include "model/dc-training-run.h"

#define TIMEOUT_MS 120000

typedef struct
{
  guint    n_steps_seen;
  guint64  last_step;
  gboolean steps_in_order;
  guint    n_logs;
} Seen;

static void
step_cb (DcTrainingRun *run,
         guint64        step,
         double         loss,
         double         tokens_per_s,
         const char    *hash,
         Seen          *seen)
{
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
  seen->n_logs++;
}

static gboolean
reached_step_20 (gpointer user_data)
{
  return dc_training_run_get_step (DC_TRAINING_RUN (user_data)) >= 20;
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

static void
test_run_stop_save_load (void)
{
  g_autoptr(DcTrainingRun) run = dc_training_run_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dc-training-run-XXXXXX", NULL);
  g_autofree char *pt = g_build_filename (dir, "model.pt", NULL);
  g_autofree char *hf = g_build_filename (dir, "hf", NULL);
  g_autofree char *config = g_build_filename (hf, "config.json", NULL);
  g_autofree char *hash_at_stop = NULL;
  g_autofree char *text = NULL;
  g_autofree char *text_again = NULL;
  DcTrainingRequest request = small_request ();
  Seen seen = { 0, 0, TRUE, 0 };
  guint64 stopped_at;

  g_signal_connect (run, "step", G_CALLBACK (step_cb), &seen);
  g_signal_connect (run, "log", G_CALLBACK (log_cb), &seen);

  /* Nothing to save or generate from before a model exists. */
  g_assert_false (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);

  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_RUNNING);
  g_assert_cmpuint (dc_training_run_get_steps (run), ==, 100);

  /* A second start, a save and a load are refused while the worker runs. */
  g_assert_false (dc_training_run_start (run, &request, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_clear_error (&error);

  g_assert_true (dc_test_wait_until (reached_step_20, run, TIMEOUT_MS));
  dc_training_run_stop (run);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_STOPPING);
  g_assert_true (dc_test_wait_until (is_ready, run, TIMEOUT_MS));

  stopped_at = dc_training_run_get_step (run);
  g_assert_cmpuint (stopped_at, >=, 20);
  g_assert_cmpuint (stopped_at, <, 100);
  g_assert_cmpuint (seen.n_steps_seen, ==, stopped_at);
  g_assert_true (seen.steps_in_order);
  g_assert_cmpuint (seen.n_logs, >=, 2);  /* the start line and the stop line */
  hash_at_stop = g_strdup (dc_training_run_get_hash (run));
  g_assert_nonnull (hash_at_stop);

  /* Generation is reproducible with the same seed. */
  text = dc_training_run_generate (run, "The ", 20, 0.8f, 42, &error);
  g_assert_no_error (error);
  g_assert_nonnull (text);
  g_assert_cmpuint (strlen (text), >=, 20);
  text_again = dc_training_run_generate (run, "The ", 20, 0.8f, 42, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text, ==, text_again);

  g_assert_true (dc_training_run_save_checkpoint (run, pt, &error));
  g_assert_no_error (error);
  g_assert_true (dc_training_run_export_hf (run, hf, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (config, G_FILE_TEST_IS_REGULAR));

  /* A bad file leaves the model in place; the good one restores the same weights. */
  g_assert_false (dc_training_run_load_checkpoint (run, config, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
  g_assert_cmpstr (dc_training_run_get_hash (run), ==, hash_at_stop);

  g_assert_true (dc_training_run_load_checkpoint (run, pt, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (dc_training_run_get_hash (run), ==, hash_at_stop);
  g_assert_cmpuint (dc_training_run_get_step (run), ==, stopped_at);
  g_assert_cmpint (dc_training_run_get_state (run), ==, DC_TRAINING_STATE_READY);

  g_free (request.data);
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

static void
test_dispose_mid_run (void)
{
  DcTrainingRun *run = dc_training_run_new ();
  g_autoptr(GError) error = NULL;
  DcTrainingRequest request = small_request ();

  g_assert_true (dc_training_run_start (run, &request, &error));
  g_assert_no_error (error);
  /* Dropping the last reference mid-run stops and joins the worker. */
  g_object_run_dispose (G_OBJECT (run));
  g_object_unref (run);
  /* Reports still queued hold their own references and are dropped with the context. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_free (request.data);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/model/training-run/run-stop-save-load", test_run_stop_save_load);
  g_test_add_func ("/dc/model/training-run/bad-requests", test_bad_requests);
  g_test_add_func ("/dc/model/training-run/dispose-mid-run", test_dispose_mid_run);

  return g_test_run ();
}
