/* dc-math-probe.c: a hash that identifies what the math library computes.
 *
 * DESIGN.md ("Replicas") has peers exchange an identifier derived from the
 * numeric rule, so builds that compute different bits never train together.
 * A version number alone would trust the compiler and the FP environment;
 * this hash is computed at run time from the actual outputs, so a miscompiled
 * build, an FTZ/DAZ environment or a changed algorithm all show up as a
 * different value. It complements the GEMM probe hash.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-math.h"

#include <string.h>

#define PROBE_N 4096
#define ROW_N 97   /* odd, above the 8-element leaf, not a power of two */

static guint64
fnv1a_float (guint64 h,
             float   x)
{
  guint32 v;

  memcpy (&v, &x, sizeof v);
  for (int i = 0; i < 4; i++)
    {
      h ^= (v >> (8 * i)) & 0xff;
      h *= G_GUINT64_CONSTANT (0x100000001b3);
    }
  return h;
}

/* The i-th probe input: PROBE_N points evenly spaced in float order over
 * [-2^7, 2^7] (every binade from 2^-126 up, both signs, subnormals near 0),
 * built from integers only so that no arithmetic can vary. */
static float
probe_input (guint i)
{
  /* Ordinal of 128.0f is 0x43000000; the step covers ±128 in PROBE_N points. */
  gint64 span = 0x43000000;
  gint64 o = -span + (gint64) i * ((2 * span) / PROBE_N);
  guint32 u = o < 0 ? (guint32) (-(o + 1)) | 0x80000000u : (guint32) o;
  float x;

  memcpy (&x, &u, sizeof x);
  return x;
}

/**
 * dc_math_probe_hash:
 *
 * Runs every scalar function of the library over a fixed set of 4096
 * inputs, and every vector operation over fixed rows, and hashes the output
 * bits (FNV-1a, 64 bits). Equal on every machine that computes the rule
 * exactly; tests/test-engine-math.c records the expected value. Takes about
 * a millisecond.
 *
 * Returns: the hash
 */
guint64
dc_math_probe_hash (void)
{
  float row[ROW_N], w[ROW_N], y[ROW_N], dx[ROW_N], dw[ROW_N], db[ROW_N];
  guint64 h = G_GUINT64_CONSTANT (0xcbf29ce484222325);
  float mean, rstd;

  for (guint i = 0; i < PROBE_N; i++)
    {
      float x = probe_input (i);
      float s, c;

      h = fnv1a_float (h, dc_math_expf (x));
      h = fnv1a_float (h, dc_math_expm1f (x));
      h = fnv1a_float (h, dc_math_logf (x));
      h = fnv1a_float (h, dc_math_tanhf (x));
      h = fnv1a_float (h, dc_math_sigmoidf (x));
      dc_math_sincosf (x * 256.0f, &s, &c);   /* up to 32768: RoPE's range */
      h = fnv1a_float (h, s);
      h = fnv1a_float (h, c);
      h = fnv1a_float (h, dc_math_rsqrtf (x));
      h = fnv1a_float (h, dc_math_siluf (x));
      h = fnv1a_float (h, dc_math_silu_derivf (x));
      h = fnv1a_float (h, dc_math_gelu_tanhf (x));
      h = fnv1a_float (h, dc_math_gelu_tanh_derivf (x));
      h = fnv1a_float (h, dc_math_reluf (x));
      /* |x| to a power in [-8, 8], and RoPE's base^(-2i/d). */
      h = fnv1a_float (h, dc_math_powf (x < 0.0f ? -x : x,
                                        probe_input (PROBE_N - 1 - i) * 0x1p-4f));
      h = fnv1a_float (h, dc_math_powf (500000.0f, -(float) (i % 64) / 64.0f));
    }

  /* Rows of logits and activations of every magnitude up to ±128, and
   * weights in [0.5, 1.5]. */
  for (guint i = 0; i < ROW_N; i++)
    {
      row[i] = probe_input (41 * i + 17);
      w[i] = 1.0f + probe_input (29 * i + 5) * 0x1p-8f;
      dw[i] = db[i] = 0.0f;
    }
  h = fnv1a_float (h, dc_math_sum (row, ROW_N));
  h = fnv1a_float (h, dc_math_dot (row, w, ROW_N));
  dc_math_softmax (row, y, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (h, y[i]);
  dc_math_softmax_backward (y, w, dx, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (h, dx[i]);
  dc_math_log_softmax (row, y, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (h, y[i]);
  dc_math_log_softmax_backward (y, w, dx, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (h, dx[i]);
  dc_math_layer_norm (row, w, w, DC_MATH_GPT2_LN_EPS, y, &mean, &rstd, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (h, y[i]);
  dc_math_layer_norm_backward (row, w, mean, rstd, w, dx, dw, db, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (fnv1a_float (fnv1a_float (h, dx[i]), dw[i]), db[i]);
  dc_math_rms_norm (row, w, 0x1.0c6f7ap-20f /* 1e-6 */, y, &rstd, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (h, y[i]);
  dc_math_rms_norm_backward (row, w, rstd, w, dx, dw, ROW_N);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (fnv1a_float (h, dx[i]), dw[i]);
  h = fnv1a_float (h, dc_math_cross_entropy (row, ROW_N, ROW_N / 3));
  dc_math_cross_entropy_backward (row, ROW_N, ROW_N / 3, 0.5f, dx);
  for (guint i = 0; i < ROW_N; i++)
    {
      h = fnv1a_float (h, dx[i]);
      dw[i] = db[i] = 0.0f;
    }
  for (guint64 t = 1; t <= 3; t++)
    dc_math_adamw_update (w, dx, dw, db, ROW_N, t, 0x1.3a92a4p-12f /* 3e-4 */,
                          0x1.ccccccp-1f /* 0.9 */, 0x1.e66666p-1f /* 0.95 */,
                          0x1.5798eep-27f /* 1e-8 */, 0x1.99999ap-4f /* 0.1 */);
  for (guint i = 0; i < ROW_N; i++)
    h = fnv1a_float (fnv1a_float (fnv1a_float (h, w[i]), dw[i]), db[i]);
  /* RoPE at a few positions up to 32768 (row's first 64 values as a head). */
  for (gsize pos = 0; pos <= 32768; pos += 8191)
    {
      dc_math_rope_table (500000.0f, 64, pos, dx, dw);
      dc_math_rope_apply (row, dx, dw, 64);
      for (guint i = 0; i < 64; i++)
        h = fnv1a_float (h, row[i]);
      dc_math_rope_apply_backward (row, dx, dw, 64);
      for (guint i = 0; i < 64; i++)
        h = fnv1a_float (h, row[i]);
    }
  return h;
}
