/* dc-cli-chromium.c: headless Chromium over the DevTools protocol.
 *
 * Firefox, the kit's second browser, is driven the same way over WebDriver
 * BiDi (dc_chromium_new_firefox ()): its port comes from
 * WebDriverBiDiServer.json in its profile, its network goes through a
 * closed proxy (user.js), and network.beforeRequestSent and log.entryAdded
 * record the page's requests and log.
 *
 * Chromium starts with --remote-debugging-port=0 and writes the port it
 * chose and the browser's WebSocket path into DevToolsActivePort in its
 * profile folder. We connect there, create one page target, attach to it
 * (flat sessions) and enable Network, Page, Runtime and Log; workers the page
 * starts are attached automatically, paused until their Network domain is
 * on, so their requests are recorded too.
 *
 * The network is blocked three ways: every proxied request goes to a closed
 * port (--proxy-server=127.0.0.1:9, loopback included through
 * --proxy-bypass-list=<-loopback>), every host name resolves to nothing
 * (--host-resolver-rules), and background services are off. Whatever is
 * requested anyway is recorded (Network.requestWillBeSent) for the caller
 * to check.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include "dc-cli-chromium.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "dc-json-bounds.h"

/* DevTools answers with screenshots of a few MiB in base64; libsoup's
 * default cap (128 KiB) would close the connection on the first one. 64 MiB
 * holds a full-page PNG of any page the kit shows. */
#define DC_CHROMIUM_MAX_MESSAGE (64 * 1024 * 1024)
/* Async stack traces in Network events nest by "parent" a few dozen levels;
 * 512 keeps every real message and stays far below the ~80,000 levels at
 * which json-glib 1.6 overflows its stack. */
#define DC_CHROMIUM_MAX_DEPTH 512

struct _DcChromium
{
  GMainContext            *context;
  GSubprocess             *process;
  char                    *profile;      /* temporary --user-data-dir, removed at the end */
  SoupSession             *session;
  SoupWebsocketConnection *socket;
  char                    *page_session; /* the page target's flat session id */
  gint64                   next_id;
  GHashTable              *replies;      /* id (gint64*) -> JsonObject* */
  GPtrArray               *requests;     /* char* URLs, in order */
  GPtrArray               *console;      /* char* console lines and exceptions */
  const char              *name;         /* "Chromium" or "Firefox", for messages */
  gboolean                 bidi;         /* Firefox: WebDriver BiDi instead of DevTools */
  char                    *bidi_context; /* BiDi: the page's browsing context */
  gboolean                 closed;
};

/* @name of @object when it is an object, else NULL (no critical on a
 * member of another type). */
static JsonObject *
get_object (JsonObject *object,
            const char *name)
{
  JsonNode *node = object != NULL ? json_object_get_member (object, name) : NULL;

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

char *
dc_chromium_find_program (void)
{
  const char *names[] = { "chromium", "chromium-browser", "google-chrome" };
  const char *env = g_getenv ("DC_CHROMIUM");

  if (env != NULL && *env != '\0')
    return g_find_program_in_path (env);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      char *path = g_find_program_in_path (names[i]);

      if (path != NULL)
        return path;
    }
  return NULL;
}

/* Firefox, for the kit's second browser (WebDriver BiDi), or NULL. */
char *
dc_chromium_find_firefox (void)
{
  const char *names[] = { "firefox-esr", "firefox" };
  const char *env = g_getenv ("DC_FIREFOX");

  if (env != NULL && *env != '\0')
    return g_find_program_in_path (env);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      char *path = g_find_program_in_path (names[i]);

      if (path != NULL)
        return path;
    }
  return NULL;
}

static void
remove_tree (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);

      if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
        remove_tree (child);
      else
        g_unlink (child);
    }
  g_rmdir (path);
}

static gboolean
wake_cb (gpointer data)
{
  return G_SOURCE_CONTINUE;
}

/* One iteration of the browser's context, waking at least every 50 ms. */
static void
iterate (DcChromium *self)
{
  g_autoptr(GSource) tick = g_timeout_source_new (50);

  g_source_set_callback (tick, wake_cb, NULL, NULL);
  g_source_attach (tick, self->context);
  g_main_context_iteration (self->context, TRUE);
  g_source_destroy (tick);
}

static void
send_object (DcChromium  *self,
             const char  *session,
             gint64       id,
             const char  *method,
             JsonObject  *params)
{
  g_autoptr(JsonObject) message = json_object_new ();
  g_autoptr(JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *text = NULL;

  json_object_set_int_member (message, "id", id);
  json_object_set_string_member (message, "method", method);
  json_object_set_object_member (message, "params",
                                 params != NULL ? json_object_ref (params) : json_object_new ());
  if (session != NULL)
    json_object_set_string_member (message, "sessionId", session);
  json_node_set_object (root, message);
  text = json_to_string (root, FALSE);
  soup_websocket_connection_send_text (self->socket, text);
}

/* Sends @method and waits for its reply: the reply's "result" object
 * (transfer full), or NULL with @error set. */
static JsonObject *
call (DcChromium  *self,
      const char  *session,
      const char  *method,
      JsonObject  *params,
      guint        timeout_ms,
      GError     **error)
{
  gint64 id = ++self->next_id;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  JsonObject *reply;

  if (self->closed)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_CLOSED,
                   "%s closed its DevTools connection", self->name);
      return NULL;
    }
  send_object (self, session, id, method, params);
  while ((reply = g_hash_table_lookup (self->replies, &id)) == NULL)
    {
      if (self->closed)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_CLOSED,
                       "%s closed its DevTools connection during %s", self->name, method);
          return NULL;
        }
      if (g_get_monotonic_time () >= deadline)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                       "%s did not answer %s within %u s", self->name, method, timeout_ms / 1000);
          return NULL;
        }
      iterate (self);
    }
  json_object_ref (reply);
  g_hash_table_remove (self->replies, &id);
  if (json_object_has_member (reply, "error"))
    {
      /* DevTools: {"error": {"message"}}; BiDi: {"error": "code", "message"}. */
      JsonObject *e = get_object (reply, "error");
      const char *message = json_object_get_string_member_with_default (e != NULL ? e : reply,
                                                                         "message", "?");

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s refused %s: %s", self->name, method,
                   message);
      json_object_unref (reply);
      return NULL;
    }
  {
    JsonObject *result = get_object (reply, "result");

    result = result != NULL ? json_object_ref (result) : json_object_new ();
    json_object_unref (reply);
    return result;
  }
}

static void
on_event (DcChromium  *self,
          const char  *method,
          const char  *session,
          JsonObject  *params)
{
  if (g_str_equal (method, "Network.requestWillBeSent") || g_str_equal (method, "Network.webSocketCreated"))
    {
      JsonObject *request = get_object (params, "request");
      const char *url = request != NULL ? json_object_get_string_member_with_default (request, "url", NULL)
                                        : json_object_get_string_member_with_default (params, "url", NULL);

      if (url != NULL)
        g_ptr_array_add (self->requests, g_strdup (url));
    }
  else if (g_str_equal (method, "Target.attachedToTarget"))
    {
      /* A worker the page started, paused until its requests are recorded. */
      const char *child = json_object_get_string_member_with_default (params, "sessionId", NULL);

      if (child != NULL)
        {
          g_autoptr(JsonObject) auto_attach = json_object_new ();

          json_object_set_boolean_member (auto_attach, "autoAttach", TRUE);
          json_object_set_boolean_member (auto_attach, "waitForDebuggerOnStart", TRUE);
          json_object_set_boolean_member (auto_attach, "flatten", TRUE);
          send_object (self, child, ++self->next_id, "Network.enable", NULL);
          send_object (self, child, ++self->next_id, "Runtime.enable", NULL);
          send_object (self, child, ++self->next_id, "Log.enable", NULL);
          send_object (self, child, ++self->next_id, "Target.setAutoAttach", auto_attach);
          send_object (self, child, ++self->next_id, "Runtime.runIfWaitingForDebugger", NULL);
        }
    }
  else if (g_str_equal (method, "network.beforeRequestSent"))
    {
      JsonObject *request = get_object (params, "request");
      const char *url = request != NULL ? json_object_get_string_member_with_default (request, "url", NULL)
                                        : NULL;

      if (url != NULL)
        g_ptr_array_add (self->requests, g_strdup (url));
    }
  else if (g_str_equal (method, "log.entryAdded"))
    {
      g_ptr_array_add (self->console,
                       g_strdup_printf ("log %s %s: %s",
                                        json_object_get_string_member_with_default (params, "level", "?"),
                                        json_object_get_string_member_with_default (params, "type", "?"),
                                        json_object_get_string_member_with_default (params, "text", "")));
    }
  else if (g_str_equal (method, "Log.entryAdded"))
    {
      /* Among them the browser's own reports: requests the page's
       * Content-Security-Policy refused before they were sent. */
      JsonObject *entry = get_object (params, "entry");

      if (entry != NULL)
        g_ptr_array_add (self->console,
                         g_strdup_printf ("log %s %s: %s %s",
                                          json_object_get_string_member_with_default (entry, "level", "?"),
                                          json_object_get_string_member_with_default (entry, "source", "?"),
                                          json_object_get_string_member_with_default (entry, "text", ""),
                                          json_object_get_string_member_with_default (entry, "url", "")));
    }
  else if (g_str_equal (method, "Runtime.exceptionThrown"))
    {
      JsonObject *details = get_object (params, "exceptionDetails");
      JsonObject *exception = details != NULL ? get_object (details, "exception") : NULL;

      g_ptr_array_add (self->console,
                       g_strdup_printf ("exception: %s %s",
                                        details != NULL ? json_object_get_string_member_with_default (details, "text", "") : "",
                                        exception != NULL ? json_object_get_string_member_with_default (exception, "description", "") : ""));
    }
  else if (g_str_equal (method, "Runtime.consoleAPICalled"))
    {
      JsonArray *args = json_object_get_array_member (params, "args");
      g_autoptr(GString) line = g_string_new ("console: ");

      for (guint i = 0; args != NULL && i < json_array_get_length (args); i++)
        {
          JsonObject *arg = json_array_get_object_element (args, i);
          JsonNode *value = arg != NULL ? json_object_get_member (arg, "value") : NULL;

          if (value != NULL && JSON_NODE_HOLDS_VALUE (value)
              && json_node_get_value_type (value) == G_TYPE_STRING)
            g_string_append (line, json_node_get_string (value));
          else if (arg != NULL)
            g_string_append (line, json_object_get_string_member_with_default (arg, "description", "?"));
          g_string_append_c (line, ' ');
        }
      g_ptr_array_add (self->console, g_string_free (g_steal_pointer (&line), FALSE));
    }
}

static void
message_cb (SoupWebsocketConnection *socket,
            int                      type,
            GBytes                  *message,
            gpointer                 user_data)
{
  DcChromium *self = user_data;
  g_autoptr(JsonNode) root = NULL;
  gsize size;
  const char *data = g_bytes_get_data (message, &size);
  JsonObject *object;

  /* Chromium is our own child, but its replies are still checked before use. */
  if (type != SOUP_WEBSOCKET_DATA_TEXT)
    return;
  root = dc_json_parse_bounded (data, (gssize) size, DC_CHROMIUM_MAX_MESSAGE,
                                DC_CHROMIUM_MAX_DEPTH, NULL);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return;
  object = json_node_get_object (root);
  if (json_object_has_member (object, "id") && !json_object_has_member (object, "method"))
    {
      gint64 *id = g_new (gint64, 1);

      *id = json_object_get_int_member_with_default (object, "id", -1);
      g_hash_table_replace (self->replies, id, json_object_ref (object));
    }
  else if (json_object_has_member (object, "method"))
    {
      JsonObject *params = get_object (object, "params");

      if (params != NULL)
        on_event (self, json_object_get_string_member_with_default (object, "method", ""),
                  json_object_get_string_member_with_default (object, "sessionId", NULL), params);
    }
}

static void
closed_cb (SoupWebsocketConnection *socket,
           gpointer                 user_data)
{
  DcChromium *self = user_data;

  self->closed = TRUE;
}

static void
connect_cb (GObject      *source,
            GAsyncResult *result,
            gpointer      user_data)
{
  GAsyncResult **out = user_data;

  *out = g_object_ref (result);
}

static void
child_setup (gpointer data)
{
  /* Its own process group, so that the renderers and helpers it starts can
   * be ended with it; and it dies with us, so that a test that aborts on a
   * failed assertion leaves no browser behind (its helpers exit with it). */
  setpgid (0, 0);
#ifdef __linux__
  prctl (PR_SET_PDEATHSIG, SIGKILL);
#endif
}

/* Firefox's preferences: every request through a closed proxy (loopback
 * too), and its background services off. */
static const char firefox_prefs[] =
  "user_pref(\"network.proxy.type\", 1);\n"
  "user_pref(\"network.proxy.http\", \"127.0.0.1\");\n"
  "user_pref(\"network.proxy.http_port\", 9);\n"
  "user_pref(\"network.proxy.ssl\", \"127.0.0.1\");\n"
  "user_pref(\"network.proxy.ssl_port\", 9);\n"
  "user_pref(\"network.proxy.share_proxy_settings\", true);\n"
  "user_pref(\"network.proxy.no_proxies_on\", \"\");\n"
  "user_pref(\"network.proxy.allow_hijacking_localhost\", true);\n"
  "user_pref(\"network.captive-portal-service.enabled\", false);\n"
  "user_pref(\"network.connectivity-service.enabled\", false);\n"
  "user_pref(\"app.update.disabledForTesting\", true);\n"
  "user_pref(\"browser.shell.checkDefaultBrowser\", false);\n"
  "user_pref(\"browser.safebrowsing.update.enabled\", false);\n"
  "user_pref(\"datareporting.policy.dataSubmissionEnabled\", false);\n"
  "user_pref(\"toolkit.telemetry.enabled\", false);\n"
  "user_pref(\"extensions.update.enabled\", false);\n";

/* The WebSocket URL the browser wrote into its profile, or NULL while it
 * has not written it yet (and with @error set when what it wrote is wrong). */
static char *
read_endpoint (DcChromium  *self,
               GError     **error)
{
  g_autofree char *text = NULL;

  if (self->bidi)
    {
      g_autofree char *path = g_build_filename (self->profile, "WebDriverBiDiServer.json", NULL);
      g_autoptr(JsonNode) root = NULL;
      JsonObject *o;
      gint64 port;
      gsize len;

      if (!g_file_get_contents (path, &text, &len, NULL))
        return NULL;
      root = dc_json_parse_bounded (text, (gssize) len, DC_CHROMIUM_MAX_MESSAGE,
                                    DC_CHROMIUM_MAX_DEPTH, NULL);
      if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
        return NULL;
      o = json_node_get_object (root);
      port = json_object_get_int_member_with_default (o, "ws_port", 0);
      if (port < 1 || port > 65535)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                       "Firefox's WebDriverBiDiServer.json names no port");
          return NULL;
        }
      return g_strdup_printf ("ws://127.0.0.1:%u/session", (guint) port);
    }
  else
    {
      g_autofree char *path = g_build_filename (self->profile, "DevToolsActivePort", NULL);
      g_auto(GStrv) lines = NULL;
      guint64 port = 0;

      if (!g_file_get_contents (path, &text, NULL, NULL) || strchr (text, '\n') == NULL)
        return NULL;
      lines = g_strsplit (text, "\n", 3);
      if (!g_ascii_string_to_unsigned (lines[0], 10, 1, 65535, &port, NULL) || lines[1] == NULL
          || !g_str_has_prefix (lines[1], "/devtools/browser/"))
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                       "Chromium's DevToolsActivePort is not a port and a path");
          return NULL;
        }
      return g_strdup_printf ("ws://127.0.0.1:%u%s", (guint) port, lines[1]);
    }
}

static gboolean
start (DcChromium  *self,
       const char  *program,
       guint        timeout_ms,
       GError     **error)
{
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *log_file = g_build_filename (self->profile, "browser.log", NULL);
  g_autofree char *url = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  g_ptr_array_add (argv, g_strdup (program));
  if (self->bidi)
    {
      g_autofree char *prefs = g_build_filename (self->profile, "user.js", NULL);

      if (!g_file_set_contents (prefs, firefox_prefs, -1, error))
        return FALSE;
      g_ptr_array_add (argv, g_strdup ("--headless"));
      g_ptr_array_add (argv, g_strdup ("--no-remote"));
      g_ptr_array_add (argv, g_strdup ("--profile"));
      g_ptr_array_add (argv, g_strdup (self->profile));
      g_ptr_array_add (argv, g_strdup ("--remote-debugging-port=0"));
    }
  else
    {
      g_ptr_array_add (argv, g_strdup ("--headless=new"));
      /* Chromium refuses to start as root with its sandbox on (it needs an
       * unprivileged user namespace or a setuid helper, which containers and
       * Debian's package lack); the pages it opens here are our own kits. */
      if (geteuid () == 0)
        g_ptr_array_add (argv, g_strdup ("--no-sandbox"));
      g_ptr_array_add (argv, g_strdup_printf ("--user-data-dir=%s", self->profile));
      g_ptr_array_add (argv, g_strdup ("--remote-debugging-port=0"));
      g_ptr_array_add (argv, g_strdup ("--proxy-server=127.0.0.1:9"));
      g_ptr_array_add (argv, g_strdup ("--proxy-bypass-list=<-loopback>"));
      g_ptr_array_add (argv, g_strdup ("--host-resolver-rules=MAP * ~NOTFOUND"));
      g_ptr_array_add (argv, g_strdup ("--no-first-run"));
      g_ptr_array_add (argv, g_strdup ("--no-default-browser-check"));
      g_ptr_array_add (argv, g_strdup ("--disable-background-networking"));
      g_ptr_array_add (argv, g_strdup ("--disable-component-update"));
      g_ptr_array_add (argv, g_strdup ("--disable-default-apps"));
      g_ptr_array_add (argv, g_strdup ("--disable-extensions"));
      g_ptr_array_add (argv, g_strdup ("--disable-sync"));
      g_ptr_array_add (argv, g_strdup ("--disable-breakpad"));
      g_ptr_array_add (argv, g_strdup ("--disable-gpu"));
      g_ptr_array_add (argv, g_strdup ("--disable-dev-shm-usage"));
      g_ptr_array_add (argv, g_strdup ("--metrics-recording-only"));
      g_ptr_array_add (argv, g_strdup ("--mute-audio"));
      g_ptr_array_add (argv, g_strdup ("about:blank"));
    }
  g_ptr_array_add (argv, NULL);

  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE);
  g_subprocess_launcher_set_stderr_file_path (launcher, log_file);
  g_subprocess_launcher_set_child_setup (launcher, child_setup, NULL, NULL);
  self->process = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata, error);
  if (self->process == NULL)
    {
      g_prefix_error (error, "could not start %s (%s): ", self->name, program);
      return FALSE;
    }

  while ((url = read_endpoint (self, error)) == NULL)
    {
      if (error != NULL && *error != NULL)
        return FALSE;
      if (g_subprocess_get_identifier (self->process) == NULL)
        {
          g_autofree char *log = NULL;

          g_file_get_contents (log_file, &log, NULL, NULL);
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                       "%s exited at start: %.400s", self->name, log != NULL ? log : "");
          return FALSE;
        }
      if (g_get_monotonic_time () >= deadline)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                       "%s did not open its DevTools port within %u s", self->name,
                       timeout_ms / 1000);
          return FALSE;
        }
      g_usleep (50000);
    }

  self->session = soup_session_new ();
  msg = soup_message_new ("GET", url);
  soup_session_websocket_connect_async (self->session, msg, NULL, NULL, G_PRIORITY_DEFAULT,
                                        NULL, connect_cb, &result);
  while (result == NULL && g_get_monotonic_time () < deadline)
    iterate (self);
  if (result == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                   "%s's DevTools connection did not open within %u s", self->name,
                   timeout_ms / 1000);
      return FALSE;
    }
  self->socket = soup_session_websocket_connect_finish (self->session, result, error);
  if (self->socket == NULL)
    {
      g_prefix_error (error, "could not connect to %s's DevTools: ", self->name);
      return FALSE;
    }
  soup_websocket_connection_set_max_incoming_payload_size (self->socket, DC_CHROMIUM_MAX_MESSAGE);
  g_signal_connect (self->socket, "message", G_CALLBACK (message_cb), self);
  g_signal_connect (self->socket, "closed", G_CALLBACK (closed_cb), self);
  return TRUE;
}

/* Firefox: a BiDi session, subscribed to the page's requests and log. */
static gboolean
open_page_bidi (DcChromium  *self,
                guint        timeout_ms,
                GError     **error)
{
  g_autoptr(JsonObject) caps = json_object_new ();
  g_autoptr(JsonObject) sub = json_object_new ();
  g_autoptr(JsonArray) events = json_array_new ();
  g_autoptr(JsonObject) r1 = NULL, r2 = NULL, tree = NULL;
  JsonArray *contexts;
  JsonNode *first;

  json_object_set_object_member (caps, "capabilities", json_object_new ());
  json_array_add_string_element (events, "network.beforeRequestSent");
  json_array_add_string_element (events, "log.entryAdded");
  json_object_set_array_member (sub, "events", g_steal_pointer (&events));
  if ((r1 = call (self, NULL, "session.new", caps, timeout_ms, error)) == NULL
      || (r2 = call (self, NULL, "session.subscribe", sub, timeout_ms, error)) == NULL
      || (tree = call (self, NULL, "browsingContext.getTree", NULL, timeout_ms, error)) == NULL)
    return FALSE;
  contexts = json_object_has_member (tree, "contexts")
             && JSON_NODE_HOLDS_ARRAY (json_object_get_member (tree, "contexts"))
             ? json_object_get_array_member (tree, "contexts") : NULL;
  first = contexts != NULL && json_array_get_length (contexts) > 0
          ? json_array_get_element (contexts, 0) : NULL;
  if (first == NULL || !JSON_NODE_HOLDS_OBJECT (first)
      || json_object_get_string_member_with_default (json_node_get_object (first), "context",
                                                     NULL) == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "Firefox has no browsing context to open the page in");
      return FALSE;
    }
  self->bidi_context = g_strdup (json_object_get_string_member (json_node_get_object (first),
                                                                "context"));
  return TRUE;
}

static gboolean
open_page (DcChromium  *self,
           guint        timeout_ms,
           GError     **error)
{
  g_autoptr(JsonObject) params = json_object_new ();
  g_autoptr(JsonObject) target = NULL, attached = NULL, r1 = NULL, r2 = NULL, r3 = NULL, r4 = NULL;
  g_autoptr(JsonObject) r5 = NULL;
  g_autoptr(JsonObject) auto_attach = json_object_new ();
  const char *target_id, *session;

  json_object_set_string_member (params, "url", "about:blank");
  target = call (self, NULL, "Target.createTarget", params, timeout_ms, error);
  if (target == NULL)
    return FALSE;
  target_id = json_object_get_string_member_with_default (target, "targetId", NULL);
  g_clear_pointer (&params, json_object_unref);
  params = json_object_new ();
  json_object_set_string_member (params, "targetId", target_id != NULL ? target_id : "");
  json_object_set_boolean_member (params, "flatten", TRUE);
  attached = call (self, NULL, "Target.attachToTarget", params, timeout_ms, error);
  if (attached == NULL)
    return FALSE;
  session = json_object_get_string_member_with_default (attached, "sessionId", NULL);
  if (session == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "Chromium attached to the page without a session id");
      return FALSE;
    }
  self->page_session = g_strdup (session);
  json_object_set_boolean_member (auto_attach, "autoAttach", TRUE);
  json_object_set_boolean_member (auto_attach, "waitForDebuggerOnStart", TRUE);
  json_object_set_boolean_member (auto_attach, "flatten", TRUE);
  if ((r1 = call (self, session, "Network.enable", NULL, timeout_ms, error)) == NULL
      || (r2 = call (self, session, "Page.enable", NULL, timeout_ms, error)) == NULL
      || (r3 = call (self, session, "Runtime.enable", NULL, timeout_ms, error)) == NULL
      || (r5 = call (self, session, "Log.enable", NULL, timeout_ms, error)) == NULL
      || (r4 = call (self, session, "Target.setAutoAttach", auto_attach, timeout_ms, error)) == NULL)
    return FALSE;
  return TRUE;
}

static DcChromium *
browser_new (const char  *program,
             gboolean     bidi,
             guint        timeout_ms,
             GError     **error)
{
  g_autoptr(DcChromium) self = g_new0 (DcChromium, 1);
  gboolean ok;

  g_return_val_if_fail (program != NULL, NULL);

  self->bidi = bidi;
  self->name = bidi ? "Firefox" : "Chromium";
  self->context = g_main_context_new ();
  self->replies = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
                                         (GDestroyNotify) json_object_unref);
  self->requests = g_ptr_array_new_with_free_func (g_free);
  self->console = g_ptr_array_new_with_free_func (g_free);
  self->profile = g_dir_make_tmp ("dc-browser-XXXXXX", error);
  if (self->profile == NULL)
    return NULL;
  g_main_context_push_thread_default (self->context);
  ok = start (self, program, timeout_ms, error)
       && (bidi ? open_page_bidi (self, timeout_ms, error) : open_page (self, timeout_ms, error));
  g_main_context_pop_thread_default (self->context);
  return ok ? g_steal_pointer (&self) : NULL;
}

/**
 * dc_chromium_new:
 * @program: the chromium binary (dc_chromium_find_program ())
 * @timeout_ms: for the start, the connection and each setup command
 *
 * Starts headless Chromium with the network blocked and one page open.
 */
DcChromium *
dc_chromium_new (const char  *program,
                 guint        timeout_ms,
                 GError     **error)
{
  return browser_new (program, FALSE, timeout_ms, error);
}

/**
 * dc_chromium_new_firefox:
 * @program: the firefox binary (dc_chromium_find_firefox ())
 *
 * The same for headless Firefox over WebDriver BiDi (Firefox dropped the
 * DevTools protocol): navigate, evaluate, screenshots and the page's
 * requests and log; dc_chromium_set_dark () is not available there.
 */
DcChromium *
dc_chromium_new_firefox (const char  *program,
                         guint        timeout_ms,
                         GError     **error)
{
  return browser_new (program, TRUE, timeout_ms, error);
}

gboolean
dc_chromium_navigate (DcChromium  *self,
                      const char  *url,
                      guint        timeout_ms,
                      GError     **error)
{
  g_autoptr(JsonObject) params = json_object_new ();
  g_autoptr(JsonObject) result = NULL;

  json_object_set_string_member (params, "url", url);
  if (self->bidi)
    {
      json_object_set_string_member (params, "context", self->bidi_context);
      json_object_set_string_member (params, "wait", "interactive");
    }
  g_main_context_push_thread_default (self->context);
  result = call (self, self->page_session, self->bidi ? "browsingContext.navigate" : "Page.navigate",
                 params, timeout_ms, error);
  g_main_context_pop_thread_default (self->context);
  if (result == NULL)
    return FALSE;
  if (json_object_has_member (result, "errorText"))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s could not open %s: %s", self->name,
                   url, json_object_get_string_member_with_default (result, "errorText", "?"));
      return FALSE;
    }
  return TRUE;
}

/* BiDi's script.evaluate: {type: success, result: RemoteValue} or
 * {type: exception, exceptionDetails}; primitives only (what the kit's
 * callers ask for). */
static JsonNode *
evaluate_bidi (DcChromium  *self,
               const char  *expression,
               gboolean     await_promise,
               guint        timeout_ms,
               GError     **error)
{
  g_autoptr(JsonObject) params = json_object_new ();
  g_autoptr(JsonObject) target = json_object_new ();
  g_autoptr(JsonObject) result = NULL;
  JsonObject *value;
  const char *type;

  json_object_set_string_member (target, "context", self->bidi_context);
  json_object_set_string_member (params, "expression", expression);
  json_object_set_object_member (params, "target", g_steal_pointer (&target));
  json_object_set_boolean_member (params, "awaitPromise", await_promise);
  json_object_set_string_member (params, "resultOwnership", "none");
  result = call (self, NULL, "script.evaluate", params, timeout_ms, error);
  if (result == NULL)
    return NULL;
  if (g_strcmp0 (json_object_get_string_member_with_default (result, "type", NULL), "success") != 0)
    {
      JsonObject *details = get_object (result, "exceptionDetails");

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "the page threw: %s",
                   details != NULL ? json_object_get_string_member_with_default (details, "text", "?")
                                   : "?");
      return NULL;
    }
  value = get_object (result, "result");
  type = value != NULL ? json_object_get_string_member_with_default (value, "type", "") : "";
  if (value == NULL || !json_object_has_member (value, "value")
      || !(g_str_equal (type, "string") || g_str_equal (type, "number")
           || g_str_equal (type, "boolean")))
    return json_node_new (JSON_NODE_NULL);
  return json_node_copy (json_object_get_member (value, "value"));
}

static JsonNode *
evaluate (DcChromium  *self,
          const char  *expression,
          gboolean     await_promise,
          guint        timeout_ms,
          GError     **error)
{
  g_autoptr(JsonObject) params = json_object_new ();
  g_autoptr(JsonObject) result = NULL;
  JsonObject *value;

  if (self->bidi)
    return evaluate_bidi (self, expression, await_promise, timeout_ms, error);
  json_object_set_string_member (params, "expression", expression);
  json_object_set_boolean_member (params, "returnByValue", TRUE);
  json_object_set_boolean_member (params, "awaitPromise", await_promise);
  result = call (self, self->page_session, "Runtime.evaluate", params, timeout_ms, error);
  if (result == NULL)
    return NULL;
  if (json_object_has_member (result, "exceptionDetails"))
    {
      JsonObject *details = get_object (result, "exceptionDetails");
      JsonObject *exception = details != NULL && json_object_has_member (details, "exception")
                              ? get_object (details, "exception") : NULL;
      const char *text = exception != NULL
                         ? json_object_get_string_member_with_default (exception, "description", NULL)
                         : NULL;

      if (text == NULL && details != NULL)
        text = json_object_get_string_member_with_default (details, "text", NULL);
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "the page threw: %s",
                   text != NULL ? text : "?");
      return NULL;
    }
  value = get_object (result, "result");
  if (value == NULL || !json_object_has_member (value, "value"))
    return json_node_new (JSON_NODE_NULL);
  return json_node_copy (json_object_get_member (value, "value"));
}

/* The value of @expression in the page (returned by value), or NULL. */
JsonNode *
dc_chromium_evaluate (DcChromium  *self,
                      const char  *expression,
                      guint        timeout_ms,
                      GError     **error)
{
  JsonNode *node;

  g_main_context_push_thread_default (self->context);
  node = evaluate (self, expression, FALSE, timeout_ms, error);
  g_main_context_pop_thread_default (self->context);
  return node;
}

/* Evaluates @expression every 100 ms until it gives a non-empty string. */
char *
dc_chromium_wait_string (DcChromium  *self,
                         const char  *expression,
                         guint        timeout_ms,
                         GError     **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  char *text = NULL;

  g_main_context_push_thread_default (self->context);
  for (;;)
    {
      g_autoptr(JsonNode) node = evaluate (self, expression, FALSE, timeout_ms, error);
      gint64 pause;

      if (node == NULL)
        break;
      if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING
          && *json_node_get_string (node) != '\0')
        {
          text = json_node_dup_string (node);
          break;
        }
      if (g_get_monotonic_time () >= deadline)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                       "the page did not give “%s” within %u s", expression, timeout_ms / 1000);
          break;
        }
      pause = g_get_monotonic_time () + 100000;
      while (g_get_monotonic_time () < pause && !self->closed)
        iterate (self);
    }
  g_main_context_pop_thread_default (self->context);
  return text;
}

/* A PNG of the page at @width × @height CSS pixels (a phone when @mobile). */
gboolean
dc_chromium_screenshot (DcChromium  *self,
                        guint        width,
                        guint        height,
                        gboolean     mobile,
                        const char  *png_path,
                        guint        timeout_ms,
                        GError     **error)
{
  g_autoptr(JsonObject) metrics = json_object_new ();
  g_autoptr(JsonObject) shot = json_object_new ();
  g_autoptr(JsonObject) r1 = NULL, result = NULL;
  g_autoptr(JsonNode) frame = NULL;
  g_autofree guchar *png = NULL;
  gsize png_len = 0;
  const char *data;
  gboolean ok = FALSE;

  if (self->bidi)
    {
      g_autoptr(JsonObject) viewport = json_object_new ();

      /* BiDi has no mobile emulation; the width alone makes the layout. */
      json_object_set_int_member (viewport, "width", width);
      json_object_set_int_member (viewport, "height", height);
      json_object_set_string_member (metrics, "context", self->bidi_context);
      json_object_set_object_member (metrics, "viewport", g_steal_pointer (&viewport));
      json_object_set_double_member (metrics, "devicePixelRatio", 1);
      json_object_set_string_member (shot, "context", self->bidi_context);
    }
  else
    {
      json_object_set_int_member (metrics, "width", width);
      json_object_set_int_member (metrics, "height", height);
      json_object_set_double_member (metrics, "deviceScaleFactor", 1);
      json_object_set_boolean_member (metrics, "mobile", mobile);
      json_object_set_string_member (shot, "format", "png");
    }
  g_main_context_push_thread_default (self->context);
  if ((r1 = call (self, self->page_session,
                  self->bidi ? "browsingContext.setViewport" : "Emulation.setDeviceMetricsOverride",
                  metrics, timeout_ms, error)) == NULL)
    goto out;
  /* Two animation frames: the new size is laid out and painted. */
  frame = evaluate (self, "new Promise (r => requestAnimationFrame (() => "
                          "requestAnimationFrame (() => r (1))))", TRUE, timeout_ms, error);
  if (frame == NULL)
    goto out;
  if ((result = call (self, self->page_session,
                      self->bidi ? "browsingContext.captureScreenshot" : "Page.captureScreenshot",
                      shot, timeout_ms, error)) == NULL)
    goto out;
  data = json_object_get_string_member_with_default (result, "data", NULL);
  if (data == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s sent no screenshot",
                   self->name);
      goto out;
    }
  png = g_base64_decode (data, &png_len);
  ok = g_file_set_contents (png_path, (const char *) png, png_len, error);
out:
  g_main_context_pop_thread_default (self->context);
  return ok;
}

/* Emulates prefers-color-scheme: dark (or light) for the page. */
gboolean
dc_chromium_set_dark (DcChromium  *self,
                      gboolean     dark,
                      guint        timeout_ms,
                      GError     **error)
{
  g_autoptr(JsonObject) params = json_object_new ();
  g_autoptr(JsonObject) feature = json_object_new ();
  g_autoptr(JsonArray) features = json_array_new ();
  g_autoptr(JsonObject) result = NULL;

  if (self->bidi)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   "Firefox's WebDriver BiDi cannot emulate a dark colour scheme");
      return FALSE;
    }
  json_object_set_string_member (feature, "name", "prefers-color-scheme");
  json_object_set_string_member (feature, "value", dark ? "dark" : "light");
  json_array_add_object_element (features, g_steal_pointer (&feature));
  json_object_set_array_member (params, "features", g_steal_pointer (&features));
  g_main_context_push_thread_default (self->context);
  result = call (self, self->page_session, "Emulation.setEmulatedMedia", params, timeout_ms, error);
  g_main_context_pop_thread_default (self->context);
  return result != NULL;
}

gboolean
dc_chromium_is_firefox (DcChromium *self)
{
  return self->bidi;
}

/* Every URL the page and its workers requested so far (borrowed). */
GPtrArray *
dc_chromium_get_requests (DcChromium *self)
{
  return self->requests;
}

/* Console lines and uncaught exceptions of the page (borrowed). */
GPtrArray *
dc_chromium_get_console (DcChromium *self)
{
  return self->console;
}

void
dc_chromium_free (DcChromium *self)
{
  if (self == NULL)
    return;
  g_main_context_push_thread_default (self->context);
  if (self->socket != NULL && !self->closed)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonObject) result = NULL;

      /* Best effort: a browser that does not answer is killed below. */
      result = call (self, NULL, self->bidi ? "browser.close" : "Browser.close", NULL, 5000, &error);
      if (result == NULL)
        g_debug ("closing the browser: %s", error->message);
    }
  if (self->process != NULL)
    {
      const char *id = g_subprocess_get_identifier (self->process);
      gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

      while (g_subprocess_get_identifier (self->process) != NULL
             && g_get_monotonic_time () < deadline)
        iterate (self);
      /* Whatever is left of its process group (renderers, helpers) ends now. */
      id = g_subprocess_get_identifier (self->process);
      if (id != NULL)
        {
          pid_t pid = (pid_t) g_ascii_strtoll (id, NULL, 10);

          if (pid > 0)
            kill (-pid, SIGKILL);
          g_subprocess_force_exit (self->process);
          g_subprocess_wait (self->process, NULL, NULL);
        }
    }
  if (self->socket != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->socket, self);
      if (soup_websocket_connection_get_state (self->socket) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close (self->socket, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    }
  g_clear_object (&self->socket);
  g_clear_object (&self->session);
  while (g_main_context_iteration (self->context, FALSE))
    ;
  g_main_context_pop_thread_default (self->context);
  g_clear_object (&self->process);
  if (self->profile != NULL)
    remove_tree (self->profile);
  g_free (self->profile);
  g_free (self->page_session);
  g_free (self->bidi_context);
  g_hash_table_unref (self->replies);
  g_ptr_array_unref (self->requests);
  g_ptr_array_unref (self->console);
  g_main_context_unref (self->context);
  g_free (self);
}
