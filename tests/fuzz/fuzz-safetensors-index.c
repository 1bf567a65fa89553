/* fuzz-safetensors-index.c: libFuzzer target for a sharded checkpoint's
 * model.safetensors.index.json (dc_safetensors_index_parse), which the model
 * repo fetches from the Hub before any shard.
 *
 * The input is the file's text. The parser either refuses it with a message
 * or returns an index whose every tensor maps to one of its listed shards.
 * Seeded with the sharded test model's index.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "model/dc-safetensors.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcSafetensorsIndex) index = NULL;
  GHashTableIter iter;
  gpointer shard;

  if (size > G_MAXSSIZE)
    return 0;
  index = dc_safetensors_index_parse ((const char *) data, (gssize) size, &error);
  g_assert ((index == NULL) == (error != NULL));
  if (index == NULL)
    return 0;
  g_hash_table_iter_init (&iter, index->weight_map);
  while (g_hash_table_iter_next (&iter, NULL, &shard))
    {
      gboolean listed = FALSE;

      for (guint i = 0; i < index->shards->len && !listed; i++)
        listed = g_str_equal (g_ptr_array_index (index->shards, i), shard);
      g_assert (listed);
    }
  return 0;
}
