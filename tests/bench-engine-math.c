/* bench-engine-math.c: throughput of the deterministic math library.
 *
 * Run with `meson test -C build --benchmark bench-engine-math` (or the
 * executable directly). Prints, per function, nanoseconds per element over
 * one million inputs, next to glibc's libm function where one exists (libm
 * is used here only as a yardstick; it never enters a model). The best of
 * five runs is reported, so a loaded machine disturbs the figures less.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <glib.h>

#include "engine/dc-math.h"

#define N (1 << 20)
#define RUNS 5

typedef float (*ScalarFunc) (float x);

static volatile float sink;

static double
time_scalar (ScalarFunc f, const float *x)
{
  double best = G_MAXDOUBLE;

  for (int run = 0; run < RUNS; run++)
    {
      gint64 t0 = g_get_monotonic_time ();
      float acc = 0.0f;

      for (gsize i = 0; i < N; i++)
        acc += f (x[i]);
      sink = acc;
      best = MIN (best, (double) (g_get_monotonic_time () - t0) * 1000.0 / N);
    }
  return best;
}

static float libm_expf (float x) { return expf (x); }
static float libm_logf (float x) { return logf (x); }
static float libm_tanhf (float x) { return tanhf (x); }
static float libm_sinf (float x) { return sinf (x); }
static float libm_cosf (float x) { return cosf (x); }
static float libm_rsqrtf (float x) { return 1.0f / sqrtf (x); }
static float libm_siluf (float x) { return x / (1.0f + expf (-x)); }
static float libm_geluf (float x)
{
  return 0.5f * x * (1.0f + tanhf (0.7978845608f * (x + 0.044715f * x * x * x)));
}

typedef struct
{
  const char *name;
  ScalarFunc  ours;
  ScalarFunc  libm;
  double      lo, hi;
} BenchCase;

static const BenchCase cases[] = {
  { "exp", dc_math_expf, libm_expf, -20, 20 },
  { "expm1", dc_math_expm1f, NULL, -20, 20 },
  { "log", dc_math_logf, libm_logf, 1e-3, 1e3 },
  { "tanh", dc_math_tanhf, libm_tanhf, -5, 5 },
  { "sigmoid", dc_math_sigmoidf, NULL, -10, 10 },
  { "sin (RoPE range)", dc_math_sinf, libm_sinf, 0, 32768 },
  { "cos (RoPE range)", dc_math_cosf, libm_cosf, 0, 32768 },
  { "rsqrt", dc_math_rsqrtf, libm_rsqrtf, 1e-3, 1e3 },
  { "silu", dc_math_siluf, libm_siluf, -8, 8 },
  { "gelu_new", dc_math_gelu_tanhf, libm_geluf, -8, 8 },
  { "silu derivative", dc_math_silu_derivf, NULL, -8, 8 },
  { "gelu_new derivative", dc_math_gelu_tanh_derivf, NULL, -8, 8 },
};

int
main (int argc, char **argv)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (1);
  g_autofree float *x = g_new (float, N);
  g_autofree float *y = g_new (float, N);
  g_autofree float *w = g_new (float, N);
  g_autofree float *b = g_new (float, N);

  g_print ("%-22s %12s %12s\n", "function", "dc-math ns", "glibc ns");
  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      for (gsize i = 0; i < N; i++)
        x[i] = (float) g_rand_double_range (rand, cases[c].lo, cases[c].hi);
      if (cases[c].libm != NULL)
        g_print ("%-22s %12.2f %12.2f\n", cases[c].name, time_scalar (cases[c].ours, x),
                 time_scalar (cases[c].libm, x));
      else
        g_print ("%-22s %12.2f %12s\n", cases[c].name, time_scalar (cases[c].ours, x), "-");
    }

  /* Rows the models use: GPT-2's vocabulary and widths, Llama-style RMS norm. */
  for (gsize i = 0; i < N; i++)
    {
      x[i] = (float) g_rand_double_range (rand, -10, 10);
      w[i] = (float) g_rand_double_range (rand, 0.5, 1.5);
      b[i] = (float) g_rand_double_range (rand, -0.5, 0.5);
    }
  {
    const struct { const char *name; gsize n; int op; } rows[] = {
      { "softmax n=50257", 50257, 0 },
      { "log_softmax n=50257", 50257, 1 },
      { "softmax n=1024", 1024, 0 },
      { "layer_norm n=768", 768, 2 },
      { "rms_norm n=4096", 4096, 3 },
      { "sum n=1048576", N, 4 },
    };

    for (gsize r = 0; r < G_N_ELEMENTS (rows); r++)
      {
        gsize n = rows[r].n, reps = N / n;
        double best = G_MAXDOUBLE;

        for (int run = 0; run < RUNS; run++)
          {
            gint64 t0 = g_get_monotonic_time ();

            for (gsize k = 0; k < reps; k++)
              {
                float *row = x + k * n;

                switch (rows[r].op)
                  {
                  case 0: dc_math_softmax (row, y, n); break;
                  case 1: dc_math_log_softmax (row, y, n); break;
                  case 2: dc_math_layer_norm (row, w, b, DC_MATH_GPT2_LN_EPS, y, NULL, NULL, n); break;
                  case 3: dc_math_rms_norm (row, w, 1e-6f, y, NULL, n); break;
                  default: sink = dc_math_sum (row, n); break;
                  }
              }
            best = MIN (best, (double) (g_get_monotonic_time () - t0) * 1000.0 / (double) (reps * n));
          }
        g_print ("%-22s %12.2f %12s\n", rows[r].name, best, "-");
      }
  }
  return 0;
}
