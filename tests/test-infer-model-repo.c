/* test-infer-model-repo.c: DcModelRepo against a real libsoup server in the
 * Hub's layout, counting every body byte and request it sends.
 *
 * The server runs on 127.0.0.1 (ephemeral port) in its own thread with its
 * own GMainContext and serves /OWNER/NAME/resolve/main/FILE from
 * TMP/hub/NAME/FILE, where the test writes small checkpoints of its own
 * (the llama-tiny fixture's config and tokenizer, safetensors files with
 * known bytes). The owner chooses a behaviour:
 *   ok             libsoup's own range handling
 *   ignore-ranges  200 with the whole file whatever the Range
 *   needs-token    401 unless "Authorization: Bearer hf_test_secret"
 *   forbidden      403
 *   truncated      safetensors files cut to half their size
 *   shrinks        safetensors files whole for the header, cut short for the data
 * A test may also have the server cancel the client's cancellable when it
 * receives the Nth weight request, and answer that one 503 (so it sends no
 * bytes): a cancel at a known point, without timing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>
#include <unistd.h>

#include "data/dc-data-error.h"
#include "data/dc-hf-client.h"
#include "infer/dc-model-repo.h"
#include "model/dc-model-error.h"
#include "model/dc-safetensors.h"
#include "dc-test-utils.h"

#define TOKEN "hf_test_secret"
/* Small pieces, so that large tensors span several and a cancel can land
 * inside one tensor. */
#define PIECE 4096u

typedef struct
{
  GThread       *thread;
  GMainContext  *context;
  GMainLoop     *loop;
  SoupServer    *server;
  char          *url;
  char          *root;         /* TMP/hub */

  GMutex         lock;
  GCond          cond;
  gboolean       ready;
  /* under lock */
  guint64        body_bytes;
  guint          requests;
  guint          weight_requests;   /* ranges past a safetensors header */
  GCancellable  *cancel;            /* cancelled at the cancel_at-th weight request */
  guint          cancel_at;
} Hub;

static Hub *hub;
static char *tmp_root;

/* Model files ---------------------------------------------------------------- */

typedef struct
{
  const char *name;
  const char *dtype;
  guint64     numel;
} TensorSpec;

static void
write_file (const char *dir,
            const char *name,
            const char *contents,
            gssize      len)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, contents, len, &error);
  g_assert_no_error (error);
}

static void
copy_fixture (const char *dir,
              const char *name)
{
  g_autofree char *src = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  name, NULL);
  g_autofree char *contents = NULL;
  gsize len;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (src, &contents, &len, &error);
  g_assert_no_error (error);
  write_file (dir, name, contents, (gssize) len);
}

/* Writes a safetensors file with the tensors in order, data from a seeded
 * generator; @lie makes the first tensor's offsets one element longer than
 * its shape (a header that lies about sizes). */
static void
write_safetensors (const char       *dir,
                   const char       *name,
                   const TensorSpec *specs,
                   guint             n,
                   guint32           seed,
                   gboolean          lie)
{
  g_autoptr(GString) header = g_string_new ("{");
  g_autoptr(GByteArray) file = g_byte_array_new ();
  g_autoptr(GRand) rand = g_rand_new_with_seed (seed);
  guint64 offset = 0, len;
  guint8 prefix[8];

  for (guint i = 0; i < n; i++)
    {
      guint64 size = specs[i].numel * (g_str_equal (specs[i].dtype, "F32") ? 4 : 2);
      guint64 end = offset + size + (lie && i == 0 ? 4 : 0);

      g_string_append_printf (header, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%" G_GUINT64_FORMAT
                              "],\"data_offsets\":[%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT "]}",
                              i > 0 ? "," : "", specs[i].name, specs[i].dtype, specs[i].numel,
                              offset, end);
      offset = end;
    }
  g_string_append (header, "}");
  while (header->len % 8 != 0)
    g_string_append_c (header, ' ');
  len = header->len;
  for (guint i = 0; i < 8; i++)
    prefix[i] = (guint8) (len >> (8 * i));
  g_byte_array_append (file, prefix, 8);
  g_byte_array_append (file, (const guint8 *) header->str, header->len);
  for (guint64 i = 0; i < offset; i++)
    {
      guint8 b = (guint8) g_rand_int_range (rand, 0, 256);

      g_byte_array_append (file, &b, 1);
    }
  write_file (dir, name, (const char *) file->data, (gssize) file->len);
}

static char *
make_model_dir (const char *name)
{
  char *dir = g_build_filename (hub->root, name, NULL);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  copy_fixture (dir, "config.json");
  copy_fixture (dir, "tokenizer.json");
  copy_fixture (dir, "tokenizer_config.json");
  return dir;
}

static const TensorSpec llama_tensors[] = {
  { "model.embed_tokens.weight", "F32", 2048 },   /* 8192 bytes: 2 pieces */
  { "model.layers.0.self_attn.q_proj.weight", "BF16", 1000 },
  { "model.layers.0.mlp.up_proj.weight", "F32", 3000 },   /* 12000 bytes: 3 pieces */
  { "model.norm.weight", "F16", 7 },
  { "lm_head.weight", "F32", 500 },
};

static void
make_models (void)
{
  g_autofree char *llama = make_model_dir ("llama");
  g_autofree char *sharded = make_model_dir ("sharded");
  g_autofree char *bert = make_model_dir ("bert");
  g_autofree char *sp = make_model_dir ("sentencepiece");
  g_autofree char *lying = make_model_dir ("lying");
  g_autofree char *config = NULL;
  const TensorSpec shard1[] = { { "model.embed_tokens.weight", "BF16", 5000 },
                                { "model.norm.weight", "BF16", 64 } };
  const TensorSpec shard2[] = { { "lm_head.weight", "BF16", 3000 },
                                { "model.layers.0.mlp.up_proj.weight", "BF16", 100 } };
  const char *index =
    "{\"metadata\": {\"total_size\": 16328}, \"weight_map\": {"
    "\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
    "\"model.norm.weight\": \"model-00001-of-00002.safetensors\","
    "\"lm_head.weight\": \"model-00002-of-00002.safetensors\","
    "\"model.layers.0.mlp.up_proj.weight\": \"model-00002-of-00002.safetensors\"}}";
  const char *metaspace =
    "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null,"
    " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\","
    " \"prepend_scheme\": \"always\", \"split\": true},"
    " \"post_processor\": null, \"decoder\": {\"type\": \"Metaspace\"},"
    " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
    " \"merges\": [\"a b\"]}}";

  write_safetensors (llama, "model.safetensors", llama_tensors, G_N_ELEMENTS (llama_tensors), 1,
                     FALSE);
  write_safetensors (sharded, "model-00001-of-00002.safetensors", shard1, 2, 2, FALSE);
  write_safetensors (sharded, "model-00002-of-00002.safetensors", shard2, 2, 3, FALSE);
  write_file (sharded, "model.safetensors.index.json", index, -1);

  config = g_strdup ("{\"architectures\": [\"BertForMaskedLM\"], \"model_type\": \"bert\","
                     " \"hidden_size\": 128, \"num_hidden_layers\": 2,"
                     " \"num_attention_heads\": 2, \"vocab_size\": 1024}");
  write_file (bert, "config.json", config, -1);
  write_safetensors (bert, "model.safetensors", llama_tensors, 1, 4, FALSE);
  write_file (sp, "tokenizer.json", metaspace, -1);
  write_safetensors (sp, "model.safetensors", llama_tensors, 1, 5, FALSE);
  write_safetensors (lying, "model.safetensors", llama_tensors, 2, 6, TRUE);
}

static GBytes *
load_model_file (const char *model,
                 const char *name)
{
  g_autofree char *path = g_build_filename (hub->root, model, name, NULL);
  char *contents;
  gsize len;

  if (!g_file_get_contents (path, &contents, &len, NULL))
    return NULL;
  return g_bytes_new_take (contents, len);
}

static gsize
model_file_size (const char *model,
                 const char *name)
{
  g_autoptr(GBytes) bytes = load_model_file (model, name);

  g_assert_nonnull (bytes);
  return g_bytes_get_size (bytes);
}

static guint64
header_end (GBytes *bytes)
{
  const guint8 *p = g_bytes_get_data (bytes, NULL);
  guint64 n = 0;

  for (int i = 7; i >= 0; i--)
    n = n << 8 | p[i];
  return 8 + n;
}

/* The server ------------------------------------------------------------------- */

static void
serve_bytes (SoupServerMessage *msg,
             GBytes            *bytes,
             gboolean           honour_range)
{
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  goffset size = (goffset) g_bytes_get_size (bytes);
  SoupRange *ranges = NULL;
  int n_ranges = 0;
  guint64 sending = (guint64) size;

  if (!honour_range)
    soup_message_headers_remove (request, "Range");
  /* Count what SoupServer will send, from the Range header it applies. */
  if (soup_message_headers_get_ranges (request, size, &ranges, &n_ranges))
    {
      sending = 0;
      for (int i = 0; i < n_ranges; i++)
        sending += (guint64) (ranges[i].end - ranges[i].start + 1);
      soup_message_headers_free_ranges (request, ranges);
    }
  g_mutex_lock (&hub->lock);
  hub->body_bytes += sending;
  g_mutex_unlock (&hub->lock);

  soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                "Accept-Ranges", "bytes");
  soup_message_body_append_bytes (soup_server_message_get_response_body (msg), bytes);
  soup_server_message_set_status (msg, 200, NULL);
}

static void
hub_handler (SoupServer        *server,
             SoupServerMessage *msg,
             const char        *path,
             GHashTable        *query,
             gpointer           user_data)
{
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  const char *auth = soup_message_headers_get_one (request, "Authorization");
  g_auto(GStrv) parts = g_strsplit (path + 1, "/", -1);
  g_autoptr(GBytes) bytes = NULL;
  const char *mode, *file;
  gboolean weights;

  g_mutex_lock (&hub->lock);
  hub->requests++;
  g_mutex_unlock (&hub->lock);

  /* /OWNER/NAME/resolve/main/FILE */
  if (g_strv_length (parts) != 5 || !g_str_equal (parts[2], "resolve")
      || !g_str_equal (parts[3], "main")
      || (bytes = load_model_file (parts[1], parts[4])) == NULL)
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  mode = parts[0];
  file = parts[4];
  weights = FALSE;
  if (g_str_has_suffix (file, ".safetensors"))
    {
      SoupRange *ranges = NULL;
      int n_ranges = 0;

      if (soup_message_headers_get_ranges (request, (goffset) g_bytes_get_size (bytes), &ranges,
                                           &n_ranges))
        {
          weights = n_ranges == 1 && (guint64) ranges[0].start >= header_end (bytes);
          soup_message_headers_free_ranges (request, ranges);
        }
    }

  if (weights)
    {
      gboolean cancel = FALSE;

      g_mutex_lock (&hub->lock);
      hub->weight_requests++;
      if (hub->cancel != NULL && hub->weight_requests == hub->cancel_at)
        {
          cancel = TRUE;
          g_cancellable_cancel (hub->cancel);
        }
      g_mutex_unlock (&hub->lock);
      if (cancel)
        {
          soup_server_message_set_status (msg, 503, NULL);
          return;
        }
    }

  if (g_str_equal (mode, "ok"))
    serve_bytes (msg, bytes, TRUE);
  else if (g_str_equal (mode, "ignore-ranges"))
    serve_bytes (msg, bytes, FALSE);
  else if (g_str_equal (mode, "needs-token"))
    {
      if (g_strcmp0 (auth, "Bearer " TOKEN) != 0)
        soup_server_message_set_status (msg, 401, NULL);
      else
        serve_bytes (msg, bytes, TRUE);
    }
  else if (g_str_equal (mode, "forbidden"))
    soup_server_message_set_status (msg, 403, NULL);
  else if (g_str_equal (mode, "truncated") || (g_str_equal (mode, "shrinks") && weights))
    {
      g_autoptr(GBytes) cut = NULL;

      if (g_str_has_suffix (file, ".safetensors"))
        cut = g_bytes_new_from_bytes (bytes, 0, g_bytes_get_size (bytes) / 2
                                      + (weights ? header_end (bytes) : 0));
      serve_bytes (msg, cut != NULL ? cut : bytes, TRUE);
    }
  else if (g_str_equal (mode, "shrinks"))
    serve_bytes (msg, bytes, TRUE);
  else
    soup_server_message_set_status (msg, 404, NULL);
}

static gpointer
hub_thread (gpointer data)
{
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string ("127.0.0.1");
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (inet, 0);
  g_autoptr(GError) error = NULL;
  GSList *uris;

  g_main_context_push_thread_default (hub->context);
  hub->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (hub->server, "/", hub_handler, NULL, NULL);
  soup_server_listen (hub->server, address, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (hub->server);
  hub->url = g_uri_to_string (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  if (g_str_has_suffix (hub->url, "/"))
    hub->url[strlen (hub->url) - 1] = '\0';

  g_mutex_lock (&hub->lock);
  hub->ready = TRUE;
  g_cond_signal (&hub->cond);
  g_mutex_unlock (&hub->lock);

  g_main_loop_run (hub->loop);
  soup_server_disconnect (hub->server);
  g_clear_object (&hub->server);
  g_main_context_pop_thread_default (hub->context);
  return NULL;
}

static void
hub_start (void)
{
  hub = g_new0 (Hub, 1);
  g_mutex_init (&hub->lock);
  g_cond_init (&hub->cond);
  hub->root = g_build_filename (tmp_root, "hub", NULL);
  hub->context = g_main_context_new ();
  hub->loop = g_main_loop_new (hub->context, FALSE);
  hub->thread = g_thread_new ("test-hub", hub_thread, NULL);
  g_mutex_lock (&hub->lock);
  while (!hub->ready)
    g_cond_wait (&hub->cond, &hub->lock);
  g_mutex_unlock (&hub->lock);
}

static gboolean
quit_cb (gpointer data)
{
  g_main_loop_quit (hub->loop);
  return G_SOURCE_REMOVE;
}

static void
hub_stop (void)
{
  /* The server thread owns its context and runs its loop: the invoke queues. */
  GSource *source = g_idle_source_new ();

  g_source_set_callback (source, quit_cb, NULL, NULL);
  g_source_attach (source, hub->context);
  g_source_unref (source);
  g_thread_join (hub->thread);
  g_main_loop_unref (hub->loop);
  g_main_context_unref (hub->context);
  g_free (hub->url);
  g_free (hub->root);
  g_mutex_clear (&hub->lock);
  g_cond_clear (&hub->cond);
  g_clear_pointer (&hub, g_free);
}

static void
hub_reset (guint64 *bytes,
           guint   *requests)
{
  g_mutex_lock (&hub->lock);
  if (bytes != NULL)
    *bytes = hub->body_bytes;
  if (requests != NULL)
    *requests = hub->requests;
  hub->body_bytes = 0;
  hub->requests = 0;
  hub->weight_requests = 0;
  g_clear_object (&hub->cancel);
  hub->cancel_at = 0;
  g_mutex_unlock (&hub->lock);
}

/* Helpers -------------------------------------------------------------------- */

static DcHfClient *
new_client (void)
{
  DcHfClient *client = dc_hf_client_new (hub->url);

  dc_hf_client_set_retries (client, 2, 10);
  dc_hf_client_set_timeout (client, 10);
  return client;
}

static char *
new_cache_dir (void)
{
  static guint counter;

  return g_strdup_printf ("%s/cache-%u", tmp_root, ++counter);
}

static DcModelRepo *
open_repo (DcHfClient   *client,
           const char   *spec,
           const char   *cache_dir,
           guint64       limit,
           GError      **error)
{
  DcModelRepoOptions options = { cache_dir, limit, PIECE };

  return dc_model_repo_open_full (client, spec, &options, NULL, error);
}

/* Reads every tensor of @names and checks its bytes against the file's. */
static gboolean
read_all (DcModelRepo       *repo,
          const char        *model,
          const char        *file_of[],
          const TensorSpec  *specs,
          guint              n,
          GCancellable      *cancellable,
          GError           **error)
{
  for (guint i = 0; i < n; i++)
    {
      const DcSafetensorsTensor *t = dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo),
                                                              specs[i].name);
      g_autoptr(GBytes) file = load_model_file (model, file_of != NULL ? file_of[i]
                                                                       : "model.safetensors");
      g_autofree guint8 *dst = NULL;
      const guint8 *expected;

      g_assert_nonnull (t);
      g_assert_nonnull (file);
      dst = g_malloc0 (t->end - t->begin + 1);
      if (!dc_tensor_source_read (DC_TENSOR_SOURCE (repo), t, dst, cancellable, error))
        return FALSE;
      expected = (const guint8 *) g_bytes_get_data (file, NULL) + header_end (file) + t->begin;
      g_assert_cmpmem (dst, t->end - t->begin, expected, t->end - t->begin);
    }
  return TRUE;
}

static guint64
data_bytes (const char *model,
            const char *name)
{
  g_autoptr(GBytes) file = load_model_file (model, name);

  return g_bytes_get_size (file) - header_end (file);
}

/* Tests --------------------------------------------------------------------- */

static void
test_open_headers_only (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GBytes) st = load_model_file ("llama", "model.safetensors");
  g_autofree char *summary = NULL;
  guint64 bytes, expected;
  guint requests;

  hub_reset (NULL, NULL);
  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (&bytes, &requests);

  expected = model_file_size ("llama", "config.json") + model_file_size ("llama", "tokenizer.json")
             + model_file_size ("llama", "tokenizer_config.json") + header_end (st);
  g_assert_cmpuint (bytes, ==, expected);
  /* config, tokenizer, tokenizer_config, the length, the header. */
  g_assert_cmpuint (requests, ==, 5);
  g_assert_cmpuint (dc_model_repo_get_bytes_downloaded (repo), ==, 0);
  g_assert_cmpuint (dc_model_repo_get_weight_bytes (repo), ==,
                    data_bytes ("llama", "model.safetensors"));
  g_assert_cmpstr (dc_model_repo_get_dtype (repo), ==, "F32");
  g_assert_false (dc_model_repo_is_local (repo));
  g_assert_cmpstr (dc_model_repo_get_spec (repo), ==, "ok/llama");
  g_assert_cmpuint (dc_model_repo_get_config (repo)->n_layers, ==, 6);
  g_assert_nonnull (dc_model_repo_get_tokenizer (repo));
  g_assert_cmpuint (g_bytes_get_size (dc_model_repo_get_tokenizer_config (repo)), ==,
                    model_file_size ("llama", "tokenizer_config.json"));
  g_assert_null (dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo), "no.such.tensor"));
  /* Opening creates no cache: a dialog that only looks leaves nothing behind. */
  g_assert_false (g_file_test (cache, G_FILE_TEST_EXISTS));

  summary = dc_model_repo_dup_summary (repo);
  g_test_message ("summary: %s", summary);
  g_assert_true (g_str_has_prefix (summary, "LlamaForCausalLM, 6 layers, "));
  g_assert_nonnull (strstr (summary, "parameters, byte-level BPE tokenizer (1024 tokens), F32, "
                                     "download "));
  g_assert_nonnull (strstr (summary, ", memory "));
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
test_read_once_then_cached (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  guint64 bytes, data = data_bytes ("llama", "model.safetensors");
  guint requests;

  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  hub_reset (&bytes, &requests);
  /* Each tensor's bytes exactly once: 2 + 1 + 3 + 1 + 1 pieces of 4 KiB at most. */
  g_assert_cmpuint (bytes, ==, data);
  g_assert_cmpuint (requests, ==, 8);
  g_assert_cmpuint (dc_model_repo_get_bytes_downloaded (repo), ==, data);
  g_assert_nonnull (dc_model_repo_get_cache_dir (repo));
  g_assert_true (g_str_has_prefix (dc_model_repo_get_cache_dir (repo), cache));

  /* Reading again, and opening again, move no weight. */
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_finalize_object (g_steal_pointer (&repo));
  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  hub_reset (&bytes, &requests);
  g_assert_cmpuint (bytes, ==, 0);
  g_assert_cmpuint (requests, ==, 0);
  g_assert_cmpuint (dc_model_repo_get_bytes_downloaded (repo), ==, 0);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
test_resume_after_cancel (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  guint64 first, second, data = data_bytes ("llama", "model.safetensors");

  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  /* The 5th weight request is up_proj's second piece: the embedding (2
   * pieces), q_proj (1) and up_proj's first piece are cached by then. */
  g_mutex_lock (&hub->lock);
  hub->cancel = g_object_ref (cancellable);
  hub->cancel_at = 5;
  g_mutex_unlock (&hub->lock);
  g_assert_false (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                            cancellable, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  hub_reset (&first, NULL);
  /* 4 pieces arrived: 4096 + 4096 (embedding), 2000 (q_proj), 4096 (up_proj's first). */
  g_assert_cmpuint (first, ==, 4096 + 4096 + 2000 + 4096);
  g_assert_finalize_object (g_steal_pointer (&repo));

  /* A new open (as after a restart) fetches only what is missing. */
  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  hub_reset (&second, NULL);
  g_assert_cmpuint (first + second, ==, data);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static char *
find_cache_file (const char *cache,
                 const char *suffix)
{
  g_autoptr(GDir) dir = g_dir_open (cache, 0, NULL);
  const char *name;
  g_autofree char *model = NULL;

  g_assert_nonnull (dir);
  name = g_dir_read_name (dir);
  g_assert_nonnull (name);
  model = g_build_filename (cache, name, NULL);
  return g_strconcat (model, "/model.safetensors", suffix, NULL);
}

static void
test_damaged_cache (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autofree char *data_path = NULL;
  g_autofree char *journal_path = NULL;
  g_autofree char *journal = NULL;
  g_autofree char *contents = NULL;
  gsize len;
  char *last_line;
  guint64 bytes, data = data_bytes ("llama", "model.safetensors");
  const DcSafetensorsTensor *up;
  guint64 up_begin;

  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  up = dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo), "model.layers.0.mlp.up_proj.weight");
  up_begin = up->begin;
  data_path = find_cache_file (cache, ".data");
  journal_path = find_cache_file (cache, ".journal");

  /* One flipped byte in up_proj's second piece (bytes 4096-8191 of it). */
  g_file_get_contents (data_path, &contents, &len, &error);
  g_assert_no_error (error);
  contents[up->begin + PIECE + 100] ^= 0x40;
  g_file_set_contents (data_path, contents, (gssize) len, &error);
  g_assert_no_error (error);
  /* A crash after a piece's bytes, before its journal line (the last, for
   * lm_head), and a torn line at the end. */
  g_file_get_contents (journal_path, &journal, &len, &error);
  g_assert_no_error (error);
  journal[len - 1] = '\0';
  last_line = strrchr (journal, '\n');
  g_assert_nonnull (last_line);
  strcpy (last_line + 1, "piece 12");
  g_file_set_contents (journal_path, journal, -1, &error);
  g_assert_no_error (error);
  g_assert_finalize_object (g_steal_pointer (&repo));

  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, PIECE + 500 * 4);
  g_assert_finalize_object (g_steal_pointer (&repo));

  /* A journal naming another version of the file (its header's hash) drops
   * everything cached for it. */
  g_clear_pointer (&journal, g_free);
  g_file_get_contents (journal_path, &journal, &len, &error);
  g_assert_no_error (error);
  last_line = strchr (journal, ' ');
  last_line = strchr (last_line + 1, ' ');
  last_line[1] = last_line[1] == '0' ? '1' : '0';
  g_file_set_contents (journal_path, journal, (gssize) len, &error);
  g_assert_no_error (error);
  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, data);
  g_assert_finalize_object (g_steal_pointer (&repo));

  /* A data file cut short inside up_proj's second piece: that piece and all
   * after it are fetched again (4096 + 3808 + 14 + 2000 bytes), not read
   * short. */
  g_assert_cmpint (truncate (data_path, (off_t) (up_begin + PIECE + 10)), ==, 0);
  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, PIECE + 3808 + 14 + 2000);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
test_sharded (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GBytes) s1 = load_model_file ("sharded", "model-00001-of-00002.safetensors");
  g_autoptr(GBytes) s2 = load_model_file ("sharded", "model-00002-of-00002.safetensors");
  const TensorSpec tensors[] = { { "model.embed_tokens.weight", "BF16", 5000 },
                                 { "model.norm.weight", "BF16", 64 },
                                 { "lm_head.weight", "BF16", 3000 },
                                 { "model.layers.0.mlp.up_proj.weight", "BF16", 100 } };
  const char *files[] = { "model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors",
                          "model-00002-of-00002.safetensors",
                          "model-00002-of-00002.safetensors" };
  guint64 bytes, expected;

  hub_reset (NULL, NULL);
  repo = open_repo (client, "ok/sharded", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (&bytes, NULL);
  expected = model_file_size ("sharded", "config.json")
             + model_file_size ("sharded", "tokenizer.json")
             + model_file_size ("sharded", "tokenizer_config.json")
             + model_file_size ("sharded", "model.safetensors.index.json")
             + header_end (s1) + header_end (s2);
  g_assert_cmpuint (bytes, ==, expected);
  g_assert_cmpstr (dc_model_repo_get_dtype (repo), ==, "BF16");
  g_assert_cmpuint (dc_model_repo_get_weight_bytes (repo), ==,
                    data_bytes ("sharded", files[0]) + data_bytes ("sharded", files[2]));

  g_assert_true (read_all (repo, "sharded", files, tensors, G_N_ELEMENTS (tensors), NULL,
                           &error));
  g_assert_no_error (error);
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, dc_model_repo_get_weight_bytes (repo));
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
test_local_folder (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autofree char *dir = g_build_filename (hub->root, "llama", NULL);
  g_autofree char *sharded = g_build_filename (hub->root, "sharded", NULL);
  g_autofree char *summary = NULL;
  guint requests;

  hub_reset (NULL, NULL);
  repo = dc_model_repo_open (client, dir, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (dc_model_repo_is_local (repo));
  g_assert_null (dc_model_repo_get_cache_dir (repo));
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  summary = dc_model_repo_dup_summary (repo);
  g_assert_nonnull (strstr (summary, ", on disk "));
  g_assert_finalize_object (g_steal_pointer (&repo));

  repo = dc_model_repo_open (client, sharded, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (dc_model_repo_get_dtype (repo), ==, "BF16");
  g_assert_finalize_object (g_steal_pointer (&repo));
  hub_reset (NULL, &requests);
  g_assert_cmpuint (requests, ==, 0);
}

typedef struct
{
  DcModelRepo *repo;
  guint        index;
  gboolean     ok;
} ReaderData;

/* All readers start together, so that they meet in the cache's first use. */
static GMutex start_lock;
static GCond start_cond;
static guint start_waiting;

static gpointer
reader_thread (gpointer data)
{
  ReaderData *reader = data;
  g_autoptr(GError) error = NULL;

  g_mutex_lock (&start_lock);
  if (++start_waiting == G_N_ELEMENTS (llama_tensors))
    g_cond_broadcast (&start_cond);
  while (start_waiting < G_N_ELEMENTS (llama_tensors))
    g_cond_wait (&start_cond, &start_lock);
  g_mutex_unlock (&start_lock);

  reader->ok = read_all (reader->repo, "llama", NULL, &llama_tensors[reader->index], 1, NULL,
                         &error);
  if (error != NULL)
    g_printerr ("reader %u: %s\n", reader->index, error->message);
  return NULL;
}

/* DcTensorSource.read on several threads at once, one tensor each: every
 * tensor right, every byte moved once, the journal whole. */
static void
test_parallel_reads (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  ReaderData readers[G_N_ELEMENTS (llama_tensors)];
  GThread *threads[G_N_ELEMENTS (llama_tensors)];
  guint64 bytes, data = data_bytes ("llama", "model.safetensors");

  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (llama_tensors); i++)
    {
      readers[i] = (ReaderData) { repo, i, FALSE };
      threads[i] = g_thread_new ("test-reader", reader_thread, &readers[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (llama_tensors); i++)
    {
      g_thread_join (threads[i]);
      g_assert_true (readers[i].ok);
    }
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, data);
  g_assert_finalize_object (g_steal_pointer (&repo));

  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, 0);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
open_done_cb (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  GAsyncResult **out = user_data;

  *out = g_object_ref (result);
}

static gboolean
is_set (gpointer data)
{
  return *(gpointer *) data != NULL;
}

static void
count_cb (GObject    *object,
          GParamSpec *pspec,
          gpointer    user_data)
{
  (*(guint *) user_data)++;
}

static gboolean
notified (gpointer data)
{
  return *(guint *) data > 0;
}

static void
test_open_async (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  guint notifies = 0;

  dc_model_repo_open_async (client, "ok/llama", NULL, open_done_cb, &result);
  g_assert_true (dc_test_wait_until (is_set, &result, 20000));
  repo = dc_model_repo_open_finish (result, &error);
  g_assert_no_error (error);
  /* $DC_MODEL_CACHE_DIR, set by main (), chose the folder. */
  g_assert_true (g_str_has_prefix (dc_model_repo_get_cache_dir (repo), tmp_root));
  g_signal_connect (repo, "notify::bytes-downloaded", G_CALLBACK (count_cb), &notifies);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, 1, NULL, &error));
  g_assert_no_error (error);
  /* Notified on this (the opener's) context, not on the reading thread. */
  g_assert_cmpuint (notifies, ==, 0);
  g_assert_true (dc_test_wait_until (notified, &notifies, 20000));
  g_clear_object (&result);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
test_cache_limit_evicts (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autofree char *llama_dir = NULL;
  g_autofree char *sharded_dir = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  const TensorSpec tensors[] = { { "model.embed_tokens.weight", "BF16", 5000 } };
  const char *files[] = { "model-00001-of-00002.safetensors" };
  guint64 llama = data_bytes ("llama", "model.safetensors");
  guint64 sharded = data_bytes ("sharded", "model-00001-of-00002.safetensors")
                    + data_bytes ("sharded", "model-00002-of-00002.safetensors");
  /* Room for either model, not both. */
  guint64 limit = MAX (llama, sharded) + 4096;
  guint64 bytes;

  g_assert_cmpuint (limit, <, llama + sharded);
  repo = open_repo (client, "ok/llama", cache, limit, &error);
  g_assert_no_error (error);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  llama_dir = g_strdup (dc_model_repo_get_cache_dir (repo));
  g_assert_finalize_object (g_steal_pointer (&repo));

  /* Under a limit both fit, nothing is removed. */
  repo = open_repo (client, "ok/sharded", cache, 10 * (llama + sharded) + 65536, &error);
  g_assert_no_error (error);
  g_assert_true (read_all (repo, "sharded", files, tensors, 1, NULL, &error));
  sharded_dir = g_strdup (dc_model_repo_get_cache_dir (repo));
  g_assert_finalize_object (g_steal_pointer (&repo));
  g_assert_true (g_file_test (llama_dir, G_FILE_TEST_IS_DIR));

  /* Under the small one, the sharded model's first write removes llama's. */
  repo = open_repo (client, "ok/sharded", cache, limit, &error);
  g_assert_no_error (error);
  g_test_expect_message ("dc-infer", G_LOG_LEVEL_MESSAGE, "removed the cached weights in *");
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "sharded", files, tensors, 1, NULL, &error));
  g_test_assert_expected_messages ();
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, 0);
  g_assert_false (g_file_test (llama_dir, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (sharded_dir, G_FILE_TEST_IS_DIR));
  g_assert_finalize_object (g_steal_pointer (&repo));

  /* So llama moves again, and the sharded model makes room in turn. */
  repo = open_repo (client, "ok/llama", cache, limit, &error);
  g_assert_no_error (error);
  g_test_expect_message ("dc-infer", G_LOG_LEVEL_MESSAGE, "removed the cached weights in *");
  hub_reset (NULL, NULL);
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_test_assert_expected_messages ();
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, llama);
  g_assert_false (g_file_test (sharded_dir, G_FILE_TEST_EXISTS));
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
copy_fixture_file (const char *dir,
                   const char *name)
{
  g_autofree char *src = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny",
                                                  name, NULL);
  g_autofree char *contents = NULL;
  gsize len;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (src, &contents, &len, &error);
  g_assert_no_error (error);
  write_file (dir, name, contents, (gssize) len);
}

/* The real llama-tiny checkpoint (written by transformers) with the default
 * piece size: its header as the library writes it, every tensor once. */
static void
test_llama_tiny_fixture (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autofree char *dir = g_build_filename (hub->root, "llama-tiny", NULL);
  g_autofree char *path = g_build_filename (dir, "model.safetensors", NULL);
  DcModelRepoOptions options = { cache, 0, 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(DcSafetensors) st = NULL;
  g_autoptr(GBytes) file = NULL;
  g_autofree char *summary = NULL;
  guint64 bytes, expected;
  guint requests;

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  copy_fixture_file (dir, "config.json");
  copy_fixture_file (dir, "tokenizer.json");
  copy_fixture_file (dir, "tokenizer_config.json");
  copy_fixture_file (dir, "model.safetensors");
  st = dc_safetensors_new_from_file (path, &error);
  g_assert_no_error (error);
  file = load_model_file ("llama-tiny", "model.safetensors");

  hub_reset (NULL, NULL);
  repo = dc_model_repo_open_full (client, "ok/llama-tiny", &options, NULL, &error);
  g_assert_no_error (error);
  hub_reset (&bytes, &requests);
  expected = model_file_size ("llama-tiny", "config.json")
             + model_file_size ("llama-tiny", "tokenizer.json")
             + model_file_size ("llama-tiny", "tokenizer_config.json") + st->data_start;
  g_assert_cmpuint (bytes, ==, expected);
  g_assert_cmpuint (requests, ==, 5);
  g_assert_cmpuint (dc_model_repo_get_weight_bytes (repo), ==, st->data_size);
  /* The config's parameter count is the checkpoint's (F32: 4 bytes each). */
  g_assert_cmpuint (dc_hf_config_n_params (dc_model_repo_get_config (repo)), ==,
                    st->data_size / 4);
  summary = dc_model_repo_dup_summary (repo);
  g_test_message ("summary: %s", summary);
  {
    g_autofree char *size = g_format_size (st->data_size);
    g_autofree char *want = g_strdup_printf ("LlamaForCausalLM, 6 layers, 1.4 M parameters, "
                                             "byte-level BPE tokenizer (1024 tokens), F32, "
                                             "download %s, memory ", size);

    g_assert_true (g_str_has_prefix (summary, want));
  }

  for (guint i = 0; i < st->tensors->len; i++)
    {
      const DcSafetensorsTensor *want = st->tensors->pdata[i];
      const DcSafetensorsTensor *t = dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo),
                                                              want->name);
      g_autofree guint8 *dst = NULL;

      g_assert_nonnull (t);
      g_assert_cmpuint (t->end - t->begin, ==, want->end - want->begin);
      dst = g_malloc (t->end - t->begin + 1);
      g_assert_true (dc_tensor_source_read (DC_TENSOR_SOURCE (repo), t, dst, NULL, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (dst, t->end - t->begin,
                       (const guint8 *) g_bytes_get_data (file, NULL) + st->data_start + t->begin,
                       t->end - t->begin);
    }
  hub_reset (&bytes, &requests);
  g_assert_cmpuint (bytes, ==, st->data_size);
  g_assert_cmpuint (requests, ==, st->tensors->len);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

/* A cache that cannot be written does not stop the model: a root that is a
 * regular file (no folder can be made in it, whoever runs the test). */
static void
test_unusable_cache (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  guint64 bytes, data = data_bytes ("llama", "model.safetensors");

  g_file_set_contents (cache, "not a folder", -1, &error);
  g_assert_no_error (error);
  repo = open_repo (client, "ok/llama", cache, 0, &error);
  g_assert_no_error (error);
  hub_reset (NULL, NULL);
  g_test_expect_message ("dc-infer", G_LOG_LEVEL_MESSAGE,
                         "the model cache in * is not usable (could not create the model cache "
                         "folder *); weights are downloaded without caching");
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  g_assert_no_error (error);
  g_test_assert_expected_messages ();
  /* Said once; every read then moves the bytes again. */
  g_assert_true (read_all (repo, "llama", NULL, llama_tensors, G_N_ELEMENTS (llama_tensors),
                           NULL, &error));
  hub_reset (&bytes, NULL);
  g_assert_cmpuint (bytes, ==, 2 * data);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

static void
copy_tree_files (const char *from,
                 const char *to)
{
  g_autoptr(GDir) dir = g_dir_open (from, 0, NULL);
  const char *name;

  g_assert_nonnull (dir);
  g_assert_cmpint (g_mkdir_with_parents (to, 0700), ==, 0);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *src = g_build_filename (from, name, NULL);
      g_autofree char *contents = NULL;
      gsize len;
      g_autoptr(GError) error = NULL;

      if (!g_file_test (src, G_FILE_TEST_IS_REGULAR))
        continue;
      g_file_get_contents (src, &contents, &len, &error);
      g_assert_no_error (error);
      write_file (to, name, contents, (gssize) len);
    }
}

/* Every model fixture of tests/data/hf/models/ that has weights (the
 * transformers-written ones: single files and a sharded checkpoint, F32, F16
 * and BF16), served in the Hub layout with the default pieces: opening moves
 * the small files, the index and the headers only; every tensor of every
 * shard then reads back equal to the file, the data moving exactly once; the
 * same folder opened locally gives the same summary's figures. */
static void
test_all_model_fixtures (void)
{
  g_autofree char *models = dc_test_dup_source_path ("tests", "data", "hf", "models", NULL);
  g_autoptr(GDir) dir = g_dir_open (models, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(DcHfClient) client = new_client ();
  guint tried = 0;
  const char *name;

  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);

  for (guint m = 0; m < names->len; m++)
    {
      const char *model = names->pdata[m];
      g_autofree char *src = g_build_filename (models, model, NULL);
      g_autofree char *fixture = g_strconcat ("fixture-", model, NULL);
      g_autofree char *copy = g_build_filename (hub->root, fixture, NULL);
      g_autofree char *single = g_build_filename (src, "model.safetensors", NULL);
      g_autofree char *index_path = g_build_filename (src, "model.safetensors.index.json", NULL);
      g_autofree char *spec = g_strconcat ("ok/", fixture, NULL);
      g_autofree char *cache = new_cache_dir ();
      g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GError) error = NULL;
      g_autoptr(DcModelRepo) repo = NULL;
      g_autoptr(DcModelRepo) local = NULL;
      g_autofree char *summary = NULL;
      DcModelRepoOptions options = { cache, 0, 0 };
      guint64 bytes, expected = 0, data = 0;
      const char *small[] = { "config.json", "tokenizer.json", "tokenizer_config.json",
                              "model.safetensors.index.json" };

      if (g_file_test (single, G_FILE_TEST_EXISTS))
        g_ptr_array_add (files, g_strdup ("model.safetensors"));
      else if (g_file_test (index_path, G_FILE_TEST_EXISTS))
        {
          g_autoptr(GDir) shards = g_dir_open (src, 0, NULL);
          const char *shard;

          while ((shard = g_dir_read_name (shards)) != NULL)
            if (g_str_has_suffix (shard, ".safetensors"))
              g_ptr_array_add (files, g_strdup (shard));
        }
      if (files->len == 0)
        {
          g_test_message ("%s: no weights in the repository, not tried", model);
          continue;
        }
      copy_tree_files (src, copy);

      for (guint i = 0; i < G_N_ELEMENTS (small); i++)
        {
          g_autofree char *path = g_build_filename (src, small[i], NULL);

          if (g_file_test (path, G_FILE_TEST_EXISTS))
            expected += model_file_size (fixture, small[i]);
        }
      for (guint i = 0; i < files->len; i++)
        {
          g_autoptr(GBytes) file = load_model_file (fixture, files->pdata[i]);

          expected += header_end (file);
          data += g_bytes_get_size (file) - header_end (file);
        }

      hub_reset (NULL, NULL);
      repo = dc_model_repo_open_full (client, spec, &options, NULL, &error);
      g_assert_no_error (error);
      hub_reset (&bytes, NULL);
      g_assert_cmpuint (bytes, ==, expected);
      g_assert_cmpuint (dc_model_repo_get_weight_bytes (repo), ==, data);
      summary = dc_model_repo_dup_summary (repo);
      g_test_message ("%s: %s", model, summary);

      for (guint i = 0; i < files->len; i++)
        {
          g_autofree char *path = g_build_filename (copy, files->pdata[i], NULL);
          g_autoptr(DcSafetensors) st = dc_safetensors_new_from_file (path, &error);
          g_autoptr(GBytes) file = load_model_file (fixture, files->pdata[i]);

          g_assert_no_error (error);
          for (guint k = 0; k < st->tensors->len; k++)
            {
              const DcSafetensorsTensor *want = st->tensors->pdata[k];
              const DcSafetensorsTensor *t = dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo),
                                                                      want->name);
              g_autofree guint8 *dst = NULL;

              g_assert_nonnull (t);
              dst = g_malloc (t->end - t->begin + 1);
              g_assert_true (dc_tensor_source_read (DC_TENSOR_SOURCE (repo), t, dst, NULL,
                                                    &error));
              g_assert_no_error (error);
              g_assert_cmpmem (dst, t->end - t->begin,
                               (const guint8 *) g_bytes_get_data (file, NULL) + st->data_start
                               + t->begin, t->end - t->begin);
            }
        }
      hub_reset (&bytes, NULL);
      g_assert_cmpuint (bytes, ==, data);

      local = dc_model_repo_open (client, src, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (dc_model_repo_get_weight_bytes (local), ==, data);
      g_assert_cmpstr (dc_model_repo_get_dtype (local), ==, dc_model_repo_get_dtype (repo));
      g_assert_finalize_object (g_steal_pointer (&local));
      g_assert_finalize_object (g_steal_pointer (&repo));
      tried++;
    }
  /* llama-tiny's weights are always in the repository. */
  g_assert_cmpuint (tried, >=, 1);
}

static void
expect_refusal (DcHfClient *client,
                const char *spec,
                guint64     limit,
                GQuark      domain,
                int         code,
                const char *words)
{
  g_autofree char *cache = new_cache_dir ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = open_repo (client, spec, cache, limit, &error);

  g_assert_null (repo);
  g_assert_nonnull (error);
  g_test_message ("%s: %s", spec, error->message);
  g_assert_error (error, domain, code);
  if (words != NULL)
    g_assert_nonnull (strstr (error->message, words));
}

static void
test_refusals (void)
{
  g_autoptr(DcHfClient) client = new_client ();
  g_autoptr(DcHfClient) with_token = new_client ();
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autofree char *cache = new_cache_dir ();
  g_autofree guint8 *dst = NULL;
  const DcSafetensorsTensor *t;

  expect_refusal (client, "ok/bert", 0, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                  "unsupported architecture");
  expect_refusal (client, "ok/sentencepiece", 0, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                  "is not supported");
  expect_refusal (client, "ignore-ranges/llama", 0, DC_DATA_ERROR, DC_DATA_ERROR_RANGE_IGNORED,
                  "ignored the byte range");
  expect_refusal (client, "truncated/llama", 0, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                  "model.safetensors of truncated/llama");
  expect_refusal (client, "ok/lying", 0, DC_MODEL_ERROR, DC_MODEL_ERROR_FORMAT,
                  "holds 8196 bytes but its shape and dtype need 8192");
  expect_refusal (client, "needs-token/llama", 0, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED,
                  "needs a Hugging Face token");
  expect_refusal (client, "forbidden/llama", 0, DC_DATA_ERROR, DC_DATA_ERROR_FORBIDDEN,
                  "forbidden");
  expect_refusal (client, "ok/llama", data_bytes ("llama", "model.safetensors") - 1,
                  DC_DATA_ERROR, DC_DATA_ERROR_TOO_LARGE, "cache's limit");
  expect_refusal (client, "ok/nothing-here", 0, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND, NULL);
  expect_refusal (client, "a/b/c", 0, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                  "neither a model folder nor");
  expect_refusal (client, "ok/..", 0, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, NULL);
  expect_refusal (client, "ok/llama@bad rev", 0, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, NULL);

  /* The token opens the gated repo. */
  dc_hf_client_set_token (with_token, TOKEN);
  repo = open_repo (with_token, "needs-token/llama", cache, 0, &error);
  g_assert_no_error (error);
  g_assert_finalize_object (g_steal_pointer (&repo));

  /* A file cut short after it was opened: its data ranges lie past the end
   * or come with another size, and nothing is cached. */
  repo = open_repo (client, "shrinks/llama", cache, 0, &error);
  g_assert_no_error (error);
  t = dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo), "model.embed_tokens.weight");
  dst = g_malloc (t->end - t->begin);
  g_assert_false (dc_tensor_source_read (DC_TENSOR_SOURCE (repo), t, dst, NULL, &error));
  g_test_message ("shrinks/llama, first tensor: %s", error->message);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CHANGED);
  g_clear_error (&error);
  g_clear_pointer (&dst, g_free);
  t = dc_tensor_source_lookup (DC_TENSOR_SOURCE (repo), "lm_head.weight");
  dst = g_malloc (t->end - t->begin);
  g_assert_false (dc_tensor_source_read (DC_TENSOR_SOURCE (repo), t, dst, NULL, &error));
  g_test_message ("shrinks/llama, last tensor: %s", error->message);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_finalize_object (g_steal_pointer (&repo));
}

int
main (int    argc,
      char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  tmp_root = g_dir_make_tmp ("dc-test-model-repo-XXXXXX", NULL);
  g_assert_nonnull (tmp_root);
  /* Before any thread exists (setenv is not thread-safe); a test that opens
   * without options must never touch the user's own cache. */
  {
    g_autofree char *cache = g_build_filename (tmp_root, "env-cache", NULL);

    g_setenv ("DC_MODEL_CACHE_DIR", cache, TRUE);
  }
  hub_start ();
  make_models ();

  g_test_add_func ("/dc/infer/repo/open-headers-only", test_open_headers_only);
  g_test_add_func ("/dc/infer/repo/read-once-then-cached", test_read_once_then_cached);
  g_test_add_func ("/dc/infer/repo/resume-after-cancel", test_resume_after_cancel);
  g_test_add_func ("/dc/infer/repo/damaged-cache", test_damaged_cache);
  g_test_add_func ("/dc/infer/repo/sharded", test_sharded);
  g_test_add_func ("/dc/infer/repo/local-folder", test_local_folder);
  g_test_add_func ("/dc/infer/repo/parallel-reads", test_parallel_reads);
  g_test_add_func ("/dc/infer/repo/open-async", test_open_async);
  g_test_add_func ("/dc/infer/repo/cache-limit-evicts", test_cache_limit_evicts);
  g_test_add_func ("/dc/infer/repo/llama-tiny-fixture", test_llama_tiny_fixture);
  g_test_add_func ("/dc/infer/repo/all-model-fixtures", test_all_model_fixtures);
  g_test_add_func ("/dc/infer/repo/unusable-cache", test_unusable_cache);
  g_test_add_func ("/dc/infer/repo/refusals", test_refusals);
  status = g_test_run ();

  hub_stop ();
  dc_test_remove_tree (tmp_root);
  g_free (tmp_root);
  return status;
}
