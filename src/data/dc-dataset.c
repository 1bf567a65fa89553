/* dc-dataset.c: a Hugging Face dataset streamed as training text.
 *
 * Order of reading: the file order is a permutation of the sorted file list;
 * inside each file, the row groups are permuted again, and device `rank` of
 * `world` keeps the positions p with p % world == rank. Every device
 * computes the same permutations from the group seed (and the epoch), so
 * the devices' row groups are disjoint and together cover the dataset.
 * Permutations use splitmix64 (a fixed, documented generator) rather than
 * GRand so that they cannot change with a library version.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-dataset.h"
#include "dc-dataset-private.h"

#include <string.h>

#include "dc-corpus.h"
#include "dc-data-error.h"
#include "dc-hf-url.h"
#include "dc-parquet-file.h"

#define MAX_LIST_DEPTH 4
#define MAX_LIST_ENTRIES 100000

static guint64
splitmix64 (guint64 *state)
{
  guint64 z = (*state += G_GUINT64_CONSTANT (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/**
 * dc_dataset_plan:
 * @seed: the group seed (the same on every device)
 * @stream_id: what is permuted (a file index, or a constant for the file list)
 * @n_items: how many items
 * @rank: this device's rank, below @world
 * @out: (element-type guint): receives this device's items, in reading order
 *
 * The permutation of @n_items for (@seed, @stream_id), restricted to the
 * positions p with p % @world == @rank.
 */
void
dc_dataset_plan (guint64  seed,
                 guint64  stream_id,
                 guint    n_items,
                 guint    rank,
                 guint    world,
                 GArray  *out)
{
  g_autofree guint *perm = g_new (guint, MAX (n_items, 1));
  guint64 state = seed ^ (stream_id * G_GUINT64_CONSTANT (0xd1b54a32d192ed03));

  g_return_if_fail (world > 0 && rank < world);

  for (guint i = 0; i < n_items; i++)
    perm[i] = i;
  /* Fisher–Yates; the index is the high half of a 32×32 product, unbiased
   * enough for ordering data and the same on every machine. */
  for (guint i = n_items; i > 1; i--)
    {
      guint j = (guint) (((splitmix64 (&state) >> 32) * (guint64) i) >> 32);
      guint t = perm[i - 1];

      perm[i - 1] = perm[j];
      perm[j] = t;
    }
  g_array_set_size (out, 0);
  for (guint p = rank; p < n_items; p += world)
    g_array_append_val (out, perm[p]);
}

static gboolean
valid_name (const char *s)
{
  if (s == NULL || *s == '\0' || g_str_equal (s, ".") || g_str_equal (s, ".."))
    return FALSE;
  for (; *s != '\0'; s++)
    if (!g_ascii_isalnum (*s) && *s != '-' && *s != '_' && *s != '.')
      return FALSE;
  return TRUE;
}

/**
 * dc_dataset_spec_parse:
 * @text: "owner/name[@revision][/folder…]"
 *
 * Returns: (transfer full): the parsed spec, or %NULL with @error set
 */
DcDatasetSpec *
dc_dataset_spec_parse (const char  *text,
                       GError     **error)
{
  g_auto(GStrv) parts = g_strsplit (text != NULL ? text : "", "/", 3);
  g_autoptr(DcDatasetSpec) spec = g_new0 (DcDatasetSpec, 1);
  char *at;

  if (g_strv_length (parts) < 2)
    goto invalid;
  at = strchr (parts[1], '@');
  if (at != NULL)
    {
      *at = '\0';
      spec->revision = g_strdup (at + 1);
      if (*spec->revision == '\0')
        goto invalid;
    }
  else
    {
      spec->revision = g_strdup (DC_HF_DEFAULT_REVISION);
    }
  if (!valid_name (parts[0]) || !valid_name (parts[1]))
    goto invalid;
  spec->repo = g_strconcat (parts[0], "/", parts[1], NULL);
  spec->folder = g_strdup (parts[2] != NULL ? parts[2] : "");
  while (g_str_has_suffix (spec->folder, "/"))
    spec->folder[strlen (spec->folder) - 1] = '\0';
  if (strstr (spec->folder, "..") != NULL)
    goto invalid;
  return g_steal_pointer (&spec);

invalid:
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_FAILED,
               "“%s” is not a dataset: write owner/name, optionally @revision and "
               "/folder (e.g. %s)", text != NULL ? text : "", DC_DATASET_DEFAULT);
  return NULL;
}

/**
 * dc_dataset_spec_copy:
 *
 * Returns: (transfer full): a copy of @spec
 */
DcDatasetSpec *
dc_dataset_spec_copy (const DcDatasetSpec *spec)
{
  DcDatasetSpec *copy = g_new0 (DcDatasetSpec, 1);

  copy->repo = g_strdup (spec->repo);
  copy->folder = g_strdup (spec->folder);
  copy->revision = g_strdup (spec->revision);
  return copy;
}

void
dc_dataset_spec_free (DcDatasetSpec *spec)
{
  if (spec == NULL)
    return;
  g_free (spec->repo);
  g_free (spec->folder);
  g_free (spec->revision);
  g_free (spec);
}

void
dc_dataset_file_free (DcDatasetFile *file)
{
  if (file == NULL)
    return;
  g_free (file->path);
  g_free (file);
}

static gboolean
list_folder (DcHfClient           *client,
             const DcDatasetSpec  *spec,
             const char           *folder,
             guint                 depth,
             GPtrArray            *files,
             guint                *n_entries,
             GCancellable         *cancellable,
             GError              **error)
{
  g_autofree char *url = dc_hf_url_dataset_tree (dc_hf_client_get_base_url (client), spec->repo,
                                                 spec->revision, folder);
  guint pages = 0;

  /* The tree API answers in pages linked by `Link: rel="next"`. */
  while (url != NULL)
    {
      g_autofree char *next = NULL;
      g_autoptr(JsonNode) root = dc_hf_client_get_json_page (client, url, &next, cancellable,
                                                             error);
      JsonArray *array;

      if (root == NULL)
        return FALSE;
      if (++pages > DC_HF_MAX_LIST_PAGES)
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                       "the file listing of dataset “%s” has more than %u pages", spec->repo,
                       DC_HF_MAX_LIST_PAGES);
          return FALSE;
        }
      if (!JSON_NODE_HOLDS_ARRAY (root))
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                       "the file listing of dataset “%s” is not a JSON array", spec->repo);
          return FALSE;
        }
      array = json_node_get_array (root);
      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          JsonNode *node = json_array_get_element (array, i);
          JsonObject *entry;
          const char *type;
          const char *path;

          if (++*n_entries > MAX_LIST_ENTRIES)
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                           "dataset “%s” lists more than %u entries", spec->repo,
                           MAX_LIST_ENTRIES);
              return FALSE;
            }
          if (!JSON_NODE_HOLDS_OBJECT (node))
            continue;
          entry = json_node_get_object (node);
          type = json_object_get_string_member_with_default (entry, "type", NULL);
          path = json_object_get_string_member_with_default (entry, "path", NULL);
          if (type == NULL || path == NULL)
            continue;
          if (g_str_equal (type, "directory") && depth < MAX_LIST_DEPTH)
            {
              if (!list_folder (client, spec, path, depth + 1, files, n_entries, cancellable,
                                error))
                return FALSE;
            }
          else if (g_str_equal (type, "file") && g_str_has_suffix (path, ".parquet"))
            {
              DcDatasetFile *file = g_new0 (DcDatasetFile, 1);
              gint64 size = json_object_get_int_member_with_default (entry, "size", 0);

              file->path = g_strdup (path);
              file->size = size > 0 ? (guint64) size : 0;
              g_ptr_array_add (files, file);
            }
        }
      g_free (url);
      url = g_steal_pointer (&next);
    }
  return TRUE;
}

static int
compare_files (gconstpointer a,
               gconstpointer b)
{
  const DcDatasetFile *x = *(DcDatasetFile * const *) a;
  const DcDatasetFile *y = *(DcDatasetFile * const *) b;

  return strcmp (x->path, y->path);
}

/**
 * dc_dataset_list_files:
 *
 * Lists the parquet files under the spec's folder (recursively, a few
 * levels deep), sorted by path so that every device sees the same order.
 *
 * Returns: (transfer full) (element-type DcDatasetFile): the files
 */
GPtrArray *
dc_dataset_list_files (DcHfClient           *client,
                       const DcDatasetSpec  *spec,
                       GCancellable         *cancellable,
                       GError              **error)
{
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_dataset_file_free);
  guint n_entries = 0;

  if (!list_folder (client, spec, spec->folder, 0, files, &n_entries, cancellable, error))
    return NULL;
  g_ptr_array_sort (files, compare_files);
  return g_steal_pointer (&files);
}

struct _DcTextStream
{
  /* owned references */
  DcHfClient    *client;
  DcDatasetSpec *spec;
  char          *dataset;
  char          *column_name;
  GPtrArray     *files;        /* DcDatasetFile */
  DcParquetFile *file;
  GArray        *file_order;
  GArray        *group_order;
  GPtrArray     *texts;        /* GBytes of the current slice of a row group */
  DcByteSource  *local_source; /* a single local file instead of the Hub (tests) */
  GBytes        *corpus;
  GArray        *paragraphs;   /* offsets: start, end pairs into corpus */
  GByteArray    *pending;      /* bytes not yet put in a batch */

  /* state */
  guint          rank;
  guint          world;
  guint64        seed;
  guint          epoch;
  guint          file_pos;
  guint          group_pos;
  guint          text_pos;
  guint          paragraph_pos;
  guint          groups_this_epoch;
  guint          texts_epoch;  /* the epoch stream->texts was planned in */
  int            column;
  guint          group;        /* the row group being read, while in_group */
  guint64        group_row;    /* its next row to read */
  guint          builtin : 1;
  guint          in_group : 1;
};

void
dc_text_stream_free (DcTextStream *stream)
{
  if (stream == NULL)
    return;
  g_clear_object (&stream->client);
  g_clear_pointer (&stream->spec, dc_dataset_spec_free);
  g_free (stream->dataset);
  g_free (stream->column_name);
  g_clear_pointer (&stream->files, g_ptr_array_unref);
  g_clear_pointer (&stream->file, dc_parquet_file_free);
  g_clear_pointer (&stream->file_order, g_array_unref);
  g_clear_pointer (&stream->group_order, g_array_unref);
  g_clear_pointer (&stream->texts, g_ptr_array_unref);
  g_clear_pointer (&stream->corpus, g_bytes_unref);
  g_clear_pointer (&stream->paragraphs, g_array_unref);
  g_clear_pointer (&stream->pending, g_byte_array_unref);
  g_clear_pointer (&stream->local_source, dc_byte_source_unref);
  g_free (stream);
}

static DcTextStream *
stream_alloc (guint rank,
              guint world)
{
  DcTextStream *stream = g_new0 (DcTextStream, 1);

  stream->rank = rank;
  stream->world = world;
  stream->file_order = g_array_new (FALSE, FALSE, sizeof (guint));
  stream->group_order = g_array_new (FALSE, FALSE, sizeof (guint));
  stream->texts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  stream->pending = g_byte_array_new ();
  stream->column = -1;
  return stream;
}

/**
 * dc_text_stream_new:
 * @client: the Hub client (base URL, token)
 * @dataset: (nullable): a dataset spec; %NULL is %DC_DATASET_DEFAULT
 * @column: (nullable): the text column; %NULL is "text"
 * @rank: this device's rank in the group, below @world
 * @seed: the group seed
 *
 * Nothing is fetched until the first dc_text_stream_next().
 *
 * Returns: (transfer full): the stream
 */
DcTextStream *
dc_text_stream_new (DcHfClient *client,
                    const char *dataset,
                    const char *column,
                    guint       rank,
                    guint       world,
                    guint64     seed)
{
  DcTextStream *stream;

  g_return_val_if_fail (DC_IS_HF_CLIENT (client), NULL);
  g_return_val_if_fail (world > 0 && rank < world, NULL);

  stream = stream_alloc (rank, world);
  stream->client = g_object_ref (client);
  stream->dataset = g_strdup (dataset != NULL ? dataset : DC_DATASET_DEFAULT);
  stream->column_name = g_strdup (column != NULL ? column : "text");
  stream->seed = seed;
  return stream;
}

/**
 * dc_text_stream_new_for_spec:
 * @spec: a dataset spec the caller parsed already (it is copied)
 *
 * dc_text_stream_new () for a parsed spec: the text is not parsed again.
 *
 * Returns: (transfer full): the stream
 */
DcTextStream *
dc_text_stream_new_for_spec (DcHfClient          *client,
                             const DcDatasetSpec *spec,
                             const char          *column,
                             guint                rank,
                             guint                world,
                             guint64              seed)
{
  DcTextStream *stream;

  g_return_val_if_fail (spec != NULL, NULL);

  stream = dc_text_stream_new (client, spec->repo, column, rank, world, seed);
  stream->spec = dc_dataset_spec_copy (spec);
  return stream;
}

static void
switch_to_builtin (DcTextStream *stream)
{
  const char *data;
  gsize len;
  gsize start = 0;

  stream->builtin = TRUE;
  stream->corpus = dc_corpus_dup_builtin ();
  stream->paragraphs = g_array_new (FALSE, FALSE, sizeof (gsize));
  data = g_bytes_get_data (stream->corpus, &len);
  /* Paragraphs are separated by blank lines. */
  while (start < len)
    {
      const char *hit = g_strstr_len (data + start, (gssize) (len - start), "\n\n");
      gsize end = hit != NULL ? (gsize) (hit - data) : len;

      if (end > start)
        {
          g_array_append_val (stream->paragraphs, start);
          g_array_append_val (stream->paragraphs, end);
        }
      start = end;
      while (start < len && data[start] == '\n')
        start++;
    }
  stream->paragraph_pos = stream->rank;
}

/**
 * dc_text_stream_new_builtin:
 *
 * A stream over the built-in corpus; device @rank takes every @world-th
 * paragraph, starting at its rank, round and round.
 *
 * Returns: (transfer full): the stream
 */
DcTextStream *
dc_text_stream_new_builtin (guint rank,
                            guint world)
{
  DcTextStream *stream;

  g_return_val_if_fail (world > 0 && rank < world, NULL);
  stream = stream_alloc (rank, world);
  switch_to_builtin (stream);
  return stream;
}

gboolean
dc_text_stream_is_builtin (DcTextStream *stream)
{
  return stream->builtin;
}

/**
 * dc_text_stream_get_epoch:
 *
 * Returns: how many times the device's share had been read in full before
 *   the text last returned (0 during the first pass); 0 for the built-in corpus
 */
guint
dc_text_stream_get_epoch (DcTextStream *stream)
{
  return stream->builtin ? 0 : stream->texts_epoch;
}

static void
collect_text_cb (const char *data,
                 gsize       len,
                 gpointer    user_data)
{
  DcTextStream *stream = user_data;

  if (data != NULL && len > 0)
    g_ptr_array_add (stream->texts, g_bytes_new (data, len));
}

/* Loads the next slice of this device's current row group into
 * stream->texts, moving on to the next row group when it is all read. */
static gboolean
refill (DcTextStream  *stream,
        GCancellable  *cancellable,
        GError       **error)
{
  if (stream->files == NULL && stream->local_source != NULL)
    {
      DcDatasetFile *file = g_new0 (DcDatasetFile, 1);

      file->path = g_strdup (dc_byte_source_get_name (stream->local_source));
      stream->files = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_dataset_file_free);
      g_ptr_array_add (stream->files, file);
      g_array_set_size (stream->file_order, 1);
      g_array_index (stream->file_order, guint, 0) = 0;
    }
  if (stream->files == NULL)
    {
      g_autoptr(GPtrArray) files = NULL;

      if (stream->spec == NULL)
        {
          stream->spec = dc_dataset_spec_parse (stream->dataset, error);
          if (stream->spec == NULL)
            return FALSE;
        }
      files = dc_dataset_list_files (stream->client, stream->spec, cancellable, error);
      if (files == NULL)
        return FALSE;
      if (files->len == 0)
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                       "dataset “%s” has no parquet files under “%s”", stream->spec->repo,
                       stream->spec->folder);
          return FALSE;
        }
      stream->files = g_steal_pointer (&files);
      dc_dataset_plan (stream->seed, G_MAXUINT64, stream->files->len, 0, 1, stream->file_order);
    }

  for (;;)
    {
      if (stream->file != NULL && !stream->in_group
          && stream->group_pos < stream->group_order->len)
        {
          stream->group = g_array_index (stream->group_order, guint, stream->group_pos++);
          stream->group_row = 0;
          stream->in_group = TRUE;
          stream->groups_this_epoch++;
        }
      if (stream->file != NULL && stream->in_group)
        {
          guint64 n_rows = 0;
          gboolean finished = FALSE;

          g_ptr_array_set_size (stream->texts, 0);
          stream->text_pos = 0;
          stream->texts_epoch = stream->epoch;
          /* Only a slice of the row group is copied: a row group may hold
           * gigabytes of text, and the trainer wants 8 MiB. */
          if (!dc_parquet_file_read_rows (stream->file, stream->column, stream->group,
                                          stream->group_row, DC_TEXT_STREAM_SLICE_BYTES,
                                          collect_text_cb, stream, &n_rows, &finished,
                                          cancellable, error))
            return FALSE;
          stream->group_row += n_rows;
          /* A slice that moved nothing cannot move later either. */
          if (finished || n_rows == 0)
            stream->in_group = FALSE;
          return TRUE;
        }
      g_clear_pointer (&stream->file, dc_parquet_file_free);

      if (stream->file_pos >= stream->files->len)
        {
          if (stream->groups_this_epoch == 0)
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                           "dataset “%s” has fewer row groups than the %u devices reading it",
                           stream->spec != NULL ? stream->spec->repo : stream->dataset,
                           stream->world);
              return FALSE;
            }
          /* A new epoch reads everything again in a new order. */
          stream->epoch++;
          stream->file_pos = 0;
          stream->groups_this_epoch = 0;
          dc_dataset_plan (stream->seed + stream->epoch, G_MAXUINT64, stream->files->len, 0, 1,
                           stream->file_order);
        }

      {
        guint index = g_array_index (stream->file_order, guint, stream->file_pos++);
        DcDatasetFile *entry = g_ptr_array_index (stream->files, index);
        g_autofree char *url = stream->local_source != NULL
                               ? NULL
                               : dc_hf_url_dataset_file (dc_hf_client_get_base_url (stream->client),
                                                         stream->spec->repo,
                                                         stream->spec->revision, entry->path);
        g_autoptr(DcByteSource) source = stream->local_source != NULL
                                         ? dc_byte_source_ref (stream->local_source)
                                         : dc_hf_client_open_source (stream->client, url);

        stream->file = dc_parquet_file_open (source, cancellable, error);
        if (stream->file == NULL)
          return FALSE;
        stream->column = dc_parquet_file_find_text_column (stream->file, stream->column_name,
                                                           error);
        if (stream->column < 0)
          return FALSE;
        dc_dataset_plan (stream->seed + stream->epoch, index,
                         dc_parquet_file_get_meta (stream->file)->n_row_groups,
                         stream->rank, stream->world, stream->group_order);
        stream->group_pos = 0;
      }
    }
}

/**
 * dc_text_stream_next:
 *
 * Returns the next text of this device's share. On the first failure to
 * reach the dataset (network, HTTP, a damaged file) the stream logs
 * %DC_DATASET_UNREACHABLE_MESSAGE and continues with the built-in corpus;
 * a dataset without the wanted text column, or one refused with 401/403
 * (%DC_DATA_ERROR_UNAUTHORIZED, %DC_DATA_ERROR_FORBIDDEN: a token would
 * answer it), is an error, not a fallback.
 *
 * Returns: (transfer full): the text, or %NULL on error or cancellation
 */
GBytes *
dc_text_stream_next (DcTextStream  *stream,
                     GCancellable  *cancellable,
                     GError       **error)
{
  while (!stream->builtin && stream->text_pos >= stream->texts->len)
    {
      g_autoptr(GError) local_error = NULL;

      if (refill (stream, cancellable, &local_error))
        continue;
      /* A 401/403 is not "unreachable": a token (the app's token dialog)
       * answers it, and training on the built-in corpus instead would hide
       * that the dataset chosen was never read. */
      if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
          || g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN)
          || g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED)
          || g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_FORBIDDEN))
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      g_message (DC_DATASET_UNREACHABLE_MESSAGE);
      g_debug ("dataset failure: %s", local_error->message);
      g_clear_pointer (&stream->file, dc_parquet_file_free);
      switch_to_builtin (stream);
    }

  if (stream->builtin)
    {
      guint n = stream->paragraphs->len / 2;
      guint i = stream->paragraph_pos % n;
      gsize start = g_array_index (stream->paragraphs, gsize, 2 * i);
      gsize end = g_array_index (stream->paragraphs, gsize, 2 * i + 1);

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return NULL;
      stream->paragraph_pos = (stream->paragraph_pos + stream->world) % (n * stream->world);
      return g_bytes_new_from_bytes (stream->corpus, start, end - start);
    }

  return g_bytes_ref (g_ptr_array_index (stream->texts, stream->text_pos++));
}

/**
 * dc_text_stream_fill_batch:
 * @batch: rows in the batch
 * @seq_len: tokens per training sequence (T)
 * @tokens: (out caller-allocates): @batch × (@seq_len + 1) bytes, row-major;
 *   row b holds byte tokens x[0..T], its inputs are x[0..T-1] and its
 *   targets x[1..T]
 *
 * Texts are joined with a blank line ("\n\n") and cut into consecutive,
 * non-overlapping windows of T + 1 bytes (byte-level vocabulary of 256).
 */
gboolean
dc_text_stream_fill_batch (DcTextStream  *stream,
                           guint          batch,
                           guint          seq_len,
                           guint8        *tokens,
                           GCancellable  *cancellable,
                           GError       **error)
{
  gsize row = (gsize) seq_len + 1;
  gsize need = row * batch;

  g_return_val_if_fail (tokens != NULL || need == 0, FALSE);

  while (stream->pending->len < need)
    {
      g_autoptr(GBytes) text = dc_text_stream_next (stream, cancellable, error);
      gsize len;
      const guint8 *data;

      if (text == NULL)
        return FALSE;
      data = g_bytes_get_data (text, &len);
      g_byte_array_append (stream->pending, data, (guint) len);
      g_byte_array_append (stream->pending, (const guint8 *) "\n\n", 2);
    }
  memcpy (tokens, stream->pending->data, need);
  g_byte_array_remove_range (stream->pending, 0, (guint) need);
  return TRUE;
}

/* Test hooks (dc-dataset-private.h). */

DcTextStream *
_dc_text_stream_new_for_source (DcByteSource *source,
                                const char   *column,
                                guint         rank,
                                guint         world,
                                guint64       seed)
{
  DcTextStream *stream;

  g_return_val_if_fail (source != NULL, NULL);
  g_return_val_if_fail (world > 0 && rank < world, NULL);

  stream = stream_alloc (rank, world);
  stream->local_source = dc_byte_source_ref (source);
  stream->dataset = g_strdup (dc_byte_source_get_name (source));
  stream->column_name = g_strdup (column != NULL ? column : "text");
  stream->seed = seed;
  return stream;
}

gsize
_dc_text_stream_get_buffered_bytes (DcTextStream *stream)
{
  gsize total = 0;

  for (guint i = 0; i < stream->texts->len; i++)
    total += g_bytes_get_size (g_ptr_array_index (stream->texts, i));
  return total;
}
