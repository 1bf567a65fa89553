// gemm-int8-coop2.comp: exact INT8 GEMM on cooperative matrices with large
// block tiles and double-buffered staging, c = epilogue(a · bᵀ)
// (docs/VERIFICATION.md). Same operands, push constants and outputs as
// gemm-int8-coop.comp; the same fragment shape (A 16 × 32 and B 32 × 8 of
// int8 into C 16 × 8 of int32, VK_NV_cooperative_matrix, 32-wide subgroups),
// which the host checks before offering the kernel, and the same init gate.
//
// Defines (shaders/meson.build builds one variant per set):
//   BM × BN  output tile per workgroup
//   WM × WN  output tile per subgroup: (WM / 16) A fragments by (WN / 8) B
//            fragments of accumulators; (BM / WM) · (BN / WN) subgroups
//   BKQ      16-byte words of K staged per step (2: 32 bytes, 4: 64 bytes)
//   DC_NOPAD rows of the staged tiles without the extra 16 bytes (tuning)
//   DC_BREAK skips the last K step (the gate's test only)
//
// K steps: every invocation loads its share of the next A and B tiles from
// the storage buffers into registers (16-byte loads, K-contiguous rows of a
// and of b, since b is (N, K)), the subgroups multiply the current tiles out
// of shared memory, then the registers go to the other shared buffer: one
// barrier per step, the loads of step t + 1 in flight during the products of
// step t. Staged rows are BKQ + 1 words apart, so the eight 16-byte rows a
// fragment load reads at a time fall in eight different bank groups (rows
// 64 bytes apart hit the same banks four times over). Offsets and strides of
// the fragment loads count uvec4 elements.
//
// int8 × int8 sums in int32 are exact in any order (|q| ≤ 127, K ≤ 131072).
// Each subgroup writes its accumulators out one fragment at a time through
// its own 512 bytes of shared memory, so that every output is bounds-checked
// and given the integer epilogue without a workgroup barrier.
//
// Layouts: a (Mp, Kp), b (Np, Kp), zero-padded; Mp a multiple of BM, Np of
// BN, Kp of 16 · BKQ (dc-gemm-vk.c pads per variant); c (M, N) row-major,
// int32 (mode 0) or f32 bits (mode 1).
//
// SPDX-License-Identifier: GPL-3.0-or-later
#version 450
// glslc enables #include by itself, glslangValidator (the Flatpak SDK) only
// with this line; glslc's SPIR-V is byte-identical with or without it.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require

#include "gemm-epilogue.glsl"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef BKQ
#define BKQ 4
#endif

#define WARPS_N (BN / WN)
#define NWARPS ((BM / WM) * WARPS_N)
#define NT (NWARPS * 32)
#define FM (WM / 16)
#define FN (WN / 8)
#ifdef DC_NOPAD
#define SK BKQ
#else
#define SK (BKQ + 1)
#endif
#define LA (BM * BKQ / NT)  // 16-byte words of A each invocation stages per step
#define LB (BN * BKQ / NT)

#if (BM * BKQ) % NT != 0 || (BN * BKQ) % NT != 0 || BKQ % 2 != 0
#error "each invocation must stage whole words of both tiles, and K steps whole fragments"
#endif

layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;

layout(push_constant) uniform Push {
  uint M;
  uint N;
  uint kw;    // padded K / 4
  uint mode;  // 0: int32 accumulators, 1: f32 epilogue
} p;

layout(std430, binding = 0) readonly buffer BufA { uvec4 a[]; };
layout(std430, binding = 1) readonly buffer BufB { uvec4 b[]; };
layout(std430, binding = 2) readonly buffer BufEa { int ea[]; };
layout(std430, binding = 3) readonly buffer BufEb { int eb[]; };
layout(std430, binding = 4) writeonly buffer BufC { uint c[]; };

shared uvec4 sa[2 * BM * SK];
shared uvec4 sb[2 * BN * SK];
shared int scratch[NWARPS * 128];

void main()
{
  const uint tid = gl_LocalInvocationID.x;
  const uint warp = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  const uint m0 = gl_WorkGroupID.y * BM;
  const uint n0 = gl_WorkGroupID.x * BN;
  const uint wm0 = (warp / WARPS_N) * WM;
  const uint wn0 = (warp % WARPS_N) * WN;
  const uint kq = p.kw / 4u;  // 16-byte words per row of a and b
  uint nk = kq / BKQ;
  icoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[FM][FN];
  uvec4 ra[LA];
  uvec4 rb[LB];

  for (int i = 0; i < FM; i++)
    for (int j = 0; j < FN; j++)
      acc[i][j] = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0);

#ifdef DC_BREAK
  nk -= 1u;
#endif

  if (nk > 0u) {
    for (int l = 0; l < LA; l++) {
      uint w = tid + uint(l) * NT;
      sa[(w / BKQ) * SK + w % BKQ] = a[(m0 + w / BKQ) * kq + w % BKQ];
    }
    for (int l = 0; l < LB; l++) {
      uint w = tid + uint(l) * NT;
      sb[(w / BKQ) * SK + w % BKQ] = b[(n0 + w / BKQ) * kq + w % BKQ];
    }
  }
  barrier();

  for (uint kt = 0u; kt < nk; kt++) {
    const uint cur = kt & 1u;
    const bool more = kt + 1u < nk;

    if (more) {
      for (int l = 0; l < LA; l++) {
        uint w = tid + uint(l) * NT;
        ra[l] = a[(m0 + w / BKQ) * kq + (kt + 1u) * BKQ + w % BKQ];
      }
      for (int l = 0; l < LB; l++) {
        uint w = tid + uint(l) * NT;
        rb[l] = b[(n0 + w / BKQ) * kq + (kt + 1u) * BKQ + w % BKQ];
      }
    }

    for (uint h = 0u; h < BKQ / 2u; h++) {
      icoopmatNV<8, gl_ScopeSubgroup, 16, 32> fa[FM];
      icoopmatNV<8, gl_ScopeSubgroup, 32, 8> fb[FN];

      for (int i = 0; i < FM; i++)
        coopMatLoadNV(fa[i], sa, (cur * BM + wm0 + 16u * uint(i)) * SK + 2u * h, SK, false);
      for (int j = 0; j < FN; j++)
        coopMatLoadNV(fb[j], sb, (cur * BN + wn0 + 8u * uint(j)) * SK + 2u * h, SK, true);
      for (int i = 0; i < FM; i++)
        for (int j = 0; j < FN; j++)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }

    if (more) {
      const uint nxt = cur ^ 1u;

      for (int l = 0; l < LA; l++) {
        uint w = tid + uint(l) * NT;
        sa[(nxt * BM + w / BKQ) * SK + w % BKQ] = ra[l];
      }
      for (int l = 0; l < LB; l++) {
        uint w = tid + uint(l) * NT;
        sb[(nxt * BN + w / BKQ) * SK + w % BKQ] = rb[l];
      }
    }
    barrier();
  }

  // Lane l takes elements 4l … 4l + 3 of each 16 × 8 fragment (row-major):
  // half a row, 16 contiguous bytes of c.
  for (int i = 0; i < FM; i++)
    for (int j = 0; j < FN; j++) {
      coopMatStoreNV(acc[i][j], scratch, warp * 128u, 8u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint t = 0u; t < 4u; t++) {
        uint e = lane * 4u + t;
        uint m = m0 + wm0 + 16u * uint(i) + e / 8u;
        uint n = n0 + wn0 + 8u * uint(j) + e % 8u;
        if (m < p.M && n < p.N) {
          int v = scratch[warp * 128u + e];
          c[m * p.N + n] = p.mode == 0u ? uint(v) : dc_gemm_epilogue(v, ea[m], eb[n]);
        }
      }
      subgroupBarrier();
    }
}
