/* dc-cli-signal.c: `daisychain-cli signal`, the stand-alone signaling service.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>
#include <glib-unix.h>

#include "dc-cli.h"
#include "mesh/dc-signal-server.h"

static gboolean
quit_cb (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

int
dc_cli_signal_run (const DcCliCommand  *command,
                   DcCliOptions        *options,
                   int                  argc,
                   char               **argv)
{
  int port = 8765;
  g_autofree char *bind = NULL;
  g_autofree char *tls_cert = NULL;
  g_autofree char *tls_key = NULL;
  int join_timeout = DC_SIGNAL_DEFAULT_JOIN_TIMEOUT_S;
  int max_connections = DC_SIGNAL_DEFAULT_MAX_CONNECTIONS;
  int max_rooms = DC_SIGNAL_DEFAULT_MAX_ROOMS;
  int max_pending = DC_SIGNAL_DEFAULT_MAX_PENDING;
  DcSignalLimits limits;
  const GOptionEntry entries[] = {
    { "port", 0, 0, G_OPTION_ARG_INT, &port, N_("TCP port (0: any free port; default 8765)"),
      N_("PORT") },
    { "bind", 0, 0, G_OPTION_ARG_STRING, &bind, N_("Listen on this address only"),
      N_("ADDRESS") },
    { "tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &tls_cert, N_("PEM certificate: serve wss://"),
      N_("FILE") },
    { "tls-key", 0, 0, G_OPTION_ARG_FILENAME, &tls_key, N_("PEM private key of the certificate"),
      N_("FILE") },
    { "join-timeout", 0, 0, G_OPTION_ARG_INT, &join_timeout,
      N_("Close connections that send no join within this many seconds (0: never; "
         "default 10)"), N_("SECONDS") },
    { "max-connections-per-address", 0, 0, G_OPTION_ARG_INT, &max_connections,
      N_("Open connections one IP address may hold (default 64)"), N_("N") },
    { "max-rooms-per-address", 0, 0, G_OPTION_ARG_INT, &max_rooms,
      N_("Rooms one IP address may have created and still hold (default 16)"), N_("N") },
    { "max-pending-per-address", 0, 0, G_OPTION_ARG_INT, &max_pending,
      N_("Joins from one IP address that may wait for a host's approval (default 16)"),
      N_("N") },
    { NULL }
  };
  g_autoptr(DcSignalServer) server = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (port < 0 || port > 65535)
    return dc_cli_usage_error (command, _("--port must be between 0 and 65535"));
  if (join_timeout < 0 || join_timeout > 3600)
    return dc_cli_usage_error (command, _("--join-timeout must be between 0 and 3600"));
  if (max_connections < 1 || max_rooms < 1 || max_pending < 1
      || max_connections > 100000 || max_rooms > 100000 || max_pending > 100000)
    return dc_cli_usage_error (command, _("the --max-…-per-address options must be between 1 "
                                          "and 100000"));

  server = dc_signal_server_new ();
  limits.join_timeout_s = (guint) join_timeout;
  limits.max_connections_per_address = (guint) max_connections;
  limits.max_rooms_per_address = (guint) max_rooms;
  limits.max_pending_per_address = (guint) max_pending;
  dc_signal_server_set_limits (server, &limits);
  if (!dc_signal_server_listen (server, bind, (guint) port, tls_cert, tls_key, &error))
    return dc_cli_fail (options, error);
  url = dc_signal_server_dup_url (server);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "listening");
      json_builder_set_member_name (builder, "url");
      json_builder_add_string_value (builder, url);
      json_builder_set_member_name (builder, "port");
      json_builder_add_int_value (builder, dc_signal_server_get_port (server));
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print (_("Signaling service on %s (Ctrl+C stops it)\n"), url);
    }

  loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGINT, quit_cb, loop);
  g_unix_signal_add (SIGTERM, quit_cb, loop);
  g_main_loop_run (loop);
  return DC_CLI_EXIT_OK;
}
