/* dc-parquet-file.c: reading text columns of a parquet file by byte ranges.
 *
 * A parquet file ends with the serialized FileMetaData, its length (4 bytes,
 * little-endian) and the magic "PAR1"; it also starts with "PAR1". The
 * footer is validated (magic, length against the file size) before the
 * metadata is parsed, and every chunk range is checked against the size.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-parquet-file.h"

#include <string.h>

#include "dc-data-error.h"

/* Parquet's 4-byte lengths are little-endian and unaligned. */
static inline guint32
read_le32 (const guint8 *p)
{
  guint32 v;

  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_LE (v);
}

/* Row groups read per batch of range requests: bounds the memory held. */
#define BATCH_BYTES (64u * 1024u * 1024u)

struct _DcParquetFile
{
  DcByteSource         *source;
  guint64               size;
  DcParquetMeta        *meta;
  DcParquetPageDecoder *decoder;

  /* The chunk dc_parquet_file_read_rows() read last, kept so that reading
   * it a slice at a time fetches it once. */
  GBytes               *slice_chunk;
  guint                 slice_group;
  int                   slice_column;
};

void
dc_parquet_file_free (DcParquetFile *file)
{
  if (file == NULL)
    return;
  g_clear_pointer (&file->source, dc_byte_source_unref);
  g_clear_pointer (&file->meta, dc_parquet_meta_free);
  g_clear_pointer (&file->decoder, dc_parquet_page_decoder_free);
  g_clear_pointer (&file->slice_chunk, g_bytes_unref);
  g_free (file);
}

/**
 * dc_parquet_file_open:
 * @source: where the bytes come from; a reference is taken
 *
 * Reads and validates the footer.
 *
 * Returns: (transfer full): the file, or %NULL with @error set
 */
DcParquetFile *
dc_parquet_file_open (DcByteSource  *source,
                      GCancellable  *cancellable,
                      GError       **error)
{
  g_autoptr(DcParquetFile) file = g_new0 (DcParquetFile, 1);
  g_autoptr(GBytes) tail = NULL;
  g_autoptr(GBytes) footer = NULL;
  const guint8 *data;
  gsize len;
  guint32 meta_len;

  file->source = dc_byte_source_ref (source);
  file->decoder = dc_parquet_page_decoder_new ();

  tail = dc_byte_source_read_tail (source, DC_PARQUET_TAIL_GUESS, &file->size, cancellable,
                                   error);
  if (tail == NULL)
    return NULL;
  data = g_bytes_get_data (tail, &len);
  if (file->size < 12 || len < 8)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "%s is not a parquet file: only %" G_GUINT64_FORMAT " bytes",
                   source->name, file->size);
      return NULL;
    }
  if (memcmp (data + len - 4, "PARE", 4) == 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "%s is an encrypted parquet file; encryption is not supported",
                   source->name);
      return NULL;
    }
  if (memcmp (data + len - 4, "PAR1", 4) != 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "%s is not a parquet file or is truncated: it does not end with “PAR1”",
                   source->name);
      return NULL;
    }
  /* When the whole file came with the tail, its head magic can be checked for free. */
  if (len == file->size && memcmp (data, "PAR1", 4) != 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "%s is not a parquet file: it does not start with “PAR1”", source->name);
      return NULL;
    }
  meta_len = read_le32 (data + len - 8);
  if ((guint64) meta_len + 12 > file->size || meta_len > DC_PARQUET_MAX_FOOTER)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "%s is corrupt or truncated: its footer claims %u bytes of metadata "
                   "in a file of %" G_GUINT64_FORMAT " bytes", source->name, meta_len,
                   file->size);
      return NULL;
    }

  if ((gsize) meta_len + 8 <= len)
    {
      footer = g_bytes_new_from_bytes (tail, len - 8 - meta_len, meta_len);
    }
  else
    {
      DcByteRange range = { file->size - 8 - meta_len, meta_len };

      if (!dc_byte_source_read_ranges (source, &range, 1, &footer, cancellable, error))
        return NULL;
    }

  data = g_bytes_get_data (footer, &len);
  file->meta = dc_parquet_meta_parse (data, len, error);
  if (file->meta == NULL)
    {
      g_prefix_error (error, "%s: ", source->name);
      return NULL;
    }
  return g_steal_pointer (&file);
}

const DcParquetMeta *
dc_parquet_file_get_meta (DcParquetFile *file)
{
  return file->meta;
}

guint64
dc_parquet_file_get_size (DcParquetFile *file)
{
  return file->size;
}

DcByteSource *
dc_parquet_file_get_source (DcParquetFile *file)
{
  return file->source;
}

/**
 * dc_parquet_file_find_text_column:
 *
 * Looks up a top-level string column named @name.
 *
 * Returns: its index, or -1 with a %DC_DATA_ERROR_NO_TEXT_COLUMN error that
 *   lists the columns the file has
 */
int
dc_parquet_file_find_text_column (DcParquetFile  *file,
                                  const char     *name,
                                  GError        **error)
{
  int index = dc_parquet_meta_find_column (file->meta, name);
  const DcParquetColumn *column;

  if (index < 0)
    {
      g_autofree char *list = dc_parquet_meta_dup_column_list (file->meta);

      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN,
                   "%s has no column “%s”; its columns are: %s", file->source->name, name,
                   list);
      return -1;
    }
  column = &file->meta->columns[index];
  if (column->type != DC_PARQUET_BYTE_ARRAY || !column->is_string || column->max_rep_level > 0)
    {
      g_autofree char *list = dc_parquet_meta_dup_column_list (file->meta);

      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN,
                   "column “%s” of %s is not a string column; its columns are: %s",
                   name, file->source->name, list);
      return -1;
    }
  return index;
}

/* A top-level column has one value per row: its chunk cannot declare more
 * values than its row group has rows (the decoder then checks that the
 * pages add up to the chunk). */
static gboolean
check_chunk_count (DcParquetFile  *file,
                   int             column,
                   guint           g,
                   GError        **error)
{
  const DcParquetRowGroup *group = &file->meta->row_groups[g];
  const DcParquetChunk *chunk = &group->chunks[column];

  if (chunk->num_values > group->num_rows)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: %s, row group %u: column “%s” declares %"
                   G_GINT64_FORMAT " values in %" G_GINT64_FORMAT " rows",
                   file->source->name, g, file->meta->columns[column].path, chunk->num_values,
                   group->num_rows);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_parquet_file_read_column:
 * @column: a column index from dc_parquet_file_find_text_column()
 * @row_groups: (array length=n_row_groups) (nullable): the row groups to
 *   read, in this order; %NULL reads all of them
 * @func: called once per row
 *
 * Fetches only @column's chunks of the row groups, in batches of ranges that
 * the source may coalesce, and decodes them.
 */
gboolean
dc_parquet_file_read_column (DcParquetFile       *file,
                             int                  column,
                             const guint         *row_groups,
                             guint                n_row_groups,
                             DcParquetValueFunc   func,
                             gpointer             user_data,
                             GCancellable        *cancellable,
                             GError             **error)
{
  const DcParquetMeta *meta = file->meta;
  g_autoptr(GArray) ranges = g_array_new (FALSE, FALSE, sizeof (DcByteRange));
  g_autoptr(GArray) groups = g_array_new (FALSE, FALSE, sizeof (guint));
  guint total = row_groups != NULL ? n_row_groups : meta->n_row_groups;
  guint next = 0;

  g_return_val_if_fail (column >= 0 && (guint) column < meta->n_columns, FALSE);

  while (next < total)
    {
      guint64 batch = 0;
      g_autofree GBytes **chunks = NULL;
      gboolean ok = TRUE;

      g_array_set_size (ranges, 0);
      g_array_set_size (groups, 0);
      while (next < total && (ranges->len == 0 || batch < BATCH_BYTES))
        {
          guint g = row_groups != NULL ? row_groups[next] : next;
          DcByteRange range;

          if (g >= meta->n_row_groups)
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                           "%s has %u row groups; there is no row group %u",
                           file->source->name, meta->n_row_groups, g);
              return FALSE;
            }
          if (!check_chunk_count (file, column, g, error))
            return FALSE;
          if (!dc_parquet_chunk_get_range (&meta->row_groups[g].chunks[column], file->size,
                                           &range.offset, &range.length, error))
            {
              g_prefix_error (error, "%s: ", file->source->name);
              return FALSE;
            }
          g_array_append_val (ranges, range);
          g_array_append_val (groups, g);
          batch += range.length;
          next++;
        }

      chunks = g_new0 (GBytes *, ranges->len);
      if (!dc_byte_source_read_ranges (file->source, (DcByteRange *) (void *) ranges->data,
                                       ranges->len, chunks, cancellable, error))
        return FALSE;
      for (guint i = 0; i < ranges->len; i++)
        {
          guint g = g_array_index (groups, guint, i);
          gsize len;
          const guint8 *data = g_bytes_get_data (chunks[i], &len);

          if (ok && g_cancellable_set_error_if_cancelled (cancellable, error))
            ok = FALSE;
          /* The decoder names the file and row group in its errors. */
          dc_parquet_page_decoder_set_origin (file->decoder, file->source->name, g);
          if (ok && !dc_parquet_page_decoder_decode (file->decoder, &meta->columns[column],
                                                     &meta->row_groups[g].chunks[column],
                                                     data, len, func, user_data, error))
            ok = FALSE;
          g_bytes_unref (chunks[i]);
        }
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

/**
 * dc_parquet_file_read_rows:
 * @column: a column index from dc_parquet_file_find_text_column()
 * @row_group: the row group
 * @first_row: the first row (of the row group) to pass on
 * @max_bytes: stop after the row that brings the text passed on to this
 *   many bytes or more
 * @func: called once per row passed on
 * @n_rows: (out): how many rows were passed on
 * @finished: (out): whether the row group's last row was reached
 *
 * Reads one slice of a row group's column, so that a caller holds at most
 * about @max_bytes of its text at a time. The chunk is fetched once and kept
 * for the next slice of the same row group; pages before @first_row are
 * skipped without being decoded.
 */
gboolean
dc_parquet_file_read_rows (DcParquetFile       *file,
                           int                  column,
                           guint                row_group,
                           guint64              first_row,
                           guint64              max_bytes,
                           DcParquetValueFunc   func,
                           gpointer             user_data,
                           guint64             *n_rows,
                           gboolean            *finished,
                           GCancellable        *cancellable,
                           GError             **error)
{
  const DcParquetMeta *meta = file->meta;
  const guint8 *data;
  gsize len;

  g_return_val_if_fail (column >= 0 && (guint) column < meta->n_columns, FALSE);

  *n_rows = 0;
  *finished = FALSE;
  if (row_group >= meta->n_row_groups)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                   "%s has %u row groups; there is no row group %u",
                   file->source->name, meta->n_row_groups, row_group);
      return FALSE;
    }
  if (!check_chunk_count (file, column, row_group, error))
    return FALSE;
  if (file->slice_chunk == NULL || file->slice_group != row_group
      || file->slice_column != column)
    {
      DcByteRange range;

      g_clear_pointer (&file->slice_chunk, g_bytes_unref);
      if (!dc_parquet_chunk_get_range (&meta->row_groups[row_group].chunks[column], file->size,
                                       &range.offset, &range.length, error))
        {
          g_prefix_error (error, "%s: ", file->source->name);
          return FALSE;
        }
      if (!dc_byte_source_read_ranges (file->source, &range, 1, &file->slice_chunk, cancellable,
                                       error))
        return FALSE;
      file->slice_group = row_group;
      file->slice_column = column;
    }
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  data = g_bytes_get_data (file->slice_chunk, &len);
  dc_parquet_page_decoder_set_origin (file->decoder, file->source->name, row_group);
  return dc_parquet_page_decoder_decode_rows (file->decoder, &meta->columns[column],
                                              &meta->row_groups[row_group].chunks[column],
                                              data, len, first_row, max_bytes, func, user_data,
                                              n_rows, finished, error);
}
