/* test-data-http.c: the Hub client against a real libsoup server.
 *
 * The server runs on 127.0.0.1 (ephemeral port) in its own thread with its
 * own GMainContext (a blocking client in the server's thread would
 * deadlock). It lays files out as the Hub does and lets libsoup apply real
 * range semantics. A second server on 127.0.0.2, another host as far as
 * HTTP is concerned, plays the CDN that the Hub redirects to; a raw socket
 * service drops connections mid-body. Repositories under "test/" choose a
 * behaviour:
 *   fixtures       serves tests/data/parquet
 *   ignore-ranges  answers 200 with the whole file whatever the Range
 *   needs-token    401 unless "Authorization: Bearer hf_test_secret" (its
 *                  listing too; with the token, the fixtures)
 *   redirect       302 to the same file on 127.0.0.2
 *   truncated      serves the first half of each file
 *   flaky          503 on every other request
 *   linked-etag    302 to the CDN with the file's sha256 in X-Linked-Etag
 *   bad-etag       the same with another sha256
 * and two listings misbehave: test/empty-page (an empty page linking to
 * itself) and test/endless-pages (one entry a page, linked forever). Both
 * answer 404 once the client has clearly looped, so that a client without
 * the page rules fails its test instead of hanging.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>
#include <unistd.h>

#include "data/dc-corpus.h"
#include "data/dc-data-error.h"
#include "data/dc-dataset.h"
#include "data/dc-hf-client.h"
#include "data/dc-hf-url.h"
#include "data/dc-parquet-file.h"
#include "train/dc-train-data.h"
#include "dc-test-utils.h"

#define TOKEN "hf_test_secret"
#define TIMEOUT_MS 20000
/* The sha256 of no bytes: a valid digest that matches none of the files. */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct
{
  GThread        *thread;
  GMainContext   *context;
  GMainLoop      *loop;
  SoupServer     *hub;
  SoupServer     *cdn;
  GSocketService *dropper;
  char           *hub_url;
  char           *cdn_url;
  char           *drop_url;
  char           *data_dir;

  GMutex          lock;
  GCond           cond;
  gboolean        ready;
  /* counters, under lock */
  guint64         body_bytes;      /* response body bytes the servers send */
  guint           hub_requests;
  guint           cdn_requests;
  guint           drop_connections;
  guint           flaky_count;
  gboolean        hub_saw_token;
  gboolean        cdn_saw_auth;
  gboolean        cdn_saw_range;
} Hub;

static Hub *hub;

static GBytes *
load_file (const char *name)
{
  g_autofree char *base = g_path_get_basename (name);
  g_autofree char *path = g_build_filename (hub->data_dir, base, NULL);
  char *contents;
  gsize len;

  if (!g_file_get_contents (path, &contents, &len, NULL))
    return NULL;
  return g_bytes_new_take (contents, len);
}

static void
serve_bytes (SoupServerMessage *msg,
             GBytes            *bytes)
{
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  goffset size = (goffset) g_bytes_get_size (bytes);
  SoupRange *ranges = NULL;
  int n_ranges = 0;
  guint64 sending = (guint64) size;

  /* libsoup 3.2's server mishandles a suffix range longer than the body
   * (a GLib critical, then no answer); RFC 9110 says to send the whole body
   * as 206, which is what the Hub does: rewrite the request to that. */
  {
    const char *value = soup_message_headers_get_one (request, "Range");

    if (value != NULL && g_str_has_prefix (value, "bytes=-")
        && g_ascii_strtoull (value + 7, NULL, 10) >= (guint64) size && size > 0)
      {
        g_autofree char *whole = g_strdup_printf ("bytes=0-%" G_GINT64_FORMAT, (gint64) size - 1);

        soup_message_headers_replace (request, "Range", whole);
      }
  }

  /* Count what SoupServer will send, from the same Range header it applies
   * (counting in wrote-body-data would race with the client's return). */
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
  soup_message_headers_set_content_type (soup_server_message_get_response_headers (msg),
                                         "application/octet-stream", NULL);
  soup_message_body_append_bytes (soup_server_message_get_response_body (msg), bytes);
  soup_server_message_set_status (msg, 200, NULL);
}

static void
serve_tree (SoupServerMessage *msg,
            const char        *path,
            GHashTable        *query)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;
  const char *names[] = { "fineweb-like-snappy.parquet", "fineweb-like-zstd.parquet" };

  json_builder_begin_array (builder);
  if (path == NULL || *path == '\0')
    {
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "type");
      json_builder_add_string_value (builder, "directory");
      json_builder_set_member_name (builder, "path");
      json_builder_add_string_value (builder, "data");
      json_builder_end_object (builder);
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "type");
      json_builder_add_string_value (builder, "file");
      json_builder_set_member_name (builder, "path");
      json_builder_add_string_value (builder, "README.md");
      json_builder_set_member_name (builder, "size");
      json_builder_add_int_value (builder, 10);
      json_builder_end_object (builder);
    }
  else if (g_str_equal (path, "data"))
    {
      /* Like the Hub, page the listing: one file per page, linked by
       * `Link: <…?cursor=N>; rel="next"`. */
      const char *cursor = query != NULL ? g_hash_table_lookup (query, "cursor") : NULL;
      guint from = cursor != NULL ? (guint) g_ascii_strtoull (cursor, NULL, 10) : 0;

      if (from + 1 < G_N_ELEMENTS (names))
        {
          g_autofree char *link = g_strdup_printf ("<%s?cursor=%u>; rel=\"next\"",
                                                   g_uri_get_path (soup_server_message_get_uri (msg)), from + 1);

          soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                        "Link", link);
        }
      for (guint i = from; i < from + 1 && i < G_N_ELEMENTS (names); i++)
        {
          g_autoptr(GBytes) bytes = load_file (names[i]);
          g_autofree char *file = g_strconcat ("data/", names[i], NULL);

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "type");
          json_builder_add_string_value (builder, "file");
          json_builder_set_member_name (builder, "path");
          json_builder_add_string_value (builder, file);
          json_builder_set_member_name (builder, "size");
          json_builder_add_int_value (builder, (gint64) g_bytes_get_size (bytes));
          json_builder_end_object (builder);
        }
    }
  else
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  json_builder_end_array (builder);
  root = json_builder_get_root (builder);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, text,
                                    strlen (text));
  soup_server_message_set_status (msg, 200, NULL);
}

static void
serve_bad_tree (SoupServerMessage *msg,
                const char        *repo,
                GHashTable        *query)
{
  const char *cursor = query != NULL ? g_hash_table_lookup (query, "cursor") : NULL;
  guint from = cursor != NULL ? (guint) g_ascii_strtoull (cursor, NULL, 10) : 0;
  const char *path = g_uri_get_path (soup_server_message_get_uri (msg));
  g_autofree char *link = NULL;
  g_autofree char *text = NULL;
  guint requests;

  g_mutex_lock (&hub->lock);
  requests = hub->hub_requests;
  g_mutex_unlock (&hub->lock);
  if (requests > DC_HF_MAX_LIST_PAGES + 5)
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  if (g_str_equal (repo, "empty-page"))
    {
      if (requests > 5)
        {
          soup_server_message_set_status (msg, 404, NULL);
          return;
        }
      link = g_strdup_printf ("<%s>; rel=\"next\"", path);
      text = g_strdup ("[]");
    }
  else
    {
      link = g_strdup_printf ("<%s?cursor=%u>; rel=\"next\"", path, from + 1);
      text = g_strdup_printf ("[{\"type\": \"file\", \"path\": \"notes-%u.txt\", \"size\": 1}]",
                              from);
    }
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Link", link);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, text,
                                    strlen (text));
  soup_server_message_set_status (msg, 200, NULL);
}

static void
hub_handler (SoupServer        *server,
             SoupServerMessage *msg,
             const char        *path,
             GHashTable        *query,
             gpointer           user_data)
{
  gboolean is_cdn = server == hub->cdn;
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  const char *auth = soup_message_headers_get_one (request, "Authorization");
  g_auto(GStrv) parts = g_strsplit (path + 1, "/", 7);
  guint n = g_strv_length (parts);
  const char *mode;
  const char *file;
  g_autoptr(GBytes) bytes = NULL;

  g_mutex_lock (&hub->lock);
  if (is_cdn)
    {
      hub->cdn_requests++;
      hub->cdn_saw_auth |= auth != NULL;
      hub->cdn_saw_range |= soup_message_headers_get_one (request, "Range") != NULL;
    }
  else
    {
      hub->hub_requests++;
      hub->hub_saw_token |= g_strcmp0 (auth, "Bearer " TOKEN) == 0;
    }
  g_mutex_unlock (&hub->lock);

  /* /api/datasets/test/fixtures/tree/main[/path] */
  if (n >= 6 && g_str_equal (parts[0], "api") && g_str_equal (parts[1], "datasets")
      && g_str_equal (parts[2], "test") && g_str_equal (parts[4], "tree"))
    {
      if (g_str_equal (parts[3], "fixtures"))
        serve_tree (msg, n >= 7 ? parts[6] : NULL, query);
      else if (g_str_equal (parts[3], "needs-token") && g_strcmp0 (auth, "Bearer " TOKEN) != 0)
        soup_server_message_set_status (msg, 401, NULL);
      else if (g_str_equal (parts[3], "needs-token"))
        serve_tree (msg, n >= 7 ? parts[6] : NULL, query);
      else if (g_str_equal (parts[3], "empty-page") || g_str_equal (parts[3], "endless-pages"))
        serve_bad_tree (msg, parts[3], query);
      else
        soup_server_message_set_status (msg, 404, NULL);
      return;
    }

  /* /datasets/test/MODE/resolve/main/FILE */
  if (n < 6 || !g_str_equal (parts[0], "datasets") || !g_str_equal (parts[1], "test")
      || !g_str_equal (parts[3], "resolve"))
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  mode = parts[2];
  file = n >= 7 ? parts[6] : parts[5];
  bytes = load_file (file);
  if (bytes == NULL)
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }

  if (g_str_equal (mode, "fixtures"))
    {
      serve_bytes (msg, bytes);
    }
  else if (g_str_equal (mode, "ignore-ranges"))
    {
      /* Without the header SoupServer sends the whole body with 200. */
      soup_message_headers_remove (request, "Range");
      serve_bytes (msg, bytes);
    }
  else if (g_str_equal (mode, "needs-token"))
    {
      if (g_strcmp0 (auth, "Bearer " TOKEN) != 0)
        soup_server_message_set_status (msg, 401, NULL);
      else
        serve_bytes (msg, bytes);
    }
  else if (g_str_equal (mode, "redirect") && !is_cdn)
    {
      g_autofree char *location = g_strdup_printf ("%s/datasets/test/fixtures/resolve/main/%s%s%s",
                                                   hub->cdn_url, parts[5], n >= 7 ? "/" : "",
                                                   n >= 7 ? parts[6] : "");

      soup_server_message_set_redirect (msg, 302, location);
    }
  else if ((g_str_equal (mode, "linked-etag") || g_str_equal (mode, "bad-etag")) && !is_cdn)
    {
      /* The Hub answers a resolve request for an LFS file with a redirect
       * to its CDN that names the file's sha256. */
      g_autofree char *location = g_strdup_printf ("%s/datasets/test/fixtures/resolve/main/%s/%s",
                                                   hub->cdn_url, parts[5], parts[6]);
      g_autofree char *sha256 = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);
      g_autofree char *etag = g_strdup_printf ("\"%s\"", g_str_equal (mode, "bad-etag")
                                               ? EMPTY_SHA256 : sha256);

      soup_server_message_set_redirect (msg, 302, location);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                    "X-Linked-Etag", etag);
    }
  else if (g_str_equal (mode, "truncated"))
    {
      g_autoptr(GBytes) half = g_bytes_new_from_bytes (bytes, 0, g_bytes_get_size (bytes) / 2);

      serve_bytes (msg, half);
    }
  else if (g_str_equal (mode, "flaky"))
    {
      guint count;

      g_mutex_lock (&hub->lock);
      count = hub->flaky_count++;
      g_mutex_unlock (&hub->lock);
      if (count % 2 == 0)
        soup_server_message_set_status (msg, 503, NULL);
      else
        serve_bytes (msg, bytes);
    }
  else
    {
      soup_server_message_set_status (msg, 404, NULL);
    }
}

/* Answers any request with the start of a 64 KiB partial body, then hangs up. */
static gboolean
dropper_incoming_cb (GSocketService    *service,
                     GSocketConnection *connection,
                     GObject           *source_object,
                     gpointer           user_data)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  const char *head = "HTTP/1.1 206 Partial Content\r\n"
                     "Content-Range: bytes 0-65535/1000000\r\n"
                     "Content-Length: 65536\r\n"
                     "Accept-Ranges: bytes\r\n\r\n";
  char request[4096];
  gsize got = 0;
  g_autofree char *partial = g_malloc0 (1000);

  g_mutex_lock (&hub->lock);
  hub->drop_connections++;
  g_mutex_unlock (&hub->lock);

  /* Read the request head (small, arrives at once on loopback). */
  while (got < sizeof request - 1)
    {
      gssize n = g_input_stream_read (in, request + got, sizeof request - 1 - got, NULL, NULL);

      if (n <= 0)
        break;
      got += (gsize) n;
      request[got] = '\0';
      if (strstr (request, "\r\n\r\n") != NULL)
        break;
    }
  g_output_stream_write_all (out, head, strlen (head), NULL, NULL, NULL);
  g_output_stream_write_all (out, partial, 1000, NULL, NULL, NULL);
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
  return TRUE;
}

static char *
listen_on (SoupServer *server,
           const char *address)
{
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string (address);
  g_autoptr(GSocketAddress) sockaddr = g_inet_socket_address_new (inet, 0);
  g_autoptr(GError) error = NULL;
  GSList *uris;
  char *url;

  soup_server_listen (server, sockaddr, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (server);
  g_assert_nonnull (uris);
  url = g_uri_to_string (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  if (g_str_has_suffix (url, "/"))
    url[strlen (url) - 1] = '\0';
  return url;
}

static gpointer
hub_thread (gpointer data)
{
  g_autoptr(GError) error = NULL;
  guint16 port;

  g_main_context_push_thread_default (hub->context);

  hub->hub = soup_server_new (NULL, NULL);
  soup_server_add_handler (hub->hub, "/", hub_handler, NULL, NULL);
  hub->hub_url = listen_on (hub->hub, "127.0.0.1");
  hub->cdn = soup_server_new (NULL, NULL);
  soup_server_add_handler (hub->cdn, "/", hub_handler, NULL, NULL);
  hub->cdn_url = listen_on (hub->cdn, "127.0.0.2");

  hub->dropper = g_socket_service_new ();
  port = g_socket_listener_add_any_inet_port (G_SOCKET_LISTENER (hub->dropper), NULL, &error);
  g_assert_no_error (error);
  g_signal_connect (hub->dropper, "incoming", G_CALLBACK (dropper_incoming_cb), NULL);
  g_socket_service_start (hub->dropper);
  hub->drop_url = g_strdup_printf ("http://127.0.0.1:%u", port);

  g_mutex_lock (&hub->lock);
  hub->ready = TRUE;
  g_cond_signal (&hub->cond);
  g_mutex_unlock (&hub->lock);

  g_main_loop_run (hub->loop);

  g_socket_service_stop (hub->dropper);
  g_socket_listener_close (G_SOCKET_LISTENER (hub->dropper));
  g_clear_object (&hub->dropper);
  soup_server_disconnect (hub->hub);
  soup_server_disconnect (hub->cdn);
  g_clear_object (&hub->hub);
  g_clear_object (&hub->cdn);
  g_main_context_pop_thread_default (hub->context);
  return NULL;
}

static void
hub_start (void)
{
  hub = g_new0 (Hub, 1);
  g_mutex_init (&hub->lock);
  g_cond_init (&hub->cond);
  hub->data_dir = dc_test_dup_source_path ("tests", "data", "parquet", NULL);
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
  g_main_context_invoke (hub->context, quit_cb, NULL);
  g_thread_join (hub->thread);
  g_main_loop_unref (hub->loop);
  g_main_context_unref (hub->context);
  g_free (hub->hub_url);
  g_free (hub->cdn_url);
  g_free (hub->drop_url);
  g_free (hub->data_dir);
  g_mutex_clear (&hub->lock);
  g_cond_clear (&hub->cond);
  g_clear_pointer (&hub, g_free);
}

static void
hub_reset_counters (void)
{
  g_mutex_lock (&hub->lock);
  hub->body_bytes = 0;
  hub->hub_requests = 0;
  hub->cdn_requests = 0;
  hub->drop_connections = 0;
  hub->hub_saw_token = FALSE;
  hub->cdn_saw_auth = FALSE;
  hub->cdn_saw_range = FALSE;
  g_mutex_unlock (&hub->lock);
}

static DcHfClient *
new_client (const char *base)
{
  DcHfClient *client = dc_hf_client_new (base);

  /* Fast retries keep failure tests short; the policy is the same. */
  dc_hf_client_set_retries (client, 3, 10);
  dc_hf_client_set_timeout (client, 10);
  return client;
}

static char *
file_url (const char *base,
          const char *mode,
          const char *name)
{
  g_autofree char *repo = g_strconcat ("test/", mode, NULL);
  g_autofree char *path = g_strconcat ("data/", name, NULL);

  return dc_hf_url_dataset_file (base, repo, NULL, path);
}

typedef struct
{
  gint64  rows;
  guint64 bytes;
  char   *first;
  char   *last;
} Summary;

static void
summarize_cb (const char *data,
              gsize       len,
              gpointer    user_data)
{
  Summary *summary = user_data;

  summary->rows++;
  if (data == NULL)
    return;
  summary->bytes += len;
  if (summary->first == NULL)
    summary->first = g_strndup (data, len);
  g_free (summary->last);
  summary->last = g_strndup (data, len);
}

static void
summary_clear (Summary *summary)
{
  g_clear_pointer (&summary->first, g_free);
  g_clear_pointer (&summary->last, g_free);
}

static gboolean
read_text (DcHfClient    *client,
           const char    *url,
           const guint   *groups,
           guint          n_groups,
           Summary       *summary,
           guint64       *file_size,
           GError       **error)
{
  g_autoptr(DcByteSource) source = dc_hf_client_open_source (client, url);
  g_autoptr(DcParquetFile) file = dc_parquet_file_open (source, NULL, error);
  int column;

  if (file == NULL)
    return FALSE;
  if (file_size != NULL)
    *file_size = dc_parquet_file_get_size (file);
  column = dc_parquet_file_find_text_column (file, "text", error);
  if (column < 0)
    return FALSE;
  return dc_parquet_file_read_column (file, column, groups, n_groups, summarize_cb, summary, NULL,
                                      error);
}

static void
test_url_layout (void)
{
  g_autofree char *model = dc_hf_url_model_file ("https://hub.example", "org/m", NULL,
                                                 "sub dir/model.safetensors");
  g_autofree char *dataset = dc_hf_url_dataset_file ("https://hub.example/", "org/d",
                                                     "refs/convert/parquet", "a/b.parquet");
  g_autofree char *info = dc_hf_url_model_info ("https://hub.example", "org/m");
  g_autofree char *tree = dc_hf_url_dataset_tree ("https://hub.example", "org/d", NULL,
                                                  "sample/10BT");
  g_autofree char *described = dc_hf_url_describe (dataset);
  g_autofree char *base = NULL;

  g_assert_cmpstr (model, ==, "https://hub.example/org/m/resolve/main/sub%20dir/model.safetensors");
  g_assert_cmpstr (dataset, ==,
                   "https://hub.example/datasets/org/d/resolve/refs%2Fconvert%2Fparquet/a/b.parquet");
  g_assert_cmpstr (info, ==, "https://hub.example/api/models/org/m");
  g_assert_cmpstr (tree, ==, "https://hub.example/api/datasets/org/d/tree/main/sample/10BT");
  g_assert_cmpstr (described, ==, "file “a/b.parquet” of dataset “org/d”");

  g_setenv ("HF_ENDPOINT", "http://mirror.example:8080/", TRUE);
  base = dc_hf_url_dup_default_base ();
  g_assert_cmpstr (base, ==, "http://mirror.example:8080");
  g_unsetenv ("HF_ENDPOINT");
  g_free (base);
  base = dc_hf_url_dup_default_base ();
  g_assert_cmpstr (base, ==, "https://huggingface.co");
}

static void
check_fixture (gconstpointer data)
{
  const char *name = data;
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", name);
  g_autofree char *expect_path = dc_test_dup_source_path ("tests", "data", "parquet",
                                                          "expect.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  JsonObject *expect;
  Summary summary = { 0 };

  json_parser_load_from_file (parser, expect_path, &error);
  g_assert_no_error (error);
  expect = json_node_get_object (json_parser_get_root (parser));

  read_text (client, url, NULL, 0, &summary, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (summary.rows, ==, json_object_get_int_member (expect, "rows"));
  g_assert_cmpuint (summary.bytes, ==, json_object_get_int_member (expect, "text_bytes"));
  g_assert_cmpstr (summary.first, ==, json_object_get_string_member (expect, "first_text"));
  g_assert_cmpstr (summary.last, ==, json_object_get_string_member (expect, "last_text"));
  summary_clear (&summary);
  g_assert_finalize_object (g_steal_pointer (&client));
}

static void
test_small_file (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "arrow-v2-gzip-plain.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };
  guint64 size = 0;

  /* Smaller than the first tail read: the suffix range returns the whole
   * file as a 206 and nothing more is fetched but the chunks. */
  read_text (client, url, NULL, 0, &summary, &size, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (size, <, DC_PARQUET_TAIL_GUESS);
  g_assert_cmpint (summary.rows, ==, 3001);
  g_assert_cmpstr (summary.first, ==, "row 0: tundra harbor mosaic harbor naïve violet meadow");
  summary_clear (&summary);
}

static void
test_one_row_group_bytes (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "fineweb-like-snappy.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };
  guint group = 3;
  guint64 size = 0;
  guint64 sent;

  hub_reset_counters ();
  read_text (client, url, &group, 1, &summary, &size, &error);
  g_assert_no_error (error);
  g_assert_cmpint (summary.rows, >, 0);
  g_mutex_lock (&hub->lock);
  sent = hub->body_bytes;
  g_mutex_unlock (&hub->lock);
  g_test_message ("one row group's text column: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                  " bytes sent, %u requests", sent, size, hub->hub_requests);
  /* The footer read, then one text chunk (an eighth of the rows): far below
   * the file. The client's own count agrees with the server's. */
  g_assert_cmpuint (sent, >, 0);
  g_assert_cmpuint (sent, <, size / 4);
  g_assert_cmpuint (dc_hf_client_get_bytes_received (client), ==, sent);
  g_assert_cmpuint (hub->hub_requests, <=, 3);
  summary_clear (&summary);
}

static void
test_coalescing (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "fineweb-like-snappy.parquet");
  g_autoptr(GBytes) whole = load_file ("fineweb-like-snappy.parquet");
  g_autoptr(GError) error = NULL;
  DcByteRange ranges[] = { { 2000000, 100 }, { 4, 100 }, { 50000, 1000 }, { 2000050, 10 } };
  GBytes *out[G_N_ELEMENTS (ranges)];

  hub_reset_counters ();
  g_assert_true (dc_hf_client_fetch_ranges (client, url, ranges, G_N_ELEMENTS (ranges), out,
                                            NULL, &error));
  g_assert_no_error (error);
  /* {4, 50000} are within the gap, {2000000, 2000050} too: two requests. */
  g_assert_cmpuint (hub->hub_requests, ==, 2);
  for (guint i = 0; i < G_N_ELEMENTS (ranges); i++)
    {
      g_autoptr(GBytes) expect = g_bytes_new_from_bytes (whole, ranges[i].offset,
                                                         ranges[i].length);

      g_assert_true (g_bytes_equal (out[i], expect));
      g_bytes_unref (out[i]);
    }
}

static void
test_ignored_range (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "ignore-ranges", "fineweb-like-snappy.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };

  g_assert_false (read_text (client, url, NULL, 0, &summary, NULL, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_RANGE_IGNORED);
  g_assert_nonnull (strstr (error->message, "the server ignored the byte range"));
  /* The whole file was refused, not read. */
  g_assert_cmpuint (dc_hf_client_get_bytes_received (client), ==, 0);
  summary_clear (&summary);
}

typedef struct
{
  guint  calls;
  char  *description;
} TokenAsk;

static char *
token_cb (const char *description,
          gpointer    user_data)
{
  TokenAsk *ask = user_data;

  ask->calls++;
  g_free (ask->description);
  ask->description = g_strdup (description);
  return g_strdup (TOKEN);
}

static void
test_token_after_401 (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "needs-token", "fineweb-like-zstd.parquet");
  g_autoptr(GError) error = NULL;
  TokenAsk ask = { 0 };
  Summary summary = { 0 };

  /* Without a way to get a token: a clear 401 error naming repo and file. */
  g_assert_false (read_text (client, url, NULL, 0, &summary, NULL, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED);
  g_assert_nonnull (strstr (error->message, "fineweb-like-zstd.parquet"));
  g_assert_nonnull (strstr (error->message, "test/needs-token"));
  g_assert_null (strstr (error->message, TOKEN));
  g_clear_error (&error);
  summary_clear (&summary);

  /* With one: asked once, after the first refusal, then accepted. */
  hub_reset_counters ();
  dc_hf_client_set_token_func (client, token_cb, &ask, NULL);
  read_text (client, url, NULL, 0, &summary, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ask.calls, ==, 1);
  g_assert_nonnull (strstr (ask.description, "test/needs-token"));
  g_assert_true (hub->hub_saw_token);
  g_assert_cmpint (summary.rows, ==, 15028);
  summary_clear (&summary);
  g_free (ask.description);
}

static void
test_no_ask_when_public (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "fineweb-like-zstd.parquet");
  g_autoptr(GError) error = NULL;
  TokenAsk ask = { 0 };
  Summary summary = { 0 };

  dc_hf_client_set_token_func (client, token_cb, &ask, NULL);
  read_text (client, url, NULL, 0, &summary, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (ask.calls, ==, 0);
  g_assert_false (dc_hf_client_has_token (client));
  summary_clear (&summary);
}

static void
test_redirect_other_host (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "redirect", "fineweb-like-snappy.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };

  dc_hf_client_set_token (client, TOKEN);
  hub_reset_counters ();
  read_text (client, url, NULL, 0, &summary, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (summary.rows, ==, 15028);
  g_assert_true (hub->hub_saw_token);     /* the token was in use on the hub */
  g_assert_cmpuint (hub->cdn_requests, >, 0);
  g_assert_true (hub->cdn_saw_range);     /* the range followed the redirect */
  g_assert_false (hub->cdn_saw_auth);     /* the token did not */
  summary_clear (&summary);
}

static void
test_dropped_connection (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->drop_url);
  g_autofree char *url = file_url (hub->drop_url, "fixtures", "fineweb-like-snappy.parquet");
  g_autoptr(GError) error = NULL;
  DcByteRange range = { 0, 65536 };
  GBytes *out = NULL;

  hub_reset_counters ();
  g_assert_false (dc_hf_client_fetch_ranges (client, url, &range, 1, &out, NULL, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "after 3 attempts"));
  g_assert_null (out);
  g_assert_cmpuint (hub->drop_connections, ==, 3);
}

static void
test_truncated_file (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "truncated", "fineweb-like-zstd.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };

  g_assert_false (read_text (client, url, NULL, 0, &summary, NULL, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_nonnull (strstr (error->message, "truncated"));
  summary_clear (&summary);
}

static void
test_not_found (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "missing.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };

  g_assert_false (read_text (client, url, NULL, 0, &summary, NULL, &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "file “data/missing.parquet” of dataset “test/fixtures”"));
  summary_clear (&summary);
}

static void
test_retry_after_503 (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "flaky", "fineweb-like-zstd.parquet");
  g_autoptr(GError) error = NULL;
  Summary summary = { 0 };

  g_mutex_lock (&hub->lock);
  hub->flaky_count = 0;
  g_mutex_unlock (&hub->lock);
  hub_reset_counters ();
  read_text (client, url, NULL, 0, &summary, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (summary.rows, ==, 15028);
  /* Every request (footer, then chunks) failed once with 503 first. */
  g_assert_cmpuint (hub->hub_requests, ==, dc_hf_client_get_request_count (client));
  g_assert_cmpuint (hub->hub_requests, >=, 4);
  g_assert_cmpuint (hub->hub_requests % 2, ==, 0);
  summary_clear (&summary);
}

static void
fetch_done_cb (GObject      *source,
               GAsyncResult *result,
               gpointer      user_data)
{
  GPtrArray **out = user_data;
  g_autoptr(GError) error = NULL;

  *out = dc_hf_client_fetch_ranges_finish (DC_HF_CLIENT (source), result, &error);
  g_assert_no_error (error);
}

static gboolean
is_set (gpointer data)
{
  return *(gpointer *) data != NULL;
}

static void
notify_cb (GObject    *object,
           GParamSpec *pspec,
           gpointer    user_data)
{
  (*(guint *) user_data)++;
}

static void
test_async (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "fineweb-like-zstd.parquet");
  DcByteRange ranges[] = { { 0, 4 }, { 1000, 1000 } };
  GPtrArray *out = NULL;
  guint notified = 0;

  g_signal_connect (client, "notify::bytes-received", G_CALLBACK (notify_cb), &notified);
  dc_hf_client_fetch_ranges_async (client, url, ranges, 2, NULL, fetch_done_cb, &out);
  g_assert_true (dc_test_wait_until (is_set, &out, TIMEOUT_MS));
  g_assert_cmpuint (out->len, ==, 2);
  g_assert_cmpmem (g_bytes_get_data (out->pdata[0], NULL), 4, "PAR1", 4);
  g_assert_cmpuint (g_bytes_get_size (out->pdata[1]), ==, 1000);
  g_ptr_array_unref (out);
  /* Progress reaches the main context as a notify. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpuint (notified, >, 0);

  /* The worker thread drops its task (and the task's reference to the
   * client) just after the callback ran: wait for it, bounded. */
  {
    gpointer weak = client;
    gint64 deadline = g_get_monotonic_time () + TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;

    g_object_add_weak_pointer (G_OBJECT (client), &weak);
    g_clear_object (&client);
    /* Finalization happens on the worker thread and wakes no main context:
     * poll, bounded. */
    while (g_atomic_pointer_get (&weak) != NULL && g_get_monotonic_time () < deadline)
      g_usleep (1000);
    g_assert_null (g_atomic_pointer_get (&weak));
  }
}

static void
test_dataset_list (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autoptr(DcDatasetSpec) spec = dc_dataset_spec_parse ("test/fixtures", NULL);
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(GError) error = NULL;
  DcDatasetFile *file;

  files = dc_dataset_list_files (client, spec, NULL, &error);
  g_assert_no_error (error);
  /* The folder "data" is followed over its two pages; README.md is not parquet. */
  g_assert_cmpuint (files->len, ==, 2);
  file = g_ptr_array_index (files, 0);
  g_assert_cmpstr (file->path, ==, "data/fineweb-like-snappy.parquet");
  g_assert_cmpuint (file->size, ==, 2782227);
  file = g_ptr_array_index (files, 1);
  g_assert_cmpstr (file->path, ==, "data/fineweb-like-zstd.parquet");
}

static void
count_text_cb (const char *data,
               gsize       len,
               gpointer    user_data)
{
  GHashTable *counts = user_data;
  GBytes *key = g_bytes_new (data, len);
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (counts, key));

  g_hash_table_replace (counts, key, GUINT_TO_POINTER (n + 1));
}

/* Three devices of one group each read their share for one epoch: together
 * they read every row of the dataset exactly once (as a multiset of texts,
 * against the files read directly), and a device's sequence is the same
 * every time (the seed decides it). */
static void
test_dataset_shares (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autoptr(GHashTable) all = g_hash_table_new_full (g_bytes_hash, g_bytes_equal,
                                                     (GDestroyNotify) g_bytes_unref, NULL);
  g_autoptr(GHashTable) shares = g_hash_table_new_full (g_bytes_hash, g_bytes_equal,
                                                        (GDestroyNotify) g_bytes_unref, NULL);
  const char *names[] = { "fineweb-like-snappy.parquet", "fineweb-like-zstd.parquet" };
  guint64 share_rows[3] = { 0 };
  GHashTableIter iter;
  gpointer key;
  gpointer value;

  for (guint f = 0; f < G_N_ELEMENTS (names); f++)
    {
      g_autofree char *url = file_url (hub->hub_url, "fixtures", names[f]);
      g_autoptr(DcByteSource) source = dc_hf_client_open_source (client, url);
      g_autoptr(GError) error = NULL;
      g_autoptr(DcParquetFile) file = dc_parquet_file_open (source, NULL, &error);

      g_assert_no_error (error);
      dc_parquet_file_read_column (file, 0, NULL, 0, count_text_cb, all, NULL, &error);
      g_assert_no_error (error);
    }

  for (guint rank = 0; rank < 3; rank++)
    {
      g_autoptr(DcTextStream) stream = dc_text_stream_new (client, "test/fixtures", NULL, rank, 3,
                                                           99);

      for (;;)
        {
          g_autoptr(GError) error = NULL;
          g_autoptr(GBytes) text = dc_text_stream_next (stream, NULL, &error);

          g_assert_no_error (error);
          g_assert_false (dc_text_stream_is_builtin (stream));
          if (dc_text_stream_get_epoch (stream) > 0)
            break;
          count_text_cb (g_bytes_get_data (text, NULL), g_bytes_get_size (text), shares);
          share_rows[rank]++;
        }
      g_test_message ("device %u of 3 read %" G_GUINT64_FORMAT " rows", rank, share_rows[rank]);
      g_assert_cmpuint (share_rows[rank], >, 0);
    }
  g_assert_cmpuint (share_rows[0] + share_rows[1] + share_rows[2], ==, 2 * 15028);
  g_assert_cmpuint (g_hash_table_size (shares), ==, g_hash_table_size (all));
  g_hash_table_iter_init (&iter, all);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (shares, key)), ==,
                      GPOINTER_TO_UINT (value));

  /* Determinism: rank 1 twice gives the same first 500 texts. */
  {
    g_autoptr(DcTextStream) x = dc_text_stream_new (client, "test/fixtures", NULL, 1, 3, 99);
    g_autoptr(DcTextStream) y = dc_text_stream_new (client, "test/fixtures", NULL, 1, 3, 99);

    for (guint i = 0; i < 500; i++)
      {
        g_autoptr(GBytes) tx = dc_text_stream_next (x, NULL, NULL);
        g_autoptr(GBytes) ty = dc_text_stream_next (y, NULL, NULL);

        g_assert_nonnull (tx);
        g_assert_true (g_bytes_equal (tx, ty));
      }
  }
}

static void
test_dataset_without_text_column (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autoptr(DcTextStream) stream = dc_text_stream_new (client, "test/fixtures", "content", 0, 1,
                                                       1);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) text = dc_text_stream_next (stream, NULL, &error);

  /* Refused, listing the columns; no silent fallback for a wrong choice. */
  g_assert_null (text);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NO_TEXT_COLUMN);
  g_assert_nonnull (strstr (error->message, "text, id, dump, url, file_path, language"));
  g_assert_false (dc_text_stream_is_builtin (stream));
}

static void
test_offline_fallback (void)
{
  g_autofree char *base = g_strdup_printf ("http://127.0.0.1:%u", dc_test_closed_port ());
  g_autoptr(DcHfClient) client = new_client (base);
  g_autoptr(DcTextStream) stream = dc_text_stream_new (client, NULL, NULL, 0, 1, 7);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) text = NULL;
  guint8 tokens[2 * 65];

  g_test_expect_message ("dc-data", G_LOG_LEVEL_MESSAGE, DC_DATASET_UNREACHABLE_MESSAGE);
  text = dc_text_stream_next (stream, NULL, &error);
  g_test_assert_expected_messages ();
  g_assert_no_error (error);
  g_assert_true (dc_text_stream_is_builtin (stream));
  g_assert_cmpmem (g_bytes_get_data (text, NULL), 9, "Chapter 1", 9);
  /* Training goes on: batches keep coming. */
  g_assert_true (dc_text_stream_fill_batch (stream, 2, 64, tokens, NULL, &error));
  g_assert_no_error (error);
}

/* The trainer's view (model/dc-train-data.c): a dataset id becomes this
 * device's share of the dataset's text, read through the hub; the whole small
 * dataset fits under the size cap, so every row arrives. */
static void
test_train_data_from_dataset (void)
{
  g_autofree char *expect_path = dc_test_dup_source_path ("tests", "data", "parquet",
                                                          "expect.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) text = NULL;
  g_autofree char *copy = NULL;
  gboolean used_fallback = TRUE;
  JsonObject *expect;
  gsize text_bytes;

  json_parser_load_from_file (parser, expect_path, &error);
  g_assert_no_error (error);
  expect = json_node_get_object (json_parser_get_root (parser));
  text_bytes = json_object_get_int_member (expect, "text_bytes");

  g_setenv ("HF_ENDPOINT", hub->hub_url, TRUE);
  text = dc_train_data_load ("test/fixtures", 1, &used_fallback, NULL, &error);
  g_unsetenv ("HF_ENDPOINT");
  g_assert_no_error (error);
  g_assert_false (used_fallback);

  /* Both files' texts (the same rows, two codecs), joined by blank lines. */
  g_assert_cmpuint (g_bytes_get_size (text), >=, 2 * text_bytes);
  g_assert_cmpuint (g_bytes_get_size (text), <, DC_TRAIN_DATA_DATASET_BYTES);
  copy = g_strndup (g_bytes_get_data (text, NULL), g_bytes_get_size (text));
  g_assert_nonnull (strstr (copy, json_object_get_string_member (expect, "first_text")));
  g_assert_nonnull (strstr (copy, json_object_get_string_member (expect, "last_text")));
}

static void
test_train_data_offline (void)
{
  g_autofree char *base = g_strdup_printf ("http://127.0.0.1:%u", dc_test_closed_port ());
  g_autoptr(GBytes) builtin = dc_corpus_dup_builtin ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) text = NULL;
  gboolean used_fallback = FALSE;

  g_setenv ("HF_ENDPOINT", base, TRUE);
  g_test_expect_message ("dc-data", G_LOG_LEVEL_MESSAGE, DC_DATASET_UNREACHABLE_MESSAGE);
  text = dc_train_data_load ("HuggingFaceFW/fineweb-edu/sample/10BT", 1, &used_fallback, NULL,
                             &error);
  g_test_assert_expected_messages ();
  g_unsetenv ("HF_ENDPOINT");
  g_assert_no_error (error);
  g_assert_true (used_fallback);
  g_assert_true (g_bytes_equal (text, builtin));

  /* Neither a file nor a dataset id: refused, naming it. */
  g_clear_pointer (&text, g_bytes_unref);
  text = dc_train_data_load ("/no/such/file.txt", 1, &used_fallback, NULL, &error);
  g_assert_null (text);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "/no/such/file.txt"));
}

/* A dataset refused with 401 is an error a token can answer, not "unreachable":
 * no built-in corpus in its place. The token of the client handed in (the
 * app's, set by its token dialog) reaches the client the loader makes. */
static void
test_train_data_needs_token (void)
{
  g_autoptr(DcHfClient) app_client = new_client (hub->hub_url);
  g_autoptr(DcHfClient) copy = new_client (hub->hub_url);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) text = NULL;
  gboolean used_fallback = TRUE;

  text = dc_train_data_load_with_hub ("test/needs-token", 1, app_client, &used_fallback, NULL,
                                      &error);
  g_assert_null (text);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED);
  g_assert_false (used_fallback);
  g_clear_error (&error);

  dc_hf_client_set_token (app_client, TOKEN);
  text = dc_train_data_load_with_hub ("test/needs-token", 1, app_client, &used_fallback, NULL,
                                      &error);
  g_assert_no_error (error);
  g_assert_false (used_fallback);
  g_assert_cmpuint (g_bytes_get_size (text), >, 0);

  /* Sharing copies the token, and sharing none forgets it. */
  dc_hf_client_share_token (copy, app_client);
  g_assert_true (dc_hf_client_has_token (copy));
  dc_hf_client_set_token (app_client, NULL);
  dc_hf_client_share_token (copy, app_client);
  g_assert_false (dc_hf_client_has_token (copy));
}

/* Runs daisychain-cli with HF_ENDPOINT pointing at the test hub. */
static int
run_cli (const char  *hf_token,
         char       **out,
         char       **err,
         ...)
{
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  va_list args;
  int status = -1;

  g_ptr_array_add (argv, cli);
  va_start (args, err);
  for (const char *arg = va_arg (args, const char *); arg != NULL; arg = va_arg (args, const char *))
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);

  g_setenv ("HF_ENDPOINT", hub->hub_url, TRUE);
  if (hf_token != NULL)
    g_setenv ("HF_TOKEN", hf_token, TRUE);
  else
    g_unsetenv ("HF_TOKEN");
  g_assert_true (dc_test_spawn ((const char * const *) argv->pdata, out, err, &status,
                                TIMEOUT_MS));
  g_unsetenv ("HF_TOKEN");
  g_unsetenv ("HF_ENDPOINT");
  /* Empty output may come back as NULL; the checks below want strings. */
  if (*out == NULL)
    *out = g_strdup ("");
  if (*err == NULL)
    *err = g_strdup ("");
  return status;
}

static JsonObject *
parse_line (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  g_assert_nonnull (text);
  g_assert_true (g_str_has_suffix (text, "\n"));
  /* Exactly one line: the only newline is the last character. */
  g_assert_true (strchr (text, '\n') == text + strlen (text) - 1);
  json_parser_load_from_data (parser, text, -1, &error);
  g_assert_no_error (error);
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

static void
test_cli_read_url (void)
{
  g_autofree char *url = file_url (hub->hub_url, "fixtures", "fineweb-like-zstd.parquet");
  g_autofree char *one = file_url (hub->hub_url, "fixtures", "fineweb-like-snappy.parquet");
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) result = NULL;

  g_assert_cmpint (run_cli (NULL, &out, &err, "data", "read", "--json", url, NULL), ==, 0);
  result = parse_line (out);
  g_assert_cmpint (json_object_get_int_member (result, "rows"), ==, 15028);
  g_assert_cmpint (json_object_get_int_member (result, "bytes"), ==, 2527378);
  g_assert_cmpstr (json_object_get_string_member (result, "first"), ==,
                   "Biggest security gap -- an open mouth.");
  g_assert_cmpstr (json_object_get_string_member (result, "last"), ==,
                   "Your life would be very empty if you had nothing to regret.");
  g_clear_pointer (&result, json_object_unref);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* One row group: its rows only, and a fraction of the file transferred. */
  g_assert_cmpint (run_cli (NULL, &out, &err, "data", "read", "--json", "--row-group", "5", one,
                            NULL), ==, 0);
  result = parse_line (out);
  g_assert_cmpint (json_object_get_int_member (result, "rows"), <, 15028);
  g_assert_cmpint (json_object_get_int_member (result, "transferred"), <,
                   json_object_get_int_member (result, "file_size") / 4);
}

static void
test_cli_token (void)
{
  g_autofree char *url = file_url (hub->hub_url, "needs-token", "fineweb-like-zstd.parquet");
  g_autofree char *token_file = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int fd;

  /* No token anywhere: exit 1 with the documented message. */
  g_assert_cmpint (run_cli (NULL, &out, &err, "data", "read", url, NULL), ==, 1);
  g_assert_nonnull (strstr (err, "needs a Hugging Face token"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* HF_TOKEN: read after the 401, accepted, never printed. */
  g_assert_cmpint (run_cli (TOKEN, &out, &err, "data", "read", url, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "rows: 15028"));
  g_assert_null (strstr (out, TOKEN));
  g_assert_null (strstr (err, TOKEN));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* A wrong token: refused, with the message saying so. */
  g_assert_cmpint (run_cli ("hf_wrong", &out, &err, "data", "read", url, NULL), ==, 1);
  g_assert_nonnull (strstr (err, "token was refused"));
  g_assert_null (strstr (err, "hf_wrong"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* --token-file. */
  fd = g_file_open_tmp ("dc-token-XXXXXX", &token_file, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (token_file, TOKEN "\n", -1, &error));
  close (fd);
  g_assert_cmpint (run_cli (NULL, &out, &err, "data", "read", "--token-file", token_file, url,
                            NULL), ==, 0);
  g_assert_nonnull (strstr (out, "rows: 15028"));
  g_unlink (token_file);
}

/* `train --data` on a gated dataset: without a token it stops with the
 * 401 message (it does not fall back to the built-in corpus); with HF_TOKEN,
 * or --token-file, it trains on the dataset. Before, `train` had no way to
 * pass a token while the 401 message told users to. */
static void
test_cli_train_token (void)
{
  const char *train[] = { "train", "--json", "--data", "test/needs-token", "--steps", "100",
                          "--stop-at", "1", "--width", "16", "--seq", "16", "--batch", "2" };
  g_autofree char *token_file = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int fd;

  g_assert_cmpint (run_cli (NULL, &out, &err, train[0], train[1], train[2], train[3], train[4],
                            train[5], train[6], train[7], train[8], train[9], train[10],
                            train[11], train[12], train[13], NULL), ==, 1);
  g_assert_nonnull (strstr (err, "needs a Hugging Face token"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  if (run_cli (TOKEN, &out, &err, train[0], train[1], train[2], train[3], train[4], train[5],
               train[6], train[7], train[8], train[9], train[10], train[11], train[12],
               train[13], NULL) != 0)
    g_error ("train with HF_TOKEN failed: %s", err);
  g_assert_nonnull (strstr (out, "\"step\":1"));
  g_assert_null (strstr (out, "fallback"));
  g_assert_null (strstr (err, TOKEN));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  fd = g_file_open_tmp ("dc-token-XXXXXX", &token_file, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (token_file, TOKEN "\n", -1, &error));
  close (fd);
  g_assert_cmpint (run_cli (NULL, &out, &err, train[0], train[1], train[2], train[3], train[4],
                            train[5], train[6], train[7], train[8], train[9], train[10],
                            train[11], train[12], train[13], "--token-file", token_file,
                            NULL), ==, 0);
  g_assert_nonnull (strstr (out, "\"step\":1"));
  g_unlink (token_file);
}

static void
test_cli_ls (void)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) result = NULL;
  JsonArray *files;

  g_assert_cmpint (run_cli (NULL, &out, &err, "data", "ls", "--json", "test/fixtures", NULL), ==,
                   0);
  result = parse_line (out);
  g_assert_cmpstr (json_object_get_string_member (result, "dataset"), ==, "test/fixtures");
  files = json_object_get_array_member (result, "files");
  g_assert_cmpuint (json_array_get_length (files), ==, 2);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (files, 1),
                                                  "path"), ==, "data/fineweb-like-zstd.parquet");
}

/* The token's transport rule, as a policy: TLS, or loopback only. */
static void
test_token_policy (void)
{
  const char *may[] = {
    "https://huggingface.co/api/datasets/a/b",
    "https://192.0.2.1/x",
    "http://127.0.0.1:8080/x",
    "http://127.45.6.7/x",
    "http://localhost:3000/x",
    "http://LOCALHOST/x",
    "http://[::1]:8080/x",
  };
  const char *may_not[] = {
    "http://192.0.2.1/x",
    "http://huggingface.co/x",
    "http://mirror.example:8080/x",
    "http://127.0.0.1.example.com/x",
    "http://localhost.example.com/x",
    "http://10.0.0.1/x",
    "http://[2001:db8::1]/x",
    "ftp://127.0.0.1/x",
    "not a url",
  };

  for (guint i = 0; i < G_N_ELEMENTS (may); i++)
    {
      g_test_message ("%s", may[i]);
      g_assert_true (dc_hf_url_may_carry_token (may[i]));
    }
  for (guint i = 0; i < G_N_ELEMENTS (may_not); i++)
    {
      g_test_message ("%s", may_not[i]);
      g_assert_false (dc_hf_url_may_carry_token (may_not[i]));
    }
}

/* A token set for a plain-http base URL that is not loopback is refused
 * before anything is sent. The address is TEST-NET-1 (never routed) and the
 * cancellable is already cancelled, so that even a client without the rule
 * opens no connection: it fails with "cancelled" instead. */
static void
test_token_not_over_http (void)
{
  g_autoptr(DcHfClient) client = new_client ("http://192.0.2.1");
  g_autofree char *url = file_url ("http://192.0.2.1", "fixtures", "x.parquet");
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  guint64 size = 0;

  dc_hf_client_set_token (client, TOKEN);
  g_cancellable_cancel (cancellable);
  bytes = dc_hf_client_fetch_tail (client, url, 8, &size, cancellable, &error);
  g_assert_null (bytes);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message,
                            "refused to send the Hugging Face token over plain http to 192.0.2.1"));
  g_assert_null (strstr (error->message, TOKEN));
  g_assert_cmpuint (dc_hf_client_get_request_count (client), ==, 0);
}

/* The redirect rule, for every request with or without a token: never from
 * https to anything else (the test server cannot speak TLS, so the policy is
 * tested as a function; request_once calls it on every hop). */
static void
test_redirect_policy (void)
{
  const char *from = "https://huggingface.co/datasets/a/b/resolve/main/f.parquet";
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_hf_url_check_redirect (from, "https://cdn.example/f", &error));
  g_assert_no_error (error);
  g_assert_true (dc_hf_url_check_redirect ("http://127.0.0.1/x", "http://127.0.0.2/y", &error));
  g_assert_no_error (error);
  g_assert_true (dc_hf_url_check_redirect ("http://127.0.0.1/x", "https://cdn.example/y",
                                           &error));
  g_assert_no_error (error);

  g_assert_false (dc_hf_url_check_redirect (from, "http://cdn.example/f", &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP);
  g_assert_cmpstr (error->message, ==, "refused a redirect from https to plain http for "
                   "file “f.parquet” of dataset “a/b”");
  g_clear_error (&error);
  g_assert_false (dc_hf_url_check_redirect (from, "HTTP://cdn.example/f", &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP);
  g_clear_error (&error);
  g_assert_false (dc_hf_url_check_redirect (from, "ftp://cdn.example/f", &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP);
  g_clear_error (&error);
  g_assert_false (dc_hf_url_check_redirect ("http://127.0.0.1/x", "file:///etc/passwd", &error));
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP);
}

/* An empty listing page ends the listing even when it links a next page
 * (here: itself). */
static void
test_empty_page_ends_listing (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autoptr(DcDatasetSpec) spec = dc_dataset_spec_parse ("test/empty-page", NULL);
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(GError) error = NULL;

  hub_reset_counters ();
  files = dc_dataset_list_files (client, spec, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (files->len, ==, 0);
  g_assert_cmpuint (hub->hub_requests, ==, 1);
}

/* A server that links pages forever is stopped after DC_HF_MAX_LIST_PAGES. */
static void
test_endless_pages (void)
{
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autoptr(DcDatasetSpec) spec = dc_dataset_spec_parse ("test/endless-pages", NULL);
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *expect = g_strdup_printf ("has more than %u pages", DC_HF_MAX_LIST_PAGES);

  hub_reset_counters ();
  files = dc_dataset_list_files (client, spec, NULL, &error);
  g_assert_null (files);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, expect));
  g_assert_cmpuint (hub->hub_requests, <=, DC_HF_MAX_LIST_PAGES + 1);
}

/* A whole-file download is checked against the sha256 the Hub names: the
 * X-Linked-Etag of the resolve redirect, or the listing's LFS oid that the
 * caller passes. */
static void
test_sha256 (void)
{
  const char *name = "arrow-v2-gzip-plain.parquet";
  g_autoptr(DcHfClient) client = new_client (hub->hub_url);
  g_autoptr(GBytes) whole = load_file (name);
  g_autofree char *sha256 = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, whole);
  g_autofree char *linked = file_url (hub->hub_url, "linked-etag", name);
  g_autofree char *bad = file_url (hub->hub_url, "bad-etag", name);
  g_autofree char *plain = file_url (hub->hub_url, "fixtures", name);
  g_autofree char *expect = NULL;
  g_autoptr(GError) error = NULL;
  GBytes *bytes;

  /* Matching digests, from either source. */
  bytes = dc_hf_client_fetch_file (client, linked, NULL, 1u << 20, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (bytes, whole));
  g_bytes_unref (bytes);
  bytes = dc_hf_client_fetch_file (client, plain, sha256, 1u << 20, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (bytes, whole));
  g_bytes_unref (bytes);

  /* The header's digest differs. */
  expect = g_strdup_printf ("sha256 mismatch for file “data/%s” of dataset “test/bad-etag”: "
                            "expected %s, got %s", name, EMPTY_SHA256, sha256);
  bytes = dc_hf_client_fetch_file (client, bad, NULL, 1u << 20, NULL, &error);
  g_assert_null (bytes);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_cmpstr (error->message, ==, expect);
  g_clear_error (&error);
  g_clear_pointer (&expect, g_free);

  /* The caller's digest (the listing's oid) differs. */
  expect = g_strdup_printf ("sha256 mismatch for file “data/%s” of dataset “test/fixtures”: "
                            "expected %s, got %s", name, EMPTY_SHA256, sha256);
  bytes = dc_hf_client_fetch_file (client, plain, EMPTY_SHA256, 1u << 20, NULL, &error);
  g_assert_null (bytes);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT);
  g_assert_cmpstr (error->message, ==, expect);
  g_clear_error (&error);

  /* Larger than the caller's limit: refused, not stored. */
  bytes = dc_hf_client_fetch_file (client, plain, NULL, 1000, NULL, &error);
  g_assert_null (bytes);
  g_assert_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP);
  g_assert_nonnull (strstr (error->message, "larger than the 1000-byte limit"));
}

int
main (int    argc,
      char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("HF_TOKEN");
  hub_start ();

  g_test_add_func ("/dc/data/http/url-layout", test_url_layout);
  g_test_add_data_func ("/dc/data/http/parquet-snappy", "fineweb-like-snappy.parquet",
                        check_fixture);
  g_test_add_data_func ("/dc/data/http/parquet-zstd", "fineweb-like-zstd.parquet",
                        check_fixture);
  g_test_add_func ("/dc/data/http/one-row-group-bytes", test_one_row_group_bytes);
  g_test_add_func ("/dc/data/http/small-file", test_small_file);
  g_test_add_func ("/dc/data/http/coalescing", test_coalescing);
  g_test_add_func ("/dc/data/http/ignored-range", test_ignored_range);
  g_test_add_func ("/dc/data/http/token-after-401", test_token_after_401);
  g_test_add_func ("/dc/data/http/no-token-asked-when-public", test_no_ask_when_public);
  g_test_add_func ("/dc/data/http/redirect-other-host", test_redirect_other_host);
  g_test_add_func ("/dc/data/http/dropped-connection", test_dropped_connection);
  g_test_add_func ("/dc/data/http/truncated-file", test_truncated_file);
  g_test_add_func ("/dc/data/http/not-found", test_not_found);
  g_test_add_func ("/dc/data/http/retry-after-503", test_retry_after_503);
  g_test_add_func ("/dc/data/http/async", test_async);
  g_test_add_func ("/dc/data/http/token-policy", test_token_policy);
  g_test_add_func ("/dc/data/http/token-not-over-http", test_token_not_over_http);
  g_test_add_func ("/dc/data/http/redirect-policy", test_redirect_policy);
  g_test_add_func ("/dc/data/http/sha256", test_sha256);
  g_test_add_func ("/dc/data/dataset/empty-page-ends-listing", test_empty_page_ends_listing);
  g_test_add_func ("/dc/data/dataset/endless-pages", test_endless_pages);
  g_test_add_func ("/dc/data/dataset/list", test_dataset_list);
  g_test_add_func ("/dc/data/dataset/shares", test_dataset_shares);
  g_test_add_func ("/dc/data/dataset/without-text-column", test_dataset_without_text_column);
  g_test_add_func ("/dc/data/dataset/offline-fallback", test_offline_fallback);
  g_test_add_func ("/dc/data/dataset/train-data", test_train_data_from_dataset);
  g_test_add_func ("/dc/data/dataset/train-data-offline", test_train_data_offline);
  g_test_add_func ("/dc/data/dataset/train-data-needs-token", test_train_data_needs_token);
  g_test_add_func ("/dc/data/cli/read-url", test_cli_read_url);
  g_test_add_func ("/dc/data/cli/token", test_cli_token);
  g_test_add_func ("/dc/data/cli/train-token", test_cli_train_token);
  g_test_add_func ("/dc/data/cli/ls", test_cli_ls);

  status = g_test_run ();
  hub_stop ();
  return status;
}
