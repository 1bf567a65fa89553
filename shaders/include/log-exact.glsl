/* log-exact.glsl: the engine's natural logarithm (dc-math.c's dc_math_logf ()
 * and log_split ()) operation for operation in f32-exact.glsl's arithmetic,
 * with the same constants as bit patterns. Include after exp-exact.glsl
 * (it uses f32_order and EXP_LN2_HI/LO).

 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

const uint LOG_TWO_3 = 0x3f2aaaabu;        /* 0x1.555556p-1 */
const uint LOG_TWO_5 = 0x3ecccccdu;        /* 0x1.99999ap-2 */
const uint LOG_TWO_7 = 0x3e924925u;        /* 0x1.24924ap-2 */
const uint LOG_TWO_9 = 0x3e638e39u;        /* 0x1.c71c72p-3 */
const uint LOG_TWO_11 = 0x3e3a2e8cu;       /* 0x1.745d18p-3 */
const uint LOG_TWO_SQRT1_2 = 0x3fb504f3u;  /* 2 · 0x1.6a09e6p-1 */
const uint LOG_HALF = 0x3f000000u;
const uint LOG_TWO = 0x40000000u;
const uint LOG_P25 = 0x4c000000u;          /* 2^25 */

/* A small integer (|i| < 2^24) as a float, exactly. */
uint
f32_from_int (int i)
{
  uint m = uint (abs (i)), sign = i < 0 ? F32_SIGN : 0u;
  int msb;

  if (m == 0u)
    return 0u;
  msb = findMSB (m);
  return sign | (uint (msb + 127) << 23) | ((m << uint (23 - msb)) & 0x7fffffu);
}

/* x = 2^e · (1 + f), 1 + f in [√½, √2); f exact. x positive and finite. */
uint
log_split (uint x, out int e)
{
  uint m;

  e = 0;
  if (x < 0x00800000u)
    {
      x = f32_mul (x, LOG_P25);
      e = -25;
    }
  e += int (x >> 23) - 127;
  m = (x & 0x007fffffu) | 0x3f800000u;
  if (f32_order (m) > f32_order (LOG_TWO_SQRT1_2))
    {
      m = f32_mul (m, LOG_HALF);
      e += 1;
    }
  return f32_sub (m, 0x3f800000u);
}

/* dc_math_logf. */
uint
log_exact (uint x)
{
  uint f, s, z, r, hfsq, fe;
  int e;

  if (f32_is_nan (x))
    return x;
  if ((x & 0x7fffffffu) == 0u)
    return 0xff800000u;
  if ((x & F32_SIGN) != 0u)
    return F32_QNAN;
  if (x == F32_INF)
    return x;
  f = log_split (x, e);
  s = f32_div (f, f32_add (LOG_TWO, f));
  z = f32_mul (s, s);
  r = f32_add (LOG_TWO_9, f32_mul (z, LOG_TWO_11));
  r = f32_add (LOG_TWO_7, f32_mul (z, r));
  r = f32_add (LOG_TWO_5, f32_mul (z, r));
  r = f32_add (LOG_TWO_3, f32_mul (z, r));
  r = f32_mul (z, r);
  hfsq = f32_mul (LOG_HALF, f32_mul (f, f));
  fe = f32_from_int (e);
  return f32_sub (f32_mul (fe, EXP_LN2_HI),
                  f32_sub (f32_sub (hfsq, f32_add (f32_mul (s, f32_add (hfsq, r)),
                                                   f32_mul (fe, EXP_LN2_LO))),
                           f));
}
