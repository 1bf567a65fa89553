/* dc-model-repo.c: a Hugging Face model on the Hub or in a local folder:
 * the spec, the small files, the safetensors headers by range, the summary,
 * and DcTensorSource (a local folder read in place; the Hub through the
 * weight cache of dc-model-repo-cache.c).
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
#include "data/dc-hf-url.h"
#include "dc-regular-file.h"
#include "model/dc-model-error.h"
#include "model/dc-safetensors.h"

static void dc_model_repo_tensor_source_init (DcTensorSourceInterface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (DcModelRepo, dc_model_repo, G_TYPE_OBJECT,
                               G_IMPLEMENT_INTERFACE (DC_TYPE_TENSOR_SOURCE,
                                                      dc_model_repo_tensor_source_init))

enum
{
  PROP_0,
  PROP_BYTES_DOWNLOADED,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static void
repo_file_free (gpointer data)
{
  DcRepoFile *file = data;

  if (file->fd >= 0)
    close (file->fd);
  if (file->journal_fd >= 0)
    close (file->journal_fd);
  g_clear_pointer (&file->st, dc_safetensors_free);
  g_clear_pointer (&file->pieces, g_array_unref);
  g_free (file->name);
  g_free (file->url);
  g_free (file->path);
  g_free (file->header_sha256);
  g_free (file->linked_sha256);
  g_clear_pointer (&file->header_bytes, g_bytes_unref);
  g_free (file);
}

static DcRepoFile *
repo_file_new (const char *name)
{
  DcRepoFile *file = g_new0 (DcRepoFile, 1);

  file->name = g_strdup (name);
  file->fd = -1;
  file->journal_fd = -1;
  return file;
}

static void
dc_model_repo_finalize (GObject *object)
{
  DcModelRepo *self = DC_MODEL_REPO (object);

  g_clear_object (&self->client);
  g_clear_pointer (&self->main_context, g_main_context_unref);
  g_clear_pointer (&self->config, dc_hf_config_free);
  g_clear_pointer (&self->tokenizer, dc_bpe_tokenizer_free);
  g_clear_pointer (&self->tokenizer_config, g_bytes_unref);
  g_clear_pointer (&self->config_bytes, g_bytes_unref);
  g_clear_pointer (&self->tokenizer_bytes, g_bytes_unref);
  g_clear_pointer (&self->index_bytes, g_bytes_unref);
  g_clear_pointer (&self->by_name, g_hash_table_unref);
  g_clear_pointer (&self->by_tensor, g_hash_table_unref);
  g_clear_pointer (&self->files, g_ptr_array_unref);
  g_free (self->spec);
  g_free (self->repo_id);
  g_free (self->revision);
  g_free (self->local_dir);
  g_free (self->cache_dir);
  g_free (self->dtype);
  g_free (self->peer_refusal);
  if (self->peer_destroy != NULL)
    self->peer_destroy (self->peer_data);
  g_mutex_clear (&self->lock);

  G_OBJECT_CLASS (dc_model_repo_parent_class)->finalize (object);
}

static void
dc_model_repo_get_property (GObject    *object,
                            guint       prop_id,
                            GValue     *value,
                            GParamSpec *pspec)
{
  DcModelRepo *self = DC_MODEL_REPO (object);

  switch (prop_id)
    {
    case PROP_BYTES_DOWNLOADED:
      g_value_set_uint64 (value, dc_model_repo_get_bytes_downloaded (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_model_repo_class_init (DcModelRepoClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = dc_model_repo_finalize;
  object_class->get_property = dc_model_repo_get_property;

  properties[PROP_BYTES_DOWNLOADED] =
    g_param_spec_uint64 ("bytes-downloaded", NULL, NULL, 0, G_MAXUINT64, 0,
                         G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
dc_model_repo_init (DcModelRepo *self)
{
  g_mutex_init (&self->lock);
  self->files = g_ptr_array_new_with_free_func (repo_file_free);
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  self->by_tensor = g_hash_table_new (g_direct_hash, g_direct_equal);
}

/* Progress ------------------------------------------------------------------ */

static gboolean
notify_downloaded_cb (gpointer data)
{
  GWeakRef *ref = data;
  g_autoptr(DcModelRepo) self = g_weak_ref_get (ref);

  if (self != NULL)
    {
      g_atomic_int_set (&self->notify_pending, 0);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BYTES_DOWNLOADED]);
    }
  return G_SOURCE_REMOVE;
}

static void
weak_ref_free (gpointer data)
{
  g_weak_ref_clear (data);
  g_free (data);
}

/* Called per piece from the loading thread; one coalesced notify at a time,
 * through a GSource attached to the opener's context. */
void
_dc_model_repo_add_downloaded (DcModelRepo *self,
                               guint64      n)
{
  __atomic_add_fetch (&self->bytes_downloaded, n, __ATOMIC_RELAXED);

  if (g_atomic_int_compare_and_exchange (&self->notify_pending, 0, 1))
    {
      GSource *source = g_idle_source_new ();
      GWeakRef *ref = g_new0 (GWeakRef, 1);

      g_weak_ref_init (ref, self);
      g_source_set_callback (source, notify_downloaded_cb, ref, weak_ref_free);
      g_source_set_static_name (source, "[dc] bytes-downloaded notify");
      g_source_attach (source, self->main_context);
      g_source_unref (source);
    }
}

/* Specs ---------------------------------------------------------------------- */

/* The Hub's rule for owner and model names: letters, digits, '-', '_', '.',
 * not starting or ending with '-' or '.', no "--" or "..", at most 96. */
static gboolean
hub_name_ok (const char *name)
{
  gsize len = strlen (name);

  if (len == 0 || len > 96 || name[0] == '-' || name[0] == '.' || name[len - 1] == '-'
      || name[len - 1] == '.' || strstr (name, "--") != NULL || strstr (name, "..") != NULL)
    return FALSE;
  for (const char *c = name; *c != '\0'; c++)
    if (!g_ascii_isalnum (*c) && *c != '-' && *c != '_' && *c != '.')
      return FALSE;
  return TRUE;
}

/* A revision is a branch, a tag or a commit: printable ASCII without spaces,
 * escaped as one URL segment by dc-hf-url.c; 256 bytes is past any real one. */
static gboolean
revision_ok (const char *revision)
{
  gsize len = strlen (revision);

  if (len == 0 || len > 256)
    return FALSE;
  for (const char *c = revision; *c != '\0'; c++)
    if (*c <= ' ' || *c > '~')
      return FALSE;
  return TRUE;
}

static gboolean
parse_spec (DcModelRepo  *self,
            const char   *spec,
            GError      **error)
{
  g_auto(GStrv) parts = NULL;
  const char *at;
  g_autofree char *id = NULL;

  /* A folder that exists wins, as transformers' from_pretrained does: a
   * local copy of "owner/name" in the working folder is what the user meant. */
  if (g_path_is_absolute (spec) || g_str_has_prefix (spec, "./")
      || g_str_has_prefix (spec, "../") || g_file_test (spec, G_FILE_TEST_IS_DIR))
    {
      if (!g_file_test (spec, G_FILE_TEST_IS_DIR))
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                       "the model folder “%s” does not exist", spec);
          return FALSE;
        }
      self->local_dir = g_canonicalize_filename (spec, NULL);
      return TRUE;
    }

  at = strchr (spec, '@');
  id = at != NULL ? g_strndup (spec, (gsize) (at - spec)) : g_strdup (spec);
  parts = g_strsplit (id, "/", -1);
  if (g_strv_length (parts) != 2 || !hub_name_ok (parts[0]) || !hub_name_ok (parts[1])
      || (at != NULL && !revision_ok (at + 1)))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "“%s” is neither a model folder nor a Hugging Face repository id "
                   "(owner/name or owner/name@revision)", spec);
      return FALSE;
    }
  self->repo_id = g_steal_pointer (&id);
  self->revision = g_strdup (at != NULL ? at + 1 : DC_HF_DEFAULT_REVISION);
  return TRUE;
}

/* Small files ------------------------------------------------------------- */

/* The other device failed to send a file: the Hub for the rest of the
 * open, and its first refusal is what the stage reports. */
static void
peer_file_failed (DcModelRepo *self,
                  const char  *why)
{
  self->peer_file_failed = TRUE;
  g_mutex_lock (&self->lock);
  if (self->peer_refusal == NULL)
    self->peer_refusal = g_strdup (why);
  g_mutex_unlock (&self->lock);
}

/* From the other device, when one is set: the bytes, or NULL with ERROR
 * set (the model has no such file, or a cancel) or not (ask the Hub). */
static GBytes *
peer_file_get (DcModelRepo   *self,
               const char    *name,
               gboolean       header,
               gsize          max_size,
               guint64       *file_size,
               GCancellable  *cancellable,
               GError       **error)
{
  g_autoptr(GError) local_error = NULL;
  GBytes *bytes;

  if (self->peer_file == NULL || self->peer_file_failed)
    return NULL;
  bytes = self->peer_file (name, header, max_size, file_size, self->peer_file_data, cancellable,
                           &local_error);
  if (bytes != NULL)
    return bytes;
  if (g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND) ||
      g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    g_propagate_error (error, g_steal_pointer (&local_error));
  else
    peer_file_failed (self, local_error->message);
  return NULL;
}

/* config.json, tokenizer.json, tokenizer_config.json, the index. With
 * @optional, a missing file gives NULL and no error. */
static GBytes *
get_small_file (DcModelRepo   *self,
                const char    *name,
                gsize          max_size,
                gboolean       optional,
                GCancellable  *cancellable,
                GError       **error)
{
  g_autoptr(GError) local_error = NULL;
  GBytes *bytes = NULL;

  if (self->local_dir != NULL)
    {
      g_autofree char *path = g_build_filename (self->local_dir, name, NULL);
      char *contents;
      gsize len;

      if (optional && !g_file_test (path, G_FILE_TEST_EXISTS))
        return NULL;
      if (dc_regular_file_get_contents (path, max_size, &contents, &len, &local_error))
        bytes = g_bytes_new_take (contents, len);
    }
  else
    {
      g_autofree char *url = dc_hf_url_model_file (dc_hf_client_get_base_url (self->client),
                                                   self->repo_id, self->revision, name);

      bytes = peer_file_get (self, name, FALSE, max_size, NULL, cancellable, &local_error);
      if (bytes != NULL)
        return bytes;
      if (local_error != NULL)
        {
          if (optional && g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND))
            return NULL;
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      bytes = dc_hf_client_fetch_file (self->client, url, NULL, max_size, cancellable,
                                       &local_error);
      if (bytes == NULL && optional
          && g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND))
        return NULL;
    }
  if (bytes == NULL)
    g_propagate_error (error, g_steal_pointer (&local_error));
  return bytes;
}

/* Headers ------------------------------------------------------------------ */

static char *
sha256_of_two (const guint8 *a,
               gsize         a_len,
               const guint8 *b,
               gsize         b_len)
{
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);

  g_checksum_update (checksum, a, a_len);
  g_checksum_update (checksum, b, b_len);
  return g_strdup (g_checksum_get_string (checksum));
}

/* A header another device sent (BLOB: the 8-byte length and the header):
 * checked as one read from the Hub is; the Hub's own sha256 of the file is
 * then unknown (the cache does without it). */
static gboolean
open_peer_header (DcModelRepo   *self,
                  DcRepoFile    *file,
                  GBytes        *blob,
                  guint64        file_size,
                  GError       **error)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (blob, &size);
  guint64 header_len;

  if (size < 8 ||
      !dc_safetensors_read_prefix (data, 8, file_size, &header_len, error) ||
      header_len != size - 8)
    {
      if (error != NULL && *error == NULL)
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                     "the head sent %" G_GSIZE_FORMAT " bytes for the header of %s", size,
                     file->name);
      g_prefix_error (error, "%s of %s: ", file->name, self->repo_id);
      return FALSE;
    }
  file->st = dc_safetensors_parse_header ((const char *) data + 8, header_len, file_size, error);
  if (file->st == NULL)
    {
      g_prefix_error (error, "%s of %s: ", file->name, self->repo_id);
      return FALSE;
    }
  file->file_size = file_size;
  file->header_sha256 = sha256_of_two (data, 8, data + 8, header_len);
  file->header_bytes = g_bytes_ref (blob);
  return TRUE;
}

/* The 8-byte length, then the header: two range requests, nothing else. */
static gboolean
open_hub_file (DcModelRepo   *self,
               DcRepoFile    *file,
               GCancellable  *cancellable,
               GError       **error)
{
  g_autoptr(GBytes) prefix = NULL;
  g_autoptr(GBytes) header = NULL;
  g_autofree char *linked = NULL;
  guint64 file_size = 0, size_again = 0, header_len;

  file->url = dc_hf_url_model_file (dc_hf_client_get_base_url (self->client), self->repo_id,
                                    self->revision, file->name);
  if (self->peer_file != NULL && !self->peer_file_failed)
    {
      g_autoptr(GError) local_error = NULL;
      g_autoptr(GBytes) blob = peer_file_get (self, file->name, TRUE,
                                              8 + DC_SAFETENSORS_MAX_HEADER, &file_size,
                                              cancellable, &local_error);

      if (local_error != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return FALSE;
        }
      if (blob != NULL)
        return open_peer_header (self, file, blob, file_size, error);
    }
  prefix = dc_hf_client_fetch_range (self->client, file->url, 0, 8, &file_size,
                                     &file->linked_sha256, cancellable, error);
  if (prefix == NULL)
    return FALSE;
  if (!dc_safetensors_read_prefix (g_bytes_get_data (prefix, NULL), g_bytes_get_size (prefix),
                                   file_size, &header_len, error))
    {
      g_prefix_error (error, "%s of %s: ", file->name, self->repo_id);
      return FALSE;
    }
  header = dc_hf_client_fetch_range (self->client, file->url, 8, header_len, &size_again,
                                     &linked, cancellable, error);
  if (header == NULL)
    return FALSE;
  if (size_again != file_size
      || g_strcmp0 (linked, file->linked_sha256) != 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CHANGED,
                   "%s of %s changed on the server while it was being opened; "
                   "open the model again", file->name, self->repo_id);
      return FALSE;
    }
  file->st = dc_safetensors_parse_header (g_bytes_get_data (header, NULL), header_len,
                                          file_size, error);
  if (file->st == NULL)
    {
      g_prefix_error (error, "%s of %s: ", file->name, self->repo_id);
      return FALSE;
    }
  file->file_size = file_size;
  file->header_sha256 = sha256_of_two (g_bytes_get_data (prefix, NULL), 8,
                                       g_bytes_get_data (header, NULL), header_len);
  {
    GByteArray *both = g_byte_array_sized_new ((guint) (8 + header_len));

    g_byte_array_append (both, g_bytes_get_data (prefix, NULL), 8);
    g_byte_array_append (both, g_bytes_get_data (header, NULL), (guint) header_len);
    file->header_bytes = g_byte_array_free_to_bytes (both);
  }
  return TRUE;
}

static gboolean
open_local_file (DcModelRepo  *self,
                 DcRepoFile   *file,
                 GError      **error)
{
  struct stat st;

  file->path = g_build_filename (self->local_dir, file->name, NULL);
  file->st = dc_safetensors_new_from_file (file->path, error);
  if (file->st == NULL)
    return FALSE;
  /* O_NONBLOCK and the fstat check: a FIFO swapped in since is refused, not
   * waited on (dc-regular-file.h). */
  file->fd = g_open (file->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
  if (file->fd < 0 || fstat (file->fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "could not open %s: %s", file->path,
                   file->fd < 0 ? g_strerror (errno) : "not a regular file");
      return FALSE;
    }
  file->file_size = (guint64) st.st_size;
  if (file->file_size != file->st->data_start + file->st->data_size)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "%s changed while it was being opened", file->path);
      return FALSE;
    }
  return TRUE;
}

static const char *
describe (DcModelRepo *self)
{
  return self->repo_id != NULL ? self->repo_id : self->local_dir;
}

/* The tensors of every file in one map; the index, when there is one, must
 * agree with the shards' headers. */
static gboolean
index_tensors (DcModelRepo         *self,
               DcSafetensorsIndex  *index,
               GError             **error)
{
  guint64 by_dtype[3] = { 0, 0, 0 };
  guint best = 0;

  for (guint i = 0; i < self->files->len; i++)
    {
      DcRepoFile *file = self->files->pdata[i];

      for (guint k = 0; k < file->st->tensors->len; k++)
        {
          DcSafetensorsTensor *t = file->st->tensors->pdata[k];
          DcRepoFile *other = g_hash_table_lookup (self->by_name, t->name);

          if (other != NULL)
            {
              g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                           "%s: tensor “%s” is in both %s and %s", describe (self), t->name,
                           other->name, file->name);
              return FALSE;
            }
          g_hash_table_insert (self->by_name, t->name, file);
          g_hash_table_insert (self->by_tensor, t, file);
          by_dtype[t->dtype] += t->end - t->begin;
        }
      self->weight_bytes += file->st->data_size;
    }

  if (index != NULL)
    {
      GHashTableIter iter;
      gpointer name, shard;

      g_hash_table_iter_init (&iter, index->weight_map);
      while (g_hash_table_iter_next (&iter, &name, &shard))
        {
          DcRepoFile *file = g_hash_table_lookup (self->by_name, name);

          if (file == NULL || !g_str_equal (file->name, shard))
            {
              g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                           "%s: model.safetensors.index.json puts tensor “%s” in %s, whose "
                           "header does not list it", describe (self), (const char *) name,
                           (const char *) shard);
              return FALSE;
            }
        }
    }

  for (guint d = 1; d < G_N_ELEMENTS (by_dtype); d++)
    if (by_dtype[d] > by_dtype[best])
      best = d;
  self->dtype = g_strdup (dc_safetensors_dtype_name (best));
  return TRUE;
}

/* The cache's folder for this model: one per (endpoint, repo, revision), so
 * a mirror or another branch never shares bytes with the Hub's main; the
 * name stays readable and holds nothing a path could be steered by (the repo
 * id is checked by hub_name_ok, the rest is a hash). */
static char *
dup_model_cache_dir (DcModelRepo *self,
                     const char  *root)
{
  g_autofree char *key = g_strdup_printf ("%s\n%s\n%s",
                                          dc_hf_client_get_base_url (self->client),
                                          self->repo_id, self->revision);
  g_autofree char *hash = g_compute_checksum_for_string (G_CHECKSUM_SHA256, key, -1);
  g_auto(GStrv) parts = g_strsplit (self->repo_id, "/", 2);
  g_autofree char *name = g_strdup_printf ("%s--%s--%.16s", parts[0], parts[1], hash);

  return g_build_filename (root, name, NULL);
}

static gboolean
setup_cache (DcModelRepo               *self,
             const DcModelRepoOptions  *options,
             GError                   **error)
{
  const char *env_dir = g_getenv ("DC_MODEL_CACHE_DIR");
  const char *env_limit = g_getenv ("DC_MODEL_CACHE_MAX_MB");
  g_autofree char *root = NULL;

  if (options != NULL && options->cache_dir != NULL)
    root = g_strdup (options->cache_dir);
  else if (env_dir != NULL && *env_dir != '\0')
    root = g_strdup (env_dir);
  else
    root = g_build_filename (g_get_user_cache_dir (), "daisychain", "models", NULL);
  self->cache_dir = dup_model_cache_dir (self, root);

  self->cache_limit = DC_MODEL_REPO_DEFAULT_CACHE_LIMIT;
  if (options != NULL && options->cache_limit > 0)
    self->cache_limit = options->cache_limit;
  else if (env_limit != NULL && *env_limit != '\0')
    {
      guint64 mb;

      if (!g_ascii_string_to_unsigned (env_limit, 10, 1, G_MAXUINT64 / 1000000, &mb, NULL))
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                       "DC_MODEL_CACHE_MAX_MB=“%s” is not a number of megabytes (1 or more)",
                       env_limit);
          return FALSE;
        }
      self->cache_limit = mb * 1000000;
    }
  return TRUE;
}

static gboolean
check_cache_limit (DcModelRepo  *self,
                   GError      **error)
{
  g_autofree char *need = NULL;
  g_autofree char *limit = NULL;

  if (self->weight_bytes <= self->cache_limit)
    return TRUE;
  need = g_format_size_full (self->weight_bytes, G_FORMAT_SIZE_LONG_FORMAT);
  limit = g_format_size_full (self->cache_limit, G_FORMAT_SIZE_LONG_FORMAT);
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_TOO_LARGE,
               "the weights of %s are %s, more than the model cache's limit of %s "
               "(set DC_MODEL_CACHE_MAX_MB to allow more)", self->repo_id, need, limit);
  return FALSE;
}

static gboolean
repo_open (DcModelRepo               *self,
           const DcModelRepoOptions  *options,
           GCancellable              *cancellable,
           GError                   **error)
{
  g_autoptr(GBytes) config = NULL;
  g_autoptr(GBytes) tokenizer = NULL;
  g_autoptr(GBytes) index_bytes = NULL;
  g_autoptr(DcSafetensorsIndex) index = NULL;
  g_autoptr(GError) local_error = NULL;
  gboolean local;
  DcRepoFile *single;

  if (!parse_spec (self, self->spec, error))
    return FALSE;
  local = self->local_dir != NULL;
  if (!local && !setup_cache (self, options, error))
    return FALSE;
  self->piece_size = options != NULL && options->piece_size > 0 ? options->piece_size
                                                                 : DC_MODEL_REPO_PIECE;
  self->piece_size = MIN (self->piece_size, (guint64) DC_HF_MAX_REQUEST);
  if (!local && options != NULL)
    {
      self->peer_file = options->peer_file;
      self->peer_file_data = options->peer_file_data;
    }

  config = get_small_file (self, "config.json", DC_HF_CONFIG_MAX_BYTES, FALSE, cancellable,
                           error);
  if (config == NULL)
    return FALSE;
  self->config = dc_hf_config_parse (g_bytes_get_data (config, NULL),
                                     (gssize) g_bytes_get_size (config), error);
  if (self->config == NULL)
    {
      g_prefix_error (error, "%s: ", describe (self));
      return FALSE;
    }
  self->config_bytes = g_bytes_ref (config);

  tokenizer = get_small_file (self, "tokenizer.json", DC_BPE_JSON_MAX_BYTES, FALSE, cancellable,
                              error);
  if (tokenizer == NULL)
    return FALSE;
  self->tokenizer = dc_bpe_tokenizer_new_from_json (g_bytes_get_data (tokenizer, NULL),
                                                    (gssize) g_bytes_get_size (tokenizer),
                                                    error);
  if (self->tokenizer == NULL)
    {
      g_prefix_error (error, "%s: ", describe (self));
      return FALSE;
    }
  self->tokenizer_bytes = g_bytes_ref (tokenizer);
  self->tokenizer_config = get_small_file (self, "tokenizer_config.json",
                                           DC_MODEL_REPO_TOKENIZER_CONFIG_MAX_BYTES, TRUE,
                                           cancellable, &local_error);
  if (local_error != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }

  /* One file, or an index and its shards. model.safetensors is tried first:
   * most small models have one file, and then no request is wasted. */
  single = repo_file_new ("model.safetensors");
  g_ptr_array_add (self->files, single);
  if (local)
    {
      g_autofree char *path = g_build_filename (self->local_dir, "model.safetensors", NULL);

      if (g_file_test (path, G_FILE_TEST_EXISTS))
        {
          if (!open_local_file (self, single, error))
            return FALSE;
        }
      else
        g_ptr_array_set_size (self->files, 0);
    }
  else if (!open_hub_file (self, single, cancellable, &local_error))
    {
      if (!g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND))
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return FALSE;
        }
      g_clear_error (&local_error);
      g_ptr_array_set_size (self->files, 0);
    }

  if (self->files->len == 0)
    {
      index_bytes = get_small_file (self, "model.safetensors.index.json",
                                    DC_SAFETENSORS_INDEX_MAX_BYTES, TRUE, cancellable,
                                    &local_error);
      if (local_error != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return FALSE;
        }
      if (index_bytes == NULL)
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                       "%s has neither model.safetensors nor model.safetensors.index.json "
                       "(only safetensors checkpoints are supported)", describe (self));
          return FALSE;
        }
      index = dc_safetensors_index_parse (g_bytes_get_data (index_bytes, NULL),
                                          (gssize) g_bytes_get_size (index_bytes), error);
      if (index == NULL)
        {
          g_prefix_error (error, "%s: ", describe (self));
          return FALSE;
        }
      self->index_bytes = g_bytes_ref (index_bytes);
      if (index->shards->len > DC_MODEL_REPO_MAX_SHARDS)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "%s: model.safetensors.index.json names %u shards, more than %u",
                       describe (self), index->shards->len, DC_MODEL_REPO_MAX_SHARDS);
          return FALSE;
        }
      for (guint i = 0; i < index->shards->len; i++)
        {
          DcRepoFile *file = repo_file_new (index->shards->pdata[i]);

          g_ptr_array_add (self->files, file);
          if (local ? !open_local_file (self, file, error)
                    : !open_hub_file (self, file, cancellable, error))
            return FALSE;
        }
    }

  if (!index_tensors (self, index, error))
    return FALSE;
  /* Only while opening: the callback's data is the caller's. */
  self->peer_file = NULL;
  self->peer_file_data = NULL;
  if (!local && !check_cache_limit (self, error))
    return FALSE;
  return TRUE;
}

static DcModelRepo *
open_internal (DcHfClient                *client,
               const char                *spec,
               const DcModelRepoOptions  *options,
               GMainContext              *main_context,
               GCancellable              *cancellable,
               GError                   **error)
{
  g_autoptr(DcModelRepo) self = g_object_new (DC_TYPE_MODEL_REPO, NULL);

  self->spec = g_strdup (spec);
  self->client = g_object_ref (client);
  self->main_context = g_main_context_ref (main_context);
  if (!repo_open (self, options, cancellable, error))
    return NULL;
  if (self->local_dir != NULL)
    g_clear_object (&self->client);
  return g_steal_pointer (&self);
}

/**
 * dc_model_repo_open_full:
 * @client: reaches the Hub (its base URL follows `$HF_ENDPOINT`; its token,
 *   if any, is sent only there)
 * @spec: "owner/name", "owner/name@revision", or a local folder
 * @options: (nullable): where to cache and how much; %NULL for the defaults
 *
 * Reads config.json, tokenizer.json, tokenizer_config.json (when present),
 * model.safetensors.index.json (when sharded) and the safetensors headers;
 * no weights. Refuses, each with a clear error: an unsupported architecture
 * or tokenizer (%DC_MODEL_ERROR_UNSUPPORTED), a server that ignores byte
 * ranges (%DC_DATA_ERROR_RANGE_IGNORED), a truncated file or a header that
 * lies about sizes (%DC_MODEL_ERROR_FORMAT), 401 and 403
 * (%DC_DATA_ERROR_UNAUTHORIZED, %DC_DATA_ERROR_FORBIDDEN), weights above the
 * cache limit (%DC_DATA_ERROR_TOO_LARGE). Blocks.
 *
 * Returns: (transfer full): the model, or %NULL
 */
DcModelRepo *
dc_model_repo_open_full (DcHfClient                *client,
                         const char                *spec,
                         const DcModelRepoOptions  *options,
                         GCancellable              *cancellable,
                         GError                   **error)
{
  g_autoptr(GMainContext) context = g_main_context_ref_thread_default ();

  g_return_val_if_fail (DC_IS_HF_CLIENT (client), NULL);
  g_return_val_if_fail (spec != NULL, NULL);

  return open_internal (client, spec, options, context, cancellable, error);
}

DcModelRepo *
dc_model_repo_open (DcHfClient    *client,
                    const char    *spec,
                    GCancellable  *cancellable,
                    GError       **error)
{
  return dc_model_repo_open_full (client, spec, NULL, cancellable, error);
}

typedef struct
{
  DcHfClient         *client;
  char               *spec;
  GMainContext       *context;
  DcModelRepoOptions  options;    /* cache_dir owned */
  gboolean            has_options;
} OpenData;

static void
open_data_free (OpenData *data)
{
  g_clear_object (&data->client);
  g_free (data->spec);
  g_free ((char *) data->options.cache_dir);
  g_clear_pointer (&data->context, g_main_context_unref);
  g_free (data);
}

static void
open_worker (GTask        *task,
             gpointer      source_object,
             gpointer      task_data,
             GCancellable *cancellable)
{
  OpenData *data = task_data;
  GError *error = NULL;
  DcModelRepo *repo;

  repo = open_internal (data->client, data->spec, data->has_options ? &data->options : NULL,
                        data->context, cancellable, &error);
  if (repo == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, repo, g_object_unref);
}

/**
 * dc_model_repo_open_async:
 *
 * dc_model_repo_open() in a worker thread; @callback runs on the caller's
 * thread-default main context, where `bytes-downloaded` is notified too.
 */
void
dc_model_repo_open_async (DcHfClient          *client,
                          const char          *spec,
                          GCancellable        *cancellable,
                          GAsyncReadyCallback  callback,
                          gpointer             user_data)
{
  dc_model_repo_open_full_async (client, spec, NULL, cancellable, callback, user_data);
}

/**
 * dc_model_repo_open_full_async:
 * @options: (nullable): copied; as for dc_model_repo_open_full ()
 *
 * dc_model_repo_open_full () in a worker thread (the application's cache
 * folder and limit); finish with dc_model_repo_open_finish ().
 */
void
dc_model_repo_open_full_async (DcHfClient               *client,
                               const char               *spec,
                               const DcModelRepoOptions *options,
                               GCancellable             *cancellable,
                               GAsyncReadyCallback       callback,
                               gpointer                  user_data)
{
  g_autoptr(GTask) task = NULL;
  OpenData *data;

  g_return_if_fail (DC_IS_HF_CLIENT (client));
  g_return_if_fail (spec != NULL);

  task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, dc_model_repo_open_async);
  data = g_new0 (OpenData, 1);
  data->client = g_object_ref (client);
  data->spec = g_strdup (spec);
  data->context = g_main_context_ref_thread_default ();
  if (options != NULL)
    {
      data->options = *options;
      data->options.cache_dir = g_strdup (options->cache_dir);
      data->has_options = TRUE;
    }
  g_task_set_task_data (task, data, (GDestroyNotify) open_data_free);
  g_task_run_in_thread (task, open_worker);
}

/**
 * dc_model_repo_open_finish:
 *
 * Returns: (transfer full): the model, or %NULL
 */
DcModelRepo *
dc_model_repo_open_finish (GAsyncResult  *result,
                           GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* DcTensorSource ------------------------------------------------------------ */

static const DcSafetensorsTensor *
dc_model_repo_lookup (DcTensorSource *source,
                      const char     *name)
{
  DcModelRepo *self = DC_MODEL_REPO (source);
  DcRepoFile *file = g_hash_table_lookup (self->by_name, name);

  return file != NULL ? dc_safetensors_lookup (file->st, name) : NULL;
}

static gboolean
dc_model_repo_read (DcTensorSource             *source,
                    const DcSafetensorsTensor  *t,
                    guint8                     *dst,
                    GCancellable               *cancellable,
                    GError                    **error)
{
  DcModelRepo *self = DC_MODEL_REPO (source);
  DcRepoFile *file = g_hash_table_lookup (self->by_tensor, t);

  if (file == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "tensor “%s” is not one of %s's", t->name, describe (self));
      return FALSE;
    }
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  if (self->local_dir != NULL)
    {
      if (!_dc_model_repo_pread_all (file->fd, dst, (gsize) (t->end - t->begin),
                                     file->st->data_start + t->begin))
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "%s ended before the bytes of tensor “%s” (was it truncated after "
                       "the model was opened?)", file->path, t->name);
          return FALSE;
        }
      return TRUE;
    }
  return _dc_model_repo_read_hub_tensor (self, file, t, dst, cancellable, error);
}

static void
dc_model_repo_tensor_source_init (DcTensorSourceInterface *iface)
{
  iface->lookup = dc_model_repo_lookup;
  iface->read = dc_model_repo_read;
}

/* Getters ----------------------------------------------------------------- */

const char *
dc_model_repo_get_spec (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  return self->spec;
}

gboolean
dc_model_repo_is_local (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), FALSE);
  return self->local_dir != NULL;
}

const DcHfConfig *
dc_model_repo_get_config (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  return self->config;
}

/**
 * dc_model_repo_get_tokenizer:
 *
 * Returns: (transfer none): the tokenizer (immutable; any thread may use it)
 */
DcBpeTokenizer *
dc_model_repo_get_tokenizer (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  return self->tokenizer;
}

/* The dtype holding most of the weights' bytes ("BF16"; a checkpoint with
 * F32 norms and BF16 matrices is "BF16"). */
const char *
dc_model_repo_get_dtype (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  return self->dtype;
}

/* Every tensor's bytes in every safetensors file: what loading moves (the
 * architectures' checkpoints hold only what the model reads). */
guint64
dc_model_repo_get_weight_bytes (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), 0);
  return self->weight_bytes;
}

/* Weight bytes fetched from the server by this object (cache hits are not). */
guint64
dc_model_repo_get_bytes_downloaded (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), 0);
  return __atomic_load_n (&self->bytes_downloaded, __ATOMIC_RELAXED);
}

void
dc_model_repo_set_peer_fetch (DcModelRepo          *self,
                              DcModelRepoPeerFetch  fetch,
                              gpointer              user_data,
                              GDestroyNotify        destroy)
{
  g_return_if_fail (DC_IS_MODEL_REPO (self));
  g_return_if_fail (self->peer_fetch == NULL);

  if (self->local_dir != NULL)
    {
      if (destroy != NULL)
        destroy (user_data);
      return;
    }
  self->peer_fetch = fetch;
  self->peer_data = user_data;
  self->peer_destroy = destroy;
}

guint64
dc_model_repo_get_bytes_from_peer (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), 0);
  return __atomic_load_n (&self->bytes_from_peer, __ATOMIC_RELAXED);
}

char *
dc_model_repo_dup_peer_refusal (DcModelRepo *self)
{
  char *refusal;

  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  g_mutex_lock (&self->lock);
  refusal = g_strdup (self->peer_refusal);
  g_mutex_unlock (&self->lock);
  return refusal;
}

gboolean
dc_model_repo_range_in_tensors (DcModelRepo *self,
                                const char  *file,
                                guint64      begin,
                                guint64      end,
                                GPtrArray   *tensors)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self) && file != NULL && tensors != NULL, FALSE);

  for (guint i = 0; i < tensors->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (tensors, i);
      DcRepoFile *f = g_hash_table_lookup (self->by_tensor, t);

      if (f != NULL && g_str_equal (f->name, file) && begin >= t->begin && end <= t->end &&
          begin < end)
        return TRUE;
    }
  return FALSE;
}

GBytes *
dc_model_repo_dup_opened_file (DcModelRepo  *self,
                               const char   *name,
                               gboolean      header,
                               guint64      *file_size,
                               GError      **error)
{
  GBytes *bytes = NULL;

  g_return_val_if_fail (DC_IS_MODEL_REPO (self) && name != NULL, NULL);

  if (header)
    {
      for (guint i = 0; i < self->files->len; i++)
        {
          DcRepoFile *file = g_ptr_array_index (self->files, i);

          if (!g_str_equal (file->name, name))
            continue;
          if (file->header_bytes == NULL)
            {
              /* A local folder's headers were parsed in place, not kept. */
              g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                           "the header of %s was not kept", name);
              return NULL;
            }
          if (file_size != NULL)
            *file_size = file->file_size;
          return g_bytes_ref (file->header_bytes);
        }
    }
  else if (g_str_equal (name, "config.json"))
    bytes = self->config_bytes;
  else if (g_str_equal (name, "tokenizer.json"))
    bytes = self->tokenizer_bytes;
  else if (g_str_equal (name, "tokenizer_config.json"))
    bytes = self->tokenizer_config;
  else if (g_str_equal (name, "model.safetensors.index.json"))
    bytes = self->index_bytes;
  else
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "“%s” is not a file a stage asks for", name);
      return NULL;
    }
  if (bytes == NULL)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND, "%s has no %s%s",
                   describe (self), header ? "header of " : "", name);
      return NULL;
    }
  if (file_size != NULL)
    *file_size = g_bytes_get_size (bytes);
  return g_bytes_ref (bytes);
}

/**
 * dc_model_repo_get_cache_dir:
 *
 * Returns: (nullable): this model's cache folder; %NULL for a local folder
 */
const char *
dc_model_repo_get_cache_dir (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  return self->cache_dir;
}

/**
 * dc_model_repo_get_tokenizer_config:
 *
 * Returns: (transfer none) (nullable): the bytes of tokenizer_config.json
 *   (untrusted JSON, at most 1 MiB), or %NULL when the model has none
 */
GBytes *
dc_model_repo_get_tokenizer_config (DcModelRepo *self)
{
  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);
  return self->tokenizer_config;
}

/**
 * dc_model_repo_get_memory_bytes:
 * @context: positions the KV cache holds
 *
 * An estimate of the memory one device needs to run the model, from the
 * config alone (P parameters, L layers, hidden H, query width Q = heads ×
 * head_dim, key-value width K = kv_heads × head_dim, FFN F, vocabulary V,
 * context C):
 *
 *   weights      P bytes (INT8) + 4 × P / H (an f32 scale per weight row)
 *   KV cache     2 × L × C × K × 4 (f32 keys and values)
 *   activations  4 × (C × (4H + Q + 2K + 2F + heads × C) + V)
 *                (f32: residual, norms, attention and MLP outputs, q/k/v,
 *                gate and up, one layer's scores, the logits)
 */
guint64
dc_model_repo_get_memory_bytes (DcModelRepo *self,
                                guint        context)
{
  const DcHfConfig *c;
  guint64 p, h, q, k, f, v, l, heads, ctx;

  g_return_val_if_fail (DC_IS_MODEL_REPO (self), 0);
  c = self->config;
  p = dc_hf_config_n_params (c);
  h = MAX (c->hidden_size, 1);
  q = (guint64) c->n_heads * c->head_dim;
  k = (guint64) c->n_kv_heads * c->head_dim;
  f = c->intermediate_size;
  v = c->vocab_size;
  l = c->n_layers;
  heads = c->n_heads;
  ctx = context;
  return p + 4 * p / h + 2 * l * ctx * k * 4
         + 4 * (ctx * (4 * h + q + 2 * k + 2 * f + heads * ctx) + v);
}

static char *
format_params (guint64 n)
{
  if (n >= 1000000000)
    return g_strdup_printf ("%.1f B", (double) n / 1e9);
  if (n >= 10000000)
    return g_strdup_printf ("%.0f M", (double) n / 1e6);
  if (n >= 1000000)
    return g_strdup_printf ("%.1f M", (double) n / 1e6);
  return g_strdup_printf ("%.0f K", (double) n / 1e3);
}

/**
 * dc_model_repo_dup_summary:
 *
 * What the model dialog shows before the user confirms, e.g.
 * “LlamaForCausalLM, 30 layers, 135 M parameters, byte-level BPE tokenizer
 * (49152 tokens), BF16, download 269.1 MB, memory 150.2 MB”.
 *
 * Returns: (transfer full): the summary
 */
char *
dc_model_repo_dup_summary (DcModelRepo *self)
{
  g_autofree char *params = NULL;
  g_autofree char *weights = NULL;
  g_autofree char *memory = NULL;

  g_return_val_if_fail (DC_IS_MODEL_REPO (self), NULL);

  params = format_params (dc_hf_config_n_params (self->config));
  weights = g_format_size (self->weight_bytes);
  memory = g_format_size (dc_model_repo_get_memory_bytes (self, DC_MODEL_REPO_SUMMARY_CONTEXT));
  return g_strdup_printf ("%s, %u layers, %s parameters, byte-level BPE tokenizer "
                          "(%u tokens), %s, %s %s, memory %s",
                          self->config->architecture, self->config->n_layers, params,
                          dc_bpe_tokenizer_get_vocab_size (self->tokenizer), self->dtype,
                          self->local_dir != NULL ? "on disk" : "download", weights, memory);
}
