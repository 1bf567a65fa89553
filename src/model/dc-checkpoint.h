/* dc-checkpoint.h: training checkpoints as PyTorch .pt files.
 *
 * The file holds one dict (docs/ARCHITECTURE.md, "Checkpoint format"):
 *   format "daisychain-checkpoint", format_version 1, tokenizer (identity),
 *   config {model_type, vocab_size, n_embd, n_positions, n_layer, n_head,
 *           activation_function}, training {batch, steps, lr_x1000, seed},
 *   step, model_state_dict (OrderedDict of Hugging Face GPT-2 names → f32
 *   tensors; lm_head.weight is tied to transformer.wte.weight and not stored),
 *   optimizer {type "adam", beta1, beta2, eps (0-d tensors), exp_avg,
 *              exp_avg_sq (OrderedDicts with the same names)}.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-gpt-model.h"

G_BEGIN_DECLS

#define DC_CHECKPOINT_FORMAT  "daisychain-checkpoint"
#define DC_CHECKPOINT_VERSION 1
/* Adam steps a checkpoint may claim; bounds the β^t recomputation on load. */
#define DC_CHECKPOINT_MAX_STEP 10000000

/* @done of @total units (tensors, then the write or the last check),
 * called on the thread that saves or loads. */
typedef void (*DcCheckpointProgress) (guint    done,
                                      guint    total,
                                      gpointer user_data);

GBytes     *dc_checkpoint_to_bytes   (const DcGptModel       *model,
                                      const DcTrainSettings  *settings,
                                      GError                **error);
gboolean    dc_checkpoint_save       (const DcGptModel       *model,
                                      const DcTrainSettings  *settings,
                                      const char             *path,
                                      GError                **error);
DcGptModel *dc_checkpoint_from_bytes (GBytes                 *bytes,
                                      DcTrainSettings        *settings,
                                      GError                **error);
DcGptModel *dc_checkpoint_load       (const char             *path,
                                      DcTrainSettings        *settings,
                                      GError                **error);
gboolean    dc_checkpoint_save_full  (const DcGptModel       *model,
                                      const DcTrainSettings  *settings,
                                      const char             *path,
                                      GCancellable           *cancellable,
                                      DcCheckpointProgress    progress,
                                      gpointer                user_data,
                                      GError                **error);
DcGptModel *dc_checkpoint_load_full  (const char             *path,
                                      DcTrainSettings        *settings,
                                      GCancellable           *cancellable,
                                      DcCheckpointProgress    progress,
                                      gpointer                user_data,
                                      GError                **error);

G_END_DECLS
