/* dc-kit-blob-tool.c: writes a checkpoint's kit blob (dc_kit_blob_new ()),
 * for the kit tests and by hand:
 *
 *   dc-kit-blob-tool CHECKPOINT.pt OUT.blob
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <stdio.h>

#include "model/dc-checkpoint.h"
#include "model/dc-kit-blob.h"

int
main (int    argc,
      char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GBytes) blob = NULL;

  if (argc != 3)
    {
      fprintf (stderr, "usage: %s CHECKPOINT.pt OUT.blob\n", argv[0]);
      return 2;
    }
  model = dc_checkpoint_load (argv[1], NULL, &error);
  if (model != NULL)
    blob = dc_kit_blob_new (model, NAN, &error);
  if (blob == NULL || !g_file_set_contents (argv[2], g_bytes_get_data (blob, NULL),
                                            g_bytes_get_size (blob), &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  return 0;
}
