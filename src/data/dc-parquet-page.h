/* dc-parquet-page.h: decoding one column chunk's pages into values.
 *
 * The decoder handles data pages v1 and v2, PLAIN and dictionary
 * (PLAIN_DICTIONARY / RLE_DICTIONARY) encodings of BYTE_ARRAY values,
 * definition levels of optional top-level columns, and the UNCOMPRESSED,
 * SNAPPY, GZIP and ZSTD codecs. Anything else is refused with a message
 * naming it. A decoder keeps its buffers between chunks; it is not
 * thread-safe, use one per thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-parquet-meta.h"

G_BEGIN_DECLS

/* Pages larger than this (uncompressed) are refused rather than allocated.
 * Writers default to 1 MiB pages; one page must still hold a whole value. */
#define DC_PARQUET_MAX_PAGE_SIZE (64u * 1024u * 1024u)

/* The most one page may decode to, counting each row as its bytes plus 4
 * (the length a PLAIN page stores with each value; a null counts 4 too).
 * A PLAIN page is at most DC_PARQUET_MAX_PAGE_SIZE; dictionary pages expand,
 * and 4× that cap holds any page a writer makes, while an RLE run that repeats
 * a value 2^31 times is refused before it is handed on. */
#define DC_PARQUET_MAX_PAGE_DECODED (256u * 1024u * 1024u)
/* A column chunk decodes to at most this many times its stored bytes (or to
 * one page's cap, whichever is more): text compresses about 3-10×, so 1024×
 * is past any real chunk and keeps the work linear in the file's size even
 * when many small pages each stay under the page cap. */
#define DC_PARQUET_MAX_EXPANSION 1024u

/**
 * DcParquetValueFunc:
 * @data: (nullable): the value's bytes, or %NULL for a null value
 * @len: the length of @data in bytes
 *
 * Called once per row, in order. @data is valid only during the call.
 */
typedef void (*DcParquetValueFunc) (const char *data,
                                    gsize       len,
                                    gpointer    user_data);

typedef struct _DcParquetPageDecoder DcParquetPageDecoder;

DcParquetPageDecoder *dc_parquet_page_decoder_new    (void);
void                  dc_parquet_page_decoder_free   (DcParquetPageDecoder  *decoder);
gboolean              dc_parquet_page_decoder_decode (DcParquetPageDecoder  *decoder,
                                                      const DcParquetColumn *column,
                                                      const DcParquetChunk  *chunk,
                                                      const guint8          *data,
                                                      gsize                  len,
                                                      DcParquetValueFunc     func,
                                                      gpointer               user_data,
                                                      GError               **error);

void                  dc_parquet_page_decoder_set_origin (DcParquetPageDecoder *decoder,
                                                          const char           *name,
                                                          guint                 row_group);
gboolean              dc_parquet_page_decoder_decode_rows (DcParquetPageDecoder  *decoder,
                                                           const DcParquetColumn *column,
                                                           const DcParquetChunk  *chunk,
                                                           const guint8          *data,
                                                           gsize                  len,
                                                           guint64                first_row,
                                                           guint64                max_bytes,
                                                           DcParquetValueFunc     func,
                                                           gpointer               user_data,
                                                           guint64               *n_rows,
                                                           gboolean              *finished,
                                                           GError               **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcParquetPageDecoder, dc_parquet_page_decoder_free)

G_END_DECLS
