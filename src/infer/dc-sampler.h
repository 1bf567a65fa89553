/* dc-sampler.h: the next token from one row of logits.
 *
 * Temperature is in hundredths (the Infer view's "Temperature ÷100"). At 0
 * the pick is greedy: the largest logit, the lowest id on a tie. Above 0 the
 * logits divided by T/100 go through dc_math_softmax, and the pick is the
 * first id (in id order) whose running sum of probabilities exceeds
 * u = dc_rng_uniform (seed, DC_RNG_STREAM_SAMPLE, position), position being
 * the token's index in the whole sequence, prompt included. Every step is a
 * correctly rounded f32 operation in a fixed order, so the same seed and
 * prompt give the same text on every device, and a token's draw does not
 * depend on what was drawn before it (docs/ARCHITECTURE.md, "Sampling").
 *
 * Pure functions; any thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* 10.0 is far past any useful temperature (the text is noise by 2.0); the
 * same ceiling as dc_generate's. */
#define DC_SAMPLER_MAX_TEMPERATURE 1000

/* Returned when no id may be drawn (all masked or non-finite). */
#define DC_SAMPLER_NONE G_MAXUINT32

/* LOGITS (n,) one row; ALLOWED (n,) nullable: 0 masks an id out. SCRATCH
 * holds n floats (unused at temperature 0). Non-finite logits are never picked. */
guint32 dc_sampler_pick (const float  *logits,
                         const guint8 *allowed,
                         gsize         n,
                         guint         temperature,
                         guint64       seed,
                         guint64       position,
                         float        *scratch);

G_END_DECLS
