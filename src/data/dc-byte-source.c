/* dc-byte-source.c: random access to the bytes of a local or remote file.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-byte-source.h"

#include "dc-data-error.h"
#include "dc-regular-file.h"

typedef struct
{
  DcByteSource  parent;
  GMappedFile  *mapped;
  GBytes       *contents;
} FileSource;

gpointer
_dc_byte_source_alloc (const DcByteSourceClass *klass,
                       gsize                    struct_size,
                       const char              *name)
{
  DcByteSource *source = g_malloc0 (struct_size);

  source->klass = klass;
  g_atomic_ref_count_init (&source->ref_count);
  source->name = g_strdup (name);
  return source;
}

DcByteSource *
dc_byte_source_ref (DcByteSource *source)
{
  g_atomic_ref_count_inc (&source->ref_count);
  return source;
}

void
dc_byte_source_unref (DcByteSource *source)
{
  if (source == NULL || !g_atomic_ref_count_dec (&source->ref_count))
    return;
  if (source->klass->finalize != NULL)
    source->klass->finalize (source);
  g_free (source->name);
  g_free (source);
}

const char *
dc_byte_source_get_name (DcByteSource *source)
{
  return source->name;
}

/**
 * dc_byte_source_read_tail:
 * @len: how many bytes to read from the end
 * @file_size: (out): the whole file's size
 *
 * Returns: (transfer full): the last min(@len, size) bytes
 */
GBytes *
dc_byte_source_read_tail (DcByteSource  *source,
                          gsize          len,
                          guint64       *file_size,
                          GCancellable  *cancellable,
                          GError       **error)
{
  GBytes *bytes;

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return NULL;
  bytes = source->klass->read_tail (source, len, file_size, cancellable, error);
  if (bytes != NULL)
    source->bytes_read += g_bytes_get_size (bytes);
  return bytes;
}

/**
 * dc_byte_source_read_ranges:
 * @out: (out caller-allocates) (array length=n_ranges): one #GBytes per range
 *
 * Reads each range exactly; on failure @out holds no references.
 */
gboolean
dc_byte_source_read_ranges (DcByteSource       *source,
                            const DcByteRange  *ranges,
                            guint               n_ranges,
                            GBytes            **out,
                            GCancellable       *cancellable,
                            GError            **error)
{
  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  if (!source->klass->read_ranges (source, ranges, n_ranges, out, cancellable, error))
    return FALSE;
  for (guint i = 0; i < n_ranges; i++)
    {
      g_assert (g_bytes_get_size (out[i]) == ranges[i].length);
      source->bytes_read += ranges[i].length;
    }
  return TRUE;
}

static GBytes *
file_read_tail (DcByteSource  *source,
                gsize          len,
                guint64       *file_size,
                GCancellable  *cancellable,
                GError       **error)
{
  FileSource *self = (FileSource *) source;
  gsize size = g_bytes_get_size (self->contents);
  gsize n = MIN (len, size);

  *file_size = size;
  return g_bytes_new_from_bytes (self->contents, size - n, n);
}

static gboolean
file_read_ranges (DcByteSource       *source,
                  const DcByteRange  *ranges,
                  guint               n_ranges,
                  GBytes            **out,
                  GCancellable       *cancellable,
                  GError            **error)
{
  FileSource *self = (FileSource *) source;
  gsize size = g_bytes_get_size (self->contents);

  for (guint i = 0; i < n_ranges; i++)
    if (ranges[i].offset > size || ranges[i].length > size - ranges[i].offset)
      {
        g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                     "%s: bytes %" G_GUINT64_FORMAT "–%" G_GUINT64_FORMAT
                     " lie beyond its end (%" G_GSIZE_FORMAT " bytes)", source->name,
                     ranges[i].offset, ranges[i].offset + ranges[i].length, size);
        return FALSE;
      }
  /* Slices of the mapping: no copy. */
  for (guint i = 0; i < n_ranges; i++)
    out[i] = g_bytes_new_from_bytes (self->contents, ranges[i].offset, ranges[i].length);
  return TRUE;
}

static void
file_finalize (DcByteSource *source)
{
  FileSource *self = (FileSource *) source;

  g_clear_pointer (&self->contents, g_bytes_unref);
  g_clear_pointer (&self->mapped, g_mapped_file_unref);
}

static const DcByteSourceClass file_source_class = {
  file_read_tail,
  file_read_ranges,
  file_finalize,
};

/**
 * dc_byte_source_new_for_path:
 *
 * Maps a local file read-only.
 *
 * Returns: (transfer full): a source, or %NULL with @error set
 */
DcByteSource *
dc_byte_source_new_for_path (const char  *path,
                             GError     **error)
{
  GMappedFile *mapped = dc_regular_file_map (path, error);
  FileSource *self;

  if (mapped == NULL)
    return NULL;
  self = _dc_byte_source_alloc (&file_source_class, sizeof (FileSource), path);
  self->mapped = mapped;
  self->contents = g_mapped_file_get_bytes (mapped);
  return (DcByteSource *) self;
}

/**
 * dc_byte_source_new_for_bytes:
 * @name: what messages call it
 *
 * A source over bytes already in memory (tests, fuzzing, small downloads).
 *
 * Returns: (transfer full): a source holding a reference to @bytes
 */
DcByteSource *
dc_byte_source_new_for_bytes (GBytes     *bytes,
                              const char *name)
{
  FileSource *self = _dc_byte_source_alloc (&file_source_class, sizeof (FileSource), name);

  self->contents = g_bytes_ref (bytes);
  return (DcByteSource *) self;
}
