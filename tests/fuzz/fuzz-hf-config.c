/* fuzz-hf-config.c: libFuzzer target for a Hugging Face config.json
 * (dc_hf_config_parse).
 *
 * The input is the file's text. The parser either refuses it with a message
 * or returns a config whose sizes it vouches for: the parameter count is
 * computed from them (it must not trap on overflow) and the config freed.
 * Seeded with the test models' config.json files.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "model/dc-hf-config.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcHfConfig) config = NULL;

  if (size > G_MAXSSIZE)
    return 0;
  config = dc_hf_config_parse ((const char *) data, (gssize) size, &error);
  g_assert ((config == NULL) == (error != NULL));
  if (config != NULL)
    (void) dc_hf_config_n_params (config);
  return 0;
}
