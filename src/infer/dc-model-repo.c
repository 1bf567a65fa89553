/* PLACEHOLDER: owned by FETCH */
/* dc-model-repo.c: stands in for FETCH's DcModelRepo so that the UI builds
 * before it is merged. Opening always fails with "not built yet"; the lead
 * keeps FETCH's version at merge.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-model-repo.h"

struct _DcModelRepo
{
  GObject  parent_instance;
};

G_DEFINE_FINAL_TYPE (DcModelRepo, dc_model_repo, G_TYPE_OBJECT)

static void
dc_model_repo_class_init (DcModelRepoClass *klass)
{
}

static void
dc_model_repo_init (DcModelRepo *self)
{
}

static void
set_not_built (GError **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
               "opening a model repository is not built yet");
}

DcModelRepo *
dc_model_repo_open (DcHfClient    *client,
                    const char    *spec,
                    GCancellable  *cancellable,
                    GError       **error)
{
  set_not_built (error);
  return NULL;
}

void
dc_model_repo_open_async (DcHfClient          *client,
                          const char          *spec,
                          GCancellable        *cancellable,
                          GAsyncReadyCallback  callback,
                          gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  GError *error = NULL;

  g_task_set_source_tag (task, dc_model_repo_open_async);
  set_not_built (&error);
  g_task_return_error (task, error);
}

DcModelRepo *
dc_model_repo_open_finish (GAsyncResult  *result,
                           GError       **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
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
  return g_strdup ("");
}
