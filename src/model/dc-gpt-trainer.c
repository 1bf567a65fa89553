/* dc-gpt-trainer.c: one device's training loop body.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-trainer.h"

#include <string.h>

#include "dc-gpt-vk-forward.h"
#include "dc-gpt-vk-step.h"
#include "dc-gpt-vk-forward-private.h"
#include "dc-model-error.h"
#include "engine/dc-parallel.h"

struct _DcGptTrainer
{
  DcGptModel         *model;     /* owned */
  DcTrainSettings     settings;
  DcGptRun           *run;
  DcGemmBackend      *device;    /* owned (nullable); NULL when shared */
  DcGptTrainerBatchFunc  batch_func;
  gpointer            batch_data;
  GDestroyNotify      batch_destroy;
  guint8             *inputs;    /* (B, T) */
  guint8             *targets;   /* (B, T) */
  float              *grads;     /* n_params */
  guint               n_threads; /* of the engine's pool, for the optimizer */
  DcGptVkStep        *vk_step;   /* owned (nullable): Adam resident on a Vulkan device */
  DcGptVkForward     *vk_pass;   /* owned (nullable): forward and backward resident there */
  DcGptPrecision      precision;
  gboolean            lazy_host; /* the host model refreshed on demand (set_lazy_host) */
};

/**
 * dc_gpt_trainer_new:
 * @model: (transfer full): the state to train (fresh or loaded)
 *
 * The trainer has no batches until dc_gpt_trainer_set_batch_func () gives it a
 * source of them (src/train/ does).
 *
 * Returns: (transfer full): the trainer, or %NULL with @error set
 */
DcGptTrainer *
dc_gpt_trainer_new (DcGptModel             *model,
                    const DcTrainSettings  *settings,
                    DcGptPrecision          precision,
                    guint                   n_threads,
                    GError                **error)
{
  DcGptTrainer *self;
  gsize bt;

  if (!dc_train_settings_validate (settings, error))
    {
      dc_gpt_model_free (model);
      return NULL;
    }
  self = g_new0 (DcGptTrainer, 1);
  self->model = model;
  self->settings = *settings;
  self->precision = precision;
  /* 0: the engine pool's process default (`--threads`, the settings). */
  self->n_threads = n_threads > 0 ? n_threads : dc_parallel_get_default_threads ();
  self->run = dc_gpt_run_new (&model->config, settings->batch, precision, self->n_threads);
  bt = (gsize) settings->batch * model->config.seq;
  self->inputs = g_new (guint8, bt);
  self->targets = g_new (guint8, bt);
  self->grads = g_new (float, model->n_params);
  return self;
}

void
dc_gpt_trainer_free (DcGptTrainer *self)
{
  if (self == NULL)
    return;
  if (self->batch_destroy != NULL)
    self->batch_destroy (self->batch_data);
  g_clear_pointer (&self->model, dc_gpt_model_free);
  g_clear_pointer (&self->run, dc_gpt_run_free);
  g_clear_pointer (&self->device, dc_gemm_backend_free);
  g_clear_pointer (&self->vk_step, dc_gpt_vk_step_free);
  g_clear_pointer (&self->vk_pass, dc_gpt_vk_forward_free);
  g_free (self->inputs);
  g_free (self->targets);
  g_free (self->grads);
  g_free (self);
}

/**
 * dc_gpt_trainer_set_batch_func:
 * @func: fills the batch of a step for a rank
 * @destroy: (nullable): frees @user_data with the trainer
 */
void
dc_gpt_trainer_set_batch_func (DcGptTrainer          *self,
                               DcGptTrainerBatchFunc  func,
                               gpointer               user_data,
                               GDestroyNotify         destroy)
{
  if (self->batch_destroy != NULL)
    self->batch_destroy (self->batch_data);
  self->batch_func = func;
  self->batch_data = user_data;
  self->batch_destroy = destroy;
}

/* A Vulkan backend whose GEMM passed its gates also gets the resident step
 * (its own gates decide; refused, Adam stays on the CPU, with the reason
 * logged). */
static void
try_resident_step (DcGptTrainer  *self,
                   DcGemmBackend *device)
{
  g_autoptr(GError) error = NULL;

  if (device == NULL || dc_gemm_backend_get_kind (device) != DC_BACKEND_VULKAN
      || self->vk_step != NULL)
    return;
  if (!dc_gpt_trainer_use_resident_step (self, &error))
    g_message ("Resident training step not used: %s", error->message);
}

/**
 * dc_gpt_trainer_use_resident_step:
 *
 * Moves the weights and Adam moments to the best Vulkan device and runs every
 * later Adam step there (dc-gpt-vk-step.h), with the CPU's bits. Fails, and
 * changes nothing, when there is no device or a kernel is refused by its gate.
 */
gboolean
dc_gpt_trainer_use_resident_step (DcGptTrainer  *self,
                                  GError       **error)
{
  g_autoptr(DcGptVkForward) pass = NULL;
  DcGptVkStep *step = NULL;

  if (self->vk_step != NULL)
    return TRUE;
  /* The forward and backward passes join it where their own gates pass (the
   * INT8 products only: the f32 reference stays on the CPU); then the step
   * shares their weights and gradients on the device. */
  if (self->precision == DC_GPT_PRECISION_INT8)
    {
      g_autoptr(GError) pass_error = NULL;

      pass = dc_gpt_vk_forward_new_training (&self->model->config, self->settings.batch,
                                             &pass_error);
      if (pass == NULL)
        g_message ("Resident forward and backward passes not used: %s", pass_error->message);
      else
        {
          g_autoptr(GError) shared_error = NULL;

          g_debug ("Resident forward and backward passes on %s",
                   dc_gpt_vk_forward_get_device_name (pass));
          step = dc_gpt_vk_step_new_shared (self->model, pass, &shared_error);
          /* Its own buffers then, the weights and gradients copied each
           * step (a gate's refusal says the same again, below). */
          if (step == NULL)
            g_message ("Resident training step not shared with the passes: %s",
                       shared_error->message);
        }
    }
  if (step == NULL)
    step = dc_gpt_vk_step_new (self->model, error);
  if (step == NULL)
    return FALSE;
  g_debug ("Resident training step on %s: %s%s", dc_gpt_vk_step_get_device_name (step),
           dc_gpt_vk_step_get_resident (step),
           dc_gpt_vk_step_get_shared (step) ? ", sharing the pass's weights and gradients" : "");
  dc_gpt_vk_step_set_lazy (step, self->lazy_host);
  self->vk_step = step;
  self->vk_pass = g_steal_pointer (&pass);
  return TRUE;
}

/* Whether the pass and the step share the weights and gradients on the
 * device (the weights then live there, not in the host model). */
static gboolean
shared_resident (DcGptTrainer *self)
{
  return self->vk_pass != NULL && self->vk_step != NULL
         && dc_gpt_vk_step_get_shared (self->vk_step);
}

/* Makes the host model current (weights and moments) and hands everything
 * to the CPU: a failed replay's fallback. The step shares the pass's
 * buffers, so they go together. */
static void
drop_resident (DcGptTrainer *self)
{
  g_autoptr(GError) error = NULL;

  if (self->vk_step != NULL
      && !dc_gpt_vk_step_sync_host (self->vk_step, self->model, TRUE, &error))
    g_warning ("Resident training step: the model's state could not be read back (%s) — "
               "training continues from the last state the host holds", error->message);
  g_clear_pointer (&self->vk_step, dc_gpt_vk_step_free);
  g_clear_pointer (&self->vk_pass, dc_gpt_vk_forward_free);
}

/**
 * dc_gpt_trainer_set_lazy_host:
 * @lazy: %TRUE: with a resident step, the host model's weights and Adam
 *   moments are read back only when dc_gpt_trainer_get_model () or
 *   dc_gpt_trainer_sync_host () asks; %FALSE (the default): after every
 *   step, for callers that keep the model's pointer across steps
 *
 * A lazy caller must fetch the model with dc_gpt_trainer_get_model () (or
 * call dc_gpt_trainer_sync_host ()) before each time it reads or writes
 * the model's arrays.
 */
void
dc_gpt_trainer_set_lazy_host (DcGptTrainer *self,
                              gboolean      lazy)
{
  self->lazy_host = lazy;
  if (self->vk_step != NULL)
    dc_gpt_vk_step_set_lazy (self->vk_step, lazy);
}

/**
 * dc_gpt_trainer_sync_host:
 * @moments: also the Adam moments (a checkpoint, the optimizer hash); the
 *   weights alone otherwise (the weight hash)
 *
 * Reads back from the device what of the host model is stale.
 */
gboolean
dc_gpt_trainer_sync_host (DcGptTrainer  *self,
                          gboolean       moments,
                          GError       **error)
{
  if (self->vk_step == NULL)
    return TRUE;
  return dc_gpt_vk_step_sync_host (self->vk_step, self->model, moments, error);
}

/**
 * dc_gpt_trainer_get_resident_pass:
 *
 * Returns: (transfer none) (nullable): the resident forward and backward
 *   passes in use, if any
 */
DcGptVkForward *
dc_gpt_trainer_get_resident_pass (DcGptTrainer *self)
{
  return self->vk_pass;
}

/**
 * dc_gpt_trainer_get_resident_step:
 *
 * Returns: (transfer none) (nullable): the resident step in use, if any
 */
DcGptVkStep *
dc_gpt_trainer_get_resident_step (DcGptTrainer *self)
{
  return self->vk_step;
}

/**
 * dc_gpt_trainer_set_device:
 * @device: (transfer full) (nullable): a GEMM backend (Vulkan) for the large
 *   products, or %NULL for the CPU alone
 * @offload_min: the smallest product (multiply-adds) sent to @device;
 *   DC_GPT_TRAINER_OFFLOAD_MIN is the default
 */
void
dc_gpt_trainer_set_device (DcGptTrainer  *self,
                           DcGemmBackend *device,
                           guint64        offload_min)
{
  dc_gpt_run_set_device (self->run, NULL, 0);
  g_clear_pointer (&self->device, dc_gemm_backend_free);
  self->device = device;
  dc_gpt_run_set_device (self->run, device, offload_min);
  try_resident_step (self, device);
}

/**
 * dc_gpt_trainer_set_shared_device:
 * @device: (transfer none) (nullable): a backend owned by someone else (the
 *   front end's DcContext), which must outlive the trainer and be used by
 *   no other thread while this trainer steps
 *
 * Like dc_gpt_trainer_set_device () without taking ownership.
 */
void
dc_gpt_trainer_set_shared_device (DcGptTrainer  *self,
                                  DcGemmBackend *device,
                                  guint64        offload_min)
{
  dc_gpt_run_set_device (self->run, NULL, 0);
  g_clear_pointer (&self->device, dc_gemm_backend_free);
  dc_gpt_run_set_device (self->run, device, offload_min);
  try_resident_step (self, device);
}

/**
 * dc_gpt_trainer_get_model:
 *
 * Returns: (transfer none): the state being trained
 */
DcGptModel *
dc_gpt_trainer_get_model (DcGptTrainer *self)
{
  g_autoptr(GError) error = NULL;

  /* Whoever asks may read any array (a checkpoint, both hashes) or write
   * them (the group's roster and repair): all current, and compared with
   * what they were given at the next step. */
  if (!dc_gpt_trainer_sync_host (self, TRUE, &error))
    {
      g_message ("Resident training step failed (%s) — Adam continues on the CPU",
                 error->message);
      g_clear_pointer (&self->vk_step, dc_gpt_vk_step_free);
      g_clear_pointer (&self->vk_pass, dc_gpt_vk_forward_free);
    }
  return self->model;
}

/**
 * dc_gpt_trainer_dup_hashes:
 * @weights: (out) (optional): dc_gpt_model_dup_hash () of the state
 * @optimizer: (out) (optional): dc_gpt_model_dup_optimizer_hash () of it
 *
 * The state's hashes without reading the state back where a resident step
 * holds it (a lazy host): its pieces are digested on the device and only
 * the digests leave it. Otherwise, or when that fails, the host model's
 * (read back first where stale).
 */
void
dc_gpt_trainer_dup_hashes (DcGptTrainer  *self,
                           char         **weights,
                           char         **optimizer)
{
  if (self->vk_step != NULL && dc_gpt_vk_step_can_hash (self->vk_step))
    {
      g_autoptr(GError) error = NULL;

      if (dc_gpt_vk_step_dup_hashes (self->vk_step, self->model, weights, optimizer, &error))
        return;
      /* The state is still there: read back, it is hashed on the host. */
      g_message ("The state hash on the device failed (%s) — computed on the CPU",
                 error->message);
    }
  dc_gpt_model_dup_hashes (dc_gpt_trainer_get_model (self), weights, optimizer);
}

/**
 * dc_gpt_trainer_get_run:
 *
 * Returns: (transfer none): the forward and backward workspace (for its
 *   time counters)
 */
DcGptRun *
dc_gpt_trainer_get_run (DcGptTrainer *self)
{
  return self->run;
}

const DcTrainSettings *
dc_gpt_trainer_get_settings (DcGptTrainer *self)
{
  return &self->settings;
}

/**
 * dc_gpt_trainer_compute_gradients:
 * @rank: this device's rank in the group (0-based)
 * @n_ranks: the group's size; 1 alone
 * @grads: (out caller-allocates) (array): n_params gradients of the mean loss
 *   of this rank's batch of the model's current step
 * @loss: (out) (optional): that batch's mean loss
 *
 * Forward and backward of one batch; the model is not changed.
 */
gboolean
dc_gpt_trainer_compute_gradients (DcGptTrainer  *self,
                                  guint       rank,
                                  guint       n_ranks,
                                  float      *grads,
                                  float      *loss,
                                  GError    **error)
{
  DcGptModel *model = self->model;

  g_return_val_if_fail (self->batch_func != NULL, FALSE);
  g_return_val_if_fail (rank < n_ranks, FALSE);

  if (!self->batch_func (self->batch_data, model->step, rank, n_ranks, self->inputs,
                         self->targets, error))
    {
      g_prefix_error (error, "step %" G_GUINT64_FORMAT ": ", model->step + 1);
      return FALSE;
    }
  if (self->vk_pass != NULL)
    {
      g_autoptr(GError) pass_error = NULL;
      gboolean shared = shared_resident (self);

      /* Shared: the weights are the step's, on the device (uploaded again
       * first where the host changed them). @grads NULL: they stay there
       * for dc_gpt_trainer_step ()'s Adam step. */
      if ((!shared || dc_gpt_vk_step_prepare (self->vk_step, model, &pass_error))
          && _dc_gpt_vk_forward_gradients_resident (self->vk_pass, shared ? NULL : model->params,
                                                    self->inputs, self->targets, grads, loss,
                                                    &pass_error))
        {
          dc_gpt_run_report_layers_done (self->run);
          return TRUE;
        }
      /* The CPU's passes give the same bits, and fail with their own
       * message where the device's found a value not finite. */
      g_message ("Resident forward and backward passes failed (%s) — they continue on the CPU",
                 pass_error->message);
      if (shared)
        drop_resident (self);
      else
        g_clear_pointer (&self->vk_pass, dc_gpt_vk_forward_free);
      if (grads == NULL)
        grads = self->grads;
    }
  if (!dc_gpt_run_forward (self->run, model->params, self->inputs, self->targets,
                              self->settings.batch, model->config.seq, loss, error)
      || !dc_gpt_run_backward (self->run, model->params, grads, error))
    {
      g_prefix_error (error, "step %" G_GUINT64_FORMAT ": ", model->step + 1);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_gpt_trainer_apply_gradients:
 * @grads: (array): n_params gradients, the group's combined ones
 *
 * The deterministic Adam step with the run's learning rate.
 */
void
dc_gpt_trainer_apply_gradients (DcGptTrainer   *self,
                                const float *grads)
{
  /* lr_x1000 / 1000: one correctly rounded division. */
  float lr = (float) self->settings.lr_x1000 / 1000.0f;

  if (self->vk_step != NULL)
    {
      g_autoptr(GError) error = NULL;

      if (dc_gpt_vk_step_apply_gradients (self->vk_step, self->model, grads, lr, &error))
        return;
      /* The model is untouched by a failed replay (read back first where
       * it was stale): this step and the later ones run on the CPU, with
       * the same bits. */
      g_message ("Resident training step failed (%s) — Adam continues on the CPU",
                 error->message);
      drop_resident (self);
      /* dc_gpt_trainer_step () recomputes them on the CPU. */
      if (grads == NULL)
        return;
    }
  dc_gpt_model_adam_step_threads (self->model, grads, lr, self->n_threads);
}

/**
 * dc_gpt_trainer_can_apply_into:
 *
 * Returns: whether dc_gpt_trainer_apply_gradients_into () may be called:
 *   the state is the host's (no resident step on a GPU keeps it)
 */
gboolean
dc_gpt_trainer_can_apply_into (DcGptTrainer *self)
{
  return self->vk_step == NULL;
}

/**
 * dc_gpt_trainer_apply_gradients_into:
 * @grads: (array): n_params gradients, the group's combined ones
 * @state: (transfer full): 3 × n_params floats from g_malloc (), not the model's
 *
 * dc_gpt_trainer_apply_gradients () with the new state written to @state,
 * which becomes the model's (dc_gpt_model_adam_step_into ()); only where
 * dc_gpt_trainer_can_apply_into () says so.
 *
 * Returns: (transfer full): the model's buffer before the step, holding the
 *   weights and moments before it
 */
float *
dc_gpt_trainer_apply_gradients_into (DcGptTrainer *self,
                                     const float  *grads,
                                     float        *state)
{
  float lr = (float) self->settings.lr_x1000 / 1000.0f;

  g_return_val_if_fail (dc_gpt_trainer_can_apply_into (self), NULL);
  g_return_val_if_fail (grads != NULL, NULL);

  return dc_gpt_model_adam_step_into (self->model, grads, lr, self->n_threads, state);
}

/**
 * dc_gpt_trainer_step:
 * @loss: (out) (optional): the batch's mean loss before the update
 *
 * One Adam step on the batch of the model's current step, alone (rank 0 of 1).
 */
gboolean
dc_gpt_trainer_step (DcGptTrainer  *self,
                     float      *loss,
                     GError    **error)
{
  /* Shared on the device: the gradients never leave it, only the loss. */
  gboolean shared = shared_resident (self);

  guint64 step = self->model->step;

  if (!dc_gpt_trainer_compute_gradients (self, 0, 1, shared ? NULL : self->grads, loss, error))
    return FALSE;
  /* A failed pass handed the step back to the CPU, which wrote self->grads. */
  shared = shared && shared_resident (self);
  dc_gpt_trainer_apply_gradients (self, shared ? NULL : self->grads);
  /* A failed Adam replay lost the device's gradients: the CPU does the
   * whole step again, from the state read back. */
  if (shared && self->model->step == step)
    {
      if (!dc_gpt_trainer_compute_gradients (self, 0, 1, self->grads, loss, error))
        return FALSE;
      dc_gpt_trainer_apply_gradients (self, self->grads);
    }
  return TRUE;
}

/**
 * dc_gpt_trainer_combine_gradients:
 * @grads: (array length=n_ranks): the gradients of rank 0, 1, …, n_ranks − 1,
 *   n floats each
 * @out: (out caller-allocates) (array): n floats; may be @grads[0]
 *
 * The group rule (docs/VERIFICATION.md, "Group step"): for each element i,
 * out[i] = ((…((g0[i] + g1[i]) + g2[i]) …) + g(n−1)[i]) / n_ranks, every
 * addition and the one division a correctly rounded f32 operation, ranks
 * always in this order. With one rank it is g0 exactly (x / 1 = x), so a
 * group of one is bit for bit the solo step.
 */
void
dc_gpt_trainer_combine_gradients (const float * const *grads,
                                  guint                n_ranks,
                                  gsize                n,
                                  float               *out)
{
  const float divisor = (float) n_ranks;

  g_return_if_fail (n_ranks > 0);

  for (gsize i = 0; i < n; i++)
    {
      float sum = grads[0][i];

      for (guint k = 1; k < n_ranks; k++)
        sum = sum + grads[k][i];
      out[i] = sum / divisor;
    }
}
