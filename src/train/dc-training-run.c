/* dc-training-run.c: a training run on this device, off the main thread.
 *
 * The run owns the model. While the worker thread trains, only it touches the
 * model; the main thread learns of each step through a queue of reports that
 * one idle source, attached to the context that started the run, drains on
 * that context's thread: it updates the properties, emits "step" and "log",
 * and joins the worker after its last report. Never g_main_context_invoke:
 * it runs the callback at once on the calling (worker) thread whenever
 * nobody owns the context, which then emits signals off the main thread and
 * joins the worker from itself. Checkpoints, export and generation need the
 * model, so they are refused while a run is in progress (the UI disables
 * them).
 *
 * A run is assembled by the training layer (dc-train-plan.h): Start turns
 * the request into a plan here, the worker prepares the session (data,
 * model, trainer) and steps it. The front end's DcContext gives the backend;
 * a loaded checkpoint is continued by the next Start.
 *
 * With a group (the context's, with connected devices), Start trains with
 * it instead: a group coordinator (dc-train-group.h) told that this device
 * starts sends the run's config to every admitted device connected then.
 * While nothing runs, another coordinator waits for someone else's config
 * (follow only), so that Start pressed on any device starts this one too.
 * The coordinators run on the main context and own their model; the run
 * relays their steps, notices and end as its own properties and signals.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-training-run.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include "data/dc-dataset.h"
#include "dc-train-group.h"
#include "model/dc-checkpoint.h"
#include "model/dc-generate.h"
#include "model/dc-hf-export.h"
#include "model/dc-kit-export.h"
#include "model/dc-model-error.h"
#include "dc-training-run-private.h"

struct _DcTrainingRun
{
  GObject          parent_instance;

  /* owned references */
  DcContext       *context_obj;    /* the front end's (nullable): the backend */
  DcTrainPlan     *plan;           /* the run being prepared; the worker's until the join */
  DcTrainSession  *session;        /* the last run's, or NULL; the model lives in it */
  DcGptModel      *loaded;         /* a loaded checkpoint's model when no session has one */
  GThread         *thread;
  GMainContext    *context;        /* where the worker reports */
  GCancellable    *cancellable;    /* the run's data reads; cancelled by stop */
  DcTrainGroup    *group_run;      /* the group run in progress or the last one (its model) */
  DcTrainGroup    *follower;       /* waits for another device's config while idle */

  /* reports from the worker, guarded by report_lock */
  GMutex           report_lock;
  GQueue           reports;        /* Report *, oldest first */
  GSource         *report_source;  /* the pending delivery on context, or NULL */

  /* copies of the idle model being taken by jobs (shared with them) */
  struct _SnapshotGate *gate;
  GFunc            snapshot_hook;  /* tests: called on the thread that copies */
  gpointer         snapshot_hook_data;

  /* state */
  DcTrainSettings  settings;
  DcTrainingState  state;
  guint64          step;
  double           loss;
  double           tokens_per_s;
  double           job_fraction;   /* of the Save, Load or Export in progress */
  char            *hash;
  char            *message;
  GError          *error;          /* the last run's failure (nullable) */
  gint             stop_requested; /* atomic */
  guint            n_devices;      /* devices in the last step: 1 alone */
  guint            group_running : 1;
  guint            disposed : 1;   /* no report is delivered after dispose */
};

enum {
  PROP_0,
  PROP_STATE,
  PROP_STEP,
  PROP_STEPS,
  PROP_LOSS,
  PROP_TOKENS_PER_SECOND,
  PROP_HASH,
  PROP_MESSAGE,
  PROP_CONTEXT,
  PROP_JOB_FRACTION,
  N_PROPS
};

enum {
  SIGNAL_STEP,
  SIGNAL_LOG,
  SIGNAL_AGREED,
  SIGNAL_GENERATED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (DcTrainingRun, dc_training_run, G_TYPE_OBJECT)

/* Save and Export copy the idle model on their job's thread, not on the
 * main thread (a copy of a large model takes longer than a frame). While a
 * copy is pending, nothing may change or free that model: every place that
 * does (Start, a loaded model installed, another device's run taking over)
 * first waits at the gate, which only blocks when the user acts within the
 * copy's time. Shared by the run and its jobs (an atomic refcounted box):
 * a job may outlive the run. */
typedef struct _SnapshotGate
{
  GMutex lock;
  GCond  done;
  guint  pending;  /* guarded by lock: copies not taken yet */
} SnapshotGate;

static void
gate_clear (SnapshotGate *gate)
{
  g_mutex_clear (&gate->lock);
  g_cond_clear (&gate->done);
}

static SnapshotGate *
gate_new (void)
{
  SnapshotGate *gate = g_atomic_rc_box_new0 (SnapshotGate);

  g_mutex_init (&gate->lock);
  g_cond_init (&gate->done);
  return gate;
}

static void
gate_unref (SnapshotGate *gate)
{
  g_atomic_rc_box_release_full (gate, (GDestroyNotify) gate_clear);
}

static void
gate_enter (SnapshotGate *gate)
{
  g_mutex_lock (&gate->lock);
  gate->pending++;
  g_mutex_unlock (&gate->lock);
}

static void
gate_leave (SnapshotGate *gate)
{
  g_mutex_lock (&gate->lock);
  g_assert (gate->pending > 0);
  gate->pending--;
  g_cond_broadcast (&gate->done);
  g_mutex_unlock (&gate->lock);
}

/* On the main thread, before the idle model changes or goes. */
static void
wait_for_snapshots (DcTrainingRun *self)
{
  g_mutex_lock (&self->gate->lock);
  while (self->gate->pending > 0)
    g_cond_wait (&self->gate->done, &self->gate->lock);
  g_mutex_unlock (&self->gate->lock);
}

/* Messages from the worker to the main thread. They hold no reference to
 * the run: a queued report must not keep it alive, and dispose drops them. */
typedef struct
{
  gboolean       finished;   /* the worker has returned */
  guint64        step;
  double         loss;
  double         tokens_per_s;
  char          *hash;
  char          *log;        /* a line for the log, or NULL */
  gboolean       logged;     /* @log is on the log already: only emit "log" */
  GError        *error;      /* why the run failed, when it did */
} Report;

static void
report_free (Report *report)
{
  g_free (report->hash);
  g_free (report->log);
  g_clear_error (&report->error);
  g_free (report);
}

DcTrainingRun *
dc_training_run_new (void)
{
  return g_object_new (DC_TYPE_TRAINING_RUN, NULL);
}

/**
 * dc_training_run_new_for_context:
 * @context: (nullable): the front end's context; runs use its backend
 *
 * Returns: (transfer full): a run
 */
DcTrainingRun *
dc_training_run_new_for_context (DcContext *context)
{
  return g_object_new (DC_TYPE_TRAINING_RUN, "context", context, NULL);
}

static void
set_state (DcTrainingRun   *self,
           DcTrainingState  state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

static void
set_message (DcTrainingRun *self,
             const char    *message)
{
  if (message == NULL)
    g_clear_error (&self->error);
  if (g_strcmp0 (self->message, message) == 0)
    return;
  g_free (self->message);
  self->message = g_strdup (message);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MESSAGE]);
}

static void
emit_log (DcTrainingRun *self,
          const char    *line)
{
  g_message ("%s", line);
  g_signal_emit (self, signals[SIGNAL_LOG], 0, line);
}

/* The worker owns the model while it runs: everything else waits. */
static gboolean
ensure_idle (DcTrainingRun  *self,
             GError        **error)
{
  if (self->thread == NULL && !self->group_running)
    return TRUE;
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
               "training is in progress: stop it first");
  return FALSE;
}

/* A new model (fresh or loaded): its step, length and hash change together. */
static void
announce_model (DcTrainingRun   *self,
                DcTrainingState  state)
{
  g_object_freeze_notify (G_OBJECT (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEP]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEPS]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_HASH]);
  set_message (self, NULL);
  set_state (self, state);
  g_object_thaw_notify (G_OBJECT (self));
}

static DcGptModel *
current_model (DcTrainingRun *self)
{
  if (self->session != NULL)
    return dc_train_session_get_model (self->session);
  if (self->group_run != NULL && dc_train_group_get_model (self->group_run) != NULL)
    return dc_train_group_get_model (self->group_run);
  return self->loaded;
}

static void arm_follower (DcTrainingRun *self);
static void install_loaded (DcTrainingRun         *self,
                            const char            *path,
                            DcGptModel            *model,
                            const DcTrainSettings *settings,
                            char                  *hash);

/* Joining a thread from itself deadlocks (GLib aborts with "Resource
 * deadlock avoided"): only the owner's thread joins, once the worker has
 * posted its last report. */
static void
join_worker (DcTrainingRun *self)
{
  g_assert (self->thread != g_thread_self ());
  g_clear_pointer (&self->thread, g_thread_join);
}

/* On the owner's thread, in order of posting. */
static void
deliver_report (DcTrainingRun *self,
                Report        *report)
{
  if (report->log != NULL && report->logged)
    g_signal_emit (self, signals[SIGNAL_LOG], 0, report->log);
  else if (report->log != NULL)
    emit_log (self, report->log);

  if (report->hash != NULL)
    {
      self->step = report->step;
      self->loss = report->loss;
      self->tokens_per_s = report->tokens_per_s;
      g_free (self->hash);
      self->hash = g_strdup (report->hash);
      g_object_freeze_notify (G_OBJECT (self));
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEP]);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LOSS]);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TOKENS_PER_SECOND]);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_HASH]);
      g_object_thaw_notify (G_OBJECT (self));
      g_signal_emit (self, signals[SIGNAL_STEP], 0, report->step, report->loss,
                     report->tokens_per_s, report->hash);
    }

  if (report->finished)
    {
      if (self->thread != NULL)
        join_worker (self);
      if (report->error != NULL)
        {
          g_autofree char *line = g_strdup_printf ("training failed: %s",
                                                   report->error->message);

          set_message (self, report->error->message);
          g_clear_error (&self->error);
          self->error = g_error_copy (report->error);
          emit_log (self, line);
          set_state (self, DC_TRAINING_STATE_FAILED);
        }
      else
        {
          set_message (self, NULL);
          set_state (self, DC_TRAINING_STATE_READY);
        }
      if (self->group_run == NULL)
        arm_follower (self);
    }
}

/* The idle source on the owner's context. Dispose destroys it (on that same
 * thread) before self goes away, so the borrowed pointer is valid here. */
static gboolean
deliver_reports_cb (gpointer user_data)
{
  g_autoptr(DcTrainingRun) self = g_object_ref (DC_TRAINING_RUN (user_data));
  GQueue reports = G_QUEUE_INIT;
  Report *report;

  g_mutex_lock (&self->report_lock);
  reports = self->reports;
  g_queue_init (&self->reports);
  g_clear_pointer (&self->report_source, g_source_unref);
  g_mutex_unlock (&self->report_lock);

  /* A handler may dispose the run (g_object_run_dispose): drop the rest. */
  while ((report = g_queue_pop_head (&reports)) != NULL)
    {
      if (!self->disposed)
        deliver_report (self, report);
      report_free (report);
    }
  return G_SOURCE_REMOVE;
}

/* Called on the worker thread: queues a report and, when none is pending,
 * attaches one idle source to the owner's context. Always a source: the
 * reports then run only where that context is iterated, whoever owns it. */
static void
post_report (DcTrainingRun *self,
             Report        *report)
{
  g_mutex_lock (&self->report_lock);
  g_queue_push_tail (&self->reports, report);
  if (self->report_source == NULL)
    {
      GSource *source = g_idle_source_new ();

      g_source_set_priority (source, G_PRIORITY_DEFAULT);
      g_source_set_callback (source, deliver_reports_cb, self, NULL);
      g_source_set_static_name (source, "[dc] training reports");
      self->report_source = source;
      g_source_attach (source, self->context);
    }
  g_mutex_unlock (&self->report_lock);
}

/* On the owner's thread, after the join: nothing can post any more. */
static void
drop_reports (DcTrainingRun *self)
{
  g_mutex_lock (&self->report_lock);
  if (self->report_source != NULL)
    g_source_destroy (self->report_source);
  g_clear_pointer (&self->report_source, g_source_unref);
  g_queue_clear_full (&self->reports, (GDestroyNotify) report_free);
  g_mutex_unlock (&self->report_lock);
}

static void
post_log (DcTrainingRun *self,
          const char    *format,
          ...) G_GNUC_PRINTF (2, 3);

static void
post_log (DcTrainingRun *self,
          const char    *format,
          ...)
{
  Report *report = g_new0 (Report, 1);
  va_list args;

  va_start (args, format);
  report->log = g_strdup_vprintf (format, args);
  va_end (args);
  post_report (self, report);
}

static gpointer
training_worker (gpointer user_data)
{
  DcTrainingRun *self = user_data;
  g_autoptr(GMainContext) worker_context = g_main_context_new ();
  Report *done = g_new0 (Report, 1);
  DcGptTrainer *trainer;
  DcGptModel *model;
  guint batch_tokens;

  /* Reading the data (a dataset: the network) and building the model happen
   * here, off the main thread. The main thread reads self->trainer only
   * after the join. Objects made here (the dataset's DcHfClient) send their
   * notifications to their thread-default context: make it this thread's
   * own, never iterated, rather than the global default that the main
   * thread runs, so that nothing of the worker's is touched there. */
  g_main_context_push_thread_default (worker_context);
  self->session = dc_train_plan_prepare (self->plan, self->cancellable, &done->error);
  g_main_context_pop_thread_default (worker_context);
  if (self->session == NULL)
    {
      done->finished = TRUE;
      post_report (self, done);
      return NULL;
    }
  if (dc_train_session_used_fallback (self->session))
    {
      /* The data layer logged it when it decided: tell the UI, not the log again. */
      Report *report = g_new0 (Report, 1);

      report->log = g_strdup (DC_DATASET_UNREACHABLE_MESSAGE);
      report->logged = TRUE;
      post_report (self, report);
    }
  /* The resident step (the GPU's gates passed) keeps the state on the
   * device: per step only the loss and the hash's piece digests leave it.
   * The model is read back below, before the main thread may read it. */
  trainer = dc_train_session_get_trainer (self->session);
  dc_gpt_trainer_set_lazy_host (trainer, TRUE);
  model = dc_train_session_get_model (self->session);
  batch_tokens = self->settings.batch * model->config.seq
                 * dc_train_session_get_n_ranks (self->session);

  while (model->step < self->plan->stop && !g_atomic_int_get (&self->stop_requested))
    {
      Report *report = g_new0 (Report, 1);
      gint64 start = g_get_monotonic_time ();
      float loss = 0.0f;

      if (!dc_train_session_step (self->session, &loss, &done->error))
        {
          g_free (report);
          break;
        }
      report->step = model->step;
      report->loss = loss;
      report->tokens_per_s = batch_tokens / MAX (1e-6, (g_get_monotonic_time () - start) / 1e6);
      dc_gpt_trainer_dup_hashes (trainer, &report->hash, NULL);
      post_report (self, report);
    }

  /* Current on the host before the main thread gets the session back (a
   * checkpoint, an export, the next run's start). */
  model = dc_train_session_get_model (self->session);
  if (done->error == NULL)
    {
      g_autofree char *hash = dc_gpt_model_dup_hash (model);

      post_log (self, "%s at step %" G_GUINT64_FORMAT ", weight hash %s",
                model->step >= self->settings.steps ? "training finished" : "training stopped",
                model->step, hash);
    }
  done->finished = TRUE;
  post_report (self, done);
  return NULL;
}

/* ---- training with the group ---- */

/* The group to train with at Start: the context's, in a room, with at
 * least one device connected (admission is the coordinator's to decide). */
static DcGroup *
active_group (DcTrainingRun *self)
{
  DcGroup *group = self->context_obj != NULL ? dc_context_get_group (self->context_obj) : NULL;
  DcGroupState state;

  if (group == NULL)
    return NULL;
  state = dc_group_get_state (group);
  if ((state != DC_GROUP_STATE_HOST && state != DC_GROUP_STATE_MEMBER)
      || dc_group_get_n_peers (group) == 0)
    return NULL;
  return group;
}

/* The idle follower: it only waits for a config (one that came made it the
 * run), so nothing else holds it and dropping it leaves the group's signals. */
static void
disarm (DcTrainingRun  *self,
        DcTrainGroup  **coordinator)
{
  if (*coordinator == NULL)
    return;
  g_signal_handlers_disconnect_by_data (*coordinator, self);
  g_clear_object (coordinator);
}

/* The run's config and settings, once the coordinator has its plan. */
static void
adopt_plan (DcTrainingRun *self,
            DcTrainGroup  *coordinator)
{
  const DcTrainPlan *plan = dc_train_group_get_plan (coordinator);

  if (plan == NULL || self->plan != NULL)
    return;
  self->plan = g_new0 (DcTrainPlan, 1);
  self->plan->config = plan->config;
  self->plan->settings = plan->settings;
  self->settings = plan->settings;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEPS]);
}

static void
group_step_cb (DcTrainGroup       *coordinator,
               guint64             step,
               double              loss,
               double              tokens_per_s,
               const char         *hash,
               const char * const *names,
               DcTrainingRun      *self)
{
  Report report = { 0 };

  adopt_plan (self, coordinator);
  self->n_devices = g_strv_length ((char **) names);
  report.step = step;
  report.loss = loss;
  report.tokens_per_s = tokens_per_s;
  report.hash = (char *) hash;
  deliver_report (self, &report);
}

static void
group_agreed_cb (DcTrainGroup  *coordinator,
                 guint64        step,
                 const char    *hash,
                 GVariant      *devices,
                 DcTrainingRun *self)
{
  g_autofree char *line = g_strdup_printf ("step %" G_GUINT64_FORMAT " (loss %.9g): %zu "
                                           "devices agree on weight hash %s", step,
                                           step == self->step ? self->loss : 0.0,
                                           g_variant_n_children (devices), hash);

  g_signal_emit (self, signals[SIGNAL_LOG], 0, line);
  g_signal_emit (self, signals[SIGNAL_AGREED], 0, step, hash, devices);
}

static void
group_notice_cb (DcTrainGroup  *coordinator,
                 const char    *kind,
                 const char    *peer,
                 const char    *text,
                 DcTrainingRun *self)
{
  g_signal_emit (self, signals[SIGNAL_LOG], 0, text);
  if (coordinator == self->group_run && g_str_equal (kind, "checkpoint"))
    {
      /* The group switched to a checkpoint: its settings are the run's from
       * the next step on (adopt_plan ()). */
      g_clear_pointer (&self->plan, dc_train_plan_free);
      return;
    }
  if (coordinator != self->follower || !g_str_equal (kind, "config"))
    return;

  /* Another device started a run: this one follows it with its model. */
  wait_for_snapshots (self);
  self->follower = NULL;
  g_clear_object (&self->group_run);
  self->group_run = coordinator;
  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_pointer (&self->loaded, dc_gpt_model_free);
  g_clear_pointer (&self->plan, dc_train_plan_free);
  g_clear_pointer (&self->hash, g_free);
  self->step = 0;
  self->group_running = TRUE;
  announce_model (self, DC_TRAINING_STATE_RUNNING);
}

static gboolean
unref_cb (gpointer user_data)
{
  g_object_unref (user_data);
  return G_SOURCE_REMOVE;
}

static void
group_finished_cb (DcTrainGroup  *coordinator,
                   const GError  *error,
                   DcTrainingRun *self)
{
  Report report = { 0 };

  if (coordinator == self->follower)
    {
      /* It refused a config (the run's data is a file, …): wait for the next. */
      self->follower = NULL;
      if (error != NULL)
        {
          g_autofree char *line = g_strdup_printf ("not following the run: %s", error->message);

          g_signal_emit (self, signals[SIGNAL_LOG], 0, line);
        }
      g_signal_handlers_disconnect_by_data (coordinator, self);
      /* Not now: its caller is still on the stack, using it. */
      g_idle_add_full (G_PRIORITY_DEFAULT_IDLE, unref_cb, coordinator, NULL);
      arm_follower (self);
      return;
    }
  if (coordinator != self->group_run)
    return;
  adopt_plan (self, coordinator);
  self->group_running = FALSE;
  if (error != NULL && !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    report.error = g_error_copy (error);
  else
    {
      DcGptModel *model = dc_train_group_get_model (coordinator);
      g_autofree char *hash = model != NULL ? dc_gpt_model_dup_hash (model) : NULL;

      if (model != NULL)
        report.log = g_strdup_printf ("%s at step %" G_GUINT64_FORMAT ", weight hash %s",
                                      error == NULL ? "training finished with the group"
                                                    : "training stopped",
                                      model->step, hash);
    }
  report.finished = TRUE;
  deliver_report (self, &report);
  g_free (report.log);
  g_clear_error (&report.error);
  arm_follower (self);
}

static DcTrainGroup *
new_coordinator (DcTrainingRun            *self,
                 DcGroup                  *group,
                 const DcTrainingRequest  *request,
                 DcTrainGroupStarter       starter)
{
  g_autoptr(DcMeshHello) hello = dc_context_new_hello (self->context_obj,
                                                       dc_group_get_name (group));
  DcTrainGroup *coordinator;

  /* As the application's group announces it (the coordinator's copy is
   * only compared and named, but stays true). */
  hello->memory = dc_train_group_announced_memory ();
  coordinator = dc_train_group_new (self->context_obj, group, hello, request,
                                                  FALSE, 1);

  dc_train_group_set_starter (coordinator, starter);
  g_signal_connect_object (coordinator, "step", G_CALLBACK (group_step_cb), self, 0);
  g_signal_connect_object (coordinator, "agreed", G_CALLBACK (group_agreed_cb), self, 0);
  g_signal_connect_object (coordinator, "notice", G_CALLBACK (group_notice_cb), self, 0);
  g_signal_connect_object (coordinator, "finished", G_CALLBACK (group_finished_cb), self, 0);
  return coordinator;
}

/* While idle in a group, wait for whoever presses Start elsewhere. */
static void
arm_follower (DcTrainingRun *self)
{
  DcGroup *group = self->context_obj != NULL ? dc_context_get_group (self->context_obj) : NULL;
  DcTrainingRequest request = { 0 };

  if (group == NULL || self->follower != NULL || self->disposed)
    return;
  self->follower = new_coordinator (self, group, &request, DC_TRAIN_GROUP_STARTER_FOLLOW);
  dc_train_group_start (self->follower);
}

static gboolean
start_with_group (DcTrainingRun            *self,
                  DcGroup                  *group,
                  const DcTrainingRequest  *request,
                  GError                  **error)
{
  g_autoptr(DcTrainPlan) plan = NULL;
  g_autoptr(DcTrainGroup) coordinator = NULL;

  wait_for_snapshots (self);
  /* The same checks as alone, before anything goes to the group. */
  if (self->loaded == NULL)
    {
      plan = dc_train_plan_new (request, NULL, NULL, error);
      if (plan == NULL)
        return FALSE;
    }
  coordinator = new_coordinator (self, group, request, DC_TRAIN_GROUP_STARTER_SELF);
  /* A loaded checkpoint is continued by the whole group: it goes with the
   * config, as the CLI's --resume (its size and settings, the view's steps). */
  if (self->loaded != NULL
      && !dc_train_group_set_resume (coordinator, self->loaded, &self->settings, error))
    return FALSE;

  disarm (self, &self->follower);
  g_clear_object (&self->group_run);
  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_pointer (&self->plan, dc_train_plan_free);
  g_clear_pointer (&self->hash, g_free);
  self->step = self->loaded != NULL ? self->loaded->step : 0;
  self->group_running = TRUE;
  emit_log (self, self->loaded != NULL
                  ? "training with the group: this device starts the run from the loaded "
                    "checkpoint for every device connected"
                  : "training with the group: this device starts the run for every device "
                    "connected");
  g_clear_pointer (&self->loaded, dc_gpt_model_free);
  /* Before the state's notify: the view asks then whether Load works. */
  self->group_run = g_steal_pointer (&coordinator);
  announce_model (self, DC_TRAINING_STATE_RUNNING);
  dc_train_group_start (self->group_run);
  return TRUE;
}

/**
 * dc_training_run_start:
 *
 * Trains a fresh model from @request (seeded weights) on a worker thread,
 * which first reads the data (a Hugging Face dataset falls back to the
 * built-in corpus when unreachable). Progress arrives as "step" signals on
 * the calling thread's thread-default main context (the global default when
 * it has none), only when that context is iterated, and always on the
 * thread that iterates it: use and dispose the run there. A failure while
 * preparing or training ends the run in the FAILED state with its message.
 *
 * Returns: %FALSE with @error set when the settings are invalid or a run is
 *   already in progress
 */
gboolean
dc_training_run_start (DcTrainingRun            *self,
                       const DcTrainingRequest  *request,
                       GError                  **error)
{
  g_autoptr(DcTrainPlan) plan = NULL;
  gboolean resumed;

  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), FALSE);
  g_return_val_if_fail (request != NULL, FALSE);

  if (!ensure_idle (self, error))
    return FALSE;
  /* The resumed model is trained in place; a fresh run frees the last one. */
  wait_for_snapshots (self);

  if (active_group (self) != NULL && request->simulate_peers <= 1)
    return start_with_group (self, active_group (self), request, error);

  /* A loaded checkpoint is continued (like the CLI's --resume), not thrown
   * away; the plan takes it only when the request is valid. */
  resumed = self->loaded != NULL;
  if (resumed)
    {
      DcTrainSettings saved = self->settings;
      DcGptModel *model = self->loaded;

      self->loaded = NULL;
      plan = dc_train_plan_new (request, model, &saved, error);
      if (plan == NULL)
        {
          self->loaded = model;  /* kept: the request was refused, not the model */
          return FALSE;
        }
    }
  else
    {
      plan = dc_train_plan_new (request, NULL, NULL, error);
      if (plan == NULL)
        return FALSE;
    }
  dc_train_plan_set_context (plan, self->context_obj);

  /* A new run replaces the model; the data is read by the worker. No
   * group run starts this device meanwhile. */
  disarm (self, &self->follower);
  g_clear_object (&self->group_run);
  self->n_devices = 1;
  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_pointer (&self->plan, dc_train_plan_free);
  self->plan = g_steal_pointer (&plan);
  self->settings = self->plan->settings;
  self->step = self->plan->resume != NULL ? self->plan->resume->step : 0;
  if (!resumed)
    g_clear_pointer (&self->hash, g_free);
  g_atomic_int_set (&self->stop_requested, 0);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  g_clear_pointer (&self->context, g_main_context_unref);
  self->context = g_main_context_ref_thread_default ();

  {
    const DcGptConfig *config = &self->plan->config;
    const DcTrainSettings *settings = &self->plan->settings;
    g_autofree char *line =
      g_strdup_printf ("training: width %u, %u layers, %u heads, sequence %u, batch %u, "
                       "%u steps, learning rate %.3f, seed %" G_GUINT64_FORMAT ", data %s",
                       config->width, config->n_layer, config->n_head, config->seq,
                       settings->batch, settings->steps, settings->lr_x1000 / 1000.0,
                       settings->seed, self->plan->data);
    emit_log (self, line);
    if (self->plan->backend != NULL)
      {
        DcGemmBackend *backend = self->plan->backend;
        g_autofree char *where =
          g_strdup_printf ("training: products of ≥ %" G_GUINT64_FORMAT " multiply-adds on %s "
                           "(%s, %s)", self->plan->offload_min,
                           dc_backend_kind_to_string (dc_gemm_backend_get_kind (backend)),
                           dc_gemm_backend_get_device_name (backend),
                           dc_gemm_backend_get_kernel_name (backend));
        emit_log (self, where);
      }
    if (resumed)
      {
        g_autofree char *from = g_strdup_printf ("training continues from the loaded model at "
                                                 "step %" G_GUINT64_FORMAT, self->step);
        emit_log (self, from);
      }
  }

  announce_model (self, DC_TRAINING_STATE_RUNNING);

  self->thread = g_thread_new ("dc-training", training_worker, self);
  return TRUE;
}

/**
 * dc_training_run_stop:
 *
 * Asks the worker to stop after the step in progress. The state becomes
 * READY once it has.
 */
void
dc_training_run_stop (DcTrainingRun *self)
{
  g_return_if_fail (DC_IS_TRAINING_RUN (self));

  if (self->state != DC_TRAINING_STATE_RUNNING)
    return;
  if (self->group_running)
    {
      /* Only this device stops; the others drop it once it has left the
       * group, or stop at their wait's deadline while it stays connected. */
      set_state (self, DC_TRAINING_STATE_STOPPING);
      dc_train_group_stop (self->group_run);
      return;
    }
  g_atomic_int_set (&self->stop_requested, 1);
  g_cancellable_cancel (self->cancellable);
  set_state (self, DC_TRAINING_STATE_STOPPING);
}

static DcGptModel *
idle_model (DcTrainingRun  *self,
            GError        **error)
{
  DcGptModel *model;

  if (!ensure_idle (self, error))
    return NULL;
  model = current_model (self);
  if (model == NULL)
    g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                 "there is no model yet: train one or load a checkpoint");
  return model;
}

gboolean
dc_training_run_save_checkpoint (DcTrainingRun  *self,
                                 const char     *path,
                                 GError        **error)
{
  DcGptModel *model;

  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), FALSE);

  model = idle_model (self, error);
  if (model == NULL || !dc_checkpoint_save (model, &self->settings, path, error))
    return FALSE;

  {
    g_autofree char *hash = dc_gpt_model_dup_hash (model);
    g_autofree char *line = g_strdup_printf ("checkpoint saved: %s (step %" G_GUINT64_FORMAT
                                             ", weight hash %s)", path, model->step, hash);
    emit_log (self, line);
  }
  return TRUE;
}

/* During a group run: the checkpoint goes to the group (through its
 * leader); every device continues from it after the same step. */
static gboolean
load_into_group (DcTrainingRun  *self,
                 const char     *path,
                 GError        **error)
{
  DcTrainSettings settings;
  g_autoptr(DcGptModel) model = dc_checkpoint_load (path, &settings, error);
  g_autofree char *line = NULL;

  if (model == NULL || !dc_train_group_load_checkpoint (self->group_run, model, &settings, error))
    return FALSE;
  line = g_strdup_printf ("checkpoint loaded: %s (step %" G_GUINT64_FORMAT "): the group "
                          "continues from it after a step", path, model->step);
  emit_log (self, line);
  return TRUE;
}

/**
 * dc_training_run_can_load:
 *
 * Returns: whether dc_training_run_load_checkpoint () can work now: while
 *   idle (it replaces the model), and during a group run (it goes to the
 *   whole group)
 */
gboolean
dc_training_run_can_load (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), FALSE);

  return (self->thread == NULL && !self->group_running)
         || (self->group_running && self->group_run != NULL);
}

/**
 * dc_training_run_load_checkpoint:
 *
 * Replaces the model with the checkpoint's, after the reader's checks
 * (format, tokenizer, dimensions); the next Start continues it, alone or
 * with the group. During a group run the checkpoint goes to the whole
 * group instead (dc_train_group_load_checkpoint ()). On failure the current
 * model stays.
 */
gboolean
dc_training_run_load_checkpoint (DcTrainingRun  *self,
                                 const char     *path,
                                 GError        **error)
{
  DcTrainSettings settings;
  DcGptModel *model;

  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), FALSE);

  if (self->group_running && self->group_run != NULL)
    return load_into_group (self, path, error);
  if (!ensure_idle (self, error))
    return FALSE;

  model = dc_checkpoint_load (path, &settings, error);
  if (model == NULL)
    return FALSE;
  install_loaded (self, path, model, &settings, NULL);
  return TRUE;
}

/* The model read from @path replaces the current one (taking @model, and
 * @hash, its weight hash when already known, else NULL). */
static void
install_loaded (DcTrainingRun         *self,
                const char            *path,
                DcGptModel            *model,
                const DcTrainSettings *settings,
                char                  *hash)
{
  wait_for_snapshots (self);
  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_object (&self->group_run);  /* the last group run's model is replaced too */
  g_clear_pointer (&self->loaded, dc_gpt_model_free);
  self->loaded = model;
  self->settings = *settings;
  self->step = model->step;
  g_free (self->hash);
  self->hash = hash != NULL ? hash : dc_gpt_model_dup_hash (model);

  {
    g_autofree char *line = g_strdup_printf ("checkpoint loaded: %s (width %u, sequence %u, "
                                             "step %" G_GUINT64_FORMAT ", weight hash %s)",
                                             path, model->config.width, model->config.seq,
                                             model->step, self->hash);
    emit_log (self, line);
  }

  announce_model (self, DC_TRAINING_STATE_READY);
}

gboolean
dc_training_run_export_hf (DcTrainingRun  *self,
                           const char     *dir,
                           GError        **error)
{
  DcGptModel *model;

  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), FALSE);

  model = idle_model (self, error);
  if (model == NULL || !dc_hf_export (model, dir, error))
    return FALSE;

  {
    g_autofree char *line = g_strdup_printf ("Hugging Face folder exported: %s", dir);
    emit_log (self, line);
  }
  return TRUE;
}

/**
 * dc_training_run_generate:
 * @temperature: 0 for greedy decoding
 * @seed: drives sampling above temperature 0, tied to the token position
 *
 * Returns: (transfer full) (nullable): the prompt's continuation as valid
 *   UTF-8 (bytes that do not form UTF-8 show as U+FFFD), or %NULL with @error
 */
char *
dc_training_run_generate (DcTrainingRun  *self,
                          const char     *prompt,
                          guint           n_tokens,
                          float           temperature,
                          guint64         seed,
                          GError        **error)
{
  g_autoptr(GByteArray) out = g_byte_array_new ();
  DcGptModel *model;

  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), NULL);
  g_return_val_if_fail (prompt != NULL, NULL);

  model = idle_model (self, error);
  if (model == NULL ||
      !dc_generate (model, (const guint8 *) prompt, strlen (prompt), n_tokens, temperature,
                    seed, out, error))
    return NULL;

  return g_utf8_make_valid ((const char *) out->data, out->len);
}

/**
 * dc_training_run_get_job_fraction:
 *
 * Returns: the fraction done of the Save, Load or Export in progress, per
 *   tensor (per chunk of the weights for the kit; the "job-fraction" property)
 */
double
dc_training_run_get_job_fraction (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), 0);

  return self->job_fraction;
}

/* Tests: @hook (thread, @user_data) runs on the thread that copies the
 * model for each Save and Export started from now on. */
void
_dc_training_run_set_snapshot_hook (DcTrainingRun *self,
                                    GFunc          hook,
                                    gpointer       user_data)
{
  self->snapshot_hook = hook;
  self->snapshot_hook_data = user_data;
}

/* Save, Load, Export and Generate off the main thread.
 *
 * Each call takes a snapshot of the idle model and works on it in a GTask
 * thread. The copy is made on that thread, first, behind the snapshot gate
 * (a Start meanwhile waits for it); then a run started (here or by another
 * device of the group) trains its own model and never races the work. The
 * thread touches neither the run nor its signals; when it is done, the
 * inner task's callback runs on the caller's context, logs and (for
 * Load) installs the model, then completes the caller's task. Generated
 * bytes reach the caller's context through one coalesced idle source
 * holding a weak reference to the run, which emits "generated".
 */

typedef enum
{
  JOB_SAVE,
  JOB_LOAD,
  JOB_EXPORT_HF,
  JOB_EXPORT_KIT,
  JOB_GENERATE,
} JobKind;

/* A copy of @model, Adam moments included (a saved checkpoint continues
 * exactly). */
static DcGptModel *
copy_model (const DcGptModel  *model,
            GError           **error)
{
  DcGptModel *copy = dc_gpt_model_new (&model->config, error);

  if (copy == NULL)
    return NULL;
  memcpy (copy->params, model->params, 3 * model->n_params * sizeof (float));
  copy->step = model->step;
  copy->beta1_pow = model->beta1_pow;
  copy->beta2_pow = model->beta2_pow;
  return copy;
}

/* The generated bytes not yet delivered; shared by the thread and the
 * delivering source (an atomic refcounted box). */
typedef struct
{
  GWeakRef      run;
  GMutex        lock;
  GByteArray   *pending;    /* guarded by lock */
  GMainContext *context;
  guint         scheduled : 1;  /* guarded by lock: a delivery is attached */
} Stream;

/* The fraction of a Save, Load or Export done, from the thread to the run's
 * "job-fraction" through one coalesced source (an atomic refcounted box). */
typedef struct
{
  GWeakRef      run;
  GMutex        lock;
  double        fraction;   /* guarded by lock */
  GMainContext *context;
  guint         scheduled : 1;  /* guarded by lock: a delivery is attached */
  guint         finished : 1;   /* guarded by lock: the job's result is in */
} JobProgress;

typedef struct
{
  JobKind          kind;
  char            *path;
  DcGptModel      *model;     /* the snapshot, or the model Load read */
  const DcGptModel *source;   /* the idle model to copy on the thread, until copied */
  SnapshotGate    *gate;      /* held while @source is not copied */
  GFunc            hook;      /* tests: called on the thread that copies */
  gpointer         hook_data;
  JobProgress     *progress;
  DcTrainSettings  settings;
  double           loss;      /* for the kit: NAN when unknown */
  char            *hash;      /* Save, Load: the model's weight hash, from the thread */
  /* Generate */
  GByteArray      *sequence;  /* the prompt ("\n" when empty), then each new byte */
  guint            n_tokens;
  float            temperature;
  guint64          seed;
  GByteArray      *out;
  Stream          *stream;
} Job;

static void
stream_clear (Stream *stream)
{
  g_weak_ref_clear (&stream->run);
  g_mutex_clear (&stream->lock);
  g_byte_array_unref (stream->pending);
  g_main_context_unref (stream->context);
}

static void
stream_unref (Stream *stream)
{
  g_atomic_rc_box_release_full (stream, (GDestroyNotify) stream_clear);
}

static void
job_progress_clear (JobProgress *progress)
{
  g_weak_ref_clear (&progress->run);
  g_mutex_clear (&progress->lock);
  g_main_context_unref (progress->context);
}

static void
job_progress_unref (JobProgress *progress)
{
  g_atomic_rc_box_release_full (progress, (GDestroyNotify) job_progress_clear);
}

static void
set_job_fraction (DcTrainingRun *self,
                  double         fraction)
{
  if (self->job_fraction == fraction)
    return;
  self->job_fraction = fraction;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_JOB_FRACTION]);
}

/* On the caller's context: the latest fraction, unless the run is gone. */
static gboolean
deliver_progress_cb (gpointer user_data)
{
  JobProgress *progress = user_data;
  g_autoptr(DcTrainingRun) self = g_weak_ref_get (&progress->run);
  double fraction;

  gboolean finished;

  g_mutex_lock (&progress->lock);
  fraction = progress->fraction;
  finished = progress->finished;
  progress->scheduled = FALSE;
  g_mutex_unlock (&progress->lock);

  /* After the result, the result's fraction stands. */
  if (self != NULL && !self->disposed && !finished)
    set_job_fraction (self, fraction);
  return G_SOURCE_REMOVE;
}

/* On the job's thread (DcCheckpointProgress). */
static void
job_progress_cb (guint    done,
                 guint    total,
                 gpointer user_data)
{
  JobProgress *progress = user_data;

  g_mutex_lock (&progress->lock);
  progress->fraction = (double) done / MAX (total, 1);
  if (!progress->scheduled)
    {
      g_autoptr(GSource) source = g_idle_source_new ();

      /* Idle priority: below the frame clock, which it must never delay. */
      progress->scheduled = TRUE;
      g_source_set_static_name (source, "[dc] job progress");
      g_source_set_callback (source, deliver_progress_cb,
                             g_atomic_rc_box_acquire (progress),
                             (GDestroyNotify) job_progress_unref);
      g_source_attach (source, progress->context);
    }
  g_mutex_unlock (&progress->lock);
}

/* The gate is left whatever happens to the job: a copy never taken must not
 * hold the model forever. */
static void
job_release_source (Job *job)
{
  job->source = NULL;
  if (job->gate != NULL)
    gate_leave (job->gate);
  g_clear_pointer (&job->gate, gate_unref);
}

static void
job_free (Job *job)
{
  job_release_source (job);
  g_clear_pointer (&job->progress, job_progress_unref);
  g_free (job->path);
  g_free (job->hash);
  g_clear_pointer (&job->model, dc_gpt_model_free);
  g_clear_pointer (&job->sequence, g_byte_array_unref);
  g_clear_pointer (&job->out, g_byte_array_unref);
  g_clear_pointer (&job->stream, stream_unref);
  g_free (job);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Job, job_free)

/* On the caller's context: hand the bytes generated since the last
 * delivery to "generated", unless the run is gone. */
static gboolean
deliver_generated_cb (gpointer user_data)
{
  Stream *stream = user_data;
  g_autoptr(DcTrainingRun) self = g_weak_ref_get (&stream->run);
  g_autoptr(GBytes) bytes = NULL;

  g_mutex_lock (&stream->lock);
  bytes = g_byte_array_free_to_bytes (g_steal_pointer (&stream->pending));
  stream->pending = g_byte_array_new ();
  stream->scheduled = FALSE;
  g_mutex_unlock (&stream->lock);

  if (self != NULL && !self->disposed && g_bytes_get_size (bytes) > 0)
    g_signal_emit (self, signals[SIGNAL_GENERATED], 0, bytes);
  return G_SOURCE_REMOVE;
}

/* On the job's thread. */
static void
stream_push (Stream *stream,
             guint8  byte)
{
  g_mutex_lock (&stream->lock);
  g_byte_array_append (stream->pending, &byte, 1);
  if (!stream->scheduled)
    {
      g_autoptr(GSource) source = g_idle_source_new ();

      stream->scheduled = TRUE;
      g_source_set_static_name (source, "[dc] generated bytes");
      g_source_set_callback (source, deliver_generated_cb,
                             g_atomic_rc_box_acquire (stream), (GDestroyNotify) stream_unref);
      g_source_attach (source, stream->context);
    }
  g_mutex_unlock (&stream->lock);
}

/* One token per dc_generate () call on the sequence so far: the same ids as
 * a single call, because a token depends only on the tokens before it, the
 * seed and its position in the sequence (dc-generate.c). */
static gboolean
job_generate (Job           *job,
              GCancellable  *cancellable,
              GError       **error)
{
  for (guint i = 0; i < job->n_tokens; i++)
    {
      g_autoptr(GByteArray) next = g_byte_array_new ();

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
      if (!dc_generate (job->model, job->sequence->data, job->sequence->len, 1,
                        job->temperature, job->seed, next, error))
        return FALSE;
      g_byte_array_append (job->sequence, next->data, 1);
      g_byte_array_append (job->out, next->data, 1);
      if (job->stream != NULL)
        stream_push (job->stream, next->data[0]);
    }
  return TRUE;
}

/* Writes to a temporary file beside @path, renamed over it only when not
 * cancelled: Cancel leaves the old file as it was. */
static gboolean
job_save (Job           *job,
          GCancellable  *cancellable,
          GError       **error)
{
  g_autofree char *dir = g_path_get_dirname (job->path);
  g_autofree char *base = g_path_get_basename (job->path);
  g_autofree char *temp = g_strdup_printf ("%s/.%s.partial", dir, base);

  if (!dc_checkpoint_save_full (job->model, &job->settings, temp, cancellable,
                                job_progress_cb, job->progress, error))
    return FALSE;
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    {
      g_unlink (temp);
      return FALSE;
    }
  if (g_rename (temp, job->path) != 0)
    {
      int saved_errno = errno;

      g_unlink (temp);
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved_errno),
                   "could not write %s: %s", job->path, g_strerror (saved_errno));
      return FALSE;
    }
  return TRUE;
}

static void
job_thread (GTask        *task,
            gpointer      source_object,
            gpointer      task_data,
            GCancellable *cancellable)
{
  Job *job = task_data;
  GError *error = NULL;
  gboolean ok = FALSE;

  if (job->source != NULL)
    {
      if (job->hook != NULL)
        job->hook (g_thread_self (), job->hook_data);
      job->model = copy_model (job->source, &error);
      job_release_source (job);
      if (job->model == NULL)
        {
          g_task_return_error (task, error);
          return;
        }
    }

  switch (job->kind)
    {
    case JOB_SAVE:
      ok = job_save (job, cancellable, &error);
      break;

    case JOB_LOAD:
      job->model = dc_checkpoint_load_full (job->path, &job->settings, cancellable,
                                            job_progress_cb, job->progress, &error);
      ok = job->model != NULL;
      break;

    default:
      break;
    }
  /* Hashing tens of megabytes takes long enough to be done here too. */
  if (ok && (job->kind == JOB_SAVE || job->kind == JOB_LOAD))
    job->hash = dc_gpt_model_dup_hash (job->model);

  switch (job->kind)
    {
    case JOB_SAVE:
    case JOB_LOAD:
      break;

    case JOB_EXPORT_HF:
      ok = dc_hf_export_progress (job->model, job->path, cancellable, job_progress_cb,
                                  job->progress, &error);
      break;

    case JOB_EXPORT_KIT:
      ok = dc_kit_export_full (job->model, job->loss, job->path, cancellable, job_progress_cb,
                               job->progress, &error);
      break;

    case JOB_GENERATE:
      ok = job_generate (job, cancellable, &error);
      break;

    default:
      g_assert_not_reached ();
    }

  if (ok)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

/* On the caller's context, once the thread is done: log, install a loaded
 * model, then complete the caller's task. */
static void
job_done_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcTrainingRun *self = DC_TRAINING_RUN (object);
  g_autoptr(GTask) outer = user_data;
  Job *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;

  g_mutex_lock (&job->progress->lock);
  job->progress->finished = TRUE;
  g_mutex_unlock (&job->progress->lock);
  /* Bytes still waiting for their idle source go out now: the thread's
   * result is dispatched at a higher priority than that source, and every
   * streamed byte must reach "generated" before the caller's result. */
  if (job->stream != NULL)
    deliver_generated_cb (job->stream);
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      g_task_return_error (outer, g_steal_pointer (&error));
      return;
    }
  /* Finished work stands (the file is written); a load cancelled meanwhile
   * leaves the current model. */
  if (job->kind == JOB_LOAD && g_task_return_error_if_cancelled (outer))
    return;

  if (job->kind != JOB_GENERATE)
    set_job_fraction (self, 1.0);
  switch (job->kind)
    {
    case JOB_SAVE:
      line = g_strdup_printf ("checkpoint saved: %s (step %" G_GUINT64_FORMAT
                              ", weight hash %s)", job->path, job->model->step, job->hash);
      break;

    case JOB_LOAD:
      if (self->group_running && self->group_run != NULL)
        {
          if (!dc_train_group_load_checkpoint (self->group_run, job->model, &job->settings,
                                               &error))
            {
              g_task_return_error (outer, g_steal_pointer (&error));
              return;
            }
          line = g_strdup_printf ("checkpoint loaded: %s (step %" G_GUINT64_FORMAT "): the "
                                  "group continues from it after a step", job->path,
                                  job->model->step);
          break;
        }
      if (!ensure_idle (self, &error))
        {
          g_prefix_error (&error, "training started while the checkpoint loaded: ");
          g_task_return_error (outer, g_steal_pointer (&error));
          return;
        }
      install_loaded (self, job->path, g_steal_pointer (&job->model), &job->settings,
                      g_steal_pointer (&job->hash));
      break;

    case JOB_EXPORT_HF:
      line = g_strdup_printf ("Hugging Face folder exported: %s", job->path);
      break;

    case JOB_EXPORT_KIT:
      line = g_strdup_printf ("inference kit exported: %s", job->path);
      break;

    case JOB_GENERATE:
      g_task_return_pointer (outer,
                             g_utf8_make_valid ((const char *) job->out->data, job->out->len),
                             g_free);
      return;

    default:
      g_assert_not_reached ();
    }
  if (line != NULL)
    emit_log (self, line);
  g_task_return_boolean (outer, TRUE);
}

static void
run_job (DcTrainingRun       *self,
         Job                 *job,
         gpointer             source_tag,
         GCancellable        *cancellable,
         GAsyncReadyCallback  callback,
         gpointer             user_data)
{
  g_autoptr(GTask) outer = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GTask) inner = NULL;

  job->progress = g_atomic_rc_box_new0 (JobProgress);
  g_weak_ref_init (&job->progress->run, self);
  g_mutex_init (&job->progress->lock);
  job->progress->context = g_main_context_ref_thread_default ();
  set_job_fraction (self, 0.0);
  g_task_set_source_tag (outer, source_tag);
  inner = g_task_new (self, cancellable, job_done_cb, g_steal_pointer (&outer));
  g_task_set_source_tag (inner, source_tag);
  g_task_set_task_data (inner, job, (GDestroyNotify) job_free);
  g_task_run_in_thread (inner, job_thread);
}

/* The snapshot for @kind, or a task that fails at once. */
static Job *
new_snapshot_job (DcTrainingRun       *self,
                  JobKind              kind,
                  const char          *path,
                  gpointer             source_tag,
                  GCancellable        *cancellable,
                  GAsyncReadyCallback  callback,
                  gpointer             user_data)
{
  g_autoptr(Job) job = g_new0 (Job, 1);
  g_autoptr(GError) error = NULL;

  job->kind = kind;
  job->path = g_strdup (path);
  job->source = idle_model (self, &error);
  if (job->source == NULL)
    {
      g_task_report_error (self, callback, user_data, source_tag, g_steal_pointer (&error));
      return NULL;
    }
  /* Copied on the job's thread; the model stays as it is until then. */
  job->gate = g_atomic_rc_box_acquire (self->gate);
  gate_enter (job->gate);
  job->hook = self->snapshot_hook;
  job->hook_data = self->snapshot_hook_data;
  job->settings = self->settings;
  /* The loss is known only for a model this run trained (a checkpoint does
   * not record it). */
  job->loss = current_model (self) == self->loaded ? NAN : self->loss;
  return g_steal_pointer (&job);
}

static gboolean
job_finish (DcTrainingRun  *self,
            GAsyncResult   *result,
            gpointer        source_tag,
            GError        **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  g_return_val_if_fail (g_async_result_is_tagged (result, source_tag), FALSE);

  return g_task_propagate_boolean (G_TASK (result), error);
}

/**
 * dc_training_run_save_checkpoint_async:
 * @path: the .pt file; replaced only when the whole file is written and the
 *   call was not cancelled
 *
 * Saves a snapshot of the model off the calling thread. Fails at once when
 * there is no model or a run is in progress.
 */
void
dc_training_run_save_checkpoint_async (DcTrainingRun       *self,
                                       const char          *path,
                                       GCancellable        *cancellable,
                                       GAsyncReadyCallback  callback,
                                       gpointer             user_data)
{
  Job *job;

  g_return_if_fail (DC_IS_TRAINING_RUN (self));
  g_return_if_fail (path != NULL);

  job = new_snapshot_job (self, JOB_SAVE, path, dc_training_run_save_checkpoint_async,
                          cancellable, callback, user_data);
  if (job != NULL)
    run_job (self, job, dc_training_run_save_checkpoint_async, cancellable, callback,
             user_data);
}

gboolean
dc_training_run_save_checkpoint_finish (DcTrainingRun  *self,
                                        GAsyncResult   *result,
                                        GError        **error)
{
  return job_finish (self, result, dc_training_run_save_checkpoint_async, error);
}

/**
 * dc_training_run_load_checkpoint_async:
 *
 * Reads and checks the checkpoint off the calling thread, then does what
 * dc_training_run_load_checkpoint () does with it. Cancelled, the current
 * model stays.
 */
void
dc_training_run_load_checkpoint_async (DcTrainingRun       *self,
                                       const char          *path,
                                       GCancellable        *cancellable,
                                       GAsyncReadyCallback  callback,
                                       gpointer             user_data)
{
  g_autoptr(GError) error = NULL;
  Job *job;

  g_return_if_fail (DC_IS_TRAINING_RUN (self));
  g_return_if_fail (path != NULL);

  if (!dc_training_run_can_load (self))
    {
      ensure_idle (self, &error);
      g_task_report_error (self, callback, user_data, dc_training_run_load_checkpoint_async,
                           g_steal_pointer (&error));
      return;
    }
  job = g_new0 (Job, 1);
  job->kind = JOB_LOAD;
  job->path = g_strdup (path);
  run_job (self, job, dc_training_run_load_checkpoint_async, cancellable, callback,
           user_data);
}

gboolean
dc_training_run_load_checkpoint_finish (DcTrainingRun  *self,
                                        GAsyncResult   *result,
                                        GError        **error)
{
  return job_finish (self, result, dc_training_run_load_checkpoint_async, error);
}

/**
 * dc_training_run_export_hf_async:
 *
 * dc_training_run_export_hf () on a snapshot, off the calling thread.
 */
void
dc_training_run_export_hf_async (DcTrainingRun       *self,
                                 const char          *dir,
                                 GCancellable        *cancellable,
                                 GAsyncReadyCallback  callback,
                                 gpointer             user_data)
{
  Job *job;

  g_return_if_fail (DC_IS_TRAINING_RUN (self));
  g_return_if_fail (dir != NULL);

  job = new_snapshot_job (self, JOB_EXPORT_HF, dir, dc_training_run_export_hf_async,
                          cancellable, callback, user_data);
  if (job != NULL)
    run_job (self, job, dc_training_run_export_hf_async, cancellable, callback, user_data);
}

gboolean
dc_training_run_export_hf_finish (DcTrainingRun  *self,
                                  GAsyncResult   *result,
                                  GError        **error)
{
  return job_finish (self, result, dc_training_run_export_hf_async, error);
}

/**
 * dc_training_run_export_kit_async:
 * @path: the .html file (dc_kit_export ())
 *
 * Writes the inference kit of a snapshot, off the calling thread, with the
 * last training loss when this run trained the model.
 */
void
dc_training_run_export_kit_async (DcTrainingRun       *self,
                                  const char          *path,
                                  GCancellable        *cancellable,
                                  GAsyncReadyCallback  callback,
                                  gpointer             user_data)
{
  Job *job;

  g_return_if_fail (DC_IS_TRAINING_RUN (self));
  g_return_if_fail (path != NULL);

  job = new_snapshot_job (self, JOB_EXPORT_KIT, path, dc_training_run_export_kit_async,
                          cancellable, callback, user_data);
  if (job != NULL)
    run_job (self, job, dc_training_run_export_kit_async, cancellable, callback, user_data);
}

gboolean
dc_training_run_export_kit_finish (DcTrainingRun  *self,
                                   GAsyncResult   *result,
                                   GError        **error)
{
  return job_finish (self, result, dc_training_run_export_kit_async, error);
}

/**
 * dc_training_run_generate_async:
 *
 * dc_training_run_generate () on a snapshot, off the calling thread. The
 * new bytes are emitted with "generated" on the calling context as they
 * come (coalesced); cancelling stops before the next token.
 */
void
dc_training_run_generate_async (DcTrainingRun       *self,
                                const char          *prompt,
                                guint                n_tokens,
                                float                temperature,
                                guint64              seed,
                                GCancellable        *cancellable,
                                GAsyncReadyCallback  callback,
                                gpointer             user_data)
{
  g_autoptr(GError) error = NULL;
  Job *job;

  g_return_if_fail (DC_IS_TRAINING_RUN (self));
  g_return_if_fail (prompt != NULL);

  /* dc_generate ()'s own limits, checked before the thread starts. */
  if (n_tokens > DC_GENERATE_MAX_TOKENS || !(temperature == 0.0f
                                             || (temperature >= 0.01f && temperature <= 10.0f)))
    {
      g_task_report_new_error (self, callback, user_data, dc_training_run_generate_async,
                               DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                               "generate at most %d tokens, with temperature 0 or 0.01–10",
                               DC_GENERATE_MAX_TOKENS);
      return;
    }
  job = new_snapshot_job (self, JOB_GENERATE, NULL, dc_training_run_generate_async,
                          cancellable, callback, user_data);
  if (job == NULL)
    return;
  job->sequence = g_byte_array_new ();
  /* dc_generate ()'s start for an empty prompt, made explicit: positions
   * count from it. */
  if (prompt[0] == '\0')
    g_byte_array_append (job->sequence, (const guint8 *) "\n", 1);
  else
    g_byte_array_append (job->sequence, (const guint8 *) prompt, strlen (prompt));
  job->n_tokens = n_tokens;
  job->temperature = temperature;
  job->seed = seed;
  job->out = g_byte_array_new ();
  job->stream = g_atomic_rc_box_new0 (Stream);
  g_weak_ref_init (&job->stream->run, self);
  g_mutex_init (&job->stream->lock);
  job->stream->pending = g_byte_array_new ();
  job->stream->context = g_main_context_ref_thread_default ();
  run_job (self, job, dc_training_run_generate_async, cancellable, callback, user_data);
}

/**
 * Returns: (transfer full) (nullable): the whole continuation as valid
 *   UTF-8, or %NULL with @error (G_IO_ERROR_CANCELLED when cancelled; the
 *   bytes emitted so far stay valid)
 */
char *
dc_training_run_generate_finish (DcTrainingRun  *self,
                                 GAsyncResult   *result,
                                 GError        **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  g_return_val_if_fail (g_async_result_is_tagged (result, dc_training_run_generate_async),
                        NULL);

  return g_task_propagate_pointer (G_TASK (result), error);
}

DcTrainingState
dc_training_run_get_state (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), DC_TRAINING_STATE_IDLE);

  return self->state;
}

guint64
dc_training_run_get_step (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), 0);

  return self->step;
}

guint
dc_training_run_get_steps (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), 0);

  /* While the worker runs, self->session is its: do not look at it. */
  return self->thread != NULL || self->plan != NULL || current_model (self) != NULL
         ? self->settings.steps : 0;
}

/**
 * dc_training_run_get_n_devices:
 *
 * Returns: how many devices took the last step (1 alone)
 */
guint
dc_training_run_get_n_devices (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), 1);

  return self->n_devices;
}

/**
 * dc_training_run_get_plan:
 *
 * Returns: (transfer none) (nullable): the config and settings of the run in
 *   progress or the last one (a group run's: the starter's), or %NULL
 */
const DcTrainPlan *
dc_training_run_get_plan (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), NULL);

  return self->plan;
}

/**
 * dc_training_run_get_hash:
 *
 * Returns: (nullable): the weight hash at the last step, or %NULL
 */
const char *
dc_training_run_get_hash (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), NULL);

  return self->hash;
}

/**
 * dc_training_run_get_error:
 *
 * Returns: (nullable): why the last run on this device failed, with its
 *   domain and code (a dataset's 401/403 is %DC_DATA_ERROR_UNAUTHORIZED /
 *   %DC_DATA_ERROR_FORBIDDEN, which the app answers with its token dialog),
 *   or %NULL; valid until the next run
 */
const GError *
dc_training_run_get_error (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), NULL);

  return self->error;
}

/**
 * dc_training_run_get_message:
 *
 * Returns: (nullable): why the last run failed, or %NULL
 */
const char *
dc_training_run_get_message (DcTrainingRun *self)
{
  g_return_val_if_fail (DC_IS_TRAINING_RUN (self), NULL);

  return self->message;
}

static void
dc_training_run_get_property (GObject    *object,
                              guint       prop_id,
                              GValue     *value,
                              GParamSpec *pspec)
{
  DcTrainingRun *self = DC_TRAINING_RUN (object);

  switch (prop_id)
    {
    case PROP_STATE:
      g_value_set_int (value, self->state);
      break;

    case PROP_STEP:
      g_value_set_uint64 (value, self->step);
      break;

    case PROP_STEPS:
      g_value_set_uint (value, dc_training_run_get_steps (self));
      break;

    case PROP_LOSS:
      g_value_set_double (value, self->loss);
      break;

    case PROP_TOKENS_PER_SECOND:
      g_value_set_double (value, self->tokens_per_s);
      break;

    case PROP_HASH:
      g_value_set_string (value, self->hash);
      break;

    case PROP_MESSAGE:
      g_value_set_string (value, self->message);
      break;

    case PROP_CONTEXT:
      g_value_set_object (value, self->context_obj);
      break;

    case PROP_JOB_FRACTION:
      g_value_set_double (value, self->job_fraction);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_training_run_set_property (GObject      *object,
                              guint         prop_id,
                              const GValue *value,
                              GParamSpec   *pspec)
{
  DcTrainingRun *self = DC_TRAINING_RUN (object);

  switch (prop_id)
    {
    case PROP_CONTEXT:
      self->context_obj = g_value_dup_object (value);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

/* Devices coming and going, for the Train view's log. A device that joins
 * during a run and follows runs is brought into it by the coordinator (the
 * leader sends it the weights; its `join` line says from which step); one
 * that leaves during a run is dropped by the coordinator, which says so
 * itself. */
static void
group_event_cb (DcGroup       *group,
                const char    *event,
                const char    *peer,
                guint          n_peers,
                const char    *reason,
                DcTrainingRun *self)
{
  g_autofree char *line = NULL;

  if (peer == NULL)
    return;
  if (g_str_equal (event, "peer-joined"))
    line = self->group_running
           ? g_strdup_printf ("“%s” joined the group during the run: if it follows runs, "
                              "it joins this one after the next step", peer)
           : g_strdup_printf ("“%s” joined the group", peer);
  else if (g_str_equal (event, "peer-left"))
    line = g_strdup_printf ("“%s” left the group", peer);
  if (line != NULL)
    g_signal_emit (self, signals[SIGNAL_LOG], 0, line);
}

static void
dc_training_run_constructed (GObject *object)
{
  DcTrainingRun *self = DC_TRAINING_RUN (object);
  DcGroup *group = self->context_obj != NULL ? dc_context_get_group (self->context_obj) : NULL;

  G_OBJECT_CLASS (dc_training_run_parent_class)->constructed (object);
  if (group != NULL)
    g_signal_connect_object (group, "event", G_CALLBACK (group_event_cb), self, 0);
  arm_follower (self);
}

static void
dc_training_run_dispose (GObject *object)
{
  DcTrainingRun *self = DC_TRAINING_RUN (object);

  /* Neither the worker nor its reports hold a reference to self, so
   * stopping and joining here is safe: the worker returns after the step in
   * progress. Its queued reports are dropped unread, so no "step" or "log"
   * is emitted after dispose. */
  self->disposed = TRUE;
  if (self->thread != NULL)
    {
      g_atomic_int_set (&self->stop_requested, 1);
      g_cancellable_cancel (self->cancellable);
      join_worker (self);
    }
  drop_reports (self);
  disarm (self, &self->follower);
  if (self->group_running)
    {
      self->group_running = FALSE;
      g_signal_handlers_disconnect_by_data (self->group_run, self);
      dc_train_group_stop (self->group_run);
    }

  G_OBJECT_CLASS (dc_training_run_parent_class)->dispose (object);
}

static void
dc_training_run_finalize (GObject *object)
{
  DcTrainingRun *self = DC_TRAINING_RUN (object);

  /* The session borrows the context's backend: it goes first. A disposed
   * run keeps both, so that its model can still be saved. */
  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_object (&self->group_run);  /* its session borrows the backend too */
  g_clear_object (&self->context_obj);
  g_clear_pointer (&self->plan, dc_train_plan_free);
  g_clear_pointer (&self->loaded, dc_gpt_model_free);
  g_clear_pointer (&self->context, g_main_context_unref);
  g_clear_object (&self->cancellable);
  g_free (self->hash);
  g_free (self->message);
  g_clear_error (&self->error);
  g_mutex_clear (&self->report_lock);
  g_clear_pointer (&self->gate, gate_unref);

  G_OBJECT_CLASS (dc_training_run_parent_class)->finalize (object);
}

static void
dc_training_run_class_init (DcTrainingRunClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  const GParamFlags flags = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;

  object_class->constructed = dc_training_run_constructed;
  object_class->dispose = dc_training_run_dispose;
  object_class->finalize = dc_training_run_finalize;
  object_class->get_property = dc_training_run_get_property;
  object_class->set_property = dc_training_run_set_property;

  properties[PROP_STATE] =
    g_param_spec_int ("state", NULL, NULL, DC_TRAINING_STATE_IDLE, DC_TRAINING_STATE_FAILED,
                      DC_TRAINING_STATE_IDLE, flags);
  properties[PROP_STEP] = g_param_spec_uint64 ("step", NULL, NULL, 0, G_MAXUINT64, 0, flags);
  properties[PROP_STEPS] = g_param_spec_uint ("steps", NULL, NULL, 0, G_MAXUINT, 0, flags);
  properties[PROP_LOSS] = g_param_spec_double ("loss", NULL, NULL, -G_MAXDOUBLE, G_MAXDOUBLE, 0,
                                               flags);
  properties[PROP_TOKENS_PER_SECOND] =
    g_param_spec_double ("tokens-per-second", NULL, NULL, 0, G_MAXDOUBLE, 0, flags);
  properties[PROP_HASH] = g_param_spec_string ("hash", NULL, NULL, NULL, flags);
  properties[PROP_MESSAGE] = g_param_spec_string ("message", NULL, NULL, NULL, flags);
  /* The front end's context, whose backend the runs use; NULL: the CPU. */
  properties[PROP_CONTEXT] =
    g_param_spec_object ("context", NULL, NULL, DC_TYPE_CONTEXT,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS
                         | G_PARAM_EXPLICIT_NOTIFY);
  /* The fraction done of the Save, Load or Export in progress (the last
   * one's once it ended), reported per tensor (per chunk for the kit). */
  properties[PROP_JOB_FRACTION] =
    g_param_spec_double ("job-fraction", NULL, NULL, 0, 1, 0, flags);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /**
   * DcTrainingRun::step:
   * @step: the step just taken (1-based)
   * @loss: the training loss of that step
   * @tokens_per_s: this device's training rate at that step
   * @hash: the weight hash after the step
   */
  signals[SIGNAL_STEP] =
    g_signal_new ("step", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 4, G_TYPE_UINT64, G_TYPE_DOUBLE, G_TYPE_DOUBLE, G_TYPE_STRING);

  /**
   * DcTrainingRun::log:
   * @line: a message for the log, without a trailing newline
   */
  signals[SIGNAL_LOG] =
    g_signal_new ("log", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_STRING);

  /**
   * DcTrainingRun::agreed:
   * @step: a step of a group run
   * @hash: the weight hash that every device reported for it
   * @devices: a(sd): each device's name and its own work on the step in
   *   seconds, in rank order
   *
   * The sync guard compared every device's report of @step and they agree.
   */
  signals[SIGNAL_AGREED] =
    g_signal_new ("agreed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_UINT64, G_TYPE_STRING, G_TYPE_VARIANT);

  /**
   * DcTrainingRun::generated:
   * @bytes: the bytes dc_training_run_generate_async () generated since the
   *   last emission (not necessarily whole UTF-8 characters)
   */
  signals[SIGNAL_GENERATED] =
    g_signal_new ("generated", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 1, G_TYPE_BYTES);
}

static void
dc_training_run_init (DcTrainingRun *self)
{
  g_mutex_init (&self->report_lock);
  g_queue_init (&self->reports);
  self->gate = gate_new ();
  self->n_devices = 1;
}
