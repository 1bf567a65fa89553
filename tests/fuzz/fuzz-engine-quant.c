/* fuzz-engine-quant.c: libFuzzer differential target for the SIMD
 * quantizer. Any float bits (NaN, infinities, subnormals, ties) go through
 * dc_quant_pack (the AVX2 packer where the CPU has it), the ungated AVX2
 * packer and dc_quant_pack_reference; they must agree on success or
 * failure, the error message, and every int8 value and exponent.
 *
 * Input: the vector count (1 byte), K (2 bytes, little-endian), a scale
 * byte (an exponent added to every float, to reach every binade), then the
 * float bits, cycled to fill the matrix.
 *
 * Build: CC=clang meson setup build-fuzz -Dfuzzers=true
 * Run:   build-fuzz/tests/fuzz/fuzz-engine-quant -runs=200000
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/dc-gemm.h"
#include "engine/dc-quant-simd-private.h"

int LLVMFuzzerTestOneInput (const guint8 *data, size_t size);

static gboolean
same (gboolean             ok1,
      const GError        *e1,
      const DcQuantMatrix *m1,
      gboolean             ok2,
      const GError        *e2,
      const DcQuantMatrix *m2)
{
  if (ok1 != ok2)
    return FALSE;
  if (!ok1)
    return g_str_equal (e1->message, e2->message);
  return memcmp (m1->q, m2->q, m1->n_vectors * m1->k) == 0 &&
         memcmp (m1->exponent, m2->exponent, m1->n_vectors * sizeof (gint32)) == 0;
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        size_t        size)
{
  g_autoptr(DcQuantMatrix) ref = NULL;
  g_autoptr(DcQuantMatrix) best = NULL;
  g_autoptr(DcQuantMatrix) avx2 = NULL;
  g_autoptr(GError) e_ref = NULL;
  g_autoptr(GError) e_best = NULL;
  g_autoptr(GError) e_avx2 = NULL;
  g_autofree float *x = NULL;
  gsize nv, k, n;
  gboolean ok_ref, ok_best, ok_avx2;
  guint8 shift;

  if (size < 4)
    return 0;
  nv = (gsize) data[0] % 16 + 1;
  k = ((gsize) data[1] | (gsize) data[2] << 8) % 600 + 1;
  shift = data[3];
  data += 4;
  size -= 4;
  n = nv * k;
  x = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    {
      guint32 u = 0;

      for (int b = 0; b < 4; b++)
        u |= (guint32) (size ? data[(4 * i + b) % size] : 0) << (8 * b);
      /* Move the exponent field by the scale byte (wrapping), keeping sign
       * and mantissa, so that every binade, subnormals and specials occur. */
      u = (u & 0x807fffffu) | ((((u >> 23) & 0xffu) + shift) & 0xffu) << 23;
      memcpy (x + i, &u, sizeof u);
    }

  ref = dc_quant_matrix_new (nv, k, NULL);
  best = dc_quant_matrix_new (nv, k, NULL);
  avx2 = dc_quant_matrix_new (nv, k, NULL);
  ok_ref = dc_quant_pack_reference ("fuzz", x, k, 1, ref, &e_ref);
  ok_best = dc_quant_pack ("fuzz", x, k, 1, best, &e_best);
  if (!same (ok_ref, e_ref, ref, ok_best, e_best, best))
    abort ();
  if (__builtin_cpu_supports ("avx2"))
    {
      ok_avx2 = dc_quant_pack_avx2 ("fuzz", x, k, avx2, &e_avx2);
      if (!same (ok_ref, e_ref, ref, ok_avx2, e_avx2, avx2))
        abort ();
    }
  return 0;
}
