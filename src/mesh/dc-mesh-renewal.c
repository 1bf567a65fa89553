/* dc-mesh-renewal.c: a new connection for a device whose connection sends
 * slowly (docs/ARCHITECTURE.md, "Slow sending", Renewal; docs/PROTOCOL.md,
 * Peers, "Renewal").
 *
 * The sender that reports slow sending offers the device a second
 * connection of the next generation through the signaling service; its
 * certificate must be the first connection's. Until this side's swap the
 * mesh's table holds the old peer; at the swap the table takes the new
 * one, the old peer's unsent frames move to it behind a SWITCH left on the
 * old, and what the new one brings is held until the old one delivered the
 * other side's SWITCH, so that every message arrives in the order sent;
 * each side answers SWITCHED, and closes the old connection once it has
 * both. No peer-left or peer-joined: events renewing, renewed and
 * renewal-failed.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh-private.h"

#include "dc-identity.h"

/* A renewal under way: a second connection to a connected device. */
typedef struct
{
  DcMesh   *mesh;          /* unowned: the mesh owns its renewals */
  char     *id;
  guint64   generation;    /* the new connection's: the old one's + 1 */
  DcPeer   *fresh;         /* the new connection */
  DcPeer   *old;           /* from the swap until retired: the connection replaced */
  GQueue    held;          /* Held: what fresh delivered before the other side's SWITCH */
  gsize     held_bytes;
  gint64    started_us;
  guint     timeout_id;    /* not open in time (before the swap), markers late (after) */
  gboolean  offerer;
  gboolean  swapped;       /* this side moved to fresh: its SWITCH is on old */
  gboolean  marker_in;     /* the other side's SWITCH came on old */
  gboolean  marker_acked;  /* its SWITCHED came: it read this side's SWITCH */
} Renewal;

typedef struct
{
  guint   type;
  GBytes *payload;
} Held;

/* A pair's renewals: when the last ended, and how many in a row each began
 * less than RENEW_STREAK_MS after the one before ended. */
typedef struct
{
  gint64 ended_us;
  guint  streak;
} RenewHistory;

static void
held_free (Held *held)
{
  g_bytes_unref (held->payload);
  g_free (held);
}

/* A new connection not open and introduced by then is dropped; the old one
 * stays. */
#define RENEW_OPEN_MS     10000
/* After the swap: switch markers not crossed by then, the old one closes
 * anyway (what it still carried is lost). At 2 MB/s, 30 s is 60 MB. */
#define RENEW_DRAIN_MS    30000
/* Between the end of one renewal of a pair and the start of the next, at
 * first (DC_MESH_RENEW_COOLDOWN_MS overrides it); doubled for each renewal
 * that starts less than RENEW_STREAK_MS after the one before ended, up to
 * RENEW_COOLDOWN_MAX_MS, so that an association that crawls again is soon
 * replaced again, while a link slow in truth, which no new connection
 * makes faster, is not reconnected more than a few times a minute. */
#define RENEW_COOLDOWN_MS     2000
#define RENEW_STREAK_MS       30000
#define RENEW_COOLDOWN_MAX_MS 64000
/* What a new connection may bring before the old one's marker: far more
 * than a step's messages; beyond it the other side misbehaves. */
#define RENEW_HELD_MAX    (256u * 1024u * 1024u)
#define RENEW_GENERATION_MAX 1000000

/* 1 for a device's first connection, + 1 at each renewal. */
guint
_dc_mesh_peer_generation (DcPeer *peer)
{
  guint generation = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (peer), "dc-generation"));

  return generation != 0 ? generation : 1;
}

/* The generation a signaling body is for: 1 without one, 0 when invalid. */
guint
_dc_mesh_body_generation (JsonObject *body)
{
  JsonNode *node = json_object_get_member (body, "generation");
  gint64 generation;

  if (node == NULL)
    return 1;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return 0;
  generation = json_node_get_int (node);
  return generation >= 1 && generation <= RENEW_GENERATION_MAX ? (guint) generation : 0;
}

/* The first cool-down of a pair, µs. */
static gint64
renewal_cooldown_us (void)
{
  const char *text = g_getenv ("DC_MESH_RENEW_COOLDOWN_MS");
  guint64 ms = RENEW_COOLDOWN_MS;

  if (text != NULL && !g_ascii_string_to_unsigned (text, 10, 0, 3600000, &ms, NULL))
    ms = RENEW_COOLDOWN_MS;
  return (gint64) ms * 1000;
}

/* The cool-down after the pair's last renewal: the first one, doubled per
 * renewal of the streak, at most RENEW_COOLDOWN_MAX_MS (or the first, if
 * DC_MESH_RENEW_COOLDOWN_MS set it longer). */
static gint64
history_cooldown_us (const RenewHistory *history)
{
  gint64 first = renewal_cooldown_us ();
  gint64 cooldown = first << MIN (history->streak, 6u);

  return MAX (first, MIN (cooldown, (gint64) RENEW_COOLDOWN_MAX_MS * 1000));
}

static gboolean
renewal_enabled (DcMesh *self)
{
  return !self->config.no_renewal && g_strcmp0 (g_getenv ("DC_MESH_RENEW"), "0") != 0;
}

/* A connection the mesh no longer uses: nothing it does is heard. */
static void
retire_peer (DcMesh     *self,
             DcPeer     *peer,
             const char *reason)
{
  guint episodes;
  gint64 slow_us;

  g_signal_handlers_disconnect_by_data (peer, self);
  dc_peer_get_slow_sending (peer, &episodes, &slow_us);
  self->slow_left_episodes += episodes;
  self->slow_left_us += slow_us;
  dc_peer_close (peer, reason);
}

static gboolean
unref_idle_cb (gpointer user_data)
{
  g_object_unref (user_data);
  return G_SOURCE_REMOVE;
}

void
_dc_mesh_renewal_free (gpointer data)
{
  Renewal *renewal = data;
  DcMesh *self = renewal->mesh;

  g_clear_handle_id (&renewal->timeout_id, g_source_remove);
  if (renewal->held.length > 0)
    g_message ("peer %s: %u messages of its new connection dropped with it", renewal->id,
               renewal->held.length);
  g_queue_clear_full (&renewal->held, (GDestroyNotify) held_free);
  g_signal_handlers_disconnect_by_data (renewal->fresh, renewal);
  /* Before the swap the new connection is the renewal's; after, the old. */
  if (!renewal->swapped)
    retire_peer (self, renewal->fresh, "dropped");
  if (renewal->old != NULL)
    retire_peer (self, renewal->old, "renewed");
  /* Disposed from the main loop (_dc_mesh_retire () and the idle): the end
   * may come from inside a signal of either peer, which must outlive its
   * emission. The connection retired closes without holding this thread. */
  if (!renewal->swapped)
    _dc_mesh_retire (self, g_steal_pointer (&renewal->fresh));
  else
    g_idle_add (unref_idle_cb, g_steal_pointer (&renewal->fresh));
  if (renewal->old != NULL)
    _dc_mesh_retire (self, g_steal_pointer (&renewal->old));
  g_free (renewal->id);
  g_free (renewal);
}

static void
renewal_ended (DcMesh     *self,
               const char *id)
{
  RenewHistory *history = g_hash_table_lookup (self->renewed_at, id);

  if (history == NULL)
    {
      history = g_new0 (RenewHistory, 1);
      g_hash_table_insert (self->renewed_at, g_strdup (id), history);
    }
  history->ended_us = g_get_monotonic_time ();
  g_hash_table_remove (self->renewals, id);
}

/* Before the swap: the old connection stays, as if nothing was tried. */
static void
renewal_drop (DcMesh     *self,
              Renewal    *renewal,
              const char *why)
{
  g_autofree char *id = g_strdup (renewal->id);
  DcPeer *current = g_hash_table_lookup (self->peers, id);
  const char *name = current != NULL && dc_peer_get_name (current) != NULL
                     ? dc_peer_get_name (current) : id;
  g_autofree char *text = g_strdup_printf ("the new connection to %s was dropped (%s): the old "
                                           "one stays", name, why);

  /* The event's line is the log's (a training group logs it). */
  g_debug ("%s", text);
  renewal_ended (self, id);
  _dc_mesh_emit_event (self, "renewal-failed", name, text);
}

/* Hands on, in order, what the new connection brought before the other
 * side's SWITCH; a handler may end the renewal meanwhile. */
static void
renewal_release (DcMesh     *self,
                 const char *id)
{
  for (;;)
    {
      Renewal *renewal = g_hash_table_lookup (self->renewals, id);
      g_autoptr(DcPeer) fresh = NULL;
      Held *held;

      if (renewal == NULL || (held = g_queue_pop_head (&renewal->held)) == NULL)
        return;
      renewal->held_bytes -= g_bytes_get_size (held->payload);
      fresh = g_object_ref (renewal->fresh);
      _dc_mesh_emit_message (self, fresh, held->type, held->payload);
      held_free (held);
    }
}

/* Both markers crossed: the old connection carried everything it had. */
static void
renewal_maybe_retire (DcMesh     *self,
                      const char *id)
{
  Renewal *renewal = g_hash_table_lookup (self->renewals, id);

  if (renewal == NULL || !renewal->swapped || !renewal->marker_in || !renewal->marker_acked)
    return;
  g_message ("peer %s: the old connection closed, generation %" G_GUINT64_FORMAT " carries "
             "everything (renewal took %" G_GINT64_FORMAT " ms)", id, renewal->generation,
             (g_get_monotonic_time () - renewal->started_us) / 1000);
  renewal_ended (self, id);
}

static void
renewal_send_switched (Renewal *renewal)
{
  g_autoptr(GBytes) payload = dc_mesh_switch_encode (renewal->generation);

  dc_peer_send (renewal->fresh, DC_MESH_MSG_SWITCHED, payload, NULL);
}

static gboolean
renewal_timeout_cb (gpointer user_data)
{
  Renewal *renewal = user_data;
  DcMesh *self = renewal->mesh;
  g_autofree char *id = g_strdup (renewal->id);

  renewal->timeout_id = 0;
  if (!renewal->swapped)
    {
      g_autofree char *why = g_strdup_printf ("not open after %d s", RENEW_OPEN_MS / 1000);

      renewal_drop (self, renewal, why);
      return G_SOURCE_REMOVE;
    }
  g_message ("peer %s: the switch markers did not cross in %d s: the old connection closes, "
             "what it still carried is lost", id, RENEW_DRAIN_MS / 1000);
  renewal_release (self, id);
  renewal_ended (self, id);
  return G_SOURCE_REMOVE;
}

/* The old connection ended after the swap: by the other side's retirement
 * (its marker came first) or lost; either way nothing more comes on it. */
static void
renewal_old_state_cb (DcPeer     *peer,
                      GParamSpec *pspec,
                      gpointer    user_data)
{
  DcMesh *self = user_data;
  g_autofree char *id = g_strdup (dc_peer_get_id (peer));
  Renewal *renewal = g_hash_table_lookup (self->renewals, id);
  DcPeerState state = dc_peer_get_state (peer);

  if (state != DC_PEER_STATE_CLOSED && state != DC_PEER_STATE_FAILED)
    return;
  if (renewal == NULL || renewal->old != peer)
    {
      g_signal_handlers_disconnect_by_data (peer, self);
      return;
    }
  if (!renewal->marker_in)
    g_message ("peer %s: the old connection ended (%s) before its switch marker: what it still "
               "carried is lost", id, dc_peer_get_reason (peer));
  renewal_release (self, id);
  renewal_ended (self, id);
}

/* The new connection is open and the device introduced itself on it: from
 * now on everything to it goes there. */
static void
renewal_swap (DcMesh  *self,
              Renewal *renewal)
{
  g_autofree char *id = g_strdup (renewal->id);
  DcPeer *old = g_hash_table_lookup (self->peers, id);
  DcMeshHello *was = old != NULL ? dc_peer_get_hello (old) : NULL;
  DcMeshHello *is = dc_peer_get_hello (renewal->fresh);
  g_autoptr(GBytes) marker = dc_mesh_switch_encode (renewal->generation);
  g_autoptr(GPtrArray) frames = NULL;
  g_autofree char *text = NULL;

  if (old == NULL || dc_peer_get_state (old) != DC_PEER_STATE_OPEN || was == NULL)
    {
      renewal_drop (self, renewal, "the old connection is gone");
      return;
    }
  if (g_strcmp0 (was->name, is->name) != 0 || g_strcmp0 (was->probe_hash, is->probe_hash) != 0
      || was->numeric_rule_id != is->numeric_rule_id)
    {
      renewal_drop (self, renewal, "the device introduced itself differently on it");
      return;
    }
  dc_peer_set_display_name (renewal->fresh, dc_peer_get_name (old));
  g_object_set_data (G_OBJECT (renewal->fresh), "dc-counted", GINT_TO_POINTER (TRUE));

  /* The old connection's queue moves over behind its marker: its frame in
   * progress finishes, then SWITCH; the rest goes first on the new one. */
  frames = dc_peer_take_unsent (old);
  if (!dc_peer_send (old, DC_MESH_MSG_SWITCH, marker, NULL)
      || !dc_peer_send_taken (renewal->fresh, frames, NULL))
    {
      /* Both were open a moment ago; a close is on its way. */
      renewal_drop (self, renewal, "a connection closed during the switch");
      return;
    }

  g_signal_handlers_disconnect_by_data (renewal->fresh, renewal);
  g_signal_connect_object (renewal->fresh, "notify::state", G_CALLBACK (_dc_mesh_peer_changed_cb),
                           self, 0);
  g_signal_connect_object (renewal->fresh, "notify::name", G_CALLBACK (_dc_mesh_peer_changed_cb),
                           self, 0);
  g_signal_handlers_disconnect_by_data (old, self);
  g_signal_connect_object (old, "message", G_CALLBACK (_dc_mesh_peer_message_cb), self, 0);
  g_signal_connect_object (old, "notify::state", G_CALLBACK (renewal_old_state_cb), self, 0);
  renewal->old = g_object_ref (old);
  g_hash_table_replace (self->peers, g_strdup (id), g_object_ref (renewal->fresh));
  renewal->swapped = TRUE;
  g_clear_handle_id (&renewal->timeout_id, g_source_remove);
  renewal->timeout_id = g_timeout_add (RENEW_DRAIN_MS, renewal_timeout_cb, renewal);

  text = g_strdup_printf ("a new connection to %s replaces the old one (generation %"
                          G_GUINT64_FORMAT ", open in %" G_GINT64_FORMAT " ms, %u frames "
                          "moved to it)", dc_peer_get_name (renewal->fresh),
                          renewal->generation,
                          (g_get_monotonic_time () - renewal->started_us) / 1000, frames->len);
  g_debug ("%s", text);
  self->renewals_done++;
  _dc_mesh_emit_event (self, "renewed", dc_peer_get_name (renewal->fresh), text);

  renewal = g_hash_table_lookup (self->renewals, id);
  if (renewal != NULL && renewal->marker_in)
    {
      renewal_send_switched (renewal);
      renewal_release (self, id);
    }
  renewal_maybe_retire (self, id);
}

/* The new connection before the swap: open and introduced, or failed. */
static void
renewal_fresh_state_cb (DcPeer     *peer,
                        GParamSpec *pspec,
                        gpointer    user_data)
{
  Renewal *renewal = user_data;
  DcPeerState state = dc_peer_get_state (peer);

  if (state == DC_PEER_STATE_CLOSED || state == DC_PEER_STATE_FAILED)
    {
      g_autofree char *why = g_strdup_printf ("it ended: %s", dc_peer_get_reason (peer));

      renewal_drop (renewal->mesh, renewal, why);
    }
  else if (state == DC_PEER_STATE_OPEN && dc_peer_get_hello (peer) != NULL)
    renewal_swap (renewal->mesh, renewal);
}

/* A second connection to the device @id, as offerer or with @offer. */
static void
renewal_start (DcMesh     *self,
               const char *id,
               guint       generation,
               JsonObject *offer)
{
  DcPeer *current = g_hash_table_lookup (self->peers, id);
  Renewal *renewal = g_new0 (Renewal, 1);
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;

  renewal->mesh = self;
  renewal->id = g_strdup (id);
  renewal->generation = generation;
  renewal->offerer = offer == NULL;
  renewal->started_us = g_get_monotonic_time ();
  g_queue_init (&renewal->held);
  renewal->fresh = dc_peer_new (id, renewal->offerer, &self->config.peer, self->config.hello);
  g_object_set_data (G_OBJECT (renewal->fresh), "dc-generation", GUINT_TO_POINTER (generation));
  /* The device's certificate cannot change: the new connection must show
   * the old one's (checked on the offer or the answer). */
  g_object_set_data_full (G_OBJECT (renewal->fresh), "dc-remote-fp",
                          g_strdup (g_object_get_data (G_OBJECT (current), "dc-remote-fp")),
                          g_free);
  g_signal_connect_object (renewal->fresh, "signal-out", G_CALLBACK (_dc_mesh_peer_signal_out_cb),
                           self, 0);
  g_signal_connect_object (renewal->fresh, "message", G_CALLBACK (_dc_mesh_peer_message_cb), self,
                           0);
  g_signal_connect_object (renewal->fresh, "slow-sending",
                           G_CALLBACK (_dc_mesh_peer_slow_sending_cb), self, 0);
  g_signal_connect (renewal->fresh, "notify::state", G_CALLBACK (renewal_fresh_state_cb),
                    renewal);
  g_signal_connect (renewal->fresh, "notify::name", G_CALLBACK (renewal_fresh_state_cb), renewal);
  g_hash_table_replace (self->renewals, g_strdup (id), renewal);
  renewal->timeout_id = g_timeout_add (RENEW_OPEN_MS, renewal_timeout_cb, renewal);

  text = offer == NULL
         ? g_strdup_printf ("opening a new connection to %s to replace the slow one "
                            "(generation %u)", dc_peer_get_name (current), generation)
         : g_strdup_printf ("%s opens a new connection to replace the slow one (generation %u)",
                            dc_peer_get_name (current), generation);
  g_debug ("%s", text);
  _dc_mesh_emit_event (self, "renewing", dc_peer_get_name (current), text);
  if (!dc_peer_start (renewal->fresh, &error))
    {
      renewal_drop (self, renewal, error->message);
      return;
    }
  if (offer != NULL)
    dc_peer_handle_signal (renewal->fresh, offer);
}

/* Slow sending to @peer: replace its connection, unless one is under way,
 * the last ended less than RENEW_COOLDOWN_S ago, or the pair cannot be
 * authenticated again. */
void
_dc_mesh_renewal_maybe_start (DcMesh *self,
                              DcPeer *peer)
{
  const char *id = dc_peer_get_id (peer);
  RenewHistory *history = g_hash_table_lookup (self->renewed_at, id);
  gint64 now = g_get_monotonic_time ();

  if (!renewal_enabled (self) || self->left || self->signaling == NULL
      || g_hash_table_lookup (self->peers, id) != peer
      || dc_peer_get_state (peer) != DC_PEER_STATE_OPEN || dc_peer_get_hello (peer) == NULL
      || g_hash_table_contains (self->renewals, id)
      || _dc_mesh_peer_generation (peer) >= RENEW_GENERATION_MAX)
    return;
  if (history != NULL && now - history->ended_us < history_cooldown_us (history))
    return;
  if (g_object_get_data (G_OBJECT (peer), "dc-remote-fp") == NULL)
    {
      g_message ("peer %s: no certificate known for it, so no new connection", id);
      return;
    }
  if (history != NULL)
    history->streak = now - history->ended_us < RENEW_STREAK_MS * 1000 ? history->streak + 1 : 0;
  renewal_start (self, id, _dc_mesh_peer_generation (peer) + 1, NULL);
}

/* A peer still sending slowly once its cool-down ended, or whose episode
 * was not told (one in 10 s is), gets its renewal here. */
gboolean
_dc_mesh_renewal_check_cb (gpointer user_data)
{
  DcMesh *self = user_data;
  g_autoptr(GPtrArray) peers = NULL;

  if (!renewal_enabled (self) || self->left)
    return G_SOURCE_CONTINUE;
  peers = dc_mesh_dup_peers (self);
  for (guint i = 0; i < peers->len; i++)
    if (dc_peer_is_sending_slowly (g_ptr_array_index (peers, i)))
      _dc_mesh_renewal_maybe_start (self, g_ptr_array_index (peers, i));
  return G_SOURCE_CONTINUE;
}

/* An offer for a second connection from a connected device. Both sides
 * may offer at once: the offer of the device whose id sorts first wins. */
void
_dc_mesh_renewal_offer (DcMesh     *self,
                        const char *from,
                        guint       generation,
                        JsonObject *offer)
{
  DcPeer *current = g_hash_table_lookup (self->peers, from);
  Renewal *renewal = g_hash_table_lookup (self->renewals, from);
  const char *expected;
  g_autofree char *fingerprint = NULL;

  const RenewHistory *history = g_hash_table_lookup (self->renewed_at, from);

  /* The offerer keeps the cool-down; taking offers no sooner than half of
   * it (at most 2.5 s) after the last one ended here bounds a peer that
   * would not. */
  if (!renewal_enabled (self) || current == NULL
      || dc_peer_get_state (current) != DC_PEER_STATE_OPEN || dc_peer_get_hello (current) == NULL
      || generation != _dc_mesh_peer_generation (current) + 1
      || (history != NULL && g_get_monotonic_time () - history->ended_us
                             < MIN (history_cooldown_us (history), 5 * G_USEC_PER_SEC) / 2))
    {
      g_message ("offer of a new connection (generation %u) from %s ignored", generation, from);
      return;
    }
  if (renewal != NULL)
    {
      if (renewal->generation != generation || !renewal->offerer || renewal->swapped
          || g_strcmp0 (dc_mesh_get_id (self), from) < 0)
        return;  /* ours goes on; the other side drops its own for it */
      renewal_ended (self, from);
    }
  expected = g_object_get_data (G_OBJECT (current), "dc-remote-fp");
  fingerprint = dc_identity_sdp_fingerprint (json_object_get_string_member_with_default (offer,
                                                                                       "sdp",
                                                                                       ""));
  if (expected == NULL || g_strcmp0 (fingerprint, expected) != 0)
    {
      g_message ("offer of a new connection from %s carries another certificate (%s) than its "
                 "connection (%s): refused", from, fingerprint != NULL ? fingerprint : "none",
                 expected != NULL ? expected : "unknown");
      _dc_mesh_emit_event (self, "refused", NULL, "fingerprint");
      return;
    }
  renewal_start (self, from, generation, offer);
}

/* The peer a signaling body of @generation from @from is for, or NULL. */
DcPeer *
_dc_mesh_renewal_route_signal (DcMesh     *self,
                               const char *from,
                               guint       generation)
{
  DcPeer *peer = g_hash_table_lookup (self->peers, from);
  Renewal *renewal = g_hash_table_lookup (self->renewals, from);

  if (renewal != NULL && !renewal->swapped
      && _dc_mesh_peer_generation (renewal->fresh) == generation)
    return renewal->fresh;
  if (peer != NULL && _dc_mesh_peer_generation (peer) == generation)
    return peer;
  return NULL;
}

/* SWITCH on the old connection, SWITCHED on the new one. */
static void
renewal_marker (DcMesh  *self,
                DcPeer  *peer,
                guint    type,
                GBytes  *payload)
{
  g_autofree char *id = g_strdup (dc_peer_get_id (peer));
  Renewal *renewal = g_hash_table_lookup (self->renewals, id);
  g_autoptr(GError) error = NULL;
  guint64 generation = 0;

  if (!dc_mesh_switch_decode (payload, &generation, &error))
    {
      g_message ("peer %s: %s", id, error->message);
      return;
    }
  /* The other side closed the old connection once it had read both
   * markers, and its close overtook its SWITCHED: the renewal ended here
   * already. */
  if (renewal == NULL && type == DC_MESH_MSG_SWITCHED
      && g_hash_table_lookup (self->peers, id) == peer
      && generation == _dc_mesh_peer_generation (peer))
    return;
  if (renewal == NULL || generation != renewal->generation
      || (type == DC_MESH_MSG_SWITCH && (peer == renewal->fresh || renewal->marker_in))
      || (type == DC_MESH_MSG_SWITCHED && (peer != renewal->fresh || !renewal->swapped)))
    {
      g_message ("peer %s: %s to generation %" G_GUINT64_FORMAT " out of place, ignored", id,
                 dc_mesh_message_type_to_string (type), generation);
      return;
    }
  if (type == DC_MESH_MSG_SWITCH)
    {
      renewal->marker_in = TRUE;
      if (renewal->swapped)
        {
          renewal_send_switched (renewal);
          renewal_release (self, id);
        }
    }
  else
    renewal->marker_acked = TRUE;
  renewal_maybe_retire (self, id);
}

/* The renewal's part of a peer's messages: its markers, and what a new
 * connection brings before the old one's last message, which waits. */
gboolean
_dc_mesh_renewal_take_message (DcMesh  *self,
                               DcPeer  *peer,
                               guint    type,
                               GBytes  *payload)
{
  Renewal *renewal;
  Held *held;

  if (type == DC_MESH_MSG_SWITCH || type == DC_MESH_MSG_SWITCHED)
    {
      renewal_marker (self, peer, type, payload);
      return TRUE;
    }
  renewal = g_hash_table_lookup (self->renewals, dc_peer_get_id (peer));
  if (renewal == NULL || peer != renewal->fresh || (renewal->swapped && renewal->marker_in))
    return FALSE;
  if (renewal->held_bytes + g_bytes_get_size (payload) > RENEW_HELD_MAX)
    {
      g_message ("peer %s: over %u MiB on its new connection before the old one's switch "
                 "marker", renewal->id, RENEW_HELD_MAX >> 20);
      dc_peer_close (peer, "faults");
      return TRUE;
    }
  held = g_new0 (Held, 1);
  held->type = type;
  held->payload = g_bytes_ref (payload);
  renewal->held_bytes += g_bytes_get_size (payload);
  g_queue_push_tail (&renewal->held, held);
  return TRUE;
}

/* A renewal's new connection (before the swap) whose answer showed another
 * certificate: the renewal is dropped. Returns whether @peer was one. */
gboolean
_dc_mesh_renewal_refuse_peer (DcMesh     *self,
                              DcPeer     *peer,
                              const char *why)
{
  Renewal *renewal = g_hash_table_lookup (self->renewals, dc_peer_get_id (peer));

  if (renewal == NULL || renewal->fresh != peer || renewal->swapped)
    return FALSE;
  renewal_drop (self, renewal, why);
  return TRUE;
}

/* The device left signaling: a renewal not swapped yet cannot finish. */
void
_dc_mesh_renewal_drop_unswapped (DcMesh     *self,
                                 const char *id,
                                 const char *why)
{
  Renewal *renewal = g_hash_table_lookup (self->renewals, id);

  if (renewal != NULL && !renewal->swapped)
    renewal_drop (self, renewal, why);
}

/* The device is gone: a renewal with it (not yet swapped: its new
 * connection; swapped: the old one) goes too, and its history. */
void
_dc_mesh_renewal_forget (DcMesh     *self,
                         const char *id)
{
  g_hash_table_remove (self->renewals, id);
  g_hash_table_remove (self->renewed_at, id);
}

/* The old connections not retired yet count in dc_mesh_get_slow_sending (). */
void
_dc_mesh_renewal_add_slow_sending (DcMesh *self,
                                   guint  *episodes,
                                   gint64 *slow_us)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, self->renewals);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Renewal *renewal = value;
      guint old_episodes;
      gint64 old_us;

      if (renewal->old == NULL)
        continue;
      dc_peer_get_slow_sending (renewal->old, &old_episodes, &old_us);
      *episodes += old_episodes;
      *slow_us += old_us;
    }
}
