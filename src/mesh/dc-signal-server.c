/* dc-signal-server.c: the signaling service.
 *
 * JSON text messages over a WebSocket at /signal (docs/PROTOCOL.md,
 * "Signaling"). The service keeps, per room id, the members in the order they
 * arrived, which of them the host has admitted, and who the host is. It
 * forwards a relay only between two members of the same room and never
 * parses its body. Every client message is untrusted: sizes are capped by
 * libsoup, size and nesting again before json-glib parses (dc-json-bounds.h),
 * and malformed messages close the connection. Connections that never join
 * are closed after a timeout, and each remote address may hold only so many
 * connections, rooms and waiting joins (DcSignalLimits).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-signal-server.h"

#include <string.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "dc-json-bounds.h"
#include "dc-mesh-error.h"
#include "dc-room.h"
#include "dc-regular-file.h"

#define MAX_MESSAGE_SIZE  DC_JSON_SIGNAL_MAX_BYTES
#define MAX_MEMBERS       64
#define MAX_ROOMS         1024
/* Stays under the default limit of 1024 open files per process. */
#define MAX_CONNECTIONS   1000
/* A PEM certificate chain or key file is a few KiB; 1 MiB is room for long chains. */
#define MAX_PEM_FILE      (1024 * 1024)

typedef struct _Room Room;

typedef struct
{
  DcSignalServer          *server;   /* borrowed: it owns the member */
  SoupWebsocketConnection *conn;
  char                    *id;
  char                    *address;  /* the remote IP address, as text */
  Room                    *room;     /* borrowed, NULL before join */
  guint                    join_timeout_id;
  guint                    admitted : 1;
  guint                    refused : 1;  /* over a cap: being closed, not counted */
} Member;

struct _Room
{
  char      *id;
  GPtrArray *members;   /* Member*, borrowed, in order of arrival */
  Member    *host;
  char      *creator_address;  /* counts against this address's rooms */
};

struct _DcSignalServer
{
  GObject     parent_instance;

  /* owned */
  SoupServer *soup;
  GHashTable *rooms;     /* room id → Room* */
  GPtrArray  *members;   /* Member*, owned */
  DcSignalLimits limits;
  guint       port;
  guint       tls : 1;
};

G_DEFINE_FINAL_TYPE (DcSignalServer, dc_signal_server, G_TYPE_OBJECT)

static void
room_free (Room *room)
{
  g_ptr_array_unref (room->members);
  g_free (room->creator_address);
  g_free (room->id);
  g_free (room);
}

static void
member_free (Member *member)
{
  g_clear_handle_id (&member->join_timeout_id, g_source_remove);
  if (member->conn != NULL)
    {
      g_signal_handlers_disconnect_by_data (member->conn, member);
      if (soup_websocket_connection_get_state (member->conn) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close (member->conn, SOUP_WEBSOCKET_CLOSE_GOING_AWAY, NULL);
      g_object_unref (member->conn);
    }
  g_free (member->id);
  g_free (member->address);
  g_free (member);
}

static void
send_json (Member      *member,
           JsonBuilder *builder)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = json_builder_get_root (builder);
  g_autofree char *text = NULL;

  if (soup_websocket_connection_get_state (member->conn) != SOUP_WEBSOCKET_STATE_OPEN)
    return;
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  soup_websocket_connection_send_text (member->conn, text);
}

static void
send_simple (Member     *member,
             const char *type,
             const char *key,
             const char *value)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, type);
  if (key != NULL)
    {
      json_builder_set_member_name (builder, key);
      json_builder_add_string_value (builder, value);
    }
  json_builder_end_object (builder);
  send_json (member, builder);
}

static void
send_error_and_close (Member     *member,
                      const char *code,
                      const char *message)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "error");
  json_builder_set_member_name (builder, "code");
  json_builder_add_string_value (builder, code);
  json_builder_set_member_name (builder, "message");
  json_builder_add_string_value (builder, message);
  json_builder_end_object (builder);
  send_json (member, builder);
  if (soup_websocket_connection_get_state (member->conn) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (member->conn, SOUP_WEBSOCKET_CLOSE_POLICY_VIOLATION, code);
}

static Member *
room_find (Room       *room,
           const char *id)
{
  for (guint i = 0; i < room->members->len; i++)
    {
      Member *m = g_ptr_array_index (room->members, i);

      if (g_str_equal (m->id, id))
        return m;
    }
  return NULL;
}

/* A member leaves its room: tell the others; a host hands over to the
 * longest-admitted member, and a room with no admitted member left closes,
 * telling those still waiting for approval. */
static void
leave_room (Member *member)
{
  DcSignalServer *self = member->server;
  Room *room = member->room;
  gboolean host_changed = FALSE;

  if (room == NULL)
    return;
  member->room = NULL;
  g_ptr_array_remove (room->members, member);

  if (room->host == member)
    {
      room->host = NULL;
      host_changed = TRUE;
      for (guint i = 0; i < room->members->len && room->host == NULL; i++)
        {
          Member *m = g_ptr_array_index (room->members, i);

          if (m->admitted)
            room->host = m;
        }
      if (room->host == NULL)
        {
          g_autoptr(GPtrArray) waiting = g_ptr_array_copy (room->members, NULL, NULL);

          g_debug ("room %.8s… closes: its host left and nobody was admitted", room->id);
          for (guint i = 0; i < waiting->len; i++)
            {
              Member *m = g_ptr_array_index (waiting, i);

              m->room = NULL;
              send_error_and_close (m, "host-left",
                                    "The room's host left before approving this device");
            }
          g_hash_table_remove (self->rooms, room->id);
          return;
        }
    }

  for (guint i = 0; i < room->members->len; i++)
    {
      Member *m = g_ptr_array_index (room->members, i);

      send_simple (m, "left", "id", member->id);
      if (host_changed)
        send_simple (m, "host", "id", room->host->id);
    }
  if (room->members->len == 0)
    g_hash_table_remove (self->rooms, room->id);
}

/* What @address holds now; refused connections, on their way out, do not count.
 * At most MAX_CONNECTIONS members, so a scan costs little next to a handshake. */
static guint
count_connections (DcSignalServer *self,
                   const char     *address)
{
  guint n = 0;

  for (guint i = 0; i < self->members->len; i++)
    {
      Member *m = g_ptr_array_index (self->members, i);

      n += !m->refused && g_str_equal (m->address, address);
    }
  return n;
}

static guint
count_pending (DcSignalServer *self,
               const char     *address)
{
  guint n = 0;

  for (guint i = 0; i < self->members->len; i++)
    {
      Member *m = g_ptr_array_index (self->members, i);

      n += !m->refused && m->room != NULL && !m->admitted && g_str_equal (m->address, address);
    }
  return n;
}

static guint
count_rooms (DcSignalServer *self,
             const char     *address)
{
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->rooms);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    n += g_str_equal (((Room *) value)->creator_address, address);
  return n;
}

static void
refuse_over_cap (Member     *member,
                 const char *what,
                 guint       cap)
{
  g_autofree char *text = g_strdup_printf ("Too many %s from this address (the limit is %u)",
                                           what, cap);

  g_message ("signaling: %s refused: %s has reached the limit of %u %s", member->id,
             member->address, cap, what);
  member->refused = TRUE;
  send_error_and_close (member, "too-many", text);
}

static gboolean
is_room_id (const char *text)
{
  if (text == NULL || strlen (text) != 64)
    return FALSE;
  for (guint i = 0; i < 64; i++)
    if (!g_ascii_isxdigit (text[i]))
      return FALSE;
  return TRUE;
}

static void
handle_join (Member     *member,
             JsonObject *object)
{
  DcSignalServer *self = member->server;
  const char *room_id = json_object_get_string_member_with_default (object, "room", NULL);
  gboolean create = json_object_get_boolean_member_with_default (object, "create", TRUE);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  Room *room;

  if (member->room != NULL || !is_room_id (room_id))
    {
      send_error_and_close (member, "protocol", "join needs a 64-digit hex room id, once");
      return;
    }
  room = g_hash_table_lookup (self->rooms, room_id);
  if (room == NULL)
    {
      if (!create)
        {
          send_error_and_close (member, "no-room", "No room has this code");
          return;
        }
      if (g_hash_table_size (self->rooms) >= MAX_ROOMS)
        {
          send_error_and_close (member, "full", "The signaling service has too many rooms");
          return;
        }
      if (count_rooms (self, member->address) >= self->limits.max_rooms_per_address)
        {
          refuse_over_cap (member, "rooms", self->limits.max_rooms_per_address);
          return;
        }
      room = g_new0 (Room, 1);
      room->id = g_strdup (room_id);
      room->creator_address = g_strdup (member->address);
      room->members = g_ptr_array_new ();
      g_hash_table_insert (self->rooms, room->id, room);
      room->host = member;
      member->admitted = TRUE;
    }
  else if (room->members->len >= MAX_MEMBERS)
    {
      send_error_and_close (member, "full", "The room is full");
      return;
    }
  else if (count_pending (self, member->address) >= self->limits.max_pending_per_address)
    {
      refuse_over_cap (member, "waiting join requests", self->limits.max_pending_per_address);
      return;
    }
  g_ptr_array_add (room->members, member);
  member->room = room;
  g_clear_handle_id (&member->join_timeout_id, g_source_remove);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "welcome");
  json_builder_set_member_name (builder, "id");
  json_builder_add_string_value (builder, member->id);
  json_builder_set_member_name (builder, "host");
  json_builder_add_string_value (builder, room->host->id);
  /* Shown on the device's own screen, to compare with the host's dialog. */
  json_builder_set_member_name (builder, "address");
  json_builder_add_string_value (builder, member->address);
  json_builder_end_object (builder);
  send_json (member, builder);
}

static void
handle_relay (Member     *member,
              JsonObject *object)
{
  const char *to = json_object_get_string_member_with_default (object, "to", NULL);
  const char *body = json_object_get_string_member_with_default (object, "body", NULL);
  const char *mac = json_object_get_string_member_with_default (object, "mac", NULL);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  Member *target;

  if (member->room == NULL || to == NULL || body == NULL)
    {
      send_error_and_close (member, "protocol", "relay needs a room, “to” and “body”");
      return;
    }
  target = room_find (member->room, to);
  if (target == NULL)
    return;  /* It left meanwhile; the sender learns from the "left" message. */

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "type");
  json_builder_add_string_value (builder, "relay");
  json_builder_set_member_name (builder, "from");
  json_builder_add_string_value (builder, member->id);
  json_builder_set_member_name (builder, "to");
  json_builder_add_string_value (builder, to);
  json_builder_set_member_name (builder, "body");
  json_builder_add_string_value (builder, body);
  if (mac != NULL)
    {
      json_builder_set_member_name (builder, "mac");
      json_builder_add_string_value (builder, mac);
    }
  /* The sender's address as seen here, for the host's approval dialog. */
  json_builder_set_member_name (builder, "address");
  json_builder_add_string_value (builder, member->address);
  json_builder_end_object (builder);
  send_json (target, builder);
}

static void
handle_admit (Member     *member,
              JsonObject *object)
{
  const char *id = json_object_get_string_member_with_default (object, "id", NULL);
  Member *target;

  /* Only the host admits; the flag only decides who may inherit the room. */
  if (member->room == NULL || member->room->host != member || id == NULL)
    return;
  target = room_find (member->room, id);
  if (target != NULL)
    target->admitted = TRUE;
}

static void
message_cb (SoupWebsocketConnection *conn,
            gint                     type,
            GBytes                  *message,
            gpointer                 user_data)
{
  Member *member = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  gsize size;
  const char *data = g_bytes_get_data (message, &size);
  JsonObject *object;
  const char *kind;

  if (member->refused)
    return;
  if (type == SOUP_WEBSOCKET_DATA_TEXT)
    root = dc_json_parse_bounded (data, (gssize) size, DC_JSON_SIGNAL_MAX_BYTES,
                                  DC_JSON_SIGNAL_MAX_DEPTH, &error);
  /* Any bad frame closes the connection at once (a "keeps doing it" count of
   * one): a well-behaved device never sends one. */
  if (g_error_matches (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_DEEP)
      || g_error_matches (error, DC_JSON_ERROR, DC_JSON_ERROR_TOO_LARGE))
    {
      g_autofree char *text = g_strdup_printf ("Message over the service's limits: %s",
                                               error->message);

      g_message ("signaling: message from %s (%s) over the limits, closing: %s", member->id,
                 member->address, error->message);
      send_error_and_close (member, "limits", text);
      return;
    }
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_message ("signaling: malformed message from %s (%s), closing", member->id,
                 member->address);
      send_error_and_close (member, "protocol", "Messages are JSON objects");
      return;
    }
  object = json_node_get_object (root);
  kind = json_object_get_string_member_with_default (object, "type", "");
  if (g_str_equal (kind, "join"))
    handle_join (member, object);
  else if (g_str_equal (kind, "relay"))
    handle_relay (member, object);
  else if (g_str_equal (kind, "admit"))
    handle_admit (member, object);
  else
    send_error_and_close (member, "protocol", "Unknown message type");
}

static void
closed_cb (SoupWebsocketConnection *conn,
           gpointer                 user_data)
{
  Member *member = user_data;
  DcSignalServer *self = member->server;

  leave_room (member);
  g_ptr_array_remove (self->members, member);
}

static gboolean
join_timeout_cb (gpointer user_data)
{
  Member *member = user_data;
  g_autofree char *text = NULL;

  member->join_timeout_id = 0;
  if (member->room != NULL)
    return G_SOURCE_REMOVE;
  g_message ("signaling: %s (%s) sent no join within %u s, closing", member->id,
             member->address, member->server->limits.join_timeout_s);
  text = g_strdup_printf ("No join within %u seconds", member->server->limits.join_timeout_s);
  send_error_and_close (member, "timeout", text);
  return G_SOURCE_REMOVE;
}

static void
websocket_cb (SoupServer              *soup,
              SoupServerMessage       *msg,
              const char              *path,
              SoupWebsocketConnection *conn,
              gpointer                 user_data)
{
  DcSignalServer *self = user_data;
  Member *member = g_new0 (Member, 1);
  const char *address = soup_server_message_get_remote_host (msg);

  member->server = self;
  member->conn = g_object_ref (conn);
  member->id = dc_room_random_hex (8);
  member->address = g_strdup (address != NULL ? address : "unknown");
  soup_websocket_connection_set_max_incoming_payload_size (conn, MAX_MESSAGE_SIZE);
  /* Keepalive pings let the service notice vanished clients behind NATs. */
  soup_websocket_connection_set_keepalive_interval (conn, 15);
  g_signal_connect (conn, "message", G_CALLBACK (message_cb), member);
  g_signal_connect (conn, "closed", G_CALLBACK (closed_cb), member);

  /* Counted before it is added: the caps say how many may be open at once. */
  if (self->members->len >= MAX_CONNECTIONS)
    {
      g_ptr_array_add (self->members, member);
      g_message ("signaling: %s (%s) refused: the service has %u connections", member->id,
                 member->address, MAX_CONNECTIONS);
      member->refused = TRUE;
      send_error_and_close (member, "busy", "The signaling service has too many connections");
      return;
    }
  if (count_connections (self, member->address) >= self->limits.max_connections_per_address)
    {
      g_ptr_array_add (self->members, member);
      refuse_over_cap (member, "connections", self->limits.max_connections_per_address);
      return;
    }
  g_ptr_array_add (self->members, member);
  if (self->limits.join_timeout_s > 0)
    member->join_timeout_id = g_timeout_add_seconds (self->limits.join_timeout_s,
                                                     join_timeout_cb, member);
}

static void
dc_signal_server_dispose (GObject *object)
{
  DcSignalServer *self = DC_SIGNAL_SERVER (object);

  if (self->soup != NULL)
    soup_server_disconnect (self->soup);
  g_clear_object (&self->soup);
  /* Rooms only borrow members; drop them first. */
  g_hash_table_remove_all (self->rooms);
  g_ptr_array_set_size (self->members, 0);

  G_OBJECT_CLASS (dc_signal_server_parent_class)->dispose (object);
}

static void
dc_signal_server_finalize (GObject *object)
{
  DcSignalServer *self = DC_SIGNAL_SERVER (object);

  g_hash_table_unref (self->rooms);
  g_ptr_array_unref (self->members);

  G_OBJECT_CLASS (dc_signal_server_parent_class)->finalize (object);
}

static void
dc_signal_server_class_init (DcSignalServerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_signal_server_dispose;
  object_class->finalize = dc_signal_server_finalize;
}

static void
dc_signal_server_init (DcSignalServer *self)
{
  self->rooms = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) room_free);
  self->members = g_ptr_array_new_with_free_func ((GDestroyNotify) member_free);
  dc_signal_limits_init_default (&self->limits);
}

void
dc_signal_limits_init_default (DcSignalLimits *limits)
{
  limits->join_timeout_s = DC_SIGNAL_DEFAULT_JOIN_TIMEOUT_S;
  limits->max_connections_per_address = DC_SIGNAL_DEFAULT_MAX_CONNECTIONS;
  limits->max_rooms_per_address = DC_SIGNAL_DEFAULT_MAX_ROOMS;
  limits->max_pending_per_address = DC_SIGNAL_DEFAULT_MAX_PENDING;
}

/**
 * dc_signal_server_set_limits:
 *
 * Applies to connections and joins from now on; call it before listening.
 */
void
dc_signal_server_set_limits (DcSignalServer       *self,
                             const DcSignalLimits *limits)
{
  g_return_if_fail (DC_IS_SIGNAL_SERVER (self));
  g_return_if_fail (limits != NULL);
  self->limits = *limits;
}

DcSignalServer *
dc_signal_server_new (void)
{
  return g_object_new (DC_TYPE_SIGNAL_SERVER, NULL);
}

/**
 * dc_signal_server_listen:
 * @address: (nullable): the address to bind, or %NULL for all interfaces
 * @port: the TCP port, or 0 for any free one
 * @tls_cert_file: (nullable): PEM certificate; with @tls_key_file, serve wss://
 *
 * Starts serving on the thread-default main context.
 */
gboolean
dc_signal_server_listen (DcSignalServer  *self,
                         const char      *address,
                         guint            port,
                         const char      *tls_cert_file,
                         const char      *tls_key_file,
                         GError         **error)
{
  g_autoptr(GSList) uris = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  SoupServerListenOptions options = 0;

  g_return_val_if_fail (DC_IS_SIGNAL_SERVER (self), FALSE);
  g_return_val_if_fail (self->soup == NULL, FALSE);

  self->soup = soup_server_new ("server-header", "daisychain-signal ", NULL);
  if ((tls_cert_file == NULL) != (tls_key_file == NULL))
    {
      g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_SIGNALING,
                           "TLS needs both a certificate and a key file");
      return FALSE;
    }
  if (tls_cert_file != NULL)
    {
      g_autoptr(GTlsCertificate) cert = NULL;
      g_autofree char *cert_pem = NULL, *key_pem = NULL, *pem = NULL;

      /* Read here, regular files only: GTlsCertificate's own open () of a
       * FIFO would block the server's start for ever. */
      if (dc_regular_file_get_contents (tls_cert_file, MAX_PEM_FILE, &cert_pem, NULL, error)
          && dc_regular_file_get_contents (tls_key_file, MAX_PEM_FILE, &key_pem, NULL, error))
        {
          pem = g_strconcat (cert_pem, "\n", key_pem, NULL);
          cert = g_tls_certificate_new_from_pem (pem, -1, error);
        }
      if (cert == NULL)
        {
          g_prefix_error (error, "Cannot load the TLS certificate: ");
          return FALSE;
        }
      soup_server_set_tls_certificate (self->soup, cert);
      options |= SOUP_SERVER_LISTEN_HTTPS;
      self->tls = TRUE;
    }
  soup_server_add_websocket_handler (self->soup, "/signal", NULL, NULL, websocket_cb, self, NULL);

  if (address != NULL)
    {
      g_autoptr(GInetAddress) inet = g_inet_address_new_from_string (address);

      if (inet == NULL)
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_SIGNALING,
                       "“%s” is not an IP address", address);
          return FALSE;
        }
      socket_address = g_inet_socket_address_new (inet, port);
      if (!soup_server_listen (self->soup, socket_address, options, error))
        return FALSE;
    }
  else if (!soup_server_listen_all (self->soup, port, options, error))
    {
      return FALSE;
    }

  uris = soup_server_get_uris (self->soup);
  if (uris != NULL)
    self->port = g_uri_get_port (uris->data);
  g_slist_free_full (g_steal_pointer (&uris), (GDestroyNotify) g_uri_unref);
  return TRUE;
}

guint
dc_signal_server_get_port (DcSignalServer *self)
{
  g_return_val_if_fail (DC_IS_SIGNAL_SERVER (self), 0);
  return self->port;
}

guint
dc_signal_server_get_n_rooms (DcSignalServer *self)
{
  g_return_val_if_fail (DC_IS_SIGNAL_SERVER (self), 0);
  return g_hash_table_size (self->rooms);
}

/**
 * dc_signal_server_dup_url:
 *
 * Returns: (transfer full) (nullable): the first URL the service answers on,
 *   as ws:// or wss:// with the /signal path
 */
char *
dc_signal_server_dup_url (DcSignalServer *self)
{
  GSList *uris;
  char *url = NULL;

  g_return_val_if_fail (DC_IS_SIGNAL_SERVER (self), NULL);
  if (self->soup == NULL)
    return NULL;
  uris = soup_server_get_uris (self->soup);
  if (uris != NULL)
    url = g_strdup_printf ("%s://%s:%d/signal", self->tls ? "wss" : "ws",
                           g_uri_get_host (uris->data), g_uri_get_port (uris->data));
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  return url;
}
