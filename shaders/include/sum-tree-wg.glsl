/* sum-tree-wg.glsl: sum-tree.glsl's order (the math library's one tree,
 * docs/VERIFICATION.md "Reductions") over one row with a whole workgroup of
 * 64 invocations: the includer writes the row's leaves to s_leaf[0, n),
 * n ≤ WG_SUM_MAX, then calls wg_sum_tree (n) from uniform control flow.
 *
 * Why the same bits: sum_tree () peels parts of power-of-two lengths h ≥ 8
 * from the left, each h smaller than the one before, so each part starts at
 * a multiple of its own length (hence of 8), and the rest is either one
 * block of at most 8 or a power of two. So sum_tree ()'s blocks are the
 * row's aligned blocks of 8 (the last maybe shorter), each summed left to
 * right (here one invocation a block); a power of two's stack of equal
 * levels is the perfect binary tree over its blocks, left + right, which the
 * aligned halving below builds level by level within each part; the parts'
 * sums are then added right to left, part + sum of the rest, as sum_tree ()
 * does. Include after f32-exact.glsl.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

/* 1,024 leaves (GPT-2's 768, with room) and their 128 blocks: 4.6 KB of
 * shared memory, which leaves the pipeline's other ops 32 workgroups of 64
 * per multiprocessor; longer rows keep an invocation per row. An includer
 * may define a larger WG_SUM_MAX (a multiple of 8) first. */
#ifndef WG_SUM_MAX
#define WG_SUM_MAX 1024u
#endif

shared uint s_leaf[WG_SUM_MAX];
shared uint s_block[WG_SUM_MAX / 8u];
shared uint s_total;

/* Blocks in the part of sum_tree (n) that holds block b. */
uint
wg_part_blocks (uint b, uint n)
{
  uint start = 0u, rest = n;

  while (rest > 8u && (rest & (rest - 1u)) != 0u)
    {
      uint h = 1u << uint (findMSB (rest));

      if (8u * b < start + h)
        return h / 8u;
      start += h;
      rest -= h;
    }
  return rest <= 8u ? 1u : rest / 8u;
}

uint
wg_sum_tree (uint n)
{
  uint lane = gl_LocalInvocationID.x, n_blocks = (n + 7u) / 8u;

  for (uint b = lane; b < n_blocks; b += 64u)
    {
      uint s0 = 8u * b, e = min (s0 + 8u, n), acc = s_leaf[s0];

      for (uint i = s0 + 1u; i < e; i++)
        acc = f32_add (acc, s_leaf[i]);
      s_block[b] = acc;
    }
  barrier ();
  for (uint step = 1u; step < n_blocks; step *= 2u)
    {
      for (uint b = lane * 2u * step; b < n_blocks; b += 128u * step)
        if (wg_part_blocks (b, n) >= 2u * step)
          s_block[b] = f32_add (s_block[b], s_block[b + step]);
      barrier ();
    }
  if (lane == 0u)
    {
      uint parts[24];
      uint n_parts = 0u, start = 0u, rest = n, acc;

      while (rest > 8u && (rest & (rest - 1u)) != 0u)
        {
          uint h = 1u << uint (findMSB (rest));

          parts[n_parts++] = s_block[start / 8u];
          start += h;
          rest -= h;
        }
      acc = s_block[start / 8u];
      while (n_parts > 0u)
        acc = f32_add (parts[--n_parts], acc);
      s_total = acc;
    }
  barrier ();
  return s_total;
}
