/* dc-parquet-meta.h: parquet file metadata (the footer's FileMetaData).
 *
 * Only what reading a text column needs is kept: the schema's leaf columns
 * and, per row group, where each column chunk lies and how it is encoded.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Parquet's physical types, codecs and encodings (parquet.thrift). */
typedef enum
{
  DC_PARQUET_BOOLEAN = 0,
  DC_PARQUET_INT32 = 1,
  DC_PARQUET_INT64 = 2,
  DC_PARQUET_INT96 = 3,
  DC_PARQUET_FLOAT = 4,
  DC_PARQUET_DOUBLE = 5,
  DC_PARQUET_BYTE_ARRAY = 6,
  DC_PARQUET_FIXED_LEN_BYTE_ARRAY = 7,
} DcParquetType;

typedef enum
{
  DC_PARQUET_CODEC_UNCOMPRESSED = 0,
  DC_PARQUET_CODEC_SNAPPY = 1,
  DC_PARQUET_CODEC_GZIP = 2,
  DC_PARQUET_CODEC_LZO = 3,
  DC_PARQUET_CODEC_BROTLI = 4,
  DC_PARQUET_CODEC_LZ4 = 5,
  DC_PARQUET_CODEC_ZSTD = 6,
  DC_PARQUET_CODEC_LZ4_RAW = 7,
} DcParquetCodec;

typedef enum
{
  DC_PARQUET_ENC_PLAIN = 0,
  DC_PARQUET_ENC_PLAIN_DICTIONARY = 2,
  DC_PARQUET_ENC_RLE = 3,
  DC_PARQUET_ENC_BIT_PACKED = 4,
  DC_PARQUET_ENC_DELTA_BINARY_PACKED = 5,
  DC_PARQUET_ENC_DELTA_LENGTH_BYTE_ARRAY = 6,
  DC_PARQUET_ENC_DELTA_BYTE_ARRAY = 7,
  DC_PARQUET_ENC_RLE_DICTIONARY = 8,
  DC_PARQUET_ENC_BYTE_STREAM_SPLIT = 9,
} DcParquetEncoding;

/* Schema elements (groups and leaves) accepted in one footer. Wide feature
 * tables have thousands of columns; 65536 elements keep the parsed schema to
 * a few MiB whatever the footer declares. */
#define DC_PARQUET_MAX_SCHEMA_ELEMENTS 65536u
/* Column chunks (row groups × columns) accepted in one footer: 2^20 chunks
 * of 72 bytes are 72 MiB of metadata, far above a text dataset's hundreds. */
#define DC_PARQUET_MAX_COLUMN_CHUNKS (1u << 20)
/* Longest dotted column path: each leaf copies its ancestors' names, so
 * without a cap a deep schema with long names multiplies the footer. */
#define DC_PARQUET_MAX_PATH 4096u

/* A leaf of the schema tree: one column of values. */
typedef struct
{
  char    *path;            /* dotted path from the root, e.g. "text" */
  int      type;            /* DcParquetType */
  int      converted_type;  /* -1 when absent; 0 is UTF8 */
  gboolean is_string;       /* UTF8 converted type or STRING logical type */
  guint    max_def_level;
  guint    max_rep_level;
} DcParquetColumn;

typedef struct
{
  int     type;
  int     codec;             /* DcParquetCodec */
  gint64  num_values;
  gint64  total_compressed_size;
  gint64  total_uncompressed_size;
  gint64  data_page_offset;
  gint64  dictionary_page_offset;  /* -1 when absent */
  char   *file_path;         /* non-NULL: the chunk lives in another file (refused) */
} DcParquetChunk;

typedef struct
{
  gint64          num_rows;
  guint           n_chunks;
  DcParquetChunk *chunks;    /* one per leaf column, in schema order */
} DcParquetRowGroup;

typedef struct
{
  gint32             version;
  gint64             num_rows;
  char              *created_by;
  guint              n_columns;
  DcParquetColumn   *columns;
  guint              n_row_groups;
  DcParquetRowGroup *row_groups;
} DcParquetMeta;

DcParquetMeta *dc_parquet_meta_parse        (const guint8         *data,
                                             gsize                 len,
                                             GError              **error);
void           dc_parquet_meta_free         (DcParquetMeta        *meta);
int            dc_parquet_meta_find_column  (const DcParquetMeta  *meta,
                                             const char           *name);
char          *dc_parquet_meta_dup_column_list (const DcParquetMeta *meta);
gboolean       dc_parquet_chunk_get_range   (const DcParquetChunk *chunk,
                                             guint64               file_size,
                                             guint64              *offset,
                                             guint64              *length,
                                             GError              **error);
const char    *dc_parquet_codec_to_string   (int                   codec);
const char    *dc_parquet_encoding_to_string (int                  encoding);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcParquetMeta, dc_parquet_meta_free)

G_END_DECLS
