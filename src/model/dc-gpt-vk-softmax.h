/* dc-gpt-vk-softmax.h: attention's scaled, causal softmax (dc_math_softmax ()
 * with the engine's own exp) as a Vulkan kernel, bit for bit, gated against
 * the CPU when made.
 *
 * Like dc-gpt-vk-quant.h, a kernel of the resident step's stage 2 that
 * exists, is exact and gated, and runs from host arrays (tests, gate); it is
 * not yet recorded into the resident step.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-vk-context.h"

G_BEGIN_DECLS

typedef struct _DcGptVkSoftmax DcGptVkSoftmax;

DcGptVkSoftmax *dc_gpt_vk_softmax_new   (DcVkContext     *ctx,
                                         GError         **error);
void            dc_gpt_vk_softmax_free  (DcGptVkSoftmax  *self);
gboolean        dc_gpt_vk_softmax_rows  (DcGptVkSoftmax  *self,
                                         const float     *scores,
                                         float            scale,
                                         gboolean         causal,
                                         gsize            rows,
                                         gsize            len,
                                         float           *att,
                                         GError         **error);
void            dc_gpt_vk_softmax_reference (const float *scores,
                                             float        scale,
                                             gboolean     causal,
                                             gsize        rows,
                                             gsize        len,
                                             float       *att);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptVkSoftmax, dc_gpt_vk_softmax_free)

G_END_DECLS
