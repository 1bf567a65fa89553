// gemm-int8-coopsc.comp: exact INT8 GEMM on cooperative matrices (16 × 8 × 32
// int8 fragments, VK_NV_cooperative_matrix, as gemm-int8-coop.comp) with the
// tile shape chosen by specialization constants, so that one build offers a
// family of kernels and one device call can sweep them (dc-gemm-vk.c's
// "sc…" variants; docs/BENCHMARKS.md, "Tile sweep").
//
// Constants (dc-gemm-vk.c sets all of them; the defaults are coop's shape):
//   BM × BN    the workgroup's output tile
//   WM × WN    one subgroup's output tile: (WM / 16) · (WN / 8) accumulators
//   BKQ        16-byte words of K staged per step (2: 32 bytes, 4: 64, 8: 128)
//   PAD        16-byte words added to each staged row: an odd row stride in
//              words spreads the eight 16-byte rows of a fragment load over
//              all 32 banks
//   STAGES     1: load, barrier, multiply, barrier (coop's scheme);
//              2: the next step's words are loaded into registers before the
//              products and stored into the other half of shared memory after
//              them, one barrier per step
//   PACKED     0: a (Mp, Kp) and b (Np, Kp) row-major; 1: blocked, each
//              (tile, K step) block of BM (BN) rows × BKQ words contiguous, so
//              that a workgroup's step reads one contiguous span (the host
//              packs while it copies the operands in, dc-gemm-vk.c)
//   SWZ        workgroups walk the output in bands of SWZ tile rows (0 or 1:
//              row by row), so that the tiles in flight share their operands
//              in L2
//   NT         invocations: (BM / WM) · (BN / WN) · 32
// Int8 × int8 sums in int32 are exact in any order (|q| ≤ 127, K ≤ 131072),
// so every shape gives the same bits; each variant still passes the init gate
// before use. The accumulators leave one fragment at a time through 512 bytes
// of shared memory per subgroup, for the bounds check and the epilogue.
//
// Layout limits the host guarantees: Mp a multiple of BM, Np of BN, Kp of
// BKQ · 16; (BM + BN) · BKQ a multiple of NT, BKQ even. DC_BREAK skips the
// last K step (the gate's test only).
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
layout(constant_id = 4) const uint BKQ = 4;
layout(constant_id = 5) const uint PAD = 0;
layout(constant_id = 6) const uint STAGES = 1;
layout(constant_id = 7) const uint PACKED = 0;
layout(constant_id = 8) const uint SWZ = 0;
layout(constant_id = 9) const uint NT = 256;

layout(local_size_x_id = 9, local_size_y = 1, local_size_z = 1) in;

const uint FM = WM / 16u;
const uint FN = WN / 8u;
const uint WARPS_N = BN / WN;
const uint ROWQ = BKQ + PAD;               // staged row stride, 16-byte words
const uint STAGE = (BM + BN) * ROWQ;       // one stage: A's rows, then B's
const uint LOADS = (BM + BN) * BKQ / NT;   // words each invocation stages per step
const uint NWARPS = NT / 32u;

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

// The staging stages; after the last step, 32 words (512 bytes) per subgroup
// for the epilogue (STAGE ≥ 512 words ≥ NWARPS · 32: BM, BN ≥ 64, BKQ ≥ 2).
// DC_SMEM32 (gemm-int8-coopsc32): the same bytes as 32-bit elements, the
// fragments loaded with offsets and strides in those, as ggml's Vulkan
// kernels stage theirs (the driver may load fragments by element).
#ifdef DC_SMEM32
shared uint smem[STAGES * STAGE * 4u];
#define SW 4u  // elements a 16-byte word
#else
shared uvec4 smem[STAGES * STAGE];
#define SW 1u
#endif

// Word w (0 … (BM + BN) · BKQ − 1) of K step kt: rows of A, then rows of B;
// kq 16-byte words a row, kq / BKQ steps.
uvec4 load_word(uint w, uint tm, uint tn, uint kq, uint kt)
{
  const uint r = w / BKQ, q = w % BKQ;

  if (r < BM) {
    if (PACKED != 0u)
      return a[((tm * (kq / BKQ) + kt) * BM + r) * BKQ + q];
    return a[(tm * BM + r) * kq + kt * BKQ + q];
  }
  if (PACKED != 0u)
    return b[((tn * (kq / BKQ) + kt) * BN + (r - BM)) * BKQ + q];
  return b[(tn * BN + (r - BM)) * kq + kt * BKQ + q];
}

void store_word(uint stage, uint w, uvec4 v)
{
  const uint i = stage * STAGE + (w / BKQ) * ROWQ + w % BKQ;

#ifdef DC_SMEM32
  smem[4u * i] = v.x;
  smem[4u * i + 1u] = v.y;
  smem[4u * i + 2u] = v.z;
  smem[4u * i + 3u] = v.w;
#else
  smem[i] = v;
#endif
}

void main()
{
  const uint tid = gl_LocalInvocationID.x;
  const uint warp = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  const uint groups_n = gl_NumWorkGroups.x;
  const uint groups_m = gl_NumWorkGroups.y;
  uint tm = gl_WorkGroupID.y, tn = gl_WorkGroupID.x;

  if (SWZ > 1u) {
    // Bands of SWZ tile rows, walked column by column within a band.
    const uint id = gl_WorkGroupID.y * groups_n + gl_WorkGroupID.x;
    const uint band = id / (SWZ * groups_n);
    const uint first = band * SWZ;
    const uint rows = min(SWZ, groups_m - first);
    const uint in_band = id - band * SWZ * groups_n;

    tm = first + in_band % rows;
    tn = in_band / rows;
  }

  const uint m0 = tm * BM;
  const uint n0 = tn * BN;
  const uint wm0 = (warp / WARPS_N) * WM;
  const uint wn0 = (warp % WARPS_N) * WN;
  const uint kq = p.kw / 4u;  // 16-byte words per row of a and b
  uint nk = kq / BKQ;
  icoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[FM * FN];
  uvec4 regs[LOADS];

  [[unroll]] for (uint i = 0u; i < FM * FN; i++)
    acc[i] = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0);

#ifdef DC_BREAK
  nk -= 1u;
#endif

  if (STAGES > 1u && nk > 0u) {
    [[unroll]] for (uint l = 0u; l < LOADS; l++)
      store_word(0u, tid + l * NT, load_word(tid + l * NT, tm, tn, kq, 0u));
    barrier();
  }

  for (uint kt = 0u; kt < nk; kt++) {
    uint cur = 0u;

    if (STAGES > 1u) {
      cur = kt & 1u;
      if (kt + 1u < nk)
        [[unroll]] for (uint l = 0u; l < LOADS; l++)
          regs[l] = load_word(tid + l * NT, tm, tn, kq, kt + 1u);
    } else {
      [[unroll]] for (uint l = 0u; l < LOADS; l++)
        regs[l] = load_word(tid + l * NT, tm, tn, kq, kt);
      [[unroll]] for (uint l = 0u; l < LOADS; l++)
        store_word(0u, tid + l * NT, regs[l]);
      barrier();
    }

    [[unroll]] for (uint h = 0u; h < BKQ / 2u; h++) {
      icoopmatNV<8, gl_ScopeSubgroup, 16, 32> fa[FM];
      icoopmatNV<8, gl_ScopeSubgroup, 32, 8> fb[FN];

      [[unroll]] for (uint i = 0u; i < FM; i++)
        coopMatLoadNV(fa[i], smem, SW * (cur * STAGE + (wm0 + 16u * i) * ROWQ + 2u * h),
                      SW * ROWQ, false);
      [[unroll]] for (uint j = 0u; j < FN; j++)
        coopMatLoadNV(fb[j], smem, SW * (cur * STAGE + (BM + wn0 + 8u * j) * ROWQ + 2u * h),
                      SW * ROWQ, true);
      [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++)
          acc[i * FN + j] = coopMatMulAddNV(fa[i], fb[j], acc[i * FN + j]);
    }

    if (STAGES > 1u && kt + 1u < nk)
      [[unroll]] for (uint l = 0u; l < LOADS; l++)
        store_word(cur ^ 1u, tid + l * NT, regs[l]);
    barrier();
  }

  // Lane l takes elements 4l … 4l + 3 of each 16 × 8 fragment (row-major):
  // half a row, 16 contiguous bytes of c.
  [[unroll]] for (uint i = 0u; i < FM; i++)
    [[unroll]] for (uint j = 0u; j < FN; j++) {
      const uint m = m0 + wm0 + 16u * i + lane / 2u;
      const uint n = n0 + wn0 + 8u * j + (lane % 2u) * 4u;

      coopMatStoreNV(acc[i * FN + j], smem, SW * warp * 32u, SW * 2u, false);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      if (m < p.M) {
#ifdef DC_SMEM32
        const uint e = 4u * (warp * 32u + lane);
        const uvec4 v = uvec4(smem[e], smem[e + 1u], smem[e + 2u], smem[e + 3u]);
#else
        const uvec4 v = smem[warp * 32u + lane];
#endif

        [[unroll]] for (uint t = 0u; t < 4u; t++)
          if (n + t < p.N)
            c[m * p.N + n + t] = p.mode == 0u ? v[t]
                                             : dc_gemm_epilogue(int(v[t]), ea[m], eb[n + t]);
      }
      subgroupBarrier();
    }
}
