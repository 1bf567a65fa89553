/* dc-sampler.c: greedy and seeded, position-tied sampling (see the header).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-sampler.h"

#include "engine/dc-math.h"
#include "model/dc-rng.h"

/* Finite: neither NaN nor ±inf, tested on the bits so -ffast-math cannot fold it. */
static inline gboolean
is_finite (float x)
{
  union { float f; guint32 u; } v = { x };

  return (v.u & 0x7f800000u) != 0x7f800000u;
}

guint32
dc_sampler_pick (const float  *logits,
                 const guint8 *allowed,
                 gsize         n,
                 guint         temperature,
                 guint64       seed,
                 guint64       position,
                 float        *scratch)
{
  guint32 best = DC_SAMPLER_NONE;
  gsize n_live = 0;
  float t, u, cumulative = 0.0f;
  guint32 last = DC_SAMPLER_NONE;

  g_return_val_if_fail (logits != NULL, DC_SAMPLER_NONE);
  g_return_val_if_fail (n < DC_SAMPLER_NONE && n <= DC_MATH_MAX_N, DC_SAMPLER_NONE);
  g_return_val_if_fail (temperature <= DC_SAMPLER_MAX_TEMPERATURE, DC_SAMPLER_NONE);

  if (temperature == 0)
    {
      for (gsize i = 0; i < n; i++)
        if ((allowed == NULL || allowed[i]) && is_finite (logits[i])
            && (best == DC_SAMPLER_NONE || logits[i] > logits[best]))
          best = (guint32) i;
      return best;
    }

  g_return_val_if_fail (scratch != NULL, DC_SAMPLER_NONE);

  /* The live ids' logits, packed in id order, then scaled: one rounding each. */
  t = (float) temperature / 100.0f;
  for (gsize i = 0; i < n; i++)
    if ((allowed == NULL || allowed[i]) && is_finite (logits[i]))
      scratch[n_live++] = logits[i] / t;
  if (n_live == 0)
    return DC_SAMPLER_NONE;
  dc_math_softmax (scratch, scratch, n_live);

  u = dc_rng_uniform (seed, DC_RNG_STREAM_SAMPLE, position);
  for (gsize i = 0, k = 0; i < n; i++)
    {
      if (!((allowed == NULL || allowed[i]) && is_finite (logits[i])))
        continue;
      last = (guint32) i;
      cumulative = cumulative + scratch[k++];
      if (u < cumulative)
        return (guint32) i;
    }
  /* Rounding can leave the total just below u: the last live id then. */
  return last;
}
