/* dc-test-proc.c: daisychain-cli child processes whose --json lines a test reads.
 *
 * Children die with the test (PR_SET_PDEATHSIG), so a failed assertion leaves
 * no process behind holding the test's output open. Every wait has a deadline.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-test-proc.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

#include "dc-test-utils.h"

static void read_next (DcTestProc *proc);

static void
line_cb (GObject      *object,
         GAsyncResult *result,
         gpointer      user_data)
{
  DcTestProc *proc = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();

  line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (object), result, NULL,
                                                     &error);
  if (line == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        proc->eof = TRUE;
      return;
    }
  g_test_message ("%s: %s", proc->label, line);
  if (json_parser_load_from_data (parser, line, -1, NULL)
      && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      gint64 now = g_get_monotonic_time ();

      g_ptr_array_add (proc->events, json_object_ref (json_node_get_object (
                                                        json_parser_get_root (parser))));
      g_ptr_array_add (proc->times, g_memdup2 (&now, sizeof now));
    }
  read_next (proc);
}

static void
read_next (DcTestProc *proc)
{
  g_data_input_stream_read_line_async (proc->lines, G_PRIORITY_DEFAULT, proc->cancellable,
                                       line_cb, proc);
}

static void
wait_cb (GObject      *object,
         GAsyncResult *result,
         gpointer      user_data)
{
  DcTestProc *proc = user_data;

  if (g_subprocess_wait_finish (G_SUBPROCESS (object), result, NULL))
    {
      proc->exited = TRUE;
      proc->exit_status = g_subprocess_get_if_exited (proc->process)
                          ? g_subprocess_get_exit_status (proc->process) : -1;
      /* A status of -1 alone does not say what happened (an abort from a
       * fatal warning, a crash, the test's own kill). */
      if (g_subprocess_get_if_signaled (proc->process))
        g_test_message ("%s: killed by signal %d (%s)", proc->label,
                        g_subprocess_get_term_sig (proc->process),
                        g_strsignal (g_subprocess_get_term_sig (proc->process)));
    }
}

/* In the child before exec: die with the test. */
static void
child_setup (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/**
 * dc_test_proc_spawn:
 * @netns: (nullable): a network namespace to run in (`ip netns exec`)
 * @args: (array zero-terminated=1): the arguments after the program name
 *
 * Runs the build tree's daisychain-cli and starts reading its stdout lines.
 */
DcTestProc *
dc_test_proc_spawn (const char         *label,
                    const char         *netns,
                    gboolean            with_stdin,
                    const char * const *args)
{
  DcTestProc *proc = g_new0 (DcTestProc, 1);
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GError) error = NULL;

  if (netns != NULL)
    {
      g_ptr_array_add (argv, g_strdup ("ip"));
      g_ptr_array_add (argv, g_strdup ("netns"));
      g_ptr_array_add (argv, g_strdup ("exec"));
      g_ptr_array_add (argv, g_strdup (netns));
    }
  g_ptr_array_add (argv, dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);

  proc->label = g_strdup (label);
  proc->events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  proc->times = g_ptr_array_new_with_free_func (g_free);
  proc->cancellable = g_cancellable_new ();
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                        | (with_stdin ? G_SUBPROCESS_FLAGS_STDIN_PIPE : 0));
  g_subprocess_launcher_set_child_setup (launcher, child_setup, NULL, NULL);
  proc->process = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata,
                                                &error);
  g_assert_no_error (error);
  proc->lines = g_data_input_stream_new (g_subprocess_get_stdout_pipe (proc->process));
  read_next (proc);
  g_subprocess_wait_async (proc->process, proc->cancellable, wait_cb, proc);
  return proc;
}

void
dc_test_proc_write (DcTestProc *proc,
                    const char *text)
{
  g_autoptr(GError) error = NULL;

  g_output_stream_write_all (g_subprocess_get_stdin_pipe (proc->process), text, strlen (text),
                             NULL, NULL, &error);
  g_assert_no_error (error);
}

void
dc_test_proc_free (DcTestProc *proc)
{
  if (proc == NULL)
    return;
  if (!proc->exited)
    {
      g_subprocess_force_exit (proc->process);
      g_subprocess_wait (proc->process, NULL, NULL);
    }
  g_cancellable_cancel (proc->cancellable);
  /* Let the cancelled callbacks run before their data goes. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_clear_object (&proc->lines);
  g_clear_object (&proc->process);
  g_clear_object (&proc->cancellable);
  g_ptr_array_unref (proc->events);
  g_ptr_array_unref (proc->times);
  g_free (proc->label);
  g_free (proc);
}

/* Index of the first event named @event (and naming @peer, when given)
 * from @from on, or -1. */
int
dc_test_proc_find (DcTestProc *proc,
                   guint       from,
                   const char *event,
                   const char *peer)
{
  for (guint i = from; i < proc->events->len; i++)
    {
      JsonObject *o = g_ptr_array_index (proc->events, i);

      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), event) == 0
          && (peer == NULL
              || g_strcmp0 (json_object_get_string_member_with_default (o, "peer", ""),
                            peer) == 0))
        return (int) i;
    }
  return -1;
}

typedef struct
{
  DcTestProc *proc;
  const char *event;
  const char *peer;
} FindWait;

static gboolean
found_cb (gpointer user_data)
{
  FindWait *wait = user_data;

  return dc_test_proc_find (wait->proc, 0, wait->event, wait->peer) >= 0 || wait->proc->eof;
}

/**
 * dc_test_proc_expect:
 *
 * Waits for an event; fails the test after @timeout_ms or when the child's
 * output ends without it.
 *
 * Returns: (transfer none): the event
 */
JsonObject *
dc_test_proc_expect (DcTestProc *proc,
                     const char *event,
                     const char *peer,
                     guint       timeout_ms)
{
  FindWait wait = { proc, event, peer };
  int index;

  dc_test_wait_until (found_cb, &wait, timeout_ms);
  index = dc_test_proc_find (proc, 0, event, peer);
  if (index < 0)
    g_error ("%s: no “%s” event%s%s within %u ms", proc->label, event, peer ? " for " : "",
             peer ? peer : "", timeout_ms);
  return g_ptr_array_index (proc->events, index);
}

/* A condition for dc_test_wait_until (). */
gboolean
dc_test_proc_exited (gpointer proc)
{
  return ((DcTestProc *) proc)->exited;
}

int
dc_test_proc_expect_exit (DcTestProc *proc,
                          guint       timeout_ms)
{
  if (!dc_test_wait_until (dc_test_proc_exited, proc, timeout_ms))
    g_error ("%s: still running after %u ms", proc->label, timeout_ms);
  return proc->exit_status;
}

static DcTestProc *
spawn_va (const char *label,
          GPtrArray  *argv,
          va_list     args)
{
  const char *arg;

  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  g_ptr_array_add (argv, NULL);
  return dc_test_proc_spawn (label, NULL, FALSE, (const char * const *) argv->pdata);
}

/**
 * dc_test_proc_spawn_args:
 * @label: the child's name in the test log
 * @...: daisychain-cli's arguments, then %NULL
 *
 * dc_test_proc_spawn () with the arguments as a list (no stdin, no netns).
 */
DcTestProc *
dc_test_proc_spawn_args (const char *label,
                         ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  DcTestProc *proc;
  va_list args;

  va_start (args, label);
  proc = spawn_va (label, argv, args);
  va_end (args);
  return proc;
}

/**
 * dc_test_proc_start_signal:
 * @out: (out): the signaling service's process
 *
 * A signaling service on 127.0.0.1 and a port of its own choosing.
 *
 * Returns: (transfer full): its URL
 */
char *
dc_test_proc_start_signal (DcTestProc **out)
{
  DcTestProc *proc = dc_test_proc_spawn_args ("signal", "signal", "--json", "--port", "0",
                                              "--bind", "127.0.0.1", NULL);
  JsonObject *listening = dc_test_proc_expect (proc, "listening", NULL,
                                               DC_TEST_PROC_EVENT_BOUND_MS);

  *out = proc;
  return g_strdup (json_object_get_string_member (listening, "url"));
}

/**
 * dc_test_proc_start_host_with:
 * @room: (out): the room code it made
 * @...: its training flags (size, steps, threads, wire…), then %NULL
 *
 * The room's host, "alpha", which starts the run at seed 11 with the given
 * training flags, stopping after @stop_at, once @min_peers devices are
 * there. Returns once it has created the room, so that others may ask to
 * join it.
 */
DcTestProc *
dc_test_proc_start_host_with (const char  *url,
                              const char  *stop_at,
                              const char  *min_peers,
                              char       **room,
                              ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  const char *base[] = { "train", "--json", "--signal", url, "--name", "alpha",
                         "--approve", "all", "--ice-address", "127.0.0.1", "--seed", "11",
                         "--min-peers", min_peers, "--stop-at", stop_at };
  DcTestProc *proc;
  JsonObject *event;
  va_list args;

  for (guint i = 0; i < G_N_ELEMENTS (base); i++)
    g_ptr_array_add (argv, (gpointer) base[i]);
  va_start (args, room);
  proc = spawn_va ("alpha", argv, args);
  va_end (args);
  event = dc_test_proc_expect (proc, "room", NULL, DC_TEST_PROC_EVENT_BOUND_MS);
  *room = g_strdup (json_object_get_string_member (event, "room"));
  dc_test_proc_expect (proc, "joined", NULL, DC_TEST_PROC_EVENT_BOUND_MS);
  return proc;
}

/**
 * dc_test_proc_start_host:
 * @room: (out): the room code it made
 *
 * dc_test_proc_start_host_with () at the smallest model (width 16,
 * sequence 16, batch 2, 100 steps, one thread).
 */
DcTestProc *
dc_test_proc_start_host (const char  *url,
                         const char  *stop_at,
                         const char  *min_peers,
                         char       **room)
{
  return dc_test_proc_start_host_with (url, stop_at, min_peers, room, "--width", "16",
                                       "--seq", "16", "--batch", "2", "--steps", "100",
                                       "--threads", "1", NULL);
}

/**
 * dc_test_proc_start_follower:
 * @...: more arguments (its own training flags), then %NULL
 *
 * A device @name joining @room on 127.0.0.1, stopping after @stop_at.
 */
DcTestProc *
dc_test_proc_start_follower (const char *url,
                             const char *room,
                             const char *name,
                             const char *stop_at,
                             ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  const char *base[] = { "train", "--json", "--signal", url, "--room", room, "--name", name,
                         "--ice-address", "127.0.0.1", "--stop-at", stop_at };
  DcTestProc *proc;
  va_list args;

  for (guint i = 0; i < G_N_ELEMENTS (base); i++)
    g_ptr_array_add (argv, (gpointer) base[i]);
  va_start (args, stop_at);
  proc = spawn_va (name, argv, args);
  va_end (args);
  return proc;
}

/**
 * dc_test_proc_steps:
 * @retakes: whether a step may be printed again (after a rollback); the
 *   last line of a step counts. Without it, a second line fails the test.
 *
 * Returns: (transfer container): @proc's step events indexed by step
 *   (1-based; %NULL where none)
 */
GPtrArray *
dc_test_proc_steps (DcTestProc *proc,
                    gboolean    retakes)
{
  GPtrArray *steps = g_ptr_array_new ();

  for (guint i = 0; i < proc->events->len; i++)
    {
      JsonObject *o = g_ptr_array_index (proc->events, i);
      gint64 step;

      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), "step") != 0)
        continue;
      step = json_object_get_int_member (o, "step");
      g_assert_cmpint (step, >=, 1);
      g_assert_cmpint (step, <=, 10000);
      if ((guint) step >= steps->len)
        g_ptr_array_set_size (steps, step + 1);
      if (!retakes)
        g_assert_null (g_ptr_array_index (steps, step));
      g_ptr_array_index (steps, step) = o;
    }
  return steps;
}

/* The event of @step in dc_test_proc_steps ()' array; fails when none. */
JsonObject *
dc_test_proc_step_at (GPtrArray *steps,
                      guint      step)
{
  g_assert_cmpuint (step, <, steps->len);
  g_assert_nonnull (g_ptr_array_index (steps, step));
  return g_ptr_array_index (steps, step);
}

const char *
dc_test_proc_hash_at (GPtrArray *steps,
                      guint      step)
{
  return json_object_get_string_member (dc_test_proc_step_at (steps, step), "hash");
}

/* Waits for @proc's "done" event at @step (within @timeout_ms), then for
 * its exit with status 0. */
void
dc_test_proc_wait_done (DcTestProc *proc,
                        guint       step,
                        guint       timeout_ms)
{
  JsonObject *done = dc_test_proc_expect (proc, "done", NULL, timeout_ms);

  g_assert_cmpint (json_object_get_int_member (done, "step"), ==, step);
  g_assert_cmpint (dc_test_proc_expect_exit (proc, DC_TEST_PROC_EVENT_BOUND_MS), ==, 0);
}

/* Whether @event's "message" contains @text. */
gboolean
dc_test_proc_message_has (JsonObject *event,
                          const char *text)
{
  return strstr (json_object_get_string_member_with_default (event, "message", ""), text)
         != NULL;
}
