// resident-coop.comp: the products of the resident pass (resident-gemm.comp's,
// same push constants, same buffers) on cooperative matrices: 16 × 8 × 32
// int8 fragments (VK_NV_cooperative_matrix, rewritten for
// VK_KHR_cooperative_matrix where only that lists the shape: "+khr",
// dc-spirv-coop.c) in the tile scheme of gemm-int8-coopsc.comp, the
// standalone GEMM's best (sc128x128-w64x32-k128-p1-s1). int32 sums are exact
// in any order (|acc| ≤ 127² · K < 2³¹), so the accumulators hold the byte
// loop's integers and the epilogue (gemm-epilogue.glsl, integers only) the
// CPU's bits.
//
// Unlike the standalone GEMM, the operands are not padded: they lie in Q as
// the quantizer wrote them, (M, K) and (N, K) int8 row-major per pair. Words
// of 16 bytes are staged through shared memory with every row and K word
// bounds-checked (zeros beyond, which add nothing), so any M and N work; the
// recording sends a product here only when K and both operands' starts are
// multiples of 16 bytes (the uvec4 loads), resident-gemm.comp otherwise.
// Each invocation loads all its words of a step before it stores any, and
// the outputs leave a row of fragments at a time, 16 bytes a store where
// aligned (the epilogue below). The host picks the tile shape per product
// (dc-gpt-vk-forward.c's coop_shape (): 128 × 128, 128 × 64 or 64 × 64);
// any shape and any split of K give the same integers.
//
// Specialization constants (dc-gpt-vk-forward.c's COOP_* tables):
//   BM × BN  the workgroup's outputs; WM × WN a subgroup's
//   BKQ      16-byte words of K staged a step; PAD words added to a staged
//            row (an odd stride spreads a fragment's rows over the banks)
//   NT       invocations: (BM / WM) · (BN / WN) · 32
//
// Push constants (resident-forward.comp's OP_GEMM): a = qa, ea, M, qb, eb, N,
// K, out, ldc, pairs, heads, the output's sequence and head strides, then
// a[13] the split's slice in 16-byte words of K (0: no split) and a[14] the
// slices' int32 partial sums in F. op's low byte is OP_GEMM or OP_GEMM_SUM;
// bits 8-9 the causal structure of the attention's products, the CPU's
// matmul_causal () (dc-gpt.c):
//   1 OUT      only outputs n ≤ m are read (the scores and d_att, whose
//              softmaxes read the lower triangle): blocks wholly above the
//              diagonal are skipped
//   2 A_LOWER  A (m, k) is zero for k > m (the probabilities, d_scores):
//              row block m0 stops K at m0 + BM
//   3 A_UPPER  A (m, k) is zero for k < m (their transposes): K starts at
//              the row block's first row
// Zeros skipped add nothing to an int32 sum, so the bits do not change.
//
// Workgroup (x, y, z): the block at column BN·x, row BM·y of pair z, or,
// split, of slice z of K (the int32 sums to F, then OP_GEMM_SUM adds them and
// applies the epilogue, one invocation per output). DC_BREAK builds the
// deliberately wrong twin (it forgets the last 16 bytes of K), for the gate's
// test.
//
// SPDX-License-Identifier: GPL-3.0-or-later
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require

#include "gemm-epilogue.glsl"

layout(constant_id = 0) const uint BM = 128;
layout(constant_id = 1) const uint BN = 128;
layout(constant_id = 2) const uint WM = 64;
layout(constant_id = 3) const uint WN = 32;
layout(constant_id = 4) const uint BKQ = 8;
layout(constant_id = 5) const uint PAD = 1;
layout(constant_id = 6) const uint NT = 256;

layout(local_size_x_id = 6, local_size_y = 1, local_size_z = 1) in;

const uint FM = WM / 16u;
const uint FN = WN / 8u;
const uint WARPS_N = BN / WN;
const uint ROWQ = BKQ + PAD;
const uint STAGE = (BM + BN) * ROWQ;
const uint LOADS = (BM + BN) * BKQ / NT;

layout(std430, binding = 0) buffer F { uint f[]; };
// The same buffer four floats at a time (the epilogue's aligned stores).
layout(std430, binding = 0) buffer F4 { uvec4 f4[]; };
// The int8 operands sixteen to a word.
layout(std430, binding = 1) readonly buffer Q { uvec4 q[]; };
layout(std430, binding = 2) readonly buffer E { int e32[]; };

layout(push_constant) uniform Push {
  uint op;
  uint a[15];
} pc;

#define OP_GEMM_SUM 100u
#define CAUSAL_OUT 1u
#define CAUSAL_A_LOWER 2u
#define CAUSAL_A_UPPER 3u

// One stage; after the last step, 32 · FN words per subgroup for the
// epilogue (NT / 32 · FN · 32 ≤ STAGE: the host checks each shape).
shared uvec4 smem[STAGE];

// OP_GEMM_SUM: as resident-gemm.comp's, a[13] slices, a[14] their sums.
void sum_slices()
{
  const uint i = gl_WorkGroupID.x * NT + gl_LocalInvocationID.x;
  const uint m_rows = pc.a[2], n_cols = pc.a[5];

  if (i < m_rows * n_cols) {
    const uint m = i / n_cols, n = i % n_cols;
    int acc = 0;

    for (uint s = 0u; s < pc.a[13]; s++)
      acc += int(f[pc.a[14] + s * m_rows * n_cols + i]);
    f[pc.a[7] + m * pc.a[8] + n] = dc_gemm_epilogue(acc, e32[pc.a[1] + m], e32[pc.a[4] + n]);
  }
}

void main()
{
  if ((pc.op & 0xffu) == OP_GEMM_SUM) {
    sum_slices();
    return;
  }

  const uint tid = gl_LocalInvocationID.x;
  const uint warp = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  const uint causal = (pc.op >> 8u) & 3u;
  const uint m_rows = pc.a[2], n_cols = pc.a[5], k = pc.a[6];
  const bool split = pc.a[13] != 0u;
  const uint p = split ? 0u : gl_WorkGroupID.z;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  const uint wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
  // 16-byte words: a row's, and this pair's first left and right vectors.
  const uint kq = k / 16u;
  const uint qa = (pc.a[0] + p * m_rows * k) / 16u, qb = (pc.a[3] + p * n_cols * k) / 16u;
  uint kbeg = 0u, kend = kq;
  icoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[FM * FN];

  // Uniform over the workgroup: every output of the block lies above the
  // diagonal, and none is read.
  if (causal == CAUSAL_OUT && n0 > m0 + BM - 1u)
    return;
#ifdef DC_BREAK
  kend -= 1u;
#endif
  if (split) {
    kbeg = gl_WorkGroupID.z * pc.a[13];
    kend = min(kend, kbeg + pc.a[13]);
  }
  if (causal == CAUSAL_A_LOWER)
    kend = min(kend, (m0 + BM + 15u) / 16u);
  if (causal == CAUSAL_A_UPPER)
    kbeg = max(kbeg, m0 / 16u);

  [[unroll]] for (uint i = 0u; i < FM * FN; i++)
    acc[i] = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0);

  for (uint k0 = kbeg; k0 < kend; k0 += BKQ) {
    // Word w of the stage: row w / BKQ (A's BM rows, then B's BN), word
    // w % BKQ of its K step. Every word is loaded before any is stored, so
    // that the loads are in flight together (gemm-int8-coopsc.comp's
    // finding: it counts as much as the occupancy).
    uvec4 regs[LOADS];

    [[unroll]] for (uint l = 0u; l < LOADS; l++) {
      const uint w = tid + l * NT, r = w / BKQ, kk = k0 + w % BKQ;
      const bool left = r < BM;
      const uint row = left ? m0 + r : n0 + r - BM;

      regs[l] = uvec4(0u);
      if (kk < kend && row < (left ? m_rows : n_cols))
        regs[l] = q[(left ? qa : qb) + row * kq + kk];
    }
    [[unroll]] for (uint l = 0u; l < LOADS; l++) {
      const uint w = tid + l * NT;

      smem[(w / BKQ) * ROWQ + w % BKQ] = regs[l];
    }
    barrier();
    // 32 bytes of K a fragment; those wholly past kend (a short K: the
    // attention's heads of 16 to 64 channels) are skipped, uniformly.
    [[unroll]] for (uint h = 0u; h < BKQ / 2u; h++) {
      icoopmatNV<8, gl_ScopeSubgroup, 16, 32> fa[FM];
      icoopmatNV<8, gl_ScopeSubgroup, 32, 8> fb[FN];

      if (k0 + 2u * h >= kend)
        break;
      [[unroll]] for (uint i = 0u; i < FM; i++)
        coopMatLoadNV(fa[i], smem, (wm0 + 16u * i) * ROWQ + 2u * h, ROWQ, false);
      [[unroll]] for (uint j = 0u; j < FN; j++)
        coopMatLoadNV(fb[j], smem, (BM + wn0 + 8u * j) * ROWQ + 2u * h, ROWQ, true);
      [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++)
          acc[i * FN + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * FN + j]);
    }
    barrier();
  }

  // A subgroup's FN fragments of one row of its tile leave together through
  // its FN · 512 bytes of shared memory (the stage's, free after the last
  // step's barrier: NT / 32 · FN · 32 ≤ STAGE words, which the host checks),
  // staged as 16 rows of WN int32 row-major, so that lane l's word t is row
  // (32t + l) / (WN / 4), columns 4 · ((32t + l) % (WN / 4)) and up: a
  // subgroup's store covers whole rows of WN outputs (128 bytes at WN 32).
  // A word is written as one 16-byte store where the output's start and row
  // stride are multiples of four floats and its four columns exist (the
  // attention's scores are written, not read, at K = 64), else a float at a
  // time.
  {
    const uint heads = max(pc.a[10], 1u);
    const uint base = split ? pc.a[14] + gl_WorkGroupID.z * m_rows * n_cols
                            : pc.a[7] + (p / heads) * pc.a[11] + (p % heads) * pc.a[12];
    const uint ldc = split ? n_cols : pc.a[8];
    const bool words = base % 4u == 0u && ldc % 4u == 0u;
    const uint RQ = WN / 4u;
    const uint own = warp * 32u * FN;

    [[unroll]] for (uint i = 0u; i < FM; i++) {
      [[unroll]] for (uint j = 0u; j < FN; j++)
        coopMatStoreNV(acc[i * FN + j], smem, own + 2u * j, RQ, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint t = 0u; t < FN; t++) {
        const uint w = 32u * t + lane;
        const uint m = m0 + wm0 + 16u * i + w / RQ;
        const uint n = n0 + wn0 + 4u * (w % RQ);

        if (m < m_rows) {
          const uvec4 v = smem[own + w];
          uvec4 o = uvec4(0u);

          [[unroll]] for (uint c = 0u; c < 4u; c++)
            if (n + c < n_cols)
              o[c] = split ? v[c]
                           : dc_gemm_epilogue(int(v[c]), e32[pc.a[1] + p * m_rows + m],
                                              e32[pc.a[4] + p * n_cols + n + c]);
          if (words && n + 3u < n_cols) {
            f4[(base + m * ldc + n) / 4u] = o;
          } else {
            [[unroll]] for (uint c = 0u; c < 4u; c++)
              if (n + c < n_cols)
                f[base + m * ldc + n + c] = o[c];
          }
        }
      }
      subgroupBarrier();
    }
  }
}
