#version 450
#extension GL_GOOGLE_include_directive : require
/* adam.comp: the deterministic Adam step of dc_gpt_model_adam_step ()
 * (src/model/dc-gpt-model.c) on resident weights and moments, element by
 * element, each line of the CPU's order one exactly rounded f32 operation of
 * f32-exact.glsl (integer arithmetic, so the bits are the CPU's on any
 * device):
 *   m = β1·m;  v = β2·v;  gg = g·g;  m = m + (1−β1)·g;  v = v + (1−β2)·gg
 *   m̂ = m / bc1;  v̂ = v / bc2;  denom = √v̂ + ε;  w = w − (lr·m̂) / denom
 * Floats travel as their bit patterns (uint), so no float instruction of the
 * device touches them. The two divisions by the bias corrections, the same
 * for every element, go through their reciprocals (f32_div_prep () once an
 * invocation, then f32_div_by (): f32_div ()'s bits for every input,
 * docs/VERIFICATION.md "A row's quotients by one divisor"). The step's scalars come from a small buffer written
 * by the host before each replay, so the recorded command buffer never
 * changes. A grid-stride loop covers any n with a capped dispatch.
 *
 * DC_BREAK builds the deliberately wrong twin (it drops the ε), for the
 * gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "f32-exact.glsl"

layout (local_size_x = 256) in;

layout (std430, binding = 0) buffer Params { uint w[]; };
layout (std430, binding = 1) readonly buffer Grads { uint g[]; };
layout (std430, binding = 2) buffer M { uint adam_m[]; };
layout (std430, binding = 3) buffer V { uint adam_v[]; };
/* n, lr, bc1, bc2, β1, β2, 1 − β1, 1 − β2, ε: mirrors DcVkAdamScalars. */
layout (std430, binding = 4) readonly buffer Scalars
{
  uint n;
  uint lr;
  uint bc1;
  uint bc2;
  uint beta1;
  uint beta2;
  uint one_minus_beta1;
  uint one_minus_beta2;
  uint eps;
} s;

void
main ()
{
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uint inv1 = f32_div_prep (s.bc1), inv2 = f32_div_prep (s.bc2);

  for (uint i = gl_GlobalInvocationID.x; i < s.n; i += stride)
    {
      uint grad = g[i];
      uint m = f32_mul (s.beta1, adam_m[i]);
      uint v = f32_mul (s.beta2, adam_v[i]);
      uint gg = f32_mul (grad, grad);
      uint denom;

      m = f32_add (m, f32_mul (s.one_minus_beta1, grad));
      v = f32_add (v, f32_mul (s.one_minus_beta2, gg));
      adam_m[i] = m;
      adam_v[i] = v;
#ifdef DC_BREAK
      denom = f32_sqrt (f32_div_by (v, s.bc2, inv2));
#else
      denom = f32_add (f32_sqrt (f32_div_by (v, s.bc2, inv2)), s.eps);
#endif
      w[i] = f32_sub (w[i], f32_div (f32_mul (s.lr, f32_div_by (m, s.bc1, inv1)), denom));
    }
}
