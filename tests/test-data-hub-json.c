/* test-data-hub-json.c: the Hub client's JSON answers are bounded before
 * json-glib parses them (suite net: a SoupServer on 127.0.0.1 in its own
 * thread, the synchronous client in the test's).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <libsoup/soup.h>

#include "dc-json-bounds.h"
#include "dc-test-utils.h"
#include "data/dc-hf-client.h"

/* Over twice the depth that overflows json-glib 1.6's stack. */
#define DEEP_LEVELS (200 * 1000)

typedef struct
{
  GMainContext *context;
  GMainLoop    *loop;
  GThread      *thread;
  GMutex        lock;
  GCond         cond;
  char         *url;
} Server;

static void
handler (SoupServer        *soup,
         SoupServerMessage *msg,
         const char        *path,
         GHashTable        *query,
         gpointer           user_data)
{
  g_autofree char *deep = g_strnfill (DEEP_LEVELS, '[');
  g_autofree char *text = NULL;

  if (g_str_equal (path, "/api/deep"))
    text = g_strdup (deep);
  else if (g_str_equal (path, "/api/deep-object"))
    text = g_strdup_printf ("[{\"type\":\"file\",\"path\":\"a\",\"lfs\":%s}]", deep);
  else if (g_str_equal (path, "/api/deep-in-string"))
    text = g_strdup_printf ("[{\"type\":\"file\",\"path\":\"%s\"}]", deep);
  else
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_TAKE,
                                    g_steal_pointer (&text), strlen (text));
  soup_server_message_set_status (msg, 200, NULL);
}

static gpointer
server_thread (gpointer data)
{
  Server *server = data;
  g_autoptr(SoupServer) soup = NULL;
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string ("127.0.0.1");
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (inet, 0);
  g_autoptr(GError) error = NULL;
  GSList *uris;

  g_main_context_push_thread_default (server->context);
  soup = soup_server_new (NULL, NULL);
  soup_server_add_handler (soup, "/", handler, NULL, NULL);
  soup_server_listen (soup, address, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (soup);
  g_mutex_lock (&server->lock);
  server->url = g_strdup_printf ("http://127.0.0.1:%d", g_uri_get_port (uris->data));
  g_cond_signal (&server->cond);
  g_mutex_unlock (&server->lock);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

  g_main_loop_run (server->loop);
  soup_server_disconnect (soup);
  g_main_context_pop_thread_default (server->context);
  return NULL;
}

static gboolean
quit_cb (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static void
test_deep_answers (void)
{
  Server server = { 0, };
  g_autoptr(DcHfClient) client = NULL;
  const char *deep_paths[] = { "/api/deep", "/api/deep-object" };

  g_mutex_init (&server.lock);
  g_cond_init (&server.cond);
  server.context = g_main_context_new ();
  server.loop = g_main_loop_new (server.context, FALSE);
  server.thread = g_thread_new ("test-hub-json", server_thread, &server);
  g_mutex_lock (&server.lock);
  while (server.url == NULL)
    g_cond_wait (&server.cond, &server.lock);
  g_mutex_unlock (&server.lock);

  client = dc_hf_client_new (server.url);
  dc_hf_client_set_retries (client, 0, 10);
  dc_hf_client_set_timeout (client, 10);

  /* Before the depth check the test process died here of a stack overflow. */
  for (guint i = 0; i < G_N_ELEMENTS (deep_paths); i++)
    {
      g_autofree char *url = g_strconcat (server.url, deep_paths[i], NULL);
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonNode) root = dc_hf_client_get_json (client, url, NULL, &error);

      g_assert_null (root);
      g_assert_error (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_DEEP);
      g_test_message ("%s", error->message);
      g_assert_nonnull (strstr (error->message, "is not valid JSON"));
    }
  /* The same brackets inside a string are a file name, however odd. */
  {
    g_autofree char *url = g_strconcat (server.url, "/api/deep-in-string", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) root = dc_hf_client_get_json (client, url, NULL, &error);

    g_assert_no_error (error);
    g_assert_true (JSON_NODE_HOLDS_ARRAY (root));
  }

  g_main_context_invoke (server.context, quit_cb, server.loop);
  g_thread_join (server.thread);
  g_main_loop_unref (server.loop);
  g_main_context_unref (server.context);
  g_mutex_clear (&server.lock);
  g_cond_clear (&server.cond);
  g_free (server.url);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/data/hub-json/deep-answers", test_deep_answers);

  return g_test_run ();
}
