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
 * 32 + 256 invocations owns 4 columns (OP_LN_DW) or 8 (OP_COLSUM): the
 * first warp holds the 8 chains (OP_LN_DW's lane k · 4 + c: chain k of
 * column c, dw and db side by side in one warp, so they cost the time of
 * one), the
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

/* Loops over a lane's registers unrolled for the native kernels (registers,
 * every load in flight); the emulated ones keep them loops (their inlined
 * arithmetic unrolled makes a shader lavapipe compiles for minutes). */
#ifdef DC_NATIVE_F32
#define DC_UNROLL [[unroll]]
#else
#define DC_UNROLL [[dont_unroll]]
#endif

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

/* Columns per workgroup (DC_GPT_VK_CHAINS_COLUMNS and
 * DC_GPT_VK_CHAINS_SUM_COLUMNS mirror them): OP_LN_DW's 4 columns of two
 * chains each, OP_COLSUM's 8 of one; either way 8 chains, each a slot of the
 * ring: lane t < 8 reads slot (t / 4, t % 4). Rows per block: RB; 256
 * loaders hold 8 rows of 4 columns (RB / 64) or 16 of 8 (RB / 32) in
 * registers; a block's 512 dependent adds (≈ 1 µs) cover the next block's
 * loads. */
#define CW 4u
#define CW_SUM 8u
#define RB 512u
#define PER (RB / (LOADERS / CW))
#define PER_SUM (RB / (LOADERS / CW_SUM))
/* A slot's rows in shared memory, padded so that the loaders' writes (8
 * rows × 4 columns, or 4 × 8, a warp) and the chains' 16-byte reads hit
 * distinct banks; slots (1, c) 4 words after (0, c)'s bank. */
#define STRIDE (RB + 8u)
#define LEAF_WORDS (4u * STRIDE + 4u)
#define BUF_WORDS (2u * LEAF_WORDS)
/* Rows a chain reads ahead of its adds: G 16-byte loads. */
#define G 8u

shared uvec4 s_ring[2u * BUF_WORDS / 4u];

/* The rows of the block this loader holds. */
uint p_dy[PER_SUM], p_x[PER], p_mean[PER], p_rstd[PER];

/* The word where slot (k, c) of buffer buf starts. */
uint
slot (uint buf, uint k, uint c)
{
  return buf * BUF_WORDS + k * LEAF_WORDS + c * STRIDE;
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

/* OP_LN_DW: loader lane (row_lane, c) holds rows row_lane + 64 k of column
 * col. Unrolled: p_*[k] stay registers, every load in flight at once. */
void
load_block_ln (uint r0, uint rows, uint n, uint col, uint row_lane)
{
  DC_UNROLL for (uint k = 0u; k < PER; k++)
    {
      uint r = r0 + row_lane + k * (LOADERS / CW);

      if (r < rows)
        {
          p_dy[k] = f[pc.a[1] + r * n + col];
          p_x[k] = f[pc.a[0] + r * n + col];
          p_mean[k] = f[pc.a[2] + r];
          p_rstd[k] = f[pc.a[3] + r];
        }
    }
}

/* The leaves of those rows (dy · n̂ to slot (0, c), dy to (1, c)) into
 * buffer buf. */
void
store_block_ln (uint buf, uint r0, uint rows, uint c, uint row_lane)
{
  DC_UNROLL for (uint k = 0u; k < PER; k++)
    {
      uint i = row_lane + k * (LOADERS / CW), at = slot (buf, 0u, c) + i;

      if (r0 + i < rows)
        {
          uint norm = f32_mul (f32_sub (p_x[k], p_mean[k]), p_rstd[k]);

          put (at, f32_mul (p_dy[k], norm));
          put (at + LEAF_WORDS, p_dy[k]);
        }
    }
}

/* OP_COLSUM: loader lane (row_lane, c) holds rows row_lane + 32 k of
 * column col, then writes them to slot (c / 4, c % 4). */
void
load_block_sum (uint r0, uint rows, uint n, uint col, uint row_lane)
{
  DC_UNROLL for (uint k = 0u; k < PER_SUM; k++)
    {
      uint r = r0 + row_lane + k * (LOADERS / CW_SUM);

      if (r < rows)
        p_dy[k] = f[pc.a[0] + r * n + col];
    }
}

void
store_block_sum (uint buf, uint r0, uint rows, uint c, uint row_lane)
{
  DC_UNROLL for (uint k = 0u; k < PER_SUM; k++)
    {
      uint i = row_lane + k * (LOADERS / CW_SUM);

      if (r0 + i < rows)
        put (slot (buf, c / 4u, c % 4u) + i, p_dy[k]);
    }
}

/* The chain acc through the m rows of the block at word base. */
uint
chain_block (uint acc, uint base, uint m)
{
  if (m == RB)
    {
      /* base is a multiple of 4: the leaves as 16-byte loads, G of them (4G
       * rows) into one set of registers while the other set's rows are
       * added; a loop of pairs of chunks (not unrolled whole: lavapipe's
       * compiler takes minutes over a whole block of emulated adds). */
      uint q = base >> 2;
      uvec4 va[G], vb[G];

      [[unroll]] for (uint u = 0u; u < G; u++)
        va[u] = s_ring[q + u];
      [[dont_unroll]] for (uint ch = 0u; ch < RB / (4u * G); ch += 2u)
        {
          uint qb = q + (ch + 1u) * G, qa = q + min (ch + 2u, RB / (4u * G) - 1u) * G;

          [[unroll]] for (uint u = 0u; u < G; u++)
            vb[u] = s_ring[qb + u];
          [[unroll]] for (uint u = 0u; u < G; u++)
            {
              acc = f32_add (acc, va[u].x);
              acc = f32_add (acc, va[u].y);
              acc = f32_add (acc, va[u].z);
              acc = f32_add (acc, va[u].w);
            }
          /* The last pair reads its last chunk again: in bounds, unused. */
          [[unroll]] for (uint u = 0u; u < G; u++)
            va[u] = s_ring[qa + u];
#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
          if (ch + 2u == RB / (4u * G))
            vb[G - 1u] = vb[G - 1u].xywz;
#endif
          [[unroll]] for (uint u = 0u; u < G; u++)
            {
              acc = f32_add (acc, vb[u].x);
              acc = f32_add (acc, vb[u].y);
              acc = f32_add (acc, vb[u].z);
              acc = f32_add (acc, vb[u].w);
            }
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
  uint cw = ln ? CW : CW_SUM;
  uint t = gl_LocalInvocationID.x;
  bool chains = t < CHAIN_LANES;
  uint loader = chains ? 0u : t - CHAIN_LANES;
  /* A chain lane's column in the group, and its slot (k, c) of the ring. */
  uint c = chains ? (ln ? t % CW : t) : loader % cw, row_lane = loader / cw;
  uint k = t / 4u, kc = t % 4u;
  bool my_chain = chains && t < 8u;
  uint n_groups = (n + cw - 1u) / cw, n_blocks = (rows + RB - 1u) / RB;

  for (uint g = gl_WorkGroupID.x; g < n_groups; g += gl_NumWorkGroups.x)
    {
      uint j = g * cw + c;
      uint col = min (j, n - 1u);  /* the last group's spare lanes load a real column */
      uint acc = 0u;

      if (!chains)
        {
          if (ln)
            {
              load_block_ln (0u, rows, n, col, row_lane);
              store_block_ln (0u, 0u, rows, c, row_lane);
              if (n_blocks > 1u)
                load_block_ln (RB, rows, n, col, row_lane);
            }
          else
            {
              load_block_sum (0u, rows, n, col, row_lane);
              store_block_sum (0u, 0u, rows, c, row_lane);
              if (n_blocks > 1u)
                load_block_sum (RB, rows, n, col, row_lane);
            }
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
                  uint buf = (b + 1u) & 1u, r1 = (b + 1u) * RB, r2 = (b + 2u) * RB;

                  if (ln)
                    {
                      store_block_ln (buf, r1, rows, c, row_lane);
                      if (b + 2u < n_blocks)
                        load_block_ln (r2, rows, n, col, row_lane);
                    }
                  else
                    {
                      store_block_sum (buf, r1, rows, c, row_lane);
                      if (b + 2u < n_blocks)
                        load_block_sum (r2, rows, n, col, row_lane);
                    }
                }
            }
          else if (my_chain)
            acc = chain_block (acc, slot (b & 1u, k, kc), min (RB, rows - b * RB));
          barrier ();
        }
      if (my_chain && j < n)
        f[(ln ? (k == 1u ? pc.a[7] : pc.a[6]) : pc.a[3]) + j] = acc;
    }
}
