/* dc-gemm.c: the numeric rule of the INT8 GEMM (docs/VERIFICATION.md), in its
 * readable form: quantization, the scalar reference and the epilogue.
 *
 * Quantization scheme: each vector x of K floats gets the exponent
 * e = floor(log2(max |x_i|)) - 6 and q_i = clamp(rne(x_i · 2^-e), -127, 127),
 * so the largest magnitude lands in [64, 128) before rounding. The scaling is
 * done in double, where multiplying a float by a power of two in that range is
 * exact, so only the final rounding to an integer is inexact, and it is done
 * with the classic 1.5·2^52 trick (round to nearest, ties to even, under the
 * default rounding mode) rather than libm.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-gemm.h"
#include "dc-gemm-private.h"
#include "dc-quant-simd-private.h"

#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK (dc-gemm-error-quark, dc_gemm_error)

static inline guint32
float_bits (float f)
{
  guint32 u;

  memcpy (&u, &f, sizeof u);
  return u;
}

static inline double
double_pow2 (int e)
{
  guint64 u = (guint64) (e + 1023) << 52;
  double d;

  /* Only called with e in [-200, 200]: a normal double, exact. */
  g_assert (e > -1023 && e < 1024);
  memcpy (&d, &u, sizeof d);
  return d;
}

/* floor(log2(|x|)) of a finite non-zero float, read from its bits. */
static inline int
float_floor_log2 (guint32 abs_bits)
{
  guint32 biased = abs_bits >> 23;

  if (biased != 0)
    return (int) biased - 127;

  /* Subnormal: the value is mantissa · 2^-149. */
  return (31 - __builtin_clz (abs_bits)) - 149;
}

/* Round to nearest integer, ties to even, for |y| < 2^51. */
static inline double
round_half_even (double y)
{
  const double magic = 6755399441055744.0;  /* 1.5 · 2^52 */
  volatile double t = y + magic;            /* volatile: never folded or contracted */

  return t - magic;
}

DcQuantMatrix *
dc_quant_matrix_new (gsize     n_vectors,
                     gsize     k,
                     GError  **error)
{
  DcQuantMatrix *self;
  gsize n_values;

  if (k == 0 || n_vectors == 0)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_SHAPE,
                   "A quantized matrix needs at least one vector of length one "
                   "(asked for %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT ")", n_vectors, k);
      return NULL;
    }
  if (k > DC_GEMM_MAX_K)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE,
                   "Vectors of length %" G_GSIZE_FORMAT " exceed the largest exact K (%d)",
                   k, DC_GEMM_MAX_K);
      return NULL;
    }
  if (!g_size_checked_mul (&n_values, n_vectors, k) ||
      n_vectors > G_MAXINT32 || n_values > G_MAXSIZE / 2)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE,
                   "A quantized matrix of %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT
                   " values is too large", n_vectors, k);
      return NULL;
    }

  self = g_new0 (DcQuantMatrix, 1);
  self->n_vectors = n_vectors;
  self->k = k;
  /* Vectors start on a 64-byte cache line (and stay on one when k is a
   * multiple of 64, as in every model's shapes): a 64-byte AVX-512 load from
   * malloc's 16-byte alignment straddles two lines, which halved the VNNI
   * kernel's streaming rate over the weights of a decode step. Freed with
   * free () in dc_quant_matrix_free. */
  if (posix_memalign ((void **) &self->q, 64, MAX (n_values, 1)) == 0)
    memset (self->q, 0, n_values);
  else
    self->q = NULL;
  self->exponent = g_try_new0 (gint32, n_vectors);
  if (self->q == NULL || self->exponent == NULL)
    {
      dc_quant_matrix_free (self);
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE,
                   "Out of memory for a quantized matrix of %" G_GSIZE_FORMAT
                   " × %" G_GSIZE_FORMAT " values", n_vectors, k);
      return NULL;
    }
  return self;
}

void
dc_quant_matrix_free (DcQuantMatrix *self)
{
  if (self == NULL)
    return;
  free (self->q);  /* from posix_memalign */
  g_free (self->exponent);
  g_free (self);
}

gboolean
dc_quant_matrix_check (const char           *what,
                       const DcQuantMatrix  *m,
                       GError              **error)
{
  for (gsize v = 0; v < m->n_vectors; v++)
    {
      if (m->exponent[v] < DC_GEMM_EXPONENT_MIN || m->exponent[v] > DC_GEMM_EXPONENT_MAX)
        {
          g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE,
                       "%s: vector %" G_GSIZE_FORMAT " has scale exponent %d, outside [%d, %d]",
                       what, v, m->exponent[v], DC_GEMM_EXPONENT_MIN, DC_GEMM_EXPONENT_MAX);
          return FALSE;
        }
    }
  for (gsize i = 0; i < m->n_vectors * m->k; i++)
    {
      if (m->q[i] == -128)
        {
          g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_RANGE,
                       "%s: value -128 at vector %" G_GSIZE_FORMAT ", index %" G_GSIZE_FORMAT
                       " (quantized values are clamped to [-127, 127])",
                       what, i / m->k, i % m->k);
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
dc_quant_pack (const char     *what,
               const float    *src,
               gsize           vector_stride,
               gsize           k_stride,
               DcQuantMatrix  *out,
               GError        **error)
{
  g_return_val_if_fail (what != NULL, FALSE);
  g_return_val_if_fail (src != NULL, FALSE);
  g_return_val_if_fail (out != NULL, FALSE);

  /* Contiguous vectors go to the SIMD packer, columns of a row-major matrix
   * to the SIMD column packer (same bits, each gated at start-up); other
   * strides stay on the reference. */
  if (k_stride == 1)
    return dc_quant_pack_simd (what, src, vector_stride, out, error);
  if (vector_stride == 1 && out->k > 1)
    return dc_quant_pack_columns_simd (what, src, k_stride, out, error);
  return dc_quant_pack_reference (what, src, vector_stride, k_stride, out, error);
}

gboolean
dc_quant_pack_reference (const char     *what,
                         const float    *src,
                         gsize           vector_stride,
                         gsize           k_stride,
                         DcQuantMatrix  *out,
                         GError        **error)
{
  g_return_val_if_fail (what != NULL, FALSE);
  g_return_val_if_fail (src != NULL, FALSE);
  g_return_val_if_fail (out != NULL, FALSE);

  for (gsize v = 0; v < out->n_vectors; v++)
    {
      const float *x = src + v * vector_stride;
      gint8 *q = out->q + v * out->k;
      guint32 amax_bits = 0;
      double inv_scale;
      int e;

      /* The largest magnitude, compared on the bits: for finite floats the
       * order of |x| is the order of their bit patterns without the sign. */
      for (gsize i = 0; i < out->k; i++)
        {
          guint32 abs_bits = float_bits (x[i * k_stride]) & 0x7fffffffu;

          if (abs_bits >= 0x7f800000u)
            {
              g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE,
                           "%s: %s at vector %" G_GSIZE_FORMAT ", index %" G_GSIZE_FORMAT
                           " (refused, never quantized)",
                           what, abs_bits == 0x7f800000u ? "infinity" : "NaN", v, i);
              return FALSE;
            }
          if (abs_bits > amax_bits)
            amax_bits = abs_bits;
        }

      if (amax_bits == 0)
        {
          /* An all-zero vector: every product with it is exactly zero. */
          memset (q, 0, out->k);
          out->exponent[v] = 0;
          continue;
        }

      e = float_floor_log2 (amax_bits) - 6;
      inv_scale = double_pow2 (-e);
      for (gsize i = 0; i < out->k; i++)
        {
          /* Exact: a float times a power of two in double's normal range. */
          double y = (double) x[i * k_stride] * inv_scale;
          double r = round_half_even (y);

          if (r > 127.0)
            r = 127.0;
          else if (r < -127.0)
            r = -127.0;
          q[i] = (gint8) r;
        }
      out->exponent[v] = e;
    }
  return TRUE;
}

float
dc_gemm_epilogue (gint32 acc,
                  gint32 ea,
                  gint32 eb)
{
  return dc_gemm_epilogue_inline (acc, ea, eb);
}

void
dc_gemm_reference_i32 (const DcQuantMatrix *a,
                       const DcQuantMatrix *b,
                       gint32              *acc)
{
  const gsize M = a->n_vectors, N = b->n_vectors, K = a->k;

  g_return_if_fail (a->k == b->k);

  /* acc[m][n] = Σ_i a[m][i] · b[n][i], in order. With |q| ≤ 127 and
   * K ≤ DC_GEMM_MAX_K no partial sum leaves int32, so any order of the
   * additions gives these bits. */
  for (gsize m = 0; m < M; m++)
    for (gsize n = 0; n < N; n++)
      {
        const gint8 *x = a->q + m * K;
        const gint8 *y = b->q + n * K;
        gint64 sum = 0;

        for (gsize i = 0; i < K; i++)
          sum += (gint32) x[i] * (gint32) y[i];
        acc[m * N + n] = (gint32) sum;
      }
}

void
dc_gemm_reference (const DcQuantMatrix *a,
                   const DcQuantMatrix *b,
                   float               *c)
{
  const gsize M = a->n_vectors, N = b->n_vectors;
  g_autofree gint32 *acc = g_new (gint32, M * N);

  dc_gemm_reference_i32 (a, b, acc);
  for (gsize m = 0; m < M; m++)
    for (gsize n = 0; n < N; n++)
      c[m * N + n] = dc_gemm_epilogue (acc[m * N + n], a->exponent[m], b->exponent[n]);
}

const char *
dc_gemm_rule_id (void)
{
  static char id[17];
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      g_autofree char *sha = g_compute_checksum_for_string (G_CHECKSUM_SHA256,
                                                            DC_GEMM_RULE_VERSION, -1);
      memcpy (id, sha, 16);
      id[16] = '\0';
      g_once_init_leave (&done, 1);
    }
  return id;
}

void
dc_gemm_reference_f32 (const float *a,
                       gsize        a_vs,
                       gsize        a_ks,
                       gsize        m,
                       const float *b,
                       gsize        b_vs,
                       gsize        b_ks,
                       gsize        n,
                       gsize        depth,
                       float       *c)
{
  /* Operands are copied into contiguous rows first so the inner loop streams. */
  g_autofree float *ra = g_new (float, m * depth);
  g_autofree float *rb = g_new (float, n * depth);

  for (gsize i = 0; i < m; i++)
    for (gsize k = 0; k < depth; k++)
      ra[i * depth + k] = a[i * a_vs + k * a_ks];
  for (gsize j = 0; j < n; j++)
    for (gsize k = 0; k < depth; k++)
      rb[j * depth + k] = b[j * b_vs + k * b_ks];
  for (gsize i = 0; i < m; i++)
    for (gsize j = 0; j < n; j++)
      {
        const float *x = ra + i * depth, *y = rb + j * depth;
        double acc = 0.0;

        for (gsize k = 0; k < depth; k++)
          acc += (double) x[k] * (double) y[k];
        c[i * n + j] = (float) acc;
      }
}
