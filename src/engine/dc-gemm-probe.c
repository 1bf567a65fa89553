/* dc-gemm-probe.c: the probe GEMM.
 *
 * Inputs come from SplitMix64 seeded with DC_PROBE_SEED, so that any
 * implementation can regenerate them without GLib: for element i of the
 * row-major (M, K) left and (N, K) right float matrices (left first), draw
 * r = splitmix64 (); the value is (float) ((int) (r & 0xffffff) - 0x800000)
 * · 2^row_shift, exact, with row_shift per vector (see vector_shift()). The
 * shifts put some vectors in the subnormal range, some near the top of the
 * float range and one vector at zero, so quantization, flushing and
 * saturation all enter the hash. The hash is SHA-256 over the M·N int32
 * accumulators, then the M·N f32 outputs, all little-endian, row-major.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-gemm-probe.h"

#include <string.h>

#define DC_PROBE_SEED G_GUINT64_CONSTANT (0x4461697379436831)  /* "DaisyCh1" */

static guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += G_GUINT64_CONSTANT (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* The power of two applied to vector v: a spread in [-40, 40], with vector 3
 * subnormal (2^-160 · up to 2^23 → below 2^-126) and vector 5 near 2^100. */
static int
vector_shift (gsize v)
{
  if (v == 3)
    return -160;
  if (v == 5)
    return 100;
  return (int) (v * 7 % 81) - 40;
}

static float
scaled (gint32 value,
        int    shift)
{
  /* value < 2^24 is exact in float; each doubling or halving is one
   * correctly rounded IEEE-754 operation (exact outside the subnormal range),
   * so every conforming platform gets these bits, and one that flushes
   * subnormals gets a different probe hash, as it should. No libm. */
  float x = (float) value;

  for (int s = 0; s < shift; s++)
    x *= 2.0f;
  for (int s = 0; s > shift; s--)
    x *= 0.5f;
  return x;
}

static void
fill (guint64 *state,
      float   *x,
      gsize    n_vectors,
      gsize    k,
      gsize    zero_vector)
{
  for (gsize v = 0; v < n_vectors; v++)
    for (gsize i = 0; i < k; i++)
      {
        gint32 value = (gint32) (splitmix64 (state) & 0xffffff) - 0x800000;

        x[v * k + i] = v == zero_vector ? 0.0f : scaled (value, vector_shift (v));
      }
}

char *
dc_gemm_probe (DcGemmBackend  *backend,
               GError        **error)
{
  const gsize M = DC_GEMM_PROBE_M, N = DC_GEMM_PROBE_N, K = DC_GEMM_PROBE_K;
  g_autofree float *x = g_new (float, M * K);
  g_autofree float *w = g_new (float, N * K);
  g_autofree gint32 *acc = g_new (gint32, M * N);
  g_autofree float *c = g_new (float, M * N);
  g_autoptr(DcQuantMatrix) a = NULL;
  g_autoptr(DcQuantMatrix) b = NULL;
  g_autoptr(GChecksum) sha = g_checksum_new (G_CHECKSUM_SHA256);
  guint64 state = DC_PROBE_SEED;

  fill (&state, x, M, K, 11);
  fill (&state, w, N, K, 7);

  if ((a = dc_quant_matrix_new (M, K, error)) == NULL ||
      (b = dc_quant_matrix_new (N, K, error)) == NULL ||
      !dc_quant_pack ("probe left operand", x, K, 1, a, error) ||
      !dc_quant_pack ("probe right operand", w, K, 1, b, error) ||
      !dc_gemm_run_i32 (backend, a, b, acc, error) ||
      !dc_gemm_run (backend, a, b, c, error))
    return NULL;

  for (gsize i = 0; i < M * N; i++)
    {
      guint32 u = GUINT32_TO_LE ((guint32) acc[i]);

      g_checksum_update (sha, (const guchar *) &u, 4);
    }
  for (gsize i = 0; i < M * N; i++)
    {
      guint32 u;

      memcpy (&u, &c[i], 4);
      u = GUINT32_TO_LE (u);
      g_checksum_update (sha, (const guchar *) &u, 4);
    }
  return g_strdup (g_checksum_get_string (sha));
}
