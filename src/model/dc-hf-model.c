/* PLACEHOLDER: owned by MODEL (hf-contract.md section 2); the lead keeps MODEL's version.
 * Every entry point fails cleanly: no model is ever made, so nothing else is reached.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-hf-model.h"

#include "dc-model-error.h"

DcHfModel *
dc_hf_model_load (const DcHfConfig  *config,
                  DcTensorSource    *source,
                  DcGemmBackend     *backend,
                  DcHfLoadProgress   progress,
                  gpointer           user_data,
                  GCancellable      *cancellable,
                  GError           **error)
{
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED, "not built yet");
  return NULL;
}

GPtrArray *
dc_hf_model_list_tensors (const DcHfConfig  *config,
                          DcTensorSource    *source,
                          GError           **error)
{
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED, "not built yet");
  return NULL;
}

guint64
dc_hf_model_memory_bytes (const DcHfConfig *config,
                          guint             context)
{
  return 0;
}

const DcHfConfig *
dc_hf_model_get_config (DcHfModel *self)
{
  g_return_val_if_reached (NULL);
}

void
dc_hf_model_free (DcHfModel *self)
{
}

DcHfKvCache *
dc_hf_kv_cache_new (DcHfModel  *self,
                    guint       context,
                    GError    **error)
{
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED, "not built yet");
  return NULL;
}

guint
dc_hf_kv_cache_get_length (DcHfKvCache *cache)
{
  return 0;
}

void
dc_hf_kv_cache_reset (DcHfKvCache *cache)
{
}

void
dc_hf_kv_cache_free (DcHfKvCache *cache)
{
}

gboolean
dc_hf_model_forward (DcHfModel      *self,
                     DcHfKvCache    *cache,
                     const guint32  *ids,
                     gsize           n_ids,
                     float          *logits,
                     GError        **error)
{
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED, "not built yet");
  return FALSE;
}
