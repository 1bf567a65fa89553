#version 450
#extension GL_GOOGLE_include_directive : require
/* quantize.comp: dc_quant_pack () on the device, bit for bit
 * (docs/VERIFICATION.md §2): one workgroup per vector of k floats (element i
 * of vector v at src[v · vector_stride + i · k_stride]), int8 values and one
 * power-of-two exponent out.
 *
 * All integer work on the bit patterns: amax is the largest |x| bit pattern
 * (a max, so any reduction order gives it); e = floor(log2(amax)) − 6 from
 * its exponent field (subnormal: from its leading mantissa bit); each
 * y = x · 2^−e is the integer significand shifted right by a known amount,
 * rounded half to even on the shifted-out bits, which is exactly the CPU's
 * round-half-even of the exact product; then the clamp to ±127. No float
 * instruction touches a value, so no device rounding or flushing can enter.
 * A NaN or infinity is reported (the lowest index per vector in bad[v], else
 * 0xffffffff) and the host refuses the call, as dc_quant_pack does.
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

layout (local_size_x = 64) in;

layout (std430, binding = 0) readonly buffer Src { uint x[]; };
layout (std430, binding = 1) writeonly buffer Q { int8_t q[]; };
layout (std430, binding = 2) writeonly buffer E { int e_out[]; };
layout (std430, binding = 3) writeonly buffer Bad { uint bad[]; };

/* Mirrors DcVkQuantPush (src/model/dc-gpt-vk-quant.c). */
layout (push_constant) uniform Push
{
  uint n_vectors;
  uint k;
  uint vector_stride;
  uint k_stride;
} pc;

shared uint s_amax[64];
shared uint s_bad;

void
main ()
{
  uint lid = gl_LocalInvocationID.x;

  for (uint v = gl_WorkGroupID.x; v < pc.n_vectors; v += gl_NumWorkGroups.x)
    {
      uint base = v * pc.vector_stride;
      uint amax = 0u;
      int e;

      if (lid == 0u)
        s_bad = 0xffffffffu;
      barrier ();
      for (uint i = lid; i < pc.k; i += 64u)
        {
          uint a = x[base + i * pc.k_stride] & 0x7fffffffu;

          if (a >= 0x7f800000u)
            atomicMin (s_bad, i);
          else
            amax = max (amax, a);
        }
      s_amax[lid] = amax;
      barrier ();
      for (uint width = 32u; width > 0u; width >>= 1)
        {
          if (lid < width)
            s_amax[lid] = max (s_amax[lid], s_amax[lid + width]);
          barrier ();
        }
      amax = s_amax[0];
      e = amax == 0u ? 0 : floor_log2 (amax) - 6;
      for (uint i = lid; i < pc.k; i += 64u)
        {
          uint bits = x[base + i * pc.k_stride];

          q[v * pc.k + i] = int8_t ((bits & 0x7fffffffu) >= 0x7f800000u || amax == 0u
                                    ? 0 : quantize_one (bits, e));
        }
      if (lid == 0u)
        {
          e_out[v] = e;
          bad[v] = s_bad;
        }
      /* s_amax and s_bad are reused by the next vector. */
      barrier ();
    }
}
