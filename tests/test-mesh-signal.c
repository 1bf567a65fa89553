/* test-mesh-signal.c: the signaling service against misbehaving clients
 * (suite net: a DcSignalServer on 127.0.0.1 and libsoup WebSocket clients in
 * the same main context, all asynchronous).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"
#include "mesh/dc-room.h"
#include "mesh/dc-signal-server.h"
#include "mesh/dc-signaling.h"

#define ROOM_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define ROOM_2 "2222222222222222222222222222222222222222222222222222222222222222"

typedef struct
{
  SoupSession             *session;
  SoupWebsocketConnection *conn;
  GPtrArray               *messages;  /* JsonObject* */
  gboolean                 connected;
  gboolean                 closed;
} Client;

static gboolean
accept_certificate_cb (SoupMessage          *msg,
                       GTlsCertificate      *certificate,
                       GTlsCertificateFlags  errors,
                       gpointer              user_data)
{
  GTlsCertificate *expected = user_data;

  /* Self-signed: trust exactly the test's certificate. */
  return g_tls_certificate_is_same (certificate, expected);
}

static void
message_cb (SoupWebsocketConnection *conn,
            gint                     type,
            GBytes                  *message,
            gpointer                 user_data)
{
  Client *client = user_data;
  g_autoptr(JsonParser) parser = json_parser_new ();
  gsize size;
  const char *data = g_bytes_get_data (message, &size);

  g_assert_cmpint (type, ==, SOUP_WEBSOCKET_DATA_TEXT);
  g_assert_true (json_parser_load_from_data (parser, data, (gssize) size, NULL));
  g_test_message ("got %.*s", (int) size, data);
  g_ptr_array_add (client->messages,
                   json_object_ref (json_node_get_object (json_parser_get_root (parser))));
}

static void
closed_cb (SoupWebsocketConnection *conn,
           gpointer                 user_data)
{
  ((Client *) user_data)->closed = TRUE;
}

static void
connected_cb (GObject      *object,
              GAsyncResult *result,
              gpointer      user_data)
{
  Client *client = user_data;
  g_autoptr(GError) error = NULL;

  client->conn = soup_session_websocket_connect_finish (SOUP_SESSION (object), result, &error);
  g_assert_no_error (error);
  g_signal_connect (client->conn, "message", G_CALLBACK (message_cb), client);
  g_signal_connect (client->conn, "closed", G_CALLBACK (closed_cb), client);
  client->connected = TRUE;
}

static gboolean
is_connected (gpointer user_data)
{
  return ((Client *) user_data)->connected;
}

static gboolean
is_closed (gpointer user_data)
{
  return ((Client *) user_data)->closed;
}

static Client *
client_new_tls (DcSignalServer  *server,
                GTlsCertificate *trusted)
{
  Client *client = g_new0 (Client, 1);
  g_autofree char *url = dc_signal_server_dup_url (server);
  g_autoptr(SoupMessage) msg = soup_message_new ("GET", url);

  if (trusted != NULL)
    g_signal_connect (msg, "accept-certificate", G_CALLBACK (accept_certificate_cb), trusted);

  client->session = soup_session_new ();
  client->messages = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  soup_session_websocket_connect_async (client->session, msg, NULL, NULL, G_PRIORITY_DEFAULT,
                                        NULL, connected_cb, client);
  g_assert_true (dc_test_wait_until (is_connected, client, 10000));
  return client;
}

static Client *
client_new (DcSignalServer *server)
{
  return client_new_tls (server, NULL);
}

static void
client_free (Client *client)
{
  if (client->conn != NULL)
    {
      g_signal_handlers_disconnect_by_data (client->conn, client);
      if (soup_websocket_connection_get_state (client->conn) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close (client->conn, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    }
  g_clear_object (&client->conn);
  g_clear_object (&client->session);
  g_ptr_array_unref (client->messages);
  g_free (client);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Client, client_free)

typedef struct
{
  Client *client;
  guint   count;
} CountWait;

static gboolean
has_count (gpointer user_data)
{
  CountWait *wait = user_data;

  return wait->client->messages->len >= wait->count || wait->client->closed;
}

/* Waits for message number @index (0-based) and returns it. */
static JsonObject *
client_expect (Client *client,
               guint   index)
{
  CountWait wait = { client, index + 1 };

  dc_test_wait_until (has_count, &wait, 10000);
  g_assert_cmpuint (client->messages->len, >, index);
  return g_ptr_array_index (client->messages, index);
}

static const char *
type_of (JsonObject *object)
{
  return json_object_get_string_member_with_default (object, "type", "");
}

static void
client_send (Client     *client,
             const char *text)
{
  soup_websocket_connection_send_text (client->conn, text);
}

static void
client_join (Client     *client,
             const char *room,
             gboolean    create)
{
  g_autofree char *text = g_strdup_printf ("{\"type\":\"join\",\"room\":\"%s\",\"create\":%s}",
                                           room, create ? "true" : "false");

  client_send (client, text);
}

static void
expect_error_and_close (Client     *client,
                        guint       index,
                        const char *code)
{
  JsonObject *error = client_expect (client, index);

  g_assert_cmpstr (type_of (error), ==, "error");
  g_assert_cmpstr (json_object_get_string_member (error, "code"), ==, code);
  g_assert_true (dc_test_wait_until (is_closed, client, 10000));
}

static DcSignalServer *
server_new (void)
{
  DcSignalServer *server = dc_signal_server_new ();
  g_autoptr(GError) error = NULL;

  dc_signal_server_listen (server, "127.0.0.1", 0, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (dc_signal_server_get_port (server), >, 0);
  return server;
}

static void
test_malformed (void)
{
  g_autoptr(DcSignalServer) server = server_new ();
  const char *bad[] = {
    "not json",
    "[1,2,3]",
    "{\"type\":\"dance\"}",
    "{\"type\":\"join\",\"room\":\"xyz\"}",
    "{\"type\":\"join\",\"room\":\"" ROOM_1 "0\"}",
    "{\"type\":\"relay\",\"to\":\"abc\",\"body\":\"x\"}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(Client) client = client_new (server);

      client_send (client, bad[i]);
      expect_error_and_close (client, 0, "protocol");
    }

  /* Binary frames and frames over 256 KiB end the connection. */
  {
    g_autoptr(Client) client = client_new (server);

    soup_websocket_connection_send_binary (client->conn, "\1\2\3", 3);
    g_assert_true (dc_test_wait_until (is_closed, client, 10000));
  }
  {
    g_autoptr(Client) client = client_new (server);
    g_autofree char *huge = g_strnfill (300 * 1024, ' ');

    client_send (client, huge);
    g_assert_true (dc_test_wait_until (is_closed, client, 10000));
  }
  {
    g_autoptr(Client) client = client_new (server);

    client_join (client, ROOM_1, TRUE);
    g_assert_cmpstr (type_of (client_expect (client, 0)), ==, "welcome");
    client_join (client, ROOM_1, TRUE);
    expect_error_and_close (client, 1, "protocol");
  }
}

static void
test_rooms (void)
{
  g_autoptr(DcSignalServer) server = server_new ();
  g_autoptr(Client) a = client_new (server), b = client_new (server), c = client_new (server);
  g_autoptr(Client) none = client_new (server), waiting = NULL;
  const char *a_id, *b_id, *c_id;
  g_autofree char *to_b = NULL, *to_c = NULL;
  JsonObject *relay, *message;

  client_join (none, ROOM_2, FALSE);
  expect_error_and_close (none, 0, "no-room");

  client_join (a, ROOM_1, TRUE);
  message = client_expect (a, 0);
  a_id = json_object_get_string_member (message, "id");
  g_assert_cmpstr (json_object_get_string_member (message, "host"), ==, a_id);
  client_join (b, ROOM_2, TRUE);
  b_id = json_object_get_string_member (client_expect (b, 0), "id");
  client_join (c, ROOM_1, FALSE);
  message = client_expect (c, 0);
  c_id = json_object_get_string_member (message, "id");
  g_assert_cmpstr (json_object_get_string_member (message, "host"), ==, a_id);
  g_assert_cmpstr (a_id, !=, c_id);

  /* A relay across rooms goes nowhere; inside a room it arrives with the
   * sender set by the service, whatever the client claimed. */
  to_b = g_strdup_printf ("{\"type\":\"relay\",\"to\":\"%s\",\"body\":\"x\"}", b_id);
  client_send (a, to_b);
  to_c = g_strdup_printf ("{\"type\":\"relay\",\"to\":\"%s\",\"from\":\"%s\",\"body\":\"hi\","
                          "\"mac\":\"00\"}", c_id, b_id);
  client_send (a, to_c);
  relay = client_expect (c, 1);
  g_assert_cmpstr (type_of (relay), ==, "relay");
  g_assert_cmpstr (json_object_get_string_member (relay, "from"), ==, a_id);
  g_assert_cmpstr (json_object_get_string_member (relay, "body"), ==, "hi");
  g_assert_cmpstr (json_object_get_string_member (relay, "mac"), ==, "00");
  g_assert_cmpuint (b->messages->len, ==, 1);

  /* The host admits c; a waiting device d arrives; the host leaves: c is
   * told and becomes host, d is told who hosts now. */
  {
    g_autofree char *admit = g_strdup_printf ("{\"type\":\"admit\",\"id\":\"%s\"}", c_id);

    client_send (a, admit);
  }
  waiting = client_new (server);
  client_join (waiting, ROOM_1, FALSE);
  client_expect (waiting, 0);
  g_signal_handlers_disconnect_by_data (a->conn, a);
  soup_websocket_connection_close (a->conn, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  message = client_expect (c, 2);
  g_assert_cmpstr (type_of (message), ==, "left");
  g_assert_cmpstr (json_object_get_string_member (message, "id"), ==, a_id);
  message = client_expect (c, 3);
  g_assert_cmpstr (type_of (message), ==, "host");
  g_assert_cmpstr (json_object_get_string_member (message, "id"), ==, c_id);
  message = client_expect (waiting, 2);
  g_assert_cmpstr (type_of (message), ==, "host");
  g_assert_cmpstr (json_object_get_string_member (message, "id"), ==, c_id);

  /* The new host leaves with nobody admitted: the waiting device is told. */
  g_signal_handlers_disconnect_by_data (c->conn, c);
  soup_websocket_connection_close (c->conn, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
  expect_error_and_close (waiting, 3, "host-left");
}

/* With a certificate the service speaks wss:// and works the same. */
static void
test_tls (void)
{
  g_autoptr(DcSignalServer) server = dc_signal_server_new ();
  g_autofree char *cert_file = dc_test_dup_source_path ("tests", "data", "mesh-test-cert.pem",
                                                        NULL);
  g_autofree char *key_file = dc_test_dup_source_path ("tests", "data", "mesh-test-key.pem",
                                                       NULL);
  g_autoptr(GTlsCertificate) cert = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(Client) client = NULL;
  g_autofree char *url = NULL;

  cert = g_tls_certificate_new_from_files (cert_file, key_file, &error);
  g_assert_no_error (error);
  dc_signal_server_listen (server, "127.0.0.1", 0, cert_file, key_file, &error);
  g_assert_no_error (error);
  url = dc_signal_server_dup_url (server);
  g_assert_true (g_str_has_prefix (url, "wss://127.0.0.1:"));

  client = client_new_tls (server, cert);
  client_join (client, ROOM_1, TRUE);
  g_assert_cmpstr (type_of (client_expect (client, 0)), ==, "welcome");

  /* A key without its certificate is refused with a clear error. */
  {
    g_autoptr(DcSignalServer) half = dc_signal_server_new ();
    g_autoptr(GError) half_error = NULL;

    g_assert_false (dc_signal_server_listen (half, "127.0.0.1", 0, NULL, key_file,
                                             &half_error));
    g_assert_nonnull (half_error);
  }
}

typedef struct
{
  char      *id;
  GPtrArray *from;   /* sender ids of the bodies the device accepted */
} Device;

static void
device_welcome_cb (DcSignaling *signaling,
                   const char  *id,
                   const char  *host,
                   gpointer     user_data)
{
  ((Device *) user_data)->id = g_strdup (id);
}

static void
device_message_cb (DcSignaling *signaling,
                   const char  *from,
                   JsonObject  *body,
                   gpointer     user_data)
{
  g_ptr_array_add (((Device *) user_data)->from, g_strdup (from));
}

static gboolean
device_has_id (gpointer user_data)
{
  return ((Device *) user_data)->id != NULL;
}

static gboolean
device_has_message (gpointer user_data)
{
  return ((Device *) user_data)->from->len > 0;
}

/* Sends @body to @to, signed with @room's key as a member would. */
static void
client_relay (Client       *client,
              const DcRoom *room,
              const char   *from,
              const char   *to,
              const char   *body)
{
  g_autofree char *mac = dc_room_sign (room, from, to, body);
  g_autoptr(JsonObject) relay = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *text = NULL;

  json_object_set_string_member (relay, "type", "relay");
  json_object_set_string_member (relay, "to", to);
  json_object_set_string_member (relay, "body", body);
  json_object_set_string_member (relay, "mac", mac);
  json_node_set_object (node, relay);
  text = json_to_string (node, FALSE);
  client_send (client, text);
}

/* A member that relays bodies nested 200,000 deep (json-glib 1.6 overflows
 * its stack at about 80,000) is dropped without a crash and, after three,
 * blocked: even its correctly signed bodies are ignored, while another
 * member's still arrive. */
static void
test_device_blocks_deep_relays (void)
{
  g_autoptr(DcSignalServer) server = server_new ();
  g_autofree char *url = dc_signal_server_dup_url (server);
  g_autoptr(DcRoom) room = dc_room_new ("DEEP-RELAY-TEST");
  g_autoptr(DcSignaling) signaling = dc_signaling_new (url, room, NULL);
  g_autoptr(Client) attacker = NULL, friend = NULL;
  g_autofree char *deep = g_strnfill (200 * 1000, '[');
  g_autofree char *attacker_id = NULL, *friend_id = NULL;
  Device device = { NULL, g_ptr_array_new_with_free_func (g_free) };

  g_signal_connect (signaling, "welcome", G_CALLBACK (device_welcome_cb), &device);
  g_signal_connect (signaling, "message", G_CALLBACK (device_message_cb), &device);
  dc_signaling_connect (signaling, TRUE);
  g_assert_true (dc_test_wait_until (device_has_id, &device, 10000));

  attacker = client_new (server);
  client_join (attacker, room->room_id, FALSE);
  attacker_id = g_strdup (json_object_get_string_member (client_expect (attacker, 0), "id"));
  friend = client_new (server);
  client_join (friend, room->room_id, FALSE);
  friend_id = g_strdup (json_object_get_string_member (client_expect (friend, 0), "id"));

  for (guint i = 0; i < 3; i++)
    client_relay (attacker, room, attacker_id, device.id, deep);
  client_relay (attacker, room, attacker_id, device.id, "{\"kind\":\"hello\",\"seq\":1}");
  /* Order the friend's body after the attacker's: the service handles the
   * attacker's frames in order, so once the friend has the attacker's note,
   * the bodies before it are already on their way to the device, ahead of
   * anything the friend sends now. */
  client_relay (attacker, room, attacker_id, friend_id, "note");
  client_expect (friend, 1);
  client_relay (friend, room, friend_id, device.id, "{\"kind\":\"hello\",\"seq\":1}");
  g_assert_true (dc_test_wait_until (device_has_message, &device, 10000));
  g_assert_cmpuint (device.from->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (device.from, 0), ==, friend_id);

  dc_signaling_close (signaling);
  g_ptr_array_unref (device.from);
  g_free (device.id);
}

/* Sends @kind with @reason from @from to @to, signed with @room's key, or
 * unsigned when @room is NULL: what a tampering service could send. */
static void
send_verdict (Client       *client,
              const DcRoom *room,
              const char   *from,
              const char   *to,
              const char   *kind,
              const char   *reason,
              gint64        seq)
{
  g_autofree char *body = g_strdup_printf ("{\"kind\":\"%s\",\"reason\":\"%s\","
                                           "\"seq\":%" G_GINT64_FORMAT "}", kind, reason, seq);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autofree char *text = NULL;

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "relay");
  json_builder_set_member_name (builder, "to");
  json_builder_add_string_value (builder, to);
  json_builder_set_member_name (builder, "body");
  json_builder_add_string_value (builder, body);
  if (room != NULL)
    {
      g_autofree char *mac = dc_room_sign (room, from, to, body);

      json_builder_set_member_name (builder, "mac");
      json_builder_add_string_value (builder, mac);
    }
  json_builder_end_object (builder);
  node = json_builder_get_root (builder);
  text = json_to_string (node, FALSE);
  client_send (client, text);
}

/* The test plays the room's host over a raw WebSocket. A newcomer
 * (daisychain-cli) ignores an unsigned "refused" and one signed with another
 * room's key, each with an "unverified" line, and keeps waiting; a "refused"
 * signed with the room's key ends it (reason cooldown). The newcomer's
 * request carries the fingerprint it shows for itself, and the service adds
 * the address it sees. */
static void
test_forged_verdict (void)
{
  g_autoptr(DcSignalServer) server = server_new ();
  g_autoptr(Client) host = client_new (server);
  g_autoptr(DcRoom) room = dc_room_new ("VERDICT-TEST");
  g_autoptr(DcRoom) other = dc_room_new ("SOME-OTHER-CODE");
  g_autoptr(DcTestProc) newcomer = NULL;
  g_autofree char *url = dc_signal_server_dup_url (server);
  g_autoptr(JsonParser) parser = json_parser_new ();
  const char *args[] = {
    "join", "--json", "--signal", url, "--room", "VERDICT-TEST", "--name", "newcomer",
    "--no-create", "--ice-address", "127.0.0.1", NULL
  };
  JsonObject *welcome, *relay, *request, *own, *event;
  const char *host_id, *newcomer_id;
  g_autoptr(GError) error = NULL;

  client_join (host, room->room_id, TRUE);
  welcome = client_expect (host, 0);
  g_assert_cmpstr (type_of (welcome), ==, "welcome");
  host_id = json_object_get_string_member (welcome, "id");
  g_assert_cmpstr (json_object_get_string_member (welcome, "address"), ==, "127.0.0.1");

  newcomer = dc_test_proc_spawn ("newcomer", NULL, FALSE, args);
  own = dc_test_proc_expect (newcomer, "identity", NULL, 20000);
  relay = client_expect (host, 1);
  g_assert_cmpstr (type_of (relay), ==, "relay");
  g_assert_cmpstr (json_object_get_string_member (relay, "address"), ==,
                   json_object_get_string_member (own, "address"));
  newcomer_id = json_object_get_string_member (relay, "from");
  g_assert_true (json_parser_load_from_data (parser,
                                             json_object_get_string_member (relay, "body"), -1,
                                             &error));
  g_assert_no_error (error);
  request = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpstr (json_object_get_string_member (request, "kind"), ==, "request");
  g_assert_cmpstr (json_object_get_string_member (request, "fingerprint"), ==,
                   json_object_get_string_member (own, "fingerprint"));

  send_verdict (host, NULL, host_id, newcomer_id, "refused", "auth", 1);
  event = dc_test_proc_expect (newcomer, "unverified", NULL, 20000);
  g_assert_cmpstr (json_object_get_string_member (event, "reason"), ==, "refused");
  send_verdict (host, other, host_id, newcomer_id, "refused", "auth", 2);
  g_assert_cmpint (dc_test_proc_find (newcomer, 0, "declined", NULL), ==, -1);
  send_verdict (host, other, host_id, newcomer_id, "decline", "", 3);
  send_verdict (host, room, host_id, newcomer_id, "refused", "cooldown", 4);
  event = dc_test_proc_expect (newcomer, "declined", NULL, 20000);
  g_assert_cmpstr (json_object_get_string_member (event, "reason"), ==, "cooldown");
  g_assert_cmpint (dc_test_proc_expect_exit (newcomer, 10000), ==, 1);
  /* Three forgeries, three "unverified" lines before the one real verdict. */
  {
    guint n = 0;

    for (int at = 0; (at = dc_test_proc_find (newcomer, at, "unverified", NULL)) >= 0; at++)
      n++;
    g_assert_cmpuint (n, ==, 3);
  }
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/mesh/signal/malformed", test_malformed);
  g_test_add_func ("/dc/mesh/signal/rooms", test_rooms);
  g_test_add_func ("/dc/mesh/signal/tls", test_tls);
  g_test_add_func ("/dc/mesh/signal/device-blocks-deep-relays", test_device_blocks_deep_relays);
  g_test_add_func ("/dc/mesh/signal/forged-verdict", test_forged_verdict);

  return g_test_run ();
}
