/* fuzz-infer-json.c: libFuzzer target for the JSON output constraint.
 *
 * An odd first byte: the rest is text fed to the grammar byte by byte. The
 * prefix it accepts, completed with the closing bytes it names, must be a
 * JSON text json-glib parses, the closing exactly `distance` long; a text
 * it accepts whole and calls complete must parse as it is.
 * An even first byte: the rest, split at NUL bytes, is a vocabulary (every
 * single byte is added, as byte-level vocabularies have), the second byte a
 * token budget; tokens are picked under the mask by a rule driven by the
 * input, and what comes out must parse too. Neither may crash or hang.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "infer/dc-json-constraint.h"

/* Tokens in a fuzzed vocabulary beyond the 256 single bytes. */
#define MAX_EXTRA_TOKENS 512

int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);

static void
assert_parses (const char *text,
               gsize       len)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  if (!json_parser_load_from_data (parser, text, (gssize) len, &error)
      || json_parser_get_root (parser) == NULL)
    g_error ("the constraint let through text json-glib refuses (%s)",
             error != NULL ? error->message : "empty");
}

static void
fuzz_grammar (const guint8 *data,
              gsize         size)
{
  g_autoptr(GString) text = g_string_new (NULL);
  DcJsonState s;
  guint distance;
  gsize i;

  dc_json_state_init (&s);
  for (i = 0; i < size; i++)
    {
      DcJsonState t = s;

      if (!dc_json_state_feed (&t, &data[i], 1))
        break;
      s = t;
      g_string_append_c (text, (char) data[i]);
    }
  if (i == size && dc_json_state_is_complete (&s))
    assert_parses (text->str, text->len);
  distance = dc_json_state_distance (&s);
  i = text->len;
  dc_json_state_append_closing (&s, text);
  g_assert_cmpuint (text->len - i, ==, distance);
  assert_parses (text->str, text->len);
}

static void
fuzz_vocabulary (const guint8 *data,
                 gsize         size)
{
  g_autoptr(GPtrArray) tokens = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(DcJsonConstraint) constraint = NULL;
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree guint8 *allowed = NULL;
  guint budget, end_id;
  gsize start;

  if (size < 2)
    return;
  budget = 1 + data[1] % 64;
  for (guint b = 0; b < 256; b++)
    g_ptr_array_add (tokens, g_bytes_new (&(guint8) { (guint8) b }, 1));
  start = 2;
  for (gsize i = 2; i <= size && tokens->len < 256 + MAX_EXTRA_TOKENS; i++)
    if (i == size || data[i] == 0)
      {
        if (i > start)
          g_ptr_array_add (tokens, g_bytes_new (data + start, i - start));
        start = i + 1;
      }
  end_id = tokens->len;
  g_ptr_array_add (tokens, NULL);
  constraint = dc_json_constraint_new (tokens, end_id);
  allowed = g_new (guint8, tokens->len);

  for (guint step = 0; step < budget; step++)
    {
      gsize n = dc_json_constraint_allowed (constraint, budget - step, allowed);
      guint pick, seen = 0;
      gsize len;
      const guint8 *bytes;

      g_assert_cmpuint (n, >, 0);   /* single bytes can always finish the text */
      /* The input chooses among the allowed ids, so the fuzzer steers the path. */
      {
        gsize k = 2 + (size > 2 ? step % (size - 2) : 0);

        pick = (guint) ((k < size ? data[k] : step) % n);
      }
      for (guint id = 0; id < tokens->len; id++)
        if (allowed[id] && seen++ == pick)
          {
            pick = id;
            break;
          }
      if (pick == end_id)
        break;
      g_assert_true (dc_json_constraint_accept (constraint, pick));
      bytes = g_bytes_get_data (g_ptr_array_index (tokens, pick), &len);
      g_string_append_len (text, (const char *) bytes, (gssize) len);
    }
  g_assert_true (dc_json_constraint_is_complete (constraint));
  assert_parses (text->str, text->len);
}

int
LLVMFuzzerTestOneInput (const guint8 *data,
                        gsize         size)
{
  if (size == 0)
    return 0;
  if (data[0] & 1)
    fuzz_grammar (data + 1, size - 1);
  else
    fuzz_vocabulary (data, size);
  return 0;
}
