/* dc-gpt-model.h: the trainable state, weights plus Adam moments, and its
 * seeded initialization and hash.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-gpt-config.h"

G_BEGIN_DECLS

#define DC_TRAIN_BATCH_MIN   2
#define DC_TRAIN_BATCH_MAX   32
#define DC_TRAIN_STEPS_MIN   100
#define DC_TRAIN_STEPS_MAX   10000
#define DC_TRAIN_LR_MIN      5
#define DC_TRAIN_LR_MAX      50

/* The seeds' settings (width, sequence live in DcGptConfig). */
typedef struct
{
  guint   batch;      /* sequences per step and device */
  guint   steps;      /* the run's length */
  guint   lr_x1000;   /* Adam learning rate × 1000 (10 = 0.01) */
  guint64 seed;
} DcTrainSettings;

/* The state hash's pieces (docs/VERIFICATION.md, "State hash"): 64 KiB of
 * floats. Why this number: a piece's digest adds 32 bytes (0.05 %) to the
 * final, sequential pass and one padding block (0.1 %) to the work, while
 * GPT-2-small's arrays still give 7,600 pieces each to spread over threads
 * or a GPU's invocations and width 128's (about 1 M floats) 64 each. */
#define DC_GPT_HASH_PIECE_FLOATS 16384

/* Adam's constants, fixed for every run (docs/ARCHITECTURE.md). */
#define DC_ADAM_BETA1 0.9f
#define DC_ADAM_BETA2 0.999f
#define DC_ADAM_EPS   1e-8f

typedef struct
{
  DcGptConfig  config;
  gsize        n_params;
  float       *params;    /* n_params, laid out by dc_gpt_config_tensor () */
  float       *adam_m;    /* first moments, same layout */
  float       *adam_v;    /* second moments, same layout */
  guint64      step;      /* Adam steps taken */
  /* Running products β1^step and β2^step, by repeated multiplication (no pow). */
  float        beta1_pow;
  float        beta2_pow;
} DcGptModel;

void        dc_train_settings_init_default (DcTrainSettings    *self);
gboolean    dc_train_settings_validate     (const DcTrainSettings *self,
                                            GError            **error);

DcGptModel *dc_gpt_model_new               (const DcGptConfig  *config,
                                            GError            **error);
void        dc_gpt_model_free              (DcGptModel         *self);
void        dc_gpt_model_init_weights      (DcGptModel         *self,
                                            guint64             seed);
char       *dc_gpt_model_dup_hash          (const DcGptModel   *self);
char       *dc_gpt_model_dup_optimizer_hash (const DcGptModel  *self);
void        dc_gpt_model_dup_hashes        (const DcGptModel   *self,
                                            char              **weights,
                                            char              **optimizer);
void        dc_gpt_model_finish_hashes     (const DcGptModel   *self,
                                            const guint8       *digests_w,
                                            const guint8       *digests_mv,
                                            char              **weights,
                                            char              **optimizer);
gsize       dc_gpt_hash_n_pieces           (gsize               n);
void        dc_gpt_hash_pieces             (const float        *data,
                                            gsize               n,
                                            guint8             *digests);
float      *dc_gpt_model_tensor            (DcGptModel         *self,
                                            const char         *name);
void        dc_gpt_model_adam_step         (DcGptModel         *self,
                                            const float        *grads,
                                            float               lr);
void        dc_gpt_model_adam_step_threads (DcGptModel         *self,
                                            const float        *grads,
                                            float               lr,
                                            guint               n_threads);
float      *dc_gpt_model_adam_step_into    (DcGptModel         *self,
                                            const float        *grads,
                                            float               lr,
                                            guint               n_threads,
                                            float              *state);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGptModel, dc_gpt_model_free)

G_END_DECLS
