/* quant-exact.glsl: one element of dc_quant_pack () (docs/VERIFICATION.md
 * §2) in integers: the vector's exponent from its amax bit pattern, and
 * round-half-even(x · 2^−e) clamped to ±127 from x's bits.
 *
 * Define DC_BREAK_QUANT for the deliberately wrong twin (ties away from zero).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

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
#ifdef DC_BREAK_QUANT
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

