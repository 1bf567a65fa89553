#version 450
#extension GL_GOOGLE_include_directive : require
/* resident-softmax.comp: the resident pass's softmax (resident-forward.comp's
 * OP_SOFTMAX: head_forward ()'s row rule, and the probabilities at scale 1)
 * and its backward (resident-backward.comp's OP_SOFTMAX_BACK:
 * head_backward ()'s dc_math_softmax_backward), a workgroup per row, on the
 * same buffers (F floats).
 *
 * The row is staged in shared memory with coalesced loads; every
 * elementwise step (the scale, e^(x − max), the products y · dy, the
 * division, the output) runs on all invocations at once, each element by
 * the same function as the one-invocation kernels. Only the reductions have
 * an order, and they keep the CPU's:
 *
 * - the maximum is dc_math_max's left-to-right scan: its result is the first
 *   NaN if there is one, else the first element of the largest f32_order ()
 *   (−0 and +0 tie, and the first wins). A reduction of (value, index)
 *   pairs that keeps exactly that element is the same in any order;
 * - the sums are the library's tree (sum-tree.glsl, docs/VERIFICATION.md
 *   "Reductions"): blocks of 8 leaves left to right, each power-of-two part
 *   a balanced tree of its blocks, the parts added right to left. All the
 *   parts start at a multiple of their length, so their nodes are those of
 *   one aligned binary tree over the blocks: one invocation per block, then
 *   one per node level by level, then one invocation adds the parts' roots
 *   in the CPU's order.
 *
 * Push constants (DcVkForwardPush): op OP_SOFTMAX (7), a: scores, att, rows,
 * len, scale, causal; op OP_SOFTMAX_BACK (17), a: att, d_att, len, scale,
 * rows. Rows of len ≤ MAX_LEN (src/model/dc-gpt-vk-rows.c keeps longer ones
 * on the one-invocation kernels).
 *
 * DC_BREAK builds the deliberately wrong twin (the blocks' sums added left to
 * right instead of in the tree), for the gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "f32-exact.glsl"
#include "exp-exact.glsl"

#define GROUP 128u
/* Mirrors DC_GPT_VK_ROWS_SOFTMAX_MAX_LEN (src/model/dc-gpt-vk-rows.h). */
#define MAX_LEN 4096u
#define NONE 0xffffffffu

layout (local_size_x = 128) in;

layout (std430, binding = 0) buffer F { uint f[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_SOFTMAX 7u
#define OP_SOFTMAX_BACK 17u

/* The row's values, then the tree's nodes level by level (the blocks' sums
 * at level 0: MAX_LEN / 8, then half as many per level, fewer than
 * MAX_LEN / 4 in all), the maximum's candidates. */
shared uint s_v[MAX_LEN];
shared uint s_t[MAX_LEN / 4u];
shared uint s_mb[GROUP];
shared uint s_mi[GROUP];
shared uint s_sum;

/* Whether candidate (bb, bi) replaces (ab, ai) in dc_math_max's scan. */
bool
replaces (uint ab, uint ai, uint bb, uint bi)
{
  bool an, bn;
  int oa, ob;

  if (bi == NONE)
    return false;
  if (ai == NONE)
    return true;
  an = f32_is_nan (ab);
  bn = f32_is_nan (bb);
  if (an != bn)
    return bn;
  if (an)
    return bi < ai;
  oa = f32_order (ab);
  ob = f32_order (bb);
  return ob > oa || (ob == oa && bi < ai);
}

/* dc_math_max of s_v[0, n). Called by every invocation. */
uint
row_max (uint n)
{
  uint lid = gl_LocalInvocationID.x, mb = 0u, mi = NONE;

  for (uint j = lid; j < n; j += GROUP)
    if (replaces (mb, mi, s_v[j], j))
      {
        mb = s_v[j];
        mi = j;
      }
  s_mb[lid] = mb;
  s_mi[lid] = mi;
  barrier ();
  for (uint w = GROUP / 2u; w > 0u; w >>= 1)
    {
      if (lid < w && replaces (s_mb[lid], s_mi[lid], s_mb[lid + w], s_mi[lid + w]))
        {
          s_mb[lid] = s_mb[lid + w];
          s_mi[lid] = s_mi[lid + w];
        }
      barrier ();
    }
  mb = s_mb[0];
  /* s_mb is rewritten by the next row only after more barriers. */
  return mb;
}

/* The offset in s_t of level `level`'s nodes, nb blocks at level 0 (each
 * level keeps the whole pairs of the one below). */
uint
level_offset (uint nb, uint level)
{
  uint off = 0u;

  for (uint i = 0u; i < level; i++)
    {
      off += nb;
      nb /= 2u;
    }
  return off;
}

/* The aligned node covering leaves [start, start + len), len a power of two
 * ≥ 8 and start a multiple of it. */
uint
node (uint nb, uint start, uint len)
{
  uint level = uint (findMSB (len / 8u));

  return s_t[level_offset (nb, level) + start / len];
}

/* Σ s_v[0, n) in the library's tree, n ≥ 1. Called by every invocation;
 * every invocation gets the sum. */
uint
tree_sum (uint n)
{
  uint lid = gl_LocalInvocationID.x, nb = (n + 7u) / 8u;

  for (uint b = lid; b < nb; b += GROUP)
    {
      uint start = 8u * b, end = min (start + 8u, n), acc = s_v[start];

      for (uint i = start + 1u; i < end; i++)
        acc = f32_add (acc, s_v[i]);
      s_t[b] = acc;
    }
  barrier ();
  /* Each level: node m is the sum of nodes 2m and 2m + 1 below (left +
   * right), as sum_pow2 ()'s stack combines equal levels. */
  {
    uint off = 0u, count = nb;

    while (count > 1u)
      {
        uint next = off + count, pairs = count / 2u;

        for (uint m = lid; m < pairs; m += GROUP)
          s_t[next + m] = f32_add (s_t[off + 2u * m], s_t[off + 2u * m + 1u]);
        barrier ();
        off = next;
        count = pairs;
      }
  }
  if (lid == 0u)
    {
      uint parts[16];
      uint n_parts = 0u, start = 0u, rest = n, acc;

#ifdef DC_BREAK
      acc = s_t[0];
      for (uint b = 1u; b < nb; b++)
        acc = f32_add (acc, s_t[b]);
#else
      /* sum_tree (): sum[0, n) = P(h1) + (P(h2) + (… + the rest)). */
      while (rest > 8u && (rest & (rest - 1u)) != 0u)
        {
          uint h = 1u << uint (findMSB (rest));

          parts[n_parts++] = node (nb, start, h);
          start += h;
          rest -= h;
        }
      acc = rest <= 8u ? s_t[start / 8u] : node (nb, start, rest);
      while (n_parts > 0u)
        acc = f32_add (parts[--n_parts], acc);
#endif
      s_sum = acc;
    }
  barrier ();
  return s_sum;
}

/* head_forward ()'s row r (rows of several blocks follow each other: row r
 * is row r mod len of its block). */
void
softmax_row (uint r)
{
  uint lid = gl_LocalInvocationID.x, len = pc.a[3];
  uint src = pc.a[0] + r * len, dst = pc.a[1] + r * len;
  uint n = pc.a[5] != 0u ? r % len + 1u : len;
  uint max_bits, sum;

  for (uint j = lid; j < n; j += GROUP)
    s_v[j] = f32_mul (f[src + j], pc.a[4]);
  barrier ();
  max_bits = row_max (n);
  for (uint j = lid; j < n; j += GROUP)
    s_v[j] = exp_shifted (s_v[j], max_bits);
  barrier ();
  sum = tree_sum (n);
  for (uint j = lid; j < len; j += GROUP)
    f[dst + j] = j < n ? f32_div (s_v[j], sum) : 0u;
}

/* head_backward ()'s row t of the causal softmax, in place on d_att:
 * dc_math_softmax_backward over t mod len + 1 values, times the scale, the
 * rest zero. */
void
softmax_back_row (uint t)
{
  uint lid = gl_LocalInvocationID.x, len = pc.a[2];
  uint y = pc.a[0] + t * len, row = pc.a[1] + t * len, n = t % len + 1u;
  uint d;

  for (uint j = lid; j < n; j += GROUP)
    s_v[j] = f32_mul (f[y + j], f[row + j]);
  barrier ();
  d = tree_sum (n);
  for (uint j = lid; j < len; j += GROUP)
    f[row + j] = j < n ? f32_mul (f32_mul (f[y + j], f32_sub (f[row + j], d)), pc.a[3]) : 0u;
}

void
main ()
{
  uint rows = pc.op == OP_SOFTMAX ? pc.a[2] : pc.a[4];

  /* A uniform loop: the barriers are in uniform control flow. */
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x)
    {
      if (pc.op == OP_SOFTMAX)
        softmax_row (r);
      else
        softmax_back_row (r);
      /* s_v and s_t are reused by the next row. */
      barrier ();
    }
}
