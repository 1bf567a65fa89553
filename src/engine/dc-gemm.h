/* dc-gemm.h: the one multiply primitive, exact INT8 GEMM (docs/VERIFICATION.md).
 *
 * Every matrix product of the product, forward and backward, training and
 * inference, goes through this API. Operands are quantized "vectors": a row of
 * the left operand or a column of the right one, K int8 values in [-127, 127]
 * stored contiguously, with one power-of-two scale exponent per vector. The
 * product accumulates exactly in int32 and then applies the fixed epilogue:
 *
 *   c[m][n] = (float) acc[m][n]  (one rounding)  ×  2^(ea[m] + eb[n])  (exact)
 *
 * The three forms the model needs map onto it by choosing which float matrix
 * becomes which set of vectors (dc_quant_pack's strides):
 *   Y  = X·Wᵀ : a = rows of X (M, K), b = rows of W (N, K)
 *   dW = Gᵀ·X : a = columns of G (T, N) → N vectors of length T, b = columns of X
 *   dX = G·W  : a = rows of G (T, N), b = columns of W (N, K) → K vectors of length N
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-types.h"

G_BEGIN_DECLS

#define DC_GEMM_ERROR (dc_gemm_error_quark ())

typedef enum
{
  DC_GEMM_ERROR_NOT_FINITE,  /* NaN or infinity in an operand: never quantized */
  DC_GEMM_ERROR_TOO_LARGE,   /* K beyond DC_GEMM_MAX_K, or sizes overflow */
  DC_GEMM_ERROR_SHAPE,       /* operands do not fit together */
  DC_GEMM_ERROR_BACKEND,     /* the backend failed (Vulkan error, …) */
  DC_GEMM_ERROR_RANGE,       /* a quantized value is -128 or an exponent is out of range */
  DC_GEMM_ERROR_VERIFICATION, /* every GPU kernel failed its init gate */
} DcGemmError;

/* The largest K whose int32 accumulator cannot overflow: 127·127·K < 2^31. */
#define DC_GEMM_MAX_K 131072

/* The range every path accepts for a vector's scale exponent. dc_quant_pack
 * only produces [-155, 121]; the wider bound keeps ea + eb far from int32
 * overflow on every path. */
#define DC_GEMM_EXPONENT_MIN (-1024)
#define DC_GEMM_EXPONENT_MAX 1024

/* The numeric rule, versioned. Change the string whenever any path's bits
 * could change; dc_gemm_rule_id() hashes it for the mesh hello. */
#define DC_GEMM_RULE_VERSION \
  "daisychain-int8-gemm/1: pow2 per-vector scale e=floor(log2(amax))-6; " \
  "q=clamp(rne(x*2^-e),-127,127); exact int32 sum, K<=131072; " \
  "c=rne_f32(acc)*2^(ea+eb), exponent<1 -> signed zero, >254 -> signed FLT_MAX"

/**
 * DcQuantMatrix:
 * @n_vectors: how many vectors (rows of A, or columns of B)
 * @k: the length of each vector (the reduction dimension)
 * @q: (array length=n_vectors*k): int8 values, vector-major: q[v * k + i]
 * @exponent: (array length=n_vectors): value = q · 2^exponent
 *
 * A quantized operand. Plain data: dc_quant_matrix_new() allocates both arrays.
 */
typedef struct
{
  gsize    n_vectors;
  gsize    k;
  gint8   *q;
  gint32  *exponent;
} DcQuantMatrix;

GQuark         dc_gemm_error_quark         (void);

DcQuantMatrix *dc_quant_matrix_new         (gsize                 n_vectors,
                                            gsize                 k,
                                            GError              **error);
void           dc_quant_matrix_free        (DcQuantMatrix        *self);

/**
 * dc_quant_pack:
 * @what: names the operation for error messages ("attention Q·Kᵀ", …)
 * @src: float matrix; element (v, i) of vector v is src[v * vector_stride + i * k_stride]
 * @out: a matrix of @out->n_vectors vectors of length @out->k to fill
 *
 * Quantizes each vector with its own power-of-two scale (the rule in
 * docs/VERIFICATION.md). Refuses NaN and infinity with DC_GEMM_ERROR_NOT_FINITE
 * naming @what.
 */
gboolean       dc_quant_pack               (const char           *what,
                                            const float          *src,
                                            gsize                 vector_stride,
                                            gsize                 k_stride,
                                            DcQuantMatrix        *out,
                                            GError              **error);

/**
 * dc_quant_pack_reference:
 *
 * The readable scalar form of dc_quant_pack(), which uses a SIMD packer for
 * contiguous vectors where the CPU has one; both give the same bits.
 */
gboolean       dc_quant_pack_reference     (const char           *what,
                                            const float          *src,
                                            gsize                 vector_stride,
                                            gsize                 k_stride,
                                            DcQuantMatrix        *out,
                                            GError              **error);

/**
 * dc_gemm_reference_i32:
 * @acc: (out) (array length=a->n_vectors*b->n_vectors): acc[m * N + n]
 *
 * The readable scalar reference for the int32 accumulators. Every other path
 * must equal it bit for bit.
 */
void           dc_gemm_reference_i32       (const DcQuantMatrix  *a,
                                            const DcQuantMatrix  *b,
                                            gint32               *acc);

/**
 * dc_gemm_reference:
 * @c: (out) (array length=a->n_vectors*b->n_vectors): c[m * N + n], row-major (M, N)
 *
 * The scalar reference for the whole product, epilogue included.
 */
void           dc_gemm_reference           (const DcQuantMatrix  *a,
                                            const DcQuantMatrix  *b,
                                            float                *c);

/**
 * dc_gemm_reference_f32:
 * @a: element k of row i at a[i * a_vs + k * a_ks], i < m, k < depth
 * @b: element k of row j at b[j * b_vs + k * b_ks], j < n
 * @c: (out) (array length=m*n): c[i * n + j] = Σ_k a_ik · b_jk
 *
 * The plain f32 product the model's tests use as their yardstick (finite
 * differences, convergence): it accumulates in double and rounds once, and
 * is not part of the numeric contract.
 */
void           dc_gemm_reference_f32       (const float          *a,
                                            gsize                 a_vs,
                                            gsize                 a_ks,
                                            gsize                 m,
                                            const float          *b,
                                            gsize                 b_vs,
                                            gsize                 b_ks,
                                            gsize                 n,
                                            gsize                 depth,
                                            float                *c);

/**
 * dc_gemm_epilogue:
 * @acc: an exact int32 accumulator
 * @ea: the exponent of the left vector
 * @eb: the exponent of the right vector
 *
 * The fixed epilogue, shared by every CPU path: one round-to-nearest-even
 * conversion to f32, then an exact power-of-two scaling done on the bits, with
 * results below the normal range flushed to a signed zero and results above it
 * saturated to a signed FLT_MAX (docs/VERIFICATION.md).
 */
float          dc_gemm_epilogue            (gint32                acc,
                                            gint32                ea,
                                            gint32                eb);

/**
 * dc_gemm_rule_id:
 *
 * Returns: the first 16 hex digits of SHA-256 of DC_GEMM_RULE_VERSION; peers
 *   whose rule id differs never co-train.
 */
const char    *dc_gemm_rule_id             (void);

/**
 * dc_quant_matrix_check:
 *
 * Checks what every path relies on: values in [-127, 127] and exponents in
 * [DC_GEMM_EXPONENT_MIN, DC_GEMM_EXPONENT_MAX]. Matrices from dc_quant_pack
 * always pass; hand-filled ones (tests, peers) may not.
 */
gboolean       dc_quant_matrix_check       (const char           *what,
                                            const DcQuantMatrix  *m,
                                            GError              **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcQuantMatrix, dc_quant_matrix_free)

G_END_DECLS
