#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
/* resident-colsum.comp: the backward's sums over rows, a workgroup per CW
 * columns: the layer norms' weight and bias gradients (OP_LN_DW, dc-gpt.c's
 * layer_norm_grad_chunk) and the biases' gradients (OP_COLSUM,
 * column_sum_chunk), on resident-forward.comp's buffers, with
 * resident-backward.comp's push constants for the same ops.
 *
 * Each column's sum stays the CPU's serial chain: rows in order from +0
 * (docs/VERIFICATION.md: the order is the rule). What changes is who waits
 * for memory: resident-backward.comp's invocation per column loads its rows
 * itself (a handful of multiprocessors, each row's load in the chain's
 * path). Here the workgroup loads a block of RB rows × CW columns (each row's
 * CW floats one 32-byte sector), computes the leaves (dy · x̂ and dy, or dy)
 * side by side into shared memory, and while one invocation per chain adds
 * the block in row order, the loads of the next block are in flight.
 *
 * DC_BREAK (and the native twins' DC_BREAK_FTZ) builds the deliberately
 * wrong twin: each block's first two rows added in the wrong order.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "f32-exact.glsl"

layout (local_size_x = 64) in;

layout (std430, binding = 0) buffer F { uint f[]; };
layout (std430, binding = 1) buffer Q { uint q_unused[]; };
layout (std430, binding = 2) buffer E { int e_unused[]; };
layout (std430, binding = 3) readonly buffer T { uint tok[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_HEAD_DW 11u
#define OP_LN_DX 13u
#define OP_LN_DW 14u
#define OP_COLSUM 15u
#define OP_EMBED_BACK 18u

/* Columns per workgroup (a row's CW floats: one 32-byte sector) and rows per
 * block: 64 invocations load 8 rows × 8 columns at a time, RB / 8 = 16 rows
 * each, which 4 × 16 registers hold; adding RB rows takes about as long as
 * the next block's loads (DC_GPT_VK_COLSUM_COLUMNS mirrors CW). */
#define CW 8u
#define RB 128u
#define LANES (64u / CW)
#define PER (RB / LANES)
/* Leaves a chain reads from shared memory before it adds them (RB is a
 * multiple). */
#define CHAIN_LOADS 16u

/* The leaves of the block: the first chain's (dy · x̂, or dy), then the
 * second's (dy, OP_LN_DW only). */
shared uint s_cols[2u * RB * CW];

/* The block of rows [r0, r0 + RB) that this invocation loads. */
uint p_dy[PER], p_x[PER], p_mean[PER], p_rstd[PER];

void
load_block (bool ln, uint r0, uint rows, uint n, uint col, uint row_lane)
{
  /* Unrolled: p_*[k] must be registers (a dynamic index puts them in local
   * memory, and each load then waits before the next is issued). */
  [[unroll]] for (uint k = 0u; k < PER; k++)
    {
      uint r = r0 + row_lane + k * LANES;

      if (r < rows)
        {
          if (ln)
            {
              p_dy[k] = f[pc.a[1] + r * n + col];
              p_x[k] = f[pc.a[0] + r * n + col];
              p_mean[k] = f[pc.a[2] + r];
              p_rstd[k] = f[pc.a[3] + r];
            }
          else
            p_dy[k] = f[pc.a[0] + r * n + col];
        }
    }
}

#include "sum-tree-wg.glsl"

/* op_ln_dx () with a[9] != 0 (rows of n ≤ WG_SUM_MAX): a workgroup per
 * row, both sums' leaves in shared memory and each sum sum-tree-wg.glsl's
 * (the same tree), then the row's elements side by side. */
void
ln_dx_rows_wg ()
{
  uint n = pc.a[7], lane = gl_LocalInvocationID.x, w = pc.a[1];

  for (uint r = gl_WorkGroupID.x; r < pc.a[6]; r += gl_NumWorkGroups.x)
    {
      uint x = pc.a[0] + r * n, dy = pc.a[4] + r * n, d_res = pc.a[5] + r * n;
      uint mean = f[pc.a[2] + r], rstd = f[pc.a[3] + r];
      uint g_mean_v, gn_mean;

      for (uint i = lane; i < n; i += 64u)
        s_leaf[i] = f32_mul (f[w + i], f[dy + i]);
      barrier ();
      g_mean_v = f32_div (wg_sum_tree (n), pc.a[8]);
      for (uint i = lane; i < n; i += 64u)
        s_leaf[i] = f32_mul (f32_mul (f[w + i], f[dy + i]),
                             f32_mul (f32_sub (f[x + i], mean), rstd));
      barrier ();
      gn_mean = f32_div (wg_sum_tree (n), pc.a[8]);
      for (uint i = lane; i < n; i += 64u)
        {
          uint norm = f32_mul (f32_sub (f[x + i], mean), rstd);
          uint g = f32_mul (f[w + i], f[dy + i]);
#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
          uint dx = f32_mul (f32_sub (g, g_mean_v), rstd);
#else
          uint dx = f32_mul (f32_sub (f32_sub (g, g_mean_v), f32_mul (norm, gn_mean)), rstd);
#endif

          f[d_res + i] = f32_add (f[d_res + i], dx);
        }
    }
}

/* Row indices a workgroup stages in shared memory at a time for the head's
 * and the embeddings' scatter-adds. */
#define TOK_CHUNK 64u
/* Rows whose values a lane loads before it adds them. */
#define SCATTER_AHEAD 16u

shared uint s_tok[TOK_CHUNK];

/* resident-backward.comp's op_head_dw () and op_embed_back () with each
 * token's rows listed: T holds, after the inputs and the targets, for each
 * of them the offsets (V + 1) and the rows (in order) of every token
 * (dc-gpt-vk-forward.c's submit () lists them). A workgroup takes a token v
 * and 64 of its columns: each invocation owns element (v, j) of d_wte and
 * subtracts (the head: lnf's rows whose target is v, then / rows) or adds
 * (the embeddings: d_res's rows whose input token is v) exactly those rows,
 * in row order, onto what is there: the CPU's chain, which read every row's
 * token to find them (resident-backward.comp's invocations still do).
 * d_wpe's elements (t, j) add the rows at position t in order from +0.
 * a (head): d_wte, lnf, rows, C, V, targets, fn, offsets, rows' list;
 * (embeddings): d_wte, d_wpe, dy, rows, C, seq, len, V, offsets, rows' list. */
void
scatter_main ()
{
  bool head = pc.op == OP_HEAD_DW;
  uint c = head ? pc.a[3] : pc.a[4], rows = head ? pc.a[2] : pc.a[3];
  uint src = head ? pc.a[1] : pc.a[2], n_v = head ? pc.a[4] : pc.a[7];
  uint offs = head ? pc.a[7] : pc.a[8], list = head ? pc.a[8] : pc.a[9];
  uint chunks = (c + 63u) / 64u, tiles_wte = n_v * chunks;
  uint tiles = head ? tiles_wte : tiles_wte + pc.a[5] * chunks;
  uint lane = gl_LocalInvocationID.x;

  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x)
    {
      uint j = (tile % chunks) * 64u + lane;

      if (tile < tiles_wte)
        {
          uint v = tile / chunks, dst = pc.a[0] + v * c + j;
          uint lo = tok[offs + v], hi = tok[offs + v + 1u];
          uint acc;

          /* Uniform: a token no input row has leaves d_wte's row as the
           * head left it. */
          if (!head && lo == hi)
            continue;
          acc = j < c ? f[dst] : 0u;
          for (uint k0 = lo; k0 < hi; k0 += TOK_CHUNK)
            {
              uint m = min (TOK_CHUNK, hi - k0);

              barrier ();
#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
              /* The twin: each token's first two rows the other way round. */
              if (lane < m)
                s_tok[lane] = tok[list + k0 + (k0 == lo && m >= 2u && lane < 2u ? 1u - lane
                                                                                 : lane)];
#else
              if (lane < m)
                s_tok[lane] = tok[list + k0 + lane];
#endif
              barrier ();
              if (j < c)
                {
                  uint u = 0u;

                  for (; u + SCATTER_AHEAD <= m; u += SCATTER_AHEAD)
                    {
                      uint y[SCATTER_AHEAD];

                      [[unroll]] for (uint i = 0u; i < SCATTER_AHEAD; i++)
                        y[i] = f[src + s_tok[u + i] * c + j];
                      [[unroll]] for (uint i = 0u; i < SCATTER_AHEAD; i++)
                        acc = head ? f32_sub (acc, y[i]) : f32_add (acc, y[i]);
                    }
                  for (; u < m; u++)
                    {
                      uint y = f[src + s_tok[u] * c + j];

                      acc = head ? f32_sub (acc, y) : f32_add (acc, y);
                    }
                }
            }
          if (j < c)
            f[dst] = head ? f32_div (acc, pc.a[6]) : acc;
        }
      else if (j < c)
        {
          uint t = (tile - tiles_wte) / chunks, len = pc.a[6], acc = 0u, r = t;

          if (t < len)
            {
              for (; r + 8u * len < rows + len; r += 8u * len)
                {
                  /* Rows t, t + len, …: 8 loaded, then added in order. */
                  uint y[8];

                  [[unroll]] for (uint i = 0u; i < 8u; i++)
                    y[i] = f[src + (r + i * len) * c + j];
                  [[unroll]] for (uint i = 0u; i < 8u; i++)
                    acc = f32_add (acc, y[i]);
                }
              for (; r < rows; r += len)
                acc = f32_add (acc, f[src + r * c + j]);
            }
          f[pc.a[1] + t * c + j] = acc;
        }
    }
}

void
main ()
{
  if (pc.op == OP_HEAD_DW || pc.op == OP_EMBED_BACK)
    {
      scatter_main ();
      return;
    }
  if (pc.op == OP_LN_DX)
    {
      ln_dx_rows_wg ();
      return;
    }
  bool ln = pc.op == OP_LN_DW;
  uint rows = ln ? pc.a[4] : pc.a[1], n = ln ? pc.a[5] : pc.a[2];
  uint lane = gl_LocalInvocationID.x, c = lane % CW, row_lane = lane / CW;
  uint chains = ln ? 2u * CW : CW;
  uint n_groups = (n + CW - 1u) / CW;

  for (uint g = gl_WorkGroupID.x; g < n_groups; g += gl_NumWorkGroups.x)
    {
      uint j = g * CW + c;
      uint col = min (j, n - 1u);  /* the last group's spare lanes load a real column */
      uint acc = 0u;

      load_block (ln, 0u, rows, n, col, row_lane);
      for (uint r0 = 0u; r0 < rows; r0 += RB)
        {
          uint m = min (RB, rows - r0);

          /* The previous block's chains are done with s_cols. */
          barrier ();
          [[unroll]] for (uint k = 0u; k < PER; k++)
            {
              uint i = row_lane + k * LANES;

              if (i < m)
                {
                  if (ln)
                    {
                      uint norm = f32_mul (f32_sub (p_x[k], p_mean[k]), p_rstd[k]);

                      s_cols[i * CW + c] = f32_mul (p_dy[k], norm);
                      s_cols[RB * CW + i * CW + c] = p_dy[k];
                    }
                  else
                    s_cols[i * CW + c] = p_dy[k];
                }
            }
          barrier ();
          /* The next block's loads, in flight while the chains add. */
          if (r0 + RB < rows)
            load_block (ln, r0 + RB, rows, n, col, row_lane);
          if (lane < chains)
            {
              uint base = (lane >= CW ? RB * CW : 0u) + c;

#if defined(DC_BREAK) || defined(DC_BREAK_FTZ)
              if (m >= 2u)
                {
                  acc = f32_add (acc, s_cols[base + CW]);
                  acc = f32_add (acc, s_cols[base]);
                }
              for (uint i = min (m, 2u); i < m; i++)
                acc = f32_add (acc, s_cols[base + i * CW]);
#else
              /* A whole block: CHAIN_LOADS leaves read from shared memory at
               * once, then added in order (one read a row in the chain's path
               * waited a shared-memory latency per add: 150 µs a dispatch of
               * 4,096 rows on the H200). */
              if (m == RB)
                for (uint i = 0u; i < RB; i += CHAIN_LOADS)
                  {
                    uint v[CHAIN_LOADS];

                    [[unroll]] for (uint u = 0u; u < CHAIN_LOADS; u++)
                      v[u] = s_cols[base + (i + u) * CW];
                    [[unroll]] for (uint u = 0u; u < CHAIN_LOADS; u++)
                      acc = f32_add (acc, v[u]);
                  }
              else
                for (uint i = 0u; i < m; i++)
                  acc = f32_add (acc, s_cols[base + i * CW]);
#endif
            }
        }
      if (lane < chains && j < n)
        f[(lane >= CW ? pc.a[7] : ln ? pc.a[6] : pc.a[3]) + j] = acc;
    }
}
