/* fuzz-engine-gemm.c: libFuzzer target for everything the GEMM takes from
 * outside: float operands (any bits: NaN, infinities, subnormals) through
 * dc_quant_pack, and hand-filled quantized operands (any bytes, -128
 * included, any exponents) through dc_gemm_run. It checks that bad input is
 * refused with an error, never a crash, and that the scalar and the SIMD
 * threaded paths give the same bits (a differential oracle).
 *
 * Input: M (1 byte), N (1 byte), K (2 bytes, little-endian), a mode byte, then
 * the data, cycled to fill the operands.
 *
 * Build: CC=clang meson setup build-fuzz -Dfuzzers=true
 * Run:   build-fuzz/tests/fuzz/fuzz-engine-gemm -runs=200000
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/dc-gemm-backend.h"

int LLVMFuzzerTestOneInput (const guint8 *data, size_t size);

static DcGemmBackend *scalar, *simd;

static void
fill (guint8       *dst,
      gsize         n,
      const guint8 *src,
      gsize         src_size)
{
  for (gsize i = 0; i < n; i++)
    dst[i] = src_size ? src[i % src_size] : 0;
}

static void
compare_paths (const DcQuantMatrix *a,
               const DcQuantMatrix *b)
{
  const gsize n = a->n_vectors * b->n_vectors;
  g_autofree float *c1 = g_new (float, n);
  g_autofree float *c2 = g_new (float, n);
  g_autoptr(GError) e1 = NULL;
  g_autoptr(GError) e2 = NULL;
  gboolean ok1 = dc_gemm_run (scalar, a, b, c1, &e1);
  gboolean ok2 = dc_gemm_run (simd, a, b, c2, &e2);

  if (ok1 != ok2 || (ok1 && memcmp (c1, c2, n * sizeof (float)) != 0))
    abort ();
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        size_t        size)
{
  g_autoptr(DcQuantMatrix) a = NULL;
  g_autoptr(DcQuantMatrix) b = NULL;
  gsize M, N, K;
  guint8 mode;

  if (scalar == NULL)
    {
      scalar = dc_gemm_backend_new (DC_BACKEND_CPU_SCALAR, NULL);
      simd = dc_gemm_backend_new (DC_BACKEND_CPU, NULL);
      dc_gemm_backend_set_n_threads (simd, 3);
    }
  if (size < 5)
    return 0;
  M = data[0] % 40 + 1;
  N = data[1] % 40 + 1;
  K = (data[2] | (data[3] << 8)) % 700 + 1;
  mode = data[4];
  data += 5;
  size -= 5;

  a = dc_quant_matrix_new (M, K, NULL);
  b = dc_quant_matrix_new (N, K, NULL);
  if (mode & 1)
    {
      /* Raw quantized operands: -128 and wild exponents must be refused. */
      fill ((guint8 *) a->q, M * K, data, size);
      fill ((guint8 *) b->q, N * K, data + size / 2, size - size / 2);
      fill ((guint8 *) a->exponent, M * 4, data, size);
      fill ((guint8 *) b->exponent, N * 4, data + size / 3, size - size / 3);
      if (mode & 2)
        {
          for (gsize v = 0; v < M; v++)
            a->exponent[v] %= 200;
          for (gsize v = 0; v < N; v++)
            b->exponent[v] %= 200;
        }
    }
  else
    {
      g_autofree float *x = g_new (float, M * K);
      g_autofree float *w = g_new (float, N * K);

      fill ((guint8 *) x, M * K * 4, data, size);
      fill ((guint8 *) w, N * K * 4, data + size / 2, size - size / 2);
      if (!dc_quant_pack ("fuzz x", x, K, 1, a, NULL) ||
          !dc_quant_pack ("fuzz w", w, K, 1, b, NULL))
        return 0;
    }
  compare_paths (a, b);
  return 0;
}
