/* test-model-tokenizer.c: byte-level BPE from tokenizer.json against the ids
 * the `tokenizers` library produced (tests/data/hf, see its README), the
 * Qwen2 and Llama 3 Split patterns, and refusals of untrusted files.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "model/dc-bpe-tokenizer.h"
#include "model/dc-model-error.h"

#define BYTE_LEVEL_NO_PREFIX \
  "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"

static DcBpeTokenizer *
load (const char *relative)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "hf", relative, NULL);
  g_autoptr(GError) error = NULL;
  DcBpeTokenizer *tok = dc_bpe_tokenizer_new_from_file (path, &error);

  g_assert_no_error (error);
  g_assert_nonnull (tok);
  return tok;
}

static JsonNode *
load_json (const char *relative)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "hf", relative, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  return json_parser_steal_root (parser);
}

static void
assert_ids (DcBpeTokenizer *tok,
            const char     *text,
            JsonArray      *expected,
            gint64          bos)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) ids = dc_bpe_tokenizer_encode (tok, text, -1, bos >= 0, &error);
  guint offset = bos >= 0 ? 1 : 0;

  g_assert_no_error (error);
  if (ids->len != json_array_get_length (expected) + offset)
    g_error ("“%s”: %u ids, expected %u", text, ids->len,
             json_array_get_length (expected) + offset);
  if (bos >= 0)
    g_assert_cmpuint (g_array_index (ids, guint32, 0), ==, bos);
  for (guint i = 0; i < json_array_get_length (expected); i++)
    if (g_array_index (ids, guint32, i + offset) != json_array_get_int_element (expected, i))
      g_error ("“%s”: id %u is %u, expected %" G_GINT64_FORMAT, text, i,
               g_array_index (ids, guint32, i + offset), json_array_get_int_element (expected, i));
}

static void
assert_round_trip (DcBpeTokenizer *tok,
                   const char     *text,
                   gboolean        nfc)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GArray) ids = dc_bpe_tokenizer_encode (tok, text, -1, FALSE, &error);
  g_autofree char *back = NULL;
  g_autofree char *expected = nfc ? g_utf8_normalize (text, -1, G_NORMALIZE_NFC) : g_strdup (text);

  g_assert_no_error (error);
  back = dc_bpe_tokenizer_decode (tok, (guint32 *) ids->data, ids->len, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back, ==, expected);
}

static void
check_cases (const char *tokenizer_path,
             const char *cases_path)
{
  g_autoptr(DcBpeTokenizer) tok = load (tokenizer_path);
  g_autoptr(JsonNode) root = load_json (cases_path);
  JsonObject *object = json_node_get_object (root);
  JsonArray *cases = json_object_get_array_member (object, "cases");
  gint64 bos = -1;
  gboolean nfc = FALSE;

  if (json_object_has_member (object, "bos") && !json_object_get_null_member (object, "bos"))
    bos = json_object_get_int_member (object, "bos");
  if (json_object_has_member (object, "nfc"))
    nfc = json_object_get_boolean_member (object, "nfc");
  g_assert_cmpuint (json_array_get_length (cases), >, 0);
  for (guint i = 0; i < json_array_get_length (cases); i++)
    {
      JsonObject *c = json_array_get_object_element (cases, i);
      const char *text = json_object_get_string_member (c, "text");

      assert_ids (tok, text, json_object_get_array_member (c, "ids"), bos);
      assert_round_trip (tok, text, nfc);
    }
  g_test_message ("%u cases of %s match", json_array_get_length (cases), cases_path);
}

static void
test_gpt2_cases (void)
{
  check_cases ("models/gpt2-tiny/tokenizer.json", "tokenizers/gpt2-cases.json");
}

/* Library-made cases for the Qwen2 and Llama 3 Split patterns on a trained
 * vocabulary (make-model-fixtures.py): the texts of gpt2-cases.json. */
static void
test_trained_split_cases (void)
{
  check_cases ("tokenizers/qwen2-bpe-512/tokenizer.json", "tokenizers/qwen2-bpe-512-cases.json");
  check_cases ("tokenizers/llama3-bpe-512/tokenizer.json", "tokenizers/llama3-bpe-512-cases.json");
}

/* Tokenizers of the kinds this build refuses, as the tokenizers library
 * writes them (SentencePieceBPETokenizer, SentencePieceUnigramTokenizer,
 * BertWordPieceTokenizer): each refused, naming what it is. */
static void
test_refused_files (void)
{
  const struct { const char *dir; const char *fragment; } cases[] = {
    { "refused-metaspace-bpe", "tokenizer type “Metaspace (SentencePiece)” is not supported" },
    { "refused-unigram", "tokenizer type “Unigram” is not supported" },
    { "refused-wordpiece", "tokenizer type “WordPiece” is not supported" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = dc_test_dup_source_path ("tests", "data", "hf", "tokenizers",
                                                       cases[i].dir, "tokenizer.json", NULL);
      g_autoptr(GError) error = NULL;
      g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_file (path, &error);

      g_assert_null (tok);
      g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED);
      if (strstr (error->message, cases[i].fragment) == NULL)
        g_error ("%s: message “%s” lacks “%s”", cases[i].dir, error->message, cases[i].fragment);
    }
}

static void
test_bytelevel_1024_cases (void)
{
  check_cases ("tokenizers/bytelevel-1024/tokenizer.json", "tokenizers/bytelevel-1024-cases.json");
}

static void
test_qwen2_split (void)
{
  check_cases ("tokenizers/qwen2-split/tokenizer.json", "tokenizers/qwen2-split-cases.json");
}

static void
test_llama3_split (void)
{
  check_cases ("tokenizers/llama3-split/tokenizer.json", "tokenizers/llama3-split-cases.json");
  check_cases ("tokenizers/llama3-possessive-split/tokenizer.json",
               "tokenizers/llama3-possessive-split-cases.json");
}

static void
check_reference (const char *model)
{
  g_autofree char *tok_path = g_build_filename ("models", model, "tokenizer.json", NULL);
  g_autofree char *ref_path = g_build_filename ("models", model, "reference.json", NULL);
  g_autoptr(DcBpeTokenizer) tok = load (tok_path);
  g_autoptr(JsonNode) root = load_json (ref_path);
  JsonArray *prompts = json_object_get_array_member (json_node_get_object (root), "prompts");

  g_assert_cmpuint (json_array_get_length (prompts), >, 0);
  for (guint i = 0; i < json_array_get_length (prompts); i++)
    {
      JsonObject *p = json_array_get_object_element (prompts, i);

      const char *text = json_object_get_string_member (p, "text");
      JsonArray *expected = json_object_get_array_member (p, "input_ids");
      g_autoptr(GError) error = NULL;
      /* As transformers encodes a prompt: special tokens added (a BOS template). */
      g_autoptr(GArray) ids = dc_bpe_tokenizer_encode (tok, text, -1, TRUE, &error);

      g_assert_no_error (error);
      if (ids->len != json_array_get_length (expected))
        g_error ("%s: “%s”: %u ids, expected %u", model, text, ids->len,
                 json_array_get_length (expected));
      for (guint k = 0; k < ids->len; k++)
        g_assert_cmpint (g_array_index (ids, guint32, k), ==,
                         json_array_get_int_element (expected, k));
    }
}

static void
test_reference_prompts (void)
{
  check_reference ("gpt2-tiny");
  check_reference ("llama-tiny");
  /* Made by make-model-fixtures.py: Qwen2 and Llama 3 Split patterns trained by
   * the tokenizers library, the Llama 3 one with a BOS template. */
  check_reference ("qwen2-tiny-bf16");
  check_reference ("mistral-tiny-f16");
  check_reference ("llama-tiny-sharded");
  check_reference ("gpt2-noprefix-tiny");
}

/* The heap-ordered merge loop against the plain definition of BPE (merge the
 * leftmost pair of lowest rank, again and again) on random merge tables over
 * "abc" and random words up to 40 letters, with ranks, results reached by
 * two different pairs, and overlapping pairs ("aaa") all occurring. */
static void
test_bpe_matches_definition (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (1234);

  for (guint table = 0; table < 20; table++)
    {
      g_autoptr(GPtrArray) vocab = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) merges = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GString) json = g_string_new ("{\"pre_tokenizer\": {\"type\": \"ByteLevel\","
                                              " \"add_prefix_space\": false, \"use_regex\": false},"
                                              " \"decoder\": {\"type\": \"ByteLevel\"},"
                                              " \"model\": {\"type\": \"BPE\", \"vocab\": {");
      g_autoptr(DcBpeTokenizer) tok = NULL;
      g_autoptr(GError) error = NULL;

      g_ptr_array_add (vocab, g_strdup ("a"));
      g_ptr_array_add (vocab, g_strdup ("b"));
      g_ptr_array_add (vocab, g_strdup ("c"));
      for (guint m = 0; m < 30; m++)
        {
          const char *x = vocab->pdata[g_rand_int_range (rand, 0, (gint32) vocab->len)];
          const char *y = vocab->pdata[g_rand_int_range (rand, 0, (gint32) vocab->len)];
          g_autofree char *pair = g_strconcat (x, " ", y, NULL);
          g_autofree char *joined = g_strconcat (x, y, NULL);
          gboolean known = FALSE;

          for (guint k = 0; k < merges->len; k++)
            known |= strcmp (merges->pdata[k], pair) == 0;
          if (known || strlen (joined) > 12)
            continue;
          g_ptr_array_add (merges, g_steal_pointer (&pair));
          known = FALSE;
          for (guint k = 0; k < vocab->len; k++)
            known |= strcmp (vocab->pdata[k], joined) == 0;
          if (!known)
            g_ptr_array_add (vocab, g_steal_pointer (&joined));
        }
      for (guint k = 0; k < vocab->len; k++)
        g_string_append_printf (json, "%s\"%s\": %u", k ? ", " : "", (char *) vocab->pdata[k], k);
      g_string_append (json, "}, \"merges\": [");
      for (guint k = 0; k < merges->len; k++)
        g_string_append_printf (json, "%s\"%s\"", k ? ", " : "", (char *) merges->pdata[k]);
      g_string_append (json, "]}}");
      tok = dc_bpe_tokenizer_new_from_json (json->str, -1, &error);
      g_assert_no_error (error);

      for (guint w = 0; w < 50; w++)
        {
          g_autoptr(GPtrArray) symbols = g_ptr_array_new_with_free_func (g_free);
          g_autoptr(GArray) ids = NULL;
          guint len = (guint) g_rand_int_range (rand, 1, 41);
          char word[48];

          for (guint i = 0; i < len; i++)
            {
              word[i] = "abc"[g_rand_int_range (rand, 0, 3)];
              g_ptr_array_add (symbols, g_strndup (&word[i], 1));
            }
          word[len] = '\0';
          /* The definition, quadratic and obvious. */
          for (;;)
            {
              guint best_rank = G_MAXUINT, best_pos = 0;

              for (guint i = 0; i + 1 < symbols->len; i++)
                {
                  g_autofree char *pair = g_strconcat (symbols->pdata[i], " ",
                                                       symbols->pdata[i + 1], NULL);

                  for (guint k = 0; k < merges->len && k < best_rank; k++)
                    if (strcmp (merges->pdata[k], pair) == 0)
                      {
                        best_rank = k;
                        best_pos = i;
                      }
                }
              if (best_rank == G_MAXUINT)
                break;
              {
                char *merged = g_strconcat (symbols->pdata[best_pos],
                                            symbols->pdata[best_pos + 1], NULL);

                g_ptr_array_remove_index (symbols, best_pos + 1);
                g_free (symbols->pdata[best_pos]);
                symbols->pdata[best_pos] = merged;
              }
            }
          ids = dc_bpe_tokenizer_encode (tok, word, -1, FALSE, &error);
          g_assert_no_error (error);
          g_assert_cmpuint (ids->len, ==, symbols->len);
          for (guint i = 0; i < ids->len; i++)
            g_assert_cmpint (g_array_index (ids, guint32, i), ==,
                             dc_bpe_tokenizer_token_to_id (tok, symbols->pdata[i]));
        }
    }
}

/* A 100 KB word is one piece: BPE over it must stay O(n log n). The merge
 * "a a" makes the run collapse by halves; a quadratic merge loop takes
 * minutes here, the heap a few milliseconds. */
static void
test_long_word (void)
{
  g_autoptr(DcBpeTokenizer) tok = load ("models/gpt2-tiny/tokenizer.json");
  g_autoptr(GError) error = NULL;
  g_autofree char *word = g_malloc (100 * 1024 + 1);
  g_autoptr(GArray) ids = NULL;
  g_autofree char *back = NULL;

  memset (word, 'a', 100 * 1024);
  word[100 * 1024] = '\0';
  ids = dc_bpe_tokenizer_encode (tok, word, -1, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ids->len, >, 0);
  g_assert_cmpuint (ids->len, <=, 100 * 1024 / 4);  /* "aaaa" is one GPT-2 token */
  back = dc_bpe_tokenizer_decode (tok, (guint32 *) ids->data, ids->len, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (back, ==, word);

  /* Mixed text of the same size goes through the regex and many pieces. */
  for (gsize i = 0; i < 100 * 1024; i++)
    word[i] = "ab c1,\n"[i % 7];
  g_clear_pointer (&ids, g_array_unref);
  g_clear_pointer (&back, g_free);
  ids = dc_bpe_tokenizer_encode (tok, word, -1, FALSE, &error);
  g_assert_no_error (error);
  back = dc_bpe_tokenizer_decode (tok, (guint32 *) ids->data, ids->len, FALSE, &error);
  g_assert_cmpstr (back, ==, word);
}

static void
test_decode_and_text_errors (void)
{
  g_autoptr(DcBpeTokenizer) tok = load ("tokenizers/bytelevel-1024/tokenizer.json");
  g_autoptr(GError) error = NULL;
  guint32 bad[] = { 5, 1024 };
  guint32 special[] = { 0, 72 };
  g_autofree char *text = NULL;
  g_autoptr(GArray) ids = NULL;

  g_assert_null (dc_bpe_tokenizer_decode (tok, bad, G_N_ELEMENTS (bad), FALSE, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "1024"));
  g_clear_error (&error);

  text = dc_bpe_tokenizer_decode (tok, special, 2, TRUE, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text, ==, "h");  /* id 0 is <|endoftext|>, then bytes from "!": 72 is "h" */
  g_clear_pointer (&text, g_free);
  text = dc_bpe_tokenizer_decode (tok, special, 2, FALSE, &error);
  g_assert_cmpstr (text, ==, "<|endoftext|>h");

  ids = dc_bpe_tokenizer_encode (tok, "ab\xff", -1, FALSE, &error);
  g_assert_null (ids);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_assert_cmpint (dc_bpe_tokenizer_token_to_id (tok, "<|endoftext|>"), ==, 0);
  g_assert_cmpint (dc_bpe_tokenizer_token_to_id (tok, "no such token"), ==, -1);
  g_assert_cmpuint (dc_bpe_tokenizer_get_vocab_size (tok), ==, 1024);
}

/* Every Split behaviour, and invert, on "a-b" and "a--b" cut at "-". With
 * ignore_merges and no merges, each piece in the vocabulary is one token, so
 * the ids spell out the pieces. */
static void
test_split_behaviors (void)
{
  static const struct
  {
    const char *behavior;
    gboolean    invert;
    const char *text;
    guint32     ids[4];
    guint       n;
  } cases[] = {
    { "Removed", FALSE, "a-b", { 0, 1 }, 2 },
    { "Isolated", FALSE, "a-b", { 0, 2, 1 }, 3 },
    { "MergedWithPrevious", FALSE, "a-b", { 3, 1 }, 2 },
    { "MergedWithNext", FALSE, "a-b", { 0, 4 }, 2 },
    { "Contiguous", FALSE, "a--b", { 0, 5, 1 }, 3 },
    { "Isolated", FALSE, "a--b", { 0, 2, 2, 1 }, 4 },
    /* A delimiter joins a neighbour that is not itself a delimiter. */
    { "MergedWithPrevious", FALSE, "a--b", { 3, 2, 1 }, 3 },
    { "MergedWithNext", FALSE, "a--b", { 0, 2, 4 }, 3 },
    { "Removed", TRUE, "a-b", { 2 }, 1 },
    { "MergedWithPrevious", TRUE, "a-b", { 0, 4 }, 2 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *json = g_strdup_printf (
        "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
        "{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"%s\", \"invert\": "
        "%s},"
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
        " \"decoder\": {\"type\": \"ByteLevel\"},"
        " \"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"merges\": [], \"vocab\":"
        " {\"a\": 0, \"b\": 1, \"-\": 2, \"a-\": 3, \"-b\": 4, \"--\": 5}}}",
        cases[i].behavior, cases[i].invert ? "true" : "false");
      g_autoptr(GError) error = NULL;
      g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json (json, -1, &error);
      g_autoptr(GArray) ids = NULL;

      g_assert_no_error (error);
      ids = dc_bpe_tokenizer_encode (tok, cases[i].text, -1, FALSE, &error);
      g_assert_no_error (error);
      if (ids->len != cases[i].n ||
          memcmp (ids->data, cases[i].ids, cases[i].n * sizeof (guint32)) != 0)
        {
          g_autoptr(GString) got = g_string_new (NULL);

          for (guint j = 0; j < ids->len; j++)
            g_string_append_printf (got, " %u", g_array_index (ids, guint32, j));
          g_error ("%s%s on “%s” gave%s", cases[i].behavior, cases[i].invert ? " (invert)" : "",
                   cases[i].text, got->str);
        }
    }
  /* Digits (SmolLM, StarCoder): each digit alone, or runs together. GPT-2's
   * own file writes continuing_subword_prefix and end_of_word_suffix as "". */
  for (guint individual = 0; individual < 2; individual++)
    {
      g_autofree char *json = g_strdup_printf (
        "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
        "{\"type\": \"Digits\", \"individual_digits\": %s},"
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
        " \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\","
        " \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\","
        " \"ignore_merges\": true, \"merges\": [],"
        " \"vocab\": {\"a\": 0, \"1\": 1, \"2\": 2, \"12\": 3, \"a1\": 4}}}",
        individual ? "true" : "false");
      const guint32 together[] = { 0, 3 }, apart[] = { 0, 1, 2 };
      g_autoptr(GError) error = NULL;
      g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json (json, -1, &error);
      g_autoptr(GArray) ids = NULL;

      g_assert_no_error (error);
      ids = dc_bpe_tokenizer_encode (tok, "a12", -1, FALSE, &error);
      g_assert_no_error (error);
      if (individual)
        g_assert_cmpmem (ids->data, ids->len * 4, apart, sizeof apart);
      else
        g_assert_cmpmem (ids->data, ids->len * 4, together, sizeof together);
    }

  /* 1 MiB of delimiters in one Contiguous run: the first version joined them
   * by copying the growing piece each time (5·10^11 bytes); ranges widen. */
  {
    g_autofree char *json = g_strdup_printf (
      "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
      "{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"Contiguous\"},"
      "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]},"
      " \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\","
      " \"merges\": [], \"vocab\": {\"-\": 0, \"a\": 1}}}");
    g_autofree char *text = g_strnfill (1024 * 1024, '-');
    g_autoptr(GError) error = NULL;
    g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json (json, -1, &error);
    g_autoptr(GArray) ids = NULL;

    g_assert_no_error (error);
    text[0] = 'a';
    ids = dc_bpe_tokenizer_encode (tok, text, -1, FALSE, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (ids->len, ==, 1024 * 1024);
    g_assert_cmpuint (g_array_index (ids, guint32, 0), ==, 1);
  }
}

/* Added tokens: longest match wins, lstrip/rstrip take the spaces around.
 * Then 50,000 added tokens sharing the first byte over 1 MB of that byte: a
 * scan of every token at every position (the first version: 5·10^10 byte
 * compares, far past the test's timeout) against the trie's one walk. */
static void
test_added_tokens (void)
{
  const char *json =
    "{\"added_tokens\": [{\"id\": 10, \"content\": \"ab\"}, {\"id\": 11, \"content\": \"abcd\"},"
    " {\"id\": 12, \"content\": \"bcd\"},"
    " {\"id\": 13, \"content\": \"<s>\", \"lstrip\": true, \"rstrip\": true, \"special\": true}],"
    " \"pre_tokenizer\": " BYTE_LEVEL_NO_PREFIX ", \"decoder\": " BYTE_LEVEL_NO_PREFIX ","
    " \"model\": {\"type\": \"BPE\", \"merges\": [],"
    " \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"d\": 3, \"x\": 4, \"<\": 5}}}";
  const guint32 expected[] = { 4, 11, 10, 2, 10 };
  const guint32 stripped[] = { 0, 13, 1 };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json (json, -1, &error);
  g_autoptr(DcBpeTokenizer) many = NULL;
  g_autoptr(GArray) ids = NULL;
  g_autoptr(GString) big = g_string_new ("{\"added_tokens\": [");
  g_autofree char *text = NULL;

  g_assert_no_error (error);
  ids = dc_bpe_tokenizer_encode (tok, "xabcdabcab", -1, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ids->len, ==, G_N_ELEMENTS (expected));
  g_assert_cmpmem (ids->data, ids->len * 4, expected, sizeof expected);
  g_clear_pointer (&ids, g_array_unref);
  ids = dc_bpe_tokenizer_encode (tok, "a <s> b", -1, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (ids->data, ids->len * 4, stripped, sizeof stripped);
  g_clear_pointer (&ids, g_array_unref);

  for (guint i = 0; i < 50000; i++)
    g_string_append_printf (big, "%s{\"id\": %u, \"content\": "
                                 "\"<%u>\"}", i ? ", " : "", 100 + i, i);
  g_string_append (big, "], \"pre_tokenizer\": " BYTE_LEVEL_NO_PREFIX ", \"decoder\": "
                   BYTE_LEVEL_NO_PREFIX ", \"model\": {\"type\": \"BPE\", \"merges\": [],"
                   " \"vocab\": {\"<\": 0, \"1\": 1, \">\": 2}}}");
  many = dc_bpe_tokenizer_new_from_json (big->str, (gssize) big->len, &error);
  g_assert_no_error (error);
  text = g_strnfill (1024 * 1024, '<');
  ids = dc_bpe_tokenizer_encode (many, text, -1, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ids->len, ==, 1024 * 1024);
  g_clear_pointer (&ids, g_array_unref);
  ids = dc_bpe_tokenizer_encode (many, "<1><12345>1", -1, FALSE, &error);
  g_assert_cmpuint (ids->len, ==, 3);
  g_assert_cmpuint (g_array_index (ids, guint32, 0), ==, 101);
  g_assert_cmpuint (g_array_index (ids, guint32, 1), ==, 12445);
  g_assert_cmpuint (g_array_index (ids, guint32, 2), ==, 1);
}

/* A tiny byte-level tokenizer with @model and @pre_tokenizer substituted. */
static char *
tiny_json (const char *model,
           const char *pre_tokenizer,
           const char *decoder)
{
  return g_strdup_printf ("{\"added_tokens\": [], \"normalizer\": null, "
                          "\"pre_tokenizer\": %s, \"decoder\": %s, \"model\": %s}",
                          pre_tokenizer, decoder, model);
}

#define BYTE_LEVEL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"
#define GOOD_MODEL \
  "{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}"

static void
assert_refused (const char *json,
                int         code,
                const char *fragment)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json (json, -1, &error);

  g_assert_null (tok);
  g_assert_error (error, DC_MODEL_ERROR, code);
  if (strstr (error->message, fragment) == NULL)
    g_error ("message “%s” lacks “%s”", error->message, fragment);
}

static void
test_refusals (void)
{
  g_autofree char *good = tiny_json (GOOD_MODEL, BYTE_LEVEL, BYTE_LEVEL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcBpeTokenizer) tok = dc_bpe_tokenizer_new_from_json (good, -1, &error);
  g_autoptr(GArray) ids = NULL;
  g_autoptr(GString) big = NULL;
  g_autoptr(GString) deep = NULL;
  g_autofree char *json = NULL;

  /* The good one loads and merges, so each refusal below is about its one change. */
  g_assert_no_error (error);
  ids = dc_bpe_tokenizer_encode (tok, "ab", -1, FALSE, &error);
  g_assert_cmpuint (ids->len, ==, 1);
  g_assert_cmpuint (g_array_index (ids, guint32, 0), ==, 2);

  /* Unsupported types, each named. */
  json = tiny_json ("{\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}", BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED,
                  "tokenizer type “WordPiece” is not supported");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}", BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED,
                  "tokenizer type “Unigram” is not supported");
  g_clear_pointer (&json, g_free);
  json = tiny_json (GOOD_MODEL,
                    "{\"type\": \"Metaspace\", \"replacement\": \"▁\", \"prepend_scheme\": "
                    "\"always\"}",
                    "{\"type\": \"Metaspace\", \"replacement\": \"▁\"}");
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED,
                  "tokenizer type “Metaspace (SentencePiece)” is not supported");
  g_clear_pointer (&json, g_free);
  /* Llama 2 style: no Metaspace, but byte_fallback and no ByteLevel. */
  json = tiny_json ("{\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"a\": 0}, "
                    "\"merges\": []}",
                    "null", "{\"type\": \"Sequence\", \"decoders\": []}");
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED, "SentencePiece");
  g_clear_pointer (&json, g_free);
  json = tiny_json (GOOD_MODEL, "{\"type\": \"Whitespace\"}", BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED, "pre_tokenizer type “Whitespace” is not "
                                                    "supported");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\","
                    " \"vocab\": {\"a\": 0}, \"merges\": []}", BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED, "continuing_subword_prefix");
  g_clear_pointer (&json, g_free);
  json = tiny_json (GOOD_MODEL, BYTE_LEVEL, "{\"type\": \"WordPiece\"}");
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED,
                  "decoder type “WordPiece” is not supported");
  g_clear_pointer (&json, g_free);

  /* Malformed JSON, too deep, not an object. */
  assert_refused ("{\"model\": ", DC_MODEL_ERROR_FORMAT, "tokenizer.json:");
  assert_refused ("[1, 2]", DC_MODEL_ERROR_FORMAT, "not an object");
  deep = g_string_new (NULL);
  for (guint i = 0; i < 100; i++)
    g_string_append (deep, "[");
  for (guint i = 0; i < 100; i++)
    g_string_append (deep, "]");
  assert_refused (deep->str, DC_MODEL_ERROR_FORMAT, "tokenizer.json:");

  /* Merges naming unknown tokens or making one; duplicates; both merge spellings. */
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": "
                    "[\"a c\"]}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "names a token that is not in the vocabulary");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [[\"a\", "
                    "\"b\"]]}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "makes “ab”, which is not in the vocabulary");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": "
                    "[\"a b\", [\"a\", \"b\"]]}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "appears twice");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "id 0 is given to both");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": 2000000}, \"merges\": []}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_TOO_LARGE, "outside 0 to");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_TOO_LARGE, "outside 0 to");
  g_clear_pointer (&json, g_free);
  json = tiny_json ("{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}",
                    BYTE_LEVEL, BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "neither");
  g_clear_pointer (&json, g_free);
  json = tiny_json (GOOD_MODEL,
                    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": "
                    "\"Isolated\"}",
                    BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "does not compile");
  g_clear_pointer (&json, g_free);
  /* json-glib reads the non-JSON escape \777 as an octal byte: a pattern
   * that is not UTF-8, which PCRE2 read past (fuzz-tokenizer-json, ASan).
   * The bounds check refuses the escape before json-glib sees it. */
  json = tiny_json (GOOD_MODEL,
                    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\\777b\"}, "
                    "\"behavior\": \"Isolated\"}",
                    BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "escape JSON does not define");
  g_clear_pointer (&json, g_free);
  /* Back-references and octal escapes never reach PCRE2. */
  json = tiny_json (GOOD_MODEL,
                    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a?\\\\777777777777777777"
                    "77777777777777777777\\\\p{L}+\"}, \"behavior\": \"Isolated\"}",
                    BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED, "back-reference or octal escape");
  g_clear_pointer (&json, g_free);
  json = tiny_json (GOOD_MODEL,
                    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a)\\\\g1\"}, "
                    "\"behavior\": \"Isolated\"}",
                    BYTE_LEVEL);
  assert_refused (json, DC_MODEL_ERROR_UNSUPPORTED, "\\g");
  g_clear_pointer (&json, g_free);
  {
    g_autofree char *huge = g_strnfill (5000, 'a');
    g_autofree char *split = g_strdup_printf ("{\"type\": \"Split\", \"pattern\": "
                                              "{\"Regex\": \"%s\"}, \"behavior\": "
                                              "\"Isolated\"}", huge);

    json = tiny_json (GOOD_MODEL, split, BYTE_LEVEL);
    assert_refused (json, DC_MODEL_ERROR_TOO_LARGE, "more than 4096");
    g_clear_pointer (&json, g_free);
  }
  json = g_strdup_printf ("{\"added_tokens\": [{\"id\": 0, \"content\": \"b\"}], "
                          "\"pre_tokenizer\": %s,"
                          " \"decoder\": %s, \"model\": %s}", BYTE_LEVEL, BYTE_LEVEL, GOOD_MODEL);
  assert_refused (json, DC_MODEL_ERROR_FORMAT, "has id 0 but the vocabulary gives it id 1");
  g_clear_pointer (&json, g_free);

  /* Added tokens holding more than 1 MiB together. */
  {
    g_autoptr(GString) added = g_string_new ("{\"added_tokens\": [");
    g_autofree char *long_token = g_strnfill (600 * 1024, 'q');

    g_string_append_printf (added, "{\"id\": 0, \"content\": \"%s\"}, "
                            "{\"id\": 1, \"content\": \"%sr\"}], \"pre_tokenizer\": "
                            BYTE_LEVEL ", \"decoder\": " BYTE_LEVEL ", \"model\": {\"type\":"
                            " \"BPE\", \"vocab\": {}, \"merges\": []}}", long_token, long_token);
    assert_refused (added->str, DC_MODEL_ERROR_TOO_LARGE, "added tokens hold");
  }

  /* Oversize counts: more merges than the cap, checked before any lookup. */
  big = g_string_new ("{\"pre_tokenizer\": " BYTE_LEVEL ", \"decoder\": " BYTE_LEVEL ","
                      " \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": [");
  for (guint i = 0; i <= DC_BPE_MAX_MERGES; i++)
    g_string_append (big, i == 0 ? "0" : ",0");
  g_string_append (big, "]}}");
  assert_refused (big->str, DC_MODEL_ERROR_TOO_LARGE, "merges, more than");
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/model/tokenizer/gpt2-cases", test_gpt2_cases);
  g_test_add_func ("/dc/model/tokenizer/bytelevel-1024-cases", test_bytelevel_1024_cases);
  g_test_add_func ("/dc/model/tokenizer/reference-prompts", test_reference_prompts);
  g_test_add_func ("/dc/model/tokenizer/qwen2-split", test_qwen2_split);
  g_test_add_func ("/dc/model/tokenizer/llama3-split", test_llama3_split);
  g_test_add_func ("/dc/model/tokenizer/split-behaviors", test_split_behaviors);
  g_test_add_func ("/dc/model/tokenizer/added-tokens", test_added_tokens);
  g_test_add_func ("/dc/model/tokenizer/bpe-matches-definition", test_bpe_matches_definition);
  g_test_add_func ("/dc/model/tokenizer/long-word", test_long_word);
  g_test_add_func ("/dc/model/tokenizer/decode-errors", test_decode_and_text_errors);
  g_test_add_func ("/dc/model/tokenizer/refusals", test_refusals);
  g_test_add_func ("/dc/model/tokenizer/trained-split-cases", test_trained_split_cases);
  g_test_add_func ("/dc/model/tokenizer/refused-files", test_refused_files);
  return g_test_run ();
}
