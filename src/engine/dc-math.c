/* dc-math.c: the deterministic math library's scalar functions (exp, expm1,
 * log, pow, tanh, sigmoid, sin/cos, rsqrt, SiLU, GELU, ReLU and derivatives)
 * from correctly rounded binary32 operations only; the array operations are
 * in dc-math-vector.c, the shared constants and exact helpers in
 * dc-math-private.h.
 *
 * Why not libm: its results differ between versions, vendors and
 * architectures (glibc 2.27, for one, replaced expf, logf, powf, sinf and
 * cosf with new implementations), and
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
#include "dc-math-private.h"

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
  return expm1_reduced (p, k);
}

/* For positive finite x: x = 2^e · (1 + f) with 1 + f in [√½, √2); f is
 * exact (1 + f is within a factor 2 of 1, Sterbenz). Subnormals are scaled
 * by 2^25 first (exact). */
static float
log_split (float  x,
           int   *e_out)
{
  guint32 ix = float_bits (x);
  float m;
  int e = 0;

  if (ix < 0x00800000u)
    {
      x = x * 0x1p25f;
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
  *e_out = e;
  return m - 1.0f;
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
  float f, s, z, r, hfsq, fe;
  int e;

  if (is_nan (x))
    return x;
  if ((ix & 0x7fffffffu) == 0)
    return bits_float (0xff800000u);
  if (ix & 0x80000000u)
    return DC_MATH_NAN;
  if (ix == 0x7f800000u)
    return x;
  f = log_split (x, &e);
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
 * tanh |x| = 1 / (1 + 2/t) with t = expm1(2|x|) below 0.55, and
 * 1 − 2 / (1 + e^(2|x|)) above, sign restored: monotone within each range.
 * Below 2^-12, tanh x = x. NaN → the same NaN; ±0 → ±0; |x| ≥ 10 and
 * ±inf → ±1.
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
  /* Both forms are chains of monotone steps (each correctly rounded
   * operation is monotone), so tanh is monotone within each range; t/(t + 2)
   * would not be, its numerator and denominator rising together. */
  if (ax < 0x1p-12f)
    return x;                   /* tanh x = x (1 − x²/3 + …): within 1/3 ulp */
  if (ax < TANH_SPLIT)
    {
      t = dc_math_expm1f (2.0f * ax);
      return with_sign_of (1.0f / (1.0f + 2.0f / t), x);
    }
  return with_sign_of (1.0f - 2.0f / (1.0f + dc_math_expf (2.0f * ax)), x);
}

/**
 * dc_math_sigmoidf:
 *
 * 1 / (1 + e^-x), a chain of monotone steps, so sigmoid is monotone (the
 * form e^x / (1 + e^x) is not: its numerator and denominator rise together).
 * Below -20, where e^-x would overflow for x < -88.7 and 1 + e^x rounds to 1,
 * it is e^x (relative difference below 2^-28). NaN → the same NaN; +inf → 1;
 * -inf → +0.
 */
float
dc_math_sigmoidf (float x)
{
  if (is_nan (x))
    return x;
  if (x < SIGMOID_EXP)
    return dc_math_expf (x);
  return 1.0f / (1.0f + dc_math_expf (-x));
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
  int e = (int) (ix >> 23) - 150;          /* ax = m · 2^e, -24 ≤ e ≤ 0 here */
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
  /* sin and cos of r + q·π/2. */
  switch (q)
    {
    case 0:
      ts = s;
      tc = c;
      break;
    case 1:
      ts = c;
      tc = -s;
      break;
    case 2:
      ts = -s;
      tc = -c;
      break;
    default:
      ts = -c;
      tc = s;
      break;
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

/* log(x) as hi + lo to about 2^-40 relative, for positive finite x: the
 * same split as dc_math_logf(), then log(1 + f) = 2s + (2/3)s³ + s⁵·R(s²)
 * with s = f / (2 + f). 2s and (2/3)s³ (up to 1% of the result) are carried
 * as double-floats; the rest is below 2^-12 of the result, so float
 * arithmetic is enough for it. */
void
_dc_math_log_df (float  x,
                 float *l_hi,
                 float *l_lo)
{
  float f, u_hi, u_lo, s_hi, s_lo, p, pe, z_hi, z_lo, c_hi, c_lo, q_hi, q_lo, tail;
  float a_hi, a_lo, b_hi, b_lo, fe, h;
  int e;

  f = log_split (x, &e);
  two_sum (2.0f, f, &u_hi, &u_lo);
  s_hi = f / u_hi;
  /* s_lo = (f − s_hi·(u_hi + u_lo)) / u_hi; f − p is exact (Sterbenz). */
  two_prod (s_hi, u_hi, &p, &pe);
  s_lo = (((f - p) - pe) - s_hi * u_lo) / u_hi;
  /* s² and s³ as double-floats, then (2/3)s³ = s³ / 1.5. */
  two_prod (s_hi, s_hi, &z_hi, &z_lo);
  z_lo = z_lo + 2.0f * (s_hi * s_lo);
  two_prod (z_hi, s_hi, &c_hi, &c_lo);
  c_lo = c_lo + (z_hi * s_lo + z_lo * s_hi);
  q_hi = c_hi / 1.5f;
  two_prod (q_hi, 1.5f, &p, &pe);
  q_lo = (((c_hi - p) - pe) + c_lo) / 1.5f;
  tail = (c_hi * z_hi) * (TWO_5 + z_hi * (TWO_7 + z_hi * (TWO_9 + z_hi * TWO_11)));
  /* log(1 + f) = 2 s_hi + q_hi + (2 s_lo + q_lo + tail); 2 s_hi is exact. */
  two_sum (2.0f * s_hi, q_hi, &a_hi, &a_lo);
  a_lo = a_lo + ((2.0f * s_lo + q_lo) + tail);
  /* + e ln 2, e · LN2_HI exact. */
  fe = (float) e;
  two_sum (fe * LN2_HI, a_hi, &b_hi, &b_lo);
  b_lo = b_lo + (a_lo + fe * LN2_LO);
  h = b_hi + b_lo;
  *l_lo = b_lo - (h - b_hi);
  *l_hi = h;
}

/**
 * dc_math_powf:
 *
 * x^y for x ≥ 0 as exp(y · log x), with log x and the product carried as
 * double-floats so that the exponential's argument is known to about 2^-40
 * (a float product would err by up to half an ulp of a value near 88, a
 * relative error of 2^-18 in the result). Meant for RoPE's inverse
 * frequencies, base^(-2i/d). Special values follow IEEE-754 pow for x ≥ 0:
 * x^±0 = 1 and 1^y = 1 (even for NaN); otherwise a NaN argument → that NaN;
 * x < 0 (−0 excepted) → DC_MATH_NAN; (±0)^y = +0 for y > 0 and +inf for
 * y < 0; (+inf)^y = +inf for y > 0, +0 for y < 0; x^(+inf) = +inf for x > 1
 * and +0 for x < 1; x^(−inf) the reverse; overflow → +inf, underflow → +0.
 */
float
dc_math_powf (float x,
              float y)
{
  float l_hi, l_lo, w_hi, w_lo, h, p;
  int k;

  if (y == 0.0f || x == 1.0f)
    return 1.0f;
  if (is_nan (x))
    return x;
  if (is_nan (y))
    return y;
  if (x == 0.0f)
    return y > 0.0f ? 0.0f : bits_float (0x7f800000u);
  if (x < 0.0f)
    return DC_MATH_NAN;
  if (x == bits_float (0x7f800000u))
    return y > 0.0f ? x : 0.0f;
  if (abs_f (y) == bits_float (0x7f800000u))
    return (x > 1.0f) == (y > 0.0f) ? bits_float (0x7f800000u) : 0.0f;

  _dc_math_log_df (x, &l_hi, &l_lo);
  w_hi = y * l_hi;
  if (w_hi > EXP_OVERFLOW)
    return bits_float (0x7f800000u);
  if (w_hi < EXP_UNDERFLOW)
    return 0.0f;
  /* |y| < 2^100 here unless |log x| is tiny; the Veltkamp split needs it. */
  if (abs_f (y) < 0x1p100f)
    {
      two_prod (y, l_hi, &w_hi, &w_lo);
      w_lo = w_lo + y * l_lo;
      h = w_hi + w_lo;
      w_lo = w_lo - (h - w_hi);
      w_hi = h;
    }
  else
    w_lo = 0.0f;
  p = exp_reduce2 (w_hi, w_lo, &k);
  return scale2 (1.0f + p, k);
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
