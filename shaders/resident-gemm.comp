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
 * the block at column 64x, row 64y of pair z.
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

void
main ()
{
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint lid = ty * 16u + tx;
  uint m_rows = pc.a[2], n_cols = pc.a[5], k = pc.a[6];
  uint p = gl_WorkGroupID.z, m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  uint kw = k / 4u;
  /* Word offsets of this pair's first left and right vectors. */
  uint qa = (pc.a[0] + p * m_rows * k) / 4u, qb = (pc.a[3] + p * n_cols * k) / 4u;
  /* Each invocation stages words lid % 8 of rows lid / 8 and lid / 8 + 32. */
  uint lw = lid % KW, lr = lid / KW;
  int acc[4][4];

#ifdef DC_BREAK
  kw -= 1u;
#endif
  for (uint i = 0u; i < 4u; i++)
    for (uint j = 0u; j < 4u; j++)
      acc[i][j] = 0;

  for (uint k0 = 0u; k0 < kw; k0 += KW)
    {
      bool in_k = k0 + lw < kw;

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
              f[base + m * pc.a[8] + n] = dc_gemm_epilogue (acc[i][j], e32[pc.a[1] + p * m_rows + m],
                                                            e32[pc.a[4] + p * n_cols + n]);
          }
      }
  }
}
