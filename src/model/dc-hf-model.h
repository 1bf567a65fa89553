/* dc-hf-model.h: Hugging Face causal language models (the Llama family and
 * GPT-2) held in the engine's INT8 form, and their forward pass with a KV
 * cache, for inference.
 *
 * Every product (the projections, attention's Q·Kᵀ and P·V, the head) goes
 * through the one INT8 rule (dc_gemm_run_packed on a DcGemmBackend), and
 * everything else through dc_math, so every device computes the same bits
 * (docs/VERIFICATION.md). docs/ARCHITECTURE.md describes the data layout.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "engine/dc-gemm-backend.h"
#include "dc-hf-config.h"
#include "dc-safetensors.h"
#include "dc-tensor-source.h"

G_BEGIN_DECLS

/* Weights in the engine's INT8 form, read-only after load. */
typedef struct _DcHfModel DcHfModel;
typedef struct _DcHfKvCache DcHfKvCache; /* one sequence's keys and values */

/* Progress while loading: bytes of weights read so far and in all. Called on the loading thread. */
typedef void (*DcHfLoadProgress) (guint64 done, guint64 total, gpointer user_data);

/* Positions one forward call computes at a time: bounds its scratch memory
 * (the (chunk × heads × context) attention scores). A longer call runs in
 * chunks, which gives the same bits. */
#define DC_HF_MODEL_CHUNK 64

/* Checks every tensor the architecture needs is in SOURCE with the config's shape
 * (missing/mis-shaped: a clear error naming the tensor), then reads them (F32/F16/BF16
 * widened, then packed to INT8 with dc_quant_pack). Runs on a worker thread. */
DcHfModel   *dc_hf_model_load        (const DcHfConfig *config, DcTensorSource *source,
                                      DcGemmBackend *backend, DcHfLoadProgress progress,
                                      gpointer user_data, GCancellable *cancellable,
                                      GError **error);
/* Without reading: the names and header entries the model would read, for the dialog's
 * "download size" and the tests' byte counts. Error if one is missing. */
GPtrArray   *dc_hf_model_list_tensors (const DcHfConfig *config, DcTensorSource *source,
                                       GError **error);   /* const DcSafetensorsTensor* */
guint64      dc_hf_model_memory_bytes (const DcHfConfig *config, guint context);
const DcHfConfig *dc_hf_model_get_config (DcHfModel *self);
void         dc_hf_model_free        (DcHfModel *self);

DcHfKvCache *dc_hf_kv_cache_new      (DcHfModel *self, guint context, GError **error);
guint        dc_hf_kv_cache_get_length (DcHfKvCache *cache);  /* positions filled */
void         dc_hf_kv_cache_reset    (DcHfKvCache *cache);
/* Keeps positions [0, LENGTH): later calls append from there, with the same bits. */
void         dc_hf_kv_cache_truncate (DcHfKvCache *cache, guint length);
void         dc_hf_kv_cache_free     (DcHfKvCache *cache);

/* Appends N_IDS tokens at positions length..length+n-1 of CACHE and writes the logits of
 * the LAST position (vocab_size floats) into LOGITS. Fails cleanly when the context is full
 * or an id is outside the vocabulary. Same bits on every device (every product through
 * dc_gemm_run / the INT8 rule; everything else through dc_math). */
gboolean     dc_hf_model_forward     (DcHfModel *self, DcHfKvCache *cache,
                                      const guint32 *ids, gsize n_ids, float *logits,
                                      GError **error);

/* Parts, for a ring of devices that each hold a contiguous run of layers
 * (src/infer/dc-infer-ring.h): layers [FIRST, LAST), and with ENDS the
 * embedding, the final norm and the head. A part computes the same bits as
 * the whole model for its layers. */
DcHfModel   *dc_hf_model_load_part   (const DcHfConfig *config, DcTensorSource *source,
                                      DcGemmBackend *backend, guint first, guint last,
                                      gboolean ends, DcHfLoadProgress progress,
                                      gpointer user_data, GCancellable *cancellable,
                                      GError **error);
GPtrArray   *dc_hf_model_list_part_tensors (const DcHfConfig *config, DcTensorSource *source,
                                            guint first, guint last, gboolean ends,
                                            GError **error);
guint64      dc_hf_model_part_memory_bytes (const DcHfConfig *config, guint first, guint last,
                                            gboolean ends, guint context);
guint        dc_hf_model_get_first_layer (DcHfModel *self);
guint        dc_hf_model_get_last_layer  (DcHfModel *self);
/* Appends N positions to CACHE through the part's layers: embeds IDS when
 * given (the part has the ends), else reads the states X (N × hidden_size);
 * writes the states after its last layer to X. */
gboolean     dc_hf_model_forward_part (DcHfModel *self, DcHfKvCache *cache,
                                       const guint32 *ids, float *x, gsize n,
                                       GError **error);
/* The final norm and head of one state (hidden_size floats) into LOGITS. */
gboolean     dc_hf_model_head         (DcHfModel *self, const float *x, float *logits,
                                       GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcHfModel, dc_hf_model_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcHfKvCache, dc_hf_kv_cache_free)

G_END_DECLS
