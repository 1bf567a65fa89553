#version 450
#extension GL_GOOGLE_include_directive : require
/* resident-fuse.comp: the resident pass's elementwise producers fused with
 * the quantization of their output's rows (src/model/dc-gpt-vk-fuse.c gates
 * it; src/model/dc-gpt-vk-forward.c records it), on resident-forward.comp's
 * buffers (F floats, Q int8, E exponents with E[0] the "not finite" flag)
 * and push constants. A workgroup of 64 takes a row at a time:
 *
 * - OP_FUSE_NORM: optionally the bias (x += b, resident-forward.comp's
 *   op_bias) and the residual add (x = a + x, op_add) on the row, then its
 *   layer norm (layer_norm_rows_wg: sum-tree-wg.glsl's sums, the same
 *   expressions), then the norm's output quantized as a row;
 * - OP_FUSE_RELU: the bias, ReLU (op_relu: both kept, as the pass keeps
 *   them), the activation quantized as a row;
 * - OP_FUSE_RELU_BACK: ReLU's backward (resident-backward.comp's
 *   op_relu_back), the gradient quantized as a row;
 * - OP_FUSE_QK: the bias on a row of qkv, then its q and k parts quantized
 *   per head (vectors of D), into the left and right operands in the
 *   attention's pair order (vector (s·H + h)·T + t for row s·T + t).
 *
 * Each element is the same function of the same inputs as the unfused op's
 * (integer or f32-exact.glsl arithmetic, each invocation reading back only
 * the floats it wrote itself); the quantization is resident-quant.comp's:
 * amax the largest finite |x| bit pattern (a maximum, reduced in any order),
 * the exponent and each value quant-exact.glsl's integer functions of the
 * bits; a NaN or infinity sets E[0] (the host refuses the pass) and
 * quantizes to 0.
 *
 * Push constants (DcVkForwardPush), a[…]:
 *   OP_FUSE_NORM: x, w, b, y, mean, rstd, rows, n (≤ WG_SUM_MAX), fn, eps,
 *     q (bytes), e (ints), bias (NONE: no bias), add's other operand (NONE:
 *     no add);
 *   OP_FUSE_RELU: y (in place), bias, act, rows, n, q, e;
 *   OP_FUSE_RELU_BACK: x, dy, dx, rows, n, q, e;
 *   OP_FUSE_QK: qkv (in place), bias, rows, C, D, H, T, q left, e left,
 *     q right, e right.
 *
 * DC_BREAK (and the native twins' DC_BREAK_FTZ) builds the deliberately
 * wrong twin: ties rounded away from zero.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
#define DC_BREAK_QUANT
#endif
#include "f32-exact.glsl"
#include "quant-exact.glsl"

#define GROUP 64u
#define NONE 0xffffffffu
/* The longest qkv row OP_FUSE_QK stages (3 · 1024: GPT-2's 2,304 with room). */
#define QK_MAX 3072u

layout (local_size_x = 64) in;

layout (std430, binding = 0) buffer F { uint f[]; };
layout (std430, binding = 1) buffer Q { int8_t q8[]; };
layout (std430, binding = 2) buffer E { int e32[]; };
layout (std430, binding = 3) readonly buffer T { uint t_unused[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_FUSE_NORM 200u
#define OP_FUSE_RELU 201u
#define OP_FUSE_RELU_BACK 202u
#define OP_FUSE_QK 203u

#include "sum-tree-wg.glsl"

shared uint s_amax[GROUP];
shared uint s_qk[QK_MAX];

/* The workgroup's largest finite |x| of the values each invocation passes
 * (its own amax); sets E[0] where one was not finite. Uniform control flow. */
uint
wg_amax (uint amax, bool bad)
{
  uint lane = gl_LocalInvocationID.x;

  if (bad)
    e32[0] = 1;
  s_amax[lane] = amax;
  barrier ();
  for (uint w = GROUP / 2u; w > 0u; w >>= 1)
    {
      if (lane < w)
        s_amax[lane] = max (s_amax[lane], s_amax[lane + w]);
      barrier ();
    }
  amax = s_amax[0];
  /* s_amax is reused by the next row. */
  barrier ();
  return amax;
}

/* amax's part of one value: its |x| bits, or "not finite". */
void
amax_add (uint bits, inout uint amax, inout bool bad)
{
  uint m = bits & 0x7fffffffu;

  if (m >= F32_INF)
    bad = true;
  else
    amax = max (amax, m);
}

int
exponent_of (uint amax)
{
  return amax == 0u ? 0 : floor_log2 (amax) - 6;
}

int8_t
quantize_bits (uint bits, uint amax, int e)
{
  return int8_t ((bits & 0x7fffffffu) >= F32_INF || amax == 0u ? 0 : quantize_one (bits, e));
}

/* Row r of n floats at dst (written by this invocation at i = lane + 64 j)
 * quantized into Q at q + r·n, its exponent at E[e + r]. */
void
quantize_row (uint dst, uint r, uint n, uint q, uint e, uint amax)
{
  int ex = exponent_of (amax);

  if (gl_LocalInvocationID.x == 0u)
    e32[e + r] = ex;
  for (uint i = gl_LocalInvocationID.x; i < n; i += GROUP)
    q8[q + r * n + i] = quantize_bits (f[dst + i], amax, ex);
}

void
fuse_norm ()
{
  uint n = pc.a[7], lane = gl_LocalInvocationID.x;

  for (uint r = gl_WorkGroupID.x; r < pc.a[6]; r += gl_NumWorkGroups.x)
    {
      uint base = pc.a[0] + r * n, dst = pc.a[3] + r * n, mean, var, rstd, amax = 0u;
      bool bad = false;

      for (uint i = lane; i < n; i += GROUP)
        {
          uint x = f[base + i];

          if (pc.a[12] != NONE)
            x = f32_add (x, f[pc.a[12] + i]);
          if (pc.a[13] != NONE)
            x = f32_add (f[pc.a[13] + r * n + i], x);
          if (pc.a[12] != NONE || pc.a[13] != NONE)
            f[base + i] = x;
          s_leaf[i] = x;
        }
      barrier ();
      mean = f32_div (wg_sum_tree (n), pc.a[8]);
      for (uint i = lane; i < n; i += GROUP)
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
      for (uint i = lane; i < n; i += GROUP)
        {
          uint y = f32_add (f32_mul (f32_mul (f32_sub (f[base + i], mean), rstd),
                                     f[pc.a[1] + i]), f[pc.a[2] + i]);

          f[dst + i] = y;
          amax_add (y, amax, bad);
        }
      if (lane == 0u)
        {
          f[pc.a[4] + r] = mean;
          f[pc.a[5] + r] = rstd;
        }
      amax = wg_amax (amax, bad);
      quantize_row (dst, r, n, pc.a[10], pc.a[11], amax);
    }
}

void
fuse_relu (bool backward)
{
  uint n = pc.a[4], lane = gl_LocalInvocationID.x;

  for (uint r = gl_WorkGroupID.x; r < pc.a[3]; r += gl_NumWorkGroups.x)
    {
      uint amax = 0u, dst = pc.a[2] + r * n;
      bool bad = false;

      for (uint i = lane; i < n; i += GROUP)
        {
          uint x = f[pc.a[0] + r * n + i], y;

          if (backward)
            y = f32_is_nan (x) ? x : (x & F32_SIGN) == 0u && x != 0u ? f[pc.a[1] + r * n + i] : 0u;
          else
            {
              x = f32_add (x, f[pc.a[1] + i]);
              f[pc.a[0] + r * n + i] = x;
              y = f32_is_nan (x) ? x : (x & F32_SIGN) == 0u && x != 0u ? x : 0u;
            }
          f[dst + i] = y;
          amax_add (y, amax, bad);
        }
      amax = wg_amax (amax, bad);
      quantize_row (dst, r, n, pc.a[5], pc.a[6], amax);
    }
}

void
fuse_qk ()
{
  uint c = pc.a[3], d = pc.a[4], heads = pc.a[5], t = pc.a[6], lane = gl_LocalInvocationID.x;
  uint any_bad = 0u;

  for (uint r = gl_WorkGroupID.x; r < pc.a[2]; r += gl_NumWorkGroups.x)
    {
      uint row = pc.a[0] + r * 3u * c;

      for (uint i = lane; i < 3u * c; i += GROUP)
        {
          uint x = f32_add (f[row + i], f[pc.a[1] + i]);

          f[row + i] = x;
          if (i < 2u * c)
            s_qk[i] = x;
        }
      barrier ();
      /* An invocation per head vector: q's H, then k's. */
      for (uint hv = lane; hv < 2u * heads; hv += GROUP)
        {
          bool right = hv >= heads;
          uint h = hv % heads, src = hv * d, amax = 0u;
          uint vec = ((r / t) * heads + h) * t + r % t;
          uint q = right ? pc.a[9] : pc.a[7], e = right ? pc.a[10] : pc.a[8];
          bool bad = false;
          int ex;

          for (uint j = 0u; j < d; j++)
            amax_add (s_qk[src + j], amax, bad);
          if (bad)
            any_bad = 1u;
          ex = exponent_of (amax);
          e32[e + vec] = ex;
          for (uint j = 0u; j < d; j++)
            q8[q + vec * d + j] = quantize_bits (s_qk[src + j], amax, ex);
        }
      /* s_qk is reused by the next row. */
      barrier ();
    }
  if (any_bad != 0u)
    e32[0] = 1;
}

void
main ()
{
  switch (pc.op)
    {
    case OP_FUSE_NORM: fuse_norm (); break;
    case OP_FUSE_RELU: fuse_relu (false); break;
    case OP_FUSE_RELU_BACK: fuse_relu (true); break;
    default: fuse_qk (); break;
    }
}
