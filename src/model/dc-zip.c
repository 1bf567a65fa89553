/* dc-zip.c: stored zip entries, written aligned and read defensively.
 *
 * libzip (Debian's libzip-dev) writes stored entries too, but it lays out the
 * archive itself at commit time and cannot pad each entry's local header so
 * that the data lands on a 64-byte boundary, which PyTorch's layout has. The
 * format subset here is small (local headers, central directory, end record),
 * so it is written by hand; CRC-32 comes from zlib.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-zip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dc-model-error.h"

#define LOCAL_HEADER_SIG   0x04034b50u
#define CENTRAL_HEADER_SIG 0x02014b50u
#define END_RECORD_SIG     0x06054b50u
#define LOCAL_HEADER_LEN   30
#define CENTRAL_HEADER_LEN 46
#define END_RECORD_LEN     22
/* PyTorch's padding extra field id, the bytes "FB" read little-endian. */
#define PADDING_FIELD_ID   0x4246u
#define MAX_NAME_LEN       4096

struct _DcZipWriter
{
  GByteArray *out;
  GByteArray *central;
  guint       n_entries;
};

static void
put_u16 (GByteArray *a,
         guint       v)
{
  guint8 b[2] = { v & 0xff, (v >> 8) & 0xff };

  g_byte_array_append (a, b, 2);
}

static void
put_u32 (GByteArray *a,
         guint32     v)
{
  guint8 b[4] = { v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff };

  g_byte_array_append (a, b, 4);
}

static guint
get_u16 (const guint8 *p)
{
  return p[0] | (p[1] << 8);
}

static guint32
get_u32 (const guint8 *p)
{
  return (guint32) p[0] | ((guint32) p[1] << 8) | ((guint32) p[2] << 16) | ((guint32) p[3] << 24);
}

DcZipWriter *
dc_zip_writer_new (void)
{
  DcZipWriter *self = g_new0 (DcZipWriter, 1);

  self->out = g_byte_array_new ();
  self->central = g_byte_array_new ();
  return self;
}

void
dc_zip_writer_free (DcZipWriter *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->out, g_byte_array_unref);
  g_clear_pointer (&self->central, g_byte_array_unref);
  g_free (self);
}

/* The fixed DOS date 1980-01-01 00:00 keeps archives byte-identical between runs. */
#define DOS_TIME 0
#define DOS_DATE ((0 << 9) | (1 << 5) | 1)

void
dc_zip_writer_add (DcZipWriter *self,
                   const char  *name,
                   GBytes      *data)
{
  gsize size = 0;
  const guint8 *bytes = g_bytes_get_data (data, &size);
  gsize name_len = strlen (name);
  guint32 crc = crc32 (0, Z_NULL, 0);
  guint32 offset = self->out->len;
  gsize data_start;
  guint padding;

  g_return_if_fail (size < G_MAXUINT32 && name_len < MAX_NAME_LEN);
  g_return_if_fail (self->out->len < G_MAXUINT32 - size);

  crc = crc32 (crc, bytes, size);
  data_start = offset + LOCAL_HEADER_LEN + name_len;
  /* The extra field needs at least its 4-byte header. */
  padding = (DC_ZIP_ALIGNMENT - (data_start + 4) % DC_ZIP_ALIGNMENT) % DC_ZIP_ALIGNMENT + 4;

  put_u32 (self->out, LOCAL_HEADER_SIG);
  put_u16 (self->out, 20);  /* version needed: 2.0 */
  put_u16 (self->out, 0);   /* flags */
  put_u16 (self->out, 0);   /* method: stored */
  put_u16 (self->out, DOS_TIME);
  put_u16 (self->out, DOS_DATE);
  put_u32 (self->out, crc);
  put_u32 (self->out, size);
  put_u32 (self->out, size);
  put_u16 (self->out, name_len);
  put_u16 (self->out, padding);
  g_byte_array_append (self->out, (const guint8 *) name, name_len);
  put_u16 (self->out, PADDING_FIELD_ID);
  put_u16 (self->out, padding - 4);
  for (guint i = 0; i < padding - 4; i++)
    g_byte_array_append (self->out, (const guint8 *) "Z", 1);
  g_assert (self->out->len % DC_ZIP_ALIGNMENT == 0);
  g_byte_array_append (self->out, bytes, size);

  put_u32 (self->central, CENTRAL_HEADER_SIG);
  put_u16 (self->central, 20);  /* version made by */
  put_u16 (self->central, 20);
  put_u16 (self->central, 0);
  put_u16 (self->central, 0);
  put_u16 (self->central, DOS_TIME);
  put_u16 (self->central, DOS_DATE);
  put_u32 (self->central, crc);
  put_u32 (self->central, size);
  put_u32 (self->central, size);
  put_u16 (self->central, name_len);
  put_u16 (self->central, 0);  /* extra */
  put_u16 (self->central, 0);  /* comment */
  put_u16 (self->central, 0);  /* disk */
  put_u16 (self->central, 0);  /* internal attributes */
  put_u32 (self->central, 0);  /* external attributes */
  put_u32 (self->central, offset);
  g_byte_array_append (self->central, (const guint8 *) name, name_len);
  self->n_entries++;
}

/**
 * dc_zip_writer_finish:
 *
 * Returns: (transfer full): the whole archive; the writer is spent afterwards.
 */
GBytes *
dc_zip_writer_finish (DcZipWriter  *self,
                      GError      **error)
{
  guint32 central_offset = self->out->len;
  guint32 central_len = self->central->len;

  if (self->n_entries > 0xffff || (guint64) central_offset + central_len >= G_MAXUINT32)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "checkpoint too large for a zip without zip64");
      return NULL;
    }
  g_byte_array_append (self->out, self->central->data, central_len);
  put_u32 (self->out, END_RECORD_SIG);
  put_u16 (self->out, 0);
  put_u16 (self->out, 0);
  put_u16 (self->out, self->n_entries);
  put_u16 (self->out, self->n_entries);
  put_u32 (self->out, central_len);
  put_u32 (self->out, central_offset);
  put_u16 (self->out, 0);
  return g_byte_array_free_to_bytes (g_steal_pointer (&self->out));
}

static void
zip_entry_free (gpointer data)
{
  DcZipEntry *entry = data;

  g_free (entry->name);
  g_bytes_unref (entry->data);
  g_free (entry);
}

static gboolean
zip_fail (GError     **error,
          const char  *what)
{
  g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
               "not a valid checkpoint archive: %s", what);
  return FALSE;
}

/* Where an entry lies in the file: its local header up to the end of its data. */
typedef struct
{
  gsize       start;
  gsize       end;
  guint       index;  /* in the directory: ties sort the same on every run */
  DcZipEntry *entry;
} EntrySpan;

static gboolean
read_entry (DcZipReader   *self,
            const guint8  *base,
            gsize          len,
            gsize          dir_end,
            gsize         *pos,
            EntrySpan     *span,
            GError       **error)
{
  const guint8 *c = base + *pos;
  guint method, name_len, extra_len, comment_len, local_name_len, local_extra_len;
  guint32 crc, csize, usize, local_offset;
  gsize data_offset;
  g_autofree char *name = NULL;
  DcZipEntry *entry;

  if (dir_end - *pos < CENTRAL_HEADER_LEN || get_u32 (c) != CENTRAL_HEADER_SIG)
    return zip_fail (error, "bad central directory entry");
  method = get_u16 (c + 10);
  crc = get_u32 (c + 16);
  csize = get_u32 (c + 20);
  usize = get_u32 (c + 24);
  name_len = get_u16 (c + 28);
  extra_len = get_u16 (c + 30);
  comment_len = get_u16 (c + 32);
  local_offset = get_u32 (c + 42);
  if (dir_end - *pos - CENTRAL_HEADER_LEN < (gsize) name_len + extra_len + comment_len)
    return zip_fail (error, "central directory entry overruns the file");
  if (name_len == 0 || memchr (c + CENTRAL_HEADER_LEN, '\0', name_len) != NULL)
    return zip_fail (error, "bad entry name");
  name = g_strndup ((const char *) c + CENTRAL_HEADER_LEN, name_len);
  if (method != 0 || csize != usize)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "checkpoint entry “%s” is compressed (method %u); only stored entries are read",
                   name, method);
      return FALSE;
    }
  if (csize == G_MAXUINT32 || local_offset == G_MAXUINT32)
    return zip_fail (error, "zip64 entries are not supported");
  if (local_offset > len || len - local_offset < LOCAL_HEADER_LEN
      || get_u32 (base + local_offset) != LOCAL_HEADER_SIG)
    return zip_fail (error, "bad local header");
  local_name_len = get_u16 (base + local_offset + 26);
  local_extra_len = get_u16 (base + local_offset + 28);
  /* Sizes and CRC come from the central directory, so entries written with a
   * trailing data descriptor (flag bit 3, as PyTorch writes) read the same. */
  data_offset = (gsize) local_offset + LOCAL_HEADER_LEN + local_name_len + local_extra_len;
  if (data_offset > len || len - data_offset < csize)
    return zip_fail (error, "entry data overruns the file (truncated?)");
  /* One name, one entry: a second entry of the same name could make two
   * readers (this one and PyTorch, say) see different data. */
  if (g_hash_table_contains (self->by_name, name))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                   "not a valid checkpoint archive: duplicate entry “%s”", name);
      return FALSE;
    }

  entry = g_new0 (DcZipEntry, 1);
  entry->name = g_steal_pointer (&name);
  entry->data = g_bytes_new_from_bytes (self->file, data_offset, csize);
  entry->crc = crc;
  g_ptr_array_add (self->entries, entry);
  g_hash_table_insert (self->by_name, entry->name, entry);
  span->start = local_offset;
  span->end = data_offset + csize;
  span->index = self->entries->len - 1;
  span->entry = entry;
  *pos += CENTRAL_HEADER_LEN + name_len + extra_len + comment_len;
  return TRUE;
}

static int
compare_spans (gconstpointer a,
               gconstpointer b)
{
  const EntrySpan *x = a, *y = b;

  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Entries may not share bytes with each other or with the central
 * directory: otherwise a small file names the same data many times over
 * (65,535 entries over one block) and every pass over the entries reads it
 * again. Sorting by offset makes the check O(n log n). */
static gboolean
check_disjoint (EntrySpan     *spans,
                guint          n_spans,
                gsize          central_offset,
                GError       **error)
{
  qsort (spans, n_spans, sizeof (EntrySpan), compare_spans);
  for (guint i = 0; i < n_spans; i++)
    {
      if (spans[i].end > central_offset)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "not a valid checkpoint archive: entry “%s” overlaps the central directory",
                       spans[i].entry->name);
          return FALSE;
        }
      if (i > 0 && spans[i].start < spans[i - 1].end)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "not a valid checkpoint archive: entries “%s” and “%s” overlap",
                       spans[i - 1].entry->name, spans[i].entry->name);
          return FALSE;
        }
    }
  return TRUE;
}

/**
 * dc_zip_reader_new:
 * @file: the whole archive
 *
 * Reads the directory and checks that every entry lies inside the file, apart
 * from every other entry and before the directory, and that names are unique.
 * CRCs are checked later, by dc_zip_reader_read(), for the entries read.
 *
 * Returns: (transfer full): the entries, or %NULL with @error set
 */
DcZipReader *
dc_zip_reader_new (GBytes  *file,
                   GError **error)
{
  g_autoptr(DcZipReader) self = g_new0 (DcZipReader, 1);
  g_autofree EntrySpan *spans = NULL;
  gsize len = 0;
  const guint8 *base = g_bytes_get_data (file, &len);
  gsize end = G_MAXSIZE;
  guint n_entries;
  guint32 central_len, central_offset;
  gsize pos;

  self->file = g_bytes_ref (file);
  self->entries = g_ptr_array_new_with_free_func (zip_entry_free);
  self->by_name = g_hash_table_new (g_str_hash, g_str_equal);

  if (len < END_RECORD_LEN)
    {
      zip_fail (error, "file too short (truncated?)");
      return NULL;
    }
  /* The end record sits in the last 22 + 65535 (comment) bytes. */
  for (gsize i = len - END_RECORD_LEN + 1; i-- > 0 && len - i <= END_RECORD_LEN + 0xffff;)
    {
      if (get_u32 (base + i) == END_RECORD_SIG && i + END_RECORD_LEN + get_u16 (base + i + 20) == len)
        {
          end = i;
          break;
        }
    }
  if (end == G_MAXSIZE)
    {
      zip_fail (error, "no end of central directory (truncated?)");
      return NULL;
    }
  n_entries = get_u16 (base + end + 10);
  central_len = get_u32 (base + end + 12);
  central_offset = get_u32 (base + end + 16);
  if (get_u16 (base + end + 4) != 0 || get_u16 (base + end + 6) != 0
      || n_entries != get_u16 (base + end + 8))
    {
      zip_fail (error, "multi-disk archives are not supported");
      return NULL;
    }
  /* PyTorch's writer puts zip64 end records between the directory and the
   * end record even for small files: allow a gap, never an overlap. */
  if (central_offset > end || end - central_offset < central_len)
    {
      zip_fail (error, "central directory out of bounds");
      return NULL;
    }
  /* Each entry takes at least a header in the directory: the count cannot
   * ask for more spans than the directory's bytes could describe. */
  if ((gsize) n_entries * CENTRAL_HEADER_LEN > central_len)
    {
      zip_fail (error, "central directory size mismatch");
      return NULL;
    }
  spans = g_new (EntrySpan, MAX (n_entries, 1));
  pos = central_offset;
  for (guint i = 0; i < n_entries; i++)
    if (!read_entry (self, base, len, (gsize) central_offset + central_len, &pos, &spans[i], error))
      return NULL;
  if (pos != (gsize) central_offset + central_len)
    {
      zip_fail (error, "central directory size mismatch");
      return NULL;
    }
  if (!check_disjoint (spans, n_entries, central_offset, error))
    return NULL;
  return g_steal_pointer (&self);
}

void
dc_zip_reader_free (DcZipReader *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->by_name, g_hash_table_unref);
  g_clear_pointer (&self->entries, g_ptr_array_unref);
  g_clear_pointer (&self->file, g_bytes_unref);
  g_free (self);
}

/**
 * dc_zip_reader_read:
 *
 * The data of entry @name after its CRC-32 matched (checked once per entry,
 * on its first read).
 *
 * Returns: (transfer none): the data, or %NULL with @error set when the
 *   entry is missing (%G_IO_ERROR_NOT_FOUND) or corrupt
 */
GBytes *
dc_zip_reader_read (DcZipReader  *self,
                    const char   *name,
                    GError      **error)
{
  DcZipEntry *entry = g_hash_table_lookup (self->by_name, name);

  if (entry == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                   "checkpoint entry “%s” is missing", name);
      return NULL;
    }
  if (!entry->crc_checked)
    {
      gsize size = 0;
      const guint8 *data = g_bytes_get_data (entry->data, &size);

      /* Fuzz builds (docs/TEST_RESULTS.md, "Fuzzing") skip the CRC so that
       * mutations reach the pickle machine instead of all failing here. */
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
      if (crc32 (crc32 (0, Z_NULL, 0), data, size) != entry->crc)
#else
      if (FALSE)
#endif
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                       "checkpoint entry “%s” is corrupt (CRC mismatch)", name);
          return NULL;
        }
      entry->crc_checked = TRUE;
    }
  return entry->data;
}
