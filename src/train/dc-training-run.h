/* dc-training-run.h: a training run on this device, off the main thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "dc-train-plan.h"
#include "model/dc-gpt-model.h"

G_BEGIN_DECLS

#define DC_TYPE_TRAINING_RUN (dc_training_run_get_type ())

G_DECLARE_FINAL_TYPE (DcTrainingRun, dc_training_run, DC, TRAINING_RUN, GObject)

/**
 * DcTrainingState:
 * @DC_TRAINING_STATE_IDLE: no model yet
 * @DC_TRAINING_STATE_RUNNING: the worker thread is training
 * @DC_TRAINING_STATE_STOPPING: asked to stop; the worker ends after the current step
 * @DC_TRAINING_STATE_READY: a model exists (trained, stopped, or loaded) and nothing runs
 * @DC_TRAINING_STATE_FAILED: the last run failed; the message says why
 */
typedef enum
{
  DC_TRAINING_STATE_IDLE,
  DC_TRAINING_STATE_RUNNING,
  DC_TRAINING_STATE_STOPPING,
  DC_TRAINING_STATE_READY,
  DC_TRAINING_STATE_FAILED,
} DcTrainingState;

DcTrainingRun   *dc_training_run_new             (void);
DcTrainingRun   *dc_training_run_new_for_context (DcContext                *context);
DcTrainingState  dc_training_run_get_state       (DcTrainingRun            *self);
guint64          dc_training_run_get_step        (DcTrainingRun            *self);
guint            dc_training_run_get_steps       (DcTrainingRun            *self);
guint            dc_training_run_get_n_devices   (DcTrainingRun            *self);
const DcTrainPlan *
                 dc_training_run_get_plan        (DcTrainingRun            *self);
const char      *dc_training_run_get_hash        (DcTrainingRun            *self);
const char      *dc_training_run_get_message     (DcTrainingRun            *self);
const GError    *dc_training_run_get_error       (DcTrainingRun            *self);
double           dc_training_run_get_job_fraction (DcTrainingRun           *self);

gboolean         dc_training_run_start           (DcTrainingRun            *self,
                                                  const DcTrainingRequest  *request,
                                                  GError                  **error);
void             dc_training_run_stop            (DcTrainingRun            *self);
gboolean         dc_training_run_save_checkpoint (DcTrainingRun            *self,
                                                  const char               *path,
                                                  GError                  **error);
gboolean         dc_training_run_can_load        (DcTrainingRun            *self);
gboolean         dc_training_run_load_checkpoint (DcTrainingRun            *self,
                                                  const char               *path,
                                                  GError                  **error);
gboolean         dc_training_run_export_hf       (DcTrainingRun            *self,
                                                  const char               *dir,
                                                  GError                  **error);
char            *dc_training_run_generate        (DcTrainingRun            *self,
                                                  const char               *prompt,
                                                  guint                     n_tokens,
                                                  float                     temperature,
                                                  guint64                   seed,
                                                  GError                  **error);

void             dc_training_run_save_checkpoint_async  (DcTrainingRun       *self,
                                                         const char          *path,
                                                         GCancellable        *cancellable,
                                                         GAsyncReadyCallback  callback,
                                                         gpointer             user_data);
gboolean         dc_training_run_save_checkpoint_finish (DcTrainingRun       *self,
                                                         GAsyncResult        *result,
                                                         GError             **error);
void             dc_training_run_load_checkpoint_async  (DcTrainingRun       *self,
                                                         const char          *path,
                                                         GCancellable        *cancellable,
                                                         GAsyncReadyCallback  callback,
                                                         gpointer             user_data);
gboolean         dc_training_run_load_checkpoint_finish (DcTrainingRun       *self,
                                                         GAsyncResult        *result,
                                                         GError             **error);
void             dc_training_run_export_hf_async        (DcTrainingRun       *self,
                                                         const char          *dir,
                                                         GCancellable        *cancellable,
                                                         GAsyncReadyCallback  callback,
                                                         gpointer             user_data);
gboolean         dc_training_run_export_hf_finish       (DcTrainingRun       *self,
                                                         GAsyncResult        *result,
                                                         GError             **error);
void             dc_training_run_export_kit_async       (DcTrainingRun       *self,
                                                         const char          *path,
                                                         GCancellable        *cancellable,
                                                         GAsyncReadyCallback  callback,
                                                         gpointer             user_data);
gboolean         dc_training_run_export_kit_finish      (DcTrainingRun       *self,
                                                         GAsyncResult        *result,
                                                         GError             **error);
void             dc_training_run_generate_async         (DcTrainingRun       *self,
                                                         const char          *prompt,
                                                         guint                n_tokens,
                                                         float                temperature,
                                                         guint64              seed,
                                                         GCancellable        *cancellable,
                                                         GAsyncReadyCallback  callback,
                                                         gpointer             user_data);
char            *dc_training_run_generate_finish        (DcTrainingRun       *self,
                                                         GAsyncResult        *result,
                                                         GError             **error);

G_END_DECLS
