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
 * Short rows would leave most of a workgroup idle and spend their time in
 * its barriers: a workgroup takes 128 / LANES rows at once, LANES
 * invocations each (a power of two from 32 to 128, a[14] its log2; the
 * rows' loops and barriers are the workgroup's, each row's reductions stay
 * within its lanes).
 *
 * With OP_QUANT_ROWS (bit 8 of op) the kernel also quantizes each output
 * row as resident-quant.comp's rows do (dc_quant_pack (), docs/VERIFICATION.md
 * §2): the row is in shared memory already, so its amax (the largest |y| bit
 * pattern of the finite values, a maximum: the same in any order), its
 * exponent and its int8 values are written in the same pass, vector r of
 * the operand at Q byte q + r · len, its exponent at E[e + r]; a NaN or an
 * infinity sets E[0] (the host refuses the pass) and quantizes to 0. The
 * attention's P (for P · V) and dS (for dS · K) need no quantization
 * dispatch of their own, nor a second read of their floats.
 *
 * Push constants (DcVkForwardPush): op OP_SOFTMAX (7), a: scores, att, rows,
 * len, scale, causal, then q, e (with OP_QUANT_ROWS); op OP_SOFTMAX_BACK (17),
 * a: att, d_att, len, scale, rows, then q, e; both a[14] log2 LANES. Rows of
 * len ≤ MAX_LEN, and (128 / LANES) · len ≤ MAX_LEN
 * (src/model/dc-gpt-vk-rows.c keeps longer ones on the one-invocation
 * kernels).
 *
 * DC_BREAK builds the deliberately wrong twin (the blocks' sums added left to
 * right instead of in the tree, and the quantization's ties rounded away from
 * zero), for the gate's test. The division by the row's sum is f32-exact.glsl's
 * f32_div_by (), whose twin (DC_BREAK_F32) f32-exact-check.comp's gate refuses.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#include "f32-exact.glsl"
#include "exp-exact.glsl"
#ifdef DC_BREAK
#define DC_BREAK_QUANT
#endif
#include "quant-exact.glsl"

#define GROUP 128u
/* Mirrors DC_GPT_VK_ROWS_SOFTMAX_MAX_LEN (src/model/dc-gpt-vk-rows.h). */
#define MAX_LEN 4096u
#define NONE 0xffffffffu

layout (local_size_x = 128) in;

layout (std430, binding = 0) buffer F { uint f[]; };
layout (std430, binding = 1) buffer Q { int8_t q8[]; };
layout (std430, binding = 2) buffer E { int e32[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_SOFTMAX 7u
#define OP_SOFTMAX_BACK 17u
#define OP_QUANT_ROWS 0x100u

/* The rows' values (row s of the workgroup at s · len), then each row's
 * tree nodes level by level (the blocks' sums at level 0, then half as many
 * per level: fewer than 2 · ⌈len / 8⌉ a row), the maximum's candidates, the
 * rows' sums. */
shared uint s_v[MAX_LEN];
shared uint s_t[MAX_LEN / 4u + 32u];
shared uint s_mb[GROUP];
shared uint s_mi[GROUP];
shared uint s_sum[4];

/* This invocation's row in the workgroup (its segment), its lane, the
 * lanes a row, and the blocks of a whole row. */
uint g_seg, g_l, g_lanes, g_nbm;

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

/* dc_math_max of the segment's s_v[v, v + n). Called by every invocation. */
uint
row_max (uint v, uint n)
{
  uint lid = gl_LocalInvocationID.x, mb = 0u, mi = NONE;

  for (uint j = g_l; j < n; j += g_lanes)
    if (replaces (mb, mi, s_v[v + j], j))
      {
        mb = s_v[v + j];
        mi = j;
      }
  s_mb[lid] = mb;
  s_mi[lid] = mi;
  barrier ();
  for (uint w = g_lanes / 2u; w > 0u; w >>= 1)
    {
      if (g_l < w && replaces (s_mb[lid], s_mi[lid], s_mb[lid + w], s_mi[lid + w]))
        {
          s_mb[lid] = s_mb[lid + w];
          s_mi[lid] = s_mi[lid + w];
        }
      barrier ();
    }
  /* s_mb is rewritten by the next rows only after more barriers. */
  return s_mb[g_seg * g_lanes];
}

/* The largest of the segment's lanes' values a. Called by every
 * invocation. */
uint
lanes_max (uint a)
{
  uint lid = gl_LocalInvocationID.x;

  s_mb[lid] = a;
  barrier ();
  for (uint w = g_lanes / 2u; w > 0u; w >>= 1)
    {
      if (g_l < w)
        s_mb[lid] = max (s_mb[lid], s_mb[lid + w]);
      barrier ();
    }
  /* s_mb is rewritten by the next rows only after more barriers. */
  return s_mb[g_seg * g_lanes];
}

/* resident-quant.comp's rows for the segment's output row r, its n first
 * values in s_v[v, v + n) and the rest of len zero: amax, exponent and int8
 * values, vector r at Q byte q, its exponent at E[e + r]. Called by every
 * invocation (live false: a row past the end, nothing written). */
void
quantize_row (uint v, uint n, uint len, uint r, bool live, uint q, uint e_off)
{
  uint amax = 0u;
  bool bad = false;
  int e;

  for (uint j = g_l; j < n; j += g_lanes)
    {
      uint m = s_v[v + j] & 0x7fffffffu;

      if (m >= F32_INF)
        bad = true;
      else
        amax = max (amax, m);
    }
  if (bad)
    e32[0] = 1;
  amax = lanes_max (amax);
  e = amax == 0u ? 0 : floor_log2 (amax) - 6;
  if (!live)
    return;
  if (g_l == 0u)
    e32[e_off + r] = e;
  for (uint j = g_l; j < len; j += g_lanes)
    {
      uint bits = j < n ? s_v[v + j] : 0u;

      q8[q + r * len + j] = int8_t ((bits & 0x7fffffffu) >= F32_INF || amax == 0u
                                    ? 0 : quantize_one (bits, e));
    }
}

/* The offset in a row's s_t region of level `level`'s nodes, nb blocks at
 * level 0 (each level keeps the whole pairs of the one below). */
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

/* The aligned node covering leaves [start, start + len) of the row whose
 * tree (of nb blocks) is at t, len a power of two ≥ 8 and start a multiple
 * of it. */
uint
node (uint t, uint nb, uint start, uint len)
{
  uint level = uint (findMSB (len / 8u));

  return s_t[t + level_offset (nb, level) + start / len];
}

/* Σ of the segment's s_v[v, v + n) in the library's tree (n = 0: a row
 * past the end, no sum). Called by every invocation; each row's lanes get
 * its sum. */
uint
tree_sum (uint v, uint n)
{
  uint nb = (n + 7u) / 8u, t = g_seg * 2u * g_nbm;
  /* The tree's blocks: the row's own where the workgroup has one row (the
   * same for all its invocations), else a whole row's, so that the loops
   * below are the workgroup's. */
  uint tnb = g_lanes == GROUP ? nb : g_nbm;

  for (uint b = g_l; b < tnb; b += g_lanes)
    {
      uint acc = 0u;

      if (b < nb)
        {
          uint start = 8u * b, end = min (start + 8u, n);

          acc = s_v[v + start];
          for (uint i = start + 1u; i < end; i++)
            acc = f32_add (acc, s_v[v + i]);
        }
      s_t[t + b] = acc;
    }
  barrier ();
  /* Each level: node m is the sum of nodes 2m and 2m + 1 below (left +
   * right), as sum_pow2 ()'s stack combines equal levels. The levels of a
   * whole row for every row (the same loop for the workgroup); a shorter
   * row uses only the nodes inside it. */
  {
    uint off = 0u, count = tnb;

    while (count > 1u)
      {
        uint next = off + count, pairs = count / 2u;

        for (uint m = g_l; m < pairs; m += g_lanes)
          s_t[t + next + m] = f32_add (s_t[t + off + 2u * m], s_t[t + off + 2u * m + 1u]);
        barrier ();
        off = next;
        count = pairs;
      }
  }
  if (g_l == 0u && n > 0u)
    {
      uint parts[16];
      uint n_parts = 0u, start = 0u, rest = n, acc;

#ifdef DC_BREAK
      acc = s_t[t];
      for (uint b = 1u; b < nb; b++)
        acc = f32_add (acc, s_t[t + b]);
#else
      /* sum_tree (): sum[0, n) = P(h1) + (P(h2) + (… + the rest)). */
      while (rest > 8u && (rest & (rest - 1u)) != 0u)
        {
          uint h = 1u << uint (findMSB (rest));

          parts[n_parts++] = node (t, tnb, start, h);
          start += h;
          rest -= h;
        }
      acc = rest <= 8u ? s_t[t + start / 8u] : node (t, tnb, start, rest);
      while (n_parts > 0u)
        acc = f32_add (parts[--n_parts], acc);
#endif
      s_sum[g_seg] = acc;
    }
  barrier ();
  return s_sum[g_seg];
}

/* Elements a lane loads at once into registers before using them: one wait
 * for memory per CACHE elements, not one per element. */
#define CACHE 8u

/* head_forward ()'s row r (rows of several blocks follow each other: row r
 * is row r mod len of its block); live is false past the last row. */
void
softmax_row (uint r, bool live)
{
  uint len = pc.a[3], v = g_seg * len;
  uint src = pc.a[0] + r * len, dst = pc.a[1] + r * len;
  uint n = !live ? 0u : pc.a[5] != 0u ? r % len + 1u : len;
  uint max_bits, sum, inv;

  for (uint j0 = g_l; j0 < n; j0 += CACHE * g_lanes)
    {
      uint xs[CACHE];

      for (uint u = 0u; u < CACHE; u++)
        {
          uint j = j0 + u * g_lanes;

          xs[u] = j < n ? f[src + j] : 0u;
        }
      for (uint u = 0u; u < CACHE; u++)
        {
          uint j = j0 + u * g_lanes;

          if (j < n)
            s_v[v + j] = f32_mul (xs[u], pc.a[4]);
        }
    }
  barrier ();
  max_bits = row_max (v, n);
  for (uint j = g_l; j < n; j += g_lanes)
    s_v[v + j] = exp_shifted (s_v[v + j], max_bits);
  barrier ();
  sum = tree_sum (v, n);
  /* Each lane divides its own values in place, then writes the row (and
   * quantizes it from shared memory): by the sum's reciprocal, one long
   * division a lane and row, and an exact correction per value
   * (f32_div_by (): f32_div ()'s bits). */
  inv = f32_div_prep (sum);
  for (uint j = g_l; j < n; j += g_lanes)
    s_v[v + j] = f32_div_by (s_v[v + j], sum, inv);
  if (live)
    for (uint j = g_l; j < len; j += g_lanes)
      f[dst + j] = j < n ? s_v[v + j] : 0u;
  if ((pc.op & OP_QUANT_ROWS) != 0u)
    quantize_row (v, n, len, r, live, pc.a[6], pc.a[7]);
}

/* head_backward ()'s row t of the causal softmax, in place on d_att:
 * dc_math_softmax_backward over t mod len + 1 values, times the scale, the
 * rest zero. */
void
softmax_back_row (uint t, bool live)
{
  uint len = pc.a[2], v = g_seg * len;
  uint y = pc.a[0] + t * len, row = pc.a[1] + t * len, n = live ? t % len + 1u : 0u;
  uint d;

  for (uint j0 = g_l; j0 < n; j0 += CACHE * g_lanes)
    {
      uint ys[CACHE], ds[CACHE];

      for (uint u = 0u; u < CACHE; u++)
        {
          uint j = j0 + u * g_lanes;

          ys[u] = j < n ? f[y + j] : 0u;
          ds[u] = j < n ? f[row + j] : 0u;
        }
      for (uint u = 0u; u < CACHE; u++)
        {
          uint j = j0 + u * g_lanes;

          if (j < n)
            s_v[v + j] = f32_mul (ys[u], ds[u]);
        }
    }
  barrier ();
  d = tree_sum (v, n);
  /* Each lane's own values in place (tree_sum's last barrier is behind),
   * y and dy read again (from the cache, mostly) CACHE at a time. */
  for (uint j0 = g_l; j0 < n; j0 += CACHE * g_lanes)
    {
      uint ys[CACHE], ds[CACHE];

      for (uint u = 0u; u < CACHE; u++)
        {
          uint j = j0 + u * g_lanes;

          ys[u] = j < n ? f[y + j] : 0u;
          ds[u] = j < n ? f[row + j] : 0u;
        }
      for (uint u = 0u; u < CACHE; u++)
        {
          uint j = j0 + u * g_lanes;

          if (j < n)
            s_v[v + j] = f32_mul (f32_mul (ys[u], f32_sub (ds[u], d)), pc.a[3]);
        }
    }
  if (live)
    for (uint j = g_l; j < len; j += g_lanes)
      f[row + j] = j < n ? s_v[v + j] : 0u;
  if ((pc.op & OP_QUANT_ROWS) != 0u)
    quantize_row (v, n, len, t, live, pc.a[5], pc.a[6]);
}

void
main ()
{
  uint op = pc.op & 0xffu;
  uint rows = op == OP_SOFTMAX ? pc.a[2] : pc.a[4];
  uint len = op == OP_SOFTMAX ? pc.a[3] : pc.a[2];
  uint per_group;

  g_lanes = 1u << pc.a[14];
  per_group = GROUP / g_lanes;
  g_seg = gl_LocalInvocationID.x / g_lanes;
  g_l = gl_LocalInvocationID.x % g_lanes;
  g_nbm = (len + 7u) / 8u;
  /* A uniform loop: the barriers are in uniform control flow. */
  for (uint r0 = gl_WorkGroupID.x * per_group; r0 < rows; r0 += gl_NumWorkGroups.x * per_group)
    {
      uint r = r0 + g_seg;

      if (op == OP_SOFTMAX)
        softmax_row (r, r < rows);
      else
        softmax_back_row (r, r < rows);
      /* s_v and s_t are reused by the next rows. */
      barrier ();
    }
}
