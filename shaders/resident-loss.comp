#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
/* resident-loss.comp: the loss of the resident forward pass (dc-gpt.c's
 * loss_chunk and the mean of dc_gpt_run_forward ()), on the buffers of
 * resident-forward.comp, bit for bit the CPU's: f32-exact.glsl's arithmetic,
 * the engine's exp and log (exp-exact.glsl, log-exact.glsl) and the sum tree.
 * A pipeline of its own so that the forward pass's shader stays small for
 * the drivers' compilers.
 *
 * DC_BREAK builds the deliberately wrong twin (it forgets the low part of
 * x − max), for the gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "f32-exact.glsl"
#include "exp-exact.glsl"
#include "log-exact.glsl"

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

#define OP_LOSS 8u
#define OP_MEAN 9u

/* The current row of sum-tree.glsl's sums. */
uint g_base;

uint
leaf (uint i)
{
  return f[g_base + i];
}

#define DC_SUM_LEAF(i) leaf (i)
#include "sum-tree.glsl"

/* dc_math_max of n values at base: left to right, the first NaN wins. */
uint
row_max (uint base, uint n)
{
  uint m = f[base];

  for (uint j = 0u; j < n && !f32_is_nan (m); j++)
    {
      uint v = f[base + j];

      if (f32_is_nan (v) || f32_order (v) > f32_order (m))
        m = v;
    }
  return m;
}

/* a: logits, n (V), targets (in T, after the tokens), row_loss, rows,
 * scratch: dc-gpt.c's loss_chunk for row r, −log_softmax (logits)[target], as
 * dc_math_log_softmax forms that element: (x − max) as an exact two-sum,
 * minus log Σ e^(x − max) (the exponentials stored in the scratch row, then
 * summed in the tree: the CPU's leaves, the CPU's order), the low part
 * last. */
void
op_loss (uint r)
{
  uint n = pc.a[1], base = pc.a[0] + r * n, scratch = pc.a[5] + r * n;
  uint x, max_bits, lse, d, bb, d_lo, y, minus_max;

  max_bits = row_max (base, n);
  for (uint j = 0u; j < n; j++)
    f[scratch + j] = exp_shifted (f[base + j], max_bits);
  g_base = scratch;
  lse = log_exact (sum_tree (n));
  x = f[base + tok[pc.a[2] + r]];
  minus_max = max_bits ^ F32_SIGN;
  d = f32_add (x, minus_max);
  bb = f32_sub (d, x);
  d_lo = f32_add (f32_sub (x, f32_sub (d, bb)), f32_sub (minus_max, bb));
  if (f32_is_nan (lse))
    y = lse;
  else
#ifdef DC_BREAK
    y = d == 0xff800000u ? d : f32_sub (d, lse);
#else
    y = d == 0xff800000u ? d : f32_add (f32_sub (d, lse), d_lo);
#endif
  f[pc.a[3] + r] = y ^ F32_SIGN;
}

/* The mean's leaves in shared memory: every row of a batch up to 8,192
 * (width 128's 4,096, GPT-2's 2,048) through sum-tree-wg.glsl, the same
 * tree with its blocks and levels side by side (36 KB, which OP_LOSS's
 * few workgroups can spare); longer keep one invocation's sum_tree (). */
#define WG_SUM_MAX 8192u
#include "sum-tree-wg.glsl"

/* a: x, n, out, fn: out = Σx / n in the tree (the dispatch's one
 * workgroup; one invocation where n > WG_SUM_MAX). */
void
op_mean ()
{
  uint n = pc.a[1], lane = gl_LocalInvocationID.x;

  if (n <= WG_SUM_MAX)
    {
      /* 8 loads a lane in flight at once, then into shared memory. */
      for (uint i0 = 0u; i0 < n; i0 += 8u * 64u)
        {
          uint v[8];

          [[unroll]] for (uint u = 0u; u < 8u; u++)
            {
              uint i = i0 + u * 64u + lane;

              v[u] = i < n ? f[pc.a[0] + i] : 0u;
            }
          [[unroll]] for (uint u = 0u; u < 8u; u++)
            {
              uint i = i0 + u * 64u + lane;

              if (i < n)
                s_leaf[i] = v[u];
            }
        }
      barrier ();
      {
        uint total = wg_sum_tree (n);

        if (lane == 0u)
          f[pc.a[2]] = f32_div (total, pc.a[3]);
      }
      return;
    }
  if (lane == 0u)
    {
      g_base = pc.a[0];
      f[pc.a[2]] = f32_div (sum_tree (n), pc.a[3]);
    }
}

void
main ()
{
  if (pc.op == OP_MEAN)
    {
      /* The dispatch's one workgroup, uniformly (barriers inside). */
      if (gl_WorkGroupID.x == 0u)
        op_mean ();
      return;
    }
  for (uint i = gl_GlobalInvocationID.x; i < pc.a[4]; i += gl_NumWorkGroups.x * 64u)
    op_loss (i);
}
