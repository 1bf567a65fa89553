/* test-engine-math.c: the IEEE-754 oracle for the deterministic math library.
 *
 * Each scalar function of src/engine/dc-math.c is compared with MPFR's value
 * of the exact real function at 128 bits over a dense sweep (evenly spaced in
 * the floats' own order, so every binade is covered) plus seeded random
 * points, and its largest error in ULPs must stay within the bound that
 * docs/VERIFICATION.md documents. Special values are checked bit for bit,
 * a hash of outputs over a fixed sweep pins the exact rule, and the vector
 * operations are checked against double-precision references and finite
 * differences.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>
#include <glib.h>
#include <mpfr.h>

#include "engine/dc-math.h"

#define PREC 128

/* Points per function: the even sweep plus half as many random ones.
 * DC_MATH_SWEEP=N raises the sweep for a deeper run by hand (the figures in
 * docs/VERIFICATION.md come from one). */
static guint n_sweep = 60000;
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
  { "tanh", dc_math_tanhf, ref_tanh, METRIC_ULP, -12.0f, 12.0f, TRUE, 3.0 },
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
                  c->name, m.max_err, c->metric == METRIC_ULP ? "ulp" : "× 2^-24",
                  m.worst_x, m.worst_x, m.n_points, c->lo, c->hi, c->bound);
  if (g_getenv ("DC_MATH_REPORT") != NULL)
    g_printerr ("ORACLE %s %.3f %a %u\n", c->name, m.max_err, m.worst_x, m.n_points);
  g_assert_cmpfloat (m.max_err, <=, c->bound);
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
  { "tanh", dc_math_tanhf, G_GUINT64_CONSTANT (0x5b0e1d2232829474) },
  { "sigmoid", dc_math_sigmoidf, G_GUINT64_CONSTANT (0xd97424a5ab2e72cf) },
  { "sin", dc_math_sinf, G_GUINT64_CONSTANT (0xea4baaa9b5be6e14) },
  { "cos", dc_math_cosf, G_GUINT64_CONSTANT (0x65e6409d8f313d0f) },
  { "rsqrt", dc_math_rsqrtf, G_GUINT64_CONSTANT (0xe0e55ea32159f6c4) },
  { "silu", dc_math_siluf, G_GUINT64_CONSTANT (0xa843249ab8c3db21) },
  { "silu-deriv", dc_math_silu_derivf, G_GUINT64_CONSTANT (0x7bc60eb97dcdce93) },
  { "gelu", dc_math_gelu_tanhf, G_GUINT64_CONSTANT (0x456bd007110c8bae) },
  { "gelu-deriv", dc_math_gelu_tanh_derivf, G_GUINT64_CONSTANT (0xb6fb01f2f0139897) },
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

  g_test_add_func ("/dc/engine/math/special-values", test_special_values);
  g_test_add_func ("/dc/engine/math/sincos-agrees", test_sincos_agrees);
  g_test_add_func ("/dc/engine/math/hashes", test_hashes);

  return g_test_run ();
}
