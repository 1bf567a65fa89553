/* dc-gemm-private.h: the epilogue inline, for the CPU paths' inner loops.
 * dc_gemm_epilogue() in dc-gemm.c is the public form of the same code.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <string.h>

#include "dc-gemm.h"

/* docs/VERIFICATION.md §4: one round-to-nearest-even conversion, then the
 * power-of-two scale on the bits; signed zero below the normal range, signed
 * FLT_MAX above it. */
static inline float
dc_gemm_epilogue_inline (gint32 acc,
                         gint32 ea,
                         gint32 eb)
{
  float f;
  guint32 bits, sign;
  gint64 biased;

  if (acc == 0)
    return 0.0f;

  f = (float) acc;  /* the one rounding (IEEE default: to nearest, ties to even) */
  memcpy (&bits, &f, sizeof bits);
  sign = bits & 0x80000000u;
  biased = (gint64) ((bits >> 23) & 0xffu) + ea + eb;
  if (biased <= 0)
    bits = sign;
  else if (biased >= 255)
    bits = sign | 0x7f7fffffu;
  else
    bits = (bits & 0x807fffffu) | ((guint32) biased << 23);
  memcpy (&f, &bits, sizeof f);
  return f;
}
