/* PLACEHOLDER: owned by FETCH (hf-contract.md section 3); the lead keeps FETCH's version.
 * Opening always fails cleanly, so no instance exists and the getters are never reached.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-model-repo.h"

struct _DcModelRepo
{
  GObject parent_instance;
};

static void dc_model_repo_tensor_source_init (DcTensorSourceInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (DcModelRepo, dc_model_repo, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (DC_TYPE_TENSOR_SOURCE,
                                                      dc_model_repo_tensor_source_init))

static const DcSafetensorsTensor *
repo_lookup (DcTensorSource *source,
             const char     *name)
{
  return NULL;
}

static gboolean
repo_read (DcTensorSource             *source,
           const DcSafetensorsTensor  *t,
           guint8                     *dst,
           GCancellable               *cancellable,
           GError                    **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "not built yet");
  return FALSE;
}

static void
dc_model_repo_tensor_source_init (DcTensorSourceInterface *iface)
{
  iface->lookup = repo_lookup;
  iface->read = repo_read;
}

static void
dc_model_repo_class_init (DcModelRepoClass *klass)
{
}

static void
dc_model_repo_init (DcModelRepo *self)
{
}

void
dc_model_repo_open_async (DcHfClient          *client,
                          const char          *spec,
                          GCancellable        *cancellable,
                          GAsyncReadyCallback  callback,
                          gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_source_tag (task, dc_model_repo_open_async);
  g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "not built yet");
}

DcModelRepo *
dc_model_repo_open_finish (GAsyncResult  *result,
                           GError       **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

DcModelRepo *
dc_model_repo_open (DcHfClient    *client,
                    const char    *spec,
                    GCancellable  *cancellable,
                    GError       **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "not built yet");
  return NULL;
}

const char *
dc_model_repo_get_spec (DcModelRepo *self)
{
  return NULL;
}

gboolean
dc_model_repo_is_local (DcModelRepo *self)
{
  return FALSE;
}

const DcHfConfig *
dc_model_repo_get_config (DcModelRepo *self)
{
  return NULL;
}

DcBpeTokenizer *
dc_model_repo_get_tokenizer (DcModelRepo *self)
{
  return NULL;
}

const char *
dc_model_repo_get_dtype (DcModelRepo *self)
{
  return NULL;
}

guint64
dc_model_repo_get_weight_bytes (DcModelRepo *self)
{
  return 0;
}

guint64
dc_model_repo_get_bytes_downloaded (DcModelRepo *self)
{
  return 0;
}

char *
dc_model_repo_dup_summary (DcModelRepo *self)
{
  return NULL;
}
