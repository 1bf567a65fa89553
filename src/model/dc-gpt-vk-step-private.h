/* dc-gpt-vk-step-private.h: the resident step's kernels, for its tests.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <string.h>

#include "engine/dc-vk-context.h"

G_BEGIN_DECLS

/* How the resident kernels do float + − × (shaders/meson.build's variants):
 * in integers, or on the float unit declaring RTE rounding, signed
 * zero/inf/NaN preservation and DenormPreserve (-native), or the first two
 * only (-native-nodenorm, for devices that do not report DenormPreserve:
 * there the gates alone prove subnormals kept). 0 is emulated, so the value
 * reads as "native?" too. */
typedef enum
{
  DC_VK_F32_EMULATED = 0,
  DC_VK_F32_NATIVE,
  DC_VK_F32_NATIVE_NODENORM,
} DcVkF32Mode;

/* The results f32-exact-check.comp gives for one pair. */
#define DC_GPT_VK_F32_CHECK_OPS 6

/* Runs shaders/f32-exact-check.comp (its broken twin when @broken) on n
 * pairs of float bit patterns: out (DC_GPT_VK_F32_CHECK_OPS · n) is a + b,
 * a − b, a · b, a / b, √a, and a / b by a prepared divisor (f32_div_by ())
 * per pair. */
gboolean _dc_gpt_vk_step_run_f32_check (DcVkContext    *ctx,
                                        const guint32  *a,
                                        const guint32  *b,
                                        gsize           n,
                                        DcVkF32Mode     native,
                                        gboolean        broken,
                                        guint32        *out,
                                        GError        **error);

/* The CPU's DC_GPT_VK_F32_CHECK_OPS results for one pair, in the order
 * above (the quotient twice). */
void     _dc_gpt_vk_step_f32_reference (guint32         a,
                                        guint32         b,
                                        guint32        *out);

/* Whether a GPU result is the CPU's: the same bits, or both NaN (NaN
 * payloads are not part of the rule: f32-exact.glsl). */
gboolean _dc_gpt_vk_step_same_f32      (guint32         gpu,
                                        guint32         cpu);

/* Shared by the resident step's kernels (dc-gpt-vk-*.c). */

/* A float's bit pattern, and back. */
static inline guint32
f32_bits (float x)
{
  guint32 u;

  memcpy (&u, &x, sizeof u);
  return u;
}

static inline float
bits_f32 (guint32 u)
{
  float x;

  memcpy (&x, &u, sizeof x);
  return x;
}

/* _dc_gpt_vk_step_same_f32 () on two floats. */
static inline gboolean
same_f32 (float gpu,
          float cpu)
{
  return _dc_gpt_vk_step_same_f32 (f32_bits (gpu), f32_bits (cpu));
}

/* For the gates' tests only: DC_TEST_BREAK_KERNEL=name[,name…] or "all"
 * loads kernel @name's broken twin. */
gboolean _dc_gpt_vk_kernel_broken      (const char     *name);

gboolean _dc_gpt_vk_kernel_twin        (const char     *name,
                                        gboolean        native);

char    *_dc_gpt_vk_kernel_file        (const char     *shader,
                                        DcVkF32Mode     native,
                                        gboolean        broken);

DcVkF32Mode _dc_gpt_vk_native_wanted   (DcVkContext    *ctx,
                                        char          **why_not);

gboolean _dc_gpt_vk_step_gate_f32      (DcVkContext    *ctx,
                                        DcVkF32Mode     native,
                                        GError        **error);

/* The gates' input generator (splitmix64: fixed, documented, so a gate's
 * inputs are the same on every device). */
guint64  _dc_gpt_vk_splitmix64         (guint64        *state);

G_END_DECLS
