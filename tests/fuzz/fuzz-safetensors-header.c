/* fuzz-safetensors-header.c: libFuzzer target for the safetensors header.
 *
 * The input is a whole safetensors file. When the reader accepts it, every
 * tensor must lie inside the data area, the tensors must tile it exactly,
 * and widening each tensor's first elements from the input's bytes must
 * stay inside the input (ASan checks). The same bytes also go to the
 * sharded index parser.
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
  g_autoptr(DcSafetensors) st = NULL;
  g_autoptr(DcSafetensorsIndex) index = NULL;
  guint64 header_len, pos = 0;

  index = dc_safetensors_index_parse ((const char *) data, (gssize) size, NULL);
  if (!dc_safetensors_read_prefix (data, size, size, &header_len, &error))
    return 0;
  st = dc_safetensors_parse_header ((const char *) data + 8, header_len, size, &error);
  if (st == NULL)
    {
      g_assert_nonnull (error);
      return 0;
    }
  g_assert_cmpuint (st->data_start + st->data_size, ==, size);
  for (guint i = 0; i < st->tensors->len; i++)
    {
      const DcSafetensorsTensor *t = st->tensors->pdata[i];
      gsize n = (gsize) MIN (t->numel, 16);
      float out[16];

      g_assert_cmpuint (t->begin, ==, pos);
      g_assert_cmpuint (t->end, <=, st->data_size);
      g_assert_cmpuint (t->end - t->begin, ==, t->numel * dc_safetensors_dtype_size (t->dtype));
      dc_widen_to_f32 (t->dtype, data + st->data_start + t->begin, out, n);
      pos = t->end;
    }
  g_assert_cmpuint (pos, ==, st->data_size);
  return 0;
}
