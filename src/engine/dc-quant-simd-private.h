/* dc-quant-simd-private.h: the SIMD quantizer, internal to the engine.
 * dc_quant_pack() uses it for contiguous vectors; it gives the bits of
 * dc_quant_pack_reference() (tests/test-engine-quant.c).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-gemm.h"

G_BEGIN_DECLS

/* "avx2" when the CPU has AVX2 and the AVX2 quantizer passed its start-up
 * gate against the reference (decided once per process), else "scalar". */
const char *dc_quant_pack_simd_name  (void);

/* dc_quant_pack() for contiguous vectors (k_stride 1) with the packer named
 * above. */
gboolean    dc_quant_pack_simd       (const char           *what,
                                      const float          *src,
                                      gsize                 vector_stride,
                                      DcQuantMatrix        *out,
                                      GError              **error);

/* The AVX2 packer itself, ungated, for the gate and the tests. Only call it
 * when the CPU supports AVX2; elsewhere it is the reference. */
gboolean    dc_quant_pack_avx2       (const char           *what,
                                      const float          *src,
                                      gsize                 vector_stride,
                                      DcQuantMatrix        *out,
                                      GError              **error);

/* "avx512" when the CPU has AVX-512 F and BW and the 16-lane quantizer
 * passed its own gate, else "none"; dc_quant_pack_simd() then uses it for
 * vectors of at most 64 values. */
const char *dc_quant_pack_avx512_name (void);

/* The 16-lane packer itself, ungated, for the gate and the tests. Only
 * call it when the CPU supports AVX-512 F and BW. */
gboolean    dc_quant_pack_avx512     (const char           *what,
                                      const float          *src,
                                      gsize                 vector_stride,
                                      DcQuantMatrix        *out,
                                      GError              **error);

/* The same for the column quantizer below: its own gate, so that a broken
 * one leaves the row quantizer in use. */
const char *dc_quant_pack_columns_simd_name (void);

/* dc_quant_pack() for vectors that are columns of a row-major matrix
 * (vector_stride 1, k_stride ld): out->k rows, row r at src + r · ld, with
 * the packer named by dc_quant_pack_columns_simd_name(). */
gboolean    dc_quant_pack_columns_simd (const char         *what,
                                        const float        *src,
                                        gsize               ld,
                                        DcQuantMatrix      *out,
                                        GError            **error);

/* The AVX2 column packer itself, ungated, for the gate and the tests. Only
 * call it when the CPU supports AVX2; elsewhere it is the reference. */
gboolean    dc_quant_pack_columns_avx2 (const char         *what,
                                        const float        *src,
                                        gsize               ld,
                                        DcQuantMatrix      *out,
                                        GError            **error);

/* "avx512" when the CPU has AVX-512 F, BW and VL and the 16-lane column
 * quantizer passed its own gate, else "none"; dc_quant_pack_columns_simd()
 * then prefers it to the AVX2 one. */
const char *dc_quant_pack_columns_avx512_name (void);

/* The 16-lane column packer itself, ungated, for the gate and the tests.
 * Only call it when the CPU supports AVX-512 F, BW and VL. */
gboolean    dc_quant_pack_columns_avx512 (const char       *what,
                                          const float      *src,
                                          gsize             ld,
                                          DcQuantMatrix    *out,
                                          GError          **error);

/* Test only: 1 or 0 makes the packers take plain vectors' subnormal values
 * from their steps of 2^-149 or not (the bits are the same); -1 goes back to
 * the CPU's default (on Intel) or DC_QUANT_SUBNORMAL_STEPS. */
void        _dc_quant_set_subnormal_steps (int on);

G_END_DECLS
