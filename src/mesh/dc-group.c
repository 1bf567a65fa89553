/* dc-group.c: discovery, in-process signaling and room joining around DcMesh.
 *
 * Three ways into a group, each replacing whatever the group did before:
 *
 * - dc_group_start_discovery(): listen for a group announced on the local
 *   network and join it; when none is heard within DC_GROUP_DISCOVERY_WAIT_MS
 *   (plus up to a second), serve signaling on every address, create a room
 *   with a generated code, and announce it once this device is its host.
 * - dc_group_create_room(): serve signaling on one address and be the host
 *   of a new room with a generated code; nothing is announced.
 * - dc_group_join_room(): join a room by its code through a signaling URL
 *   (after dc_group_serve() when the CLI serves that URL itself).
 *
 * The group's own events "discovered" and "announcing" come through ::event
 * like the mesh's; their detail is in the signal-url and room-code
 * properties. A mesh that is left or failed is kept for
 * DC_GROUP_LEAVE_GRACE_MS so that its byes can leave, with no handler of
 * ours connected, then dropped.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-group.h"

#include "dc-discovery.h"
#include "dc-identity.h"
#include "dc-room.h"
#include "dc-signal-server.h"

struct _DcGroup
{
  GObject         parent_instance;

  /* owned references */
  DcMeshConfig    config;       /* signal_url and room_code: the current room's */
  DcMesh         *mesh;
  DcDiscovery    *discovery;
  DcSignalServer *server;
  GListStore     *peers;        /* DcPeer, connected ones (channel open, hello received) */
  GPtrArray      *retired;      /* GObject: left meshes and servers, dropped after a grace */
  char           *serve_address;  /* where a created room is served */

  /* state */
  DcGroupState    state;
  guint           n_peers;
  guint           discovery_id;
  guint           retire_id;
  guint           via_lan : 1;  /* the room was found or announced on the LAN */
};

enum
{
  PROP_0,
  PROP_STATE,
  PROP_IS_HOST,
  PROP_N_PEERS,
  PROP_ROOM_CODE,
  PROP_SIGNAL_URL,
  PROP_NAME,
  PROP_PEERS,
  PROP_VIA_LAN,
  PROP_ADDRESS,
  N_PROPS
};

enum
{
  SIGNAL_EVENT,
  SIGNAL_APPROVAL_REQUESTED,
  SIGNAL_APPROVAL_WITHDRAWN,
  SIGNAL_MESSAGE,
  SIGNAL_FAILED,
  N_SIGNALS
};

G_DEFINE_FINAL_TYPE (DcGroup, dc_group, G_TYPE_OBJECT)

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

GType
dc_group_state_get_type (void)
{
  static gsize type_id = 0;

  if (g_once_init_enter (&type_id))
    {
      static const GEnumValue values[] = {
        { DC_GROUP_STATE_OFFLINE, "DC_GROUP_STATE_OFFLINE", "offline" },
        { DC_GROUP_STATE_SEARCHING, "DC_GROUP_STATE_SEARCHING", "searching" },
        { DC_GROUP_STATE_JOINING, "DC_GROUP_STATE_JOINING", "joining" },
        { DC_GROUP_STATE_HOST, "DC_GROUP_STATE_HOST", "host" },
        { DC_GROUP_STATE_MEMBER, "DC_GROUP_STATE_MEMBER", "member" },
        { 0, NULL, NULL }
      };
      GType type = g_enum_register_static ("DcGroupState", values);

      g_once_init_leave (&type_id, type);
    }
  return type_id;
}

/**
 * dc_group_new:
 * @config: what to tell peers (hello), ICE settings, approval policy, and
 *   whether joining may create a room; its signal_url and room_code are
 *   ignored (the calls that join name them)
 *
 * Returns: (transfer full): an offline group
 */
DcGroup *
dc_group_new (const DcMeshConfig *config)
{
  DcGroup *self;

  g_return_val_if_fail (config != NULL, NULL);
  g_return_val_if_fail (config->hello != NULL && config->hello->name != NULL, NULL);

  self = g_object_new (DC_TYPE_GROUP, NULL);
  self->config.room_id_override = g_strdup (config->room_id_override);
  self->config.fingerprint_override = g_strdup (config->fingerprint_override);
  self->config.create = config->create;
  self->config.approve = config->approve;
  self->config.hello = dc_mesh_hello_copy (config->hello);
  self->config.peer.stun_server = g_strdup (config->peer.stun_server);
  self->config.peer.turn_server = g_strdup (config->peer.turn_server);
  self->config.peer.ice_addresses = g_strdupv (config->peer.ice_addresses);
  return self;
}

static void
set_state (DcGroup      *self,
           DcGroupState  state)
{
  gboolean was_host = self->state == DC_GROUP_STATE_HOST;

  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
  if (was_host != (state == DC_GROUP_STATE_HOST))
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_IS_HOST]);
}

static void
set_string (DcGroup     *self,
            char       **field,
            const char  *value,
            guint        prop)
{
  if (g_strcmp0 (*field, value) == 0)
    return;
  g_free (*field);
  *field = g_strdup (value);
  g_object_notify_by_pspec (G_OBJECT (self), properties[prop]);
}

static void
set_via_lan (DcGroup  *self,
             gboolean  via_lan)
{
  if (self->via_lan == !!via_lan)
    return;
  self->via_lan = !!via_lan;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_VIA_LAN]);
}

static void
set_n_peers (DcGroup *self,
             guint    n_peers)
{
  if (self->n_peers == n_peers)
    return;
  self->n_peers = n_peers;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_PEERS]);
}

/* The list holds the peers the mesh counts as connected: channel open and
 * hello received. Rebuilt on every join and leave, which are rare. */
static void
update_peers (DcGroup *self)
{
  g_autoptr(GPtrArray) all = NULL;
  g_autoptr(GPtrArray) connected = g_ptr_array_new ();

  if (self->mesh != NULL)
    {
      all = dc_mesh_dup_peers (self->mesh);
      for (guint i = 0; i < all->len; i++)
        {
          DcPeer *peer = g_ptr_array_index (all, i);

          if (dc_peer_get_state (peer) == DC_PEER_STATE_OPEN && dc_peer_get_hello (peer) != NULL)
            g_ptr_array_add (connected, peer);
        }
    }
  g_list_store_splice (self->peers, 0, g_list_model_get_n_items (G_LIST_MODEL (self->peers)),
                       connected->pdata, connected->len);
  set_n_peers (self, self->mesh != NULL ? dc_mesh_get_n_peers (self->mesh) : 0);
}

static gboolean
retire_cb (gpointer user_data)
{
  DcGroup *self = user_data;

  self->retire_id = 0;
  g_ptr_array_set_size (self->retired, 0);
  return G_SOURCE_REMOVE;
}

static void
retire (DcGroup  *self,
        gpointer  object)
{
  if (object == NULL)
    return;
  g_signal_handlers_disconnect_by_data (object, self);
  g_ptr_array_add (self->retired, object);
  if (self->retire_id == 0)
    self->retire_id = g_timeout_add (DC_GROUP_LEAVE_GRACE_MS, retire_cb, self);
}

/* Back to offline: the mesh (after saying bye), the service and discovery go. */
static void
stop_all (DcGroup *self)
{
  gboolean had_mesh = self->mesh != NULL;

  g_clear_handle_id (&self->discovery_id, g_source_remove);
  if (self->discovery != NULL)
    g_signal_handlers_disconnect_by_data (self->discovery, self);
  g_clear_object (&self->discovery);
  if (self->mesh != NULL)
    dc_mesh_leave (self->mesh);
  retire (self, g_steal_pointer (&self->mesh));
  retire (self, g_steal_pointer (&self->server));
  update_peers (self);
  set_via_lan (self, FALSE);
  set_state (self, DC_GROUP_STATE_OFFLINE);
  if (had_mesh)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ADDRESS]);
}

static void
emit_event (DcGroup    *self,
            const char *event)
{
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, event, NULL, self->n_peers, NULL);
}

static void
fail (DcGroup      *self,
      const GError *error)
{
  stop_all (self);
  g_signal_emit (self, signals[SIGNAL_FAILED], 0, error);
}

static void
mesh_event_cb (DcMesh     *mesh,
               const char *event,
               const char *peer,
               guint       n_peers,
               const char *reason,
               gpointer    user_data)
{
  DcGroup *self = user_data;

  /* A renewal replaces a peer's DcPeer without a join or a leave. */
  if (g_str_equal (event, "peer-joined") || g_str_equal (event, "peer-left")
      || g_str_equal (event, "renewed"))
    update_peers (self);
  else if (g_str_equal (event, "joined"))
    set_state (self, g_strcmp0 (reason, "host") == 0 ? DC_GROUP_STATE_HOST
                                                      : DC_GROUP_STATE_MEMBER);
  else if (g_str_equal (event, "host"))
    set_state (self, DC_GROUP_STATE_HOST);
  else if (g_str_equal (event, "identity"))
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ADDRESS]);

  g_signal_emit (self, signals[SIGNAL_EVENT], 0, event, peer, n_peers, reason);

  /* A group found by nobody and served here is announced once this device
   * is in its room as the host. */
  if (g_str_equal (event, "joined") && self->server != NULL && self->discovery != NULL)
    {
      dc_discovery_announce (self->discovery, dc_signal_server_get_port (self->server),
                             self->config.room_code, self->config.hello->name);
      set_via_lan (self, TRUE);
      emit_event (self, "announcing");
    }
}

static void
mesh_approval_requested_cb (DcMesh     *mesh,
                            const char *id,
                            const char *name,
                            const char *fingerprint,
                            const char *address,
                            gpointer    user_data)
{
  DcGroup *self = user_data;

  /* What this device knows of how the newcomer could find the room: an
   * announced room's code is readable by every device on the network. */
  g_signal_emit (self, signals[SIGNAL_APPROVAL_REQUESTED], 0, id, name, fingerprint, address,
                 self->via_lan ? "lan" : "code");
}

static void
mesh_approval_withdrawn_cb (DcMesh     *mesh,
                            const char *id,
                            gpointer    user_data)
{
  g_signal_emit (user_data, signals[SIGNAL_APPROVAL_WITHDRAWN], 0, id);
}

static void
mesh_message_cb (DcMesh  *mesh,
                 DcPeer  *peer,
                 guint    type,
                 GBytes  *payload,
                 gpointer user_data)
{
  g_signal_emit (user_data, signals[SIGNAL_MESSAGE], 0, peer, type, payload);
}

static void
mesh_failed_cb (DcMesh       *mesh,
                const GError *error,
                gpointer      user_data)
{
  fail (user_data, error);
}

static void
start_mesh (DcGroup *self)
{
  self->mesh = dc_mesh_new (&self->config);
  g_signal_connect (self->mesh, "event", G_CALLBACK (mesh_event_cb), self);
  g_signal_connect (self->mesh, "approval-requested", G_CALLBACK (mesh_approval_requested_cb),
                    self);
  g_signal_connect (self->mesh, "approval-withdrawn", G_CALLBACK (mesh_approval_withdrawn_cb),
                    self);
  g_signal_connect (self->mesh, "message", G_CALLBACK (mesh_message_cb), self);
  g_signal_connect (self->mesh, "failed", G_CALLBACK (mesh_failed_cb), self);
  set_state (self, DC_GROUP_STATE_JOINING);
  dc_mesh_start (self->mesh);
}

static void
found_cb (DcDiscovery *discovery,
          const char  *url,
          const char  *room,
          const char  *name,
          gpointer     user_data)
{
  DcGroup *self = user_data;

  if (self->mesh != NULL)
    return;
  g_clear_handle_id (&self->discovery_id, g_source_remove);
  g_signal_handlers_disconnect_by_data (discovery, self);
  dc_group_join_found (self, url, room);
}

/**
 * dc_group_join_found:
 * @url: the signaling URL an announcement named
 * @room: the room code it carried
 *
 * What the group does when discovery hears an announcement: emits
 * "discovered" and joins that room, marked as found on the local network
 * (the via-lan property). Tests call it to join a loopback room the way a
 * discovered one is joined, without multicast.
 */
void
dc_group_join_found (DcGroup    *self,
                     const char *url,
                     const char *room)
{
  g_return_if_fail (DC_IS_GROUP (self));
  g_return_if_fail (url != NULL && room != NULL);

  if (self->mesh != NULL)
    return;
  set_string (self, &self->config.signal_url, url, PROP_SIGNAL_URL);
  set_string (self, &self->config.room_code, room, PROP_ROOM_CODE);
  set_via_lan (self, TRUE);
  emit_event (self, "discovered");
  start_mesh (self);
}

/* Nobody announced a group: serve signaling for one and announce it. */
static gboolean
discovery_timeout_cb (gpointer user_data)
{
  DcGroup *self = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  g_autofree char *code = NULL;

  self->discovery_id = 0;
  g_signal_handlers_disconnect_by_data (self->discovery, self);
  self->server = dc_signal_server_new ();
  if (!dc_signal_server_listen (self->server, "0.0.0.0", 0, NULL, NULL, &error))
    {
      fail (self, error);
      return G_SOURCE_REMOVE;
    }
  url = g_strdup_printf ("ws://127.0.0.1:%u/signal", dc_signal_server_get_port (self->server));
  set_string (self, &self->config.signal_url, url, PROP_SIGNAL_URL);
  if (self->config.room_code == NULL)
    {
      code = dc_room_generate_code ();
      set_string (self, &self->config.room_code, code, PROP_ROOM_CODE);
    }
  /* Announced once this device is in the room as its host (mesh_event_cb). */
  start_mesh (self);
  return G_SOURCE_REMOVE;
}

/**
 * dc_group_start_discovery:
 * @port: the discovery UDP port, 0 for %DC_DISCOVERY_PORT
 * @room_code: (nullable): the code of the room to create when no group is
 *   found, %NULL to generate one
 *
 * Leaves any group and looks for one on the local network; see the file
 * comment. Asynchronous failures come through ::failed.
 *
 * Returns: %FALSE with @error set if listening for announcements failed
 */
gboolean
dc_group_start_discovery (DcGroup     *self,
                          guint        port,
                          const char  *room_code,
                          GError     **error)
{
  g_autoptr(DcDiscovery) discovery = NULL;

  g_return_val_if_fail (DC_IS_GROUP (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  stop_all (self);
  set_string (self, &self->config.room_code, room_code, PROP_ROOM_CODE);
  set_string (self, &self->config.signal_url, NULL, PROP_SIGNAL_URL);
  discovery = dc_discovery_new (port);
  if (!dc_discovery_start (discovery, error))
    return FALSE;
  self->discovery = g_steal_pointer (&discovery);
  g_signal_connect (self->discovery, "found", G_CALLBACK (found_cb), self);
  self->discovery_id = g_timeout_add (DC_GROUP_DISCOVERY_WAIT_MS + g_random_int_range (0, 1000),
                                      discovery_timeout_cb, self);
  set_state (self, DC_GROUP_STATE_SEARCHING);
  return TRUE;
}

/**
 * dc_group_serve:
 * @address: (nullable): the address to listen on, %NULL for the serve
 *   address (dc_group_set_serve_address())
 * @port: the TCP port, 0 for any free one
 *
 * Leaves any group and serves signaling in this process; the signal-url
 * property then holds its URL for dc_group_join_room().
 *
 * Returns: %FALSE with @error set if the service could not listen
 */
gboolean
dc_group_serve (DcGroup     *self,
                const char  *address,
                guint        port,
                GError     **error)
{
  g_autoptr(DcSignalServer) server = NULL;
  g_autofree char *url = NULL;

  g_return_val_if_fail (DC_IS_GROUP (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  stop_all (self);
  server = dc_signal_server_new ();
  if (address == NULL)
    address = self->serve_address;
  if (!dc_signal_server_listen (server, address, port, NULL, NULL, error))
    return FALSE;
  self->server = g_steal_pointer (&server);
  /* A service on every address is reached here through loopback. */
  if (g_str_equal (address, "0.0.0.0") || g_str_equal (address, "::"))
    url = g_strdup_printf ("ws://127.0.0.1:%u/signal", dc_signal_server_get_port (self->server));
  else
    url = dc_signal_server_dup_url (self->server);
  set_string (self, &self->config.signal_url, url, PROP_SIGNAL_URL);
  return TRUE;
}

static gboolean
join (DcGroup     *self,
      const char  *signal_url,
      const char  *room_code,
      gboolean     create)
{
  set_string (self, &self->config.signal_url, signal_url, PROP_SIGNAL_URL);
  set_string (self, &self->config.room_code, room_code, PROP_ROOM_CODE);
  self->config.create = create;
  start_mesh (self);
  return TRUE;
}

/**
 * dc_group_create_room:
 * @address: (nullable): where to serve signaling, as for dc_group_serve()
 *
 * Leaves any group, serves signaling and becomes the host of a new room
 * whose generated code is then in the room-code property.
 *
 * Returns: %FALSE with @error set if the service could not listen
 */
gboolean
dc_group_create_room (DcGroup     *self,
                      const char  *address,
                      GError     **error)
{
  g_autofree char *code = NULL;
  g_autofree char *url = NULL;

  g_return_val_if_fail (DC_IS_GROUP (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!dc_group_serve (self, address, 0, error))
    return FALSE;
  code = dc_room_generate_code ();
  url = g_strdup (self->config.signal_url);
  return join (self, url, code, TRUE);
}

/**
 * dc_group_join_room:
 * @signal_url: the signaling service, ws:// or wss://…/signal
 * @room_code: the room's code
 *
 * Joins a room (creating it when the group's config allows and nobody is in
 * it). A service this group serves at @signal_url (dc_group_serve()) is
 * kept; anything else the group did is left. Asynchronous failures, a declined request
 * included, come through ::failed.
 *
 * Returns: %FALSE with @error set if the URL or the code is unusable
 */
gboolean
dc_group_join_room (DcGroup     *self,
                    const char  *signal_url,
                    const char  *room_code,
                    GError     **error)
{
  g_autoptr(GUri) uri = NULL;
  g_autofree char *url = NULL;
  g_autofree char *code = NULL;
  DcSignalServer *server;

  g_return_val_if_fail (DC_IS_GROUP (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  code = g_strstrip (g_strdup (room_code != NULL ? room_code : ""));
  if (*code == '\0' || !g_utf8_validate (code, -1, NULL))
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                           "A room code is needed");
      return FALSE;
    }
  url = g_strstrip (g_strdup (signal_url != NULL ? signal_url : ""));
  uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0'
      || (g_strcmp0 (g_uri_get_scheme (uri), "ws") != 0
          && g_strcmp0 (g_uri_get_scheme (uri), "wss") != 0))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "The signaling URL “%s” is not a ws:// or wss:// URL", url);
      return FALSE;
    }

  /* Keep only a service this group serves for this very URL (dc_group_serve()). */
  server = g_strcmp0 (url, self->config.signal_url) == 0 ? g_steal_pointer (&self->server)
                                                         : NULL;
  stop_all (self);
  self->server = server;
  return join (self, url, code, self->config.create);
}

/**
 * dc_group_set_serve_address:
 * @address: an address to listen on: "0.0.0.0" (the default) for every
 *   network, "127.0.0.1" for this computer only (tests)
 *
 * Where dc_group_create_room() and dc_group_serve() serve signaling when
 * they are given no address.
 */
void
dc_group_set_serve_address (DcGroup    *self,
                            const char *address)
{
  g_return_if_fail (DC_IS_GROUP (self));
  g_return_if_fail (address != NULL);

  g_free (self->serve_address);
  self->serve_address = g_strdup (address);
}

/**
 * dc_group_answer_request:
 * @id: the id from ::approval-requested
 *
 * The host's answer to a device asking to join. Answers to requests of a
 * mesh the group has since left are ignored.
 */
void
dc_group_answer_request (DcGroup    *self,
                         const char *id,
                         gboolean    accept)
{
  g_return_if_fail (DC_IS_GROUP (self));
  g_return_if_fail (id != NULL);

  if (self->mesh != NULL)
    dc_mesh_answer_request (self->mesh, id, accept);
}

/**
 * dc_group_leave:
 *
 * Says bye to every peer, stops serving and discovery; the group is then
 * offline. The byes get DC_GROUP_LEAVE_GRACE_MS on this main context.
 */
void
dc_group_leave (DcGroup *self)
{
  g_return_if_fail (DC_IS_GROUP (self));

  stop_all (self);
  set_string (self, &self->config.room_code, NULL, PROP_ROOM_CODE);
  set_string (self, &self->config.signal_url, NULL, PROP_SIGNAL_URL);
}

DcGroupState
dc_group_get_state (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), DC_GROUP_STATE_OFFLINE);

  return self->state;
}

gboolean
dc_group_get_is_host (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), FALSE);

  return self->state == DC_GROUP_STATE_HOST;
}

guint
dc_group_get_n_peers (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), 0);

  return self->n_peers;
}

/**
 * dc_group_get_room_code:
 *
 * Returns: (nullable): the code of the room joined or being joined
 */
const char *
dc_group_get_room_code (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  return self->config.room_code;
}

/**
 * dc_group_get_signal_url:
 *
 * Returns: (nullable): the signaling URL in use, served or found
 */
const char *
dc_group_get_signal_url (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  return self->config.signal_url;
}

/**
 * dc_group_get_name:
 *
 * Returns: this device's name, as its hello tells peers
 */
const char *
dc_group_get_name (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  return self->config.hello->name;
}

/**
 * dc_group_get_via_lan:
 *
 * Returns: whether the current room was found on the local network or is
 *   announced there (its code is then readable by every device on it)
 */
gboolean
dc_group_get_via_lan (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), FALSE);

  return self->via_lan;
}

/**
 * dc_group_get_address:
 *
 * Returns: (nullable): this device's address as the signaling service sees
 *   it (what a host's approval dialog shows for it), once in a room
 */
const char *
dc_group_get_address (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  return self->mesh != NULL ? dc_mesh_get_address (self->mesh) : NULL;
}

/**
 * dc_group_dup_fingerprint:
 * @full: the whole SHA-256 fingerprint ("AB:CD:…") rather than the short
 *   form shown to people ("AB12 CD34 EF56 7890")
 *
 * Returns: (transfer full) (nullable): this device's DTLS certificate
 *   fingerprint, as the host's approval dialog shows it; %NULL when
 *   GStreamer's dtls plugin is missing
 */
char *
dc_group_dup_fingerprint (DcGroup  *self,
                          gboolean  full)
{
  const char *fingerprint;

  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  fingerprint = dc_identity_get_local_fingerprint (NULL);
  return full ? g_strdup (fingerprint) : dc_identity_short_fingerprint (fingerprint);
}

/**
 * dc_group_get_peers:
 *
 * Returns: (transfer none): a #GListModel of the connected #DcPeer objects
 */
GListModel *
dc_group_get_peers (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  return G_LIST_MODEL (self->peers);
}

/**
 * dc_group_get_mesh:
 *
 * Returns: (transfer none) (nullable): the current room's mesh, for sending
 */
DcMesh *
dc_group_get_mesh (DcGroup *self)
{
  g_return_val_if_fail (DC_IS_GROUP (self), NULL);

  return self->mesh;
}

static void
dc_group_dispose (GObject *object)
{
  DcGroup *self = DC_GROUP (object);

  g_clear_handle_id (&self->discovery_id, g_source_remove);
  g_clear_handle_id (&self->retire_id, g_source_remove);
  if (self->mesh != NULL)
    g_signal_handlers_disconnect_by_data (self->mesh, self);
  if (self->discovery != NULL)
    g_signal_handlers_disconnect_by_data (self->discovery, self);
  g_clear_object (&self->mesh);
  g_clear_object (&self->discovery);
  g_clear_object (&self->server);
  if (self->retired != NULL)
    g_ptr_array_set_size (self->retired, 0);
  if (self->peers != NULL)
    g_list_store_remove_all (self->peers);

  G_OBJECT_CLASS (dc_group_parent_class)->dispose (object);
}

static void
dc_group_finalize (GObject *object)
{
  DcGroup *self = DC_GROUP (object);

  g_clear_object (&self->peers);
  g_clear_pointer (&self->retired, g_ptr_array_unref);
  g_free (self->serve_address);
  dc_mesh_config_clear (&self->config);

  G_OBJECT_CLASS (dc_group_parent_class)->finalize (object);
}

static void
dc_group_get_property (GObject    *object,
                       guint       prop_id,
                       GValue     *value,
                       GParamSpec *pspec)
{
  DcGroup *self = DC_GROUP (object);

  switch (prop_id)
    {
    case PROP_STATE:
      g_value_set_enum (value, self->state);
      break;
    case PROP_IS_HOST:
      g_value_set_boolean (value, dc_group_get_is_host (self));
      break;
    case PROP_N_PEERS:
      g_value_set_uint (value, self->n_peers);
      break;
    case PROP_ROOM_CODE:
      g_value_set_string (value, self->config.room_code);
      break;
    case PROP_SIGNAL_URL:
      g_value_set_string (value, self->config.signal_url);
      break;
    case PROP_NAME:
      g_value_set_string (value, self->config.hello->name);
      break;
    case PROP_PEERS:
      g_value_set_object (value, self->peers);
      break;
    case PROP_VIA_LAN:
      g_value_set_boolean (value, self->via_lan);
      break;
    case PROP_ADDRESS:
      g_value_set_string (value, dc_group_get_address (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_group_class_init (DcGroupClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GParamFlags flags = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;

  object_class->dispose = dc_group_dispose;
  object_class->finalize = dc_group_finalize;
  object_class->get_property = dc_group_get_property;

  properties[PROP_STATE] =
    g_param_spec_enum ("state", NULL, NULL, DC_TYPE_GROUP_STATE, DC_GROUP_STATE_OFFLINE, flags);
  properties[PROP_IS_HOST] = g_param_spec_boolean ("is-host", NULL, NULL, FALSE, flags);
  properties[PROP_N_PEERS] = g_param_spec_uint ("n-peers", NULL, NULL, 0, G_MAXUINT, 0, flags);
  properties[PROP_ROOM_CODE] = g_param_spec_string ("room-code", NULL, NULL, NULL, flags);
  properties[PROP_SIGNAL_URL] = g_param_spec_string ("signal-url", NULL, NULL, NULL, flags);
  properties[PROP_NAME] = g_param_spec_string ("name", NULL, NULL, NULL, flags);
  properties[PROP_PEERS] = g_param_spec_object ("peers", NULL, NULL, G_TYPE_LIST_MODEL, flags);
  properties[PROP_VIA_LAN] = g_param_spec_boolean ("via-lan", NULL, NULL, FALSE, flags);
  properties[PROP_ADDRESS] = g_param_spec_string ("address", NULL, NULL, NULL, flags);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /* (event, peer name or NULL, connected peers, reason or NULL): the mesh's
   * events (DcMesh::event) plus "discovered" (signal-url holds the found
   * service) and "announcing" (room-code holds the announced room). */
  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 4, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_UINT, G_TYPE_STRING);
  /* (id, name, fingerprint, address, via): as host, answer with
   * dc_group_answer_request(). fingerprint and address as in
   * DcMesh::approval-requested ("" when unknown); via is "lan" when the room
   * is announced or was found on the local network (anyone there knows its
   * code), "code" when the code was shared some other way. */
  signals[SIGNAL_APPROVAL_REQUESTED] =
    g_signal_new ("approval-requested", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 5, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING,
                  G_TYPE_STRING, G_TYPE_STRING);
  /* (id): the device of that ::approval-requested left before an answer. */
  signals[SIGNAL_APPROVAL_WITHDRAWN] =
    g_signal_new ("approval-withdrawn", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  /* (peer, type, payload): a message from a peer of the current room. */
  signals[SIGNAL_MESSAGE] =
    g_signal_new ("message", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, DC_TYPE_PEER, G_TYPE_UINT, G_TYPE_BYTES);
  /* (error): joining failed, was declined, or serving failed; the group is
   * offline again. */
  signals[SIGNAL_FAILED] =
    g_signal_new ("failed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
}

static void
dc_group_init (DcGroup *self)
{
  self->peers = g_list_store_new (DC_TYPE_PEER);
  self->retired = g_ptr_array_new_with_free_func (g_object_unref);
  self->serve_address = g_strdup ("0.0.0.0");
}
