/* dc-model-repo-cache.c: the on-disk cache of a Hub model's weights.
 *
 * The cache keeps, per safetensors file, two files in the model's cache
 * folder: NAME.data, the file's data area written sparse at the header's
 * offsets, and NAME.journal, a text record of which pieces of it are there:
 *
 *   dcmc1 FILE_SIZE HEADER_SHA256 LINKED_SHA256|-     (which file this caches)
 *   piece BEGIN END SHA256                            (one line per piece, appended)
 *
 * A piece is one tensor's bytes, or a DC_MODEL_REPO_PIECE-long slice of a
 * large tensor, at data-area offsets [BEGIN, END). A piece's bytes are
 * written before its line is appended, and a line is trusted only when it
 * names exactly a piece of the header and the bytes read back hash to its
 * sha256: a piece cut short by a cancel or a crash has no line and is fetched
 * again; a damaged piece fails its hash and is fetched again. A journal whose
 * first line names another file (the header changed, the branch moved, the
 * size differs) drops the whole cache of that file. On opening the journal is
 * rewritten with only its valid lines (a torn last line disappears).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-model-repo-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dc-data-error.h"
#include "dc-regular-file.h"

#define JOURNAL_MAGIC "dcmc1"
/* A journal line is under 120 bytes; room for every piece twice and a header. */
#define JOURNAL_LINE_MAX 160u

gboolean
_dc_model_repo_pread_all (int      fd,
                          guint8  *dst,
                          gsize    len,
                          guint64  offset)
{
  while (len > 0)
    {
      gssize n = pread (fd, dst, len, (off_t) offset);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      dst += n;
      len -= (gsize) n;
      offset += (guint64) n;
    }
  return TRUE;
}

static gboolean
pwrite_all (int           fd,
            const guint8 *src,
            gsize         len,
            guint64       offset)
{
  while (len > 0)
    {
      gssize n = pwrite (fd, src, len, (off_t) offset);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      src += n;
      len -= (gsize) n;
      offset += (guint64) n;
    }
  return TRUE;
}

static void
build_pieces (DcModelRepo *self,
              DcRepoFile  *file)
{
  file->pieces = g_array_new (FALSE, TRUE, sizeof (DcRepoPiece));
  for (guint i = 0; i < file->st->tensors->len; i++)
    {
      const DcSafetensorsTensor *t = file->st->tensors->pdata[i];

      for (guint64 at = t->begin; at < t->end; at += self->piece_size)
        {
          DcRepoPiece piece = { at, MIN (t->end, at + self->piece_size), { 0 }, FALSE };

          g_array_append_val (file->pieces, piece);
        }
    }
}

/* The piece starting at @begin, by binary search (pieces are sorted and disjoint). */
static DcRepoPiece *
find_piece (DcRepoFile *file,
            guint64     begin)
{
  guint lo = 0, hi = file->pieces->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      DcRepoPiece *p = &g_array_index (file->pieces, DcRepoPiece, mid);

      if (p->begin == begin)
        return p;
      if (p->begin < begin)
        lo = mid + 1;
      else
        hi = mid;
    }
  return NULL;
}

static char *
journal_first_line (DcRepoFile *file)
{
  return g_strdup_printf (JOURNAL_MAGIC " %" G_GUINT64_FORMAT " %s %s", file->file_size,
                          file->header_sha256,
                          file->linked_sha256 != NULL ? file->linked_sha256 : "-");
}

static gboolean
parse_hex32 (const char *hex,
             guint8      out[32])
{
  if (strlen (hex) != 64)
    return FALSE;
  for (guint i = 0; i < 32; i++)
    {
      int hi = g_ascii_xdigit_value (hex[2 * i]);
      int lo = g_ascii_xdigit_value (hex[2 * i + 1]);

      if (hi < 0 || lo < 0)
        return FALSE;
      out[i] = (guint8) (hi << 4 | lo);
    }
  return TRUE;
}

static char *
format_piece_line (const DcRepoPiece *p)
{
  GString *line = g_string_new (NULL);

  g_string_append_printf (line, "piece %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " ", p->begin,
                          p->end);
  for (guint i = 0; i < 32; i++)
    g_string_append_printf (line, "%02x", p->sha256[i]);
  g_string_append_c (line, '\n');
  return g_string_free (line, FALSE);
}

typedef struct
{
  char    *path;
  guint64  bytes;     /* on disk (sparse files count what they hold) */
  gint64   used;      /* the newest mtime inside: journals are rewritten on every open */
} CachedModel;

static void
cached_model_free (gpointer data)
{
  CachedModel *model = data;

  g_free (model->path);
  g_free (model);
}

static int
compare_used (gconstpointer a,
              gconstpointer b)
{
  const CachedModel *x = *(CachedModel * const *) a;
  const CachedModel *y = *(CachedModel * const *) b;

  return (x->used > y->used) - (x->used < y->used);
}

/* Only what this cache writes is ever removed: NAME.data, NAME.journal and
 * the journal's temporary copies. */
static gboolean
is_cache_file (const char *name)
{
  return g_str_has_suffix (name, ".safetensors.data")
         || g_str_has_suffix (name, ".safetensors.journal")
         || strstr (name, ".safetensors.journal.") != NULL;
}

/* Makes room for this model under the cache root: other models' folders,
 * least recently used first, are removed until they and this model's weights
 * fit the limit. Called once per repo, under the lock, before its first write. */
static void
evict_for (DcModelRepo *self)
{
  g_autofree char *root = g_path_get_dirname (self->cache_dir);
  g_autofree char *mine = g_path_get_basename (self->cache_dir);
  g_autoptr(GPtrArray) models = g_ptr_array_new_with_free_func (cached_model_free);
  g_autoptr(GDir) dir = g_dir_open (root, 0, NULL);
  guint64 others = 0;
  const char *name;

  if (dir == NULL)
    return;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (root, name, NULL);
      g_autoptr(GDir) inner = NULL;
      CachedModel *model;
      const char *file;
      GStatBuf st;

      /* Model folders are named OWNER--NAME--HASH (dup_model_cache_dir). */
      if (g_str_equal (name, mine) || strstr (name, "--") == NULL
          || g_lstat (path, &st) != 0 || !S_ISDIR (st.st_mode)
          || (inner = g_dir_open (path, 0, NULL)) == NULL)
        continue;
      model = g_new0 (CachedModel, 1);
      model->path = g_steal_pointer (&path);
      while ((file = g_dir_read_name (inner)) != NULL)
        {
          g_autofree char *file_path = g_build_filename (model->path, file, NULL);

          if (is_cache_file (file) && g_lstat (file_path, &st) == 0 && S_ISREG (st.st_mode))
            {
              model->bytes += (guint64) st.st_blocks * 512;
              model->used = MAX (model->used, (gint64) st.st_mtime);
            }
        }
      others += model->bytes;
      g_ptr_array_add (models, model);
    }
  g_ptr_array_sort (models, compare_used);
  for (guint i = 0; i < models->len && others + self->weight_bytes > self->cache_limit; i++)
    {
      CachedModel *model = models->pdata[i];
      g_autoptr(GDir) inner = g_dir_open (model->path, 0, NULL);
      g_autofree char *size = g_format_size (model->bytes);
      const char *file;

      while (inner != NULL && (file = g_dir_read_name (inner)) != NULL)
        {
          g_autofree char *file_path = g_build_filename (model->path, file, NULL);

          if (is_cache_file (file))
            g_unlink (file_path);
        }
      g_rmdir (model->path);
      others -= model->bytes;
      g_message ("removed the cached weights in %s (%s) to keep the model cache under its limit",
                 model->path, size);
    }
}

/* Reads the journal of @file (trusting only lines that name a piece of this
 * header inside the data file's size) and rewrites it with those alone.
 * Called under the lock, once per file. */
static gboolean
open_file_cache (DcModelRepo  *self,
                 DcRepoFile   *file,
                 GError      **error)
{
  g_autofree char *data_path = g_strconcat (self->cache_dir, G_DIR_SEPARATOR_S, file->name,
                                            ".data", NULL);
  g_autofree char *journal_path = g_strconcat (self->cache_dir, G_DIR_SEPARATOR_S, file->name,
                                               ".journal", NULL);
  g_autofree char *first = journal_first_line (file);
  g_autofree char *contents = NULL;
  g_autoptr(GString) kept = NULL;
  gsize len = 0;
  gsize max_journal;
  struct stat st;
  guint64 data_size;
  guint kept_count = 0;

  if (!self->cache_evicted)
    {
      evict_for (self);
      self->cache_evicted = TRUE;
    }
  if (g_mkdir_with_parents (self->cache_dir, 0700) != 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
                   "could not create the model cache folder %s: %s", self->cache_dir,
                   g_strerror (errno));
      return FALSE;
    }
  file->fd = g_open (data_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
  if (file->fd < 0 || fstat (file->fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "could not open the model cache %s: %s",
                   data_path, file->fd < 0 ? g_strerror (errno) : "not a regular file");
      return FALSE;
    }
  data_size = (guint64) st.st_size;

  /* A journal longer than every piece's line twice over is not ours. */
  max_journal = (gsize) MIN ((guint64) G_MAXSIZE / 2,
                             ((guint64) file->pieces->len * 2 + 2) * JOURNAL_LINE_MAX);
  if (g_file_test (journal_path, G_FILE_TEST_EXISTS)
      && !dc_regular_file_get_contents (journal_path, max_journal, &contents, &len, NULL))
    g_clear_pointer (&contents, g_free);

  kept = g_string_new (first);
  g_string_append_c (kept, '\n');
  if (contents != NULL)
    {
      g_auto(GStrv) lines = g_strsplit (contents, "\n", -1);
      guint n = g_strv_length (lines);

      /* The element after the last newline is a torn line or empty: dropped. */
      if (n > 1 && g_str_equal (lines[0], first))
        {
          for (guint i = 1; i + 1 < n; i++)
            {
              g_auto(GStrv) f = g_strsplit (lines[i], " ", -1);
              guint64 begin, end;
              guint8 sha[32];
              DcRepoPiece *p;

              if (g_strv_length (f) != 4 || !g_str_equal (f[0], "piece")
                  || !g_ascii_string_to_unsigned (f[1], 10, 0, G_MAXUINT64, &begin, NULL)
                  || !g_ascii_string_to_unsigned (f[2], 10, 0, G_MAXUINT64, &end, NULL)
                  || !parse_hex32 (f[3], sha)
                  || (p = find_piece (file, begin)) == NULL || p->end != end
                  || end > data_size)
                {
                  g_debug ("%s: ignoring journal line %u", journal_path, i + 1);
                  continue;
                }
              memcpy (p->sha256, sha, sizeof sha);
              p->present = TRUE;
            }
        }
      else
        {
          /* Another version of the file (or no journal we can read): its
           * bytes must not be mistaken for this one's. */
          g_debug ("%s: the cache holds another version of %s; starting afresh", journal_path,
                   file->name);
          if (ftruncate (file->fd, 0) != 0)
            g_debug ("could not truncate %s: %s", data_path, g_strerror (errno));
        }
    }
  for (guint i = 0; i < file->pieces->len; i++)
    {
      DcRepoPiece *p = &g_array_index (file->pieces, DcRepoPiece, i);

      if (p->present)
        {
          g_autofree char *line = format_piece_line (p);

          g_string_append (kept, line);
          kept_count++;
        }
    }
  if (!g_file_set_contents_full (journal_path, kept->str, (gssize) kept->len,
                                 G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    {
      g_prefix_error (error, "could not write the model cache: ");
      return FALSE;
    }
  file->journal_fd = g_open (journal_path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0600);
  if (file->journal_fd < 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
                   "could not open the model cache %s: %s", journal_path, g_strerror (errno));
      return FALSE;
    }
  g_debug ("%s: %u of %u pieces cached", data_path, kept_count, file->pieces->len);
  return TRUE;
}

/* A cache that cannot be written (full disk, a read-only or odd folder)
 * must not stop the model: its pieces are fetched and not kept. Called under
 * the lock. The descriptors stay open until finalize, so that a thread still
 * using one never reaches a reused descriptor number. */
static void
disable_cache (DcModelRepo *self,
               DcRepoFile  *file,
               const char  *why)
{
  file->cache_off = TRUE;
  if (!self->cache_warned)
    {
      self->cache_warned = TRUE;
      g_message ("the model cache in %s is not usable (%s); weights are downloaded without "
                 "caching", self->cache_dir, why);
    }
}

/* Asks the peer (the ring's head) for one piece. FALSE when it did not send
 * it: its first refusal is kept and the peer is not asked again, so that a
 * head without the file costs one round trip, not one per piece. */
static gboolean
fetch_piece_from_peer (DcModelRepo  *self,
                       DcRepoFile   *file,
                       DcRepoPiece  *p,
                       guint8       *dst,
                       GCancellable *cancellable)
{
  gsize len = (gsize) (p->end - p->begin);
  g_autoptr(GError) error = NULL;
  gboolean ask;

  g_mutex_lock (&self->lock);
  ask = self->peer_fetch != NULL && self->peer_refusal == NULL;
  g_mutex_unlock (&self->lock);
  if (!ask)
    return FALSE;
  if (self->peer_fetch (file->name, p->begin, dst, len, self->peer_data, cancellable, &error))
    {
      __atomic_add_fetch (&self->bytes_from_peer, len, __ATOMIC_RELAXED);
      return TRUE;
    }
  if (g_cancellable_is_cancelled (cancellable))
    return FALSE;
  g_mutex_lock (&self->lock);
  if (self->peer_refusal == NULL)
    {
      self->peer_refusal = g_strdup (error->message);
      g_message ("%s; fetching the weights of %s from the Hub", error->message, self->repo_id);
    }
  g_mutex_unlock (&self->lock);
  return FALSE;
}

/* Fetches one piece into @dst (from the peer when one is set, else the
 * Hub) and records it in the cache. */
static gboolean
fetch_piece (DcModelRepo   *self,
             DcRepoFile    *file,
             DcRepoPiece   *p,
             guint8        *dst,
             GCancellable  *cancellable,
             GError       **error)
{
  gsize len = (gsize) (p->end - p->begin);
  g_autoptr(GBytes) bytes = NULL;
  g_autofree char *linked = NULL;
  g_autofree char *line = NULL;
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  guint64 total = 0;
  guint8 sha[32];
  gsize sha_len = sizeof sha;
  gboolean off;
  DcRepoPiece done;

  if (fetch_piece_from_peer (self, file, p, dst, cancellable))
    {
      _dc_model_repo_add_downloaded (self, len);
      goto record;
    }
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  bytes = dc_hf_client_fetch_range (self->client, file->url, file->st->data_start + p->begin,
                                    len, &total, &linked, cancellable, error);
  if (bytes == NULL)
    return FALSE;
  /* The file must still be the one whose header was read: a branch that
   * moved would mix two checkpoints' bytes. */
  if (total != file->file_size
      || (linked != NULL && file->linked_sha256 != NULL
          && g_strcmp0 (linked, file->linked_sha256) != 0))
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CHANGED,
                   "%s of %s changed on the server since the model was opened "
                   "(%" G_GUINT64_FORMAT " bytes, was %" G_GUINT64_FORMAT "); open it again",
                   file->name, self->repo_id, total, file->file_size);
      return FALSE;
    }
  g_assert (g_bytes_get_size (bytes) == len);
  memcpy (dst, g_bytes_get_data (bytes, NULL), len);
  _dc_model_repo_add_downloaded (self, len);

record:
  g_mutex_lock (&self->lock);
  off = file->cache_off;
  g_mutex_unlock (&self->lock);
  if (off)
    return TRUE;
  g_checksum_update (checksum, dst, len);
  g_checksum_get_digest (checksum, sha, &sha_len);
  if (!pwrite_all (file->fd, dst, len, p->begin))
    {
      g_autofree char *why = g_strdup_printf ("could not write %s.data: %s", file->name,
                                              g_strerror (errno));

      g_mutex_lock (&self->lock);
      disable_cache (self, file, why);
      g_mutex_unlock (&self->lock);
      return TRUE;
    }

  done = *p;
  memcpy (done.sha256, sha, sizeof sha);
  line = format_piece_line (&done);
  g_mutex_lock (&self->lock);
  /* One write of one short line to an O_APPEND file: it lands whole or, after
   * a crash, torn at the end, where the next open drops it. */
  if (file->cache_off)
    {
      g_mutex_unlock (&self->lock);
      return TRUE;
    }
  if (write (file->journal_fd, line, strlen (line)) != (gssize) strlen (line))
    {
      g_autofree char *why = g_strdup_printf ("could not write %s.journal: %s", file->name,
                                              g_strerror (errno));

      disable_cache (self, file, why);
      g_mutex_unlock (&self->lock);
      return TRUE;
    }
  memcpy (p->sha256, sha, sizeof sha);
  p->present = TRUE;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
read_cached_piece (DcRepoFile        *file,
                   const DcRepoPiece *p,
                   guint8            *dst)
{
  gsize len = (gsize) (p->end - p->begin);
  g_autoptr(GChecksum) checksum = NULL;
  guint8 sha[32];
  gsize sha_len = sizeof sha;

  if (!_dc_model_repo_pread_all (file->fd, dst, len, p->begin))
    return FALSE;
  checksum = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (checksum, dst, len);
  g_checksum_get_digest (checksum, sha, &sha_len);
  return memcmp (sha, p->sha256, sizeof sha) == 0;
}

gboolean
_dc_model_repo_read_hub_tensor (DcModelRepo                *self,
                                DcRepoFile                 *file,
                                const DcSafetensorsTensor  *t,
                                guint8                     *dst,
                                GCancellable               *cancellable,
                                GError                    **error)
{
  DcRepoPiece *p;
  DcRepoPiece *last;

  g_mutex_lock (&self->lock);
  if (!file->cache_ready)
    {
      g_autoptr(GError) local_error = NULL;

      build_pieces (self, file);
      if (!open_file_cache (self, file, &local_error))
        disable_cache (self, file, local_error->message);
      file->cache_ready = TRUE;
    }
  g_mutex_unlock (&self->lock);

  if (t->end == t->begin)
    return TRUE;
  p = find_piece (file, t->begin);
  g_assert (p != NULL);
  last = &g_array_index (file->pieces, DcRepoPiece, file->pieces->len - 1);
  for (; p <= last && p->end <= t->end; p++)
    {
      guint8 *at = dst + (p->begin - t->begin);
      gboolean present;
      DcRepoPiece copy;

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
      g_mutex_lock (&self->lock);
      present = p->present;
      copy = *p;
      g_mutex_unlock (&self->lock);
      if (present && file->fd >= 0)
        {
          if (read_cached_piece (file, &copy, at))
            continue;
          g_debug ("%s: cached bytes %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT " of tensor %s "
                   "are damaged; fetching them again", file->name, copy.begin, copy.end,
                   t->name);
          g_mutex_lock (&self->lock);
          p->present = FALSE;
          g_mutex_unlock (&self->lock);
        }
      if (!fetch_piece (self, file, p, at, cancellable, error))
        return FALSE;
    }
  return TRUE;
}


/* Copies the held bytes of [offset, offset + length) of FILE's data area
 * into DST: every piece it touches must be in the cache and match its
 * sha256. */
static gboolean
read_held_pieces (DcModelRepo  *self,
                  DcRepoFile   *file,
                  guint64       offset,
                  gsize         length,
                  guint8       *dst,
                  GError      **error)
{
  guint64 end = offset + length;
  guint lo = 0, hi;

  g_mutex_lock (&self->lock);
  if (!file->cache_ready)
    {
      g_autoptr(GError) local_error = NULL;

      build_pieces (self, file);
      if (!open_file_cache (self, file, &local_error))
        disable_cache (self, file, local_error->message);
      file->cache_ready = TRUE;
    }
  g_mutex_unlock (&self->lock);

  /* The first piece that ends after OFFSET, by binary search. */
  hi = file->pieces->len;
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;

      if (g_array_index (file->pieces, DcRepoPiece, mid).end <= offset)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (guint64 at = offset; at < end; lo++)
    {
      DcRepoPiece copy;
      gboolean present, off;
      g_autofree guint8 *buf = NULL;
      guint64 from, to;

      if (lo >= file->pieces->len)
        break;
      g_mutex_lock (&self->lock);
      copy = g_array_index (file->pieces, DcRepoPiece, lo);
      present = copy.present;
      off = file->cache_off;
      g_mutex_unlock (&self->lock);
      /* Tensors are contiguous pieces, but a gap between tensors is never held. */
      if (copy.begin > at || !present || off || file->fd < 0)
        break;
      buf = g_malloc (copy.end - copy.begin);
      if (!read_cached_piece (file, &copy, buf))
        break;
      from = at;
      to = MIN (end, copy.end);
      memcpy (dst + (from - offset), buf + (from - copy.begin), to - from);
      at = to;
      if (at == end)
        return TRUE;
    }
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
               "bytes %" G_GUINT64_FORMAT "–%" G_GUINT64_FORMAT " of %s are not in this "
               "device's model cache", offset, end, file->name);
  return FALSE;
}

GBytes *
dc_model_repo_read_held (DcModelRepo   *self,
                         const char    *file_name,
                         guint64        offset,
                         gsize          length,
                         GError       **error)
{
  g_autofree guint8 *dst = NULL;
  DcRepoFile *file = NULL;

  g_return_val_if_fail (DC_IS_MODEL_REPO (self) && file_name != NULL, NULL);

  for (guint i = 0; i < self->files->len && file == NULL; i++)
    if (g_str_equal (((DcRepoFile *) g_ptr_array_index (self->files, i))->name, file_name))
      file = g_ptr_array_index (self->files, i);
  if (file == NULL || length == 0 || offset > file->st->data_size ||
      length > file->st->data_size - offset)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                   "%s has no weight file “%s” with %" G_GSIZE_FORMAT " bytes at %"
                   G_GUINT64_FORMAT, self->spec, file_name, length, offset);
      return NULL;
    }
  dst = g_malloc (length);
  if (self->local_dir != NULL)
    {
      if (!_dc_model_repo_pread_all (file->fd, dst, length, file->st->data_start + offset))
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                       "%s ended before byte %" G_GUINT64_FORMAT, file->path,
                       offset + length);
          return NULL;
        }
    }
  else if (!read_held_pieces (self, file, offset, length, dst, error))
    return NULL;
  return g_bytes_new_take (g_steal_pointer (&dst), length);
}
