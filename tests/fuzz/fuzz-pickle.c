/* fuzz-pickle.c: libFuzzer target for the restricted pickle machine alone.
 *
 * The input is a pickle (data.pkl). It is stored in a valid archive next to
 * storages "0"–"3" of 1, 16, 256 and 4096 floats, so that persistent ids can
 * resolve, and every tensor of an accepted root dict is read with its own
 * shape. Seeds: tests/data/fuzz/fuzz-pickle/.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "model/dc-pt-reader.h"
#include "model/dc-zip.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

static GBytes *storages[4];

static void
read_tensors (DcPtFile        *file,
              const DcPtValue *value)
{
  if (value->type == DC_PT_VALUE_TENSOR)
    {
      g_autoptr(GError) error = NULL;
      gint64 numel = 1;
      g_autofree float *out = NULL;

      for (guint d = 0; d < value->n_dims; d++)
        {
          if (value->sizes[d] > 4096 || numel * value->sizes[d] > 4096)
            return;  /* larger than any storage here: refused anyway */
          numel *= value->sizes[d];
        }
      out = g_new (float, MAX (numel, 1));
      if (!dc_pt_file_read_tensor (file, value, "fuzz", value->n_dims, value->sizes, out, &error))
        g_assert (error != NULL);
      return;
    }
  if (value->type == DC_PT_VALUE_DICT)
    for (guint i = 1; i < value->items->len; i += 2)
      read_tensors (file, value->items->pdata[i]);
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(DcZipWriter) writer = dc_zip_writer_new ();
  g_autoptr(GBytes) pickle = g_bytes_new_static (data, size);
  g_autoptr(GBytes) archive = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcPtFile) file = NULL;
  const guint counts[4] = { 1, 16, 256, 4096 };

  if (storages[0] == NULL)
    for (guint i = 0; i < 4; i++)
      storages[i] = g_bytes_new_take (g_new0 (float, counts[i]), counts[i] * sizeof (float));
  if (size > DC_PT_MAX_PICKLE_SIZE)
    return 0;
  dc_zip_writer_add (writer, "fuzz/data.pkl", pickle);
  for (guint i = 0; i < 4; i++)
    {
      g_autofree char *name = g_strdup_printf ("fuzz/data/%u", i);

      dc_zip_writer_add (writer, name, storages[i]);
    }
  archive = dc_zip_writer_finish (writer, &error);
  g_assert_no_error (error);
  file = dc_pt_file_new_from_bytes (archive, &error);
  g_assert ((file == NULL) == (error != NULL));
  if (file != NULL)
    read_tensors (file, file->root);
  return 0;
}
