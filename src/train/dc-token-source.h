/* dc-token-source.h: where a training step's tokens come from.
 *
 * One interface, two implementations: a corpus held in memory (the built-in
 * corpus or a local file) and a Hugging Face dataset stream (this device's
 * seeded share of the row groups, gathered once). Both cut the batch of a
 * step by the same rule, so a run's batches depend only on (text, seed, step,
 * rank, group size):
 *
 *   row r (0 ≤ r < B) of rank k of n at step s starts at
 *   dc_rng_u64 (seed, DC_RNG_STREAM_BATCH, s << 16 | (k·B + r)) mod (len − T − 1)
 *
 * so the n ranks of batch B together see the rows one device with batch n·B
 * would (docs/VERIFICATION.md, "Batches"); rank 0 of 1 is the solo rule.
 *
 * The fallback from an unreachable dataset to the built-in corpus is decided
 * once, in dc_token_source_open (), and logged once (by the data layer's
 * stream); dc_token_source_used_fallback () tells the front ends.
 *
 * A token source is a plain struct: opening a dataset blocks on the network
 * (a worker thread's job); filling batches does not and is reentrant.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "data/dc-hf-client.h"

#include "model/dc-gpt-model.h"
#include "model/dc-gpt-trainer.h"

G_BEGIN_DECLS

/* The batch stream's counter gives a row 16 bits (s << 16 | row): the
 * group's rows k·B + r must stay below this. */
#define DC_TOKEN_SOURCE_MAX_ROWS 65536u

typedef struct _DcTokenSource DcTokenSource;

typedef struct
{
  const char *name;  /* "corpus", "dataset" */
  gboolean  (*fill_batch) (DcTokenSource  *self,
                           guint64         step,
                           guint           rank,
                           guint           n_ranks,
                           guint           batch,
                           guint           seq,
                           guint8         *inputs,
                           guint8         *targets,
                           GError        **error);
  void      (*finalize)   (DcTokenSource  *self);
} DcTokenSourceClass;

struct _DcTokenSource
{
  const DcTokenSourceClass *klass;
  char                     *description;   /* for logs: "builtin", a path, a dataset id */
  guint64                   seed;
  gboolean                  used_fallback;
};

DcTokenSource *dc_token_source_new_corpus    (GBytes          *text,
                                              const char      *description,
                                              guint64          seed);
DcTokenSource *dc_token_source_open          (const char      *spec,
                                              guint64          seed,
                                              GCancellable    *cancellable,
                                              GError         **error);
DcTokenSource *dc_token_source_open_with_hub (const char      *spec,
                                              guint64          seed,
                                              DcHfClient      *hub,
                                              GCancellable    *cancellable,
                                              GError         **error);
void           dc_token_source_free          (DcTokenSource   *self);
gboolean       dc_token_source_fill_batch    (DcTokenSource   *self,
                                              guint64          step,
                                              guint            rank,
                                              guint            n_ranks,
                                              guint            batch,
                                              guint            seq,
                                              guint8          *inputs,
                                              guint8          *targets,
                                              GError         **error);
gboolean       dc_token_source_check         (DcTokenSource   *self,
                                              guint            seq,
                                              GError         **error);
gboolean       dc_token_source_used_fallback (DcTokenSource   *self);
void           dc_token_source_attach        (DcTokenSource   *self,
                                              DcGptTrainer    *trainer);
DcGptTrainer  *dc_token_source_new_trainer   (DcGptModel             *model,
                                              const DcTrainSettings  *settings,
                                              GBytes                 *corpus,
                                              DcGptPrecision          precision,
                                              guint                   n_threads,
                                              GError                **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcTokenSource, dc_token_source_free)

G_END_DECLS
