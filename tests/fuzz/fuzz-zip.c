/* fuzz-zip.c: libFuzzer target for the zip directory reader alone.
 *
 * The input is a whole archive. When the directory is accepted, every entry
 * is read (its CRC checked) and must be a slice of the input that no other
 * entry shares; names must be unique. Seeds: tests/data/fuzz/fuzz-zip/.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "model/dc-zip.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(GBytes) bytes = g_bytes_new_static (data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcZipReader) zip = dc_zip_reader_new (bytes, &error);
  gsize total = 0;

  g_assert ((zip == NULL) == (error != NULL));
  if (zip == NULL)
    return 0;
  g_assert_cmpuint (g_hash_table_size (zip->by_name), ==, zip->entries->len);
  for (guint i = 0; i < zip->entries->len; i++)
    {
      DcZipEntry *entry = g_ptr_array_index (zip->entries, i);
      g_autoptr(GError) read_error = NULL;
      GBytes *read;
      gsize len = 0;
      const guint8 *p = g_bytes_get_data (entry->data, &len);

      g_assert (len == 0 || (p >= data && p + len <= data + size));
      total += len;
      read = dc_zip_reader_read (zip, entry->name, &read_error);
      g_assert ((read == NULL) == (read_error != NULL));
      g_assert (read == NULL || read == entry->data);
    }
  /* Disjoint entries cannot hold more bytes than the file. */
  g_assert_cmpuint (total, <=, size);
  return 0;
}
