#version 450
#extension GL_GOOGLE_include_directive : require
/* softmax.comp: attention's softmax on the device, bit for bit the CPU's
 * (dc-gpt.c's head_forward ()): for row t of a (len, len) block of scores,
 *   row[j] = scores[t][j] · scale for j < n_t;  dc_math_softmax (row, n_t);
 *   row[j] = +0 for j ≥ n_t
 * with n_t = t + 1 (causal) or len. One invocation per row.
 *
 * dc_math_softmax, operation for operation in f32-exact.glsl's arithmetic:
 * the maximum scanned left to right (the first NaN returned); e^(x − max)
 * with x − max an exact double-float (two-sum), Cody–Waite reduction by
 * ln 2 (hi + lo), the degree-8 Taylor polynomial of expm1 in Horner form and
 * the exact scaling by 2^k (dc-math-private.h's exp_reduce2 () and
 * scale2 (), the same constants as bits); the sum in the library's tree
 * (sum-tree.glsl); one division per element. No device transcendental is
 * used.
 *
 * DC_BREAK builds the deliberately wrong twin (the Taylor polynomial stops at
 * degree 7), for the gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#ifdef DC_BREAK
#define DC_BREAK_EXP
#endif
#include "f32-exact.glsl"
#include "exp-exact.glsl"

layout (local_size_x = 64) in;

layout (std430, binding = 0) readonly buffer Scores { uint scores[]; };
layout (std430, binding = 1) buffer Att { uint att[]; };

/* Mirrors DcVkSoftmaxPush (src/model/dc-gpt-vk-softmax.c). */
layout (push_constant) uniform Push
{
  uint rows;
  uint len;
  uint scale;
  uint causal;
} pc;

uint g_base;
#define DC_SUM_LEAF(i) att[g_base + (i)]
#include "sum-tree.glsl"

void
main ()
{
  uint r = gl_GlobalInvocationID.x;
  uint n, max_bits, sum;

  if (r >= pc.rows)
    return;
  g_base = r * pc.len;
  n = pc.causal != 0u ? r % pc.len + 1u : pc.len;
  for (uint j = 0u; j < n; j++)
    att[g_base + j] = f32_mul (scores[g_base + j], pc.scale);
  /* dc_math_max: left to right, the first NaN wins. */
  max_bits = att[g_base];
  for (uint j = 0u; j < n && !f32_is_nan (max_bits); j++)
    {
      uint v = att[g_base + j];

      if (f32_is_nan (v) || f32_order (v) > f32_order (max_bits))
        max_bits = v;
    }
  for (uint j = 0u; j < n; j++)
    att[g_base + j] = exp_shifted (att[g_base + j], max_bits);
  sum = sum_tree (n);
  for (uint j = 0u; j < n; j++)
    att[g_base + j] = f32_div (att[g_base + j], sum);
  for (uint j = n; j < pc.len; j++)
    att[g_base + j] = 0u;
}
