/* dc-test-parquet.h: builders for small crafted parquet files in tests.
 *
 * A Thrift compact writer (the mirror of src/data/dc-thrift-compact.c) and
 * helpers that lay out "PAR1", one column chunk, the footer, its length and
 * "PAR1" for a single required UTF-8 column "text". Crafted files declare
 * what they like (2^31 rows in 140 bytes); the reader must refuse them
 * cheaply. Header-only so that each test can include it without a build
 * change.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

enum
{
  TW_I32 = 5,
  TW_I64 = 6,
  TW_BINARY = 8,
  TW_LIST = 9,
  TW_STRUCT = 12,
};

static inline void
tw_byte (GByteArray *b,
         guint8      v)
{
  g_byte_array_append (b, &v, 1);
}

static inline void
tw_varint (GByteArray *b,
           guint64     v)
{
  while (v >= 0x80)
    {
      tw_byte (b, (guint8) (v | 0x80));
      v >>= 7;
    }
  tw_byte (b, (guint8) v);
}

static inline void
tw_le32 (GByteArray *b,
         guint32     v)
{
  guint32 le = GUINT32_TO_LE (v);

  g_byte_array_append (b, (const guint8 *) &le, 4);
}

static inline guint64
tw_zigzag (gint64 v)
{
  return ((guint64) v << 1) ^ (guint64) (v >> 63);
}

/* A field header; @last is the previous field id of the enclosing struct. */
static inline void
tw_field (GByteArray *b,
          gint16     *last,
          gint16      id,
          guint8      type)
{
  if (id > *last && id - *last <= 15)
    {
      tw_byte (b, (guint8) (((id - *last) << 4) | type));
    }
  else
    {
      tw_byte (b, type);
      tw_varint (b, tw_zigzag (id));
    }
  *last = id;
}

static inline void
tw_i32 (GByteArray *b,
        gint16     *last,
        gint16      id,
        gint32      v)
{
  tw_field (b, last, id, TW_I32);
  tw_varint (b, tw_zigzag (v));
}

static inline void
tw_i64 (GByteArray *b,
        gint16     *last,
        gint16      id,
        gint64      v)
{
  tw_field (b, last, id, TW_I64);
  tw_varint (b, tw_zigzag (v));
}

static inline void
tw_string (GByteArray *b,
           gint16     *last,
           gint16      id,
           const char *s)
{
  tw_field (b, last, id, TW_BINARY);
  tw_varint (b, strlen (s));
  g_byte_array_append (b, (const guint8 *) s, (guint) strlen (s));
}

/* A list field's header: the elements follow. */
static inline void
tw_list (GByteArray *b,
         gint16     *last,
         gint16      id,
         guint8      elem_type,
         guint64     n)
{
  tw_field (b, last, id, TW_LIST);
  if (n < 15)
    {
      tw_byte (b, (guint8) ((n << 4) | elem_type));
    }
  else
    {
      tw_byte (b, (guint8) (0xf0 | elem_type));
      tw_varint (b, n);
    }
}

static inline void
tw_stop (GByteArray *b)
{
  tw_byte (b, 0);
}

/* A PLAIN dictionary page (uncompressed) holding @n_values values. */
static inline void
dc_test_parquet_dict_page (GByteArray         *b,
                           const char * const *values,
                           guint               n_values)
{
  g_autoptr(GByteArray) payload = g_byte_array_new ();
  gint16 last = 0;
  gint16 sub = 0;

  for (guint i = 0; i < n_values; i++)
    {
      tw_le32 (payload, (guint32) strlen (values[i]));
      g_byte_array_append (payload, (const guint8 *) values[i], (guint) strlen (values[i]));
    }
  tw_i32 (b, &last, 1, 2);                        /* DICTIONARY_PAGE */
  tw_i32 (b, &last, 2, (gint32) payload->len);
  tw_i32 (b, &last, 3, (gint32) payload->len);
  tw_field (b, &last, 7, TW_STRUCT);
  tw_i32 (b, &sub, 1, (gint32) n_values);
  tw_i32 (b, &sub, 2, 0);                         /* PLAIN */
  tw_stop (b);
  tw_stop (b);
  g_byte_array_append (b, payload->data, payload->len);
}

/* A v1 data page of @num_values rows, all dictionary entry 0: a bit width
 * of 0 and one RLE run, a few bytes whatever the count. */
static inline void
dc_test_parquet_rle_page (GByteArray *b,
                          gint32      num_values)
{
  g_autoptr(GByteArray) payload = g_byte_array_new ();
  gint16 last = 0;
  gint16 sub = 0;

  tw_byte (payload, 0);
  tw_varint (payload, (guint64) num_values << 1);
  tw_i32 (b, &last, 1, 0);                        /* DATA_PAGE */
  tw_i32 (b, &last, 2, (gint32) payload->len);
  tw_i32 (b, &last, 3, (gint32) payload->len);
  tw_field (b, &last, 5, TW_STRUCT);
  tw_i32 (b, &sub, 1, num_values);
  tw_i32 (b, &sub, 2, 8);                         /* RLE_DICTIONARY */
  tw_i32 (b, &sub, 3, 3);                         /* RLE levels */
  tw_i32 (b, &sub, 4, 3);
  tw_stop (b);
  tw_stop (b);
  g_byte_array_append (b, payload->data, payload->len);
}

/* A v1 PLAIN data page (uncompressed) holding @values. */
static inline void
dc_test_parquet_plain_page (GByteArray         *b,
                            const char * const *values,
                            guint               n_values)
{
  g_autoptr(GByteArray) payload = g_byte_array_new ();
  gint16 last = 0;
  gint16 sub = 0;

  for (guint i = 0; i < n_values; i++)
    {
      tw_le32 (payload, (guint32) strlen (values[i]));
      g_byte_array_append (payload, (const guint8 *) values[i], (guint) strlen (values[i]));
    }
  tw_i32 (b, &last, 1, 0);                        /* DATA_PAGE */
  tw_i32 (b, &last, 2, (gint32) payload->len);
  tw_i32 (b, &last, 3, (gint32) payload->len);
  tw_field (b, &last, 5, TW_STRUCT);
  tw_i32 (b, &sub, 1, (gint32) n_values);
  tw_i32 (b, &sub, 2, 0);                         /* PLAIN */
  tw_i32 (b, &sub, 3, 3);
  tw_i32 (b, &sub, 4, 3);
  tw_stop (b);
  tw_stop (b);
  g_byte_array_append (b, payload->data, payload->len);
}

/* The footer of a file whose one row group holds one column "text" (a
 * required UTF-8 byte array) in a chunk of @chunk_len bytes at offset 4. */
static inline void
dc_test_parquet_footer (GByteArray *b,
                        gsize       chunk_len,
                        gint64      num_values,
                        gint64      num_rows)
{
  gint16 last = 0;
  gint16 el = 0;
  gint16 rg = 0;
  gint16 cc = 0;
  gint16 cm = 0;

  tw_i32 (b, &last, 1, 1);
  tw_list (b, &last, 2, TW_STRUCT, 2);
  tw_string (b, &el, 4, "schema");
  tw_i32 (b, &el, 5, 1);
  tw_stop (b);
  el = 0;
  tw_i32 (b, &el, 1, 6);                          /* BYTE_ARRAY */
  tw_i32 (b, &el, 3, 0);                          /* REQUIRED */
  tw_string (b, &el, 4, "text");
  tw_i32 (b, &el, 6, 0);                          /* UTF8 */
  tw_stop (b);
  tw_i64 (b, &last, 3, num_rows);
  tw_list (b, &last, 4, TW_STRUCT, 1);
  tw_list (b, &rg, 1, TW_STRUCT, 1);
  tw_field (b, &cc, 3, TW_STRUCT);
  tw_i32 (b, &cm, 1, 6);
  tw_i32 (b, &cm, 4, 0);                          /* UNCOMPRESSED */
  tw_i64 (b, &cm, 5, num_values);
  tw_i64 (b, &cm, 6, (gint64) chunk_len);
  tw_i64 (b, &cm, 7, (gint64) chunk_len);
  tw_i64 (b, &cm, 9, 4);
  tw_stop (b);                                    /* ColumnMetaData */
  tw_stop (b);                                    /* ColumnChunk */
  tw_i64 (b, &rg, 3, num_rows);
  tw_stop (b);                                    /* RowGroup */
  tw_stop (b);                                    /* FileMetaData */
}

/* "PAR1", @chunk, the footer, its length and "PAR1". */
static inline GBytes *
dc_test_parquet_file (const GByteArray *chunk,
                      gint64            num_values,
                      gint64            num_rows)
{
  GByteArray *b = g_byte_array_new ();
  g_autoptr(GByteArray) footer = g_byte_array_new ();

  g_byte_array_append (b, (const guint8 *) "PAR1", 4);
  g_byte_array_append (b, chunk->data, chunk->len);
  dc_test_parquet_footer (footer, chunk->len, num_values, num_rows);
  g_byte_array_append (b, footer->data, footer->len);
  tw_le32 (b, footer->len);
  g_byte_array_append (b, (const guint8 *) "PAR1", 4);
  return g_byte_array_free_to_bytes (b);
}

/* A one-entry dictionary ( @value ) and @n_pages data pages of
 * @rows_per_page rows, each an RLE run of that entry. */
static inline GBytes *
dc_test_parquet_repeated (const char *value,
                          guint       n_pages,
                          gint32      rows_per_page,
                          gint64      num_values,
                          gint64      num_rows)
{
  g_autoptr(GByteArray) chunk = g_byte_array_new ();
  const char *values[] = { value };

  dc_test_parquet_dict_page (chunk, values, 1);
  for (guint i = 0; i < n_pages; i++)
    dc_test_parquet_rle_page (chunk, rows_per_page);
  return dc_test_parquet_file (chunk, num_values, num_rows);
}

G_END_DECLS
