/* test-mesh-abuse.c: a real signaling service and real devices against
 * hostile clients (suite net, child processes on 127.0.0.1).
 *
 * The test speaks WebSocket itself to send what no device would: JSON nested
 * 200,000 levels deep (json-glib 1.6 overflows its stack at about 80,000),
 * more connections, rooms and waiting joins than the caps allow, and
 * connections that never join. Every wait has a deadline.
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

#define ROOM_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define ROOM_2 "2222222222222222222222222222222222222222222222222222222222222222"
/* Over twice the depth that crashes json-glib 1.6, and under the 256 KiB
 * frame limit, so that only the depth check stands in the way. */
#define DEEP_LEVELS (200 * 1000)

typedef struct
{
  SoupSession             *session;
  SoupWebsocketConnection *conn;
  GPtrArray               *messages;  /* JsonObject* */
  GError                  *error;
  gboolean                 done;      /* connected or failed */
  gboolean                 closed;
} Client;

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
  g_test_message ("got %.*s", (int) MIN (size, 200), data);
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

  client->conn = soup_session_websocket_connect_finish (SOUP_SESSION (object), result,
                                                        &client->error);
  if (client->conn != NULL)
    {
      g_signal_connect (client->conn, "message", G_CALLBACK (message_cb), client);
      g_signal_connect (client->conn, "closed", G_CALLBACK (closed_cb), client);
    }
  client->done = TRUE;
}

static gboolean
is_done (gpointer user_data)
{
  return ((Client *) user_data)->done;
}

static gboolean
is_closed (gpointer user_data)
{
  return ((Client *) user_data)->closed;
}

static Client *
client_new (const char *url)
{
  Client *client = g_new0 (Client, 1);
  g_autoptr(SoupMessage) msg = soup_message_new ("GET", url);

  client->session = soup_session_new ();
  client->messages = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  soup_session_websocket_connect_async (client->session, msg, NULL, NULL, G_PRIORITY_DEFAULT,
                                        NULL, connected_cb, client);
  g_assert_true (dc_test_wait_until (is_done, client, 10000));
  g_assert_no_error (client->error);
  return client;
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
  g_clear_error (&client->error);
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

/* Waits for message number @index (0-based); NULL when the connection
 * closed without it. */
static JsonObject *
client_wait (Client *client,
             guint   index)
{
  CountWait wait = { client, index + 1 };

  dc_test_wait_until (has_count, &wait, 10000);
  return client->messages->len > index ? g_ptr_array_index (client->messages, index) : NULL;
}

static JsonObject *
client_expect (Client     *client,
               guint       index,
               const char *type)
{
  JsonObject *object = client_wait (client, index);

  g_assert_nonnull (object);
  g_assert_cmpstr (json_object_get_string_member_with_default (object, "type", ""), ==, type);
  return object;
}

static void
expect_error_and_close (Client     *client,
                        guint       index,
                        const char *code)
{
  JsonObject *error = client_expect (client, index, "error");

  g_assert_cmpstr (json_object_get_string_member (error, "code"), ==, code);
  g_test_message ("refused: %s", json_object_get_string_member (error, "message"));
  g_assert_true (dc_test_wait_until (is_closed, client, 10000));
}

static void
client_join (Client     *client,
             const char *room,
             gboolean    create)
{
  g_autofree char *text = g_strdup_printf ("{\"type\":\"join\",\"room\":\"%s\",\"create\":%s}",
                                           room, create ? "true" : "false");

  soup_websocket_connection_send_text (client->conn, text);
}

static char *
start_signal (DcTestProc  **out,
              const char   *extra1,
              const char   *extra2,
              const char   *extra3,
              const char   *extra4)
{
  const char *args[] = { "signal", "--json", "--port", "0", "--bind", "127.0.0.1",
                         extra1, extra2, extra3, extra4, NULL };
  DcTestProc *proc = dc_test_proc_spawn ("signal", NULL, FALSE, args);
  JsonObject *listening = dc_test_proc_expect (proc, "listening", NULL, 10000);

  *out = proc;
  return g_strdup (json_object_get_string_member (listening, "url"));
}

static DcTestProc *
start_join (const char *url,
            const char *name,
            const char *room,
            const char *extra)
{
  const char *args[] = { "join", "--json", "--signal", url, "--room", room, "--name", name,
                         "--approve", "all", "--ice-address", "127.0.0.1", extra, NULL };

  return dc_test_proc_spawn (name, NULL, FALSE, args);
}

/* Opens a connection and joins @room until the service welcomes it: closing
 * a connection frees its place only once the service has seen the close,
 * which the client cannot observe directly. */
static Client *
join_when_admitted (const char *url,
                    const char *room,
                    gboolean    create)
{
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (g_get_monotonic_time () < deadline)
    {
      g_autoptr(Client) client = client_new (url);
      JsonObject *first;

      client_join (client, room, create);
      first = client_wait (client, 0);
      if (first != NULL
          && g_strcmp0 (json_object_get_string_member_with_default (first, "type", ""),
                        "welcome") == 0)
        return g_steal_pointer (&client);
      g_usleep (50 * 1000);
    }
  g_assert_not_reached ();
}

static char *
deep_text (const char *prefix,
           char        bracket)
{
  g_autofree char *brackets = g_strnfill (DEEP_LEVELS, bracket);

  return g_strconcat (prefix, brackets, NULL);
}

/* 200,000 nested brackets in one frame: the service answers with an error
 * frame, closes that connection, and goes on serving others. Before the
 * depth check the service process died of a stack overflow. */
static void
test_deep_frame (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = start_signal (&signal, NULL, NULL, NULL, NULL);
  const char *prefixes[] = { "", "{\"type\":\"join\",\"room\":" };
  const char brackets[] = { '[', '{' };

  for (guint i = 0; i < G_N_ELEMENTS (prefixes); i++)
    for (guint b = 0; b < G_N_ELEMENTS (brackets); b++)
      {
        g_autoptr(Client) attacker = client_new (url);
        g_autofree char *text = deep_text (prefixes[i], brackets[b]);

        soup_websocket_connection_send_text (attacker->conn, text);
        expect_error_and_close (attacker, 0, "limits");
      }
  /* Brackets inside a string are content, not nesting. */
  {
    g_autoptr(Client) client = client_new (url);
    g_autofree char *deep = g_strnfill (DEEP_LEVELS, '[');
    g_autofree char *text = g_strdup_printf ("{\"type\":\"join\",\"room\":\"%s\"}", deep);

    soup_websocket_connection_send_text (client->conn, text);
    expect_error_and_close (client, 0, "protocol");
  }

  g_assert_false (dc_test_proc_exited (signal));
  {
    g_autoptr(Client) normal = client_new (url);

    client_join (normal, ROOM_1, TRUE);
    client_expect (normal, 0, "welcome");
  }
}

/* A member of the room relays bodies nested 200,000 deep to the host device
 * through the real service. The device drops them (before checking their
 * signature), blocks the sender, and still admits the next device. Before
 * the depth check the device process died of a stack overflow. */
static void
test_deep_relay (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = start_signal (&signal, NULL, NULL, NULL, NULL);
  g_autoptr(DcRoom) room = dc_room_new ("ABUSE-TEST");
  g_autoptr(DcTestProc) host = NULL, late = NULL;
  g_autoptr(Client) attacker = NULL;
  const char *host_id;

  host = start_join (url, "host", "ABUSE-TEST", "--expect-peers=1");
  dc_test_proc_expect (host, "joined", NULL, 20000);

  attacker = client_new (url);
  client_join (attacker, room->room_id, FALSE);
  host_id = json_object_get_string_member (client_expect (attacker, 0, "welcome"), "host");
  for (guint i = 0; i < 5; i++)
    {
      g_autofree char *deep = g_strnfill (DEEP_LEVELS, i % 2 == 0 ? '[' : '{');
      g_autofree char *body = g_strdup_printf ("{\"kind\":\"request\",\"name\":%s", deep);
      g_autoptr(JsonObject) relay = json_object_new ();
      g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
      g_autofree char *text = NULL;

      json_object_set_string_member (relay, "type", "relay");
      json_object_set_string_member (relay, "to", host_id);
      json_object_set_string_member (relay, "body", i == 0 ? deep : body);
      json_node_set_object (node, relay);
      text = json_to_string (node, FALSE);
      g_assert_cmpuint (strlen (text), <, 256 * 1024);
      soup_websocket_connection_send_text (attacker->conn, text);
    }

  late = start_join (url, "late", "ABUSE-TEST", "--no-create");
  dc_test_proc_expect (late, "approved", NULL, 30000);
  dc_test_proc_expect (host, "peer-joined", "late", 30000);
  g_assert_false (dc_test_proc_exited (host));
  g_assert_false (dc_test_proc_exited (signal));
  /* The service only forwarded them: the attacker is still connected. */
  g_assert_false (attacker->closed);
}

/* Per-address caps over loopback: the connection, room and waiting-join
 * over each cap is refused with a clear error frame; closing frees the place. */
static void
test_caps (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = start_signal (&signal, "--max-connections-per-address=4",
                                       "--max-rooms-per-address=1",
                                       "--max-pending-per-address=1", "--join-timeout=0");
  Client *clients[4] = { NULL, };
  g_autoptr(Client) extra = NULL, again = NULL, extra_again = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    clients[i] = client_new (url);
  extra = client_new (url);
  expect_error_and_close (extra, 0, "too-many");
  g_assert_nonnull (strstr (json_object_get_string_member (g_ptr_array_index (extra->messages,
                                                                               0), "message"),
                            "connections"));

  /* One room per address: the second is refused. */
  client_join (clients[0], ROOM_1, TRUE);
  client_expect (clients[0], 0, "welcome");
  client_join (clients[1], ROOM_2, TRUE);
  expect_error_and_close (clients[1], 0, "too-many");

  /* One waiting join per address: the second is refused. */
  client_join (clients[2], ROOM_1, FALSE);
  client_expect (clients[2], 0, "welcome");
  client_join (clients[3], ROOM_1, FALSE);
  expect_error_and_close (clients[3], 0, "too-many");

  /* Once the waiting one leaves, a new connection may wait in its place;
   * with four connections open again (refused ones do not count), a fifth
   * is refused again. */
  g_clear_pointer (&clients[2], client_free);
  again = join_when_admitted (url, ROOM_1, FALSE);
  g_clear_pointer (&clients[1], client_free);
  g_clear_pointer (&clients[3], client_free);
  clients[1] = client_new (url);
  clients[2] = client_new (url);
  extra_again = client_new (url);
  expect_error_and_close (extra_again, 0, "too-many");
  g_assert_false (clients[0]->closed);
  g_assert_false (again->closed);
  for (guint i = 0; i < G_N_ELEMENTS (clients); i++)
    g_clear_pointer (&clients[i], client_free);
  g_assert_false (dc_test_proc_exited (signal));
}

/* A connection that never joins is closed after --join-timeout. */
static void
test_idle (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = start_signal (&signal, "--join-timeout=1", NULL, NULL, NULL);
  g_autoptr(Client) idle = client_new (url);
  g_autoptr(Client) normal = NULL;

  expect_error_and_close (idle, 0, "timeout");
  normal = client_new (url);
  client_join (normal, ROOM_1, TRUE);
  client_expect (normal, 0, "welcome");
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/mesh/abuse/deep-frame", test_deep_frame);
  g_test_add_func ("/dc/mesh/abuse/deep-relay", test_deep_relay);
  g_test_add_func ("/dc/mesh/abuse/caps", test_caps);
  g_test_add_func ("/dc/mesh/abuse/idle", test_idle);

  return g_test_run ();
}
