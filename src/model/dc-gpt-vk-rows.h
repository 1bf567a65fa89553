/* dc-gpt-vk-rows.h: the resident pass's quantization and softmax at the
 * device's memory speed (shaders/resident-quant.comp: coalesced tiles;
 * shaders/resident-softmax.comp: a workgroup per row), their tile choice
 * and their start-up gates. dc-gpt-vk-forward.c records them.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-vk-context.h"
#include "dc-gpt-vk-step-private.h"

G_BEGIN_DECLS

/* Rows longer than this stay on the one-invocation softmax: the row is
 * staged in shared memory (16 KiB of floats, half of lavapipe's 32 KiB and
 * a third of the 48 KiB NVIDIA gives a workgroup by default); attention's
 * rows are the sequence (1,024 at GPT-2 small), the probabilities' the
 * vocabulary (256 bytes). Mirrors shaders/resident-softmax.comp's MAX_LEN. */
#define DC_GPT_VK_ROWS_SOFTMAX_MAX_LEN 4096

/* resident-softmax.comp's op bit: each output row also quantized as
 * resident-quant.comp's rows (q, e after the op's own arguments). */
#define DC_GPT_VK_SOFTMAX_QUANT_ROWS 0x100

/* How resident-quant.comp covers n vectors of length k: by rows or by
 * columns (a[11]), 2^tv_log2 vectors a workgroup (a[12]), the tiles'
 * workgroups of the dispatch (the kernel loops over the rest), and for few
 * long columns the slices of K (slice elements each, a[13]; 0: one slice,
 * one dispatch), one workgroup row each, whose maxima take
 * DC_GPT_VK_QUANT_AMAX_SCRATCH () bytes of Q. */
typedef struct
{
  guint32 columns;
  guint32 tv_log2;
  guint32 groups;
  guint32 slice;
  guint32 slices;
} DcGptVkQuantTile;

#define DC_GPT_VK_QUANT_OP_AMAX 101
/* resident-quant.comp's op bit: each pair's square matrix is lower
 * triangular, its upper part zero and not read. */
#define DC_GPT_VK_QUANT_LOWER 0x100
#define DC_GPT_VK_QUANT_AMAX_SCRATCH(tile, n_vectors) \
  ((tile)->slices > 1 ? (gsize) (tile)->slices * (n_vectors) * 4 : 0)

/* resident-softmax.comp's lanes a row for rows of len (a[14] is its log2),
 * and the workgroups for that many rows. */
guint32  dc_gpt_vk_rows_softmax_lanes_log2 (gsize          len);
guint32  dc_gpt_vk_rows_softmax_groups (gsize              rows,
                                        gsize              len);
void     dc_gpt_vk_rows_quant_tile    (gsize               n_vectors,
                                       gsize               k,
                                       gsize               vector_stride,
                                       gsize               k_stride,
                                       DcGptVkQuantTile   *out);
gboolean dc_gpt_vk_rows_gate_quant    (DcVkContext        *ctx,
                                       gboolean            broken,
                                       GError            **error);
gboolean dc_gpt_vk_rows_gate_softmax  (DcVkContext        *ctx,
                                       DcVkF32Mode         native,
                                       gboolean            broken,
                                       GError            **error);

G_END_DECLS
