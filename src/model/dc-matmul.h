/* dc-matmul.h: the training model's one matrix product.
 *
 * A DcMatmul owns what a product needs besides its operands: the quantized
 * operand buffers (reused between products), the CPU backends, the device
 * backend and its offload threshold, the thread count and the thresholds
 * below which helpers cost more than they save, and the time spent. The
 * model (dc-gpt.c) only says which product it wants:
 *
 *   c (m, n) = A · Bᵀ, A's row i at a[i·a_vs + k·a_ks], B's row j at
 *   b[j·b_vs + k·b_ks], k < depth
 *
 * INT8 (the product, docs/VERIFICATION.md): both operands are quantized per
 * vector and multiplied by the engine's exact GEMM, the same bits on every
 * backend and thread count. F32 (the tests' yardstick):
 * dc_gemm_reference_f32().
 *
 * Threads: dc_matmul_run() is for the thread that owns the object (it may
 * use the pool's helpers and the device); inside a parallel pass each
 * worker uses dc_matmul_run_in_worker() with its pool worker index, on its
 * own buffers and backend, single-threaded.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "engine/dc-gemm-backend.h"

G_BEGIN_DECLS

typedef struct _DcMatmul DcMatmul;

/**
 * DcMatmulTimes:
 * @ns: the owner's time in dc_matmul_run() (packing included)
 * @wait_ns: of that, time spent waiting for the pool's helpers
 */
typedef struct
{
  guint64 ns;
  guint64 wait_ns;
} DcMatmulTimes;

/**
 * DcMatmulCausal:
 * @DC_MATMUL_CAUSAL_OUT: only c[i][j] with j ≤ i is wanted (Q·Kᵀ, dP); the
 *   other elements of c are unspecified afterwards
 * @DC_MATMUL_CAUSAL_A_LOWER: A's row i is exactly zero past element i
 *   (a causal softmax's rows: P·V, dQ)
 * @DC_MATMUL_CAUSAL_A_UPPER: A's row i is exactly zero before element i
 *   (its columns: dV, dK)
 *
 * The structure of a causal attention product that
 * dc_matmul_run_causal_in_worker() skips. Zero floats quantize to zero and
 * add nothing to an exact int32 sum, and each vector is still quantized
 * whole, so skipping them cannot change a bit.
 */
typedef enum
{
  DC_MATMUL_CAUSAL_OUT,
  DC_MATMUL_CAUSAL_A_LOWER,
  DC_MATMUL_CAUSAL_A_UPPER,
} DcMatmulCausal;

DcMatmul *dc_matmul_new            (gboolean        f32_reference,
                                    guint           n_threads,
                                    guint           n_workers);
void      dc_matmul_free           (DcMatmul       *self);
void      dc_matmul_set_device     (DcMatmul       *self,
                                    DcGemmBackend  *device,
                                    guint64         offload_min);
gboolean  dc_matmul_run            (DcMatmul       *self,
                                    const char     *what,
                                    const float    *a,
                                    gsize           a_vs,
                                    gsize           a_ks,
                                    gsize           m,
                                    const float    *b,
                                    gsize           b_vs,
                                    gsize           b_ks,
                                    gsize           n,
                                    gsize           depth,
                                    float          *c,
                                    GError        **error);
gboolean  dc_matmul_run_in_worker  (DcMatmul       *self,
                                    guint           worker,
                                    const char     *what,
                                    const float    *a,
                                    gsize           a_vs,
                                    gsize           a_ks,
                                    gsize           m,
                                    const float    *b,
                                    gsize           b_vs,
                                    gsize           b_ks,
                                    gsize           n,
                                    gsize           depth,
                                    float          *c,
                                    GError        **error);
gboolean  dc_matmul_run_causal_in_worker (DcMatmul       *self,
                                          guint           worker,
                                          DcMatmulCausal  causal,
                                          const char     *what,
                                          const float    *a,
                                          gsize           a_vs,
                                          gsize           a_ks,
                                          gsize           m,
                                          const float    *b,
                                          gsize           b_vs,
                                          gsize           b_ks,
                                          gsize           n,
                                          gsize           depth,
                                          float          *c,
                                          GError        **error);
void      dc_matmul_get_times      (DcMatmul       *self,
                                    DcMatmulTimes  *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcMatmul, dc_matmul_free)

G_END_DECLS
