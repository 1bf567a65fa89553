/* dc-gpt-vk-forward-private.h: what a resident step shares with the
 * training pass (dc-gpt-vk-step.c).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-vk-context.h"
#include "dc-gpt-vk-forward.h"

G_BEGIN_DECLS

gboolean     _dc_gpt_vk_forward_gradients_resident (DcGptVkForward  *self,
                                                    const float     *params,
                                                    const guint8    *inputs,
                                                    const guint8    *targets,
                                                    float           *grads,
                                                    float           *loss,
                                                    GError         **error);
DcVkContext *_dc_gpt_vk_forward_get_context        (DcGptVkForward  *self);
DcVkBuffer  *_dc_gpt_vk_forward_get_f              (DcGptVkForward  *self,
                                                    gsize           *grads_off);

G_END_DECLS
