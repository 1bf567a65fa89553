/* fuzz-model-checkpoint.c: libFuzzer target for the .pt checkpoint reader.
 *
 * The input is a whole file: the zip reader, the restricted pickle machine
 * and the checkpoint checks all see it. Seed it with a real checkpoint
 * (`daisychain-cli train --out seed.pt`) and tests/data/pt-*.pt.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "model/dc-checkpoint.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(GBytes) bytes = g_bytes_new_static (data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  DcTrainSettings settings;

  model = dc_checkpoint_from_bytes (bytes, &settings, &error);
  g_assert ((model == NULL) == (error != NULL));
  return 0;
}
