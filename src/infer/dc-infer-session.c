/* PLACEHOLDER: owned by SESSION */
/* dc-infer-session.c: stands in for SESSION's DcInferSession so that the UI
 * builds before it is merged: the contract's signals exist, loading fails
 * with "not built yet". The lead keeps SESSION's version at merge.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-infer-session.h"

struct _DcInferSession
{
  GObject      parent_instance;

  DcModelRepo *repo;
  guint        last_id;
};

enum {
  SIGNAL_LOAD_PROGRESS,
  SIGNAL_STARTED,
  SIGNAL_TOKEN,
  SIGNAL_FINISHED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (DcInferSession, dc_infer_session, G_TYPE_OBJECT)

void
dc_infer_settings_init_default (DcInferSettings *settings)
{
  settings->n_tokens = 60;
  settings->context = 64;
  settings->temperature = 0;
  settings->seed = 1234;
  settings->output = DC_INFER_OUTPUT_FREE;
}

gboolean
dc_infer_settings_validate (const DcInferSettings  *settings,
                            guint                   max_positions,
                            GError                **error)
{
  return TRUE;
}

static void
dc_infer_session_dispose (GObject *object)
{
  g_clear_object (&DC_INFER_SESSION (object)->repo);

  G_OBJECT_CLASS (dc_infer_session_parent_class)->dispose (object);
}

static void
dc_infer_session_class_init (DcInferSessionClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = dc_infer_session_dispose;

  signals[SIGNAL_LOAD_PROGRESS] =
    g_signal_new ("load-progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 2, G_TYPE_UINT64, G_TYPE_UINT64);
  signals[SIGNAL_STARTED] =
    g_signal_new ("started", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_UINT);
  signals[SIGNAL_TOKEN] =
    g_signal_new ("token", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 4, G_TYPE_UINT, G_TYPE_UINT, G_TYPE_STRING, G_TYPE_DOUBLE);
  signals[SIGNAL_FINISHED] =
    g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 4, G_TYPE_UINT, G_TYPE_BOOLEAN, G_TYPE_STRING,
                  G_TYPE_DOUBLE);
}

static void
dc_infer_session_init (DcInferSession *self)
{
}

DcInferSession *
dc_infer_session_new (DcContext   *context,
                      DcModelRepo *repo)
{
  DcInferSession *self = g_object_new (DC_TYPE_INFER_SESSION, NULL);

  self->repo = g_object_ref (repo);
  return self;
}

DcModelRepo *
dc_infer_session_get_repo (DcInferSession *self)
{
  return self->repo;
}

void
dc_infer_session_load_async (DcInferSession      *self,
                             GCancellable        *cancellable,
                             GAsyncReadyCallback  callback,
                             gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);

  g_task_set_source_tag (task, dc_infer_session_load_async);
  g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                           "loading a model is not built yet");
}

gboolean
dc_infer_session_load_finish (DcInferSession  *self,
                              GAsyncResult    *result,
                              GError         **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

gboolean
dc_infer_session_is_loaded (DcInferSession *self)
{
  return FALSE;
}

guint
dc_infer_session_submit (DcInferSession        *self,
                         const char            *prompt,
                         const DcInferSettings *settings)
{
  return ++self->last_id;
}

guint
dc_infer_session_get_queue_length (DcInferSession *self)
{
  return 0;
}

void
dc_infer_session_stop (DcInferSession *self)
{
}

void
dc_infer_session_clear_queue (DcInferSession *self)
{
}
