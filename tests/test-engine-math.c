/* test-engine-math.c: the IEEE-754 oracle for the deterministic math library.
 *
 * Each scalar function of src/engine/dc-math.c is compared with MPFR's value
 * of the exact real function at 128 bits over a dense sweep (evenly spaced in
 * the floats' own order, so every binade is covered) plus seeded random
 * points, and its largest error in ULPs must stay within the bound that
 * docs/VERIFICATION.md documents. Special values are checked bit for bit,
 * monotone functions for monotonicity, hashes of outputs over fixed sweeps
 * (and the library's own run-time probe hash) pin the exact rule, the
 * floating-point environment check is shown to catch FTZ, DAZ and rounding
 * modes, and the vector operations (softmax family, cross-entropy, norms,
 * AdamW, RoPE) are checked against double-precision references and their
 * backward passes against finite differences.
 *
 * Environment: DC_MATH_SWEEP=N deepens the oracle sweep, DC_MATH_EXHAUSTIVE=1
 * walks every float in the monotonicity test, DC_MATH_REPORT=1 prints the
 * figures and hashes on stderr.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <fenv.h>
#include <math.h>
#include <string.h>
#include <glib.h>
#include <mpfr.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "engine/dc-math.h"
#include "engine/dc-math-private.h"
#include "engine/dc-parallel.h"

#define PREC 128

/* Points per function: the even sweep plus half as many random ones.
 * DC_MATH_SWEEP=N raises the sweep for a deeper run by hand (the figures in
 * docs/VERIFICATION.md come from one). */
static guint n_sweep = 50000;

/* The training's Adam constants (dc-gpt-model.h). */
#define DC_TEST_BETA1 0.9f
#define DC_TEST_BETA2 0.999f
#define DC_TEST_EPS   1e-8f
#define N_RANDOM (n_sweep / 2)

typedef float (*ScalarFunc) (float x);
/* Sets @out to the exact function at @x (rounded to PREC bits). */
typedef void (*RefFunc) (mpfr_t out, const mpfr_t x);

static guint32
bits_of (float x)
{
  guint32 u;

  memcpy (&u, &x, sizeof u);
  return u;
}

static float
float_of (guint32 u)
{
  float x;

  memcpy (&x, &u, sizeof x);
  return x;
}

/* Floats in their numeric order as signed integers (−0 and +0 adjacent). */
static gint64
ordinal (float x)
{
  guint32 u = bits_of (x);

  return (u & 0x80000000u) ? -(gint64) (u & 0x7fffffffu) - 1 : (gint64) u;
}

static float
from_ordinal (gint64 o)
{
  return o < 0 ? float_of ((guint32) (-(o + 1)) | 0x80000000u) : float_of ((guint32) o);
}

/* ---- MPFR references (all at PREC bits, round to nearest) ---- */

static void
ref_exp (mpfr_t out, const mpfr_t x)
{
  mpfr_exp (out, x, MPFR_RNDN);
}

static void
ref_expm1 (mpfr_t out, const mpfr_t x)
{
  mpfr_expm1 (out, x, MPFR_RNDN);
}

static void
ref_log (mpfr_t out, const mpfr_t x)
{
  mpfr_log (out, x, MPFR_RNDN);
}

static void
ref_tanh (mpfr_t out, const mpfr_t x)
{
  mpfr_tanh (out, x, MPFR_RNDN);
}

static void
ref_sin (mpfr_t out, const mpfr_t x)
{
  mpfr_sin (out, x, MPFR_RNDN);
}

static void
ref_cos (mpfr_t out, const mpfr_t x)
{
  mpfr_cos (out, x, MPFR_RNDN);
}

static void
ref_rsqrt (mpfr_t out, const mpfr_t x)
{
  mpfr_rec_sqrt (out, x, MPFR_RNDN);
}

/* 1 / (1 + e^-x) */
static void
ref_sigmoid (mpfr_t out, const mpfr_t x)
{
  mpfr_t t;

  mpfr_init2 (t, PREC);
  mpfr_neg (t, x, MPFR_RNDN);
  mpfr_exp (t, t, MPFR_RNDN);
  mpfr_add_ui (t, t, 1, MPFR_RNDN);
  mpfr_ui_div (out, 1, t, MPFR_RNDN);
  mpfr_clear (t);
}

static void
ref_silu (mpfr_t out, const mpfr_t x)
{
  mpfr_t s;

  mpfr_init2 (s, PREC);
  ref_sigmoid (s, x);
  mpfr_mul (out, x, s, MPFR_RNDN);
  mpfr_clear (s);
}

/* s (1 + x (1 - s)) */
static void
ref_silu_deriv (mpfr_t out, const mpfr_t x)
{
  mpfr_t s, t;

  mpfr_inits2 (PREC, s, t, NULL);
  ref_sigmoid (s, x);
  mpfr_ui_sub (t, 1, s, MPFR_RNDN);
  mpfr_mul (t, t, x, MPFR_RNDN);
  mpfr_add_ui (t, t, 1, MPFR_RNDN);
  mpfr_mul (out, s, t, MPFR_RNDN);
  mpfr_clears (s, t, NULL);
}

/* u = √(2/π) (x + 0.044715 x³), with the decimal constant exactly. */
static void
ref_gelu_u (mpfr_t u, const mpfr_t x)
{
  mpfr_t a, c, t;

  mpfr_inits2 (PREC, a, c, t, NULL);
  mpfr_set_str (a, "0.044715", 10, MPFR_RNDN);
  mpfr_const_pi (c, MPFR_RNDN);
  mpfr_ui_div (c, 2, c, MPFR_RNDN);
  mpfr_sqrt (c, c, MPFR_RNDN);
  mpfr_pow_ui (t, x, 3, MPFR_RNDN);
  mpfr_mul (t, t, a, MPFR_RNDN);
  mpfr_add (t, t, x, MPFR_RNDN);
  mpfr_mul (u, t, c, MPFR_RNDN);
  mpfr_clears (a, c, t, NULL);
}

/* 0.5 x (1 + tanh u), evaluated as x · sigmoid(2u) to avoid MPFR's own
 * cancellation for very negative x. */
static void
ref_gelu (mpfr_t out, const mpfr_t x)
{
  mpfr_t u;

  mpfr_init2 (u, PREC);
  ref_gelu_u (u, x);
  mpfr_mul_2ui (u, u, 1, MPFR_RNDN);
  ref_sigmoid (u, u);
  mpfr_mul (out, x, u, MPFR_RNDN);
  mpfr_clear (u);
}

/* s + x s (1 − s) · 2√(2/π)(1 + 3·0.044715 x²), s = sigmoid(2u). */
static void
ref_gelu_deriv (mpfr_t out, const mpfr_t x)
{
  mpfr_t u, s, sm, du, c, a;

  mpfr_inits2 (PREC, u, s, sm, du, c, a, NULL);
  ref_gelu_u (u, x);
  mpfr_mul_2ui (u, u, 1, MPFR_RNDN);
  ref_sigmoid (s, u);
  mpfr_ui_sub (sm, 1, s, MPFR_RNDN);
  mpfr_set_str (a, "0.134145", 10, MPFR_RNDN);
  mpfr_const_pi (c, MPFR_RNDN);
  mpfr_ui_div (c, 2, c, MPFR_RNDN);
  mpfr_sqrt (c, c, MPFR_RNDN);
  mpfr_mul_2ui (c, c, 1, MPFR_RNDN);
  mpfr_sqr (du, x, MPFR_RNDN);
  mpfr_mul (du, du, a, MPFR_RNDN);
  mpfr_add_ui (du, du, 1, MPFR_RNDN);
  mpfr_mul (du, du, c, MPFR_RNDN);
  mpfr_mul (du, du, x, MPFR_RNDN);
  mpfr_mul (du, du, s, MPFR_RNDN);
  mpfr_mul (du, du, sm, MPFR_RNDN);
  mpfr_add (out, s, du, MPFR_RNDN);
  mpfr_clears (u, s, sm, du, c, a, NULL);
}

/* ---- error measurement ---- */

typedef enum
{
  METRIC_ULP,      /* |y − f(x)| / ulp(f(x)), ulp of the subnormal grid at the bottom */
  METRIC_ABS,      /* |y − f(x)| / 2^-24: for derivatives, which cross zero */
} Metric;

/* Error of @y against @ref. Infinite or NaN results must match exactly
 * (after correct rounding of @ref); anything else is G_MAXDOUBLE. */
static double
error_of (float         y,
          const mpfr_t  ref,
          Metric        metric)
{
  float rf = mpfr_get_flt (ref, MPFR_RNDN);
  mpfr_t d;
  double err;
  long ulp_exp;

  if (isnan (rf) || isinf (rf) || isnan (y) || isinf (y))
    return (bits_of (rf) == bits_of (y) || (isnan (rf) && isnan (y))) ? 0.0 : G_MAXDOUBLE;

  if (metric == METRIC_ABS)
    ulp_exp = -24;
  else if (mpfr_zero_p (ref))
    ulp_exp = -149;
  else
    /* ref = m · 2^E with m in [½, 1): ulp = 2^(E − 24), not below 2^-149. */
    ulp_exp = MAX ((long) mpfr_get_exp (ref) - 24, -149L);

  mpfr_init2 (d, PREC + 64);
  mpfr_set_flt (d, y, MPFR_RNDN);
  mpfr_sub (d, d, ref, MPFR_RNDN);
  mpfr_mul_2si (d, d, -ulp_exp, MPFR_RNDN);
  err = fabs (mpfr_get_d (d, MPFR_RNDN));
  mpfr_clear (d);
  return err;
}

typedef struct
{
  double max_err;
  float  worst_x;
  guint  n_points;
} Measure;

static void
measure_point (ScalarFunc  f,
               RefFunc     ref,
               Metric      metric,
               float       x,
               Measure    *m)
{
  mpfr_t mx, out;
  double err;

  mpfr_init2 (mx, PREC);
  mpfr_init2 (out, PREC);
  mpfr_set_flt (mx, x, MPFR_RNDN);
  ref (out, mx);
  err = error_of (f (x), out, metric);
  if (err > m->max_err || m->n_points == 0)
    {
      if (err > m->max_err)
        m->max_err = err;
      if (err >= m->max_err)
        m->worst_x = x;
    }
  m->n_points++;
  mpfr_clear (mx);
  mpfr_clear (out);
}

/* Sweeps [lo, hi] evenly in float order, then random floats in float order
 * and, where @linear, random floats uniform in value (dense where models
 * actually evaluate, e.g. RoPE angles up to 32768). */
static void
sweep (ScalarFunc  f,
       RefFunc     ref,
       Metric      metric,
       float       lo,
       float       hi,
       gboolean    linear,
       Measure    *m)
{
  gint64 olo = ordinal (lo), ohi = ordinal (hi);
  gint64 step = MAX ((ohi - olo) / n_sweep, 1);
  g_autoptr(GRand) rand = g_rand_new_with_seed (0x5eed);

  for (gint64 o = olo; o <= ohi; o += step)
    measure_point (f, ref, metric, from_ordinal (o), m);
  measure_point (f, ref, metric, hi, m);
  for (guint i = 0; i < N_RANDOM; i++)
    {
      float x;

      if (linear && (i & 1))
        x = (float) g_rand_double_range (rand, lo, hi);
      else
        x = from_ordinal (olo + (gint64) (g_rand_double (rand) * (double) (ohi - olo)));
      measure_point (f, ref, metric, x, m);
    }
}

typedef struct
{
  const char *name;
  ScalarFunc  f;
  RefFunc     ref;
  Metric      metric;
  float       lo;
  float       hi;
  gboolean    linear;
  double      bound;   /* the documented bound (docs/VERIFICATION.md) */
} OracleCase;

static const OracleCase oracle_cases[] = {
  { "exp", dc_math_expf, ref_exp, METRIC_ULP, -0x1.9fe368p+6f, 0x1.62e430p+6f, TRUE, 1.5 },
  { "expm1", dc_math_expm1f, ref_expm1, METRIC_ULP, -20.0f, 0x1.62e430p+6f, TRUE, 2.0 },
  { "log", dc_math_logf, ref_log, METRIC_ULP, 0x1p-149f, 0x1.fffffep+127f, TRUE, 1.0 },
  { "tanh", dc_math_tanhf, ref_tanh, METRIC_ULP, -12.0f, 12.0f, TRUE, 3.5 },
  { "sigmoid", dc_math_sigmoidf, ref_sigmoid, METRIC_ULP, -110.0f, 110.0f, TRUE, 3.0 },
  { "sin", dc_math_sinf, ref_sin, METRIC_ULP, -0x1.fffffep+23f, 0x1.fffffep+23f, FALSE, 2.0 },
  { "sin-rope", dc_math_sinf, ref_sin, METRIC_ULP, 0.0f, 32768.0f, TRUE, 2.0 },
  { "cos", dc_math_cosf, ref_cos, METRIC_ULP, -0x1.fffffep+23f, 0x1.fffffep+23f, FALSE, 2.0 },
  { "cos-rope", dc_math_cosf, ref_cos, METRIC_ULP, 0.0f, 32768.0f, TRUE, 2.0 },
  { "rsqrt", dc_math_rsqrtf, ref_rsqrt, METRIC_ULP, 0x1p-149f, 0x1.fffffep+127f, FALSE, 2.0 },
  { "silu", dc_math_siluf, ref_silu, METRIC_ULP, -200.0f, 200.0f, TRUE, 3.5 },
  { "gelu", dc_math_gelu_tanhf, ref_gelu, METRIC_ULP, -20.0f, 200.0f, TRUE, 3.5 },
  { "silu-deriv", dc_math_silu_derivf, ref_silu_deriv, METRIC_ABS, -200.0f, 200.0f, TRUE, 6.0 },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, ref_gelu_deriv, METRIC_ABS, -30.0f, 30.0f, TRUE, 6.0 },
};

static void
test_oracle (gconstpointer data)
{
  const OracleCase *c = data;
  Measure m = { 0 };

  sweep (c->f, c->ref, c->metric, c->lo, c->hi, c->linear, &m);
  g_test_message ("%s: max error %.3f %s at x = %a (%.9g) over %u points in [%g, %g]; bound %.2f",
                  c->name, m.max_err, c->metric == METRIC_ULP ? "ulp" : "x 2^-24",
                  m.worst_x, m.worst_x, m.n_points, c->lo, c->hi, c->bound);
  if (g_getenv ("DC_MATH_REPORT") != NULL)
    g_printerr ("ORACLE %s %.3f %a %u\n", c->name, m.max_err, m.worst_x, m.n_points);
  g_assert_cmpfloat (m.max_err, <=, c->bound);
}

/* pow has two arguments: pairs from three families, each against MPFR. */
#define POW_BOUND 1.5
static double
pow_error (float x, float y)
{
  mpfr_t mx, my, out;
  double err;

  mpfr_inits2 (PREC, mx, my, out, NULL);
  mpfr_set_flt (mx, x, MPFR_RNDN);
  mpfr_set_flt (my, y, MPFR_RNDN);
  mpfr_pow (out, mx, my, MPFR_RNDN);
  err = error_of (dc_math_powf (x, y), out, METRIC_ULP);
  mpfr_clears (mx, my, out, NULL);
  return err;
}

static void
test_pow_oracle (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (0x90f);
  gint64 omax = ordinal (0x1.fffffep127f);
  double worst = 0.0, worst_rope = 0.0;
  float wx = 0, wy = 0;
  const float bases[] = { 10000.0f, 500000.0f, 1000000.0f, 80000.0f, 2.0f };
  guint n_points = 0;

  for (guint i = 0; i < n_sweep / 2; i++)
    {
      float x, y;
      double e;

      if (i & 1)
        {
          /* Any positive float, an exponent that keeps many results finite. */
          x = from_ordinal (1 + (gint64) (g_rand_double (rand) * (double) omax));
          y = (float) g_rand_double_range (rand, -4.0, 4.0);
        }
      else
        {
          /* Bases near 1 with large exponents: the product y · log x matters. */
          x = (float) g_rand_double_range (rand, 0.5, 2.0);
          y = (float) g_rand_double_range (rand, -1000.0, 1000.0);
        }
      e = pow_error (x, y);
      n_points++;
      if (e > worst)
        {
          worst = e;
          wx = x;
          wy = y;
        }
    }
  /* RoPE: base^(-2i/d), the exponent as the model computes it in float. */
  for (gsize b = 0; b < G_N_ELEMENTS (bases); b++)
    for (guint d = 16; d <= 256; d += 16)
      for (guint i = 0; i < d / 2; i++)
        {
          float y = -((float) (2 * i) / (float) d);

          worst_rope = MAX (worst_rope, pow_error (bases[b], y));
          n_points++;
        }
  g_test_message ("pow: max error %.3f ulp at %a^%a over %u pairs; RoPE inverse frequencies "
                  "%.3f ulp; bound %.1f", worst, wx, wy, n_points, worst_rope, POW_BOUND);
  if (g_getenv ("DC_MATH_REPORT") != NULL)
    g_printerr ("ORACLE pow %.3f %a^%a %u; rope %.3f\n", worst, wx, wy, n_points, worst_rope);
  g_assert_cmpfloat (worst, <=, POW_BOUND);
  g_assert_cmpfloat (worst_rope, <=, POW_BOUND);
}

/* Monotone functions stay monotone: every adjacent pair of floats in a
 * window around each branch point and threshold, plus an even walk in float
 * order over the whole domain, or every float with DC_MATH_EXHAUSTIVE=1.
 * (Each correctly rounded step is monotone, so
 * the formulas are built as chains of monotone steps where they can be.) */
typedef struct
{
  const char *name;
  ScalarFunc  f;
  float       lo, hi;
  gboolean    decreasing;
  float       points[6];   /* branch points; 0 ends the list */
} MonotoneCase;

static const MonotoneCase monotone_cases[] = {
  { "exp", dc_math_expf, -104.0f, 89.0f, FALSE, { -0x1.9fe36ap+6f, 0x1.62e42ep+6f, -87.0f, 0.34f } },
  { "expm1", dc_math_expm1f, -20.0f, 89.0f, FALSE, { -18.0f, 0.3466f, -0.3466f, 16.0f } },
  { "log", dc_math_logf, 0x1p-149f, 0x1.fffffep127f, FALSE, { 1.0f, 0x1.6a09e6p0f, 0x1p-126f } },
  { "tanh", dc_math_tanhf, -11.0f, 11.0f, FALSE, { 0x1p-12f, 0x1.19999ap-1f, 10.0f, -0x1.19999ap-1f } },
  { "sigmoid", dc_math_sigmoidf, -110.0f, 110.0f, FALSE, { 0x1p-149f, -20.0f, -88.0f, 17.0f } },
  { "rsqrt", dc_math_rsqrtf, 0x1p-149f, 0x1.fffffep127f, TRUE, { 1.0f, 0x1p-126f } },
  { "silu (x ≥ 0)", dc_math_siluf, 0.0f, 200.0f, FALSE, { 1.0f, 88.0f } },
  { "gelu (x ≥ 0)", dc_math_gelu_tanhf, 0.0f, 200.0f, FALSE, { 1.0f, 10.0f } },
};

static gboolean
ordered (const MonotoneCase *c, float a, float b)
{
  return c->decreasing ? b <= a : a <= b;
}

static void
test_monotone (void)
{
  guint failures = 0;

  for (gsize k = 0; k < G_N_ELEMENTS (monotone_cases); k++)
    {
      const MonotoneCase *c = &monotone_cases[k];
      gint64 lo = ordinal (c->lo), hi = ordinal (c->hi);
      /* DC_MATH_EXHAUSTIVE=1 walks every float (minutes, by hand). */
      gint64 step = g_getenv ("DC_MATH_EXHAUSTIVE") != NULL ? 1 : MAX ((hi - lo) / 200000, 1);
      float prev = c->f (c->lo);

      for (gint64 o = lo + step; o <= hi; o += step)
        {
          float y = c->f (from_ordinal (o));

          if (!ordered (c, prev, y))
            {
              g_test_message ("%s decreases at %a", c->name, from_ordinal (o));
              failures++;
            }
          prev = y;
        }
      for (int p = 0; p < 6 && c->points[p] != 0.0f; p++)
        {
          gint64 mid = ordinal (c->points[p]);

          prev = c->f (from_ordinal (mid - 20000));
          for (gint64 o = mid - 19999; o <= mid + 20000; o++)
            {
              float y = c->f (from_ordinal (o));

              if (!ordered (c, prev, y))
                {
                  g_test_message ("%s not monotone at %a", c->name, from_ordinal (o));
                  failures++;
                }
              prev = y;
            }
        }
    }
  g_assert_cmpuint (failures, ==, 0);
}

/* ---- special values, bit for bit ---- */

#define QNAN_PAYLOAD 0x7fc12345u

typedef struct
{
  const char *name;
  ScalarFunc  f;
  guint32     x;
  guint32     expected;   /* ANY_NAN: any NaN will do */
} SpecialCase;

#define ANY_NAN 0xffffffffu
#define PINF 0x7f800000u
#define NINF 0xff800000u
#define PZERO 0x00000000u
#define NZERO 0x80000000u
#define ONE 0x3f800000u
#define MONE 0xbf800000u
#define HALF 0x3f000000u

static const SpecialCase special_cases[] = {
  { "exp", dc_math_expf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "exp", dc_math_expf, PINF, PINF },
  { "exp", dc_math_expf, NINF, PZERO },
  { "exp", dc_math_expf, PZERO, ONE },
  { "exp", dc_math_expf, NZERO, ONE },
  { "exp", dc_math_expf, 0x42b17217u /* 0x1.62e42ep6 */, 0x7f7fff84u },
  { "exp", dc_math_expf, 0x42b17218u /* 0x1.62e430p6 */, PINF },
  { "exp", dc_math_expf, 0xc2cff1b5u /* -0x1.9fe36ap6 */, PZERO },
  { "exp", dc_math_expf, 0xc2ce8ed0u /* -103.279 = log 2^-149 */, 0x00000001u },
  { "expm1", dc_math_expm1f, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "expm1", dc_math_expm1f, PZERO, PZERO },
  { "expm1", dc_math_expm1f, NZERO, NZERO },
  { "expm1", dc_math_expm1f, PINF, PINF },
  { "expm1", dc_math_expm1f, NINF, MONE },
  { "expm1", dc_math_expm1f, 0xc1940000u /* -18.5 */, MONE },
  { "expm1", dc_math_expm1f, 0x00000001u, 0x00000001u },
  { "log", dc_math_logf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "log", dc_math_logf, PZERO, NINF },
  { "log", dc_math_logf, NZERO, NINF },
  { "log", dc_math_logf, MONE, ANY_NAN },
  { "log", dc_math_logf, NINF, ANY_NAN },
  { "log", dc_math_logf, 0x80000001u, ANY_NAN },
  { "log", dc_math_logf, PINF, PINF },
  { "log", dc_math_logf, ONE, PZERO },
  { "log", dc_math_logf, 0x00000001u, 0xc2ce8ed0u /* log 2^-149 = -103.279 */ },
  { "tanh", dc_math_tanhf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "tanh", dc_math_tanhf, PZERO, PZERO },
  { "tanh", dc_math_tanhf, NZERO, NZERO },
  { "tanh", dc_math_tanhf, PINF, ONE },
  { "tanh", dc_math_tanhf, NINF, MONE },
  { "tanh", dc_math_tanhf, 0x41200000u /* 10 */, ONE },
  { "tanh", dc_math_tanhf, 0x80000001u, 0x80000001u },
  { "sigmoid", dc_math_sigmoidf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "sigmoid", dc_math_sigmoidf, PINF, ONE },
  { "sigmoid", dc_math_sigmoidf, NINF, PZERO },
  { "sigmoid", dc_math_sigmoidf, PZERO, HALF },
  { "sigmoid", dc_math_sigmoidf, NZERO, HALF },
  { "sin", dc_math_sinf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "sin", dc_math_sinf, PZERO, PZERO },
  { "sin", dc_math_sinf, NZERO, NZERO },
  { "sin", dc_math_sinf, PINF, ANY_NAN },
  { "sin", dc_math_sinf, NINF, ANY_NAN },
  { "sin", dc_math_sinf, 0x4b800000u /* 2^24 */, ANY_NAN },
  { "sin", dc_math_sinf, 0x00000001u, 0x00000001u },
  { "cos", dc_math_cosf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "cos", dc_math_cosf, PZERO, ONE },
  { "cos", dc_math_cosf, NZERO, ONE },
  { "cos", dc_math_cosf, PINF, ANY_NAN },
  { "cos", dc_math_cosf, 0xcb800000u /* -2^24 */, ANY_NAN },
  { "rsqrt", dc_math_rsqrtf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "rsqrt", dc_math_rsqrtf, PZERO, PINF },
  { "rsqrt", dc_math_rsqrtf, NZERO, NINF },
  { "rsqrt", dc_math_rsqrtf, MONE, ANY_NAN },
  { "rsqrt", dc_math_rsqrtf, PINF, PZERO },
  { "rsqrt", dc_math_rsqrtf, 0x3e800000u /* 0.25 */, 0x40000000u },
  { "silu", dc_math_siluf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "silu", dc_math_siluf, PINF, PINF },
  { "silu", dc_math_siluf, NINF, NZERO },
  { "silu", dc_math_siluf, PZERO, PZERO },
  { "silu", dc_math_siluf, NZERO, NZERO },
  { "silu", dc_math_siluf, 0xc3480000u /* -200 */, NZERO },
  { "silu-deriv", dc_math_silu_derivf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "silu-deriv", dc_math_silu_derivf, PINF, ONE },
  { "silu-deriv", dc_math_silu_derivf, NINF, PZERO },
  { "silu-deriv", dc_math_silu_derivf, PZERO, HALF },
  { "gelu", dc_math_gelu_tanhf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "gelu", dc_math_gelu_tanhf, PINF, PINF },
  { "gelu", dc_math_gelu_tanhf, NINF, NZERO },
  { "gelu", dc_math_gelu_tanhf, PZERO, PZERO },
  { "gelu", dc_math_gelu_tanhf, NZERO, NZERO },
  { "gelu", dc_math_gelu_tanhf, 0xe0ad78ecu /* -1e20 */, NZERO },
  { "gelu", dc_math_gelu_tanhf, 0x60ad78ecu /* 1e20 */, 0x60ad78ecu },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, PINF, ONE },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, NINF, PZERO },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, PZERO, HALF },
  { "relu", dc_math_reluf, QNAN_PAYLOAD, QNAN_PAYLOAD },
  { "relu", dc_math_reluf, NZERO, PZERO },
  { "relu", dc_math_reluf, NINF, PZERO },
  { "relu", dc_math_reluf, PINF, PINF },
  { "relu", dc_math_reluf, 0x40400000u /* 3 */, 0x40400000u },
  { "relu", dc_math_reluf, 0xc0400000u /* -3 */, PZERO },
};

static void
test_special_values (void)
{
  guint failures = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (special_cases); i++)
    {
      const SpecialCase *c = &special_cases[i];
      guint32 got = bits_of (c->f (float_of (c->x)));
      gboolean ok = c->expected == ANY_NAN ? isnan (float_of (got)) : got == c->expected;

      if (!ok)
        {
          g_test_message ("%s(%a [0x%08x]) = %a [0x%08x], expected 0x%08x", c->name,
                          float_of (c->x), c->x, float_of (got), got, c->expected);
          failures++;
        }
    }
  g_assert_cmpuint (failures, ==, 0);
}

static void
test_pow_special (void)
{
  const struct { float x, y; guint32 expected; } cases[] = {
    { NAN, 0.0f, ONE }, { 1.0f, NAN, ONE }, { 1.0f, INFINITY, ONE }, { 5.0f, -0.0f, ONE },
    { 0.0f, 3.0f, PZERO }, { -0.0f, 3.0f, PZERO }, { 0.0f, -3.0f, PINF },
    { INFINITY, 2.0f, PINF }, { INFINITY, -2.0f, PZERO },
    { 2.0f, INFINITY, PINF }, { 0.5f, INFINITY, PZERO }, { 2.0f, -INFINITY, PZERO },
    { 0.5f, -INFINITY, PINF }, { -2.0f, 2.0f, ANY_NAN }, { -INFINITY, 2.0f, ANY_NAN },
    { 10.0f, 39.0f, PINF }, { 10.0f, -46.0f, PZERO }, { 2.0f, 10.0f, 0x44800000u },
    { 4.0f, 0.5f, 0x40000000u }, { 2.0f, -149.0f, 0x00000001u }, { 2.0f, 127.0f, 0x7f000000u },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      guint32 got = bits_of (dc_math_powf (cases[i].x, cases[i].y));

      if (cases[i].expected == ANY_NAN)
        g_assert_true (isnan (float_of (got)));
      else
        g_assert_cmphex (got, ==, cases[i].expected);
    }
  /* A NaN argument comes back as itself. */
  g_assert_cmphex (bits_of (dc_math_powf (float_of (0x7fc12345u), 2.0f)), ==, 0x7fc12345u);
  g_assert_cmphex (bits_of (dc_math_powf (2.0f, float_of (0x7fc12345u))), ==, 0x7fc12345u);
}

/* sincos gives exactly what sin and cos give, NaN included. */
static void
test_sincos_agrees (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);

  for (guint i = 0; i < 20000; i++)
    {
      float x = (float) g_rand_double_range (rand, -70000.0, 70000.0);
      float s, c;

      dc_math_sincosf (x, &s, &c);
      g_assert_cmphex (bits_of (s), ==, bits_of (dc_math_sinf (x)));
      g_assert_cmphex (bits_of (c), ==, bits_of (dc_math_cosf (x)));
    }
}

/* ---- reproducibility: the exact rule, pinned ---- */

static guint64
fnv1a (guint64 h, guint32 v)
{
  for (int i = 0; i < 4; i++)
    {
      h ^= (v >> (8 * i)) & 0xff;
      h *= G_GUINT64_CONSTANT (0x100000001b3);
    }
  return h;
}

#define FNV_SEED G_GUINT64_CONSTANT (0xcbf29ce484222325)

typedef struct
{
  const char *name;
  ScalarFunc  f;
  guint64     expected;
} HashCase;

/* Recorded when the rule was written; any change of an algorithm, a
 * constant or an operation order changes them (and needs a new entry in
 * docs/VERIFICATION.md, since replicas would disagree across versions). */
static const HashCase hash_cases[] = {
  { "exp", dc_math_expf, G_GUINT64_CONSTANT (0xd0a7fcfa48b9d9ad) },
  { "expm1", dc_math_expm1f, G_GUINT64_CONSTANT (0xc17917c1d423450b) },
  { "log", dc_math_logf, G_GUINT64_CONSTANT (0x24e9cef9a4149724) },
  { "tanh", dc_math_tanhf, G_GUINT64_CONSTANT (0x1bf1b54aec8be5b9) },
  { "sigmoid", dc_math_sigmoidf, G_GUINT64_CONSTANT (0xb55272be202f3832) },
  { "sin", dc_math_sinf, G_GUINT64_CONSTANT (0xea4baaa9b5be6e14) },
  { "cos", dc_math_cosf, G_GUINT64_CONSTANT (0x65e6409d8f313d0f) },
  { "rsqrt", dc_math_rsqrtf, G_GUINT64_CONSTANT (0xe0e55ea32159f6c4) },
  { "silu", dc_math_siluf, G_GUINT64_CONSTANT (0xa843249ab8c3db21) },
  { "silu-deriv", dc_math_silu_derivf, G_GUINT64_CONSTANT (0x4a4e0c36607f209e) },
  { "gelu", dc_math_gelu_tanhf, G_GUINT64_CONSTANT (0x456bd007110c8bae) },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, G_GUINT64_CONSTANT (0x69250419ee8d1ca7) },
  { "relu", dc_math_reluf, G_GUINT64_CONSTANT (0xab0e360dd19ceb5d) },
};

/* 8192 inputs evenly in float order over [-200, 200], 8192 over all
 * finite floats, and the special values. */
static guint64
hash_function (ScalarFunc f)
{
  guint64 h = FNV_SEED;
  gint64 lo = ordinal (-200.0f), hi = ordinal (200.0f);
  gint64 flo = ordinal (-0x1.fffffep127f), fhi = ordinal (0x1.fffffep127f);

  for (gint64 i = 0; i < 8192; i++)
    h = fnv1a (h, bits_of (f (from_ordinal (lo + i * ((hi - lo) / 8192)))));
  for (gint64 i = 0; i < 8192; i++)
    h = fnv1a (h, bits_of (f (from_ordinal (flo + i * ((fhi - flo) / 8192)))));
  for (gsize i = 0; i < G_N_ELEMENTS (special_cases); i++)
    h = fnv1a (h, bits_of (f (float_of (special_cases[i].x))));
  return h;
}

static void
test_hashes (void)
{
  guint failures = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (hash_cases); i++)
    {
      guint64 h = hash_function (hash_cases[i].f);

      if (h != hash_cases[i].expected)
        {
          g_test_message ("%s: hash 0x%016" G_GINT64_MODIFIER "x, recorded 0x%016"
                          G_GINT64_MODIFIER "x", hash_cases[i].name, h, hash_cases[i].expected);
          failures++;
        }
      if (g_getenv ("DC_MATH_REPORT") != NULL)
        g_printerr ("HASH %s 0x%016" G_GINT64_MODIFIER "x\n", hash_cases[i].name, h);
    }
  g_assert_cmpuint (failures, ==, 0);
}

/* ---- reductions and vector operations ---- */

/* The tree is the documented one: blocks of up to 8 left to right, split at
 * the largest power of two below n. 2^24 followed by ones shows the order:
 * inside the first block every 1 is lost (2^24 + 1 rounds to 2^24), the
 * other blocks keep theirs. Left-to-right summation would give 2^24. */
static void
test_sum_order (void)
{
  float x[20];

  x[0] = 0x1p24f;
  for (int i = 1; i < 20; i++)
    x[i] = 1.0f;
  /* ((2^24 + 0·1) + (8·1)) + (4·1) */
  g_assert_cmpfloat (dc_math_sum (x, 20), ==, 0x1p24f + 12.0f);
  g_assert_cmpfloat (dc_math_sum (x, 8), ==, 0x1p24f);
  g_assert_cmpfloat (dc_math_sum (x, 9), ==, 0x1p24f);      /* (2^24) + 1 */
  g_assert_cmpfloat (dc_math_sum (x + 1, 19), ==, 19.0f);
  g_assert_cmpfloat (dc_math_sum (x, 0), ==, 0.0f);
  g_assert_cmpfloat (dc_math_dot (x + 1, x + 1, 19), ==, 19.0f);
  g_assert_cmpfloat (dc_math_max (x, 20), ==, 0x1p24f);
}

/* A pinned hash over large reductions and every vector operation. */
static void
fill_uniform (GRand *rand, float *x, gsize n, double lo, double hi)
{
  for (gsize i = 0; i < n; i++)
    x[i] = (float) g_rand_double_range (rand, lo, hi);
}

/* Double references. */
static void
softmax_ref (const float *x, double *y, gsize n)
{
  double m = -INFINITY, s = 0.0;

  for (gsize i = 0; i < n; i++)
    m = MAX (m, (double) x[i]);
  for (gsize i = 0; i < n; i++)
    s += (y[i] = exp ((double) x[i] - m));
  for (gsize i = 0; i < n; i++)
    y[i] /= s;
}

static const gsize row_sizes[] = { 1, 2, 7, 8, 9, 100, 768, 1000, 50257 };

/* Softmax: each probability within SOFTMAX_BOUND ulps of the double
 * reference (only the exponential, the sum and the division round), and the
 * probabilities sum to 1 within 2^-22. */
#define SOFTMAX_BOUND 4.0
static void
test_softmax (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (11);
  double worst = 0.0, worst_sum = 0.0;

  for (gsize t = 0; t < G_N_ELEMENTS (row_sizes); t++)
    for (int scale = 1; scale <= 40; scale *= 4)
      {
        gsize n = row_sizes[t];
        g_autofree float *x = g_new (float, n);
        g_autofree float *y = g_new (float, n);
        g_autofree double *ref = g_new (double, n);
        double total = 0.0;

        fill_uniform (rand, x, n, -scale, scale);
        dc_math_softmax (x, y, n);
        softmax_ref (x, ref, n);
        for (gsize i = 0; i < n; i++)
          {
            int e;
            double ulp;

            frexp (ref[i], &e);
            ulp = ldexp (1.0, MAX (e - 24, -149));
            worst = MAX (worst, fabs (y[i] - ref[i]) / ulp);
            total += y[i];
          }
        worst_sum = MAX (worst_sum, fabs (total - 1.0));
        /* In place gives the same bits. */
        dc_math_softmax (x, x, n);
        g_assert_cmpmem (x, n * sizeof (float), y, n * sizeof (float));
      }
  g_test_message ("softmax: max error %.3f ulp (bound %.1f), max |sum(y) - 1| = %.3g (bound 2^-22)",
                  worst, SOFTMAX_BOUND, worst_sum);
  g_assert_cmpfloat (worst, <=, SOFTMAX_BOUND);
  g_assert_cmpfloat (worst_sum, <=, 0x1p-22);
}

static void
test_softmax_special (void)
{
  float x[4] = { 1.0f, -INFINITY, 2.0f, -INFINITY };
  float y[4];

  /* -inf is a mask: exactly zero, the rest still a distribution. */
  dc_math_softmax (x, y, 4);
  g_assert_cmpfloat (y[1], ==, 0.0f);
  g_assert_cmpfloat (y[3], ==, 0.0f);
  g_assert_cmpfloat (fabs (y[0] + y[2] - 1.0), <=, 0x1p-23);
  dc_math_log_softmax (x, y, 4);
  g_assert_true (isinf (y[1]) && y[1] < 0);
  g_assert_true (isfinite (y[0]) && isfinite (y[2]));

  /* NaN, +inf and an all-masked row give all NaN. */
  x[1] = NAN;
  dc_math_softmax (x, y, 4);
  for (int i = 0; i < 4; i++)
    g_assert_true (isnan (y[i]));
  x[1] = INFINITY;
  dc_math_softmax (x, y, 4);
  for (int i = 0; i < 4; i++)
    g_assert_true (isnan (y[i]));
  dc_math_log_softmax (x, y, 4);
  for (int i = 0; i < 4; i++)
    g_assert_true (isnan (y[i]));
  for (int i = 0; i < 4; i++)
    x[i] = -INFINITY;
  dc_math_softmax (x, y, 4);
  for (int i = 0; i < 4; i++)
    g_assert_true (isnan (y[i]));

  /* One element: probability exactly 1, log-probability exactly 0. */
  x[0] = 123.0f;
  dc_math_softmax (x, y, 1);
  g_assert_cmpfloat (y[0], ==, 1.0f);
  dc_math_log_softmax (x, y, 1);
  g_assert_cmpfloat (y[0], ==, 0.0f);
}

/* Log-softmax: within LOG_SOFTMAX_BOUND ulps of |y| plus ulps of the
 * log-sum-exp (the one subtraction of two rounded values). */
#define LOG_SOFTMAX_BOUND 3.0
static void
test_log_softmax (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (12);
  double worst = 0.0;

  for (gsize t = 0; t < G_N_ELEMENTS (row_sizes); t++)
    {
      gsize n = row_sizes[t];
      g_autofree float *x = g_new (float, n);
      g_autofree float *y = g_new (float, n);
      g_autofree float *y2 = g_new (float, n);
      double m = -INFINITY, s = 0.0, lse;

      fill_uniform (rand, x, n, -30.0, 30.0);
      dc_math_log_softmax (x, y, n);
      for (gsize i = 0; i < n; i++)
        m = MAX (m, (double) x[i]);
      for (gsize i = 0; i < n; i++)
        s += exp ((double) x[i] - m);
      lse = log (s);
      for (gsize i = 0; i < n; i++)
        {
          double ref = ((double) x[i] - m) - lse;
          /* The scale: one ulp of the result plus one of the log-sum-exp. */
          double unit = ldexp (1.0, ilogb (MAX (fabs (ref), 0x1p-126)) - 23)
                        + ldexp (1.0, ilogb (MAX (lse, 0x1p-126)) - 23);

          worst = MAX (worst, fabs (y[i] - ref) / unit);
        }
      memcpy (y2, x, n * sizeof (float));
      dc_math_log_softmax (y2, y2, n);
      g_assert_cmpmem (y2, n * sizeof (float), y, n * sizeof (float));
    }
  g_test_message ("log-softmax: max error %.3f units (bound %.1f)", worst, LOG_SOFTMAX_BOUND);
  g_assert_cmpfloat (worst, <=, LOG_SOFTMAX_BOUND);
}

/* Softmax and log-softmax backward against double formulas, and the double
 * formulas against central finite differences of the double forward. */
#define BACKWARD_BOUND 4.0
static void
test_softmax_backward (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (13);
  const gsize n = 37;
  float x[37], y[37], ly[37], dy[37], dx[37], ldx[37];
  double p[37], d = 0.0, sdy = 0.0, adot = 0.0, asum = 0.0, worst = 0.0, worst_l = 0.0;
  double worst_fd = 0.0;

  fill_uniform (rand, x, n, -4.0, 4.0);
  fill_uniform (rand, dy, n, -1.0, 1.0);
  dc_math_softmax (x, y, n);
  dc_math_log_softmax (x, ly, n);
  dc_math_softmax_backward (y, dy, dx, n);
  dc_math_log_softmax_backward (ly, dy, ldx, n);
  for (gsize i = 0; i < n; i++)
    {
      d += (double) y[i] * dy[i];
      adot += fabs ((double) y[i] * dy[i]);
      sdy += dy[i];
      asum += fabs (dy[i]);
    }
  for (gsize i = 0; i < n; i++)
    {
      double ref = y[i] * (dy[i] - d);
      double lref = dy[i] - exp ((double) ly[i]) * sdy;
      double unit = 0x1p-24 * fabs (y[i]) * (fabs (dy[i]) + adot);
      double lunit = 0x1p-24 * (fabs (dy[i]) + exp ((double) ly[i]) * asum);

      worst = MAX (worst, fabs (dx[i] - ref) / unit);
      worst_l = MAX (worst_l, fabs (ldx[i] - lref) / lunit);
    }

  /* The formula itself: d/dx_j Σ dy_i softmax(x)_i by central differences. */
  softmax_ref (x, p, n);
  d = 0.0;
  for (gsize i = 0; i < n; i++)
    d += p[i] * dy[i];
  for (gsize j = 0; j < n; j++)
    {
      const double h = 1e-6;
      float xp[37];
      double pp[37], pm[37], lp = 0.0, lm = 0.0, fd;

      /* Differences of the double forward on doubles, not floats. */
      for (gsize i = 0; i < n; i++)
        xp[i] = x[i];
      {
        double m = -INFINITY, sp = 0.0, sm = 0.0;
        double xd[37];

        for (gsize i = 0; i < n; i++)
          xd[i] = x[i];
        for (gsize i = 0; i < n; i++)
          m = MAX (m, xd[i]);
        for (gsize i = 0; i < n; i++)
          {
            double e = exp (xd[i] - m);
            double ep = exp (xd[i] + (i == j ? h : 0.0) - m);
            double em = exp (xd[i] - (i == j ? h : 0.0) - m);

            (void) e;
            pp[i] = ep;
            pm[i] = em;
            sp += ep;
            sm += em;
          }
        for (gsize i = 0; i < n; i++)
          {
            lp += dy[i] * pp[i] / sp;
            lm += dy[i] * pm[i] / sm;
          }
      }
      (void) xp;
      fd = (lp - lm) / (2 * h);
      worst_fd = MAX (worst_fd, fabs (fd - p[j] * (dy[j] - d)));
    }

  g_test_message ("softmax backward: %.3f units (bound %.1f); log-softmax backward: %.3f units; "
                  "formula vs finite differences: %.3g", worst, BACKWARD_BOUND, worst_l, worst_fd);
  g_assert_cmpfloat (worst, <=, BACKWARD_BOUND);
  g_assert_cmpfloat (worst_l, <=, BACKWARD_BOUND);
  g_assert_cmpfloat (worst_fd, <=, 1e-8);
}

/* Layer norm and RMS norm in double. */
static void
layer_norm_ref (const float *x, const float *w, const float *b, double eps, gsize n,
                double *y, double *mean_out, double *rstd_out)
{
  double mean = 0.0, var = 0.0, rstd;

  for (gsize i = 0; i < n; i++)
    mean += x[i];
  mean /= n;
  for (gsize i = 0; i < n; i++)
    var += (x[i] - mean) * (x[i] - mean);
  var /= n;
  rstd = 1.0 / sqrt (var + eps);
  for (gsize i = 0; i < n; i++)
    y[i] = (x[i] - mean) * rstd * w[i] + b[i];
  *mean_out = mean;
  *rstd_out = rstd;
}

static void
layer_norm_backward_ref (const float *x, const float *w, double mean, double rstd,
                         const float *dy, gsize n, double *dx, double *dw, double *db)
{
  double gm = 0.0, gnm = 0.0;

  for (gsize i = 0; i < n; i++)
    {
      double norm = (x[i] - mean) * rstd;

      gm += (double) w[i] * dy[i];
      gnm += (double) w[i] * dy[i] * norm;
    }
  gm /= n;
  gnm /= n;
  for (gsize i = 0; i < n; i++)
    {
      double norm = (x[i] - mean) * rstd;

      dx[i] = ((double) w[i] * dy[i] - gm - norm * gnm) * rstd;
      dw[i] = dy[i] * norm;
      db[i] = dy[i];
    }
}

#define NORM_BOUND 8.0
#define NORM_BACKWARD_BOUND 8.0
static void
test_layer_norm (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (14);
  const gsize sizes[] = { 1, 5, 64, 768, 1600 };
  double worst = 0.0, worst_b = 0.0;

  for (gsize t = 0; t < G_N_ELEMENTS (sizes); t++)
    {
      gsize n = sizes[t];
      g_autofree float *x = g_new (float, n);
      g_autofree float *w = g_new (float, n);
      g_autofree float *b = g_new (float, n);
      g_autofree float *y = g_new (float, n);
      g_autofree float *dy = g_new (float, n);
      g_autofree float *dx = g_new (float, n);
      g_autofree float *dw = g_new0 (float, n);
      g_autofree float *db = g_new0 (float, n);
      g_autofree double *ry = g_new (double, n);
      g_autofree double *rdx = g_new (double, n);
      g_autofree double *rdw = g_new (double, n);
      g_autofree double *rdb = g_new (double, n);
      double rmean, rrstd, gscale = 0.0;
      float mean, rstd;

      fill_uniform (rand, x, n, -3.0, 5.0);
      fill_uniform (rand, w, n, 0.5, 1.5);
      fill_uniform (rand, b, n, -0.5, 0.5);
      fill_uniform (rand, dy, n, -1.0, 1.0);
      dc_math_layer_norm (x, w, b, DC_MATH_GPT2_LN_EPS, y, &mean, &rstd, n);
      layer_norm_ref (x, w, b, DC_MATH_GPT2_LN_EPS, n, ry, &rmean, &rrstd);
      for (gsize i = 0; i < n; i++)
        {
          /* Scale: the terms that meet in y. */
          double unit = 0x1p-24 * (fabs (w[i]) * (fabs (x[i]) + fabs (rmean)) * rrstd
                                   + fabs (b[i]));

          worst = MAX (worst, fabs (y[i] - ry[i]) / unit);
        }

      dc_math_layer_norm_backward (x, w, mean, rstd, dy, dx, dw, db, n);
      layer_norm_backward_ref (x, w, rmean, rrstd, dy, n, rdx, rdw, rdb);
      for (gsize i = 0; i < n; i++)
        gscale = MAX (gscale, fabs ((double) w[i] * dy[i]));
      for (gsize i = 0; i < n; i++)
        {
          double unit = 0x1p-24 * gscale * rrstd * (1.0 + fabs ((x[i] - rmean) * rrstd));
          double wunit = 0x1p-24 * fabs (dy[i]) * (1.0 + fabs ((x[i] - rmean) * rrstd));

          worst_b = MAX (worst_b, fabs (dx[i] - rdx[i]) / unit);
          worst_b = MAX (worst_b, fabs (dw[i] - rdw[i]) / wunit);
          g_assert_cmpfloat (db[i], ==, dy[i]);
        }

      /* In place forward gives the same bits. */
      dc_math_layer_norm (x, w, b, DC_MATH_GPT2_LN_EPS, x, NULL, NULL, n);
      g_assert_cmpmem (x, n * sizeof (float), y, n * sizeof (float));
    }
  g_test_message ("layer norm: forward %.3f units (bound %.0f), backward %.3f units (bound %.0f)",
                  worst, NORM_BOUND, worst_b, NORM_BACKWARD_BOUND);
  g_assert_cmpfloat (worst, <=, NORM_BOUND);
  g_assert_cmpfloat (worst_b, <=, NORM_BACKWARD_BOUND);
}

/* Non-finite rows and overflowing variances give whole NaN rows. */
static void
test_norm_special (void)
{
  float x[5] = { 1.0f, 2.0f, 3.0f, 4.0f, 5.0f }, w[5] = { 1, 1, 1, 1, 1 }, b[5] = { 0 };
  float y[5], mean, rstd;
  const float bad[] = { NAN, INFINITY, -INFINITY, 1e30f };

  for (gsize k = 0; k < G_N_ELEMENTS (bad); k++)
    {
      x[2] = bad[k];
      dc_math_layer_norm (x, w, b, 1e-5f, y, &mean, &rstd, 5);
      g_assert_true (isnan (mean) && isnan (rstd));
      for (int i = 0; i < 5; i++)
        g_assert_true (isnan (y[i]));
      dc_math_rms_norm (x, w, 1e-5f, y, &rstd, 5);
      g_assert_true (isnan (rstd));
      for (int i = 0; i < 5; i++)
        g_assert_true (isnan (y[i]));
    }
  /* A constant row: variance 0, y = bias exactly. */
  for (int i = 0; i < 5; i++)
    x[i] = 7.0f;
  b[3] = 0.25f;
  dc_math_layer_norm (x, w, b, 1e-5f, y, &mean, &rstd, 5);
  g_assert_cmpfloat (mean, ==, 7.0f);
  for (int i = 0; i < 5; i++)
    g_assert_cmpfloat (y[i], ==, b[i]);
}

/* The layer norm backward formula against central differences of the double
 * forward: L = Σ dy_i y_i. */
static void
test_layer_norm_finite_differences (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (15);
  const gsize n = 16;
  float x[16], w[16], b[16], dy[16];
  double y[16], dx[16], dw[16], db[16], mean, rstd, worst = 0.0;

  fill_uniform (rand, x, n, -2.0, 2.0);
  fill_uniform (rand, w, n, 0.5, 1.5);
  fill_uniform (rand, b, n, -0.5, 0.5);
  fill_uniform (rand, dy, n, -1.0, 1.0);
  layer_norm_ref (x, w, b, 1e-5, n, y, &mean, &rstd);
  layer_norm_backward_ref (x, w, mean, rstd, dy, n, dx, dw, db);
  for (gsize j = 0; j < n; j++)
    {
      const double h = 1e-4;
      double lp = 0.0, lm = 0.0, m0 = 0.0, v0 = 0.0, xs[16];

      for (int sgn = -1; sgn <= 1; sgn += 2)
        {
          double l = 0.0;

          m0 = v0 = 0.0;
          for (gsize i = 0; i < n; i++)
            xs[i] = x[i] + (i == j ? sgn * h : 0.0);
          for (gsize i = 0; i < n; i++)
            m0 += xs[i];
          m0 /= n;
          for (gsize i = 0; i < n; i++)
            v0 += (xs[i] - m0) * (xs[i] - m0);
          v0 /= n;
          for (gsize i = 0; i < n; i++)
            l += dy[i] * ((xs[i] - m0) / sqrt (v0 + 1e-5) * w[i] + b[i]);
          if (sgn < 0)
            lm = l;
          else
            lp = l;
        }
      worst = MAX (worst, fabs ((lp - lm) / (2 * h) - dx[j]));
    }
  g_test_message ("layer norm backward formula vs finite differences: %.3g", worst);
  g_assert_cmpfloat (worst, <=, 1e-6);
}

static void
test_rms_norm (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (16);
  const gsize sizes[] = { 1, 5, 64, 2048, 4096 };
  double worst = 0.0, worst_b = 0.0, worst_fd = 0.0;

  for (gsize t = 0; t < G_N_ELEMENTS (sizes); t++)
    {
      gsize n = sizes[t];
      g_autofree float *x = g_new (float, n);
      g_autofree float *w = g_new (float, n);
      g_autofree float *y = g_new (float, n);
      g_autofree float *dy = g_new (float, n);
      g_autofree float *dx = g_new (float, n);
      g_autofree float *dw = g_new0 (float, n);
      double ms = 0.0, rstd, gnm = 0.0, gscale = 0.0;
      float frstd;

      fill_uniform (rand, x, n, -3.0, 3.0);
      fill_uniform (rand, w, n, 0.5, 1.5);
      fill_uniform (rand, dy, n, -1.0, 1.0);
      dc_math_rms_norm (x, w, 1e-6f, y, &frstd, n);
      for (gsize i = 0; i < n; i++)
        ms += (double) x[i] * x[i];
      rstd = 1.0 / sqrt (ms / n + (double) 1e-6f);
      for (gsize i = 0; i < n; i++)
        worst = MAX (worst, fabs (y[i] - x[i] * rstd * w[i])
                            / (0x1p-24 * fabs (x[i] * rstd * w[i])));

      dc_math_rms_norm_backward (x, w, frstd, dy, dx, dw, n);
      for (gsize i = 0; i < n; i++)
        {
          gnm += (double) w[i] * dy[i] * x[i] * rstd;
          gscale = MAX (gscale, fabs ((double) w[i] * dy[i]));
        }
      gnm /= n;
      for (gsize i = 0; i < n; i++)
        {
          double norm = x[i] * rstd;
          double ref = ((double) w[i] * dy[i] - norm * gnm) * rstd;
          double unit = 0x1p-24 * gscale * rstd * (1.0 + fabs (norm));

          worst_b = MAX (worst_b, fabs (dx[i] - ref) / unit);
          worst_b = MAX (worst_b, fabs (dw[i] - dy[i] * norm)
                                  / (0x1p-24 * fabs (dy[i]) * (1.0 + fabs (norm))));
        }

      /* The formula against central differences of the double forward. */
      if (n <= 64)
        for (gsize j = 0; j < n; j++)
          {
            const double h = 1e-4;
            double l[2];

            for (int s = 0; s < 2; s++)
              {
                double m2 = 0.0, r;

                l[s] = 0.0;
                for (gsize i = 0; i < n; i++)
                  {
                    double xi = x[i] + (i == j ? (s ? h : -h) : 0.0);
                    m2 += xi * xi;
                  }
                r = 1.0 / sqrt (m2 / n + (double) 1e-6f);
                for (gsize i = 0; i < n; i++)
                  l[s] += dy[i] * (x[i] + (i == j ? (s ? h : -h) : 0.0)) * r * w[i];
              }
            worst_fd = MAX (worst_fd, fabs ((l[1] - l[0]) / (2 * h)
                                            - ((double) w[j] * dy[j] - x[j] * rstd * gnm) * rstd));
          }
    }
  g_test_message ("rms norm: forward %.3f ulp (bound %.0f), backward %.3f units (bound %.0f), "
                  "formula vs finite differences %.3g", worst, NORM_BOUND, worst_b,
                  NORM_BACKWARD_BOUND, worst_fd);
  g_assert_cmpfloat (worst, <=, NORM_BOUND);
  g_assert_cmpfloat (worst_b, <=, NORM_BACKWARD_BOUND);
  g_assert_cmpfloat (worst_fd, <=, 1e-6);
}

/* Special values for the fused bias/ReLU test: NaNs with payloads, ±0,
 * ±inf, subnormals, the largest finite values. */
static const guint32 relu_specials[] = {
  0x7fc01234u, 0xffc00001u, 0x80000000u, 0x00000000u, 0xff800000u, 0x7f800000u,
  0x00000001u, 0x80000001u, 0x40400000u, 0xc0400000u, 0x7f7fffffu, 0xff7fffffu,
};

typedef struct
{
  float       *y;
  const float *b;
  float       *act;
  gsize        n;
} BiasReluJob;

static void
bias_relu_rows (gsize r0, gsize r1, guint worker, gpointer data)
{
  BiasReluJob *job = data;

  for (gsize r = r0; r < r1; r++)
    dc_math_bias_relu (job->y + r * job->n, job->b,
                       job->act != NULL ? job->act + r * job->n : NULL, job->n);
}

/* dc_math_bias_relu (the model's fused bias and ReLU pass) equals the two
 * unfused passes (y + b rounded once, then dc_math_reluf) bit for bit, rows
 * run on the pool at 1, 2, 3, 7 and 16 threads, specials included in the
 * vector lanes and in the tail (n = 67 = 16 × 4 + 3); and the vectorized
 * ReLU backward is the scalar rule on the same specials. */
static void
test_bias_relu_fused (void)
{
  enum { ROWS = 37, N = 67 };
  static const guint threads[] = { 1, 2, 3, 7, 16 };
  g_autoptr(GRand) rand = g_rand_new_with_seed (29);
  g_autofree float *y0 = g_new (float, ROWS * N);
  g_autofree float *want_y = g_new (float, ROWS * N);
  g_autofree float *want_act = g_new (float, ROWS * N);
  g_autofree float *y = g_new (float, ROWS * N);
  g_autofree float *act = g_new (float, ROWS * N);
  float b[N], dy[N], dx[N];

  fill_uniform (rand, y0, ROWS * N, -4.0, 4.0);
  fill_uniform (rand, b, N, -2.0, 2.0);
  fill_uniform (rand, dy, N, -2.0, 2.0);
  /* Specials scattered over rows, lanes and the tail; some y = -b exactly
   * (a zero sum) and some b special too. */
  for (gsize i = 0; i < ROWS * N; i += 5)
    memcpy (&y0[i], &relu_specials[(i / 5) % G_N_ELEMENTS (relu_specials)], sizeof (float));
  for (gsize i = 3; i < ROWS * N; i += 11)
    y0[i] = -b[i % N];
  memcpy (&b[7], &relu_specials[0], sizeof (float));
  memcpy (&b[66], &relu_specials[4], sizeof (float));

  for (gsize r = 0; r < ROWS; r++)
    for (gsize j = 0; j < N; j++)
      {
        want_y[r * N + j] = y0[r * N + j] + b[j];
        want_act[r * N + j] = dc_math_reluf (want_y[r * N + j]);
      }

  for (gsize t = 0; t < G_N_ELEMENTS (threads); t++)
    for (int with_act = 0; with_act < 2; with_act++)
      {
        BiasReluJob job = { y, b, with_act ? act : NULL, N };

        memcpy (y, y0, ROWS * N * sizeof (float));
        dc_parallel_for (threads[t], ROWS, 3, bias_relu_rows, &job);
        for (gsize i = 0; i < ROWS * N; i++)
          {
            /* NaN + NaN: IEEE 754 does not say whose payload the sum keeps,
             * and the compiler may swap a commutative add's operands (in
             * the scalar code too), so there only NaN is asked for, and the
             * ReLU must pass the sum's own NaN on. */
            if (isnan (y0[i]) && isnan (b[i % N]))
              {
                g_assert_true (isnan (y[i]));
                if (with_act)
                  g_assert_cmphex (bits_of (act[i]), ==, bits_of (y[i]));
                continue;
              }
            g_assert_cmphex (bits_of (y[i]), ==, bits_of (want_y[i]));
            if (with_act)
              g_assert_cmphex (bits_of (act[i]), ==, bits_of (want_act[i]));
          }
      }

  /* The vectorized forms of the existing passes, on the same specials. */
  for (gsize r = 0; r < ROWS; r++)
    {
      const float *x = y0 + r * N;

      dc_math_add (x, b, act, N);
      for (gsize j = 0; j < N; j++)
        if (!(isnan (x[j]) && isnan (b[j])))
          g_assert_cmphex (bits_of (act[j]), ==, bits_of (x[j] + b[j]));
        else
          g_assert_true (isnan (act[j]));

      dc_math_relu (x, act, N);
      dc_math_relu_backward (x, dy, dx, N);
      for (gsize j = 0; j < N; j++)
        {
          g_assert_cmphex (bits_of (act[j]), ==, bits_of (dc_math_reluf (x[j])));
          g_assert_cmphex (bits_of (dx[j]), ==,
                           bits_of (isnan (x[j]) ? x[j] : (x[j] > 0.0f ? dy[j] : 0.0f)));
        }
    }
}

/* Elementwise backward = dy × the scalar derivative, bit for bit; the
 * derivatives themselves are under the oracle above, and here also against
 * central differences of the forward in double through MPFR-free formulas. */
static void
test_activation_backward (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (17);
  float x[1000], dy[1000], dx[1000], y[1000];
  double worst_fd = 0.0;

  fill_uniform (rand, x, 1000, -8.0, 8.0);
  fill_uniform (rand, dy, 1000, -2.0, 2.0);
  dc_math_gelu_tanh_backward (x, dy, dx, 1000);
  for (int i = 0; i < 1000; i++)
    g_assert_cmphex (bits_of (dx[i]), ==, bits_of (dy[i] * dc_math_gelu_tanh_derivf (x[i])));
  dc_math_silu_backward (x, dy, dx, 1000);
  for (int i = 0; i < 1000; i++)
    g_assert_cmphex (bits_of (dx[i]), ==, bits_of (dy[i] * dc_math_silu_derivf (x[i])));
  dc_math_relu_backward (x, dy, dx, 1000);
  for (int i = 0; i < 1000; i++)
    g_assert_cmphex (bits_of (dx[i]), ==, bits_of (x[i] > 0 ? dy[i] : 0.0f));
  dc_math_gelu_tanh (x, y, 1000);
  for (int i = 0; i < 1000; i++)
    g_assert_cmphex (bits_of (y[i]), ==, bits_of (dc_math_gelu_tanhf (x[i])));
  dc_math_silu (x, y, 1000);
  for (int i = 0; i < 1000; i++)
    g_assert_cmphex (bits_of (y[i]), ==, bits_of (dc_math_siluf (x[i])));
  dc_math_relu (x, x, 1000);
  for (int i = 0; i < 1000; i++)
    g_assert_cmpfloat (x[i], >=, 0.0f);
  /* The array form is dc_math_reluf bit for bit, specials included. */
  {
    static const guint32 specials[] = {
      0x7fc01234u, 0xffc00001u, 0x80000000u, 0x00000000u, 0xff800000u, 0x7f800000u,
      0x00000001u, 0x80000001u, 0x40400000u, 0xc0400000u, 0x7f7fffffu, 0xff7fffffu,
    };
    float in[G_N_ELEMENTS (specials)], out[G_N_ELEMENTS (specials)];

    memcpy (in, specials, sizeof in);
    dc_math_relu (in, out, G_N_ELEMENTS (specials));
    for (gsize i = 0; i < G_N_ELEMENTS (specials); i++)
      g_assert_cmphex (bits_of (out[i]), ==, bits_of (dc_math_reluf (in[i])));
  }

  /* Derivative formulas against central differences in double. */
  for (double t = -8.0; t <= 8.0; t += 0.01)
    {
      const double h = 1e-5, c = sqrt (2.0 / G_PI);
#define GELU_D(v) (0.5 * (v) * (1.0 + tanh (c * ((v) + 0.044715 * (v) * (v) * (v)))))
#define SILU_D(v) ((v) / (1.0 + exp (-(v))))
      double fd_g = (GELU_D (t + h) - GELU_D (t - h)) / (2 * h);
      double fd_s = (SILU_D (t + h) - SILU_D (t - h)) / (2 * h);

      worst_fd = MAX (worst_fd, fabs (fd_g - dc_math_gelu_tanh_derivf ((float) t)));
      worst_fd = MAX (worst_fd, fabs (fd_s - dc_math_silu_derivf ((float) t)));
    }
  g_test_message ("activation derivatives vs finite differences: %.3g", worst_fd);
  /* (float) t is within 2^-21 of t and the derivatives' slopes are below 2. */
  g_assert_cmpfloat (worst_fd, <=, 1e-5);
}

/* Cross-entropy is exactly −log_softmax[target]; its gradient exactly
 * dloss · (softmax − onehot), checked against the double loss by central
 * differences. */
static void
test_cross_entropy (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (19);
  const gsize n = 257;
  float x[257], ls[257], p[257], d[257];
  double worst_fd = 0.0;

  fill_uniform (rand, x, n, -6.0, 6.0);
  dc_math_log_softmax (x, ls, n);
  dc_math_softmax (x, p, n);
  for (gsize t = 0; t < n; t += 16)
    {
      g_assert_cmphex (bits_of (dc_math_cross_entropy (x, n, t)), ==, bits_of (-ls[t]));
      dc_math_cross_entropy_backward (x, n, t, 0.25f, d);
      for (gsize i = 0; i < n; i++)
        g_assert_cmphex (bits_of (d[i]), ==, bits_of ((i == t ? p[i] - 1.0f : p[i]) * 0.25f));
    }

  /* d loss / d x_j by central differences of the double loss. */
  dc_math_cross_entropy_backward (x, n, 5, 1.0f, d);
  for (gsize j = 0; j < n; j += 7)
    {
      const double h = 1e-5;
      double l[2];

      for (int s = 0; s < 2; s++)
        {
          double m = -INFINITY, sum = 0.0, xj;

          for (gsize i = 0; i < n; i++)
            m = MAX (m, (double) x[i]);
          for (gsize i = 0; i < n; i++)
            sum += exp ((double) x[i] + (i == j ? (s ? h : -h) : 0.0) - m);
          xj = (double) x[5] + (j == 5 ? (s ? h : -h) : 0.0);
          l[s] = -((xj - m) - log (sum));
        }
      worst_fd = MAX (worst_fd, fabs ((l[1] - l[0]) / (2 * h) - d[j]));
    }
  g_test_message ("cross-entropy gradient vs finite differences: %.3g", worst_fd);
  g_assert_cmpfloat (worst_fd, <=, 1e-6);

  /* Special rows. */
  x[3] = -INFINITY;
  g_assert_true (isinf (dc_math_cross_entropy (x, n, 3)));
  g_assert_true (isfinite (dc_math_cross_entropy (x, n, 4)));
  x[3] = NAN;
  g_assert_true (isnan (dc_math_cross_entropy (x, n, 4)));
}

/* AdamW against a double evaluation of the same formula (β^t exact in
 * double): every parameter within ADAM_BOUND units of 2^-24·(|p| + lr·|step|). */
#define ADAM_BOUND 4.0
static void
test_adamw (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (20);
  const gsize n = 1000;
  float p[1000], g[1000], m[1000], v[1000];
  double pd[1000], md[1000], vd[1000], worst = 0.0;
  const float lr = 3e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;

  fill_uniform (rand, p, n, -0.5, 0.5);
  for (gsize i = 0; i < n; i++)
    {
      pd[i] = p[i];
      m[i] = v[i] = 0.0f;
      md[i] = vd[i] = 0.0;
    }
  for (guint64 t = 1; t <= 50; t++)
    {
      fill_uniform (rand, g, n, -1.0, 1.0);
      dc_math_adamw_update (p, g, m, v, n, t, lr, b1, b2, eps, wd);
      for (gsize i = 0; i < n; i++)
        {
          double mh, vh, step;

          /* The double reference starts each step from the float state, so
           * only this step's rounding is measured. */
          md[i] = (double) b1 * md[i] + (1.0 - (double) b1) * g[i];
          vd[i] = (double) b2 * vd[i] + (1.0 - (double) b2) * (double) g[i] * g[i];
          mh = md[i] / (1.0 - pow ((double) b1, (double) t));
          vh = vd[i] / (1.0 - pow ((double) b2, (double) t));
          step = mh / (sqrt (vh) + eps) + (double) wd * pd[i];
          pd[i] = pd[i] - (double) lr * step;
          worst = MAX (worst, fabs (p[i] - pd[i]) / (0x1p-24 * (fabs (pd[i]) + lr * fabs (step))));
          md[i] = m[i];
          vd[i] = v[i];
          pd[i] = p[i];
        }
    }
  g_test_message ("AdamW: max error %.3f units over 50 steps (bound %.0f)", worst, ADAM_BOUND);
  g_assert_cmpfloat (worst, <=, ADAM_BOUND);
}

/* RoPE: the table is exactly the documented composition; the rotation
 * matches a double rotation by the same float angles, keeps the norm, and
 * its backward is its transpose (forward then backward gives x back within
 * rounding). */
static void
test_rope (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (21);
  const gsize d = 128;
  float c[64], sn[64], x[128], y[128];
  double worst = 0.0, worst_back = 0.0;

  for (gsize pos = 0; pos <= 32768; pos += 4093)
    {
      dc_math_rope_table (500000.0f, d, pos, c, sn);
      for (gsize i = 0; i < d / 2; i++)
        {
          float angle = (float) pos * dc_math_powf (500000.0f, -((float) (2 * i) / (float) d));

          g_assert_cmphex (bits_of (c[i]), ==, bits_of (dc_math_cosf (angle)));
          g_assert_cmphex (bits_of (sn[i]), ==, bits_of (dc_math_sinf (angle)));
        }
      fill_uniform (rand, x, d, -2.0, 2.0);
      memcpy (y, x, sizeof x);
      dc_math_rope_apply (y, c, sn, d);
      for (gsize i = 0; i < d / 2; i++)
        {
          double a = x[i], b = x[i + d / 2];
          double r0 = a * c[i] - b * sn[i], r1 = b * c[i] + a * sn[i];
          double unit = 0x1p-24 * (fabs (a) + fabs (b));

          worst = MAX (worst, MAX (fabs (y[i] - r0), fabs (y[i + d / 2] - r1)) / unit);
        }
      dc_math_rope_apply_backward (y, c, sn, d);
      for (gsize i = 0; i < d; i++)
        worst_back = MAX (worst_back, fabs (y[i] - x[i]) / (0x1p-24 * 4.0));
    }
  g_test_message ("RoPE: rotation %.3f units of 2^-24(|a| + |b|), forward+backward %.3f units "
                  "of 2^-22", worst, worst_back);
  g_assert_cmpfloat (worst, <=, 2.0);
  g_assert_cmpfloat (worst_back, <=, 8.0);
}

/* The vector operations' exact bits, pinned like the scalar ones. */
#define VECTOR_HASH G_GUINT64_CONSTANT (0x3e10dd9a59e2aa78)
static void
test_vector_hash (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (18);
  const gsize n = 50257;
  g_autofree float *x = g_new (float, n);
  g_autofree float *y = g_new (float, n);
  g_autofree float *w = g_new (float, n);
  g_autofree float *b = g_new (float, n);
  g_autofree float *dx = g_new (float, n);
  g_autofree float *dw = g_new0 (float, n);
  g_autofree float *db = g_new0 (float, n);
  guint64 h = FNV_SEED;
  float mean, rstd;

#define HASH_ARRAY(a) for (gsize i_ = 0; i_ < n; i_++) h = fnv1a (h, bits_of ((a)[i_]))
  fill_uniform (rand, x, n, -20.0, 20.0);
  fill_uniform (rand, w, n, 0.5, 1.5);
  fill_uniform (rand, b, n, -0.5, 0.5);
  h = fnv1a (h, bits_of (dc_math_sum (x, n)));
  h = fnv1a (h, bits_of (dc_math_dot (x, w, n)));
  dc_math_softmax (x, y, n);
  HASH_ARRAY (y);
  dc_math_softmax_backward (y, w, dx, n);
  HASH_ARRAY (dx);
  dc_math_log_softmax (x, y, n);
  HASH_ARRAY (y);
  dc_math_log_softmax_backward (y, w, dx, n);
  HASH_ARRAY (dx);
  dc_math_layer_norm (x, w, b, DC_MATH_GPT2_LN_EPS, y, &mean, &rstd, n);
  HASH_ARRAY (y);
  dc_math_layer_norm_backward (x, w, mean, rstd, b, dx, dw, db, n);
  HASH_ARRAY (dx);
  HASH_ARRAY (dw);
  dc_math_rms_norm (x, w, 1e-6f, y, &rstd, n);
  HASH_ARRAY (y);
  dc_math_rms_norm_backward (x, w, rstd, b, dx, dw, n);
  HASH_ARRAY (dx);
  HASH_ARRAY (dw);
  h = fnv1a (h, bits_of (dc_math_cross_entropy (x, n, 1234)));
  dc_math_cross_entropy_backward (x, n, 1234, 0.5f, dx);
  HASH_ARRAY (dx);
  memset (dw, 0, n * sizeof (float));
  memset (db, 0, n * sizeof (float));
  for (guint64 t = 1; t <= 3; t++)
    dc_math_adamw_update (w, b, dw, db, n, t, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f);
  HASH_ARRAY (w);
  HASH_ARRAY (dw);
  HASH_ARRAY (db);
#undef HASH_ARRAY
  if (g_getenv ("DC_MATH_REPORT") != NULL)
    g_printerr ("HASH vector 0x%016" G_GINT64_MODIFIER "x\n", h);
  g_assert_cmphex (h, ==, VECTOR_HASH);
}

/* The default environment passes; a changed rounding mode and, on x86,
 * flush-to-zero and denormals-are-zero are each caught and named. */
static void
test_fp_environment (void)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_math_check_fp_environment (&error));
  g_assert_no_error (error);

  g_assert_cmpint (fesetround (FE_UPWARD), ==, 0);
  g_assert_false (dc_math_check_fp_environment (&error));
  fesetround (FE_TONEAREST);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "rounding mode"));
  g_clear_error (&error);

#if defined(__x86_64__) || defined(__i386__)
  {
    unsigned int csr = _mm_getcsr ();

    _mm_setcsr (csr | 0x8000);          /* FTZ */
    g_assert_false (dc_math_check_fp_environment (&error));
    _mm_setcsr (csr);
    g_assert_nonnull (strstr (error->message, "FTZ"));
    g_clear_error (&error);

    _mm_setcsr (csr | 0x0040);          /* DAZ */
    g_assert_false (dc_math_check_fp_environment (&error));
    _mm_setcsr (csr);
    g_assert_nonnull (strstr (error->message, "DAZ"));
    g_clear_error (&error);
  }
#endif

  g_assert_true (dc_math_check_fp_environment (NULL));
}

/* The run-time probe (peers compare it) equals the recorded value, and a
 * different FP environment (FTZ on x86) changes it. */
#define PROBE_HASH G_GUINT64_CONSTANT (0x8ca13bf17d0a22c7)
static void
test_probe_hash (void)
{
  guint64 h = dc_math_probe_hash ();

  if (g_getenv ("DC_MATH_REPORT") != NULL)
    g_printerr ("HASH probe 0x%016" G_GINT64_MODIFIER "x\n", h);
  g_assert_cmphex (h, ==, PROBE_HASH);
  g_assert_cmphex (dc_math_probe_hash (), ==, h);
#if defined(__x86_64__) || defined(__i386__)
  {
    unsigned int csr = _mm_getcsr ();
    guint64 ftz;

    _mm_setcsr (csr | 0x8040);          /* FTZ and DAZ */
    ftz = dc_math_probe_hash ();
    _mm_setcsr (csr);
    g_assert_cmphex (ftz, !=, h);
  }
#endif
}

/* The reduction tree written out from its definition in dc-math.h (n ≤ 8:
 * left to right; longer: split at the largest power of two below n), in
 * plain scalar code, over precomputed leaf values. */
static float
tree_sum (const float *v,
          gsize        n)
{
  if (n == 0)
    return 0.0f;
  if (n <= 8)
    {
      float acc = v[0];

      for (gsize i = 1; i < n; i++)
        acc = acc + v[i];
      return acc;
    }
  {
    gsize h = 8;

    while (h * 2 < n)
      h *= 2;
    return tree_sum (v, h) + tree_sum (v + h, n - h);
  }
}

/* dc_math_sum, dc_math_dot and the norms' sums of squares (whose trees
 * take pairwise64_avx2 () for their 64-element subtrees where the CPU has
 * AVX2) give the tree's bits for every n up to 1,100 and a few longer, on
 * values of mixed magnitudes and signs where the order of the additions
 * shows in the result, starting at every offset of a 64-block, with NaNs
 * just past the end (a read past it would show); and a sum of −0s is −0
 * for every n (a vector path that pads with +0 would give +0). */
static void
test_pairwise_tree_order (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (77);
  const gsize max_n = 4200;
  static const gsize longer[] = { 2047, 2048, 2049, 3000, 4100 };
  g_autofree float *x = g_new (float, max_n);
  g_autofree float *y = g_new (float, max_n);
  g_autofree float *v = g_new (float, max_n);
  g_autofree float *zeros = g_new (float, max_n);
  g_autofree float *ones = g_new (float, max_n);
  g_autofree float *xs = g_new (float, max_n + 64);
  g_autofree float *ys = g_new (float, max_n + 64);
  const float c = 0.375f;

  for (gsize i = 0; i < max_n; i++)
    {
      x[i] = (float) (g_rand_double_range (rand, -1.0, 1.0) *
                      ldexp (1.0, g_rand_int_range (rand, -30, 30)));
      y[i] = (float) g_rand_double_range (rand, -3.0, 3.0);
      zeros[i] = -0.0f;
      ones[i] = 1.0f;
    }
  for (gsize n = 1; n <= 1100 + G_N_ELEMENTS (longer); n++)
    {
      const gsize len = n <= 1100 ? n : longer[n - 1101];
      const gsize at = n % 64;   /* every offset of the vectors' blocks */

      memcpy (xs, x + at, len * sizeof (float));
      memcpy (ys, y, len * sizeof (float));
      for (gsize i = len; i < len + 64; i++)
        xs[i] = ys[i] = __builtin_nanf ("");
      g_assert_cmphex (bits_of (dc_math_sum (xs, len)), ==, bits_of (tree_sum (xs, len)));
      for (gsize i = 0; i < len; i++)
        v[i] = xs[i] * ys[i];
      g_assert_cmphex (bits_of (dc_math_dot (xs, ys, len)), ==, bits_of (tree_sum (v, len)));
      for (gsize i = 0; i < len; i++)
        v[i] = xs[i] * xs[i];
      g_assert_cmphex (bits_of (_dc_math_pairwise_squares (xs, 0.0f, FALSE, len)), ==,
                       bits_of (tree_sum (v, len)));
      for (gsize i = 0; i < len; i++)
        v[i] = (xs[i] - c) * (xs[i] - c);
      g_assert_cmphex (bits_of (_dc_math_pairwise_squares (xs, c, TRUE, len)), ==,
                       bits_of (tree_sum (v, len)));
      g_assert_cmphex (bits_of (dc_math_sum (zeros, len)), ==, 0x80000000u);
      g_assert_cmphex (bits_of (dc_math_dot (zeros, ones, len)), ==, 0x80000000u);
    }
}

/* Every SIMD path of dc_math_silu () this CPU has (AVX2: 8 lanes, AVX-512:
 * 16; each run through dc_math_silu_path) against dc_math_siluf () one value
 * at a time, bit for bit: every 31st float bit
 * pattern (139 million, every sign, exponent and branch: the underflow at
 * −103.97, the tail below −18, the far tail below −160), the special values
 * and the branch edges with their neighbours, in arrays whose length leaves
 * a scalar tail. DC_TEST_EXHAUSTIVE=1 checks all 2^32 patterns (a few
 * seconds here; run by hand when the vector code changes: all agreed on
 * 2026-12-01). A vector path that skipped the two-step scaling below 2^-126
 * fails here (checked: at −103.97, 77cff225 against 80000034). */
static void
test_silu_vector (void)
{
  const gboolean exhaustive = g_getenv ("DC_TEST_EXHAUSTIVE") != NULL;
  const guint64 stride = exhaustive ? 1 : 31;
  const gsize block = 4099;   /* not a multiple of 16: the tail runs too */
  const float edges[] = {
    0.0f, -0.0f, __builtin_inff (), -__builtin_inff (), __builtin_nanf (""), -__builtin_nanf (""),
    -0x1.9fe36ap+6f, 0x1.9fe36ap+6f, -0x1.2p+4f, -0x1.4p+7f, 0x1p-149f, -0x1p-149f,
    0x1p-126f, -0x1p-126f, 88.72283f, -88.72283f, 1.0f, -1.0f, 3.4028235e38f, -3.4028235e38f,
  };
  const struct { DcMathSimd path; const char *name; } paths[] = {
    { DC_MATH_SIMD_AVX2, "avx2" }, { DC_MATH_SIMD_AVX512, "avx512" },
  };
  g_autofree float *x = g_new (float, block);
  g_autofree float *y = g_new (float, block);
  guint64 checked = 0;
  guint n_paths = 0;
  gsize n = 0;

  for (guint i = 0; i < G_N_ELEMENTS (edges); i++)
    for (int d = -2; d <= 2; d++)
      {
        guint32 u;

        memcpy (&u, &edges[i], sizeof u);
        u += (guint32) d;
        memcpy (&x[n++], &u, sizeof u);
      }
  for (guint64 b = 0; b <= G_MAXUINT32; b += stride)
    {
      guint32 u = (guint32) b;

      memcpy (&x[n++], &u, sizeof u);
      if (n == block || b + stride > G_MAXUINT32)
        {
          for (guint p = 0; p < G_N_ELEMENTS (paths); p++)
            {
              if (!dc_math_silu_path (paths[p].path, x, y, n))
                continue;
              n_paths += checked == 0;
              for (gsize i = 0; i < n; i++)
                {
                  float want = dc_math_siluf (x[i]);
                  guint32 a, w, xb;

                  memcpy (&a, &y[i], sizeof a);
                  memcpy (&w, &want, sizeof w);
                  memcpy (&xb, &x[i], sizeof xb);
                  if (a != w)
                    g_error ("silu %s (%a) [bits %08x]: vector %08x, scalar %08x",
                             paths[p].name, (double) x[i], xb, a, w);
                }
            }
          /* And the public entry (the widest path) on the same block. */
          dc_math_silu (x, y, n);
          for (gsize i = 0; i < n; i++)
            {
              float want = dc_math_siluf (x[i]);

              g_assert_true (memcmp (&y[i], &want, sizeof want) == 0);
            }
          checked += n;
          n = 0;
        }
    }
  g_test_message ("%" G_GUINT64_FORMAT " values agree on %u SIMD paths", checked, n_paths);
  /* Without AVX2 the public entry is the scalar loop: nothing was compared. */
  if (n_paths == 0)
    g_test_skip ("this CPU has neither AVX2 nor AVX-512F: no vector SiLU to compare");
}

/* The softmaxes' vector exponentials (dc_math_exp_shifted_path, AVX2)
 * against the scalar path bit for bit: e^(x − c) for every 251st float bit
 * pattern x at shifts c around the row maxima softmax passes (0, ±1.5,
 * 100, −50, the largest float, ±inf, NaN), so that the underflow at
 * −103.97, the two-step scaling below 2^-126, NaN and infinite differences
 * and lanes above c (the scalar fallback) all occur, with a scalar tail;
 * then every difference between −87 and −104.5 (the results below 2^-126).
 * Then dc_math_softmax and dc_math_log_softmax (which use the vector path)
 * against their definitions on the scalar path, for rows of 1 to 300. */
static void
test_exp_shifted_vector (void)
{
  const float shifts[] = {
    0.0f, 1.5f, -1.5f, 100.0f, -50.0f, 3.4028235e38f, __builtin_inff (), -__builtin_inff (),
    __builtin_nanf (""),
  };
  const gsize block = 4099;
  g_autofree float *x = g_new (float, block);
  g_autofree float *y = g_new (float, block);
  g_autofree float *want = g_new (float, block);
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);
  guint64 checked = 0;
  gsize n = 0;

  if (!dc_math_exp_shifted_path (DC_MATH_SIMD_AVX2, x, 0.0f, y, 0))
    {
      g_test_skip ("this CPU has no AVX2: no vector exponential to compare");
      return;
    }
  for (guint64 b = 0; b <= G_MAXUINT32; b += 251)
    {
      guint32 u = (guint32) b;

      memcpy (&x[n++], &u, sizeof u);
      if (n < block && b + 251 <= G_MAXUINT32)
        continue;
      for (guint s = 0; s < G_N_ELEMENTS (shifts); s++)
        {
          g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_SCALAR, x, shifts[s], want, n));
          g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_AVX2, x, shifts[s], y, n));
          if (memcmp (y, want, n * sizeof *y) != 0)
            for (gsize i = 0; i < n; i++)
              if (memcmp (&y[i], &want[i], sizeof *y) != 0)
                g_error ("exp_shifted avx2 (%a, %a): %08x, scalar %08x", (double) x[i],
                         (double) shifts[s], bits_of (y[i]), bits_of (want[i]));
          checked += n;
        }
      n = 0;
    }
  /* Every difference whose exponential lands below 2^-126 (the integer
   * rounding of scale2_low_avx2), at shift 0 and at one that gives the
   * difference a low part. */
  for (float c = 0.0f; c < 2.0f; c += 1.5f)
    {
      guint32 lo = bits_of (-87.0f), hi = bits_of (-104.5f);

      for (guint32 u = lo; u <= hi; u += (guint32) n)
        {
          n = MIN (block, hi - u + 1);
          for (gsize i = 0; i < n; i++)
            {
              guint32 v = u + (guint32) i;

              memcpy (&x[i], &v, sizeof v);
              x[i] += c;
            }
          g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_SCALAR, x, c, want, n));
          g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_AVX2, x, c, y, n));
          for (gsize i = 0; i < n; i++)
            if (memcmp (&y[i], &want[i], sizeof *y) != 0)
              g_error ("exp_shifted avx2 (%a, %a): %08x, scalar %08x", (double) x[i],
                       (double) c, bits_of (y[i]), bits_of (want[i]));
          checked += n;
        }
    }
  /* The softmaxes on the vector path equal their scalar definitions. */
  for (gsize len = 1; len <= 300; len += 1 + len / 8)
    for (int round = 0; round < 4; round++)
      {
        float max, sum;

        for (gsize i = 0; i < len; i++)
          x[i] = (float) g_rand_double_range (rand, round == 0 ? -120.0 : -8.0, 8.0);
        if (round == 3)
          x[len / 2] = -__builtin_inff ();
        max = dc_math_max (x, len);
        g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_SCALAR, x, max, want, len));
        sum = dc_math_sum (want, len);
        dc_math_softmax (x, y, len);
        for (gsize i = 0; i < len; i++)
          g_assert_cmphex (bits_of (y[i]), ==, bits_of (want[i] / sum));
        dc_math_log_softmax (x, y, len);
        /* In place it takes the leaf path: the same bits. */
        memcpy (want, x, len * sizeof *x);
        dc_math_log_softmax (want, want, len);
        g_assert_cmpmem (y, len * sizeof *y, want, len * sizeof *y);
      }
  g_test_message ("%" G_GUINT64_FORMAT " exponentials agree", checked);
}

/* A product the way the CPU's multiply gives it (the oracle of the
 * library's exact paths for tiny operands). */
static float
plain_product (float a,
               float b)
{
  volatile float va = a, vb = b;

  return va * vb;
}

/* Bits equal, or both NaN: a sum's NaN takes the sign and payload of
 * whichever operand the compiler put first, and the test's adds and the
 * library's are compiled apart. */
static gboolean
same_sum (float x,
          float y)
{
  return bits_of (x) == bits_of (y) || (x != x && y != y);
}

/* The fixed tree of 64 leaf values (8 leaves of 8, left to right, then
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))), from plain adds. */
static float
tree64 (const float *v)
{
  float l[8];

  for (int j = 0; j < 8; j++)
    {
      l[j] = v[8 * j];
      for (int i = 1; i < 8; i++)
        l[j] = l[j] + v[8 * j + i];
    }
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* A float drawn to make products and quotients land below 2^-126: a
 * subnormal, a small normal, a zero, or (rarely) a special value. */
static float
random_tiny (GRand *rand)
{
  guint32 u;

  switch (g_rand_int_range (rand, 0, 10))
    {
    case 0:
      u = g_rand_int_range (rand, 0, 3) == 0 ? 0 : 0x00000001u;
      break;
    case 1:
    case 2:
    case 3:
    case 4:
      u = g_rand_int_range (rand, 1, 0x00800000);   /* subnormal */
      break;
    case 5:
      u = g_rand_int_range (rand, 0x00800000, 0x01000000);   /* [2^-126, 2^-125) */
      break;
    default:
      u = g_rand_int_range (rand, 0x00800000, 0x0e000000);   /* up to 2^-99 */
      break;
    }
  if (g_rand_boolean (rand))
    u |= 0x80000000u;
  return float_of (u);
}

/* A factor: ±2^-40 to 2^40 with specials (wide), or ±2^-29 to 2^29 only
 * (so that whole vectors of ordinary factors occur too). */
static float
random_factor (GRand    *rand,
               gboolean  wide)
{
  static const guint32 special[] = {
    0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u,
    0x007fffffu, 0x7f7fffffu, 0x3f800000u, 0x3f000000u,
  };

  int span = wide ? 40 : 29;

  if (wide && g_rand_int_range (rand, 0, 20) == 0)
    return float_of (special[g_rand_int_range (rand, 0, G_N_ELEMENTS (special))]);
  return float_of ((g_rand_boolean (rand) ? 0x80000000u : 0)
                   | (guint32) g_rand_int_range (rand, (127 - span) << 23, (127 + span) << 23));
}

/* The dot's leaves and the softmax backward take tiny operands through
 * double (mul_small and mul_small_avx2 in dc-math-vector.c); every product
 * must be the multiply's own bits. dc_math_dot of one element is one leaf
 * (the scalar path), of 8 and 24 leaves of 8 (AVX2 products where the CPU
 * has it), of 64 the AVX2 tree; the
 * softmax backward's dx against y · (dy − d), dc_math_scale against x · s.
 * Fails on any bit. */
static void
test_tiny_products (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (29);
  float a[72], b[72], p[72], dx[72];
  guint64 checked = 0;

  /* The exact path, whichever this CPU would take. */
  _dc_math_set_tiny_products_exact (1);

  /* Every 7th subnormal and every 61st pattern up to 2^-99, times a few
   * factors, through the scalar leaf. */
  for (guint32 u = 1; u < 0x0e000000u; u += u < 0x00800000u ? 7 : 61)
    for (int f = 0; f < 3; f++)
      {
        float x = float_of (u | (f == 1 ? 0x80000000u : 0));
        float y = f == 2 ? random_factor (rand, TRUE) : (float) g_rand_double_range (rand, -300.0, 300.0);
        float got = dc_math_dot (&x, &y, 1), want = plain_product (x, y);

        if (bits_of (got) != bits_of (want))
          g_error ("dot of one (%a · %a): %08x, the multiply %08x", (double) x, (double) y,
                   bits_of (got), bits_of (want));
        checked++;
      }
  /* Vectors of 64 (the AVX2 tree) and rows of 71 (vectors and a tail). */
  for (int round = 0; round < 20000; round++)
    {
      float got, want, d;

      for (int i = 0; i < 72; i++)
        {
          a[i] = g_rand_int_range (rand, 0, 4) == 0 ? (float) g_rand_double (rand) : random_tiny (rand);
          b[i] = random_factor (rand, round % 2 == 0);
          p[i] = plain_product (a[i], b[i]);
        }
      /* A leaf of 8 (left to right), and 24 = the tree of 16, then 8. */
      got = dc_math_dot (a, b, 8);
      want = p[0];
      for (int i = 1; i < 8; i++)
        want = want + p[i];
      if (!same_sum (got, want))
        g_error ("dot of 8, round %d: %08x, the sum of products %08x", round, bits_of (got),
                 bits_of (want));
      {
        float l[3];

        for (int j = 0; j < 3; j++)
          {
            l[j] = p[8 * j];
            for (int i = 1; i < 8; i++)
              l[j] = l[j] + p[8 * j + i];
          }
        got = dc_math_dot (a, b, 24);
        want = (l[0] + l[1]) + l[2];
        if (!same_sum (got, want))
          g_error ("dot of 24, round %d: %08x, the tree of products %08x", round, bits_of (got),
                   bits_of (want));
      }
      got = dc_math_dot (a, b, 64);
      want = tree64 (p);
      if (!same_sum (got, want))
        g_error ("dot of 64, round %d: %08x, the tree of products %08x", round, bits_of (got),
                 bits_of (want));
      d = dc_math_dot (a, b, 71);
      dc_math_softmax_backward (a, b, dx, 71);
      for (int i = 0; i < 71; i++)
        {
          float w = plain_product (a[i], b[i] - d);

          if (bits_of (dx[i]) != bits_of (w))
            g_error ("softmax backward (%a, %a − %a): %08x, the multiply %08x", (double) a[i],
                     (double) b[i], (double) d, bits_of (dx[i]), bits_of (w));
        }
      /* A row times one factor (dc_math_scale), in place. */
      {
        float f = random_factor (rand, round % 2 == 0);

        memcpy (dx, a, 71 * sizeof *a);
        dc_math_scale (dx, f, dx, 71);
        for (int i = 0; i < 71; i++)
          if (bits_of (dx[i]) != bits_of (plain_product (a[i], f)))
            g_error ("scale (%a · %a): %08x, the multiply %08x", (double) a[i], (double) f,
                     bits_of (dx[i]), bits_of (plain_product (a[i], f)));
      }
      checked += 64 + 71 + 71;
    }
  /* Products a float multiply rounds onto a tie of the 2^-149 grid: M · b
   * near n + 1/2 (M = |a| · 2^149, n < 2^20), one lane of a leaf of 8 at a
   * time. The float form of the product (mul_small_avx2 ()) must settle
   * these by the sign of the product's error; count those the first
   * rounding made a tie that the exact product was not, so that the check
   * cannot pass empty. */
  {
    guint made_ties = 0;

    for (int round = 0; round < 400000; round++)
      {
        int j = g_rand_int_range (rand, 0, 8);
        guint32 u = g_rand_boolean (rand) ? (guint32) g_rand_int_range (rand, 1, 0x00800000)
                                          : (guint32) g_rand_int_range (rand, 0x00800000, 0x0d800000);
        double big_m = (double) float_of (u) * 0x1p149;
        double n = (double) g_rand_int_range (rand, 0, 1 << 20) + 0.5;
        guint32 ub = bits_of ((float) (n / big_m)) + (guint32) g_rand_int_range (rand, -2, 3);
        double exact, rounded;
        float got, want;

        if (n / big_m < 0x1p-64)
          continue;
        memset (a, 0, 8 * sizeof *a);
        memset (b, 0, 8 * sizeof *b);
        a[j] = float_of (u | (round % 3 == 0 ? 0x80000000u : 0));
        b[j] = float_of (ub);
        exact = big_m * (double) b[j];
        rounded = (double) (float) exact;
        if (rounded - floor (rounded) == 0.5 && rounded != exact)
          made_ties++;
        got = dc_math_dot (a, b, 8);
        want = plain_product (a[j], b[j]);
        if (!same_sum (got, want))
          g_error ("near a tie (%a · %a): %08x, the multiply %08x", (double) a[j], (double) b[j],
                   bits_of (got), bits_of (want));
        checked++;
      }
    g_test_message ("%u products rounded onto a tie by a float multiply", made_ties);
    g_assert_cmpuint (made_ties, >, 100);
  }
  _dc_math_set_tiny_products_exact (-1);
  g_test_message ("%" G_GUINT64_FORMAT " products agree", checked);
}

/* Softmax rows whose exponentials fall below 2^-126 (logits 80 to 104
 * under the maximum) and whose sums run from 1 to a few hundred: the
 * division by the sum (div_by_sum_avx2 in dc-math-vector.c for the tiny
 * lanes) against a plain division of the scalar exponentials. */
static void
test_softmax_tiny (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (31);
  g_autofree float *x = g_new (float, 300);
  g_autofree float *y = g_new (float, 300);
  g_autofree float *e = g_new (float, 300);
  guint64 checked = 0;

  for (int round = 0; round < 4000; round++)
    {
      gsize len = (gsize) g_rand_int_range (rand, 1, 300);
      int n_top = g_rand_int_range (rand, 1, (int) len + 1);
      float max, sum;

      for (gsize i = 0; i < len; i++)
        x[i] = (float) g_rand_double_range (rand, -104.5, -80.0);
      /* Some logits near the top make sums of 1 up to len. */
      for (int t = 0; t < n_top; t++)
        x[g_rand_int_range (rand, 0, (int) len)] = (float) g_rand_double_range (rand, -0.5, 0.0);
      max = dc_math_max (x, len);
      g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_SCALAR, x, max, e, len));
      sum = dc_math_sum (e, len);
      dc_math_softmax (x, y, len);
      for (gsize i = 0; i < len; i++)
        {
          volatile float q = e[i], s = sum;
          float want = q / s;

          if (bits_of (y[i]) != bits_of (want))
            g_error ("softmax (%a / %a): %08x, the division %08x", (double) e[i], (double) sum,
                     bits_of (y[i]), bits_of (want));
        }
      checked += len;
    }
  g_test_message ("%" G_GUINT64_FORMAT " probabilities agree", checked);
}

/* A dividend for the division test whose quotient by @sum lies near the
 * middle of step @k of 2^-149: the float nearest to (k + 1/2) · sum ·
 * 2^-149 moved by @nudge of its own steps (0 for the nearest). (k + 1/2) ·
 * sum is exact in double (49 bits), and so is the scaling. */
static float
near_half_step (float sum,
                guint32 k,
                int nudge)
{
  float y = (float) (((double) k + 0.5) * (double) sum * 0x1p-149);

  for (; nudge > 0; nudge--)
    y = nextafterf (y, G_MAXFLOAT);
  for (; nudge < 0; nudge++)
    y = nextafterf (y, 0.0f);
  return y;
}

/* A softmax row's division by its sum on the AVX2 path, both ways
 * (DC_MATH_SUBNORMAL_QUOTIENTS: every quotient below 2^-125 through the
 * double path, or only the dividends below 2^-125), against the float
 * division, bit for bit. Rows mix quotients on exact half steps of 2^-149
 * (a sum of few bits times an odd number of half steps), next to them,
 * just below and above 2^-125 and sum · 2^-125, subnormal dividends and
 * ordinary ones; sums from 1 to past 2^24 (where the double path keeps
 * the 2^-125 limit). */
static void
test_softmax_division (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (47);
  float y[67], want[67], got[67];
  guint64 checked = 0, ties = 0, new_lanes = 0;

  if (!dc_math_divide_row_path (DC_MATH_SIMD_AVX2, y, 1.0f, 0))
    {
      g_test_skip ("this CPU has no AVX2: no vector division to compare");
      return;
    }
  for (int mode = 0; mode <= 1; mode++)
    {
      _dc_math_set_subnormal_quotients (mode);
      for (int round = 0; round < 30000; round++)
        {
          gsize n = (gsize) g_rand_int_range (rand, 1, G_N_ELEMENTS (y) + 1);
          float sum;

          switch (g_rand_int_range (rand, 0, 4))
            {
            case 0: /* few bits, even: exact half steps exist */
              sum = ldexpf ((float) (2 * g_rand_int_range (rand, 0, 1024) + 1),
                            g_rand_int_range (rand, 1, 13));
              break;
            case 1:
              sum = (float) g_rand_double_range (rand, 1.0, 2.0);
              break;
            case 2:
              sum = ldexpf ((float) g_rand_double_range (rand, 1.0, 2.0), g_rand_int_range (rand, 0, 23));
              break;
            default:
              sum = ldexpf ((float) g_rand_double_range (rand, 1.0, 2.0), g_rand_int_range (rand, 23, 40));
              break;
            }
          if (sum < 1.0f)
            sum = 1.0f;
          for (gsize i = 0; i < n; i++)
            {
              guint32 k;

              switch (g_rand_int_range (rand, 0, 6))
                {
                case 0: /* a half step, or near one */
                case 1:
                  k = (guint32) g_rand_int_range (rand, 0, 1 << 24);
                  if (g_rand_boolean (rand))
                    k >>= g_rand_int_range (rand, 1, 24);
                  y[i] = near_half_step (sum, k, g_rand_int_range (rand, -2, 3));
                  break;
                case 2: /* around the limits */
                  y[i] = (g_rand_boolean (rand) ? 0x1p-125f : sum * 0x1p-125f);
                  for (int m = g_rand_int_range (rand, -3, 4); m != 0; m += m > 0 ? -1 : 1)
                    y[i] = nextafterf (y[i], m > 0 ? G_MAXFLOAT : 0.0f);
                  break;
                case 3: /* subnormal or zero */
                  y[i] = float_of ((guint32) g_rand_int_range (rand, 0, 0x00800000));
                  break;
                case 4: /* up to sum · 2^-123 */
                  y[i] = (float) (g_rand_double (rand) * sum * 0x1p-123);
                  break;
                default: /* an ordinary probability's dividend */
                  y[i] = (float) g_rand_double_range (rand, 0.0, 1.0);
                  break;
                }
              {
                volatile float q = y[i], s = sum;

                want[i] = q / s;
              }
              if (y[i] < sum * 0x1p-125f)
                {
                  double q = floor ((double) y[i] / sum * 0x1p149);

                  ties += (double) y[i] == (q + 0.5) * sum * 0x1p-149;
                  new_lanes += y[i] >= 0x1p-125f && sum < 0x1p24f;
                }
            }
          memcpy (got, y, n * sizeof *y);
          g_assert_true (dc_math_divide_row_path (DC_MATH_SIMD_AVX2, got, sum, n));
          for (gsize i = 0; i < n; i++)
            if (bits_of (got[i]) != bits_of (want[i]))
              g_error ("%a / %a (both ways %d): %08x, the division %08x", (double) y[i], (double) sum,
                       mode, bits_of (got[i]), bits_of (want[i]));
          checked += n;
        }
    }
  _dc_math_set_subnormal_quotients (-1);
  g_test_message ("%" G_GUINT64_FORMAT " quotients agree, %" G_GUINT64_FORMAT " on a half step, %"
                  G_GUINT64_FORMAT " with a normal dividend and a quotient below 2^-125", checked, ties,
                  new_lanes);
  g_assert_cmpuint (ties, >, 1000);
  g_assert_cmpuint (new_lanes, >, 10000);
}

/* The vector softmax rows make no subnormal in a float operation (every
 * such value is counted in steps of 2^-149 instead, docs/VERIFICATION.md,
 * "Results below 2^-126"): attention-like rows, their logits from 0 to 120
 * under a maximum with a low part, of every length up to 70 (ragged ends
 * included), through the vector exponential and the division by the sum,
 * raise no underflow flag. It failed before s31 on both: dropped lanes of
 * the exponential's integer rounding, and quotients below 2^-126 from
 * normal dividends. */
static void
test_softmax_makes_no_subnormal (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (53);
  float x[70], e[70];
  guint64 tiny = 0;

  if (!dc_math_exp_shifted_path (DC_MATH_SIMD_AVX2, x, 0.0f, e, 0))
    {
      g_test_skip ("this CPU has no AVX2: no vector rows to check");
      return;
    }
  _dc_math_set_subnormal_quotients (1);
  for (int round = 0; round < 20000; round++)
    {
      gsize n = (gsize) g_rand_int_range (rand, 1, G_N_ELEMENTS (x) + 1);
      float c = (float) g_rand_double_range (rand, -10.0, 10.0), sum = 0.0f;

      for (gsize i = 0; i < n; i++)
        x[i] = c - (float) g_rand_double_range (rand, 0.0, g_rand_boolean (rand) ? 120.0 : 20.0);
      x[g_rand_int_range (rand, 0, (int) n)] = c;
      feclearexcept (FE_ALL_EXCEPT);
      g_assert_true (dc_math_exp_shifted_path (DC_MATH_SIMD_AVX2, x, c, e, n));
      if (fetestexcept (FE_UNDERFLOW))
        g_error ("the vector exponential made a subnormal (row %d, length %" G_GSIZE_FORMAT ")",
                 round, n);
      for (gsize i = 0; i < n; i++)
        {
          sum += e[i];
          tiny += e[i] < 0x1p-126f && e[i] > 0.0f;
        }
      feclearexcept (FE_ALL_EXCEPT);
      g_assert_true (dc_math_divide_row_path (DC_MATH_SIMD_AVX2, e, sum, n));
      if (fetestexcept (FE_UNDERFLOW))
        g_error ("the vector division made a subnormal (row %d, sum %a)", round, (double) sum);
    }
  _dc_math_set_subnormal_quotients (-1);
  g_test_message ("%" G_GUINT64_FORMAT " subnormal exponentials counted in steps", tiny);
  g_assert_cmpuint (tiny, >, 10000);
}

/* dc_math_max () on the vector path against the scan, bit for bit: rows of
 * every length to 80 (and some of 1,000) mixing NaNs of several payloads
 * and signs (the first met is the result), zeros of both signs (of a zero
 * maximum the first met), infinities, subnormals and repeated maxima. */
static void
test_max_vector (void)
{
  static const guint32 specials[] = {
    0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fa00000u, 0x00000000u, 0x80000000u,
    0x7f800000u, 0xff800000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x3f800000u,
  };
  g_autoptr(GRand) rand = g_rand_new_with_seed (59);
  float x[1000];
  guint64 checked = 0, nan_rows = 0, zero_rows = 0;
  float got;

  if (!dc_math_max_path (DC_MATH_SIMD_AVX2, x, 0, &got))
    {
      g_test_skip ("this CPU has no AVX2: no vector maximum to compare");
      return;
    }
  for (int round = 0; round < 200000; round++)
    {
      gsize n = round % 100 == 0 ? 1000 : (gsize) g_rand_int_range (rand, 0, 81);
      int kind = g_rand_int_range (rand, 0, 5);
      float want, plain;

      for (gsize i = 0; i < n; i++)
        {
          switch (kind)
            {
            case 0: /* ordinary values */
              x[i] = (float) g_rand_double_range (rand, -100.0, 100.0);
              break;
            case 1: /* zeros and negatives: a zero maximum */
              x[i] = g_rand_boolean (rand) ? float_of (g_rand_boolean (rand) ? 0x80000000u : 0u)
                                           : -(float) g_rand_double_range (rand, 0.0, 5.0);
              break;
            case 2: /* few distinct values: repeated maxima */
              x[i] = (float) g_rand_int_range (rand, -3, 3);
              break;
            default: /* anything, specials often */
              x[i] = g_rand_int_range (rand, 0, 4) == 0
                       ? float_of (specials[g_rand_int_range (rand, 0, G_N_ELEMENTS (specials))])
                       : float_of (g_rand_int (rand));
              break;
            }
        }
      g_assert_true (dc_math_max_path (DC_MATH_SIMD_SCALAR, x, n, &want));
      g_assert_true (dc_math_max_path (DC_MATH_SIMD_AVX2, x, n, &got));
      plain = dc_math_max (x, n);
      if (bits_of (got) != bits_of (want) || bits_of (plain) != bits_of (want))
        g_error ("max of %" G_GSIZE_FORMAT " (kind %d): vector %08x, dc_math_max %08x, scan %08x",
                 n, kind, bits_of (got), bits_of (plain), bits_of (want));
      nan_rows += want != want;
      zero_rows += want == 0.0f;
      checked++;
    }
  g_test_message ("%" G_GUINT64_FORMAT " rows agree, %" G_GUINT64_FORMAT " with a NaN, %"
                  G_GUINT64_FORMAT " with a zero maximum", checked, nan_rows, zero_rows);
  g_assert_cmpuint (nan_rows, >, 1000);
  g_assert_cmpuint (zero_rows, >, 1000);
}

/* dc_math_adam_elements () (eight lanes at a time where the CPU has AVX2)
 * against its documented lines written out here, one volatile f32
 * operation each, bit for bit: ordinary values, specials (NaN, infinities,
 * zeros of both signs, subnormals, huge values) in every array, lengths 0
 * to 40, in place and into other buffers. */
static void
test_adam_elements (void)
{
  static const guint32 specials[] = {
    0x7fc00000u, 0xffc01234u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
    0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x1e3ce508u, 0x3f800000u,
  };
  g_autoptr(GRand) rand = g_rand_new_with_seed (61);
  float p[40], g[40], m[40], v[40], op[40], om[40], ov[40], wp[40], wm[40], wv[40];
  guint64 checked = 0;

  for (int round = 0; round < 40000; round++)
    {
      gsize n = (gsize) g_rand_int_range (rand, 0, 41);
      gboolean in_place = g_rand_boolean (rand);
      float lr = (float) g_rand_double_range (rand, 1e-4, 1e-2);
      float bc1 = (float) g_rand_double_range (rand, 0.1, 1.0);
      float bc2 = (float) g_rand_double_range (rand, 0.001, 1.0);
      float *arrays[4] = { p, g, m, v };

      for (int a = 0; a < 4; a++)
        for (gsize i = 0; i < n; i++)
          arrays[a][i] = g_rand_int_range (rand, 0, 8) == 0
                           ? float_of (specials[g_rand_int_range (rand, 0, G_N_ELEMENTS (specials))])
                           : (float) g_rand_double_range (rand, a == 3 ? 0.0 : -2.0, 2.0);
      for (gsize i = 0; i < n; i++)
        {
          volatile float gi = g[i], mi = DC_TEST_BETA1 * m[i], vi = DC_TEST_BETA2 * v[i];
          volatile float gg = gi * gi, mhat, vhat, denom, update;

          mi = mi + (1.0f - DC_TEST_BETA1) * gi;
          vi = vi + (1.0f - DC_TEST_BETA2) * gg;
          wm[i] = mi;
          wv[i] = vi;
          mhat = mi / bc1;
          vhat = vi / bc2;
          denom = sqrtf (vhat) + DC_TEST_EPS;
          update = lr * mhat;
          wp[i] = p[i] - update / denom;
        }
      if (in_place)
        {
          memcpy (op, p, n * sizeof *p);
          memcpy (om, m, n * sizeof *m);
          memcpy (ov, v, n * sizeof *v);
          dc_math_adam_elements (op, g, om, ov, op, om, ov, n, lr, bc1, bc2, DC_TEST_BETA1,
                                 DC_TEST_BETA2, DC_TEST_EPS);
        }
      else
        dc_math_adam_elements (p, g, m, v, op, om, ov, n, lr, bc1, bc2, DC_TEST_BETA1,
                               DC_TEST_BETA2, DC_TEST_EPS);
      for (gsize i = 0; i < n; i++)
        {
          /* A NaN's payload may come from either operand of a commutative
           * operation (the compiler may swap them): only NaN is asked. */
          gboolean ok = (isnan (wp[i]) ? isnan (op[i]) : bits_of (op[i]) == bits_of (wp[i]))
                        && (isnan (wm[i]) ? isnan (om[i]) : bits_of (om[i]) == bits_of (wm[i]))
                        && (isnan (wv[i]) ? isnan (ov[i]) : bits_of (ov[i]) == bits_of (wv[i]));

          if (!ok)
            g_error ("adam (p %a g %a m %a v %a): %08x %08x %08x, the lines %08x %08x %08x",
                     (double) p[i], (double) g[i], (double) m[i], (double) v[i], bits_of (op[i]),
                     bits_of (om[i]), bits_of (ov[i]), bits_of (wp[i]), bits_of (wm[i]),
                     bits_of (wv[i]));
        }
      checked += n;
    }
  g_test_message ("%" G_GUINT64_FORMAT " elements agree", checked);
}

/* dc_math_layer_norm_backward () (eight lanes at a time where the CPU has
 * AVX2) against its lines written out here, bit for bit (a NaN only as a
 * NaN): rows of 1 to 70 with ordinary values and scattered specials in x,
 * the weights and dy. */
static void
test_layer_norm_backward_lines (void)
{
  static const guint32 specials[] = {
    0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u,
    0x807fffffu, 0x7f7fffffu, 0x3f800000u,
  };
  g_autoptr(GRand) rand = g_rand_new_with_seed (67);
  float x[70], w[70], dy[70], dx[70], dw[70], db[70], want_dx[70], want_dw[70], want_db[70], t[70];
  guint64 checked = 0;

  for (int round = 0; round < 20000; round++)
    {
      gsize n = (gsize) g_rand_int_range (rand, 1, 71);
      float mean = (float) g_rand_double_range (rand, -1.0, 1.0);
      float rstd = (float) g_rand_double_range (rand, 0.1, 10.0);
      float fn = (float) n, g_mean, gn_mean;
      float *arrays[5] = { x, w, dy, dw, db };

      for (int a = 0; a < 5; a++)
        for (gsize i = 0; i < n; i++)
          arrays[a][i] = g_rand_int_range (rand, 0, 16) == 0
                           ? float_of (specials[g_rand_int_range (rand, 0, G_N_ELEMENTS (specials))])
                           : (float) g_rand_double_range (rand, -3.0, 3.0);
      for (gsize i = 0; i < n; i++)
        {
          volatile float a = w[i], b = dy[i];

          t[i] = a * b;
        }
      g_mean = dc_math_sum (t, n) / fn;
      for (gsize i = 0; i < n; i++)
        {
          volatile float g = w[i] * dy[i], d = x[i] - mean, norm = d * rstd;

          t[i] = g * norm;
        }
      gn_mean = dc_math_sum (t, n) / fn;
      for (gsize i = 0; i < n; i++)
        {
          volatile float d = x[i] - mean, norm = d * rstd, g = w[i] * dy[i];
          volatile float a = g - g_mean, b = norm * gn_mean, c = a - b, p = dy[i] * norm;

          want_dx[i] = c * rstd;
          want_dw[i] = dw[i] + p;
          want_db[i] = db[i] + dy[i];
        }
      dc_math_layer_norm_backward (x, w, mean, rstd, dy, dx, dw, db, n);
      for (gsize i = 0; i < n; i++)
        {
          gboolean ok = (isnan (want_dx[i]) ? isnan (dx[i]) : bits_of (dx[i]) == bits_of (want_dx[i]))
                        && (isnan (want_dw[i]) ? isnan (dw[i]) : bits_of (dw[i]) == bits_of (want_dw[i]))
                        && (isnan (want_db[i]) ? isnan (db[i]) : bits_of (db[i]) == bits_of (want_db[i]));

          if (!ok)
            g_error ("layer norm backward, row of %" G_GSIZE_FORMAT ", element %" G_GSIZE_FORMAT
                     ": %08x %08x %08x, the lines %08x %08x %08x", n, i, bits_of (dx[i]),
                     bits_of (dw[i]), bits_of (db[i]), bits_of (want_dx[i]), bits_of (want_dw[i]),
                     bits_of (want_db[i]));
        }
      checked += n;
    }
  g_test_message ("%" G_GUINT64_FORMAT " elements agree", checked);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("DC_MATH_SWEEP") != NULL)
    n_sweep = (guint) g_ascii_strtoull (g_getenv ("DC_MATH_SWEEP"), NULL, 10);

  for (gsize i = 0; i < G_N_ELEMENTS (oracle_cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/dc/engine/math/oracle/%s", oracle_cases[i].name);

      g_test_add_data_func (path, &oracle_cases[i], test_oracle);
    }

  g_test_add_func ("/dc/engine/math/fp-environment", test_fp_environment);
  g_test_add_func ("/dc/engine/math/pairwise-tree-order", test_pairwise_tree_order);
  g_test_add_func ("/dc/engine/math/monotone", test_monotone);
  g_test_add_func ("/dc/engine/math/special-values", test_special_values);
  g_test_add_func ("/dc/engine/math/oracle/pow", test_pow_oracle);
  g_test_add_func ("/dc/engine/math/pow-special", test_pow_special);
  g_test_add_func ("/dc/engine/math/sincos-agrees", test_sincos_agrees);
  g_test_add_func ("/dc/engine/math/hashes", test_hashes);
  g_test_add_func ("/dc/engine/math/sum-order", test_sum_order);
  g_test_add_func ("/dc/engine/math/softmax", test_softmax);
  g_test_add_func ("/dc/engine/math/softmax-special", test_softmax_special);
  g_test_add_func ("/dc/engine/math/log-softmax", test_log_softmax);
  g_test_add_func ("/dc/engine/math/softmax-backward", test_softmax_backward);
  g_test_add_func ("/dc/engine/math/layer-norm", test_layer_norm);
  g_test_add_func ("/dc/engine/math/layer-norm-finite-differences",
                   test_layer_norm_finite_differences);
  g_test_add_func ("/dc/engine/math/rms-norm", test_rms_norm);
  g_test_add_func ("/dc/engine/math/norm-special", test_norm_special);
  g_test_add_func ("/dc/engine/math/activation-backward", test_activation_backward);
  g_test_add_func ("/dc/engine/math/bias-relu-fused", test_bias_relu_fused);
  g_test_add_func ("/dc/engine/math/cross-entropy", test_cross_entropy);
  g_test_add_func ("/dc/engine/math/adamw", test_adamw);
  g_test_add_func ("/dc/engine/math/rope", test_rope);
  g_test_add_func ("/dc/engine/math/silu-vector", test_silu_vector);
  g_test_add_func ("/dc/engine/math/exp-shifted-vector", test_exp_shifted_vector);
  g_test_add_func ("/dc/engine/math/tiny-products", test_tiny_products);
  g_test_add_func ("/dc/engine/math/softmax-tiny", test_softmax_tiny);
  g_test_add_func ("/dc/engine/math/softmax-division", test_softmax_division);
  g_test_add_func ("/dc/engine/math/max-vector", test_max_vector);
  g_test_add_func ("/dc/engine/math/adam-elements", test_adam_elements);
  g_test_add_func ("/dc/engine/math/layer-norm-backward-lines", test_layer_norm_backward_lines);
  g_test_add_func ("/dc/engine/math/softmax-makes-no-subnormal", test_softmax_makes_no_subnormal);
  g_test_add_func ("/dc/engine/math/vector-hash", test_vector_hash);
  g_test_add_func ("/dc/engine/math/probe-hash", test_probe_hash);

  return g_test_run ();
}
