#version 450
#extension GL_GOOGLE_include_directive : require
/* resident-backward.comp: the non-GEMM operations of the GPT backward pass
 * (dc-gpt.c's dc_gpt_run_backward ()) on the buffers of
 * resident-forward.comp, whose quantization and GEMM operations form the
 * backward's products (src/model/dc-gpt-vk-forward.c records them in the
 * CPU's order). F holds the weights, their gradients and every activation
 * (f32 bit patterns, offsets in floats); T the inputs, then the targets.
 *
 * Each operation is the CPU's rule bit for bit, in f32-exact.glsl's
 * arithmetic and sum-tree.glsl's sums: an invocation owns a whole row (the
 * norm's and the softmax's input gradients) or a whole column (the sums over
 * rows: bias and norm gradients, the head's and the embeddings' scatter-adds,
 * rows in order), as the CPU's chunks do.
 *
 * DC_BREAK builds the deliberately wrong twin (the norm's input gradient
 * forgets its n̂ · mean (g ⊙ n̂) term), for the gate's test.
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

#define OP_HEAD_DX 10u
#define OP_HEAD_DW 11u
#define OP_ZERO 12u
#define OP_LN_DX 13u
#define OP_LN_DW 14u
#define OP_COLSUM 15u
#define OP_RELU_BACK 16u
#define OP_SOFTMAX_BACK 17u
#define OP_EMBED_BACK 18u

/* The current row of the sums and its leaves: x (mode 0), a ⊙ b (mode 1),
 * or (w ⊙ dy) ⊙ ((x − mean) · rstd) (mode 2: a = w, b = dy, g_x = x). */
uint g_mode;
uint g_a, g_b, g_x, g_mean, g_rstd;

uint
leaf (uint i)
{
  if (g_mode == 0u)
    return f[g_a + i];
  if (g_mode == 1u)
    return f32_mul (f[g_a + i], f[g_b + i]);
  return f32_mul (f32_mul (f[g_a + i], f[g_b + i]),
                  f32_mul (f32_sub (f[g_x + i], g_mean), g_rstd));
}

#define DC_SUM_LEAF(i) leaf (i)
#include "sum-tree.glsl"

/* a: y (d_lnf), wte, total (rows · C), C, targets (offset in T), fn (rows):
 * head_dx_chunk, y = (y − wte[target]) / rows. */
void
op_head_dx (uint i)
{
  uint c = pc.a[3], r = i / c, j = i % c;

  f[pc.a[0] + i] = f32_div (f32_sub (f[pc.a[0] + i], f[pc.a[1] + tok[pc.a[4] + r] * c + j]),
                            pc.a[5]);
}

/* a: d_wte, lnf, rows, C, V, targets, fn: head_dw_chunk, one invocation per
 * element (v, j) of d_wte: the rows whose target is v subtracted in order,
 * then / fn. Each element's chain is the CPU's (rows in order, from the
 * head's product); elements are independent, so they run side by side. */
void
op_head_dw (uint i)
{
  uint c = pc.a[3], v = i / c, j = i % c, dst = pc.a[0] + i, acc = f[dst];

  for (uint r = 0u; r < pc.a[2]; r++)
    if (tok[pc.a[5] + r] == v)
      acc = f32_sub (acc, f[pc.a[1] + r * c + j]);
  f[dst] = f32_div (acc, pc.a[6]);
}

/* a: y, total: y = +0. */
void
op_zero (uint i)
{
  f[pc.a[0] + i] = 0u;
}

/* a: x, w, mean, rstd, dy, d_res, rows, n, fn: dc_math_layer_norm_backward's
 * dx of row r, added to d_res (layer_norm_dx_chunk). */
void
op_ln_dx (uint r)
{
  uint n = pc.a[7], x = pc.a[0] + r * n, dy = pc.a[4] + r * n, d_res = pc.a[5] + r * n;
  uint mean = f[pc.a[2] + r], rstd = f[pc.a[3] + r];
  uint g_mean_v, gn_mean;

  g_mode = 1u;
  g_a = pc.a[1];
  g_b = dy;
  g_mean_v = f32_div (sum_tree (n), pc.a[8]);
  g_mode = 2u;
  g_x = x;
  g_mean = mean;
  g_rstd = rstd;
  gn_mean = f32_div (sum_tree (n), pc.a[8]);
  for (uint i = 0u; i < n; i++)
    {
      uint norm = f32_mul (f32_sub (f[x + i], mean), rstd);
      uint g = f32_mul (f[pc.a[1] + i], f[dy + i]);
#ifdef DC_BREAK
      uint dx = f32_mul (f32_sub (g, g_mean_v), rstd);
#else
      uint dx = f32_mul (f32_sub (f32_sub (g, g_mean_v), f32_mul (norm, gn_mean)), rstd);
#endif

      f[d_res + i] = f32_add (f[d_res + i], dx);
    }
}

/* Rows a column sum loads before it adds them: the sums over rows are
 * serial chains (the CPU's order), so each row's load would otherwise wait
 * its whole memory latency in the chain; 32 loads in flight hide most of
 * it, and 32 values of each array stay in registers. */
#define COL_BATCH 32u

/* a: x, dy, mean, rstd, rows, n, dw, db: layer_norm_grad_chunk for column
 * j, rows in order from +0 (loaded COL_BATCH rows ahead, added in order). */
void
op_ln_dw (uint j)
{
  uint n = pc.a[5], rows = pc.a[4], dw = 0u, db = 0u, r = 0u;

  for (; r + COL_BATCH <= rows; r += COL_BATCH)
    {
      uint dy[COL_BATCH], norm[COL_BATCH];

      for (uint u = 0u; u < COL_BATCH; u++)
        {
          dy[u] = f[pc.a[1] + (r + u) * n + j];
          norm[u] = f32_mul (f32_sub (f[pc.a[0] + (r + u) * n + j], f[pc.a[2] + r + u]),
                             f[pc.a[3] + r + u]);
        }
      for (uint u = 0u; u < COL_BATCH; u++)
        {
          dw = f32_add (dw, f32_mul (dy[u], norm[u]));
          db = f32_add (db, dy[u]);
        }
    }
  for (; r < rows; r++)
    {
      uint dy = f[pc.a[1] + r * n + j];
      uint norm = f32_mul (f32_sub (f[pc.a[0] + r * n + j], f[pc.a[2] + r]), f[pc.a[3] + r]);

      dw = f32_add (dw, f32_mul (dy, norm));
      db = f32_add (db, dy);
    }
  f[pc.a[6] + j] = dw;
  f[pc.a[7] + j] = db;
}

/* a: dy, rows, n, out: column_sum_chunk for column j, rows in order
 * (loaded COL_BATCH rows ahead). */
void
op_colsum (uint j)
{
  uint n = pc.a[2], rows = pc.a[1], base = pc.a[0] + j, acc = 0u, r = 0u;

  for (; r + COL_BATCH <= rows; r += COL_BATCH)
    {
      uint v[COL_BATCH];

      for (uint u = 0u; u < COL_BATCH; u++)
        v[u] = f[base + (r + u) * n];
      for (uint u = 0u; u < COL_BATCH; u++)
        acc = f32_add (acc, v[u]);
    }
  for (; r < rows; r++)
    acc = f32_add (acc, f[base + r * n]);
  f[pc.a[3] + j] = acc;
}

/* a: x, dy, dx, total: dc_math_relu_backward (dy where x > 0, else +0; a
 * NaN x passes on). */
void
op_relu_back (uint i)
{
  uint x = f[pc.a[0] + i];

  f[pc.a[2] + i] = f32_is_nan (x) ? x
                   : (x & F32_SIGN) == 0u && x != 0u ? f[pc.a[1] + i] : 0u;
}

/* a: att, d_att, len, scale, rows: head_backward ()'s row t of the causal
 * softmax: dc_math_softmax_backward over t mod len + 1 values in place, times
 * the scale, the rest zero (the rows of several pairs' blocks follow each
 * other). */
void
op_softmax_back (uint t)
{
  uint len = pc.a[2], y = pc.a[0] + t * len, row = pc.a[1] + t * len, n = t % len + 1u, d;

  g_mode = 1u;
  g_a = y;
  g_b = row;
  d = sum_tree (n);
  for (uint j = 0u; j < n; j++)
    f[row + j] = f32_mul (f32_mul (f[y + j], f32_sub (f[row + j], d)), pc.a[3]);
  for (uint j = n; j < len; j++)
    f[row + j] = 0u;
}

/* a: d_wte, d_wpe, dy, rows, C, seq, len, V: embed_backward_chunk, one
 * invocation per element: i < V·C is d_wte's (v, j), the rows whose input
 * token is v added in order to what the head left there; the next seq·C are
 * d_wpe's (t, j), the rows at position t added in order from +0. Each
 * element's chain is the CPU's; elements are independent. */
void
op_embed_back (uint i)
{
  uint c = pc.a[4], rows = pc.a[3], n_wte = pc.a[7] * c;

  if (i < n_wte)
    {
      uint v = i / c, j = i % c, dst = pc.a[0] + i, acc = f[dst];

      for (uint r = 0u; r < rows; r++)
        if (tok[r] == v)
          acc = f32_add (acc, f[pc.a[2] + r * c + j]);
      f[dst] = acc;
    }
  else
    {
      uint t = (i - n_wte) / c, j = (i - n_wte) % c, acc = 0u;

      for (uint r = t; t < pc.a[6] && r < rows; r += pc.a[6])
        acc = f32_add (acc, f[pc.a[2] + r * c + j]);
      f[pc.a[1] + t * c + j] = acc;
    }
}

void
main ()
{
  uint stride = gl_NumWorkGroups.x * 64u;
  uint total;

  switch (pc.op)
    {
    case OP_HEAD_DX: total = pc.a[2]; break;
    case OP_HEAD_DW: total = pc.a[4] * pc.a[3]; break;
    case OP_ZERO: total = pc.a[1]; break;
    case OP_LN_DX: total = pc.a[6]; break;
    case OP_LN_DW: total = pc.a[5]; break;
    case OP_COLSUM: total = pc.a[2]; break;
    case OP_RELU_BACK: total = pc.a[3]; break;
    case OP_SOFTMAX_BACK: total = max (pc.a[4], pc.a[2]); break;
    default: total = (pc.a[7] + pc.a[5]) * pc.a[4]; break;
    }
  for (uint i = gl_GlobalInvocationID.x; i < total; i += stride)
    {
      switch (pc.op)
        {
        case OP_HEAD_DX: op_head_dx (i); break;
        case OP_HEAD_DW: op_head_dw (i); break;
        case OP_ZERO: op_zero (i); break;
        case OP_LN_DX: op_ln_dx (i); break;
        case OP_LN_DW: op_ln_dw (i); break;
        case OP_COLSUM: op_colsum (i); break;
        case OP_RELU_BACK: op_relu_back (i); break;
        case OP_SOFTMAX_BACK: op_softmax_back (i); break;
        default: op_embed_back (i); break;
        }
    }
}
