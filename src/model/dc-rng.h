/* dc-rng.h: the counter-based generator behind initialization, batches and sampling.
 *
 * dc_rng_u64 (seed, stream, counter) is SplitMix64's finalizer applied to
 * seed + a per-stream offset + counter × the golden-ratio increment: a pure
 * function of its three inputs, so any value can be drawn in any order, on
 * any thread or device, and always be the same. Transforms to floats use only
 * integer arithmetic and one exact or correctly rounded conversion.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Streams keep the draws of different purposes independent. */
typedef enum
{
  DC_RNG_STREAM_INIT = 1,      /* counter = tensor index << 32 | element */
  DC_RNG_STREAM_BATCH = 2,     /* counter = step << 16 | row */
  DC_RNG_STREAM_SAMPLE = 3,    /* counter = token position */
} DcRngStream;

guint64 dc_rng_u64      (guint64 seed,
                         guint64 stream,
                         guint64 counter);
float   dc_rng_uniform  (guint64 seed,
                         guint64 stream,
                         guint64 counter);
float   dc_rng_normal   (guint64 seed,
                         guint64 stream,
                         guint64 counter);

G_END_DECLS
