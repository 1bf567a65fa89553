#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
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
 * (integer or f32-exact.glsl arithmetic; the norm's sums sum-tree-wg.glsl's
 * tree), kept in registers between the steps (ReLU's long rows: read back
 * by the invocation that wrote them); the quantization is
 * resident-quant.comp's: amax the largest finite |x| bit pattern (a
 * maximum, reduced in any order: a tree in shared memory, or a shared
 * atomicMax per head), the exponent and each value quant-exact.glsl's
 * integer functions of the bits; a NaN or infinity sets E[0] (the host
 * refuses the pass) and quantizes to 0.
 *
 * Speed: a workgroup per row and few barriers; each invocation issues its
 * loads together before its stores (a store to F could alias the next
 * load, which would otherwise wait for it); 4.9 KB of shared memory.
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
/* A row of the norm (≤ WG_SUM_MAX) is PER_LANE values an invocation, kept
 * in registers from load to quantization; longer rows (ReLU's 4C) go in
 * chunks of CHUNK values an invocation, each chunk's loads issued together
 * before its stores. */
#define PER_LANE 16u
#define CHUNK 8u

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

/* s_leaf (the norm's leaves), s_block, s_total and s_amax (a row's lanes'
 * maxima, or OP_FUSE_QK's heads'): 4.9 KB, so that many workgroups fit a
 * multiprocessor. */
#include "sum-tree-wg.glsl"

shared uint s_amax[GROUP];

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

void
fuse_norm ()
{
  uint n = pc.a[7], lane = gl_LocalInvocationID.x;
  bool pre = pc.a[12] != NONE || pc.a[13] != NONE;

  for (uint r = gl_WorkGroupID.x; r < pc.a[6]; r += gl_NumWorkGroups.x)
    {
      uint base = pc.a[0] + r * n, dst = pc.a[3] + r * n, mean, var, rstd, amax = 0u;
      uint xs[PER_LANE];
      bool bad = false;
      int ex;

      /* Element i = lane + GROUP·u of the row is xs[u]: loads first. */
      [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
        {
          uint i = lane + GROUP * u;

          xs[u] = 0u;
          if (i < n)
            {
              uint x = f[base + i];

              if (pc.a[12] != NONE)
                x = f32_add (x, f[pc.a[12] + i]);
              if (pc.a[13] != NONE)
                x = f32_add (f[pc.a[13] + r * n + i], x);
              xs[u] = x;
            }
        }
      [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
        {
          uint i = lane + GROUP * u;

          if (i < n)
            {
              if (pre)
                f[base + i] = xs[u];
              s_leaf[i] = xs[u];
            }
        }
      barrier ();
      mean = f32_div (wg_sum_tree (n), pc.a[8]);
      [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
        {
          uint i = lane + GROUP * u;

          if (i < n)
            {
              uint v = f32_sub (xs[u], mean);

              s_leaf[i] = f32_mul (v, v);
            }
        }
      barrier ();
      var = f32_div (wg_sum_tree (n), pc.a[8]);
      if ((var & 0x7fffffffu) >= F32_INF)
        {
          mean = F32_QNAN;
          var = F32_QNAN;
        }
      rstd = f32_div (0x3f800000u, f32_sqrt (f32_add (var, pc.a[9])));
      [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
        {
          uint i = lane + GROUP * u;

          if (i < n)
            {
              xs[u] = f32_add (f32_mul (f32_mul (f32_sub (xs[u], mean), rstd), f[pc.a[1] + i]),
                               f[pc.a[2] + i]);
              amax_add (xs[u], amax, bad);
            }
        }
      [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
        {
          uint i = lane + GROUP * u;

          if (i < n)
            f[dst + i] = xs[u];
        }
      if (lane == 0u)
        {
          f[pc.a[4] + r] = mean;
          f[pc.a[5] + r] = rstd;
        }
      amax = wg_amax (amax, bad);
      ex = exponent_of (amax);
      if (lane == 0u)
        e32[pc.a[11] + r] = ex;
      [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
        {
          uint i = lane + GROUP * u;

          if (i < n)
            q8[pc.a[10] + r * n + i] = quantize_bits (xs[u], amax, ex);
        }
    }
}

void
fuse_relu (bool backward)
{
  uint n = pc.a[4], lane = gl_LocalInvocationID.x;

  for (uint r = gl_WorkGroupID.x; r < pc.a[3]; r += gl_NumWorkGroups.x)
    {
      uint amax = 0u, src = pc.a[0] + r * n, dst = pc.a[2] + r * n;
      bool bad = false;
      int ex;

      for (uint i0 = lane; i0 < n; i0 += GROUP * CHUNK)
        {
          uint xs[CHUNK], ys[CHUNK];

          /* The chunk's loads, then its stores. */
          [[unroll]] for (uint u = 0u; u < CHUNK; u++)
            {
              uint i = i0 + GROUP * u;

              xs[u] = 0u;
              ys[u] = 0u;
              if (i < n)
                {
                  xs[u] = f[src + i];
                  ys[u] = backward ? f[pc.a[1] + r * n + i] : f[pc.a[1] + i];
                }
            }
          [[unroll]] for (uint u = 0u; u < CHUNK; u++)
            {
              uint i = i0 + GROUP * u, x = xs[u];

              if (i < n)
                {
                  if (backward)
                    ys[u] = f32_is_nan (x) ? x : (x & F32_SIGN) == 0u && x != 0u ? ys[u] : 0u;
                  else
                    {
                      x = f32_add (x, ys[u]);
                      f[src + i] = x;
                      ys[u] = f32_is_nan (x) ? x : (x & F32_SIGN) == 0u && x != 0u ? x : 0u;
                    }
                  f[dst + i] = ys[u];
                  amax_add (ys[u], amax, bad);
                }
            }
        }
      amax = wg_amax (amax, bad);
      ex = exponent_of (amax);
      if (lane == 0u)
        e32[pc.a[6] + r] = ex;
      /* The values this invocation wrote, read back a chunk at a time. */
      for (uint i0 = lane; i0 < n; i0 += GROUP * CHUNK)
        {
          uint ys[CHUNK];

          [[unroll]] for (uint u = 0u; u < CHUNK; u++)
            {
              uint i = i0 + GROUP * u;

              ys[u] = i < n ? f[dst + i] : 0u;
            }
          [[unroll]] for (uint u = 0u; u < CHUNK; u++)
            {
              uint i = i0 + GROUP * u;

              if (i < n)
                q8[pc.a[5] + r * n + i] = quantize_bits (ys[u], amax, ex);
            }
        }
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

      /* q, k, then v (the bias only): a part of C values at a time, element
       * i = lane + GROUP·u of the part in xs[u]; each head's amax a shared
       * maximum (atomicMax: the same in any order). */
      for (uint part = 0u; part < 3u; part++)
        {
          uint at = row + part * c, bias = pc.a[1] + part * c;
          uint q = part == 1u ? pc.a[9] : pc.a[7], e = part == 1u ? pc.a[10] : pc.a[8];
          uint xs[PER_LANE];

          if (lane < heads)
            s_amax[lane] = 0u;
          barrier ();
          [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
            {
              uint i = lane + GROUP * u;

              xs[u] = i < c ? f32_add (f[at + i], f[bias + i]) : 0u;
            }
          [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
            {
              uint i = lane + GROUP * u;

              if (i < c)
                {
                  uint m = xs[u] & 0x7fffffffu;

                  f[at + i] = xs[u];
                  if (part < 2u && m >= F32_INF)
                    any_bad = 1u;
                  else if (part < 2u)
                    atomicMax (s_amax[i / d], m);
                }
            }
          barrier ();
          if (part < 2u)
            [[unroll]] for (uint u = 0u; u < PER_LANE; u++)
              {
                uint i = lane + GROUP * u;

                if (i < c)
                  {
                    uint h = i / d, amax = s_amax[h];
                    uint vec = ((r / t) * heads + h) * t + r % t;
                    int ex = exponent_of (amax);

                    if (i % d == 0u)
                      e32[e + vec] = ex;
                    q8[q + vec * d + i % d] = quantize_bits (xs[u], amax, ex);
                  }
              }
          /* s_amax is reused by the next part. */
          barrier ();
        }
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
