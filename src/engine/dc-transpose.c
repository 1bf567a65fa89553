/* dc-transpose.c: blocked float transpose (8 × 8 AVX shuffles), used to turn
 * column vectors into rows before quantization. Shuffles move bits and never
 * compute, so the output is the input's bits in another order.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-transpose.h"
#include "dc-transpose-private.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DC_TRANSPOSE_X86 1
#endif

/* Tiles of this many rows and columns keep both the source lines read and
 * the destination lines written in L1. */
#define BLOCK 32

void
dc_transpose_f32_reference (const float *src,
                            gsize        ld_src,
                            gsize        rows,
                            gsize        cols,
                            float       *dst,
                            gsize        ld_dst)
{
  for (gsize r0 = 0; r0 < rows; r0 += BLOCK)
    for (gsize c0 = 0; c0 < cols; c0 += BLOCK)
      for (gsize r = r0; r < MIN (r0 + BLOCK, rows); r++)
        for (gsize c = c0; c < MIN (c0 + BLOCK, cols); c++)
          dst[c * ld_dst + r] = src[r * ld_src + c];
}

#ifdef DC_TRANSPOSE_X86

__attribute__ ((target ("avx"))) static inline void
block_8x8_avx (const float *src,
               gsize        ld_src,
               float       *dst,
               gsize        ld_dst)
{
  __m256 r[8], t[8];

  for (int i = 0; i < 8; i++)
    r[i] = _mm256_loadu_ps (src + i * ld_src);
  dc_transpose_8x8_ps (r, t);
  for (int i = 0; i < 8; i++)
    _mm256_storeu_ps (dst + i * ld_dst, t[i]);
}

__attribute__ ((target ("avx"))) static void
transpose_avx (const float *src,
               gsize        ld_src,
               gsize        rows,
               gsize        cols,
               float       *dst,
               gsize        ld_dst)
{
  const gsize rows8 = rows & ~(gsize) 7, cols8 = cols & ~(gsize) 7;

  for (gsize r0 = 0; r0 < rows8; r0 += BLOCK)
    for (gsize c0 = 0; c0 < cols8; c0 += BLOCK)
      for (gsize r = r0; r < MIN (r0 + BLOCK, rows8); r += 8)
        for (gsize c = c0; c < MIN (c0 + BLOCK, cols8); c += 8)
          block_8x8_avx (src + r * ld_src + c, ld_src, dst + c * ld_dst + r, ld_dst);
  /* The ragged right columns and bottom rows. */
  if (cols8 < cols)
    dc_transpose_f32_reference (src + cols8, ld_src, rows, cols - cols8, dst + cols8 * ld_dst,
                                ld_dst);
  if (rows8 < rows)
    dc_transpose_f32_reference (src + rows8 * ld_src, ld_src, rows - rows8, cols8, dst + rows8,
                                ld_dst);
}

#endif /* DC_TRANSPOSE_X86 */

void
dc_transpose_f32 (const float *src,
                  gsize        ld_src,
                  gsize        rows,
                  gsize        cols,
                  float       *dst,
                  gsize        ld_dst)
{
#ifdef DC_TRANSPOSE_X86
  if (__builtin_cpu_supports ("avx"))
    {
      transpose_avx (src, ld_src, rows, cols, dst, ld_dst);
      return;
    }
#endif
  dc_transpose_f32_reference (src, ld_src, rows, cols, dst, ld_dst);
}
