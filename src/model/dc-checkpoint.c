/* dc-checkpoint.c: DcGptModel ⇄ .pt, with the checks an untrusted file needs.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-checkpoint.h"

#include <string.h>

#include "dc-model-error.h"
#include "dc-regular-file.h"
#include "dc-pt-reader.h"
#include "dc-pt-writer.h"

static void
key_int (DcPtWriter *w,
         const char *key,
         gint64      value)
{
  dc_pt_writer_string (w, key);
  dc_pt_writer_int (w, value);
}

static void
key_string (DcPtWriter *w,
            const char *key,
            const char *value)
{
  dc_pt_writer_string (w, key);
  dc_pt_writer_string (w, value);
}

static void
key_scalar (DcPtWriter *w,
            const char *key,
            float       value)
{
  dc_pt_writer_string (w, key);
  dc_pt_writer_tensor_f32 (w, &value, 0, NULL);
}

/* Progress and Cancel of one save or load: counted per tensor (and one
 * more for the last step: the write, or the finite check). */
typedef struct
{
  GCancellable         *cancellable;
  DcCheckpointProgress  func;
  gpointer              user_data;
  guint                 done;
  guint                 total;
} Progress;

static void
progress_init (Progress             *p,
               const DcGptConfig    *config,
               GCancellable         *cancellable,
               DcCheckpointProgress  func,
               gpointer              user_data)
{
  p->cancellable = cancellable;
  p->func = func;
  p->user_data = user_data;
  p->done = 0;
  /* Weights, first and second moments; then the last step. */
  p->total = 3 * dc_gpt_config_n_tensors (config) + 1;
}

/* One unit done; FALSE with @error set when cancelled. */
static gboolean
progress_step (Progress  *p,
               GError   **error)
{
  if (p == NULL)
    return TRUE;
  p->done++;
  if (p->func != NULL)
    p->func (p->done, p->total, p->user_data);
  return !g_cancellable_set_error_if_cancelled (p->cancellable, error);
}

static gboolean
write_tensors (DcPtWriter        *w,
               const DcGptModel  *model,
               const float       *base,
               Progress          *progress,
               GError           **error)
{
  dc_pt_writer_begin_dict (w, TRUE);
  for (guint t = 0; t < dc_gpt_config_n_tensors (&model->config); t++)
    {
      DcGptTensor info;

      dc_gpt_config_tensor (&model->config, t, &info);
      dc_pt_writer_string (w, info.name);
      dc_pt_writer_tensor_f32 (w, base + info.offset, info.n_dims, info.sizes);
      if (!progress_step (progress, error))
        return FALSE;
    }
  dc_pt_writer_end_dict (w);
  return TRUE;
}

static GBytes *
to_bytes (const DcGptModel       *model,
          const DcTrainSettings  *settings,
          Progress               *progress,
          GError                **error)
{
  g_autoptr(DcPtWriter) w = dc_pt_writer_new ();
  const DcGptConfig *c = &model->config;

  dc_pt_writer_begin_dict (w, FALSE);
  key_string (w, "format", DC_CHECKPOINT_FORMAT);
  key_int (w, "format_version", DC_CHECKPOINT_VERSION);
  key_string (w, "tokenizer", DC_GPT_TOKENIZER);

  dc_pt_writer_string (w, "config");
  dc_pt_writer_begin_dict (w, FALSE);
  key_string (w, "model_type", "gpt2");
  key_int (w, "vocab_size", c->vocab);
  key_int (w, "n_embd", c->width);
  key_int (w, "n_positions", c->seq);
  key_int (w, "n_layer", c->n_layer);
  key_int (w, "n_head", c->n_head);
  key_string (w, "activation_function", "relu");
  dc_pt_writer_end_dict (w);

  dc_pt_writer_string (w, "training");
  dc_pt_writer_begin_dict (w, FALSE);
  key_int (w, "batch", settings->batch);
  key_int (w, "steps", settings->steps);
  key_int (w, "lr_x1000", settings->lr_x1000);
  /* Seeds are unsigned 64-bit; the pickle holds their two's-complement value. */
  key_int (w, "seed", (gint64) settings->seed);
  dc_pt_writer_end_dict (w);

  key_int (w, "step", (gint64) model->step);
  dc_pt_writer_string (w, "model_state_dict");
  if (!write_tensors (w, model, model->params, progress, error))
    return NULL;

  dc_pt_writer_string (w, "optimizer");
  dc_pt_writer_begin_dict (w, FALSE);
  key_string (w, "type", "adam");
  key_scalar (w, "beta1", DC_ADAM_BETA1);
  key_scalar (w, "beta2", DC_ADAM_BETA2);
  key_scalar (w, "eps", DC_ADAM_EPS);
  dc_pt_writer_string (w, "exp_avg");
  if (!write_tensors (w, model, model->adam_m, progress, error))
    return NULL;
  dc_pt_writer_string (w, "exp_avg_sq");
  if (!write_tensors (w, model, model->adam_v, progress, error))
    return NULL;
  dc_pt_writer_end_dict (w);
  dc_pt_writer_end_dict (w);

  return dc_pt_writer_finish (w, "checkpoint", error);
}

/**
 * dc_checkpoint_to_bytes:
 *
 * Returns: (transfer full): the .pt file
 */
GBytes *
dc_checkpoint_to_bytes (const DcGptModel       *model,
                        const DcTrainSettings  *settings,
                        GError                **error)
{
  return to_bytes (model, settings, NULL, error);
}

gboolean
dc_checkpoint_save (const DcGptModel       *model,
                    const DcTrainSettings  *settings,
                    const char             *path,
                    GError                **error)
{
  return dc_checkpoint_save_full (model, settings, path, NULL, NULL, NULL, error);
}

/**
 * dc_checkpoint_save_full:
 * @cancellable: (nullable): checked after each tensor
 * @progress: (nullable) (scope call): called on this thread after each
 *   tensor and once the file is written
 *
 * dc_checkpoint_save() with progress and Cancel. Cancelled, nothing is
 * written and the file at @path is as it was.
 */
gboolean
dc_checkpoint_save_full (const DcGptModel       *model,
                         const DcTrainSettings  *settings,
                         const char             *path,
                         GCancellable           *cancellable,
                         DcCheckpointProgress    progress,
                         gpointer                user_data,
                         GError                **error)
{
  g_autoptr(GBytes) bytes = NULL;
  Progress p;

  progress_init (&p, &model->config, cancellable, progress, user_data);
  bytes = to_bytes (model, settings, &p, error);
  if (bytes == NULL)
    return FALSE;
  /* g_file_set_contents writes a temporary file and renames it: no torn checkpoints. */
  if (!g_file_set_contents (path, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes),
                            error))
    return FALSE;
  progress_step (&p, NULL);
  return TRUE;
}

static gboolean
get_int (const DcPtValue  *dict,
         const char       *key,
         gint64            min,
         gint64            max,
         gint64           *out,
         GError          **error)
{
  const DcPtValue *v = dc_pt_value_lookup (dict, key);

  if (v == NULL || v->type != DC_PT_VALUE_INT)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "not a DaisyChain checkpoint: “%s” is missing or not an integer", key);
      return FALSE;
    }
  if (v->i < min || v->i > max)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "checkpoint value “%s” = %" G_GINT64_FORMAT " is out of range", key, v->i);
      return FALSE;
    }
  *out = v->i;
  return TRUE;
}

static const char *
get_string (const DcPtValue *dict,
            const char      *key)
{
  const DcPtValue *v = dc_pt_value_lookup (dict, key);

  return v != NULL && v->type == DC_PT_VALUE_STRING ? v->s : NULL;
}

static gboolean
read_tensors (DcPtFile         *file,
              const DcPtValue  *dict,
              const char       *what,
              DcGptModel       *model,
              float            *base,
              Progress         *progress,
              GError          **error)
{
  if (dict == NULL || dict->type != DC_PT_VALUE_DICT)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "not a DaisyChain checkpoint: “%s” is missing", what);
      return FALSE;
    }
  if (dict->items->len / 2 != dc_gpt_config_n_tensors (&model->config))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS,
                   "bad dims in checkpoint: “%s” has %u tensors, the config needs %u", what,
                   dict->items->len / 2, dc_gpt_config_n_tensors (&model->config));
      return FALSE;
    }
  for (guint t = 0; t < dc_gpt_config_n_tensors (&model->config); t++)
    {
      DcGptTensor info;

      dc_gpt_config_tensor (&model->config, t, &info);
      if (!dc_pt_file_read_tensor (file, dc_pt_value_lookup (dict, info.name), info.name,
                                   info.n_dims, info.sizes, base + info.offset, error)
          || !progress_step (progress, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
check_finite (const DcGptModel  *model,
              GError           **error)
{
  for (gsize i = 0; i < 3 * model->n_params; i++)
    {
      /* Bits, not isfinite(): an exponent of all ones is NaN or infinity. */
      guint32 bits;

      memcpy (&bits, &model->params[i], sizeof bits);
      if ((bits & 0x7f800000u) == 0x7f800000u
          || (i >= 2 * model->n_params && (bits & 0x80000000u) && (bits & 0x7fffffffu)))
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                       "checkpoint holds a non-finite weight or a negative second moment");
          return FALSE;
        }
    }
  return TRUE;
}

/**
 * dc_checkpoint_from_bytes:
 * @settings: (out) (optional): the run's settings as saved
 *
 * Returns: (transfer full): the model, or %NULL with @error set
 */
static DcGptModel *from_bytes (GBytes                *bytes,
                               DcTrainSettings       *settings,
                               GCancellable          *cancellable,
                               DcCheckpointProgress   progress,
                               gpointer               user_data,
                               GError               **error);

DcGptModel *
dc_checkpoint_from_bytes (GBytes           *bytes,
                          DcTrainSettings  *settings,
                          GError          **error)
{
  return from_bytes (bytes, settings, NULL, NULL, NULL, error);
}

static DcGptModel *
from_bytes (GBytes                *bytes,
            DcTrainSettings       *settings,
            GCancellable          *cancellable,
            DcCheckpointProgress   progress,
            gpointer               user_data,
            GError               **error)
{
  Progress p;
  g_autoptr(DcPtFile) file = NULL;
  g_autoptr(DcGptModel) model = NULL;
  const DcPtValue *config, *training, *optimizer;
  const char *format, *tokenizer;
  gint64 version, vocab, width, seq, layers, heads, step, batch, steps, lr, seed;
  DcGptConfig c;
  DcTrainSettings s;

  file = dc_pt_file_new_from_bytes (bytes, error);
  if (file == NULL)
    return NULL;
  format = get_string (file->root, "format");
  if (format == NULL || !g_str_equal (format, DC_CHECKPOINT_FORMAT))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "not a DaisyChain checkpoint (no “format”: “%s”)", DC_CHECKPOINT_FORMAT);
      return NULL;
    }
  if (!get_int (file->root, "format_version", 1, G_MAXINT32, &version, error))
    return NULL;
  if (version != DC_CHECKPOINT_VERSION)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "checkpoint format version %" G_GINT64_FORMAT " is not supported (this build reads %d)",
                   version, DC_CHECKPOINT_VERSION);
      return NULL;
    }
  tokenizer = get_string (file->root, "tokenizer");
  config = dc_pt_value_lookup (file->root, "config");
  if (tokenizer == NULL || !g_str_equal (tokenizer, DC_GPT_TOKENIZER))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOKENIZER,
                   "tokenizer mismatch: the checkpoint uses “%s”, this build “%s”",
                   tokenizer != NULL ? tokenizer : "(none)", DC_GPT_TOKENIZER);
      return NULL;
    }
  if (!get_int (config, "vocab_size", 0, G_MAXINT32, &vocab, error))
    return NULL;
  if (!get_int (config, "n_embd", 0, G_MAXINT32, &width, error)
      || !get_int (config, "n_positions", 0, G_MAXINT32, &seq, error)
      || !get_int (config, "n_layer", 0, G_MAXINT32, &layers, error)
      || !get_int (config, "n_head", 0, G_MAXINT32, &heads, error))
    return NULL;
  c.vocab = vocab;
  c.width = width;
  c.seq = seq;
  c.n_layer = layers;
  c.n_head = heads;
  if (!dc_gpt_config_validate (&c, error))
    {
      if (g_error_matches (*error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS))
        g_prefix_error (error, "bad dims in checkpoint: ");
      return NULL;
    }
  training = dc_pt_value_lookup (file->root, "training");
  if (!get_int (training, "batch", DC_TRAIN_BATCH_MIN, DC_TRAIN_BATCH_MAX, &batch, error)
      || !get_int (training, "steps", DC_TRAIN_STEPS_MIN, DC_TRAIN_STEPS_MAX, &steps, error)
      || !get_int (training, "lr_x1000", DC_TRAIN_LR_MIN, DC_TRAIN_LR_MAX, &lr, error)
      || !get_int (training, "seed", G_MININT64, G_MAXINT64, &seed, error)
      || !get_int (file->root, "step", 0, DC_CHECKPOINT_MAX_STEP, &step, error))
    return NULL;
  s.batch = batch;
  s.steps = steps;
  s.lr_x1000 = lr;
  s.seed = (guint64) seed;

  model = dc_gpt_model_new (&c, error);
  if (model == NULL)
    return NULL;
  progress_init (&p, &c, cancellable, progress, user_data);
  optimizer = dc_pt_value_lookup (file->root, "optimizer");
  if (!read_tensors (file, dc_pt_value_lookup (file->root, "model_state_dict"),
                     "model_state_dict", model, model->params, &p, error)
      || !read_tensors (file, dc_pt_value_lookup (optimizer, "exp_avg"),
                        "optimizer.exp_avg", model, model->adam_m, &p, error)
      || !read_tensors (file, dc_pt_value_lookup (optimizer, "exp_avg_sq"),
                        "optimizer.exp_avg_sq", model, model->adam_v, &p, error)
      || !check_finite (model, error)
      || !progress_step (&p, error))
    return NULL;
  /* β^t exactly as the run computed it: one multiplication per step taken. */
  model->step = step;
  for (gint64 i = 0; i < step; i++)
    {
      model->beta1_pow = model->beta1_pow * DC_ADAM_BETA1;
      model->beta2_pow = model->beta2_pow * DC_ADAM_BETA2;
    }
  if (settings != NULL)
    *settings = s;
  return g_steal_pointer (&model);
}

DcGptModel *
dc_checkpoint_load (const char       *path,
                    DcTrainSettings  *settings,
                    GError          **error)
{
  return dc_checkpoint_load_full (path, settings, NULL, NULL, NULL, error);
}

/**
 * dc_checkpoint_load_full:
 * @cancellable: (nullable): checked after each tensor
 * @progress: (nullable) (scope call): called on this thread after each
 *   tensor and once every value is checked
 *
 * dc_checkpoint_load() with progress and Cancel.
 */
DcGptModel *
dc_checkpoint_load_full (const char            *path,
                         DcTrainSettings       *settings,
                         GCancellable          *cancellable,
                         DcCheckpointProgress   progress,
                         gpointer               user_data,
                         GError               **error)
{
  g_autoptr(GMappedFile) mapped = NULL;
  g_autoptr(GBytes) bytes = NULL;
  DcGptModel *model;

  mapped = dc_regular_file_map (path, error);
  if (mapped == NULL)
    return NULL;
  bytes = g_mapped_file_get_bytes (mapped);
  model = from_bytes (bytes, settings, cancellable, progress, user_data, error);
  if (model == NULL)
    g_prefix_error (error, "%s: ", path);
  return model;
}
