/* dc-peer-direct.c: a data channel's binary messages past webrtcbin's own
 * threads, both ways: taken from sctpdec's streaming thread as they come,
 * and pushed into sctpenc from the main thread when nothing is queued ahead
 * of them. Each saves a thread wake-up a message; each finds its pads and
 * GStreamer's SCTP metas by name, so the build does not link libgstsctp,
 * and where it cannot tell, the message takes webrtcbin's way as before.
 * See dc-peer-private.h for what dc-peer.c calls.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-peer-private.h"

#include "dc-mesh-error.h"

/* Receiving without webrtcbin's thread -------------------------------------
 *
 * webrtcbin takes a data channel's messages from sctpdec's streaming thread
 * to its own (an idle source per message on its main context) and emits
 * on-message-data only there, whose handler hands them on to ours: two
 * thread wake-ups on every message's way, a ring hop's included. A Receiver,
 * a probe on the channel's sink bin (where sctpdec's pad is linked), takes
 * the binary messages on the streaming thread and queues them on the link
 * itself: one wake-up less (docs/ARCHITECTURE.md, "Receiving"). Control
 * and string messages go on to webrtcbin as before.
 *
 * The probe is in place before the bin is linked, so every binary message
 * of the channel takes this path, in order. Not queued behind webrtcbin's
 * on-data-channel and on-open any more, the first ones may reach the main
 * thread before the channel is known or open there: they wait in
 * DcPeer.early until it opens (dc-peer.c's replay_early ()). Each Receiver
 * has an id,
 * kept on its channel, so that a second channel's messages (ignored, as
 * before) are told apart.
 *
 * DC_PEER_DIRECT_RECEIVE=0, read when a peer starts, leaves the messages to
 * webrtcbin (for measuring). Needs webrtcbin's prepare-data-channel (1.22). */

#define RECEIVER_KEY "dc-peer-receiver"

/* RFC 8831's payload protocol ids of binary messages. */
enum
{
  PPID_BINARY_PARTIAL = 52,
  PPID_BINARY = 53,
  PPID_BINARY_EMPTY = 56,
};

static gboolean
is_binary_ppid (guint32 ppid)
{
  return ppid == PPID_BINARY || ppid == PPID_BINARY_PARTIAL || ppid == PPID_BINARY_EMPTY;
}

/* gst/sctp/sctpreceivemeta.h's GstSctpReceiveMeta, found by its registered
 * name so that the build does not link libgstsctp: sctpdec registered the
 * type before any buffer carried one. */
typedef struct
{
  GstMeta meta;
  guint32 ppid;
} SctpReceiveMeta;

/* A meta API type by its registered name, kept in @cache once found (0
 * until the type is registered). */
static GType
meta_api_by_name (gsize      *cache,
                  const char *name)
{
  gsize found = g_atomic_pointer_get (cache);

  if (found == 0)
    {
      found = g_type_from_name (name);
      g_atomic_pointer_set (cache, found);
    }
  return (GType) found;
}

static GType
sctp_receive_meta_api (void)
{
  static gsize api = 0;

  return meta_api_by_name (&api, "GstSctpReceiveMetaAPI");
}

typedef struct
{
  Link                 *link;
  guint                 id;
  GstWebRTCDataChannel *channel;  /* unowned: only until its sink bin is added */
} Receiver;

static void
receiver_free (gpointer data)
{
  Receiver *receiver = data;

  if (receiver != NULL)
    {
      _dc_peer_link_unref (receiver->link);
      g_free (receiver);
    }
}

/* The Receiver of the channel whose bins webrtcbin adds next on this
 * thread: prepare-data-channel and the two gst_bin_add ()s that follow it
 * run on one thread, back to back (webrtcbin 1.22). */
static GPrivate pending_receiver = G_PRIVATE_INIT (receiver_free);

typedef struct
{
  GstBuffer *buffer;
  GstMapInfo map;
} Mapped;

static void
mapped_free (Mapped *mapped)
{
  gst_buffer_unmap (mapped->buffer, &mapped->map);
  gst_buffer_unref (mapped->buffer);
  g_free (mapped);
}

static GBytes *
buffer_to_bytes (GstBuffer *buffer)
{
  Mapped *mapped = g_new0 (Mapped, 1);

  mapped->buffer = gst_buffer_ref (buffer);
  if (!gst_buffer_map (mapped->buffer, &mapped->map, GST_MAP_READ))
    {
      gst_buffer_unref (mapped->buffer);
      g_free (mapped);
      return NULL;
    }
  return g_bytes_new_with_free_func (mapped->map.data, mapped->map.size,
                                     (GDestroyNotify) mapped_free, mapped);
}

/* sctpdec's streaming thread. */
static GstPadProbeReturn
receiver_probe_cb (GstPad          *pad,
                   GstPadProbeInfo *info,
                   gpointer         user_data)
{
  Receiver *receiver = user_data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GType api = sctp_receive_meta_api ();
  SctpReceiveMeta *meta;
  GBytes *bytes;
  Hop *hop;

  if (buffer == NULL || api == 0)
    return GST_PAD_PROBE_OK;
  meta = (SctpReceiveMeta *) gst_buffer_get_meta (buffer, api);
  if (meta == NULL || !is_binary_ppid (meta->ppid))
    return GST_PAD_PROBE_OK;
  bytes = meta->ppid == PPID_BINARY_EMPTY ? g_bytes_new (NULL, 0) : buffer_to_bytes (buffer);
  /* Unmappable: webrtcbin fails the channel, as it would have. */
  if (bytes == NULL)
    return GST_PAD_PROBE_OK;
  hop = g_new0 (Hop, 1);
  hop->kind = HOP_PIECE;
  hop->at = g_get_monotonic_time ();
  hop->receiver = receiver->id;
  hop->bytes = bytes;
  _dc_peer_link_push (receiver->link, hop);
  return GST_PAD_PROBE_DROP;
}

/* Sending without appsrc's thread -----------------------------------------
 *
 * gst_webrtc_data_channel_send_data () queues a message on the channel's
 * appsrc, whose streaming thread wakes to push it into sctpenc: a wake-up
 * on every message's way out. A small message, when nothing this peer sent
 * is still on that way, is pushed into the channel's sctpenc pad from the
 * main thread instead (gst_pad_chain (), with the SCTP send meta webrtcbin
 * would have set: binary, ordered, reliable).
 *
 * Order: a Sender counts the binary messages that entered the pad's chain
 * (a probe there runs under the pad's stream lock), whichever thread pushed
 * them; a message goes this way only when that count equals the messages
 * the peer sent, so every earlier one is in sctpenc or past it, and one
 * still in the chain holds the stream lock that the push then waits for.
 * Blocking: sctpenc's chain waits while usrsctp's send buffer (1 MiB) is
 * full, so only while the remote has credited all but
 * DC_PEER_DIRECT_INFLIGHT_MAX of what was sent, after its first credit: it
 * opened on our DCEP ack, which had then left appsrc (control messages are
 * not counted). The credits are the caller's check (dc-peer.c's
 * send_direct ()); the order and the pads are this file's.
 * Whatever the Sender cannot tell (no pad yet, no meta type) sends through
 * appsrc as before. DC_PEER_DIRECT_SEND=0, read when a peer starts, keeps
 * every message there (for measuring). */

#define SENDER_KEY "dc-peer-sender"

/* gst/sctp/sctpsendmeta.h's GstSctpSendMeta, by name as the receive meta. */
typedef struct
{
  GstMeta meta;
  guint32 ppid;
  gboolean ordered;
  gint    pr;
  guint32 pr_param;
} SctpSendMeta;

static GType
sctp_send_meta_api (void)
{
  static gsize api = 0;

  return meta_api_by_name (&api, "GstSctpSendMetaAPI");
}

/* Its registration, to add one (NULL until libgstsctp registered it). */
static const GstMetaInfo *
sctp_send_meta_info (void)
{
  static const GstMetaInfo *info = NULL;
  const GstMetaInfo *found = g_atomic_pointer_get (&info);

  if (found == NULL)
    {
      found = gst_meta_get_info ("GstSctpSendMeta");
      g_atomic_pointer_set (&info, found);
    }
  return found;
}

/* Weak references to the pads: the probe on the sctpenc pad and the
 * handler on the src bin's pad each hold the Sender. */
struct _DcPeerSender
{
  GWeakRef src_pad;   /* the channel's src bin's ghost pad */
  GWeakRef sctp_pad;  /* the pad it was linked to, set once */
  gint     linked;    /* atomic: sctp_pad was set */
  gint     entered;   /* atomic: binary messages that entered its chain */
};

typedef DcPeerSender Sender;

static void
sender_clear (Sender *sender)
{
  g_weak_ref_clear (&sender->src_pad);
  g_weak_ref_clear (&sender->sctp_pad);
}

static Sender *
sender_ref (Sender *sender)
{
  return g_atomic_rc_box_acquire (sender);
}

static void
sender_unref (gpointer sender)
{
  g_atomic_rc_box_release_full (sender, (GDestroyNotify) sender_clear);
}

static void
sender_closure_notify (gpointer  data,
                       GClosure *closure)
{
  sender_unref (data);
}

/* The streaming thread of whoever pushes, under the pad's stream lock. */
static GstPadProbeReturn
sender_probe_cb (GstPad          *pad,
                 GstPadProbeInfo *info,
                 gpointer         user_data)
{
  Sender *sender = user_data;
  GstBuffer *buffer = GST_PAD_PROBE_INFO_BUFFER (info);
  GType api = sctp_send_meta_api ();
  SctpSendMeta *meta;

  if (buffer != NULL && api != 0
      && (meta = (SctpSendMeta *) gst_buffer_get_meta (buffer, api)) != NULL
      && is_binary_ppid (meta->ppid))
    g_atomic_int_inc (&sender->entered);
  return GST_PAD_PROBE_OK;
}

/* The thread that links the channel to sctpenc, before its first message. */
static void
sender_linked_cb (GstPad  *pad,
                  GstPad  *peer,
                  gpointer user_data)
{
  Sender *sender = user_data;

  if (g_atomic_int_compare_and_exchange (&sender->linked, 0, 1))
    {
      g_weak_ref_set (&sender->sctp_pad, peer);
      gst_pad_add_probe (peer, GST_PAD_PROBE_TYPE_BUFFER, sender_probe_cb, sender_ref (sender),
                         sender_unref);
    }
}

/* @element is the channel's src bin: a Sender for it, kept on the channel. */
static void
add_sender (GstWebRTCDataChannel *channel,
            GstElement           *element)
{
  g_autoptr(GstPad) pad = gst_element_get_static_pad (element, "src");
  Sender *sender;

  if (pad == NULL || g_object_get_data (G_OBJECT (channel), SENDER_KEY) != NULL)
    return;
  sender = g_atomic_rc_box_new0 (Sender);
  g_weak_ref_init (&sender->src_pad, pad);
  g_weak_ref_init (&sender->sctp_pad, NULL);
  g_signal_connect_data (pad, "linked", G_CALLBACK (sender_linked_cb), sender_ref (sender),
                         sender_closure_notify, 0);
  g_object_set_data_full (G_OBJECT (channel), SENDER_KEY, sender, sender_unref);
}

/* Any thread (the caller of create-data-channel, or sctpdec's for a channel
 * the remote opened): a Receiver for the channel about to be built. */
static void
prepare_channel_cb (GstElement           *webrtc,
                    GstWebRTCDataChannel *channel,
                    gboolean              is_local,
                    gpointer              user_data)
{
  static gint next_id = 0;
  Receiver *receiver = g_new0 (Receiver, 1);

  receiver->link = _dc_peer_link_ref (user_data);
  receiver->id = (guint) g_atomic_int_add (&next_id, 1) + 1;
  receiver->channel = channel;
  g_private_replace (&pending_receiver, receiver);
}

/* Whether @element is a bin whose one child comes from @factory_name: a
 * data channel's src bin holds its appsrc alone, its sink bin its appsink. */
static gboolean
bin_holds_only (GstElement *element,
                const char *factory_name)
{
  gboolean found = FALSE;

  if (!GST_IS_BIN (element))
    return FALSE;
  GST_OBJECT_LOCK (element);
  if (GST_BIN_NUMCHILDREN (element) == 1)
    {
      GstElementFactory *factory = gst_element_get_factory (GST_BIN_CHILDREN (element)->data);

      found = factory != NULL
              && g_strcmp0 (gst_plugin_feature_get_name (GST_PLUGIN_FEATURE (factory)),
                            factory_name) == 0;
    }
  GST_OBJECT_UNLOCK (element);
  return found;
}

/* Same thread as prepare_channel_cb (), right after it: the channel's src
 * bin (its appsrc), then its sink bin (its appsink). */
static void
element_added_cb (GstBin     *bin,
                  GstElement *element,
                  gpointer    user_data)
{
  Receiver *receiver = g_private_get (&pending_receiver);
  Link *link = user_data;
  g_autoptr(GstPad) pad = NULL;

  if (receiver == NULL || receiver->link != link)
    return;
  if (bin_holds_only (element, "appsrc"))
    {
      if (link->direct_send)
        add_sender (receiver->channel, element);
      return;
    }
  if (!bin_holds_only (element, "appsink"))
    return;
  g_private_set (&pending_receiver, NULL);
  pad = gst_element_get_static_pad (element, "sink");
  if (pad == NULL || !link->direct_receive)
    {
      receiver_free (receiver);
      return;
    }
  g_object_set_data (G_OBJECT (receiver->channel), RECEIVER_KEY,
                     GUINT_TO_POINTER (receiver->id));
  receiver->channel = NULL;
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, receiver_probe_cb, receiver,
                     receiver_free);
}

/* Entry points (dc-peer-private.h) --------------------------------------- */

void
_dc_peer_direct_connect (GstElement *webrtc,
                         Link       *link)
{
  if ((!link->direct_receive && !link->direct_send)
      || g_signal_lookup ("prepare-data-channel", G_OBJECT_TYPE (webrtc)) == 0)
    return;
  g_signal_connect_data (webrtc, "prepare-data-channel", G_CALLBACK (prepare_channel_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (webrtc, "element-added", G_CALLBACK (element_added_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
}

guint
_dc_peer_direct_receiver_id (GstWebRTCDataChannel *channel)
{
  return GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (channel), RECEIVER_KEY));
}

DcPeerSender *
_dc_peer_direct_sender_get (GstWebRTCDataChannel *channel)
{
  Sender *sender = g_object_get_data (G_OBJECT (channel), SENDER_KEY);

  return sender != NULL ? sender_ref (sender) : NULL;
}

void
_dc_peer_direct_sender_unref (DcPeerSender *sender)
{
  sender_unref (sender);
}

gboolean
_dc_peer_direct_send (DcPeerSender *sender,
                      GBytes       *piece,
                      guint         sent_pieces,
                      gboolean     *ok,
                      GError      **error)
{
  g_autoptr(GstPad) src_pad = NULL;
  g_autoptr(GstPad) pad = NULL;
  g_autoptr(GstPad) linked_to = NULL;
  const GstMetaInfo *info;
  SctpSendMeta *meta;
  GstBuffer *buffer;
  GstFlowReturn ret;

  if (g_bytes_get_size (piece) > DC_PEER_DIRECT_SEND_MAX
      || (guint) g_atomic_int_get (&sender->entered) != sent_pieces)
    return FALSE;
  /* Still linked to the pad whose chain the probe counts. */
  src_pad = g_weak_ref_get (&sender->src_pad);
  pad = g_weak_ref_get (&sender->sctp_pad);
  linked_to = src_pad != NULL ? gst_pad_get_peer (src_pad) : NULL;
  info = sctp_send_meta_info ();
  if (pad == NULL || linked_to != pad || info == NULL)
    return FALSE;
  buffer = gst_buffer_new_wrapped_bytes (piece);
  /* The meta's own defaults: ordered, reliable. */
  meta = (SctpSendMeta *) gst_buffer_add_meta (buffer, info, NULL);
  meta->ppid = PPID_BINARY;
  ret = gst_pad_chain (pad, buffer);
  *ok = ret == GST_FLOW_OK;
  if (!*ok)
    g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER, "sctpenc refused a message: %s",
                 gst_flow_get_name (ret));
  return TRUE;
}
