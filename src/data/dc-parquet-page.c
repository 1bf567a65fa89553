/* dc-parquet-page.c: decoding one column chunk's pages into values.
 *
 * Layout (parquet-format Encodings.md): a page is a Thrift PageHeader and
 * its payload. A v1 data page's payload is compressed as a whole and holds
 * the definition levels (4-byte length, RLE/bit-packed hybrid), then the
 * values. A v2 page keeps its levels uncompressed in front, with their
 * lengths in the header, and compresses only the values. Dictionary indices
 * are one byte of bit width and a hybrid run. All offsets are checked
 * against the bytes present; counts come from untrusted headers and never
 * size an allocation on their own.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-parquet-page.h"

#include <string.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "dc-data-error.h"
#include "dc-thrift-compact.h"

/* Parquet's 4-byte lengths are little-endian and unaligned. */
static inline guint32
read_le32 (const guint8 *p)
{
  guint32 v;

  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_LE (v);
}

enum
{
  PAGE_DATA = 0,
  PAGE_INDEX = 1,
  PAGE_DICTIONARY = 2,
  PAGE_DATA_V2 = 3,
};

typedef struct
{
  gint32   type;
  gint32   uncompressed_size;
  gint32   compressed_size;
  gint32   num_values;
  gint32   encoding;
  gint32   def_encoding;
  gint32   num_nulls;
  gint32   def_length;        /* v2 only */
  gint32   rep_length;        /* v2 only */
  gboolean is_compressed;     /* v2 only; defaults to TRUE */
  gboolean has_body;
} PageHeader;

typedef struct
{
  guint32 offset;
  guint32 len;
} DictEntry;

struct _DcParquetPageDecoder
{
  ZSTD_DCtx  *zstd;
  GByteArray *page;        /* decompressed payload of the current page */
  GByteArray *dict_data;   /* decompressed dictionary page, kept for the chunk */
  GArray     *dict;        /* DictEntry into dict_data */
  gboolean    has_dict;
  char       *origin;      /* the file's name for messages, or NULL */
  guint       origin_group;
};

/* Where one decode call is: which rows it passes on, and how much the
 * current page and chunk have decoded to (checked against the caps). */
typedef struct
{
  guint64  row;            /* index in the chunk of the next row decoded */
  guint64  first_row;      /* rows before this are decoded but not passed on */
  guint64  max_bytes;      /* stop once this many value bytes were passed on */
  guint64  passed_bytes;
  guint64  n_rows;         /* rows passed on */
  guint64  page_decoded;   /* decoded size of the current page (see the caps) */
  guint64  chunk_decoded;
  guint64  chunk_cap;
  guint    page_index;     /* counting from 0, the dictionary page included */
  gboolean stopped;
  gboolean named;          /* the error already names the file and row group */
} Window;

/* RLE / bit-packed hybrid decoder (parquet-format Encodings.md). */
typedef struct
{
  const guint8 *pos;
  const guint8 *end;
  guint         bit_width;
  guint32       mask;
  guint32       run_left;      /* values left in the current RLE run */
  guint32       run_value;
  guint32       packed_left;   /* values left in the current bit-packed run */
  guint32       packed_index;
  const guint8 *packed;
  gsize         packed_avail;  /* bytes of the bit-packed run present */
} RleDecoder;

static gboolean
corrupt (GError    **error,
         const char *what)
{
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT, "corrupt parquet page: %s", what);
  return FALSE;
}

/* Names the page, its row group and file (when known) in the message. */
static gboolean
page_too_large (DcParquetPageDecoder  *decoder,
                Window                *window,
                GError               **error)
{
  window->named = decoder->origin != NULL;
  if (decoder->origin != NULL)
    g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                 "page %u of row group %u in %s decodes to more than %u MiB",
                 window->page_index, decoder->origin_group, decoder->origin,
                 DC_PARQUET_MAX_PAGE_DECODED >> 20);
  else
    g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                 "page %u decodes to more than %u MiB", window->page_index,
                 DC_PARQUET_MAX_PAGE_DECODED >> 20);
  return FALSE;
}

static gboolean
chunk_too_large (DcParquetPageDecoder  *decoder,
                 Window                *window,
                 GError               **error)
{
  window->named = decoder->origin != NULL;
  if (decoder->origin != NULL)
    g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                 "the column chunk of row group %u in %s decodes to more than %"
                 G_GUINT64_FORMAT " bytes (%u times its size, at least %u MiB)",
                 decoder->origin_group, decoder->origin, window->chunk_cap,
                 DC_PARQUET_MAX_EXPANSION, DC_PARQUET_MAX_PAGE_DECODED >> 20);
  else
    g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                 "the column chunk decodes to more than %" G_GUINT64_FORMAT
                 " bytes (%u times its size, at least %u MiB)", window->chunk_cap,
                 DC_PARQUET_MAX_EXPANSION, DC_PARQUET_MAX_PAGE_DECODED >> 20);
  return FALSE;
}

/* Counts one decoded row against the caps before it is handed on. */
static inline gboolean
count_decoded (DcParquetPageDecoder  *decoder,
               Window                *window,
               gsize                  len,
               GError               **error)
{
  window->page_decoded += (guint64) len + 4;
  window->chunk_decoded += (guint64) len + 4;
  if (window->page_decoded > DC_PARQUET_MAX_PAGE_DECODED)
    return page_too_large (decoder, window, error);
  if (window->chunk_decoded > window->chunk_cap)
    return chunk_too_large (decoder, window, error);
  return TRUE;
}

/* Hands one row on if it is inside the window; says when the window is full. */
static inline void
pass_row (Window              *window,
          const char          *data,
          gsize                len,
          DcParquetValueFunc   func,
          gpointer             user_data)
{
  if (window->row++ < window->first_row)
    return;
  func (data, len, user_data);
  window->n_rows++;
  window->passed_bytes += len;
  if (window->passed_bytes >= window->max_bytes)
    window->stopped = TRUE;
}

static void
rle_init (RleDecoder   *d,
          const guint8 *data,
          gsize         len,
          guint         bit_width)
{
  memset (d, 0, sizeof *d);
  d->pos = data;
  d->end = data + len;
  d->bit_width = bit_width;
  d->mask = bit_width >= 32 ? G_MAXUINT32 : (1u << bit_width) - 1;
}

static gboolean
rle_refill (RleDecoder  *d,
            GError     **error)
{
  guint64 header = 0;
  guint shift = 0;

  for (;;)
    {
      guint8 byte;

      if (d->pos >= d->end || shift > 35)
        return corrupt (error, "a level or index run ends early");
      byte = *d->pos++;
      header |= (guint64) (byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0)
        break;
    }

  if (header & 1)
    {
      guint64 groups = header >> 1;
      guint64 bytes = groups * d->bit_width;
      gsize avail = (gsize) (d->end - d->pos);

      if (groups == 0)
        return corrupt (error, "an empty bit-packed run");
      d->packed = d->pos;
      /* Writers may cut the last group short at the page end; values that
       * are actually read are still bounds-checked one by one. */
      d->packed_avail = bytes < avail ? (gsize) bytes : avail;
      d->pos += d->packed_avail;
      d->packed_left = (guint32) MIN (groups * 8, G_MAXUINT32);
      d->packed_index = 0;
    }
  else
    {
      guint nbytes = (d->bit_width + 7) / 8;
      guint32 value = 0;

      if (header >> 1 == 0)
        return corrupt (error, "an empty RLE run");
      if ((gsize) (d->end - d->pos) < nbytes)
        return corrupt (error, "an RLE run ends early");
      for (guint i = 0; i < nbytes; i++)
        value |= (guint32) d->pos[i] << (8 * i);
      d->pos += nbytes;
      d->run_value = value & d->mask;
      d->run_left = (guint32) MIN (header >> 1, G_MAXUINT32);
    }
  return TRUE;
}

static inline gboolean
rle_next (RleDecoder  *d,
          guint32     *out,
          GError     **error)
{
  if (d->run_left == 0 && d->packed_left == 0 && !rle_refill (d, error))
    return FALSE;

  if (d->run_left > 0)
    {
      d->run_left--;
      *out = d->run_value;
      return TRUE;
    }
  else
    {
      guint64 bit = (guint64) d->packed_index * d->bit_width;
      gsize byte = (gsize) (bit >> 3);
      guint shift = bit & 7;
      guint nbytes = (shift + d->bit_width + 7) / 8;
      guint64 v = 0;

      if (byte + nbytes > d->packed_avail)
        return corrupt (error, "a bit-packed run ends early");
      for (guint i = 0; i < nbytes; i++)
        v |= (guint64) d->packed[byte + i] << (8 * i);
      *out = (guint32) (v >> shift) & d->mask;
      d->packed_index++;
      d->packed_left--;
      return TRUE;
    }
}

static gboolean
parse_sub_header (DcThriftReader  *reader,
                  PageHeader      *header,
                  int              kind,
                  GError         **error)
{
  gint16 last_id = 0;

  if (!dc_thrift_struct_begin (reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;
      gint32 *dest = NULL;

      if (!dc_thrift_read_field_header (reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      if (kind == PAGE_DATA_V2)
        {
          switch (id)
            {
            case 1: dest = &header->num_values; break;
            case 2: dest = &header->num_nulls; break;
            case 4: dest = &header->encoding; break;
            case 5: dest = &header->def_length; break;
            case 6: dest = &header->rep_length; break;
            case 7:
              if (!dc_thrift_expect_type (reader, type, DC_THRIFT_TRUE, "is_compressed", error))
                return FALSE;
              header->is_compressed = type == DC_THRIFT_TRUE;
              continue;
            default: break;
            }
        }
      else
        {
          /* DataPageHeader and DictionaryPageHeader share fields 1 and 2;
           * field 3 is the level encoding in one, is_sorted in the other. */
          switch (id)
            {
            case 1: dest = &header->num_values; break;
            case 2: dest = &header->encoding; break;
            case 3: dest = kind == PAGE_DATA ? &header->def_encoding : NULL; break;
            default: break;
            }
        }
      if (dest != NULL)
        {
          if (!dc_thrift_expect_type (reader, type, DC_THRIFT_I32, "page header field", error)
              || !dc_thrift_read_i32 (reader, dest, error))
            return FALSE;
        }
      else if (!dc_thrift_skip (reader, type, error))
        {
          return FALSE;
        }
    }
  dc_thrift_struct_end (reader);
  header->has_body = TRUE;
  return TRUE;
}

static gboolean
parse_page_header (const guint8  *data,
                   gsize          len,
                   PageHeader    *header,
                   gsize         *header_len,
                   GError       **error)
{
  DcThriftReader reader;
  gint16 last_id = 0;

  memset (header, 0, sizeof *header);
  header->type = -1;
  header->uncompressed_size = -1;
  header->compressed_size = -1;
  header->encoding = -1;
  header->def_encoding = DC_PARQUET_ENC_RLE;
  header->is_compressed = TRUE;

  dc_thrift_reader_init (&reader, data, len, "page header");
  if (!dc_thrift_struct_begin (&reader, error))
    return FALSE;
  for (;;)
    {
      gint16 id;
      guint8 type;

      if (!dc_thrift_read_field_header (&reader, &last_id, &id, &type, error))
        return FALSE;
      if (type == DC_THRIFT_STOP)
        break;
      switch (id)
        {
        case 1:
        case 2:
        case 3:
          {
            gint32 value;

            if (!dc_thrift_expect_type (&reader, type, DC_THRIFT_I32, "page header field", error)
                || !dc_thrift_read_i32 (&reader, &value, error))
              return FALSE;
            if (id == 1)
              header->type = value;
            else if (id == 2)
              header->uncompressed_size = value;
            else
              header->compressed_size = value;
          }
          break;
        case 5:
        case 7:
        case 8:
          {
            gboolean matches = (id == 5 && header->type == PAGE_DATA)
                               || (id == 7 && header->type == PAGE_DICTIONARY)
                               || (id == 8 && header->type == PAGE_DATA_V2);

            if (!matches)
              {
                if (!dc_thrift_skip (&reader, type, error))
                  return FALSE;
                break;
              }
            if (!dc_thrift_expect_type (&reader, type, DC_THRIFT_STRUCT, "page header", error)
                || !parse_sub_header (&reader, header, header->type, error))
              return FALSE;
          }
          break;
        default:
          if (!dc_thrift_skip (&reader, type, error))
            return FALSE;
        }
    }
  dc_thrift_struct_end (&reader);
  *header_len = dc_thrift_reader_consumed (&reader, data);
  if (header->compressed_size < 0 || header->uncompressed_size < 0)
    return corrupt (error, "a page header lacks its sizes");
  if ((guint32) header->uncompressed_size > DC_PARQUET_MAX_PAGE_SIZE)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "a parquet page of %d bytes exceeds the %u-byte limit",
                   header->uncompressed_size, DC_PARQUET_MAX_PAGE_SIZE);
      return FALSE;
    }
  return TRUE;
}

/* Decompresses @len bytes into exactly @expected bytes of @out. */
static gboolean
decompress (DcParquetPageDecoder  *decoder,
            int                    codec,
            const guint8          *in,
            gsize                  len,
            gsize                  expected,
            GByteArray            *out,
            GError               **error)
{
  /* Sizes that the input itself states are checked before the output is
   * allocated, so a lying header cannot make us allocate for nothing. */
  switch (codec)
    {
    case DC_PARQUET_CODEC_UNCOMPRESSED:
      if (len != expected)
        return corrupt (error, "an uncompressed page's sizes disagree");
      g_byte_array_set_size (out, (guint) expected);
      if (len > 0)
        memcpy (out->data, in, len);
      return TRUE;

    case DC_PARQUET_CODEC_SNAPPY:
      {
        size_t real = 0;
        size_t out_len = expected;

        if (snappy_uncompressed_length ((const char *) in, len, &real) != SNAPPY_OK
            || real != expected)
          return corrupt (error, "snappy data does not decompress to the declared size");
        g_byte_array_set_size (out, (guint) expected);
        if (snappy_uncompress ((const char *) in, len, (char *) out->data, &out_len) != SNAPPY_OK
            || out_len != expected)
          return corrupt (error, "snappy data does not decompress to the declared size");
        return TRUE;
      }

    case DC_PARQUET_CODEC_ZSTD:
      {
        unsigned long long content = ZSTD_getFrameContentSize (in, len);
        size_t n;

        if (content == ZSTD_CONTENTSIZE_ERROR
            || (content != ZSTD_CONTENTSIZE_UNKNOWN && content != expected))
          return corrupt (error, "zstd data does not decompress to the declared size");
        g_byte_array_set_size (out, (guint) expected);
        if (decoder->zstd == NULL)
          decoder->zstd = ZSTD_createDCtx ();
        n = ZSTD_decompressDCtx (decoder->zstd, out->data, expected, in, len);
        if (ZSTD_isError (n) || n != expected)
          return corrupt (error, "zstd data does not decompress to the declared size");
        return TRUE;
      }

    case DC_PARQUET_CODEC_GZIP:
      {
        z_stream stream = { 0 };
        int status;

        g_byte_array_set_size (out, (guint) expected);
        /* 15 + 32: a zlib or gzip header, detected automatically. */
        if (inflateInit2 (&stream, 15 + 32) != Z_OK)
          return corrupt (error, "zlib could not start");
        stream.next_in = (Bytef *) in;
        stream.avail_in = (uInt) len;
        stream.next_out = out->data;
        stream.avail_out = (uInt) expected;
        status = inflate (&stream, Z_FINISH);
        inflateEnd (&stream);
        if (status != Z_STREAM_END || stream.total_out != expected)
          return corrupt (error, "gzip data does not decompress to the declared size");
        return TRUE;
      }

    default:
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "parquet compression codec %s (%d) is not supported "
                   "(supported: UNCOMPRESSED, SNAPPY, GZIP, ZSTD)",
                   dc_parquet_codec_to_string (codec), codec);
      return FALSE;
    }
}

static gboolean
read_dictionary (DcParquetPageDecoder  *decoder,
                 const DcParquetChunk  *chunk,
                 const PageHeader      *header,
                 const guint8          *payload,
                 GError               **error)
{
  const guint8 *pos;
  const guint8 *end;

  if (decoder->has_dict)
    return corrupt (error, "a second dictionary page in one column chunk");
  if (header->encoding != DC_PARQUET_ENC_PLAIN
      && header->encoding != DC_PARQUET_ENC_PLAIN_DICTIONARY)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "parquet dictionary encoding %s is not supported",
                   dc_parquet_encoding_to_string (header->encoding));
      return FALSE;
    }
  if (!decompress (decoder, chunk->codec, payload, (gsize) header->compressed_size,
                   (gsize) header->uncompressed_size, decoder->dict_data, error))
    return FALSE;

  /* A PLAIN byte array takes at least four bytes, which bounds the count. */
  if (header->num_values < 0 || (gsize) header->num_values > decoder->dict_data->len / 4)
    return corrupt (error, "the dictionary's value count exceeds its size");
  g_array_set_size (decoder->dict, 0);
  pos = decoder->dict_data->data;
  end = pos + decoder->dict_data->len;
  for (gint32 i = 0; i < header->num_values; i++)
    {
      DictEntry entry;
      guint32 n;

      if (end - pos < 4)
        return corrupt (error, "the dictionary ends early");
      n = read_le32 (pos);
      pos += 4;
      if (n > (gsize) (end - pos))
        return corrupt (error, "a dictionary value runs past the page");
      entry.offset = (guint32) (pos - decoder->dict_data->data);
      entry.len = n;
      g_array_append_val (decoder->dict, entry);
      pos += n;
    }
  decoder->has_dict = TRUE;
  return TRUE;
}

/* Decodes @n rows from the value section @values (already decompressed) with
 * optional definition levels @levels. */
static gboolean
decode_values (DcParquetPageDecoder   *decoder,
               const DcParquetColumn  *column,
               Window                 *window,
               gint32                  encoding,
               gint32                  n,
               RleDecoder             *levels,
               const guint8           *values,
               gsize                   values_len,
               DcParquetValueFunc      func,
               gpointer                user_data,
               GError                **error)
{
  const guint8 *pos = values;
  const guint8 *end = values + values_len;
  gboolean dictionary;
  RleDecoder indices;
  const DictEntry *dict = (const DictEntry *) (const void *) decoder->dict->data;
  guint n_dict = decoder->dict->len;

  switch (encoding)
    {
    case DC_PARQUET_ENC_PLAIN:
      dictionary = FALSE;
      break;
    case DC_PARQUET_ENC_PLAIN_DICTIONARY:
    case DC_PARQUET_ENC_RLE_DICTIONARY:
      dictionary = TRUE;
      if (!decoder->has_dict)
        return corrupt (error, "a dictionary-encoded page without a dictionary");
      if (pos >= end)
        {
          /* An all-null page may carry no index bytes at all. */
          rle_init (&indices, pos, 0, 0);
        }
      else
        {
          if (*pos > 32)
            return corrupt (error, "a dictionary index width above 32 bits");
          rle_init (&indices, pos + 1, (gsize) (end - pos - 1), *pos);
        }
      break;
    default:
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "parquet value encoding %s (%d) is not supported "
                   "(supported: PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY)",
                   dc_parquet_encoding_to_string (encoding), encoding);
      return FALSE;
    }

  for (gint32 i = 0; i < n && !window->stopped; i++)
    {
      if (levels != NULL)
        {
          guint32 level;

          if (!rle_next (levels, &level, error))
            return FALSE;
          if (level < column->max_def_level)
            {
              if (!count_decoded (decoder, window, 0, error))
                return FALSE;
              pass_row (window, NULL, 0, func, user_data);
              continue;
            }
        }

      if (dictionary)
        {
          guint32 index;

          if (!rle_next (&indices, &index, error))
            return FALSE;
          if (index >= n_dict)
            return corrupt (error, "a dictionary index out of range");
          if (!count_decoded (decoder, window, dict[index].len, error))
            return FALSE;
          pass_row (window, (const char *) decoder->dict_data->data + dict[index].offset,
                    dict[index].len, func, user_data);
        }
      else
        {
          guint32 len;

          if (end - pos < 4)
            return corrupt (error, "the values end early");
          len = read_le32 (pos);
          pos += 4;
          if (len > (gsize) (end - pos))
            return corrupt (error, "a value runs past the page");
          if (!count_decoded (decoder, window, len, error))
            return FALSE;
          pass_row (window, (const char *) pos, len, func, user_data);
          pos += len;
        }
    }
  return TRUE;
}

static gboolean
read_data_page (DcParquetPageDecoder   *decoder,
                const DcParquetColumn  *column,
                const DcParquetChunk   *chunk,
                Window                 *window,
                const PageHeader       *header,
                const guint8           *payload,
                DcParquetValueFunc      func,
                gpointer                user_data,
                GError                **error)
{
  guint level_width = g_bit_storage (column->max_def_level);
  RleDecoder levels;
  const guint8 *values;
  gsize values_len;

  if (header->type == PAGE_DATA)
    {
      const guint8 *pos;
      const guint8 *end;

      if (!decompress (decoder, chunk->codec, payload, (gsize) header->compressed_size,
                       (gsize) header->uncompressed_size, decoder->page, error))
        return FALSE;
      pos = decoder->page->data;
      end = pos + decoder->page->len;
      if (column->max_def_level > 0)
        {
          guint32 n;

          if (header->def_encoding != DC_PARQUET_ENC_RLE)
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                           "parquet definition level encoding %s is not supported",
                           dc_parquet_encoding_to_string (header->def_encoding));
              return FALSE;
            }
          if (end - pos < 4)
            return corrupt (error, "the definition levels end early");
          n = read_le32 (pos);
          pos += 4;
          if (n > (gsize) (end - pos))
            return corrupt (error, "the definition levels run past the page");
          rle_init (&levels, pos, n, level_width);
          pos += n;
        }
      values = pos;
      values_len = (gsize) (end - pos);
    }
  else
    {
      gsize levels_len;

      if (header->def_length < 0 || header->rep_length != 0
          || header->def_length > header->compressed_size
          || header->def_length > header->uncompressed_size)
        return corrupt (error, "a v2 page's level lengths do not fit the page");
      if (header->num_nulls < 0 || header->num_nulls > header->num_values)
        return corrupt (error, "a v2 page's null count exceeds its value count");
      levels_len = (gsize) header->def_length;
      if (column->max_def_level > 0)
        rle_init (&levels, payload, levels_len, level_width);
      else if (levels_len != 0)
        return corrupt (error, "definition levels in a required column");

      if (header->is_compressed)
        {
          if (!decompress (decoder, chunk->codec, payload + levels_len,
                           (gsize) header->compressed_size - levels_len,
                           (gsize) header->uncompressed_size - levels_len, decoder->page, error))
            return FALSE;
          values = decoder->page->data;
          values_len = decoder->page->len;
        }
      else
        {
          if (header->compressed_size != header->uncompressed_size)
            return corrupt (error, "an uncompressed v2 page's sizes disagree");
          values = payload + levels_len;
          values_len = (gsize) header->compressed_size - levels_len;
        }
    }

  return decode_values (decoder, column, window, header->encoding, header->num_values,
                        column->max_def_level > 0 ? &levels : NULL,
                        values, values_len, func, user_data, error);
}

DcParquetPageDecoder *
dc_parquet_page_decoder_new (void)
{
  DcParquetPageDecoder *decoder = g_new0 (DcParquetPageDecoder, 1);

  decoder->page = g_byte_array_new ();
  decoder->dict_data = g_byte_array_new ();
  decoder->dict = g_array_new (FALSE, FALSE, sizeof (DictEntry));
  return decoder;
}

void
dc_parquet_page_decoder_free (DcParquetPageDecoder *decoder)
{
  if (decoder == NULL)
    return;
  g_clear_pointer (&decoder->zstd, ZSTD_freeDCtx);
  g_byte_array_unref (decoder->page);
  g_byte_array_unref (decoder->dict_data);
  g_array_unref (decoder->dict);
  g_free (decoder->origin);
  g_free (decoder);
}

/**
 * dc_parquet_page_decoder_set_origin:
 * @name: (nullable): the file's name, or %NULL to name nothing
 * @row_group: the row group the next chunks belong to
 *
 * Says where the next chunks come from; errors then name the file and row
 * group (and the page, where it matters).
 */
void
dc_parquet_page_decoder_set_origin (DcParquetPageDecoder *decoder,
                                    const char           *name,
                                    guint                 row_group)
{
  g_free (decoder->origin);
  decoder->origin = g_strdup (name);
  decoder->origin_group = row_group;
}

static gboolean
decode_chunk (DcParquetPageDecoder   *decoder,
              const DcParquetColumn  *column,
              const DcParquetChunk   *chunk,
              const guint8           *data,
              gsize                   len,
              Window                 *window,
              DcParquetValueFunc      func,
              gpointer                user_data,
              GError                **error)
{
  const guint8 *pos = data;
  const guint8 *end = data + len;

  if (column->type != DC_PARQUET_BYTE_ARRAY || column->max_rep_level > 0
      || chunk->type != DC_PARQUET_BYTE_ARRAY)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "column “%s” is not a plain top-level byte-array column", column->path);
      return FALSE;
    }
  if (chunk->num_values < 0)
    return corrupt (error, "a negative value count");

  decoder->has_dict = FALSE;
  g_array_set_size (decoder->dict, 0);
  window->chunk_cap = MAX ((guint64) DC_PARQUET_MAX_PAGE_DECODED,
                           (guint64) len * DC_PARQUET_MAX_EXPANSION);

  /* The pages' value counts must add up to the chunk's: a page may hold no
   * more than what is left, and the chunk may not end before. */
  while (window->row < (guint64) chunk->num_values && !window->stopped)
    {
      PageHeader header;
      gsize header_len;
      const guint8 *payload;

      if (pos >= end)
        return corrupt (error, "the column chunk ends before all its values");
      if (!parse_page_header (pos, (gsize) (end - pos), &header, &header_len, error))
        return FALSE;
      pos += header_len;
      if ((gsize) header.compressed_size > (gsize) (end - pos))
        return corrupt (error, "a page runs past the end of its column chunk");
      payload = pos;
      pos += header.compressed_size;

      switch (header.type)
        {
        case PAGE_DICTIONARY:
          if (!header.has_body)
            return corrupt (error, "a dictionary page without its header");
          if (!read_dictionary (decoder, chunk, &header, payload, error))
            return FALSE;
          break;
        case PAGE_DATA:
        case PAGE_DATA_V2:
          if (!header.has_body)
            return corrupt (error, "a data page without its header");
          if (header.num_values < 0
              || (guint64) header.num_values > (guint64) chunk->num_values - window->row)
            return corrupt (error, "a page holds more values than its column chunk");
          /* Every row counts at least 4 bytes: refuse a page whose count
           * alone is past the cap before decoding any of it. */
          if ((guint64) header.num_values * 4 > DC_PARQUET_MAX_PAGE_DECODED)
            return page_too_large (decoder, window, error);
          if (window->row + (guint64) header.num_values <= window->first_row)
            {
              /* All its rows are before the window: skip it undecoded. */
              window->row += (guint64) header.num_values;
              break;
            }
          window->page_decoded = 0;
          if (!read_data_page (decoder, column, chunk, window, &header, payload, func, user_data,
                               error))
            return FALSE;
          break;
        case PAGE_INDEX:
          break;
        default:
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                       "parquet page type %d is not supported", header.type);
          return FALSE;
        }
      window->page_index++;
    }
  return TRUE;
}

/**
 * dc_parquet_page_decoder_decode_rows:
 * @column: the leaf column (a top-level BYTE_ARRAY column)
 * @chunk: its chunk's metadata
 * @data: the chunk's bytes, from its first page to its end
 * @first_row: the first row of the chunk to pass on; pages wholly before it
 *   are skipped without being decoded
 * @max_bytes: stop after the row that brings the value bytes passed on to
 *   this many or more
 * @func: called once per row passed on, in order
 * @n_rows: (out) (optional): how many rows were passed on
 * @finished: (out) (optional): whether the chunk's last row was reached
 *
 * Decodes part of one column chunk, so that a reader can take its text a
 * slice at a time with bounded memory. Stops at the first error; rows
 * already passed to @func stay passed.
 */
gboolean
dc_parquet_page_decoder_decode_rows (DcParquetPageDecoder   *decoder,
                                     const DcParquetColumn  *column,
                                     const DcParquetChunk   *chunk,
                                     const guint8           *data,
                                     gsize                   len,
                                     guint64                 first_row,
                                     guint64                 max_bytes,
                                     DcParquetValueFunc      func,
                                     gpointer                user_data,
                                     guint64                *n_rows,
                                     gboolean               *finished,
                                     GError                **error)
{
  Window window = { 0 };
  gboolean ok;

  g_return_val_if_fail (decoder != NULL, FALSE);
  g_return_val_if_fail (func != NULL, FALSE);

  window.first_row = first_row;
  window.max_bytes = max_bytes;
  ok = decode_chunk (decoder, column, chunk, data, len, &window, func, user_data, error);
  if (!ok && !window.named && decoder->origin != NULL)
    g_prefix_error (error, "%s, row group %u: ", decoder->origin, decoder->origin_group);
  if (n_rows != NULL)
    *n_rows = window.n_rows;
  if (finished != NULL)
    *finished = ok && window.row >= (guint64) MAX (chunk->num_values, 0);
  return ok;
}

/**
 * dc_parquet_page_decoder_decode:
 * @column: the leaf column (a top-level BYTE_ARRAY column)
 * @chunk: its chunk's metadata
 * @data: the chunk's bytes, from its first page to its end
 * @func: called once per row, in order
 *
 * Decodes every page of one column chunk. Stops at the first error; rows
 * already passed to @func stay passed.
 */
gboolean
dc_parquet_page_decoder_decode (DcParquetPageDecoder   *decoder,
                                const DcParquetColumn  *column,
                                const DcParquetChunk   *chunk,
                                const guint8           *data,
                                gsize                   len,
                                DcParquetValueFunc      func,
                                gpointer                user_data,
                                GError                **error)
{
  return dc_parquet_page_decoder_decode_rows (decoder, column, chunk, data, len, 0, G_MAXUINT64,
                                              func, user_data, NULL, NULL, error);
}
