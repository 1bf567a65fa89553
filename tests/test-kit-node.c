/* test-kit-node.c: the inference kit's engine (src/kit/dc-kit-engine.js)
 * under Node against `daisychain-cli generate`.
 *
 * Proves: the engine's softmax, layer norm, quantizer, GEMM epilogue and
 * sampling draw give the C library's bits on tens of thousands of values
 * (tests/kit/kit-math-check.js); for a model trained for a few dozen steps
 * in the test, at the default size (width 32) and at width 128, the engine
 * run by tests/kit/kit-node.js on the kit blob generates the same token ids
 * as `daisychain-cli generate --json`, every one, for an empty prompt, a
 * one-byte prompt, a prompt longer than the model's sequence, a non-ASCII
 * UTF-8 prompt, greedy and at two temperatures with two seeds (one of them
 * negative), with enough tokens that the window fills and then slides; the
 * logits after prompts of 1 to seq bytes are the CLI's (--dump-logits) bit
 * for bit, with the WebAssembly SIMD products and with the plain JavaScript
 * ones (--no-wasm), which also generate the same ids; the logits of every
 * position reached by the engine's incremental path (rows kept between
 * tokens) equal a fresh full pass's; the blob read out of a kit page
 * (<script id="dc-kit-data">) gives the same ids; the engine's info names
 * the checkpoint's weight hash and this build's rule id; a blob with one
 * byte flipped (in the data or in the header) is refused with code
 * hash-mismatch and "the kit's data was altered"; a truncated blob, one with
 * an impossible header length, and one whose (re-hashed) tensor table claims
 * a huge shape are refused with bad-kit; 1000 hostile variants of a blob
 * (tests/kit/kit-fuzz.js) load or are refused with a code, never with
 * another exception. Skips when Node is not installed.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-sha256.h"
#include "dc-test-utils.h"
#include "engine/dc-gemm.h"
#include "engine/dc-math.h"
#include "model/dc-checkpoint.h"
#include "model/dc-kit-blob.h"
#include "model/dc-rng.h"

#define TIMEOUT_MS 300000
#define N_TOKENS "40"

typedef struct
{
  char *dir;
  char *node;
  char *runner;
  char *corpus;
} Fixture;

static void
fixture_set_up (Fixture       *f,
                gconstpointer  data)
{
  g_autoptr(GError) error = NULL;

  f->dir = g_dir_make_tmp ("dc-kit-node-XXXXXX", &error);
  g_assert_no_error (error);
  f->node = g_find_program_in_path ("node");
  if (f->node == NULL)
    f->node = g_find_program_in_path ("nodejs");
  f->runner = dc_test_dup_source_path ("tests", "kit", "kit-node.js", NULL);
  f->corpus = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
}

static void
fixture_tear_down (Fixture       *f,
                   gconstpointer  data)
{
  dc_test_remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->node);
  g_free (f->runner);
  g_free (f->corpus);
}

static gboolean
skip_without_node (Fixture *f)
{
  if (f->node != NULL)
    return FALSE;
  g_test_skip ("node (Debian package nodejs) is not installed: the kit's engine cannot run");
  return TRUE;
}

/* Trains a small model for a few dozen steps and writes its checkpoint and
 * its kit blob; returns the blob's path. */
static char *
train_and_write_blob (Fixture     *f,
                      const char  *width,
                      const char  *stop_at,
                      char       **ckpt_out)
{
  g_autofree char *ckpt = g_strdup_printf ("%s/w%s.pt", f->dir, width);
  char *blob_path = g_strdup_printf ("%s/w%s.blob", f->dir, width);
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "train", "--data", f->corpus, "--width", width, "--seq", "32",
                         "--batch", "2", "--steps", "100", "--stop-at", stop_at, "--seed", "3",
                         "--out", ckpt, NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GBytes) blob = NULL;

  g_assert_cmpint (dc_test_run_cli (args, &out, &err, TIMEOUT_MS), ==, 0);
  model = dc_checkpoint_load (ckpt, NULL, &error);
  g_assert_no_error (error);
  blob = dc_kit_blob_new (model, NAN, &error);
  g_assert_no_error (error);
  g_file_set_contents (blob_path, g_bytes_get_data (blob, NULL), g_bytes_get_size (blob),
                       &error);
  g_assert_no_error (error);
  *ckpt_out = g_steal_pointer (&ckpt);
  return blob_path;
}

/* The ids of a JSON array (as a comma-separated string, for messages). */
static char *
ids_of (JsonArray *ids)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < json_array_get_length (ids); i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i > 0 ? "," : "",
                            json_array_get_int_element (ids, i));
  return g_string_free (s, FALSE);
}

static JsonNode *
parse (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, text, -1, &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (parser));
}

static char *
cli_ids (const char *ckpt,
         const char *prompt,
         const char *temperature,
         const char *seed)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "generate", "--json", "--checkpoint", ckpt, "--prompt", prompt,
                         "--tokens", N_TOKENS, "--temperature", temperature, "--seed", seed,
                         NULL };
  g_autoptr(JsonNode) root = NULL;

  g_assert_cmpint (dc_test_run_cli (args, &out, &err, TIMEOUT_MS), ==, 0);
  root = parse (out);
  return ids_of (json_object_get_array_member (json_node_get_object (root), "ids"));
}

/* Runs kit-node.js; returns its exit status, stdout and stderr. */
static int
run_node (Fixture     *f,
          const char  *file,
          const char  *prompt,
          const char  *temperature,
          const char  *seed,
          const char  *extra,
          char       **out,
          char       **err)
{
  const char *argv[] = { f->node, f->runner, file, "--prompt", prompt, "--tokens", N_TOKENS,
                         "--temperature", temperature, "--seed", seed, extra, NULL };
  int status = -1;

  g_assert_true (dc_test_spawn (argv, out, err, &status, TIMEOUT_MS));
  return status;
}

static char *
node_ids (Fixture    *f,
          const char *file,
          const char *prompt,
          const char *temperature,
          const char *seed,
          const char *extra)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr(JsonNode) root = NULL;

  if (run_node (f, file, prompt, temperature, seed, extra, &out, &err) != 0)
    g_error ("kit-node.js failed: %s", err);
  root = parse (out);
  return ids_of (json_node_get_array (root));
}

/* The logits after a prompt of at most seq bytes, bit for bit: the CLI's
 * --dump-logits writes every position's, the engine the last one's. Greedy
 * ids of a briefly trained model are often one repeated byte, so this is
 * the sharp check of the forward pass. */
static void
check_same_logits (Fixture    *f,
                   const char *ckpt,
                   const char *blob,
                   const char *prompt)
{
  g_autofree char *cli_path = g_strdup_printf ("%s/cli-logits.bin", f->dir);
  g_autofree char *node_path = g_strdup_printf ("%s/node-logits.bin", f->dir);
  g_autofree char *out = NULL, *err = NULL, *cli = NULL, *node = NULL;
  const char *args[] = { "generate", "--checkpoint", ckpt, "--prompt", prompt, "--tokens", "0",
                         "--dump-logits", cli_path, NULL };
  gsize cli_len, node_len;
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (dc_test_run_cli (args, &out, &err, TIMEOUT_MS), ==, 0);
  g_file_get_contents (cli_path, &cli, &cli_len, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (cli_len, ==, strlen (prompt) * 256 * sizeof (float));
  /* With the WebAssembly products and with the JavaScript ones. */
  for (guint wasm = 0; wasm < 2; wasm++)
    {
      const char *argv[] = { f->node, f->runner, blob, "--prompt", prompt, "--dump-logits",
                             node_path, wasm ? NULL : "--no-wasm", NULL };
      int status = -1;

      g_clear_pointer (&out, g_free);
      g_clear_pointer (&err, g_free);
      g_clear_pointer (&node, g_free);
      g_assert_true (dc_test_spawn (argv, &out, &err, &status, TIMEOUT_MS));
      g_assert_cmpint (status, ==, 0);
      g_file_get_contents (node_path, &node, &node_len, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (node_len, ==, 256 * sizeof (float));
      g_assert_cmpmem (node, node_len, cli + cli_len - node_len, node_len);
    }
}

static void
check_same_ids (Fixture    *f,
                const char *width,
                const char *stop_at)
{
  g_autofree char *ckpt = NULL;
  g_autofree char *blob = train_and_write_blob (f, width, stop_at, &ckpt);
  g_autofree char *html = g_strdup_printf ("%s/w%s.html", f->dir, width);
  g_autofree char *info_out = NULL, *info_err = NULL;
  g_autoptr(JsonNode) info = NULL;
  g_autoptr(DcGptModel) model = dc_checkpoint_load (ckpt, NULL, NULL);
  g_autofree char *hash = dc_gpt_model_dup_hash (model);
  const char *prompts[] = {
    "",
    "q",
    "The quick brown fox jumps over the lazy dog, and again.",  /* 55 bytes > seq 32 */
    "naïve café — 日本語 ✓",
  };
  const char *settings[][2] = { { "0", "1" }, { "0.8", "7" }, { "1.5", "-123456789012" } };
  gboolean sampled_differs = FALSE;

  /* The same blob inside a minimal kit page. */
  {
    g_autofree char *data = NULL;
    gsize len;
    g_autofree char *b64 = NULL, *page = NULL;
    g_autoptr(GError) error = NULL;

    g_file_get_contents (blob, &data, &len, &error);
    g_assert_no_error (error);
    b64 = g_base64_encode ((const guchar *) data, len);
    page = g_strdup_printf ("<!DOCTYPE html><html><body><script type=\"application/"
                            "octet-stream\" id=\"dc-kit-data\">%s</script></body></html>", b64);
    g_file_set_contents (html, page, -1, &error);
    g_assert_no_error (error);
  }

  g_assert_cmpint (run_node (f, blob, "", "0", "1", "--info", &info_out, &info_err), ==, 0);
  info = parse (info_out);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (info), "rule"), ==,
                   dc_gemm_rule_id ());
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (info), "weightHash"),
                   ==, hash);
  g_assert_true (json_object_get_null_member (json_node_get_object (info), "loss"));

  /* The rows kept between tokens give the bits of a full pass. */
  for (guint i = 0; i < 2; i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_autoptr(JsonNode) root = NULL;

      g_assert_cmpint (run_node (f, blob, i == 0 ? "" : "q", "0.8", "7", "--check-incremental",
                                 &out, &err), ==, 0);
      root = parse (out);
      g_assert_cmpint (json_object_get_int_member (json_node_get_object (root), "steps"), >=, 32);
      g_assert_cmpint (json_object_get_int_member (json_node_get_object (root), "differing"),
                       ==, 0);
    }
  check_same_logits (f, ckpt, blob, "x");
  check_same_logits (f, ckpt, blob, "The quick brown fox");
  check_same_logits (f, ckpt, blob, "0123456789abcdefghijklmnopqrstuv");  /* seq bytes */
  check_same_logits (f, ckpt, blob, "naïve café — 日本語 ✓");
  for (guint p = 0; p < G_N_ELEMENTS (prompts); p++)
    {
      g_autofree char *greedy = NULL;

      for (guint s = 0; s < G_N_ELEMENTS (settings); s++)
        {
          g_autofree char *want = cli_ids (ckpt, prompts[p], settings[s][0], settings[s][1]);
          g_autofree char *got = node_ids (f, blob, prompts[p], settings[s][0], settings[s][1],
                                           NULL);

          g_test_message ("width %s, prompt “%s”, temperature %s, seed %s: %s", width,
                          prompts[p], settings[s][0], settings[s][1], want);
          g_assert_cmpstr (got, ==, want);
          if (s == 0)
            greedy = g_strdup (want);
          else if (!g_str_equal (want, greedy))
            sampled_differs = TRUE;
          if (p == 3 && s == 1)
            {
              g_autofree char *from_page = node_ids (f, html, prompts[p], settings[s][0],
                                                     settings[s][1], NULL);
              g_autofree char *plain_js = node_ids (f, blob, prompts[p], settings[s][0],
                                                    settings[s][1], "--no-wasm");

              g_assert_cmpstr (from_page, ==, want);
              g_assert_cmpstr (plain_js, ==, want);
            }
        }
    }
  /* Sampling was exercised, not just greedy decoding under another name. */
  g_assert_true (sampled_differs);
}

static void
test_default_size (Fixture       *f,
                   gconstpointer  data)
{
  if (skip_without_node (f))
    return;
  check_same_ids (f, "32", "40");
}

static void
test_width_128 (Fixture       *f,
                gconstpointer  data)
{
  if (skip_without_node (f))
    return;
  check_same_ids (f, "128", "20");
}

/* Writes bytes to a file and expects kit-node.js to refuse it with code. */
static void
expect_refused (Fixture      *f,
                const guint8 *bytes,
                gsize         len,
                const char   *code,
                const char   *words)
{
  g_autofree char *path = g_strdup_printf ("%s/bad.blob", f->dir);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  JsonObject *o;

  g_file_set_contents (path, (const char *) bytes, len, &error);
  g_assert_no_error (error);
  g_assert_cmpint (run_node (f, path, "x", "0", "1", NULL, &out, &err), ==, 1);
  root = parse (err);
  o = json_node_get_object (root);
  g_test_message ("%s: %s", code, json_object_get_string_member (o, "message"));
  g_assert_cmpstr (json_object_get_string_member (o, "code"), ==, code);
  g_assert_nonnull (strstr (json_object_get_string_member (o, "message"), words));
  g_assert_true (out == NULL || out[0] == '\0');
}

static void
rehash (guint8 *b,
        gsize   len)
{
  g_autoptr(DcSha256) sum = dc_sha256_new ();

  dc_sha256_update (sum, b + 40, len - 40);
  dc_sha256_get_digest (sum, b + 8);
}

static void
test_refused (Fixture       *f,
              gconstpointer  data)
{
  DcGptConfig config;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GBytes) blob = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree guint8 *b = NULL;
  gsize len;
  guint32 h;

  if (skip_without_node (f))
    return;
  dc_gpt_config_init_derived (&config, 32, 16);
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 9);
  blob = dc_kit_blob_new (model, 2.0, &error);
  g_assert_no_error (error);
  len = g_bytes_get_size (blob);
  b = g_memdup2 (g_bytes_get_data (blob, NULL), len);
  memcpy (&h, b + 40, 4);
  h = GUINT32_FROM_LE (h);

  /* The untouched blob loads; 1000 hostile variants of it (kit-fuzz.js:
   * header bytes flipped, fields replaced by huge, negative, fractional,
   * wrong-typed or deeply nested values, the blob cut or extended, digests
   * made consistent) load or are refused with a code, never another
   * exception. */
  {
    g_autofree char *path = g_strdup_printf ("%s/good.blob", f->dir);
    g_autofree char *fuzz = dc_test_dup_source_path ("tests", "kit", "kit-fuzz.js", NULL);
    g_autofree char *out = NULL, *err = NULL;
    const char *argv[] = { f->node, fuzz, path, "1000", "13", NULL };
    int status = -1;

    g_file_set_contents (path, (const char *) b, len, &error);
    g_assert_no_error (error);
    g_assert_cmpint (run_node (f, path, "x", "0", "1", NULL, &out, &err), ==, 0);
    g_clear_pointer (&out, g_free);
    g_clear_pointer (&err, g_free);
    g_assert_true (dc_test_spawn (argv, &out, &err, &status, TIMEOUT_MS));
    g_test_message ("kit-fuzz.js: %s%s", out, err);
    g_assert_cmpint (status, ==, 0);
  }

  /* One flipped bit in the weights, then in the header. */
  b[len - 100] ^= 0x01;
  expect_refused (f, b, len, "hash-mismatch", "the kit's data was altered");
  b[len - 100] ^= 0x01;
  b[DC_KIT_BLOB_PREFIX + 20] ^= 0x04;
  expect_refused (f, b, len, "hash-mismatch", "the kit's data was altered");
  b[DC_KIT_BLOB_PREFIX + 20] ^= 0x04;

  /* Truncated, and a header length no reader accepts. */
  expect_refused (f, b, len - 1000, "bad-kit", "truncated");
  {
    g_autofree guint8 *c = g_memdup2 (b, len);

    memset (c + 40, 0xff, 4);
    expect_refused (f, c, len, "bad-kit", "larger than this engine accepts");
  }

  /* A tensor table claiming a billion vectors, correctly hashed: refused
   * from the header, before anything is allocated. */
  {
    g_autofree guint8 *c = g_memdup2 (b, len);
    g_autofree char *header = g_strndup ((const char *) c + DC_KIT_BLOB_PREFIX, h);
    g_autoptr(GString) s = g_string_new (header);

    /* Room for the longer number: the reader ignores the tokenizer member. */
    g_assert_cmpuint (g_string_replace (s, "\"tokenizer\":\"" DC_GPT_TOKENIZER "\",", "", 1),
                      ==, 1);
    g_assert_cmpuint (g_string_replace (s, "\"shape\":[96,32]", "\"shape\":[999999999,32]", 1),
                      ==, 1);
    g_assert_cmpuint (strlen (g_strchomp (s->str)), <=, h);
    memset (c + DC_KIT_BLOB_PREFIX, ' ', h);
    memcpy (c + DC_KIT_BLOB_PREFIX, s->str, strlen (s->str));
    rehash (c, len);
    expect_refused (f, c, len, "bad-kit", "tensor 4 should be transformer.h.0.attn.c_attn.weight");
  }
}

/* A float from the generator: sign, a 24-bit mantissa and an exponent in
 * [-lo, hi), so that rows mix magnitudes (and reach the subnormal range
 * when lo is large). */
static float
draw (guint64 seed,
      guint64 i,
      int     lo,
      int     hi)
{
  guint64 u = dc_rng_u64 (seed, 99, i);
  float m = (float) (u >> 40) * 0x1p-24f;
  int e = (int) ((u >> 8) % (guint64) (hi + lo)) - lo;

  return ((u & 1) ? -m : m) * ldexpf (1.0f, e);
}

static guint32
bits_of (float x)
{
  guint32 u;

  memcpy (&u, &x, sizeof u);
  return u;
}

static void
add_bits (JsonBuilder *b,
          const char  *name,
          const float *x,
          gsize        n)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (gsize i = 0; i < n; i++)
    json_builder_add_int_value (b, bits_of (x[i]));
  json_builder_end_array (b);
}

/* The C library's results on inputs chosen to reach every branch: rows of
 * 1 to 300 logits (spreads beyond exp's underflow included), layer norms of
 * the model's widths, vectors down to subnormal values, epilogues at the
 * ends of the f32 range, and draws for negative and huge seeds. */
static char *
write_math_cases (Fixture *f)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GError) error = NULL;
  char *path = g_strdup_printf ("%s/math-cases.json", f->dir);
  g_autofree char *text = NULL;
  float x[512], y[512], w[512], bias[512];
  guint64 k = 0;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "softmax");
  json_builder_begin_array (b);
  for (guint row = 0; row < 300; row++)
    {
      gsize n = 1 + row % 300;
      int spread = row % 3 == 0 ? 8 : row % 3 == 1 ? 2 : 0;

      for (gsize i = 0; i < n; i++)
        x[i] = draw (row, k++, 2, spread + 1) * (row % 5 == 0 ? 40.0f : 1.0f);
      json_builder_begin_object (b);
      add_bits (b, "x", x, n);
      dc_math_softmax (x, y, n);
      add_bits (b, "y", y, n);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "layer_norm");
  json_builder_begin_array (b);
  for (guint row = 0; row < 120; row++)
    {
      const gsize widths[] = { 16, 20, 32, 48, 64, 96, 128, 384, 512 };
      gsize n = widths[row % G_N_ELEMENTS (widths)];

      for (gsize i = 0; i < n; i++)
        {
          x[i] = draw (row, k++, 6, 6);
          w[i] = 1.0f + draw (row, k++, 8, 0);
          bias[i] = draw (row, k++, 10, 0);
        }
      json_builder_begin_object (b);
      add_bits (b, "x", x, n);
      add_bits (b, "w", w, n);
      add_bits (b, "b", bias, n);
      dc_math_layer_norm (x, w, bias, DC_MATH_GPT2_LN_EPS, y, NULL, NULL, n);
      add_bits (b, "y", y, n);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "quantize");
  json_builder_begin_array (b);
  for (guint row = 0; row < 200; row++)
    {
      gsize n = 1 + (row * 7) % 130;
      g_autoptr(DcQuantMatrix) q = dc_quant_matrix_new (1, n, &error);

      g_assert_no_error (error);
      for (gsize i = 0; i < n; i++)
        x[i] = row % 17 == 0 ? 0.0f : draw (row, k++, row % 4 == 0 ? 140 : 20, 20);
      g_assert_true (dc_quant_pack ("test", x, n, 1, q, &error));
      json_builder_begin_object (b);
      add_bits (b, "x", x, n);
      json_builder_set_member_name (b, "q");
      json_builder_begin_array (b);
      for (gsize i = 0; i < n; i++)
        json_builder_add_int_value (b, q->q[i]);
      json_builder_end_array (b);
      json_builder_set_member_name (b, "e");
      json_builder_add_int_value (b, q->exponent[0]);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "epilogue");
  json_builder_begin_array (b);
  for (guint i = 0; i < 3000; i++)
    {
      guint64 u = dc_rng_u64 (5, 98, i);
      gint32 acc = (gint32) (u >> 32) >> (u % 31);
      gint32 ea = (gint32) ((u >> 8) % 400) - 200, eb = (gint32) ((u >> 20) % 400) - 250;

      json_builder_begin_array (b);
      json_builder_add_int_value (b, acc);
      json_builder_add_int_value (b, ea);
      json_builder_add_int_value (b, eb);
      json_builder_add_int_value (b, bits_of (dc_gemm_epilogue (acc, ea, eb)));
      json_builder_end_array (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "rng");
  json_builder_begin_array (b);
  for (guint i = 0; i < 300; i++)
    {
      gint64 seed = i % 3 == 0 ? -(gint64) (dc_rng_u64 (1, 97, i) >> 2) : (gint64) i * 1000003;
      /* Counters up to 2^53 travel exactly as JSON numbers. */
      guint64 counter = i % 5 == 0 ? dc_rng_u64 (2, 97, i) >> 11 : i;
      g_autofree char *seed_text = g_strdup_printf ("%" G_GINT64_FORMAT, seed);

      json_builder_begin_array (b);
      json_builder_add_string_value (b, seed_text);
      json_builder_add_int_value (b, DC_RNG_STREAM_SAMPLE);
      json_builder_add_int_value (b, (gint64) counter);
      json_builder_add_int_value (b, bits_of (dc_rng_uniform ((guint64) seed,
                                                              DC_RNG_STREAM_SAMPLE, counter)));
      json_builder_end_array (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  text = json_generator_to_data (gen, NULL);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
  return path;
}

static void
test_math (Fixture       *f,
           gconstpointer  data)
{
  g_autofree char *cases = NULL, *script = NULL, *out = NULL, *err = NULL;
  g_autoptr(JsonNode) root = NULL;
  int status = -1;

  if (skip_without_node (f))
    return;
  cases = write_math_cases (f);
  script = dc_test_dup_source_path ("tests", "kit", "kit-math-check.js", NULL);
  {
    const char *argv[] = { f->node, script, cases, NULL };

    g_assert_true (dc_test_spawn (argv, &out, &err, &status, TIMEOUT_MS));
  }
  g_test_message ("%s%s", out, err);
  root = parse (out);
  g_assert_cmpint (json_object_get_int_member (json_node_get_object (root), "checked"), >, 40000);
  g_assert_cmpint (json_object_get_int_member (json_node_get_object (root), "mismatches"), ==, 0);
  g_assert_cmpint (status, ==, 0);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/dc/kit/node/math", Fixture, NULL, fixture_set_up, test_math,
              fixture_tear_down);
  g_test_add ("/dc/kit/node/refused", Fixture, NULL, fixture_set_up, test_refused,
              fixture_tear_down);
  g_test_add ("/dc/kit/node/same-ids-default-size", Fixture, NULL, fixture_set_up,
              test_default_size, fixture_tear_down);
  g_test_add ("/dc/kit/node/same-ids-width-128", Fixture, NULL, fixture_set_up,
              test_width_128, fixture_tear_down);
  return g_test_run ();
}
