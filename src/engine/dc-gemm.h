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
} DcGemmError;

/* The largest K whose int32 accumulator cannot overflow: 127·127·K < 2^31. */
#define DC_GEMM_MAX_K 131072

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

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcQuantMatrix, dc_quant_matrix_free)

G_END_DECLS
