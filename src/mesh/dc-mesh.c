/* dc-mesh.c: rooms with host approval on top of DcSignaling, and the peers.
 *
 * Joining (docs/PROTOCOL.md, "Rooms"): the service places the device in the
 * room named by the room id; the first device is the host. A newcomer sends
 * the host a signed "request"; the host answers "approve" (with the ids of
 * the admitted members) or "decline", and a request whose signature fails
 * (wrong code) gets an unsigned "refused". On approval the host and every
 * admitted member ("introduce") offer a connection to the newcomer, which
 * accepts offers only from the members the host listed. So every device ends
 * with one DcPeer per other admitted device: a full mesh.
 *
 * Host leaving: the service hands the room to the longest-admitted member and
 * tells everyone; pending newcomers send their request again to the new host.
 * If no admitted member remains, pending newcomers are told "host-left".
 * Connected peers are not affected by who hosts.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh.h"

#include <gst/gst.h>

#include "dc-mesh-error.h"
#include "dc-signaling.h"

struct _DcMesh
{
  GObject       parent_instance;

  /* owned */
  DcSignaling  *signaling;
  DcMeshConfig  config;
  GHashTable   *peers;      /* signaling id → DcPeer* */
  GHashTable   *admitted;   /* ids the host admitted (host) or listed (newcomer) */
  GHashTable   *pending;    /* host: id → name of requests awaiting an answer */
  DcRoom       *room;

  /* state */
  guint         n_connected;
  guint         approved : 1;
  guint         left : 1;
};

G_DEFINE_FINAL_TYPE (DcMesh, dc_mesh, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_N_PEERS,
  N_PROPS
};

enum {
  SIGNAL_EVENT,
  SIGNAL_APPROVAL_REQUESTED,
  SIGNAL_APPROVAL_WITHDRAWN,
  SIGNAL_MESSAGE,
  SIGNAL_FAILED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

void
dc_mesh_config_clear (DcMeshConfig *config)
{
  g_clear_pointer (&config->signal_url, g_free);
  g_clear_pointer (&config->room_code, g_free);
  g_clear_pointer (&config->room_id_override, g_free);
  g_clear_pointer (&config->hello, dc_mesh_hello_free);
  g_clear_pointer (&config->peer.stun_server, g_free);
  g_clear_pointer (&config->peer.turn_server, g_free);
  g_clear_pointer (&config->peer.ice_addresses, g_strfreev);
}

/**
 * dc_mesh_check_plugins:
 *
 * Checks that the GStreamer plugins behind webrtcbin are installed.
 *
 * Returns: %FALSE with an error naming every missing plugin
 */
gboolean
dc_mesh_check_plugins (GError **error)
{
  const char *needed[] = { "webrtc", "nice", "dtls", "srtp", "sctp" };
  g_autoptr(GString) missing = g_string_new (NULL);
  GstRegistry *registry;

  if (!gst_init_check (NULL, NULL, error))
    return FALSE;
  registry = gst_registry_get ();
  for (guint i = 0; i < G_N_ELEMENTS (needed); i++)
    {
      g_autoptr(GstPlugin) plugin = gst_registry_find_plugin (registry, needed[i]);

      if (plugin == NULL)
        g_string_append_printf (missing, "%s%s", missing->len > 0 ? ", " : "", needed[i]);
    }
  if (missing->len > 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MISSING_PLUGINS,
                   "GStreamer plugins missing: %s (Debian: gstreamer1.0-plugins-bad "
                   "and gstreamer1.0-nice)", missing->str);
      return FALSE;
    }
  return TRUE;
}

static void
emit_event (DcMesh     *self,
            const char *event,
            const char *peer,
            const char *reason)
{
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, event, peer, self->n_connected, reason);
}

static void
fail (DcMesh       *self,
      const GError *error)
{
  if (self->left)
    return;
  self->left = TRUE;
  g_signal_emit (self, signals[SIGNAL_FAILED], 0, error);
}

static void
peer_signal_out_cb (DcPeer     *peer,
                    JsonObject *body,
                    gpointer    user_data)
{
  DcMesh *self = user_data;

  dc_signaling_send (self->signaling, dc_peer_get_id (peer), body);
}

static void
peer_message_cb (DcPeer  *peer,
                 guint    type,
                 GBytes  *payload,
                 gpointer user_data)
{
  DcMesh *self = user_data;

  g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, peer, type, payload);
}

/* A peer counts as connected once its channel is open and its hello came. */
static void
peer_changed_cb (DcPeer     *peer,
                 GParamSpec *pspec,
                 gpointer    user_data)
{
  DcMesh *self = user_data;
  DcPeerState state = dc_peer_get_state (peer);
  gboolean counted = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (peer), "dc-counted"));

  if (!counted && state == DC_PEER_STATE_OPEN && dc_peer_get_name (peer) != NULL)
    {
      g_object_set_data (G_OBJECT (peer), "dc-counted", GINT_TO_POINTER (TRUE));
      self->n_connected++;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_PEERS]);
      emit_event (self, "peer-joined", dc_peer_get_name (peer), NULL);
    }
  else if (state == DC_PEER_STATE_CLOSED || state == DC_PEER_STATE_FAILED)
    {
      G_GNUC_UNUSED g_autoptr(DcPeer) hold = g_object_ref (peer);  /* outlives the removal */
      g_autofree char *name = g_strdup (dc_peer_get_name (peer));

      g_signal_handlers_disconnect_by_data (peer, self);
      g_hash_table_remove (self->peers, dc_peer_get_id (peer));
      if (counted)
        {
          self->n_connected--;
          g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_PEERS]);
          emit_event (self, "peer-left", name, dc_peer_get_reason (peer));
        }
      else
        {
          g_message ("peer %s gave up before connecting (%s)", dc_peer_get_id (peer),
                     dc_peer_get_reason (peer));
        }
    }
}

static DcPeer *
add_peer (DcMesh     *self,
          const char *id,
          gboolean    offerer)
{
  g_autoptr(DcPeer) peer = NULL;
  g_autoptr(GError) error = NULL;

  if (g_hash_table_contains (self->peers, id))
    return g_hash_table_lookup (self->peers, id);
  peer = dc_peer_new (id, offerer, &self->config.peer, self->config.hello);
  g_signal_connect_object (peer, "signal-out", G_CALLBACK (peer_signal_out_cb), self, 0);
  g_signal_connect_object (peer, "message", G_CALLBACK (peer_message_cb), self, 0);
  g_signal_connect_object (peer, "notify::state", G_CALLBACK (peer_changed_cb), self, 0);
  g_signal_connect_object (peer, "notify::name", G_CALLBACK (peer_changed_cb), self, 0);
  g_hash_table_insert (self->peers, g_strdup (id), g_object_ref (peer));
  if (!dc_peer_start (peer, &error))
    {
      g_message ("peer %s cannot start: %s", id, error->message);
      fail (self, error);
      return NULL;
    }
  return peer;
}

static JsonObject *
body_new (const char *kind)
{
  JsonObject *body = json_object_new ();

  json_object_set_string_member (body, "kind", kind);
  return body;
}

static void
approve (DcMesh     *self,
         const char *id,
         const char *name)
{
  g_autoptr(JsonObject) body = body_new ("approve");
  g_autoptr(JsonArray) members = json_array_new ();
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, self->admitted);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    json_array_add_string_element (members, key);
  json_object_set_array_member (body, "members", json_array_ref (members));
  dc_signaling_send (self->signaling, id, body);
  dc_signaling_admit (self->signaling, id);

  /* Ask every admitted member to connect to the newcomer, then connect too. */
  g_hash_table_iter_init (&iter, self->admitted);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      g_autoptr(JsonObject) introduce = body_new ("introduce");

      json_object_set_string_member (introduce, "id", id);
      dc_signaling_send (self->signaling, key, introduce);
    }
  g_hash_table_add (self->admitted, g_strdup (id));
  emit_event (self, "approved", name, NULL);
  add_peer (self, id, TRUE);
}

static void
decline (DcMesh     *self,
         const char *id,
         const char *name)
{
  g_autoptr(JsonObject) body = body_new ("decline");

  dc_signaling_send (self->signaling, id, body);
  emit_event (self, "declined", name, NULL);
}

/**
 * dc_mesh_answer_request:
 * @id: the id from ::approval-requested
 *
 * The host's answer to a request when the policy is %DC_MESH_APPROVE_ASK.
 */
void
dc_mesh_answer_request (DcMesh     *self,
                        const char *id,
                        gboolean    accept)
{
  g_autofree char *name = NULL;
  gpointer stolen = NULL;

  g_return_if_fail (DC_IS_MESH (self));

  if (!g_hash_table_steal_extended (self->pending, id, NULL, &stolen))
    return;
  name = stolen;
  if (accept)
    approve (self, id, name);
  else
    decline (self, id, name);
}

static void
send_request (DcMesh *self)
{
  g_autoptr(JsonObject) body = body_new ("request");

  json_object_set_string_member (body, "name", self->config.hello->name);
  dc_signaling_send (self->signaling, dc_signaling_get_host_id (self->signaling), body);
}

static void
welcome_cb (DcSignaling *signaling,
            const char  *id,
            const char  *host_id,
            gpointer     user_data)
{
  DcMesh *self = user_data;

  if (dc_signaling_is_host (signaling))
    {
      self->approved = TRUE;
      emit_event (self, "joined", NULL, "host");
    }
  else
    {
      send_request (self);
    }
}

static void
host_changed_cb (DcSignaling *signaling,
                 const char  *host_id,
                 gpointer     user_data)
{
  DcMesh *self = user_data;

  if (!self->approved)
    send_request (self);
  else if (dc_signaling_is_host (signaling))
    emit_event (self, "host", NULL, NULL);
}

static void
member_left_cb (DcSignaling *signaling,
                const char  *id,
                gpointer     user_data)
{
  DcMesh *self = user_data;
  DcPeer *peer = g_hash_table_lookup (self->peers, id);

  /* A device that leaves while asking needs no answer any more. */
  if (g_hash_table_remove (self->pending, id))
    g_signal_emit (self, signals[SIGNAL_APPROVAL_WITHDRAWN], 0, id);
  g_hash_table_remove (self->admitted, id);
  /* An open channel is judged by its own heartbeat; a negotiation in
   * progress cannot finish without signaling. */
  if (peer != NULL && dc_peer_get_state (peer) < DC_PEER_STATE_OPEN)
    dc_peer_close (peer, "left");
}

static void
message_cb (DcSignaling *signaling,
            const char  *from,
            JsonObject  *body,
            gpointer     user_data)
{
  DcMesh *self = user_data;
  const char *kind = json_object_get_string_member_with_default (body, "kind", "");
  gboolean from_host = g_strcmp0 (from, dc_signaling_get_host_id (signaling)) == 0;

  if (g_str_equal (kind, "request"))
    {
      const char *name = json_object_get_string_member_with_default (body, "name", "");
      g_autofree char *safe_name = g_utf8_make_valid (name, MIN (strlen (name), 255));

      if (!dc_signaling_is_host (signaling) || g_hash_table_contains (self->admitted, from))
        return;
      switch (self->config.approve)
        {
        case DC_MESH_APPROVE_ALL:
          approve (self, from, safe_name);
          break;
        case DC_MESH_APPROVE_NONE:
          decline (self, from, safe_name);
          break;
        case DC_MESH_APPROVE_ASK:
        default:
          if (g_hash_table_contains (self->pending, from))
            return;
          g_hash_table_insert (self->pending, g_strdup (from), g_strdup (safe_name));
          emit_event (self, "request", safe_name, NULL);
          g_signal_emit (self, signals[SIGNAL_APPROVAL_REQUESTED], 0, from, safe_name);
          break;
        }
    }
  else if (g_str_equal (kind, "approve") && from_host && !self->approved)
    {
      JsonArray *members = json_object_get_array_member (body, "members");

      if (members != NULL)
        for (guint i = 0; i < json_array_get_length (members) && i < 64; i++)
          {
            const char *id = json_array_get_string_element (members, i);

            if (id != NULL)
              g_hash_table_add (self->admitted, g_strdup (id));
          }
      g_hash_table_add (self->admitted, g_strdup (from));
      self->approved = TRUE;
      emit_event (self, "approved", NULL, NULL);
      emit_event (self, "joined", NULL, "member");
    }
  else if (g_str_equal (kind, "decline") && from_host && !self->approved)
    {
      g_autoptr(GError) error = g_error_new_literal (DC_MESH_ERROR, DC_MESH_ERROR_DECLINED,
                                                     "The room's host declined this device");

      emit_event (self, "declined", NULL, NULL);
      fail (self, error);
    }
  else if (g_str_equal (kind, "introduce") && from_host && self->approved)
    {
      const char *id = json_object_get_string_member_with_default (body, "id", NULL);

      if (id != NULL && g_strcmp0 (id, dc_signaling_get_id (signaling)) != 0)
        {
          g_hash_table_add (self->admitted, g_strdup (id));
          add_peer (self, id, TRUE);
        }
    }
  else if (g_str_equal (kind, "offer"))
    {
      DcPeer *peer;

      if (!self->approved || !g_hash_table_contains (self->admitted, from))
        {
          g_message ("offer from %s, who was not admitted, ignored", from);
          return;
        }
      peer = add_peer (self, from, FALSE);
      if (peer != NULL)
        dc_peer_handle_signal (peer, body);
    }
  else if (g_str_equal (kind, "answer") || g_str_equal (kind, "ice"))
    {
      DcPeer *peer = g_hash_table_lookup (self->peers, from);

      if (peer != NULL)
        dc_peer_handle_signal (peer, body);
    }
}

static void
refused_cb (DcSignaling *signaling,
            const char  *from,
            JsonObject  *body,
            gpointer     user_data)
{
  DcMesh *self = user_data;
  const char *kind = json_object_get_string_member_with_default (body, "kind", "");

  if (g_str_equal (kind, "request") && dc_signaling_is_host (signaling))
    {
      g_autoptr(JsonObject) answer = body_new ("refused");

      /* Unsigned on purpose: the newcomer has no key we share. */
      dc_signaling_send_unsigned (signaling, from, answer);
      emit_event (self, "refused", NULL, "auth");
    }
  else if (g_str_equal (kind, "refused") && !self->approved
           && g_strcmp0 (from, dc_signaling_get_host_id (signaling)) == 0)
    {
      g_autoptr(GError) error = NULL;

      error = g_error_new_literal (DC_MESH_ERROR, DC_MESH_ERROR_AUTH,
                                   "The room's host could not verify this device: "
                                   "the room code is wrong");
      emit_event (self, "declined", NULL, "auth");
      fail (self, error);
    }
}

static void
failed_cb (DcSignaling  *signaling,
           const GError *error,
           gpointer      user_data)
{
  DcMesh *self = user_data;

  /* Once in the mesh, peers live on without the service. */
  if (self->approved && error->code != DC_MESH_ERROR_NO_ROOM)
    {
      g_message ("signaling lost, peers stay connected: %s", error->message);
      return;
    }
  fail (self, error);
}

DcMesh *
dc_mesh_new (const DcMeshConfig *config)
{
  DcMesh *self = g_object_new (DC_TYPE_MESH, NULL);

  self->config.signal_url = g_strdup (config->signal_url);
  self->config.room_code = g_strdup (config->room_code);
  self->config.room_id_override = g_strdup (config->room_id_override);
  self->config.create = config->create;
  self->config.approve = config->approve;
  self->config.hello = dc_mesh_hello_new (config->hello->name, config->hello->backend,
                                          config->hello->probe_hash,
                                          config->hello->numeric_rule_id);
  self->config.peer.stun_server = g_strdup (config->peer.stun_server);
  self->config.peer.turn_server = g_strdup (config->peer.turn_server);
  self->config.peer.ice_addresses = g_strdupv (config->peer.ice_addresses);
  return self;
}

void
dc_mesh_start (DcMesh *self)
{
  g_return_if_fail (DC_IS_MESH (self));
  g_return_if_fail (self->signaling == NULL);

  self->room = dc_room_new (self->config.room_code);
  self->signaling = dc_signaling_new (self->config.signal_url, self->room,
                                      self->config.room_id_override);
  g_signal_connect_object (self->signaling, "welcome", G_CALLBACK (welcome_cb), self, 0);
  g_signal_connect_object (self->signaling, "message", G_CALLBACK (message_cb), self, 0);
  g_signal_connect_object (self->signaling, "refused", G_CALLBACK (refused_cb), self, 0);
  g_signal_connect_object (self->signaling, "host-changed", G_CALLBACK (host_changed_cb),
                           self, 0);
  g_signal_connect_object (self->signaling, "member-left", G_CALLBACK (member_left_cb), self, 0);
  g_signal_connect_object (self->signaling, "failed", G_CALLBACK (failed_cb), self, 0);
  dc_signaling_connect (self->signaling, self->config.create);
}

/**
 * dc_mesh_leave:
 *
 * Says bye to every connected peer and closes signaling. The peers stay
 * until the mesh is disposed, so give the byes a moment (the CLI waits
 * 200 ms) before dropping it.
 */
void
dc_mesh_leave (DcMesh *self)
{
  g_autoptr(GPtrArray) peers = NULL;

  g_return_if_fail (DC_IS_MESH (self));

  self->left = TRUE;
  peers = dc_mesh_dup_peers (self);
  for (guint i = 0; i < peers->len; i++)
    dc_peer_say_bye (g_ptr_array_index (peers, i));
  if (self->signaling != NULL)
    dc_signaling_close (self->signaling);
}

/**
 * dc_mesh_dup_peers:
 *
 * Returns: (transfer container) (element-type DcPeer): every peer, in any state
 */
GPtrArray *
dc_mesh_dup_peers (DcMesh *self)
{
  GPtrArray *peers = g_ptr_array_new_with_free_func (g_object_unref);
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_ptr_array_add (peers, g_object_ref (value));
  return peers;
}

guint
dc_mesh_get_n_peers (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), 0);
  return self->n_connected;
}

gboolean
dc_mesh_is_host (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), FALSE);
  return self->signaling != NULL && dc_signaling_is_host (self->signaling);
}

static void
dc_mesh_dispose (GObject *object)
{
  DcMesh *self = DC_MESH (object);

  if (self->peers != NULL)
    {
      GHashTableIter iter;
      gpointer value;

      g_hash_table_iter_init (&iter, self->peers);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        g_signal_handlers_disconnect_by_data (value, self);
      g_hash_table_remove_all (self->peers);
    }
  g_clear_object (&self->signaling);

  G_OBJECT_CLASS (dc_mesh_parent_class)->dispose (object);
}

static void
dc_mesh_finalize (GObject *object)
{
  DcMesh *self = DC_MESH (object);

  g_hash_table_unref (self->peers);
  g_hash_table_unref (self->admitted);
  g_hash_table_unref (self->pending);
  g_clear_pointer (&self->room, dc_room_free);
  dc_mesh_config_clear (&self->config);

  G_OBJECT_CLASS (dc_mesh_parent_class)->finalize (object);
}

static void
dc_mesh_get_property (GObject    *object,
                      guint       prop_id,
                      GValue     *value,
                      GParamSpec *pspec)
{
  DcMesh *self = DC_MESH (object);

  switch (prop_id)
    {
    case PROP_N_PEERS:
      g_value_set_uint (value, self->n_connected);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_mesh_class_init (DcMeshClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_mesh_dispose;
  object_class->finalize = dc_mesh_finalize;
  object_class->get_property = dc_mesh_get_property;

  properties[PROP_N_PEERS] =
    g_param_spec_uint ("n-peers", NULL, NULL, 0, G_MAXUINT, 0,
                       G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /* (event, peer name or NULL, connected peers, reason or NULL): joined,
   * approved, declined, request, refused, host, peer-joined, peer-left. */
  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 4, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_UINT, G_TYPE_STRING);
  /* (id, name): the host must call dc_mesh_answer_request(). */
  signals[SIGNAL_APPROVAL_REQUESTED] =
    g_signal_new ("approval-requested", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
  /* (id): the device of that ::approval-requested left before an answer. */
  signals[SIGNAL_APPROVAL_WITHDRAWN] =
    g_signal_new ("approval-withdrawn", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  /* (peer, type, payload). */
  signals[SIGNAL_MESSAGE] =
    g_signal_new ("message", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, DC_TYPE_PEER, G_TYPE_UINT, G_TYPE_BYTES);
  /* (error): joining failed or was declined; the mesh is done. */
  signals[SIGNAL_FAILED] =
    g_signal_new ("failed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
}

static void
dc_mesh_init (DcMesh *self)
{
  self->peers = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->admitted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}
