/* dc-train-plan.c: a validated plan and the session that runs it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-plan.h"

#include <string.h>
#include <unistd.h>

#include "engine/dc-parallel.h"
#include "model/dc-gpt-vk-forward.h"
#include "model/dc-model-error.h"

struct _DcTrainSession
{
  DcTokenSource  *source;    /* owned; feeds the trainer */
  DcGptTrainer   *trainer;   /* owned; holds the model */
  DcGptTrainer   *audit;     /* owned, made on first use: audits' recomputations */
  guint           n_threads;
  guint           n_ranks;
  gboolean        group_step;
  DcTrainWire     wire;
  float         **grads;     /* n_ranks buffers of n_params (group step only) */
};

/* The largest batch (up to DC_TRAIN_BATCH_MAX) whose resident training pass fits one
 * storage binding of any device (dc_gpt_vk_forward_fits () with the largest
 * range Vulkan can report): the pass keeps weights, gradients and every
 * activation in one buffer with 32-bit offsets. A device's own limit can be
 * lower; the pass then says so when it starts. 0 when not even batch 1. */
static guint
resident_max_batch (const DcGptConfig *config)
{
  guint lo = 0, hi = DC_TRAIN_BATCH_MAX;

  /* The pass grows with the batch: the largest that fits by bisection
   * (each probe lays the pass out without a device). */
  while (lo < hi)
    {
      guint mid = lo + (hi - lo + 1) / 2;
      DcGptVkForwardMemory memory;

      dc_gpt_vk_forward_measure (config, mid, TRUE, &memory);
      if (dc_gpt_vk_forward_fits (&memory, G_MAXUINT32, "a Vulkan device", NULL))
        lo = mid;
      else
        hi = mid - 1;
    }
  return lo;
}

/**
 * dc_train_plan_new:
 * @request: what to train; for a fresh model every field counts (0 for
 *   batch, steps or learning rate means the default)
 * @resume: (transfer full) (nullable): a model to continue (a loaded
 *   checkpoint); its size and settings win over @request's, except a
 *   non-zero @request steps, which extends or shortens the run. The plan
 *   takes it only when it returns one: on failure it stays the caller's
 * @resume_settings: (nullable): @resume's saved settings
 *
 * Returns: (transfer full): the plan, or %NULL with @error set
 */
DcTrainPlan *
dc_train_plan_new (const DcTrainingRequest  *request,
                   DcGptModel               *resume,
                   const DcTrainSettings    *resume_settings,
                   GError                  **error)
{
  g_autoptr(DcTrainPlan) self = g_new0 (DcTrainPlan, 1);
  DcGptModel *model = resume;

  g_return_val_if_fail (request != NULL, NULL);
  g_return_val_if_fail (resume == NULL || resume_settings != NULL, NULL);

  if (model != NULL)
    {
      self->settings = *resume_settings;
      self->config = model->config;
      if (request->steps > 0)
        self->settings.steps = request->steps;
    }
  else
    {
      dc_train_settings_init_default (&self->settings);
      if (request->batch > 0)
        self->settings.batch = request->batch;
      if (request->steps > 0)
        self->settings.steps = request->steps;
      if (request->lr_x1000 > 0)
        self->settings.lr_x1000 = request->lr_x1000;
      self->settings.seed = request->seed;
      dc_gpt_config_init_derived (&self->config, request->width, request->seq);
      if (request->n_layer > 0)
        self->config.n_layer = request->n_layer;
      if (request->n_head > 0)
        self->config.n_head = request->n_head;
    }
  if (!dc_train_settings_validate (&self->settings, error)
      || !dc_gpt_config_validate (&self->config, error))
    return NULL;
  /* The Advanced range only when asked for: the default sizes stay the
   * seeds', and a group (which never asks) stays inside the limits its
   * protocol was sized for. The message begins as the seeds' range's did. */
  if (!request->advanced && !dc_gpt_config_in_seed_range (&self->config))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "width %u, sequence %u, %u layers, %u heads "
                   "(width and sequence must be %d–%d, layers 1–%d, heads must divide the width); "
                   "larger sizes are the Advanced range (train --advanced)",
                   self->config.width, self->config.seq, self->config.n_layer,
                   self->config.n_head, DC_GPT_WIDTH_MIN, DC_GPT_WIDTH_MAX, DC_GPT_LAYERS_MAX);
      return NULL;
    }

  self->n_ranks = MAX (request->simulate_peers, 1);
  self->group_step = request->simulate_peers > 0;
  self->gradient_wire = request->gradient_wire;
  if (self->n_ranks > DC_TRAIN_SIMULATE_PEERS_MAX)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "a simulated group has at most %u devices, not %u",
                   DC_TRAIN_SIMULATE_PEERS_MAX, self->n_ranks);
      return NULL;
    }
  self->n_threads = request->n_threads > 0 ? request->n_threads : g_get_num_processors ();
  self->data = g_strdup (request->data != NULL ? request->data : "builtin");
  self->stop = request->stop_at > 0 ? MIN ((guint64) request->stop_at, self->settings.steps)
                                    : self->settings.steps;
  self->resume = model;
  dc_gpt_train_memory (&self->config, self->settings.batch, self->n_threads, &self->memory);
  if (self->group_step)
    {
      /* Each simulated rank holds its own gradient (dc_train_plan_prepare). */
      self->memory.grads_bytes *= self->n_ranks + 1;
      self->memory.total_bytes += self->memory.grads_bytes - sizeof (float) * self->memory.n_params;
    }
  if (request->group)
    {
      self->audit_bytes = dc_train_plan_audit_bytes (&self->memory);
      self->memory.total_bytes += self->audit_bytes;
    }
  /* With a Vulkan device the resident step adds its own buffers (issue 15). */
  dc_gpt_vk_train_memory (&self->config, self->settings.batch, &self->resident_device_bytes,
                          &self->resident_host_bytes);
  self->resident_max_batch = resident_max_batch (&self->config);
  self->available = dc_train_available_memory ();
  return g_steal_pointer (&self);
}

/**
 * dc_train_plan_audit_bytes:
 * @memory: what the run needs alone (dc_gpt_train_memory ())
 *
 * What a group's audits add to a run (docs/ARCHITECTURE.md, "Audits"): the
 * audit trainer (dc_train_session_get_audit_trainer (): one more model with
 * its Adam moments, its own activations and product scratch, its gradient
 * buffer), the recomputed gradient an audit hashes, the two snapshots
 * before the rollback one (weights and both moments: the audit of S is
 * drawn at the end of S + 1's exchange on the weights before S, and its
 * accusations are checked at the end of S + 2), and the audit's own copy of
 * those weights (the next step's compute rewrites the snapshots under it).
 *
 * Returns: bytes
 */
guint64
dc_train_plan_audit_bytes (const DcGptMemory *memory)
{
  return memory->params_bytes + memory->arena_bytes + memory->scratch_bytes
         + 2 * memory->grads_bytes
         + 2 * 3 * sizeof (float) * memory->n_params  /* the second and third snapshots */
         + sizeof (float) * memory->n_params;      /* the audit's copy of its weights */
}

/**
 * dc_train_available_memory:
 *
 * Returns: the memory this device has available now in bytes (Linux's
 *   MemAvailable, else the free physical pages), 0 when unknown
 */
guint64
dc_train_available_memory (void)
{
  g_autofree char *text = NULL;
  long pages = sysconf (_SC_AVPHYS_PAGES), page = sysconf (_SC_PAGESIZE);
  const char *line;

  /* /proc/meminfo is a few KiB; a longer one is not read further. */
  if (g_file_get_contents ("/proc/meminfo", &text, NULL, NULL)
      && (line = strstr (text, "MemAvailable:")) != NULL)
    {
      guint64 kib = g_ascii_strtoull (line + strlen ("MemAvailable:"), NULL, 10);

      if (kib > 0 && kib < G_MAXUINT64 / 1024)
        return kib * 1024;
    }
  if (pages > 0 && page > 0)
    return (guint64) pages * (guint64) page;
  return 0;
}

/**
 * dc_train_plan_check_memory:
 *
 * Whether this device can hold the run (plan->memory against
 * plan->available); the check before Start for sizes of the Advanced range.
 * An unknown amount available passes.
 */
gboolean
dc_train_plan_check_memory (const DcTrainPlan  *self,
                            GError            **error)
{
  g_autofree char *need = NULL, *have = NULL;

  if (self->available == 0 || self->memory.total_bytes <= self->available)
    return TRUE;
  need = g_format_size (self->memory.total_bytes);
  have = g_format_size (self->available);
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
               "training width %u, %u layers, sequence %u at batch %u needs %s of memory; "
               "this device has %s available",
               self->config.width, self->config.n_layer, self->config.seq, self->settings.batch,
               need, have);
  return FALSE;
}

/**
 * dc_train_plan_set_context:
 * @context: (nullable): whose backend the run uses (borrowed: @context must
 *   outlive the session, and nothing else may use its backend meanwhile);
 *   %NULL for the CPU alone
 */
void
dc_train_plan_set_context (DcTrainPlan *self,
                           DcContext   *context)
{
  self->backend = NULL;
  self->offload_min = 0;
  /* Taken here, on the main thread (the context makes its client on first
   * use); the worker only copies its server and token. */
  g_clear_object (&self->hub);
  if (context != NULL)
    self->hub = g_object_ref (dc_context_get_hf_client (context));
  /* The CPU backend is always there for small products; another one takes
   * the large products (all of them for cpu-scalar, which exists for checking). */
  if (context != NULL && dc_context_get_backend_kind (context) != DC_BACKEND_CPU)
    {
      self->backend = dc_context_get_backend (context);
      self->offload_min = dc_context_get_offload_min (context);
    }
}

void
dc_train_plan_free (DcTrainPlan *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->resume, dc_gpt_model_free);
  g_clear_object (&self->hub);
  g_free (self->data);
  g_free (self);
}

/**
 * dc_train_plan_prepare:
 *
 * Reads the data (a dataset falls back to the built-in corpus when it cannot
 * be reached), builds the model (seeded, or the plan's model to resume,
 * which the session then owns) and the trainer. Blocks: call it from a
 * worker thread where the data may be a dataset.
 *
 * Returns: (transfer full): the session, or %NULL with @error set
 */
DcTrainSession *
dc_train_plan_prepare (DcTrainPlan   *self,
                       GCancellable  *cancellable,
                       GError       **error)
{
  g_autoptr(DcTrainSession) session = g_new0 (DcTrainSession, 1);
  g_autoptr(DcGptModel) model = NULL;

  /* After the model's settings: a resumed run's seed places the rows. */
  session->source = dc_token_source_open_with_hub (self->data, self->settings.seed, self->hub,
                                                   cancellable, error);
  if (session->source == NULL || !dc_token_source_check (session->source, self->config.seq, error))
    return NULL;

  if (self->resume != NULL)
    model = g_steal_pointer (&self->resume);
  else
    {
      model = dc_gpt_model_new (&self->config, error);
      if (model == NULL)
        return NULL;
      dc_gpt_model_init_weights (model, self->settings.seed);
    }

  session->trainer = dc_gpt_trainer_new (g_steal_pointer (&model), &self->settings,
                                         DC_GPT_PRECISION_INT8, self->n_threads, error);
  if (session->trainer == NULL)
    return NULL;
  dc_token_source_attach (session->source, session->trainer);
  session->n_threads = self->n_threads;
  /* The engine's process default is 1 until a front end sets it: without
   * this, every pool call that takes it ran on one thread during a run,
   * among them the state hashes of every step (10 MB at width 128: 8 ms a
   * step on the H200 host's Xeon where four threads take 2) and the
   * resident step's host copies. One run trains at a time. */
  dc_parallel_set_default_threads (self->n_threads);
  if (self->backend != NULL)
    dc_gpt_trainer_set_shared_device (session->trainer, self->backend, self->offload_min);

  session->n_ranks = self->n_ranks;
  session->group_step = self->group_step;
  session->wire = self->gradient_wire;
  if (session->group_step)
    {
      gsize n_params = dc_gpt_trainer_get_model (session->trainer)->n_params;

      session->grads = g_new0 (float *, session->n_ranks);
      for (guint k = 0; k < session->n_ranks; k++)
        session->grads[k] = g_new (float, n_params);
    }
  return g_steal_pointer (&session);
}

static gboolean
diverged (DcTrainSession  *self,
          GError         **error)
{
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
               "a gradient value is not finite in %s (NaN, an infinity, or beyond its range): "
               "training diverged", dc_train_wire_to_string (self->wire));
  return FALSE;
}

/**
 * dc_train_session_round:
 * @values: (array length=n): a shard's values (a summed shard, or a
 *   contribution to one), rounded in place
 *
 * Rounds @values to the session's gradient wire (dc_train_wire_round ():
 * nothing for f32, each value for bf16, blocks from @values[0] for int8),
 * as every device of a group does with what it sends and what it uses.
 *
 * Returns: %FALSE with @error set when a value is not finite on the wire
 */
gboolean
dc_train_session_round (DcTrainSession  *self,
                        float           *values,
                        gsize            n,
                        GError         **error)
{
  return dc_train_wire_round_pooled (self->wire, values, n) || diverged (self, error);
}

/**
 * dc_train_session_round_gradient:
 * @grads: (array): a whole gradient (or a sum of whole gradients)
 * @n_ranks: the roster it is cut for (≥ 1)
 *
 * dc_train_session_round () of each of its shards for a roster of
 * @n_ranks (dc_train_wire_round_shards ()): what a device of that roster
 * sends as its contributions, and what the roster's summed shards are.
 *
 * Returns: %FALSE with @error set when a value is not finite on the wire
 */
gboolean
dc_train_session_round_gradient (DcTrainSession  *self,
                                 float           *grads,
                                 guint            n_ranks,
                                 GError         **error)
{
  DcGptModel *model = dc_gpt_trainer_get_model (self->trainer);
  DcTrainShardLayout layout;

  dc_train_shard_layout_init_run (&layout, &model->config, model->n_params);
  return dc_train_wire_round_shards (self->wire, &layout, n_ranks, grads)
         || diverged (self, error);
}

/**
 * dc_train_session_step:
 * @loss: (out) (optional): the step's loss: alone, the batch's mean loss;
 *   in a group, the mean of the ranks' losses, summed in rank order
 *
 * One step. Alone it is dc_gpt_trainer_step (). In a (simulated) group, of one
 * device too when simulate_peers was given (which proves the group rule
 * reduces to the solo step), every
 * rank k computes the gradient of its batch (rank k of n), the n gradients
 * are combined in the canonical order (dc_gpt_trainer_combine_gradients ()),
 * and the deterministic Adam step applies the result. With a bf16 or int8
 * wire each rank's gradient is rounded (shard by shard) before the sum and
 * the sum before the Adam step, as a real group's devices round what they
 * send and use.
 */
gboolean
dc_train_session_step (DcTrainSession  *self,
                       float           *loss,
                       GError         **error)
{
  DcGptModel *model;
  float loss_sum = 0.0f;

  /* Alone, the model is not fetched: with a lazy host (the CLI's `train`,
   * the app) that would read the state back every step. */
  if (!self->group_step)
    return dc_gpt_trainer_step (self->trainer, loss, error);
  model = dc_gpt_trainer_get_model (self->trainer);

  /* The seam for the group coordinator: a real group computes only its own
   * rank here and receives the others' gradients from the mesh. The ranks
   * run one after another on this thread: each uses every GEMM thread, and
   * the results cannot depend on the order they are computed in. */
  for (guint k = 0; k < self->n_ranks; k++)
    {
      float rank_loss = 0.0f;

      if (!dc_gpt_trainer_compute_gradients (self->trainer, k, self->n_ranks, self->grads[k],
                                             &rank_loss, error)
          || !dc_train_session_round_gradient (self, self->grads[k], self->n_ranks, error))
        return FALSE;
      loss_sum = loss_sum + rank_loss;
    }
  dc_gpt_trainer_combine_gradients ((const float * const *) self->grads, self->n_ranks,
                                    model->n_params, self->grads[0]);
  if (!dc_train_session_round_gradient (self, self->grads[0], self->n_ranks, error))
    return FALSE;
  dc_gpt_trainer_apply_gradients (self->trainer, self->grads[0]);
  if (loss != NULL)
    *loss = loss_sum / (float) self->n_ranks;
  return TRUE;
}

/**
 * dc_train_session_get_model:
 *
 * Returns: (transfer none): the model being trained
 */
DcGptModel *
dc_train_session_get_model (DcTrainSession *self)
{
  return dc_gpt_trainer_get_model (self->trainer);
}

/**
 * dc_train_session_get_audit_trainer:
 *
 * A second trainer on the same data, for recomputing another device's
 * gradient on a worker while the session's trainer takes the next step
 * (src/train/dc-train-group-audit.c): buffers of its own, a model of the
 * same size whose weights the caller sets, the CPU's kernels (the same
 * bits as any accepted backend: docs/VERIFICATION.md). Made on first use;
 * one caller at a time.
 *
 * Returns: (transfer none): the trainer, or %NULL with @error set
 */
DcGptTrainer *
dc_train_session_get_audit_trainer (DcTrainSession  *self,
                                    GError         **error)
{
  if (self->audit == NULL)
    {
      DcGptModel *main_model = dc_gpt_trainer_get_model (self->trainer);
      DcGptModel *model = dc_gpt_model_new (&main_model->config, error);

      if (model == NULL)
        return NULL;
      self->audit = dc_gpt_trainer_new (model, dc_gpt_trainer_get_settings (self->trainer),
                                        DC_GPT_PRECISION_INT8, self->n_threads, error);
      if (self->audit == NULL)
        return NULL;
      dc_token_source_attach (self->source, self->audit);
    }
  return self->audit;
}

/**
 * dc_train_session_get_trainer:
 *
 * Returns: (transfer none): the trainer
 */
DcGptTrainer *
dc_train_session_get_trainer (DcTrainSession *self)
{
  return self->trainer;
}

/* A dataset was unreachable and the built-in corpus is used instead. */
gboolean
dc_train_session_used_fallback (DcTrainSession *self)
{
  return dc_token_source_used_fallback (self->source);
}

guint
dc_train_session_get_n_ranks (DcTrainSession *self)
{
  return self->n_ranks;
}

void
dc_train_session_free (DcTrainSession *self)
{
  if (self == NULL)
    return;
  /* The trainer borrows the source: it goes first. */
  g_clear_pointer (&self->trainer, dc_gpt_trainer_free);
  g_clear_pointer (&self->audit, dc_gpt_trainer_free);
  g_clear_pointer (&self->source, dc_token_source_free);
  if (self->grads != NULL)
    for (guint k = 0; k < self->n_ranks; k++)
      g_free (self->grads[k]);
  g_free (self->grads);
  g_free (self);
}
