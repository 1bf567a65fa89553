#version 450
/* layer-norm.comp: dc_math_layer_norm () on the device, bit for bit: one
 * invocation per row of n values.
 *
 *   mean = Σx / n;  var = Σ(x − mean)² / n;  (a NaN or infinite var: both NaN)
 *   rstd = 1 / √(var + eps);  y = ((x − mean)·rstd)·w + b
 *
 * Every operation is f32-exact.glsl's (integer arithmetic), and both sums
 * follow the library's one tree (docs/VERIFICATION.md, "Reductions"): up to
 * 8 elements left to right; a power of two splits into equal halves (so it is
 * blocks of 8 combined pairwise, built here with a stack); any other length
 * splits at h, the largest power of two below n, into sum[0, h) + sum[h, n).
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

/* Leaf i of a sum over the row at base: x, or (x − c)² when squared. */
uint
leaf (uint base, uint i, bool squared, uint c)
{
  uint v = x[base + i];

  if (!squared)
    return v;
  v = f32_sub (v, c);
  return f32_mul (v, v);
}

/* Leaves [start, start + len), len ≤ 8, left to right. */
uint
sum_block (uint base, uint start, uint len, bool squared, uint c)
{
  uint acc = leaf (base, start, squared, c);

  for (uint i = 1u; i < len; i++)
    acc = f32_add (acc, leaf (base, start + i, squared, c));
  return acc;
}

/* The balanced tree of a power-of-two len ≥ 8: blocks of 8, then each level
 * adds neighbours (left + right), as the recursive halves do. */
uint
sum_pow2 (uint base, uint start, uint len, bool squared, uint c)
{
  uint stack[20];
  uint level[20];
  int top = -1;

  for (uint b = 0u; b < len / 8u; b++)
    {
      top++;
      stack[top] = sum_block (base, start + 8u * b, 8u, squared, c);
      level[top] = 0u;
      while (top > 0 && level[top] == level[top - 1])
        {
          stack[top - 1] = f32_add (stack[top - 1], stack[top]);
          level[top - 1] += 1u;
          top--;
        }
    }
  return stack[0];
}

uint
row_sum (uint base, uint n, bool squared, uint c)
{
  uint parts[24];
  uint n_parts = 0u, start = 0u, rest = n, acc;

#ifdef DC_BREAK
  acc = leaf (base, 0u, squared, c);
  for (uint i = 1u; i < n; i++)
    acc = f32_add (acc, leaf (base, i, squared, c));
  return acc;
#endif
  /* sum[0, n) = P(h1) + (P(h2) + (… + sum of the rest)): peel the largest
   * power of two below the remaining length while it is longer than 8 and
   * not a power of two itself. */
  while (rest > 8u && (rest & (rest - 1u)) != 0u)
    {
      uint h = 1u << uint (findMSB (rest));

      if (h == rest)
        h >>= 1;
      parts[n_parts++] = sum_pow2 (base, start, h, squared, c);
      start += h;
      rest -= h;
    }
  acc = rest <= 8u ? sum_block (base, start, rest, squared, c)
                   : sum_pow2 (base, start, rest, squared, c);
  while (n_parts > 0u)
    acc = f32_add (parts[--n_parts], acc);
  return acc;
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
