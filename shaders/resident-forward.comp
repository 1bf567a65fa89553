#version 450
#extension GL_GOOGLE_include_directive : require
/* resident-forward.comp: every operation of the GPT forward pass
 * (dc-gpt.c's dc_gpt_run_forward () up to the logits) as one pipeline whose
 * push constants choose the operation, so a whole forward pass records into
 * one command buffer with one descriptor set (the loss has its own small
 * pipeline, resident-loss.comp, on the same buffers): F holds the weights and every
 * activation (f32 bit patterns, offsets in floats), Q the quantized
 * operands (int8), E their exponents (and in E[0] a flag set when a
 * quantized value was not finite), T the tokens.
 *
 * Each operation is the CPU's rule bit for bit: f32-exact.glsl's arithmetic,
 * quant-exact.glsl's quantization, sum-tree.glsl's sums, exp-exact.glsl's
 * exponential and the GEMM's integer accumulation and epilogue
 * (gemm-epilogue.glsl). Speed is not the point of this kernel: each
 * invocation computes whole outputs in the CPU's order.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#ifdef DC_BREAK
#define DC_BREAK_EXP
#endif
#include "f32-exact.glsl"
#include "exp-exact.glsl"
#include "quant-exact.glsl"
#include "gemm-epilogue.glsl"

layout (local_size_x = 64) in;

layout (std430, binding = 0) buffer F { uint f[]; };
layout (std430, binding = 1) buffer Q { int8_t q8[]; };
/* The same operands 16 bytes at a time, for the GEMM's loads. */
layout (std430, binding = 1) readonly buffer Q16 { ivec4 q16[]; };
layout (std430, binding = 2) buffer E { int e32[]; };
layout (std430, binding = 3) readonly buffer T { uint tok[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_EMBED 0u
#define OP_LAYER_NORM 1u
#define OP_QUANTIZE 2u
#define OP_GEMM 3u
#define OP_BIAS 4u
#define OP_ADD 5u
#define OP_RELU 6u
#define OP_SOFTMAX 7u

/* The current row of sum-tree.glsl's sums and its leaves: x or (x − c)². */
uint g_base;
bool g_squared;
uint g_c;

uint
leaf (uint i)
{
  uint v = f[g_base + i];

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
  return sum_tree (n);
}

shared uint s_amax[64];
shared uint s_bad;

#include "sum-tree-wg.glsl"

/* a: out, wte, wpe, total (rows · C), C, len. */
void
op_embed (uint i)
{
  uint c = pc.a[4], r = i / c, j = i % c;

  f[pc.a[0] + i] = f32_add (f[pc.a[1] + tok[r] * c + j], f[pc.a[2] + (r % pc.a[5]) * c + j]);
}

/* a: x, w, b, y, mean, rstd, rows, n, fn, eps: dc_math_layer_norm of row r. */
void
op_layer_norm (uint r)
{
  uint n = pc.a[7], base = pc.a[0] + r * n, dst = pc.a[3] + r * n;
  uint mean = f32_div (row_sum (base, n, false, 0u), pc.a[8]);
  uint var = f32_div (row_sum (base, n, true, mean), pc.a[8]);
  uint rstd;

  if ((var & 0x7fffffffu) >= F32_INF)
    {
      mean = F32_QNAN;
      var = F32_QNAN;
    }
  rstd = f32_div (0x3f800000u, f32_sqrt (f32_add (var, pc.a[9])));
  for (uint i = 0u; i < n; i++)
    f[dst + i] = f32_add (f32_mul (f32_mul (f32_sub (f[base + i], mean), rstd),
                                   f[pc.a[1] + i]), f[pc.a[2] + i]);
  f[pc.a[4] + r] = mean;
  f[pc.a[5] + r] = rstd;
}

/* op_layer_norm () with a[10] != 0 (rows of n ≤ WG_SUM_MAX): a workgroup
 * per row, the leaves of both sums in shared memory and each sum
 * sum-tree-wg.glsl's (the same tree), the outputs side by side. One
 * invocation per row reads its row alone (neighbours 4n bytes apart) and
 * walks both trees serially; here the row's loads are coalesced and the
 * tree's levels run in parallel. */
void
layer_norm_rows_wg ()
{
  uint n = pc.a[7], lane = gl_LocalInvocationID.x;

  for (uint r = gl_WorkGroupID.x; r < pc.a[6]; r += gl_NumWorkGroups.x)
    {
      uint base = pc.a[0] + r * n, dst = pc.a[3] + r * n, mean, var, rstd;

      for (uint i = lane; i < n; i += 64u)
        s_leaf[i] = f[base + i];
      barrier ();
      mean = f32_div (wg_sum_tree (n), pc.a[8]);
      for (uint i = lane; i < n; i += 64u)
        {
          uint v = f32_sub (f[base + i], mean);

          s_leaf[i] = f32_mul (v, v);
        }
      barrier ();
      var = f32_div (wg_sum_tree (n), pc.a[8]);
      if ((var & 0x7fffffffu) >= F32_INF)
        {
          mean = F32_QNAN;
          var = F32_QNAN;
        }
      rstd = f32_div (0x3f800000u, f32_sqrt (f32_add (var, pc.a[9])));
      for (uint i = lane; i < n; i += 64u)
        f[dst + i] = f32_add (f32_mul (f32_mul (f32_sub (f[base + i], mean), rstd),
                                       f[pc.a[1] + i]), f[pc.a[2] + i]);
      if (lane == 0u)
        {
          f[pc.a[4] + r] = mean;
          f[pc.a[5] + r] = rstd;
        }
    }
}

/* a: src, vector_stride, k_stride, n_vectors, k, q, e, then for the
 * attention's (sequence, head) pairs side by side: vectors per pair, heads,
 * sequence stride, head stride (0 for one matrix), then a[11] (0 here): one workgroup per vector
 * (a uniform loop, so the barriers are in uniform control flow). Vector v is
 * pair p = v / per, row v mod per, at src + (p / H)·sb + (p mod H)·sh. */
/* a[11] != 0: one vector per invocation (src/model/dc-gpt-vk-forward.c
 * chooses it for short vectors, where a workgroup of 64 would leave most
 * invocations idle, and for many columns side by side, whose neighbouring
 * invocations then load neighbouring floats). The amax is a max, the same
 * in any order, and each element the same function. Same address rule as
 * op_quantize (). */

void
op_quantize_small (uint v)
{
  uint k = pc.a[4];
  uint per = pc.a[7] == 0u ? pc.a[3] : pc.a[7], heads = max (pc.a[8], 1u);
  uint p = v / per;
  uint base = pc.a[0] + (p / heads) * pc.a[9] + (p % heads) * pc.a[10] + (v % per) * pc.a[1];
  uint amax = 0u;
  bool bad = false;
  int e;

  for (uint i = 0u; i < k; i++)
    {
      uint m = f[base + i * pc.a[2]] & 0x7fffffffu;

      if (m >= F32_INF)
        bad = true;
      else
        amax = max (amax, m);
    }
  e = amax == 0u ? 0 : floor_log2 (amax) - 6;
  for (uint i = 0u; i < k; i++)
    {
      uint bits = f[base + i * pc.a[2]];

      q8[pc.a[5] + v * k + i] = int8_t ((bits & 0x7fffffffu) >= F32_INF || amax == 0u
                                        ? 0 : quantize_one (bits, e));
    }
  e32[pc.a[6] + v] = e;
  if (bad)
    e32[0] = 1;
}

void
op_quantize ()
{
  uint lid = gl_LocalInvocationID.x, k = pc.a[4];
  uint per = pc.a[7] == 0u ? pc.a[3] : pc.a[7], heads = max (pc.a[8], 1u);

  for (uint v = gl_WorkGroupID.x; v < pc.a[3]; v += gl_NumWorkGroups.x)
    {
      uint p = v / per;
      uint base = pc.a[0] + (p / heads) * pc.a[9] + (p % heads) * pc.a[10] + (v % per) * pc.a[1];
      uint amax = 0u;
      int e;

      if (lid == 0u)
        s_bad = 0u;
      barrier ();
      for (uint i = lid; i < k; i += 64u)
        {
          uint m = f[base + i * pc.a[2]] & 0x7fffffffu;

          if (m >= F32_INF)
            s_bad = 1u;
          else
            amax = max (amax, m);
        }
      s_amax[lid] = amax;
      barrier ();
      for (uint width = 32u; width > 0u; width >>= 1)
        {
          if (lid < width)
            s_amax[lid] = max (s_amax[lid], s_amax[lid + width]);
          barrier ();
        }
      amax = s_amax[0];
      e = amax == 0u ? 0 : floor_log2 (amax) - 6;
      for (uint i = lid; i < k; i += 64u)
        {
          uint bits = f[base + i * pc.a[2]];

          q8[pc.a[5] + v * k + i] = int8_t ((bits & 0x7fffffffu) >= F32_INF || amax == 0u
                                            ? 0 : quantize_one (bits, e));
        }
      if (lid == 0u)
        {
          e32[pc.a[6] + v] = e;
          if (s_bad != 0u)
            e32[0] = 1;
        }
      barrier ();
    }
}

/* a: qa, ea, M, qb, eb, N, K, out, ldc, then for pairs side by side: pairs,
 * heads, the output's sequence and head strides: output i = (p, m, n) from
 * left vector p·M + m and right vector p·N + n. */
void
op_gemm (uint i)
{
  uint n_cols = pc.a[5], k = pc.a[6], mn = pc.a[2] * n_cols, heads = max (pc.a[10], 1u);
  uint p = i / mn, m = (i % mn) / n_cols, n = i % n_cols;
  uint va = p * pc.a[2] + m, vb = p * n_cols + n;
  uint qa = pc.a[0] + va * k, qb = pc.a[3] + vb * k;
  int acc = 0;

  /* int32 sums are exact in any order (|acc| ≤ 127² · K < 2³¹), so
   * 16-byte loads, four bytes per word, give the byte loop's bits. */
  if ((k & 15u) == 0u && ((qa | qb) & 15u) == 0u)
    for (uint t = 0u; t < k / 16u; t++)
      {
        ivec4 x = q16[qa / 16u + t], y = q16[qb / 16u + t];

        for (int w = 0; w < 4; w++)
          for (int b = 0; b < 32; b += 8)
            acc += bitfieldExtract (x[w], b, 8) * bitfieldExtract (y[w], b, 8);
      }
  else
    for (uint t = 0u; t < k; t++)
      acc += int (q8[qa + t]) * int (q8[qb + t]);
  f[pc.a[7] + (p / heads) * pc.a[11] + (p % heads) * pc.a[12] + m * pc.a[8] + n]
    = dc_gemm_epilogue (acc, e32[pc.a[1] + va], e32[pc.a[4] + vb]);
}

/* a: y, b, total, n: y[i] = y[i] + b[i mod n]. */
void
op_bias (uint i)
{
  f[pc.a[0] + i] = f32_add (f[pc.a[0] + i], f[pc.a[1] + i % pc.a[3]]);
}

/* a: x, y, total: y = x + y. */
void
op_add (uint i)
{
  f[pc.a[1] + i] = f32_add (f[pc.a[0] + i], f[pc.a[1] + i]);
}

/* a: x, y, total: dc_math_reluf (NaN stays, −0 and negatives → +0). */
void
op_relu (uint i)
{
  uint x = f[pc.a[0] + i];

  f[pc.a[1] + i] = f32_is_nan (x) ? x : (x & F32_SIGN) == 0u && x != 0u ? x : 0u;
}

/* dc_math_max of n values at base: left to right, the first NaN wins. */
uint
row_max (uint base, uint n)
{
  uint m = f[base];

  for (uint j = 0u; j < n && !f32_is_nan (m); j++)
    {
      uint v = f[base + j];

      if (f32_is_nan (v) || f32_order (v) > f32_order (m))
        m = v;
    }
  return m;
}

/* a: scores, att, rows, len, scale, causal: head_forward ()'s row rule;
 * rows of several (sequence, head) pairs follow each other (row r is row
 * r mod len of its block). */
void
op_softmax (uint r)
{
  uint len = pc.a[3], base = pc.a[1] + r * len, src = pc.a[0] + r * len;
  uint n = pc.a[5] != 0u ? r % len + 1u : len;
  uint max_bits, sum;

  for (uint j = 0u; j < n; j++)
    f[base + j] = f32_mul (f[src + j], pc.a[4]);
  max_bits = row_max (base, n);
  for (uint j = 0u; j < n; j++)
    f[base + j] = exp_shifted (f[base + j], max_bits);
  g_base = base;
  g_squared = false;
  sum = sum_tree (n);
  for (uint j = 0u; j < n; j++)
    f[base + j] = f32_div (f[base + j], sum);
  for (uint j = n; j < len; j++)
    f[base + j] = 0u;
}

void
main ()
{
  uint stride = gl_NumWorkGroups.x * 64u;
  uint total;

  if (pc.op == OP_QUANTIZE && pc.a[11] != 0u)
    {
      for (uint v = gl_GlobalInvocationID.x; v < pc.a[3]; v += stride)
        op_quantize_small (v);
      return;
    }
  if (pc.op == OP_QUANTIZE)
    {
      op_quantize ();
      return;
    }
  if (pc.op == OP_LAYER_NORM && pc.a[10] != 0u)
    {
      layer_norm_rows_wg ();
      return;
    }
  switch (pc.op)
    {
    case OP_EMBED: total = pc.a[3]; break;
    case OP_LAYER_NORM: total = pc.a[6]; break;
    case OP_GEMM: total = pc.a[2] * pc.a[5] * max (pc.a[9], 1u); break;
    case OP_BIAS: total = pc.a[2]; break;
    case OP_ADD: total = pc.a[2]; break;
    case OP_RELU: total = pc.a[2]; break;
    default: total = pc.a[2]; break;
    }
  for (uint i = gl_GlobalInvocationID.x; i < total; i += stride)
    {
      switch (pc.op)
        {
        case OP_EMBED: op_embed (i); break;
        case OP_LAYER_NORM: op_layer_norm (i); break;
        case OP_GEMM: op_gemm (i); break;
        case OP_BIAS: op_bias (i); break;
        case OP_ADD: op_add (i); break;
        case OP_RELU: op_relu (i); break;
        default: op_softmax (i); break;
        }
    }
}
