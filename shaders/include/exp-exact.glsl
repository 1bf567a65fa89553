/* exp-exact.glsl: the engine's e^(x − c) (dc-math-vector.c's exp_shifted (),
 * dc-math-private.h's exp_reduce2 () and scale2 ()) operation for operation in
 * f32-exact.glsl's arithmetic, with the same constants as bit patterns. No
 * device transcendental is used. Include after f32-exact.glsl.
 *
 * Define DC_BREAK_EXP for the deliberately wrong twin (the Taylor polynomial
 * one term short).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */

/* dc-math-private.h's constants, as bits. */
const uint EXP_LN2_HI = 0x3f317200u;         /* 0x1.62e4p-1 */
const uint EXP_LN2_LO = 0x35bfbe8eu;         /* 0x1.7f7d1cp-20 */
const uint EXP_LOG2E = 0x3fb8aa3bu;          /* 0x1.715476p+0 */
const uint EXP_ROUND_MAGIC = 0x4b400000u;    /* 0x1.8p+23 */
const uint EXP_UNDERFLOW = 0xc2cff1b5u;      /* -0x1.9fe36ap+6 */
const uint EXP_INV_FACT2 = 0x3f000000u;      /* 0x1p-1 */
const uint EXP_INV_FACT3 = 0x3e2aaaabu;      /* 0x1.555556p-3 */
const uint EXP_INV_FACT4 = 0x3d2aaaabu;      /* 0x1.555556p-5 */
const uint EXP_INV_FACT5 = 0x3c088889u;      /* 0x1.111112p-7 */
const uint EXP_INV_FACT6 = 0x3ab60b61u;      /* 0x1.6c16c2p-10 */
const uint EXP_INV_FACT7 = 0x39500d01u;      /* 0x1.a01a02p-13 */
const uint EXP_INV_FACT8 = 0x37d00d01u;      /* 0x1.a01a02p-16 */
const uint F32_ONE = 0x3f800000u;

/* A non-NaN float as an integer of the same order (−0 = +0). */
int
f32_order (uint a)
{
  return (a & F32_SIGN) != 0u ? -int (a & 0x7fffffffu) : int (a);
}

/* An integer-valued float (|t| < 2^24) as an int, exactly. */
int
f32_to_int_exact (uint t)
{
  uint mag = t & 0x7fffffffu;
  int shift, v;

  if (mag < 0x3f800000u)
    return 0;
  shift = 150 - int (mag >> 23);
  v = int (((mag & 0x7fffffu) | 0x800000u) >> uint (shift));
  return (t & F32_SIGN) != 0u ? -v : v;
}

uint
pow2i (int k)
{
  return uint (k + 127) << 23;
}

/* scale2 (y, k): y · 2^k, one rounding at most. */
uint
scale2 (uint y, int k)
{
  if (k > 127)
    return f32_mul (f32_mul (y, pow2i (127)), pow2i (k - 127));
  if (k < -126)
    return f32_mul (f32_mul (y, pow2i (k + 125)), pow2i (-125));
  return f32_mul (y, pow2i (k));
}

/* exp_reduce2 (x, x_lo, &k). */
uint
exp_reduce2 (uint x, uint x_lo, out int k)
{
  uint t = f32_sub (f32_add (f32_mul (x, EXP_LOG2E), EXP_ROUND_MAGIC), EXP_ROUND_MAGIC);
  uint r = f32_add (f32_sub (f32_sub (x, f32_mul (t, EXP_LN2_HI)), f32_mul (t, EXP_LN2_LO)),
                    x_lo);
  uint q;

  k = f32_to_int_exact (t);
#ifdef DC_BREAK_EXP
  q = EXP_INV_FACT7;
#else
  q = f32_add (EXP_INV_FACT7, f32_mul (r, EXP_INV_FACT8));
#endif
  q = f32_add (EXP_INV_FACT6, f32_mul (r, q));
  q = f32_add (EXP_INV_FACT5, f32_mul (r, q));
  q = f32_add (EXP_INV_FACT4, f32_mul (r, q));
  q = f32_add (EXP_INV_FACT3, f32_mul (r, q));
  q = f32_add (EXP_INV_FACT2, f32_mul (r, q));
  return f32_add (r, f32_mul (f32_mul (r, r), q));
}

/* exp_shifted (x, c) = e^(x − c), c the row's maximum. */
uint
exp_shifted (uint x, uint c)
{
  uint minus_c = c ^ F32_SIGN;
  uint d = f32_add (x, minus_c);
  uint bb = f32_sub (d, x);
  uint d_lo = f32_add (f32_sub (x, f32_sub (d, bb)), f32_sub (minus_c, bb));
  uint p;
  int k;

  if (f32_is_nan (d))
    return d;
  if (f32_order (d) < f32_order (EXP_UNDERFLOW))
    return 0u;
  p = exp_reduce2 (d, d_lo, k);
  return scale2 (f32_add (F32_ONE, p), k);
}

