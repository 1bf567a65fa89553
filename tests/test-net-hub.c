/* test-net-hub.c: `daisychain-cli net-hub`, the delay hub of the benches'
 * shaped network where the kernel has no sch_netem (suite net).
 *
 * Two namespaces A and B, each on a veth whose other end is a port in a
 * third, H, where the hub runs: UDP datagrams cross only through it. What
 * is checked are properties, never a speed: a datagram crosses, and none
 * comes back before two delays (a lower bound: the hub holds every frame
 * for the delay, and an echo crosses twice); the queue's bound holds, and
 * every frame is accounted for (sent, or dropped and counted); the hub
 * ends when its parent dies, and when its standard input (a pipe) closes.
 * Needs root and iproute2 (skipped otherwise); each case runs in a
 * subprocess so that the namespaces are removed after a failure too.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <stdio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"

#define EVENT_BOUND_MS 30000
#define A_ADDRESS "198.19.77.1"
#define B_ADDRESS "198.19.77.2"
#define A_MAC "02:dc:00:00:77:01"
#define B_MAC "02:dc:00:00:77:02"
#define UDP_PORT 7707

static char *ns_h, *ns_a, *ns_b;

/* In a case's subprocess: the namespace its parent made (tag h, a or b). */
static char *
ns (const char *tag)
{
  return g_strdup_printf ("dcnh%d%s", (int) getppid (), tag);
}

/* Writes @value to the sysctl @path (under /proc/sys/net) of namespace
 * @ns, or with @value NULL whether it reads "1": entries there are the
 * opener's namespace's. */
static gboolean
net_sysctl (const char *ns,
            const char *path,
            const char *value)
{
  g_autofree char *target = g_strdup_printf ("/run/netns/%s", ns);
  g_autofree char *file = g_strdup_printf ("/proc/sys/net/%s", path);
  int self = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int other = open (target, O_RDONLY | O_CLOEXEC);
  gboolean ok = FALSE;

  if (self >= 0 && other >= 0 && setns (other, CLONE_NEWNET) == 0)
    {
      int fd = open (file, (value != NULL ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
      char now[2] = { 0 };

      if (value != NULL)
        ok = fd >= 0 && write (fd, value, strlen (value)) == (ssize_t) strlen (value);
      else
        ok = fd >= 0 && read (fd, now, 1) == 1 && now[0] == '1';
      if (fd >= 0)
        close (fd);
      g_assert_cmpint (setns (self, CLONE_NEWNET), ==, 0);
    }
  if (self >= 0)
    close (self);
  if (other >= 0)
    close (other);
  return ok;
}

static void
netns_teardown (void)
{
  char **all[] = { &ns_a, &ns_b, &ns_h };

  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    if (*all[i] != NULL)
      {
        g_autofree char *cmd = g_strdup_printf ("netns del %s", *all[i]);

        dc_test_run_ip (cmd);
        g_clear_pointer (all[i], g_free);
      }
}

/* H with ports pa and pb; A (eth0, A_ADDRESS) and B (eth0, B_ADDRESS) on
 * them, with fixed addresses and each other's in the neighbour table, so
 * that no ARP crosses, and without IPv6, so that nothing but the test's
 * datagrams does. */
static gboolean
netns_setup (char **reason)
{
  int pid = (int) getpid ();
  const char *steps[] = {
    "-n H link set lo up",
    "-n H link add pa type veth peer name eth0 address " A_MAC " netns A",
    "-n H link add pb type veth peer name eth0 address " B_MAC " netns B",
    "-n A addr add " A_ADDRESS "/24 dev eth0",
    "-n B addr add " B_ADDRESS "/24 dev eth0",
    "-n A neigh replace " B_ADDRESS " lladdr " B_MAC " dev eth0 nud permanent",
    "-n B neigh replace " A_ADDRESS " lladdr " A_MAC " dev eth0 nud permanent",
    "-n A link set eth0 up",
    "-n B link set eth0 up",
    "-n H link set pa up",
    "-n H link set pb up",
  };
  char **names[] = { &ns_h, &ns_a, &ns_b };
  const char *tags[] = { "h", "a", "b" };

  if (geteuid () != 0)
    {
      *reason = g_strdup ("the delay hub's namespaces need root");
      return FALSE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *add = g_strdup_printf ("netns add dcnh%d%s", pid, tags[i]);

      if (!dc_test_run_ip (add))
        {
          *reason = g_strdup ("network namespaces are unavailable here (“ip netns add” failed: "
                              "needs root and iproute2)");
          return FALSE;
        }
      *names[i] = g_strdup_printf ("dcnh%d%s", pid, tags[i]);
      /* Before the links exist: they take the default. */
      if (!net_sysctl (*names[i], "ipv6/conf/default/disable_ipv6", "1")
          || !net_sysctl (*names[i], "ipv6/conf/all/disable_ipv6", "1"))
        g_test_message ("IPv6 stays on in %s: counts are not compared exactly", *names[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    {
      g_autoptr(GString) line = g_string_new (steps[i]);
      g_autofree char *cmd = NULL;

      g_string_replace (line, "-n H", "-n @h", 0);
      g_string_replace (line, "-n A", "-n @a", 0);
      g_string_replace (line, "-n B", "-n @b", 0);
      g_string_replace (line, "netns A", "netns @a", 0);
      g_string_replace (line, "netns B", "netns @b", 0);
      g_string_replace (line, "@h", ns_h, 0);
      g_string_replace (line, "@a", ns_a, 0);
      g_string_replace (line, "@b", ns_b, 0);
      cmd = g_string_free (g_steal_pointer (&line), FALSE);
      if (!dc_test_run_ip (cmd))
        {
          *reason = g_strdup_printf ("“ip %s” failed: veth pairs are unavailable here", cmd);
          return FALSE;
        }
    }
  return TRUE;
}

/* Runs the case @path in a subprocess between set-up and teardown. */
static void
in_namespaces (const char *path)
{
  g_autofree char *reason = NULL;

  if (!netns_setup (&reason))
    {
      netns_teardown ();
      g_test_skip (reason);
      return;
    }
  g_test_trap_subprocess (path, 120 * G_USEC_PER_SEC,
                          G_TEST_SUBPROCESS_INHERIT_STDERR | G_TEST_SUBPROCESS_INHERIT_STDOUT);
  netns_teardown ();
  g_test_trap_assert_passed ();
}

/* A UDP socket made in the namespace tagged @tag (its namespace stays its
 * own). */
static int
udp_socket_in (const char *tag,
               const char *address,
               guint16     port)
{
  g_autofree char *name = ns (tag);
  g_autofree char *target = g_strdup_printf ("/run/netns/%s", name);
  struct sockaddr_in bound = { .sin_family = AF_INET, .sin_port = htons (port) };
  int self = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int other = open (target, O_RDONLY | O_CLOEXEC);
  int fd;

  g_assert_cmpint (self, >=, 0);
  g_assert_cmpint (other, >=, 0);
  g_assert_cmpint (setns (other, CLONE_NEWNET), ==, 0);
  fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (setns (self, CLONE_NEWNET), ==, 0);
  close (self);
  close (other);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (inet_pton (AF_INET, address, &bound.sin_addr), ==, 1);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &bound, sizeof bound), ==, 0);
  return fd;
}

static void
send_to (int         fd,
         const char *address,
         const void *data,
         gsize       len)
{
  struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons (UDP_PORT) };

  g_assert_cmpint (inet_pton (AF_INET, address, &to.sin_addr), ==, 1);
  g_assert_cmpint (sendto (fd, data, len, 0, (struct sockaddr *) &to, sizeof to), ==,
                   (ssize_t) len);
}

/* One datagram read within @timeout_ms, or -1. */
static ssize_t
receive (int    fd,
         void  *buffer,
         gsize  size,
         int    timeout_ms)
{
  struct pollfd p = { fd, POLLIN, 0 };

  if (poll (&p, 1, timeout_ms) != 1)
    return -1;
  return recv (fd, buffer, size, MSG_DONTWAIT);
}

static DcTestProc *
start_hub_traced (const char *delay_us,
                  const char *queue_frames,
                  const char *trace)
{
  g_autofree char *trace_arg = trace != NULL ? g_strdup_printf ("--trace=%s", trace) : NULL;
  const char *args[] = { "net-hub", "--port", "pa", "--port", "pb", "--delay-us", delay_us,
                         "--queue-frames", queue_frames, trace_arg, NULL };
  g_autofree char *h = ns ("h");
  DcTestProc *hub = dc_test_proc_spawn ("hub", h, TRUE, args);
  JsonObject *ready = dc_test_proc_expect (hub, "hub", NULL, EVENT_BOUND_MS);

  g_assert_cmpint (json_object_get_int_member (ready, "delay_us"), ==,
                   g_ascii_strtoll (delay_us, NULL, 10));
  return hub;
}

static DcTestProc *
start_hub (const char *delay_us,
           const char *queue_frames)
{
  return start_hub_traced (delay_us, queue_frames, NULL);
}

static gboolean
output_ended (gpointer proc)
{
  return ((DcTestProc *) proc)->eof;
}

/* Whether nothing but the test's datagrams crosses (IPv6 off everywhere),
 * so that counts can be compared exactly. */
static gboolean
quiet (void)
{
  const char *tags[] = { "h", "a", "b" };

  for (guint i = 0; i < G_N_ELEMENTS (tags); i++)
    {
      g_autofree char *name = ns (tags[i]);

      if (!net_sysctl (name, "ipv6/conf/all/disable_ipv6", NULL))
        return FALSE;
    }
  return TRUE;
}

/* The hub's last counters: its final line after SIGTERM, exit status 0. */
static JsonObject *
stop_hub (DcTestProc *hub)
{
  int i = -1, next;

  g_subprocess_send_signal (hub->process, SIGTERM);
  g_assert_cmpint (dc_test_proc_expect_exit (hub, EVENT_BOUND_MS), ==, 0);
  /* Its output ends with the line; the pipe may be read after the exit. */
  g_assert_true (dc_test_wait_until (output_ended, hub, EVENT_BOUND_MS));
  while ((next = dc_test_proc_find (hub, i + 1, "hub-stats", NULL)) >= 0)
    i = next;
  g_assert_cmpint (i, >=, 0);
  return json_object_ref (g_ptr_array_index (hub->events, i));
}

/* Echoes between A and B through a hub of 20 ms: every datagram comes
 * back, none sooner than two delays after it left. */
static void
test_delay (void)
{
  const gint64 delay_us = 20000;
  g_autoptr(DcTestProc) hub = NULL;
  g_autoptr(JsonObject) stats = NULL;
  int a, b;

  if (!g_test_subprocess ())
    {
      in_namespaces ("/net/hub/delay");
      return;
    }
  hub = start_hub ("20000", "4096");
  a = udp_socket_in ("a", A_ADDRESS, UDP_PORT);
  b = udp_socket_in ("b", B_ADDRESS, UDP_PORT);
  for (guint i = 0; i < 8; i++)
    {
      char out[64], in[64], echo[64];
      gint64 start = g_get_monotonic_time (), rtt;
      ssize_t n;

      g_snprintf (out, sizeof out, "ping %u", i);
      send_to (a, B_ADDRESS, out, strlen (out));
      n = receive (b, in, sizeof in, EVENT_BOUND_MS);
      g_assert_cmpint (n, ==, (ssize_t) strlen (out));
      g_assert_cmpmem (in, n, out, strlen (out));
      send_to (b, A_ADDRESS, in, (gsize) n);
      n = receive (a, echo, sizeof echo, EVENT_BOUND_MS);
      rtt = g_get_monotonic_time () - start;
      g_assert_cmpint (n, ==, (ssize_t) strlen (out));
      g_assert_cmpmem (echo, n, out, strlen (out));
      g_test_message ("round trip %u: %.3f ms (the hub's two delays: %.3f ms)", i, rtt / 1e3,
                      2 * delay_us / 1e3);
      g_assert_cmpint (rtt, >=, 2 * delay_us);
    }
  /* Without a hub nothing crosses: the ports are on no bridge. */
  stats = stop_hub (hub);
  {
    char in[64];

    send_to (a, B_ADDRESS, "after", 5);
    g_assert_cmpint (receive (b, in, sizeof in, 300), ==, -1);
  }
  g_test_message ("hub: min hold %.1f µs, mean late %.1f µs, max late %.1f µs",
                  json_object_get_double_member (stats, "min_hold_us"),
                  json_object_get_double_member (stats, "mean_late_us"),
                  json_object_get_double_member (stats, "max_late_us"));
  if (quiet ())
    g_assert_cmpint (json_object_get_int_member (stats, "released"), ==, 16);
  else
    g_assert_cmpint (json_object_get_int_member (stats, "released"), >=, 16);
  g_assert_cmpfloat (json_object_get_double_member (stats, "min_hold_us"), >=, delay_us);
  g_assert_cmpint (json_object_get_int_member (stats, "dropped_queue"), ==, 0);
  /* Normal priority unless DC_NETNS_HUB_PRIORITY=fifo asks. */
  if (g_getenv ("DC_NETNS_HUB_PRIORITY") == NULL)
    g_assert_cmpstr (json_object_get_string_member (stats, "priority"), ==, "normal");
  close (a);
  close (b);
}

/* --trace: the file has a line for every frame released (its count the
 * stats' `released`), none sent before it was read plus the delay, and the
 * test's datagrams from A's port to B's with their frames' length
 * (Ethernet, IPv4 and UDP headers: 42 bytes, and the payload). */
static void
test_trace (void)
{
  g_autofree char *dir = NULL, *path = NULL, *text = NULL;
  g_autoptr(DcTestProc) hub = NULL;
  g_autoptr(JsonObject) stats = NULL;
  g_auto(GStrv) lines = NULL;
  const char payload[] = "a datagram of forty bytes, give or take.";
  guint records = 0, from_a = 0;
  int a, b;

  if (!g_test_subprocess ())
    {
      in_namespaces ("/net/hub/trace");
      return;
    }
  dir = g_dir_make_tmp ("dc-net-hub-XXXXXX", NULL);
  g_assert_nonnull (dir);
  path = g_build_filename (dir, "trace.txt", NULL);
  hub = start_hub_traced ("2000", "4096", path);
  a = udp_socket_in ("a", A_ADDRESS, UDP_PORT);
  b = udp_socket_in ("b", B_ADDRESS, UDP_PORT);
  for (guint i = 0; i < 4; i++)
    {
      char in[64];

      send_to (a, B_ADDRESS, payload, strlen (payload));
      g_assert_cmpint (receive (b, in, sizeof in, EVENT_BOUND_MS), ==, (ssize_t) strlen (payload));
    }
  stats = stop_hub (hub);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_true (g_str_has_prefix (lines[0], "# net-hub trace:"));
  for (guint i = 1; lines[i] != NULL; i++)
    {
      gint64 read_us, sent_us;
      int in, out;
      guint len;

      if (*lines[i] == '\0')
        continue;
      g_assert_cmpint (sscanf (lines[i], "%" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %d %d %u",
                               &read_us, &sent_us, &in, &out, &len), ==, 5);
      g_assert_cmpint (sent_us - read_us, >=, 2000 - 1);
      g_assert_cmpint (in, >=, 0);
      g_assert_cmpint (in, <=, 1);
      g_assert_cmpint (out, >=, -1);
      g_assert_cmpint (out, <=, 1);
      g_assert_cmpint (out, !=, in);
      if (in == 0 && len == 42 + strlen (payload))
        from_a++;
      records++;
    }
  g_assert_cmpint (records, ==, json_object_get_int_member (stats, "released"));
  g_assert_cmpint (from_a, >=, 4);
  if (quiet ())
    g_assert_cmpint (from_a, ==, 4);
  g_unlink (path);
  g_rmdir (dir);
  close (a);
  close (b);
}

/* A burst of 64 datagrams into a hub that holds 8 frames for half a
 * second: it never holds more than 8, and every datagram is either
 * delivered or counted as dropped. Where the burst left within the delay
 * (it takes microseconds), some must have been dropped. */
static void
test_queue_bound (void)
{
  const guint burst = 64;
  const gint64 delay_us = 500000;
  g_autoptr(DcTestProc) hub = NULL;
  g_autoptr(JsonObject) stats = NULL;
  gint64 start, took;
  guint delivered = 0;
  char in[64];
  int a, b;

  if (!g_test_subprocess ())
    {
      in_namespaces ("/net/hub/queue-bound");
      return;
    }
  hub = start_hub ("500000", "8");
  a = udp_socket_in ("a", A_ADDRESS, UDP_PORT);
  b = udp_socket_in ("b", B_ADDRESS, UDP_PORT);
  start = g_get_monotonic_time ();
  for (guint i = 0; i < burst; i++)
    send_to (a, B_ADDRESS, &i, sizeof i);
  took = g_get_monotonic_time () - start;
  /* Everything held is out after a delay; wait for silence well past it. */
  while (receive (b, in, sizeof in, 3 * delay_us / 1000) > 0)
    delivered++;
  stats = stop_hub (hub);
  g_test_message ("burst sent in %.3f ms; %u delivered; hub: received %" G_GINT64_FORMAT
                  ", dropped %" G_GINT64_FORMAT ", max queued %" G_GINT64_FORMAT, took / 1e3,
                  delivered, json_object_get_int_member (stats, "received"),
                  json_object_get_int_member (stats, "dropped_queue"),
                  json_object_get_int_member (stats, "max_queued"));
  g_assert_cmpint (json_object_get_int_member (stats, "max_queued"), <=, 8);
  g_assert_cmpint (json_object_get_int_member (stats, "max_queued"), >=, 1);
  if (quiet ())
    g_assert_cmpint (json_object_get_int_member (stats, "received")
                     + json_object_get_int_member (stats, "socket_drops"), ==, burst);
  g_assert_cmpint (json_object_get_int_member (stats, "released")
                   + json_object_get_int_member (stats, "dropped_queue")
                   + json_object_get_int_member (stats, "truncated")
                   + json_object_get_int_member (stats, "queued"), ==,
                   json_object_get_int_member (stats, "received"));
  /* Two ports, B's address never seen (B sent nothing): each released
   * frame is flooded to B's port alone. */
  if (quiet ())
    {
      g_assert_cmpint (json_object_get_int_member (stats, "sent")
                       + json_object_get_int_member (stats, "dropped_send"), ==,
                       json_object_get_int_member (stats, "released"));
      g_assert_cmpint (delivered, ==, json_object_get_int_member (stats, "sent"));
    }
  else
    g_assert_cmpint (delivered, <=, json_object_get_int_member (stats, "sent"));
  if (took < delay_us)
    g_assert_cmpint (json_object_get_int_member (stats, "dropped_queue"), >=, 1);
  else
    g_test_message ("the burst took longer than the delay: the drop is not checked");
  close (a);
  close (b);
}

/* The hub's parent killed: the hub ends too (PR_SET_PDEATHSIG). Its
 * parent is a shell that started it in the background (standard input
 * /dev/null, so only the parent's death can end it) and became `sleep`;
 * this process adopts the orphan to reap it. */
static void
test_parent_dies (void)
{
  g_autofree char *cli = NULL;
  g_autofree char *h = ns ("h");
  g_autoptr(GSubprocess) shell = NULL;
  g_autoptr(GDataInputStream) out = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ready = FALSE;
  pid_t hub_pid = 0;
  gint64 deadline;
  int status = 0;

  if (!g_test_subprocess ())
    {
      in_namespaces ("/net/hub/parent-dies");
      return;
    }
  g_assert_cmpint (prctl (PR_SET_CHILD_SUBREAPER, 1), ==, 0);
  cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  shell = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error, "ip", "netns", "exec",
                            h, "sh", "-c",
                            "\"$0\" net-hub --port=pa --port=pb & echo \"pid $!\"; "
                            "exec sleep 600", cli, NULL);
  g_assert_no_error (error);
  out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (shell));
  /* Its pid and the hub's ready line, in either order. */
  while (hub_pid == 0 || !ready)
    {
      g_autofree char *line = g_data_input_stream_read_line_utf8 (out, NULL, NULL, &error);

      g_assert_no_error (error);
      g_assert_nonnull (line);
      if (g_str_has_prefix (line, "pid "))
        hub_pid = (pid_t) g_ascii_strtoll (line + 4, NULL, 10);
      else if (strstr (line, "\"event\":\"hub\"") != NULL)
        ready = TRUE;
    }
  g_assert_cmpint (hub_pid, >, 0);
  g_assert_cmpint (kill (hub_pid, 0), ==, 0);
  g_subprocess_force_exit (shell);
  g_assert_true (g_subprocess_wait (shell, NULL, NULL));
  deadline = g_get_monotonic_time () + EVENT_BOUND_MS * 1000;
  while (waitpid (hub_pid, &status, WNOHANG) == 0 && g_get_monotonic_time () < deadline)
    g_usleep (10000);
  /* Reaped here: it ended (its SIGTERM handled, counters printed). */
  g_assert_cmpint (kill (hub_pid, 0), ==, -1);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
}

/* Its standard input a pipe that closes: the hub ends, counters printed. */
static void
test_stdin_closed (void)
{
  g_autoptr(DcTestProc) hub = NULL;
  g_autoptr(GError) error = NULL;

  if (!g_test_subprocess ())
    {
      in_namespaces ("/net/hub/stdin-closed");
      return;
    }
  hub = start_hub ("1000", "4096");
  g_assert_true (g_output_stream_close (g_subprocess_get_stdin_pipe (hub->process), NULL,
                                        &error));
  g_assert_no_error (error);
  g_assert_cmpint (dc_test_proc_expect_exit (hub, EVENT_BOUND_MS), ==, 0);
  dc_test_proc_expect (hub, "hub-stats", NULL, EVENT_BOUND_MS);
}

/* Runs anywhere: a wrong command line is refused with status 2, a link
 * that is not there with status 1 and an error event. */
static void
test_usage (void)
{
  const char *bad[][8] = {
    { "net-hub", "--port", "pa", NULL },
    { "net-hub", NULL },
    { "net-hub", "--port", "pa", "--port", "pb", "--delay-us", "-1", NULL },
    { "net-hub", "--port", "pa", "--port", "pb", "--queue-frames", "0", NULL },
  };
  const char *missing[] = { "net-hub", "--port", "dcnohub0", "--port", "dcnohub1", NULL };
  g_autoptr(DcTestProc) proc = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(DcTestProc) p = dc_test_proc_spawn ("usage", NULL, FALSE, bad[i]);

      g_assert_cmpint (dc_test_proc_expect_exit (p, EVENT_BOUND_MS), ==, 2);
    }
  proc = dc_test_proc_spawn ("missing", NULL, FALSE, missing);
  g_assert_cmpint (dc_test_proc_expect_exit (proc, EVENT_BOUND_MS), ==, 1);
  dc_test_proc_expect (proc, "error", NULL, EVENT_BOUND_MS);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/net/hub/usage", test_usage);
  g_test_add_func ("/net/hub/delay", test_delay);
  g_test_add_func ("/net/hub/trace", test_trace);
  g_test_add_func ("/net/hub/queue-bound", test_queue_bound);
  g_test_add_func ("/net/hub/parent-dies", test_parent_dies);
  g_test_add_func ("/net/hub/stdin-closed", test_stdin_closed);
  return g_test_run ();
}
