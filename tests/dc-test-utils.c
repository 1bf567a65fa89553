/* dc-test-utils.c: waiting with a deadline, paths, child processes.
 *
 * Tests never hang: every wait has a timeout that fails the test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-test-utils.h"

#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>


static gboolean
timeout_cb (gpointer user_data)
{
  gboolean *timed_out = user_data;

  *timed_out = TRUE;
  return G_SOURCE_REMOVE;
}

/**
 * dc_test_wait_until:
 *
 * Iterates the thread-default main context until @condition returns %TRUE or
 * @timeout_ms passes.
 *
 * Returns: whether the condition became true in time
 */
gboolean
dc_test_wait_until (DcTestCondition condition,
                    gpointer        user_data,
                    guint           timeout_ms)
{
  GMainContext *context = g_main_context_get_thread_default ();
  gboolean timed_out = FALSE;
  GSource *source;

  source = g_timeout_source_new (timeout_ms);
  g_source_set_callback (source, timeout_cb, &timed_out, NULL);
  g_source_attach (source, context);

  while (!condition (user_data) && !timed_out)
    g_main_context_iteration (context, TRUE);

  g_source_destroy (source);
  g_source_unref (source);
  return !timed_out || condition (user_data);
}

/**
 * dc_test_run_ip:
 *
 * Runs iproute2's `ip` with @command_line split at spaces (no quoting: the
 * tests' own namespace and link names), 10 s at most.
 *
 * Returns: whether it ran and exited 0
 */
gboolean
dc_test_run_ip (const char *command_line)
{
  g_autofree char *full = g_strdup_printf ("ip %s", command_line);
  g_auto(GStrv) argv = g_strsplit (full, " ", -1);
  int status = -1;

  if (!dc_test_spawn ((const char * const *) argv, NULL, NULL, &status, 10000))
    return FALSE;
  return status == 0;
}

static gboolean
pointer_cleared (gpointer user_data)
{
  return *(gpointer *) user_data == NULL;
}

/**
 * dc_test_finalize_object:
 *
 * Drops the caller's reference to @object and fails the test unless it is
 * finalized within @timeout_ms while the thread-default main context runs.
 * Unlike g_assert_finalize_object (), this lets the completions of work the
 * object started (a GTask's callback holding it) run first: they end on
 * the main context, just after the object's owner let go. A leak still
 * fails.
 */
void
dc_test_finalize_object (gpointer object,
                         guint    timeout_ms)
{
  gpointer weak = object;

  g_assert_true (G_IS_OBJECT (object));
  g_object_add_weak_pointer (object, &weak);
  g_object_unref (object);
  if (!dc_test_wait_until (pointer_cleared, &weak, timeout_ms))
    g_error ("a %s was not finalized within %u ms of its last owner's unref",
             G_OBJECT_TYPE_NAME (weak), timeout_ms);
}

static char *
build_path_va (const char *root,
               const char *first_element,
               va_list     args)
{
  g_autoptr(GPtrArray) parts = g_ptr_array_new ();
  const char *element;

  g_ptr_array_add (parts, (gpointer) root);
  for (element = first_element; element != NULL; element = va_arg (args, const char *))
    g_ptr_array_add (parts, (gpointer) element);
  g_ptr_array_add (parts, NULL);
  return g_build_filenamev ((char **) parts->pdata);
}

/* Paths in the source tree: G_TEST_SRCDIR is tests/; its parent is the root. */
char *
dc_test_dup_source_path (const char *first_element,
                         ...)
{
  const char *srcdir = g_getenv ("DC_SOURCE_ROOT");
  va_list args;
  char *path;

  g_assert_nonnull (srcdir);
  va_start (args, first_element);
  path = build_path_va (srcdir, first_element, args);
  va_end (args);
  return path;
}

char *
dc_test_dup_build_path (const char *first_element,
                        ...)
{
  const char *builddir = g_getenv ("DC_BUILD_ROOT");
  va_list args;
  char *path;

  g_assert_nonnull (builddir);
  va_start (args, first_element);
  path = build_path_va (builddir, first_element, args);
  va_end (args);
  return path;
}

typedef struct
{
  gboolean  done;
  GBytes   *out;
  GBytes   *err;
  GError   *error;
} SpawnWait;

static gboolean
spawn_done (gpointer user_data)
{
  SpawnWait *wait = user_data;

  return wait->done;
}

static void
communicate_cb (GObject      *object,
                GAsyncResult *result,
                gpointer      user_data)
{
  SpawnWait *wait = user_data;

  g_subprocess_communicate_finish (G_SUBPROCESS (object), result, &wait->out, &wait->err,
                                   &wait->error);
  wait->done = TRUE;
}

static char *
bytes_to_string (GBytes *bytes)
{
  if (bytes == NULL)
    return g_strdup ("");
  return g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
}

/**
 * dc_test_spawn:
 * @stdout_text: (out) (optional): what the program printed on stdout
 * @stderr_text: (out) (optional): what it printed on stderr
 * @exit_status: (out) (optional): its exit status, or -1 when a signal ended it
 *
 * Runs a program to completion with a deadline, collecting its output. A
 * program that outlives the deadline is killed and the function returns
 * %FALSE.
 */
gboolean
dc_test_spawn (const char * const  *argv,
               char               **stdout_text,
               char               **stderr_text,
               int                 *exit_status,
               guint                timeout_ms)
{
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GMainContext) context = g_main_context_new ();
  SpawnWait wait = { 0 };
  gboolean finished;

  g_main_context_push_thread_default (context);

  process = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                                     G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  g_assert_no_error (error);

  g_subprocess_communicate_async (process, NULL, NULL, communicate_cb, &wait);
  finished = dc_test_wait_until (spawn_done, &wait, timeout_ms);
  if (!finished)
    {
      g_subprocess_force_exit (process);
      dc_test_wait_until (spawn_done, &wait, 5000);
    }
  g_main_context_pop_thread_default (context);

  g_assert_no_error (wait.error);
  if (finished)
    {
      g_subprocess_wait (process, NULL, &error);
      g_assert_no_error (error);
    }

  if (exit_status != NULL)
    *exit_status = g_subprocess_get_if_exited (process) ? g_subprocess_get_exit_status (process)
                                                        : -1;
  if (stdout_text != NULL)
    *stdout_text = bytes_to_string (wait.out);
  if (stderr_text != NULL)
    *stderr_text = bytes_to_string (wait.err);
  g_clear_pointer (&wait.out, g_bytes_unref);
  g_clear_pointer (&wait.err, g_bytes_unref);
  return finished;
}

/**
 * dc_test_closed_port:
 *
 * Returns: a TCP port on 127.0.0.1 where nothing listens (bound once to learn
 *   a free one, then closed), for "the server is unreachable" cases
 */
guint16
dc_test_closed_port (void)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
                                            G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  guint16 port;

  g_assert_nonnull (socket);
  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  g_socket_close (socket, NULL);
  return port;
}

/**
 * dc_test_run_cli:
 * @args: (array zero-terminated=1): the arguments after the program name
 *
 * Runs the build tree's daisychain-cli to completion (a run past
 * @timeout_ms fails the test).
 *
 * Returns: its exit status, or -1 when a signal ended it
 */
int
dc_test_run_cli (const char * const  *args,
                 char               **stdout_text,
                 char               **stderr_text,
                 guint                timeout_ms)
{
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  int status = -1;

  g_ptr_array_add (argv, cli);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);

  g_assert_true (dc_test_spawn ((const char * const *) argv->pdata, stdout_text, stderr_text,
                                &status, timeout_ms));
  return status;
}

/**
 * dc_test_remove_tree:
 *
 * Removes a test's temporary folder and everything in it (no symbolic links
 * are followed). A missing path is not an error.
 */
void
dc_test_remove_tree (const char *path)
{
  g_autoptr(GDir) dir = NULL;
  const char *name;

  if (!g_file_test (path, G_FILE_TEST_IS_DIR) || g_file_test (path, G_FILE_TEST_IS_SYMLINK))
    {
      g_remove (path);
      return;
    }
  dir = g_dir_open (path, 0, NULL);
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);

      dc_test_remove_tree (child);
    }
  g_rmdir (path);
}

/* The Vulkan driver manifest the gpu tests expect a device from, or NULL. */
static char *vulkan_driver;

/* Whether @path is a lavapipe manifest whose library this process can load:
 * Mesa names the file after the CPU (lvp_icd.x86_64.json) and several may be
 * installed side by side (multiarch); the one whose library lies in this
 * build's multiarch directory is ours. */
static gboolean
is_our_lavapipe (const char *path)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root;
  JsonObject *icd;
  const char *library;

  if (!json_parser_load_from_mapped_file (parser, path, NULL))
    return FALSE;
  root = json_parser_get_root (parser);
  if (!JSON_NODE_HOLDS_OBJECT (root))
    return FALSE;
  icd = json_object_get_object_member (json_node_get_object (root), "ICD");
  library = icd != NULL ? json_object_get_string_member_with_default (icd, "library_path", NULL)
                        : NULL;
  if (library == NULL)
    return FALSE;
  /* A bare name is found by the dynamic loader: trust the file name. */
  if (!g_path_is_absolute (library))
    {
      g_autofree char *expected = g_strdup_printf ("lvp_icd.%s.json", DC_TEST_CPU);
      g_autofree char *base = g_path_get_basename (path);

      return g_str_equal (base, expected);
    }
  if (!g_file_test (library, G_FILE_TEST_EXISTS))
    return FALSE;
  return DC_TEST_MULTIARCH[0] == '\0' || strstr (library, "/" DC_TEST_MULTIARCH "/") != NULL;
}

/**
 * dc_test_use_lavapipe:
 *
 * Points the Vulkan loader at Mesa's lavapipe (the gpu suite's device) when
 * the environment names no driver, looking for it now, when the test runs,
 * in the loader's search directories. Call it in main() after g_test_init()
 * and before any Vulkan call. A driver the user chose (VK_DRIVER_FILES or
 * VK_ICD_FILENAMES) is kept.
 *
 * Returns: (nullable): the driver manifest in use, or %NULL when none is
 *   installed (then dc_test_skip_without_vulkan() skips)
 */
const char *
dc_test_use_lavapipe (void)
{
  const char *chosen = g_getenv ("VK_DRIVER_FILES");
  const char * const *data_dirs = g_get_system_data_dirs ();
  g_autoptr(GPtrArray) dirs = g_ptr_array_new_with_free_func (g_free);

  if (chosen == NULL || *chosen == '\0')
    chosen = g_getenv ("VK_ICD_FILENAMES");
  if (chosen != NULL && *chosen != '\0')
    {
      g_free (vulkan_driver);
      vulkan_driver = g_strdup (chosen);
      g_test_message ("Vulkan driver chosen by the environment: %s", vulkan_driver);
      return vulkan_driver;
    }

  g_ptr_array_add (dirs, g_strdup ("/etc/vulkan/icd.d"));
  for (guint i = 0; data_dirs[i] != NULL; i++)
    g_ptr_array_add (dirs, g_build_filename (data_dirs[i], "vulkan", "icd.d", NULL));
  g_ptr_array_add (dirs, g_strdup ("/usr/share/vulkan/icd.d"));

  for (guint i = 0; i < dirs->len && vulkan_driver == NULL; i++)
    {
      g_autoptr(GDir) dir = g_dir_open (dirs->pdata[i], 0, NULL);
      const char *name;

      while (dir != NULL && vulkan_driver == NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *path = g_build_filename (dirs->pdata[i], name, NULL);

          if (g_str_has_prefix (name, "lvp_icd.") && g_str_has_suffix (name, ".json")
              && is_our_lavapipe (path))
            vulkan_driver = g_steal_pointer (&path);
        }
    }

  if (vulkan_driver == NULL)
    {
      g_test_message ("no lavapipe driver manifest (mesa-vulkan-drivers) for %s",
                      DC_TEST_MULTIARCH[0] != '\0' ? DC_TEST_MULTIARCH : DC_TEST_CPU);
      return NULL;
    }
  /* Both names: loaders before 1.3.207 read only the old one. */
  g_setenv ("VK_DRIVER_FILES", vulkan_driver, TRUE);
  g_setenv ("VK_ICD_FILENAMES", vulkan_driver, TRUE);
  g_test_message ("Vulkan driver: %s", vulkan_driver);
  return vulkan_driver;
}

/**
 * dc_test_skip_without_vulkan:
 * @reason: why no device could be used (the error's message)
 *
 * The only way a gpu test may give up for want of a device. Without any
 * Vulkan driver installed it skips (TAP and meson count a skip, never a
 * pass). With a driver installed (lavapipe found by dc_test_use_lavapipe(),
 * or one the environment chose) a missing device is a fault, so the test
 * fails: a gpu suite never skips everything where it could run.
 */
void
dc_test_skip_without_vulkan (const char *reason)
{
  if (vulkan_driver != NULL)
    g_test_fail_printf ("a Vulkan driver is configured (%s) but no device could be used: %s",
                        vulkan_driver, reason);
  else
    g_test_skip_printf ("no Vulkan driver is installed (mesa-vulkan-drivers provides "
                        "lavapipe): %s", reason);
}

/* ---- a local Hub ---------------------------------------------------------- */

struct _DcTestHub
{
  GMainContext *context;
  GMainLoop    *loop;
  GThread      *thread;
  GMutex        lock;
  GCond         cond;
  char         *url;
  guint64       weight_bytes;   /* bytes of ranges past a safetensors header */
  guint         full_files;     /* 200 answers of a safetensors file */
  gboolean      ignore_ranges;  /* answer every Range with the whole file */
};

static guint64
header_end (const char *contents,
            gsize       len)
{
  guint64 n = 0;

  if (len < 8)
    return 0;
  for (int i = 7; i >= 0; i--)
    n = (n << 8) | (guint8) contents[i];
  return 8 + n;
}

static void
hub_handler (SoupServer        *server,
             SoupServerMessage *msg,
             const char        *path,
             GHashTable        *query,
             gpointer           user_data)
{
  DcTestHub *hub = user_data;
  g_auto(GStrv) parts = g_strsplit (path + 1, "/", -1);
  g_autofree char *file = NULL;
  g_autofree char *contents = NULL;
  SoupMessageHeaders *request = soup_server_message_get_request_headers (msg);
  SoupRange *ranges = NULL;
  int n_ranges = 0;
  gsize len;

  if (g_strv_length (parts) != 5 || !g_str_equal (parts[2], "resolve")
      || strchr (parts[1], '.') != NULL || strchr (parts[4], '/') != NULL
      || parts[4][0] == '.')
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  file = dc_test_dup_source_path ("tests", "data", "hf", "models", parts[1], parts[4], NULL);
  if (!g_file_get_contents (file, &contents, &len, NULL))
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  if (g_str_has_suffix (parts[4], ".safetensors"))
    {
      g_mutex_lock (&hub->lock);
      if (hub->ignore_ranges)
        soup_message_headers_remove (request, "Range");
      if (soup_message_headers_get_ranges (request, (goffset) len, &ranges, &n_ranges))
        {
          for (int i = 0; i < n_ranges; i++)
            if ((guint64) ranges[i].start >= header_end (contents, len))
              hub->weight_bytes += (guint64) (ranges[i].end - ranges[i].start + 1);
          soup_message_headers_free_ranges (request, ranges);
        }
      else
        hub->full_files++;
      g_mutex_unlock (&hub->lock);
    }
  /* SoupServer applies the Range header itself to a complete body. */
  soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                "Accept-Ranges", "bytes");
  soup_message_body_append (soup_server_message_get_response_body (msg), SOUP_MEMORY_TAKE,
                            g_steal_pointer (&contents), len);
  soup_server_message_set_status (msg, 200, NULL);
}

static gpointer
hub_thread (gpointer data)
{
  DcTestHub *hub = data;
  g_autoptr(GInetAddress) inet = g_inet_address_new_from_string ("127.0.0.1");
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (inet, 0);
  g_autoptr(SoupServer) server = NULL;
  g_autoptr(GError) error = NULL;
  GSList *uris;

  g_main_context_push_thread_default (hub->context);
  server = soup_server_new (NULL, NULL);
  soup_server_add_handler (server, "/", hub_handler, hub, NULL);
  soup_server_listen (server, address, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (server);
  g_mutex_lock (&hub->lock);
  hub->url = g_uri_to_string (uris->data);
  if (g_str_has_suffix (hub->url, "/"))
    hub->url[strlen (hub->url) - 1] = '\0';
  g_cond_signal (&hub->cond);
  g_mutex_unlock (&hub->lock);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  g_main_loop_run (hub->loop);
  soup_server_disconnect (server);
  g_main_context_pop_thread_default (hub->context);
  return NULL;
}

/**
 * dc_test_hub_start:
 * @ignore_ranges: answer every Range request with the whole file (a faulty server)
 *
 * A local Hub on loopback, served on a thread of its own:
 * /OWNER/NAME/resolve/REV/FILE is tests/data/hf/models/NAME/FILE, byte
 * ranges applied by the server. It counts the weight bytes it sends.
 *
 * Returns: (transfer full): the running Hub; dc_test_hub_stop() ends it
 */
DcTestHub *
dc_test_hub_start (gboolean ignore_ranges)
{
  DcTestHub *hub = g_new0 (DcTestHub, 1);

  hub->ignore_ranges = ignore_ranges;
  g_mutex_init (&hub->lock);
  g_cond_init (&hub->cond);
  hub->context = g_main_context_new ();
  hub->loop = g_main_loop_new (hub->context, FALSE);
  hub->thread = g_thread_new ("local-hub", hub_thread, hub);
  g_mutex_lock (&hub->lock);
  while (hub->url == NULL)
    g_cond_wait (&hub->cond, &hub->lock);
  g_mutex_unlock (&hub->lock);
  return hub;
}

/* Its base URL, for HF_ENDPOINT (no trailing slash). */
const char *
dc_test_hub_get_url (DcTestHub *hub)
{
  return hub->url;
}

/* Weight bytes sent as ranges past the header; a whole weight file sent
 * (a request without a range) fails the test. */
guint64
dc_test_hub_get_weight_bytes (DcTestHub *hub)
{
  guint64 n;

  g_mutex_lock (&hub->lock);
  n = hub->weight_bytes;
  g_assert_cmpuint (hub->full_files, ==, 0);
  g_mutex_unlock (&hub->lock);
  return n;
}

static gboolean
hub_quit_cb (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

void
dc_test_hub_stop (DcTestHub *hub)
{
  GSource *source = g_idle_source_new ();

  /* Attached to the server thread's context, never invoked: the quit runs
   * there (docs: PLATFORM-NOTES, g_main_context_invoke runs at once when
   * nobody owns the context). */
  g_source_set_callback (source, hub_quit_cb, hub->loop, NULL);
  g_source_attach (source, hub->context);
  g_source_unref (source);
  g_thread_join (hub->thread);
  g_main_loop_unref (hub->loop);
  g_main_context_unref (hub->context);
  g_mutex_clear (&hub->lock);
  g_cond_clear (&hub->cond);
  g_free (hub->url);
  g_free (hub);
}
