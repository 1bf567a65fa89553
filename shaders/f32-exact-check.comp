#version 450
#extension GL_GOOGLE_include_directive : require
/* f32-exact-check.comp: the operations of f32-exact.glsl on pairs of
 * floats, for the start-up gate and the tests: out[6i + j] is a[i] + b[i],
 * a[i] − b[i], a[i] · b[i], a[i] / b[i], √a[i], and a[i] / b[i] again by
 * f32_div_by () with f32_div_prep (b[i]) for j = 0 … 5 (bit patterns).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#ifdef DC_BREAK
#define DC_BREAK_F32
#endif
#include "f32-exact.glsl"

layout (local_size_x = 64) in;

layout (std430, binding = 0) readonly buffer A { uint a[]; };
layout (std430, binding = 1) readonly buffer B { uint b[]; };
layout (std430, binding = 2) writeonly buffer Out { uint result[]; };

layout (push_constant) uniform Push
{
  uint n;
} pc;

void
main ()
{
  uint i = gl_GlobalInvocationID.x;

  if (i >= pc.n)
    return;
  result[6u * i + 0u] = f32_add (a[i], b[i]);
  result[6u * i + 1u] = f32_sub (a[i], b[i]);
  result[6u * i + 2u] = f32_mul (a[i], b[i]);
  result[6u * i + 3u] = f32_div (a[i], b[i]);
  result[6u * i + 4u] = f32_sqrt (a[i]);
  result[6u * i + 5u] = f32_div_by (a[i], b[i], f32_div_prep (b[i]));
}
