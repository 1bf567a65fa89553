/* dc-mesh.c: rooms with host approval on top of DcSignaling, and the peers.
 *
 * Joining (docs/PROTOCOL.md, "Rooms"): the service places the device in the
 * room named by the room id; the first device is the host. A newcomer sends
 * the host a signed "request"; the host answers "approve" (with the ids of
 * the admitted members) or "decline", and a request whose signature fails
 * (wrong code) gets a "refused", signed like every verdict: a newcomer acts
 * only on verdicts that pass the room's MAC, so the service cannot forge
 * one. The request carries the newcomer's DTLS fingerprint, and the host
 * (and, through "introduce", every member) closes a connection whose answer
 * shows another certificate. A declined device gets no new dialog for
 * DC_MESH_DECLINE_COOLDOWN_S. On approval the host and every
 * admitted member ("introduce") offer a connection to the newcomer, which
 * accepts offers only from the members the host listed. So every device ends
 * with one DcPeer per other admitted device: a full mesh.
 *
 * Host leaving: the service hands the room to the longest-admitted member and
 * tells everyone; pending newcomers send their request again to the new host.
 * If no admitted member remains, pending newcomers are told "host-left".
 * Connected peers are not affected by who hosts.
 *
 * A connection that sends slowly is replaced by a new one to the same
 * device (dc-mesh-renewal.c); the table then holds the new DcPeer under the
 * same id, so users find peers by id.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh.h"

#include <gst/gst.h>

#include <string.h>

#include "dc-identity.h"
#include "dc-mesh-error.h"
#include "dc-mesh-private.h"
#include "dc-signaling.h"

/* A request waiting for the host's answer: what the dialog shows. */
typedef struct
{
  char *name;
  char *fingerprint;   /* the newcomer's DTLS certificate, "" when it sent none */
  char *address;       /* as the signaling service saw it, "" when unknown */
} Request;

static void
request_free (Request *request)
{
  g_free (request->name);
  g_free (request->fingerprint);
  g_free (request->address);
  g_free (request);
}


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
  g_clear_pointer (&config->fingerprint_override, g_free);
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
  /* webrtcbin makes appsrc and appsink inside (gst-plugins-base's "app"):
   * without them it fails with criticals and the channel never opens. */
  const char *needed[] = { "webrtc", "nice", "dtls", "srtp", "sctp", "app" };
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
                   "GStreamer plugins missing: %s (Debian: gstreamer1.0-plugins-bad, "
                   "gstreamer1.0-nice and gstreamer1.0-plugins-base)", missing->str);
      return FALSE;
    }
  return TRUE;
}

void
_dc_mesh_emit_event (DcMesh     *self,
                     const char *event,
                     const char *peer,
                     const char *reason)
{
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, event, peer, self->n_connected, reason);
}

void
_dc_mesh_emit_message (DcMesh *self,
                       DcPeer *peer,
                       guint   type,
                       GBytes *payload)
{
  g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, peer, type, payload);
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

void
_dc_mesh_peer_signal_out_cb (DcPeer     *peer,
                             JsonObject *body,
                             gpointer    user_data)
{
  DcMesh *self = user_data;
  guint generation = _dc_mesh_peer_generation (peer);

  /* A renewal's connection: the other mesh routes it to its own. */
  if (generation > 1)
    json_object_set_int_member (body, "generation", generation);
  dc_signaling_send (self->signaling, dc_peer_get_id (peer), body);
}

void
_dc_mesh_peer_message_cb (DcPeer  *peer,
                          guint    type,
                          GBytes  *payload,
                          gpointer user_data)
{
  DcMesh *self = user_data;

  /* Markers, and what a new connection brings before the old one's last
   * message, are the renewal's (dc-mesh-renewal.c). */
  if (_dc_mesh_renewal_take_message (self, peer, type, payload))
    return;
  _dc_mesh_emit_message (self, peer, type, payload);
}

static gboolean
name_in_use (DcMesh     *self,
             const char *name)
{
  GHashTableIter iter;
  gpointer value;

  if (g_strcmp0 (name, self->config.hello->name) == 0)
    return TRUE;
  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (g_object_get_data (value, "dc-counted") != NULL
        && g_strcmp0 (dc_peer_get_name (value), name) == 0)
      return TRUE;
  return FALSE;
}

/* Names are what people pick devices by, and each device chose its own: a
 * second "laptop" is shown as "laptop (2)" here (the first keeps its name;
 * this device's own name is never changed). Bounded by the room's 64 members. */
static void
make_name_unique (DcMesh *self,
                  DcPeer *peer)
{
  g_autofree char *base = g_strdup (dc_peer_get_name (peer));

  if (!name_in_use (self, base))
    return;
  for (guint n = 2; ; n++)
    {
      g_autofree char *candidate = g_strdup_printf ("%s (%u)", base, n);

      if (!name_in_use (self, candidate))
        {
          g_message ("peer %s calls itself “%s” like another device: shown as “%s”",
                     dc_peer_get_id (peer), base, candidate);
          dc_peer_set_display_name (peer, candidate);
          return;
        }
    }
}

/* A peer counts as connected once its channel is open and its hello came. */
void
_dc_mesh_peer_changed_cb (DcPeer     *peer,
                          GParamSpec *pspec,
                          gpointer    user_data)
{
  DcMesh *self = user_data;
  DcPeerState state = dc_peer_get_state (peer);
  gboolean counted = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (peer), "dc-counted"));

  if (!counted && state == DC_PEER_STATE_OPEN && dc_peer_get_name (peer) != NULL)
    {
      make_name_unique (self, peer);
      g_object_set_data (G_OBJECT (peer), "dc-counted", GINT_TO_POINTER (TRUE));
      self->n_connected++;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_PEERS]);
      _dc_mesh_emit_event (self, "peer-joined", dc_peer_get_name (peer), NULL);
    }
  else if (state == DC_PEER_STATE_CLOSED || state == DC_PEER_STATE_FAILED)
    {
      G_GNUC_UNUSED g_autoptr(DcPeer) hold = g_object_ref (peer);  /* outlives the removal */
      g_autofree char *name = g_strdup (dc_peer_get_name (peer));
      guint episodes;
      gint64 slow_us;

      if (g_hash_table_lookup (self->peers, dc_peer_get_id (peer)) != peer)
        {
          g_signal_handlers_disconnect_by_data (peer, self);
          return;
        }
      /* The device is gone: a renewal with it (not yet swapped: its new
       * connection; swapped: the old one) goes too. */
      _dc_mesh_renewal_forget (self, dc_peer_get_id (peer));
      dc_peer_get_slow_sending (peer, &episodes, &slow_us);
      self->slow_left_episodes += episodes;
      self->slow_left_us += slow_us;
      g_signal_handlers_disconnect_by_data (peer, self);
      _dc_mesh_retire (self, g_object_ref (peer));
      g_hash_table_remove (self->peers, dc_peer_get_id (peer));
      if (counted)
        {
          self->n_connected--;
          g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_PEERS]);
          _dc_mesh_emit_event (self, "peer-left", name, dc_peer_get_reason (peer));
        }
      else
        {
          g_message ("peer %s gave up before connecting (%s)", dc_peer_get_id (peer),
                     dc_peer_get_reason (peer));
        }
    }
}

/* How often a retiring connection's close is looked at. */
#define RETIRE_POLL_MS 10

static gboolean
retire_poll_cb (gpointer user_data)
{
  DcMesh *self = user_data;

  /* Removing one drops its last reference: its dispose stops the
   * pipeline, the close being done. */
  for (guint i = self->retiring->len; i > 0; i--)
    if (dc_peer_close_is_done (g_ptr_array_index (self->retiring, i - 1)))
      g_ptr_array_remove_index (self->retiring, i - 1);
  if (self->retiring->len > 0)
    return G_SOURCE_CONTINUE;
  self->retire_id = 0;
  return G_SOURCE_REMOVE;
}

/* Takes @peer (closed or failed, no longer in the table) and disposes of it
 * once its data channels have closed, from the main loop: its last
 * reference dropped at once would wait for the remote's answer to the
 * close in its dispose, up to a second of this thread, while every device
 * of a training group waited for this one (docs/BENCHMARKS.md, s22). */
void
_dc_mesh_retire (DcMesh *self,
                 DcPeer *peer)
{
  dc_peer_begin_close (peer);
  g_ptr_array_add (self->retiring, peer);
  if (self->retire_id == 0)
    self->retire_id = g_timeout_add (RETIRE_POLL_MS, retire_poll_cb, self);
}

/* Slow sending to a peer (dc-send-pace.c): an event with the peer's line as
 * its reason. */
void
_dc_mesh_peer_slow_sending_cb (DcPeer     *peer,
                               gboolean    slow,
                               const char *text,
                               gpointer    user_data)
{
  DcMesh *self = user_data;

  _dc_mesh_emit_event (self, slow ? "slow-sending" : "sending-recovered", dc_peer_get_name (peer),
                       text);
  if (slow)
    _dc_mesh_renewal_maybe_start (self, peer);
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
  g_signal_connect_object (peer, "signal-out", G_CALLBACK (_dc_mesh_peer_signal_out_cb), self, 0);
  g_signal_connect_object (peer, "message", G_CALLBACK (_dc_mesh_peer_message_cb), self, 0);
  g_signal_connect_object (peer, "slow-sending", G_CALLBACK (_dc_mesh_peer_slow_sending_cb),
                           self, 0);
  g_signal_connect_object (peer, "notify::state", G_CALLBACK (_dc_mesh_peer_changed_cb), self, 0);
  g_signal_connect_object (peer, "notify::name", G_CALLBACK (_dc_mesh_peer_changed_cb), self, 0);
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
         const char *name,
         const char *fingerprint)
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
      if (dc_identity_fingerprint_is_valid (fingerprint))
        json_object_set_string_member (introduce, "fingerprint", fingerprint);
      dc_signaling_send (self->signaling, key, introduce);
    }
  /* The certificate shown in the dialog is the one the connection must use. */
  if (dc_identity_fingerprint_is_valid (fingerprint))
    g_hash_table_insert (self->pins, g_strdup (id), g_ascii_strup (fingerprint, -1));
  g_hash_table_add (self->admitted, g_strdup (id));
  _dc_mesh_emit_event (self, "approved", name, NULL);
  add_peer (self, id, TRUE);
}

/* A decline holds for the device's certificate and for its address: a new
 * process has a new certificate, but not a new address on a LAN. */
static gboolean
cooling_down (DcMesh     *self,
              const char *key)
{
  const gint64 *declined_at = g_hash_table_lookup (self->declined, key);

  return declined_at != NULL
         && g_get_monotonic_time () - *declined_at < DC_MESH_DECLINE_COOLDOWN_S * G_USEC_PER_SEC;
}

static void
decline (DcMesh     *self,
         const char *id,
         const char *name,
         const char *fingerprint,
         const char *address)
{
  g_autoptr(JsonObject) body = body_new ("decline");

  /* The cap keeps the table small under a flood of certificates; dropping
   * it all only shortens cool-downs already running. */
  gint64 now = g_get_monotonic_time ();

  if (g_hash_table_size (self->declined) + 2 > DC_MESH_MAX_DECLINED)
    g_hash_table_remove_all (self->declined);
  if (*fingerprint != '\0')
    g_hash_table_insert (self->declined, g_strconcat ("fp ", fingerprint, NULL),
                         g_memdup2 (&now, sizeof now));
  if (*address != '\0')
    g_hash_table_insert (self->declined, g_strconcat ("address ", address, NULL),
                         g_memdup2 (&now, sizeof now));
  dc_signaling_send (self->signaling, id, body);
  _dc_mesh_emit_event (self, "declined", name, NULL);
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
  g_autofree char *key = NULL;
  Request *request = NULL;

  g_return_if_fail (DC_IS_MESH (self));

  if (!g_hash_table_steal_extended (self->pending, id, (gpointer *) &key, (gpointer *) &request))
    return;
  if (accept)
    approve (self, id, request->name, request->fingerprint);
  else
    decline (self, id, request->name, request->fingerprint, request->address);
  request_free (request);
}

static void
send_request (DcMesh *self)
{
  g_autoptr(JsonObject) body = body_new ("request");

  g_autoptr(GError) error = NULL;
  const char *fingerprint = self->config.fingerprint_override != NULL
                            ? self->config.fingerprint_override
                            : dc_identity_get_local_fingerprint (&error);

  json_object_set_string_member (body, "name", self->config.hello->name);
  if (fingerprint != NULL)
    json_object_set_string_member (body, "fingerprint", fingerprint);
  else
    g_message ("the join request goes without a fingerprint: %s", error->message);
  dc_signaling_send (self->signaling, dc_signaling_get_host_id (self->signaling), body);
}

static void
welcome_cb (DcSignaling *signaling,
            const char  *id,
            const char  *host_id,
            gpointer     user_data)
{
  DcMesh *self = user_data;

  /* This device's address and fingerprint are known now (dc_mesh_get_address()). */
  _dc_mesh_emit_event (self, "identity", NULL, NULL);
  if (dc_signaling_is_host (signaling))
    {
      self->approved = TRUE;
      _dc_mesh_emit_event (self, "joined", NULL, "host");
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
    _dc_mesh_emit_event (self, "host", NULL, NULL);
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
  /* The pin stays: "left" comes from the service, unauthenticated. */
  /* An open channel is judged by its own heartbeat; a negotiation in
   * progress cannot finish without signaling. */
  if (peer != NULL && dc_peer_get_state (peer) < DC_PEER_STATE_OPEN)
    dc_peer_close (peer, "left");
  /* Likewise a renewal's connection. */
  _dc_mesh_renewal_drop_unswapped (self, id, "the device left the signaling service");
}

/* Host: a request that may not open a dialog. A device declined less than
 * DC_MESH_DECLINE_COOLDOWN_S ago (same certificate or same address) and an
 * address with DC_MESH_MAX_PENDING_PER_ADDRESS requests already waiting get
 * a signed "refused" and no ::approval-requested. */
static gboolean
refuse_request (DcMesh     *self,
                const char *from,
                const char *name,
                const char *fingerprint,
                const char *address)
{
  g_autofree char *fp_key = g_strconcat ("fp ", fingerprint, NULL);
  g_autofree char *address_key = g_strconcat ("address ", address, NULL);
  const char *reason = NULL;

  if ((*fingerprint != '\0' && cooling_down (self, fp_key))
      || (*address != '\0' && cooling_down (self, address_key)))
    reason = "cooldown";
  else if (self->config.approve == DC_MESH_APPROVE_ASK && *address != '\0')
    {
      GHashTableIter iter;
      gpointer value;
      guint n = 0;

      g_hash_table_iter_init (&iter, self->pending);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        if (g_str_equal (((Request *) value)->address, address))
          n++;
      if (n >= DC_MESH_MAX_PENDING_PER_ADDRESS)
        reason = "busy";
    }
  if (reason == NULL)
    return FALSE;
  g_message ("request from %s (“%s”, %s) refused: %s", from, name,
             *address != '\0' ? address : "address unknown", reason);
  {
    g_autoptr(JsonObject) answer = body_new ("refused");

    json_object_set_string_member (answer, "reason", reason);
    dc_signaling_send (self->signaling, from, answer);
  }
  _dc_mesh_emit_event (self, "refused", name, reason);
  return TRUE;
}

/* The certificate a connection's offer or answer showed: a renewal's new
 * connection must show it again. */
static void
remember_certificate (DcPeer     *peer,
                      JsonObject *body)
{
  const char *sdp = json_object_get_string_member_with_default (body, "sdp", "");
  char *fingerprint;

  if (g_object_get_data (G_OBJECT (peer), "dc-remote-fp") != NULL)
    return;
  fingerprint = dc_identity_sdp_fingerprint (sdp);
  if (fingerprint != NULL)
    g_object_set_data_full (G_OBJECT (peer), "dc-remote-fp", fingerprint, g_free);
}

/* An answer from a device whose certificate was shown when it was admitted
 * (or, on a renewal's connection, shown by its first connection) must
 * carry that certificate; otherwise someone else answers in its name. */
static gboolean
answer_matches_pin (DcMesh     *self,
                    const char *from,
                    DcPeer     *peer,
                    JsonObject *body)
{
  const char *pin = _dc_mesh_peer_generation (peer) > 1
                    ? g_object_get_data (G_OBJECT (peer), "dc-remote-fp")
                    : g_hash_table_lookup (self->pins, from);
  const char *sdp = json_object_get_string_member_with_default (body, "sdp", "");
  g_autofree char *fingerprint = NULL;

  if (pin == NULL)
    return TRUE;
  fingerprint = dc_identity_sdp_fingerprint (sdp);
  if (g_strcmp0 (fingerprint, pin) == 0)
    return TRUE;
  g_message ("answer from %s carries another certificate (%s) than its request (%s): "
             "connection closed", from, fingerprint != NULL ? fingerprint : "none", pin);
  return FALSE;
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
      const char *fingerprint = json_object_get_string_member_with_default (body, "fingerprint",
                                                                            "");
      const char *address = dc_signaling_get_peer_address (signaling, from);
      g_autofree char *safe_name = g_utf8_make_valid (name, MIN (strlen (name), 255));
      g_autofree char *safe_fingerprint = NULL;
      Request *request;

      if (!dc_signaling_is_host (signaling) || g_hash_table_contains (self->admitted, from))
        return;
      safe_fingerprint = dc_identity_fingerprint_is_valid (fingerprint)
                         ? g_ascii_strup (fingerprint, -1) : g_strdup ("");
      if (address == NULL)
        address = "";
      if (refuse_request (self, from, safe_name, safe_fingerprint, address))
        return;
      switch (self->config.approve)
        {
        case DC_MESH_APPROVE_ALL:
          approve (self, from, safe_name, safe_fingerprint);
          break;
        case DC_MESH_APPROVE_NONE:
          decline (self, from, safe_name, safe_fingerprint, address);
          break;
        case DC_MESH_APPROVE_ASK:
        default:
          if (g_hash_table_contains (self->pending, from))
            return;
          request = g_new0 (Request, 1);
          request->name = g_strdup (safe_name);
          request->fingerprint = g_strdup (safe_fingerprint);
          request->address = g_strdup (address);
          g_hash_table_insert (self->pending, g_strdup (from), request);
          _dc_mesh_emit_event (self, "request", safe_name, NULL);
          g_signal_emit (self, signals[SIGNAL_APPROVAL_REQUESTED], 0, from, safe_name,
                         safe_fingerprint, address);
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
      _dc_mesh_emit_event (self, "approved", NULL, NULL);
      _dc_mesh_emit_event (self, "joined", NULL, "member");
    }
  else if (g_str_equal (kind, "decline") && from_host && !self->approved)
    {
      g_autoptr(GError) error = g_error_new_literal (DC_MESH_ERROR, DC_MESH_ERROR_DECLINED,
                                                     "The room's host declined this device");

      _dc_mesh_emit_event (self, "declined", NULL, NULL);
      fail (self, error);
    }
  else if (g_str_equal (kind, "refused") && from_host && !self->approved)
    {
      const char *reason = json_object_get_string_member_with_default (body, "reason", "");
      g_autoptr(GError) error = NULL;

      /* Signed by the host: it shares our code and refuses for a reason. */
      if (g_str_equal (reason, "cooldown"))
        error = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_DECLINED,
                             "The room's host declined this device less than %d s ago: "
                             "ask again later", DC_MESH_DECLINE_COOLDOWN_S);
      else if (g_str_equal (reason, "busy"))
        error = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_DECLINED,
                             "The room's host has %d requests from this address waiting: "
                             "ask again later", DC_MESH_MAX_PENDING_PER_ADDRESS);
      else
        error = g_error_new_literal (DC_MESH_ERROR, DC_MESH_ERROR_DECLINED,
                                     "The room's host refused this device");
      /* Only reasons this version knows reach the event. */
      _dc_mesh_emit_event (self, "declined", NULL,
                  g_str_equal (reason, "cooldown") || g_str_equal (reason, "busy") ? reason
                                                                                  : NULL);
      fail (self, error);
    }
  else if (g_str_equal (kind, "introduce") && from_host && self->approved)
    {
      const char *id = json_object_get_string_member_with_default (body, "id", NULL);
      const char *fingerprint = json_object_get_string_member_with_default (body, "fingerprint",
                                                                            NULL);

      if (id != NULL && g_strcmp0 (id, dc_signaling_get_id (signaling)) != 0)
        {
          if (dc_identity_fingerprint_is_valid (fingerprint))
            g_hash_table_insert (self->pins, g_strdup (id), g_ascii_strup (fingerprint, -1));
          g_hash_table_add (self->admitted, g_strdup (id));
          add_peer (self, id, TRUE);
        }
    }
  else if (g_str_equal (kind, "offer"))
    {
      DcPeer *peer;
      guint generation;

      if (!self->approved || !g_hash_table_contains (self->admitted, from))
        {
          g_message ("offer from %s, who was not admitted, ignored", from);
          return;
        }
      generation = _dc_mesh_body_generation (body);
      if (generation == 0)
        {
          g_message ("offer from %s with an invalid generation ignored", from);
          return;
        }
      if (generation > 1)
        {
          _dc_mesh_renewal_offer (self, from, generation, body);
          return;
        }
      peer = add_peer (self, from, FALSE);
      if (peer != NULL)
        {
          remember_certificate (peer, body);
          dc_peer_handle_signal (peer, body);
        }
    }
  else if (g_str_equal (kind, "answer") || g_str_equal (kind, "ice"))
    {
      guint generation = _dc_mesh_body_generation (body);
      DcPeer *peer = generation != 0 ? _dc_mesh_renewal_route_signal (self, from, generation)
                                     : NULL;

      if (peer != NULL && g_str_equal (kind, "answer") && !answer_matches_pin (self, from, peer,
                                                                              body))
        {
          _dc_mesh_emit_event (self, "refused", NULL, "fingerprint");
          if (!_dc_mesh_renewal_refuse_peer (self, peer, "another certificate"))
            dc_peer_close (peer, "fingerprint");
          return;
        }
      if (peer != NULL && g_str_equal (kind, "answer"))
        remember_certificate (peer, body);
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

      /* Signed like every verdict, so a device with the wrong code cannot
       * verify it and stays waiting: it cannot tell this answer from one the
       * service forged (docs/SECURITY.md). */
      json_object_set_string_member (answer, "reason", "auth");
      dc_signaling_send (signaling, from, answer);
      _dc_mesh_emit_event (self, "refused", NULL, "auth");
    }
  else if (!g_str_equal (kind, "request"))
    {
      /* A verdict (refused, decline, approve, introduce) or any other body
       * that fails the room's MAC changes nothing here. */
      g_message ("unauthenticated “%s” from %s ignored: the room code differs from the "
                 "host's, or the signaling service tampers", kind, from);
      _dc_mesh_emit_event (self, "unverified", NULL, kind);
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
  self->config.fingerprint_override = g_strdup (config->fingerprint_override);
  self->config.create = config->create;
  self->config.approve = config->approve;
  self->config.no_renewal = config->no_renewal;
  self->config.hello = dc_mesh_hello_copy (config->hello);
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
  self->renew_check_id = g_timeout_add (DC_MESH_RENEW_CHECK_MS, _dc_mesh_renewal_check_cb, self);
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
  /* Renewals end here: their connections close without a word. */
  g_hash_table_remove_all (self->renewals);
  peers = dc_mesh_dup_peers (self);
  for (guint i = 0; i < peers->len; i++)
    dc_peer_say_bye (g_ptr_array_index (peers, i));
  if (self->signaling != NULL)
    dc_signaling_close (self->signaling);
}

/* dc_mesh_flush () ---------------------------------------------------------- */

typedef struct
{
  DcMesh        *mesh;
  GHashTable    *waiting;     /* ids of the peers whose PONG is awaited */
  guint64        seq;
  gint64         deadline_us;
  guint          poll_id;
  gulong         message_id;
  DcMeshFlushed  done;
  gpointer       user_data;
} Flush;

static gboolean
flush_done_cb (gpointer user_data)
{
  Flush *flush = user_data;

  flush->done (flush->user_data);
  g_object_unref (flush->mesh);
  g_free (flush);
  return G_SOURCE_REMOVE;
}

static void
flush_finish (Flush *flush)
{
  g_clear_handle_id (&flush->poll_id, g_source_remove);
  g_clear_signal_handler (&flush->message_id, flush->mesh);
  g_clear_pointer (&flush->waiting, g_hash_table_unref);
  /* From the main loop, never from inside the mesh's signal (which the
   * mesh's last reference must not end either). */
  g_idle_add (flush_done_cb, flush);
}

/* Peers that left or closed answer nothing: they are no longer waited for. */
static gboolean
flush_poll_cb (gpointer user_data)
{
  Flush *flush = user_data;
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, flush->waiting);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      DcPeer *peer = g_hash_table_lookup (flush->mesh->peers, key);

      if (peer == NULL || dc_peer_get_state (peer) != DC_PEER_STATE_OPEN)
        g_hash_table_iter_remove (&iter);
    }
  if (g_hash_table_size (flush->waiting) == 0
      || g_get_monotonic_time () >= flush->deadline_us)
    {
      flush->poll_id = 0;
      flush_finish (flush);
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
flush_message_cb (DcMesh  *mesh,
                  DcPeer  *peer,
                  guint    type,
                  GBytes  *payload,
                  gpointer user_data)
{
  Flush *flush = user_data;
  guint64 seq;
  gint64 sent_us;

  if (type != DC_MESH_MSG_PONG || !dc_mesh_heartbeat_decode (payload, &seq, &sent_us, NULL))
    return;
  if (seq != flush->seq || !g_hash_table_remove (flush->waiting, dc_peer_get_id (peer)))
    return;
  if (g_hash_table_size (flush->waiting) == 0)
    {
      g_source_remove (flush->poll_id);
      flush->poll_id = 0;
      flush_finish (flush);
    }
}

/**
 * dc_mesh_flush:
 * @timeout_ms: the longest wait
 * @done: called from the main loop once every peer open now answered a PING
 *   sent now (so it has read everything this device queued to it before),
 *   left, or @timeout_ms passed
 *
 * For a device about to leave: its last messages (a step report that
 * stops the group by the sync guard, say) reach the others before its bye
 * closes the channels and the process ends, whatever the machine's load.
 */
void
dc_mesh_flush (DcMesh        *self,
               guint          timeout_ms,
               DcMeshFlushed  done,
               gpointer       user_data)
{
  Flush *flush;
  g_autoptr(GPtrArray) peers = NULL;
  gint64 now = g_get_monotonic_time ();
  g_autoptr(GBytes) payload = NULL;

  g_return_if_fail (DC_IS_MESH (self));
  g_return_if_fail (done != NULL);

  flush = g_new0 (Flush, 1);
  flush->mesh = g_object_ref (self);
  flush->waiting = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  flush->seq = ((guint64) g_random_int () << 32) | g_random_int ();
  flush->deadline_us = now + (gint64) timeout_ms * 1000;
  flush->done = done;
  flush->user_data = user_data;
  payload = dc_mesh_heartbeat_encode (flush->seq, now);
  /* A copy: a send that finds its channel closing closes the peer, which
   * leaves the table (seen in CI: the iterator's version check). */
  peers = dc_mesh_dup_peers (self);
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (dc_peer_get_state (peer) == DC_PEER_STATE_OPEN
          && dc_peer_send (peer, DC_MESH_MSG_PING, payload, NULL))
        g_hash_table_add (flush->waiting, g_strdup (dc_peer_get_id (peer)));
    }
  flush->message_id = g_signal_connect (self, "message", G_CALLBACK (flush_message_cb), flush);
  flush->poll_id = g_timeout_add (20, flush_poll_cb, flush);
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

/**
 * dc_mesh_send_object:
 * @info: run id, step, rank and position of @object
 * @object: a gradient or a weight blob
 * @n_peers: (out) (optional): how many peers it was queued to
 *
 * Cuts @object into chunks once and queues them to every open peer, each
 * under its own credit window (dc_peer_send_chunks()). Peers that are not
 * open are skipped; that is not an error.
 *
 * Returns: %FALSE when @object cannot be chunked (empty, over its cap)
 */
gboolean
dc_mesh_send_object (DcMesh             *self,
                     guint               type,
                     const DcMeshChunk  *info,
                     GBytes             *object,
                     guint              *n_peers,
                     GError            **error)
{
  g_autoptr(GPtrArray) bodies = NULL;
  g_autoptr(GPtrArray) peers = NULL;
  guint n = 0;

  g_return_val_if_fail (DC_IS_MESH (self), FALSE);

  if (n_peers != NULL)
    *n_peers = 0;
  bodies = dc_mesh_chunks_split (type, info, object, error);
  if (bodies == NULL)
    return FALSE;
  /* A copy: a send may close its peer, which leaves the table. */
  peers = dc_mesh_dup_peers (self);
  for (guint i = 0; i < peers->len; i++)
    if (dc_peer_get_state (g_ptr_array_index (peers, i)) == DC_PEER_STATE_OPEN
        && dc_peer_send_chunks (g_ptr_array_index (peers, i), type, bodies, NULL))
      n++;
  if (n_peers != NULL)
    *n_peers = n;
  return TRUE;
}

guint
dc_mesh_get_n_peers (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), 0);
  return self->n_connected;
}

/**
 * dc_mesh_get_slow_sending:
 * @episodes: (out): episodes of slow sending to any peer, the peers that
 *   left included (dc_peer_get_slow_sending ())
 * @slow_us: (out): their slow time, µs
 */
void
dc_mesh_get_slow_sending (DcMesh *self,
                          guint  *episodes,
                          gint64 *slow_us)
{
  GHashTableIter iter;
  gpointer value;

  g_return_if_fail (DC_IS_MESH (self));

  *episodes = self->slow_left_episodes;
  *slow_us = self->slow_left_us;
  _dc_mesh_renewal_add_slow_sending (self, episodes, slow_us);
  g_hash_table_iter_init (&iter, self->peers);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      guint peer_episodes;
      gint64 peer_us;

      dc_peer_get_slow_sending (value, &peer_episodes, &peer_us);
      *episodes += peer_episodes;
      *slow_us += peer_us;
    }
}

/**
 * dc_mesh_get_renewals:
 *
 * Returns: how many connections a new one replaced (renewals swapped in,
 *   docs/ARCHITECTURE.md, "Slow sending")
 */
guint
dc_mesh_get_renewals (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), 0);
  return self->renewals_done;
}

/**
 * dc_mesh_get_address:
 *
 * Returns: (nullable): this device's address as the signaling service sees
 *   it, once welcomed; what the host's dialog shows for this device
 */
const char *
dc_mesh_get_address (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), NULL);
  return self->signaling != NULL ? dc_signaling_get_address (self->signaling) : NULL;
}

gboolean
dc_mesh_is_host (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), FALSE);
  return self->signaling != NULL && dc_signaling_is_host (self->signaling);
}

/**
 * dc_mesh_get_id:
 *
 * Returns: (nullable): this device's member id in the room (the signaling
 *   service's id, as its peers know it), %NULL before it was welcomed
 */
const char *
dc_mesh_get_id (DcMesh *self)
{
  g_return_val_if_fail (DC_IS_MESH (self), NULL);
  return self->signaling != NULL ? dc_signaling_get_id (self->signaling) : NULL;
}

static void
dc_mesh_dispose (GObject *object)
{
  DcMesh *self = DC_MESH (object);

  g_clear_handle_id (&self->renew_check_id, g_source_remove);
  if (self->renewals != NULL)
    g_hash_table_remove_all (self->renewals);
  if (self->peers != NULL)
    {
      GHashTableIter iter;
      gpointer value;

      g_hash_table_iter_init (&iter, self->peers);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        g_signal_handlers_disconnect_by_data (value, self);
      g_hash_table_remove_all (self->peers);
    }
  /* The connections still closing are disposed now: each waits for what
   * is left of its close (dc_peer_begin_close ()). */
  g_clear_handle_id (&self->retire_id, g_source_remove);
  if (self->retiring != NULL)
    g_ptr_array_set_size (self->retiring, 0);
  g_clear_object (&self->signaling);

  G_OBJECT_CLASS (dc_mesh_parent_class)->dispose (object);
}

static void
dc_mesh_finalize (GObject *object)
{
  DcMesh *self = DC_MESH (object);

  g_hash_table_unref (self->peers);
  g_ptr_array_unref (self->retiring);
  g_hash_table_unref (self->admitted);
  g_hash_table_unref (self->pending);
  g_hash_table_unref (self->pins);
  g_hash_table_unref (self->declined);
  g_hash_table_unref (self->renewals);
  g_hash_table_unref (self->renewed_at);
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
   * approved, declined, request, refused, host, peer-joined, peer-left,
   * identity (this device was welcomed: dc_mesh_get_address() is known),
   * unverified (a body failed the room's MAC and was ignored; reason: its kind),
   * slow-sending and sending-recovered (an episode of slow sending to the
   * peer began or ended, dc-send-pace.c; reason: the line to log). */
  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 4, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_UINT, G_TYPE_STRING);
  /* (id, name, fingerprint, address): the host must call
   * dc_mesh_answer_request(). The fingerprint ("" when none was sent) is the
   * newcomer's DTLS certificate, which its connection must then use; the
   * address ("" when unknown) is as the signaling service saw it. */
  signals[SIGNAL_APPROVAL_REQUESTED] =
    g_signal_new ("approval-requested", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 4, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING,
                  G_TYPE_STRING);
  /* (id): the device of that ::approval-requested left before an answer. */
  signals[SIGNAL_APPROVAL_WITHDRAWN] =
    g_signal_new ("approval-withdrawn", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
  /* (peer, type, payload). A reply goes to the device's peer now (by id,
   * dc_mesh_dup_peers ()), which a renewal may have made another DcPeer
   * than @peer: what is sent on a replaced one after its switch may come
   * late or not at all. */
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
  self->retiring = g_ptr_array_new_with_free_func (g_object_unref);
  self->admitted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pending = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) request_free);
  self->pins = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->declined = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->renewals = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          _dc_mesh_renewal_free);
  self->renewed_at = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}
