#version 450
#extension GL_GOOGLE_include_directive : require
/* resident-gemm.comp: the products of the resident pass (resident-forward.comp's
 * OP_GEMM, same push constants, same buffers) tiled through shared memory: a
 * workgroup of 16 × 16 invocations computes a 64 × 64 block of outputs, each
 * invocation 4 × 4 of them, from 32-byte slices of K staged in shared memory.
 * int32 sums are exact in any order (|acc| ≤ 127² · K < 2³¹), so the
 * accumulators hold the byte loop's integers and the epilogue
 * (gemm-epilogue.glsl, integers only) the CPU's bits.
 *
 * Needs K and every operand's start on 4 bytes (the recording checks it and
 * keeps resident-forward.comp's product otherwise). Workgroup (x, y, z) is
 * the block at column 64x, row 64y of pair z; or, for a product of one
 * matrix with few blocks and a long K (the weights' gradients: K is the
 * batch's 4,096 rows), of slice z of K, whose int32 sums go to F and a
 * second dispatch (OP_GEMM_SUM) adds the slices and applies the epilogue.
 *
 * DC_BREAK builds the deliberately wrong twin (it forgets the last four bytes
 * of K), for the gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "gemm-epilogue.glsl"

layout (local_size_x = 16, local_size_y = 16) in;

layout (std430, binding = 0) buffer F { uint f[]; };
/* The int8 operands four to a word, little-endian. */
layout (std430, binding = 1) readonly buffer Q { uint q32[]; };
layout (std430, binding = 2) buffer E { int e32[]; };
layout (std430, binding = 3) readonly buffer T { uint tok_unused[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c); a as OP_GEMM's:
 * qa, ea, M, qb, eb, N, K, out, ldc, pairs, heads, the output's sequence and
 * head strides. */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define TILE 64u
#define KW 8u     /* words of K per stage: 32 bytes */

/* [word of the stage][row of the block] */
shared uint s_a[KW][TILE];
shared uint s_b[KW][TILE];

#define OP_GEMM 3u
#define OP_GEMM_SUM 100u

/* OP_GEMM_SUM (a: as OP_GEMM's for one matrix, a[13] slices, a[14] the
 * partial sums in F): one invocation per output adds the slices' int32
 * partial sums (exact in any order) and applies the epilogue. */
void
sum_slices ()
{
  uint i = gl_WorkGroupID.x * 256u + gl_LocalInvocationID.y * 16u + gl_LocalInvocationID.x;
  uint m_rows = pc.a[2], n_cols = pc.a[5];

  if (i < m_rows * n_cols)
    {
      uint m = i / n_cols, n = i % n_cols, mn = m_rows * n_cols, at = pc.a[14] + i;
      uint s = 0u;
      int acc = 0;

      /* Four slices' loads issued before their sums (int32: exact in any
       * order), not one wait for memory per slice. */
      for (; s + 4u <= pc.a[13]; s += 4u)
        {
          uint p0 = f[at + s * mn], p1 = f[at + (s + 1u) * mn];
          uint p2 = f[at + (s + 2u) * mn], p3 = f[at + (s + 3u) * mn];

          acc += int (p0) + int (p1) + int (p2) + int (p3);
        }
      for (; s < pc.a[13]; s++)
        acc += int (f[at + s * mn]);
      f[pc.a[7] + m * pc.a[8] + n] = dc_gemm_epilogue (acc, e32[pc.a[1] + m], e32[pc.a[4] + n]);
    }
}

void
main ()
{
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint lid = ty * 16u + tx;
  uint m_rows = pc.a[2], n_cols = pc.a[5], k = pc.a[6];
  /* a[13] != 0: split over K for one matrix, workgroup z the slice of
   * a[13] words of K, its int32 sums into F at a[14] for OP_GEMM_SUM. */
  bool split = pc.a[13] != 0u;
  uint p = split ? 0u : gl_WorkGroupID.z;
  uint m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  uint kw = k / 4u, kbeg = 0u;
  /* Word offsets of this pair's first left and right vectors. */
  uint qa = (pc.a[0] + p * m_rows * k) / 4u, qb = (pc.a[3] + p * n_cols * k) / 4u;
  /* Each invocation stages words lid % 8 of rows lid / 8 and lid / 8 + 32. */
  uint lw = lid % KW, lr = lid / KW;
  uint kend;
  int acc[4][4];

  if (pc.op == OP_GEMM_SUM)
    {
      sum_slices ();
      return;
    }
#ifdef DC_BREAK
  kw -= 1u;
#endif
  kend = kw;
  if (split)
    {
      kbeg = gl_WorkGroupID.z * pc.a[13];
      kend = min (kw, kbeg + pc.a[13]);
    }
  for (uint i = 0u; i < 4u; i++)
    for (uint j = 0u; j < 4u; j++)
      acc[i][j] = 0;

  for (uint k0 = kbeg; k0 < kend; k0 += KW)
    {
      bool in_k = k0 + lw < kend;

      for (uint h = 0u; h < 2u; h++)
        {
          uint r = lr + 32u * h;

          s_a[lw][r] = in_k && m0 + r < m_rows ? q32[qa + (m0 + r) * (k / 4u) + k0 + lw] : 0u;
          s_b[lw][r] = in_k && n0 + r < n_cols ? q32[qb + (n0 + r) * (k / 4u) + k0 + lw] : 0u;
        }
      barrier ();
      for (uint w = 0u; w < KW; w++)
        {
          ivec4 x[4], y[4];

          for (uint i = 0u; i < 4u; i++)
            {
              int u = int (s_a[w][ty + 16u * i]), v = int (s_b[w][tx + 16u * i]);

              x[i] = ivec4 (bitfieldExtract (u, 0, 8), bitfieldExtract (u, 8, 8),
                            bitfieldExtract (u, 16, 8), bitfieldExtract (u, 24, 8));
              y[i] = ivec4 (bitfieldExtract (v, 0, 8), bitfieldExtract (v, 8, 8),
                            bitfieldExtract (v, 16, 8), bitfieldExtract (v, 24, 8));
            }
          for (uint i = 0u; i < 4u; i++)
            for (uint j = 0u; j < 4u; j++)
              acc[i][j] += x[i].x * y[j].x + x[i].y * y[j].y + x[i].z * y[j].z + x[i].w * y[j].w;
        }
      barrier ();
    }

  if (split)
    {
      uint base = pc.a[14] + gl_WorkGroupID.z * m_rows * n_cols;

      for (uint i = 0u; i < 4u; i++)
        for (uint j = 0u; j < 4u; j++)
          {
            uint m = m0 + ty + 16u * i, n = n0 + tx + 16u * j;

            if (m < m_rows && n < n_cols)
              f[base + m * n_cols + n] = uint (acc[i][j]);
          }
      return;
    }
  {
    uint heads = max (pc.a[10], 1u);
    uint base = pc.a[7] + (p / heads) * pc.a[11] + (p % heads) * pc.a[12];

    for (uint i = 0u; i < 4u; i++)
      {
        uint m = m0 + ty + 16u * i;

        if (m >= m_rows)
          continue;
        for (uint j = 0u; j < 4u; j++)
          {
            uint n = n0 + tx + 16u * j;

            if (n < n_cols)
              f[base + m * pc.a[8] + n]
                = dc_gemm_epilogue (acc[i][j], e32[pc.a[1] + p * m_rows + m],
                                    e32[pc.a[4] + p * n_cols + n]);
          }
      }
  }
}
