/* dc-parquet-file.h: reading text columns of a parquet file by byte ranges.
 *
 * Opening reads only the file's tail (footer); reading a column then fetches
 * only that column's chunks of the chosen row groups, never the whole file.
 * Not thread-safe; blocking (run it in a worker thread or a GTask).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-byte-source.h"
#include "dc-parquet-meta.h"
#include "dc-parquet-page.h"

G_BEGIN_DECLS

/* The first read of a file: enough for the footer of most files in one request. */
#define DC_PARQUET_TAIL_GUESS (64u * 1024u)
/* Footers above this are refused rather than fetched and parsed. Every list
 * count is checked against the bytes left (at the smallest size an element
 * can take) and the schema and chunk counts are capped
 * (DC_PARQUET_MAX_SCHEMA_ELEMENTS, DC_PARQUET_MAX_COLUMN_CHUNKS), so the
 * parsed metadata stays within some tens of MiB. */
#define DC_PARQUET_MAX_FOOTER (16u * 1024u * 1024u)

typedef struct _DcParquetFile DcParquetFile;

DcParquetFile       *dc_parquet_file_open              (DcByteSource        *source,
                                                        GCancellable        *cancellable,
                                                        GError             **error);
void                 dc_parquet_file_free              (DcParquetFile       *file);
const DcParquetMeta *dc_parquet_file_get_meta          (DcParquetFile       *file);
guint64              dc_parquet_file_get_size          (DcParquetFile       *file);
DcByteSource        *dc_parquet_file_get_source        (DcParquetFile       *file);
int                  dc_parquet_file_find_text_column  (DcParquetFile       *file,
                                                        const char          *name,
                                                        GError             **error);
gboolean             dc_parquet_file_read_column       (DcParquetFile       *file,
                                                        int                  column,
                                                        const guint         *row_groups,
                                                        guint                n_row_groups,
                                                        DcParquetValueFunc   func,
                                                        gpointer             user_data,
                                                        GCancellable        *cancellable,
                                                        GError             **error);

gboolean             dc_parquet_file_read_rows         (DcParquetFile       *file,
                                                        int                  column,
                                                        guint                row_group,
                                                        guint64              first_row,
                                                        guint64              max_bytes,
                                                        DcParquetValueFunc   func,
                                                        gpointer             user_data,
                                                        guint64             *n_rows,
                                                        gboolean            *finished,
                                                        GCancellable        *cancellable,
                                                        GError             **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcParquetFile, dc_parquet_file_free)

G_END_DECLS
