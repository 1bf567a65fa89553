#version 450
#extension GL_GOOGLE_include_directive : require
/* layer-norm.comp: dc_math_layer_norm () on the device, bit for bit: one
 * invocation per row of n values.
 *
 *   mean = Σx / n;  var = Σ(x − mean)² / n;  (a NaN or infinite var: both NaN)
 *   rstd = 1 / √(var + eps);  y = ((x − mean)·rstd)·w + b
 *
 * Every operation is f32-exact.glsl's (integer arithmetic), and both sums
 * follow the library's one tree (sum-tree.glsl).
 *
 * DC_BREAK builds the deliberately wrong twin (each sum left to right), for
 * the gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "f32-exact.glsl"

layout (local_size_x = 64) in;

layout (std430, binding = 0) readonly buffer X { uint x[]; };
layout (std430, binding = 1) readonly buffer W { uint w[]; };
layout (std430, binding = 2) readonly buffer Bias { uint bias[]; };
layout (std430, binding = 3) writeonly buffer Y { uint y[]; };
layout (std430, binding = 4) writeonly buffer Mean { uint mean_out[]; };
layout (std430, binding = 5) writeonly buffer Rstd { uint rstd_out[]; };

/* Mirrors DcVkNormPush (src/model/dc-gpt-vk-norm.c). */
layout (push_constant) uniform Push
{
  uint rows;
  uint n;
  uint fn;   /* (float) n */
  uint eps;
} pc;

/* The current row and leaf kind of sum-tree.glsl's sums: x, or (x − c)². */
uint g_base;
bool g_squared;
uint g_c;

uint
leaf (uint i)
{
  uint v = x[g_base + i];

  if (!g_squared)
    return v;
  v = f32_sub (v, g_c);
  return f32_mul (v, v);
}

#define DC_SUM_LEAF(i) leaf (i)
#include "sum-tree.glsl"

uint
row_sum (uint base, uint n, bool squared, uint c)
{
  g_base = base;
  g_squared = squared;
  g_c = c;
#ifdef DC_BREAK
  {
    uint acc = leaf (0u);

    for (uint i = 1u; i < n; i++)
      acc = f32_add (acc, leaf (i));
    return acc;
  }
#else
  return sum_tree (n);
#endif
}

void
main ()
{
  uint r = gl_GlobalInvocationID.x;
  uint base, mean, var, rstd;

  if (r >= pc.rows)
    return;
  base = r * pc.n;
  mean = f32_div (row_sum (base, pc.n, false, 0u), pc.fn);
  var = f32_div (row_sum (base, pc.n, true, mean), pc.fn);
  /* !(var <= FLT_MAX): NaN or +∞ (a variance is never negative). */
  if ((var & 0x7fffffffu) >= F32_INF)
    {
      mean = F32_QNAN;
      var = F32_QNAN;
    }
  rstd = f32_div (0x3f800000u, f32_sqrt (f32_add (var, pc.eps)));
  for (uint i = 0u; i < pc.n; i++)
    y[base + i] = f32_add (f32_mul (f32_mul (f32_sub (x[base + i], mean), rstd), w[i]), bias[i]);
  mean_out[r] = mean;
  rstd_out[r] = rstd;
}
