/* dc-math-vector.c: the deterministic math library's operations over
 * arrays: the fixed reduction tree, elementwise activations, softmax,
 * log-softmax and cross-entropy, layer and RMS norm, AdamW and RoPE, each
 * with its backward pass where training needs one.
 *
 * The same rule as dc-math.c: correctly rounded binary32 operations in one
 * fixed order, every sum over the tree of pairwise(), which depends only on
 * n. Shapes are in dc-math.h; algorithms and measured errors in
 * docs/VERIFICATION.md.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-math.h"
#include "dc-math-private.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DC_MATH_X86 1
#endif

/* e^(x − c) for c ≥ x (c the row maximum), with x − c formed exactly as a
 * double-float so that the subtraction's rounding (up to 2^-19 absolute for
 * a difference near 40) does not become a relative error of the result. -inf
 * gives +0; a NaN difference (x or c NaN, or both infinite) gives NaN. */
static float
exp_shifted (float x,
             float c)
{
  float d, d_lo, p;
  int k;

  two_sum (x, -c, &d, &d_lo);
  if (is_nan (d))
    return d;
  if (d < EXP_UNDERFLOW)
    return 0.0f;
  p = exp_reduce2 (d, d_lo, &k);
  return scale2 (1.0f + p, k);
}

/* Whether products of tiny operands take mul_small ()'s exact path (the
 * default). Intel cores take a microcode assist, about a hundred cycles a
 * vector, for a multiply that reads or produces a subnormal; on the 2-vCPU
 * AMD EPYC VM the exact path and the plain multiply ran a trained step
 * equally fast (60.4–64.9 ms a step either way, alternated pinned pairs,
 * s29).
 * DC_MATH_TINY_PRODUCTS=plain keeps the multiply, for that comparison on
 * other CPUs; the bits are the same either way. */
static int tiny_products_exact = -1;

static gboolean
exact_tiny_products (void)
{
  int exact = g_atomic_int_get (&tiny_products_exact);

  if (G_UNLIKELY (exact < 0))
    {
      exact = g_strcmp0 (g_getenv ("DC_MATH_TINY_PRODUCTS"), "plain") != 0;
      g_atomic_int_set (&tiny_products_exact, exact);
    }
  return exact;
}

void
_dc_math_set_tiny_products_exact (int exact)
{
  g_atomic_int_set (&tiny_products_exact, CLAMP (exact, -1, 1));
}

/* a · b, the IEEE product, without a subnormal operand or result in a float
 * operation when a is tiny (0 < |a| < 2^-100) and b finite: x86 cores take
 * a slow path for some of those (see above) (an attention row's probabilities far below
 * its maximum, and their products, live there once a run has trained a
 * while). a and b are exact in double (a subnormal a read off its bits),
 * so is their product (48 bits), and the product is rounded once: as a
 * float where it is normal, else to the nearest step of 2^-149 (ties to
 * even, by the double's own rounding of v · 2^149 + 1.5 · 2^52), which is
 * the bit pattern of the result's magnitude. */
static inline float
mul_small (float a,
           float b)
{
  guint32 ua = float_bits (a), ub = float_bits (b);
  guint32 mag = ua & 0x7fffffffu;
  double ad, v;
  float r;

  if (mag - 1u >= 0x0d7fffffu || (ub & 0x7fffffffu) >= 0x7f800000u || !exact_tiny_products ())
    return a * b;
  ad = mag < 0x00800000u ? (double) mag * 0x1p-149 : (double) bits_float (mag);
  v = ad * (double) bits_float (ub & 0x7fffffffu);
  if (v < 0x1p-126)
    r = bits_float ((guint32) ((v * 0x1p149 + 0x1.8p52) - 0x1.8p52));
  else
    r = (float) v;
  return bits_float (float_bits (r) | ((ua ^ ub) & 0x80000000u));
}

/* Leaves of the fixed reduction tree. */
typedef enum
{
  LEAF_SUM,      /* a[i] */
  LEAF_DOT,      /* a[i] · b[i] */
  LEAF_SQDEV,    /* (a[i] − c)² */
  LEAF_SQUARE,   /* a[i]² */
  LEAF_EXP_SHIFTED, /* e^(a[i] − c) */
} LeafKind;

#define PAIRWISE_BLOCK 8

static float pairwise (LeafKind kind, const float *a, const float *b, float c, gsize n);
static DcMathSimd softmax_path (void);

#ifdef DC_MATH_X86

/* mul_small () on 8 lanes in double: lanes with a tiny a (0 < |a| <
 * 2^-100) and a finite b are multiplied in double and rounded as
 * mul_small () does, the others as floats with those lanes' a replaced by
 * 1. mul_small_avx2 ()'s way for the vectors its float form cannot round. */
__attribute__ ((target ("avx2"))) static __m256
mul_small_double_avx2 (__m256 a,
                       __m256 b)
{
  const __m256i abs_mask = _mm256_set1_epi32 (0x7fffffff);
  __m256i ua = _mm256_castps_si256 (a), ub = _mm256_castps_si256 (b);
  __m256i mag = _mm256_and_si256 (ua, abs_mask);
  __m256i small = _mm256_andnot_si256 (
    _mm256_cmpeq_epi32 (mag, _mm256_setzero_si256 ()),
    _mm256_and_si256 (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x0d800000), mag),
                      _mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x7f800000),
                                          _mm256_and_si256 (ub, abs_mask))));
  __m256i sub = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x00800000), mag);
  __m256 big, r;
  __m128i q[2];

  big = _mm256_mul_ps (_mm256_blendv_ps (a, _mm256_set1_ps (1.0f), _mm256_castsi256_ps (small)), b);
  for (int h = 0; h < 2; h++)
    {
      __m128i m4 = h == 0 ? _mm256_castsi256_si128 (mag) : _mm256_extracti128_si256 (mag, 1);
      __m128i s4 = h == 0 ? _mm256_castsi256_si128 (sub) : _mm256_extracti128_si256 (sub, 1);
      __m128 b4 = _mm_castsi128_ps (h == 0 ? _mm256_castsi256_si128 (_mm256_and_si256 (ub, abs_mask))
                                           : _mm256_extracti128_si256 (_mm256_and_si256 (ub, abs_mask), 1));
      __m128i sm = h == 0 ? _mm256_castsi256_si128 (small) : _mm256_extracti128_si256 (small, 1);
      /* |a| in double: a subnormal from its bits (an integer times 2^-149),
       * a normal one converted (replaced by 1 where the lane is not small,
       * so no conversion sees a subnormal); b likewise. */
      __m256d ad = _mm256_blendv_pd (
        _mm256_cvtps_pd (_mm_blendv_ps (_mm_set1_ps (1.0f), _mm_castsi128_ps (m4),
                                        _mm_castsi128_ps (_mm_andnot_si128 (s4, sm)))),
        _mm256_mul_pd (_mm256_cvtepi32_pd (m4), _mm256_set1_pd (0x1p-149)),
        _mm256_castsi256_pd (_mm256_cvtepi32_epi64 (s4)));
      __m256d bd = _mm256_cvtps_pd (_mm_blendv_ps (_mm_set1_ps (1.0f), b4, _mm_castsi128_ps (sm)));
      __m256d v = _mm256_mul_pd (ad, bd);
      __m256d tiny = _mm256_cmp_pd (v, _mm256_set1_pd (0x1p-126), _CMP_LT_OQ);
      __m128i steps = _mm256_cvtpd_epi32 (_mm256_mul_pd (v, _mm256_set1_pd (0x1p149)));
      __m128i normal = _mm_castps_si128 (_mm256_cvtpd_ps (_mm256_blendv_pd (v, _mm256_set1_pd (1.0), tiny)));

      /* The double mask as 32-bit lanes: all ones (−1.0 converted) or 0. */
      q[h] = _mm_blendv_epi8 (normal, steps, _mm256_cvtpd_epi32 (_mm256_and_pd (tiny, _mm256_set1_pd (-1.0))));
    }
  r = _mm256_castsi256_ps (_mm256_or_si256 (_mm256_set_m128i (q[1], q[0]),
                                            _mm256_and_si256 (_mm256_xor_si256 (ua, ub),
                                                              _mm256_set1_epi32 ((gint32) 0x80000000u))));
  return _mm256_blendv_ps (big, r, _mm256_castsi256_ps (small));
}

/* mul_small () on 8 lanes, in floats: a vector without a tiny lane is one
 * float multiply. A tiny lane's |a| · 2^149 = M is a normal float formed
 * without arithmetic on a subnormal (a subnormal's integer converted, a
 * normal one's exponent field + 149), and P = M · |b| rounds M · |b| once
 * to 24 bits, E = M · |b| − P exactly (FMA). Where P < 2^23 the result is
 * the integer nearest M · |b|, its bit pattern: P converted (nearest even)
 * is that integer unless P lies half way between two, a tie the first
 * rounding may have made, which E's sign settles (E = 0: the tie is real,
 * nearest even stands). Else the result is normal with P's 24 bits: P's
 * exponent field − 149. A |b| below 2^-64 makes a product below 2^-164,
 * which rounds to zero; a vector whose P overflows (|b| near FLT_MAX) goes
 * to mul_small_double_avx2 (). */
__attribute__ ((target ("avx2,fma"))) static inline __m256
mul_small_avx2 (__m256 a,
                __m256 b)
{
  const __m256i abs_mask = _mm256_set1_epi32 (0x7fffffff);
  __m256i ua = _mm256_castps_si256 (a), ub = _mm256_castps_si256 (b);
  __m256i mag = _mm256_and_si256 (ua, abs_mask);
  __m256i bmag = _mm256_and_si256 (ub, abs_mask);
  __m256i small = _mm256_andnot_si256 (
    _mm256_cmpeq_epi32 (mag, _mm256_setzero_si256 ()),
    _mm256_and_si256 (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x0d800000), mag),
                      _mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x7f800000), bmag)));
  __m256 small_ps = _mm256_castsi256_ps (small);
  __m256 big, m, bz, p, e, d, below, up, down, res;
  __m256i r, q;

  if (_mm256_movemask_ps (small_ps) == 0 || !exact_tiny_products ())
    return _mm256_mul_ps (a, b);
  big = _mm256_mul_ps (_mm256_blendv_ps (a, _mm256_set1_ps (1.0f), small_ps), b);
  /* M: 1 in the other lanes (their exponent field + 149 may wrap to a
   * tiny negative value whose products are subnormal). */
  m = _mm256_blendv_ps (_mm256_castsi256_ps (_mm256_add_epi32 (mag, _mm256_set1_epi32 (149 << 23))),
                        _mm256_cvtepi32_ps (mag),
                        _mm256_castsi256_ps (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x00800000), mag)));
  m = _mm256_blendv_ps (_mm256_set1_ps (1.0f), m, small_ps);
  bz = _mm256_blendv_ps (_mm256_castsi256_ps (bmag), _mm256_setzero_ps (),
                         _mm256_castsi256_ps (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (0x1f800000), bmag)));
  p = _mm256_mul_ps (m, bz);
  if (_mm256_movemask_ps (_mm256_and_ps (_mm256_cmp_ps (p, _mm256_set1_ps (0x1p126f), _CMP_GE_OQ),
                                         small_ps)) != 0)
    return mul_small_double_avx2 (a, b);
  e = _mm256_fmsub_ps (m, bz, p);
  r = _mm256_cvtps_epi32 (p);
  d = _mm256_sub_ps (p, _mm256_cvtepi32_ps (r));
  below = _mm256_cmp_ps (p, _mm256_set1_ps (0x1p23f), _CMP_LT_OQ);
  /* A tie rounded down that M · |b| is above, or up that it is below. */
  up = _mm256_and_ps (_mm256_cmp_ps (d, _mm256_set1_ps (0.5f), _CMP_EQ_OQ),
                      _mm256_cmp_ps (e, _mm256_setzero_ps (), _CMP_GT_OQ));
  down = _mm256_and_ps (_mm256_cmp_ps (d, _mm256_set1_ps (-0.5f), _CMP_EQ_OQ),
                        _mm256_cmp_ps (e, _mm256_setzero_ps (), _CMP_LT_OQ));
  r = _mm256_add_epi32 (_mm256_sub_epi32 (r, _mm256_castps_si256 (up)), _mm256_castps_si256 (down));
  q = _mm256_castps_si256 (_mm256_blendv_ps (
    _mm256_castsi256_ps (_mm256_sub_epi32 (_mm256_castps_si256 (p), _mm256_set1_epi32 (149 << 23))),
    _mm256_castsi256_ps (r), below));
  res = _mm256_castsi256_ps (_mm256_or_si256 (q, _mm256_and_si256 (_mm256_xor_si256 (ua, ub),
                                                                   _mm256_set1_epi32 ((gint32) 0x80000000u))));
  return _mm256_blendv_ps (big, res, small_ps);
}

/* A dot's leaf of 8: the products, each mul_small ()'s, at once. */
__attribute__ ((target ("avx2,fma"))) static void
dot_leaf8_avx2 (const float *a,
                const float *b,
                float       *v)
{
  _mm256_storeu_ps (v, mul_small_avx2 (_mm256_loadu_ps (a), _mm256_loadu_ps (b)));
}

/*
 * pairwise() of exactly 64 elements (8 leaves of 8) with AVX2, the same
 * additions in the same order: the leaf values of the eight leaves are
 * formed (one IEEE multiply or subtract per element, as in the scalar
 * leaves, the dot's through mul_small_avx2 (); no fused multiply-add
 * forms a leaf value), transposed so
 * that register i holds element i of every leaf, and summed register by
 * register, which is each leaf's left-to-right sum in its own lane; then
 * the three levels of the tree,
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), in scalar.
 */
__attribute__ ((target ("avx2,fma"))) static float
pairwise64_avx2 (LeafKind     kind,
                 const float *a,
                 const float *b,
                 float        c)
{
  __m256 r[8], t[8], s[8], acc;
  const __m256 vc = _mm256_set1_ps (c);
  float l[8];

  for (int i = 0; i < 8; i++)
    {
      __m256 x = _mm256_loadu_ps (a + 8 * i);

      switch (kind)
        {
        case LEAF_DOT:
          r[i] = mul_small_avx2 (x, _mm256_loadu_ps (b + 8 * i));
          break;
        case LEAF_SQDEV:
          {
            __m256 d = _mm256_sub_ps (x, vc);

            r[i] = _mm256_mul_ps (d, d);
          }
          break;
        case LEAF_SQUARE:
          r[i] = _mm256_mul_ps (x, x);
          break;
        case LEAF_SUM:
        default:
          r[i] = x;
          break;
        }
    }
  for (int i = 0; i < 8; i += 2)
    {
      t[i] = _mm256_unpacklo_ps (r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps (r[i], r[i + 1]);
    }
  for (int i = 0; i < 8; i += 4)
    {
      s[i] = _mm256_shuffle_ps (t[i], t[i + 2], _MM_SHUFFLE (1, 0, 1, 0));
      s[i + 1] = _mm256_shuffle_ps (t[i], t[i + 2], _MM_SHUFFLE (3, 2, 3, 2));
      s[i + 2] = _mm256_shuffle_ps (t[i + 1], t[i + 3], _MM_SHUFFLE (1, 0, 1, 0));
      s[i + 3] = _mm256_shuffle_ps (t[i + 1], t[i + 3], _MM_SHUFFLE (3, 2, 3, 2));
    }
  for (int i = 0; i < 4; i++)
    {
      r[i] = _mm256_permute2f128_ps (s[i], s[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps (s[i], s[i + 4], 0x31);
    }
  /* r[i] lane j = element i of leaf j. */
  acc = r[0];
  for (int i = 1; i < 8; i++)
    acc = _mm256_add_ps (acc, r[i]);
  _mm256_storeu_ps (l, acc);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

#endif /* DC_MATH_X86 */

/* The tree of a power-of-two n ≥ 8 is balanced: its two halves, each the
 * tree of n / 2. From 64 down it is pairwise64_avx2's where the CPU has AVX2
 * (not for the exponential leaves, which stay scalar). */
static float
pairwise_pow2 (LeafKind     kind,
               const float *a,
               const float *b,
               float        c,
               gsize        n)
{
  if (n <= PAIRWISE_BLOCK)
    return pairwise (kind, a, b, c, n);
#ifdef DC_MATH_X86
  if (n == 64 && kind != LEAF_EXP_SHIFTED && __builtin_cpu_supports ("avx2")
      && __builtin_cpu_supports ("fma"))
    return pairwise64_avx2 (kind, a, b, c);
#endif
  return pairwise_pow2 (kind, a, b, c, n / 2)
         + pairwise_pow2 (kind, a + n / 2, b != NULL ? b + n / 2 : NULL, c, n / 2);
}

/* The one reduction order of the library: n ≤ 8 elements are added left to
 * right starting from the first; a longer range splits at h, the largest
 * power of two below n, into sum(0..h) + sum(h..n). The tree depends on n
 * only; any parallel implementation must build the same tree. */
static float
pairwise (LeafKind     kind,
          const float *a,
          const float *b,
          float        c,
          gsize        n)
{
  if (n <= PAIRWISE_BLOCK)
    {
      float v[PAIRWISE_BLOCK];
      float acc;
      gsize i;

      if (n == 0)
        return 0.0f;
      /* The leaves first (the switch stays out of the loops), then the sum
       * strictly left to right. */
      switch (kind)
        {
        case LEAF_SUM:
          for (i = 0; i < n; i++)
            v[i] = a[i];
          break;
        case LEAF_DOT:
#ifdef DC_MATH_X86
          if (n == PAIRWISE_BLOCK && softmax_path () == DC_MATH_SIMD_AVX2)
            {
              dot_leaf8_avx2 (a, b, v);
              break;
            }
#endif
          for (i = 0; i < n; i++)
            v[i] = mul_small (a[i], b[i]);
          break;
        case LEAF_SQDEV:
          for (i = 0; i < n; i++)
            v[i] = (a[i] - c) * (a[i] - c);
          break;
        case LEAF_EXP_SHIFTED:
          for (i = 0; i < n; i++)
            v[i] = exp_shifted (a[i], c);
          break;
        case LEAF_SQUARE:
        default:
          for (i = 0; i < n; i++)
            v[i] = a[i] * a[i];
          break;
        }
      acc = v[0];
      for (i = 1; i < n; i++)
        acc = acc + v[i];
      return acc;
    }
  else
    {
      gsize h = PAIRWISE_BLOCK;

      /* A power of two splits into equal halves: the balanced tree. */
      if ((n & (n - 1)) == 0)
        return pairwise_pow2 (kind, a, b, c, n);
      /* h becomes the largest power of two strictly below n. */
      while (h * 2 < n)
        h *= 2;
      return pairwise_pow2 (kind, a, b, c, h)
             + pairwise (kind, a + h, b != NULL ? b + h : NULL, c, n - h);
    }
}

float
_dc_math_pairwise_squares (const float *x,
                           float        c,
                           gboolean     deviations,
                           gsize        n)
{
  return pairwise (deviations ? LEAF_SQDEV : LEAF_SQUARE, x, NULL, c, n);
}

/**
 * dc_math_sum:
 * @x: (array length=n): values
 *
 * Σ x in the fixed pairwise order (see pairwise()). The empty sum is +0.
 */
float
dc_math_sum (const float *x,
             gsize        n)
{
  return pairwise (LEAF_SUM, x, NULL, 0.0f, n);
}

float
dc_math_dot (const float *a,
             const float *b,
             gsize        n)
{
  return pairwise (LEAF_DOT, a, b, 0.0f, n);
}

/* dc_math_max ()'s definition: the scan. */
static float
max_scan (const float *x,
          gsize        n)
{
  float m = -__builtin_inff ();
  gsize i;

  for (i = 0; i < n; i++)
    {
      if (is_nan (x[i]))
        return x[i];
      if (i == 0 || x[i] > m)
        m = x[i];
    }
  return m;
}

#ifdef DC_MATH_X86
/* dc_math_max () eight lanes at a time (the softmaxes scan every row for
 * it: 2.5 % of a training step on the VM in scalar). A row without a NaN
 * has one largest value, the same bits wherever it is met, unless it is a
 * zero (−0 and +0 compare equal, and the scan keeps the first): FALSE for
 * a NaN anywhere or a zero maximum, which the caller scans instead (in its
 * own code: the scan is SSE code, see exp_shifted_avx2 ()). */
__attribute__ ((target ("avx2"))) static gboolean
max_avx2 (const float *x,
          gsize        n,
          float       *out)
{
  __m256 m = _mm256_set1_ps (-__builtin_inff ()), unordered = _mm256_setzero_ps ();
  __m128 h;
  float best;
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256 v = _mm256_loadu_ps (x + i);

      unordered = _mm256_or_ps (unordered, _mm256_cmp_ps (v, v, _CMP_UNORD_Q));
      m = _mm256_max_ps (m, v);
    }
  if (_mm256_movemask_ps (unordered) != 0)
    return FALSE;
  h = _mm_max_ps (_mm256_castps256_ps128 (m), _mm256_extractf128_ps (m, 1));
  h = _mm_max_ps (h, _mm_movehl_ps (h, h));
  h = _mm_max_ss (h, _mm_movehdup_ps (h));
  best = _mm_cvtss_f32 (h);
  for (; i < n; i++)
    {
      if (is_nan (x[i]))
        return FALSE;
      if (x[i] > best)
        best = x[i];
    }
  if (best == 0.0f)
    return FALSE;
  *out = best;
  return TRUE;
}
#endif

/**
 * dc_math_max:
 *
 * The largest element, scanning left to right; the first NaN met is
 * returned; of equal values (-0 and +0) the first wins. n = 0 gives -inf.
 */
float
dc_math_max (const float *x,
             gsize        n)
{
#ifdef DC_MATH_X86
  float m;

  if (softmax_path () == DC_MATH_SIMD_AVX2 && max_avx2 (x, n, &m))
    return m;
#endif
  return max_scan (x, n);
}

/* dc_math_max () on the named path; FALSE when this CPU lacks it. For
 * tests. */
gboolean
dc_math_max_path (DcMathSimd   path,
                  const float *x,
                  gsize        n,
                  float       *out)
{
  switch (path)
    {
    case DC_MATH_SIMD_SCALAR:
      *out = max_scan (x, n);
      return TRUE;
#ifdef DC_MATH_X86
    case DC_MATH_SIMD_AVX2:
      if (!__builtin_cpu_supports ("avx2"))
        return FALSE;
      if (!max_avx2 (x, n, out))
        *out = max_scan (x, n);
      return TRUE;
#endif
    default:
      return FALSE;
    }
}

void
dc_math_gelu_tanh (const float *x,
                   float       *y,
                   gsize        n)
{
  for (gsize i = 0; i < n; i++)
    y[i] = dc_math_gelu_tanhf (x[i]);
}

void
dc_math_gelu_tanh_backward (const float *x,
                            const float *dy,
                            float       *dx,
                            gsize        n)
{
  for (gsize i = 0; i < n; i++)
    dx[i] = dy[i] * dc_math_gelu_tanh_derivf (x[i]);
}

#ifdef DC_MATH_X86
/* 16 lanes of pow2i (): 2^k from its bits; lanes outside [-126, 127] give
 * garbage that the callers blend away. */
__attribute__ ((target ("avx512f"))) static inline __m512
pow2i_avx512 (__m512i k)
{
  /* (maskz forms with every lane set: GCC 12's unmasked forms trip
   * -Wmaybe-uninitialized on their undefined pass-through operand.) */
  return _mm512_castsi512_ps (_mm512_maskz_slli_epi32 (0xffff,
                                                       _mm512_add_epi32 (k, _mm512_set1_epi32 (127)),
                                                       23));
}

/* scale2 () for k ≤ 127 (the SiLU's exponents are ≤ 0): the same one or
 * two multiplies per lane as the scalar code, chosen by k. */
__attribute__ ((target ("avx512f"))) static inline __m512
scale2_avx512 (__m512  y,
               __m512i k)
{
  __mmask16 low = _mm512_cmplt_epi32_mask (k, _mm512_set1_epi32 (-126));
  __m512 normal = _mm512_mul_ps (y, pow2i_avx512 (k));
  __m512 tiny = _mm512_mul_ps (_mm512_mul_ps (y, pow2i_avx512 (_mm512_add_epi32 (k,
                                                  _mm512_set1_epi32 (125)))),
                               _mm512_set1_ps (0x1p-125f));

  return _mm512_mask_blend_ps (low, normal, tiny);
}

/* exp_reduce2 (v, +0) on 16 lanes: the same operations in the same order. */
__attribute__ ((target ("avx512f"))) static inline __m512
exp_reduce_avx512 (__m512   v,
                   __m512i *k_out)
{
  const __m512 magic = _mm512_set1_ps (ROUND_MAGIC);
  __m512 t = _mm512_sub_ps (_mm512_add_ps (_mm512_mul_ps (v, _mm512_set1_ps (LOG2E)), magic),
                            magic);
  __m512 r = _mm512_add_ps (_mm512_sub_ps (_mm512_sub_ps (v, _mm512_mul_ps (t, _mm512_set1_ps (LN2_HI))),
                                           _mm512_mul_ps (t, _mm512_set1_ps (LN2_LO))),
                            _mm512_setzero_ps ());
  __m512 q = _mm512_set1_ps (INV_FACT8);

  *k_out = _mm512_maskz_cvttps_epi32 (0xffff, t);
  q = _mm512_add_ps (_mm512_set1_ps (INV_FACT7), _mm512_mul_ps (r, q));
  q = _mm512_add_ps (_mm512_set1_ps (INV_FACT6), _mm512_mul_ps (r, q));
  q = _mm512_add_ps (_mm512_set1_ps (INV_FACT5), _mm512_mul_ps (r, q));
  q = _mm512_add_ps (_mm512_set1_ps (INV_FACT4), _mm512_mul_ps (r, q));
  q = _mm512_add_ps (_mm512_set1_ps (INV_FACT3), _mm512_mul_ps (r, q));
  q = _mm512_add_ps (_mm512_set1_ps (INV_FACT2), _mm512_mul_ps (r, q));
  return _mm512_add_ps (r, _mm512_mul_ps (_mm512_mul_ps (r, r), q));
}

/* dc_math_siluf () on 16 lanes, bit for bit: every lane takes the scalar
 * code's branch through masks, with the same IEEE operations in the same
 * order (the build has -ffp-contract=off, so nothing is fused), so a
 * product's bits never depend on whether the CPU has AVX-512. Checked
 * against the scalar code by test-engine-math's silu-vector case. */
__attribute__ ((target ("avx512f"))) static void
silu_avx512 (const float *x,
             float       *y,
             gsize        n)
{
  const __m512 one = _mm512_set1_ps (1.0f);

  for (gsize i = 0; i + 16 <= n; i += 16)
    {
      __m512 v = _mm512_loadu_ps (x + i);
      __mmask16 nan = _mm512_cmp_ps_mask (v, v, _CMP_UNORD_Q);
      __mmask16 pos = _mm512_cmp_ps_mask (v, _mm512_setzero_ps (), _CMP_GE_OQ);
      __mmask16 neg_inf = _mm512_cmp_ps_mask (v, _mm512_set1_ps (-__builtin_inff ()), _CMP_EQ_OQ);
      __mmask16 far = _mm512_cmp_ps_mask (v, _mm512_set1_ps (-0x1.4p+7f), _CMP_LT_OQ);
      __mmask16 tail = _mm512_cmp_ps_mask (v, _mm512_set1_ps (EXPM1_MINUS_ONE), _CMP_LT_OQ);
      __m512 nv, arg, p, e, res_pos, res_neg, res_tail, out;
      __mmask16 under;
      __m512i k;

      /* x ≥ 0: x / (1 + expf (−x)); expf is 0 below EXP_UNDERFLOW. The
       * scalar -x is a sign flip (0 − x would turn −0 into +0). */
      nv = _mm512_castsi512_ps (_mm512_xor_si512 (_mm512_castps_si512 (v),
                                                  _mm512_set1_epi32 ((int) 0x80000000u)));
      under = _mm512_cmp_ps_mask (nv, _mm512_set1_ps (EXP_UNDERFLOW), _CMP_LT_OQ);
      arg = _mm512_mask_blend_ps (pos, v, nv);
      p = exp_reduce_avx512 (arg, &k);
      e = scale2_avx512 (_mm512_add_ps (one, p), k);
      res_pos = _mm512_div_ps (v, _mm512_add_ps (one, _mm512_mask_blend_ps (under, e,
                                                                            _mm512_setzero_ps ())));
      /* x < 0: mul_sigmoid_neg (x, x, 0). */
      res_tail = scale2_avx512 (_mm512_mul_ps (v, _mm512_add_ps (one, p)), k);
      res_neg = _mm512_div_ps (_mm512_mul_ps (v, e), _mm512_add_ps (one, e));
      res_neg = _mm512_mask_blend_ps (tail, res_neg, res_tail);
      res_neg = _mm512_mask_blend_ps (far, res_neg, _mm512_mul_ps (v, _mm512_setzero_ps ()));
      res_neg = _mm512_mask_blend_ps (neg_inf, res_neg, _mm512_set1_ps (-0.0f));

      out = _mm512_mask_blend_ps (pos, res_neg, res_pos);
      out = _mm512_mask_blend_ps (nan, out, v);
      _mm512_storeu_ps (y + i, out);
    }
  for (gsize i = n - n % 16; i < n; i++)
    y[i] = dc_math_siluf (x[i]);
}

/* The same in 8 lanes for AVX2 machines: integer shifts and compares on
 * 256-bit registers, branches as blends. */
__attribute__ ((target ("avx2"))) static inline __m256
pow2i_avx2 (__m256i k)
{
  return _mm256_castsi256_ps (_mm256_slli_epi32 (_mm256_add_epi32 (k, _mm256_set1_epi32 (127)),
                                                 23));
}

__attribute__ ((target ("avx2"))) static inline __m256
scale2_avx2 (__m256  y,
             __m256i k)
{
  __m256 low = _mm256_castsi256_ps (_mm256_cmpgt_epi32 (_mm256_set1_epi32 (-126), k));
  __m256 normal = _mm256_mul_ps (y, pow2i_avx2 (k));
  __m256 tiny = _mm256_mul_ps (_mm256_mul_ps (y, pow2i_avx2 (_mm256_add_epi32 (k,
                                                _mm256_set1_epi32 (125)))),
                               _mm256_set1_ps (0x1p-125f));

  return _mm256_blendv_ps (normal, tiny, low);
}

/* scale2 () for 0.5 ≤ y < 2 and k ≤ 0 without a subnormal or underflowing
 * product: at 2^-126 and below the scalar code's multiply rounds y · 2^k
 * onto the subnormal grid (steps of 2^-149), and a multiply that lands
 * there, or underflows to 0, takes a slow path on x86 cores (2.4 ns a
 * value against 0.6 on the 2-vCPU AMD VM; sharp attention rows have most
 * of their exponentials down there once a run has trained a while). Those
 * lanes (k ≤ −126) count the result in steps instead: t = y · 2^(k+149) is
 * exact and normal (a power of two moves y's exponent only), and t
 * rounded to an integer, nearest even (the conversion's own rounding), is
 * the result's bit pattern (from 2^23 on it reads as the normal number of
 * the same value, below 2^-125). The same bits as scale2_avx2 (), which
 * tests check on every difference that gets here. */
__attribute__ ((target ("avx2"))) static inline __m256
scale2_low_avx2 (__m256  y,
                 __m256i k)
{
  __m256i low = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (-125), k);
  __m256 normal = _mm256_mul_ps (y, pow2i_avx2 (_mm256_max_epi32 (k, _mm256_set1_epi32 (-125))));
  __m256 steps;

  if (_mm256_movemask_ps (_mm256_castsi256_ps (low)) == 0)
    return normal;
  /* k ≥ −160 keeps 2^(k+149) normal for the lanes below EXP_UNDERFLOW (and
   * a -inf difference's INT_MIN), which the caller replaces by 0; k ≤ −126
   * keeps it a float for the other lanes, whose product the blend drops (an
   * exponent field past 255 wrapped into a sign and a tiny power of two,
   * and the dropped product was a subnormal: s31's census). */
  steps = _mm256_mul_ps (y, pow2i_avx2 (_mm256_add_epi32 (_mm256_min_epi32 (_mm256_max_epi32 (k, _mm256_set1_epi32 (-160)),
                                                                            _mm256_set1_epi32 (-126)),
                                                          _mm256_set1_epi32 (149))));
  return _mm256_blendv_ps (normal, _mm256_castsi256_ps (_mm256_cvtps_epi32 (steps)),
                           _mm256_castsi256_ps (low));
}

__attribute__ ((target ("avx2"))) static inline __m256
exp_reduce_avx2 (__m256   v,
                 __m256i *k_out)
{
  const __m256 magic = _mm256_set1_ps (ROUND_MAGIC);
  __m256 t = _mm256_sub_ps (_mm256_add_ps (_mm256_mul_ps (v, _mm256_set1_ps (LOG2E)), magic),
                            magic);
  __m256 r = _mm256_add_ps (_mm256_sub_ps (_mm256_sub_ps (v, _mm256_mul_ps (t, _mm256_set1_ps (LN2_HI))),
                                           _mm256_mul_ps (t, _mm256_set1_ps (LN2_LO))),
                            _mm256_setzero_ps ());
  __m256 q = _mm256_set1_ps (INV_FACT8);

  *k_out = _mm256_cvttps_epi32 (t);
  q = _mm256_add_ps (_mm256_set1_ps (INV_FACT7), _mm256_mul_ps (r, q));
  q = _mm256_add_ps (_mm256_set1_ps (INV_FACT6), _mm256_mul_ps (r, q));
  q = _mm256_add_ps (_mm256_set1_ps (INV_FACT5), _mm256_mul_ps (r, q));
  q = _mm256_add_ps (_mm256_set1_ps (INV_FACT4), _mm256_mul_ps (r, q));
  q = _mm256_add_ps (_mm256_set1_ps (INV_FACT3), _mm256_mul_ps (r, q));
  q = _mm256_add_ps (_mm256_set1_ps (INV_FACT2), _mm256_mul_ps (r, q));
  return _mm256_add_ps (r, _mm256_mul_ps (_mm256_mul_ps (r, r), q));
}

__attribute__ ((target ("avx2"))) static void
silu_avx2 (const float *x,
           float       *y,
           gsize        n)
{
  const __m256 one = _mm256_set1_ps (1.0f);
  const __m256 zero = _mm256_setzero_ps ();

  for (gsize i = 0; i + 8 <= n; i += 8)
    {
      __m256 v = _mm256_loadu_ps (x + i);
      __m256 nan = _mm256_cmp_ps (v, v, _CMP_UNORD_Q);
      __m256 pos = _mm256_cmp_ps (v, zero, _CMP_GE_OQ);
      __m256 neg_inf = _mm256_cmp_ps (v, _mm256_set1_ps (-__builtin_inff ()), _CMP_EQ_OQ);
      __m256 far = _mm256_cmp_ps (v, _mm256_set1_ps (-0x1.4p+7f), _CMP_LT_OQ);
      __m256 tail = _mm256_cmp_ps (v, _mm256_set1_ps (EXPM1_MINUS_ONE), _CMP_LT_OQ);
      __m256 nv = _mm256_xor_ps (v, _mm256_set1_ps (-0.0f));   /* −x: a sign flip */
      __m256 under = _mm256_cmp_ps (nv, _mm256_set1_ps (EXP_UNDERFLOW), _CMP_LT_OQ);
      __m256 arg = _mm256_blendv_ps (v, nv, pos);
      __m256 p, e, res_pos, res_neg, res_tail, out;
      __m256i k;

      p = exp_reduce_avx2 (arg, &k);
      e = scale2_avx2 (_mm256_add_ps (one, p), k);
      res_pos = _mm256_div_ps (v, _mm256_add_ps (one, _mm256_blendv_ps (e, zero, under)));
      res_tail = scale2_avx2 (_mm256_mul_ps (v, _mm256_add_ps (one, p)), k);
      res_neg = _mm256_div_ps (_mm256_mul_ps (v, e), _mm256_add_ps (one, e));
      res_neg = _mm256_blendv_ps (res_neg, res_tail, tail);
      res_neg = _mm256_blendv_ps (res_neg, _mm256_mul_ps (v, zero), far);
      res_neg = _mm256_blendv_ps (res_neg, _mm256_set1_ps (-0.0f), neg_inf);
      out = _mm256_blendv_ps (res_neg, res_pos, pos);
      out = _mm256_blendv_ps (out, v, nan);
      _mm256_storeu_ps (y + i, out);
    }
  for (gsize i = n - n % 8; i < n; i++)
    y[i] = dc_math_siluf (x[i]);
}
#endif

#ifdef DC_MATH_X86
/* exp_shifted () of 8 lanes: the same operations in the same order (the
 * double-float difference, exp_reduce2 with its low part, scale2's two-step
 * scaling below 2^-126), branches as blends. A block with a lane above c
 * (x > c: the caller broke the contract, or k could pass 127, which
 * scale2_avx2 does not handle) runs the scalar function instead. */
__attribute__ ((target ("avx2"))) static void
exp_shifted_avx2 (const float *x,
                  float        c,
                  float       *y,
                  gsize        n)
{
  const __m256 vc = _mm256_set1_ps (c), negc = _mm256_set1_ps (-c);
  const __m256 one = _mm256_set1_ps (1.0f);
  const __m256 magic = _mm256_set1_ps (ROUND_MAGIC);
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256 v = _mm256_loadu_ps (x + i);
      /* x − c, not x + (−c): GCC folds the scalar x + (−c) into a
       * subtraction, which differs only in a NaN's sign bit. */
      __m256 d = _mm256_sub_ps (v, vc);
      __m256 bb = _mm256_sub_ps (d, v);
      __m256 d_lo = _mm256_add_ps (_mm256_sub_ps (v, _mm256_sub_ps (d, bb)),
                                   _mm256_sub_ps (negc, bb));
      __m256 t, r, q, p, e;
      __m256i k;

      if (_mm256_movemask_ps (_mm256_cmp_ps (d, _mm256_setzero_ps (), _CMP_GT_OQ)) != 0)
        {
          /* exp_shifted () is SSE code (baseline x86-64), and GCC 12 put
           * no vzeroupper before this call: on Intel every SSE instruction
           * then pays for the dirty upper halves (s31: the ragged ends,
           * called that way before, cost the H200 host's Xeon about 16 %
           * of a training step). */
          _mm256_zeroupper ();
          for (gsize j = i; j < i + 8; j++)
            y[j] = exp_shifted (x[j], c);
          continue;
        }
      /* exp_reduce2 (d, d_lo) */
      t = _mm256_sub_ps (_mm256_add_ps (_mm256_mul_ps (d, _mm256_set1_ps (LOG2E)), magic), magic);
      r = _mm256_add_ps (_mm256_sub_ps (_mm256_sub_ps (d, _mm256_mul_ps (t, _mm256_set1_ps (LN2_HI))),
                                        _mm256_mul_ps (t, _mm256_set1_ps (LN2_LO))),
                         d_lo);
      k = _mm256_cvttps_epi32 (t);
      q = _mm256_set1_ps (INV_FACT8);
      q = _mm256_add_ps (_mm256_set1_ps (INV_FACT7), _mm256_mul_ps (r, q));
      q = _mm256_add_ps (_mm256_set1_ps (INV_FACT6), _mm256_mul_ps (r, q));
      q = _mm256_add_ps (_mm256_set1_ps (INV_FACT5), _mm256_mul_ps (r, q));
      q = _mm256_add_ps (_mm256_set1_ps (INV_FACT4), _mm256_mul_ps (r, q));
      q = _mm256_add_ps (_mm256_set1_ps (INV_FACT3), _mm256_mul_ps (r, q));
      q = _mm256_add_ps (_mm256_set1_ps (INV_FACT2), _mm256_mul_ps (r, q));
      p = _mm256_add_ps (r, _mm256_mul_ps (_mm256_mul_ps (r, r), q));
      e = scale2_low_avx2 (_mm256_add_ps (one, p), k);
      /* Below EXP_UNDERFLOW +0; a NaN difference is returned as it is. */
      e = _mm256_blendv_ps (e, _mm256_setzero_ps (),
                            _mm256_cmp_ps (d, _mm256_set1_ps (EXP_UNDERFLOW), _CMP_LT_OQ));
      e = _mm256_blendv_ps (e, d, _mm256_cmp_ps (d, d, _CMP_UNORD_Q));
      _mm256_storeu_ps (y + i, e);
    }
  /* The ragged end through a block filled with c (e^0): the scalar
   * function's results below 2^-126 come from a multiply that makes a
   * subnormal (s31's census: twice the vector path's lanes at seq 128). */
  if (i < n)
    {
      float block[8] = { c, c, c, c, c, c, c, c };
      float out[8];

      memcpy (block, x + i, (n - i) * sizeof *x);
      exp_shifted_avx2 (block, c, out, 8);
      memcpy (y + i, out, (n - i) * sizeof *y);
    }
}
#endif

/* y[i] = exp_shifted (x[i], c) on the named path; FALSE when this CPU lacks
 * it. For tests, which compare every path with the scalar one. */
gboolean
dc_math_exp_shifted_path (DcMathSimd   path,
                          const float *x,
                          float        c,
                          float       *y,
                          gsize        n)
{
  switch (path)
    {
    case DC_MATH_SIMD_SCALAR:
      for (gsize i = 0; i < n; i++)
        y[i] = exp_shifted (x[i], c);
      return TRUE;
#ifdef DC_MATH_X86
    case DC_MATH_SIMD_AVX2:
      if (!__builtin_cpu_supports ("avx2"))
        return FALSE;
      exp_shifted_avx2 (x, c, y, n);
      return TRUE;
#endif
    default:
      return FALSE;
    }
}

/* The softmaxes' row path: AVX2 (with FMA, which mul_small_avx2 () needs)
 * where the CPU has it, unless DC_MATH_NO_SIMD=1 keeps the scalar loops.
 * Same bits either way. */
static DcMathSimd
softmax_path (void)
{
  static gsize chosen = 0;

  if (g_once_init_enter (&chosen))
    {
      DcMathSimd path = DC_MATH_SIMD_SCALAR;

#ifdef DC_MATH_X86
      if (g_getenv ("DC_MATH_NO_SIMD") == NULL && __builtin_cpu_supports ("avx2")
          && __builtin_cpu_supports ("fma"))
        path = DC_MATH_SIMD_AVX2;
#endif
      g_once_init_leave (&chosen, (gsize) path + 1);
    }
  return (DcMathSimd) (chosen - 1);
}

/* The softmaxes' exponentials on the widest path (the attention's and the
 * loss's rows spent a fifth of a training step's CPU time in the scalar
 * loop). */
static void
exp_shifted_row (const float *x,
                 float        c,
                 float       *y,
                 gsize        n)
{
  dc_math_exp_shifted_path (softmax_path (), x, c, y, n);
}

/* Whether every lane whose quotient falls below 2^-125 takes
 * div_by_sum_avx2 ()'s double path (the default: a division making a
 * subnormal costs an Intel core an assist of about a hundred cycles, s30's
 * dn.c; on the 2-vCPU AMD VM, where it costs nothing, both ways ran a
 * trained step equally fast, s31) or only the lanes whose y is below
 * 2^-125 (DC_MATH_SUBNORMAL_QUOTIENTS=0, for that comparison). Same bits
 * either way. */
static int subnormal_quotients = -1;

void
_dc_math_set_subnormal_quotients (int on)
{
  g_atomic_int_set (&subnormal_quotients, CLAMP (on, -1, 1));
}

#ifdef DC_MATH_X86
static gboolean
double_subnormal_quotients (void)
{
  int on = g_atomic_int_get (&subnormal_quotients);

  if (G_UNLIKELY (on < 0))
    {
      const char *env = g_getenv ("DC_MATH_SUBNORMAL_QUOTIENTS");

      on = g_strcmp0 (env, "0") != 0;
      g_atomic_int_set (&subnormal_quotients, on);
    }
  return on;
}
#endif

#ifdef DC_MATH_X86
/* y / sum on 8 lanes for 1 ≤ sum < inf and y ≥ 0 (a softmax row's
 * exponentials). The lanes whose bits are below `limit` (a positive
 * float's bits: 2^-125, or sum · 2^-125 when sum < 2^24) are divided
 * without a subnormal operand or result in a float operation (a slow path
 * on many x86 cores): below 2^-125 a float is Y steps of 2^-149, Y its bit
 * pattern, so the quotient's bits are Y / sum rounded to the nearest
 * integer, ties to even. That is done in double: Y = y · 2^149 is exact
 * (an integer below sum · 2^24, made from y's bits, so no float operation
 * reads a subnormal), Y / sum is correctly rounded, then rounded to an
 * integer (cvtpd_epi32, ties to even). The double cannot carry the
 * quotient across a half step: Y / sum < 2^24, so it lies within 2^-30 of
 * the exact quotient; and an exact quotient that is not a half step lies
 * at least min (1 / sum, 1 / (2S)) > 2^-25 from each (sum = S · 2^g, S an
 * integer below 2^24: its distance is |2Y − (2k+1) · S · 2^g| / (2 sum),
 * a nonzero multiple of 2^min (g, 1) over 2 sum), a half step itself being
 * exact in double. docs/VERIFICATION.md has the proof at length. The other
 * lanes divide as floats, the small ones replaced by 1 first (1 / sum is
 * normal). */
__attribute__ ((target ("avx2"))) static inline __m256d
steps_of_2_149_avx2 (__m128i b)
{
  /* Bits (e, m), e ≥ 1: (2^23 + m) · 2^(e-1), whose double has exponent
   * field e + 22 + 1023 and fraction m << 29; e = 0: m itself. */
  __m256i w = _mm256_cvtepu32_epi64 (b);
  __m256d normal = _mm256_castsi256_pd (_mm256_add_epi64 (_mm256_slli_epi64 (w, 29),
                                                          _mm256_set1_epi64x (1045LL << 52)));
  __m256i sub = _mm256_cmpgt_epi64 (_mm256_set1_epi64x (0x00800000), w);

  return _mm256_blendv_pd (normal, _mm256_cvtepi32_pd (b), _mm256_castsi256_pd (sub));
}

__attribute__ ((target ("avx2"))) static inline __m256
div_by_sum_avx2 (__m256  y,
                 __m256  sum,
                 __m256d sum_d,
                 __m256i limit)
{
  __m256i yb = _mm256_castps_si256 (y);
  __m256i low = _mm256_and_si256 (_mm256_cmpgt_epi32 (limit, yb),
                                  _mm256_cmpgt_epi32 (yb, _mm256_set1_epi32 (-1)));
  __m256 big;
  __m128i lo, hi;

  if (_mm256_movemask_ps (_mm256_castsi256_ps (low)) == 0)
    return _mm256_div_ps (y, sum);
  big = _mm256_div_ps (_mm256_blendv_ps (y, _mm256_set1_ps (1.0f), _mm256_castsi256_ps (low)), sum);
  lo = _mm256_cvtpd_epi32 (_mm256_div_pd (steps_of_2_149_avx2 (_mm256_castsi256_si128 (yb)), sum_d));
  hi = _mm256_cvtpd_epi32 (_mm256_div_pd (steps_of_2_149_avx2 (_mm256_extracti128_si256 (yb, 1)),
                                          sum_d));
  return _mm256_blendv_ps (big, _mm256_castsi256_ps (_mm256_set_m128i (hi, lo)),
                           _mm256_castsi256_ps (low));
}

/* y[i] / sum for every i, as the scalar loop; the ragged end goes through a
 * block of 8 filled with 1s. */
__attribute__ ((target ("avx2"))) static void
div_row_avx2 (float *y,
              float  sum,
              gsize  n)
{
  const __m256 s = _mm256_set1_ps (sum);
  const __m256d s_d = _mm256_set1_pd ((double) sum);
  /* sum · 2^-125 is exact and normal (sum ≥ 1). */
  const float limit = double_subnormal_quotients () && sum < 0x1p24f ? sum * 0x1p-125f : 0x1p-125f;
  const __m256i l = _mm256_set1_epi32 ((int) float_bits (limit));
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (y + i, div_by_sum_avx2 (_mm256_loadu_ps (y + i), s, s_d, l));
  if (i < n)
    {
      float tail[8] = { 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f };

      memcpy (tail, y + i, (n - i) * sizeof *y);
      _mm256_storeu_ps (tail, div_by_sum_avx2 (_mm256_loadu_ps (tail), s, s_d, l));
      memcpy (y + i, tail, (n - i) * sizeof *y);
    }
}

/* dx[i] = y[i] · (dy[i] − d), as the scalar loop, the products through
 * mul_small_avx2 (); the ragged end in scalar through mul_small (). */
__attribute__ ((target ("avx2,fma"))) static void
softmax_backward_row_avx2 (const float *y,
                           const float *dy,
                           float        d,
                           float       *dx,
                           gsize        n)
{
  const __m256 vd = _mm256_set1_ps (d);
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (dx + i, mul_small_avx2 (_mm256_loadu_ps (y + i),
                                              _mm256_sub_ps (_mm256_loadu_ps (dy + i), vd)));
  for (; i < n; i++)
    dx[i] = mul_small (y[i], dy[i] - d);
}

/* dc_math_scale () eight lanes at a time, the ragged end in scalar. */
__attribute__ ((target ("avx2,fma"))) static void
scale_row_avx2 (const float *x,
                float        s,
                float       *y,
                gsize        n)
{
  const __m256 vs = _mm256_set1_ps (s);
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (y + i, mul_small_avx2 (_mm256_loadu_ps (x + i), vs));
  for (; i < n; i++)
    y[i] = mul_small (x[i], s);
}
#endif

/* A softmax row's division by its sum, on the softmaxes' path. */
static void
divide_row (float *y,
            float  sum,
            gsize  n)
{
#ifdef DC_MATH_X86
  /* sum ≥ 1 whenever the row has a finite maximum (its own term is 1). */
  if (softmax_path () == DC_MATH_SIMD_AVX2 && sum >= 1.0f && sum < __builtin_inff ())
    {
      div_row_avx2 (y, sum, n);
      return;
    }
#endif
  for (gsize i = 0; i < n; i++)
    y[i] = y[i] / sum;
}

gboolean
dc_math_divide_row_path (DcMathSimd path,
                         float     *y,
                         float      sum,
                         gsize      n)
{
  switch (path)
    {
    case DC_MATH_SIMD_SCALAR:
      for (gsize i = 0; i < n; i++)
        y[i] = y[i] / sum;
      return TRUE;
#ifdef DC_MATH_X86
    case DC_MATH_SIMD_AVX2:
      if (!__builtin_cpu_supports ("avx2") || !(sum >= 1.0f && sum < __builtin_inff ()))
        return FALSE;
      div_row_avx2 (y, sum, n);
      return TRUE;
#endif
    default:
      return FALSE;
    }
}

/* Runs dc_math_silu () on the named path; FALSE when this CPU lacks it.
 * For tests, which compare every path the CPU has with the scalar one. */
gboolean
dc_math_silu_path (DcMathSimd   path,
                   const float *x,
                   float       *y,
                   gsize        n)
{
  switch (path)
    {
    case DC_MATH_SIMD_SCALAR:
      for (gsize i = 0; i < n; i++)
        y[i] = dc_math_siluf (x[i]);
      return TRUE;
#ifdef DC_MATH_X86
    case DC_MATH_SIMD_AVX2:
      if (!__builtin_cpu_supports ("avx2"))
        return FALSE;
      silu_avx2 (x, y, n);
      return TRUE;
    case DC_MATH_SIMD_AVX512:
      if (!__builtin_cpu_supports ("avx512f"))
        return FALSE;
      silu_avx512 (x, y, n);
      return TRUE;
#endif
    default:
      return FALSE;
    }
}

void
dc_math_silu (const float *x,
              float       *y,
              gsize        n)
{
  /* The widest path the CPU has; DC_MATH_NO_SIMD=1 keeps the scalar loop
   * (benchmarks compare them; the bits are the same). */
  static gsize chosen = 0;

  if (g_once_init_enter (&chosen))
    {
      DcMathSimd path = DC_MATH_SIMD_SCALAR;

#ifdef DC_MATH_X86
      if (g_getenv ("DC_MATH_NO_SIMD") == NULL)
        path = __builtin_cpu_supports ("avx512f") ? DC_MATH_SIMD_AVX512
             : __builtin_cpu_supports ("avx2") ? DC_MATH_SIMD_AVX2 : DC_MATH_SIMD_SCALAR;
#endif
      g_once_init_leave (&chosen, (gsize) path + 1);
    }
  dc_math_silu_path ((DcMathSimd) (chosen - 1), x, y, n);
}

void
dc_math_silu_backward (const float *x,
                       const float *dy,
                       float       *dx,
                       gsize        n)
{
  for (gsize i = 0; i < n; i++)
    dx[i] = dy[i] * dc_math_silu_derivf (x[i]);
}

/* Four lanes in GCC's generic vectors (SSE2 on the baseline; 16 bytes, so
 * they pass in registers under every ABI): the comparisons and the adds are the
 * scalar loop's, lane by lane, so the bits are; only the loop is shorter.
 * At -O2 GCC 12 does not vectorize the scalar loops (their length is not a
 * multiple of the vector), and the element-by-element ReLU and bias passes
 * were 12 % of a width-128 training step's CPU time. */
typedef float  V4f __attribute__ ((vector_size (16)));
typedef gint32 V4i __attribute__ ((vector_size (16)));

static inline V4f
load4 (const float *p)
{
  V4f v;

  memcpy (&v, p, sizeof v);
  return v;
}

static inline void
store4 (float *p,
        V4f    v)
{
  memcpy (p, &v, sizeof v);
}

/* dc_math_reluf per lane: x where x > 0 or x is NaN, else +0. */
static inline V4f
relu4 (V4f x)
{
  const V4f zero = { 0 };
  V4i keep = (x > zero) | (x != x);

  return (V4f) ((V4i) x & keep);
}

#ifdef DC_MATH_X86
/* The ReLU passes eight lanes at a time where the CPU has AVX2 (they were
 * 6 % of a lone training step on the VM at four): the same operations as
 * relu4 () and the loops below, per lane. Each returns how far it got;
 * the caller's own loops do the rest (no call from AVX code into SSE code:
 * see exp_shifted_avx2 ()). */
__attribute__ ((target ("avx2"))) static inline __m256
relu8_avx2 (__m256 x)
{
  __m256 keep = _mm256_or_ps (_mm256_cmp_ps (x, _mm256_setzero_ps (), _CMP_GT_OQ),
                              _mm256_cmp_ps (x, x, _CMP_UNORD_Q));

  return _mm256_and_ps (x, keep);
}

__attribute__ ((target ("avx2"))) static gsize
relu_avx2 (const float *x,
           float       *y,
           gsize        n)
{
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (y + i, relu8_avx2 (_mm256_loadu_ps (x + i)));
  return i;
}

__attribute__ ((target ("avx2"))) static gsize
relu_backward_avx2 (const float *x,
                    const float *dy,
                    float       *dx,
                    gsize        n)
{
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256 xv = _mm256_loadu_ps (x + i);
      __m256 pass = _mm256_cmp_ps (xv, _mm256_setzero_ps (), _CMP_GT_OQ);
      __m256 nan = _mm256_cmp_ps (xv, xv, _CMP_UNORD_Q);

      _mm256_storeu_ps (dx + i, _mm256_or_ps (_mm256_and_ps (_mm256_loadu_ps (dy + i), pass),
                                              _mm256_and_ps (xv, nan)));
    }
  return i;
}

__attribute__ ((target ("avx2"))) static gsize
bias_relu_avx2 (float       *y,
                const float *bias,
                float       *act,
                gsize        n)
{
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256 v = _mm256_add_ps (_mm256_loadu_ps (y + i), _mm256_loadu_ps (bias + i));

      _mm256_storeu_ps (y + i, v);
      if (act != NULL)
        _mm256_storeu_ps (act + i, relu8_avx2 (v));
    }
  return i;
}
#endif

/* Where the AVX2 passes run: the softmaxes' path (AVX2, unless
 * DC_MATH_NO_SIMD=1). */
static gboolean
relu_avx2_path (void)
{
#ifdef DC_MATH_X86
  return softmax_path () == DC_MATH_SIMD_AVX2;
#else
  return FALSE;
#endif
}

void
dc_math_relu (const float *x,
              float       *y,
              gsize        n)
{
  gsize i = 0;

#ifdef DC_MATH_X86
  if (relu_avx2_path ())
    i = relu_avx2 (x, y, n);
#endif
  for (; i + 4 <= n; i += 4)
    store4 (y + i, relu4 (load4 (x + i)));
  /* dc_math_reluf's expression, written out: a call per element into
   * dc-math.c (no inlining across files) cost more than the comparison. */
  for (; i < n; i++)
    y[i] = is_nan (x[i]) ? x[i] : (x[i] > 0.0f ? x[i] : 0.0f);
}

/* dx = dy where x > 0, else +0 (the subgradient at 0 is 0); a NaN x passes
 * NaN on. */
void
dc_math_relu_backward (const float *x,
                       const float *dy,
                       float       *dx,
                       gsize        n)
{
  const V4f zero = { 0 };
  gsize i = 0;

#ifdef DC_MATH_X86
  if (relu_avx2_path ())
    i = relu_backward_avx2 (x, dy, dx, n);
#endif
  for (; i + 4 <= n; i += 4)
    {
      V4f xv = load4 (x + i);
      V4i pass = xv > zero, nan = xv != xv;

      store4 (dx + i, (V4f) (((V4i) load4 (dy + i) & pass) | ((V4i) xv & nan)));
    }
  for (; i < n; i++)
    dx[i] = is_nan (x[i]) ? x[i] : (x[i] > 0.0f ? dy[i] : 0.0f);
}

/**
 * dc_math_add:
 * @a: (array length=n)
 * @b: (array length=n)
 * @y: (array length=n): a + b, each rounded once; may be @a or @b
 *
 * The residual adds, in 4-lane vectors (the scalar loop's adds).
 */
void
dc_math_add (const float *a,
             const float *b,
             float       *y,
             gsize        n)
{
  gsize i = 0;

  for (; i + 4 <= n; i += 4)
    store4 (y + i, load4 (a + i) + load4 (b + i));
  for (; i < n; i++)
    y[i] = a[i] + b[i];
}

/**
 * dc_math_scale:
 * @x: (array length=n)
 * @s: a finite factor
 * @y: (array length=n): x · s, each rounded once; may be @x
 *
 * A row times one factor, the products of tiny values (the attention's
 * score gradients late in a run) through mul_small ()'s exact path: the
 * bits of the plain loop without its slow multiplies.
 */
void
dc_math_scale (const float *x,
               float        s,
               float       *y,
               gsize        n)
{
  gsize i = 0;

#ifdef DC_MATH_X86
  if (softmax_path () == DC_MATH_SIMD_AVX2)
    {
      scale_row_avx2 (x, s, y, n);
      return;
    }
#endif
  for (; i < n; i++)
    y[i] = mul_small (x[i], s);
}

/**
 * dc_math_bias_relu:
 * @y: (array length=n) (inout): one row of a product; y + bias on return
 * @bias: (array length=n)
 * @act: (array length=n) (nullable): dc_math_relu (y + bias), or %NULL for
 *   the bias alone
 *
 * The bias pass and the ReLU fused into one pass over the row: each element
 * gets the same add (y + b, rounded once) and the same comparison as the
 * two passes one after the other, so the bits are theirs; the row is read
 * once instead of twice.
 */
void
dc_math_bias_relu (float       *y,
                   const float *bias,
                   float       *act,
                   gsize        n)
{
  gsize i = 0;

#ifdef DC_MATH_X86
  if (relu_avx2_path ())
    i = bias_relu_avx2 (y, bias, act, n);
#endif
  for (; i + 4 <= n; i += 4)
    {
      V4f v = load4 (y + i) + load4 (bias + i);

      store4 (y + i, v);
      if (act != NULL)
        store4 (act + i, relu4 (v));
    }
  for (; i < n; i++)
    {
      y[i] = y[i] + bias[i];
      if (act != NULL)
        act[i] = is_nan (y[i]) ? y[i] : (y[i] > 0.0f ? y[i] : 0.0f);
    }
}

/**
 * dc_math_softmax:
 * @x: (array length=n): logits
 * @y: (array length=n): probabilities; may be @x
 *
 * y = e^(x − max) / Σ e^(x − max), the sum in the fixed pairwise order, one
 * division per element. x − max enters the exponential as an exact
 * double-float (two_sum), so only the exponential, the sum and the division
 * round. -inf logits get exactly 0 (masks). A row with a NaN
 * or +inf, or with every logit -inf, becomes all NaN (nothing sensible can be
 * said about it, and it must not look like a valid distribution). n = 0 does
 * nothing.
 */
void
dc_math_softmax (const float *x,
                 float       *y,
                 gsize        n)
{
  float max, sum;

  g_return_if_fail (n <= DC_MATH_MAX_N);
  if (n == 0)
    return;
  max = dc_math_max (x, n);
  exp_shifted_row (x, max, y, n);
  sum = dc_math_sum (y, n);
  divide_row (y, sum, n);
}

/**
 * dc_math_log_softmax:
 *
 * y = (x − max) − log Σ e^(x − max), x − max exact as a double-float; the
 * sum ≥ 1, so the log never sees 0.
 * -inf logits give -inf; special rows as dc_math_softmax(). The sum's
 * leaves compute e^(x − max) themselves, so no scratch memory is needed and
 * @y may be @x.
 */
void
dc_math_log_softmax (const float *x,
                     float       *y,
                     gsize        n)
{
  float max, lse;
  gsize i;

  g_return_if_fail (n <= DC_MATH_MAX_N);
  if (n == 0)
    return;
  max = dc_math_max (x, n);
  /* With y apart from x, the exponentials go to y first and their plain sum
   * is the same tree over the same leaf values. */
  if (y != x)
    {
      exp_shifted_row (x, max, y, n);
      lse = dc_math_logf (pairwise (LEAF_SUM, y, NULL, 0.0f, n));
    }
  else
    lse = dc_math_logf (pairwise (LEAF_EXP_SHIFTED, x, NULL, max, n));
  for (i = 0; i < n; i++)
    {
      float d, d_lo;

      /* (x − max) exactly as d + d_lo, then − lse, the low part last. A -inf
       * logit gives d = -inf and a NaN d_lo, so it is handled alone. */
      two_sum (x[i], -max, &d, &d_lo);
      if (is_nan (lse))
        y[i] = lse;             /* a NaN or +inf logit, or no finite one */
      else
        y[i] = d == -__builtin_inff () ? d : (d - lse) + d_lo;
    }
}

/**
 * dc_math_softmax_backward:
 *
 * dx = y ⊙ (dy − ⟨y, dy⟩), the dot in the fixed pairwise order.
 */
void
dc_math_softmax_backward (const float *y,
                          const float *dy,
                          float       *dx,
                          gsize        n)
{
  float d;

  g_return_if_fail (n <= DC_MATH_MAX_N);
  d = dc_math_dot (y, dy, n);
#ifdef DC_MATH_X86
  if (softmax_path () == DC_MATH_SIMD_AVX2)
    {
      softmax_backward_row_avx2 (y, dy, d, dx, n);
      return;
    }
#endif
  for (gsize i = 0; i < n; i++)
    dx[i] = mul_small (y[i], dy[i] - d);
}

/**
 * dc_math_log_softmax_backward:
 *
 * dx = dy − e^y · Σ dy, with y the log-softmax output.
 */
void
dc_math_log_softmax_backward (const float *y,
                              const float *dy,
                              float       *dx,
                              gsize        n)
{
  float s;

  g_return_if_fail (n <= DC_MATH_MAX_N);
  s = dc_math_sum (dy, n);
  for (gsize i = 0; i < n; i++)
    dx[i] = dy[i] - dc_math_expf (y[i]) * s;
}

/**
 * dc_math_cross_entropy:
 * @logits: (array length=n): one row of logits
 * @target: the correct class, < n
 *
 * −log softmax(logits)[target], bit for bit what dc_math_log_softmax() gives
 * for that element, negated, without writing the row. NaN for a NaN or +inf
 * logit or a row of −inf; +inf if only the target is −inf.
 */
float
dc_math_cross_entropy (const float *logits,
                       gsize        n,
                       gsize        target)
{
  float max, lse, d, d_lo;

  g_return_val_if_fail (n > 0 && n <= DC_MATH_MAX_N, DC_MATH_NAN);
  g_return_val_if_fail (target < n, DC_MATH_NAN);
  max = dc_math_max (logits, n);
  lse = dc_math_logf (pairwise (LEAF_EXP_SHIFTED, logits, NULL, max, n));
  if (is_nan (lse))
    return lse;
  two_sum (logits[target], -max, &d, &d_lo);
  return -(d == -__builtin_inff () ? d : (d - lse) + d_lo);
}

/**
 * dc_math_cross_entropy_backward:
 * @dlogits: (array length=n): out, may be @logits
 *
 * dlogits = dloss · (softmax(logits) − onehot(target)), the softmax exactly
 * dc_math_softmax()'s, the subtraction only at @target.
 */
void
dc_math_cross_entropy_backward (const float *logits,
                                gsize        n,
                                gsize        target,
                                float        dloss,
                                float       *dlogits)
{
  g_return_if_fail (n > 0 && n <= DC_MATH_MAX_N);
  g_return_if_fail (target < n);
  dc_math_softmax (logits, dlogits, n);
  dlogits[target] = dlogits[target] - 1.0f;
  for (gsize i = 0; i < n; i++)
    dlogits[i] = dlogits[i] * dloss;
}

/**
 * dc_math_layer_norm:
 *
 * mean = Σx / n; var = Σ(x − mean)² / n (two passes, biased as in GPT-2);
 * rstd = 1 / √(var + eps); y = ((x − mean) · rstd) · weight + bias. A NaN
 * or infinite x, or a variance that overflows (|x| beyond about 1.8e19),
 * gives a NaN row and NaN statistics.
 */
void
dc_math_layer_norm (const float *x,
                    const float *weight,
                    const float *bias,
                    float        eps,
                    float       *y,
                    float       *mean_out,
                    float       *rstd_out,
                    gsize        n)
{
  float fn, mean, var, rstd;

  g_return_if_fail (n > 0 && n <= DC_MATH_MAX_N);
  fn = (float) n;
  mean = dc_math_sum (x, n) / fn;
  var = pairwise (LEAF_SQDEV, x, NULL, mean, n) / fn;
  /* A NaN or infinite input, or a variance beyond the float range, leaves
   * nothing to normalize by: the whole row becomes NaN rather than bias
   * alone (rstd would be 0) or a mix. */
  if (!(var <= FLT_MAX))
    mean = var = DC_MATH_NAN;
  rstd = 1.0f / __builtin_sqrtf (var + eps);
  for (gsize i = 0; i < n; i++)
    y[i] = ((x[i] - mean) * rstd) * weight[i] + bias[i];
  if (mean_out != NULL)
    *mean_out = mean;
  if (rstd_out != NULL)
    *rstd_out = rstd;
}

typedef enum
{
  LN_BACKWARD_G,       /* dx = weight · dy */
  LN_BACKWARD_G_NORM,  /* dx = (weight · dy) · ((x − mean) · rstd) */
  LN_BACKWARD_DX,      /* the final dx, dweight and dbias */
} LnBackwardPass;

#ifdef DC_MATH_X86
/* One of dc_math_layer_norm_backward ()'s three elementwise passes eight
 * lanes at a time (the backward was 3 % of a lone training step on the VM
 * in scalar): the same operations in the same order per lane, nothing
 * fused. Returns how far it got; the caller's scalar loop does the rest. */
__attribute__ ((target ("avx2"))) static gsize
layer_norm_backward_avx2 (LnBackwardPass pass,
                          const float   *x,
                          const float   *weight,
                          float          mean,
                          float          rstd,
                          float          g_mean,
                          float          gn_mean,
                          const float   *dy,
                          float         *dx,
                          float         *dweight,
                          float         *dbias,
                          gsize          n)
{
  const __m256 vmean = _mm256_set1_ps (mean), vrstd = _mm256_set1_ps (rstd);
  const __m256 vg_mean = _mm256_set1_ps (g_mean), vgn_mean = _mm256_set1_ps (gn_mean);
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256 vdy = _mm256_loadu_ps (dy + i);
      __m256 g = _mm256_mul_ps (_mm256_loadu_ps (weight + i), vdy);
      __m256 norm;

      if (pass == LN_BACKWARD_G)
        {
          _mm256_storeu_ps (dx + i, g);
          continue;
        }
      norm = _mm256_mul_ps (_mm256_sub_ps (_mm256_loadu_ps (x + i), vmean), vrstd);
      if (pass == LN_BACKWARD_G_NORM)
        {
          _mm256_storeu_ps (dx + i, _mm256_mul_ps (g, norm));
          continue;
        }
      _mm256_storeu_ps (dx + i, _mm256_mul_ps (_mm256_sub_ps (_mm256_sub_ps (g, vg_mean),
                                                              _mm256_mul_ps (norm, vgn_mean)),
                                               vrstd));
      _mm256_storeu_ps (dweight + i, _mm256_add_ps (_mm256_loadu_ps (dweight + i),
                                                    _mm256_mul_ps (vdy, norm)));
      _mm256_storeu_ps (dbias + i, _mm256_add_ps (_mm256_loadu_ps (dbias + i), vdy));
    }
  return i;
}
#endif

/**
 * dc_math_layer_norm_backward:
 *
 * With n̂ = (x − mean)·rstd and g = weight ⊙ dy:
 * dx = (g − mean(g) − n̂ · mean(g ⊙ n̂)) · rstd;
 * dweight += dy ⊙ n̂; dbias += dy. The two means are pairwise sums / n. The
 * sums need two values per element, so they are formed over dx first (dx is
 * scratch until the last loop).
 */
void
dc_math_layer_norm_backward (const float *x,
                             const float *weight,
                             float        mean,
                             float        rstd,
                             const float *dy,
                             float       *dx,
                             float       *dweight,
                             float       *dbias,
                             gsize        n)
{
  float fn, g_mean, gn_mean;
  gsize i;

  g_return_if_fail (n > 0 && n <= DC_MATH_MAX_N);
  g_return_if_fail (dx != dy);
  fn = (float) n;
  i = 0;
#ifdef DC_MATH_X86
  if (softmax_path () == DC_MATH_SIMD_AVX2)
    i = layer_norm_backward_avx2 (LN_BACKWARD_G, x, weight, mean, rstd, 0.0f, 0.0f, dy, dx,
                                  dweight, dbias, n);
#endif
  for (; i < n; i++)
    dx[i] = weight[i] * dy[i];
  g_mean = dc_math_sum (dx, n) / fn;
  i = 0;
#ifdef DC_MATH_X86
  if (softmax_path () == DC_MATH_SIMD_AVX2)
    i = layer_norm_backward_avx2 (LN_BACKWARD_G_NORM, x, weight, mean, rstd, 0.0f, 0.0f, dy, dx,
                                  dweight, dbias, n);
#endif
  for (; i < n; i++)
    dx[i] = (weight[i] * dy[i]) * ((x[i] - mean) * rstd);
  gn_mean = dc_math_sum (dx, n) / fn;
  i = 0;
#ifdef DC_MATH_X86
  if (softmax_path () == DC_MATH_SIMD_AVX2)
    i = layer_norm_backward_avx2 (LN_BACKWARD_DX, x, weight, mean, rstd, g_mean, gn_mean, dy, dx,
                                  dweight, dbias, n);
#endif
  for (; i < n; i++)
    {
      float norm = (x[i] - mean) * rstd;
      float g = weight[i] * dy[i];

      dx[i] = ((g - g_mean) - norm * gn_mean) * rstd;
      dweight[i] = dweight[i] + dy[i] * norm;
      dbias[i] = dbias[i] + dy[i];
    }
}

/**
 * dc_math_rms_norm:
 *
 * rstd = 1 / √(Σx² / n + eps); y = (x · rstd) · weight (Llama's order: the
 * normalized value is rounded before the weight multiplies it). A NaN or
 * infinite x, or squares that overflow, give a NaN row.
 */
void
dc_math_rms_norm (const float *x,
                  const float *weight,
                  float        eps,
                  float       *y,
                  float       *rstd_out,
                  gsize        n)
{
  float ms, rstd;

  g_return_if_fail (n > 0 && n <= DC_MATH_MAX_N);
  ms = pairwise (LEAF_SQUARE, x, NULL, 0.0f, n) / (float) n;
  /* As in layer norm: NaN, infinity or squares beyond the float range give
   * a NaN row (rstd would be 0 and the finite elements would become 0). */
  if (!(ms <= FLT_MAX))
    ms = DC_MATH_NAN;
  rstd = 1.0f / __builtin_sqrtf (ms + eps);
  for (gsize i = 0; i < n; i++)
    y[i] = (x[i] * rstd) * weight[i];
  if (rstd_out != NULL)
    *rstd_out = rstd;
}

/**
 * dc_math_rms_norm_backward:
 *
 * With n̂ = x·rstd and g = weight ⊙ dy: dx = (g − n̂ · mean(g ⊙ n̂)) · rstd;
 * dweight += dy ⊙ n̂.
 */
void
dc_math_rms_norm_backward (const float *x,
                           const float *weight,
                           float        rstd,
                           const float *dy,
                           float       *dx,
                           float       *dweight,
                           gsize        n)
{
  float gn_mean;
  gsize i;

  g_return_if_fail (n > 0 && n <= DC_MATH_MAX_N);
  g_return_if_fail (dx != dy);
  for (i = 0; i < n; i++)
    dx[i] = (weight[i] * dy[i]) * (x[i] * rstd);
  gn_mean = dc_math_sum (dx, n) / (float) n;
  for (i = 0; i < n; i++)
    {
      float norm = x[i] * rstd;

      dx[i] = ((weight[i] * dy[i]) - norm * gn_mean) * rstd;
      dweight[i] = dweight[i] + dy[i] * norm;
    }
}

/* 1 − b^t for 0 ≤ b < 1 and 1 ≤ t ≤ 2^24, as −expm1(t · log b) with the
 * product a double-float: for b near 1 and small t, 1 − b^t cancels, and a
 * float b^t (one ulp of 0.999 is 6e-8) would leave it with a relative error
 * up to 6e-5. */
static float
one_minus_pow (float b,
               float t)
{
  float l_hi, l_lo, w_hi, w_lo, h, p;
  int k;

  if (b == 0.0f)
    return 1.0f;
  _dc_math_log_df (b, &l_hi, &l_lo);
  two_prod (t, l_hi, &w_hi, &w_lo);
  w_lo = w_lo + t * l_lo;
  h = w_hi + w_lo;
  w_lo = w_lo - (h - w_hi);
  w_hi = h;
  if (w_hi < EXPM1_MINUS_ONE)
    return 1.0f;                /* b^t < 2^-26 */
  p = exp_reduce2 (w_hi, w_lo, &k);
  return -expm1_reduced (p, k);
}

/**
 * dc_math_adamw_update:
 * @params: (array length=n): updated in place
 * @grads: (array length=n): this step's gradients
 * @m: (array length=n): first moments, updated in place
 * @v: (array length=n): second moments, updated in place
 * @t: the step number, 1 for the first update, at most 2^24
 *
 * One AdamW step in llm.c's order (GPT-2 training's reference), per element:
 * m = β1·m + (1 − β1)·g; v = β2·v + (1 − β2)·g²; m̂ = m / (1 − β1^t);
 * v̂ = v / (1 − β2^t); p = p − lr·(m̂ / (√v̂ + eps) + wd·p). The bias
 * corrections 1 − β^t are computed once per call as −expm1(t·log β) in
 * double-float (see one_minus_pow()), accurate where a float β^t would cancel.
 * Elements are independent, so any split of the array over threads gives the
 * same bits. 0 ≤ β1, β2 < 1.
 */
void
dc_math_adamw_update (float       *params,
                      const float *grads,
                      float       *m,
                      float       *v,
                      gsize        n,
                      guint64      t,
                      float        lr,
                      float        beta1,
                      float        beta2,
                      float        eps,
                      float        weight_decay)
{
  float bc1, bc2;

  g_return_if_fail (t >= 1 && t <= ((guint64) 1 << 24));
  g_return_if_fail (beta1 >= 0.0f && beta1 < 1.0f && beta2 >= 0.0f && beta2 < 1.0f);
  bc1 = one_minus_pow (beta1, (float) t);
  bc2 = one_minus_pow (beta2, (float) t);
  for (gsize i = 0; i < n; i++)
    {
      float g = grads[i];
      float mi = beta1 * m[i] + (1.0f - beta1) * g;
      float vi = beta2 * v[i] + (1.0f - beta2) * (g * g);
      float m_hat = mi / bc1;
      float v_hat = vi / bc2;

      m[i] = mi;
      v[i] = vi;
      params[i] = params[i] - lr * (m_hat / (__builtin_sqrtf (v_hat) + eps)
                                    + weight_decay * params[i]);
    }
}

#ifdef DC_MATH_X86
/* dc_math_adam_elements () eight lanes at a time (the scalar loop's divisions
 * and square root were 4 % of a lone training step on the VM): the same
 * correctly rounded operations in the same order per lane, nothing fused
 * (the target has no FMA). Returns how far it got; the caller's scalar
 * loop does the rest (no call from AVX code into SSE code). */
__attribute__ ((target ("avx2"))) static gsize
adam_elements_avx2 (const float *params,
                    const float *grads,
                    const float *m_in,
                    const float *v_in,
                    float       *out_params,
                    float       *out_m,
                    float       *out_v,
                    gsize        n,
                    float        lr,
                    float        bc1,
                    float        bc2,
                    float        beta1,
                    float        beta2,
                    float        eps)
{
  const __m256 b1 = _mm256_set1_ps (beta1), b2 = _mm256_set1_ps (beta2);
  const __m256 c1 = _mm256_set1_ps (1.0f - beta1), c2 = _mm256_set1_ps (1.0f - beta2);
  const __m256 vbc1 = _mm256_set1_ps (bc1), vbc2 = _mm256_set1_ps (bc2);
  const __m256 veps = _mm256_set1_ps (eps), vlr = _mm256_set1_ps (lr);
  gsize i = 0;

  for (; i + 8 <= n; i += 8)
    {
      __m256 g = _mm256_loadu_ps (grads + i);
      __m256 m = _mm256_mul_ps (b1, _mm256_loadu_ps (m_in + i));
      __m256 v = _mm256_mul_ps (b2, _mm256_loadu_ps (v_in + i));
      __m256 gg = _mm256_mul_ps (g, g);
      __m256 denom, update;

      m = _mm256_add_ps (m, _mm256_mul_ps (c1, g));
      v = _mm256_add_ps (v, _mm256_mul_ps (c2, gg));
      _mm256_storeu_ps (out_m + i, m);
      _mm256_storeu_ps (out_v + i, v);
      denom = _mm256_add_ps (_mm256_sqrt_ps (_mm256_div_ps (v, vbc2)), veps);
      update = _mm256_mul_ps (vlr, _mm256_div_ps (m, vbc1));
      _mm256_storeu_ps (out_params + i, _mm256_sub_ps (_mm256_loadu_ps (params + i),
                                                       _mm256_div_ps (update, denom)));
    }
  return i;
}
#endif

/**
 * dc_math_adam_elements:
 *
 * Element by element, each line one correctly rounded f32 operation:
 *   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g·g
 *   m̂ = m / bc1;          v̂ = v / bc2
 *   w = w − lr · m̂ / (√v̂ + ε)
 * (dc_gpt_model_adam_step (), whose bc are 1 − β^t). Eight lanes at a time
 * where the CPU has AVX2, the same operations per lane.
 */
void
dc_math_adam_elements (const float *params,
                       const float *grads,
                       const float *m_in,
                       const float *v_in,
                       float       *out_params,
                       float       *out_m,
                       float       *out_v,
                       gsize        n,
                       float        lr,
                       float        bc1,
                       float        bc2,
                       float        beta1,
                       float        beta2,
                       float        eps)
{
  const float one_minus_b1 = 1.0f - beta1, one_minus_b2 = 1.0f - beta2;
  gsize i = 0;

#ifdef DC_MATH_X86
  if (softmax_path () == DC_MATH_SIMD_AVX2)
    i = adam_elements_avx2 (params, grads, m_in, v_in, out_params, out_m, out_v, n, lr, bc1, bc2,
                            beta1, beta2, eps);
#endif
  for (; i < n; i++)
    {
      float g = grads[i];
      float m = beta1 * m_in[i];
      float v = beta2 * v_in[i];
      float gg = g * g;
      float mhat, vhat, denom, update;

      m = m + one_minus_b1 * g;
      v = v + one_minus_b2 * gg;
      out_m[i] = m;
      out_v[i] = v;
      mhat = m / bc1;
      vhat = v / bc2;
      denom = __builtin_sqrtf (vhat) + eps;
      update = lr * mhat;
      out_params[i] = params[i] - update / denom;
    }
}

/**
 * dc_math_rope_table:
 * @base: RoPE's θ base (10000 for Llama 2, 500000 for Llama 3)
 * @head_dim: the head dimension d, even
 * @position: the token position, at most 2^24
 * @cos_out: (array length=head_dim/2): cos of each pair's angle
 * @sin_out: (array length=head_dim/2): sin of each pair's angle
 *
 * The angles of Hugging Face's float32 computation, in its order:
 * inv_freq[i] = base^(−(2i)/d) (the exponent one float division), angle =
 * position · inv_freq[i] (one float product), then cos and sin.
 */
void
dc_math_rope_table (float  base,
                    gsize  head_dim,
                    gsize  position,
                    float *cos_out,
                    float *sin_out)
{
  g_return_if_fail (head_dim > 0 && head_dim % 2 == 0 && head_dim <= DC_MATH_MAX_N);
  g_return_if_fail (position <= ((gsize) 1 << 24));
  for (gsize i = 0; i < head_dim / 2; i++)
    {
      float inv_freq = dc_math_powf (base, -((float) (2 * i) / (float) head_dim));

      dc_math_sincosf ((float) position * inv_freq, &sin_out[i], &cos_out[i]);
    }
}

/**
 * dc_math_rope_apply:
 * @x: (array length=head_dim): one head's vector, rotated in place
 * @cos: (array length=head_dim/2): from dc_math_rope_table()
 * @sin: (array length=head_dim/2): from dc_math_rope_table()
 *
 * Llama's rotate-half convention: element i pairs with i + d/2;
 * y[i] = x[i]·cos − x[i + d/2]·sin, y[i + d/2] = x[i + d/2]·cos + x[i]·sin
 * (the same roundings as Hugging Face's q·cos + rotate_half(q)·sin without
 * FMA).
 */
void
dc_math_rope_apply (float       *x,
                    const float *cos,
                    const float *sin,
                    gsize        head_dim)
{
  gsize h = head_dim / 2;

  g_return_if_fail (head_dim % 2 == 0);
  for (gsize i = 0; i < h; i++)
    {
      float a = x[i], b = x[i + h];

      x[i] = a * cos[i] - b * sin[i];
      x[i + h] = b * cos[i] + a * sin[i];
    }
}

/**
 * dc_math_rope_apply_backward:
 * @dx: (array length=head_dim): the gradient w.r.t. the rotated vector,
 *   turned in place into the gradient w.r.t. the input
 *
 * The transpose of the rotation: dx[i] = dy[i]·cos + dy[i + d/2]·sin,
 * dx[i + d/2] = dy[i + d/2]·cos − dy[i]·sin.
 */
void
dc_math_rope_apply_backward (float       *dx,
                             const float *cos,
                             const float *sin,
                             gsize        head_dim)
{
  gsize h = head_dim / 2;

  g_return_if_fail (head_dim % 2 == 0);
  for (gsize i = 0; i < h; i++)
    {
      float a = dx[i], b = dx[i + h];

      dx[i] = a * cos[i] + b * sin[i];
      dx[i + h] = b * cos[i] - a * sin[i];
    }
}
