// gemm-int8-coop.comp: exact INT8 GEMM on cooperative matrices (tensor cores
// on NVIDIA), c = epilogue(a · bᵀ) (docs/VERIFICATION.md).
//
// VK_NV_cooperative_matrix through GL_NV_cooperative_matrix and
// GL_NV_integer_cooperative_matrix: the baseline glslang (Debian 12) has no
// GLSL for VK_KHR_cooperative_matrix. The host admits the kernel only where
// the device lists the one shape used here (A 16 × 32 and B 32 × 8 of int8,
// C 16 × 8 of int32, subgroup scope) and the subgroup has 32 invocations,
// and then only after the init gate (dc-gemm-vk.c).
//
// A workgroup of 256 invocations (8 subgroups) computes a 128 × 128 output
// tile: subgroup s owns rows 64·(s / 4) … +64 and columns 32·(s % 4) … +32,
// sixteen 16 × 8 accumulators. K goes 64 bytes at a time: the workgroup
// copies the A and B tiles (128 × 64 bytes each) into shared memory with
// 16-byte loads, then every subgroup loads four A fragments (row-major) and
// four B fragments (b is (N, Kp) row-major, so column-major K × N) per 32
// bytes of K from there: eight fragment loads for sixteen products. Shared
// arrays are uvec4, so the fragment offsets and strides below count 16-byte
// elements. int8 × int8 sums in int32 are exact whatever order the hardware
// adds them in: every partial sum fits (|q| ≤ 127, K ≤ 131072). The
// accumulators leave through shared memory, one half of the tile at a time,
// so that each output can be bounds-checked and given the integer epilogue.
//
// Layouts as in gemm-int8.comp: a (Mp, Kp), b (Np, Kp), zero-padded, Mp, Np
// multiples of 128 and Kp of 32; c (M, N) row-major, int32 (mode 0) or f32
// bits (mode 1). DC_BREAK skips the last K step (the gate's test only).
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

#define BM 128
#define BN 128

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

#define KT 4u  // 16-byte words per row of a K tile: 64 bytes

shared uvec4 tile_a[BM * KT];
shared uvec4 tile_b[BN * KT];
shared int tile_c[(BM / 2) * BN];

void main()
{
  const uint tid = gl_LocalInvocationID.x;
  const uint s = gl_SubgroupID;
  const uint m0 = gl_WorkGroupID.y * BM;
  const uint n0 = gl_WorkGroupID.x * BN;
  const uint half_row = s / 4u;
  const uint row = half_row * 64u;
  const uint col = (s % 4u) * 32u;
  const uint kq = p.kw / 4u;  // 16-byte words per row of a and b (Kp / 16)
  uint n_halves = kq / 2u;    // 32-byte steps of K
  icoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[4][4];

  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      acc[i][j] = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0);

#ifdef DC_BREAK
  n_halves -= 1u;
#endif

  for (uint h0 = 0u; h0 < n_halves; h0 += 2u) {
    // 512 words per tile, two per invocation; a second half step past the
    // end of K (odd step count) loads zeros and is skipped below.
    for (uint w = tid; w < BM * KT; w += 256u) {
      uint r = w / KT, q = w % KT;
      bool inside = h0 * 2u + q < n_halves * 2u;
      tile_a[w] = inside ? a[(m0 + r) * kq + h0 * 2u + q] : uvec4(0u);
      tile_b[w] = inside ? b[(n0 + r) * kq + h0 * 2u + q] : uvec4(0u);
    }
    barrier();

    for (uint h = 0u; h < 2u && h0 + h < n_halves; h++) {
      icoopmatNV<8, gl_ScopeSubgroup, 16, 32> fa[4];
      icoopmatNV<8, gl_ScopeSubgroup, 32, 8> fb[4];

      for (int i = 0; i < 4; i++)
        coopMatLoadNV(fa[i], tile_a, (row + 16u * uint(i)) * KT + 2u * h, KT, false);
      for (int j = 0; j < 4; j++)
        coopMatLoadNV(fb[j], tile_b, (col + 8u * uint(j)) * KT + 2u * h, KT, true);
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
          acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    barrier();
  }

  for (uint hr = 0u; hr < 2u; hr++) {
    if (half_row == hr)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
          coopMatStoreNV(acc[i][j], tile_c, (16u * uint(i)) * BN + col + 8u * uint(j), BN, false);
    barrier();
    for (uint idx = tid; idx < (BM / 2u) * BN; idx += 256u) {
      uint m = m0 + hr * (BM / 2u) + idx / BN;
      uint n = n0 + idx % BN;
      if (m < p.M && n < p.N) {
        int v = tile_c[idx];
        c[m * p.N + n] = p.mode == 0u ? uint(v) : dc_gemm_epilogue(v, ea[m], eb[n]);
      }
    }
    barrier();
  }
}
