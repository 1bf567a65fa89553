/* dc-mesh-private.h: what DcMesh's files share (dc-mesh.c: rooms and
 * peers; dc-mesh-renewal.c: replacing a slow connection with a new one).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-mesh.h"
#include "dc-room.h"
#include "dc-signaling.h"

G_BEGIN_DECLS

struct _DcMesh
{
  GObject       parent_instance;

  /* owned */
  DcSignaling  *signaling;
  DcMeshConfig  config;
  GHashTable   *peers;      /* signaling id → DcPeer* */
  GHashTable   *admitted;   /* ids the host admitted (host) or listed (newcomer) */
  GHashTable   *pending;    /* host: id → Request awaiting an answer */
  GHashTable   *pins;       /* id → the fingerprint its answer's SDP must carry */
  GHashTable   *declined;   /* host: "fp F" or "address A" → gint64 µs of the decline */
  GHashTable   *renewals;   /* id → Renewal: a new connection to a connected peer */
  GHashTable   *renewed_at; /* id → RenewHistory: its last renewal (the cool-down) */
  guint         renew_check_id;  /* _dc_mesh_renewal_check_cb () */
  GPtrArray    *retiring;   /* DcPeer*: closing, disposed once closed (_dc_mesh_retire ()) */
  guint         retire_id;  /* retire_poll_cb () */
  DcRoom       *room;

  /* state */
  guint         n_connected;
  /* Slow sending (dc-send-pace.c) of the peers that left, so that the
   * totals of dc_mesh_get_slow_sending () keep them. */
  guint         slow_left_episodes;
  gint64        slow_left_us;
  guint         renewals_done;   /* connections replaced (dc_mesh_get_renewals ()) */
  guint         approved : 1;
  guint         left : 1;
};

/* How often the mesh looks for a peer still sending slowly after a
 * renewal's cool-down (dc-mesh-renewal.c). */
#define DC_MESH_RENEW_CHECK_MS 500

/* dc-mesh.c */
void      _dc_mesh_emit_event            (DcMesh      *self,
                                          const char  *event,
                                          const char  *peer,
                                          const char  *reason);
void      _dc_mesh_emit_message          (DcMesh      *self,
                                          DcPeer      *peer,
                                          guint        type,
                                          GBytes      *payload);
void      _dc_mesh_peer_changed_cb       (DcPeer      *peer,
                                          GParamSpec  *pspec,
                                          gpointer     user_data);
void      _dc_mesh_peer_message_cb       (DcPeer      *peer,
                                          guint        type,
                                          GBytes      *payload,
                                          gpointer     user_data);
void      _dc_mesh_peer_slow_sending_cb  (DcPeer      *peer,
                                          gboolean     slow,
                                          const char  *text,
                                          gpointer     user_data);
void      _dc_mesh_peer_signal_out_cb    (DcPeer      *peer,
                                          JsonObject  *body,
                                          gpointer     user_data);
void      _dc_mesh_retire                (DcMesh      *self,
                                          DcPeer      *peer);

/* dc-mesh-renewal.c */
guint     _dc_mesh_peer_generation       (DcPeer      *peer);
guint     _dc_mesh_body_generation       (JsonObject  *body);
void      _dc_mesh_renewal_free          (gpointer     renewal);
void      _dc_mesh_renewal_maybe_start   (DcMesh      *self,
                                          DcPeer      *peer);
gboolean  _dc_mesh_renewal_check_cb      (gpointer     user_data);
void      _dc_mesh_renewal_offer         (DcMesh      *self,
                                          const char  *from,
                                          guint        generation,
                                          JsonObject  *offer);
DcPeer   *_dc_mesh_renewal_route_signal  (DcMesh      *self,
                                          const char  *from,
                                          guint        generation);
gboolean  _dc_mesh_renewal_take_message  (DcMesh      *self,
                                          DcPeer      *peer,
                                          guint        type,
                                          GBytes      *payload);
gboolean  _dc_mesh_renewal_refuse_peer   (DcMesh      *self,
                                          DcPeer      *peer,
                                          const char  *why);
void      _dc_mesh_renewal_drop_unswapped (DcMesh     *self,
                                          const char  *id,
                                          const char  *why);
void      _dc_mesh_renewal_forget        (DcMesh      *self,
                                          const char  *id);
void      _dc_mesh_renewal_add_slow_sending (DcMesh   *self,
                                          guint       *episodes,
                                          gint64      *slow_us);

G_END_DECLS
