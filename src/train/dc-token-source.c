/* dc-token-source.c: the corpus and dataset token sources.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-token-source.h"

#include <string.h>

#include "dc-train-data.h"
#include "model/dc-model-error.h"
#include "model/dc-rng.h"

/* Both implementations hold their text in memory once it is read: the
 * corpus from the start, the dataset after dc_token_source_open () gathered
 * this device's share. They differ in where the text comes from. */
typedef struct
{
  DcTokenSource  parent;
  GBytes        *text;
} TextSource;

static gboolean
text_fill_batch (DcTokenSource  *source,
                 guint64         step,
                 guint           rank,
                 guint           n_ranks,
                 guint           batch,
                 guint           seq,
                 guint8         *inputs,
                 guint8         *targets,
                 GError        **error)
{
  TextSource *self = (TextSource *) source;
  gsize len = 0;
  const guint8 *text = g_bytes_get_data (self->text, &len);

  if (!dc_token_source_check (source, seq, error))
    return FALSE;
  if ((guint64) n_ranks * batch > DC_TOKEN_SOURCE_MAX_ROWS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "%u devices of batch %u make more than %u rows in a step",
                   n_ranks, batch, DC_TOKEN_SOURCE_MAX_ROWS);
      return FALSE;
    }

  for (guint r = 0; r < batch; r++)
    {
      /* The group's global row index: rank k's rows follow rank k − 1's. */
      guint64 row = (guint64) rank * batch + r;
      guint64 start = dc_rng_u64 (source->seed, DC_RNG_STREAM_BATCH, (step << 16) | row)
                      % (len - seq - 1);

      memcpy (inputs + (gsize) r * seq, text + start, seq);
      memcpy (targets + (gsize) r * seq, text + start + 1, seq);
    }
  return TRUE;
}

static void
text_finalize (DcTokenSource *source)
{
  TextSource *self = (TextSource *) source;

  g_clear_pointer (&self->text, g_bytes_unref);
}

static const DcTokenSourceClass corpus_class = { "corpus", text_fill_batch, text_finalize };
static const DcTokenSourceClass dataset_class = { "dataset", text_fill_batch, text_finalize };

static DcTokenSource *
text_source_new (const DcTokenSourceClass *klass,
                 GBytes                   *text,
                 const char               *description,
                 guint64                   seed)
{
  TextSource *self = g_new0 (TextSource, 1);

  self->parent.klass = klass;
  self->parent.description = g_strdup (description);
  self->parent.seed = seed;
  self->text = g_bytes_ref (text);
  return &self->parent;
}

/**
 * dc_token_source_new_corpus:
 * @text: the whole training text, each byte one token
 * @seed: the run's seed, which places every row
 *
 * Returns: (transfer full): a source of batches cut from @text
 */
DcTokenSource *
dc_token_source_new_corpus (GBytes     *text,
                            const char *description,
                            guint64     seed)
{
  g_return_val_if_fail (text != NULL, NULL);

  return text_source_new (&corpus_class, text, description, seed);
}

/**
 * dc_token_source_open:
 * @spec: "builtin", a local file, or a Hugging Face dataset id (owner/name[/folder])
 * @seed: the run's seed: it places the rows and orders a dataset's row groups
 *
 * The one place that turns a --data spec into a token source, and decides
 * the fallback: a dataset that cannot be reached gives the built-in corpus,
 * with dc_token_source_used_fallback () set. A dataset blocks on the network.
 *
 * Returns: (transfer full): the source, or %NULL with @error set
 */
DcTokenSource *
dc_token_source_open (const char    *spec,
                      guint64        seed,
                      GCancellable  *cancellable,
                      GError       **error)
{
  return dc_token_source_open_with_hub (spec, seed, NULL, cancellable, error);
}

/**
 * dc_token_source_open_with_hub:
 * @hub: (nullable): the client whose server and token a dataset is read with
 *
 * As dc_token_source_open(); a dataset refused with 401/403 is an error
 * (a token answers it), not a fallback.
 */
DcTokenSource *
dc_token_source_open_with_hub (const char    *spec,
                               guint64        seed,
                               DcHfClient    *hub,
                               GCancellable  *cancellable,
                               GError       **error)
{
  g_autoptr(GBytes) text = NULL;
  DcTokenSource *source;
  gboolean used_fallback = FALSE;
  gboolean is_dataset;

  g_return_val_if_fail (spec != NULL, NULL);

  text = dc_train_data_load_with_hub (spec, seed, hub, &used_fallback, cancellable, error);
  if (text == NULL)
    return NULL;
  /* dc_train_data_load read a file when one exists by that name. */
  is_dataset = !g_str_equal (spec, "builtin") && !g_file_test (spec, G_FILE_TEST_EXISTS);
  if (used_fallback)
    source = text_source_new (&corpus_class, text, "builtin", seed);
  else
    source = text_source_new (is_dataset ? &dataset_class : &corpus_class, text, spec, seed);
  source->used_fallback = used_fallback;
  return source;
}

void
dc_token_source_free (DcTokenSource *self)
{
  if (self == NULL)
    return;
  self->klass->finalize (self);
  g_free (self->description);
  g_free (self);
}

/**
 * dc_token_source_fill_batch:
 * @step: the 0-based step
 * @rank: this device's rank, below @n_ranks
 * @inputs: (out caller-allocates): (@batch, @seq) tokens
 * @targets: (out caller-allocates): (@batch, @seq) the token after each input
 *
 * The rule in this file's header: rank 0 of 1 is the solo batch.
 */
gboolean
dc_token_source_fill_batch (DcTokenSource  *self,
                            guint64         step,
                            guint           rank,
                            guint           n_ranks,
                            guint           batch,
                            guint           seq,
                            guint8         *inputs,
                            guint8         *targets,
                            GError        **error)
{
  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (rank < n_ranks, FALSE);

  return self->klass->fill_batch (self, step, rank, n_ranks, batch, seq, inputs, targets, error);
}

/**
 * dc_token_source_check:
 *
 * Returns: %FALSE with @error set when the text is too short for rows of @seq
 */
gboolean
dc_token_source_check (DcTokenSource  *self,
                       guint           seq,
                       GError        **error)
{
  TextSource *text = (TextSource *) self;
  gsize len = g_bytes_get_size (text->text);

  if (len < (gsize) seq + 2)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the training text has %" G_GSIZE_FORMAT " bytes; it needs at least %u",
                   len, seq + 2);
      return FALSE;
    }
  return TRUE;
}

gboolean
dc_token_source_used_fallback (DcTokenSource *self)
{
  return self->used_fallback;
}

typedef struct
{
  DcTokenSource *source;
  gboolean       owned;
  guint          batch;
  guint          seq;
} Feed;

static void
feed_free (gpointer data)
{
  Feed *feed = data;

  if (feed->owned)
    dc_token_source_free (feed->source);
  g_free (feed);
}

static gboolean
feed_batch_cb (gpointer   user_data,
               guint64    step,
               guint      rank,
               guint      n_ranks,
               guint8    *inputs,
               guint8    *targets,
               GError   **error)
{
  Feed *feed = user_data;

  return dc_token_source_fill_batch (feed->source, step, rank, n_ranks, feed->batch, feed->seq,
                                     inputs, targets, error);
}

static void
attach (DcTokenSource *self,
        DcGptTrainer  *trainer,
        gboolean       owned)
{
  Feed *feed = g_new0 (Feed, 1);

  feed->source = self;
  feed->owned = owned;
  feed->batch = dc_gpt_trainer_get_settings (trainer)->batch;
  feed->seq = dc_gpt_trainer_get_model (trainer)->config.seq;
  dc_gpt_trainer_set_batch_func (trainer, feed_batch_cb, feed, feed_free);
}

/**
 * dc_token_source_attach:
 * @self: (transfer none): must outlive @trainer
 *
 * Makes @self the source of @trainer's batches.
 */
void
dc_token_source_attach (DcTokenSource *self,
                        DcGptTrainer  *trainer)
{
  attach (self, trainer, FALSE);
}

/**
 * dc_token_source_new_trainer:
 * @model: (transfer full): the state to train
 * @corpus: the training text, at least T + 2 bytes
 *
 * A trainer fed from a corpus source of its own (tests and benchmarks).
 *
 * Returns: (transfer full): the trainer, or %NULL with @error set
 */
DcGptTrainer *
dc_token_source_new_trainer (DcGptModel             *model,
                             const DcTrainSettings  *settings,
                             GBytes                 *corpus,
                             DcGptPrecision          precision,
                             guint                   n_threads,
                             GError                **error)
{
  g_autoptr(DcTokenSource) source = dc_token_source_new_corpus (corpus, "corpus", settings->seed);
  DcGptTrainer *trainer;

  if (!dc_token_source_check (source, model->config.seq, error))
    {
      dc_gpt_model_free (model);
      return NULL;
    }
  trainer = dc_gpt_trainer_new (model, settings, precision, n_threads, error);
  if (trainer != NULL)
    attach (g_steal_pointer (&source), trainer, TRUE);
  return trainer;
}
