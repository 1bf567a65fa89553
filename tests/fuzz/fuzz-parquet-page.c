/* fuzz-parquet-page.c: libFuzzer target for the page decoder (page headers,
 * decompression, definition levels, RLE/bit-packed runs, PLAIN values,
 * dictionaries).
 *
 * The first input byte picks the codec (low 3 bits) and whether the column
 * is optional (bit 3); the rest is one column chunk.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "data/dc-parquet-page.h"

int LLVMFuzzerTestOneInput (const guint8 *data, size_t size);

static void
ignore_cb (const char *data,
           gsize       len,
           gpointer    user_data)
{
  if (data != NULL && len > 0)
    *(volatile char *) user_data = data[len - 1];
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        size_t        size)
{
  static DcParquetPageDecoder *decoder;
  DcParquetColumn column = { 0 };
  DcParquetChunk chunk = { 0 };
  char sink = 0;

  if (size < 1)
    return 0;
  /* One decoder for the whole run: its buffers must survive any input. */
  if (decoder == NULL)
    decoder = dc_parquet_page_decoder_new ();

  column.path = (char *) "text";
  column.type = DC_PARQUET_BYTE_ARRAY;
  column.is_string = TRUE;
  column.max_def_level = (data[0] & 8) ? 1 : 0;
  chunk.type = DC_PARQUET_BYTE_ARRAY;
  chunk.codec = data[0] & 7;
  chunk.num_values = 1 << 20;
  chunk.total_compressed_size = (gint64) size - 1;
  dc_parquet_page_decoder_decode (decoder, &column, &chunk, data + 1, size - 1, ignore_cb, &sink,
                                  NULL);
  return 0;
}
