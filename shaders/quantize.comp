#version 450
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

int
floor_log2 (uint abs_bits)
{
  uint biased = abs_bits >> 23;

  if (biased != 0u)
    return int (biased) - 127;
  return findMSB (abs_bits) - 149;
}

/* round-half-even(x · 2^−e) clamped to ±127, x finite. */
int
quantize_one (uint bits, int e)
{
  uint mag = bits & 0x7fffffffu;
  uint biased = mag >> 23;
  uint m = biased != 0u ? (mag & 0x7fffffu) | 0x800000u : mag;
  /* |x| = m · 2^(ex − 150), ex ≥ 1 (subnormals: 1, no implicit bit). */
  int ex = max (int (biased), 1);
  int shift = e - (ex - 150);  /* y = m · 2^−shift */
  uint r;

  if (shift <= 0)
    r = m << uint (-shift);  /* only small m get here: |y| < 128 */
  else if (shift >= 32)
    r = 0u;                  /* m < 2^24 ≤ 2^(shift − 1): |y| < ½ */
  else
    {
      uint rem = m & ((1u << uint (shift)) - 1u);
      uint half_bit = 1u << uint (shift - 1);

      r = m >> uint (shift);
#ifdef DC_BREAK
      if (rem >= half_bit)
        r += 1u;
#else
      if (rem > half_bit || (rem == half_bit && (r & 1u) != 0u))
        r += 1u;
#endif
    }
  r = min (r, 127u);
  return (bits & 0x80000000u) != 0u ? -int (r) : int (r);
}

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
