/* dc-peer.h: one remote device: a webrtcbin and its data channel.
 *
 * Main thread. GStreamer calls back on its own threads; those handlers only
 * copy what they got and hop to the main context the peer was created on.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "dc-mesh-protocol.h"
#include "dc-mesh-train-protocol.h"

G_BEGIN_DECLS

/**
 * DcPeerState:
 * @DC_PEER_STATE_NEW: created, nothing started
 * @DC_PEER_STATE_SIGNALING: exchanging offer, answer and candidates
 * @DC_PEER_STATE_CONNECTING: descriptions set, waiting for the channel to open
 * @DC_PEER_STATE_OPEN: the data channel is open
 * @DC_PEER_STATE_CLOSED: closed on purpose (by either side)
 * @DC_PEER_STATE_FAILED: failed, timed out, or dropped for faults
 */
typedef enum
{
  DC_PEER_STATE_NEW,
  DC_PEER_STATE_SIGNALING,
  DC_PEER_STATE_CONNECTING,
  DC_PEER_STATE_OPEN,
  DC_PEER_STATE_CLOSED,
  DC_PEER_STATE_FAILED,
} DcPeerState;

GType dc_peer_state_get_type (void) G_GNUC_CONST;
#define DC_TYPE_PEER_STATE (dc_peer_state_get_type ())

/* Liveness: a heartbeat every 500 ms; silence for this long means gone. */
#define DC_PEER_HEARTBEAT_MS   500
#define DC_PEER_TIMEOUT_MS     4000
#define DC_PEER_CONNECT_MS     30000
#define DC_PEER_MAX_FAULTS     3

typedef struct
{
  char  *stun_server;     /* stun://host:port, or NULL */
  char  *turn_server;     /* turn(s)://user:pass@host:port, or NULL */
  GStrv  ice_addresses;   /* restrict ICE to these local addresses, or NULL */
} DcPeerConfig;

#define DC_TYPE_PEER (dc_peer_get_type ())
G_DECLARE_FINAL_TYPE (DcPeer, dc_peer, DC, PEER, GObject)

DcPeer      *dc_peer_new           (const char          *id,
                                    gboolean             offerer,
                                    const DcPeerConfig  *config,
                                    const DcMeshHello   *hello);
gboolean     dc_peer_start         (DcPeer              *self,
                                    GError             **error);
void         dc_peer_handle_signal (DcPeer              *self,
                                    JsonObject          *body);
gboolean     dc_peer_send          (DcPeer              *self,
                                    guint                type,
                                    GBytes              *payload,
                                    GError             **error);
gboolean     dc_peer_send_chunks   (DcPeer              *self,
                                    guint                type,
                                    GPtrArray           *bodies,
                                    GError             **error);
gboolean     dc_peer_send_frames   (DcPeer              *self,
                                    guint                type,
                                    GPtrArray           *frames,
                                    GError             **error);
gboolean     dc_peer_send_object   (DcPeer              *self,
                                    guint                type,
                                    const DcMeshChunk   *info,
                                    GBytes              *object,
                                    GError             **error);
void         dc_peer_close         (DcPeer              *self,
                                    const char          *reason);
void         dc_peer_say_bye       (DcPeer              *self);
void         dc_peer_begin_close   (DcPeer              *self);
gboolean     dc_peer_close_is_done (DcPeer              *self);
gboolean     dc_peer_is_sending_slowly (DcPeer          *self);
GPtrArray   *dc_peer_take_unsent   (DcPeer              *self);
gboolean     dc_peer_send_taken    (DcPeer              *self,
                                    GPtrArray           *frames,
                                    GError             **error);
gboolean     dc_peer_send_raw      (DcPeer              *self,
                                    GBytes              *piece,
                                    GError             **error);
const char  *dc_peer_get_id        (DcPeer              *self);
const char  *dc_peer_get_name      (DcPeer              *self);
/* While a message is delivered: when webrtcbin handed it over (µs). */
gint64       dc_peer_get_message_received_us (DcPeer   *self);
guint64      dc_peer_get_direct_pieces (DcPeer          *self);
guint64      dc_peer_get_early_pieces (DcPeer           *self);
guint64      dc_peer_get_direct_sends (DcPeer           *self);
const guint8 *dc_peer_get_message_data_hash (DcPeer   *self);
void         dc_peer_set_display_name (DcPeer           *self,
                                       const char       *name);
DcMeshHello *dc_peer_get_hello     (DcPeer              *self);
DcPeerState  dc_peer_get_state     (DcPeer              *self);
const char  *dc_peer_get_reason    (DcPeer              *self);
gsize        dc_peer_get_queued    (DcPeer              *self);
guint64      dc_peer_get_unacknowledged (DcPeer         *self);
void         dc_peer_get_slow_sending (DcPeer           *self,
                                       guint            *episodes,
                                       gint64           *slow_us);

G_END_DECLS
