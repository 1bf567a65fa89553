/* dc-discovery.c: announce and hear groups by UDP multicast.
 *
 * The device that serves signaling for a group sends, once a second, one
 * datagram to 239.255.77.77:47777 (TTL 1: it never leaves the local network):
 *
 *   {"daisychain":1,"instance":"<16 hex>","port":<signaling port>,
 *    "room":"<room code>","name":"<device name>"}
 *
 * A listener builds the signaling URL from the datagram's source address and
 * the port, and joins the room with the code. The code is thus readable by
 * every device on the network: a discovered group is open to the network by
 * design (as the seeds' "same network" grouping is); the host's approval
 * policy still applies. Datagrams are untrusted: over 1 KiB, not JSON, or
 * with fields out of range, they are ignored.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-discovery.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-json-bounds.h"
#include "dc-room.h"

struct _DcDiscovery
{
  GObject         parent_instance;

  /* owned */
  GSocket        *socket;
  GSource        *source;
  GInetAddress   *group;
  char           *announcement;

  /* state */
  char           *instance;
  guint           port;
  guint           announce_id;
};

G_DEFINE_FINAL_TYPE (DcDiscovery, dc_discovery, G_TYPE_OBJECT)

enum {
  SIGNAL_FOUND,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
handle_datagram (DcDiscovery    *self,
                 GSocketAddress *from,
                 const char     *data,
                 gssize          size)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *host = NULL;
  g_autofree char *url = NULL;
  JsonObject *object;
  const char *room, *name, *instance;
  gint64 port;

  if (!G_IS_INET_SOCKET_ADDRESS (from))
    return;
  root = dc_json_parse_bounded (data, size, DC_JSON_DISCOVERY_MAX_BYTES,
                                DC_JSON_DISCOVERY_MAX_DEPTH, &error);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      /* Anyone on the LAN may send datagrams: note them for debugging only,
       * so that a flood cannot fill the log. */
      g_autofree char *sender = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (from));

      g_debug ("discovery: datagram from %s dropped (limits: %d bytes, depth %d): %s",
               sender, DC_JSON_DISCOVERY_MAX_BYTES, DC_JSON_DISCOVERY_MAX_DEPTH,
               error != NULL ? error->message : "not a JSON object");
      return;
    }
  object = json_node_get_object (root);
  port = json_object_get_int_member_with_default (object, "port", 0);
  room = json_object_get_string_member_with_default (object, "room", NULL);
  name = json_object_get_string_member_with_default (object, "name", "");
  instance = json_object_get_string_member_with_default (object, "instance", "");
  if (json_object_get_int_member_with_default (object, "daisychain", 0) != 1
      || port < 1 || port > 65535 || room == NULL || *room == '\0' || strlen (room) > 64
      || g_strcmp0 (instance, self->instance) == 0)
    return;

  host = g_inet_address_to_string (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (from)));
  url = g_strdup_printf ("ws://%s:%d/signal", host, (int) port);
  g_signal_emit (self, signals[SIGNAL_FOUND], 0, url, room, name);
}

static gboolean
readable_cb (GSocket      *socket,
             GIOCondition  condition,
             gpointer      user_data)
{
  DcDiscovery *self = user_data;

  for (;;)
    {
      g_autoptr(GSocketAddress) from = NULL;
      g_autoptr(GError) error = NULL;
      char buffer[DC_DISCOVERY_MAX_SIZE + 1];
      gssize size;

      size = g_socket_receive_from (socket, &from, buffer, sizeof buffer, NULL, &error);
      if (size < 0)
        break;
      if (size > DC_DISCOVERY_MAX_SIZE)
        continue;
      handle_datagram (self, from, buffer, size);
    }
  return G_SOURCE_CONTINUE;
}

DcDiscovery *
dc_discovery_new (guint port)
{
  DcDiscovery *self = g_object_new (DC_TYPE_DISCOVERY, NULL);

  self->port = port != 0 ? port : DC_DISCOVERY_PORT;
  return self;
}

/**
 * dc_discovery_start:
 *
 * Joins the multicast group on the default interface and emits ::found for
 * every announcement heard from another device.
 */
gboolean
dc_discovery_start (DcDiscovery  *self,
                    GError      **error)
{
  g_autoptr(GInetAddress) any = g_inet_address_new_any (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) bind_address = NULL;

  g_return_val_if_fail (DC_IS_DISCOVERY (self), FALSE);
  g_return_val_if_fail (self->socket == NULL, FALSE);

  self->socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_DATAGRAM,
                               G_SOCKET_PROTOCOL_UDP, error);
  if (self->socket == NULL)
    return FALSE;
  g_socket_set_blocking (self->socket, FALSE);
  bind_address = g_inet_socket_address_new (any, self->port);
  /* allow_reuse: several DaisyChain processes on one machine all listen. */
  if (!g_socket_bind (self->socket, bind_address, TRUE, error))
    {
      g_prefix_error (error, "Cannot listen for devices on UDP port %u: ", self->port);
      return FALSE;
    }
  g_socket_set_multicast_ttl (self->socket, 1);
  g_socket_set_multicast_loopback (self->socket, TRUE);
  if (!g_socket_join_multicast_group (self->socket, self->group, FALSE, NULL, error))
    {
      g_prefix_error (error, "Cannot join the discovery group %s: ", DC_DISCOVERY_GROUP);
      return FALSE;
    }
  self->source = g_socket_create_source (self->socket, G_IO_IN, NULL);
  g_source_set_callback (self->source, G_SOURCE_FUNC (readable_cb), self, NULL);
  g_source_attach (self->source, NULL);
  return TRUE;
}

static gboolean
announce_cb (gpointer user_data)
{
  DcDiscovery *self = user_data;
  g_autoptr(GSocketAddress) to = g_inet_socket_address_new (self->group, self->port);
  g_autoptr(GError) error = NULL;

  if (g_socket_send_to (self->socket, to, self->announcement, strlen (self->announcement),
                        NULL, &error) < 0)
    g_debug ("announcement not sent: %s", error->message);
  return G_SOURCE_CONTINUE;
}

/**
 * dc_discovery_announce:
 *
 * Announces a group every second until the object is disposed. Needs
 * dc_discovery_start() first.
 */
void
dc_discovery_announce (DcDiscovery *self,
                       guint        signal_port,
                       const char  *room_code,
                       const char  *name)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  g_return_if_fail (DC_IS_DISCOVERY (self));
  g_return_if_fail (self->socket != NULL);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "daisychain");
  json_builder_add_int_value (builder, 1);
  json_builder_set_member_name (builder, "instance");
  json_builder_add_string_value (builder, self->instance);
  json_builder_set_member_name (builder, "port");
  json_builder_add_int_value (builder, signal_port);
  json_builder_set_member_name (builder, "room");
  json_builder_add_string_value (builder, room_code);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, name);
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  g_free (self->announcement);
  self->announcement = json_to_string (root, FALSE);
  if (strlen (self->announcement) > DC_DISCOVERY_MAX_SIZE)
    {
      g_message ("announcement too long; the device name is left out");
      g_free (self->announcement);
      self->announcement = g_strdup_printf ("{\"daisychain\":1,\"instance\":\"%s\",\"port\":%u,"
                                            "\"room\":\"%s\",\"name\":\"\"}",
                                            self->instance, signal_port, room_code);
    }
  g_clear_handle_id (&self->announce_id, g_source_remove);
  announce_cb (self);
  self->announce_id = g_timeout_add (DC_DISCOVERY_INTERVAL_MS, announce_cb, self);
}

static void
dc_discovery_dispose (GObject *object)
{
  DcDiscovery *self = DC_DISCOVERY (object);

  g_clear_handle_id (&self->announce_id, g_source_remove);
  if (self->source != NULL)
    g_source_destroy (self->source);
  g_clear_pointer (&self->source, g_source_unref);
  g_clear_object (&self->socket);
  g_clear_object (&self->group);

  G_OBJECT_CLASS (dc_discovery_parent_class)->dispose (object);
}

static void
dc_discovery_finalize (GObject *object)
{
  DcDiscovery *self = DC_DISCOVERY (object);

  g_free (self->announcement);
  g_free (self->instance);

  G_OBJECT_CLASS (dc_discovery_parent_class)->finalize (object);
}

static void
dc_discovery_class_init (DcDiscoveryClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_discovery_dispose;
  object_class->finalize = dc_discovery_finalize;

  /* (signaling URL, room code, announcer's name). */
  signals[SIGNAL_FOUND] =
    g_signal_new ("found", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING);
}

static void
dc_discovery_init (DcDiscovery *self)
{
  self->instance = dc_room_random_hex (8);
  self->group = g_inet_address_new_from_string (DC_DISCOVERY_GROUP);
}
