/* dc-math.c: deterministic transcendental, activation, normalization and
 * softmax functions from correctly rounded binary32 operations only.
 *
 * Why not libm: its results differ between versions, vendors and
 * architectures (glibc's expf changed its last bit between releases), and
 * replicas that must agree bit for bit cannot depend on them. Every function
 * here is a fixed sequence of IEEE-754 binary32 + − × ÷ √ (each correctly
 * rounded, round-to-nearest-even), integer↔float conversions (also correctly
 * rounded) and exact integer and bit operations. The build passes
 * -ffp-contract=off, so the compiler never fuses a multiply and an add, and
 * never -ffast-math, so it never reassociates. The algorithms and their
 * measured error bounds are in docs/VERIFICATION.md.
 *
 * Every constant is written as an exact hexadecimal float literal; the
 * decimal values in comments are for reading only.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-math.h"

#include <float.h>
#include <string.h>

/* x87 arithmetic would keep excess precision and break the contract. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "dc-math needs FLT_EVAL_METHOD == 0 (SSE or equivalent binary32 arithmetic)"
#endif

/* ln 2 split for Cody–Waite reduction: LN2_HI has 15 significant bits, so
 * k · LN2_HI is exact for |k| ≤ 512; LN2_HI + LN2_LO = ln 2 within 6e-14. */
#define LN2_HI   0x1.62e4p-1f
#define LN2_LO   0x1.7f7d1cp-20f
#define LOG2E    0x1.715476p+0f        /* 1 / ln 2 */
#define ROUND_MAGIC 0x1.8p+23f         /* adding and subtracting it rounds to an integer */

/* exp(x) is +inf above EXP_OVERFLOW (the largest float whose exp is finite)
 * and +0 below EXP_UNDERFLOW (exp(x) < 2^-150 there, which rounds to 0). */
#define EXP_OVERFLOW  0x1.62e42ep+6f    /* 88.72283 */
#define EXP_UNDERFLOW -0x1.9fe36ap+6f   /* -103.97208 */
/* expm1(x) rounds to -1 below this: e^x < 2^-26. */
#define EXPM1_MINUS_ONE -0x1.2p+4f      /* -18 */
/* tanh(x) rounds to ±1 beyond this: 1 - tanh(x) < 2^-26 there. */
#define TANH_ONE 0x1.4p+3f              /* 10 */

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

/* y · 2^k for -251 ≤ k ≤ 254 with one rounding at most, for the callers'
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

/* Splits exp(x + x_lo) = 2^k · m, for |x| ≤ 160: k =
 * round(x / ln 2), r = x − k ln 2 + x_lo with |r| ≤ 0.35 (Cody–Waite; the
 * first subtraction is exact by Sterbenz), and returns expm1(r) from its
 * Taylor series to degree 8 (truncation below 2^-32 relative). m = 1 + the
 * returned value. x_lo (|x_lo| ≤ 2^-16) carries the low half of a double-float argument. */
static float
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

/**
 * dc_math_check_fp_environment:
 *
 * Checks at run time that this thread's floating-point unit computes what
 * the library assumes: round to nearest even, subnormal results kept (no
 * flush-to-zero) and subnormal inputs honoured (no denormals-are-zero). A
 * library loaded into the process (one built with -ffast-math links
 * crtfastmath.o, which sets FTZ/DAZ) or a fesetround() call can change them
 * behind our back, and the replica would silently disagree with the others.
 * The environment is per thread, so every thread that computes model values
 * should check it once.
 *
 * Returns: %TRUE if the environment is the IEEE-754 default; otherwise
 * %FALSE with %G_IO_ERROR_NOT_SUPPORTED naming what is wrong.
 */
gboolean
dc_math_check_fp_environment (GError **error)
{
  /* volatile keeps the compiler from folding these at build time, where the
   * default environment would always hold. */
  volatile float one = 1.0f, half_ulp = 0x1p-24f, three_half_ulp = 0x1.8p-24f;
  volatile float min_normal = 0x1p-126f, half = 0.5f, sub = 0x1p-140f;  /* sub is subnormal */
  const char *what = NULL;

  /* A subnormal result is compared by its bits (with DAZ a float
   * comparison would see it as zero); a subnormal input is scaled into the
   * normal range, which only DAZ breaks. */
  if (float_bits (min_normal * half) != 0x00400000u)
    what = "subnormal results are flushed to zero (FTZ)";
  else if (sub * 0x1p100f != 0x1p-40f)
    what = "subnormal inputs are treated as zero (DAZ)";
  else if (one + half_ulp != 1.0f || one + three_half_ulp != 1.0f + 0x1p-23f
           || -one - half_ulp != -1.0f || -one - three_half_ulp != -1.0f - 0x1p-23f)
    what = "the rounding mode is not round-to-nearest-even";

  if (what != NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   "The floating-point environment is not the IEEE-754 default: %s; "
                   "results would differ from other replicas", what);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_math_expf:
 *
 * e^x. NaN → the same NaN; +inf and x > 88.72283 → +inf; -inf and
 * x < -103.97208 → +0; ±0 → 1. Results in the subnormal range are rounded
 * twice (once to 24 bits, once to the subnormal grid).
 */
float
dc_math_expf (float x)
{
  float p;
  int k;

  if (is_nan (x))
    return x;
  if (x > EXP_OVERFLOW)
    return bits_float (0x7f800000u);
  if (x < EXP_UNDERFLOW)
    return 0.0f;
  p = exp_reduce (x, &k);
  return scale2 (1.0f + p, k);
}

/**
 * dc_math_expm1f:
 *
 * e^x − 1, accurate near 0. NaN → the same NaN; ±0 → ±0; +inf and
 * x > 88.72283 → +inf; x < -18 (and -inf) → -1.
 */
float
dc_math_expm1f (float x)
{
  float p;
  int k;

  if (is_nan (x) || x == 0.0f)
    return x;
  if (x > EXP_OVERFLOW)
    return bits_float (0x7f800000u);
  if (x < EXPM1_MINUS_ONE)
    return -1.0f;
  p = exp_reduce (x, &k);
  if (k == 0)
    return p;
  /* 2^k (1 + p) - 1 = 2^k (p + (1 - 2^-k)); 1 - 2^-k is exact for |k| ≤ 24,
   * so for small k only one rounding happens before the exact scaling. */
  if (k >= -1 && k <= 23)
    return scale2 (p + (1.0f - pow2i (-k)), k);
  return scale2 (1.0f + p, k) - 1.0f;
}

/**
 * dc_math_logf:
 *
 * Natural logarithm. x = 2^e · m with m in [√½, √2), f = m − 1 (exact),
 * s = f / (2 + f), log(1 + f) = f − (f²/2 − s (f²/2 + R(s²))) with R the
 * atanh series, plus e · ln 2 in two parts. NaN → the same NaN; x < 0 and
 * -inf → DC_MATH_NAN; ±0 → -inf; +inf → +inf; 1 → +0. Subnormals are exact
 * inputs (scaled by 2^25 first).
 */
float
dc_math_logf (float x)
{
  guint32 ix = float_bits (x);
  float m, f, s, z, r, hfsq, fe;
  int e = 0;

  if (is_nan (x))
    return x;
  if ((ix & 0x7fffffffu) == 0)
    return bits_float (0xff800000u);
  if (ix & 0x80000000u)
    return DC_MATH_NAN;
  if (ix == 0x7f800000u)
    return x;
  if (ix < 0x00800000u)
    {
      x = x * 0x1p25f;          /* exact: brings a subnormal into the normal range */
      ix = float_bits (x);
      e = -25;
    }
  e += (int) (ix >> 23) - 127;
  m = bits_float ((ix & 0x007fffffu) | 0x3f800000u);
  if (m > 2.0f * SQRT1_2)
    {
      m = m * 0.5f;             /* exact */
      e += 1;
    }
  f = m - 1.0f;                 /* exact: m is within a factor 2 of 1 */
  s = f / (2.0f + f);
  z = s * s;
  r = z * (TWO_3 + z * (TWO_5 + z * (TWO_7 + z * (TWO_9 + z * TWO_11))));
  hfsq = 0.5f * (f * f);
  fe = (float) e;               /* exact: |e| < 200 */
  return fe * LN2_HI - ((hfsq - (s * (hfsq + r) + fe * LN2_LO)) - f);
}

/**
 * dc_math_tanhf:
 *
 * tanh(x) = t / (t + 2) with t = expm1(2|x|), sign restored. NaN → the same
 * NaN; ±0 → ±0; |x| ≥ 10 and ±inf → ±1.
 */
float
dc_math_tanhf (float x)
{
  float ax = abs_f (x);
  float t;

  if (is_nan (x) || x == 0.0f)
    return x;
  if (ax >= TANH_ONE)
    return with_sign_of (1.0f, x);
  t = dc_math_expm1f (2.0f * ax);
  return with_sign_of (t / (t + 2.0f), x);
}

/**
 * dc_math_sigmoidf:
 *
 * 1 / (1 + e^-x) for x ≥ 0, e^x / (1 + e^x) for x < 0, so the exponential
 * never overflows. NaN → the same NaN; +inf → 1; -inf → +0.
 */
float
dc_math_sigmoidf (float x)
{
  float e;

  if (is_nan (x))
    return x;
  if (x >= 0.0f)
    return 1.0f / (1.0f + dc_math_expf (-x));
  e = dc_math_expf (x);
  return e / (1.0f + e);
}

/* sin(r) and cos(r) for |r| ≤ π/4 by their Taylor series (degree 9 and 10,
 * truncation below 2^-28 relative), the leading terms added last. */
static inline float
sin_kernel (float r)
{
  float z = r * r;
  float p = z * (-INV_FACT3 + z * (INV_FACT5 + z * (-INV_FACT7 + z * INV_FACT9)));

  return r + r * p;
}

static inline float
cos_kernel (float r)
{
  float z = r * r;
  float p = z * z * (INV_FACT4 + z * (-INV_FACT6 + z * (INV_FACT8 - z * INV_FACT10)));

  return (1.0f - 0.5f * z) + p;
}

/* Reduces 0 ≤ ax < 2^24 exactly: ax = (4j + q + f) · π/2 with q in 0..3 and
 * f in [-½, ½). ax · 2/π is formed in 152-bit fixed point from a 128-bit 2/π
 * (error below 2^-100 of a quadrant), f is then multiplied by π/2 in fixed
 * point and converted to float once. Returns r = f · π/2 and sets *q. */
static float
trig_reduce (float  ax,
             int   *q_out)
{
  guint32 ix = float_bits (ax);
  guint64 m = (ix & 0x007fffffu) | 0x00800000u;
  int e = (int) (ix >> 23) - 150;          /* ax = m · 2^e, -25 ≤ e ≤ 0 here */
  int sh = -e;                              /* fraction of T starts at bit 128 + sh */
  unsigned __int128 a = (unsigned __int128) m * TWO_OVER_PI_LO;
  unsigned __int128 b = (unsigned __int128) m * TWO_OVER_PI_HI;
  unsigned __int128 mid = (a >> 64) + (guint64) b;
  guint64 t1 = (guint64) mid;
  guint64 t2 = (guint64) (b >> 64) + (guint64) (mid >> 64);
  guint64 frac, mag, hi;
  gint64 sfrac;
  unsigned __int128 prod;
  int q;
  float r;

  g_assert (sh >= 0 && sh < 64);
  /* T = t2·2^128 + t1·2^64 + low bits; ax · 2/π = T · 2^(-128-sh). */
  q = (int) ((t2 >> sh) & 3);
  frac = sh == 0 ? t1 : (t2 << (64 - sh)) | (t1 >> sh);
  /* Round to the nearest quadrant: a fraction ≥ ½ becomes negative. */
  sfrac = (gint64) frac;
  q = (q + (int) (frac >> 63)) & 3;
  mag = sfrac < 0 ? (guint64) 0 - frac : frac;       /* |f| · 2^64 ≤ 2^63 */
  prod = (unsigned __int128) mag * PI_OVER_2_Q62;     /* |r| · 2^126 */
  hi = (guint64) (prod >> 62);                        /* |r| · 2^64 */
  /* A sticky bit keeps the single int→float rounding correct. */
  hi |= ((guint64) prod & ((G_GUINT64_CONSTANT (1) << 62) - 1)) != 0;
  r = (float) hi * 0x1p-64f;                          /* one rounding, then exact */
  *q_out = q;
  return sfrac < 0 ? -r : r;
}

/* Shared by sin, cos and sincos: x finite, |x| < DC_MATH_TRIG_MAX. */
static void
sincos_finite (float  x,
               float *s_out,
               float *c_out)
{
  float ax = abs_f (x);
  float r, s, c, ts, tc;
  int q = 0;

  if (ax <= PI_OVER_4)
    {
      *s_out = x == 0.0f ? x : sin_kernel (x);
      *c_out = cos_kernel (x);
      return;
    }
  r = trig_reduce (ax, &q);
  s = sin_kernel (r);
  c = cos_kernel (r);
  switch (q)
    {
    case 0: ts = s;  tc = c;  break;
    case 1: ts = c;  tc = -s; break;
    case 2: ts = -s; tc = -c; break;
    default: ts = -c; tc = s; break;
    }
  *s_out = (float_bits (x) & 0x80000000u) ? -ts : ts;
  *c_out = tc;
}

/**
 * dc_math_sincosf:
 *
 * sin(x) and cos(x) together (RoPE needs both of the same angle). Exact
 * argument reduction for |x| < 2^24; NaN → the same NaN in both; ±inf and
 * |x| ≥ 2^24 → DC_MATH_NAN in both; sin(±0) = ±0, cos(±0) = 1.
 */
void
dc_math_sincosf (float  x,
                 float *sin_out,
                 float *cos_out)
{
  if (is_nan (x))
    {
      *sin_out = *cos_out = x;
      return;
    }
  if (!(abs_f (x) < DC_MATH_TRIG_MAX))
    {
      *sin_out = *cos_out = DC_MATH_NAN;
      return;
    }
  sincos_finite (x, sin_out, cos_out);
}

float
dc_math_sinf (float x)
{
  float s, c;

  dc_math_sincosf (x, &s, &c);
  return s;
}

float
dc_math_cosf (float x)
{
  float s, c;

  dc_math_sincosf (x, &s, &c);
  return c;
}

/**
 * dc_math_rsqrtf:
 *
 * 1 / √x, two correctly rounded operations. NaN → the same NaN; +0 → +inf;
 * -0 → -inf; x < 0 → DC_MATH_NAN; +inf → +0.
 */
float
dc_math_rsqrtf (float x)
{
  if (is_nan (x))
    return x;
  if (x < 0.0f)
    return DC_MATH_NAN;
  return 1.0f / __builtin_sqrtf (x);
}

/* x · e / (1 + e) with e = exp(v + v_lo) and v < 0, without losing e's
 * precision when e is subnormal: for v < -18, 1 + e rounds to 1 and the
 * result is x · m · 2^k with m = 1 + expm1(r) kept normal, scaled once. */
static float
mul_sigmoid_neg (float x,
                 float v,
                 float v_lo)
{
  float p, e;
  int k;

  if (v < -0x1.4p+7f)           /* -160: x · e^v is far below 2^-149 for |x| < 2^42 */
    return x * 0.0f;
  p = exp_reduce2 (v, v_lo, &k);
  if (v < EXPM1_MINUS_ONE)
    return scale2 (x * (1.0f + p), k);
  e = scale2 (1.0f + p, k);
  return (x * e) / (1.0f + e);
}

/**
 * dc_math_siluf:
 *
 * x · sigmoid(x): x / (1 + e^-x) for x ≥ 0, x·e^x / (1 + e^x) for x < 0.
 * NaN → the same NaN; +inf → +inf; -inf → -0; ±0 → ±0.
 */
float
dc_math_siluf (float x)
{
  if (is_nan (x))
    return x;
  if (x >= 0.0f)
    return x / (1.0f + dc_math_expf (-x));
  if (x == -__builtin_inff ())
    return -0.0f;
  return mul_sigmoid_neg (x, x, 0.0f);
}

/**
 * dc_math_silu_derivf:
 *
 * d/dx silu = s · (1 + x · (1 − s)), s = sigmoid(x), 1 − s = sigmoid(−x).
 * NaN → the same NaN; +inf → 1; -inf → +0.
 */
float
dc_math_silu_derivf (float x)
{
  float s, sm;

  if (is_nan (x))
    return x;
  if (x == __builtin_inff ())
    return 1.0f;
  if (x == -__builtin_inff ())
    return 0.0f;
  s = dc_math_sigmoidf (x);
  sm = dc_math_sigmoidf (-x);
  return s * (1.0f + x * sm);
}

/* 2u = 2·√(2/π)·x·(1 + 0.044715·x²), in a fixed order. */
static inline float
gelu_two_u (float x)
{
  return (GELU_2C * x) * (1.0f + GELU_A * (x * x));
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

/* 2u as hi + lo to about 44 bits. On the left tail gelu ≈ x·e^(2u) and an
 * error δ in 2u becomes a relative error δ in the result, so 2u must be known
 * far better than to one float ulp (at x = -5, 2u ≈ -17). */
static void
gelu_two_u_df (float  x,
               float *v_hi,
               float *v_lo)
{
  float s, se, th, tl, wh, wl, yh, yl, vh, vl, h;

  two_prod (x, x, &s, &se);
  two_prod (GELU_A, s, &th, &tl);
  tl = tl + (GELU_A * se + GELU_A_LO * s);
  two_sum (1.0f, th, &wh, &wl);
  wl = wl + tl;
  h = wh + wl;
  wl = wl - (h - wh);
  wh = h;
  two_prod (x, wh, &yh, &yl);
  yl = yl + x * wl;
  two_prod (GELU_2C, yh, &vh, &vl);
  vl = vl + (GELU_2C * yl + GELU_2C_LO * yh);
  h = vh + vl;
  *v_lo = vl - (h - vh);
  *v_hi = h;
}

/**
 * dc_math_gelu_tanhf:
 *
 * GPT-2's gelu_new, 0.5·x·(1 + tanh u) = x · sigmoid(2u) with
 * u = √(2/π)(x + 0.044715 x³), evaluated as x / (1 + e^-2u) for x ≥ 0 and
 * x·e^2u / (1 + e^2u) for x < 0 so nothing cancels or overflows; for
 * x < 0, 2u is computed in double-float arithmetic (see gelu_two_u_df()). NaN → the
 * same NaN; +inf → +inf; -inf → -0; ±0 → ±0; x < -2^42 → -0 (x³ would
 * overflow; the true value is far below 2^-149 there).
 */
float
dc_math_gelu_tanhf (float x)
{
  float v_hi, v_lo;

  if (is_nan (x))
    return x;
  if (x >= 0.0f)
    {
      if (x > 0x1p+42f)
        return x;
      return x / (1.0f + dc_math_expf (-gelu_two_u (x)));
    }
  if (x < -0x1p+42f)
    return -0.0f;
  gelu_two_u_df (x, &v_hi, &v_lo);
  return mul_sigmoid_neg (x, v_hi, v_lo);
}

/**
 * dc_math_gelu_tanh_derivf:
 *
 * d/dx gelu_new = s + 2·x·s·(1 − s)·√(2/π)(1 + 3·0.044715 x²), with
 * s = sigmoid(2u) and 1 − s = sigmoid(−2u) computed separately (no
 * cancellation). NaN → the same NaN; +inf → 1; -inf → +0.
 */
float
dc_math_gelu_tanh_derivf (float x)
{
  float tu, s, sm, du;

  if (is_nan (x))
    return x;
  if (x > 0x1p+42f)
    return 1.0f;
  if (x < -0x1p+42f)
    return 0.0f;
  tu = gelu_two_u (x);
  s = dc_math_sigmoidf (tu);
  sm = dc_math_sigmoidf (-tu);
  /* du = d(2u)/dx = 2·√(2/π)·(1 + 3a x²). */
  du = GELU_2C * (1.0f + GELU_3A * (x * x));
  return s + ((x * du) * (s * sm));
}

/**
 * dc_math_reluf:
 *
 * max(x, 0). NaN → the same NaN (a diverged model stays visibly diverged);
 * -0 → +0; -inf → +0.
 */
float
dc_math_reluf (float x)
{
  if (is_nan (x))
    return x;
  return x > 0.0f ? x : 0.0f;
}

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
          for (i = 0; i < n; i++)
            v[i] = a[i] * b[i];
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

      /* h becomes the largest power of two strictly below n. */
      while (h * 2 < n)
        h *= 2;
      return pairwise (kind, a, b, c, h)
             + pairwise (kind, a + h, b != NULL ? b + h : NULL, c, n - h);
    }
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

void
dc_math_silu (const float *x,
              float       *y,
              gsize        n)
{
  for (gsize i = 0; i < n; i++)
    y[i] = dc_math_siluf (x[i]);
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

void
dc_math_relu (const float *x,
              float       *y,
              gsize        n)
{
  for (gsize i = 0; i < n; i++)
    y[i] = dc_math_reluf (x[i]);
}

/* dx = dy where x > 0, else +0 (the subgradient at 0 is 0); a NaN x passes
 * NaN on. */
void
dc_math_relu_backward (const float *x,
                       const float *dy,
                       float       *dx,
                       gsize        n)
{
  for (gsize i = 0; i < n; i++)
    dx[i] = is_nan (x[i]) ? x[i] : (x[i] > 0.0f ? dy[i] : 0.0f);
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
  gsize i;

  g_return_if_fail (n <= DC_MATH_MAX_N);
  if (n == 0)
    return;
  max = dc_math_max (x, n);
  for (i = 0; i < n; i++)
    y[i] = exp_shifted (x[i], max);
  sum = dc_math_sum (y, n);
  for (i = 0; i < n; i++)
    y[i] = y[i] / sum;
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
  for (gsize i = 0; i < n; i++)
    dx[i] = y[i] * (dy[i] - d);
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
 * dc_math_layer_norm:
 *
 * mean = Σx / n; var = Σ(x − mean)² / n (two passes, biased as in GPT-2);
 * rstd = 1 / √(var + eps); y = ((x − mean) · rstd) · weight + bias.
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
  rstd = 1.0f / __builtin_sqrtf (var + eps);
  for (gsize i = 0; i < n; i++)
    y[i] = ((x[i] - mean) * rstd) * weight[i] + bias[i];
  if (mean_out != NULL)
    *mean_out = mean;
  if (rstd_out != NULL)
    *rstd_out = rstd;
}

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
  for (i = 0; i < n; i++)
    dx[i] = weight[i] * dy[i];
  g_mean = dc_math_sum (dx, n) / fn;
  for (i = 0; i < n; i++)
    dx[i] = (weight[i] * dy[i]) * ((x[i] - mean) * rstd);
  gn_mean = dc_math_sum (dx, n) / fn;
  for (i = 0; i < n; i++)
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
 * normalized value is rounded before the weight multiplies it).
 */
void
dc_math_rms_norm (const float *x,
                  const float *weight,
                  float        eps,
                  float       *y,
                  float       *rstd_out,
                  gsize        n)
{
  float rstd;

  g_return_if_fail (n > 0 && n <= DC_MATH_MAX_N);
  rstd = 1.0f / __builtin_sqrtf (pairwise (LEAF_SQUARE, x, NULL, 0.0f, n) / (float) n + eps);
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
