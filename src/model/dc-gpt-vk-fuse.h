/* dc-gpt-vk-fuse.h: the resident pass's producers fused with the
 * quantization of their output (shaders/resident-fuse.comp), gated against
 * the CPU when loaded.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-vk-context.h"
#include "dc-gpt-vk-step-private.h"

G_BEGIN_DECLS

/* resident-fuse.comp's ops (DcVkForwardPush's op) and its "none" offset. */
#define DC_GPT_VK_FUSE_OP_NORM 200
#define DC_GPT_VK_FUSE_OP_RELU 201
#define DC_GPT_VK_FUSE_OP_RELU_BACK 202
#define DC_GPT_VK_FUSE_OP_QK 203
#define DC_GPT_VK_FUSE_NONE G_MAXUINT32
/* The longest row OP_FUSE_NORM normalizes (sum-tree-wg.glsl's WG_SUM_MAX,
 * the shader's PER_LANE values an invocation), the widest part (q, k or v:
 * C values) OP_FUSE_QK holds, and its most heads (a shared maximum each,
 * the workgroup's 64). */
#define DC_GPT_VK_FUSE_MAX_WIDTH 1024
#define DC_GPT_VK_FUSE_MAX_HEADS 64

DcVkPipeline *_dc_gpt_vk_fuse_new (DcVkContext   *ctx,
                                   DcVkF32Mode    native,
                                   gboolean       broken,
                                   GError       **error);

G_END_DECLS
