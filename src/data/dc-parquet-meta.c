/* dc-parquet-meta.c: parquet FileMetaData from the Thrift compact encoding.
 *
 * Field ids follow parquet-format's parquet.thrift. Unknown fields are
 * skipped (that is how the format grows); known fields of the wrong type,
 * counts beyond the bytes present and schemas that do not form a tree are
 * refused as corrupt before anything is allocated from them.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-parquet-meta.h"

#include <string.h>

#include "dc-data-error.h"
#include "dc-thrift-compact.h"

typedef struct
{
  char  *name;
  int    type;
  int    repetition;     /* 0 required, 1 optional, 2 repeated; -1 absent */
  gint32 num_children;
  int    converted_type;
  gboolean is_string;
} SchemaElement;

static void
schema_element_clear (SchemaElement *element)
{
  g_free (element->name);
}

static char *
dup_binary (const guint8 *data,
            gsize         len)
{
  return g_strndup ((const char *) data, len);
}

/* Reads an i32 field after checking its type, the common case below. */
#define READ_I32(reader, type, dest, name)                                    \
  G_STMT_START {                                                              \
    gint32 value_;                                                            \
    if (!dc_thrift_expect_type (reader, type, DC_THRIFT_I32, name, error)     \
        || !dc_thrift_read_i32 (reader, &value_, error))                      \
      return FALSE;                                                           \
    (dest) = value_;                                                          \
  } G_STMT_END
#define READ_I64(reader, type, dest, name)                                    \
  G_STMT_START {                                                              \
    gint64 value_;                                                            \
    if (!dc_thrift_expect_type (reader, type, DC_THRIFT_I64, name, error)     \
        || !dc_thrift_read_i64 (reader, &value_, error))                      \
      return FALSE;                                                           \
    (dest) = value_;                                                          \
  } G_STMT_END

static gboolean
parse_logical_type (DcThriftReader  *reader,
                    SchemaElement   *element,
                    GError         **error)
{
  gint16 last_id = 0;

  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      /* LogicalType is a union; member 1 is StringType. */
      if (id == 1)
        element->is_string = TRUE;
      if (!dc_thrift_skip (reader, type, error))
        return FALSE;
    }
  dc_thrift_struct_end (reader);
  return TRUE;
}

static gboolean
parse_schema_element (DcThriftReader  *reader,
                      SchemaElement   *element,
                      GError         **error)
{
  gint16 last_id = 0;

  element->type = -1;
  element->repetition = -1;
  element->converted_type = -1;
  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      switch (id)
        {
        case 1:
          READ_I32 (reader, type, element->type, "type");
          break;
        case 3:
          READ_I32 (reader, type, element->repetition, "repetition_type");
          break;
        case 4:
          {
            const guint8 *data;
            gsize len;

            if (!dc_thrift_expect_type (reader, type, DC_THRIFT_BINARY, "name", error)
                || !dc_thrift_read_binary (reader, &data, &len, error))
              return FALSE;
            g_free (element->name);
            element->name = dup_binary (data, len);
          }
          break;
        case 5:
          READ_I32 (reader, type, element->num_children, "num_children");
          break;
        case 6:
          READ_I32 (reader, type, element->converted_type, "converted_type");
          break;
        case 10:
          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_STRUCT, "logicalType", error)
              || !parse_logical_type (reader, element, error))
            return FALSE;
          break;
        default:
          if (!dc_thrift_skip (reader, type, error))
            return FALSE;
        }
    }
  dc_thrift_struct_end (reader);
  if (element->name == NULL)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: a schema element has no name");
      return FALSE;
    }
  if (element->num_children < 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: negative child count in the schema");
      return FALSE;
    }
  /* UTF8 is converted type 0. */
  if (element->converted_type == 0)
    element->is_string = TRUE;
  return TRUE;
}

/* Walks the flattened schema (depth first, as parquet stores it) and
 * collects the leaves with their paths and levels. */
static gboolean
collect_leaves (SchemaElement  *elements,
                guint           n_elements,
                guint          *next,
                const char     *prefix,
                guint           def,
                guint           rep,
                guint           depth,
                GArray         *leaves,
                GError        **error)
{
  SchemaElement *element;
  g_autofree char *path = NULL;

  if (*next >= n_elements || depth > DC_THRIFT_MAX_DEPTH)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: the schema's child counts do not form a tree");
      return FALSE;
    }
  element = &elements[(*next)++];
  if ((prefix != NULL ? strlen (prefix) + 1 : 0) + strlen (element->name) > DC_PARQUET_MAX_PATH)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "a column path in the schema is longer than %u bytes", DC_PARQUET_MAX_PATH);
      return FALSE;
    }
  path = prefix != NULL ? g_strconcat (prefix, ".", element->name, NULL) : g_strdup (element->name);
  if (element->repetition == 1)
    def++;
  else if (element->repetition == 2)
    {
      def++;
      rep++;
    }

  if (element->num_children == 0)
    {
      DcParquetColumn column = { 0 };

      column.path = g_steal_pointer (&path);
      column.type = element->type;
      column.converted_type = element->converted_type;
      column.is_string = element->is_string;
      column.max_def_level = def;
      column.max_rep_level = rep;
      g_array_append_val (leaves, column);
      return TRUE;
    }

  for (gint32 i = 0; i < element->num_children; i++)
    if (!collect_leaves (elements, n_elements, next, path, def, rep, depth + 1, leaves, error))
      return FALSE;
  return TRUE;
}

static gboolean
parse_schema (DcThriftReader  *reader,
              DcParquetMeta   *meta,
              GError         **error)
{
  guint8 elem_type;
  guint32 size;
  SchemaElement *elements;
  g_autoptr(GArray) leaves = NULL;
  gboolean ok = TRUE;
  guint next = 1;

  /* An element needs its name: a field header, a length and a stop byte. */
  if (!dc_thrift_read_list_header_sized (reader, &elem_type, &size, 3,
                                         DC_PARQUET_MAX_SCHEMA_ELEMENTS, error))
    return FALSE;
  if (elem_type != DC_THRIFT_STRUCT || size == 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: the schema is empty or malformed");
      return FALSE;
    }
  elements = g_new0 (SchemaElement, size);
  for (guint32 i = 0; i < size && ok; i++)
    ok = parse_schema_element (reader, &elements[i], error);

  leaves = g_array_new (FALSE, TRUE, sizeof (DcParquetColumn));
  /* Element 0 is the root; its children are the top-level fields. */
  for (gint32 i = 0; ok && i < elements[0].num_children; i++)
    ok = collect_leaves (elements, size, &next, NULL, 0, 0, 1, leaves, error);
  if (ok && next != size)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: the schema's child counts do not form a tree");
      ok = FALSE;
    }

  for (guint32 i = 0; i < size; i++)
    schema_element_clear (&elements[i]);
  g_free (elements);

  if (!ok)
    {
      for (guint i = 0; i < leaves->len; i++)
        g_free (g_array_index (leaves, DcParquetColumn, i).path);
      return FALSE;
    }
  meta->n_columns = leaves->len;
  meta->columns = (DcParquetColumn *) (void *) g_array_free (g_steal_pointer (&leaves), FALSE);
  return TRUE;
}

static gboolean
parse_column_meta (DcThriftReader  *reader,
                   DcParquetChunk  *chunk,
                   GError         **error)
{
  gint16 last_id = 0;

  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      switch (id)
        {
        case 1:
          READ_I32 (reader, type, chunk->type, "type");
          break;
        case 4:
          READ_I32 (reader, type, chunk->codec, "codec");
          break;
        case 5:
          READ_I64 (reader, type, chunk->num_values, "num_values");
          break;
        case 6:
          READ_I64 (reader, type, chunk->total_uncompressed_size, "total_uncompressed_size");
          break;
        case 7:
          READ_I64 (reader, type, chunk->total_compressed_size, "total_compressed_size");
          break;
        case 9:
          READ_I64 (reader, type, chunk->data_page_offset, "data_page_offset");
          break;
        case 11:
          READ_I64 (reader, type, chunk->dictionary_page_offset, "dictionary_page_offset");
          break;
        default:
          if (!dc_thrift_skip (reader, type, error))
            return FALSE;
        }
    }
  dc_thrift_struct_end (reader);
  return TRUE;
}

static gboolean
parse_column_chunk (DcThriftReader  *reader,
                    DcParquetChunk  *chunk,
                    GError         **error)
{
  gint16 last_id = 0;
  gboolean has_meta = FALSE;

  chunk->type = -1;
  chunk->codec = -1;
  chunk->dictionary_page_offset = -1;
  chunk->data_page_offset = -1;
  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      if (id == 1)
        {
          const guint8 *data;
          gsize len;

          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_BINARY, "file_path", error)
              || !dc_thrift_read_binary (reader, &data, &len, error))
            return FALSE;
          g_free (chunk->file_path);
          chunk->file_path = dup_binary (data, len);
        }
      else if (id == 3)
        {
          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_STRUCT, "meta_data", error)
              || !parse_column_meta (reader, chunk, error))
            return FALSE;
          has_meta = TRUE;
        }
      else if (!dc_thrift_skip (reader, type, error))
        {
          return FALSE;
        }
    }
  dc_thrift_struct_end (reader);
  if (!has_meta)
    {
      /* Encrypted columns carry their metadata elsewhere. */
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "a column chunk has no plain metadata (encrypted columns are not supported)");
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_row_group (DcThriftReader     *reader,
                 DcParquetRowGroup  *group,
                 guint               n_columns,
                 guint              *chunks_left,
                 GError            **error)
{
  gint16 last_id = 0;

  group->num_rows = -1;
  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      if (id == 1 && group->chunks == NULL)
        {
          guint8 elem_type;
          guint32 size;

          /* A chunk is at least its meta_data field header and two stop bytes. */
          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_LIST, "columns", error)
              || !dc_thrift_read_list_header_sized (reader, &elem_type, &size, 3, *chunks_left,
                                                    error))
            return FALSE;
          /* The schema comes first in every writer's output: when it is known,
           * a row group must have exactly one chunk per leaf column, which is
           * checked before allocating. */
          if (elem_type != DC_THRIFT_STRUCT || (n_columns != G_MAXUINT && size != n_columns))
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                           "corrupt parquet file: a row group's column list is malformed");
              return FALSE;
            }
          *chunks_left -= size;
          group->chunks = g_new0 (DcParquetChunk, MAX (size, 1));
          for (guint32 i = 0; i < size; i++)
            {
              group->n_chunks = i + 1;
              if (!parse_column_chunk (reader, &group->chunks[i], error))
                return FALSE;
            }
        }
      else if (id == 3)
        {
          READ_I64 (reader, type, group->num_rows, "num_rows");
        }
      else if (!dc_thrift_skip (reader, type, error))
        {
          return FALSE;
        }
    }
  dc_thrift_struct_end (reader);
  if (group->num_rows < 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: a row group has no row count");
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_row_groups (DcThriftReader  *reader,
                  DcParquetMeta   *meta,
                  GError         **error)
{
  guint8 elem_type;
  guint32 size;
  guint chunks_left = DC_PARQUET_MAX_COLUMN_CHUNKS;
  gsize min_bytes = 3;

  /* A row group takes at least its num_rows field (two bytes) and a stop
   * byte; when the schema is known, also a list header and three bytes per
   * column chunk. */
  if (meta->columns != NULL)
    min_bytes += 2 + 3 * (gsize) meta->n_columns;
  if (!dc_thrift_read_list_header_sized (reader, &elem_type, &size, min_bytes,
                                         meta->columns != NULL && meta->n_columns > 0
                                         ? DC_PARQUET_MAX_COLUMN_CHUNKS / meta->n_columns
                                         : DC_PARQUET_MAX_COLUMN_CHUNKS, error))
    return FALSE;
  if (elem_type != DC_THRIFT_STRUCT)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: the row group list is malformed");
      return FALSE;
    }
  meta->row_groups = g_new0 (DcParquetRowGroup, MAX (size, 1));
  for (guint32 i = 0; i < size; i++)
    {
      meta->n_row_groups = i + 1;
      if (!parse_row_group (reader, &meta->row_groups[i],
                            meta->columns != NULL ? meta->n_columns : G_MAXUINT, &chunks_left,
                            error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
parse_file_meta (DcThriftReader  *reader,
                 DcParquetMeta   *meta,
                 GError         **error)
{
  gint16 last_id = 0;
  gboolean has_schema = FALSE;

  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      switch (id)
        {
        case 1:
          READ_I32 (reader, type, meta->version, "version");
          break;
        case 2:
          if (has_schema)
            goto skip;
          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_LIST, "schema", error)
              || !parse_schema (reader, meta, error))
            return FALSE;
          has_schema = TRUE;
          break;
        case 3:
          READ_I64 (reader, type, meta->num_rows, "num_rows");
          break;
        case 4:
          if (meta->row_groups != NULL)
            goto skip;
          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_LIST, "row_groups", error)
              || !parse_row_groups (reader, meta, error))
            return FALSE;
          break;
        case 6:
          {
            const guint8 *data;
            gsize len;

            if (!dc_thrift_expect_type (reader, type, DC_THRIFT_BINARY, "created_by", error)
                || !dc_thrift_read_binary (reader, &data, &len, error))
              return FALSE;
            g_free (meta->created_by);
            meta->created_by = dup_binary (data, len);
          }
          break;
        default:
        skip:
          if (!dc_thrift_skip (reader, type, error))
            return FALSE;
        }
    }
  dc_thrift_struct_end (reader);

  if (!has_schema)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: no schema");
      return FALSE;
    }
  for (guint g = 0; g < meta->n_row_groups; g++)
    if (meta->row_groups[g].n_chunks != meta->n_columns)
      {
        g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                     "corrupt parquet file: row group %u has %u column chunks, "
                     "the schema %u columns", g, meta->row_groups[g].n_chunks, meta->n_columns);
        return FALSE;
      }
  return TRUE;
}

/**
 * dc_parquet_meta_parse:
 * @data: the serialized FileMetaData (the footer without its length and magic)
 *
 * Returns: (transfer full): the metadata, or %NULL with @error set
 */
DcParquetMeta *
dc_parquet_meta_parse (const guint8  *data,
                       gsize          len,
                       GError       **error)
{
  g_autoptr(DcParquetMeta) meta = g_new0 (DcParquetMeta, 1);
  DcThriftReader reader;

  dc_thrift_reader_init (&reader, data, len, "file metadata");
  if (!parse_file_meta (&reader, meta, error))
    return NULL;
  return g_steal_pointer (&meta);
}

void
dc_parquet_meta_free (DcParquetMeta *meta)
{
  if (meta == NULL)
    return;
  for (guint i = 0; i < meta->n_columns; i++)
    g_free (meta->columns[i].path);
  g_free (meta->columns);
  for (guint g = 0; g < meta->n_row_groups; g++)
    {
      for (guint c = 0; c < meta->row_groups[g].n_chunks; c++)
        g_free (meta->row_groups[g].chunks[c].file_path);
      g_free (meta->row_groups[g].chunks);
    }
  g_free (meta->row_groups);
  g_free (meta->created_by);
  g_free (meta);
}

/**
 * dc_parquet_meta_find_column:
 *
 * Returns: the index of the leaf column whose dotted path is @name, or -1
 */
int
dc_parquet_meta_find_column (const DcParquetMeta *meta,
                             const char          *name)
{
  for (guint i = 0; i < meta->n_columns; i++)
    if (g_str_equal (meta->columns[i].path, name))
      return (int) i;
  return -1;
}

/* Columns named in a message: enough to spot the right one in a typical
 * dataset (FineWeb has 10), while a footer with 65536 names cannot turn one
 * error into megabytes of text. */
#define LISTED_COLUMNS 8

/**
 * dc_parquet_meta_dup_column_list:
 *
 * Returns: (transfer full): the first few column paths joined with ", ",
 *   then "and N more" when there are others, for messages
 */
char *
dc_parquet_meta_dup_column_list (const DcParquetMeta *meta)
{
  GString *list = g_string_new (NULL);

  for (guint i = 0; i < meta->n_columns && i < LISTED_COLUMNS; i++)
    {
      if (i > 0)
        g_string_append (list, ", ");
      g_string_append (list, meta->columns[i].path);
    }
  if (meta->n_columns > LISTED_COLUMNS)
    g_string_append_printf (list, " and %u more", meta->n_columns - LISTED_COLUMNS);
  return g_string_free (list, FALSE);
}

/**
 * dc_parquet_chunk_get_range:
 *
 * Computes the byte range of a column chunk (its dictionary page, if any,
 * comes first) and checks it lies inside a file of @file_size bytes.
 */
gboolean
dc_parquet_chunk_get_range (const DcParquetChunk  *chunk,
                            guint64                file_size,
                            guint64               *offset,
                            guint64               *length,
                            GError               **error)
{
  gint64 start = chunk->data_page_offset;

  if (chunk->file_path != NULL)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "column chunks stored in another file (“%s”) are not supported",
                   chunk->file_path);
      return FALSE;
    }
  /* Some writers set dictionary_page_offset to 0 meaning "none". */
  if (chunk->dictionary_page_offset > 0 && chunk->dictionary_page_offset < start)
    start = chunk->dictionary_page_offset;
  if (start < 4 || chunk->total_compressed_size <= 0
      || (guint64) start > file_size
      || (guint64) chunk->total_compressed_size > file_size - (guint64) start)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: a column chunk lies outside the file "
                   "(offset %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT " bytes, file %"
                   G_GUINT64_FORMAT " bytes)", start, chunk->total_compressed_size, file_size);
      return FALSE;
    }
  *offset = (guint64) start;
  *length = (guint64) chunk->total_compressed_size;
  return TRUE;
}

const char *
dc_parquet_codec_to_string (int codec)
{
  static const char *names[] = {
    "UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW",
  };

  if (codec >= 0 && codec < (int) G_N_ELEMENTS (names))
    return names[codec];
  return "unknown";
}

const char *
dc_parquet_encoding_to_string (int encoding)
{
  static const char *names[] = {
    "PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
    "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
    "RLE_DICTIONARY", "BYTE_STREAM_SPLIT",
  };

  if (encoding >= 0 && encoding < (int) G_N_ELEMENTS (names))
    return names[encoding];
  return "unknown";
}
