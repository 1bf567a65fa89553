/* dc-peer-private.h: what dc-peer.c shares with dc-peer-direct.c, and no
 * other file: the Link that carries webrtcbin's events (hops) from its
 * threads to the peer's main context, and the two direct paths that take a
 * data channel's binary messages past webrtcbin's own threads.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gst/gst.h>
#include <gst/webrtc/webrtc.h>

G_BEGIN_DECLS

typedef enum
{
  HOP_NEGOTIATE,        /* webrtcbin asks for an offer */
  HOP_DESCRIPTION,      /* description: our offer or answer, created */
  HOP_REMOTE_SET,       /* remote description applied */
  HOP_CANDIDATE,        /* num: mline, text: candidate */
  HOP_CHANNEL,          /* channel: the remote side's data channel */
  HOP_OPEN,
  HOP_CLOSE,
  HOP_ERROR,            /* text: message */
  HOP_PIECE,            /* bytes: one data-channel message */
  HOP_TEXT,             /* a string message: not part of the protocol */
  HOP_LOW,              /* buffered amount fell under the low water mark */
} HopKind;

typedef struct
{
  HopKind               kind;
  guint                 num;
  char                 *text;
  GBytes               *bytes;
  GstWebRTCDataChannel *channel;
  GstWebRTCSessionDescription *description;
  gint64                at;     /* HOP_PIECE: when webrtcbin handed it over, µs */
  guint                 receiver; /* HOP_PIECE: its channel's Receiver id, 0 through webrtcbin */
} Hop;

/* Refcounted, owned jointly by the peer and by every connected handler:
 * the handlers reach the peer only through it (dc-peer.c, "Threads"). */
typedef struct
{
  GWeakRef      peer;
  GMainContext *context;
  GMutex        lock;
  GQueue        hops;        /* Hop*, guarded by lock */
  gboolean      scheduled;   /* an idle is pending, guarded by lock */
  /* Set by dc_peer_start () before any handler is connected, read-only
   * after: DC_PEER_DIRECT_RECEIVE and DC_PEER_DIRECT_SEND. */
  gboolean      direct_receive;
  gboolean      direct_send;
} Link;

Link *   _dc_peer_link_ref              (Link     *link);
void     _dc_peer_link_unref            (Link     *link);
void     _dc_peer_link_closure_notify   (gpointer  data,
                                         GClosure *closure);
/* Any thread: queues @hop (taken) in arrival order and wakes the peer's
 * main context once. */
void     _dc_peer_link_push             (Link     *link,
                                         Hop      *hop);

/* dc-peer-direct.c ------------------------------------------------------ */

/* Direct pieces that may wait for the channel to open at the receiver; a
 * peer that sends more before that is faulty (an honest one sends its
 * hello and a credit once its side is open). */
#define DC_PEER_EARLY_MAX (16u * 1024u * 1024u)
/* A message pushed into sctpenc from the main thread is at most this big,
 * and goes only while the remote has credited all but
 * DC_PEER_DIRECT_INFLIGHT_MAX of what was sent ("Sending without appsrc's
 * thread"). */
#define DC_PEER_DIRECT_SEND_MAX      (16u * 1024u)
#define DC_PEER_DIRECT_INFLIGHT_MAX  (256u * 1024u)

typedef struct _DcPeerSender DcPeerSender;

/* Connects the direct paths to @webrtc for @link's channels, as
 * @link->direct_receive and direct_send say, where webrtcbin has
 * prepare-data-channel (GStreamer 1.22); before the pipeline starts. */
void           _dc_peer_direct_connect       (GstElement           *webrtc,
                                              Link                 *link);
/* The id of @channel's Receiver (Hop.receiver of its direct pieces), 0 when
 * its messages come through webrtcbin. */
guint          _dc_peer_direct_receiver_id   (GstWebRTCDataChannel *channel);
/* @channel's Sender (a new reference), or NULL: its messages all go
 * through its appsrc. */
DcPeerSender * _dc_peer_direct_sender_get    (GstWebRTCDataChannel *channel);
void           _dc_peer_direct_sender_unref  (DcPeerSender         *sender);
/* Main thread: pushes @piece into @sender's sctpenc pad when that keeps the
 * order (@sent_pieces: the binary messages the peer handed to the channel
 * so far, by either path). The caller checks the credits first.
 * Returns: FALSE when it did not try; else *ok says whether sctpenc took
 * it (@error set when not). */
gboolean       _dc_peer_direct_send          (DcPeerSender         *sender,
                                              GBytes               *piece,
                                              guint                 sent_pieces,
                                              gboolean             *ok,
                                              GError              **error);

G_END_DECLS
