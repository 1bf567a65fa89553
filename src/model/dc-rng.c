/* dc-rng.c: SplitMix64 as a counter-based generator (Steele, Lea, Flood 2014).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-rng.h"

#define GOLDEN G_GUINT64_CONSTANT (0x9e3779b97f4a7c15)

static guint64
mix (guint64 z)
{
  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

guint64
dc_rng_u64 (guint64 seed,
            guint64 stream,
            guint64 counter)
{
  /* The stream is mixed on its own so that nearby (stream, counter) pairs
   * never share a state. */
  return mix (seed + mix (stream * GOLDEN) + (counter + 1) * GOLDEN);
}

/**
 * dc_rng_uniform:
 *
 * Returns: k · 2^-24 for a uniform 24-bit k, in [0, 1), exactly representable.
 */
float
dc_rng_uniform (guint64 seed,
                guint64 stream,
                guint64 counter)
{
  return (float) (dc_rng_u64 (seed, stream, counter) >> 40) * 0x1p-24f;
}

/**
 * dc_rng_normal:
 *
 * An approximately standard normal value by the Irwin–Hall sum of twelve
 * uniform 24-bit integers (mean 6·2^24, variance 2^48): the sum is exact in
 * integers, and the one conversion to float is correctly rounded, so no
 * transcendental function is needed. Values lie in (-6, 6).
 */
float
dc_rng_normal (guint64 seed,
               guint64 stream,
               guint64 counter)
{
  guint64 base = dc_rng_u64 (seed, stream, counter);
  gint64 sum = 0;

  for (guint i = 0; i < 12; i++)
    sum += (gint64) (dc_rng_u64 (base, stream, i) >> 40);
  sum -= G_GINT64_CONSTANT (6) << 24;
  return (float) sum * 0x1p-24f;
}
