/* test-bench-group.c: `daisychain-cli bench group` (suite net).
 *
 * The benchmark runs at the smallest size (width 16, sequence 16, batch 2)
 * with two devices and three measured steps. What is checked is the shape
 * of its output (one well-formed object per size and device count, the
 * times that must be positive), never a figure: timings on a shared 2-core
 * machine say nothing. With root and iproute2 it also runs between network
 * namespaces and checks that it leaves none behind, after a run that
 * succeeds and after one that fails.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"

/* Two small runs (alone, then the group) of four steps each by processes
 * sharing two cores, with the group's connection set-up. */
#define BENCH_BOUND_MS 300000

#define SMALL "--width", "16", "--seq", "16", "--batch", "2", "--threads", "1"

static DcTestProc *
spawn_bench (const char * const *args)
{
  return dc_test_proc_spawn ("bench", NULL, FALSE, args);
}

/* The finer split (`phases`, then `per_device`, one object per device):
 * every field there, none negative, and each measured step's gradient
 * computed ahead (a stable roster of two: steps 2 on all are). */
static void
check_phases (JsonObject *o)
{
  const char *fields[] = { "compute_ms", "ahead_ms", "send_ms", "contrib_wait_ms", "sum_ms",
                           "gather_wait_ms", "adam_ms", "hash_ms", "barrier_ms", "audit_ms" };
  JsonObject *phases;
  JsonArray *devices;

  g_assert_true (json_object_has_member (o, "phases"));
  phases = json_object_get_object_member (o, "phases");
  g_assert_nonnull (phases);
  g_assert_true (json_object_has_member (o, "per_device"));
  devices = json_object_get_array_member (o, "per_device");
  g_assert_nonnull (devices);
  g_assert_cmpuint (json_array_get_length (devices), ==, 2);
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      g_test_message ("phases.%s = %g", fields[i],
                      json_object_get_double_member_with_default (phases, fields[i], -1));
      g_assert_cmpfloat (json_object_get_double_member_with_default (phases, fields[i], -1), >=,
                         0);
      for (guint k = 0; k < 2; k++)
        g_assert_cmpfloat (json_object_get_double_member_with_default (
                             json_array_get_object_element (devices, k), fields[i], -1), >=, 0);
    }
  g_assert_cmpfloat (json_object_get_double_member_with_default (phases, "compute_ms", -1), >, 0);
  g_assert_cmpfloat (json_object_get_double_member_with_default (phases, "computed_ahead", -1),
                     ==, 1.0);
}

/* The step lined up across the devices (`critical_path`): steps 2 and 3
 * (a step's cycle needs the next step's start; the run stops at 4), each
 * part in causal order (a device gathers the summed shards only after the
 * slowest device's last contribution, then steps), and the parts adding up
 * to the whole. Timed from both devices' step lines: a clock time left out
 * or out of order leaves every step out, and the object is missing. */
static void
check_critical_path (JsonObject *o)
{
  const char *not_negative[] = { "slowest_wait_ms", "exchange_ms", "adam_ms" };
  const char *parts[] = { "gradient_ms", "slowest_wait_ms", "exchange_ms", "adam_ms",
                          "next_start_ms" };
  JsonObject *path;
  double sum = 0, step;

  g_assert_true (json_object_has_member (o, "critical_path"));
  path = json_object_get_object_member (o, "critical_path");
  g_assert_cmpint (json_object_get_int_member_with_default (path, "steps", 0), ==, 2);
  step = json_object_get_double_member_with_default (path, "step_ms", -1);
  g_test_message ("critical_path.step_ms = %g", step);
  g_assert_cmpfloat (step, >, 0);
  g_assert_cmpfloat (json_object_get_double_member_with_default (path, "gradient_ms", -1), >, 0);
  for (guint i = 0; i < G_N_ELEMENTS (not_negative); i++)
    g_assert_cmpfloat (json_object_get_double_member_with_default (path, not_negative[i], -1),
                       >=, 0);
  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    {
      g_assert_true (json_object_has_member (path, parts[i]));
      g_test_message ("critical_path.%s = %g", parts[i],
                      json_object_get_double_member (path, parts[i]));
      sum += json_object_get_double_member (path, parts[i]);
    }
  g_assert_cmpfloat_with_epsilon (sum, step, 1e-6 * step + 1e-9);
}

/* @name is there and a share of a whole. */
static void
check_share (JsonObject *o,
             const char *name)
{
  g_test_message ("%s = %g", name, json_object_get_double_member_with_default (o, name, -1));
  g_assert_true (json_object_has_member (o, name));
  g_assert_cmpfloat (json_object_get_double_member (o, name), >=, 0);
  g_assert_cmpfloat (json_object_get_double_member (o, name), <=, 1);
}

static void
check_object (JsonObject *o,
              const char *network)
{
  /* Two devices: each sends its gradient every step, so bytes too. */
  const char *positive[] = { "step_ms", "compute_ms", "combine_ms", "tokens_per_s",
                             "solo_tokens_per_s", "scaling", "bytes_per_device_step",
                             "gradient_bytes", "cpu_ms_per_step", "solo_cpu_ms_per_step" };
  /* Sending and waiting can round to 0 µs on a step where every gradient
   * was already there. */
  const char *not_negative[] = { "send_ms", "wait_ms", "comm_fraction" };

  g_assert_cmpstr (json_object_get_string_member_with_default (o, "bench", ""), ==, "group");
  /* "netns-1gbit-1ms", or "netns-1gbit" on a kernel without netem. */
  g_assert_true (g_str_has_prefix (json_object_get_string_member_with_default (o, "network", ""),
                                   network));
  g_assert_cmpint (json_object_get_int_member_with_default (o, "devices", 0), ==, 2);
  g_assert_cmpint (json_object_get_int_member_with_default (o, "width", 0), ==, 16);
  g_assert_cmpint (json_object_get_int_member_with_default (o, "seq", 0), ==, 16);
  g_assert_cmpint (json_object_get_int_member_with_default (o, "batch", 0), ==, 2);
  g_assert_cmpint (json_object_get_int_member_with_default (o, "steps", 0), ==, 3);
  for (guint i = 0; i < G_N_ELEMENTS (positive); i++)
    {
      g_test_message ("%s = %g", positive[i],
                      json_object_get_double_member_with_default (o, positive[i], -1));
      g_assert_cmpfloat (json_object_get_double_member_with_default (o, positive[i], -1), >, 0);
    }
  /* Two devices, sharded: each sends the other its half of its gradient,
   * then its summed half: one gradient a step, with chunk headers and
   * step reports a little more. */
  g_assert_cmpfloat (json_object_get_double_member_with_default (o, "gradients_per_device_step",
                                                                 -1), >=, 1.0);
  g_assert_cmpfloat (json_object_get_double_member_with_default (o, "gradients_per_device_step",
                                                                 -1), <, 1.5);
  for (guint i = 0; i < G_N_ELEMENTS (not_negative); i++)
    g_assert_cmpfloat (json_object_get_double_member_with_default (o, not_negative[i], -1), >=,
                       0);
  g_assert_cmpfloat (json_object_get_double_member (o, "comm_fraction"), <=, 1);
  /* Slow sending (src/mesh/dc-send-pace.c) needs more than a credit step
   * (256 KiB) in flight; a width-16 gradient is a few kB, so none, on
   * every device. */
  g_assert_cmpfloat (json_object_get_double_member_with_default (o, "slow_send_ms", -1), ==, 0);
  g_assert_cmpint (json_object_get_int_member_with_default (o, "slow_send_episodes", -1), ==, 0);
  for (guint k = 0; k < 2; k++)
    g_assert_cmpfloat (json_object_get_double_member_with_default (
                         json_array_get_object_element (
                           json_object_get_array_member (o, "per_device"), k),
                         "slow_send_ms", -1), ==, 0);
  /* Each device's process CPU a step (its step lines' `cpu_ms`), their
   * mean the object's. */
  {
    JsonArray *devices = json_object_get_array_member (o, "per_device");
    double mean = 0;

    for (guint k = 0; k < 2; k++)
      {
        double cpu = json_object_get_double_member_with_default (
                       json_array_get_object_element (devices, k), "cpu_ms_per_step", -1);

        g_assert_cmpfloat (cpu, >, 0);
        mean += cpu / 2;
      }
    g_assert_cmpfloat_with_epsilon (json_object_get_double_member (o, "cpu_ms_per_step"), mean,
                                    1e-9 + 1e-9 * mean);
  }
  /* The hypervisor's share of the host's CPU time during the group's run
   * and the lone device's (/proc/stat's steal; 0 on bare metal): a share,
   * on every Linux. */
  check_share (o, "host_steal");
  check_share (o, "solo_host_steal");
  check_phases (o);
  check_critical_path (o);
}

/* The only "bench" object of @proc, which exited with 0. */
static JsonObject *
only_object (DcTestProc *proc)
{
  int first = dc_test_proc_find (proc, 0, "bench", NULL);

  g_assert_cmpint (first, >=, 0);
  g_assert_cmpint (dc_test_proc_find (proc, first + 1, "bench", NULL), <, 0);
  return g_ptr_array_index (proc->events, first);
}

/* Two devices on loopback: one object, every time where it should be. It
 * needs the devices' step lines to carry their times (compute_ms …). */
static void
test_loopback (void)
{
  const char *args[] = { "bench", "group", "--json", "--devices", "2", "--steps", "3", SMALL,
                         NULL };
  g_autoptr(DcTestProc) proc = spawn_bench (args);

  g_assert_cmpint (dc_test_proc_expect_exit (proc, BENCH_BOUND_MS), ==, 0);
  check_object (only_object (proc), "loopback");
}

/* The `hash` of step @step in the event lines @path (DC_BENCH_GROUP_LOGS'
 * device-N.json), and in @members the step line's `members` count (0: a
 * lone run's line, which has none); NULL without that step. */
static char *
logged_hash (const char *path,
             gint64      step,
             guint      *members)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *o;

      if (*lines[i] == '\0' || !json_parser_load_from_data (parser, lines[i], -1, NULL))
        continue;
      o = json_node_get_object (json_parser_get_root (parser));
      if (o == NULL
          || g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), "step") != 0
          || json_object_get_int_member_with_default (o, "step", -1) != step)
        continue;
      *members = json_object_has_member (o, "members")
                   ? json_array_get_length (json_object_get_array_member (o, "members")) : 0;
      return g_strdup (json_object_get_string_member_with_default (o, "hash", ""));
    }
  return NULL;
}

/* Device counts one after another, with one thread each: one object per
 * count, in order, and one solo rate for both (measured once per size and
 * share). A run's children must be gone, reads included, before the next
 * run's: a late read of the first run once ended the second early.
 *
 * The lone device and the groups train one run (`--seed`, 1 by default):
 * on the f32 wire a group of one is the solo step bit for bit, so each
 * group of one ends on the lone run's hash (its children's event lines,
 * DC_BENCH_GROUP_LOGS). A group that drew its own seed, as train does
 * without --seed, trained other weights on other batches, whose cost is
 * not the reference's. */
static void
test_runs (void)
{
  const char *args[] = { "bench", "group", "--json", "--devices", "1,2,1", "--steps", "2",
                         SMALL, NULL };
  g_autofree char *logs = g_dir_make_tmp ("dc-bench-group-XXXXXX", NULL);
  g_autoptr(DcTestProc) proc = NULL;
  g_autofree char *solo_hash = NULL;
  gint64 expected[] = { 1, 2, 1 };
  double solo = -1;
  guint groups_of_one = 0;
  int i = -1;

  g_assert_nonnull (logs);
  g_setenv ("DC_BENCH_GROUP_LOGS", logs, TRUE);
  proc = spawn_bench (args);
  g_unsetenv ("DC_BENCH_GROUP_LOGS");
  g_assert_cmpint (dc_test_proc_expect_exit (proc, BENCH_BOUND_MS), ==, 0);
  /* The last step (2 measured after one warm-up) of every child that trained. */
  for (guint n = 0;; n++)
    {
      g_autofree char *file = g_strdup_printf ("device-%u.json", n);
      g_autofree char *path = g_build_filename (logs, file, NULL);
      g_autofree char *hash = NULL;
      guint members = 0;

      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        break;
      hash = logged_hash (path, 3, &members);
      if (hash != NULL && members == 0)
        {
          g_test_message ("lone run (device-%u): %s", n, hash);
          if (solo_hash == NULL)
            solo_hash = g_strdup (hash);
          g_assert_cmpstr (hash, ==, solo_hash);
        }
      else if (hash != NULL && members == 1)
        {
          g_test_message ("group of one (device-%u): %s", n, hash);
          g_assert_nonnull (solo_hash);
          g_assert_cmpstr (hash, ==, solo_hash);
          groups_of_one++;
        }
      g_unlink (path);
      file[strlen (file) - 4] = '\0';
      g_free (path);
      path = g_strdup_printf ("%s/%stxt", logs, file);
      g_unlink (path);
    }
  g_assert_cmpuint (groups_of_one, ==, 2);
  g_assert_cmpint (g_rmdir (logs), ==, 0);
  for (guint n = 0; n < G_N_ELEMENTS (expected); n++)
    {
      JsonObject *o;

      i = dc_test_proc_find (proc, i + 1, "bench", NULL);
      g_assert_cmpint (i, >=, 0);
      o = g_ptr_array_index (proc->events, i);
      g_assert_cmpint (json_object_get_int_member (o, "devices"), ==, expected[n]);
      g_assert_cmpint (json_object_get_int_member_with_default (o, "seed", -1), ==, 1);
      g_assert_cmpfloat (json_object_get_double_member (o, "tokens_per_s"), >, 0);
      if (solo < 0)
        solo = json_object_get_double_member (o, "solo_tokens_per_s");
      g_assert_cmpfloat (json_object_get_double_member (o, "solo_tokens_per_s"), ==, solo);
      /* A group of one sends nothing; two send at least a gradient a step. */
      g_test_message ("%u devices: %g bytes a device a step", (guint) expected[n],
                      json_object_get_double_member_with_default (o, "bytes_per_device_step", -1));
      if (expected[n] == 1)
        g_assert_cmpfloat (json_object_get_double_member_with_default (o, "bytes_per_device_step",
                                                                       -1), ==, 0);
      else
        g_assert_cmpfloat (json_object_get_double_member_with_default (o, "bytes_per_device_step",
                                                                       -1), >, 0);
    }
  g_assert_cmpint (dc_test_proc_find (proc, i + 1, "bench", NULL), <, 0);
}

static void
test_usage (void)
{
  const char *bad[][12] = {
    { "bench", "group", "--devices", "0", NULL },
    { "bench", "group", "--devices", "9", NULL },
    { "bench", "group", "--devices", "2,x", NULL },
    { "bench", "group", "--steps", "0", NULL },
    { "bench", "group", "--steps", "1001", NULL },
    { "bench", "group", "--seq", "16", NULL },
    { "bench", "group", "--seed", "-1", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(DcTestProc) proc = spawn_bench (bad[i]);

      g_assert_cmpint (dc_test_proc_expect_exit (proc, 60000), ==, 2);
    }
}

/* Whether a namespace named PREFIX… is listed. */
static gboolean
netns_left (const char *prefix)
{
  const char *argv[] = { "ip", "netns", "list", NULL };
  g_autofree char *out = NULL;
  int status = -1;

  g_assert_true (dc_test_spawn (argv, &out, NULL, &status, 10000));
  /* bytes_to_string gives NULL for no output: no namespace at all. */
  return out != NULL && strstr (out, prefix) != NULL;
}

static gboolean
netns_available (void)
{
  g_autofree char *name = g_strdup_printf ("dcbgprobe%d", (int) getpid ());
  const char *add[] = { "ip", "netns", "add", name, NULL };
  const char *del[] = { "ip", "netns", "del", name, NULL };
  int status = -1;

  if (geteuid () != 0 || !dc_test_spawn (add, NULL, NULL, &status, 10000) || status != 0)
    return FALSE;
  dc_test_spawn (del, NULL, NULL, &status, 10000);
  return TRUE;
}

/* --pin-cores, two devices of one thread: device k reads back core k
 * alone (`per_device` `cpus`, from sched_getaffinity on its process)
 * where this machine has two processors or more; without it each may run
 * on all of them (“0-N”, or what this test may use). Before the option
 * every device could run anywhere. The pinned run also asks for
 * --concurrent-solo: two devices training alone at once give
 * `concurrent_solo_tokens_per_s`, and `scaling_vs_concurrent` is the
 * group's rate over twice it; the run without the option has neither.
 * It also asks for --solo-after: one device alone before and after the
 * group, and `solo_tokens_per_s` (which `scaling` divides by) is their
 * mean; without it neither run's figure is printed. */
static void
test_pin_cores (void)
{
  const char *pinned[] = { "bench", "group", "--json", "--devices", "2", "--steps", "2",
                           "--pin-cores", "--concurrent-solo", "--solo-after", SMALL, NULL };
  const char *free_args[] = { "bench", "group", "--json", "--devices", "2", "--steps", "2",
                              SMALL, NULL };
  g_autoptr(DcTestProc) proc = NULL;
  g_autoptr(DcTestProc) free_proc = NULL;
  JsonArray *per_device;
  JsonObject *object;
  double concurrent, before, after, solo;

  if (g_get_num_processors () < 2)
    {
      g_test_skip ("--pin-cores needs two processors for two devices of one thread");
      return;
    }
  proc = spawn_bench (pinned);
  g_assert_cmpint (dc_test_proc_expect_exit (proc, BENCH_BOUND_MS), ==, 0);
  object = only_object (proc);
  per_device = json_object_get_array_member (object, "per_device");
  g_assert_cmpuint (json_array_get_length (per_device), ==, 2);
  g_assert_true (json_object_has_member (object, "concurrent_solo_tokens_per_s"));
  concurrent = json_object_get_double_member (object, "concurrent_solo_tokens_per_s");
  g_assert_cmpfloat (concurrent, >, 0);
  g_assert_cmpfloat_with_epsilon (json_object_get_double_member (object, "scaling_vs_concurrent"),
                                  json_object_get_double_member (object, "tokens_per_s")
                                  / (2 * concurrent), 1e-9);
  check_share (object, "concurrent_solo_host_steal");
  g_assert_true (json_object_has_member (object, "solo_before_tokens_per_s"));
  g_assert_true (json_object_has_member (object, "solo_after_tokens_per_s"));
  before = json_object_get_double_member (object, "solo_before_tokens_per_s");
  after = json_object_get_double_member (object, "solo_after_tokens_per_s");
  solo = json_object_get_double_member (object, "solo_tokens_per_s");
  g_test_message ("one device alone: %g before, %g after the group", before, after);
  g_assert_cmpfloat (before, >, 0);
  g_assert_cmpfloat (after, >, 0);
  g_assert_cmpfloat_with_epsilon (solo, (before + after) / 2, 1e-9 * solo);
  g_assert_cmpfloat_with_epsilon (json_object_get_double_member (object, "scaling"),
                                  json_object_get_double_member (object, "tokens_per_s")
                                  / (2 * solo), 1e-9);
  check_share (object, "solo_host_steal");
  for (guint k = 0; k < 2; k++)
    {
      g_autofree char *want = g_strdup_printf ("%u", k);

      g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (per_device,
                                                                                    k),
                                                      "cpus"), ==, want);
    }

  free_proc = spawn_bench (free_args);
  g_assert_cmpint (dc_test_proc_expect_exit (free_proc, BENCH_BOUND_MS), ==, 0);
  object = only_object (free_proc);
  g_assert_false (json_object_has_member (object, "concurrent_solo_tokens_per_s"));
  g_assert_false (json_object_has_member (object, "scaling_vs_concurrent"));
  g_assert_false (json_object_has_member (object, "concurrent_solo_host_steal"));
  g_assert_false (json_object_has_member (object, "solo_before_tokens_per_s"));
  g_assert_false (json_object_has_member (object, "solo_after_tokens_per_s"));
  per_device = json_object_get_array_member (object, "per_device");
  for (guint k = 0; k < 2; k++)
    {
      g_autofree char *alone = g_strdup_printf ("%u", k);

      g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (per_device,
                                                                                    k),
                                                      "cpus"), !=, alone);
    }
}

/* Between namespaces: the object, its shaping (with the delay hub, the
 * hub's counters: frames forwarded, none held under 1 ms; with tbf, its
 * counters: packets through every link; the namespaces' UDP counters),
 * then none of
 * the bench's namespaces left; a run that fails after making them (batch 1 is refused by train)
 * removes them too. */
static void
test_netns (void)
{
  const char *args[] = { "bench", "group", "--json", "--netns", "--devices", "2", "--steps", "3",
                         SMALL, NULL };
  const char *failing[] = { "bench", "group", "--json", "--netns", "--devices", "2",
                            "--width", "16", "--seq", "16", "--batch", "1", NULL };
  g_autoptr(DcTestProc) proc = NULL;
  g_autoptr(DcTestProc) fails = NULL;
  g_autofree char *prefix = NULL;
  const char *shaping;
  JsonObject *object;

  if (!netns_available ())
    {
      g_test_skip ("network namespaces are unavailable here (needs root and iproute2)");
      return;
    }
  proc = spawn_bench (args);
  prefix = g_strdup_printf ("dcbg%s-", g_subprocess_get_identifier (proc->process));
  g_assert_cmpint (dc_test_proc_expect_exit (proc, BENCH_BOUND_MS), ==, 0);
  object = only_object (proc);
  check_object (object, "netns-1gbit");
  /* Where the kernel has no netem, the delay hub holds every frame 1 ms:
   * its counters say it forwarded frames, none sooner. */
  shaping = json_object_get_string_member_with_default (object, "shaping", "");
  g_test_message ("shaping %s", shaping);
  if (g_str_equal (shaping, "hub"))
    {
      JsonObject *hub = json_object_get_object_member (object, "hub");

      g_assert_cmpstr (json_object_get_string_member (object, "network"), ==, "netns-1gbit-1ms");
      g_assert_cmpint (json_object_get_int_member (object, "hub_delay_us"), ==, 1000);
      g_assert_nonnull (hub);
      g_assert_cmpint (json_object_get_int_member (hub, "released"), >, 0);
      g_assert_cmpfloat (json_object_get_double_member (hub, "min_hold_us"), >=, 1000.0);
    }
  else
    /* netem, or tbf alone where the hub cannot run (a note says why). */
    g_assert_true (g_str_equal (shaping, "netem") || g_str_equal (shaping, "tbf"));
  /* With tbf, its counters summed over the three links (the signaling
   * service's and the two devices'): packets went through it. */
  if (g_str_equal (shaping, "hub") || g_str_equal (shaping, "tbf"))
    {
      JsonObject *tbf = json_object_get_object_member (object, "tbf");

      g_assert_nonnull (tbf);
      g_assert_cmpint (json_object_get_int_member (tbf, "links"), ==, 3);
      g_assert_cmpint (json_object_get_int_member (tbf, "packets"), >, 0);
      g_assert_cmpint (json_object_get_int_member (tbf, "drops"), >=, 0);
    }
  /* The UDP counters of the three namespaces (the signaling service's and
   * the two devices'): datagrams crossed, both ways. */
  {
    JsonObject *udp = json_object_get_object_member (object, "udp");

    g_assert_nonnull (udp);
    g_assert_cmpint (json_object_get_int_member (udp, "namespaces"), ==, 3);
    g_assert_cmpint (json_object_get_int_member (udp, "in_datagrams"), >, 0);
    g_assert_cmpint (json_object_get_int_member (udp, "out_datagrams"), >, 0);
    g_assert_cmpint (json_object_get_int_member (udp, "rcvbuf_errors"), >=, 0);
  }
  g_assert_false (netns_left (prefix));

  fails = spawn_bench (failing);
  g_clear_pointer (&prefix, g_free);
  prefix = g_strdup_printf ("dcbg%s-", g_subprocess_get_identifier (fails->process));
  g_assert_cmpint (dc_test_proc_expect_exit (fails, BENCH_BOUND_MS), ==, 1);
  g_assert_cmpint (dc_test_proc_find (fails, 0, "error", NULL), >=, 0);
  g_assert_false (netns_left (prefix));
}

/* --netns where iproute2 is missing (the GPU machine's image): a clear
 * error naming “ip” and where to get it, before any namespace is made,
 * instead of GLib's “Failed to execute child process”. Runs anywhere: the
 * check comes before anything that needs root. */
static void
test_netns_no_iproute (void)
{
  const char *args[] = { "bench", "group", "--json", "--netns", "--devices", "1", "--steps", "1",
                         SMALL, NULL };
  g_autofree char *empty = g_dir_make_tmp ("dc-bench-path-XXXXXX", NULL);
  g_autofree char *path = g_strdup (g_getenv ("PATH"));
  g_autoptr(DcTestProc) proc = NULL;
  JsonObject *o;
  int e;

  g_assert_nonnull (empty);
  g_setenv ("PATH", empty, TRUE);
  proc = spawn_bench (args);
  g_setenv ("PATH", path, TRUE);
  g_assert_cmpint (dc_test_proc_expect_exit (proc, 60000), ==, 1);
  e = dc_test_proc_find (proc, 0, "error", NULL);
  g_assert_cmpint (e, >=, 0);
  o = g_ptr_array_index (proc->events, e);
  g_test_message ("%s", json_object_get_string_member_with_default (o, "message", ""));
  g_assert_nonnull (strstr (json_object_get_string_member_with_default (o, "message", ""),
                            "“ip” is not in PATH"));
  g_rmdir (empty);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* Raw chunks (the groups' devices inherit it): the byte counts checked
   * here are the sharded exchange's own (compressed chunks:
   * test-train-group-wire.c). */
  g_setenv ("DC_TRAIN_GROUP_ZSTD", "0", TRUE);
  g_test_add_func ("/dc/bench/group/usage", test_usage);
  g_test_add_func ("/dc/bench/group/loopback", test_loopback);
  g_test_add_func ("/dc/bench/group/runs", test_runs);
  g_test_add_func ("/dc/bench/group/pin-cores", test_pin_cores);
  g_test_add_func ("/dc/bench/group/netns", test_netns);
  g_test_add_func ("/dc/bench/group/netns-no-iproute", test_netns_no_iproute);
  return g_test_run ();
}
