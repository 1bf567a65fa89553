/* dc-zip.h: the stored (uncompressed) zip subset that PyTorch checkpoints use.
 *
 * Writer: every entry is stored (method 0) with its CRC-32, and its data starts
 * on a 64-byte boundary, padded with an extra field of id "FB" exactly as
 * PyTorch's own writer does, so that readers may map tensors in place.
 * Reader: accepts only stored entries, checks every offset and size against
 * the file before use, refuses entries that overlap each other or the
 * central directory and duplicate names, and verifies the CRC-32 of each
 * entry when it is first read (never of entries nobody reads, so opening
 * costs no more than the directory). No zip64 (entries < 4 GiB).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define DC_ZIP_ALIGNMENT 64
/* The most entries a reader accepts: a checkpoint has a few hundred. */
#define DC_ZIP_MAX_ENTRIES 65536

typedef struct _DcZipWriter DcZipWriter;

DcZipWriter *dc_zip_writer_new        (void);
void         dc_zip_writer_free       (DcZipWriter   *self);
void         dc_zip_writer_add        (DcZipWriter   *self,
                                       const char    *name,
                                       GBytes        *data);
GBytes      *dc_zip_writer_finish     (DcZipWriter   *self,
                                       GError       **error);

typedef struct
{
  char    *name;
  GBytes  *data;  /* a slice of the reader's file, not yet CRC-checked */
  guint32  crc;
  guint    crc_checked : 1;
} DcZipEntry;

typedef struct
{
  GBytes     *file;
  GPtrArray  *entries;  /* of DcZipEntry, in directory order */
  GHashTable *by_name;  /* name → DcZipEntry, borrowed from entries */
} DcZipReader;

DcZipReader *dc_zip_reader_new        (GBytes        *file,
                                       GError       **error);
void         dc_zip_reader_free       (DcZipReader   *self);
GBytes      *dc_zip_reader_read       (DcZipReader   *self,
                                       const char    *name,
                                       GError       **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcZipWriter, dc_zip_writer_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcZipReader, dc_zip_reader_free)

G_END_DECLS
