/* dc-cli-join.c: `daisychain-cli join`, join a group and print peer events.
 *
 * Besides the user options it has test options (docs/CLI.md) that send
 * payloads of chosen sizes to every peer once the mesh is complete and check
 * what arrives byte for byte, so that tests can run several processes.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <stdio.h>
#include <unistd.h>
/* PRId64 and PRIu64 in translatable strings: xgettext knows them, not
 * GLib's G_GINT64_FORMAT (the msgid would end at the "%"). */
#include <inttypes.h>
#include <glib/gi18n.h>
#include <glib-unix.h>

#include "dc-cli.h"
#include "dc-cli-answers.h"
#include "dc-cli-hub-token.h"
#include "dc-context.h"
#include "engine/dc-gemm-backend.h"
#include "infer/dc-ring-server.h"
#include "mesh/dc-group.h"
#include "mesh/dc-identity.h"
#include "mesh/dc-room.h"

/* Discovery, serving and room joining live in DcGroup, shared with the
 * application; this file prints the group's events and runs the tests' options. */
typedef struct
{
  DcCliOptions      *options;
  DcGroup           *group;
  GMainLoop         *loop;
  DcCliAnswers       answers;       /* --approve ask */
  GArray            *send_sizes;    /* gsize */
  int                expect_peers;
  int                send_garbage;
  int                exit_after_hops;   /* test: leave abruptly after this many hops */
  guint              hops;
  int                exit_status;
  gboolean           stopped;    /* failed before or while the loop ran */
  gboolean           sent;
} JoinState;

static void
join_state_clear (JoinState *state)
{
  dc_cli_answers_clear (&state->answers);
  g_clear_pointer (&state->send_sizes, g_array_unref);
}

/* The test pattern: depends on the position and on the total size, so a
 * truncated, shifted or mixed-up message fails the check. */
static guint8
pattern_byte (gsize i,
              gsize size)
{
  return (guint8) ((i * 131u + (i >> 9) * 7u + size * 17u + 1u) & 0xff);
}

static GBytes *
pattern_new (gsize size)
{
  guint8 *data = g_malloc (MAX (size, 1));

  for (gsize i = 0; i < size; i++)
    data[i] = pattern_byte (i, size);
  return g_bytes_new_take (data, size);
}

static gboolean
pattern_check (GBytes *bytes)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (bytes, &size);

  for (gsize i = 0; i < size; i++)
    if (data[i] != pattern_byte (i, size))
      return FALSE;
  return TRUE;
}

static void
print_event (JoinState  *state,
             const char *event,
             const char *peer,
             guint       n_peers,
             const char *reason,
             gint64      size,
             int         ok)
{
  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, event);
      if (peer != NULL)
        {
          json_builder_set_member_name (builder, "peer");
          json_builder_add_string_value (builder, peer);
        }
      json_builder_set_member_name (builder, "peers");
      json_builder_add_int_value (builder, n_peers);
      if (reason != NULL)
        {
          json_builder_set_member_name (builder, "reason");
          json_builder_add_string_value (builder, reason);
        }
      if (size >= 0)
        {
          json_builder_set_member_name (builder, "size");
          json_builder_add_int_value (builder, size);
        }
      if (ok >= 0)
        {
          json_builder_set_member_name (builder, "ok");
          json_builder_add_boolean_value (builder, ok);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("%s%s%s (%u %s)%s%s\n", event, peer != NULL ? ": " : "", peer != NULL ? peer : "",
               n_peers, n_peers == 1 ? _("peer") : _("peers"),
               reason != NULL ? " " : "", reason != NULL ? reason : "");
      fflush (stdout);
    }
}

static void print_simple (JoinState *state, const char *event, const char *key,
                          const char *value);
static void print_identity (JoinState *state, const char *event, const char *peer,
                            const char *fingerprint, const char *address, const char *via);

static void
send_test_payloads (JoinState *state)
{
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (dc_group_get_mesh (state->group));

  state->sent = TRUE;
  for (guint s = 0; s < state->send_sizes->len; s++)
    {
      g_autoptr(GBytes) payload = pattern_new (g_array_index (state->send_sizes, gsize, s));

      for (guint i = 0; i < peers->len; i++)
        {
          g_autoptr(GError) error = NULL;

          if (dc_peer_get_state (g_ptr_array_index (peers, i)) != DC_PEER_STATE_OPEN)
            continue;
          if (!dc_peer_send (g_ptr_array_index (peers, i), DC_MESH_MSG_DATA, payload, &error))
            g_printerr ("daisychain-cli: %s\n", error->message);
        }
    }
}

/* Pieces that break the protocol in different ways: a wrong magic, a short
 * piece, and a well-formed credit for more bytes than the peer ever sent;
 * no sender following docs/PROTOCOL.md produces any of them. */
static void
send_garbage (JoinState *state)
{
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (dc_group_get_mesh (state->group));

  for (int n = 0; n < state->send_garbage; n++)
    {
      g_autoptr(GBytes) piece = NULL;

      if (n % 3 == 0)
        piece = g_bytes_new ("XXXXXXXXXXXXXXXXXXXXXXXX", 24);
      else if (n % 3 == 1)
        piece = g_bytes_new ("DCM", 3);
      else
        {
          g_autoptr(GBytes) payload = dc_mesh_credit_encode (G_MAXINT64);
          g_autoptr(GPtrArray) pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_CREDIT,
                                                                       payload, NULL);

          piece = g_bytes_ref (g_ptr_array_index (pieces, 0));
        }
      for (guint i = 0; i < peers->len; i++)
        dc_peer_send_raw (g_ptr_array_index (peers, i), piece, NULL);
    }
}

static void
event_cb (DcGroup    *group,
          const char *event,
          const char *peer,
          guint       n_peers,
          const char *reason,
          gpointer    user_data)
{
  JoinState *state = user_data;

  /* The group's own events carry their detail in its properties. */
  if (g_str_equal (event, "discovered"))
    print_simple (state, "discovered", "url", dc_group_get_signal_url (group));
  else if (g_str_equal (event, "identity"))
    {
      /* What the host's dialog will show for this device, to compare. */
      g_autofree char *fingerprint = dc_group_dup_fingerprint (group, TRUE);
      g_autofree char *short_form = dc_group_dup_fingerprint (group, FALSE);

      if (state->options->json)
        print_identity (state, "identity", NULL, fingerprint, dc_group_get_address (group),
                        NULL);
      else
        {
          /* Translators: this device's certificate fingerprint and address. */
          g_print (_("This device: certificate %s, address %s\n"),
                   short_form != NULL ? short_form : _("unknown"),
                   dc_group_get_address (group) != NULL ? dc_group_get_address (group)
                                                         : _("unknown"));
          fflush (stdout);
        }
    }
  else if (g_str_equal (event, "announcing"))
    print_simple (state, "announcing", "room", dc_group_get_room_code (group));
  else
    print_event (state, event, peer, n_peers, reason, -1, -1);
  if (g_str_equal (event, "peer-joined") && state->expect_peers > 0
      && (int) n_peers == state->expect_peers && !state->sent)
    {
      print_event (state, "mesh-complete", NULL, n_peers, NULL, -1, -1);
      if (state->send_sizes != NULL)
        send_test_payloads (state);
      if (state->send_garbage > 0)
        send_garbage (state);
    }
}

static void
message_cb (DcGroup *group,
            DcPeer  *peer,
            guint    type,
            GBytes  *payload,
            gpointer user_data)
{
  JoinState *state = user_data;

  if (type != DC_MESH_MSG_DATA)
    return;
  print_event (state, "data", dc_peer_get_name (peer), dc_group_get_n_peers (group), NULL,
               (gint64) g_bytes_get_size (payload), pattern_check (payload));
}

static void
failed_cb (DcGroup      *group,
           const GError *error,
           gpointer      user_data)
{
  JoinState *state = user_data;

  state->exit_status = dc_cli_fail (state->options, error);
  state->stopped = TRUE;
  g_main_loop_quit (state->loop);
}

/* JSON: {"event": EVENT, "peer": PEER, "fingerprint": F, "short": S,
 * "address": A, "via": V}; members that are NULL are left out. */
static void
print_identity (JoinState  *state,
                const char *event,
                const char *peer,
                const char *fingerprint,
                const char *address,
                const char *via)
{
  g_autofree char *short_form = dc_identity_short_fingerprint (fingerprint);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  const char *keys[] = { "event", "peer", "fingerprint", "short", "address", "via" };
  const char *values[] = { event, peer, fingerprint, short_form, address, via };

  json_builder_begin_object (builder);
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    if (values[i] != NULL)
      {
        json_builder_set_member_name (builder, keys[i]);
        json_builder_add_string_value (builder, values[i]);
      }
  json_builder_end_object (builder);
  dc_cli_print_json (builder);
}

static void
approval_requested_cb (DcGroup    *group,
                       const char *id,
                       const char *name,
                       const char *fingerprint,
                       const char *address,
                       const char *via,
                       gpointer    user_data)
{
  JoinState *state = user_data;
  g_autofree char *short_form = dc_identity_short_fingerprint (fingerprint);

  if (state->options->json)
    print_identity (state, "request-details", name, fingerprint, address, via);
  else
    /* Translators: a device's name, its certificate fingerprint, its
     * network address, and how the room could be found. */
    g_print (_("“%s” (certificate %s, address %s, %s) asks to join. "
               "Type accept or decline: "), name,
             short_form != NULL ? short_form : _("unknown"),
             *address != '\0' ? address : _("unknown"),
             g_str_equal (via, "lan") ? _("the room is announced on the local network")
                                      : _("the room code was shared"));
  fflush (stdout);
  dc_cli_answers_ask (&state->answers, id);
}

/* --serve-layers: what the stage does, as events ("ring-assigned", …). */
static void
ring_server_event_cb (DcRingServer *server,
                      const char   *kind,
                      const char   *detail,
                      guint64       value,
                      JoinState    *state)
{
  g_autofree char *event = g_strconcat ("ring-", kind, NULL);

  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, event);
      json_builder_set_member_name (builder, "detail");
      json_builder_add_string_value (builder, detail != NULL ? detail : "");
      json_builder_set_member_name (builder, "value");
      json_builder_add_int_value (builder, (gint64) value);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else if (g_str_equal (kind, "token"))
    {
      /* Tokens stream on every device, as the head makes them. */
      g_print ("%s", detail);
      fflush (stdout);
    }
  else if (g_str_equal (kind, "turn-ended"))
    g_print ("\n");
  else if (g_str_equal (kind, "loaded"))
    g_printerr (_("daisychain-cli: my slice of %s is loaded (%" PRIu64
                  " bytes downloaded)\n"), detail, value);
  else if (g_str_equal (kind, "from-head"))
    g_printerr (_("daisychain-cli: %" PRIu64 " bytes of my slice came from the "
                  "cache of the head “%s”\n"), value, detail);
  else if (g_str_equal (kind, "assigned"))
    g_printerr (_("daisychain-cli: the head gives this device %s\n"), detail);
  else
    g_printerr ("daisychain-cli: %s%s%s\n", kind, detail != NULL && *detail ? ": " : "",
                detail != NULL ? detail : "");
}

/* Test: a stage that vanishes mid-generation, without a bye. */
static void
ring_hop_count_cb (DcGroup  *group,
                   DcPeer   *peer,
                   guint     type,
                   GBytes   *payload,
                   gpointer  user_data)
{
  JoinState *state = user_data;

  if (type == DC_MESH_MSG_RING_HOP && state->exit_after_hops > 0 &&
      ++state->hops >= (guint) state->exit_after_hops)
    {
      print_simple (state, "test-exit", "reason", "exit-after-hops");
      _exit (3);
    }
}

static gboolean
quit_cb (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

static gboolean
leave_cb (gpointer user_data)
{
  JoinState *state = user_data;

  dc_group_leave (state->group);
  /* Let the byes leave before the process ends. */
  g_timeout_add (200, quit_cb, state->loop);
  return G_SOURCE_REMOVE;
}

static void
print_simple (JoinState  *state,
              const char *event,
              const char *key,
              const char *value)
{
  if (state->options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, event);
      json_builder_set_member_name (builder, key);
      json_builder_add_string_value (builder, value);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("%s: %s\n", event, value);
      fflush (stdout);
    }
}

static gboolean
parse_sizes (const char  *text,
             GArray     **out)
{
  g_auto(GStrv) parts = g_strsplit (text, ",", -1);
  g_autoptr(GArray) sizes = g_array_new (FALSE, FALSE, sizeof (gsize));

  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 value;

      if (!g_ascii_string_to_unsigned (parts[i], 10, 0, DC_MESH_MAX_PAYLOAD, &value, NULL))
        return FALSE;
      g_array_append_val (sizes, value);
    }
  *out = g_steal_pointer (&sizes);
  return TRUE;
}

int
dc_cli_join_run (const DcCliCommand  *command,
                 DcCliOptions        *options,
                 int                  argc,
                 char               **argv)
{
  g_autofree char *room = NULL;
  g_autofree char *signal_url = NULL;
  g_autofree char *name = NULL;
  g_autofree char *approve = NULL;
  g_autofree char *stun = NULL;
  g_autofree char *turn = NULL;
  g_autofree char *backend = NULL;
  g_autofree char *probe_hash = NULL;
  g_autofree char *send_sizes = NULL;
  g_autofree char *test_room_id = NULL;
  g_autofree char *test_fingerprint = NULL;
  g_auto(GStrv) ice_addresses = NULL;
  gboolean no_create = FALSE, serve = FALSE, serve_layers = FALSE;
  int numeric_rule = 0, expect_peers = 0, send_garbage = 0, exit_after_hops = 0;
  int threads = 0;
  double memory_mb = 0, test_gmacs = 0;
  g_autofree char *token_file = NULL;
  g_autoptr(DcContext) context = NULL;
  g_autoptr(DcRingServer) ring_server = NULL;
  const GOptionEntry entries[] = {
    { "room", 0, 0, G_OPTION_ARG_STRING, &room,
      N_("Room code (default: generate one and print it)"), N_("CODE") },
    { "signal", 0, 0, G_OPTION_ARG_STRING, &signal_url,
      N_("Signaling service URL (ws:// or wss://…/signal; default: find or start a group "
         "on the local network)"), N_("URL") },
    { "serve", 0, 0, G_OPTION_ARG_NONE, &serve,
      N_("Serve signaling in this process (on --signal's port when given) and join it"), NULL },
    { "name", 0, 0, G_OPTION_ARG_STRING, &name, N_("This device's name (default: host name)"),
      N_("NAME") },
    { "approve", 0, 0, G_OPTION_ARG_STRING, &approve,
      N_("As host: admit all, none, or ask on stdin (default: ask)"), N_("all|none|ask") },
    { "no-create", 0, 0, G_OPTION_ARG_NONE, &no_create,
      N_("Fail instead of creating the room when nobody is in it"), NULL },
    { "stun", 0, 0, G_OPTION_ARG_STRING, &stun, N_("STUN server (stun://host:port)"),
      N_("URL") },
    { "turn", 0, 0, G_OPTION_ARG_STRING, &turn,
      N_("TURN server (turn://user:password@host:port)"), N_("URL") },
    { "ice-address", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ice_addresses,
      N_("Use only this local address for ICE (repeatable)"), N_("ADDRESS") },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
      N_("Backend named in the hello (until the engine supplies it)"), N_("NAME") },
    { "probe-hash", 0, 0, G_OPTION_ARG_STRING, &probe_hash,
      N_("Probe hash named in the hello"), N_("HEX") },
    { "numeric-rule", 0, 0, G_OPTION_ARG_INT, &numeric_rule,
      N_("Numeric-rule id named in the hello"), N_("N") },
    { "expect-peers", 0, 0, G_OPTION_ARG_INT, &expect_peers,
      N_("Test: print mesh-complete when this many peers are connected"), N_("N") },
    { "send-sizes", 0, 0, G_OPTION_ARG_STRING, &send_sizes,
      N_("Test: at mesh-complete send a checked payload of each size to every peer"),
      N_("N,N,…") },
    { "send-garbage", 0, 0, G_OPTION_ARG_INT, &send_garbage,
      N_("Test: at mesh-complete send this many malformed pieces to every peer"), N_("N") },
    { "serve-layers", 0, 0, G_OPTION_ARG_NONE, &serve_layers,
      N_("Offer this device as a stage of other devices' inference rings: a head tells it "
         "which layers of which model to fetch"), NULL },
    { "memory-mb", 0, 0, G_OPTION_ARG_DOUBLE, &memory_mb,
      N_("With --serve-layers: the memory offered (default: half of what is installed)"),
      N_("MB") },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads,
      N_("With --serve-layers: threads for the stage's products (default: all processors; "
         "stages sharing a host should split its cores)"), N_("N") },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
      N_("With --serve-layers: read a Hugging Face token from FILE if the Hub asks for one "
         "(else $HF_TOKEN)"), N_("FILE") },
    { "test-exit-after-hops", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &exit_after_hops,
      N_("Test: with --serve-layers, exit without a bye at the Nth hop received"), N_("N") },
    { "test-gmacs", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_DOUBLE, &test_gmacs,
      N_("Test: with --serve-layers, offer this speed instead of the measured one"), N_("G") },
    { "test-room-id", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &test_room_id,
      N_("Test: present this room id with the code's key"), N_("HEX") },
    { "test-fingerprint", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &test_fingerprint,
      N_("Test: claim this certificate fingerprint in the join request"), N_("AB:CD:…") },
    { NULL }
  };
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GError) error = NULL;
  JoinState state = { 0 };
  int status;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);

  if (approve == NULL || g_str_equal (approve, "ask"))
    config.approve = DC_MESH_APPROVE_ASK;
  else if (g_str_equal (approve, "all"))
    config.approve = DC_MESH_APPROVE_ALL;
  else if (g_str_equal (approve, "none"))
    config.approve = DC_MESH_APPROVE_NONE;
  else
    return dc_cli_usage_error (command, _("--approve takes all, none or ask"));
  if (send_sizes != NULL && !parse_sizes (send_sizes, &state.send_sizes))
    return dc_cli_usage_error (command, _("--send-sizes takes sizes in bytes, comma-separated"));
  if (name != NULL && !g_utf8_validate (name, -1, NULL))
    return dc_cli_usage_error (command, _("--name must be UTF-8 text"));

  if (memory_mb < 0 || memory_mb > 1e9)
    return dc_cli_usage_error (command, _("--memory-mb must be a positive number"));
  if (!serve_layers && (memory_mb > 0 || exit_after_hops != 0 || token_file != NULL ||
                        test_gmacs != 0))
    return dc_cli_usage_error (command, _("--memory-mb and --token-file go with --serve-layers"));
  /* 1024: past any host's processors; beyond that it is a typo. */
  if (threads < 0 || threads > 1024 || (threads > 0 && !serve_layers))
    return dc_cli_usage_error (command, _("--threads takes 1–1024 and goes with --serve-layers"));

  if (!dc_mesh_check_plugins (&error))
    return dc_cli_fail (options, error);
  if (serve_layers)
    {
      /* The stage's products run here: its probe hash is its hello's. */
      context = dc_context_new (DC_BACKEND_CPU, &error);
      if (context == NULL)
        return dc_cli_fail (options, error);
      /* Before the speed is measured: the offer then tells the head the
       * speed of the threads the stage will really use. */
      if (threads > 0)
        dc_gemm_backend_set_n_threads (dc_context_get_backend (context), (guint) threads);
      dc_cli_hub_token_attach (dc_context_get_hf_client (context), token_file);
      if (probe_hash == NULL)
        probe_hash = g_strdup (dc_context_get_probe_hash (context));
    }

  config.room_id_override = g_strdup (test_room_id);
  config.fingerprint_override = g_strdup (test_fingerprint);
  config.create = !no_create;
  config.hello = dc_mesh_hello_new (name != NULL ? name : g_get_host_name (),
                                    backend != NULL ? backend : "cpu",
                                    probe_hash != NULL ? probe_hash : "",
                                    (guint32) numeric_rule);
  config.peer.stun_server = g_strdup (stun);
  config.peer.turn_server = g_strdup (turn);
  config.peer.ice_addresses = g_strdupv (ice_addresses);
  group = dc_group_new (&config);

  if (serve)
    {
      guint port = 0;
      g_autofree char *bind = NULL;

      if (signal_url != NULL)
        {
          g_autoptr(GUri) uri = g_uri_parse (signal_url, G_URI_FLAGS_NONE, NULL);

          if (uri == NULL || g_uri_get_port (uri) < 0)
            return dc_cli_usage_error (command, _("with --serve, --signal needs a port"));
          port = (guint) g_uri_get_port (uri);
          bind = g_strdup (g_uri_get_host (uri));
        }
      if (!dc_group_serve (group, bind != NULL ? bind : "127.0.0.1", port, &error))
        return dc_cli_fail (options, error);
      g_free (signal_url);
      signal_url = g_strdup (dc_group_get_signal_url (group));
      if (options->json)
        {
          g_autoptr(JsonBuilder) builder = json_builder_new ();

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "event");
          json_builder_add_string_value (builder, "listening");
          json_builder_set_member_name (builder, "url");
          json_builder_add_string_value (builder, signal_url);
          json_builder_end_object (builder);
          dc_cli_print_json (builder);
        }
    }

  if (room == NULL && signal_url != NULL)
    {
      room = dc_room_generate_code ();
      if (options->json)
        {
          g_autoptr(JsonBuilder) builder = json_builder_new ();

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "event");
          json_builder_add_string_value (builder, "room");
          json_builder_set_member_name (builder, "room");
          json_builder_add_string_value (builder, room);
          json_builder_end_object (builder);
          dc_cli_print_json (builder);
        }
      else
        {
          g_print (_("Room code: %s\n"), room);
        }
    }

  loop = g_main_loop_new (NULL, FALSE);
  state.options = options;
  state.loop = loop;
  state.expect_peers = expect_peers;
  state.send_garbage = send_garbage;
  state.exit_after_hops = exit_after_hops;
  state.group = group;
  dc_cli_answers_init (&state.answers, group);
  g_signal_connect (group, "event", G_CALLBACK (event_cb), &state);
  g_signal_connect (group, "message", G_CALLBACK (message_cb), &state);
  g_signal_connect (group, "failed", G_CALLBACK (failed_cb), &state);
  g_signal_connect (group, "approval-requested", G_CALLBACK (approval_requested_cb), &state);
  if (serve_layers)
    {
      g_autofree char *speed = NULL;

      /* The test's hop counter runs before the stage computes the hop. */
      g_signal_connect (group, "message", G_CALLBACK (ring_hop_count_cb), &state);
      ring_server = dc_ring_server_new (context, group, (guint64) (memory_mb * 1e6));
      if (test_gmacs > 0)
        _dc_ring_server_set_gmacs (ring_server, test_gmacs);
      g_signal_connect (ring_server, "event", G_CALLBACK (ring_server_event_cb), &state);
      speed = g_strdup_printf ("%.2f", dc_ring_server_get_gmacs (ring_server));
      print_simple (&state, "ring-speed", "gmacs", speed);
    }
  g_unix_signal_add (SIGINT, leave_cb, &state);
  g_unix_signal_add (SIGTERM, leave_cb, &state);

  if (signal_url != NULL)
    {
      if (!dc_group_join_room (group, signal_url, room, &error))
        {
          g_signal_handlers_disconnect_by_data (group, &state);
          join_state_clear (&state);
          return dc_cli_fail (options, error);
        }
    }
  else if (!dc_group_start_discovery (group, 0, room, &error))
    {
      /* No service named: it looked for a group on the local network. */
      g_signal_handlers_disconnect_by_data (group, &state);
      join_state_clear (&state);
      return dc_cli_fail (options, error);
    }
  /* A failure inside dc_mesh_start() quit a loop that was not running yet. */
  if (!state.stopped)
    g_main_loop_run (loop);

  status = state.exit_status;
  if (ring_server != NULL)
    g_signal_handlers_disconnect_by_data (ring_server, &state);
  g_clear_object (&ring_server);
  g_signal_handlers_disconnect_by_data (group, &state);
  join_state_clear (&state);
  return status;
}
