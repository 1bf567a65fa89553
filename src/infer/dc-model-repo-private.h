/* dc-model-repo-private.h: what dc-model-repo.c (opening) and
 * dc-model-repo-cache.c (the weight cache) share.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-model-repo.h"

#include "model/dc-safetensors.h"

G_BEGIN_DECLS

typedef struct
{
  guint64 begin;      /* data-area offsets */
  guint64 end;
  guint8  sha256[32];
  guint   present : 1;
} DcRepoPiece;

typedef struct
{
  char          *name;            /* "model.safetensors" or a shard's file name */
  char          *url;             /* on the Hub; NULL when local */
  char          *path;            /* local; NULL on the Hub */
  DcSafetensors *st;
  guint64        file_size;
  char          *header_sha256;   /* hex, of the 8-byte length and the header */
  char          *linked_sha256;   /* the Hub's sha256 of the whole file, or NULL */
  GBytes        *header_bytes;    /* Hub: the 8-byte length and the header, as read */
  int            fd;              /* local: the file; Hub: NAME.data once opened; else -1 */

  /* cache state, under the repo's lock */
  GArray        *pieces;          /* DcRepoPiece, sorted by begin */
  int            journal_fd;
  guint          cache_ready : 1;
  guint          cache_off : 1;   /* the cache failed: fetch without writing */
} DcRepoFile;

struct _DcModelRepo
{
  GObject         parent_instance;

  /* owned references */
  DcHfClient     *client;         /* NULL when local */
  GMainContext   *main_context;   /* where bytes-downloaded is notified */
  DcHfConfig     *config;
  DcBpeTokenizer *tokenizer;
  GBytes         *tokenizer_config;  /* NULL when the repo has none */
  GBytes         *config_bytes;      /* the files as read, served to ring stages */
  GBytes         *tokenizer_bytes;
  GBytes         *index_bytes;       /* NULL when the checkpoint is one file */
  GPtrArray      *files;          /* DcRepoFile */
  GHashTable     *by_name;        /* tensor name -> DcRepoFile (borrowed) */
  GHashTable     *by_tensor;      /* DcSafetensorsTensor * -> DcRepoFile (borrowed) */

  /* state */
  char           *spec;
  char           *repo_id;        /* "owner/name"; NULL when local */
  char           *revision;
  char           *local_dir;      /* NULL on the Hub */
  char           *cache_dir;      /* this model's cache folder; NULL when local */
  char           *dtype;
  guint64         cache_limit;
  guint64         piece_size;
  guint64         weight_bytes;
  guint64         bytes_downloaded;   /* atomic */
  gint            notify_pending;     /* atomic */
  GMutex          lock;               /* the files' cache state and cache_evicted */
  gboolean        cache_evicted;
  gboolean        cache_warned;

  /* Weights from another device first (set before any read). */
  DcModelRepoPeerFetch peer_fetch;
  gpointer        peer_data;
  GDestroyNotify  peer_destroy;
  guint64         bytes_from_peer;    /* atomic */
  char           *peer_refusal;       /* under lock; set once: the peer is not asked again */

  /* The small files and headers from another device first (while opening). */
  DcModelRepoPeerFile peer_file;
  gpointer        peer_file_data;
  gboolean        peer_file_failed;   /* the Hub for the rest of the open */
};

void      _dc_model_repo_add_downloaded   (DcModelRepo                *self,
                                           guint64                     n);
gboolean  _dc_model_repo_pread_all        (int                         fd,
                                           guint8                     *dst,
                                           gsize                       len,
                                           guint64                     offset);
gboolean  _dc_model_repo_read_hub_tensor  (DcModelRepo                *self,
                                           DcRepoFile                   *file,
                                           const DcSafetensorsTensor  *t,
                                           guint8                     *dst,
                                           GCancellable               *cancellable,
                                           GError                    **error);

G_END_DECLS
