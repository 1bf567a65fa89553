/* dc-cli-bench-channel.c: `daisychain-cli bench channel`, data-channel throughput and
 * round trips between two processes on loopback, next to a TCP socket pair
 * between the same two processes in the same run (the ceiling here).
 *
 * The command starts a signaling service, joins a room as host, and runs a
 * copy of itself with --child as the other device. The two first measure TCP
 * (blocking sockets, before the mesh starts), then the webrtcbin channel.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <string.h>
#include <glib/gi18n.h>

#include "dc-cli.h"
#include "mesh/dc-mesh.h"
#include "mesh/dc-room.h"
#include "mesh/dc-signal-server.h"

static const gsize message_sizes[] = { 64 * 1024, 1024 * 1024 };

typedef struct
{
  DcMesh  *mesh;
  DcPeer  *peer;          /* the other device, once connected */
  gboolean child;
  gboolean failed;
  gboolean joined;
  guint64  total;         /* bytes per throughput phase */
  /* child: bytes received in the current phase */
  guint64  received;
  guint    phase;
  /* parent: acks and pongs seen */
  guint    acks;
  guint    pongs;
  gint64   pong_at;
} Bench;

static gboolean
flag_cb (gpointer user_data)
{
  return *(gboolean *) user_data;
}

static gboolean
deadline_cb (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Iterates the main context, sleeping between events, until @done(@data)
 * or @timeout_s passes. Polling would steal CPU from GStreamer's threads. */
static gboolean
iterate_until (gboolean (*done) (gpointer),
               gpointer  data,
               guint     timeout_s)
{
  gboolean expired = FALSE;
  guint id = g_timeout_add_seconds (timeout_s, deadline_cb, &expired);

  while (!done (data) && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  return done (data);
}

static void
event_cb (DcMesh     *mesh,
          const char *event,
          const char *peer,
          guint       n_peers,
          const char *reason,
          gpointer    user_data)
{
  Bench *bench = user_data;

  if (g_str_equal (event, "joined"))
    bench->joined = TRUE;
  else if (g_str_equal (event, "peer-joined") && bench->peer == NULL)
    {
      g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (mesh);

      for (guint i = 0; i < peers->len; i++)
        if (dc_peer_get_state (g_ptr_array_index (peers, i)) == DC_PEER_STATE_OPEN)
          bench->peer = g_object_ref (g_ptr_array_index (peers, i));
    }
  else if (g_str_equal (event, "peer-left"))
    {
      bench->failed = TRUE;
    }
}

static void
failed_cb (DcMesh       *mesh,
           const GError *error,
           gpointer      user_data)
{
  Bench *bench = user_data;

  g_printerr ("daisychain-cli bench: %s\n", error->message);
  bench->failed = TRUE;
}

static void
message_cb (DcMesh  *mesh,
            DcPeer  *peer,
            guint    type,
            GBytes  *payload,
            gpointer user_data)
{
  Bench *bench = user_data;

  if (type == DC_MESH_MSG_PONG)
    {
      bench->pongs++;
      bench->pong_at = g_get_monotonic_time ();
    }
  else if (type == DC_MESH_MSG_DATA && !bench->child)
    {
      bench->acks++;
    }
  else if (type == DC_MESH_MSG_DATA && bench->child)
    {
      bench->received += g_bytes_get_size (payload);
      if (bench->received >= bench->total)
        {
          g_autoptr(GBytes) ack = g_bytes_new ("ack", 3);

          bench->received = 0;
          bench->phase++;
          dc_peer_send (peer, DC_MESH_MSG_DATA, ack, NULL);
        }
    }
}

static DcMesh *
start_mesh (Bench      *bench,
            const char *url,
            const char *room,
            const char *name)
{
  g_auto(DcMeshConfig) config = { 0 };
  const char *loopback[] = { "127.0.0.1", NULL };
  DcMesh *mesh;

  config.signal_url = g_strdup (url);
  config.room_code = g_strdup (room);
  config.create = !bench->child;
  config.approve = DC_MESH_APPROVE_ALL;
  /* One association is what is measured: a slow one is not replaced. */
  config.no_renewal = TRUE;
  config.hello = dc_mesh_hello_new (name, "cpu", "", 0);
  config.peer.ice_addresses = g_strdupv ((char **) loopback);
  mesh = dc_mesh_new (&config);
  g_signal_connect (mesh, "event", G_CALLBACK (event_cb), bench);
  g_signal_connect (mesh, "failed", G_CALLBACK (failed_cb), bench);
  g_signal_connect (mesh, "message", G_CALLBACK (message_cb), bench);
  dc_mesh_start (mesh);
  return mesh;
}

/* TCP ------------------------------------------------------------------- */

static gboolean
send_all (GSocket      *socket,
          const guint8 *data,
          gsize         size,
          GError      **error)
{
  while (size > 0)
    {
      gssize n = g_socket_send (socket, (const char *) data, size, NULL, error);

      if (n <= 0)
        return FALSE;
      data += n;
      size -= (gsize) n;
    }
  return TRUE;
}

static gboolean
receive_all (GSocket  *socket,
             guint8   *data,
             gsize     size,
             GError  **error)
{
  while (size > 0)
    {
      gssize n = g_socket_receive (socket, (char *) data, size, NULL, error);

      if (n < 0)
        return FALSE;
      if (n == 0)
        {
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CLOSED, "TCP peer closed");
          return FALSE;
        }
      data += n;
      size -= (gsize) n;
    }
  return TRUE;
}

/* The child's side: per phase, read `total` bytes then send one byte; then
 * echo 16-byte pings until the parent sends a zero-filled one. */
static gboolean
tcp_child (GSocket  *socket,
           guint64   total,
           GError  **error)
{
  g_autofree guint8 *buffer = g_malloc (1024 * 1024);

  for (guint p = 0; p < G_N_ELEMENTS (message_sizes); p++)
    {
      guint64 left = total;

      while (left > 0)
        {
          gssize n = g_socket_receive (socket, (char *) buffer, MIN (left, 1024 * 1024), NULL,
                                       error);

          if (n <= 0)
            return FALSE;
          left -= (guint64) n;
        }
      if (!send_all (socket, (const guint8 *) "k", 1, error))
        return FALSE;
    }
  for (;;)
    {
      guint8 ping[16];

      if (!receive_all (socket, ping, sizeof ping, error))
        return FALSE;
      if (!send_all (socket, ping, sizeof ping, error))
        return FALSE;
      if (ping[0] == 0)
        return TRUE;
    }
}

static double
percentile (GArray *sorted,
            double  p)
{
  guint index = (guint) (p * (sorted->len - 1) + 0.5);

  return g_array_index (sorted, double, MIN (index, sorted->len - 1));
}

static void
add_latency (JsonBuilder *builder,
             const char  *transport,
             GArray      *rtts_ms)
{
  g_array_sort (rtts_ms, dc_cli_compare_doubles);
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "transport");
  json_builder_add_string_value (builder, transport);
  json_builder_set_member_name (builder, "round_trips");
  json_builder_add_int_value (builder, rtts_ms->len);
  json_builder_set_member_name (builder, "p50_ms");
  json_builder_add_double_value (builder, percentile (rtts_ms, 0.50));
  json_builder_set_member_name (builder, "p90_ms");
  json_builder_add_double_value (builder, percentile (rtts_ms, 0.90));
  json_builder_set_member_name (builder, "p99_ms");
  json_builder_add_double_value (builder, percentile (rtts_ms, 0.99));
  json_builder_end_object (builder);
}

static gboolean
acks_reached (gpointer user_data)
{
  Bench *bench = user_data;

  return bench->failed || bench->acks >= bench->phase;
}

static gboolean
pongs_reached (gpointer user_data)
{
  Bench *bench = user_data;

  return bench->failed || bench->pongs >= bench->phase;
}

static gboolean
peer_ready (gpointer user_data)
{
  Bench *bench = user_data;

  return bench->failed || bench->peer != NULL;
}

static int
run_child (DcCliOptions *options,
           const char   *url,
           const char   *room,
           int           tcp_port,
           guint64       total)
{
  Bench bench = { 0 };
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GError) error = NULL;
  gboolean never = FALSE;

  connection = g_socket_client_connect_to_host (client, "127.0.0.1", (guint16) tcp_port, NULL,
                                                &error);
  if (connection == NULL
      || !tcp_child (g_socket_connection_get_socket (connection), total, &error))
    return dc_cli_fail (options, error);

  bench.child = TRUE;
  bench.total = total;
  bench.mesh = start_mesh (&bench, url, room, "bench-child");
  /* Runs until the parent ends it. */
  iterate_until (flag_cb, &never, 600);
  g_clear_object (&bench.peer);
  g_clear_object (&bench.mesh);
  return DC_CLI_EXIT_OK;
}

int
dc_cli_bench_channel_run (const DcCliCommand  *command,
                          DcCliOptions        *options,
                          int                  argc,
                          char               **argv)
{
  gboolean child = FALSE;
  g_autofree char *child_url = NULL;
  g_autofree char *child_room = NULL;
  int tcp_port = 0, total_mib = 64, pings = 1000;
  const GOptionEntry entries[] = {
    { "total-mib", 0, 0, G_OPTION_ARG_INT, &total_mib,
      N_("MiB sent per message size (default 64)"), N_("N") },
    { "pings", 0, 0, G_OPTION_ARG_INT, &pings, N_("Round trips measured (default 1000)"),
      N_("N") },
    { "child", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &child, NULL, NULL },
    { "signal", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &child_url, NULL, NULL },
    { "room", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &child_room, NULL, NULL },
    { "tcp-port", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &tcp_port, NULL, NULL },
    { NULL }
  };
  g_autoptr(DcSignalServer) server = NULL;
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(GSocket) tcp = NULL;
  g_autoptr(GSocketAddress) bind_address = NULL;
  g_autoptr(GInetAddress) loopback = NULL;
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(GArray) tcp_rtts = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) rtc_rtts = g_array_new (FALSE, FALSE, sizeof (double));
  g_autofree char *url = NULL;
  g_autofree char *room = NULL;
  g_autofree char *port_arg = NULL;
  g_autofree char *total_arg = NULL;
  g_autofree guint8 *block = NULL;
  double tcp_mbps[G_N_ELEMENTS (message_sizes)], rtc_mbps[G_N_ELEMENTS (message_sizes)];
  Bench bench = { 0 };
  guint64 total;
  int status = DC_CLI_EXIT_OK;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (total_mib < 1 || total_mib > 1024 || pings < 1 || pings > 1000000)
    return dc_cli_usage_error (command, _("--total-mib takes 1–1024, --pings 1–1000000"));
  total = (guint64) total_mib * 1024 * 1024;

  if (!dc_mesh_check_plugins (&error))
    return dc_cli_fail (options, error);
  if (child)
    return run_child (options, child_url, child_room, tcp_port, total);

  /* The service and the TCP listener, both on loopback. */
  server = dc_signal_server_new ();
  if (!dc_signal_server_listen (server, "127.0.0.1", 0, NULL, NULL, &error))
    return dc_cli_fail (options, error);
  url = dc_signal_server_dup_url (server);
  room = dc_room_generate_code ();
  loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  bind_address = g_inet_socket_address_new (loopback, 0);
  listener = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP,
                           &error);
  if (listener == NULL || !g_socket_bind (listener, bind_address, TRUE, &error)
      || !g_socket_listen (listener, &error))
    return dc_cli_fail (options, error);
  {
    g_autoptr(GSocketAddress) local = g_socket_get_local_address (listener, &error);

    if (local == NULL)
      return dc_cli_fail (options, error);
    port_arg = g_strdup_printf ("--tcp-port=%u",
                                g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (local)));
  }

  bench.total = total;
  bench.mesh = start_mesh (&bench, url, room, "bench-parent");
  /* The child must find the room: be in it before starting the child. */
  if (!iterate_until (flag_cb, &bench.joined, 30))
    {
      error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                                   "the benchmark could not join its own signaling service");
      return dc_cli_fail (options, error);
    }

  {
    g_autofree char *signal_arg = g_strdup_printf ("--signal=%s", url);
    g_autofree char *room_arg = g_strdup_printf ("--room=%s", room);
    g_autofree char *self_exe = g_file_read_link ("/proc/self/exe", NULL);

    total_arg = g_strdup_printf ("--total-mib=%d", total_mib);
    process = g_subprocess_new (G_SUBPROCESS_FLAGS_NONE, &error,
                                self_exe != NULL ? self_exe : "daisychain-cli", "bench",
                                "channel", "--child", signal_arg, room_arg, port_arg, total_arg,
                                NULL);
    if (process == NULL)
      return dc_cli_fail (options, error);
  }

  /* TCP: both processes block here; the mesh waits. */
  g_socket_set_timeout (listener, 60);
  tcp = g_socket_accept (listener, NULL, &error);
  if (tcp == NULL)
    goto fail;
  g_socket_set_timeout (tcp, 60);
  block = g_malloc0 (message_sizes[G_N_ELEMENTS (message_sizes) - 1]);
  for (guint s = 0; s < G_N_ELEMENTS (message_sizes); s++)
    {
      gint64 start = g_get_monotonic_time ();
      guint8 ack;

      for (guint64 sent = 0; sent < total; sent += message_sizes[s])
        if (!send_all (tcp, block, message_sizes[s], &error))
          goto fail;
      if (!receive_all (tcp, &ack, 1, &error))
        goto fail;
      tcp_mbps[s] = (double) total / (double) (g_get_monotonic_time () - start);
    }
  for (int i = 0; i <= pings; i++)
    {
      guint8 ping[16];
      gint64 start = g_get_monotonic_time ();

      memset (ping, i < pings ? 1 : 0, sizeof ping);
      if (!send_all (tcp, ping, sizeof ping, &error) || !receive_all (tcp, ping, sizeof ping,
                                                                      &error))
        goto fail;
      if (i < pings)
        {
          double ms = (double) (g_get_monotonic_time () - start) / 1000.0;

          g_array_append_val (tcp_rtts, ms);
        }
    }

  /* The data channel. */
  if (!iterate_until (peer_ready, &bench, 60) || bench.failed)
    {
      error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                                   "the benchmark's data channel did not open");
      goto fail;
    }
  for (guint s = 0; s < G_N_ELEMENTS (message_sizes); s++)
    {
      g_autoptr(GBytes) payload = g_bytes_new (block, message_sizes[s]);
      gint64 start = g_get_monotonic_time ();

      for (guint64 sent = 0; sent < total; sent += message_sizes[s])
        if (!dc_peer_send (bench.peer, DC_MESH_MSG_DATA, payload, &error))
          goto fail;
      bench.phase = s + 1;
      if (!iterate_until (acks_reached, &bench, 300) || bench.failed)
        {
          error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                                       "the benchmark's transfer did not finish");
          goto fail;
        }
      rtc_mbps[s] = (double) total / (double) (g_get_monotonic_time () - start);
    }
  for (int i = 0; i < pings; i++)
    {
      guint8 body[DC_MESH_HEARTBEAT_SIZE] = { 0 };
      g_autoptr(GBytes) ping = g_bytes_new (body, sizeof body);
      gint64 start = g_get_monotonic_time ();
      double ms;

      bench.phase = (guint) i + 1;
      if (!dc_peer_send (bench.peer, DC_MESH_MSG_PING, ping, &error))
        goto fail;
      if (!iterate_until (pongs_reached, &bench, 30) || bench.failed)
        {
          error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "a ping went unanswered");
          goto fail;
        }
      ms = (double) (bench.pong_at - start) / 1000.0;
      g_array_append_val (rtc_rtts, ms);
    }

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "event");
  json_builder_add_string_value (builder, "bench");
  json_builder_set_member_name (builder, "bench");
  json_builder_add_string_value (builder, "channel");
  json_builder_set_member_name (builder, "bytes_per_size");
  json_builder_add_int_value (builder, (gint64) total);
  json_builder_set_member_name (builder, "throughput");
  json_builder_begin_array (builder);
  for (guint s = 0; s < G_N_ELEMENTS (message_sizes); s++)
    {
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "message_size");
      json_builder_add_int_value (builder, (gint64) message_sizes[s]);
      json_builder_set_member_name (builder, "webrtc_mb_s");
      json_builder_add_double_value (builder, rtc_mbps[s]);
      json_builder_set_member_name (builder, "tcp_mb_s");
      json_builder_add_double_value (builder, tcp_mbps[s]);
      json_builder_set_member_name (builder, "ratio");
      json_builder_add_double_value (builder, rtc_mbps[s] / tcp_mbps[s]);
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "latency");
  json_builder_begin_array (builder);
  add_latency (builder, "webrtc", rtc_rtts);
  add_latency (builder, "tcp", tcp_rtts);
  json_builder_end_array (builder);
  json_builder_end_object (builder);

  if (options->json)
    {
      dc_cli_print_json (builder);
    }
  else
    {
      for (guint s = 0; s < G_N_ELEMENTS (message_sizes); s++)
        g_print (_("%7zu-byte messages: data channel %.1f MB/s, TCP %.1f MB/s (%.3f)\n"),
                 message_sizes[s], rtc_mbps[s], tcp_mbps[s], rtc_mbps[s] / tcp_mbps[s]);
      g_print (_("round trip, median: data channel %.3f ms, TCP %.3f ms\n"),
               percentile (rtc_rtts, 0.5), percentile (tcp_rtts, 0.5));
    }
  goto out;

fail:
  status = dc_cli_fail (options, error);
out:
  g_subprocess_force_exit (process);
  g_subprocess_wait (process, NULL, NULL);
  g_clear_object (&bench.peer);
  g_clear_object (&bench.mesh);
  return status;
}
