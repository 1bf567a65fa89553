#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
/* resident-chains.comp: the backward's serial sums over rows, each column's
 * chain fed from shared memory by a warp that does nothing else: the layer
 * norms' weight and bias gradients (OP_LN_DW, dc-gpt.c's
 * layer_norm_grad_chunk) and the biases' gradients (OP_COLSUM,
 * column_sum_chunk), on resident-forward.comp's buffers, with
 * resident-backward.comp's push constants for the same ops.
 *
 * Each column's sum stays the CPU's serial chain: rows in order from +0
 * (docs/VERIFICATION.md: the order is the rule), one invocation a chain.
 * What this kernel changes is what the chain waits for. A workgroup of
 * 32 + 256 invocations owns CW columns: the first warp holds the chains
 * (lane k · CW + c: chain k of column c; OP_LN_DW's two chains of a column,
 * dw and db, side by side in one warp, so they cost the time of one), the
 * 256 others load the rows, compute the leaves (dy · x̂ and dy; a leaf is
 * one product, the same bits whoever computes it) and write them to a ring
 * of two RB-row buffers in shared memory, a column's rows contiguous. While
 * the chains add block b from one buffer, the loaders write block b + 1 to
 * the other from registers and issue the loads of block b + 2: the chains'
 * warp never waits on global memory and reads its leaves 4 rows a load,
 * 32 rows ahead of its adds (resident-colsum.comp's lanes loaded, computed
 * and added in turn: 100–225 µs a 4,096-row dispatch on the H200, where
 * 4,096 dependent adds take about 8 µs).
 *
 * DC_BREAK (and the native twins' DC_BREAK_FTZ) builds the deliberately
 * wrong twin: each block's last two rows added in the wrong order (an early
 * row's rounding is often lost in the larger sums that follow; the last
 * block's last two decide the result's last bit).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "f32-exact.glsl"

/* One warp of chains, then the loaders (DC_GPT_VK_CHAINS_GROUP mirrors). */
#define CHAIN_LANES 32u
#define LOADERS 256u
layout (local_size_x = 288) in;

layout (std430, binding = 0) buffer F { uint f[]; };
layout (std430, binding = 1) buffer Q { uint q_unused[]; };
layout (std430, binding = 2) buffer E { int e_unused[]; };
layout (std430, binding = 3) readonly buffer T { uint tok_unused[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_LN_DW 14u
#define OP_COLSUM 15u

/* Columns per workgroup (DC_GPT_VK_CHAINS_COLUMNS mirrors it) and rows per
 * block: 256 loaders hold 8 rows × 4 columns … RB / 64 = 8 rows each in
 * registers; a block's 512 dependent adds (≈ 1 µs) cover the next block's
 * loads. */
#define CW 4u
#define RB 512u
#define ROW_LANES (LOADERS / CW)
#define PER (RB / ROW_LANES)
/* A column's rows in shared memory, padded so that the loaders' writes (8
 * rows × 4 columns a warp) and the chains' 16-byte reads hit distinct banks;
 * the second leaf's columns 4 words further. */
#define STRIDE (RB + 8u)
#define LEAF_WORDS (CW * STRIDE + 4u)
#define BUF_WORDS (2u * LEAF_WORDS)
/* Rows a chain reads ahead of its adds: G 16-byte loads. */
#define G 8u

shared uvec4 s_ring[2u * BUF_WORDS / 4u];

/* The rows of the block this loader holds. */
uint p_dy[PER], p_x[PER], p_mean[PER], p_rstd[PER];

void
load_block (bool ln, uint r0, uint rows, uint n, uint col, uint row_lane)
{
  /* Unrolled: p_*[k] stay registers, every load in flight at once. */
  [[unroll]] for (uint k = 0u; k < PER; k++)
    {
      uint r = r0 + row_lane + k * ROW_LANES;

      if (r < rows)
        {
          p_dy[k] = f[pc.a[ln ? 1 : 0] + r * n + col];
          if (ln)
            {
              p_x[k] = f[pc.a[0] + r * n + col];
              p_mean[k] = f[pc.a[2] + r];
              p_rstd[k] = f[pc.a[3] + r];
            }
        }
    }
}

void
put (uint word, uint v)
{
  s_ring[word >> 2][word & 3u] = v;
}

uint
get (uint word)
{
  return s_ring[word >> 2][word & 3u];
}

/* The leaves of the rows this loader holds into buffer buf. */
void
store_block (bool ln, uint buf, uint r0, uint rows, uint c, uint row_lane)
{
  [[unroll]] for (uint k = 0u; k < PER; k++)
    {
      uint i = row_lane + k * ROW_LANES, at = buf * BUF_WORDS + c * STRIDE + i;

      if (r0 + i < rows)
        {
          if (ln)
            {
              uint norm = f32_mul (f32_sub (p_x[k], p_mean[k]), p_rstd[k]);

              put (at, f32_mul (p_dy[k], norm));
              put (at + LEAF_WORDS, p_dy[k]);
            }
          else
            put (at, p_dy[k]);
        }
    }
}

/* The chain acc through the m rows of the block at word base. */
uint
chain_block (uint acc, uint base, uint m)
{
  if (m == RB)
    {
      /* base is a multiple of 4: the leaves as 16-byte loads, the next G
       * loads issued before this G's adds. */
      uint q = base >> 2;
      uvec4 cur[G];

      [[unroll]] for (uint u = 0u; u < G; u++)
        cur[u] = s_ring[q + u];
      [[unroll]] for (uint ch = 0u; ch < RB / (4u * G); ch++)
        {
          uvec4 nxt[G];

          if (ch + 1u < RB / (4u * G))
            [[unroll]] for (uint u = 0u; u < G; u++)
              nxt[u] = s_ring[q + (ch + 1u) * G + u];
#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
          if (ch + 1u == RB / (4u * G))
            cur[G - 1u] = cur[G - 1u].xywz;
#endif
          [[unroll]] for (uint u = 0u; u < G; u++)
            {
              acc = f32_add (acc, cur[u].x);
              acc = f32_add (acc, cur[u].y);
              acc = f32_add (acc, cur[u].z);
              acc = f32_add (acc, cur[u].w);
            }
          if (ch + 1u < RB / (4u * G))
            [[unroll]] for (uint u = 0u; u < G; u++)
              cur[u] = nxt[u];
        }
      return acc;
    }
  for (uint i = 0u; i < m; i++)
    {
#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
      uint at = m >= 3u && i + 2u >= m ? 2u * m - 3u - i : i;
#else
      uint at = i;
#endif
      acc = f32_add (acc, get (base + at));
    }
  return acc;
}

void
main ()
{
  bool ln = pc.op == OP_LN_DW;
  uint rows = ln ? pc.a[4] : pc.a[1], n = ln ? pc.a[5] : pc.a[2];
  uint t = gl_LocalInvocationID.x;
  bool chains = t < CHAIN_LANES;
  uint loader = chains ? 0u : t - CHAIN_LANES;
  uint k = chains ? t / CW : 0u;
  uint c = chains ? t % CW : loader % CW, row_lane = loader / CW;
  bool my_chain = chains && k < (ln ? 2u : 1u);
  uint n_groups = (n + CW - 1u) / CW, n_blocks = (rows + RB - 1u) / RB;

  for (uint g = gl_WorkGroupID.x; g < n_groups; g += gl_NumWorkGroups.x)
    {
      uint j = g * CW + c;
      uint col = min (j, n - 1u);  /* the last group's spare lanes load a real column */
      uint acc = 0u;

      if (!chains)
        {
          load_block (ln, 0u, rows, n, col, row_lane);
          store_block (ln, 0u, 0u, rows, c, row_lane);
          if (n_blocks > 1u)
            load_block (ln, RB, rows, n, col, row_lane);
        }
      barrier ();
      for (uint b = 0u; b < n_blocks; b++)
        {
          if (!chains)
            {
              /* Block b + 1 from registers into the buffer block b − 1 left
               * (the barrier below b − 1's adds), then block b + 2's loads. */
              if (b + 1u < n_blocks)
                {
                  store_block (ln, (b + 1u) & 1u, (b + 1u) * RB, rows, c, row_lane);
                  if (b + 2u < n_blocks)
                    load_block (ln, (b + 2u) * RB, rows, n, col, row_lane);
                }
            }
          else if (my_chain)
            acc = chain_block (acc, (b & 1u) * BUF_WORDS + k * LEAF_WORDS + c * STRIDE,
                               min (RB, rows - b * RB));
          barrier ();
        }
      if (my_chain && j < n)
        f[(k == 1u ? pc.a[7] : ln ? pc.a[6] : pc.a[3]) + j] = acc;
    }
}
