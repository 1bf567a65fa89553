/* dc-trainer.h: training steps on one device: seeded batches from a byte
 * corpus, forward, backward, deterministic Adam, weight hash.
 *
 * The batch of step s is a pure function of (seed, s): row r starts at
 * dc_rng_u64 (seed, DC_RNG_STREAM_BATCH, s << 16 | r) mod (corpus − T), so a
 * resumed run sees exactly the batches the uninterrupted run would have.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-gpt.h"
#include "dc-gpt-model.h"

G_BEGIN_DECLS

typedef struct _DcTrainer DcTrainer;

/* Products smaller than this (multiply-adds) stay on the CPU even with a
 * device: a dispatch and its transfers cost more than they do. */
#define DC_TRAINER_OFFLOAD_MIN (G_GUINT64_CONSTANT (1) << 20)

DcTrainer  *dc_trainer_new           (DcGptModel             *model,
                                      const DcTrainSettings  *settings,
                                      GBytes                 *corpus,
                                      DcGptPrecision          precision,
                                      guint                   n_threads,
                                      GError                **error);
void        dc_trainer_free          (DcTrainer              *self);
void        dc_trainer_set_device    (DcTrainer              *self,
                                      DcGemmBackend          *device,
                                      guint64                 offload_min);
gboolean    dc_trainer_step          (DcTrainer              *self,
                                      float                  *loss,
                                      GError                **error);
DcGptModel *dc_trainer_get_model     (DcTrainer              *self);
void        dc_trainer_fill_batch    (DcTrainer              *self,
                                      guint64                 step,
                                      guint8                 *inputs,
                                      guint8                 *targets);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcTrainer, dc_trainer_free)

G_END_DECLS
