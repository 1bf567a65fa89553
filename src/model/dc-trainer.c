/* dc-trainer.c: one device's training loop body.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-trainer.h"

#include <string.h>

#include "dc-model-error.h"
#include "dc-rng.h"

struct _DcTrainer
{
  DcGptModel      *model;     /* owned */
  DcTrainSettings  settings;
  GBytes          *corpus;
  DcGptRun        *run;
  DcGemmBackend   *device;    /* owned (nullable) */
  guint8          *inputs;    /* (B, T) */
  guint8          *targets;   /* (B, T) */
  float           *grads;     /* n_params */
};

/**
 * dc_trainer_new:
 * @model: (transfer full): the state to train (fresh or loaded)
 * @corpus: the training bytes; at least T + 2 of them
 *
 * Returns: (transfer full): the trainer, or %NULL with @error set
 */
DcTrainer *
dc_trainer_new (DcGptModel             *model,
                const DcTrainSettings  *settings,
                GBytes                 *corpus,
                DcGptPrecision          precision,
                guint                   n_threads,
                GError                **error)
{
  DcTrainer *self;
  gsize bt;

  if (!dc_train_settings_validate (settings, error))
    {
      dc_gpt_model_free (model);
      return NULL;
    }
  if (g_bytes_get_size (corpus) < (gsize) model->config.seq + 2)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the training text has %" G_GSIZE_FORMAT " bytes; it needs at least %u",
                   g_bytes_get_size (corpus), model->config.seq + 2);
      dc_gpt_model_free (model);
      return NULL;
    }
  self = g_new0 (DcTrainer, 1);
  self->model = model;
  self->settings = *settings;
  self->corpus = g_bytes_ref (corpus);
  self->run = dc_gpt_run_new (&model->config, settings->batch, precision, n_threads);
  bt = (gsize) settings->batch * model->config.seq;
  self->inputs = g_new (guint8, bt);
  self->targets = g_new (guint8, bt);
  self->grads = g_new (float, model->n_params);
  return self;
}

void
dc_trainer_free (DcTrainer *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->model, dc_gpt_model_free);
  g_clear_pointer (&self->corpus, g_bytes_unref);
  g_clear_pointer (&self->run, dc_gpt_run_free);
  g_clear_pointer (&self->device, dc_gemm_backend_free);
  g_free (self->inputs);
  g_free (self->targets);
  g_free (self->grads);
  g_free (self);
}

/**
 * dc_trainer_set_device:
 * @device: (transfer full) (nullable): a GEMM backend (Vulkan) for the large
 *   products, or %NULL for the CPU alone
 * @offload_min: the smallest product (multiply-adds) sent to @device;
 *   DC_TRAINER_OFFLOAD_MIN is the default
 */
void
dc_trainer_set_device (DcTrainer     *self,
                       DcGemmBackend *device,
                       guint64        offload_min)
{
  dc_gpt_run_set_device (self->run, NULL, 0);
  g_clear_pointer (&self->device, dc_gemm_backend_free);
  self->device = device;
  dc_gpt_run_set_device (self->run, device, offload_min);
}

/**
 * dc_trainer_get_model:
 *
 * Returns: (transfer none): the state being trained
 */
DcGptModel *
dc_trainer_get_model (DcTrainer *self)
{
  return self->model;
}

void
dc_trainer_fill_batch (DcTrainer *self,
                       guint64    step,
                       guint8    *inputs,
                       guint8    *targets)
{
  gsize len = 0;
  const guint8 *text = g_bytes_get_data (self->corpus, &len);
  guint t = self->model->config.seq;

  for (guint r = 0; r < self->settings.batch; r++)
    {
      guint64 start = dc_rng_u64 (self->settings.seed, DC_RNG_STREAM_BATCH, (step << 16) | r)
                      % (len - t - 1);

      memcpy (inputs + (gsize) r * t, text + start, t);
      memcpy (targets + (gsize) r * t, text + start + 1, t);
    }
}

/**
 * dc_trainer_step:
 * @loss: (out) (optional): the batch's mean loss before the update
 *
 * One Adam step on the batch of the model's current step.
 */
gboolean
dc_trainer_step (DcTrainer  *self,
                 float      *loss,
                 GError    **error)
{
  DcGptModel *model = self->model;
  /* lr_x1000 / 1000: one correctly rounded division. */
  float lr = (float) self->settings.lr_x1000 / 1000.0f;

  dc_trainer_fill_batch (self, model->step, self->inputs, self->targets);
  if (!dc_gpt_run_forward (self->run, model->params, self->inputs, self->targets,
                           self->settings.batch, model->config.seq, loss, error)
      || !dc_gpt_run_backward (self->run, model->params, self->grads, error))
    {
      g_prefix_error (error, "step %" G_GUINT64_FORMAT ": ", model->step + 1);
      return FALSE;
    }
  dc_gpt_model_adam_step (model, self->grads, lr);
  return TRUE;
}
