// gemm-int8-coopk.comp: exact INT8 GEMM on cooperative matrices, block tile
// BM × BN (128 × 128 or 128 × 256) and fragments 16 × FN × 32 (FN = 8 or 16),
// c = epilogue(a · bᵀ) (docs/VERIFICATION.md).
//
// Written in GL_NV_cooperative_matrix GLSL (the only one Debian 12's glslang
// knows), for VK_KHR_cooperative_matrix: the host rewrites the SPIR-V
// (dc-spirv-coop.c, pipeline name "…+khr") where the device lists the
// 16 × FN × 32 int8 shape under the KHR extension (the H200 lists 16 × 16 × 32
// there only), or runs it as it is where the NV extension lists 16 × 8 × 32.
//
// As gemm-int8-coop.comp: 8 subgroups of 32, subgroup s owns rows
// 64·(s / 4) … +64 and columns WN·(s % 4) … +WN (WN = BN / 4), 4 × NF
// accumulators (NF = WN / FN); K goes 16 · KT bytes at a time (64, or 128
// with KT = 8) through shared memory with 16-byte loads, then each subgroup
// loads its A and B fragments per 32 bytes of K. int8 × int8 sums in int32
// are exact whatever order the hardware adds them in (|q| ≤ 127,
// K ≤ 131072). The accumulators leave
// through a 16 × BN int32 staging tile, one fragment row at a time (8 passes),
// so that shared memory stays at (BM + BN) · 16 · KT + 64 · BN bytes (40 KiB
// at 128 × 256 or at KT = 8, under the 48 KiB Vulkan gives a workgroup on the
// H200; 24 KiB at 128 × 128, where coop's 48 KiB leaves fewer workgroups per
// multiprocessor).
//
// Layouts as in gemm-int8.comp: a (Mp, Kp), b (Np, Kp), zero-padded, Mp a
// multiple of BM, Np of BN, Kp of 32; c (M, N) row-major, int32 (mode 0) or
// f32 bits (mode 1). DC_BREAK skips the last K step (the gate's test only).
//
// SPDX-License-Identifier: GPL-3.0-or-later
#version 450
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
#ifndef FN
#define FN 16
#endif
#define WN (BN / 4)
#define NF (WN / FN)

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

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

// 16-byte words per row of a K tile: 4 (64 bytes, as coop) or 8 (128 bytes:
// half the barriers per K, twice the loads in flight per step).
#ifndef KT
#define KT 4u
#endif

shared uvec4 tile_a[BM * KT];
shared uvec4 tile_b[BN * KT];
shared int tile_c[16 * BN];

void main()
{
  const uint tid = gl_LocalInvocationID.x;
  const uint s = gl_SubgroupID;
  const uint m0 = gl_WorkGroupID.y * BM;
  const uint n0 = gl_WorkGroupID.x * BN;
  const uint half_row = s / 4u;
  const uint row = half_row * 64u;
  const uint col = (s % 4u) * WN;
  const uint kq = p.kw / 4u;  // 16-byte words per row of a and b (Kp / 16)
  uint n_halves = kq / 2u;    // 32-byte steps of K
  icoopmatNV<32, gl_ScopeSubgroup, 16, FN> acc[4][NF];

  for (int i = 0; i < 4; i++)
    for (int j = 0; j < NF; j++)
      acc[i][j] = icoopmatNV<32, gl_ScopeSubgroup, 16, FN>(0);

#ifdef DC_BREAK
  n_halves -= 1u;
#endif

  for (uint h0 = 0u; h0 < n_halves; h0 += KT / 2u) {
    // Half steps past the end of K load zeros and are skipped below.
    for (uint w = tid; w < BM * KT; w += 256u) {
      uint r = w / KT, q = w % KT;
      bool inside = h0 * 2u + q < n_halves * 2u;
      tile_a[w] = inside ? a[(m0 + r) * kq + h0 * 2u + q] : uvec4(0u);
    }
    for (uint w = tid; w < BN * KT; w += 256u) {
      uint r = w / KT, q = w % KT;
      bool inside = h0 * 2u + q < n_halves * 2u;
      tile_b[w] = inside ? b[(n0 + r) * kq + h0 * 2u + q] : uvec4(0u);
    }
    barrier();

    for (uint h = 0u; h < KT / 2u && h0 + h < n_halves; h++) {
      icoopmatNV<8, gl_ScopeSubgroup, 16, 32> fa[4];
      icoopmatNV<8, gl_ScopeSubgroup, 32, FN> fb[NF];

      for (int i = 0; i < 4; i++)
        coopMatLoadNV(fa[i], tile_a, (row + 16u * uint(i)) * KT + 2u * h, KT, false);
      for (int j = 0; j < NF; j++)
        coopMatLoadNV(fb[j], tile_b, (col + uint(FN) * uint(j)) * KT + 2u * h, KT, true);
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < NF; j++)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    barrier();
  }

  for (uint hr = 0u; hr < 2u; hr++) {
    for (int i = 0; i < 4; i++) {
      if (half_row == hr)
        for (int j = 0; j < NF; j++)
          coopMatStoreNV(acc[i][j], tile_c, col + uint(FN) * uint(j), BN, false);
      barrier();
      for (uint idx = tid; idx < 16u * BN; idx += 256u) {
        uint m = m0 + hr * 64u + 16u * uint(i) + idx / BN;
        uint n = n0 + idx % BN;
        if (m < p.M && n < p.N) {
          int v = tile_c[idx];
          c[m * p.N + n] = p.mode == 0u ? uint(v) : dc_gemm_epilogue(v, ea[m], eb[n]);
        }
      }
      barrier();
    }
  }
}
