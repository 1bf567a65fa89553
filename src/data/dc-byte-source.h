/* dc-byte-source.h: random access to the bytes of a local or remote file.
 *
 * The parquet reader asks for the file's tail first (to learn its size and
 * read the footer), then for the byte ranges of the column chunks it needs.
 * A local source maps the file; an HTTP source (dc-hf-client.h) turns the
 * ranges into coalesced Range requests. Sources are reference counted and
 * used from one thread at a time.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct
{
  guint64 offset;
  guint64 length;
} DcByteRange;

typedef struct _DcByteSource DcByteSource;

typedef struct
{
  /* Reads the last @len bytes (fewer if the file is shorter) and the size. */
  GBytes  *(*read_tail)   (DcByteSource       *self,
                           gsize               len,
                           guint64            *file_size,
                           GCancellable       *cancellable,
                           GError            **error);
  /* Fills @out[i] with exactly @ranges[i].length bytes for each range. */
  gboolean (*read_ranges) (DcByteSource       *self,
                           const DcByteRange  *ranges,
                           guint               n_ranges,
                           GBytes            **out,
                           GCancellable       *cancellable,
                           GError            **error);
  void     (*finalize)    (DcByteSource       *self);
} DcByteSourceClass;

struct _DcByteSource
{
  const DcByteSourceClass *klass;
  gatomicrefcount          ref_count;
  char                    *name;        /* for messages: a path or a URL */
  guint64                  bytes_read;  /* payload bytes fetched so far */
};

DcByteSource *dc_byte_source_new_for_path (const char          *path,
                                           GError             **error);
DcByteSource *dc_byte_source_new_for_bytes (GBytes              *bytes,
                                           const char          *name);
DcByteSource *dc_byte_source_ref          (DcByteSource        *source);
void          dc_byte_source_unref        (DcByteSource        *source);
GBytes       *dc_byte_source_read_tail    (DcByteSource        *source,
                                           gsize                len,
                                           guint64             *file_size,
                                           GCancellable        *cancellable,
                                           GError             **error);
gboolean      dc_byte_source_read_ranges  (DcByteSource        *source,
                                           const DcByteRange   *ranges,
                                           guint                n_ranges,
                                           GBytes             **out,
                                           GCancellable        *cancellable,
                                           GError             **error);
const char   *dc_byte_source_get_name     (DcByteSource        *source);

/* For implementations: allocates @struct_size bytes with the header filled. */
gpointer      _dc_byte_source_alloc       (const DcByteSourceClass *klass,
                                           gsize                    struct_size,
                                           const char              *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcByteSource, dc_byte_source_unref)

G_END_DECLS
