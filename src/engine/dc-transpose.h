/* dc-transpose.h: a float matrix transpose, for operands whose vectors are
 * columns (dc_quant_pack reads contiguous vectors much faster). It only
 * moves bits: no arithmetic, so no effect on any result.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * dc_transpose_f32:
 * @src: (array): rows × cols floats, row r at src + r · ld_src
 * @dst: (out caller-allocates): cols × rows floats, row c at dst + c · ld_dst
 *
 * dst[c · ld_dst + r] = src[r · ld_src + c], bit for bit. 8 × 8 AVX blocks
 * where the CPU has AVX, scalar otherwise.
 */
void dc_transpose_f32 (const float *src,
                       gsize        ld_src,
                       gsize        rows,
                       gsize        cols,
                       float       *dst,
                       gsize        ld_dst);

/* The plain loop, for the tests. */
void dc_transpose_f32_reference (const float *src,
                                 gsize        ld_src,
                                 gsize        rows,
                                 gsize        cols,
                                 float       *dst,
                                 gsize        ld_dst);

G_END_DECLS
