/* dc-gpt-model.c: weights, Adam state, initialization, hash, Adam update.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-model.h"

#include <string.h>

#include "engine/dc-math.h"
#include "engine/dc-parallel.h"
#include "dc-model-error.h"
#include "dc-rng.h"
#include "dc-sha256.h"

void
dc_train_settings_init_default (DcTrainSettings *self)
{
  self->batch = 8;
  self->steps = 300;
  self->lr_x1000 = 10;
  self->seed = 1;
}

gboolean
dc_train_settings_validate (const DcTrainSettings  *self,
                            GError                **error)
{
  if (self->batch < DC_TRAIN_BATCH_MIN || self->batch > DC_TRAIN_BATCH_MAX
      || self->steps < DC_TRAIN_STEPS_MIN || self->steps > DC_TRAIN_STEPS_MAX
      || self->lr_x1000 < DC_TRAIN_LR_MIN || self->lr_x1000 > DC_TRAIN_LR_MAX)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "batch %u, steps %u, learning rate ×1000 %u: batch must be %d–%d, "
                   "steps %d–%d, learning rate ×1000 %d–%d",
                   self->batch, self->steps, self->lr_x1000,
                   DC_TRAIN_BATCH_MIN, DC_TRAIN_BATCH_MAX, DC_TRAIN_STEPS_MIN,
                   DC_TRAIN_STEPS_MAX, DC_TRAIN_LR_MIN, DC_TRAIN_LR_MAX);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_gpt_model_new:
 *
 * Returns: (transfer full): a model with zeroed weights and moments, or
 *   %NULL when @config is out of range.
 */
DcGptModel *
dc_gpt_model_new (const DcGptConfig  *config,
                  GError            **error)
{
  DcGptModel *self;

  if (!dc_gpt_config_validate (config, error))
    return NULL;
  self = g_new0 (DcGptModel, 1);
  self->config = *config;
  self->n_params = dc_gpt_config_n_params (config);
  /* One allocation for the three arrays (STYLE.md §11). */
  self->params = g_new0 (float, 3 * self->n_params);
  self->adam_m = self->params + self->n_params;
  self->adam_v = self->adam_m + self->n_params;
  self->beta1_pow = 1.0f;
  self->beta2_pow = 1.0f;
  return self;
}

void
dc_gpt_model_free (DcGptModel *self)
{
  if (self == NULL)
    return;
  g_free (self->params);
  g_free (self);
}

/**
 * dc_gpt_model_init_weights:
 *
 * GPT-2's initialization: every weight matrix and embedding N(0, 0.02²),
 * the residual projections (attn.c_proj, mlp.c_proj) scaled by 1/√(2·layers),
 * biases 0, layer-norm gains 1. Normal values come from dc_rng_normal() with
 * counter = tensor index << 32 | element. Resets Adam.
 */
void
dc_gpt_model_init_weights (DcGptModel *self,
                           guint64     seed)
{
  float std_proj = 0.02f / __builtin_sqrtf ((float) (2 * self->config.n_layer));

  for (guint t = 0; t < dc_gpt_config_n_tensors (&self->config); t++)
    {
      DcGptTensor info;
      float *w;
      float std = 0.02f;

      dc_gpt_config_tensor (&self->config, t, &info);
      w = self->params + info.offset;
      if (g_str_has_suffix (info.name, "c_proj.weight"))
        std = std_proj;
      if (g_str_has_suffix (info.name, ".bias"))
        memset (w, 0, info.numel * sizeof (float));
      else if (strstr (info.name, "ln_") != NULL)
        for (gsize i = 0; i < info.numel; i++)
          w[i] = 1.0f;
      else
        for (gsize i = 0; i < info.numel; i++)
          w[i] = dc_rng_normal (seed, DC_RNG_STREAM_INIT, ((guint64) t << 32) | i) * std;
    }
  memset (self->adam_m, 0, 2 * self->n_params * sizeof (float));
  self->step = 0;
  self->beta1_pow = 1.0f;
  self->beta2_pow = 1.0f;
}

/* ---- The state hash (docs/VERIFICATION.md, "State hash") -----------------
 *
 * SHA-256 is sequential, so one hash of 3n floats runs on one core (about a
 * second a step at GPT-2-small's 1.5 GB) and not at all on a GPU. The state
 * hash is SHA-256 over the SHA-256 digests of consecutive pieces of
 * DC_GPT_HASH_PIECE_FLOATS floats of each array (the last piece shorter),
 * so that the pieces are digested in parallel, on the engine's pool or on
 * the device (shaders/resident-hash.comp), and only their digests are
 * combined in order. */

typedef struct
{
  const float *data;
  gsize        n;
  guint8      *digests;
} PieceJob;

/* Pieces 2j and 2j + 1 for j in [begin, end), as one pair (two chains
 * interleaved with the SHA extensions: dc_sha256_digest_pair ()); the last
 * piece alone when the count is odd. */
static void
hash_piece_chunk (gsize    begin,
                  gsize    end,
                  guint    worker,
                  gpointer data)
{
  PieceJob *job = data;
  const gsize n_pieces = dc_gpt_hash_n_pieces (job->n);

  for (gsize j = begin; j < end; j++)
    {
      const gsize k = 2 * j;
      const gsize first = k * DC_GPT_HASH_PIECE_FLOATS;
      const gsize len = MIN ((gsize) DC_GPT_HASH_PIECE_FLOATS, job->n - first);

      if (k + 1 < n_pieces)
        {
          const gsize second = first + DC_GPT_HASH_PIECE_FLOATS;
          const gsize len2 = MIN ((gsize) DC_GPT_HASH_PIECE_FLOATS, job->n - second);

          dc_sha256_digest_pair (job->data + first, len * sizeof (float), job->data + second,
                                 len2 * sizeof (float), job->digests + k * DC_SHA256_SIZE,
                                 job->digests + (k + 1) * DC_SHA256_SIZE);
        }
      else
        dc_sha256_digest (job->data + first, len * sizeof (float),
                          job->digests + k * DC_SHA256_SIZE);
    }
}

/**
 * dc_gpt_hash_n_pieces:
 * @n: floats in an array
 *
 * Returns: the pieces of an array of @n floats in the state hash
 */
gsize
dc_gpt_hash_n_pieces (gsize n)
{
  return (n + DC_GPT_HASH_PIECE_FLOATS - 1) / DC_GPT_HASH_PIECE_FLOATS;
}

/**
 * dc_gpt_hash_pieces:
 * @data: (array length=n): little-endian float32
 * @digests: (out caller-allocates): dc_gpt_hash_n_pieces (@n) × 32 bytes
 *
 * The SHA-256 digest of each piece of @data, on the engine's pool (the same
 * bytes at every thread count: each piece is digested alone).
 */
void
dc_gpt_hash_pieces (const float *data,
                    gsize        n,
                    guint8      *digests)
{
  PieceJob job = { data, n, digests };

  G_STATIC_ASSERT (G_BYTE_ORDER == G_LITTLE_ENDIAN);
  /* One pair a chunk: 128 KiB is already tens of microseconds of work. */
  dc_parallel_for (0, (dc_gpt_hash_n_pieces (n) + 1) / 2, 1, hash_piece_chunk, &job);
}

/**
 * dc_gpt_model_finish_hashes:
 * @digests_w: (nullable): the weights' piece digests (dc_gpt_hash_pieces ());
 *   %NULL when @weights is %NULL
 * @digests_mv: the first moments' piece digests, then the second moments'
 * @weights: (out) (optional): the weight hash
 * @optimizer: (out) (optional): the optimizer hash
 *
 * Combines the piece digests (from the host or a device) into the hashes
 * dc_gpt_model_dup_hash () and dc_gpt_model_dup_optimizer_hash () return;
 * @self gives the step and β^t.
 */
void
dc_gpt_model_finish_hashes (const DcGptModel  *self,
                            const guint8      *digests_w,
                            const guint8      *digests_mv,
                            char             **weights,
                            char             **optimizer)
{
  gsize bytes = dc_gpt_hash_n_pieces (self->n_params) * DC_SHA256_SIZE;

  if (weights != NULL)
    {
      g_autoptr(DcSha256) sum = dc_sha256_new ();

      g_return_if_fail (digests_w != NULL);
      dc_sha256_update (sum, digests_w, bytes);
      dc_sha256_update (sum, digests_mv, 2 * bytes);
      *weights = dc_sha256_dup_hex (sum, 16);
    }
  if (optimizer != NULL)
    {
      g_autoptr(DcSha256) sum = dc_sha256_new ();
      guint64 step = GUINT64_TO_LE (self->step);
      float pows[2] = { self->beta1_pow, self->beta2_pow };

      dc_sha256_update (sum, digests_mv, 2 * bytes);
      dc_sha256_update (sum, &step, sizeof step);
      dc_sha256_update (sum, pows, sizeof pows);
      *optimizer = dc_sha256_dup_hex (sum, 16);
    }
}

/**
 * dc_gpt_model_dup_hashes:
 * @weights: (out) (optional): dc_gpt_model_dup_hash ()
 * @optimizer: (out) (optional): dc_gpt_model_dup_optimizer_hash ()
 *
 * Both hashes for the price of one: the moments' pieces are digested once.
 */
void
dc_gpt_model_dup_hashes (const DcGptModel  *self,
                         char             **weights,
                         char             **optimizer)
{
  gsize bytes = dc_gpt_hash_n_pieces (self->n_params) * DC_SHA256_SIZE;
  g_autofree guint8 *digests = g_malloc (3 * bytes);

  if (weights != NULL)
    dc_gpt_hash_pieces (self->params, self->n_params, digests);
  dc_gpt_hash_pieces (self->adam_m, self->n_params, digests + bytes);
  dc_gpt_hash_pieces (self->adam_v, self->n_params, digests + 2 * bytes);
  dc_gpt_model_finish_hashes (self, weights != NULL ? digests : NULL, digests + bytes, weights,
                              optimizer);
}

/**
 * dc_gpt_model_dup_hash:
 *
 * Returns: (transfer full): the first 16 hex digits of the state hash of the
 *   weights and both Adam moments (little-endian float32): SHA-256 over the
 *   piece digests of the weights, then the first moments, then the second
 *   moments; two replicas with the same hash continue identically.
 */
char *
dc_gpt_model_dup_hash (const DcGptModel *self)
{
  char *hash = NULL;

  dc_gpt_model_dup_hashes (self, &hash, NULL);
  return hash;
}

/**
 * dc_gpt_model_dup_optimizer_hash:
 *
 * Returns: (transfer full): the first 16 hex digits of the hash of the
 *   optimizer state alone: SHA-256 over the piece digests of both Adam
 *   moments (little-endian float32), then the step (little-endian uint64)
 *   and β1^t, β2^t (float32). Next to the weight hash it tells a diverged
 *   optimizer from diverged weights.
 */
char *
dc_gpt_model_dup_optimizer_hash (const DcGptModel *self)
{
  char *hash = NULL;

  dc_gpt_model_dup_hashes (self, NULL, &hash);
  return hash;
}

/**
 * dc_gpt_model_tensor:
 *
 * Returns: (transfer none) (nullable): the weights of tensor @name
 */
float *
dc_gpt_model_tensor (DcGptModel *self,
                     const char *name)
{
  for (guint t = 0; t < dc_gpt_config_n_tensors (&self->config); t++)
    {
      DcGptTensor info;

      dc_gpt_config_tensor (&self->config, t, &info);
      if (g_str_equal (info.name, name))
        return self->params + info.offset;
    }
  return NULL;
}

/**
 * dc_gpt_model_adam_step:
 * @grads: (array): n_params gradients of the mean loss
 * @lr: the learning rate
 *
 * Deterministic Adam (Kingma & Ba), element by element in this exact order,
 * each line one correctly rounded f32 operation:
 *   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g·g
 *   m̂ = m / (1 − β1^t);   v̂ = v / (1 − β2^t)
 *   w = w − lr · m̂ / (√v̂ + ε)
 * β^t is kept as a running product (one multiplication per step), never pow().
 * No weight decay, no clipping. Elements are independent, so the order across
 * elements cannot change a result.
 */
typedef struct
{
  const float *grads;
  float        lr, bc1, bc2;
  /* The state before the step (read) and after it (written): the same
   * arrays in place, another buffer's for dc_gpt_model_adam_step_into (). */
  const float *params, *adam_m, *adam_v;
  float       *out_params, *out_m, *out_v;
} AdamJob;

/* Elements [i0, i1) of the step; the line order of the doc comment. */
static void
adam_chunk (gsize    i0,
            gsize    i1,
            guint    worker,
            gpointer data)
{
  const AdamJob *job = data;

  dc_math_adam_elements (job->params + i0, job->grads + i0, job->adam_m + i0, job->adam_v + i0,
                         job->out_params + i0, job->out_m + i0, job->out_v + i0, i1 - i0,
                         job->lr, job->bc1, job->bc2, DC_ADAM_BETA1, DC_ADAM_BETA2, DC_ADAM_EPS);
}

/* Elements per chunk of the parallel step: 64 KiB of each of the four
 * arrays, far more work than a claim costs. */
#define ADAM_CHUNK 16384

void
dc_gpt_model_adam_step (DcGptModel  *self,
                        const float *grads,
                        float        lr)
{
  dc_gpt_model_adam_step_threads (self, grads, lr, 1);
}

/* The step from the model's arrays into @out_params, @out_m and @out_v:
 * the model's own (in place) or another buffer's. */
static void
adam_step (DcGptModel  *self,
           const float *grads,
           float        lr,
           guint        n_threads,
           float       *out_params,
           float       *out_m,
           float       *out_v)
{
  const float b1 = DC_ADAM_BETA1, b2 = DC_ADAM_BETA2;
  AdamJob job = { grads, lr, 0.0f, 0.0f, self->params, self->adam_m, self->adam_v,
                  out_params, out_m, out_v };

  self->step++;
  self->beta1_pow = self->beta1_pow * b1;
  self->beta2_pow = self->beta2_pow * b2;
  job.bc1 = 1.0f - self->beta1_pow;
  job.bc2 = 1.0f - self->beta2_pow;
  dc_parallel_for (MAX (n_threads, 1), self->n_params, ADAM_CHUNK, adam_chunk, &job);
}

/**
 * dc_gpt_model_adam_step_threads:
 * @n_threads: threads of the engine's pool to use; results do not depend on it
 *
 * dc_gpt_model_adam_step () with the elements spread over the engine's pool.
 */
void
dc_gpt_model_adam_step_threads (DcGptModel  *self,
                                const float *grads,
                                float        lr,
                                guint        n_threads)
{
  /* In place: the moments need not follow the weights in one buffer (the
   * resident step's gate builds a model of three arrays). */
  adam_step (self, grads, lr, n_threads, self->params, self->adam_m, self->adam_v);
}

/**
 * dc_gpt_model_adam_step_into:
 * @state: (transfer full): a buffer of 3 × n_params floats from g_malloc (),
 *   not the model's
 *
 * dc_gpt_model_adam_step_threads () with the new weights and moments
 * written to @state, which becomes the model's (the same bits: only where
 * they are written differs). A caller that keeps the state before every
 * step (the group's rollback and audits) gets it without copying it.
 *
 * Returns: (transfer full): the model's buffer before the step, which still
 *   holds the weights and both moments before it (g_free () it)
 */
float *
dc_gpt_model_adam_step_into (DcGptModel  *self,
                             const float *grads,
                             float        lr,
                             guint        n_threads,
                             float       *state)
{
  float *before = self->params;

  g_return_val_if_fail (state != NULL && state != self->params, NULL);
  /* One buffer of three arrays, as dc_gpt_model_new () makes it. */
  g_return_val_if_fail (self->adam_m == self->params + self->n_params
                        && self->adam_v == self->adam_m + self->n_params, NULL);

  adam_step (self, grads, lr, n_threads, state, state + self->n_params,
             state + 2 * self->n_params);
  self->params = state;
  self->adam_m = state + self->n_params;
  self->adam_v = state + 2 * self->n_params;
  return before;
}
