/* test-engine-transpose.c: dc_transpose_f32 (8 × 8 AVX blocks plus ragged
 * edges) gives the plain loop's output bit for bit, NaN payloads and signed
 * zeros included, on shapes around the block sizes and with leading
 * dimensions wider than the matrix; and it leaves the rest of dst alone.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "engine/dc-transpose.h"

static void
test_transpose_matches_reference (void)
{
  static const gsize shapes[][2] = {
    { 1, 1 }, { 1, 9 }, { 9, 1 }, { 7, 7 }, { 8, 8 }, { 9, 17 }, { 16, 8 }, { 31, 33 },
    { 32, 32 }, { 33, 64 }, { 64, 65 }, { 100, 37 }, { 128, 384 }, { 4096, 16 },
  };
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);

  for (gsize s = 0; s < G_N_ELEMENTS (shapes); s++)
    for (gsize pad = 0; pad < 2; pad++)
      {
        const gsize rows = shapes[s][0], cols = shapes[s][1];
        const gsize ld_src = cols + pad * 5, ld_dst = rows + pad * 3;
        g_autofree guint32 *src = g_new (guint32, rows * ld_src);
        g_autofree guint32 *got = g_new (guint32, cols * ld_dst);
        g_autofree guint32 *want = g_new (guint32, cols * ld_dst);

        /* Arbitrary bit patterns: NaNs with payloads, -0, subnormals. */
        for (gsize i = 0; i < rows * ld_src; i++)
          src[i] = g_rand_int (rand);
        src[0] = 0x80000000u;
        memset (got, 0xa5, cols * ld_dst * sizeof *got);
        memset (want, 0xa5, cols * ld_dst * sizeof *want);
        dc_transpose_f32 ((const float *) src, ld_src, rows, cols, (float *) got, ld_dst);
        dc_transpose_f32_reference ((const float *) src, ld_src, rows, cols, (float *) want,
                                    ld_dst);
        g_assert_cmpmem (got, cols * ld_dst * sizeof *got, want, cols * ld_dst * sizeof *want);
        /* And the reference is a transpose. */
        for (gsize r = 0; r < rows; r++)
          for (gsize c = 0; c < cols; c++)
            g_assert_cmphex (want[c * ld_dst + r], ==, src[r * ld_src + c]);
      }
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/engine/transpose/matches-reference", test_transpose_matches_reference);
  return g_test_run ();
}
