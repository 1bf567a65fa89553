/* dc-cli-netns.c: the shaped network of bench ring --netns and bench
 * group --netns, made once for both (docs/CLI.md, "The shaped network").
 *
 * A switch namespace (PREFIX-br) holds one port per endpoint: each
 * endpoint is a namespace of its own (PREFIX-NAME, its link "eth0") or
 * this process's namespace (a link named by the caller), on a veth whose
 * other end is the port. Every endpoint's egress is shaped, in this order
 * of choice:
 *
 *   netem    `tc netem rate 1gbit delay 1ms`, the ports on a kernel bridge;
 *   hub      tbf at 1 Gbit/s, and the 1 ms from the delay hub
 *            (`daisychain-cli net-hub`, dc-cli-net-hub.c) in place of the
 *            bridge, where the kernel has no sch_netem;
 *   hub-delay  the hub's 1 ms, the rate unshaped (no tc, or no tbf);
 *   tbf      tbf at 1 Gbit/s on a bridge, without the delay (the hub
 *            could not run: no AF_PACKET);
 *   none     a bridge, nothing shaped.
 *
 * The switch namespace holds no address, so nothing in it answers for an
 * endpoint. Everything made is removed by dc_cli_netns_remove (), which
 * stops the hub first; the hub also ends with this process.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <signal.h>
#include <unistd.h>

#include "dc-cli.h"
#include "dc-cli-netns.h"

/* Runs ip or tc, @argv NULL-terminated; FALSE with its stderr in ERROR. */
static gboolean
run_argv (DcCliNetns  *netns,
          GPtrArray   *argv,
          GError     **error)
{
  g_autofree char *err = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH
                     | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err, &status, error))
    return FALSE;
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_autofree char *command = g_strjoinv (" ", (char **) argv->pdata);

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s --netns: “%s” failed: %s",
                   netns->what, command, err != NULL ? g_strstrip (err) : "");
      return FALSE;
    }
  return TRUE;
}

static gboolean
run_tool (DcCliNetns  *netns,
          GError     **error,
          ...) G_GNUC_NULL_TERMINATED;

/* run_argv () with the arguments. */
static gboolean
run_tool (DcCliNetns  *netns,
          GError     **error,
          ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  const char *arg;
  va_list args;

  va_start (args, error);
  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);
  return run_argv (netns, argv, error);
}

/* `tc [-n NS] qdisc add dev DEV root QDISC…` (this namespace when @ns is
 * NULL). */
static gboolean
add_qdisc (DcCliNetns         *netns,
           const char         *ns,
           const char         *dev,
           const char * const *qdisc,
           GError            **error)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();

  g_ptr_array_add (argv, "tc");
  if (ns != NULL)
    {
      g_ptr_array_add (argv, "-n");
      g_ptr_array_add (argv, (gpointer) ns);
    }
  g_ptr_array_add (argv, "qdisc");
  g_ptr_array_add (argv, "add");
  g_ptr_array_add (argv, "dev");
  g_ptr_array_add (argv, (gpointer) dev);
  g_ptr_array_add (argv, "root");
  for (; *qdisc != NULL; qdisc++)
    g_ptr_array_add (argv, (gpointer) *qdisc);
  g_ptr_array_add (argv, NULL);
  return run_argv (netns, argv, error);
}

/* Checks for ip (without it, an error) and tc (without it nothing is
 * shaped but the hub's delay), then makes the switch namespace. */
gboolean
dc_cli_netns_begin (DcCliNetns  *netns,
                    const char  *what,
                    const char  *prefix,
                    GError     **error)
{
  g_autofree char *ip = g_find_program_in_path ("ip");
  g_autofree char *tc = g_find_program_in_path ("tc");
  g_autofree char *br = g_strdup_printf ("%s-br", prefix);

  netns->what = g_strdup (what);
  netns->prefix = g_strdup (prefix);
  netns->made = g_ptr_array_new_with_free_func (g_free);
  netns->ports = g_ptr_array_new_with_free_func (g_free);
  netns->links = g_ptr_array_new_with_free_func (g_free);
  if (ip == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND,
                   "%s --netns: iproute2's “ip” is not in PATH (install iproute2; "
                   "scripts/device-bundle.sh carries ip and tc in build-device/bin)", what);
      return FALSE;
    }
  if (tc == NULL)
    {
      netns->no_tc = netns->no_netem = netns->no_tbf = TRUE;
      netns->netem_reason = g_strdup ("iproute2's “tc” is not in PATH");
      netns->tbf_reason = g_strdup (netns->netem_reason);
    }
  if (!run_tool (netns, error, "ip", "netns", "add", br, NULL))
    return FALSE;
  g_ptr_array_add (netns->made, g_strdup (br));
  netns->switch_ns = g_steal_pointer (&br);
  return run_tool (netns, error, "ip", "-n", netns->switch_ns, "link", "set", "lo", "up", NULL);
}

/* Shapes DEV's egress (in namespace NS, or this one when NULL): netem
 * (1 Gbit/s, 1 ms) while the kernel takes it, else tbf (1 Gbit/s; its
 * burst at least 1 Gbit/s over one 1000 Hz tick, 125 kB), each refusal
 * kept for the note. */
static void
shape (DcCliNetns *netns,
       const char *ns,
       const char *dev)
{
  static const char * const netem[] = { "netem", "rate", "1gbit", "delay", "1ms", NULL };
  static const char * const tbf[] = { "tbf", "rate", "1gbit", "burst", "256kb", "latency",
                                      "20ms", NULL };
  g_autoptr(GError) error = NULL;

  if (!netns->no_netem)
    {
      if (add_qdisc (netns, ns, dev, netem, &error))
        return;
      /* Kernels built without sch_netem (this VM's, the H200 host's). */
      netns->no_netem = TRUE;
      netns->netem_reason = g_strdup (error->message);
      g_clear_error (&error);
    }
  if (!netns->no_tbf)
    {
      if (add_qdisc (netns, ns, dev, tbf, &error))
        return;
      netns->no_tbf = TRUE;
      netns->tbf_reason = g_strdup (error->message);
    }
}

/* One endpoint at ADDRESS/24: namespace PREFIX-NAME with link eth0 (and a
 * default route, so that discovery's multicast has a way out, as on a
 * LAN), or, NAME NULL, this namespace with link LINK; its veth's other
 * end a port of the switch; its egress shaped. */
gboolean
dc_cli_netns_add (DcCliNetns  *netns,
                  const char  *name,
                  const char  *link,
                  const char  *address,
                  GError     **error)
{
  const char *br = netns->switch_ns;
  g_autofree char *port = g_strdup_printf ("p%u", netns->ports->len);
  g_autofree char *cidr = g_strdup_printf ("%s/24", address);

  if (name != NULL)
    {
      g_autofree char *ns = g_strdup_printf ("%s-%s", netns->prefix, name);

      if (!run_tool (netns, error, "ip", "netns", "add", ns, NULL))
        return FALSE;
      g_ptr_array_add (netns->made, g_strdup (ns));
      if (!run_tool (netns, error, "ip", "-n", ns, "link", "set", "lo", "up", NULL)
          || !run_tool (netns, error, "ip", "-n", br, "link", "add", port, "type", "veth", "peer",
                        "name", "eth0", "netns", ns, NULL)
          || !run_tool (netns, error, "ip", "-n", ns, "addr", "add", cidr, "dev", "eth0", NULL)
          || !run_tool (netns, error, "ip", "-n", ns, "link", "set", "eth0", "up", NULL)
          || !run_tool (netns, error, "ip", "-n", ns, "route", "add", "default", "dev", "eth0",
                        NULL))
        return FALSE;
      g_ptr_array_add (netns->ports, g_steal_pointer (&port));
      if (!run_tool (netns, error, "ip", "-n", br, "link", "set",
                     g_ptr_array_index (netns->ports, netns->ports->len - 1), "up", NULL))
        return FALSE;
      shape (netns, ns, "eth0");
      g_ptr_array_add (netns->links, g_strdup_printf ("%s eth0", ns));
      return TRUE;
    }
  /* This namespace's end goes with its peer when the switch's namespace
   * is removed. */
  if (!run_tool (netns, error, "ip", "link", "add", link, "type", "veth", "peer", "name", port,
                 "netns", br, NULL))
    return FALSE;
  g_ptr_array_add (netns->ports, g_steal_pointer (&port));
  if (!run_tool (netns, error, "ip", "addr", "add", cidr, "dev", link, NULL)
      || !run_tool (netns, error, "ip", "link", "set", link, "up", NULL)
      || !run_tool (netns, error, "ip", "-n", br, "link", "set",
                    g_ptr_array_index (netns->ports, netns->ports->len - 1), "up", NULL))
    return FALSE;
  shape (netns, NULL, link);
  g_ptr_array_add (netns->links, g_strdup (link));
  return TRUE;
}

/* Starts the delay hub on every port; FALSE with its reason kept. */
static gboolean
hub_start (DcCliNetns *netns)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                               | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  const char *delay = g_getenv ("DC_NETNS_HUB_DELAY_US");
  const char *trace = g_getenv ("DC_NETNS_HUB_TRACE");
  JsonObject *object = NULL;

  /* A measuring aid: the shaped network without the hub (tbf on a
   * bridge, "tbf"), to tell the hub's cost from the rate's. */
  if (g_strcmp0 (g_getenv ("DC_NETNS_HUB"), "0") == 0)
    {
      netns->hub_reason = g_strdup ("DC_NETNS_HUB=0");
      return FALSE;
    }

  /* A measuring aid: the hub's delay other than 1 ms (0: the hub's own
   * cost, without the delay); the network's name says so. */
  netns->hub_delay_us = DC_CLI_NETNS_DELAY_US;
  if (delay != NULL && *delay != '\0')
    netns->hub_delay_us = (guint) CLAMP (g_ascii_strtoll (delay, NULL, 10), 0, 10000000);
  g_ptr_array_add (argv, g_strdup ("ip"));
  g_ptr_array_add (argv, g_strdup ("netns"));
  g_ptr_array_add (argv, g_strdup ("exec"));
  g_ptr_array_add (argv, g_strdup (netns->switch_ns));
  g_ptr_array_add (argv, g_strdup (self != NULL ? self : "daisychain-cli"));
  g_ptr_array_add (argv, g_strdup ("net-hub"));
  g_ptr_array_add (argv, g_strdup_printf ("--parent=%d", (int) getpid ()));
  g_ptr_array_add (argv, g_strdup_printf ("--delay-us=%u", netns->hub_delay_us));
  /* A measuring aid: every frame's times to this file (hub-trace.py). */
  if (trace != NULL && *trace != '\0')
    g_ptr_array_add (argv, g_strdup_printf ("--trace=%s", trace));
  for (guint p = 0; p < netns->ports->len; p++)
    g_ptr_array_add (argv, g_strdup_printf ("--port=%s",
                                            (char *) g_ptr_array_index (netns->ports, p)));
  g_ptr_array_add (argv, NULL);
  netns->hub = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata,
                                             &error);
  if (netns->hub != NULL)
    {
      netns->hub_out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (netns->hub));
      /* Its first line: ready, or why not (then it exits). */
      line = g_data_input_stream_read_line_utf8 (netns->hub_out, NULL, NULL, &error);
      if (line != NULL && json_parser_load_from_data (parser, line, -1, NULL)
          && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        object = json_node_get_object (json_parser_get_root (parser));
      if (object != NULL
          && g_strcmp0 (json_object_get_string_member_with_default (object, "event", ""),
                        "hub") == 0)
        return TRUE;
    }
  netns->hub_reason = g_strdup (error != NULL ? error->message
                                : object != NULL
                                ? json_object_get_string_member_with_default (object, "message",
                                                                              "it stopped")
                                : "it stopped without a word");
  if (netns->hub != NULL)
    {
      g_subprocess_force_exit (netns->hub);
      g_subprocess_wait (netns->hub, NULL, NULL);
    }
  g_clear_object (&netns->hub_out);
  g_clear_object (&netns->hub);
  return FALSE;
}

/* Joins the ports: with netem on the links a kernel bridge; without it
 * the delay hub, or a bridge where the hub cannot run. */
gboolean
dc_cli_netns_connect (DcCliNetns  *netns,
                      GError     **error)
{
  const char *br = netns->switch_ns;

  if (netns->no_netem && hub_start (netns))
    {
      netns->hub_on = TRUE;
      return TRUE;
    }
  if (!run_tool (netns, error, "ip", "-n", br, "link", "add", "br0", "type", "bridge", NULL)
      || !run_tool (netns, error, "ip", "-n", br, "link", "set", "br0", "up", NULL))
    return FALSE;
  for (guint p = 0; p < netns->ports->len; p++)
    if (!run_tool (netns, error, "ip", "-n", br, "link", "set",
                   g_ptr_array_index (netns->ports, p), "master", "br0", NULL))
      return FALSE;
  return TRUE;
}

/* Stops the hub, then removes every namespace made (their links with
 * them), the switch's last. Safe to call twice, and on a zeroed struct. */
void
dc_cli_netns_remove (DcCliNetns *netns)
{
  if (netns->hub != NULL)
    {
      g_subprocess_send_signal (netns->hub, SIGTERM);
      g_subprocess_wait (netns->hub, NULL, NULL);
    }
  g_clear_object (&netns->hub_out);
  g_clear_object (&netns->hub);
  for (guint i = netns->made != NULL ? netns->made->len : 0; i > 0; i--)
    {
      g_autoptr(GError) error = NULL;

      if (!run_tool (netns, &error, "ip", "netns", "del", g_ptr_array_index (netns->made, i - 1),
                     NULL))
        g_printerr ("daisychain-cli: %s\n", error->message);
    }
  g_clear_pointer (&netns->made, g_ptr_array_unref);
  g_clear_pointer (&netns->ports, g_ptr_array_unref);
  g_clear_pointer (&netns->links, g_ptr_array_unref);
  g_clear_pointer (&netns->what, g_free);
  g_clear_pointer (&netns->prefix, g_free);
  g_clear_pointer (&netns->switch_ns, g_free);
  g_clear_pointer (&netns->netem_reason, g_free);
  g_clear_pointer (&netns->tbf_reason, g_free);
  g_clear_pointer (&netns->hub_reason, g_free);
  g_clear_pointer (&netns->network, g_free);
  netns->hub_on = FALSE;
}

/* "netem", "hub", "hub-delay", "tbf" or "none" (the file's comment). */
const char *
dc_cli_netns_shaping (DcCliNetns *netns)
{
  if (!netns->no_netem)
    return "netem";
  if (netns->hub_on)
    return netns->no_tbf ? "hub-delay" : "hub";
  return netns->no_tbf ? "none" : "tbf";
}

/* What the links are: both asked (1 Gbit/s and 1 ms) or which is missing. */
const char *
dc_cli_netns_network (DcCliNetns *netns)
{
  const char *shaping = dc_cli_netns_shaping (netns);

  /* DC_NETNS_HUB_DELAY_US: "netns-1gbit-250us", "netns-0us" … */
  if (netns->hub_on && netns->hub_delay_us != DC_CLI_NETNS_DELAY_US)
    {
      if (netns->network == NULL)
        netns->network = g_strdup_printf ("netns-%s%uus", netns->no_tbf ? "" : "1gbit-",
                                          netns->hub_delay_us);
      return netns->network;
    }
  if (g_str_equal (shaping, "netem") || g_str_equal (shaping, "hub"))
    return "netns-1gbit-1ms";
  if (g_str_equal (shaping, "hub-delay"))
    return "netns-1ms";
  if (g_str_equal (shaping, "tbf"))
    return "netns-1gbit";
  return "netns-unshaped";
}

/* How the links were shaped where not by netem, with the tools' reasons;
 * NULL with netem. */
char *
dc_cli_netns_note (DcCliNetns *netns)
{
  const char *shaping = dc_cli_netns_shaping (netns);

  if (g_str_equal (shaping, "netem"))
    return NULL;
  if (g_str_equal (shaping, "hub"))
    return g_strdup_printf ("no netem (%s): 1 Gbit/s by tbf on every link, a delay of %u µs by "
                            "the delay hub (net-hub) in place of the bridge",
                            netns->netem_reason, netns->hub_delay_us);
  if (g_str_equal (shaping, "hub-delay"))
    return g_strdup_printf ("no netem (%s) and no tbf (%s): a delay of %u µs by the delay hub "
                            "(net-hub), the rate unshaped", netns->netem_reason,
                            netns->tbf_reason, netns->hub_delay_us);
  if (g_str_equal (shaping, "tbf"))
    return g_strdup_printf ("no netem (%s) and no delay hub (%s): shaped to 1 Gbit/s by tbf, "
                            "without the 1 ms delay", netns->netem_reason, netns->hub_reason);
  return g_strdup_printf ("no netem (%s), no tbf (%s) and no delay hub (%s): links between "
                          "namespaces unshaped", netns->netem_reason, netns->tbf_reason,
                          netns->hub_reason != NULL ? netns->hub_reason : "not tried");
}

/* The hub's counters so far (its "hub-stats" line, asked with SIGUSR1),
 * or NULL without a hub. */
JsonObject *
dc_cli_netns_hub_stats (DcCliNetns *netns)
{
  if (netns->hub == NULL)
    return NULL;
  g_subprocess_send_signal (netns->hub, SIGUSR1);
  for (;;)
    {
      g_autofree char *line = g_data_input_stream_read_line_utf8 (netns->hub_out, NULL, NULL,
                                                                   NULL);
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *object;

      if (line == NULL)
        return NULL;
      if (!json_parser_load_from_data (parser, line, -1, NULL)
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue;
      object = json_node_get_object (json_parser_get_root (parser));
      if (g_strcmp0 (json_object_get_string_member_with_default (object, "event", ""),
                     "hub-stats") == 0)
        {
          json_object_remove_member (object, "event");
          return json_object_ref (object);
        }
    }
}

/* The tbf qdiscs' counters so far, summed over every endpoint's link
 * (`tc -s -j qdisc show`: packets, bytes, drops, overlimits, requeues), or
 * NULL where tbf does not shape or tc says nothing readable. A drop there
 * is an SCTP packet lost (a retransmission, a halved congestion window). */
JsonObject *
dc_cli_netns_tbf_stats (DcCliNetns *netns)
{
  static const char * const names[] = { "packets", "bytes", "drops", "overlimits",
                                        "requeues" };
  gint64 sums[G_N_ELEMENTS (names)] = { 0 };
  const char *shaping = dc_cli_netns_shaping (netns);
  guint read = 0;
  JsonObject *object;

  if (netns->links == NULL || (!g_str_equal (shaping, "hub") && !g_str_equal (shaping, "tbf")))
    return NULL;
  for (guint i = 0; i < netns->links->len; i++)
    {
      g_auto(GStrv) link = g_strsplit (g_ptr_array_index (netns->links, i), " ", 2);
      g_autoptr(GPtrArray) argv = g_ptr_array_new ();
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autofree char *out = NULL;
      int status = 0;
      JsonNode *root;

      g_ptr_array_add (argv, "tc");
      if (link[1] != NULL)
        {
          g_ptr_array_add (argv, "-n");
          g_ptr_array_add (argv, link[0]);
        }
      g_ptr_array_add (argv, "-s");
      g_ptr_array_add (argv, "-j");
      g_ptr_array_add (argv, "qdisc");
      g_ptr_array_add (argv, "show");
      g_ptr_array_add (argv, "dev");
      g_ptr_array_add (argv, link[1] != NULL ? link[1] : link[0]);
      g_ptr_array_add (argv, NULL);
      if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH
                         | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL)
          || !g_spawn_check_wait_status (status, NULL)
          || !json_parser_load_from_data (parser, out, -1, NULL))
        continue;
      root = json_parser_get_root (parser);
      if (!JSON_NODE_HOLDS_ARRAY (root))
        continue;
      for (guint q = 0; q < json_array_get_length (json_node_get_array (root)); q++)
        {
          JsonObject *qdisc = json_array_get_object_element (json_node_get_array (root), q);

          if (qdisc == NULL
              || g_strcmp0 (json_object_get_string_member_with_default (qdisc, "kind", ""),
                            "tbf") != 0)
            continue;
          for (guint k = 0; k < G_N_ELEMENTS (names); k++)
            sums[k] += json_object_get_int_member_with_default (qdisc, names[k], 0);
          read++;
        }
    }
  if (read == 0)
    return NULL;
  object = json_object_new ();
  json_object_set_int_member (object, "links", read);
  for (guint k = 0; k < G_N_ELEMENTS (names); k++)
    json_object_set_int_member (object, names[k], sums[k]);
  return object;
}

/* The UDP counters of every endpoint's own namespace so far, summed
 * (/proc/net/snmp read there with `ip netns exec`): datagrams received and
 * sent, and those lost at the endpoints: RcvbufErrors (a socket's receive
 * buffer full: an SCTP packet lost at its receiver), SndbufErrors,
 * InErrors. NULL when no endpoint has a namespace of its own. */
JsonObject *
dc_cli_netns_udp_stats (DcCliNetns *netns)
{
  static const char * const names[] = { "InDatagrams", "OutDatagrams", "InErrors",
                                        "RcvbufErrors", "SndbufErrors" };
  static const char * const keys[] = { "in_datagrams", "out_datagrams", "in_errors",
                                       "rcvbuf_errors", "sndbuf_errors" };
  gint64 sums[G_N_ELEMENTS (names)] = { 0 };
  guint read = 0;
  JsonObject *object;

  for (guint i = 0; netns->links != NULL && i < netns->links->len; i++)
    {
      g_auto(GStrv) link = g_strsplit (g_ptr_array_index (netns->links, i), " ", 2);
      const char *argv[] = { "ip", "netns", "exec", link[0], "cat", "/proc/net/snmp", NULL };
      g_autofree char *out = NULL;
      g_auto(GStrv) lines = NULL;
      g_auto(GStrv) header = NULL;
      int status = 0;

      if (link[1] == NULL)
        continue;   /* this namespace's counters hold everything else too */
      if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH
                         | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL, &status, NULL)
          || !g_spawn_check_wait_status (status, NULL))
        continue;
      lines = g_strsplit (out, "\n", -1);
      for (guint l = 0; lines[l] != NULL; l++)
        {
          g_auto(GStrv) fields = NULL;

          if (!g_str_has_prefix (lines[l], "Udp: "))
            continue;
          fields = g_strsplit (lines[l] + 5, " ", -1);
          if (header == NULL)
            {
              header = g_steal_pointer (&fields);
              continue;
            }
          for (guint f = 0; fields[f] != NULL && header[f] != NULL; f++)
            for (guint k = 0; k < G_N_ELEMENTS (names); k++)
              if (g_str_equal (header[f], names[k]))
                sums[k] += g_ascii_strtoll (fields[f], NULL, 10);
          read++;
          break;
        }
    }
  if (read == 0)
    return NULL;
  object = json_object_new ();
  json_object_set_int_member (object, "namespaces", read);
  for (guint k = 0; k < G_N_ELEMENTS (names); k++)
    json_object_set_int_member (object, keys[k], sums[k]);
  return object;
}

/* Adds "shaping", with the hub "hub" (its counters so far), with tbf "tbf"
 * (its counters so far, every link's summed), "udp" (the endpoints' UDP
 * counters so far, summed). */
void
dc_cli_netns_add_json (DcCliNetns  *netns,
                       JsonBuilder *builder)
{
  g_autoptr(JsonObject) stats = dc_cli_netns_hub_stats (netns);
  g_autoptr(JsonObject) tbf = dc_cli_netns_tbf_stats (netns);
  g_autoptr(JsonObject) udp = dc_cli_netns_udp_stats (netns);

  json_builder_set_member_name (builder, "shaping");
  json_builder_add_string_value (builder, dc_cli_netns_shaping (netns));
  if (netns->hub_on)
    {
      json_builder_set_member_name (builder, "hub_delay_us");
      json_builder_add_int_value (builder, netns->hub_delay_us);
    }
  if (stats != NULL)
    {
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

      json_node_set_object (node, stats);
      json_builder_set_member_name (builder, "hub");
      json_builder_add_value (builder, g_steal_pointer (&node));
    }
  if (tbf != NULL)
    {
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

      json_node_set_object (node, tbf);
      json_builder_set_member_name (builder, "tbf");
      json_builder_add_value (builder, g_steal_pointer (&node));
    }
  if (udp != NULL)
    {
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

      json_node_set_object (node, udp);
      json_builder_set_member_name (builder, "udp");
      json_builder_add_value (builder, g_steal_pointer (&node));
    }
}
