// gemm-epilogue.glsl: the GEMM epilogue of docs/VERIFICATION.md in integer
// operations only, so that no driver's float conversion, denormal mode or
// rounding can change a bit: the int32 accumulator is rounded to a 24-bit
// significand (nearest, ties to even), then the power-of-two scale moves the
// exponent; below the normal range gives a signed zero, above it a signed
// FLT_MAX. Returns the f32 bit pattern.
//
// SPDX-License-Identifier: GPL-3.0-or-later

uint dc_gemm_epilogue(int acc, int ea, int eb)
{
  if (acc == 0)
    return 0u;

  uint sign = acc < 0 ? 0x80000000u : 0u;
  uint u = uint(abs(acc));  // |acc| < 2^31: the rule bounds K
  int msb = findMSB(u);
  uint mant;

  if (msb <= 23) {
    mant = u << uint(23 - msb);
  } else {
    uint sh = uint(msb - 23);
    uint rem = u & ((1u << sh) - 1u);
    uint halfway = 1u << (sh - 1u);

    mant = u >> sh;
    if (rem > halfway || (rem == halfway && (mant & 1u) == 1u))
      mant += 1u;
    if (mant == 0x1000000u) {
      mant >>= 1u;
      msb += 1;
    }
  }

  int biased = msb + 127 + ea + eb;
  if (biased <= 0)
    return sign;
  if (biased >= 255)
    return sign | 0x7f7fffffu;
  return sign | (uint(biased) << 23u) | (mant & 0x7fffffu);
}
