/* fuzz-tokenizer-json.c: libFuzzer target for tokenizer.json loading.
 *
 * The input is a tokenizer.json. When the loader accepts it, a fixed text
 * (and the input's first 64 bytes, when they are UTF-8) is encoded and the
 * ids decoded again: every id must be inside the vocabulary, and decoding
 * must give valid UTF-8. Anything else is a refusal with a message.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "model/dc-bpe-tokenizer.h"

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

static void
round_trip (DcBpeTokenizer *tok,
            const char     *text,
            gssize          len)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) ids = dc_bpe_tokenizer_encode (tok, text, len, TRUE, &error);
  g_autofree char *back = NULL;

  if (ids == NULL)
    return;
  for (guint i = 0; i < ids->len; i++)
    g_assert_cmpuint (g_array_index (ids, guint32, i), <, dc_bpe_tokenizer_get_vocab_size (tok));
  back = dc_bpe_tokenizer_decode (tok, (guint32 *) ids->data, ids->len, FALSE, &error);
  g_assert_no_error (error);
  g_assert_true (g_utf8_validate (back, -1, NULL));
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json ((const char *) data,
                                                                  (gssize) size, &error);
  gsize head = MIN (size, 64);

  if (tok == NULL)
    {
      g_assert_nonnull (error);
      return 0;
    }
  round_trip (tok, "Hello, world! It's 2024: café 東京 🙂 <|endoftext|>\r\n  x", -1);
  if (g_utf8_validate ((const char *) data, (gssize) head, NULL))
    round_trip (tok, (const char *) data, (gssize) head);
  return 0;
}
