/* test-infer-json.c: the JSON grammar state, the token mask built on it, and
 * the tokenizer's per-token bytes it needs.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "infer/dc-json-constraint.h"
#include "infer/dc-sampler.h"
#include "model/dc-bpe-tokenizer.h"
#include "model/dc-rng.h"

static gboolean
json_glib_parses (const char *text,
                  gsize       len)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  if (!json_parser_load_from_data (parser, text, (gssize) len, &error))
    {
      g_test_message ("json-glib: %s", error->message);
      return FALSE;
    }
  return json_parser_get_root (parser) != NULL;
}

static gboolean
accepts (const char *text)
{
  DcJsonState s;

  dc_json_state_init (&s);
  return dc_json_state_feed (&s, (const guint8 *) text, strlen (text));
}

static gboolean
completes (const char *text)
{
  DcJsonState s;

  dc_json_state_init (&s);
  return dc_json_state_feed (&s, (const guint8 *) text, strlen (text))
         && dc_json_state_is_complete (&s);
}

static void
test_grammar (void)
{
  const char *valid[] = {
    "0", "-0", "12", "-3.25e+10", "1E5", "0.5", "true", "false", "null", "\"\"",
    "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\u0000\"", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
    "[]", "{}", " [ 1 , [ ] , { } ] \n", "{\"a\":{\"b\":[true,null,\"x\"]},\"c\":-1}",
  };
  const char *prefixes[] = {
    "", " ", "[", "{", "{\"a", "{\"a\"", "{\"a\":", "[1,", "\"\\u00", "-", "1.", "1e", "1e-",
    "tr", "\"\xe2\x82", "[[[[",
  };
  const char *invalid[] = {
    "01", "-a", "1.e5", ".5", "+1", "[1,]", "{\"a\"}", "{a:1}", "{\"a\":1,}", "[1 2]", "tru e",
    "True", "\"\x01\"", "\"\\x\"", "\"\\ud800\"", "\"\\uDC00\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"",
    "\"\xf5\x80\x80\x80\"", "\"\x80\"", "1 2", "{} {}", "]", "[}", "{]", "nul1", "\"\\u12g4\"",
  };

  for (guint i = 0; i < G_N_ELEMENTS (valid); i++)
    {
      {
        g_autofree char *shown = g_strescape (valid[i], NULL);

        g_test_message ("valid: %s", shown);
      }
      g_assert_true (completes (valid[i]));
      g_assert_true (json_glib_parses (valid[i], strlen (valid[i])));
    }
  for (guint i = 0; i < G_N_ELEMENTS (prefixes); i++)
    {
      {
        g_autofree char *shown = g_strescape (prefixes[i], NULL);

        g_test_message ("prefix: %s", shown);
      }
      g_assert_true (accepts (prefixes[i]));
      g_assert_false (completes (prefixes[i]));
    }
  for (guint i = 0; i < G_N_ELEMENTS (invalid); i++)
    {
      {
        g_autofree char *shown = g_strescape (invalid[i], NULL);

        g_test_message ("invalid: %s", shown);
      }
      g_assert_false (accepts (invalid[i]));
    }
}

static void
test_depth_cap (void)
{
  g_autoptr(GString) deep = g_string_new (NULL);
  DcJsonState s;

  for (guint i = 0; i < DC_JSON_CONSTRAINT_MAX_DEPTH; i++)
    g_string_append (deep, i % 2 ? "[" : "{\"k\":");
  dc_json_state_init (&s);
  g_assert_true (dc_json_state_feed (&s, (const guint8 *) deep->str, deep->len));
  /* It ends inside an array: "]" closes it, then one byte per level. */
  g_assert_cmpuint (dc_json_state_distance (&s), ==, DC_JSON_CONSTRAINT_MAX_DEPTH);
  {
    DcJsonState t = s;

    g_assert_false (dc_json_state_feed (&t, (const guint8 *) "[", 1));
    t = s;
    g_assert_false (dc_json_state_feed (&t, (const guint8 *) "{", 1));
  }
  dc_json_state_append_closing (&s, deep);
  g_assert_true (json_glib_parses (deep->str, deep->len));
}

/* Any prefix the grammar accepts, completed with its closing bytes, is
 * valid JSON for json-glib, and the closing is exactly `distance` long.
 * Random bytes weighted towards JSON's alphabet reach every state. */
static void
test_closing_completes_any_prefix (void)
{
  static const char alphabet[] = "[[[{{{}[]\",:\\u0123456789abcdefEtrnl-+. \n\t\xc3\xa9\xe2\x82\xac\xf0\x9f";
  guint complete_seen = 0, max_depth = 0;

  for (guint64 run = 0; run < 20000; run++)
    {
      g_autoptr(GString) text = g_string_new (NULL);
      DcJsonState s;
      guint len = 1 + (guint) (dc_rng_u64 (run, 9, 0) % 100);

      dc_json_state_init (&s);
      /* Half the runs start inside a container, where most states are. */
      if (run % 2 == 1)
        {
          g_assert_true (dc_json_state_feed (&s, (const guint8 *) "[", 1));
          g_string_append_c (text, '[');
        }
      for (guint i = 0; i < len; i++)
        {
          guint64 r = dc_rng_u64 (run, 9, i + 1);
          guint8 c = r % 16 == 0 ? (guint8) (r >> 8) : (guint8) alphabet[(r >> 8) % (sizeof alphabet - 1)];
          DcJsonState t = s;

          if (!dc_json_state_feed (&t, &c, 1))
            continue;   /* skip bytes that do not fit: the prefix grows valid */
          s = t;
          g_string_append_c (text, (char) c);
        }
      max_depth = MAX (max_depth, s.depth);
      {
        guint distance = dc_json_state_distance (&s);
        gsize before = text->len;

        dc_json_state_append_closing (&s, text);
        g_assert_cmpuint (text->len - before, ==, distance);
        if (!json_glib_parses (text->str, text->len))
          g_error ("not valid JSON: %s", text->str);
        if (distance == 0)
          complete_seen++;
        {
          DcJsonState t;

          dc_json_state_init (&t);
          g_assert_true (dc_json_state_feed (&t, (const guint8 *) text->str, text->len));
          g_assert_true (dc_json_state_is_complete (&t));
        }
      }
    }
  g_test_message ("%u of 20000 prefixes were complete already; deepest %u", complete_seen,
                  max_depth);
  g_assert_cmpuint (max_depth, >=, 5);
}

/* A vocabulary like a byte-level one: every single byte, and longer pieces. */
static GPtrArray *
synthetic_vocab (void)
{
  static const char *const pieces[] = {
    "{\"", "\":", "\": ", "\",", "\"}", "true", "false", "null", "  ", "\n", "},", "]}", "[{",
    "name", " the", "12", "3.5", "e-", "\\n", "\\u00", "\xc3\xa9", "\xe2\x82", "\xac\"", "}}}",
    "]]", ",\"", "\"\"", "0.", "-1", "nul", "tr", "fals", "caf", "\":[", "\":{", "\": \"",
  };
  GPtrArray *tokens = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);

  for (guint b = 0; b < 256; b++)
    g_ptr_array_add (tokens, g_bytes_new (&(guint8) { (guint8) b }, 1));
  for (guint i = 0; i < G_N_ELEMENTS (pieces); i++)
    g_ptr_array_add (tokens, g_bytes_new (pieces[i], strlen (pieces[i])));
  g_ptr_array_add (tokens, NULL);   /* the end-of-text id: no bytes */
  g_ptr_array_add (tokens, NULL);   /* a padding id */
  return tokens;
}

/* Draws REMAINING tokens with random logits under the mask; returns the text. */
static GString *
generate_random (DcJsonConstraint *constraint,
                 GPtrArray        *tokens,
                 DcBpeTokenizer   *tokenizer,
                 guint32           end_id,
                 guint             budget,
                 guint64           seed,
                 gboolean         *ended)
{
  guint n = dc_json_constraint_get_vocab_size (constraint);
  g_autofree float *logits = g_new (float, n);
  g_autofree float *scratch = g_new (float, n);
  g_autofree guint8 *allowed = g_new (guint8, n);
  GString *text = g_string_new (NULL);

  *ended = FALSE;
  dc_json_constraint_reset (constraint);
  for (guint i = 0; i < budget; i++)
    {
      guint32 id;

      for (guint k = 0; k < n; k++)
        logits[k] = 4.0f * dc_rng_normal (seed, 11, (guint64) i << 32 | k);
      g_assert_cmpuint (dc_json_constraint_allowed (constraint, budget - i, allowed), >, 0);
      id = dc_sampler_pick (logits, allowed, n, 100, seed, i, scratch);
      g_assert_cmpuint (id, !=, DC_SAMPLER_NONE);
      if (id == end_id)
        {
          *ended = TRUE;
          break;
        }
      g_assert_true (dc_json_constraint_accept (constraint, id));
      if (tokens != NULL)
        {
          gsize len;
          const char *data = g_bytes_get_data (g_ptr_array_index (tokens, id), &len);

          g_string_append_len (text, data, (gssize) len);
        }
      else
        {
          gsize len;
          g_autofree guint8 *data = dc_bpe_tokenizer_dup_token_bytes (tokenizer, id, &len);

          g_assert_nonnull (data);
          g_assert_false (dc_bpe_tokenizer_is_special (tokenizer, id));
          g_string_append_len (text, (const char *) data, (gssize) len);
        }
    }
  return text;
}

static void
test_random_logits_give_valid_json (void)
{
  g_autoptr(GPtrArray) tokens = synthetic_vocab ();
  guint32 end_id = tokens->len - 2;
  g_autoptr(DcJsonConstraint) constraint = dc_json_constraint_new (tokens, end_id);
  const guint budgets[] = { 1, 2, 3, 5, 8, 20, 60, 200 };
  guint ended = 0, runs = 0;

  for (guint b = 0; b < G_N_ELEMENTS (budgets); b++)
    for (guint64 seed = 1; seed <= 60; seed++)
      {
        gboolean end;
        g_autoptr(GString) text = generate_random (constraint, tokens, NULL, end_id, budgets[b],
                                                   seed, &end);

        runs++;
        ended += end;
        g_assert_true (dc_json_constraint_is_complete (constraint));
        if (!json_glib_parses (text->str, text->len))
          g_error ("budget %u seed %" G_GUINT64_FORMAT ": not valid JSON: %s", budgets[b], seed,
                   text->str);
      }
  g_test_message ("%u of %u runs ended with end-of-text before the budget", ended, runs);
}

/* Nothing fits: the mask says so (the session then stops with a message). */
static void
test_no_token_fits (void)
{
  g_autoptr(GPtrArray) tokens = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(DcJsonConstraint) constraint = NULL;
  guint8 allowed[2];

  g_ptr_array_add (tokens, g_bytes_new ("hello", 5));
  g_ptr_array_add (tokens, g_bytes_new ("}", 1));
  constraint = dc_json_constraint_new (tokens, -1);
  g_assert_cmpuint (dc_json_constraint_allowed (constraint, 10, allowed), ==, 0);
  g_assert_false (dc_json_constraint_accept (constraint, 0));
}

static DcBpeTokenizer *
load_llama_tiny_tokenizer (void)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                   "tokenizer.json", NULL);
  g_autoptr(GError) error = NULL;
  DcBpeTokenizer *tokenizer = dc_bpe_tokenizer_new_from_file (path, &error);

  g_assert_no_error (error);
  return tokenizer;
}

/* Each token's bytes are what decode writes for it alone. */
static void
test_token_bytes (void)
{
  g_autoptr(DcBpeTokenizer) tokenizer = load_llama_tiny_tokenizer ();
  guint n = dc_bpe_tokenizer_get_vocab_size (tokenizer), checked = 0;
  gsize len = 123;

  for (guint32 id = 0; id < n; id++)
    {
      g_autofree guint8 *bytes = dc_bpe_tokenizer_dup_token_bytes (tokenizer, id, &len);
      g_autofree char *decoded = NULL;

      g_assert_nonnull (bytes);
      g_assert_cmpuint (len, >, 0);
      g_assert_cmpuint (bytes[len], ==, 0);
      if (!g_utf8_validate ((const char *) bytes, (gssize) len, NULL))
        continue;   /* decode replaces a partial character; the bytes keep it */
      decoded = dc_bpe_tokenizer_decode (tokenizer, &id, 1, FALSE, NULL);
      g_assert_cmpmem (decoded, strlen (decoded), bytes, len);
      checked++;
    }
  g_assert_cmpuint (checked, >, n / 2);
  g_assert_null (dc_bpe_tokenizer_dup_token_bytes (tokenizer, n + 5, &len));
  g_assert_cmpuint (len, ==, 0);
  /* llama-tiny's id 0 is its special end-of-text token. */
  g_assert_true (dc_bpe_tokenizer_is_special (tokenizer, 0));
  g_assert_false (dc_bpe_tokenizer_is_special (tokenizer, 300));
  g_assert_false (dc_bpe_tokenizer_is_special (tokenizer, n + 5));
}

/* The real vocabulary (with padding ids past the tokenizer's): valid JSON
 * whatever the logits, and no special token inside. */
static void
test_real_vocabulary (void)
{
  g_autoptr(DcBpeTokenizer) tokenizer = load_llama_tiny_tokenizer ();
  guint n = dc_bpe_tokenizer_get_vocab_size (tokenizer) + 8;
  g_autoptr(DcJsonConstraint) constraint = dc_json_constraint_new_for_tokenizer (tokenizer, n, 0);

  for (guint64 seed = 1; seed <= 40; seed++)
    {
      gboolean end;
      guint budget = 4 + (guint) (seed % 5) * 15;
      g_autoptr(GString) text = generate_random (constraint, NULL, tokenizer, 0, budget, seed,
                                                 &end);

      g_assert_true (dc_json_constraint_is_complete (constraint));
      if (!json_glib_parses (text->str, text->len))
        g_error ("seed %" G_GUINT64_FORMAT ": not valid JSON: %s", seed, text->str);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/infer/json/grammar", test_grammar);
  g_test_add_func ("/infer/json/depth-cap", test_depth_cap);
  g_test_add_func ("/infer/json/closing-completes-any-prefix", test_closing_completes_any_prefix);
  g_test_add_func ("/infer/json/random-logits-give-valid-json",
                   test_random_logits_give_valid_json);
  g_test_add_func ("/infer/json/no-token-fits", test_no_token_fits);
  g_test_add_func ("/infer/json/token-bytes", test_token_bytes);
  g_test_add_func ("/infer/json/real-vocabulary", test_real_vocabulary);
  return g_test_run ();
}
