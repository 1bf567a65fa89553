/* dc-model-repo.h: a Hugging Face model, on the Hub or in a local folder.
 *
 * Opening reads only config.json, tokenizer.json, tokenizer_config.json,
 * model.safetensors.index.json when the checkpoint is sharded, and each
 * safetensors file's header by byte range (its 8-byte length, then the
 * header). No weight moves then. Weights move when the model loads
 * (DcTensorSource.read), each tensor by its byte range, through an on-disk
 * cache in the user's cache directory: resumable, checked against the
 * header's sizes and a sha256 of every cached piece, under a size limit,
 * cancellable, counted in bytes (docs/ARCHITECTURE.md, "The model repo
 * and its weight cache").
 * A local folder is read in place, never cached.
 *
 * Threads: open (the blocking call) may run on any thread; the _async one
 * runs it in a GTask thread. After opening the object is immutable except
 * its cache, and DcTensorSource.read may run on several threads at once for
 * distinct tensors. `bytes-downloaded` is notified on the thread-default
 * main context of the thread that called open (or open_async).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "data/dc-hf-client.h"
#include "model/dc-bpe-tokenizer.h"
#include "model/dc-hf-config.h"
#include "model/dc-tensor-source.h"

G_BEGIN_DECLS

/* One cached piece of a tensor, the unit that is fetched, hashed and recorded:
 * a cancel or a crash loses at most this much, and one piece is one request
 * well under the client's 64 MiB cap. */
#define DC_MODEL_REPO_PIECE            (16u * 1024u * 1024u)
/* The default limit on the model cache (all models together): a 7B model in
 * BF16 (~15 GB, the largest one device here runs in INT8) fits with room for
 * small ones. A model larger than the limit is refused before anything is
 * downloaded; older models are removed (least recently used first) to make
 * room for a new one. $DC_MODEL_CACHE_MAX_MB changes it. */
#define DC_MODEL_REPO_DEFAULT_CACHE_LIMIT (20ull * 1000 * 1000 * 1000)
/* tokenizer_config.json is a few KB (chat templates reach ~10 KB). */
#define DC_MODEL_REPO_TOKENIZER_CONFIG_MAX_BYTES (1024u * 1024u)
/* Shards in one checkpoint: the largest open models have ~200 (405B in BF16). */
#define DC_MODEL_REPO_MAX_SHARDS       4096u
/* The default context the dialog's memory figure assumes (the seed's). */
#define DC_MODEL_REPO_SUMMARY_CONTEXT  64u

#define DC_TYPE_MODEL_REPO (dc_model_repo_get_type ())
/* Implements DcTensorSource. */
G_DECLARE_FINAL_TYPE (DcModelRepo, dc_model_repo, DC, MODEL_REPO, GObject)

/**
 * DcModelRepoPeerFile:
 * @name: the file ("config.json", "tokenizer.json", …); with @header, the
 *   weight file whose 8-byte header length and header are wanted
 * @header: whether the header of weight file @name is wanted
 * @max_size: the most bytes the repo accepts for it
 * @file_size: (out): with @header, the size of the whole weight file
 * @error: %DC_DATA_ERROR_NOT_FOUND when the model has no such file (an
 *   optional one is then taken as absent); else why the other device did
 *   not send it (the repo then asks the Hub)
 *
 * A file the repo reads when it opens, from another device (a ring's head)
 * instead of the Hub, checked by the fetcher as weight bytes are. Runs on
 * the opening thread.
 *
 * Returns: (transfer full) (nullable): the bytes, at most @max_size
 */
typedef GBytes *(*DcModelRepoPeerFile) (const char    *name,
                                        gboolean       header,
                                        gsize          max_size,
                                        guint64       *file_size,
                                        gpointer       user_data,
                                        GCancellable  *cancellable,
                                        GError       **error);

/**
 * DcModelRepoOptions:
 * @cache_dir: (nullable): the cache's root folder; %NULL: `$DC_MODEL_CACHE_DIR`,
 *   else `daisychain/models` in the user's cache directory
 * @cache_limit: the most bytes the cache root may hold, all models together;
 *   0: `$DC_MODEL_CACHE_MAX_MB` (in MB of 10^6 bytes), else
 *   %DC_MODEL_REPO_DEFAULT_CACHE_LIMIT
 * @piece_size: bytes per cached piece; 0: %DC_MODEL_REPO_PIECE (tests use
 *   small pieces to exercise resuming inside a tensor)
 * @peer_file: (nullable): asked first for the small files and the weight
 *   files' headers (Hub repos only); after its first failure, the Hub
 * @peer_file_data: for @peer_file; must outlive the open
 */
typedef struct
{
  const char          *cache_dir;
  guint64              cache_limit;
  guint64              piece_size;
  DcModelRepoPeerFile  peer_file;
  gpointer             peer_file_data;
} DcModelRepoOptions;

/* SPEC: a repo id "owner/name" (optionally "owner/name@revision") or a path to a local folder. */
void          dc_model_repo_open_async   (DcHfClient          *client,
                                          const char          *spec,
                                          GCancellable        *cancellable,
                                          GAsyncReadyCallback  callback,
                                          gpointer             user_data);
void          dc_model_repo_open_full_async (DcHfClient               *client,
                                             const char               *spec,
                                             const DcModelRepoOptions *options,
                                             GCancellable             *cancellable,
                                             GAsyncReadyCallback       callback,
                                             gpointer                  user_data);
DcModelRepo  *dc_model_repo_open_finish  (GAsyncResult        *result,
                                          GError             **error);
DcModelRepo  *dc_model_repo_open         (DcHfClient          *client,
                                          const char          *spec,
                                          GCancellable        *cancellable,
                                          GError             **error);
DcModelRepo  *dc_model_repo_open_full    (DcHfClient               *client,
                                          const char               *spec,
                                          const DcModelRepoOptions *options,
                                          GCancellable             *cancellable,
                                          GError                  **error);

const char       *dc_model_repo_get_spec       (DcModelRepo *self);
gboolean          dc_model_repo_is_local       (DcModelRepo *self);
const DcHfConfig *dc_model_repo_get_config     (DcModelRepo *self);
DcBpeTokenizer   *dc_model_repo_get_tokenizer  (DcModelRepo *self);
/* Of the tensors, e.g. "BF16"; then the download size. */
const char       *dc_model_repo_get_dtype      (DcModelRepo *self);
guint64           dc_model_repo_get_weight_bytes (DcModelRepo *self);
guint64           dc_model_repo_get_bytes_downloaded (DcModelRepo *self);
guint64           dc_model_repo_get_memory_bytes (DcModelRepo *self,
                                                  guint        context);
const char       *dc_model_repo_get_cache_dir  (DcModelRepo *self);
GBytes           *dc_model_repo_get_tokenizer_config (DcModelRepo *self);
/**
 * DcModelRepoPeerFetch:
 * @file: the weight file ("model.safetensors" or a shard's name)
 * @offset: the first byte, counted from the start of @file's data area
 * @dst: (out caller-allocates): receives @length bytes
 * @error: why the other device did not send them (the repo then fetches
 *   them from the Hub)
 *
 * Fills @dst with weight bytes from another device (the ring's head, from
 * its cache), each range checked by the fetcher. Runs on the threads that
 * load the model.
 */
typedef gboolean (*DcModelRepoPeerFetch) (const char    *file,
                                          guint64        offset,
                                          guint8        *dst,
                                          gsize          length,
                                          gpointer       user_data,
                                          GCancellable  *cancellable,
                                          GError       **error);

/* Weights are asked of FETCH first, then (after its first refusal, for the
 * rest of the repo's life) of the Hub. Before anything is read; Hub repos only. */
void              dc_model_repo_set_peer_fetch (DcModelRepo          *self,
                                                DcModelRepoPeerFetch  fetch,
                                                gpointer              user_data,
                                                GDestroyNotify        destroy);
/* Of the bytes downloaded, those the peer sent. */
guint64           dc_model_repo_get_bytes_from_peer (DcModelRepo *self);
/* The peer's first refusal (the Hub was used after it), or NULL. */
char             *dc_model_repo_dup_peer_refusal (DcModelRepo *self);
/* LENGTH bytes at data-area OFFSET of weight file FILE, only from what this
 * repo holds (its cache, every piece's sha256 checked, or its local folder);
 * nothing is downloaded. Any thread. */
GBytes           *dc_model_repo_read_held    (DcModelRepo   *self,
                                              const char    *file,
                                              guint64        offset,
                                              gsize          length,
                                              GError       **error);
/* Whether FILE's data-area range [BEGIN, END) lies inside one tensor of TENSORS
 * (DcSafetensorsTensor *, of this repo). */
gboolean          dc_model_repo_range_in_tensors (DcModelRepo *self,
                                                  const char  *file,
                                                  guint64      begin,
                                                  guint64      end,
                                                  GPtrArray   *tensors);

/* What this repo read when it opened, for a ring stage: with HEADER, the
 * 8-byte length and header of weight file NAME (FILE_SIZE: the whole
 * file's size); else the small file NAME (config.json, tokenizer.json,
 * tokenizer_config.json, model.safetensors.index.json). Hub repos only;
 * %DC_DATA_ERROR_NOT_FOUND when the model has no such file. Any thread. */
GBytes           *dc_model_repo_dup_opened_file (DcModelRepo  *self,
                                                 const char   *name,
                                                 gboolean      header,
                                                 guint64      *file_size,
                                                 GError      **error);
/* What the dialog shows: "LlamaForCausalLM, 30 layers, 135 M parameters, ..." */
char             *dc_model_repo_dup_summary    (DcModelRepo *self);

G_END_DECLS
