// gemm-int8.comp: tiled exact INT8 GEMM, c = epilogue(a · bᵀ)
// (docs/VERIFICATION.md). One source, several variants (shaders/meson.build):
//   BM × BN   output tile per workgroup (16 × 16 invocations, each TM × TN)
//   DC_DOT    4×8-bit packed integer dot product (OpSDot through
//             GL_EXT_spirv_intrinsics; the baseline glslc has no GLSL
//             extension for it). Opcode 4450 is OpSDot; 4451 would be OpUDot,
//             which spirv-val does not catch: the init gate does.
//   DC_BREAK  a deliberately wrong variant for the gate's test: it skips the
//             last K tile. Only selected through DC_TEST_BREAK_KERNEL.
//
// Layouts (the host pads with zeros, so tile loads need no bounds checks):
//   a  (Mp, Kp) int8, K-contiguous, read as i8vec4 words: a[m * kw + w]
//   b  (Np, Kp) int8, likewise; Mp, Np multiples of 128, Kp of 32
//   ea (M) int, eb (N) int: power-of-two exponents
//   c  (M, N) row-major: int32 accumulators (mode 0) or f32 bits (mode 1)
// Every partial sum fits in int32 (|q| ≤ 127, K ≤ 131072), so the order of the
// integer additions cannot change the result.
//
// SPDX-License-Identifier: GPL-3.0-or-later
#version 450
// glslc enables #include by itself, glslangValidator (the Flatpak SDK) only
// with this line; glslc's SPIR-V is byte-identical with or without it.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#ifdef DC_DOT
#extension GL_EXT_spirv_intrinsics : require
#endif

#include "gemm-epilogue.glsl"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#define TM (BM / 16)
#define TN (BN / 16)
#define BKW 8  // words of four int8 per K tile: 32 values
// Shared rows are padded by one word so that the 16 invocations reading 16
// different rows of a tile hit 16 different banks.
#define SROW (BKW + 1)

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(push_constant) uniform Push {
  uint M;
  uint N;
  uint kw;    // padded K / 4, a multiple of BKW
  uint mode;  // 0: int32 accumulators, 1: f32 epilogue
} p;

layout(std430, binding = 0) readonly buffer BufA { i8vec4 a[]; };
layout(std430, binding = 1) readonly buffer BufB { i8vec4 b[]; };
layout(std430, binding = 2) readonly buffer BufEa { int ea[]; };
layout(std430, binding = 3) readonly buffer BufEb { int eb[]; };
layout(std430, binding = 4) writeonly buffer BufC { uint c[]; };

shared int tile_a[BM * SROW];
shared int tile_b[BN * SROW];

#ifdef DC_DOT
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dc_sdot_packed(int x, int y, spirv_literal int packed_vector_format);

int dot4(int x, int y)
{
  return dc_sdot_packed(x, y, 0);  // PackedVectorFormat4x8Bit
}
#else
int dot4(int x, int y)
{
  ivec4 u = ivec4(unpack8(x));
  ivec4 v = ivec4(unpack8(y));
  return u.x * v.x + u.y * v.y + u.z * v.z + u.w * v.w;
}
#endif

void main()
{
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16u + tx;
  const uint m0 = gl_WorkGroupID.y * BM;
  const uint n0 = gl_WorkGroupID.x * BN;
  uint n_tiles = p.kw / BKW;
  int acc[TM][TN];

  for (int i = 0; i < TM; i++)
    for (int j = 0; j < TN; j++)
      acc[i][j] = 0;

#ifdef DC_BREAK
  n_tiles -= 1u;
#endif

  for (uint t = 0u; t < n_tiles; t++) {
    for (uint idx = tid; idx < BM * BKW; idx += 256u)
      tile_a[(idx / BKW) * SROW + idx % BKW] = pack32(a[(m0 + idx / BKW) * p.kw + t * BKW + idx % BKW]);
    for (uint idx = tid; idx < BN * BKW; idx += 256u)
      tile_b[(idx / BKW) * SROW + idx % BKW] = pack32(b[(n0 + idx / BKW) * p.kw + t * BKW + idx % BKW]);
    barrier();

    for (uint w = 0u; w < BKW; w++) {
      int av[TM];
      int bv[TN];

      for (int i = 0; i < TM; i++)
        av[i] = tile_a[(ty + 16u * uint(i)) * SROW + w];
      for (int j = 0; j < TN; j++)
        bv[j] = tile_b[(tx + 16u * uint(j)) * SROW + w];
      for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++)
          acc[i][j] += dot4(av[i], bv[j]);
    }
    barrier();
  }

  for (int i = 0; i < TM; i++) {
    uint m = m0 + ty + 16u * uint(i);
    if (m >= p.M)
      continue;
    for (int j = 0; j < TN; j++) {
      uint n = n0 + tx + 16u * uint(j);
      if (n >= p.N)
        continue;
      c[m * p.N + n] = p.mode == 0u ? uint(acc[i][j]) : dc_gemm_epilogue(acc[i][j], ea[m], eb[n]);
    }
  }
}
