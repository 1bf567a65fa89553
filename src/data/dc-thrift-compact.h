/* dc-thrift-compact.h: a bounds-checked reader of the Thrift compact protocol.
 *
 * Parquet stores its footer and page headers in this encoding. No C Thrift
 * library is packaged for Debian 12 (only the C++ and GLib-generator ones,
 * which need generated code), and the subset parquet uses is small, so it is
 * read by hand here. Every read checks the remaining length first; input is
 * untrusted.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  DC_THRIFT_STOP = 0,
  DC_THRIFT_TRUE = 1,
  DC_THRIFT_FALSE = 2,
  DC_THRIFT_BYTE = 3,
  DC_THRIFT_I16 = 4,
  DC_THRIFT_I32 = 5,
  DC_THRIFT_I64 = 6,
  DC_THRIFT_DOUBLE = 7,
  DC_THRIFT_BINARY = 8,
  DC_THRIFT_LIST = 9,
  DC_THRIFT_SET = 10,
  DC_THRIFT_MAP = 11,
  DC_THRIFT_STRUCT = 12,
} DcThriftType;

/* Structs nest at most this deep; deeper input is refused, not recursed into. */
#define DC_THRIFT_MAX_DEPTH 32

typedef struct
{
  const guint8 *pos;
  const guint8 *end;
  guint         depth;
  const char   *what;   /* names the structure in error messages */
} DcThriftReader;

void     dc_thrift_reader_init        (DcThriftReader  *reader,
                                       const guint8    *data,
                                       gsize            len,
                                       const char      *what);
gboolean dc_thrift_read_field_header  (DcThriftReader  *reader,
                                       gint16          *last_id,
                                       gint16          *id,
                                       guint8          *type,
                                       GError         **error);
gboolean dc_thrift_read_i32           (DcThriftReader  *reader,
                                       gint32          *value,
                                       GError         **error);
gboolean dc_thrift_read_i64           (DcThriftReader  *reader,
                                       gint64          *value,
                                       GError         **error);
gboolean dc_thrift_read_binary        (DcThriftReader  *reader,
                                       const guint8   **data,
                                       gsize           *len,
                                       GError         **error);
gboolean dc_thrift_read_list_header   (DcThriftReader  *reader,
                                       guint8          *elem_type,
                                       guint32         *size,
                                       GError         **error);
gboolean dc_thrift_read_list_header_sized (DcThriftReader  *reader,
                                       guint8          *elem_type,
                                       guint32         *size,
                                       gsize            min_elem_bytes,
                                       guint32          max_size,
                                       GError         **error);
gboolean dc_thrift_struct_begin       (DcThriftReader  *reader,
                                       GError         **error);
void     dc_thrift_struct_end         (DcThriftReader  *reader);
gboolean dc_thrift_skip               (DcThriftReader  *reader,
                                       guint8           type,
                                       GError         **error);
gboolean dc_thrift_expect_type        (DcThriftReader  *reader,
                                       guint8           type,
                                       guint8           expected,
                                       const char      *field,
                                       GError         **error);
gsize    dc_thrift_reader_consumed    (const DcThriftReader *reader,
                                       const guint8         *start);

G_END_DECLS
