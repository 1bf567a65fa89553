/* test-cli-infer.c: `daisychain-cli infer` (and `tokenize` by repo id).
 *
 * The argument checks need no model. The end-to-end cases run the real
 * model code on tests/data/hf/models/llama-tiny as a local folder, and
 * through a local Hub (a libsoup server on loopback, HF_ENDPOINT).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "dc-test-utils.h"

#define CLI_MS 120000   /* a safety net against a hang, never a measurement */

static JsonObject *
parse_single_json_line (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  g_assert_cmpuint (g_strv_length (lines), ==, 2);   /* one line and the empty rest */
  g_assert_true (json_parser_load_from_data (parser, lines[0], -1, &error));
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* Every wrong command line is refused with exit status 2 and a message
 * naming the option, before any model is opened. */
static void
test_argument_checks (void)
{
  const struct
  {
    const char *args[8];
    const char *message;
  } cases[] = {
    { { "infer", NULL }, "--model is required" },
    { { "infer", "--model", "", NULL }, "--model is required" },
    { { "infer", "--model", "x/y", "--tokens", "0", NULL }, "--tokens must be 1–4096" },
    { { "infer", "--model", "x/y", "--tokens", "4097", NULL }, "--tokens must be 1–4096" },
    { { "infer", "--model", "x/y", "--context", "1", NULL }, "--context must be at least 2" },
    { { "infer", "--model", "x/y", "--temperature", "-1", NULL }, "--temperature must be 0–1000" },
    { { "infer", "--model", "x/y", "--temperature", "1001", NULL },
      "--temperature must be 0–1000" },
    { { "infer", "--model", "x/y", "--seed", "-3", NULL }, "--seed must not be negative" },
    { { "infer", "--model", "x/y", "--output", "xml", NULL }, "--output takes free or json" },
    { { "infer", "--model", "x/y", "--score", "1,a", NULL }, "--score takes" },
    { { "infer", "--model", "x/y", "--score", "1,,2", NULL }, "--score takes" },
    { { "infer", "--model", "x/y", "--score", "-1", NULL }, "--score takes" },
    { { "infer", "--model", "x/y", "--score", "1", "--prompt", "p", NULL },
      "--score and --prompt do not go together" },
    { { "infer", "--model", "x/y", "--backend", "abacus", NULL }, "unknown backend" },
    { { "infer", "--model", "x/y", "extra", NULL }, "unexpected argument" },
    { { "infer", "--model", "x/y", "--tokens", "many", NULL }, "--tokens" },
    { { "infer", "--model", "x/y", "--draft-span", "16", NULL }, "--draft-span must be 0–15" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int status = dc_test_run_cli (cases[i].args, &out, &err, CLI_MS);

      g_test_message ("case %u: %s", i, err);
      g_assert_cmpint (status, ==, 2);
      g_assert_nonnull (strstr (err, cases[i].message));
    }
}

/* A model that cannot be opened is a clear failure (status 1), with --json
 * an error line on stdout too. */
static void
test_model_missing (void)
{
  g_autofree char *missing = g_build_filename (g_get_tmp_dir (), "dc-no-such-model-folder", NULL);
  const char *args[] = { "infer", "--model", missing, "--prompt", "x", "--json", NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status = dc_test_run_cli (args, &out, &err, CLI_MS);

  g_assert_cmpint (status, ==, 1);
  g_assert_cmpstr (err, !=, "");
  g_assert_nonnull (strstr (out, "\"error\""));
}

static char *
llama_tiny (void)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  NULL);
  g_autofree char *weights = g_build_filename (dir, "model.safetensors", NULL);

  g_assert_true (g_file_test (weights, G_FILE_TEST_IS_REGULAR));
  return g_steal_pointer (&dir);
}

static JsonObject *
load_reference (const char *dir)
{
  g_autofree char *path = g_build_filename (dir, "reference.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (json_parser_load_from_file (parser, path, &error));
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

/* Teacher-forced on input_ids + greedy_ids, the argmax equals the
 * reference's at every step whose top-2 margin is above 0.1 (at least 99%
 * of them), the first step's best id among them (a margin of 0.04, as the
 * Unicode prompt's, may flip under INT8). */
static void
test_score_agrees_with_transformers (void)
{
  g_autofree char *dir = llama_tiny ();
  g_autoptr(JsonObject) reference = NULL;
  JsonArray *prompts;
  guint checked = 0, agreed = 0;

  reference = load_reference (dir);
  prompts = json_object_get_array_member (reference, "prompts");
  for (guint p = 0; p < json_array_get_length (prompts); p++)
    {
      JsonObject *prompt = json_array_get_object_element (prompts, p);
      JsonArray *input = json_object_get_array_member (prompt, "input_ids");
      JsonArray *greedy = json_object_get_array_member (prompt, "greedy_ids");
      JsonArray *margins = json_object_get_array_member (prompt, "top2_margin");
      JsonArray *top10 = json_object_get_array_member (prompt, "first_step_top10");
      guint n_input = json_array_get_length (input), n_greedy = json_array_get_length (greedy);
      g_autoptr(GString) ids = g_string_new (NULL);
      g_autofree char *out = NULL, *err = NULL;
      g_auto(GStrv) lines = NULL;
      const char *args[] = { "infer", "--model", dir, "--score", NULL, "--json", NULL };

      for (guint i = 0; i < n_input; i++)
        g_string_append_printf (ids, "%s%" G_GINT64_FORMAT, i ? "," : "",
                                json_array_get_int_element (input, i));
      for (guint i = 0; i < n_greedy; i++)
        g_string_append_printf (ids, ",%" G_GINT64_FORMAT, json_array_get_int_element (greedy, i));
      args[4] = ids->str;
      g_assert_cmpint (dc_test_run_cli (args, &out, &err, CLI_MS), ==, 0);
      lines = g_strsplit (out, "\n", -1);
      g_assert_cmpuint (g_strv_length (lines), ==, n_input + n_greedy + 1);

      for (guint j = 0; j < n_greedy; j++)
        {
          guint pos = n_input - 1 + j;
          g_autoptr(JsonParser) parser = json_parser_new ();
          JsonObject *line;
          JsonArray *top;
          gint64 best;

          g_assert_true (json_parser_load_from_data (parser, lines[pos], -1, NULL));
          line = json_node_get_object (json_parser_get_root (parser));
          g_assert_cmpint (json_object_get_int_member (line, "pos"), ==, pos);
          top = json_object_get_array_member (line, "top");
          g_assert_cmpuint (json_array_get_length (top), ==, 10);
          best = json_array_get_int_element (json_array_get_array_element (top, 0), 0);
          if (j == 0 && json_array_get_double_element (margins, 0) > 0.1)
            g_assert_cmpint (best, ==,
                             json_array_get_int_element (json_array_get_array_element (top10, 0), 0));
          if (json_array_get_double_element (margins, j) > 0.1)
            {
              checked++;
              agreed += best == json_array_get_int_element (greedy, j);
            }
        }
    }
  g_test_message ("argmax agreed at %u of %u steps with margin > 0.1", agreed, checked);
  g_assert_cmpuint (checked, >, 0);
  g_assert_cmpuint (agreed * 100, >=, checked * 99);
}

/* Greedy generation: the reference's first token (its margin is wide), the
 * same ids on a second run, and text that is those ids' text. */
static void
test_generate_greedy (void)
{
  g_autofree char *dir = llama_tiny ();
  g_autoptr(JsonObject) reference = NULL, first = NULL, second = NULL;
  const char *args[] = { "infer", "--model", dir, "--prompt", "The secret of", "--tokens", "24",
                         "--json", NULL };
  g_autofree char *out1 = NULL, *out2 = NULL, *err = NULL;
  JsonArray *ids1, *ids2, *greedy;

  reference = load_reference (dir);
  greedy = json_object_get_array_member (
    json_array_get_object_element (json_object_get_array_member (reference, "prompts"), 0),
    "greedy_ids");
  g_assert_cmpint (dc_test_run_cli (args, &out1, &err, CLI_MS), ==, 0);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (dc_test_run_cli (args, &out2, &err, CLI_MS), ==, 0);
  first = parse_single_json_line (out1);
  second = parse_single_json_line (out2);
  ids1 = json_object_get_array_member (first, "ids");
  ids2 = json_object_get_array_member (second, "ids");
  g_assert_cmpuint (json_array_get_length (ids1), >, 0);
  g_assert_cmpuint (json_array_get_length (ids1), <=, 24);
  g_assert_cmpint (json_array_get_int_element (ids1, 0), ==,
                   json_array_get_int_element (greedy, 0));
  g_assert_cmpuint (json_array_get_length (ids1), ==, json_array_get_length (ids2));
  for (guint i = 0; i < json_array_get_length (ids1); i++)
    g_assert_cmpint (json_array_get_int_element (ids1, i), ==,
                     json_array_get_int_element (ids2, i));
  g_assert_cmpstr (json_object_get_string_member (first, "text"), ==,
                   json_object_get_string_member (second, "text"));
  g_assert_true (json_object_has_member (first, "tokens_per_s"));
  g_assert_false (json_object_get_boolean_member (first, "stopped"));
  g_assert_cmpint (json_object_get_int_member (first, "prompt_tokens"), ==, 6);
}

/* --draft-span: the model's own text repeats, spans of it are scored in
 * one forward pass each (the model's part and head per position, the KV
 * cache cut back after a rejected tail) and the ids stay those of one
 * token at a time, greedy and sampled; greedy llama-tiny repeats itself,
 * so some span is accepted. */
static void
test_draft_span (void)
{
  g_autofree char *dir = llama_tiny ();
  const char *temperatures[] = { "0", "80" };

  for (guint t = 0; t < G_N_ELEMENTS (temperatures); t++)
    {
      const char *plain[] = { "infer", "--model", dir, "--prompt", "The ring of devices",
                              "--tokens", "40", "--temperature", temperatures[t], "--seed", "7",
                              "--json", NULL };
      const char *drafted[] = { "infer", "--model", dir, "--prompt", "The ring of devices",
                                "--tokens", "40", "--temperature", temperatures[t], "--seed",
                                "7", "--json", "--draft-span", "8", NULL };
      g_autofree char *out1 = NULL, *out2 = NULL;
      g_autoptr(JsonObject) a = NULL, b = NULL;
      JsonArray *ids1, *ids2;

      g_assert_cmpint (dc_test_run_cli (plain, &out1, NULL, CLI_MS), ==, 0);
      g_assert_cmpint (dc_test_run_cli (drafted, &out2, NULL, CLI_MS), ==, 0);
      a = parse_single_json_line (out1);
      b = parse_single_json_line (out2);
      ids1 = json_object_get_array_member (a, "ids");
      ids2 = json_object_get_array_member (b, "ids");
      g_assert_cmpuint (json_array_get_length (ids1), ==, 40);
      g_assert_cmpuint (json_array_get_length (ids2), ==, 40);
      for (guint i = 0; i < 40; i++)
        g_assert_cmpint (json_array_get_int_element (ids1, i), ==,
                         json_array_get_int_element (ids2, i));
      g_assert_cmpint (json_object_get_int_member (a, "draft_proposed"), ==, 0);
      g_assert_cmpint (json_object_get_int_member (b, "draft_accepted"), <=,
                       json_object_get_int_member (b, "draft_proposed"));
      if (t == 0)
        g_assert_cmpint (json_object_get_int_member (b, "draft_accepted"), >, 0);
    }
}

/* --output json: whatever the seed, the text is valid JSON. The prompt
 * comes on standard input. */
static void
test_generate_json_output (void)
{
  g_autofree char *dir = llama_tiny ();
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);

  for (guint seed = 1; seed <= 3; seed++)
    {
      g_autofree char *seed_text = g_strdup_printf ("%u", seed);
      g_autoptr(GSubprocess) proc = NULL;
      g_autoptr(GError) error = NULL;
      g_autofree char *out = NULL, *err = NULL;
      g_autoptr(JsonObject) result = NULL;
      g_autoptr(JsonParser) parser = json_parser_new ();
      const char *text;

      proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                               | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                               cli, "infer", "--model", dir, "--output", "json", "--tokens", "30",
                               "--temperature", "80", "--seed", seed_text, "--json", NULL);
      g_assert_no_error (error);
      g_subprocess_communicate_utf8 (proc, "The answer, as JSON:", NULL, &out, &err, &error);
      g_assert_no_error (error);
      g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);
      result = parse_single_json_line (out);
      text = json_object_get_string_member (result, "text");
      g_test_message ("seed %u: %s", seed, text);
      g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
      g_assert_no_error (error);
      g_assert_nonnull (json_parser_get_root (parser));
    }
}

/* A context past the model's limit (256 positions) is refused by name. */
static void
test_context_past_model_limit (void)
{
  g_autofree char *dir = llama_tiny ();
  const char *args[] = { "infer", "--model", dir, "--prompt", "x", "--context", "257", NULL };
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (dc_test_run_cli (args, &out, &err, CLI_MS), ==, 1);
  g_assert_nonnull (strstr (err, "context length must be 2–256"));
}

/* `tokenize` and `infer` take a Hub repo id as they take a folder: through a
 * local Hub (HF_ENDPOINT) and a fresh cache, tokenize gives the reference's
 * input_ids for the Mistral fixture (its BOS template included) and infer's
 * greedy ids for llama-tiny equal those from the folder. Before, tokenize
 * refused anything but a folder. */
static void
test_hub_repo (void)
{
  DcTestHub *hub = dc_test_hub_start (FALSE);
  g_autofree char *cache = g_dir_make_tmp ("dc-cli-infer-XXXXXX", NULL);
  g_autofree char *folder = dc_test_dup_source_path ("tests", "data", "hf", "models",
                                                     "llama-tiny", NULL);
  g_autofree char *out = NULL, *err = NULL, *folder_out = NULL;
  g_autoptr(JsonObject) by_repo = NULL, by_folder = NULL;
  const char *tokenize[] = { "tokenize", "--model", "test/mistral-tiny-f16", "--text",
                             "The secret of", "--json", NULL };
  const char *infer_repo[] = { "infer", "--model", "test/llama-tiny", "--prompt", "The secret of",
                               "--tokens", "8", "--json", NULL };
  const char *infer_folder[] = { "infer", "--model", folder, "--prompt", "The secret of",
                                 "--tokens", "8", "--json", NULL };
  g_autoptr(JsonObject) ids = NULL;
  JsonArray *got;
  const gint64 expected[] = { 0, 53, 374, 265, 306, 267, 85, 304 };  /* reference.json */

  g_setenv ("HF_ENDPOINT", dc_test_hub_get_url (hub), TRUE);
  g_setenv ("DC_MODEL_CACHE_DIR", cache, TRUE);

  g_assert_cmpint (dc_test_run_cli (tokenize, &out, &err, CLI_MS), ==, 0);
  ids = parse_single_json_line (out);
  got = json_object_get_array_member (ids, "ids");
  g_assert_cmpuint (json_array_get_length (got), ==, G_N_ELEMENTS (expected));
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    g_assert_cmpint (json_array_get_int_element (got, i), ==, expected[i]);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  if (dc_test_run_cli (infer_repo, &out, &err, CLI_MS) != 0)
    g_error ("infer by repo id failed: %s", err);
  by_repo = parse_single_json_line (out);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (dc_test_run_cli (infer_folder, &folder_out, &err, CLI_MS), ==, 0);
  by_folder = parse_single_json_line (folder_out);
  g_assert_cmpstr (json_object_get_string_member (by_repo, "text"), ==,
                   json_object_get_string_member (by_folder, "text"));

  g_unsetenv ("HF_ENDPOINT");
  g_unsetenv ("DC_MODEL_CACHE_DIR");
  dc_test_remove_tree (cache);
  dc_test_hub_stop (hub);
}

int
main (int argc, char **argv)
{
  /* The messages checked carry en dashes and curly quotes, which the CLI
   * writes in the locale's charset: in a C locale (the Flatpak sandbox's
   * when it lacks the build's locale) they come out as '?'. C.UTF-8 is
   * built into glibc ≥ 2.35 and is in the sandbox (as in test-cli). */
  g_setenv ("LC_ALL", "C.UTF-8", TRUE);
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/cli/infer/argument-checks", test_argument_checks);
  g_test_add_func ("/cli/infer/model-missing", test_model_missing);
  g_test_add_func ("/cli/infer/hub-repo", test_hub_repo);
  g_test_add_func ("/cli/infer/score-agrees-with-transformers",
                   test_score_agrees_with_transformers);
  g_test_add_func ("/cli/infer/generate-greedy", test_generate_greedy);
  g_test_add_func ("/cli/infer/draft-span", test_draft_span);
  g_test_add_func ("/cli/infer/generate-json-output", test_generate_json_output);
  g_test_add_func ("/cli/infer/context-past-model-limit", test_context_past_model_limit);
  return g_test_run ();
}
