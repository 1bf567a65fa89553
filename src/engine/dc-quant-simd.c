/* dc-quant-simd.c: the AVX2 quantizer and its start-up gate.
 *
 * It computes exactly what dc_quant_pack_reference() does (docs/VERIFICATION.md),
 * eight floats at a time:
 * - amax on the integer bits: for finite floats the order of |x| is the
 *   order of their bit patterns without the sign, so vpmaxud on x & 0x7fffffff
 *   finds the same largest magnitude (and NaN/infinity, whose patterns are
 *   above every finite one).
 * - e = floor(log2(amax)) - 6, read from the bits as the reference does.
 * - x · 2^-e in float rather than double. When 2^-e is a normal float
 *   (e in [-126, 126]) the product is exact whenever it is normal, because a
 *   power of two only moves the exponent, and it cannot overflow since
 *   |x| ≤ amax < 2^(e+7). When it falls below the normal range it may be
 *   rounded, but then |y| < 2^-126 and both paths round it to the integer 0.
 *   Vectors whose e is outside that range (amax subnormal or within 2^6 of
 *   the subnormal range) go to the reference.
 * - vroundps with round-to-nearest-even (the reference's 1.5·2^52 trick is
 *   the same rounding), clamp to [-127, 127] in float, convert (exact: the
 *   values are integers) and narrow with saturating packs.
 * Strided vectors, non-finite input (for the reference's error message) and
 * CPUs without AVX2 use the reference. Like the GEMM kernels, the AVX2 path
 * is used only after it has matched the reference on adversarial inputs;
 * DC_TEST_BREAK_KERNEL containing "quant-avx2" corrupts its answer there,
 * for the test of the gate only.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-quant-simd-private.h"
#include "dc-test-break.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DC_QUANT_X86 1
#endif

#ifdef DC_QUANT_X86

/* The range of e for which 2^-e is a normal float (see the file header). */
#define E_MIN (-126)
#define E_MAX 126

static inline float
float_pow2 (int e)
{
  guint32 u = (guint32) (e + 127) << 23;
  float f;

  memcpy (&f, &u, sizeof f);
  return f;
}

__attribute__ ((target ("avx2"))) static guint32
amax_bits_avx2 (const float *x,
                gsize        k)
{
  const __m256i abs_mask = _mm256_set1_epi32 (0x7fffffff);
  __m256i m0 = _mm256_setzero_si256 (), m1 = m0;
  __m128i s;
  guint32 amax;
  gsize i = 0;

  for (; i + 16 <= k; i += 16)
    {
      m0 = _mm256_max_epu32 (m0, _mm256_and_si256 (_mm256_loadu_si256 ((const __m256i *) (x + i)),
                                                   abs_mask));
      m1 = _mm256_max_epu32 (m1, _mm256_and_si256 (_mm256_loadu_si256 ((const __m256i *) (x + i + 8)),
                                                   abs_mask));
    }
  for (; i + 8 <= k; i += 8)
    m0 = _mm256_max_epu32 (m0, _mm256_and_si256 (_mm256_loadu_si256 ((const __m256i *) (x + i)),
                                                 abs_mask));
  m0 = _mm256_max_epu32 (m0, m1);
  s = _mm_max_epu32 (_mm256_castsi256_si128 (m0), _mm256_extracti128_si256 (m0, 1));
  s = _mm_max_epu32 (s, _mm_shuffle_epi32 (s, _MM_SHUFFLE (1, 0, 3, 2)));
  s = _mm_max_epu32 (s, _mm_shuffle_epi32 (s, _MM_SHUFFLE (2, 3, 0, 1)));
  amax = (guint32) _mm_cvtsi128_si32 (s);
  for (; i < k; i++)
    {
      guint32 u;

      memcpy (&u, x + i, sizeof u);
      u &= 0x7fffffffu;
      if (u > amax)
        amax = u;
    }
  return amax;
}

/* Eight floats to eight int32 in [-127, 127]. */
__attribute__ ((target ("avx2"))) static inline __m256i
quant8_avx2 (const float *x,
             __m256       scale)
{
  const __m256 hi = _mm256_set1_ps (127.0f), lo = _mm256_set1_ps (-127.0f);
  __m256 y = _mm256_mul_ps (_mm256_loadu_ps (x), scale);

  y = _mm256_round_ps (y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  y = _mm256_min_ps (_mm256_max_ps (y, lo), hi);
  return _mm256_cvtps_epi32 (y);
}

/* 32 floats to 32 int8, in order. */
__attribute__ ((target ("avx2"))) static inline void
quant32_avx2 (const float *x,
              __m256       scale,
              gint8       *q)
{
  /* packs work within 128-bit lanes: the dwords come out as
   * a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7, and the permute restores order. */
  const __m256i order = _mm256_setr_epi32 (0, 4, 1, 5, 2, 6, 3, 7);
  __m256i ab = _mm256_packs_epi32 (quant8_avx2 (x, scale), quant8_avx2 (x + 8, scale));
  __m256i cd = _mm256_packs_epi32 (quant8_avx2 (x + 16, scale), quant8_avx2 (x + 24, scale));
  __m256i p = _mm256_permutevar8x32_epi32 (_mm256_packs_epi16 (ab, cd), order);

  _mm256_storeu_si256 ((__m256i *) q, p);
}

/* Returns FALSE when the vector needs the reference (non-finite, or e out
 * of the float range); q and *exponent are then untouched. */
__attribute__ ((target ("avx2"))) static gboolean
quant_vector_avx2 (const float *x,
                   gsize        k,
                   gint8       *q,
                   gint32      *exponent)
{
  guint32 amax = amax_bits_avx2 (x, k);
  __m256 scale;
  gsize i = 0;
  int e;

  if (amax >= 0x7f800000u)
    return FALSE;
  if (amax == 0)
    {
      memset (q, 0, k);
      *exponent = 0;
      return TRUE;
    }
  if ((amax >> 23) == 0)
    return FALSE;  /* subnormal amax: e < -126 */
  e = (int) (amax >> 23) - 127 - 6;
  if (e < E_MIN || e > E_MAX)
    return FALSE;

  scale = _mm256_set1_ps (float_pow2 (-e));
  for (; i + 32 <= k; i += 32)
    quant32_avx2 (x + i, scale, q + i);
  if (i < k)
    {
      /* The ragged end through the same code: zeros quantize to 0. */
      float tail_x[32] = { 0 };
      gint8 tail_q[32];

      memcpy (tail_x, x + i, (k - i) * sizeof *x);
      quant32_avx2 (tail_x, scale, tail_q);
      memcpy (q + i, tail_q, k - i);
    }
  *exponent = e;
  return TRUE;
}

gboolean
dc_quant_pack_avx2 (const char     *what,
                    const float    *src,
                    gsize           vector_stride,
                    DcQuantMatrix  *out,
                    GError        **error)
{
  for (gsize v = 0; v < out->n_vectors; v++)
    {
      const float *x = src + v * vector_stride;

      if (!quant_vector_avx2 (x, out->k, out->q + v * out->k, out->exponent + v))
        {
          DcQuantMatrix one = { 1, out->k, out->q + v * out->k, out->exponent + v };

          /* Non-finite: the reference over the whole matrix gives the same
           * error, naming the same vector. Otherwise only this vector. */
          if (!dc_quant_pack_reference (what, x, out->k, 1, &one, NULL))
            return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
        }
    }
  return TRUE;
}

/* Inputs chosen to break a wrong packer: ties at .5 (even and odd), values
 * that round to 127.5 and 128, ±0, subnormals, amax near both ends of the
 * float range and at the edges of the fast path, ragged lengths, all-zero
 * vectors, then random floats over many binades. */
static gboolean
gate_input (guint        s,
            float       *x,
            gsize        k,
            guint64     *state)
{
  static const guint32 specials[] = {
    0x3f000000u, 0xbf000000u, 0x3fc00000u, 0xc0200000u,  /* ±0.5, 1.5, -2.5 */
    0x42fd0000u, 0x42ff0000u, 0xc2ff0000u, 0x42fe0000u,  /* 126.5, ±127.5, 127 */
    0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,  /* ±0, subnormals */
    0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x80800000u,  /* ±FLT_MAX, ±FLT_MIN */
    0x42ffffffu, 0xc2fffffeu, 0x40400000u, 0x3e800000u,  /* just under 128, 3, 0.25 */
  };

  for (gsize i = 0; i < k; i++)
    {
      guint32 u;

      *state = *state * 6364136223846793005u + 1442695040888963407u;
      switch (s % 6)
        {
        case 0:   /* specials only */
          u = specials[(*state >> 33) % G_N_ELEMENTS (specials)];
          break;
        case 1:   /* all zero, with signs */
          u = (*state >> 40) & 1 ? 0x80000000u : 0u;
          break;
        case 2:   /* random over every finite binade */
          u = (guint32) (*state >> 32);
          if ((u & 0x7f800000u) == 0x7f800000u)
            u &= 0xbfffffffu;
          break;
        case 3:   /* half-integers around the top: ties after scaling */
          {
            float f = (float) ((gint64) ((*state >> 33) % 255) - 127) + 0.5f;

            memcpy (&u, &f, sizeof u);
          }
          break;
        case 4:   /* a narrow binade band, scaled to the vector's edge exponent */
          u = (guint32) (((s * 37u) % 254u + 1u) << 23) | (guint32) ((*state >> 41) & 0x7fffffu);
          u |= (guint32) (*state >> 63) << 31;
          break;
        default:  /* subnormal and tiny values mixed */
          u = (guint32) ((*state >> 40) & 0x00ffffffu) | ((guint32) (*state >> 63) << 31);
          break;
        }
      memcpy (x + i, &u, sizeof u);
    }
  return TRUE;
}

static gboolean
gate (void)
{
  static const gsize lengths[] = { 1, 7, 8, 31, 32, 33, 64, 100, 257 };
  const gboolean broken = dc_test_break_kernel ("quant-avx2");
  guint64 state = 0x2545f4914f6cdd1du;

  for (guint s = 0; s < 6 * 40; s++)
    {
      const gsize k = lengths[s % G_N_ELEMENTS (lengths)], nv = 3;
      g_autofree float *x = g_new (float, nv * k);
      g_autoptr(DcQuantMatrix) ref = dc_quant_matrix_new (nv, k, NULL);
      g_autoptr(DcQuantMatrix) got = dc_quant_matrix_new (nv, k, NULL);

      gate_input (s, x, nv * k, &state);
      if (!dc_quant_pack_reference ("quantizer gate", x, k, 1, ref, NULL) ||
          !dc_quant_pack_avx2 ("quantizer gate", x, k, got, NULL))
        return FALSE;
      if (broken)
        got->q[0] ^= 1;
      if (memcmp (ref->q, got->q, nv * k) != 0 ||
          memcmp (ref->exponent, got->exponent, nv * sizeof *ref->exponent) != 0)
        {
          g_message ("AVX2 quantizer failed verification on vectors of length %"
                     G_GSIZE_FORMAT " — refused", k);
          return FALSE;
        }
    }
  return TRUE;
}

#else

gboolean
dc_quant_pack_avx2 (const char     *what,
                    const float    *src,
                    gsize           vector_stride,
                    DcQuantMatrix  *out,
                    GError        **error)
{
  return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
}

#endif /* DC_QUANT_X86 */

const char *
dc_quant_pack_simd_name (void)
{
#ifdef DC_QUANT_X86
  static gsize decided = 0;
  static const char *name;

  if (g_once_init_enter (&decided))
    {
      name = __builtin_cpu_supports ("avx2") && gate () ? "avx2" : "scalar";
      g_once_init_leave (&decided, 1);
    }
  return name;
#else
  return "scalar";
#endif
}

gboolean
dc_quant_pack_simd (const char     *what,
                    const float    *src,
                    gsize           vector_stride,
                    DcQuantMatrix  *out,
                    GError        **error)
{
#ifdef DC_QUANT_X86
  if (g_str_equal (dc_quant_pack_simd_name (), "avx2"))
    return dc_quant_pack_avx2 (what, src, vector_stride, out, error);
#endif
  return dc_quant_pack_reference (what, src, vector_stride, 1, out, error);
}
