/* fuzz-parquet-page.c: libFuzzer target for the page decoder (page headers,
 * decompression, definition levels, RLE/bit-packed runs, PLAIN values,
 * dictionaries).
 *
 * The first input byte picks the codec (low 3 bits) and whether the column
 * is optional (bit 3); the rest is one column chunk. The chunk's value count
 * is the sum of its data pages' counts, read from the page headers the way a
 * writer would fill it in, so that the decoder's own checks (and not a fixed
 * count) decide how much is decoded. Everything handed on is counted: it
 * must stay within the caps (DC_PARQUET_MAX_PAGE_DECODED per page,
 * DC_PARQUET_MAX_EXPANSION times the chunk), or the target aborts.
 *
 * Build: CC=clang meson setup build-fuzz -Dfuzzers=true && meson compile -C build-fuzz
 * Run:   build-fuzz/tests/fuzz-parquet-page -runs=200000 tests/data/fuzz/fuzz-parquet-page
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <stdlib.h>

#include "data/dc-parquet-page.h"
#include "data/dc-thrift-compact.h"

int LLVMFuzzerTestOneInput (const guint8 *data, size_t size);

typedef struct
{
  guint64 decoded;   /* each row's bytes plus 4, as the caps count */
  guint64 cap;
  char    sink;
} Output;

static void
count_cb (const char *data,
          gsize       len,
          gpointer    user_data)
{
  Output *out = user_data;

  out->decoded += (guint64) len + 4;
  /* The output is bounded by the input, whatever the headers declare;
   * checked per row so that a decoder without the caps fails at once. */
  if (out->decoded > out->cap)
    abort ();
  /* Touch the bytes so that a bad slice is caught by ASan. */
  if (data != NULL && len > 0)
    out->sink = data[len - 1];
}

/* Reads the i32 field 1 (num_values) of a page's sub-header. */
static gboolean
read_sub_num_values (DcThriftReader *reader,
                     gint32         *num_values)
{
  gint16 last_id = 0;

  if (!dc_thrift_struct_begin (reader, NULL))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, NULL))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      if (id == 1 && type == DC_THRIFT_I32)
        {
          if (!dc_thrift_read_i32 (reader, num_values, NULL))
            return FALSE;
        }
      else if (!dc_thrift_skip (reader, type, NULL))
        {
          return FALSE;
        }
    }
  dc_thrift_struct_end (reader);
  return TRUE;
}

/* Sums the value counts of the data pages (types 0 and 3) found by walking
 * the page headers, stopping at the first one that does not parse. */
static gint64
sum_num_values (const guint8 *data,
                gsize         len)
{
  const guint8 *pos = data;
  const guint8 *end = data + len;
  gint64 total = 0;

  while (pos < end)
    {
      DcThriftReader reader;
      gint16 last_id = 0;
      gint32 page_type = -1;
      gint32 compressed = -1;
      gint32 num_values = 0;

      dc_thrift_reader_init (&reader, pos, (gsize) (end - pos), "page header");
      if (!dc_thrift_struct_begin (&reader, NULL))
        break;
      for (;;)
        {
          gint16 id;
          guint8 type;

          if (!dc_thrift_read_field_header (&reader, &last_id, &id, &type, NULL))
            return total;
          if (type == DC_THRIFT_STOP)
            break;
          if ((id == 1 || id == 3) && type == DC_THRIFT_I32)
            {
              if (!dc_thrift_read_i32 (&reader, id == 1 ? &page_type : &compressed, NULL))
                return total;
            }
          else if ((id == 5 || id == 8) && type == DC_THRIFT_STRUCT)
            {
              if (!read_sub_num_values (&reader, &num_values))
                return total;
            }
          else if (!dc_thrift_skip (&reader, type, NULL))
            {
              return total;
            }
        }
      dc_thrift_struct_end (&reader);
      pos += dc_thrift_reader_consumed (&reader, pos);
      if (compressed < 0 || (gsize) compressed > (gsize) (end - pos))
        break;
      pos += compressed;
      if ((page_type == 0 || page_type == 3) && num_values > 0)
        total += num_values;
    }
  return total;
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        size_t        size)
{
  static DcParquetPageDecoder *decoder;
  DcParquetColumn column = { 0 };
  DcParquetChunk chunk = { 0 };
  Output out = { 0 };

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
  chunk.num_values = sum_num_values (data + 1, size - 1);
  chunk.total_compressed_size = (gint64) size - 1;
  out.cap = MAX ((guint64) DC_PARQUET_MAX_PAGE_DECODED,
                 (guint64) (size - 1) * DC_PARQUET_MAX_EXPANSION);
  dc_parquet_page_decoder_decode (decoder, &column, &chunk, data + 1, size - 1, count_cb, &out,
                                  NULL);
  return 0;
}
