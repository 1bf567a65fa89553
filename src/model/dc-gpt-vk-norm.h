/* dc-gpt-vk-norm.h: layer norm (dc_math_layer_norm ()) as a Vulkan kernel,
 * bit for bit, gated against the CPU when made.
 *
 * Like dc-gpt-vk-quant.h, a kernel of the resident step's stage 2 that
 * exists, is exact and gated, and runs from host arrays (tests, gate); it is
 * not yet recorded into the resident step.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-vk-context.h"
#include "dc-gpt-vk-step-private.h"

G_BEGIN_DECLS

typedef struct _DcGptVkNorm DcGptVkNorm;

DcGptVkNorm *dc_gpt_vk_norm_new   (DcVkContext   *ctx,
                                   GError       **error);
void         dc_gpt_vk_norm_free  (DcGptVkNorm   *self);
gboolean     dc_gpt_vk_norm_rows  (DcGptVkNorm   *self,
                                   const float   *x,
                                   const float   *weight,
                                   const float   *bias,
                                   float          eps,
                                   gsize          rows,
                                   gsize          n,
                                   float         *y,
                                   float         *mean,
                                   float         *rstd,
                                   GError       **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptVkNorm, dc_gpt_vk_norm_free)

/* Columns per workgroup of shaders/resident-colsum.comp (its CW): a
 * dispatch of n columns takes ⌈n / 8⌉ workgroups. */
#define DC_GPT_VK_COLSUM_COLUMNS 8

DcVkPipeline *_dc_gpt_vk_colsum_new (DcVkContext   *ctx,
                                     DcVkF32Mode    native,
                                     gboolean       broken,
                                     GError       **error);

/* resident-colsum.comp's token lists (the head's and the embeddings'
 * scatter-adds): the rows of each token v < @n_v among @rows tokens, in
 * order, at @list[@offsets[v] … @offsets[v + 1]) (@offsets holds n_v + 1). */
void _dc_gpt_vk_token_lists (const guint32 *tokens,
                             gsize          rows,
                             guint          n_v,
                             guint32       *offsets,
                             guint32       *list);

/* Columns per workgroup of shaders/resident-chains.comp (its CW and
 * CW_SUM): a dispatch of OP_LN_DW over n columns takes ⌈n / 4⌉ workgroups,
 * one of OP_COLSUM ⌈n / 8⌉. */
#define DC_GPT_VK_CHAINS_COLUMNS 4
#define DC_GPT_VK_CHAINS_SUM_COLUMNS 8

DcVkPipeline *_dc_gpt_vk_chains_new (DcVkContext   *ctx,
                                     DcVkF32Mode    native,
                                     gboolean       broken,
                                     GError       **error);

G_END_DECLS
