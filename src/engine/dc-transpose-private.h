/* dc-transpose-private.h: the 8 × 8 float transpose in AVX registers,
 * shared by the blocked transpose (dc-transpose.c) and the column
 * quantizer (dc-quant-simd.c). Shuffles move bits and never compute.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* in[0..7] (eight rows of eight) into out[c] = column c's eight rows. */
__attribute__ ((target ("avx"))) static inline void
dc_transpose_8x8_ps (const __m256 in[8],
                     __m256       out[8])
{
  __m256 t[8], s[8];

  for (int i = 0; i < 8; i += 2)
    {
      t[i] = _mm256_unpacklo_ps (in[i], in[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps (in[i], in[i + 1]);
    }
  for (int i = 0; i < 8; i += 4)
    {
      s[i] = _mm256_shuffle_ps (t[i], t[i + 2], _MM_SHUFFLE (1, 0, 1, 0));
      s[i + 1] = _mm256_shuffle_ps (t[i], t[i + 2], _MM_SHUFFLE (3, 2, 3, 2));
      s[i + 2] = _mm256_shuffle_ps (t[i + 1], t[i + 3], _MM_SHUFFLE (1, 0, 1, 0));
      s[i + 3] = _mm256_shuffle_ps (t[i + 1], t[i + 3], _MM_SHUFFLE (3, 2, 3, 2));
    }
  for (int i = 0; i < 4; i++)
    {
      out[i] = _mm256_permute2f128_ps (s[i], s[i + 4], 0x20);
      out[i + 4] = _mm256_permute2f128_ps (s[i], s[i + 4], 0x31);
    }
}
#endif
