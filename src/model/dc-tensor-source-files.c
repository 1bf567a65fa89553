/* dc-tensor-source-files.c: safetensors shards in a local folder.
 *
 * Every path opened is checked to resolve (symbolic links followed) to a
 * regular file inside the folder, so an index or a link cannot make the
 * loader read elsewhere. Descriptors are opened O_NONBLOCK (a FIFO planted
 * as a shard cannot block) and kept open; reads use pread (), which keeps no
 * shared file position, so reads of distinct tensors may run concurrently.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-tensor-source-files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "dc-model-error.h"
#include "dc-regular-file.h"

/* Reads are cut into pieces of this size so that cancelling a large tensor
 * takes effect within one piece. */
#define READ_PIECE (8u * 1024u * 1024u)

typedef struct
{
  char          *path;
  int            fd;
  DcSafetensors *header;
} Shard;

typedef struct
{
  const DcSafetensorsTensor *tensor;  /* borrowed from its shard's header */
  guint                      shard;
} Entry;

struct _DcTensorSourceFiles
{
  GObject     parent_instance;

  /* state */
  char       *dir;
  GArray     *shards;     /* Shard */
  GHashTable *entries;    /* name (borrowed) -> Entry* (owned) */
  GHashTable *by_tensor;  /* const DcSafetensorsTensor* -> Entry* (borrowed) */
};

static void dc_tensor_source_files_iface_init (DcTensorSourceInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (DcTensorSourceFiles, dc_tensor_source_files, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (DC_TYPE_TENSOR_SOURCE,
                                                      dc_tensor_source_files_iface_init))

static void
shard_clear (gpointer data)
{
  Shard *shard = data;

  if (shard->fd >= 0)
    close (shard->fd);
  g_clear_pointer (&shard->path, g_free);
  g_clear_pointer (&shard->header, dc_safetensors_free);
}

static void
dc_tensor_source_files_finalize (GObject *object)
{
  DcTensorSourceFiles *self = DC_TENSOR_SOURCE_FILES (object);

  g_clear_pointer (&self->by_tensor, g_hash_table_unref);
  g_clear_pointer (&self->entries, g_hash_table_unref);
  g_clear_pointer (&self->shards, g_array_unref);
  g_clear_pointer (&self->dir, g_free);
  G_OBJECT_CLASS (dc_tensor_source_files_parent_class)->finalize (object);
}

static void
dc_tensor_source_files_class_init (DcTensorSourceFilesClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = dc_tensor_source_files_finalize;
}

static void
dc_tensor_source_files_init (DcTensorSourceFiles *self)
{
  self->shards = g_array_new (FALSE, TRUE, sizeof (Shard));
  g_array_set_clear_func (self->shards, shard_clear);
  self->entries = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  self->by_tensor = g_hash_table_new (g_direct_hash, g_direct_equal);
}

static const DcSafetensorsTensor *
files_lookup (DcTensorSource *source,
              const char     *name)
{
  DcTensorSourceFiles *self = DC_TENSOR_SOURCE_FILES (source);
  Entry *entry = g_hash_table_lookup (self->entries, name);

  return entry != NULL ? entry->tensor : NULL;
}

static gboolean
files_read (DcTensorSource            *source,
            const DcSafetensorsTensor *t,
            guint8                    *dst,
            GCancellable              *cancellable,
            GError                   **error)
{
  DcTensorSourceFiles *self = DC_TENSOR_SOURCE_FILES (source);
  Entry *entry = g_hash_table_lookup (self->by_tensor, t);
  const Shard *shard;
  guint64 done = 0, len;

  if (entry == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "tensor “%s” does not belong to this checkpoint", t->name);
      return FALSE;
    }
  shard = &g_array_index (self->shards, Shard, entry->shard);
  len = t->end - t->begin;
  while (done < len)
    {
      gsize piece = (gsize) MIN (len - done, (guint64) READ_PIECE);
      ssize_t n;

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
      n = pread (shard->fd, dst + done, piece,
                 (off_t) (shard->header->data_start + t->begin + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int saved = errno;

          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                       "%s: cannot read tensor “%s”: %s", shard->path, t->name,
                       g_strerror (saved));
          return FALSE;
        }
      if (n == 0)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "%s: the file ends inside tensor “%s” (truncated since it was opened)",
                       shard->path, t->name);
          return FALSE;
        }
      done += (guint64) n;
    }
  return TRUE;
}

static void
dc_tensor_source_files_iface_init (DcTensorSourceInterface *iface)
{
  iface->lookup = files_lookup;
  iface->read = files_read;
}

/* The real path of DIR/NAME, refused unless it is a regular file inside
 * REAL_DIR (a symbolic link may point elsewhere in the folder, not out). */
static char *
resolve_inside (const char  *real_dir,
                const char  *name,
                GError     **error)
{
  g_autofree char *path = g_build_filename (real_dir, name, NULL);
  g_autofree char *real = realpath (path, NULL);
  g_autofree char *prefix = g_strconcat (real_dir, G_DIR_SEPARATOR_S, NULL);

  if (real == NULL)
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "%s: %s", path,
                   g_strerror (saved));
      return NULL;
    }
  if (!g_str_has_prefix (real, prefix))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "%s resolves to %s, outside the model folder", path, real);
      return NULL;
    }
  return g_steal_pointer (&real);
}

static gboolean
add_shard (DcTensorSourceFiles  *self,
           const char           *real_dir,
           const char           *name,
           GError              **error)
{
  Shard shard = { NULL, -1, NULL };
  struct stat st;

  shard.path = resolve_inside (real_dir, name, error);
  if (shard.path == NULL)
    return FALSE;
  /* The header parser checks the path is a regular file and maps it. */
  shard.header = dc_safetensors_new_from_file (shard.path, error);
  if (shard.header == NULL)
    {
      shard_clear (&shard);
      return FALSE;
    }
  shard.fd = g_open (shard.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
  if (shard.fd < 0 || fstat (shard.fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      int saved = errno;

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE,
                   "%s: cannot open as a regular file: %s", shard.path, g_strerror (saved));
      shard_clear (&shard);
      return FALSE;
    }
  g_array_append_val (self->shards, shard);
  return TRUE;
}

static void
add_entry (DcTensorSourceFiles       *self,
           const DcSafetensorsTensor *t,
           guint                      shard)
{
  Entry *entry = g_new (Entry, 1);

  entry->tensor = t;
  entry->shard = shard;
  g_hash_table_insert (self->entries, t->name, entry);
  g_hash_table_insert (self->by_tensor, (gpointer) t, entry);
}

static gboolean
load_sharded (DcTensorSourceFiles  *self,
              const char           *real_dir,
              GError              **error)
{
  g_autofree char *index_path = NULL;
  g_autofree char *text = NULL;
  g_autoptr(DcSafetensorsIndex) index = NULL;
  GHashTableIter iter;
  gpointer key, value;
  gsize len;

  index_path = resolve_inside (real_dir, "model.safetensors.index.json", error);
  if (index_path == NULL ||
      !dc_regular_file_get_contents (index_path, DC_SAFETENSORS_INDEX_MAX_BYTES, &text, &len,
                                     error))
    return FALSE;
  index = dc_safetensors_index_parse (text, (gssize) len, error);
  if (index == NULL)
    {
      g_prefix_error (error, "%s: ", index_path);
      return FALSE;
    }
  if (index->shards->len > DC_TENSOR_SOURCE_MAX_SHARDS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "%s names %u shards; at most %u are accepted", index_path,
                   index->shards->len, DC_TENSOR_SOURCE_MAX_SHARDS);
      return FALSE;
    }
  for (guint i = 0; i < index->shards->len; i++)
    if (!add_shard (self, real_dir, g_ptr_array_index (index->shards, i), error))
      return FALSE;

  /* The index decides which shard holds a name; the shard must agree. */
  g_hash_table_iter_init (&iter, index->weight_map);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const DcSafetensorsTensor *t = NULL;
      guint s;

      for (s = 0; s < self->shards->len; s++)
        {
          const Shard *shard = &g_array_index (self->shards, Shard, s);

          if (strcmp (g_ptr_array_index (index->shards, s), value) == 0)
            {
              t = dc_safetensors_lookup (shard->header, key);
              break;
            }
        }
      if (t == NULL)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "%s places tensor “%s” in %s, which does not contain it", index_path,
                       (const char *) key, (const char *) value);
          return FALSE;
        }
      add_entry (self, t, s);
    }
  return TRUE;
}

/**
 * dc_tensor_source_files_new:
 * @dir: a folder with model.safetensors, or model.safetensors.index.json and its shards
 *
 * Reads every header (not the data). Prefers the index when both exist, as
 * transformers does.
 *
 * Returns: (transfer full) (nullable): the source, or %NULL with @error set
 */
DcTensorSource *
dc_tensor_source_files_new (const char  *dir,
                            GError     **error)
{
  g_autoptr(DcTensorSourceFiles) self = NULL;
  g_autofree char *real_dir = NULL;
  g_autofree char *index_path = NULL;

  g_return_val_if_fail (dir != NULL, NULL);

  real_dir = realpath (dir, NULL);
  if (real_dir == NULL || !g_file_test (real_dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_DIRECTORY,
                   "%s is not a model folder", dir);
      return NULL;
    }
  self = g_object_new (DC_TYPE_TENSOR_SOURCE_FILES, NULL);
  self->dir = g_strdup (real_dir);
  index_path = g_build_filename (real_dir, "model.safetensors.index.json", NULL);
  if (g_file_test (index_path, G_FILE_TEST_EXISTS))
    {
      if (!load_sharded (self, real_dir, error))
        return NULL;
    }
  else
    {
      const Shard *shard;

      if (!add_shard (self, real_dir, "model.safetensors", error))
        return NULL;
      shard = &g_array_index (self->shards, Shard, 0);
      for (guint i = 0; i < shard->header->tensors->len; i++)
        add_entry (self, g_ptr_array_index (shard->header->tensors, i), 0);
    }
  return DC_TENSOR_SOURCE (g_steal_pointer (&self));
}
