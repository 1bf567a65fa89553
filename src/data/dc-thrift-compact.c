/* dc-thrift-compact.c: a bounds-checked reader of the Thrift compact protocol.
 *
 * The encoding (Apache Thrift, "compact protocol" specification): a field
 * header byte holds the field id delta in its high nibble (0: a zigzag i16
 * follows) and the type in its low nibble; integers are zigzag varints;
 * binary is a varint length and the bytes; a list header holds the size in
 * its high nibble (15: a varint follows) and the element type in its low one.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-thrift-compact.h"

#include "dc-data-error.h"

static gboolean
fail_truncated (DcThriftReader  *reader,
                GError         **error)
{
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
               "corrupt parquet file: the %s ends early", reader->what);
  return FALSE;
}

void
dc_thrift_reader_init (DcThriftReader *reader,
                       const guint8   *data,
                       gsize           len,
                       const char     *what)
{
  reader->pos = data;
  reader->end = data + len;
  reader->depth = 0;
  reader->what = what;
}

gsize
dc_thrift_reader_consumed (const DcThriftReader *reader,
                           const guint8         *start)
{
  return (gsize) (reader->pos - start);
}

static gboolean
read_varint (DcThriftReader  *reader,
             guint64         *value,
             GError         **error)
{
  guint64 result = 0;

  /* A 64-bit varint takes at most ten bytes; more is corrupt, not a bigger number. */
  for (guint shift = 0; shift < 70; shift += 7)
    {
      guint8 byte;

      if (reader->pos >= reader->end)
        return fail_truncated (reader, error);
      byte = *reader->pos++;
      result |= (guint64) (byte & 0x7f) << shift;
      if ((byte & 0x80) == 0)
        {
          *value = result;
          return TRUE;
        }
    }
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
               "corrupt parquet file: an overlong integer in the %s", reader->what);
  return FALSE;
}

static gint64
zigzag (guint64 v)
{
  return (gint64) (v >> 1) ^ -(gint64) (v & 1);
}

gboolean
dc_thrift_read_i64 (DcThriftReader  *reader,
                    gint64          *value,
                    GError         **error)
{
  guint64 raw;

  if (!read_varint (reader, &raw, error))
    return FALSE;
  *value = zigzag (raw);
  return TRUE;
}

gboolean
dc_thrift_read_i32 (DcThriftReader  *reader,
                    gint32          *value,
                    GError         **error)
{
  gint64 wide;

  if (!dc_thrift_read_i64 (reader, &wide, error))
    return FALSE;
  if (wide < G_MININT32 || wide > G_MAXINT32)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: a 32-bit field out of range in the %s",
                   reader->what);
      return FALSE;
    }
  *value = (gint32) wide;
  return TRUE;
}

gboolean
dc_thrift_read_binary (DcThriftReader  *reader,
                       const guint8   **data,
                       gsize           *len,
                       GError         **error)
{
  guint64 n;

  if (!read_varint (reader, &n, error))
    return FALSE;
  if (n > (guint64) (reader->end - reader->pos))
    return fail_truncated (reader, error);
  *data = reader->pos;
  *len = (gsize) n;
  reader->pos += n;
  return TRUE;
}

gboolean
dc_thrift_read_field_header (DcThriftReader  *reader,
                             gint16          *last_id,
                             gint16          *id,
                             guint8          *type,
                             GError         **error)
{
  guint8 byte;
  guint delta;

  if (reader->pos >= reader->end)
    return fail_truncated (reader, error);
  byte = *reader->pos++;
  *type = byte & 0x0f;
  if (*type == DC_THRIFT_STOP)
    {
      *id = 0;
      return TRUE;
    }
  if (*type > DC_THRIFT_STRUCT)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: unknown field type %u in the %s",
                   *type, reader->what);
      return FALSE;
    }
  delta = byte >> 4;
  if (delta != 0)
    {
      *id = (gint16) (*last_id + delta);
    }
  else
    {
      gint64 wide;

      if (!dc_thrift_read_i64 (reader, &wide, error))
        return FALSE;
      if (wide < G_MININT16 || wide > G_MAXINT16)
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                       "corrupt parquet file: a field id out of range in the %s",
                       reader->what);
          return FALSE;
        }
      *id = (gint16) wide;
    }
  *last_id = *id;
  return TRUE;
}

/**
 * dc_thrift_read_list_header_sized:
 * @min_elem_bytes: the fewest bytes one element can take in the encoding the
 *   caller accepts (a struct with a required field takes more than one)
 * @max_size: the most elements the caller accepts (a fixed cap), or %G_MAXUINT32
 *
 * Reads a list header and checks its size against the bytes left before
 * anything is allocated from it: @size × @min_elem_bytes must fit in them, so
 * what a caller allocates per element stays proportional to the input.
 */
gboolean
dc_thrift_read_list_header_sized (DcThriftReader  *reader,
                                  guint8          *elem_type,
                                  guint32         *size,
                                  gsize            min_elem_bytes,
                                  guint32          max_size,
                                  GError         **error)
{
  guint8 byte;
  guint64 n;

  g_return_val_if_fail (min_elem_bytes > 0, FALSE);

  if (reader->pos >= reader->end)
    return fail_truncated (reader, error);
  byte = *reader->pos++;
  *elem_type = byte & 0x0f;
  n = byte >> 4;
  if (n == 15 && !read_varint (reader, &n, error))
    return FALSE;
  /* Divide rather than multiply: n comes from the input and may be near 2^64. */
  if (n > (guint64) (reader->end - reader->pos) / min_elem_bytes)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: a list in the %s declares %" G_GUINT64_FORMAT
                   " elements, more than its %" G_GSIZE_FORMAT " remaining bytes can hold",
                   reader->what, n, (gsize) (reader->end - reader->pos));
      return FALSE;
    }
  if (n > max_size)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED,
                   "a list in the %s has %" G_GUINT64_FORMAT " elements; at most %u are "
                   "supported", reader->what, n, max_size);
      return FALSE;
    }
  *size = (guint32) n;
  return TRUE;
}

/**
 * dc_thrift_read_list_header:
 *
 * A list header whose elements take at least one byte each (booleans and
 * empty structs too): enough for skipping, which allocates nothing.
 */
gboolean
dc_thrift_read_list_header (DcThriftReader  *reader,
                            guint8          *elem_type,
                            guint32         *size,
                            GError         **error)
{
  return dc_thrift_read_list_header_sized (reader, elem_type, size, 1, G_MAXUINT32, error);
}

gboolean
dc_thrift_struct_begin (DcThriftReader  *reader,
                        GError         **error)
{
  if (reader->depth >= DC_THRIFT_MAX_DEPTH)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: structures nested too deeply in the %s",
                   reader->what);
      return FALSE;
    }
  reader->depth++;
  return TRUE;
}

void
dc_thrift_struct_end (DcThriftReader *reader)
{
  g_assert (reader->depth > 0);
  reader->depth--;
}

gboolean
dc_thrift_expect_type (DcThriftReader  *reader,
                       guint8           type,
                       guint8           expected,
                       const char      *field,
                       GError         **error)
{
  /* Booleans carry their value in the type nibble. */
  if (type == expected
      || (expected == DC_THRIFT_TRUE && type == DC_THRIFT_FALSE))
    return TRUE;
  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
               "corrupt parquet file: field “%s” of the %s has the wrong type",
               field, reader->what);
  return FALSE;
}

static gboolean
skip_element (DcThriftReader  *reader,
              guint8           type,
              gboolean         in_list,
              GError         **error)
{
  guint64 ignored;
  const guint8 *data;
  gsize len;

  switch (type)
    {
    case DC_THRIFT_TRUE:
    case DC_THRIFT_FALSE:
      /* A boolean field has no payload; a boolean list element is one byte. */
      if (in_list)
        {
          if (reader->pos >= reader->end)
            return fail_truncated (reader, error);
          reader->pos++;
        }
      return TRUE;
    case DC_THRIFT_BYTE:
      if (reader->pos >= reader->end)
        return fail_truncated (reader, error);
      reader->pos++;
      return TRUE;
    case DC_THRIFT_I16:
    case DC_THRIFT_I32:
    case DC_THRIFT_I64:
      return read_varint (reader, &ignored, error);
    case DC_THRIFT_DOUBLE:
      if (reader->end - reader->pos < 8)
        return fail_truncated (reader, error);
      reader->pos += 8;
      return TRUE;
    case DC_THRIFT_BINARY:
      return dc_thrift_read_binary (reader, &data, &len, error);
    case DC_THRIFT_LIST:
    case DC_THRIFT_SET:
      {
        guint8 elem_type;
        guint32 size;

        if (!dc_thrift_read_list_header (reader, &elem_type, &size, error))
          return FALSE;
        if (!dc_thrift_struct_begin (reader, error))
          return FALSE;
        for (guint32 i = 0; i < size; i++)
          if (!skip_element (reader, elem_type, TRUE, error))
            return FALSE;
        dc_thrift_struct_end (reader);
        return TRUE;
      }
    case DC_THRIFT_MAP:
      {
        guint64 size;
        guint8 kv = 0;

        if (!read_varint (reader, &size, error))
          return FALSE;
        if (size > (guint64) (reader->end - reader->pos))
          return fail_truncated (reader, error);
        if (size > 0)
          {
            if (reader->pos >= reader->end)
              return fail_truncated (reader, error);
            kv = *reader->pos++;
          }
        if (!dc_thrift_struct_begin (reader, error))
          return FALSE;
        for (guint64 i = 0; i < size; i++)
          if (!skip_element (reader, kv >> 4, TRUE, error)
              || !skip_element (reader, kv & 0x0f, TRUE, error))
            return FALSE;
        dc_thrift_struct_end (reader);
        return TRUE;
      }
    case DC_THRIFT_STRUCT:
      {
        gint16 last_id = 0;

        if (!dc_thrift_struct_begin (reader, error))
          return FALSE;
        for (;;)
          {
            gint16 id;
            guint8 field_type;

            if (!dc_thrift_read_field_header (reader, &last_id, &id, &field_type, error))
              return FALSE;
            if (field_type == DC_THRIFT_STOP)
              break;
            if (!skip_element (reader, field_type, FALSE, error))
              return FALSE;
          }
        dc_thrift_struct_end (reader);
        return TRUE;
      }
    default:
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                   "corrupt parquet file: unknown type %u in the %s", type, reader->what);
      return FALSE;
    }
}

/**
 * dc_thrift_skip:
 *
 * Skips one field's value of @type (unknown fields are how parquet versions
 * stay compatible), bounded by %DC_THRIFT_MAX_DEPTH.
 */
gboolean
dc_thrift_skip (DcThriftReader  *reader,
                guint8           type,
                GError         **error)
{
  return skip_element (reader, type, FALSE, error);
}
