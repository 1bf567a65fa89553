/* sum-tree.glsl: the math library's one reduction order (docs/VERIFICATION.md,
 * "Reductions", dc-math-vector.c's pairwise ()), in f32-exact.glsl's
 * arithmetic: up to 8 leaves left to right; a power of two splits into equal
 * halves (blocks of 8 combined pairwise, built with a stack); any other
 * length splits at h, the largest power of two below it, into
 * sum[0, h) + sum[h, n).
 *
 * Before including it, define DC_SUM_LEAF(i) as the bits of leaf i of the
 * current row (the includer's buffers and row), after f32-exact.glsl.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

/* Leaves [start, start + len), 1 ≤ len ≤ 8, left to right. */
uint
sum_block (uint start, uint len)
{
  uint acc = DC_SUM_LEAF (start);

  for (uint i = 1u; i < len; i++)
    acc = f32_add (acc, DC_SUM_LEAF (start + i));
  return acc;
}

/* The balanced tree of a power-of-two len ≥ 8: blocks of 8, then each level
 * adds neighbours (left + right), as the recursive halves do. */
uint
sum_pow2 (uint start, uint len)
{
  uint stack[24];
  uint level[24];
  int top = -1;

  for (uint b = 0u; b < len / 8u; b++)
    {
      top++;
      stack[top] = sum_block (start + 8u * b, 8u);
      level[top] = 0u;
      while (top > 0 && level[top] == level[top - 1])
        {
          stack[top - 1] = f32_add (stack[top - 1], stack[top]);
          level[top - 1] += 1u;
          top--;
        }
    }
  return stack[0];
}

/* Σ leaves [0, n), n ≥ 1, in the tree's order. */
uint
sum_tree (uint n)
{
  uint parts[24];
  uint n_parts = 0u, start = 0u, rest = n, acc;

  /* sum[0, n) = P(h1) + (P(h2) + (… + sum of the rest)). */
  while (rest > 8u && (rest & (rest - 1u)) != 0u)
    {
      uint h = 1u << uint (findMSB (rest));

      parts[n_parts++] = sum_pow2 (start, h);
      start += h;
      rest -= h;
    }
  acc = rest <= 8u ? sum_block (start, rest) : sum_pow2 (start, rest);
  while (n_parts > 0u)
    acc = f32_add (parts[--n_parts], acc);
  return acc;
}
