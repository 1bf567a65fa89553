/* PLACEHOLDER: owned by MODEL (hf-contract.md section 2); the lead keeps MODEL's version.
 *
 * dc-hf-model.h: a Hugging Face model's weights in the engine's INT8 form and its forward pass.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-hf-config.h"
#include "dc-tensor-source.h"
#include "engine/dc-gemm-backend.h"

G_BEGIN_DECLS

typedef struct _DcHfModel DcHfModel;     /* weights in the engine's INT8 form, read-only after load */
typedef struct _DcHfKvCache DcHfKvCache; /* one sequence's keys and values */

/* Progress while loading: bytes of weights read so far and in all. Called on the loading thread. */
typedef void (*DcHfLoadProgress) (guint64 done, guint64 total, gpointer user_data);

DcHfModel   *dc_hf_model_load        (const DcHfConfig *config, DcTensorSource *source,
                                      DcGemmBackend *backend, DcHfLoadProgress progress,
                                      gpointer user_data, GCancellable *cancellable,
                                      GError **error);
GPtrArray   *dc_hf_model_list_tensors (const DcHfConfig *config, DcTensorSource *source,
                                       GError **error);   /* const DcSafetensorsTensor* */
guint64      dc_hf_model_memory_bytes (const DcHfConfig *config, guint context);
const DcHfConfig *dc_hf_model_get_config (DcHfModel *self);
void         dc_hf_model_free        (DcHfModel *self);

DcHfKvCache *dc_hf_kv_cache_new      (DcHfModel *self, guint context, GError **error);
guint        dc_hf_kv_cache_get_length (DcHfKvCache *cache);  /* positions filled */
void         dc_hf_kv_cache_reset    (DcHfKvCache *cache);
void         dc_hf_kv_cache_free     (DcHfKvCache *cache);

gboolean     dc_hf_model_forward     (DcHfModel *self, DcHfKvCache *cache,
                                      const guint32 *ids, gsize n_ids, float *logits,
                                      GError **error);

G_END_DECLS
