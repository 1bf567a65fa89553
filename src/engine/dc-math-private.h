/* dc-math-private.h: constants and exact helpers shared by dc-math.c and
 * dc-math-vector.c.
 *
 * Everything here is a static inline fixed sequence of correctly rounded
 * binary32 operations or exact bit operations (see dc-math.c's header for the
 * rule); splitting the library over two files changes no result.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <float.h>
#include <string.h>

#include <glib.h>

/* x87 arithmetic would keep excess precision and break the contract. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "dc-math needs FLT_EVAL_METHOD == 0 (SSE or equivalent binary32 arithmetic)"
#endif

/* ln 2 split for Cody–Waite reduction: LN2_HI has 15 significant bits, so
 * k · LN2_HI is exact for |k| < 512; LN2_HI + LN2_LO = ln 2 within 6e-14. */
#define LN2_HI   0x1.62e4p-1f
#define LN2_LO   0x1.7f7d1cp-20f
#define LOG2E    0x1.715476p+0f        /* 1 / ln 2 */
#define ROUND_MAGIC 0x1.8p+23f         /* adding and subtracting it rounds to an integer */

/* exp(x) is +inf above EXP_OVERFLOW (the largest float whose exp is finite)
 * and +0 below EXP_UNDERFLOW (exp(x) < 2^-150 there, which rounds to 0). */
#define EXP_OVERFLOW  0x1.62e42ep+6f    /* 88.72283 */
#define EXP_UNDERFLOW -0x1.9fe36ap+6f   /* -103.97208 */
/* expm1(x) rounds to -1 below this: e^x < 2^-25, half an ulp below 1. */
#define EXPM1_MINUS_ONE -0x1.2p+4f      /* -18 */
/* tanh(x) rounds to ±1 beyond this: 1 - tanh(x) < 2^-25 there. */
#define TANH_ONE 0x1.4p+3f              /* 10 */
/* tanh switches from the expm1 form to the exp form here (no cancellation
 * in 1 − 2/(1 + e^2x) once tanh ≥ 0.5). */
#define TANH_SPLIT 0x1.19999ap-1f       /* 0.55 */

/* sigmoid(x) = e^x within 2^-28 relative below this. */
#define SIGMOID_EXP -0x1.4p+4f          /* -20 */

#define SQRT1_2  0x1.6a09e6p-1f         /* √½ rounded down */

/* Taylor coefficients 1/n! rounded to nearest. */
#define INV_FACT2 0x1p-1f
#define INV_FACT3 0x1.555556p-3f
#define INV_FACT4 0x1.555556p-5f
#define INV_FACT5 0x1.111112p-7f
#define INV_FACT6 0x1.6c16c2p-10f
#define INV_FACT7 0x1.a01a02p-13f
#define INV_FACT8 0x1.a01a02p-16f
#define INV_FACT9 0x1.71de3ap-19f
#define INV_FACT10 0x1.27e4fcp-22f

/* 2/(2i+1) for the atanh series of log. */
#define TWO_3  0x1.555556p-1f
#define TWO_5  0x1.99999ap-2f
#define TWO_7  0x1.24924ap-2f
#define TWO_9  0x1.c71c72p-3f
#define TWO_11 0x1.745d18p-3f

/* GPT-2's gelu_new: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
#define GELU_2C 0x1.988454p+0f          /* 2·√(2/π) */
#define GELU_A  0x1.6e4e26p-5f          /* 0.044715 */
#define GELU_3A 0x1.12ba9ep-3f          /* 3 · 0.044715 = 0.134145 */
/* The same constants as unevaluated sums hi + lo (48 bits), for the
 * double-float evaluation of the left tail. */
#define GELU_2C_LO -0x1.857936p-25f
#define GELU_A_LO  0x1.a9003ep-30f

/* 2/π as a 128-bit binary fraction (floor(2/π · 2^128)) and π/2 · 2^62. */
#define TWO_OVER_PI_HI G_GUINT64_CONSTANT (0xa2f9836e4e441529)
#define TWO_OVER_PI_LO G_GUINT64_CONSTANT (0xfc2757d1f534ddc0)
#define PI_OVER_2_Q62  G_GUINT64_CONSTANT (0x6487ed5110b4611a)
#define PI_OVER_4      0x1.921fb4p-1f   /* π/4 rounded down */

static inline guint32
float_bits (float x)
{
  guint32 u;

  memcpy (&u, &x, sizeof u);
  return u;
}

static inline float
bits_float (guint32 u)
{
  float x;

  memcpy (&x, &u, sizeof x);
  return x;
}

static inline gboolean
is_nan (float x)
{
  return (float_bits (x) & 0x7fffffffu) > 0x7f800000u;
}

static inline float
abs_f (float x)
{
  return bits_float (float_bits (x) & 0x7fffffffu);
}

/* Returns |x| with the sign of s. */
static inline float
with_sign_of (float x,
              float s)
{
  return bits_float ((float_bits (x) & 0x7fffffffu) | (float_bits (s) & 0x80000000u));
}

/* 2^k for -126 ≤ k ≤ 127, built from its bits (exact). */
static inline float
pow2i (int k)
{
  return bits_float ((guint32) (k + 127) << 23);
}

/* y · 2^k for -240 ≤ k ≤ 254 with one rounding at most, for the callers'
 * 0.5 ≤ |y| < 2^128: the first multiply keeps y normal and is exact, the
 * second rounds once (into the subnormal range or to infinity). */
static inline float
scale2 (float y,
        int   k)
{
  if (k > 127)
    return (y * pow2i (127)) * pow2i (k - 127);
  if (k < -126)
    return (y * pow2i (k + 125)) * pow2i (-125);
  return y * pow2i (k);
}

/* Splits exp(x + x_lo) = 2^k · m for |x| ≤ 160: k = round(x / ln 2),
 * r = x − k ln 2 + x_lo with |r| ≤ 0.35 (Cody–Waite; the first subtraction
 * is exact by Sterbenz), and returns expm1(r) from its Taylor series to
 * degree 8 (truncation below 2^-32 relative); m = 1 + the returned value.
 * x_lo (|x_lo| ≤ 2^-16) is the low half of a double-float argument, or 0. */
static inline float
exp_reduce2 (float  x,
             float  x_lo,
             int   *k_out)
{
  float t = (x * LOG2E + ROUND_MAGIC) - ROUND_MAGIC;
  float r = ((x - t * LN2_HI) - t * LN2_LO) + x_lo;
  float q;

  *k_out = (int) t;
  q = INV_FACT2 + r * (INV_FACT3 + r * (INV_FACT4 + r * (INV_FACT5 + r * (INV_FACT6
        + r * (INV_FACT7 + r * INV_FACT8)))));
  return r + (r * r) * q;
}

/* exp_reduce2() of a single float. Adding x_lo = +0 is exact except that it
 * turns r = -0 into +0, which only x = ±0 produces and every caller handles
 * before. */
static inline float
exp_reduce (float  x,
            int   *k_out)
{
  return exp_reduce2 (x, 0.0f, k_out);
}

/* e^x − 1 from exp_reduce2()'s split e^x = 2^k (1 + p). */
static inline float
expm1_reduced (float p,
               int   k)
{
  if (k == 0)
    return p;
  /* 2^k (1 + p) - 1 = 2^k (p + (1 - 2^-k)); 1 - 2^-k is exact for |k| ≤ 24,
   * so for small k only one rounding happens before the exact scaling. */
  if (k >= -1 && k <= 23)
    return scale2 (p + (1.0f - pow2i (-k)), k);
  return scale2 (1.0f + p, k) - 1.0f;
}

/* Double-float helpers (Dekker, Knuth): each result is an unevaluated sum
 * hi + lo built from exact binary32 operations, no FMA needed. Valid while
 * nothing overflows or underflows, |a| < 2^100. */
static inline void
split12 (float  a,
         float *hi,
         float *lo)
{
  float c = 0x1.001p+12f * a;   /* Veltkamp: 2^12 + 1 */
  float h = c - (c - a);

  *hi = h;
  *lo = a - h;
}

static inline void
two_prod (float  a,
          float  b,
          float *p,
          float *e)
{
  float ah, al, bh, bl;

  *p = a * b;
  split12 (a, &ah, &al);
  split12 (b, &bh, &bl);
  *e = (((ah * bh - *p) + ah * bl) + al * bh) + al * bl;
}

static inline void
two_sum (float  a,
         float  b,
         float *s,
         float *e)
{
  float bb;

  *s = a + b;
  bb = *s - a;
  *e = (a - (*s - bb)) + (b - bb);
}

/* log(x) as a double-float hi + lo, x positive and finite (dc-math.c). */
void _dc_math_log_df (float  x,
                      float *l_hi,
                      float *l_lo);

/* The SIMD paths of the vector functions (dc-math-vector.c); every one
 * gives the scalar function's bits. */
typedef enum
{
  DC_MATH_SIMD_SCALAR,
  DC_MATH_SIMD_AVX2,
  DC_MATH_SIMD_AVX512,
} DcMathSimd;

gboolean dc_math_exp_shifted_path (DcMathSimd   path,
                                   const float *x,
                                   float        c,
                                   float       *y,
                                   gsize        n);
gboolean dc_math_silu_path (DcMathSimd   path,
                            const float *x,
                            float       *y,
                            gsize        n);

/* For tests: whether tiny operands' products take the exact double path
 * (1), the plain multiply (0), or what DC_MATH_TINY_PRODUCTS says (-1);
 * the bits are the same either way. */
void _dc_math_set_tiny_products_exact (int exact);

/* For tests: whether a softmax row's division takes every lane whose
 * quotient is below 2^-125 through the double path (1), only those whose
 * dividend is (0), or what DC_MATH_SUBNORMAL_QUOTIENTS says (-1); the bits are the same either way. */
void _dc_math_set_subnormal_quotients (int on);

/* dc_math_max () on the given path, for tests; FALSE when this CPU lacks
 * it. */
gboolean dc_math_max_path (DcMathSimd   path,
                           const float *x,
                           gsize        n,
                           float       *out);

/* The pairwise tree's sum of (x[i] − c)² (@deviations, the layer norm's
 * variance) or of x[i]² (the RMS norm's), on the path the library takes,
 * for tests. */
float _dc_math_pairwise_squares (const float *x,
                                 float        c,
                                 gboolean     deviations,
                                 gsize        n);

/* y[i] / sum for a softmax row (1 ≤ sum < inf, y[i] ≥ 0) on the given
 * path, for tests; FALSE when this CPU lacks it. */
gboolean dc_math_divide_row_path (DcMathSimd path,
                                  float     *y,
                                  float      sum,
                                  gsize      n);

