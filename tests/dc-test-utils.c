/* dc-test-utils.c: waiting with a deadline, paths, child processes.
 *
 * Tests never hang: every wait has a timeout that fails the test.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-test-utils.h"

#include <glib/gstdio.h>


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
