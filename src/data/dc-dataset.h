/* dc-dataset.h: a Hugging Face dataset streamed as training text.
 *
 * A dataset is a repo id plus an optional folder (config/split), written
 * "owner/name[/folder…]": "HuggingFaceFW/fineweb-edu/sample/10BT" is the
 * default. Its parquet files are listed through the Hub's tree API. Each
 * device reads a seeded random sequence of row groups, disjoint between the
 * devices of a group: every device derives the same permutation from the
 * group seed and keeps the positions p with p mod world == rank.
 *
 * When the dataset cannot be reached, the stream logs "dataset unreachable —
 * using built-in corpus" and goes on with the built-in corpus.
 *
 * A DcTextStream blocks; use it from a worker thread (the trainer's).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-hf-client.h"

G_BEGIN_DECLS

#define DC_DATASET_DEFAULT "HuggingFaceFW/fineweb-edu/sample/10BT"
#define DC_DATASET_UNREACHABLE_MESSAGE "dataset unreachable — using built-in corpus"

typedef struct
{
  char *repo;      /* "owner/name" */
  char *folder;    /* "" or a path inside the repo */
  char *revision;  /* "main" unless given as "owner/name@rev/…" */
} DcDatasetSpec;

typedef struct
{
  char   *path;    /* inside the repo */
  guint64 size;
} DcDatasetFile;

DcDatasetSpec *dc_dataset_spec_parse   (const char           *text,
                                        GError              **error);
DcDatasetSpec *dc_dataset_spec_copy    (const DcDatasetSpec  *spec);
void           dc_dataset_spec_free    (DcDatasetSpec        *spec);
void           dc_dataset_file_free    (DcDatasetFile        *file);
GPtrArray     *dc_dataset_list_files   (DcHfClient           *client,
                                        const DcDatasetSpec  *spec,
                                        GCancellable         *cancellable,
                                        GError              **error);
void           dc_dataset_plan         (guint64               seed,
                                        guint64               stream_id,
                                        guint                 n_items,
                                        guint                 rank,
                                        guint                 world,
                                        GArray               *out);

typedef struct _DcTextStream DcTextStream;

DcTextStream  *dc_text_stream_new      (DcHfClient           *client,
                                        const char           *dataset,
                                        const char           *column,
                                        guint                 rank,
                                        guint                 world,
                                        guint64               seed);
DcTextStream  *dc_text_stream_new_for_spec (DcHfClient       *client,
                                        const DcDatasetSpec  *spec,
                                        const char           *column,
                                        guint                 rank,
                                        guint                 world,
                                        guint64               seed);
DcTextStream  *dc_text_stream_new_builtin (guint              rank,
                                        guint                 world);
void           dc_text_stream_free     (DcTextStream         *stream);
gboolean       dc_text_stream_is_builtin (DcTextStream       *stream);
guint          dc_text_stream_get_epoch (DcTextStream       *stream);
GBytes        *dc_text_stream_next     (DcTextStream         *stream,
                                        GCancellable         *cancellable,
                                        GError              **error);
gboolean       dc_text_stream_fill_batch (DcTextStream       *stream,
                                        guint                 batch,
                                        guint                 seq_len,
                                        guint8               *tokens,
                                        GCancellable         *cancellable,
                                        GError              **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcDatasetSpec, dc_dataset_spec_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcDatasetFile, dc_dataset_file_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcTextStream, dc_text_stream_free)

G_END_DECLS
