/* dc-cli-bench-group.c: `daisychain-cli bench group`, where a group's step
 * time goes (compute, send, wait, combine) for 1–N devices, next to one
 * device training alone in the same run.
 *
 * Every device is a child process of this binary running `train --room …
 * --ice-address …`; the signaling service is one more (`signal`). The first
 * device creates the room and starts the run. On loopback by default; with
 * --netns (root, `ip`, `tc`) each device, and the signaling service, gets a
 * network namespace of its own, joined by veth pairs to a switch in
 * another namespace, each link shaped with netem to 1 Gbit/s and 1 ms, or
 * where the kernel has no netem with tbf to 1 Gbit/s and the delay hub's
 * 1 ms in place of the bridge (dc-cli-netns.c; a note says which).
 * Addresses come from 198.18.0.0/15 (RFC 2544, for benchmarks) and exist
 * only inside those namespaces, which are removed at the end, on failure
 * and on Ctrl+C alike.
 *
 * Times: step_ms is the wall time between the first device's step lines
 * after a warm-up step, as this process sees them; the four parts are the
 * devices' own (their step lines' *_ms), averaged over devices and steps.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"
/* sched_setaffinity, CPU_SET */
#define _GNU_SOURCE

#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <glib/gi18n.h>
#include <glib-unix.h>

#include "dc-cli.h"
#include "dc-cli-netns.h"
#include "model/dc-gpt-config.h"

/* Devices per run: one process each with a full model, on one host; past 8
 * the machine, not the group, is measured (and 198.18.0.1–8 stay in a /24). */
#define BENCH_GROUP_DEVICES_MAX  8
/* Measured steps per run: enough for a stable mean; 1000 at the large size
 * would already take hours on a small machine. */
#define BENCH_GROUP_STEPS_MAX    1000
/* A run whose processes print nothing for this long is stuck: longer than
 * the coordinator's own wait (DC_TRAIN_GROUP_WAIT_S, 120 s) so that its
 * timeout message, not ours, says who stalled. */
#define BENCH_GROUP_SILENCE_S    180

/* --netns: the signaling service's address (the devices': 198.18.0.(k + 1)). */
#define NETNS_SIGNAL_ADDRESS "198.18.0.254"

typedef struct
{
  guint width, seq, batch;
} Size;

static const Size default_sizes[] = {
  { 32, 32, 8 },     /* the seeds' default */
  { 128, 128, 32 },  /* the large size */
};

/* One child process and the JSON lines it printed so far. */
typedef struct
{
  GSubprocess      *process;
  GDataInputStream *lines;
  GPtrArray        *events;   /* JsonObject* */
  GArray           *times;    /* gint64 monotonic µs per event */
  GCancellable     *cancellable;
  gboolean          eof;
  gint64           *last_event;
  char             *cpus;     /* the cores it may run on, read back ("0-3,8") */
  FILE             *copy;     /* DC_BENCH_GROUP_LOGS: its event lines, as printed */
} Child;

typedef struct
{
  gboolean  netns;
  const char *gradient_wire;  /* the starter's --gradient-wire: "f32", "bf16" or "int8" */
  gint64    seed;             /* --seed: the run every lone device and every group trains */
  char     *prefix;           /* namespace names: PREFIX-br, PREFIX-d0 … */
  DcCliNetns shaped;          /* the namespaces, links and switch (dc-cli-netns.c) */
  gboolean  interrupted;
  gint64    last_event;
  char     *self_exe;
  gboolean  pin;              /* --pin-cores: device k on cores [k·threads, (k+1)·threads) */
} Bench;

static void read_next (Child *child);

static void
child_free (Child *child)
{
  /* A read still pending completes after this, cancelled: its callback
   * must not touch the freed child. */
  g_cancellable_cancel (child->cancellable);
  g_clear_pointer (&child->copy, fclose);
  if (child->process != NULL)
    {
      g_subprocess_force_exit (child->process);
      g_subprocess_wait (child->process, NULL, NULL);
    }
  g_clear_object (&child->cancellable);
  g_clear_object (&child->process);
  g_clear_object (&child->lines);
  g_clear_pointer (&child->events, g_ptr_array_unref);
  g_clear_pointer (&child->times, g_array_unref);
  g_free (child->cpus);
  g_free (child);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Child, child_free)

static void
line_cb (GObject      *object,
         GAsyncResult *result,
         gpointer      user_data)
{
  Child *child = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  gint64 now = g_get_monotonic_time ();

  line = g_data_input_stream_read_line_finish_utf8 (G_DATA_INPUT_STREAM (object), result, NULL,
                                                     &error);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (line == NULL)
    {
      child->eof = TRUE;
      return;
    }
  /* The train command's own lines are small; a line that does not parse is
   * not one of its events and is skipped. */
  if (json_parser_load_from_data (parser, line, -1, NULL)
      && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      if (child->copy != NULL)
        fprintf (child->copy, "%s\n", line);
      g_ptr_array_add (child->events,
                       json_object_ref (json_node_get_object (json_parser_get_root (parser))));
      g_array_append_val (child->times, now);
      *child->last_event = now;
    }
  read_next (child);
}

static void
read_next (Child *child)
{
  g_data_input_stream_read_line_async (child->lines, G_PRIORITY_DEFAULT, child->cancellable,
                                       line_cb, child);
}

/* Runs this binary with @args, inside namespace @netns when not NULL. */
/* The cores process @pid may run on, as a list ("0-3,8"), read back from
 * the kernel; NULL when it cannot be read. */
static char *
read_cpus (const char *pid)
{
  cpu_set_t set;
  GString *list;
  int first = -1;

  if (pid == NULL || sched_getaffinity ((pid_t) g_ascii_strtoll (pid, NULL, 10), sizeof set,
                                        &set) != 0)
    return NULL;
  list = g_string_new (NULL);
  for (int c = 0; c <= CPU_SETSIZE; c++)
    {
      gboolean in = c < CPU_SETSIZE && CPU_ISSET (c, &set);

      if (in && first < 0)
        first = c;
      else if (!in && first >= 0)
        {
          if (list->len > 0)
            g_string_append_c (list, ',');
          if (c - 1 == first)
            g_string_append_printf (list, "%d", first);
          else
            g_string_append_printf (list, "%d-%d", first, c - 1);
          first = -1;
        }
    }
  return g_string_free (list, FALSE);
}

/* In the child, before exec (--pin-cores): only a system call. */
static void
pin_child_setup (gpointer data)
{
  (void) sched_setaffinity (0, sizeof (cpu_set_t), data);
}

/* @n_cores cores from @first_core for a child of --pin-cores, or none (-1)
 * when the run's devices and threads do not fit in this machine's cores. */
static Child *
child_spawn_pinned (Bench       *bench,
                    const char  *netns,
                    GPtrArray   *args,
                    gint         first_core,
                    guint        n_cores,
                    GError     **error)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(Child) child = g_new0 (Child, 1);
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autofree cpu_set_t *cpus = NULL;
  const char *logs;

  child->cancellable = g_cancellable_new ();
  if (netns != NULL)
    {
      g_ptr_array_add (argv, "ip");
      g_ptr_array_add (argv, "netns");
      g_ptr_array_add (argv, "exec");
      g_ptr_array_add (argv, (gpointer) netns);
    }
  g_ptr_array_add (argv, bench->self_exe);
  for (guint i = 0; i < args->len; i++)
    g_ptr_array_add (argv, g_ptr_array_index (args, i));
  g_ptr_array_add (argv, NULL);

  /* DC_BENCH_GROUP_LOGS=DIR keeps each device's log (its renewals, its
   * stalls) as DIR/device-N.txt and its event lines (every step's phases)
   * as DIR/device-N.json, N counting the devices this bench made. */
  logs = g_getenv ("DC_BENCH_GROUP_LOGS");
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                       | (logs != NULL && *logs != '\0'
                                          ? 0 : G_SUBPROCESS_FLAGS_STDERR_SILENCE));
  if (logs != NULL && *logs != '\0')
    {
      static guint n_logged;
      guint n = n_logged++;
      g_autofree char *file = g_strdup_printf ("device-%u.txt", n);
      g_autofree char *path = g_build_filename (logs, file, NULL);
      g_autofree char *events_file = g_strdup_printf ("device-%u.json", n);
      g_autofree char *events = g_build_filename (logs, events_file, NULL);

      g_subprocess_launcher_set_stderr_file_path (launcher, path);
      /* A measuring aid: a file that cannot be made is no copy, not a failure. */
      child->copy = fopen (events, "w");
    }
  if (first_core >= 0 && n_cores > 0 && first_core + n_cores <= CPU_SETSIZE)
    {
      cpus = g_new0 (cpu_set_t, 1);
      for (guint c = 0; c < n_cores; c++)
        CPU_SET ((guint) first_core + c, cpus);
      g_subprocess_launcher_set_child_setup (launcher, pin_child_setup, cpus, NULL);
    }
  child->process = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata,
                                                 error);
  if (child->process == NULL)
    return NULL;
  child->cpus = read_cpus (g_subprocess_get_identifier (child->process));
  child->lines = g_data_input_stream_new (g_subprocess_get_stdout_pipe (child->process));
  child->events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  child->times = g_array_new (FALSE, FALSE, sizeof (gint64));
  child->last_event = &bench->last_event;
  read_next (child);
  return g_steal_pointer (&child);
}

static Child *
child_spawn (Bench       *bench,
             const char  *netns,
             GPtrArray   *args,
             GError     **error)
{
  return child_spawn_pinned (bench, netns, args, -1, 0, error);
}

/* --pin-cores: device @k of @n_devices on cores k × threads … (k + 1) ×
 * threads − 1, when all fit in the machine's processors; else -1 (the
 * kernel places every thread). */
static gint
first_core (Bench *bench,
            guint  k,
            guint  n_devices,
            guint  n_threads)
{
  return bench->pin && n_devices * n_threads <= g_get_num_processors ()
         ? (gint) (k * n_threads) : -1;
}

/* The first event @name of @child at or after @from, or -1. */
static int
child_find (Child      *child,
            guint       from,
            const char *name)
{
  for (guint i = from; i < child->events->len; i++)
    {
      JsonObject *o = g_ptr_array_index (child->events, i);

      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), name) == 0)
        return (int) i;
    }
  return -1;
}

static gboolean
tick_cb (gpointer user_data)
{
  return G_SOURCE_CONTINUE;
}

/* One look at the children for wait_for (): TRUE when the wait is over,
 * with *@result TRUE for @done and FALSE (and @error set) for a failure. */
static gboolean
wait_step (Bench       *bench,
           GPtrArray   *children,
           gboolean   (*done) (GPtrArray *children, gpointer data),
           gpointer     data,
           const char  *what,
           gboolean    *result,
           GError     **error)
{
  *result = FALSE;
  for (guint c = 0; c < children->len; c++)
    {
      Child *child = g_ptr_array_index (children, c);
      int e = child_find (child, 0, "error");

      if (e >= 0)
        {
          JsonObject *o = g_ptr_array_index (child->events, e);

          g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                       "bench group: a device failed while %s: %s", what,
                       json_object_get_string_member_with_default (o, "message", "?"));
          return TRUE;
        }
    }
  if (done (children, data))
    {
      *result = TRUE;
      return TRUE;
    }
  for (guint c = 0; c < children->len; c++)
    {
      Child *child = g_ptr_array_index (children, c);

      /* A device leaves once its run is done; before, it failed. */
      if (child->eof && child_find (child, 0, "done") < 0)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                       "bench group: a device's process ended while %s", what);
          return TRUE;
        }
    }
  if (bench->interrupted)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "bench group: interrupted");
      return TRUE;
    }
  if (g_get_monotonic_time () - bench->last_event > BENCH_GROUP_SILENCE_S * G_USEC_PER_SEC)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                   "bench group: no device printed anything for %d s while %s",
                   BENCH_GROUP_SILENCE_S, what);
      return TRUE;
    }
  return FALSE;
}

/* Iterates until @done or a failure: an "error" event, a child that ended
 * early, silence past BENCH_GROUP_SILENCE_S, or Ctrl+C. */
static gboolean
wait_for (Bench       *bench,
          GPtrArray   *children,
          gboolean   (*done) (GPtrArray *children, gpointer data),
          gpointer     data,
          const char  *what,
          GError     **error)
{
  g_autoptr(GSource) tick = g_timeout_source_new_seconds (1);
  gboolean result = FALSE;

  /* Wakes the loop when every child is silent, so that the silence
   * deadline and Ctrl+C are seen. */
  g_source_set_callback (tick, tick_cb, NULL, NULL);
  g_source_attach (tick, NULL);
  bench->last_event = g_get_monotonic_time ();
  while (!wait_step (bench, children, done, data, what, &result, error))
    g_main_context_iteration (NULL, TRUE);
  g_source_destroy (tick);
  return result;
}

typedef struct
{
  const char *event;
  guint64     step;   /* 0: any */
} Want;

/* Every child has printed @want's event (for a step, that step). */
static gboolean
all_have (GPtrArray *children,
          gpointer   data)
{
  const Want *want = data;

  for (guint c = 0; c < children->len; c++)
    {
      Child *child = g_ptr_array_index (children, c);
      gboolean found = FALSE;

      for (int i = child_find (child, 0, want->event); i >= 0 && !found;
           i = child_find (child, i + 1, want->event))
        found = want->step == 0
                || json_object_get_int_member_with_default (g_ptr_array_index (child->events, i),
                                                            "step", 0) == (gint64) want->step;
      if (!found)
        return FALSE;
    }
  return TRUE;
}

static gboolean
all_exited (GPtrArray *children,
            gpointer   data)
{
  for (guint c = 0; c < children->len; c++)
    if (!((Child *) g_ptr_array_index (children, c))->eof)
      return FALSE;
  return TRUE;
}

/* The last event line of @child for @step (a step taken again after a
 * rollback prints twice: the later line is the step that stood), or -1. */
static int
step_index (Child   *child,
            guint64  step)
{
  int found = -1;

  for (int i = child_find (child, 0, "step"); i >= 0; i = child_find (child, i + 1, "step"))
    if (json_object_get_int_member_with_default (g_ptr_array_index (child->events, i), "step", 0)
        == (gint64) step)
      found = i;
  return found;
}

/* Network namespaces ---------------------------------------------------- */

static char *
device_netns (Bench *bench,
              guint  k)
{
  return g_strdup_printf ("%s-d%u", bench->prefix, k);
}

static char *
device_address (Bench *bench,
                guint  k)
{
  return bench->netns ? g_strdup_printf ("198.18.0.%u", k + 1) : g_strdup ("127.0.0.1");
}

/* The signaling service's namespace (198.18.0.254), and one namespace per
 * device with 198.18.0.(k+1), each on a veth to the switch, its egress
 * shaped to 1 Gbit/s with 1 ms of delay (a home LAN; a packet is delayed
 * once, on its way from its sender, so a round trip takes 2 ms). */
static gboolean
netns_create (Bench   *bench,
              guint    n_devices,
              GError **error)
{
  if (!dc_cli_netns_begin (&bench->shaped, "bench group", bench->prefix, error)
      || !dc_cli_netns_add (&bench->shaped, "sig", NULL, NETNS_SIGNAL_ADDRESS, error))
    return FALSE;
  for (guint k = 0; k < n_devices; k++)
    {
      g_autofree char *name = g_strdup_printf ("d%u", k);
      g_autofree char *address = device_address (bench, k);

      if (!dc_cli_netns_add (&bench->shaped, name, NULL, address, error))
        return FALSE;
    }
  return dc_cli_netns_connect (&bench->shaped, error);
}

/* One run ----------------------------------------------------------------- */

/* The step lines' finer phases (dc_train_group_get_step_phases ()), whose
 * means bench group prints, over all devices and per device. */
static const char * const phase_names[] = {
  "compute_ms", "ahead_ms", "send_ms", "contrib_wait_ms", "sum_ms", "gather_wait_ms",
  "adam_ms", "hash_ms", "barrier_ms", "audit_ms", "audit_paused_ms", "ahead_paused_ms",
  "tail_values", "stream_chunks", "stream_early", "stream_pieces",
};
#define N_PHASES G_N_ELEMENTS (phase_names)

/* The step's critical path, lined up on the devices' clock times (one
 * host's monotonic clock): from the first device's gradient start to the
 * next step's, split into parts that add up to it. */
static const char * const path_names[] = {
  "step_ms",          /* the first gradient's start to the next step's first */
  "gradient_ms",      /* to the devices' mean gradient end */
  "slowest_wait_ms",  /* then to the slowest device's gradient end */
  "exchange_ms",      /* then to the last summed shard (means over devices) */
  "adam_ms",          /* then to the Adam step's end */
  "next_start_ms",    /* then to the next step's first gradient start */
};
#define N_PATH G_N_ELEMENTS (path_names)
#define PHASE_DEVICES_MAX BENCH_GROUP_DEVICES_MAX

typedef struct
{
  double step_ms, compute_ms, send_ms, wait_ms, combine_ms, tokens_per_s;
  double audit_ms;   /* audits' recomputations, beside the steps (not of compute_ms) */
  double bytes_per_device_step;  /* training message bodies a device sent a step */
  double phases[N_PHASES];       /* means over devices and steps */
  double device_phases[PHASE_DEVICES_MAX][N_PHASES];  /* means over steps, per device */
  double computed_ahead;         /* the share of steps whose gradient was */
  double audits;                 /* audits a device ended in the measured steps (mean):
                                  * the draw's luck, for reading audit_ms */
  gint64 audit_beside;           /* audit kernels begun beside a device's own gradient */
  /* Per device: audits it ended in the measured steps, and of them those
   * whose kernels ran on the idle pool (`audit_priority` idle or nice). */
  guint  device_audits[PHASE_DEVICES_MAX];
  guint  device_idle_audits[PHASE_DEVICES_MAX];
  char  *device_cpus[PHASE_DEVICES_MAX];  /* its cores, read back at its start */
  /* Slow sending (docs/ARCHITECTURE.md) over the measured steps: per
   * device, its ms; in all, the devices' ms and episodes summed. */
  double device_slow_ms[PHASE_DEVICES_MAX];
  double slow_ms;
  gint64 slow_episodes;
  gint64 renewals;
  guint  n_devices;
  /* The step's critical path (critical_path ()): means over the steps
   * every device's line timed, path_names' order; path_steps 0: none. */
  double path[N_PATH];
  guint  path_steps;
  /* A device's process CPU a measured step (its step lines' `cpu_ms`), all
   * its threads: per device, and the mean; -1 when a line lacked it. */
  double device_cpu_ms[PHASE_DEVICES_MAX];
  double cpu_ms;
  /* The host's CPU time the hypervisor took from the whole run, start-up
   * included (dc_cli_host_steal ()); -1 unknown. */
  double steal;
} Figures;

/* One device alone (or each of N alone at once): its rate, its process's
 * CPU a step and the host's steal over the run (-1: unknown). */
typedef struct
{
  double tokens_per_s;
  double cpu_ms;
  double steal;
  /* With --solo-after: the runs before and after the groups, whose means
   * the three above are (0 without). */
  double before_tokens_per_s;
  double after_tokens_per_s;
} SoloRate;

/* A group's figures kept until the run of one device alone after the
 * groups (--solo-after) is known. */
typedef struct
{
  guint    n_devices;
  guint    n_threads;
  char    *key;
  Figures  figures;
  SoloRate concurrent;
} GroupRun;

/* @solo becomes the mean of itself and @after (taken after the groups): a
 * host whose speed drifts during the run then weighs on the reference as
 * on the groups between them. A figure one run did not give (−1) is the
 * other's. */
static void
solo_rate_add_after (SoloRate       *solo,
                     const SoloRate *after)
{
  double *mine[] = { &solo->cpu_ms, &solo->steal };
  const double theirs[] = { after->cpu_ms, after->steal };

  solo->before_tokens_per_s = solo->tokens_per_s;
  solo->after_tokens_per_s = after->tokens_per_s;
  solo->tokens_per_s = (solo->tokens_per_s + after->tokens_per_s) / 2;
  for (guint i = 0; i < G_N_ELEMENTS (mine); i++)
    *mine[i] = *mine[i] < 0 ? theirs[i] : theirs[i] < 0 ? *mine[i] : (*mine[i] + theirs[i]) / 2;
}

static void
figures_clear (Figures *figures)
{
  for (guint k = 0; k < PHASE_DEVICES_MAX; k++)
    g_clear_pointer (&figures->device_cpus[k], g_free);
}

static void
add_size_args (GPtrArray  *args,
               const Size *size,
               guint       n_threads,
               guint       stop_at)
{
  g_ptr_array_add (args, g_strdup ("--width"));
  g_ptr_array_add (args, g_strdup_printf ("%u", size->width));
  g_ptr_array_add (args, g_strdup ("--seq"));
  g_ptr_array_add (args, g_strdup_printf ("%u", size->seq));
  g_ptr_array_add (args, g_strdup ("--batch"));
  g_ptr_array_add (args, g_strdup_printf ("%u", size->batch));
  g_ptr_array_add (args, g_strdup ("--threads"));
  g_ptr_array_add (args, g_strdup_printf ("%u", n_threads));
  /* The run's length only sets the learning-rate schedule, not the cost of
   * a step; the train command takes 100 or more. */
  g_ptr_array_add (args, g_strdup ("--steps"));
  g_ptr_array_add (args, g_strdup_printf ("%u", MAX (stop_at, 100)));
  g_ptr_array_add (args, g_strdup ("--stop-at"));
  g_ptr_array_add (args, g_strdup_printf ("%u", stop_at));
}

/* The wall time of steps 2…@stop_at of @child, as seen here. */
static double
measured_seconds (Child *child,
                  guint  stop_at)
{
  int first = step_index (child, 1), last = step_index (child, stop_at);

  if (first < 0 || last < 0)
    return -1;
  return (g_array_index (child->times, gint64, last)
          - g_array_index (child->times, gint64, first)) / 1e6;
}

/* @child's process CPU a step over steps 2 … @stop_at (its step lines'
 * `cpu_ms`, the process's since it began), or -1 without them. */
static double
cpu_per_step (Child *child,
              guint  stop_at)
{
  int first = step_index (child, 1), last = step_index (child, stop_at);
  double a, b;

  if (first < 0 || last < 0 || stop_at < 2)
    return -1;
  a = json_object_get_double_member_with_default (g_ptr_array_index (child->events, first),
                                                  "cpu_ms", -1);
  b = json_object_get_double_member_with_default (g_ptr_array_index (child->events, last),
                                                  "cpu_ms", -1);
  if (a < 0 || b < a)
    return -1;
  return (b - a) / (stop_at - 1);
}

/* One device alone: `train` without a room, the same size and threads;
 * with @n_at_once > 1, that many such runs at once, each on its own (no
 * room, nothing exchanged), pinned as the devices of a group are: what
 * one device computes while N share the host's memory, caches and clock
 * (--concurrent-solo). @rate gets one run's mean rate and CPU a step. */
static gboolean
run_solo (Bench       *bench,
          const Size  *size,
          guint        n_threads,
          guint        steps,
          guint        n_at_once,
          SoloRate    *rate,
          GError     **error)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) children = g_ptr_array_new_with_free_func ((GDestroyNotify) child_free);
  double sum = 0, cpu = 0;
  gboolean cpu_known = TRUE;
  DcCliHostCpu host_before, host_after;
  gboolean host_known = dc_cli_host_cpu_read (&host_before);

  g_ptr_array_add (args, g_strdup ("train"));
  g_ptr_array_add (args, g_strdup ("--json"));
  g_ptr_array_add (args, g_strdup_printf ("--seed=%" G_GINT64_FORMAT, bench->seed));
  add_size_args (args, size, n_threads, steps + 1);
  for (guint k = 0; k < n_at_once; k++)
    {
      /* Pinned as device k of a group is. */
      Child *child = child_spawn_pinned (bench, NULL, args,
                                         first_core (bench, k, n_at_once, n_threads),
                                         n_threads, error);

      if (child == NULL)
        return FALSE;
      g_ptr_array_add (children, child);
    }
  if (!wait_for (bench, children, all_exited, NULL,
                 n_at_once > 1 ? "training alone, several at once" : "training alone", error))
    return FALSE;
  host_known = host_known && dc_cli_host_cpu_read (&host_after);
  rate->steal = host_known ? dc_cli_host_steal (&host_before, &host_after) : -1;
  for (guint k = 0; k < children->len; k++)
    {
      double seconds = measured_seconds (g_ptr_array_index (children, k), steps + 1);

      if (seconds <= 0)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                       "bench group: training alone did not print its steps");
          return FALSE;
        }
      sum += (double) steps * size->batch * size->seq / seconds;
      {
        double c = cpu_per_step (g_ptr_array_index (children, k), steps + 1);

        cpu_known = cpu_known && c >= 0;
        cpu += c;
      }
    }
  rate->tokens_per_s = sum / n_at_once;
  rate->cpu_ms = cpu_known ? cpu / n_at_once : -1;
  return TRUE;
}

/* The step's critical path over steps 2 … @stop_at − 1 (a step's cycle
 * needs the next step's start) from the devices' step lines
 * (`gradient_began_us` … `stepped_us`), into @figures->path; a step that
 * a device did not time (an older build, a gradient dropped and computed
 * again) is left out. */
static void
critical_path (GPtrArray *devices,
               guint64    stop_at,
               Figures   *figures)
{
  guint n = devices->len;

  memset (figures->path, 0, sizeof figures->path);
  figures->path_steps = 0;
  for (guint64 step = 2; step < stop_at && n > 0; step++)
    {
      gint64 first = G_MAXINT64, next_first = G_MAXINT64, slowest = G_MININT64;
      double done = 0, gathered = 0, stepped = 0;
      gboolean timed = TRUE;

      for (guint k = 0; k < n && timed; k++)
        {
          Child *device = g_ptr_array_index (devices, k);
          int i = step_index (device, step), j = step_index (device, step + 1);
          JsonObject *o, *next;
          gint64 began, at_done, at_gathered, at_stepped, next_began;

          if (i < 0 || j < 0)
            {
              timed = FALSE;
              break;
            }
          o = g_ptr_array_index (device->events, i);
          next = g_ptr_array_index (device->events, j);
          began = json_object_get_int_member_with_default (o, "gradient_began_us", 0);
          at_done = json_object_get_int_member_with_default (o, "gradient_done_us", 0);
          at_gathered = json_object_get_int_member_with_default (o, "gathered_us", 0);
          at_stepped = json_object_get_int_member_with_default (o, "stepped_us", 0);
          next_began = json_object_get_int_member_with_default (next, "gradient_began_us", 0);
          /* In the order they happen, or the step is not one to line up. */
          if (began <= 0 || at_done < began || at_gathered < at_done || at_stepped < at_gathered
              || next_began < at_stepped)
            {
              timed = FALSE;
              break;
            }
          first = MIN (first, began);
          next_first = MIN (next_first, next_began);
          slowest = MAX (slowest, at_done);
          done += (double) at_done / n;
          gathered += (double) at_gathered / n;
          stepped += (double) at_stepped / n;
        }
      if (!timed)
        continue;
      figures->path[0] += (next_first - first) / 1000.0;
      figures->path[1] += (done - first) / 1000.0;
      figures->path[2] += (slowest - done) / 1000.0;
      figures->path[3] += (gathered - slowest) / 1000.0;
      figures->path[4] += (stepped - gathered) / 1000.0;
      figures->path[5] += (next_first - stepped) / 1000.0;
      figures->path_steps++;
    }
  for (guint p = 0; p < N_PATH && figures->path_steps > 0; p++)
    figures->path[p] /= figures->path_steps;
}

static gboolean
run_group (Bench       *bench,
           const Size  *size,
           guint        n_devices,
           guint        n_threads,
           guint        steps,
           Figures     *figures,
           GError     **error)
{
  g_autoptr(GPtrArray) children = g_ptr_array_new_with_free_func ((GDestroyNotify) child_free);
  g_autoptr(GPtrArray) signal_args = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *signal_ns = bench->netns ? g_strdup_printf ("%s-sig", bench->prefix) : NULL;
  g_autofree char *url = NULL;
  g_autofree char *room = NULL;
  guint stop_at = steps + 1;
  Child *signal;
  Want want = { "listening", 0 };
  double sums[5] = { 0 };
  guint n_samples = 0, ahead = 0;
  double sent = 0;
  double seconds;
  int e;
  DcCliHostCpu host_before, host_after;
  gboolean host_known = dc_cli_host_cpu_read (&host_before);

  /* The signaling service: a child too, so that with --netns it lives
   * inside a namespace of its own on the switch and nothing listens
   * outside them. */
  g_ptr_array_add (signal_args, g_strdup ("signal"));
  g_ptr_array_add (signal_args, g_strdup ("--json"));
  g_ptr_array_add (signal_args, g_strdup ("--port=0"));
  g_ptr_array_add (signal_args, g_strdup_printf ("--bind=%s", bench->netns ? NETNS_SIGNAL_ADDRESS
                                                                           : "127.0.0.1"));
  signal = child_spawn (bench, signal_ns, signal_args, error);
  if (signal == NULL)
    return FALSE;
  g_ptr_array_add (children, signal);
  if (!wait_for (bench, children, all_have, &want, "starting the signaling service", error))
    return FALSE;
  url = g_strdup (json_object_get_string_member_with_default (
                    g_ptr_array_index (signal->events, child_find (signal, 0, "listening")),
                    "url", ""));

  for (guint k = 0; k < n_devices; k++)
    {
      g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) one = g_ptr_array_new ();
      g_autofree char *ns = bench->netns ? device_netns (bench, k) : NULL;
      g_autofree char *address = device_address (bench, k);
      Child *device;

      g_ptr_array_add (args, g_strdup ("train"));
      g_ptr_array_add (args, g_strdup ("--json"));
      g_ptr_array_add (args, g_strdup_printf ("--signal=%s", url));
      g_ptr_array_add (args, g_strdup_printf ("--name=bench-%u", k));
      g_ptr_array_add (args, g_strdup_printf ("--ice-address=%s", address));
      g_ptr_array_add (args, g_strdup ("--approve=all"));
      if (k == 0)
        {
          g_ptr_array_add (args, g_strdup_printf ("--min-peers=%u", n_devices));
          /* The starter's CONFIG carries them to the others. The lone
           * runs' seed: a run's cost depends on its weights and batches
           * (a random seed, a group's default, moved one device's speed
           * by up to 6 %, docs/BENCHMARKS.md), so the groups train the
           * run the reference trains. */
          g_ptr_array_add (args, g_strdup_printf ("--gradient-wire=%s", bench->gradient_wire));
          g_ptr_array_add (args, g_strdup_printf ("--seed=%" G_GINT64_FORMAT, bench->seed));
        }
      else
        g_ptr_array_add (args, g_strdup_printf ("--room=%s", room));
      add_size_args (args, size, n_threads, stop_at);
      /* --pin-cores: each device on cores of its own, when all fit. */
      device = child_spawn_pinned (bench, ns, args, first_core (bench, k, n_devices, n_threads),
                                   n_threads, error);
      if (device == NULL)
        return FALSE;
      g_ptr_array_add (children, device);
      if (k == 0)
        {
          /* The host must have made the room before anyone asks to join. */
          g_ptr_array_add (one, device);
          want.event = "joined";
          if (!wait_for (bench, one, all_have, &want, "creating the room", error))
            return FALSE;
          e = child_find (device, 0, "room");
          if (e < 0)
            {
              g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                           "bench group: the first device did not name its room");
              return FALSE;
            }
          room = g_strdup (json_object_get_string_member_with_default (
                             g_ptr_array_index (device->events, e), "room", ""));
        }
    }

  want.event = "done";
  want.step = 0;
  {
    /* The signaling service never prints "done": wait on the devices. */
    g_autoptr(GPtrArray) devices = g_ptr_array_new ();

    for (guint k = 1; k < children->len; k++)
      g_ptr_array_add (devices, g_ptr_array_index (children, k));
    if (!wait_for (bench, devices, all_have, &want, "training", error))
      return FALSE;
    host_known = host_known && dc_cli_host_cpu_read (&host_after);
    figures->steal = host_known ? dc_cli_host_steal (&host_before, &host_after) : -1;

    figures->n_devices = devices->len;
    for (guint k = 0; k < devices->len; k++)
      {
        Child *device = g_ptr_array_index (devices, k);
        guint device_samples = 0;
        double device_sums[N_PHASES] = { 0 };

        if (k < PHASE_DEVICES_MAX)
          {
            g_free (figures->device_cpus[k]);
            figures->device_cpus[k] = g_strdup (device->cpus);
          }

        for (guint64 step = 2; step <= stop_at; step++)
          {
            int i = step_index (device, step);
            JsonObject *o;

            if (i < 0)
              continue;
            o = g_ptr_array_index (device->events, i);
            if (json_object_get_int_member_with_default (o, "roster", 0) != (gint64) n_devices)
              {
                g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                             "bench group: step %" G_GUINT64_FORMAT " had %" G_GINT64_FORMAT
                             " devices, not %u", step,
                             json_object_get_int_member_with_default (o, "roster", 0),
                             n_devices);
                return FALSE;
              }
            sums[0] += json_object_get_double_member_with_default (o, "compute_ms", 0);
            sums[1] += json_object_get_double_member_with_default (o, "send_ms", 0);
            sums[2] += json_object_get_double_member_with_default (o, "wait_ms", 0);
            sums[3] += json_object_get_double_member_with_default (o, "combine_ms", 0);
            sums[4] += json_object_get_double_member_with_default (o, "audit_ms", 0);
            for (guint p = 0; p < N_PHASES; p++)
              device_sums[p] += json_object_get_double_member_with_default (o, phase_names[p],
                                                                            0);
            if (json_object_get_boolean_member_with_default (o, "computed_ahead", FALSE))
              ahead++;
            if (json_object_get_double_member_with_default (o, "audit_ms", 0) > 0)
              {
                const char *priority = json_object_get_string_member_with_default (
                                         o, "audit_priority", "normal");

                figures->audits += 1;
                if (k < PHASE_DEVICES_MAX)
                  {
                    figures->device_audits[k]++;
                    if (g_strcmp0 (priority, "normal") != 0)
                      figures->device_idle_audits[k]++;
                  }
              }
            figures->audit_beside += json_object_get_int_member_with_default (o, "audit_beside",
                                                                              0);
            n_samples++;
            device_samples++;
          }
        for (guint p = 0; p < N_PHASES; p++)
          {
            figures->phases[p] += device_sums[p];
            if (k < PHASE_DEVICES_MAX && device_samples > 0)
              figures->device_phases[k][p] = device_sums[p] / device_samples;
          }
        {
          /* The devices count what they sent since the run began: the
           * growth over steps 2…stop_at, as the times. */
          int first = step_index (device, 1), last = step_index (device, stop_at);
          JsonObject *a, *b;

          if (first >= 0 && last >= 0)
            {
              a = g_ptr_array_index (device->events, first);
              b = g_ptr_array_index (device->events, last);
              sent += (json_object_get_int_member_with_default (b, "sent_bytes", 0)
                       - json_object_get_int_member_with_default (a, "sent_bytes", 0))
                      / (double) steps;
              {
                double slow = json_object_get_double_member_with_default (b, "slow_send_ms", 0)
                              - json_object_get_double_member_with_default (a, "slow_send_ms",
                                                                            0);

                if (k < PHASE_DEVICES_MAX)
                  figures->device_slow_ms[k] = slow;
                figures->slow_ms += slow;
                figures->slow_episodes
                  += json_object_get_int_member_with_default (b, "slow_send_episodes", 0)
                     - json_object_get_int_member_with_default (a, "slow_send_episodes", 0);
                /* Renewals of the whole run: one in the first step counts. */
                figures->renewals += json_object_get_int_member_with_default (b, "renewals", 0);
              }
            }
        }
      }
    figures->bytes_per_device_step = sent / devices->len;
    critical_path (devices, stop_at, figures);
    figures->cpu_ms = 0;
    for (guint k = 0; k < devices->len; k++)
      {
        double c = cpu_per_step (g_ptr_array_index (devices, k), stop_at);

        if (k < PHASE_DEVICES_MAX)
          figures->device_cpu_ms[k] = c;
        figures->cpu_ms = c < 0 || figures->cpu_ms < 0 ? -1 : figures->cpu_ms + c / devices->len;
      }
    seconds = measured_seconds (g_ptr_array_index (devices, 0), stop_at);
  }
  if (seconds <= 0 || n_samples == 0)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "bench group: the devices did not print their steps");
      return FALSE;
    }
  figures->step_ms = seconds * 1000 / steps;
  figures->compute_ms = sums[0] / n_samples;
  figures->send_ms = sums[1] / n_samples;
  figures->wait_ms = sums[2] / n_samples;
  figures->combine_ms = sums[3] / n_samples;
  figures->audit_ms = sums[4] / n_samples;
  for (guint p = 0; p < N_PHASES; p++)
    figures->phases[p] /= n_samples;
  figures->computed_ahead = (double) ahead / n_samples;
  figures->audits /= figures->n_devices;
  figures->tokens_per_s = (double) steps * n_devices * size->batch * size->seq / seconds;
  return TRUE;
}

static gboolean
interrupt_cb (gpointer user_data)
{
  ((Bench *) user_data)->interrupted = TRUE;
  return G_SOURCE_CONTINUE;
}

static void
json_add_double (JsonBuilder *builder,
                 const char  *name,
                 double       value)
{
  json_builder_set_member_name (builder, name);
  json_builder_add_double_value (builder, value);
}

/* @value when it is known: the figures use -1 for unknown. */
static void
json_add_known (JsonBuilder *builder,
                const char  *name,
                double       value)
{
  if (value >= 0)
    json_add_double (builder, name, value);
}

static void
json_add_int (JsonBuilder *builder,
              const char  *name,
              gint64       value)
{
  json_builder_set_member_name (builder, name);
  json_builder_add_int_value (builder, value);
}

static void
print_figures (DcCliOptions  *options,
               const char    *gradient_wire,
               gint64         seed,
               const char    *network,
               DcCliNetns    *shaped,
               const Size    *size,
               guint          n_devices,
               guint          n_threads,
               guint          steps,
               const Figures  *f,
               const SoloRate *solo_rate,
               const SoloRate *concurrent_rate)
{
  double solo = solo_rate->tokens_per_s;
  double concurrent_solo = concurrent_rate->tokens_per_s;
  /* Everything in a step that is not this device's own arithmetic: sending,
   * waiting for the others' gradients (the slowest device included) and
   * the step reports' exchange. */
  double comm = CLAMP ((f->step_ms - f->compute_ms - f->combine_ms) / f->step_ms, 0, 1);
  double scaling = f->tokens_per_s / (n_devices * solo);
  DcGptConfig config;
  double gradient;

  dc_gpt_config_init_derived (&config, size->width, size->seq);
  gradient = 4.0 * (double) dc_gpt_config_n_params (&config);
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "bench");
      json_builder_set_member_name (builder, "bench");
      json_builder_add_string_value (builder, "group");
      json_builder_set_member_name (builder, "network");
      json_builder_add_string_value (builder, network);
      /* --netns: how (netem, the hub …), and the hub's counters so far. */
      if (shaped != NULL)
        dc_cli_netns_add_json (shaped, builder);
      json_add_int (builder, "devices", n_devices);
      json_add_int (builder, "width", size->width);
      json_add_int (builder, "seq", size->seq);
      json_add_int (builder, "batch", size->batch);
      json_add_int (builder, "threads", n_threads);
      json_add_int (builder, "steps", steps);
      json_builder_set_member_name (builder, "gradient_wire");
      json_builder_add_string_value (builder, gradient_wire);
      json_add_int (builder, "seed", seed);
      json_add_double (builder, "step_ms", f->step_ms);
      json_add_double (builder, "compute_ms", f->compute_ms);
      json_add_double (builder, "send_ms", f->send_ms);
      json_add_double (builder, "wait_ms", f->wait_ms);
      json_add_double (builder, "combine_ms", f->combine_ms);
      json_add_double (builder, "audit_ms", f->audit_ms);
      json_add_double (builder, "bytes_per_device_step", f->bytes_per_device_step);
      /* What the exchange costs in gradients: 2 (n − 1)/n with the sharded
       * exchange (reduce-scatter, then all-gather), plus headers and reports;
       * counted in float32 gradients, so that bf16 shows as about half. */
      json_add_double (builder, "gradient_bytes", gradient);
      json_add_double (builder, "gradients_per_device_step",
                       f->bytes_per_device_step / gradient);
      json_add_double (builder, "comm_fraction", comm);
      /* Slow sending over the measured steps, the devices' summed: a run
       * that hit usrsctp's crawl says so here (docs/BENCHMARKS.md). */
      json_add_double (builder, "slow_send_ms", f->slow_ms);
      json_add_int (builder, "slow_send_episodes", f->slow_episodes);
      /* Connections replaced by a new one (each side of a pair counts it). */
      json_add_int (builder, "renewals", f->renewals);
      /* Where the step goes, finer (means over devices and steps), then
       * per device: the slowest device shows in its own wait being short. */
      json_builder_set_member_name (builder, "phases");
      json_builder_begin_object (builder);
      for (guint p = 0; p < N_PHASES; p++)
        json_add_double (builder, phase_names[p], f->phases[p]);
      json_add_double (builder, "computed_ahead", f->computed_ahead);
      json_add_double (builder, "audits", f->audits);
      json_add_int (builder, "audit_beside", f->audit_beside);
      json_builder_end_object (builder);
      /* The step lined up across the devices: the slowest device's wait and
       * the exchange after it, which each device's own phases blur. */
      if (f->path_steps > 0)
        {
          json_builder_set_member_name (builder, "critical_path");
          json_builder_begin_object (builder);
          for (guint p = 0; p < N_PATH; p++)
            json_add_double (builder, path_names[p], f->path[p]);
          json_add_int (builder, "steps", f->path_steps);
          json_builder_end_object (builder);
        }
      json_builder_set_member_name (builder, "per_device");
      json_builder_begin_array (builder);
      for (guint k = 0; k < MIN (f->n_devices, PHASE_DEVICES_MAX); k++)
        {
          json_builder_begin_object (builder);
          for (guint p = 0; p < N_PHASES; p++)
            json_add_double (builder, phase_names[p], f->device_phases[k][p]);
          json_add_int (builder, "audits", f->device_audits[k]);
          json_add_int (builder, "idle_audits", f->device_idle_audits[k]);
          json_add_double (builder, "slow_send_ms", f->device_slow_ms[k]);
          json_add_known (builder, "cpu_ms_per_step", f->device_cpu_ms[k]);
          if (f->device_cpus[k] != NULL)
            {
              json_builder_set_member_name (builder, "cpus");
              json_builder_add_string_value (builder, f->device_cpus[k]);
            }
          json_builder_end_object (builder);
        }
      json_builder_end_array (builder);
      json_add_double (builder, "tokens_per_s", f->tokens_per_s);
      json_add_double (builder, "solo_tokens_per_s", solo);
      /* --solo-after: the two runs whose mean the reference is. */
      if (solo_rate->after_tokens_per_s > 0)
        {
          json_add_double (builder, "solo_before_tokens_per_s", solo_rate->before_tokens_per_s);
          json_add_double (builder, "solo_after_tokens_per_s", solo_rate->after_tokens_per_s);
        }
      json_add_double (builder, "scaling", scaling);
      if (concurrent_solo > 0)
        {
          json_add_double (builder, "concurrent_solo_tokens_per_s", concurrent_solo);
          json_add_double (builder, "scaling_vs_concurrent",
                           f->tokens_per_s / (n_devices * concurrent_solo));
        }
      /* The process CPU a step, a device's in the group against one alone:
       * what the group adds to the same gradient (its transport, the
       * exchange's sums and hashes) on the same cores. */
      json_add_known (builder, "cpu_ms_per_step", f->cpu_ms);
      json_add_known (builder, "solo_cpu_ms_per_step", solo_rate->cpu_ms);
      /* A virtual machine's neighbours: the share of its CPU time the
       * hypervisor gave to others during each run (start-up included), the
       * one cause of a run's spread that the guest can see. */
      json_add_known (builder, "host_steal", f->steal);
      json_add_known (builder, "solo_host_steal", solo_rate->steal);
      /* N alone at once's, with --concurrent-solo. */
      if (concurrent_solo > 0)
        {
          json_add_known (builder, "concurrent_solo_cpu_ms_per_step", concurrent_rate->cpu_ms);
          json_add_known (builder, "concurrent_solo_host_steal", concurrent_rate->steal);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("%-9s %3u×%-3u×%-2u %2u dev %2u thr  step %8.1f ms  compute %8.1f  send %6.1f  "
               "wait %8.1f  combine %6.1f  comm %5.1f%%  %8.0f tok/s  solo %8.0f  scaling %.2f  "
               "(audits %.1f beside the steps)  %.2f MB sent a device a step (%.2f gradients)  "
               "slow sending %.0f ms in %" G_GINT64_FORMAT " episodes\n",
               network, size->width, size->seq, size->batch, n_devices, n_threads, f->step_ms,
               f->compute_ms, f->send_ms, f->wait_ms, f->combine_ms, comm * 100, f->tokens_per_s,
               solo, scaling, f->audit_ms, f->bytes_per_device_step / 1e6,
               f->bytes_per_device_step / gradient, f->slow_ms, f->slow_episodes);
      fflush (stdout);
    }
}

/* A "note" event (or line): what the run could not do as asked, and tc's
 * own words for why (@reason, nullable). */
static void
print_note (DcCliOptions *options,
            const char   *note,
            const char   *reason)
{
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "note");
      json_builder_set_member_name (builder, "message");
      json_builder_add_string_value (builder, note);
      if (reason != NULL)
        {
          json_builder_set_member_name (builder, "reason");
          json_builder_add_string_value (builder, reason);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else if (reason != NULL)
    g_print ("%s (%s)\n", note, reason);
  else
    g_print ("%s\n", note);
}

static gboolean
parse_list (const char  *text,
            guint        max,
            GArray      *out)
{
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);

  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 value;
      guint v;

      if (!g_ascii_string_to_unsigned (g_strstrip (parts[i]), 10, 1, max, &value, NULL))
        return FALSE;
      v = (guint) value;
      g_array_append_val (out, v);
    }
  return out->len > 0 && out->len <= max;
}

static void
group_run_clear (gpointer data)
{
  GroupRun *run = data;

  figures_clear (&run->figures);
  g_clear_pointer (&run->key, g_free);
}

/* Prints the groups kept in @runs against their one device alone, and
 * forgets them. */
static void
print_runs (DcCliOptions *options,
            Bench        *bench,
            const char   *network,
            const Size   *size,
            guint         steps,
            GArray       *runs,
            GHashTable   *solo_rates)
{
  for (guint r = 0; r < runs->len; r++)
    {
      GroupRun *run = &g_array_index (runs, GroupRun, r);

      print_figures (options, bench->gradient_wire, bench->seed, network,
                     bench->netns ? &bench->shaped : NULL, size, run->n_devices,
                     run->n_threads, steps, &run->figures,
                     g_hash_table_lookup (solo_rates, run->key), &run->concurrent);
    }
  g_array_set_size (runs, 0);
}

int
dc_cli_bench_group_run (const DcCliCommand  *command,
                        DcCliOptions        *options,
                        int                  argc,
                        char               **argv)
{
  g_autofree char *devices_text = NULL;
  int width = 0, seq = 0, batch = 0, steps = 5, threads = 0;
  gint64 seed = 1;
  gboolean netns = FALSE, pin = FALSE, concurrent = FALSE, solo_after = FALSE;
  g_autofree char *gradient_wire = NULL;
  const GOptionEntry entries[] = {
    { "devices", 0, 0, G_OPTION_ARG_STRING, &devices_text,
      N_("Comma-separated device counts, 1–8 (default: 1,2,3,4)"), N_("N,…") },
    { "width", 0, 0, G_OPTION_ARG_INT, &width,
      N_("Model width (default: both sizes, 32 and 128)"), "N" },
    { "seq", 0, 0, G_OPTION_ARG_INT, &seq,
      N_("Sequence length (with --width; default: the default size's of that width, else 32)"),
      "N" },
    { "batch", 0, 0, G_OPTION_ARG_INT, &batch,
      N_("Batch per device (with --width; default: the default size's of that width, else 8)"),
      "N" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps,
      N_("Steps measured after one warm-up step, 1–1000 (default: 5)"), "N" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads,
      N_("Threads per device (default: processors / devices, at least 1)"), "N" },
    { "netns", 0, 0, G_OPTION_ARG_NONE, &netns,
      N_("Between network namespaces shaped to 1 Gbit/s, 1 ms (root, ip, tc)"), NULL },
    { "gradient-wire", 0, 0, G_OPTION_ARG_STRING, &gradient_wire,
      N_("Gradients on the wire as f32, bf16 or int8, as train --gradient-wire (default: f32)"),
      "f32|bf16|int8" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed,
      N_("Seed of the run every lone device and every group trains, as train --seed (default: 1)"),
      "N" },
    { "pin-cores", 0, 0, G_OPTION_ARG_NONE, &pin,
      N_("Each device on cores of its own (device k: cores k×threads…), when they fit"), NULL },
    { "concurrent-solo", 0, 0, G_OPTION_ARG_NONE, &concurrent,
      N_("Also time N devices training alone at once, the baseline of a shared host"), NULL },
    { "solo-after", 0, 0, G_OPTION_ARG_NONE, &solo_after,
      N_("Also time one device alone after the groups; the reference is then the mean of both "
         "runs (a host whose speed drifts)"), NULL },
    { NULL }
  };
  g_autoptr(GArray) counts = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GArray) sizes = g_array_new (FALSE, FALSE, sizeof (Size));
  g_autoptr(GHashTable) solo_rates = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                            g_free);
  g_autoptr(GArray) runs = g_array_new (FALSE, TRUE, sizeof (GroupRun));
  g_autoptr(GError) error = NULL;
  const char *network;
  Bench bench = { 0 };
  guint max_devices = 0, sigint, sigterm;
  int status = DC_CLI_EXIT_OK;

  g_array_set_clear_func (runs, group_run_clear);
  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (!parse_list (devices_text != NULL ? devices_text : "1,2,3,4", BENCH_GROUP_DEVICES_MAX,
                   counts))
    return dc_cli_usage_error (command, _("--devices takes counts from 1 to %u, such as 1,2,4"),
                               BENCH_GROUP_DEVICES_MAX);
  if (steps < 1 || steps > BENCH_GROUP_STEPS_MAX)
    return dc_cli_usage_error (command, _("--steps takes 1 to %u"), BENCH_GROUP_STEPS_MAX);
  if (threads < 0 || threads > 1024)
    return dc_cli_usage_error (command, _("--threads must be between 1 and 1024"));
  if (gradient_wire != NULL && !g_str_equal (gradient_wire, "f32")
      && !g_str_equal (gradient_wire, "bf16") && !g_str_equal (gradient_wire, "int8"))
    return dc_cli_usage_error (command, _("--gradient-wire takes f32, bf16 or int8, not “%s”"),
                               gradient_wire);
  if ((seq != 0 || batch != 0) && width == 0)
    return dc_cli_usage_error (command, _("--seq and --batch go with --width"));
  if (seed < 0)
    return dc_cli_usage_error (command, _("--seed must be 0 or more"));
  if (width != 0)
    {
      /* A width named in the default sizes takes their sequence and batch
       * (--width 128 alone meant 128/32/8, not the 128/128/32, and
       * measured a different step); others 32 and 8. The train command
       * checks the ranges and says which one is wrong. */
      Size size = { (guint) width, 32, 8 };

      for (guint i = 0; i < G_N_ELEMENTS (default_sizes); i++)
        if (default_sizes[i].width == (guint) width)
          size = default_sizes[i];
      if (seq > 0)
        size.seq = (guint) seq;
      if (batch > 0)
        size.batch = (guint) batch;

      if (width < 0 || seq < 0 || batch < 0)
        return dc_cli_usage_error (command, _("--width, --seq and --batch must be positive"));
      g_array_append_val (sizes, size);
    }
  else
    g_array_append_vals (sizes, default_sizes, G_N_ELEMENTS (default_sizes));
  for (guint i = 0; i < counts->len; i++)
    max_devices = MAX (max_devices, g_array_index (counts, guint, i));

  bench.netns = netns;
  bench.pin = pin;
  bench.gradient_wire = gradient_wire != NULL ? gradient_wire : "f32";
  bench.seed = seed;
  bench.self_exe = g_file_read_link ("/proc/self/exe", NULL);
  if (bench.self_exe == NULL)
    bench.self_exe = g_strdup ("daisychain-cli");
  bench.prefix = g_strdup_printf ("dcbg%d", (int) getpid ());
  network = netns ? "netns-1gbit-1ms" : "loopback";
  sigint = g_unix_signal_add (SIGINT, interrupt_cb, &bench);
  sigterm = g_unix_signal_add (SIGTERM, interrupt_cb, &bench);

  if (netns && !netns_create (&bench, max_devices, &error))
    goto fail;
  if (netns)
    {
      g_autofree char *note = dc_cli_netns_note (&bench.shaped);

      network = dc_cli_netns_network (&bench.shaped);
      if (note != NULL)
        print_note (options, note, NULL);
    }
  for (guint s = 0; s < sizes->len; s++)
    {
      const Size *size = &g_array_index (sizes, Size, s);

      for (guint c = 0; c < counts->len; c++)
        {
          guint n = g_array_index (counts, guint, c);
          guint n_threads = threads > 0 ? (guint) threads : MAX (1, g_get_num_processors () / n);
          g_autofree char *key = g_strdup_printf ("%u/%u", s, n_threads);
          SoloRate *solo = g_hash_table_lookup (solo_rates, key);
          GroupRun run = { n, n_threads, NULL, { 0 }, { 0, -1, -1, 0, 0 } };

          /* One device's rate with a device's share of the processors,
           * measured once per size and share, in this run. */
          if (solo == NULL)
            {
              solo = g_new0 (SoloRate, 1);
              g_hash_table_insert (solo_rates, g_strdup (key), solo);
              if (!run_solo (&bench, size, n_threads, (guint) steps, 1, solo, &error))
                goto fail;
            }
          /* N devices on one host share its memory bandwidth, caches and
           * clock even with cores of their own: N runs alone at once show
           * what the host leaves each, without any exchange. */
          if (concurrent && n > 1
              && !run_solo (&bench, size, n_threads, (guint) steps, n, &run.concurrent, &error))
            goto fail;
          if (!run_group (&bench, size, n, n_threads, (guint) steps, &run.figures, &error))
            {
              figures_clear (&run.figures);
              goto fail;
            }
          run.key = g_steal_pointer (&key);
          g_array_append_val (runs, run);
          if (!solo_after)
            print_runs (options, &bench, network, size, (guint) steps, runs, solo_rates);
        }
      /* --solo-after: one device alone again, once per share used, then
       * the size's groups against the mean of both runs. */
      for (guint r = 0; r < runs->len; r++)
        {
          GroupRun *run = &g_array_index (runs, GroupRun, r);
          SoloRate *solo = g_hash_table_lookup (solo_rates, run->key);
          SoloRate after = { 0, -1, -1, 0, 0 };

          if (solo->after_tokens_per_s > 0)
            continue;
          if (!run_solo (&bench, size, run->n_threads, (guint) steps, 1, &after, &error))
            goto fail;
          solo_rate_add_after (solo, &after);
        }
      print_runs (options, &bench, network, size, (guint) steps, runs, solo_rates);
    }
  goto out;

fail:
  status = dc_cli_fail (options, error);
out:
  g_array_set_size (runs, 0);
  dc_cli_netns_remove (&bench.shaped);
  g_source_remove (sigint);
  g_source_remove (sigterm);
  g_free (bench.prefix);
  g_free (bench.self_exe);
  return status;
}
