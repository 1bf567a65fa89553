/* dc-gpt.h: forward and backward of the GPT-2 training model over a batch.
 *
 * Every matrix product goes through the engine's exact INT8 GEMM (or, in the
 * f32 reference precision the tests use, a plain float product); everything
 * else goes through the deterministic math library (dc-math.h) in a fixed
 * order that does not depend on the thread count. Quantization is treated as
 * the identity in the backward pass (straight-through estimator): gradients
 * are computed by INT8 GEMMs of the float gradients and float operands.
 *
 * Shapes: B = batch, T = sequence, C = width, H = heads, D = C / H, V = 256,
 * BT = B·T rows, each row one token position; all row-major.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "engine/dc-gemm-backend.h"
#include "dc-gpt-config.h"

G_BEGIN_DECLS

typedef enum
{
  DC_GPT_PRECISION_INT8,  /* the product: every product an exact INT8 GEMM */
  DC_GPT_PRECISION_F32,   /* the test reference: the same model in plain f32 */
} DcGptPrecision;

typedef struct _DcGptRun DcGptRun;

DcGptRun    *dc_gpt_run_new         (const DcGptConfig  *config,
                                     guint               batch,
                                     DcGptPrecision      precision,
                                     guint               n_threads);
void         dc_gpt_run_free        (DcGptRun           *self);
void         dc_gpt_run_set_device  (DcGptRun           *self,
                                     DcGemmBackend      *device,
                                     guint64             offload_min);
guint        dc_gpt_run_get_batch   (DcGptRun           *self);
gboolean     dc_gpt_run_forward     (DcGptRun           *self,
                                     const float        *params,
                                     const guint8       *inputs,
                                     const guint8       *targets,
                                     guint               n_seqs,
                                     guint               len,
                                     float              *loss,
                                     GError            **error);
gboolean     dc_gpt_run_backward    (DcGptRun           *self,
                                     const float        *params,
                                     float              *grads,
                                     GError            **error);
const float *dc_gpt_run_get_logits  (DcGptRun           *self);

/**
 * DcGptLayerDoneFunc:
 * @first_final: every gradient from this index to the end is final
 * @user_data: as given to dc_gpt_run_set_layer_done_func ()
 *
 * Called by dc_gpt_run_backward () on its thread after each block's
 * gradients are written (last block first), so that a caller can send
 * them while the rest of the backward pass runs. It must not touch the
 * run; it may read the final gradients.
 */
typedef void (*DcGptLayerDoneFunc) (gsize    first_final,
                                    gpointer user_data);

void         dc_gpt_run_set_layer_done_func (DcGptRun           *self,
                                             DcGptLayerDoneFunc  func,
                                             gpointer            user_data);
void         dc_gpt_run_report_layers_done  (DcGptRun           *self);

/**
 * DcGptPhase:
 * The passes between the products, by kind, for `bench train`'s time split:
 * @DC_GPT_PHASE_EMBED: the embeddings, forward and backward
 * @DC_GPT_PHASE_NORM: the layer norms, forward and backward
 * @DC_GPT_PHASE_ATTENTION: the heads (their small products included)
 * @DC_GPT_PHASE_BIAS: biases, ReLU, residual adds, bias gradients
 * @DC_GPT_PHASE_LOSS: softmax and cross-entropy, the tied head's scatter
 */
typedef enum
{
  DC_GPT_PHASE_EMBED,
  DC_GPT_PHASE_NORM,
  DC_GPT_PHASE_ATTENTION,
  DC_GPT_PHASE_BIAS,
  DC_GPT_PHASE_LOSS,
  DC_GPT_N_PHASES
} DcGptPhase;

const char  *dc_gpt_phase_to_string (DcGptPhase          phase);

/**
 * DcGptRunTimes:
 * @gemm_ns: the calling thread's time in the products it runs (packing
 *   included; attention's per-head products run inside the attention pass
 *   and are not counted)
 * @gemm_wait_ns: of that, time spent waiting for the pool's helpers
 * @phase_ns: the calling thread's time in each kind of pass, its waits for
 *   the pool included
 * @phase_passes: how many passes of each kind ran
 * @phase_threads: the threads those passes asked for, summed (divided by
 *   @phase_passes: how wide a pass of that kind ran on average)
 *
 * Totals since the run was made; `bench train` splits a step's time with them.
 */
typedef struct
{
  guint64 gemm_ns;
  guint64 gemm_wait_ns;
  guint64 phase_ns[DC_GPT_N_PHASES];
  guint64 phase_passes[DC_GPT_N_PHASES];
  guint64 phase_threads[DC_GPT_N_PHASES];
} DcGptRunTimes;

void         dc_gpt_run_get_times   (DcGptRun           *self,
                                     DcGptRunTimes      *out);

gsize        dc_gpt_run_get_arena_bytes (DcGptRun       *self);

/**
 * DcGptMemory:
 * @n_params: parameters
 * @params_bytes: weights and both Adam moments (12 bytes a parameter)
 * @grads_bytes: the gradient (4 bytes a parameter)
 * @arena_bytes: activations and backward scratch, exactly as allocated
 * @scratch_bytes: a bound on the products' int8 operands and the token rows
 * @total_bytes: the sum
 *
 * What a training run needs in memory (dc_gpt_train_memory ()).
 */
typedef struct
{
  guint64 n_params;
  guint64 params_bytes;
  guint64 grads_bytes;
  guint64 arena_bytes;
  guint64 scratch_bytes;
  guint64 total_bytes;
} DcGptMemory;

void         dc_gpt_train_memory    (const DcGptConfig  *config,
                                     guint               batch,
                                     guint               n_threads,
                                     DcGptMemory        *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptRun, dc_gpt_run_free)

G_END_DECLS
