/* dc-signaling.c: the device side of the signaling service.
 *
 * Relayed bodies are JSON text signed with the room key over the room id,
 * sender, recipient and body, and carry a sequence number that must grow per
 * sender, so the service can neither forge nor replay them. A body whose
 * signature fails is reported through ::refused, never acted on as a request.
 *
 * Frames and bodies are checked for size and nesting (dc-json-bounds.h)
 * before json-glib parses them. A relay sender whose bodies keep failing
 * that check or parsing is blocked for the rest of the session; a service
 * that keeps sending such frames is disconnected.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-signaling.h"

#include <string.h>
#include <libsoup/soup.h>

#include "dc-json-bounds.h"
#include "dc-mesh-error.h"

#define MAX_MESSAGE_SIZE DC_JSON_SIGNAL_MAX_BYTES
/* One bad body may be a bug or a truncation; three in a row from one sender
 * is someone probing, and nothing it sends is worth parsing any more. */
#define MAX_BAD_RELAYS   3
/* The same for the service's own frames; a real service never sends one. */
#define MAX_BAD_FRAMES   3

struct _DcSignaling
{
  GObject                  parent_instance;

  /* owned */
  SoupSession             *session;
  SoupWebsocketConnection *conn;
  GCancellable            *cancellable;
  DcRoom                  *room;
  GHashTable              *last_seq;   /* sender id → gint64 last sequence seen */
  GHashTable              *bad_relays; /* sender id → bad bodies so far (GUINT_TO_POINTER) */
  GHashTable              *addresses;  /* sender id → its address, as the service says */

  /* state */
  char                    *url;
  char                    *id;
  char                    *host_id;
  char                    *address;    /* ours, as the service sees it */
  gint64                   seq;
  guint                    bad_frames;
  gboolean                 create;
};

G_DEFINE_FINAL_TYPE (DcSignaling, dc_signaling, G_TYPE_OBJECT)

enum {
  SIGNAL_WELCOME,
  SIGNAL_MESSAGE,
  SIGNAL_REFUSED,
  SIGNAL_HOST_CHANGED,
  SIGNAL_MEMBER_LEFT,
  SIGNAL_FAILED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
fail (DcSignaling *self,
      GError      *error)
{
  g_cancellable_cancel (self->cancellable);
  g_signal_emit (self, signals[SIGNAL_FAILED], 0, error);
}

static void
send_object (DcSignaling *self,
             JsonObject  *object)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *text = NULL;

  if (self->conn == NULL
      || soup_websocket_connection_get_state (self->conn) != SOUP_WEBSOCKET_STATE_OPEN)
    return;
  json_node_set_object (node, object);
  text = json_to_string (node, FALSE);
  soup_websocket_connection_send_text (self->conn, text);
}

static void
handle_relay (DcSignaling *self,
              JsonObject  *object)
{
  const char *from = json_object_get_string_member_with_default (object, "from", NULL);
  const char *to = json_object_get_string_member_with_default (object, "to", NULL);
  const char *body = json_object_get_string_member_with_default (object, "body", NULL);
  const char *mac = json_object_get_string_member_with_default (object, "mac", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  const char *address = json_object_get_string_member_with_default (object, "address", NULL);
  JsonObject *body_object;
  gint64 seq, last = -1;
  gpointer stored;
  guint bad;

  if (from == NULL || body == NULL || to == NULL || self->id == NULL
      || !g_str_equal (to, self->id))
    return;
  bad = GPOINTER_TO_UINT (g_hash_table_lookup (self->bad_relays, from));
  if (bad >= MAX_BAD_RELAYS)
    return;  /* Blocked: logged once, when it happened. */
  root = dc_json_parse_bounded (body, -1, DC_JSON_RELAY_MAX_BYTES, DC_JSON_RELAY_MAX_DEPTH,
                                &error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      if (error != NULL)
        g_message ("signaling: relay from %s dropped (limits: %d bytes, depth %d): %s", from,
                   DC_JSON_RELAY_MAX_BYTES, DC_JSON_RELAY_MAX_DEPTH, error->message);
      else
        g_message ("signaling: unreadable relay from %s ignored", from);
      g_hash_table_insert (self->bad_relays, g_strdup (from), GUINT_TO_POINTER (++bad));
      if (bad >= MAX_BAD_RELAYS)
        g_message ("signaling: %s sent %u bad relays; ignoring it from now on", from, bad);
      return;
    }
  body_object = json_node_get_object (root);
  if (!dc_room_verify (self->room, from, to, body, mac))
    {
      g_message ("signaling: relay from %s fails room authentication", from);
      g_signal_emit (self, signals[SIGNAL_REFUSED], 0, from, body_object);
      return;
    }
  seq = json_object_get_int_member_with_default (body_object, "seq", -1);
  if (g_hash_table_lookup_extended (self->last_seq, from, NULL, &stored))
    last = *(gint64 *) stored;
  if (seq <= last)
    {
      g_message ("signaling: replayed relay from %s ignored (seq %" G_GINT64_FORMAT ")",
                 from, seq);
      return;
    }
  g_hash_table_insert (self->last_seq, g_strdup (from), g_memdup2 (&seq, sizeof seq));
  /* One entry per sender seen; 64 bytes hold any textual IP address
   * (IPv6 with a zone needs at most 45 plus the zone). */
  if (address != NULL && g_utf8_validate (address, -1, NULL) && strlen (address) <= 64)
    g_hash_table_insert (self->addresses, g_strdup (from), g_strdup (address));
  g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, from, body_object);
}

static void
message_cb (SoupWebsocketConnection *conn,
            gint                     type,
            GBytes                  *message,
            gpointer                 user_data)
{
  DcSignaling *self = user_data;
  g_autoptr(GError) parse_error = NULL;
  g_autoptr(JsonNode) root = NULL;
  gsize size;
  const char *data = g_bytes_get_data (message, &size);
  JsonObject *object;
  const char *kind;

  if (type == SOUP_WEBSOCKET_DATA_TEXT)
    root = dc_json_parse_bounded (data, (gssize) size, DC_JSON_SIGNAL_MAX_BYTES,
                                  DC_JSON_SIGNAL_MAX_DEPTH, &parse_error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      if (parse_error != NULL)
        g_message ("signaling: message from the service at %s dropped "
                   "(limits: %d bytes, depth %d): %s", self->url, DC_JSON_SIGNAL_MAX_BYTES,
                   DC_JSON_SIGNAL_MAX_DEPTH, parse_error->message);
      else
        g_message ("signaling: malformed message from the service ignored");
      if (++self->bad_frames >= MAX_BAD_FRAMES)
        {
          g_autoptr(GError) failure = NULL;

          failure = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_SIGNALING,
                                 "The signaling service at %s sent %u malformed messages; "
                                 "disconnected", self->url, self->bad_frames);
          dc_signaling_close (self);
          fail (self, failure);
        }
      return;
    }
  object = json_node_get_object (root);
  kind = json_object_get_string_member_with_default (object, "type", "");

  if (g_str_equal (kind, "welcome"))
    {
      const char *id = json_object_get_string_member_with_default (object, "id", NULL);
      const char *host = json_object_get_string_member_with_default (object, "host", NULL);
      const char *address = json_object_get_string_member_with_default (object, "address",
                                                                        NULL);

      if (id == NULL || host == NULL || self->id != NULL)
        return;
      if (address != NULL && g_utf8_validate (address, -1, NULL) && strlen (address) <= 64)
        self->address = g_strdup (address);
      self->id = g_strdup (id);
      self->host_id = g_strdup (host);
      g_signal_emit (self, signals[SIGNAL_WELCOME], 0, self->id, self->host_id);
    }
  else if (g_str_equal (kind, "relay"))
    {
      handle_relay (self, object);
    }
  else if (g_str_equal (kind, "host"))
    {
      const char *id = json_object_get_string_member_with_default (object, "id", NULL);

      if (id == NULL || g_strcmp0 (id, self->host_id) == 0)
        return;
      g_free (self->host_id);
      self->host_id = g_strdup (id);
      g_signal_emit (self, signals[SIGNAL_HOST_CHANGED], 0, id);
    }
  else if (g_str_equal (kind, "left"))
    {
      const char *id = json_object_get_string_member_with_default (object, "id", NULL);

      if (id != NULL)
        g_signal_emit (self, signals[SIGNAL_MEMBER_LEFT], 0, id);
    }
  else if (g_str_equal (kind, "error"))
    {
      const char *code = json_object_get_string_member_with_default (object, "code", "");
      const char *text = json_object_get_string_member_with_default (object, "message", "");
      g_autoptr(GError) error = NULL;

      error = g_error_new (DC_MESH_ERROR,
                           g_str_equal (code, "no-room") ? DC_MESH_ERROR_NO_ROOM
                           : DC_MESH_ERROR_SIGNALING,
                           "The signaling service refused: %s (%s)", text, code);
      fail (self, error);
    }
}

static void
closed_cb (SoupWebsocketConnection *conn,
           gpointer                 user_data)
{
  DcSignaling *self = user_data;
  g_autoptr(GError) error = NULL;

  if (g_cancellable_is_cancelled (self->cancellable))
    return;
  error = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_SIGNALING,
                       "The signaling service at %s closed the connection", self->url);
  fail (self, error);
}

static void
connect_cb (GObject      *object,
            GAsyncResult *result,
            gpointer      user_data)
{
  g_autoptr(DcSignaling) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) join = json_object_new ();
  SoupWebsocketConnection *conn;

  conn = soup_session_websocket_connect_finish (SOUP_SESSION (object), result, &error);
  if (conn == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_prefix_error (&error, "Cannot reach the signaling service at %s: ", self->url);
          fail (self, error);
        }
      return;
    }
  self->conn = conn;
  soup_websocket_connection_set_max_incoming_payload_size (conn, MAX_MESSAGE_SIZE);
  soup_websocket_connection_set_keepalive_interval (conn, 15);
  g_signal_connect_object (conn, "message", G_CALLBACK (message_cb), self, 0);
  g_signal_connect_object (conn, "closed", G_CALLBACK (closed_cb), self, 0);

  json_object_set_string_member (join, "type", "join");
  json_object_set_string_member (join, "room", self->room->room_id);
  json_object_set_boolean_member (join, "create", self->create);
  send_object (self, join);
}

/**
 * dc_signaling_new:
 * @room: the room; its code stays on this device
 * @room_id_override: (nullable): for tests only: present this room id with
 *   @room's key, as a device that learned the id but not the code would
 */
DcSignaling *
dc_signaling_new (const char   *url,
                  const DcRoom *room,
                  const char   *room_id_override)
{
  DcSignaling *self = g_object_new (DC_TYPE_SIGNALING, NULL);

  self->url = g_strdup (url);
  self->room = dc_room_new (room->code);
  if (room_id_override != NULL)
    {
      g_free (self->room->room_id);
      self->room->room_id = g_strdup (room_id_override);
    }
  return self;
}

void
dc_signaling_connect (DcSignaling *self,
                      gboolean     create)
{
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GUri) uri = NULL;

  g_return_if_fail (DC_IS_SIGNALING (self));

  self->create = create;
  uri = g_uri_parse (self->url, SOUP_HTTP_URI_FLAGS, &error);
  if (uri == NULL
      || (g_strcmp0 (g_uri_get_scheme (uri), "ws") != 0
          && g_strcmp0 (g_uri_get_scheme (uri), "wss") != 0))
    {
      g_autoptr(GError) bad = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_SIGNALING,
                                           "“%s” is not a ws:// or wss:// URL", self->url);
      fail (self, bad);
      return;
    }
  msg = soup_message_new_from_uri ("GET", uri);
  soup_session_websocket_connect_async (self->session, msg, NULL, NULL, G_PRIORITY_DEFAULT,
                                        self->cancellable, connect_cb, g_object_ref (self));
}

void
dc_signaling_close (DcSignaling *self)
{
  g_return_if_fail (DC_IS_SIGNALING (self));

  g_cancellable_cancel (self->cancellable);
  if (self->conn != NULL
      && soup_websocket_connection_get_state (self->conn) == SOUP_WEBSOCKET_STATE_OPEN)
    soup_websocket_connection_close (self->conn, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
}

const char *
dc_signaling_get_id (DcSignaling *self)
{
  return self->id;
}

const char *
dc_signaling_get_host_id (DcSignaling *self)
{
  return self->host_id;
}

gboolean
dc_signaling_is_host (DcSignaling *self)
{
  return self->id != NULL && g_strcmp0 (self->id, self->host_id) == 0;
}

/**
 * dc_signaling_get_address:
 *
 * Returns: (nullable): this device's address as the service reported it in
 *   its welcome (a service in another network sees a NAT's address)
 */
const char *
dc_signaling_get_address (DcSignaling *self)
{
  return self->address;
}

/**
 * dc_signaling_get_peer_address:
 * @id: a member id
 *
 * Returns: (nullable): the address the service gave with @id's latest
 *   authenticated relay; as trustworthy as the service (exact when this
 *   device serves it, as the first device of a LAN group does)
 */
const char *
dc_signaling_get_peer_address (DcSignaling *self,
                               const char  *id)
{
  return g_hash_table_lookup (self->addresses, id);
}

static void
send_relay (DcSignaling *self,
            const char  *to,
            JsonObject  *body)
{
  g_autoptr(JsonObject) relay = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *text = NULL;
  g_autofree char *mac = NULL;

  if (self->id == NULL)
    return;
  json_object_set_int_member (body, "seq", ++self->seq);
  json_node_set_object (node, body);
  text = json_to_string (node, FALSE);
  json_object_set_string_member (relay, "type", "relay");
  json_object_set_string_member (relay, "to", to);
  json_object_set_string_member (relay, "body", text);
  mac = dc_room_sign (self->room, self->id, to, text);
  json_object_set_string_member (relay, "mac", mac);
  send_object (self, relay);
}

void
dc_signaling_send (DcSignaling *self,
                   const char  *to,
                   JsonObject  *body)
{
  g_return_if_fail (DC_IS_SIGNALING (self));
  send_relay (self, to, body);
}

void
dc_signaling_admit (DcSignaling *self,
                    const char  *id)
{
  g_autoptr(JsonObject) admit = json_object_new ();

  json_object_set_string_member (admit, "type", "admit");
  json_object_set_string_member (admit, "id", id);
  send_object (self, admit);
}

static void
dc_signaling_dispose (GObject *object)
{
  DcSignaling *self = DC_SIGNALING (object);

  g_cancellable_cancel (self->cancellable);
  if (self->conn != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->conn, self);
      if (soup_websocket_connection_get_state (self->conn) == SOUP_WEBSOCKET_STATE_OPEN)
        soup_websocket_connection_close (self->conn, SOUP_WEBSOCKET_CLOSE_NORMAL, NULL);
    }
  g_clear_object (&self->conn);
  g_clear_object (&self->session);
  g_clear_object (&self->cancellable);

  G_OBJECT_CLASS (dc_signaling_parent_class)->dispose (object);
}

static void
dc_signaling_finalize (GObject *object)
{
  DcSignaling *self = DC_SIGNALING (object);

  g_clear_pointer (&self->room, dc_room_free);
  g_hash_table_unref (self->last_seq);
  g_hash_table_unref (self->bad_relays);
  g_hash_table_unref (self->addresses);
  g_free (self->address);
  g_free (self->url);
  g_free (self->id);
  g_free (self->host_id);

  G_OBJECT_CLASS (dc_signaling_parent_class)->finalize (object);
}

static void
dc_signaling_class_init (DcSignalingClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_signaling_dispose;
  object_class->finalize = dc_signaling_finalize;

  /* (my id, host id) once the service placed us in the room. */
  signals[SIGNAL_WELCOME] =
    g_signal_new ("welcome", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
  /* (sender id, body) for each authenticated relay. */
  signals[SIGNAL_MESSAGE] =
    g_signal_new ("message", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_STRING, JSON_TYPE_OBJECT);
  /* (sender id, body) for a relay whose signature failed. */
  signals[SIGNAL_REFUSED] =
    g_signal_new ("refused", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_STRING, JSON_TYPE_OBJECT);
  signals[SIGNAL_HOST_CHANGED] =
    g_signal_new ("host-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_MEMBER_LEFT] =
    g_signal_new ("member-left", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  signals[SIGNAL_FAILED] =
    g_signal_new ("failed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
}

static void
dc_signaling_init (DcSignaling *self)
{
  self->session = soup_session_new ();
  self->cancellable = g_cancellable_new ();
  self->last_seq = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->bad_relays = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->addresses = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}
