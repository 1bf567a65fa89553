/* dc-gpt-vk-quant.h: activation quantization (dc_quant_pack ()) as a Vulkan
 * kernel, bit for bit, gated against the CPU when made.
 *
 * Stage 2 of the resident step (issue 15) starts here: the kernel exists,
 * is exact and gated, and is run from host arrays (tests, gate); recording it
 * into the resident step, between resident activations and a GEMM on
 * resident operands, is the next step (docs/ARCHITECTURE.md).
 *
 * Not thread-safe: the thread that owns the context owns this.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-gemm.h"
#include "engine/dc-vk-context.h"

G_BEGIN_DECLS

typedef struct _DcGptVkQuant DcGptVkQuant;

DcGptVkQuant *dc_gpt_vk_quant_new   (DcVkContext     *ctx,
                                     GError         **error);
void          dc_gpt_vk_quant_free  (DcGptVkQuant    *self);
gboolean      dc_gpt_vk_quant_pack  (DcGptVkQuant    *self,
                                     const char      *what,
                                     const float     *src,
                                     gsize            vector_stride,
                                     gsize            k_stride,
                                     DcQuantMatrix   *out,
                                     GError         **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptVkQuant, dc_gpt_vk_quant_free)

G_END_DECLS
