/* f32-exact.glsl: IEEE-754 binary32 add, subtract, multiply, divide and
 * square root, correctly rounded to nearest-even, in 32-bit integer
 * arithmetic only.
 *
 * Vulkan promises correctly rounded float add, sub and mul, but not division
 * or square root, and it lets a device flush subnormals (lavapipe reports no
 * shaderDenormPreserveFloat32) and pick the rounding mode. The CPU keeps
 * subnormals. Working on the bit patterns (floats are carried as uint) makes
 * every result the CPU's, bit for bit, on any device: integer operations are
 * exact everywhere. docs/VERIFICATION.md ("Operations on the GPU") says why
 * each step is exact; the kernels that use this file are gated against the
 * CPU at start-up.
 *
 * NaN: a NaN operand comes back quieted (the first NaN operand); an invalid
 * operation (∞ − ∞, 0 · ∞, 0/0, ∞/∞, √−x) gives 0x7fc00000. The CPU's NaN
 * payloads depend on the compiler's operand order, so only "is NaN" is part
 * of the rule; training stops at the first non-finite value anyway.
 *
 * Define DC_BREAK_F32 to get the deliberately wrong twin (the division
 * forgets its remainder, so some ties round the wrong way) for the gate test.
 *
 * Define DC_NATIVE_F32 to have + − × done by the device's own float unit:
 * Vulkan rounds them correctly, and the execution modes below forbid the
 * rest of the difference (flushed subnormals, another rounding mode, ignored
 * signed zeros, infinities and NaNs); `precise` (NoContraction) forbids
 * fusing a product into a following sum. Only for devices that report
 * shaderDenormPreserveFloat32, shaderRoundingModeRTEFloat32 and
 * shaderSignedZeroInfNanPreserveFloat32, and gated like the emulated kernels.
 * ÷ and √ stay emulated (Vulkan allows them 2.5 ulp and 3 ulp). With
 * DC_BREAK_FTZ too, + − × flush subnormal results to zero, as a device
 * without DenormPreserve may: the native kernels' broken twin. (A fused
 * multiply-add would not do as a twin: Vulkan lets fma () round twice, and
 * lavapipe does.)
 *
 * With DC_NATIVE_NO_DENORM_MODE too, DenormPreserve is not declared: the
 * variant for devices that report RTE rounding and signed zero/inf/NaN
 * preservation but not shaderDenormPreserveFloat32 (lavapipe, the H200).
 * A shader must not ask for a mode the device does not report; what the
 * device then does with subnormals is its own, so only the gates (their
 * pairs have subnormal operands and results of every op) decide whether
 * the variant is used on it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

#ifdef DC_NATIVE_F32
#extension GL_EXT_spirv_intrinsics : require
/* SPIR-V execution modes DenormPreserve (4459), SignedZeroInfNanPreserve
 * (4461) and RoundingModeRTE (4462) for 32-bit floats, with their
 * capabilities (4464, 4466, 4467); SPV_KHR_float_controls is core in the
 * SPIR-V 1.5 of --target-env=vulkan1.2. */
#ifndef DC_NATIVE_NO_DENORM_MODE
spirv_execution_mode (extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 32);
#endif
spirv_execution_mode (extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);
spirv_execution_mode (extensions = ["SPV_KHR_float_controls"], capabilities = [4467], 4462, 32);
#endif

const uint F32_SIGN = 0x80000000u;
const uint F32_INF = 0x7f800000u;
const uint F32_QNAN = 0x7fc00000u;

bool
f32_is_nan (uint a)
{
  return (a & 0x7fffffffu) > F32_INF;
}

/* a >> dist, with a 1 in bit 0 when any bit shifted out was 1 (sticky). */
uint
f32_shift_right_jam (uint a, uint dist)
{
  if (dist == 0u)
    return a;
  if (dist >= 31u)
    return a != 0u ? 1u : 0u;
  return (a >> dist) | ((a << (32u - dist)) != 0u ? 1u : 0u);
}

/* The value sig · 2^(e − 156), sig ≠ 0 and < 2^31, rounded to a float.
 * After normalisation sig has its leading bit at bit 30, so bits 29 … 7 are
 * the fraction and bits 6 … 0 decide the rounding (bit 0 possibly sticky);
 * e is then the biased exponent minus one (Berkeley SoftFloat's
 * roundPackToF32 convention). */
uint
f32_round_pack (uint sign, int e, uint sig)
{
  int shift = 30 - findMSB (sig);
  uint round_bits, mag;

  sig <<= uint (shift);
  e -= shift;
  if (e < 0)
    {
      /* Subnormal (or zero) result: shift down to the fixed exponent. */
      sig = f32_shift_right_jam (sig, uint (-e));
      e = 0;
    }
  else if (e >= 0xfe)
    return sign | F32_INF;
  round_bits = sig & 0x7fu;
  sig = (sig + 0x40u) >> 7;
  if (round_bits == 0x40u)
    sig &= ~1u;  /* a tie: to even */
  /* The leading bit of sig carries into the exponent; a rounding carry out
   * of the fraction moves it one further, exactly as needed. */
  mag = (uint (e) << 23) + sig;
  return sign | min (mag, F32_INF);
}

/* Fraction with the implicit bit in bit 23 and the exponent for
 * value = m · 2^(e − 150); subnormals are normalised (e ≤ 0). a is finite
 * and not zero. */
void
f32_unpack (uint a, out uint m, out int e)
{
  uint biased = (a >> 23) & 0xffu;

  m = a & 0x7fffffu;
  if (biased == 0u)
    {
      int shift = 23 - findMSB (m);

      m <<= uint (shift);
      e = 1 - shift;
    }
  else
    {
      m |= 0x800000u;
      e = int (biased);
    }
}

uint
f32_quiet (uint a, uint b)
{
  return (f32_is_nan (a) ? a : b) | 0x400000u;
}

#ifdef DC_NATIVE_F32
uint
f32_native_result (float r)
{
#ifdef DC_BREAK_FTZ
  uint bits = floatBitsToUint (r);

  return (bits & F32_INF) == 0u ? bits & F32_SIGN : bits;
#else
  return floatBitsToUint (r);
#endif
}

uint
f32_add (uint a, uint b)
{
  precise float r = uintBitsToFloat (a) + uintBitsToFloat (b);

  return f32_native_result (r);
}

uint
f32_sub (uint a, uint b)
{
  precise float r = uintBitsToFloat (a) - uintBitsToFloat (b);

  return f32_native_result (r);
}

uint
f32_mul (uint a, uint b)
{
  precise float r = uintBitsToFloat (a) * uintBitsToFloat (b);

  return f32_native_result (r);
}
#else
uint
f32_add (uint a, uint b)
{
  uint mag_a = a & 0x7fffffffu, mag_b = b & 0x7fffffffu;
  uint sig_a, sig_b, sign;
  int e_a, e_b;

  if (f32_is_nan (a) || f32_is_nan (b))
    return f32_quiet (a, b);
  if (mag_a == F32_INF)
    return (mag_b == F32_INF && a != b) ? F32_QNAN : a;
  if (mag_b == F32_INF)
    return b;
  if (mag_a < mag_b)
    {
      uint t = a;
      a = b;
      b = t;
      t = mag_a;
      mag_a = mag_b;
      mag_b = t;
    }
  /* Now |a| ≥ |b|. */
  if (mag_b == 0u)
    return mag_a == 0u ? (a & b) : a;  /* −0 + −0 = −0, otherwise +0 */
  sign = a & F32_SIGN;
  /* Subnormals have exponent 1 and no implicit bit: value = m · 2^(e − 150). */
  e_a = max (int (mag_a >> 23), 1);
  e_b = max (int (mag_b >> 23), 1);
  sig_a = ((mag_a & 0x7fffffu) | (mag_a >= 0x800000u ? 0x800000u : 0u)) << 6;
  sig_b = ((mag_b & 0x7fffffu) | (mag_b >= 0x800000u ? 0x800000u : 0u)) << 6;
  /* Six guard bits and a sticky bit: enough for correct rounding of a sum,
   * and of a difference, which loses at most one leading bit when the
   * exponents differ by two or more, and nothing at all otherwise. */
  sig_b = f32_shift_right_jam (sig_b, uint (e_a - e_b));
  if ((a ^ b) < F32_SIGN)
    return f32_round_pack (sign, e_a, sig_a + sig_b);
  if (sig_a == sig_b)
    return 0u;  /* x − x = +0 under round to nearest */
  return f32_round_pack (sign, e_a, sig_a - sig_b);
}

uint
f32_sub (uint a, uint b)
{
  if (f32_is_nan (b))
    return f32_quiet (a, b);
  return f32_add (a, b ^ F32_SIGN);
}

uint
f32_mul (uint a, uint b)
{
  uint sign = (a ^ b) & F32_SIGN;
  uint mag_a = a & 0x7fffffffu, mag_b = b & 0x7fffffffu;
  uint m_a, m_b, hi, lo;
  int e_a, e_b;

  if (f32_is_nan (a) || f32_is_nan (b))
    return f32_quiet (a, b);
  if (mag_a == F32_INF || mag_b == F32_INF)
    return (mag_a == 0u || mag_b == 0u) ? F32_QNAN : sign | F32_INF;
  if (mag_a == 0u || mag_b == 0u)
    return sign;
  f32_unpack (mag_a, m_a, e_a);
  f32_unpack (mag_b, m_b, e_b);
  /* (m_a · 2^7) · (m_b · 2^8) ∈ [2^61, 2^63): the exact 64-bit product; its
   * high word with the low word as sticky is sig · 2^(e − 156) with
   * e = e_a + e_b − 127. */
  umulExtended (m_a << 7, m_b << 8, hi, lo);
  return f32_round_pack (sign, e_a + e_b - 127, hi | (lo != 0u ? 1u : 0u));
}
#endif

/* f32_div () and f32_div_by ()'s shared start: true with @result set where
 * an operand is special (NaN, infinite, zero); else false, both fractions
 * unpacked and m_a ≥ m_b (m_a doubled and e_a lowered where it was below),
 * so that the quotient's fraction has its leading bit in place. */
bool
f32_div_operands (uint a, uint b, out uint result, out uint m_a, out int e_a, out uint m_b,
                  out int e_b)
{
  uint sign = (a ^ b) & F32_SIGN;
  uint mag_a = a & 0x7fffffffu, mag_b = b & 0x7fffffffu;

  m_a = 0u;
  m_b = 0u;
  e_a = 0;
  e_b = 0;
  result = sign;
  if (f32_is_nan (a) || f32_is_nan (b))
    result = f32_quiet (a, b);
  else if (mag_a == F32_INF)
    result = mag_b == F32_INF ? F32_QNAN : sign | F32_INF;
  else if (mag_b == F32_INF)
    result = sign;
  else if (mag_b == 0u)
    result = mag_a == 0u ? F32_QNAN : sign | F32_INF;
  else if (mag_a == 0u)
    result = sign;
  else
    {
      f32_unpack (mag_a, m_a, e_a);
      f32_unpack (mag_b, m_b, e_b);
      if (m_a < m_b)
        {
          m_a <<= 1;
          e_a -= 1;
        }
      return false;
    }
  return true;
}

uint
f32_div (uint a, uint b)
{
  uint sign = (a ^ b) & F32_SIGN;
  uint m_a, m_b, q = 0u, r, special;
  int e_a, e_b;

  if (f32_div_operands (a, b, special, m_a, e_a, m_b, e_b))
    return special;
  /* Long division: q = floor(m_a · 2^30 / m_b) ∈ [2^30, 2^31), one bit per
   * step; the remainder stays below 2^25. */
  r = m_a;
  for (int i = 0; i < 31; i++)
    {
      q <<= 1;
      if (r >= m_b)
        {
          r -= m_b;
          q |= 1u;
        }
      r <<= 1;
    }
#ifndef DC_BREAK_F32
  q |= r != 0u ? 1u : 0u;  /* sticky: the quotient was not exact */
#endif
  /* a/b = q · 2^(e_a − e_b − 30) = q · 2^(e − 156). */
  return f32_round_pack (sign, e_a - e_b + 126, q);
}

/* f32_div_by ()'s reciprocal of b: floor(2^54 / m_b), m_b b's normalised
 * fraction (f32_unpack: [2^23, 2^24)), so in (2^30, 2^31]; 0 where b is
 * zero, infinite or NaN (f32_div_by () then never uses it). One long
 * division, for many quotients by the same b (a softmax row's sum). */
uint
f32_div_prep (uint b)
{
  uint mag = b & 0x7fffffffu, m, r, q;
  int e;

  if (mag == 0u || mag >= F32_INF)
    return 0u;
  f32_unpack (mag, m, e);
  /* 2^54 = 2^23 · 2^31: the leading quotient bit (floor(2^23 / m) ≤ 1),
   * then one bit per step; r < m < 2^24 throughout. */
  r = 1u << 23;
  q = r >= m ? 1u : 0u;
  r -= q * m;
  for (int i = 0; i < 31; i++)
    {
      r <<= 1;
      q <<= 1;
      if (r >= m)
        {
          r -= m;
          q |= 1u;
        }
    }
  return q;
}

/* a / b, the same bits as f32_div (a, b) for every a and b, with b's
 * reciprocal from f32_div_prep (b) instead of a long division per
 * quotient: q = floor(m_a · 2^30 / m_b) is estimated as
 * floor(m_a · inv / 2^24), at most 2 below q (inv is below 2^54 / m_b by
 * less than 1 and m_a < 2^25), then corrected on the exact remainder,
 * which lies in [0, 3 · m_b) ⊂ [0, 2^26) and so is exact in 32-bit
 * wrapping arithmetic. q and "remainder ≠ 0" are then f32_div's, and so is
 * the rounding (docs/VERIFICATION.md, "A row's quotients by one divisor").
 * DC_BREAK_F32 forgets the remainder here too. */
uint
f32_div_by (uint a, uint b, uint inv)
{
  uint sign = (a ^ b) & F32_SIGN;
  uint m_a, m_b, q, r, hi, lo, special;
  int e_a, e_b;

  if (f32_div_operands (a, b, special, m_a, e_a, m_b, e_b))
    return special;
  umulExtended (m_a, inv, hi, lo);
  q = (hi << 8) | (lo >> 24);
  r = (m_a << 30) - q * m_b;
  for (int i = 0; i < 2; i++)
    if (r >= m_b)
      {
        r -= m_b;
        q += 1u;
      }
#ifndef DC_BREAK_F32
  q |= r != 0u ? 1u : 0u;
#endif
  return f32_round_pack (sign, e_a - e_b + 126, q);
}

uint
f32_sqrt (uint a)
{
  uint m, rem = 0u, root = 0u;
  int e, k;

  if (f32_is_nan (a))
    return a | 0x400000u;
  if ((a & 0x7fffffffu) == 0u)
    return a;  /* √±0 = ±0 */
  if ((a & F32_SIGN) != 0u)
    return F32_QNAN;
  if (a == F32_INF)
    return a;
  f32_unpack (a, m, e);
  /* a = m · 2^k with k even, m ∈ [2^23, 2^25). */
  k = e - 150;
  if ((k & 1) != 0)
    {
      m <<= 1;
      k -= 1;
    }
  /* root = floor(√(m · 2^34)) ∈ [2^28, 2^30), digit by digit (two bits of
   * the radicand per step); rem ≤ 2·root keeps every value below 2^32. */
  for (int i = 0; i < 30; i++)
    {
      uint pair = i <= 12 ? (m >> uint (24 - 2 * i)) & 3u : 0u;
      uint trial;

      rem = (rem << 2) | pair;
      trial = (root << 2) | 1u;
      root <<= 1;
      if (rem >= trial)
        {
          rem -= trial;
          root |= 1u;
        }
    }
  /* √a = root · 2^(k/2 − 17) = sig · 2^(e − 156). */
  return f32_round_pack (0u, k / 2 + 139, root | (rem != 0u ? 1u : 0u));
}
