/* test-kit-page.c: the inference kit (issue 13) end to end.
 *
 * Proves: `export` without --hf or --kit is a usage error (exit status 2);
 * `export --kit` writes one HTML file whose --json names it with its
 * bytes, step and weight hash, which holds the blob as base64 in
 * #dc-kit-data and a Content-Security-Policy that forbids the network, and
 * which refers to no outside file; dc_kit_export () stops when cancelled and
 * leaves an existing file as it was, and replaces a file whole; in headless
 * Chromium (network blocked, every request recorded over DevTools) the kit
 * opened with run=1 gives, for several prompts, greedy and sampled with
 * seeds, exactly the token ids of `daisychain-cli generate --json`, and the
 * page and its worker request nothing but the kit's own file:// URL and
 * blob:/data: URLs; a kit with one base64 character of its data changed says
 * its data was altered, keeps Generate disabled and writes no ids; Stop
 * ends a 4096-token generation at once with no ids written, and the page then
 * generates the CLI's ids again; the page is one column at phone width and
 * follows prefers-color-scheme; screenshots are kept in
 * build/tests/screenshots/ (kit-page.png, kit-page-phone.png,
 * kit-page-dark.png, kit-page-tampered.png). With
 * tests/kit/kit-node.js (kit-engine's Node runner) present, Node gives the
 * same ids from the same HTML file.
 *
 * The same ids and the same refusal in Firefox (WebDriver BiDi); `bench kit`
 * prints both sizes' documented fields with the kit's ids equal to the
 * native ones at width 128 too.
 *
 * Without Chromium (or Node, or Firefox) those cases skip, saying so.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "dc-cli-chromium.h"
#include "model/dc-checkpoint.h"
#include "model/dc-kit-blob.h"
#include "model/dc-kit-export.h"

#define CLI_TIMEOUT_MS     300000
/* Chromium's start and each DevTools command on a loaded 2-core machine. */
#define BROWSER_TIMEOUT_MS 90000
/* One generation in the page (tens of tokens of a tiny model). */
#define RUN_TIMEOUT_MS     180000

/* The model is trained once for all cases (a few dozen steps). */
static char *tmp_dir;
static char *checkpoint;
static char *kit;
static char *kit_hash;

static JsonObject *
parse_object (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  json_parser_load_from_data (parser, text, -1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static void
train_and_export (void)
{
  g_autofree char *corpus = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr(JsonObject) exported = NULL;
  const char *train[] = { "train", "--data", corpus, "--steps", "100", "--stop-at", "40",
                          "--width", "32", "--seq", "32", "--batch", "4", "--seed", "3",
                          "--out", NULL, NULL };
  const char *export[] = { "export", "--json", "--checkpoint", NULL, "--kit", NULL, NULL };
  g_autoptr(GError) error = NULL;
  GStatBuf st;

  if (kit != NULL)
    return;
  tmp_dir = g_dir_make_tmp ("dc-kit-page-XXXXXX", &error);
  g_assert_no_error (error);
  checkpoint = g_build_filename (tmp_dir, "model.pt", NULL);
  kit = g_build_filename (tmp_dir, "kit.html", NULL);
  train[16] = checkpoint;
  g_assert_cmpint (dc_test_run_cli (train, &out, &err, CLI_TIMEOUT_MS), ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  export[3] = checkpoint;
  export[5] = kit;
  if (dc_test_run_cli (export, &out, &err, CLI_TIMEOUT_MS) != 0)
    g_error ("export --kit failed: %s", err);

  exported = parse_object (out);
  g_assert_cmpstr (json_object_get_string_member (exported, "event"), ==, "exported");
  g_assert_cmpstr (json_object_get_string_member (exported, "kit"), ==, kit);
  g_assert_cmpint (json_object_get_int_member (exported, "step"), ==, 40);
  g_assert_cmpint (g_stat (kit, &st), ==, 0);
  g_assert_cmpint (json_object_get_int_member (exported, "bytes"), ==, st.st_size);
  kit_hash = g_strdup (json_object_get_string_member (exported, "weight_hash"));
  g_assert_cmpuint (strlen (kit_hash), >, 8);
}

static void
test_export_file (void)
{
  g_autofree char *html = NULL, *out = NULL, *err = NULL;
  gsize len;
  const char *csp, *data;
  const char *no_output[] = { "export", "--checkpoint", NULL, NULL };

  train_and_export ();
  /* Neither --hf nor --kit: a usage error naming both. */
  no_output[2] = checkpoint;
  g_assert_cmpint (dc_test_run_cli (no_output, &out, &err, CLI_TIMEOUT_MS), ==, 2);
  g_assert_nonnull (strstr (err, "--hf or --kit"));
  g_assert_true (g_file_get_contents (kit, &html, &len, NULL));
  g_assert_cmpuint (strlen (html), ==, len);
  /* No slot left unfilled, no outside file referred to. */
  g_assert_null (strstr (html, "@KIT_"));
  g_assert_null (strstr (html, "<link"));
  g_assert_null (strstr (html, " src="));
  g_assert_null (strstr (html, " href="));
  csp = strstr (html, "http-equiv=\"Content-Security-Policy\" content=\"");
  g_assert_nonnull (csp);
  g_assert_true (g_str_has_prefix (strchr (csp, '"') + strlen ("Content-Security-Policy\" content=\"") + 1,
                                   "default-src 'none';"));
  g_assert_nonnull (strstr (csp, "connect-src 'none'"));
  data = strstr (html, "<script type=\"application/octet-stream\" id=\"dc-kit-data\">");
  g_assert_nonnull (data);
  data = strchr (data, '>') + 1;
  {
    const char *end = strstr (data, "</script>");
    g_autofree char *b64 = g_strndup (data, end - data);
    g_autofree guchar *blob = NULL;
    gsize blob_len = 0;

    g_assert_cmpuint (end - data, >, 64);
    for (const char *c = b64; *c != '\0'; c++)
      g_assert_true (g_ascii_isalnum (*c) || *c == '+' || *c == '/' || *c == '=');
    blob = g_base64_decode (b64, &blob_len);
    g_assert_cmpuint (blob_len, >, 40);
    g_assert_cmpmem (blob, 4, "DCK1", 4);
  }
}

static void
test_export_cancel_and_replace (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autofree char *path = NULL, *text = NULL, *missing = NULL;

  train_and_export ();
  model = dc_checkpoint_load (checkpoint, NULL, &error);
  g_assert_no_error (error);
  path = g_build_filename (tmp_dir, "replaced.html", NULL);
  g_assert_true (g_file_set_contents (path, "old", -1, NULL));

  /* Cancelled: the old file stays whole. */
  g_cancellable_cancel (cancellable);
  g_assert_false (dc_kit_export (model, NAN, path, cancellable, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "old");
  g_clear_pointer (&text, g_free);

  /* Replaced whole, with a known loss. */
  g_assert_true (dc_kit_export (model, 1.25, path, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_true (g_str_has_prefix (text, "<!DOCTYPE html>"));
  g_assert_true (g_str_has_suffix (text, "</html>\n"));

  /* A folder that does not exist: a message naming the file. */
  missing = g_build_filename (tmp_dir, "no-such-dir", "kit.html", NULL);
  g_assert_false (dc_kit_export (model, NAN, missing, NULL, &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "could not write the kit"));
  g_assert_nonnull (strstr (error->message, missing));
}

typedef struct
{
  GArray       *done;         /* each report's @done */
  guint         total;
  guint         cancel_at;    /* cancel when @done reaches it; 0: never */
  GCancellable *cancellable;
} KitProgress;

static void
kit_progress_cb (guint    done,
                 guint    total,
                 gpointer user_data)
{
  KitProgress *p = user_data;

  g_array_append_val (p->done, done);
  if (p->total == 0)
    p->total = total;
  g_assert_cmpuint (total, ==, p->total);
  if (p->cancel_at != 0 && done == p->cancel_at)
    g_cancellable_cancel (p->cancellable);
}

/* The kit reports each chunk of its weights written, then the rename,
 * rising to its total; cancelled after the first chunk (the file half
 * written), the old kit stays whole and no partial file is left. The
 * largest model makes several chunks. */
static void
test_export_progress (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-kit-progress-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "kit.html", NULL);
  g_autofree char *text = NULL, *b64 = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GArray) done = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(GBytes) blob = NULL;
  g_autoptr(GDir) listing = NULL;
  KitProgress progress = { done, 0, 0, cancellable };
  DcGptConfig config;
  const char *data;

  dc_gpt_config_init_derived (&config, DC_GPT_WIDTH_MAX, DC_GPT_SEQ_MAX);
  config.n_layer = DC_GPT_LAYERS_MAX;
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 5);
  g_assert_true (g_file_set_contents (path, "old", -1, NULL));

  progress.cancel_at = 1;
  g_assert_false (dc_kit_export_full (model, NAN, path, cancellable, kit_progress_cb,
                                      &progress, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_cmpuint (done->len, ==, 1);
  g_assert_cmpuint (progress.total, >, 2);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "old");
  g_clear_pointer (&text, g_free);
  listing = g_dir_open (dir, 0, NULL);
  g_assert_cmpstr (g_dir_read_name (listing), ==, "kit.html");
  g_assert_null (g_dir_read_name (listing));

  g_array_set_size (done, 0);
  progress.total = 0;
  progress.cancel_at = 0;
  g_assert_true (dc_kit_export_full (model, NAN, path, NULL, kit_progress_cb, &progress,
                                     &error));
  g_assert_no_error (error);
  g_assert_cmpuint (done->len, ==, progress.total);
  for (guint i = 0; i < done->len; i++)
    g_assert_cmpuint (g_array_index (done, guint, i), ==, i + 1);
  /* Encoded chunk by chunk: the blob's base64 whole, in its slot. */
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  data = strstr (text, "id=\"dc-kit-data\">");
  g_assert_nonnull (data);
  data = strchr (data, '>') + 1;
  blob = dc_kit_blob_new (model, NAN, &error);
  g_assert_no_error (error);
  b64 = g_base64_encode (g_bytes_get_data (blob, NULL), g_bytes_get_size (blob));
  g_assert_true (g_str_has_prefix (data, b64));
  g_assert_true (g_str_has_prefix (data + strlen (b64), "</script>"));
  g_assert_true (g_str_has_suffix (text, "</html>\n"));

  dc_test_remove_tree (dir);
}

static DcChromium *
open_browser (void)
{
  g_autofree char *program = dc_chromium_find_program ();
  g_autoptr(GError) error = NULL;
  DcChromium *browser;

  if (program == NULL)
    {
      g_test_skip ("chromium is not installed (scripts/install-deps.sh installs it)");
      return NULL;
    }
  browser = dc_chromium_new (program, BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  return browser;
}

static char *
kit_url (const char *path,
         const char *prompt,
         const char *tokens,
         const char *temperature,
         const char *seed)
{
  g_autofree char *uri = g_filename_to_uri (path, NULL, NULL);
  g_autofree char *p = g_uri_escape_string (prompt, NULL, FALSE);

  return g_strdup_printf ("%s?prompt=%s&tokens=%s&temperature=%s&seed=%s&run=1", uri, p, tokens,
                          temperature, seed);
}

/* @text as a JavaScript string literal. */
static char *
js_string (const char *text)
{
  g_autoptr(JsonNode) node = json_node_init_string (json_node_alloc (), text);

  return json_to_string (node, FALSE);
}

static void
dump_console (DcChromium *browser)
{
  GPtrArray *console = dc_chromium_get_console (browser);

  for (guint i = 0; i < console->len; i++)
    g_test_message ("page %s", (const char *) g_ptr_array_index (console, i));
}

/* The page may ask for nothing but its own file and blob:/data: URLs: none
 * other was sent, and none was tried and refused by the page's policy. */
static void
assert_no_network (DcChromium *browser,
                   const char *path)
{
  g_autofree char *uri = g_filename_to_uri (path, NULL, NULL);
  GPtrArray *requests = dc_chromium_get_requests (browser);
  GPtrArray *console = dc_chromium_get_console (browser);
  guint own = 0;

  dump_console (browser);
  for (guint i = 0; i < console->len; i++)
    {
      const char *line = g_ptr_array_index (console, i);

      g_assert_null (strstr (line, "Content Security Policy"));
      g_assert_null (strstr (line, "net::ERR"));
    }

  for (guint i = 0; i < requests->len; i++)
    {
      const char *url = g_ptr_array_index (requests, i);

      g_test_message ("request %s", url);
      if (g_str_has_prefix (url, "blob:") || g_str_has_prefix (url, "data:"))
        continue;
      g_assert_true (g_str_has_prefix (url, uri));
      g_assert_true (url[strlen (uri)] == '\0' || url[strlen (uri)] == '?');
      own++;
    }
  /* Chromium reports the file:// load itself, which shows the recorder
   * works; Firefox's BiDi reports no file:// request, only others. */
  if (!dc_chromium_is_firefox (browser))
    g_assert_cmpuint (own, >, 0);
}

typedef struct
{
  const char *prompt;
  const char *tokens;
  const char *temperature;   /* the page's hundredths */
  const char *cli_temperature;
  const char *page_seed;
  const char *cli_seed;      /* generate takes a signed 64-bit seed: -1 is 2^64 - 1 */
} Case;

static const Case cases[] = {
  { "The ", "40", "0", "0", "1", "1" },
  { "Once upon a time", "40", "80", "0.8", "7", "7" },
  { "", "32", "100", "1.0", "123", "123" },
  { "héllo wörld — ", "24", "35", "0.35", "18446744073709551615", "-1" },
};

static char *
cli_ids (const Case *c)
{
  const char *args[] = { "generate", "--json", "--checkpoint", checkpoint, "--prompt", c->prompt,
                         "--tokens", c->tokens, "--temperature", c->cli_temperature,
                         "--seed", c->cli_seed, NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr(JsonObject) o = NULL;
  g_autoptr(JsonGenerator) gen = json_generator_new ();

  g_assert_cmpint (dc_test_run_cli (args, &out, &err, CLI_TIMEOUT_MS), ==, 0);
  o = parse_object (out);
  json_generator_set_root (gen, json_object_get_member (o, "ids"));
  return json_generator_to_data (gen, NULL);
}

static void
check_ids (DcChromium *browser)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) engine = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *url = kit_url (kit, cases[i].prompt, cases[i].tokens,
                                      cases[i].temperature, cases[i].page_seed);
      g_autofree char *expr = NULL, *ids = NULL, *want = cli_ids (&cases[i]);
      g_autofree char *quoted = js_string (url);

      g_assert_true (dc_chromium_navigate (browser, url, BROWSER_TIMEOUT_MS, &error));
      g_assert_no_error (error);
      expr = g_strdup_printf ("(location.href === %s && document.getElementById ('result-ids')"
                              " && document.getElementById ('result-ids').textContent) || "
                              "(document.body && document.body.dataset.state === 'error'"
                              " ? 'error: ' + document.getElementById ('status').textContent : '')",
                              quoted);
      ids = dc_chromium_wait_string (browser, expr, RUN_TIMEOUT_MS, &error);
      if (error != NULL)
        dump_console (browser);
      g_assert_no_error (error);
      g_test_message ("case %u: page %s, cli %s", i, ids, want);
      g_assert_cmpstr (ids, ==, want);
    }
  /* Both browsers have WebAssembly SIMD, and the page's policy lets the engine
   * compile its products there (not the slower JavaScript loops). */
  engine = dc_chromium_evaluate (browser, "document.getElementById ('fact-engine').textContent",
                                 BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_node_get_string (engine), ==, "WebAssembly SIMD");
  assert_no_network (browser, kit);
}

static void
test_page_ids (void)
{
  g_autoptr(DcChromium) browser = NULL;

  train_and_export ();
  if ((browser = open_browser ()) == NULL)
    return;
  check_ids (browser);
}

/* One base64 character of the data changed, in the middle of the tensors. */
static char *
write_tampered_kit (void)
{
  g_autofree char *html = NULL;
  char *data, *end;
  char *path = g_build_filename (tmp_dir, "tampered.html", NULL);
  gsize at;

  g_assert_true (g_file_get_contents (kit, &html, NULL, NULL));
  data = strstr (html, "id=\"dc-kit-data\">");
  g_assert_nonnull (data);
  data = strchr (data, '>') + 1;
  end = strstr (data, "</script>");
  at = (end - data) * 3 / 4;
  data[at] = data[at] == 'A' ? 'B' : 'A';
  g_assert_true (g_file_set_contents (path, html, -1, NULL));
  return path;
}

static void
check_tampered (DcChromium *browser,
                const char *shot_name)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL, *url = NULL, *state = NULL, *expr = NULL, *quoted = NULL;
  g_autoptr(JsonNode) status = NULL, ids = NULL, disabled = NULL, code = NULL;
  g_autofree char *dir = dc_test_dup_build_path ("tests", "screenshots", NULL);
  g_autofree char *shot = g_build_filename (dir, shot_name, NULL);

  path = write_tampered_kit ();
  url = kit_url (path, "The ", "8", "0", "1");
  quoted = js_string (url);
  g_assert_true (dc_chromium_navigate (browser, url, BROWSER_TIMEOUT_MS, &error));
  g_assert_no_error (error);
  expr = g_strdup_printf ("location.href === %s && document.body"
                          " && ['error', 'done'].includes (document.body.dataset.state)"
                          " ? document.body.dataset.state : ''", quoted);
  state = dc_chromium_wait_string (browser, expr, RUN_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (state, ==, "error");
  code = dc_chromium_evaluate (browser, "document.body.dataset.error", BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_node_get_string (code), ==, "hash-mismatch");
  status = dc_chromium_evaluate (browser, "document.getElementById ('status').textContent",
                                 BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_test_message ("status: %s", json_node_get_string (status));
  g_assert_nonnull (strstr (json_node_get_string (status), "data was altered"));
  ids = dc_chromium_evaluate (browser, "document.getElementById ('result-ids').textContent",
                              BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_node_get_string (ids), ==, "");
  disabled = dc_chromium_evaluate (browser, "document.getElementById ('generate').disabled",
                                   BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_true (json_node_get_boolean (disabled));
  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (dc_chromium_screenshot (browser, 1000, 700, FALSE, shot, BROWSER_TIMEOUT_MS,
                                         &error));
  g_assert_no_error (error);
  assert_no_network (browser, path);
}

static void
test_page_tampered (void)
{
  g_autoptr(DcChromium) browser = NULL;

  train_and_export ();
  if ((browser = open_browser ()) == NULL)
    return;
  check_tampered (browser, "kit-page-tampered.png");
}

/* The same ids, the same refusal of an altered kit, and no request, in
 * Firefox (WebDriver BiDi). */
static void
test_firefox (void)
{
  g_autofree char *program = dc_chromium_find_firefox ();
  g_autofree char *dir = dc_test_dup_build_path ("tests", "screenshots", NULL);
  g_autofree char *shot = g_build_filename (dir, "kit-page-firefox.png", NULL);
  g_autofree char *url = NULL, *ids = NULL;
  g_autoptr(DcChromium) browser = NULL;
  g_autoptr(GError) error = NULL;

  train_and_export ();
  if (program == NULL)
    {
      g_test_skip ("firefox-esr is not installed");
      return;
    }
  browser = dc_chromium_new_firefox (program, BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  check_ids (browser);
  check_tampered (browser, "kit-page-firefox-tampered.png");
  url = kit_url (kit, "Once upon a time", "48", "80", "7");
  g_assert_true (dc_chromium_navigate (browser, url, BROWSER_TIMEOUT_MS, &error));
  g_assert_no_error (error);
  ids = dc_chromium_wait_string (browser, "document.getElementById ('result-ids') ? "
                                          "document.getElementById ('result-ids').textContent : ''",
                                 RUN_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_true (dc_chromium_screenshot (browser, 1000, 1000, FALSE, shot, BROWSER_TIMEOUT_MS,
                                         &error));
  g_assert_no_error (error);
}

static void
test_page_screenshots (void)
{
  g_autoptr(DcChromium) browser = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = dc_test_dup_build_path ("tests", "screenshots", NULL);
  g_autofree char *desktop = g_build_filename (dir, "kit-page.png", NULL);
  g_autofree char *phone = g_build_filename (dir, "kit-page-phone.png", NULL);
  g_autofree char *dark = g_build_filename (dir, "kit-page-dark.png", NULL);
  g_autofree char *url = NULL, *ids = NULL;
  g_autoptr(JsonNode) columns = NULL, light_bg = NULL, dark_bg = NULL;
  const char *background = "getComputedStyle (document.documentElement).backgroundColor";

  train_and_export ();
  if ((browser = open_browser ()) == NULL)
    return;
  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  url = kit_url (kit, "Once upon a time", "48", "80", "7");
  g_assert_true (dc_chromium_navigate (browser, url, BROWSER_TIMEOUT_MS, &error));
  g_assert_no_error (error);
  ids = dc_chromium_wait_string (browser, "document.getElementById ('result-ids') ? "
                                          "document.getElementById ('result-ids').textContent : ''",
                                 RUN_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_true (dc_chromium_screenshot (browser, 1000, 1000, FALSE, desktop, BROWSER_TIMEOUT_MS,
                                         &error));
  g_assert_no_error (error);
  g_assert_true (dc_chromium_screenshot (browser, 390, 1200, TRUE, phone, BROWSER_TIMEOUT_MS,
                                         &error));
  g_assert_no_error (error);
  /* At phone width the settings stack in one column. */
  columns = dc_chromium_evaluate (browser, "getComputedStyle (document.querySelector ('.row'))"
                                           ".gridTemplateColumns.split (' ').length",
                                  BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpint (json_node_get_int (columns), ==, 1);

  /* Dark and light follow the system's preference (GNOME's colours). */
  light_bg = dc_chromium_evaluate (browser, background, BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_true (dc_chromium_set_dark (browser, TRUE, BROWSER_TIMEOUT_MS, &error));
  g_assert_no_error (error);
  g_assert_true (dc_chromium_screenshot (browser, 1000, 1000, FALSE, dark, BROWSER_TIMEOUT_MS,
                                         &error));
  g_assert_no_error (error);
  dark_bg = dc_chromium_evaluate (browser, background, BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_node_get_string (light_bg), ==, "rgb(250, 250, 250)");
  g_assert_cmpstr (json_node_get_string (dark_bg), ==, "rgb(36, 36, 36)");
  g_test_message ("screenshots: %s %s %s", desktop, phone, dark);
  assert_no_network (browser, kit);
}

/* Stop ends a long generation at once, writes no ids, and the page can
 * generate again (a new worker) with the CLI's ids. */
static void
test_page_stop (void)
{
  g_autoptr(DcChromium) browser = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL, *started = NULL, *ready = NULL, *ids = NULL, *want = NULL;
  g_autoptr(JsonNode) stopped = NULL, status = NULL, empty = NULL, clicked = NULL;
  const Case again = { "The ", "16", "80", "0.8", "5", "5" };

  train_and_export ();
  if ((browser = open_browser ()) == NULL)
    return;
  url = kit_url (kit, "The ", "4096", "80", "5");
  g_assert_true (dc_chromium_navigate (browser, url, BROWSER_TIMEOUT_MS, &error));
  g_assert_no_error (error);
  started = dc_chromium_wait_string (browser,
                                     "!document.body ? '' : "
                                     "document.body.dataset.state === 'done' ? 'done' : "
                                     "document.body.dataset.state === 'running' && "
                                     "parseInt (document.getElementById ('count').textContent) > 0"
                                     " ? 'running' : ''", RUN_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  if (g_str_equal (started, "done"))
    {
      /* 4096 tokens of this model take seconds in the kit's engine; a
       * faster one would need a longer run to be stopped. */
      g_test_skip ("the kit generated 4096 tokens before Stop could be pressed");
      return;
    }
  stopped = dc_chromium_evaluate (browser, "document.getElementById ('stop').click ();"
                                           "document.body.dataset.state", BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_node_get_string (stopped), ==, "stopped");
  status = dc_chromium_evaluate (browser, "document.getElementById ('status').textContent",
                                 BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (json_node_get_string (status), "Stopped after "));
  empty = dc_chromium_evaluate (browser, "document.getElementById ('result-ids').textContent",
                                BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_node_get_string (empty), ==, "");

  ready = dc_chromium_wait_string (browser, "document.getElementById ('generate').disabled"
                                           " ? '' : 'ready'",
                                   RUN_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  clicked = dc_chromium_evaluate (browser, "document.getElementById ('tokens').value = '16';"
                                           "document.getElementById ('generate').click (); 'ok'",
                                  BROWSER_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  ids = dc_chromium_wait_string (browser, "document.getElementById ('result-ids').textContent",
                                 RUN_TIMEOUT_MS, &error);
  g_assert_no_error (error);
  want = cli_ids (&again);
  g_assert_cmpstr (ids, ==, want);
  assert_no_network (browser, kit);
}

static void
test_node_ids (void)
{
  g_autofree char *node = g_find_program_in_path ("node");
  g_autofree char *runner = dc_test_dup_source_path ("tests", "kit", "kit-node.js", NULL);

  train_and_export ();
  if (node == NULL || !g_file_test (runner, G_FILE_TEST_EXISTS))
    {
      g_test_skip (node == NULL ? "node is not installed" : "tests/kit/kit-node.js is not there yet");
      return;
    }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *argv[] = { node, runner, kit, "--prompt", cases[i].prompt,
                             "--tokens", cases[i].tokens, "--temperature", cases[i].cli_temperature,
                             "--seed", cases[i].page_seed, NULL };
      g_autofree char *out = NULL, *err = NULL, *want = cli_ids (&cases[i]);
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(JsonGenerator) gen = json_generator_new ();
      g_autofree char *got = NULL;
      int status = -1;

      g_assert_true (dc_test_spawn (argv, &out, &err, &status, CLI_TIMEOUT_MS));
      if (status != 0)
        g_test_message ("node: %s", err);
      g_assert_cmpint (status, ==, 0);
      g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
      json_generator_set_root (gen, json_parser_get_root (parser));
      got = json_generator_to_data (gen, NULL);
      g_assert_cmpstr (got, ==, want);
    }
}

/* bench kit's lines: both sizes, the documented fields, and the kit's ids
 * equal to dc_generate ()'s at width 128 too. */
static void
test_bench_fields (void)
{
  g_autofree char *program = dc_chromium_find_program ();
  const char *args[] = { "bench", "kit", "--json", "--tokens", "8", "--rounds", "1", NULL };
  const char *bad[] = { "bench", "kit", "--rounds", "0", NULL };
  const char *sizes[] = { "default", "w128" };
  g_autofree char *out = NULL, *err = NULL, *bad_out = NULL, *bad_err = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_cmpint (dc_test_run_cli (bad, &bad_out, &bad_err, CLI_TIMEOUT_MS), ==, 2);
  if (program == NULL)
    {
      g_test_skip ("chromium is not installed (scripts/install-deps.sh installs it)");
      return;
    }
  if (dc_test_run_cli (args, &out, &err, CLI_TIMEOUT_MS) != 0)
    g_error ("bench kit failed: %s", err);
  lines = g_strsplit (g_strstrip (out), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  for (guint i = 0; i < 2; i++)
    {
      g_autoptr(JsonObject) o = parse_object (lines[i]);

      g_test_message ("%s", lines[i]);
      g_assert_cmpstr (json_object_get_string_member (o, "size"), ==, sizes[i]);
      g_assert_cmpint (json_object_get_int_member (o, "tokens"), ==, 8);
      g_assert_cmpint (json_object_get_int_member (o, "rounds"), ==, 1);
      g_assert_cmpint (json_object_get_int_member (o, "kit_bytes"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "kit_tokens_per_s"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "native_tokens_per_s"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (o, "ratio"), >, 0);
      g_assert_true (json_object_get_boolean_member (o, "same_ids"));
      g_assert_cmpstr (json_object_get_string_member (o, "kit_engine"), ==, "WebAssembly SIMD");
    }
}

int
main (int    argc,
      char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/kit/export/file", test_export_file);
  g_test_add_func ("/dc/kit/export/cancel-and-replace", test_export_cancel_and_replace);
  g_test_add_func ("/dc/kit/export/progress", test_export_progress);
  g_test_add_func ("/dc/kit/page/ids", test_page_ids);
  g_test_add_func ("/dc/kit/page/tampered", test_page_tampered);
  g_test_add_func ("/dc/kit/page/stop", test_page_stop);
  g_test_add_func ("/dc/kit/page/screenshots", test_page_screenshots);
  g_test_add_func ("/dc/kit/node/ids", test_node_ids);
  g_test_add_func ("/dc/kit/firefox/ids-and-tampered", test_firefox);
  g_test_add_func ("/dc/kit/bench/fields", test_bench_fields);
  status = g_test_run ();
  if (tmp_dir != NULL)
    dc_test_remove_tree (tmp_dir);
  return status;
}
