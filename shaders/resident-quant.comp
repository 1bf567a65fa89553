#version 450
#extension GL_GOOGLE_include_directive : require
/* resident-quant.comp: the resident pass's quantization (resident-forward.comp's
 * OP_QUANTIZE, dc_quant_pack () bit for bit, docs/VERIFICATION.md §2) with
 * coalesced loads and stores, on the same buffers (F floats, Q int8, E
 * exponents with E[0] the "not finite" flag).
 *
 * A workgroup of 256 invocations quantizes a tile of TV vectors (TV a power
 * of two, chosen by src/model/dc-gpt-vk-rows.c), TK = 256 / TV invocations
 * ("lanes") per vector, lane l taking elements l, l + TK, … of its vector:
 *
 * - rows (a[11] = 0: each vector's elements are neighbours): the lanes of a
 *   vector are neighbouring invocations, so a subgroup loads neighbouring
 *   floats and stores neighbouring bytes;
 * - columns (a[11] = 1: neighbouring vectors are neighbouring floats, each
 *   vector strided): the vectors of the tile are neighbouring invocations,
 *   so a subgroup loads TV neighbouring floats of each of 32 / TV rows; the
 *   int8 values, whose vectors are contiguous in Q, go through shared memory
 *   (a transposing tile of TV vectors × 4·TK elements) so that neighbouring
 *   invocations store neighbouring bytes of one vector.
 *
 * amax is the largest |x| bit pattern, reduced over the lanes in shared
 * memory: a maximum, the same in any order. Each value is quant-exact.glsl's
 * integer function of its bits and the exponent, so the bits are the CPU's
 * whatever the tile. A NaN or infinity sets E[0] (the host refuses the pass)
 * and quantizes to 0, as OP_QUANTIZE does.
 *
 * Few long columns (a weight's 128 columns of 4,096 rows) would leave
 * most of a large device idle, one workgroup per tile: there the columns'
 * K is split into slices (a[13] elements each, a multiple of the
 * transposing chunk), one workgroup per (tile, slice) in two dispatches:
 * OP_QUANT_AMAX stores each slice's amax in a scratch of Q (a[14], bytes),
 * then OP_QUANTIZE takes the largest of a vector's slices (a maximum again,
 * the whole vector's amax) and quantizes its slice.
 *
 * With OP_LOWER (bit 8 of op) each pair's matrix is lower triangular, its
 * upper part exactly zero (the attention's P and dS, whose softmax kernels
 * write +0 there): vector v's elements past its diagonal d = v mod per (by
 * rows: i > d; by columns: i < d) are not read but taken as 0, which leaves
 * amax alone and quantizes to 0, so the bits are those of the whole vector
 * with about half the reads.
 *
 * Push constants (DcVkForwardPush): a: src, vector_stride, k_stride,
 * n_vectors, k, q, e, vectors per pair (0: one matrix), heads, sequence
 * stride, head stride (vector v is pair p = v / per, row v mod per, at
 * src + (p / H)·sb + (p mod H)·sh + (v mod per)·vector_stride), then a[11]
 * columns, a[12] log2 TV, a[13] the slice's length (0: no split), a[14]
 * the slices' amax scratch (bytes into Q, 4-aligned).
 *
 * DC_BREAK builds the deliberately wrong twin (ties round away from zero),
 * for the gate's test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require

#ifdef DC_BREAK
#define DC_BREAK_QUANT
#endif
#include "quant-exact.glsl"

#define GROUP 256u
#define F32_INF 0x7f800000u

layout (local_size_x = 256) in;

layout (std430, binding = 0) readonly buffer F { uint f[]; };
layout (std430, binding = 1) buffer Q { int8_t q8[]; };
/* The same buffer as words: the slices' amax scratch. */
layout (std430, binding = 1) buffer Q32 { uint q32[]; };
layout (std430, binding = 2) buffer E { int e32[]; };

/* Mirrors DcVkForwardPush (src/model/dc-gpt-vk-forward.c). */
layout (push_constant) uniform Push
{
  uint op;
  uint a[15];
} pc;

#define OP_QUANTIZE 2u
#define OP_QUANT_AMAX 101u
#define OP_LOWER 0x100u

shared uint s_amax[GROUP];
/* The columns' transposing tile: TV vectors × (4·TK + 1) values (the + 1
 * spreads a column's values over the banks), 4·GROUP + TV at most. */
shared uint s_q[4u * GROUP + 32u];

uint
vector_base (uint v)
{
  uint per = pc.a[7] == 0u ? pc.a[3] : pc.a[7], heads = max (pc.a[8], 1u);
  uint p = v / per;

  return pc.a[0] + (p / heads) * pc.a[9] + (p % heads) * pc.a[10] + (v % per) * pc.a[1];
}

/* One element into the vector's amax (finite values) or its flag. */
void
take_amax (uint bits, inout uint amax, inout bool bad)
{
  uint m = bits & 0x7fffffffu;

  if (m >= F32_INF)
    bad = true;
  else
    amax = max (amax, m);
}

int
quantize_bits (uint bits, uint amax, int e)
{
  return (bits & 0x7fffffffu) >= F32_INF || amax == 0u ? 0 : quantize_one (bits, e);
}

void
main ()
{
  uint lid = gl_LocalInvocationID.x;
  uint n_vectors = pc.a[3], k = pc.a[4], ks = pc.a[2];
  bool columns = pc.a[11] != 0u;
  uint tv = 1u << pc.a[12], tk = GROUP / tv;
  /* This invocation's vector in the tile and its lane. */
  uint c = columns ? lid % tv : lid / tk;
  uint l = columns ? lid / tv : lid % tk;
  /* s_amax[lid] is slot (c, l); slot (c, l + w) is w lanes further. */
  uint lane_step = columns ? tv : 1u;
  /* This workgroup's slice of K, [k0, k1), and the slices' count. */
  uint slice = pc.a[13], slices = slice == 0u ? 1u : (k + slice - 1u) / slice;
  uint k0 = slice * gl_WorkGroupID.y, k1 = slice == 0u ? k : min (k, k0 + slice);
  uint op = pc.op & 0xffu;
  bool lower = (pc.op & OP_LOWER) != 0u;
  uint per = pc.a[7] == 0u ? n_vectors : pc.a[7];

  /* A uniform loop (the tile's start depends on the workgroup only), so the
   * barriers are in uniform control flow. */
  for (uint v0 = gl_WorkGroupID.x * tv; v0 < n_vectors; v0 += gl_NumWorkGroups.x * tv)
    {
      uint v = v0 + c;
      bool live = v < n_vectors;
      uint base = live ? vector_base (v) : 0u;
      uint amax = 0u;
      bool bad = false;
      int e;
      /* The vector's elements that are read, [lo, hi): the rest are zero. */
      uint d = v % per;
      uint lo = lower && columns ? d : 0u;
      uint hi = lower && !columns ? min (k, d + 1u) : k;

      /* Rows: this lane's first four elements, kept in registers for both
       * passes (the whole vector where it has at most 4 · TK elements, as
       * the attention's rows of 1,024 have); 0 where not read. */
      uint c4[4];

      for (uint u = 0u; u < 4u; u++)
        {
          uint i = k0 + l + u * tk;

          c4[u] = 0u;
          if (!columns && live && i < min (k1, hi))
            c4[u] = f[base + i * ks];
        }
      if (op == OP_QUANTIZE && slice != 0u)
        {
          /* The slices' maxima from OP_QUANT_AMAX. */
          if (live)
            for (uint s = 0u; s < slices; s++)
              amax = max (amax, q32[pc.a[14] / 4u + s * n_vectors + v]);
        }
      else
        {
          /* The loads of eight elements issued together, then their
           * maxima: a lane waits for memory once per eight elements, not
           * once per element. Columns start at the tile's first diagonal
           * (the first vector's, or 0 where the tile crosses into another
           * pair), the same row for all the tile's vectors, so that a
           * subgroup's loads stay neighbours; a vector's elements above its
           * own diagonal are masked (0: amax stays). */
          uint end = min (k1, hi);
          uint tile_lo = lower && columns && v0 % per + tv <= per ? v0 % per : 0u;
          uint i = columns ? k0 + l + (k0 + l < tile_lo ? (tile_lo - k0 - l + tk - 1u) / tk * tk
                                                        : 0u)
                           : k0 + l + 4u * tk;

          if (!columns)
            for (uint u = 0u; u < 4u; u++)
              take_amax (c4[u], amax, bad);
          if (live)
            {
              for (; i + 7u * tk < end; i += 8u * tk)
                {
                  uint m[8];

                  for (uint u = 0u; u < 8u; u++)
                    m[u] = i + u * tk >= lo ? f[base + (i + u * tk) * ks] : 0u;
                  for (uint u = 0u; u < 8u; u++)
                    take_amax (m[u], amax, bad);
                }
              for (; i < end; i += tk)
                take_amax (i >= lo ? f[base + i * ks] : 0u, amax, bad);
            }
          if (bad)
            e32[0] = 1;
          s_amax[lid] = amax;
          barrier ();
          for (uint w = tk / 2u; w > 0u; w >>= 1)
            {
              if (l < w)
                s_amax[lid] = max (s_amax[lid], s_amax[lid + w * lane_step]);
              barrier ();
            }
          amax = s_amax[lid - l * lane_step];
          if (op == OP_QUANT_AMAX)
            {
              if (live && l == 0u)
                q32[pc.a[14] / 4u + gl_WorkGroupID.y * n_vectors + v] = amax;
              barrier ();
              continue;
            }
        }
      e = amax == 0u ? 0 : floor_log2 (amax) - 6;
      if (live && l == 0u && k0 == 0u)
        e32[pc.a[6] + v] = e;
      if (!columns)
        {
          if (live)
            {
              for (uint u = 0u; u < 4u; u++)
                {
                  uint i = k0 + l + u * tk;

                  if (i < k1)
                    q8[pc.a[5] + v * k + i] = int8_t (quantize_bits (c4[u], amax, e));
                }
              for (uint i = k0 + l + 4u * tk; i < k1; i += tk)
                q8[pc.a[5] + v * k + i] = int8_t (i < lo || i >= hi ? 0
                                                  : quantize_bits (f[base + i * ks], amax, e));
            }
        }
      else
        {
          uint ck = 4u * tk, row = ck + 1u;
          /* The next chunk's four values, loaded before this chunk's
           * barriers and stores so that its memory latency overlaps them. */
          uint nx[4];

          for (uint j = 0u; j < 4u; j++)
            {
              uint i = k0 + l + tk * j;

              nx[j] = live && i < k1 && i >= lo && i < hi ? f[base + i * ks] : 0u;
            }
          for (uint i0 = k0; i0 < k1; i0 += ck)
            {
              uint cur[4] = nx;

              for (uint j = 0u; j < 4u; j++)
                {
                  uint i = i0 + ck + l + tk * j;

                  nx[j] = live && i < k1 && i >= lo && i < hi ? f[base + i * ks] : 0u;
                }
              for (uint j = 0u; j < 4u; j++)
                {
                  uint r = l + tk * j;

                  if (live && i0 + r < k1)
                    s_q[c * row + r] = uint (quantize_bits (cur[j], amax, e));
                }
              barrier ();
              /* The tile's TV · ck values, neighbouring invocations on
               * neighbouring bytes of one vector. */
              for (uint j = 0u; j < 4u; j++)
                {
                  uint idx = lid + GROUP * j, cc = idx / ck, r = idx % ck;

                  if (v0 + cc < n_vectors && i0 + r < k1)
                    q8[pc.a[5] + (v0 + cc) * k + i0 + r] = int8_t (int (s_q[cc * row + r]));
                }
              barrier ();
            }
        }
      /* s_amax is reused by the next tile. */
      barrier ();
    }
}
