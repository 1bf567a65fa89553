/* dc-gpt-trainer.h: training steps on one device: forward, backward,
 * deterministic Adam, weight hash.
 *
 * The trainer does not choose its batches: a batch function (set by the
 * training layer, src/train/, from a token source) fills the inputs and
 * targets of a step for a rank of a group. A step is split in two so that a
 * group coordinator can combine gradients between them:
 * dc_gpt_trainer_compute_gradients () (no update) and
 * dc_gpt_trainer_apply_gradients () (the deterministic Adam step).
 * dc_gpt_trainer_step () is both, for rank 0 of 1.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-gpt.h"
#include "dc-gpt-model.h"
#include "dc-gpt-vk-forward.h"
#include "dc-gpt-vk-step.h"

G_BEGIN_DECLS

typedef struct _DcGptTrainer DcGptTrainer;

/* Products smaller than this (multiply-adds) stay on the CPU even with a
 * device: a dispatch and its transfers cost more than they do. */
#define DC_GPT_TRAINER_OFFLOAD_MIN (G_GUINT64_CONSTANT (1) << 20)

/**
 * DcGptTrainerBatchFunc:
 * @step: the 0-based step whose batch is wanted (the model's step before it)
 * @rank: which device of the group (0-based)
 * @n_ranks: how many devices the group has
 * @inputs: (out caller-allocates): (B, T) token ids
 * @targets: (out caller-allocates): (B, T) the next token of each input
 *
 * Returns: %FALSE with @error set when no batch can be made
 */
typedef gboolean (*DcGptTrainerBatchFunc) (gpointer   user_data,
                                        guint64    step,
                                        guint      rank,
                                        guint      n_ranks,
                                        guint8    *inputs,
                                        guint8    *targets,
                                        GError   **error);

DcGptTrainer  *dc_gpt_trainer_new               (DcGptModel             *model,
                                                 const DcTrainSettings  *settings,
                                                 DcGptPrecision          precision,
                                                 guint                   n_threads,
                                                 GError                **error);
void           dc_gpt_trainer_free              (DcGptTrainer           *self);
void           dc_gpt_trainer_set_batch_func    (DcGptTrainer           *self,
                                                 DcGptTrainerBatchFunc   func,
                                                 gpointer                user_data,
                                                 GDestroyNotify          destroy);
void           dc_gpt_trainer_set_device        (DcGptTrainer           *self,
                                                 DcGemmBackend          *device,
                                                 guint64                 offload_min);
void           dc_gpt_trainer_set_shared_device (DcGptTrainer           *self,
                                                 DcGemmBackend          *device,
                                                 guint64                 offload_min);
gboolean       dc_gpt_trainer_step              (DcGptTrainer           *self,
                                                 float                  *loss,
                                                 GError                **error);
gboolean       dc_gpt_trainer_compute_gradients (DcGptTrainer           *self,
                                                 guint                   rank,
                                                 guint                   n_ranks,
                                                 float                  *grads,
                                                 float                  *loss,
                                                 GError                **error);
void           dc_gpt_trainer_apply_gradients   (DcGptTrainer           *self,
                                                 const float            *grads);
gboolean       dc_gpt_trainer_can_apply_into    (DcGptTrainer           *self);
float         *dc_gpt_trainer_apply_gradients_into (DcGptTrainer        *self,
                                                 const float            *grads,
                                                 float                  *state);
gboolean       dc_gpt_trainer_use_resident_step (DcGptTrainer           *self,
                                                 GError                **error);
DcGptVkStep   *dc_gpt_trainer_get_resident_step (DcGptTrainer           *self);
void           dc_gpt_trainer_set_lazy_host     (DcGptTrainer           *self,
                                                 gboolean                lazy);
gboolean       dc_gpt_trainer_sync_host         (DcGptTrainer           *self,
                                                 gboolean                moments,
                                                 GError                **error);
DcGptVkForward *dc_gpt_trainer_get_resident_pass (DcGptTrainer          *self);
DcGptModel    *dc_gpt_trainer_get_model         (DcGptTrainer           *self);
void           dc_gpt_trainer_dup_hashes        (DcGptTrainer           *self,
                                                 char                  **weights,
                                                 char                  **optimizer);
DcGptRun      *dc_gpt_trainer_get_run           (DcGptTrainer           *self);
const DcTrainSettings *
               dc_gpt_trainer_get_settings      (DcGptTrainer           *self);

void           dc_gpt_trainer_combine_gradients (const float * const    *grads,
                                                 guint                   n_ranks,
                                                 gsize                   n,
                                                 float                  *out);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptTrainer, dc_gpt_trainer_free)

G_END_DECLS
