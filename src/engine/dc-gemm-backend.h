/* dc-gemm-backend.h: where INT8 GEMMs run (cpu-scalar, cpu, vulkan).
 *
 * A backend is created on, and used from, one thread at a time. Every backend
 * computes the same bits (docs/VERIFICATION.md); a Vulkan backend whose
 * kernels all fail their init gates falls back to the CPU path.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-gemm.h"

G_BEGIN_DECLS

typedef struct _DcGemmBackend DcGemmBackend;

const char    *dc_backend_kind_to_string          (DcBackendKind         kind);
gboolean       dc_backend_kind_from_string        (const char           *name,
                                                   DcBackendKind        *kind);

/**
 * dc_gemm_backend_new:
 * @kind: the backend asked for
 *
 * For %DC_BACKEND_VULKAN this opens the first suitable device and runs every
 * kernel variant's init gate; it fails only when no device can be used at
 * all. When every kernel is refused the backend runs on the CPU path and
 * dc_gemm_backend_get_kind() says so.
 *
 * Returns: (transfer full) (nullable): the backend
 */
DcGemmBackend *dc_gemm_backend_new                (DcBackendKind         kind,
                                                   GError              **error);
/* The same on the Vulkan device @device_id (dc_vk_find_device()); NULL or
 * "" for the best one. An unknown id fails with DC_GEMM_ERROR_BACKEND. */
DcGemmBackend *dc_gemm_backend_new_for_device     (DcBackendKind         kind,
                                                   const char           *device_id,
                                                   GError              **error);
void           dc_gemm_backend_free               (DcGemmBackend        *self);

/* The backend actually used (after any fallback). */
DcBackendKind  dc_gemm_backend_get_kind           (DcGemmBackend        *self);
const char    *dc_gemm_backend_get_device_name    (DcGemmBackend        *self);
const char    *dc_gemm_backend_get_device_id      (DcGemmBackend        *self);
const char    *dc_gemm_backend_get_fallback_reason (DcGemmBackend       *self);
/* The kernel in use: "scalar", "avx2", "avx512-vnni", or a shader variant. */
const char    *dc_gemm_backend_get_kernel_name    (DcGemmBackend        *self);
/* CPU threads (default: the number of processors); results never depend on it. */
void           dc_gemm_backend_set_n_threads      (DcGemmBackend        *self,
                                                   guint                 n_threads);
guint          dc_gemm_backend_get_n_threads      (DcGemmBackend        *self);

/**
 * dc_gemm_run:
 * @a: M vectors of length K
 * @b: N vectors of length K
 * @c: (out) (array length=M*N): c[m * N + n], row-major (M, N)
 *
 * c = epilogue (a · bᵀ). Refuses mismatched K, values of -128 and
 * out-of-range exponents (hand-filled operands) with a #DC_GEMM_ERROR.
 */
gboolean       dc_gemm_run                        (DcGemmBackend        *self,
                                                   const DcQuantMatrix  *a,
                                                   const DcQuantMatrix  *b,
                                                   float                *c,
                                                   GError              **error);
/**
 * dc_gemm_run_packed:
 *
 * dc_gemm_run() for operands that dc_quant_pack() has just filled and nothing
 * has written to since (the model's products): it skips the value check,
 * which such operands pass by construction. Shapes are still checked.
 * Operands from anywhere else (peers, files, tests) go through dc_gemm_run().
 */
gboolean       dc_gemm_run_packed                 (DcGemmBackend        *self,
                                                   const DcQuantMatrix  *a,
                                                   const DcQuantMatrix  *b,
                                                   float                *c,
                                                   GError              **error);
/**
 * DcGemmFillFunc:
 * @is_b: %FALSE for A's vectors, %TRUE for B's
 * @v0: the first vector to fill
 * @v1: one past the last
 * @data: #DcGemmFill's data
 *
 * Quantizes vectors [@v0, @v1) of one operand into its matrix, as
 * dc_quant_pack() would (each vector on its own, so any split gives the
 * same bytes). May run on any thread of the pool, never twice for a vector.
 *
 * Returns: %FALSE when they could not be filled (a value not finite)
 */
typedef gboolean (*DcGemmFillFunc) (gboolean  is_b,
                                    gsize     v0,
                                    gsize     v1,
                                    gpointer  data);

/**
 * DcGemmFill:
 * @func: fills a run of vectors
 * @data: passed to @func
 * @a_chunk: A's vectors per call of @func, at least 1
 * @b_chunk: B's, at least 1 (the CPU backend rounds it up to the 16
 *   vectors of one repacked panel)
 * @n_threads: the most threads of the pool that fill
 */
typedef struct
{
  DcGemmFillFunc func;
  gpointer       data;
  gsize          a_chunk;
  gsize          b_chunk;
  guint          n_threads;
} DcGemmFill;

/**
 * dc_gemm_run_fill:
 * @a: M vectors of length K, allocated, values not yet written
 * @b: N vectors of length K, the same
 * @fill: how to write them
 *
 * dc_gemm_run_packed() for operands that @fill quantizes inside the
 * backend's own preparation: on the CPU one call of the pool quantizes a
 * run of vectors and at once derives from them what the kernel needs (B's
 * repacked panels, A's row sums), then a second computes the tiles, where
 * quantizing apart took a call of its own (docs/BENCHMARKS.md, issue 14).
 * Other backends fill first, then multiply. The same bits as
 * dc_gemm_run_packed() on the filled operands. When @func fails for any
 * vector nothing is computed and this fails with %DC_GEMM_ERROR_NOT_FINITE
 * (the caller's @data knows which vector).
 */
gboolean       dc_gemm_run_fill                   (DcGemmBackend        *self,
                                                   DcQuantMatrix        *a,
                                                   DcQuantMatrix        *b,
                                                   const DcGemmFill     *fill,
                                                   float                *c,
                                                   GError              **error);
/* The same, stopping at the exact int32 accumulators acc[m * N + n]. */
gboolean       dc_gemm_run_i32                    (DcGemmBackend        *self,
                                                   const DcQuantMatrix  *a,
                                                   const DcQuantMatrix  *b,
                                                   gint32               *acc,
                                                   GError              **error);

/* dc_gemm_backend_time_queued()'s figures, seconds per product; -1 where not
 * measured. */
typedef struct
{
  double queued;      /* @repeat dispatches in one submission, one wait (as torch times) */
  double gpu;         /* the same by GPU timestamps: the kernels' own time */
  double fence_wait;  /* one dispatch per submission, vkWaitForFences */
  double fence_poll;  /* one dispatch per submission, vkGetFenceStatus polled */
  double fresh;       /* one per submission, command buffer and fence made each time */
} DcGemmQueuedTiming;

/* Vulkan only (G_IO_ERROR_NOT_SUPPORTED elsewhere): times @repeat dispatches
 * of one product queued in one command buffer (dc-gemm-vk.c). */
gboolean       dc_gemm_backend_time_queued        (DcGemmBackend        *self,
                                                   const DcQuantMatrix  *a,
                                                   const DcQuantMatrix  *b,
                                                   guint                 repeat,
                                                   DcGemmQueuedTiming   *timing,
                                                   GError              **error);

/**
 * dc_gemm_backend_time:
 * @repeat: products to time, at least one
 * @seconds: (out): wall time of all @repeat products (f32 outputs)
 *
 * For benchmarks. On Vulkan the operands are uploaded once and only the
 * dispatches are timed (each one waited for); on the CPU every call is a
 * whole dc_gemm_run().
 */
gboolean       dc_gemm_backend_time               (DcGemmBackend        *self,
                                                   const DcQuantMatrix  *a,
                                                   const DcQuantMatrix  *b,
                                                   guint                 repeat,
                                                   double               *seconds,
                                                   GError              **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGemmBackend, dc_gemm_backend_free)

G_END_DECLS
