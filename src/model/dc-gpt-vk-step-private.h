/* dc-gpt-vk-step-private.h: the resident step's kernels, for its tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "engine/dc-vk-context.h"

G_BEGIN_DECLS

/* Runs shaders/f32-exact-check.comp (its broken twin when @broken) on n
 * pairs of float bit patterns: out (5n) is a + b, a − b, a · b, a / b, √a
 * per pair. */
gboolean _dc_gpt_vk_step_run_f32_check (DcVkContext    *ctx,
                                        const guint32  *a,
                                        const guint32  *b,
                                        gsize           n,
                                        gboolean        broken,
                                        guint32        *out,
                                        GError        **error);

/* The CPU's five results for one pair, in the order above. */
void     _dc_gpt_vk_step_f32_reference (guint32         a,
                                        guint32         b,
                                        guint32        *out);

/* Whether a GPU result is the CPU's: the same bits, or both NaN (NaN
 * payloads are not part of the rule: f32-exact.glsl). */
gboolean _dc_gpt_vk_step_same_f32      (guint32         gpu,
                                        guint32         cpu);

G_END_DECLS
