/* dc-peer.c: one webrtcbin, one reliable ordered data channel, the framing
 * of docs/PROTOCOL.md on top, flow control and liveness.
 *
 * Threads: webrtcbin emits negotiation, candidate and channel signals on its
 * own threads. Those handlers never touch the DcPeer: they hand what they got
 * to a Link (refcounted, owned jointly by the peer and by every connected
 * handler) which queues it and wakes the peer's main context; the peer is
 * reached through a weak reference, so callbacks arriving after dispose are
 * dropped.
 *
 * Flow control, two levels. Frames wait in a queue; their pieces go to the
 * channel only while its buffered-amount is under HIGH_WATER, and
 * on-buffered-amount-low (threshold LOW_WATER) or a short poll resumes
 * sending. And each side reports with a credit message every CREDIT_STEP
 * bytes it has received; once a peer has sent one, a new frame starts only
 * while fewer than SEND_WINDOW bytes are unacknowledged. The window keeps
 * GStreamer's SCTP send buffer (1 MiB) from filling up with data in flight:
 * when it does, sctpenc waits for space with a 100 ms timeout that nothing
 * cuts short once no packet is left to send, and a link ran at 16-20 MB/s
 * instead of 70-100 (docs/BENCHMARKS.md). Credits go out at the next frame
 * boundary ahead of queued frames and outside the window, and pieces of a
 * frame already started never wait for credits, so two peers sending to
 * each other cannot wait on each other.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-peer.h"
#include "dc-peer-private.h"

#include <gst/gst.h>
#include <gst/sdp/sdp.h>
#include <gst/webrtc/webrtc.h>
#include <nice/agent.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/socket.h>

#include "dc-mesh-error.h"
#include "dc-mesh-train-protocol.h"
#include "dc-send-pace.h"

#define HIGH_WATER  (4u * 1024u * 1024u)
#define LOW_WATER   (1u * 1024u * 1024u)
#define PUMP_POLL_MS 20
#define SEND_WINDOW (768u * 1024u)
#define CREDIT_STEP (256u * 1024u)
/* An idle credit (on unless DC_PEER_IDLE_CREDIT=0): when this much or more is
 * received and not credited, and no piece came for IDLE_CREDIT_MS, the
 * credit goes without waiting for a credit step. A burst smaller than a
 * step then ends with a credit, and a crawling direction (pieces tens of
 * ms apart) is credited piece by piece, which is what lets the sender's
 * slow sending see it (dc-send-pace.c); a stream at full speed has no gap
 * and sends no more credits than before. On the H200 host's shaped
 * network (docs/BENCHMARKS.md, s21) crawls were then renewed within 2–4
 * steps instead of going on unseen for up to 20. */
#define IDLE_CREDIT_MIN (32u * 1024u)
#define IDLE_CREDIT_MS  3
/* Hand-off times kept for slow sending (dc-send-pace.c): more than the
 * window's pieces ever are; past it the oldest go (that credit's interval
 * then counts only by the in-flight rule). */
#define HANDED_MAX  1024u

/* When the piece ending at byte @end (tx_bytes then) went to the channel. */
typedef struct
{
  guint64 end;
  gint64  us;
} Handed;

/* A measuring aid (docs/BENCHMARKS.md, branch group-shaped): DC_PEER_SEND_WINDOW
 * and DC_PEER_CREDIT_STEP (bytes, read once) replace the two above, so that a
 * bench can try other windows without a build. */
static guint
peer_tunable (const char *name,
              guint       fallback)
{
  const char *value = g_getenv (name);
  guint64 parsed;

  if (value == NULL || *value == '\0')
    return fallback;
  parsed = g_ascii_strtoull (value, NULL, 10);
  return parsed >= 4096 && parsed <= (64u << 20) ? (guint) parsed : fallback;
}

typedef struct
{
  guint send_window;
  guint credit_step;
  /* DC_PEER_PACE_HANDED=1: slow sending also counts, from the hand-off
   * times of the pieces, the intervals that begin with little in flight
   * (dc-send-pace.c; s20: a crawl under an int8 run's bursts is reported a
   * step sooner in /mesh/send-pace/bursts-crawl). Off: on the shaped
   * network it reported healthy links (the receiver's latency in crediting
   * is inside the bound) and their renewals cost more than the crawls
   * (docs/BENCHMARKS.md, s21); idle credits are what made crawls seen. */
  gboolean pace_handed;
  /* DC_PEER_PACE_EPISODE_MS (50–5000): the slow time that reports an
   * episode (and starts a renewal), DC_SEND_PACE_EPISODE_US otherwise. */
  gint64 pace_episode_us;
  gboolean idle_credit;
} PeerTunables;

static const PeerTunables *
peer_tunables (void)
{
  static gsize once;
  static PeerTunables tunables;

  if (g_once_init_enter (&once))
    {
      tunables.send_window = peer_tunable ("DC_PEER_SEND_WINDOW", SEND_WINDOW);
      tunables.credit_step = peer_tunable ("DC_PEER_CREDIT_STEP", CREDIT_STEP);
      tunables.pace_handed = g_strcmp0 (g_getenv ("DC_PEER_PACE_HANDED"), "1") == 0;
      tunables.idle_credit = g_strcmp0 (g_getenv ("DC_PEER_IDLE_CREDIT"), "0") != 0;
      {
        const char *ms = g_getenv ("DC_PEER_PACE_EPISODE_MS");
        guint64 parsed = ms != NULL ? g_ascii_strtoull (ms, NULL, 10) : 0;

        tunables.pace_episode_us = parsed >= 50 && parsed <= 5000 ? (gint64) parsed * 1000 : 0;
      }
      g_once_init_leave (&once, 1);
    }
  return &tunables;
}

/* A measuring aid: DC_PEER_TRACE=DIR (read once) has every peer of this
 * process write to DIR/peer-PID.txt when the credit window starts and stops
 * holding its next frame (monotonic µs first, as DC_TRAIN_GROUP_TRACE's
 * lines): "window_block peer=ID tx=… acked=…", "window_open peer=ID
 * waited_us=…". It tells a direction held by late credits from one whose
 * SCTP moves slowly (docs/BENCHMARKS.md, branch group-shaped). Main
 * thread only. */
static FILE *
peer_trace (void)
{
  static gsize once;
  static FILE *file;

  if (g_once_init_enter (&once))
    {
      const char *dir = g_getenv ("DC_PEER_TRACE");

      if (dir != NULL && *dir != '\0')
        {
          g_autofree char *name = g_strdup_printf ("peer-%d.txt", (int) getpid ());
          g_autofree char *path = g_build_filename (dir, name, NULL);

          (void) g_mkdir_with_parents (dir, 0755);
          file = fopen (path, "a");
          if (file == NULL)
            g_message ("DC_PEER_TRACE: cannot write %s: %s", path, g_strerror (errno));
        }
      g_once_init_leave (&once, 1);
    }
  return file;
}

/* The receipt's checks (a frame's CRC-32 and a chunk's SHA-256, about 80
 * and 250 µs per 64 KiB piece on the 2-vCPU VM) run on a worker, in order
 * (check_next ()). A message under CHECK_INLINE_MAX bytes that finds nothing
 * waiting is checked here at once: heartbeats, credits and reports cost
 * microseconds, and a thread hop would only delay them. */
#define CHECK_INLINE_MAX 4096
/* Messages a worker checks before the main thread gets them: 32 pieces are
 * about 2 MiB and 10 ms of checks here, the most a small message waits
 * behind chunks before it is handled. */
#define CHECK_BATCH_MAX 32
/* Received bytes waiting for their checks beyond which this side holds its
 * credits back, so that a sender stops after its window (SEND_WINDOW): a
 * worker slower than the link then bounds the queue at this plus a window.
 * 8 MiB is 40 ms of checks here, so a worker keeping up never reaches it. */
#define CHECK_QUEUE_MAX (8u * 1024u * 1024u)

/* One frame on its way out: its pieces go to the channel back to back. */
typedef struct
{
  GPtrArray *pieces;   /* GBytes* */
  guint      next;     /* the first piece not yet sent */
  gboolean   queued;   /* counted in DcPeer.queued (credits are not) */
} OutFrame;

static void
out_frame_free (OutFrame *frame)
{
  g_ptr_array_unref (frame->pieces);
  g_free (frame);
}

static OutFrame *
out_frame_new (GPtrArray *pieces,
               gboolean   queued)
{
  OutFrame *frame = g_new0 (OutFrame, 1);

  frame->pieces = g_ptr_array_ref (pieces);
  frame->queued = queued;
  return frame;
}

/* A received message on its way to be checked, in arrival order; or a
 * reader's fault in its place, so that faults count in order too. */
typedef struct
{
  DcMeshMessage *message;   /* NULL for a fault */
  GError        *error;     /* the fault, or the frame check's verdict */
  guint32        checksum;  /* the frame's, for dc_mesh_message_verify () */
  gint64         at;        /* its last piece's Hop.at */
  gboolean       hashed;    /* hash holds its chunk data's SHA-256 */
  guint8         hash[DC_MESH_HASH_SIZE];
  gsize          size;      /* its payload's bytes as received (checking_bytes) */
} Checked;

static void
checked_free (Checked *checked)
{
  g_clear_pointer (&checked->message, dc_mesh_message_free);
  g_clear_error (&checked->error);
  g_free (checked);
}

static gsize
checked_size (Checked *checked)
{
  return checked->size;
}

struct _DcPeer
{
  GObject               parent_instance;

  /* owned */
  Link                 *link;
  GstElement           *pipeline;
  GstElement           *webrtc;
  GstWebRTCDataChannel *channel;
  GPtrArray            *ignored;      /* GstWebRTCDataChannel*: second ones, closed at the end */
  DcMeshReader         *reader;
  DcMeshHello          *local_hello;
  DcMeshHello          *remote_hello;
  GQueue                out;          /* OutFrame* waiting for the channel */
  OutFrame             *current;      /* the frame whose pieces are going out */
  GQueue                checking;     /* Checked*: received, not yet checked */
  GCancellable         *check_cancel; /* the checks in flight (one batch at most) */
  DcPeerConfig          config;

  /* state */
  char                 *id;
  char                 *reason;
  char                 *display_name;  /* unique in its mesh, set by DcMesh */
  DcPeerState           state;
  gsize                 queued;       /* bytes of pieces in out and current */
  guint64               tx_bytes;     /* bytes of pieces handed to the channel */
  guint64               tx_acked;     /* the peer's latest credit */
  GQueue                handed;       /* Handed: pieces handed to the channel, not yet credited */
  guint64               rx_bytes;     /* bytes of pieces received */
  guint64               rx_credited;  /* rx_bytes in our latest credit */
  gint64                last_rx_us;
  gint64                last_tick_us; /* tick_cb ()'s last run: a late one is this side's stall */
  gint64                piece_at;     /* the piece being handled: Hop.at */
  guint                 receiver;     /* self->channel's Receiver id, 0 when it has none */
  GQueue                early;        /* Hop*: direct pieces that came before the channel opened */
  gsize                 early_bytes;
  guint64               direct_pieces; /* pieces received without webrtcbin's thread */
  guint64               early_pieces;  /* of those, kept until the channel opened */
  DcPeerSender         *sender;        /* self->channel's (owned ref), or NULL */
  guint                 sent_pieces;   /* binary messages handed to the channel, by either path */
  guint64               direct_sends;  /* of those, pushed into sctpenc from here */
  gsize                 checking_bytes; /* payload bytes in checking and in flight */
  const guint8         *message_hash; /* the message being handled: Checked.hash, or NULL */
  gint64                started_us;
  gint64                window_blocked_us; /* since when the window holds the next frame, or 0 */
  gint64                window_wait_us;    /* the window's holds, summed */
  DcSendPace            send_pace;         /* slow sending, from the credits */
  gint64                pace_noticed_us;   /* the last "slow-sending" signal, or 0 */
  gboolean              pace_notice_open;  /* its "ended" is still to come */
  guint64               heartbeat_seq;
  guint                 faults;
  guint                 tick_id;
  guint                 pump_id;
  guint                 bus_watch_id;
  guint                 offerer : 1;
  guint                 offer_made : 1;
  guint                 hello_sent : 1;
  guint                 credit_due : 1;   /* a credit waits for a frame boundary */
  guint                 window_on : 1;    /* the peer sends credits */
  guint                 check_busy : 1;   /* a batch is being checked */
  /* Not a bit field: the check worker writes it while the main thread
   * writes the bits above. */
  gboolean              test_check_stalled; /* DC_TEST_CHECK_STALL_MS given to a batch */
  guint                 test_check_stall_ms;  /* DC_TEST_CHECK_STALL_MS, read at creation */
  /* DC_TEST_CREDIT_HOLD=MS:COUNT, read at creation: the next COUNT credits
   * this side owes each wait MS and acknowledge one credit step at most. */
  guint                 test_credit_hold_ms;
  guint                 test_credit_holds;
  guint                 credit_hold_id;
  guint                 credit_held : 1;  /* the credit due now was held */
  guint                 idle_credit_id;   /* IDLE_CREDIT_MS after the last piece */
  /* The data channels' close (begin_close ()), once begun: what it waits
   * for, until when, and whether the remote is silent. */
  struct _Closing      *closing;
  GPtrArray            *closing_channels;
  gint64                closing_deadline;
  guint                 close_begun : 1;
  guint                 closing_silent : 1;
};

G_DEFINE_FINAL_TYPE (DcPeer, dc_peer, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_STATE,
  PROP_NAME,
  N_PROPS
};

enum {
  SIGNAL_SIGNAL_OUT,
  SIGNAL_MESSAGE,
  SIGNAL_SLOW_SENDING,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

GType
dc_peer_state_get_type (void)
{
  static gsize type_id = 0;

  if (g_once_init_enter (&type_id))
    {
      static const GEnumValue values[] = {
        { DC_PEER_STATE_NEW, "DC_PEER_STATE_NEW", "new" },
        { DC_PEER_STATE_SIGNALING, "DC_PEER_STATE_SIGNALING", "signaling" },
        { DC_PEER_STATE_CONNECTING, "DC_PEER_STATE_CONNECTING", "connecting" },
        { DC_PEER_STATE_OPEN, "DC_PEER_STATE_OPEN", "open" },
        { DC_PEER_STATE_CLOSED, "DC_PEER_STATE_CLOSED", "closed" },
        { DC_PEER_STATE_FAILED, "DC_PEER_STATE_FAILED", "failed" },
        { 0, NULL, NULL }
      };
      GType type = g_enum_register_static ("DcPeerState", values);

      g_once_init_leave (&type_id, type);
    }
  return type_id;
}

static void
hop_free (Hop *hop)
{
  g_free (hop->text);
  g_clear_pointer (&hop->bytes, g_bytes_unref);
  g_clear_object (&hop->channel);
  g_clear_pointer (&hop->description, gst_webrtc_session_description_free);
  g_free (hop);
}

static Link *
link_new (DcPeer *peer)
{
  Link *link = g_atomic_rc_box_new0 (Link);

  g_weak_ref_init (&link->peer, peer);
  link->context = g_main_context_ref_thread_default ();
  g_mutex_init (&link->lock);
  g_queue_init (&link->hops);
  return link;
}

static void
link_clear (Link *link)
{
  g_weak_ref_clear (&link->peer);
  g_main_context_unref (link->context);
  g_queue_clear_full (&link->hops, (GDestroyNotify) hop_free);
  g_mutex_clear (&link->lock);
}

Link *
_dc_peer_link_ref (Link *link)
{
  return g_atomic_rc_box_acquire (link);
}

void
_dc_peer_link_unref (Link *link)
{
  g_atomic_rc_box_release_full (link, (GDestroyNotify) link_clear);
}

void
_dc_peer_link_closure_notify (gpointer  data,
                              GClosure *closure)
{
  _dc_peer_link_unref (data);
}

static void handle_hop (DcPeer *self, Hop *hop);

static gboolean
link_dispatch (gpointer user_data)
{
  Link *link = user_data;
  g_autoptr(DcPeer) self = g_weak_ref_get (&link->peer);
  GQueue hops = G_QUEUE_INIT;

  g_mutex_lock (&link->lock);
  hops = link->hops;
  g_queue_init (&link->hops);
  link->scheduled = FALSE;
  g_mutex_unlock (&link->lock);

  for (GList *l = hops.head; l != NULL; l = l->next)
    if (self != NULL)
      handle_hop (self, l->data);
  g_queue_clear_full (&hops, (GDestroyNotify) hop_free);
  return G_SOURCE_REMOVE;
}

/* Any thread: queue a hop in arrival order and wake the main context once. */
void
_dc_peer_link_push (Link *link,
                    Hop  *hop)
{
  gboolean schedule;

  g_mutex_lock (&link->lock);
  g_queue_push_tail (&link->hops, hop);
  schedule = !link->scheduled;
  link->scheduled = TRUE;
  g_mutex_unlock (&link->lock);

  /* Always through a source, never g_main_context_invoke: called on the
   * main thread (webrtcbin may emit there), invoke would run the hop inside
   * the webrtcbin call that emitted it, in the middle of our own code. */
  if (schedule)
    {
      GSource *source = g_idle_source_new ();

      g_source_set_priority (source, G_PRIORITY_DEFAULT);
      g_source_set_callback (source, link_dispatch, _dc_peer_link_ref (link),
                             (GDestroyNotify) _dc_peer_link_unref);
      g_source_attach (source, link->context);
      g_source_unref (source);
    }
}

static void
link_push_simple (Link       *link,
                  HopKind     kind,
                  guint       num,
                  const char *text)
{
  Hop *hop = g_new0 (Hop, 1);

  hop->kind = kind;
  hop->num = num;
  hop->text = g_strdup (text);
  _dc_peer_link_push (link, hop);
}

static void
clear_out (DcPeer *self)
{
  g_queue_clear_full (&self->out, (GDestroyNotify) out_frame_free);
  g_clear_pointer (&self->current, out_frame_free);
  self->queued = 0;
  self->credit_due = FALSE;
}

/* Nothing received is delivered any more: what waits is dropped and the
 * batch in flight, if any, is cancelled (its results are dropped). */
static void
clear_checking (DcPeer *self)
{
  g_queue_clear_full (&self->checking, (GDestroyNotify) checked_free);
  g_cancellable_cancel (self->check_cancel);
  self->checking_bytes = 0;
}

/* The direct pieces waiting for the channel to open (dc-peer-direct.c,
 * "Receiving without webrtcbin's thread"): dropped when the peer ends. */
static void
clear_early (DcPeer *self)
{
  g_queue_clear_full (&self->early, (GDestroyNotify) hop_free);
  self->early_bytes = 0;
}

static void
set_state (DcPeer      *self,
           DcPeerState  state,
           const char  *reason)
{
  if (self->state == state)
    return;
  /* CLOSED and FAILED are final. */
  if (self->state == DC_PEER_STATE_CLOSED || self->state == DC_PEER_STATE_FAILED)
    return;
  g_debug ("peer %s: %d → %d (%s)", self->id, self->state, state, reason ? reason : "");
  self->state = state;
  if (reason != NULL)
    {
      g_free (self->reason);
      self->reason = g_strdup (reason);
    }
  if (state == DC_PEER_STATE_CLOSED || state == DC_PEER_STATE_FAILED)
    {
      g_clear_handle_id (&self->tick_id, g_source_remove);
      g_clear_handle_id (&self->pump_id, g_source_remove);
      g_clear_handle_id (&self->credit_hold_id, g_source_remove);
      g_clear_handle_id (&self->idle_credit_id, g_source_remove);
      clear_out (self);
      clear_checking (self);
      clear_early (self);
    }
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STATE]);
}

static void
emit_signal_out (DcPeer     *self,
                 const char *kind,
                 const char *key,
                 const char *value,
                 gint        mline)
{
  g_autoptr(JsonObject) body = json_object_new ();

  json_object_set_string_member (body, "kind", kind);
  json_object_set_string_member (body, key, value);
  if (mline >= 0)
    json_object_set_int_member (body, "mline", mline);
  g_signal_emit (self, signals[SIGNAL_SIGNAL_OUT], 0, body);
}

/* Streaming threads ------------------------------------------------------ */

static void connect_channel_signals (Link *link, GstWebRTCDataChannel *channel);

/* Streaming thread: only take the description; it is applied and sent from
 * the main thread, so that no GStreamer thread ever holds the last reference
 * to the peer (its dispose stops the pipeline, which a streaming thread must
 * not do). */
static void
description_created_cb (GstPromise *promise,
                        gpointer    user_data)
{
  Link *link = user_data;
  const GstStructure *reply = NULL;
  GstWebRTCSessionDescription *description = NULL;
  Hop *hop;

  if (gst_promise_wait (promise) == GST_PROMISE_RESULT_REPLIED)
    reply = gst_promise_get_reply (promise);
  if (reply != NULL)
    gst_structure_get (reply, gst_structure_has_field (reply, "offer") ? "offer" : "answer",
                       GST_TYPE_WEBRTC_SESSION_DESCRIPTION, &description, NULL);
  gst_promise_unref (promise);
  if (description == NULL)
    {
      link_push_simple (link, HOP_ERROR, 0, "webrtcbin created no session description");
      return;
    }
  hop = g_new0 (Hop, 1);
  hop->kind = HOP_DESCRIPTION;
  hop->description = description;
  _dc_peer_link_push (link, hop);
}

static void
remote_set_cb (GstPromise *promise,
               gpointer    user_data)
{
  Link *link = user_data;

  gst_promise_wait (promise);
  gst_promise_unref (promise);
  link_push_simple (link, HOP_REMOTE_SET, 0, NULL);
}

static void
negotiation_needed_cb (GstElement *webrtc,
                       gpointer    user_data)
{
  link_push_simple (user_data, HOP_NEGOTIATE, 0, NULL);
}

static void
ice_candidate_cb (GstElement *webrtc,
                  guint       mline,
                  const char *candidate,
                  gpointer    user_data)
{
  link_push_simple (user_data, HOP_CANDIDATE, mline, candidate);
}

static void
data_channel_cb (GstElement           *webrtc,
                 GstWebRTCDataChannel *channel,
                 gpointer              user_data)
{
  const char *hold = g_getenv ("DC_TEST_CHANNEL_HOLD_MS");
  Hop *hop = g_new0 (Hop, 1);

  connect_channel_signals (user_data, channel);
  /* Test only: holds webrtcbin's thread before the channel reaches ours,
   * so that the remote's first messages come before it (keep_early ()). */
  if (hold != NULL)
    g_usleep (MIN (g_ascii_strtoull (hold, NULL, 10), 5000) * G_TIME_SPAN_MILLISECOND);
  hop->kind = HOP_CHANNEL;
  hop->channel = g_object_ref (channel);
  _dc_peer_link_push (user_data, hop);
}

static void
channel_open_cb (GstWebRTCDataChannel *channel,
                 gpointer              user_data)
{
  link_push_simple (user_data, HOP_OPEN, 0, NULL);
}

static void
channel_close_cb (GstWebRTCDataChannel *channel,
                  gpointer              user_data)
{
  link_push_simple (user_data, HOP_CLOSE, 0, NULL);
}

static void
channel_error_cb (GstWebRTCDataChannel *channel,
                  GError               *error,
                  gpointer              user_data)
{
  link_push_simple (user_data, HOP_ERROR, 0, error != NULL ? error->message : "channel error");
}

static void
channel_data_cb (GstWebRTCDataChannel *channel,
                 GBytes               *bytes,
                 gpointer              user_data)
{
  Hop *hop = g_new0 (Hop, 1);

  hop->kind = HOP_PIECE;
  hop->at = g_get_monotonic_time ();
  hop->bytes = bytes != NULL ? g_bytes_ref (bytes) : g_bytes_new (NULL, 0);
  _dc_peer_link_push (user_data, hop);
}

static void
channel_string_cb (GstWebRTCDataChannel *channel,
                   const char           *text,
                   gpointer              user_data)
{
  link_push_simple (user_data, HOP_TEXT, 0, NULL);
}

static void
channel_low_cb (GstWebRTCDataChannel *channel,
                gpointer              user_data)
{
  link_push_simple (user_data, HOP_LOW, 0, NULL);
}

/* Main thread ------------------------------------------------------------ */

static void pump (DcPeer *self);

static gboolean
pump_poll_cb (gpointer user_data)
{
  DcPeer *self = user_data;

  self->pump_id = 0;
  pump (self);
  return G_SOURCE_REMOVE;
}

/* Slow sending (dc-send-pace.c): one line when an episode is long enough
 * to matter and one when it ends, so that a step that took twice as long
 * says why; at most one episode in PACE_NOTICE_GAP_US is told (a link
 * hovering about the threshold would tell one a second), all are counted. */
#define PACE_NOTICE_GAP_US (10 * G_USEC_PER_SEC)

static void
report_send_pace (DcPeer         *self,
                  DcSendPaceEvent event)
{
  const char *name = dc_peer_get_name (self) != NULL ? dc_peer_get_name (self) : self->id;
  g_autofree char *text = NULL;
  guint episodes;
  gint64 slow_us;

  if (event == DC_SEND_PACE_STARTED)
    {
      gint64 now = g_get_monotonic_time ();

      if (self->pace_noticed_us != 0 && now - self->pace_noticed_us < PACE_NOTICE_GAP_US)
        return;
      self->pace_noticed_us = now;
      self->pace_notice_open = TRUE;
      text = g_strdup_printf ("sending to %s at %.1f MB/s for %.1f s with %" G_GUINT64_FORMAT
                              " kB unacknowledged: the link is slow, or its SCTP association is"
                              " stuck at a few packets a round trip (docs/ARCHITECTURE.md,"
                              " \"Slow sending\")",
                              name, dc_send_pace_rate (&self->send_pace) / 1e6,
                              self->send_pace.slow_us / 1e6,
                              (self->tx_bytes - self->tx_acked) / 1000);
    }
  else if (event == DC_SEND_PACE_ENDED && self->pace_notice_open)
    {
      self->pace_notice_open = FALSE;
      dc_send_pace_totals (&self->send_pace, &episodes, &slow_us);
      text = g_strdup_printf ("sending to %s at full speed again (slow for %.1f s in %u %s"
                              " so far)", name, slow_us / 1e6, episodes,
                              episodes == 1 ? "episode" : "episodes");
    }
  else
    return;
  /* The mesh makes it an event (DcMesh::event "slow-sending",
   * "sending-recovered"), which a training group logs. */
  g_debug ("peer %s: %s", self->id, text);
  g_signal_emit (self, signals[SIGNAL_SLOW_SENDING], 0, event == DC_SEND_PACE_STARTED, text);
}

/* The credit due now, for rx_bytes. */
static OutFrame *
credit_frame_new (DcPeer *self)
{
  /* A held credit (test only) acknowledges one step, as a receiver that
   * receives slowly would. */
  guint64 credited = self->credit_held
                     ? MIN (self->rx_bytes, self->rx_credited + peer_tunables ()->credit_step)
                     : self->rx_bytes;
  g_autoptr(GBytes) payload = dc_mesh_credit_encode (credited);
  g_autoptr(GPtrArray) pieces = NULL;

  pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_CREDIT, payload, NULL);
  self->rx_credited = credited;
  self->credit_due = FALSE;
  self->credit_held = FALSE;
  return out_frame_new (pieces, FALSE);
}

/* The piece just handed to the channel (it ends at tx_bytes): when, for
 * slow sending. */
static void
note_handed (DcPeer *self)
{
  Handed *handed = g_new (Handed, 1);

  handed->end = self->tx_bytes;
  handed->us = g_get_monotonic_time ();
  g_queue_push_tail (&self->handed, handed);
  if (self->handed.length > HANDED_MAX)
    g_free (g_queue_pop_head (&self->handed));
}

/* When the piece holding the last byte a credit for @acked bytes
 * acknowledges was handed to the channel (0: not known); the pieces it
 * acknowledges whole are forgotten. */
static gint64
handed_at (DcPeer  *self,
           guint64  acked)
{
  Handed *head;
  gint64 us;

  while ((head = g_queue_peek_head (&self->handed)) != NULL && head->end < acked)
    g_free (g_queue_pop_head (&self->handed));
  if (head == NULL || acked == 0)
    return 0;
  us = head->us;
  if (head->end == acked)
    g_free (g_queue_pop_head (&self->handed));
  return us;
}

/* Pushes @piece into the channel's sctpenc pad from here when the credits
 * allow it and that keeps the order (dc-peer-direct.c, "Sending without
 * appsrc's thread"). Returns: FALSE when it did not try; else *ok says
 * whether it was taken. */
static gboolean
send_direct (DcPeer   *self,
             GBytes   *piece,
             gboolean *ok,
             GError  **error)
{
  if (self->sender == NULL || !self->window_on
      || self->tx_bytes - self->tx_acked > DC_PEER_DIRECT_INFLIGHT_MAX
      || !_dc_peer_direct_send (self->sender, piece, self->sent_pieces, ok, error))
    return FALSE;
  if (*ok)
    {
      self->sent_pieces++;
      self->direct_sends++;
    }
  return TRUE;
}

/* Every binary message goes to the channel through here. */
static gboolean
channel_send (DcPeer  *self,
              GBytes  *piece,
              GError **error)
{
  gboolean ok = FALSE;

  if (send_direct (self, piece, &ok, error))
    return ok;
  ok = gst_webrtc_data_channel_send_data_full (self->channel, piece, error);
  if (ok)
    self->sent_pieces++;
  return ok;
}

static void
pump (DcPeer *self)
{
  while (self->state == DC_PEER_STATE_OPEN)
    {
      g_autoptr(GError) error = NULL;
      guint64 buffered = 0;
      GBytes *piece;
      gsize size;

      if (self->current == NULL)
        {
          if (self->credit_due)
            self->current = credit_frame_new (self);
          else if (g_queue_is_empty (&self->out))
            return;
          else if (self->window_on
                   && self->tx_bytes - self->tx_acked >= peer_tunables ()->send_window)
            {
              if (self->window_blocked_us == 0)
                {
                  FILE *trace = peer_trace ();

                  self->window_blocked_us = g_get_monotonic_time ();
                  if (trace != NULL)
                    {
                      fprintf (trace, "%" G_GINT64_FORMAT " window_block peer=%s tx=%"
                               G_GUINT64_FORMAT " acked=%" G_GUINT64_FORMAT "\n",
                               self->window_blocked_us, self->id, self->tx_bytes,
                               self->tx_acked);
                      fflush (trace);
                    }
                }
              return;  /* the next credit calls pump () */
            }
          else
            self->current = g_queue_pop_head (&self->out);
        }

      g_object_get (self->channel, "buffered-amount", &buffered, NULL);
      if (buffered >= HIGH_WATER)
        {
          /* on-buffered-amount-low usually wakes us; the poll covers a
           * crossing that happened between the read and now. */
          if (self->pump_id == 0)
            self->pump_id = g_timeout_add (PUMP_POLL_MS, pump_poll_cb, self);
          return;
        }
      piece = g_ptr_array_index (self->current->pieces, self->current->next++);
      size = g_bytes_get_size (piece);
      if (self->current->queued)
        self->queued -= size;
      self->tx_bytes += size;
      if (peer_tunables ()->pace_handed)
        note_handed (self);
      if (!channel_send (self, piece, &error))
        {
          GstWebRTCDataChannelState ready = GST_WEBRTC_DATA_CHANNEL_STATE_OPEN;

          /* The remote closed the channel (its end stopped: dc_peer_dispose
           * ()) and the close is on its way here: it left, nothing failed. */
          g_object_get (self->channel, "ready-state", &ready, NULL);
          if (ready == GST_WEBRTC_DATA_CHANNEL_STATE_CLOSING
              || ready == GST_WEBRTC_DATA_CHANNEL_STATE_CLOSED)
            {
              set_state (self, DC_PEER_STATE_CLOSED, "channel-closed");
              return;
            }
          g_message ("peer %s: send failed: %s", self->id, error->message);
          set_state (self, DC_PEER_STATE_FAILED, "send-failed");
          return;
        }
      if (self->current->next == self->current->pieces->len)
        g_clear_pointer (&self->current, out_frame_free);
    }
}

static void
add_fault (DcPeer       *self,
           const GError *error)
{
  self->faults++;
  g_message ("peer %s: refused a malformed message (%u/%u): %s", self->id, self->faults,
             DC_PEER_MAX_FAULTS, error->message);
  if (self->faults >= DC_PEER_MAX_FAULTS)
    dc_peer_close (self, "faults");
}

static void
handle_message (DcPeer        *self,
                DcMeshMessage *message)
{
  g_autoptr(GError) error = NULL;

  if (message->type == DC_MESH_MSG_HELLO)
    {
      DcMeshHello *hello = dc_mesh_hello_decode (message->payload, &error);

      if (hello == NULL || self->remote_hello != NULL)
        {
          if (error == NULL)
            error = g_error_new_literal (DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED, "second hello");
          dc_mesh_hello_free (hello);
          add_fault (self, error);
          return;
        }
      self->remote_hello = hello;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_NAME]);
      return;
    }
  if (self->remote_hello == NULL)
    {
      error = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                           "%s message before the hello",
                           dc_mesh_message_type_to_string (message->type));
      add_fault (self, error);
      return;
    }
  if (message->type == DC_MESH_MSG_CREDIT)
    {
      guint64 credit = 0;

      if (!dc_mesh_credit_decode (message->payload, &credit, &error))
        {
          add_fault (self, error);
          return;
        }
      if (credit > self->tx_bytes)
        {
          error = g_error_new (DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                               "credit for %" G_GUINT64_FORMAT " bytes, only %" G_GUINT64_FORMAT
                               " sent", credit, self->tx_bytes);
          add_fault (self, error);
          return;
        }
      self->tx_acked = MAX (self->tx_acked, credit);
      self->window_on = TRUE;
      report_send_pace (self, dc_send_pace_credit (&self->send_pace, g_get_monotonic_time (),
                                                   self->tx_acked,
                                                   self->tx_bytes - self->tx_acked,
                                                   peer_tunables ()->credit_step,
                                                   peer_tunables ()->pace_handed
                                                   ? handed_at (self, self->tx_acked) : 0));
      if (self->window_blocked_us != 0
          && self->tx_bytes - self->tx_acked < peer_tunables ()->send_window)
        {
          gint64 now = g_get_monotonic_time ();
          FILE *trace = peer_trace ();

          self->window_wait_us += now - self->window_blocked_us;
          if (trace != NULL)
            {
              fprintf (trace, "%" G_GINT64_FORMAT " window_open peer=%s waited_us=%"
                       G_GINT64_FORMAT "\n", now, self->id, now - self->window_blocked_us);
              fflush (trace);
            }
          self->window_blocked_us = 0;
        }
      pump (self);
      return;
    }
  switch (message->type)
    {
    case DC_MESH_MSG_HEARTBEAT:
    case DC_MESH_MSG_PONG:
      break;
    case DC_MESH_MSG_PING:
      dc_peer_send (self, DC_MESH_MSG_PONG, message->payload, NULL);
      break;
    case DC_MESH_MSG_BYE:
      dc_peer_close (self, "bye");
      return;
    default:
      break;
    }
  g_signal_emit (self, signals[SIGNAL_MESSAGE], 0, message->type, message->payload);
}

static void maybe_credit (DcPeer *self);

/* Test only (DC_TEST_CREDIT_HOLD): a held credit goes now. */
static gboolean
credit_hold_cb (gpointer user_data)
{
  DcPeer *self = user_data;

  self->credit_hold_id = 0;
  self->credit_due = TRUE;
  self->credit_held = TRUE;
  pump (self);
  /* A held credit acknowledged one step: the rest may be due at once,
   * with nothing more to receive to call us again. */
  maybe_credit (self);
  return G_SOURCE_REMOVE;
}

/* No credit waits to go, none is held, and the checks keep up. */
static gboolean
credit_may_go (DcPeer *self)
{
  return !self->credit_due && self->checking_bytes <= CHECK_QUEUE_MAX
         && self->credit_hold_id == 0;
}

static gboolean
idle_credit_cb (gpointer user_data)
{
  DcPeer *self = user_data;
  gint64 quiet_us = g_get_monotonic_time () - self->last_rx_us;

  self->idle_credit_id = 0;
  /* A piece came since it was armed: wait for the gap after that one. */
  if (quiet_us < IDLE_CREDIT_MS * 1000)
    {
      self->idle_credit_id = g_timeout_add (MAX (1, IDLE_CREDIT_MS - quiet_us / 1000),
                                            idle_credit_cb, self);
      return G_SOURCE_REMOVE;
    }
  if (self->state == DC_PEER_STATE_OPEN
      && self->rx_bytes - self->rx_credited >= IDLE_CREDIT_MIN && credit_may_go (self)
      && self->test_credit_holds == 0)
    {
      self->credit_due = TRUE;
      pump (self);
    }
  return G_SOURCE_REMOVE;
}

/* A credit is due every CREDIT_STEP bytes received, unless too much waits
 * for its checks (CHECK_QUEUE_MAX): then it goes once they catch up. With
 * idle credits on, a gap in the pieces brings it sooner (IDLE_CREDIT_MIN). */
static void
maybe_credit (DcPeer *self)
{
  if (peer_tunables ()->idle_credit && self->idle_credit_id == 0
      && self->rx_bytes - self->rx_credited >= IDLE_CREDIT_MIN)
    self->idle_credit_id = g_timeout_add (IDLE_CREDIT_MS, idle_credit_cb, self);
  if (self->rx_bytes - self->rx_credited >= peer_tunables ()->credit_step
      && credit_may_go (self))
    {
      if (self->test_credit_holds > 0)
        {
          self->test_credit_holds--;
          self->credit_hold_id = g_timeout_add (self->test_credit_hold_ms, credit_hold_cb, self);
          return;
        }
      self->credit_due = TRUE;
      pump (self);
    }
}

/* Hands a checked message (or its fault) on; returns whether the peer
 * still takes messages. */
static gboolean
deliver (DcPeer  *self,
         Checked *checked)
{
  if (checked->error != NULL)
    add_fault (self, checked->error);
  else
    {
      self->piece_at = checked->at;
      self->message_hash = checked->hashed ? checked->hash : NULL;
      handle_message (self, checked->message);
      self->message_hash = NULL;
    }
  return self->state != DC_PEER_STATE_CLOSED && self->state != DC_PEER_STATE_FAILED;
}

/* A batch of received messages on its way through a worker. The worker
 * sees only this, never the peer: a GTask's worker drops its reference to
 * the task after the main thread may already have run the callback, and
 * were the peer the task's source object, that late reference could be
 * the peer's last, finalizing it on the worker (test-mesh-peer caught it
 * once: the peer outlived its owner's last unref). */
typedef struct
{
  GPtrArray *batch;     /* Checked */
  guint      stall_ms;  /* test only: DC_TEST_CHECK_STALL_MS, the first batch */
} CheckJob;

static void
check_job_free (CheckJob *job)
{
  g_ptr_array_unref (job->batch);
  g_free (job);
}

/* A worker: each message's frame check and, for a chunk, its data's hash. */
static void
check_worker (GTask        *task,
              gpointer      source_object,
              gpointer      task_data,
              GCancellable *cancellable)
{
  CheckJob *job = task_data;
  GPtrArray *batch = job->batch;

  /* Test only: the first batch waits, as a worker starved on a loaded
   * machine would. */
  if (job->stall_ms > 0)
    g_usleep ((gulong) job->stall_ms * 1000);
  for (guint i = 0; i < batch->len && !g_cancellable_is_cancelled (cancellable); i++)
    {
      Checked *checked = g_ptr_array_index (batch, i);

      if (checked->error != NULL
          || !dc_mesh_message_verify (checked->message, checked->checksum, &checked->error))
        continue;
      /* A compressed chunk (a run whose CONFIG says so) is expanded here,
       * off the main thread, and handed on raw. One that does not expand
       * goes on as it came: the training layer's decoder refuses it, as
       * it refuses a chunk whose data fails its hash (a repair, not a
       * frame fault). */
      if (dc_mesh_chunk_is_compressed (checked->message->type, checked->message->payload))
        {
          GBytes *raw = dc_mesh_chunk_expand (checked->message->type,
                                              checked->message->payload, NULL);

          if (raw == NULL)
            continue;
          g_bytes_unref (checked->message->payload);
          checked->message->payload = raw;
        }
      checked->hashed = dc_mesh_chunk_data_hash (checked->message->type,
                                                 checked->message->payload, checked->hash);
    }
  g_task_return_boolean (task, TRUE);
}

static void check_next (DcPeer *self);

/* Main thread: a batch came back; delivered in order unless the peer ended
 * meanwhile (then clear_checking () cancelled it and its results go). The
 * callback holds the peer's reference for the task (@user_data), dropped
 * here on the main thread. */
static void
checked_cb (GObject      *source,
            GAsyncResult *result,
            gpointer      user_data)
{
  g_autoptr(DcPeer) self = user_data;
  GTask *task = G_TASK (result);
  CheckJob *job = g_task_get_task_data (task);

  self->check_busy = FALSE;
  if (g_cancellable_is_cancelled (g_task_get_cancellable (task)))
    return;
  for (guint i = 0; i < job->batch->len; i++)
    {
      Checked *checked = g_ptr_array_index (job->batch, i);

      self->checking_bytes -= MIN (self->checking_bytes, checked_size (checked));
      if (!deliver (self, checked))
        return;
    }
  maybe_credit (self);
  check_next (self);
}

/* Starts a worker on the next batch of waiting messages, one batch at a
 * time, so that the messages reach the main thread in the order they came. */
static void
check_next (DcPeer *self)
{
  g_autoptr(GTask) task = NULL;
  CheckJob *job;

  if (self->check_busy || g_queue_is_empty (&self->checking))
    return;
  job = g_new0 (CheckJob, 1);
  job->batch = g_ptr_array_new_with_free_func ((GDestroyNotify) checked_free);
  while (job->batch->len < CHECK_BATCH_MAX && !g_queue_is_empty (&self->checking))
    g_ptr_array_add (job->batch, g_queue_pop_head (&self->checking));
  if (self->test_check_stall_ms > 0 && !self->test_check_stalled)
    {
      self->test_check_stalled = TRUE;
      job->stall_ms = self->test_check_stall_ms;
    }
  /* check_cancel is cancelled only when the peer ends, after which
   * nothing more is checked (set_state ()). No source object: see CheckJob. */
  task = g_task_new (NULL, self->check_cancel, checked_cb, g_object_ref (self));
  g_task_set_source_tag (task, check_next);
  g_task_set_task_data (task, job, (GDestroyNotify) check_job_free);
  self->check_busy = TRUE;
  g_task_run_in_thread (task, check_worker);
}

static void
handle_piece (DcPeer *self,
              GBytes *bytes)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcMeshMessage) message = NULL;
  gsize size;
  const guint8 *data = g_bytes_get_data (bytes, &size);
  guint32 checksum = 0;
  Checked *checked;

  self->last_rx_us = g_get_monotonic_time ();
  self->rx_bytes += size;
  maybe_credit (self);
  message = dc_mesh_reader_push_unchecked (self->reader, data != NULL ? data
                                                          : (const guint8 *) "",
                                           size, &checksum, &error);
  if (message == NULL && error == NULL)
    return;
  /* Small, with nothing ahead of it: checked and handled now. */
  if (g_queue_is_empty (&self->checking) && !self->check_busy
      && (error != NULL || g_bytes_get_size (message->payload) < CHECK_INLINE_MAX))
    {
      if (error == NULL)
        dc_mesh_message_verify (message, checksum, &error);
      if (error != NULL)
        add_fault (self, error);
      else
        handle_message (self, message);
      return;
    }
  checked = g_new0 (Checked, 1);
  checked->message = g_steal_pointer (&message);
  checked->error = g_steal_pointer (&error);
  checked->checksum = checksum;
  checked->at = self->piece_at;
  checked->size = checked->message != NULL ? g_bytes_get_size (checked->message->payload) : 0;
  self->checking_bytes += checked_size (checked);
  g_queue_push_tail (&self->checking, checked);
  check_next (self);
}

static void
send_heartbeat (DcPeer *self)
{
  g_autoptr(GBytes) payload = NULL;

  /* While data is queued the receiver sees pieces anyway; more heartbeats
   * behind them would only add latency. */
  if (self->queued > DC_MESH_PIECE_SIZE)
    return;
  self->heartbeat_seq++;
  payload = dc_mesh_heartbeat_encode (self->heartbeat_seq, g_get_monotonic_time ());
  dc_peer_send (self, DC_MESH_MSG_HEARTBEAT, payload, NULL);
}

/* Test only: DC_TEST_PEER_TIMEOUT_MS lengthens the silence after which a
 * peer is gone, for tests whose processes share a loaded machine with
 * work that stalls them for seconds (a 140 MB gradient a step); never
 * below DC_PEER_TIMEOUT_MS, at most 10 minutes (a test's own bound). */
static guint
peer_timeout_ms (void)
{
  static gsize once = 0;
  static guint timeout;

  if (g_once_init_enter (&once))
    {
      const char *text = g_getenv ("DC_TEST_PEER_TIMEOUT_MS");
      guint64 value = text != NULL ? g_ascii_strtoull (text, NULL, 10) : 0;

      timeout = (guint) CLAMP (value, DC_PEER_TIMEOUT_MS, 600000);
      g_once_init_leave (&once, 1);
    }
  return timeout;
}

static gboolean
tick_cb (gpointer user_data)
{
  DcPeer *self = user_data;
  gint64 now = g_get_monotonic_time ();

  /* A late tick is this side's own main loop that did not run (a loaded
   * machine, a long callback): the peer's messages may wait behind it, and
   * it sent none either. Silence counts only while this loop ran, or both
   * sides of a stalled process would report each other gone on waking. */
  if (now - self->last_tick_us > 2 * DC_PEER_HEARTBEAT_MS * 1000)
    self->last_rx_us += now - self->last_tick_us - DC_PEER_HEARTBEAT_MS * 1000;
  self->last_tick_us = now;
  if (self->state == DC_PEER_STATE_OPEN)
    {
      /* While this side's own checks still hold the peer's data, its
       * credits may be held back (CHECK_QUEUE_MAX) and the peer waits for
       * them, sending nothing, not even heartbeats behind its queue: that
       * silence is ours (a check worker starved on a loaded machine:
       * /dc/mesh/peer/slow-checks-not-silence). */
      if (self->check_busy || !g_queue_is_empty (&self->checking))
        self->last_rx_us = now;
      if (now - self->last_rx_us > (gint64) peer_timeout_ms () * 1000)
        {
          g_message ("peer %s: nothing received for %u ms, reporting it gone",
                     self->id, peer_timeout_ms ());
          self->tick_id = 0;
          dc_peer_close (self, "timeout");
          return G_SOURCE_REMOVE;
        }
      send_heartbeat (self);
    }
  else if (self->state < DC_PEER_STATE_OPEN
           && now - self->started_us > (gint64) DC_PEER_CONNECT_MS * 1000)
    {
      self->tick_id = 0;
      g_message ("peer %s: no channel after %d ms", self->id, DC_PEER_CONNECT_MS);
      dc_peer_close (self, "connect-timeout");
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

/* A direct piece that came before the channel opened here (see "Receiving
 * without webrtcbin's thread"): kept, in order, until it does. */
static void
keep_early (DcPeer *self,
            Hop    *hop)
{
  Hop *kept;

  if (self->early_bytes + g_bytes_get_size (hop->bytes) > DC_PEER_EARLY_MAX)
    {
      g_message ("peer %s: sent over %u MiB before its channel opened here",
                 self->id, DC_PEER_EARLY_MAX >> 20);
      set_state (self, DC_PEER_STATE_FAILED, "protocol-error");
      return;
    }
  self->early_pieces++;
  kept = g_new0 (Hop, 1);
  kept->kind = HOP_PIECE;
  kept->at = hop->at;
  kept->receiver = hop->receiver;
  kept->bytes = g_steal_pointer (&hop->bytes);
  self->early_bytes += g_bytes_get_size (kept->bytes);
  g_queue_push_tail (&self->early, kept);
}

/* The channel is open: its pieces that came early, as they came. */
static void
replay_early (DcPeer *self)
{
  Hop *hop;

  while (self->state == DC_PEER_STATE_OPEN && (hop = g_queue_pop_head (&self->early)) != NULL)
    {
      self->early_bytes -= g_bytes_get_size (hop->bytes);
      if (hop->receiver == self->receiver)
        {
          self->piece_at = hop->at;
          handle_piece (self, hop->bytes);
        }
      hop_free (hop);
    }
}

static void
channel_opened (DcPeer *self)
{
  g_autoptr(GBytes) hello = NULL;

  if (self->state >= DC_PEER_STATE_OPEN)
    return;
  self->last_rx_us = g_get_monotonic_time ();
  set_state (self, DC_PEER_STATE_OPEN, NULL);
  if (!self->hello_sent)
    {
      self->hello_sent = TRUE;
      hello = dc_mesh_hello_encode (self->local_hello);
      dc_peer_send (self, DC_MESH_MSG_HELLO, hello, NULL);
      /* A first credit, right behind the hello, tells the peer that this
       * side sends them: it may use the window from now on. */
      self->credit_due = TRUE;
      pump (self);
    }
  replay_early (self);
}

/* Any thread: connected before the channel can deliver anything, since a
 * message arriving before its handler would be lost. */
static void
connect_channel_signals (Link                 *link,
                         GstWebRTCDataChannel *channel)
{
  g_object_set (channel, "buffered-amount-low-threshold", (guint64) LOW_WATER, NULL);
  g_signal_connect_data (channel, "on-open", G_CALLBACK (channel_open_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (channel, "on-close", G_CALLBACK (channel_close_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (channel, "on-error", G_CALLBACK (channel_error_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (channel, "on-message-data", G_CALLBACK (channel_data_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (channel, "on-message-string", G_CALLBACK (channel_string_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (channel, "on-buffered-amount-low", G_CALLBACK (channel_low_cb),
                         _dc_peer_link_ref (link), _dc_peer_link_closure_notify, 0);
}

static void
connect_channel (DcPeer               *self,
                 GstWebRTCDataChannel *channel)
{
  GstWebRTCDataChannelState ready = GST_WEBRTC_DATA_CHANNEL_STATE_CONNECTING;

  if (self->channel != NULL)
    {
      g_message ("peer %s: a second data channel was offered and ignored", self->id);
      g_signal_handlers_disconnect_matched (channel, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL,
                                            self->link);
      /* Kept only to be closed before the pipeline stops (begin_close ()). */
      g_ptr_array_add (self->ignored, g_object_ref (channel));
      return;
    }
  self->channel = g_object_ref (channel);
  self->receiver = _dc_peer_direct_receiver_id (channel);
  self->sender = _dc_peer_direct_sender_get (channel);
  g_object_get (channel, "ready-state", &ready, NULL);
  if (ready == GST_WEBRTC_DATA_CHANNEL_STATE_OPEN)
    channel_opened (self);
}

static void
handle_hop (DcPeer *self,
            Hop    *hop)
{
  if (self->state == DC_PEER_STATE_CLOSED || self->state == DC_PEER_STATE_FAILED)
    return;

  switch (hop->kind)
    {
    case HOP_NEGOTIATE:
      if (self->offerer && self->state == DC_PEER_STATE_SIGNALING && !self->offer_made)
        {
          GstPromise *promise;

          self->offer_made = TRUE;
          promise = gst_promise_new_with_change_func (description_created_cb,
                                                      _dc_peer_link_ref (self->link),
                                                      (GDestroyNotify) _dc_peer_link_unref);
          g_signal_emit_by_name (self->webrtc, "create-offer", NULL, promise);
        }
      break;
    case HOP_DESCRIPTION:
      {
        g_autofree char *text = gst_sdp_message_as_text (hop->description->sdp);
        gboolean offer = hop->description->type == GST_WEBRTC_SDP_TYPE_OFFER;

        g_signal_emit_by_name (self->webrtc, "set-local-description", hop->description, NULL);
        emit_signal_out (self, offer ? "offer" : "answer", "sdp", text, -1);
        if (!offer)
          set_state (self, DC_PEER_STATE_CONNECTING, NULL);
      }
      break;
    case HOP_REMOTE_SET:
      if (!self->offerer)
        {
          GstPromise *promise;

          promise = gst_promise_new_with_change_func (description_created_cb,
                                                      _dc_peer_link_ref (self->link),
                                                      (GDestroyNotify) _dc_peer_link_unref);
          g_signal_emit_by_name (self->webrtc, "create-answer", NULL, promise);
        }
      else
        {
          set_state (self, DC_PEER_STATE_CONNECTING, NULL);
        }
      break;
    case HOP_CANDIDATE:
      emit_signal_out (self, "ice", "candidate", hop->text, (gint) hop->num);
      break;
    case HOP_CHANNEL:
      connect_channel (self, hop->channel);
      break;
    case HOP_OPEN:
      channel_opened (self);
      break;
    case HOP_CLOSE:
      set_state (self, DC_PEER_STATE_CLOSED, "channel-closed");
      break;
    case HOP_ERROR:
      g_message ("peer %s: %s", self->id, hop->text);
      set_state (self, DC_PEER_STATE_FAILED, "error");
      break;
    case HOP_PIECE:
      if (hop->receiver != 0)
        {
          self->direct_pieces++;
          if (self->state < DC_PEER_STATE_OPEN)
            {
              keep_early (self, hop);
              break;
            }
          /* A second channel's, ignored with it. */
          if (hop->receiver != self->receiver)
            break;
        }
      self->piece_at = hop->at;
      handle_piece (self, hop->bytes);
      break;
    case HOP_TEXT:
      {
        g_autoptr(GError) error = g_error_new_literal (DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                                                       "string message on a binary channel");

        add_fault (self, error);
      }
      break;
    case HOP_LOW:
      pump (self);
      break;
    default:
      g_assert_not_reached ();
    }
}

static gboolean
bus_cb (GstBus     *bus,
        GstMessage *message,
        gpointer    user_data)
{
  DcPeer *self = user_data;

  if (GST_MESSAGE_TYPE (message) == GST_MESSAGE_ERROR)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *debug = NULL;

      gst_message_parse_error (message, &error, &debug);
      g_message ("peer %s: pipeline error: %s (%s)", self->id, error->message,
                 debug != NULL ? debug : "");
      set_state (self, DC_PEER_STATE_FAILED, "pipeline-error");
    }
  return G_SOURCE_CONTINUE;
}

/* Public API ------------------------------------------------------------- */

/**
 * dc_peer_new:
 * @id: the remote device's signaling id
 * @offerer: whether this side creates the channel and the offer
 * @hello: what this device says about itself when the channel opens
 */
DcPeer *
dc_peer_new (const char         *id,
             gboolean            offerer,
             const DcPeerConfig *config,
             const DcMeshHello  *hello)
{
  DcPeer *self = g_object_new (DC_TYPE_PEER, NULL);

  self->id = g_strdup (id);
  self->offerer = offerer;
  self->local_hello = dc_mesh_hello_copy (hello);
  /* Test only (DC_TEST_CHECK_STALL_MS=N, at most a minute): the first batch
   * of received messages waits N ms on the worker before its checks. */
  if (g_getenv ("DC_TEST_CHECK_STALL_MS") != NULL)
    self->test_check_stall_ms = (guint) MIN (g_ascii_strtoull (g_getenv ("DC_TEST_CHECK_STALL_MS"),
                                                               NULL, 10), 60000);
  /* Test only (DC_TEST_CREDIT_HOLD=MS:COUNT, at most a second and 1000
   * credits): the slow sending a slow receiver causes its sender
   * (dc-send-pace.c, test-mesh-send). */
  if (g_getenv ("DC_TEST_CREDIT_HOLD") != NULL)
    {
      g_auto(GStrv) parts = g_strsplit (g_getenv ("DC_TEST_CREDIT_HOLD"), ":", 2);

      if (g_strv_length (parts) == 2)
        {
          self->test_credit_hold_ms = (guint) MIN (g_ascii_strtoull (parts[0], NULL, 10), 1000);
          self->test_credit_holds = (guint) MIN (g_ascii_strtoull (parts[1], NULL, 10), 1000);
        }
    }
  if (config != NULL)
    {
      self->config.stun_server = g_strdup (config->stun_server);
      self->config.turn_server = g_strdup (config->turn_server);
      self->config.ice_addresses = g_strdupv (config->ice_addresses);
    }
  return self;
}

/* Bytes of UDP receive and send buffer asked for on the socket ICE selects
 * (the kernel caps it at net.core.rmem_max / wmem_max). The default, about
 * 208 KiB, overflows when a send window of pieces arrives in one burst, and
 * every datagram dropped there costs SCTP a retransmission and half its
 * congestion window. */
#define PEER_SOCKET_BUFFER (4 * 1024 * 1024)

static void
on_selected_pair (NiceAgent *agent,
                  guint      stream_id,
                  guint      component_id,
                  gpointer   local,
                  gpointer   remote,
                  gpointer   user_data)
{
  g_autoptr(GSocket) socket = nice_agent_get_selected_socket (agent, stream_id, component_id);
  g_autoptr(GError) error = NULL;

  if (socket == NULL)
    return;
  if (!g_socket_set_option (socket, SOL_SOCKET, SO_RCVBUF, PEER_SOCKET_BUFFER, &error)
      || !g_socket_set_option (socket, SOL_SOCKET, SO_SNDBUF, PEER_SOCKET_BUFFER, &error))
    g_debug ("Could not enlarge the peer socket's buffers: %s", error->message);
}

/* Turns UPnP port mapping off (it would send SSDP multicast from every
 * device; STUN and TURN are the configured ways through NATs) and, when
 * configured, limits ICE to the given local addresses. */
static gboolean
configure_ice (DcPeer  *self,
               GError **error)
{
  g_autoptr(GObject) ice = NULL;
  g_autoptr(GObject) agent = NULL;
  gboolean restrict_addresses = self->config.ice_addresses != NULL
                                && self->config.ice_addresses[0] != NULL;

  g_object_get (self->webrtc, "ice-agent", &ice, NULL);
  if (ice != NULL && g_object_class_find_property (G_OBJECT_GET_CLASS (ice), "agent") != NULL)
    g_object_get (ice, "agent", &agent, NULL);
  if (agent == NULL || !NICE_IS_AGENT (agent))
    {
      if (!restrict_addresses)
        return TRUE;
      g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER,
                           "This webrtcbin's ICE agent cannot be limited to chosen addresses");
      return FALSE;
    }
  g_object_set (agent, "upnp", FALSE, NULL);
  g_signal_connect (agent, "new-selected-pair-full", G_CALLBACK (on_selected_pair), NULL);
  for (guint i = 0; restrict_addresses && self->config.ice_addresses[i] != NULL; i++)
    {
      NiceAddress address;

      nice_address_init (&address);
      if (!nice_address_set_from_string (&address, self->config.ice_addresses[i])
          || !nice_agent_add_local_address (NICE_AGENT (agent), &address))
        {
          g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER,
                       "“%s” cannot be used as a local ICE address",
                       self->config.ice_addresses[i]);
          return FALSE;
        }
    }
  return TRUE;
}

/**
 * dc_peer_start:
 *
 * Builds the pipeline. An offerer creates the data channel before PLAYING
 * and sends its offer through ::signal-out when webrtcbin asks to negotiate.
 */
gboolean
dc_peer_start (DcPeer  *self,
               GError **error)
{
  g_autoptr(GstBus) bus = NULL;

  g_return_val_if_fail (DC_IS_PEER (self), FALSE);
  g_return_val_if_fail (self->state == DC_PEER_STATE_NEW, FALSE);

  self->started_us = g_get_monotonic_time ();
  self->pipeline = gst_pipeline_new (NULL);
  self->webrtc = gst_element_factory_make ("webrtcbin", NULL);
  if (self->webrtc == NULL)
    {
      g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_MISSING_PLUGINS,
                           "The GStreamer element webrtcbin is missing");
      set_state (self, DC_PEER_STATE_FAILED, "missing-plugins");
      return FALSE;
    }
  gst_object_ref (self->webrtc);
  g_object_set (self->webrtc, "bundle-policy", GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE, NULL);
  if (self->config.stun_server != NULL)
    g_object_set (self->webrtc, "stun-server", self->config.stun_server, NULL);
  if (self->config.turn_server != NULL)
    g_object_set (self->webrtc, "turn-server", self->config.turn_server, NULL);
  gst_bin_add (GST_BIN (self->pipeline), self->webrtc);

  if (!configure_ice (self, error))
    {
      set_state (self, DC_PEER_STATE_FAILED, "ice-config");
      return FALSE;
    }

  g_signal_connect_data (self->webrtc, "on-negotiation-needed",
                         G_CALLBACK (negotiation_needed_cb), _dc_peer_link_ref (self->link),
                         _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (self->webrtc, "on-ice-candidate", G_CALLBACK (ice_candidate_cb),
                         _dc_peer_link_ref (self->link), _dc_peer_link_closure_notify, 0);
  g_signal_connect_data (self->webrtc, "on-data-channel", G_CALLBACK (data_channel_cb),
                         _dc_peer_link_ref (self->link), _dc_peer_link_closure_notify, 0);
  self->link->direct_receive = g_strcmp0 (g_getenv ("DC_PEER_DIRECT_RECEIVE"), "0") != 0;
  self->link->direct_send = g_strcmp0 (g_getenv ("DC_PEER_DIRECT_SEND"), "0") != 0;
  _dc_peer_direct_connect (self->webrtc, self->link);

  bus = gst_pipeline_get_bus (GST_PIPELINE (self->pipeline));
  self->bus_watch_id = gst_bus_add_watch (bus, bus_cb, self);

  if (gst_element_set_state (self->pipeline, GST_STATE_READY) == GST_STATE_CHANGE_FAILURE)
    {
      g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER,
                           "The webrtcbin pipeline cannot start");
      set_state (self, DC_PEER_STATE_FAILED, "pipeline-error");
      return FALSE;
    }
  if (self->offerer)
    {
      GstWebRTCDataChannel *channel = NULL;

      /* Defaults: ordered and reliable, which the framing relies on. */
      g_signal_emit_by_name (self->webrtc, "create-data-channel", "daisychain", NULL, &channel);
      if (channel == NULL)
        {
          g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER,
                               "webrtcbin refused to create a data channel");
          set_state (self, DC_PEER_STATE_FAILED, "pipeline-error");
          return FALSE;
        }
      connect_channel_signals (self->link, channel);
      connect_channel (self, channel);
      g_object_unref (channel);
    }
  set_state (self, DC_PEER_STATE_SIGNALING, NULL);
  self->tick_id = g_timeout_add (DC_PEER_HEARTBEAT_MS, tick_cb, self);
  self->last_tick_us = g_get_monotonic_time ();
  if (gst_element_set_state (self->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE)
    {
      g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER,
                           "The webrtcbin pipeline cannot play");
      set_state (self, DC_PEER_STATE_FAILED, "pipeline-error");
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_peer_handle_signal:
 * @body: an authenticated relay body from this peer: offer, answer or ice
 *
 * Bodies that do not fit the state are ignored with a log line.
 */
void
dc_peer_handle_signal (DcPeer     *self,
                       JsonObject *body)
{
  const char *kind = json_object_get_string_member_with_default (body, "kind", "");

  g_return_if_fail (DC_IS_PEER (self));

  if (self->webrtc == NULL || self->state >= DC_PEER_STATE_OPEN)
    return;

  if (g_str_equal (kind, "offer") || g_str_equal (kind, "answer"))
    {
      const char *text = json_object_get_string_member_with_default (body, "sdp", NULL);
      gboolean offer = g_str_equal (kind, "offer");
      GstSDPMessage *sdp = NULL;
      GstWebRTCSessionDescription *description;
      GstPromise *promise;

      if (offer == self->offerer || text == NULL
          || gst_sdp_message_new_from_text (text, &sdp) != GST_SDP_OK)
        {
          g_message ("peer %s: unexpected or unreadable %s ignored", self->id, kind);
          if (sdp != NULL)
            gst_sdp_message_free (sdp);
          return;
        }
      description = gst_webrtc_session_description_new (offer ? GST_WEBRTC_SDP_TYPE_OFFER
                                                         : GST_WEBRTC_SDP_TYPE_ANSWER, sdp);
      promise = gst_promise_new_with_change_func (remote_set_cb, _dc_peer_link_ref (self->link),
                                                  (GDestroyNotify) _dc_peer_link_unref);
      g_signal_emit_by_name (self->webrtc, "set-remote-description", description, promise);
      gst_webrtc_session_description_free (description);
    }
  else if (g_str_equal (kind, "ice"))
    {
      const char *candidate = json_object_get_string_member_with_default (body, "candidate", NULL);
      gint64 mline = json_object_get_int_member_with_default (body, "mline", -1);

      if (candidate == NULL || mline < 0 || mline > 16)
        {
          g_message ("peer %s: malformed candidate ignored", self->id);
          return;
        }
      g_signal_emit_by_name (self->webrtc, "add-ice-candidate", (guint) mline, candidate);
    }
}

/**
 * dc_peer_send:
 * @payload: (nullable): the payload; shared, not copied, past the first piece
 *
 * Queues a message; it leaves as fast as flow control allows.
 */
gboolean
dc_peer_send (DcPeer  *self,
              guint    type,
              GBytes  *payload,
              GError **error)
{
  g_autoptr(GPtrArray) pieces = NULL;

  g_return_val_if_fail (DC_IS_PEER (self), FALSE);

  if (self->state != DC_PEER_STATE_OPEN)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER, "peer %s is not connected",
                   self->id);
      return FALSE;
    }
  pieces = dc_mesh_message_encode_pieces (type, payload, error);
  if (pieces == NULL)
    return FALSE;
  for (guint i = 0; i < pieces->len; i++)
    self->queued += g_bytes_get_size (g_ptr_array_index (pieces, i));
  g_queue_push_tail (&self->out, out_frame_new (pieces, TRUE));
  pump (self);
  return TRUE;
}

/**
 * dc_peer_send_chunks:
 * @type: GRADIENTS, WEIGHTS, CHECKPOINT or REPAIR
 * @bodies: (element-type GBytes): chunk bodies from dc_mesh_chunks_split()
 *
 * Queues every chunk as a frame of its own, in order, or nothing when one of
 * them is refused. A chunk is one piece, so the credit window is checked
 * before each chunk: a blob of any size keeps at most the window (plus one
 * piece) in flight, and credits still overtake it at every chunk boundary.
 * Messages queued later wait behind the chunks (the queue is in order).
 */
gboolean
dc_peer_send_chunks (DcPeer     *self,
                     guint       type,
                     GPtrArray  *bodies,
                     GError    **error)
{
  g_autoptr(GPtrArray) frames = NULL;

  g_return_val_if_fail (DC_IS_PEER (self), FALSE);
  g_return_val_if_fail (bodies != NULL, FALSE);

  if (self->state != DC_PEER_STATE_OPEN)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER, "peer %s is not connected",
                   self->id);
      return FALSE;
    }
  frames = dc_mesh_chunk_frames_encode (type, bodies, error);
  return frames != NULL && dc_peer_send_frames (self, type, frames, error);
}

/* Queues @frames (each a GPtrArray of pieces) in order and sends what the
 * window allows. A peer reads a frame's pieces by its own index
 * (OutFrame.next): the arrays are never changed, so peers may share them. */
static void
queue_frames (DcPeer    *self,
              GPtrArray *frames)
{
  for (guint i = 0; i < frames->len; i++)
    {
      GPtrArray *pieces = g_ptr_array_index (frames, i);

      for (guint j = 0; j < pieces->len; j++)
        self->queued += g_bytes_get_size (g_ptr_array_index (pieces, j));
      g_queue_push_tail (&self->out, out_frame_new (pieces, TRUE));
    }
  pump (self);
}

/**
 * dc_peer_send_frames:
 * @type: GRADIENTS, WEIGHTS, CHECKPOINT or REPAIR
 * @frames: (element-type GPtrArray): chunks already framed by
 *   dc_mesh_chunk_frames_encode () (on any thread); shared, not copied, so
 *   one encoding serves every peer
 *
 * dc_peer_send_chunks () without the framing: queues references only, so
 * the calling (main) thread neither copies nor checksums the object.
 */
gboolean
dc_peer_send_frames (DcPeer     *self,
                     guint       type,
                     GPtrArray  *frames,
                     GError    **error)
{
  g_return_val_if_fail (DC_IS_PEER (self), FALSE);
  g_return_val_if_fail (frames != NULL, FALSE);

  if (self->state != DC_PEER_STATE_OPEN)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER, "peer %s is not connected",
                   self->id);
      return FALSE;
    }
  if (dc_mesh_chunk_max_total (type) == 0)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_MALFORMED,
                   "%s messages are not chunked", dc_mesh_message_type_to_string (type));
      return FALSE;
    }
  queue_frames (self, frames);
  return TRUE;
}

/**
 * dc_peer_send_object:
 * @info: run id, step, rank and position of @object
 * @object: a gradient or a weight blob
 *
 * Cuts @object into chunks (dc_mesh_chunks_split()) and queues them.
 */
gboolean
dc_peer_send_object (DcPeer             *self,
                     guint               type,
                     const DcMeshChunk  *info,
                     GBytes             *object,
                     GError            **error)
{
  g_autoptr(GPtrArray) bodies = NULL;

  g_return_val_if_fail (DC_IS_PEER (self), FALSE);

  bodies = dc_mesh_chunks_split (type, info, object, error);
  return bodies != NULL && dc_peer_send_chunks (self, type, bodies, error);
}

/**
 * dc_peer_close:
 * @reason: why, as a short token ("bye", "timeout", "faults", "left")
 *
 * Ends the peer: "timeout", "faults" and "connect-timeout" end in FAILED,
 * others in CLOSED. The pipeline stops when the peer is disposed.
 */
void
dc_peer_close (DcPeer     *self,
               const char *reason)
{
  gboolean failed;

  g_return_if_fail (DC_IS_PEER (self));

  if (self->state == DC_PEER_STATE_CLOSED || self->state == DC_PEER_STATE_FAILED)
    return;
  failed = g_strcmp0 (reason, "timeout") == 0 || g_strcmp0 (reason, "faults") == 0
           || g_strcmp0 (reason, "connect-timeout") == 0;
  set_state (self, failed ? DC_PEER_STATE_FAILED : DC_PEER_STATE_CLOSED, reason);
}

/**
 * dc_peer_say_bye:
 *
 * Sends a bye ahead of anything queued: a leaving device does not finish its
 * transfers. The peer stays open until closed or disposed, so that the bye
 * can leave before the pipeline stops.
 */
void
dc_peer_say_bye (DcPeer *self)
{
  g_autoptr(GPtrArray) pieces = NULL;

  g_return_if_fail (DC_IS_PEER (self));

  if (self->state != DC_PEER_STATE_OPEN)
    return;
  clear_out (self);
  pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_BYE, NULL, NULL);
  channel_send (self, g_ptr_array_index (pieces, 0), NULL);
}

/**
 * dc_peer_is_sending_slowly:
 *
 * Returns: whether an episode of slow sending to this peer is going on
 *   (reported or not: one in 10 s is told) and a credit came in the last
 *   second, i.e. the direction is busy and slow now
 */
gboolean
dc_peer_is_sending_slowly (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), FALSE);
  return self->send_pace.reported
         && g_get_monotonic_time () - self->send_pace.last_us < G_USEC_PER_SEC;
}

/**
 * dc_peer_take_unsent:
 *
 * For DcMesh's renewal: takes the frames queued and not yet begun off this
 * peer, in order, so that they go on a new connection to the same device
 * instead (dc_peer_send_taken ()); the frame whose pieces are going out
 * stays and finishes here.
 *
 * Returns: (transfer full) (element-type GPtrArray): each frame's pieces
 */
GPtrArray *
dc_peer_take_unsent (DcPeer *self)
{
  GPtrArray *frames = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  OutFrame *frame;

  g_return_val_if_fail (DC_IS_PEER (self), frames);

  while ((frame = g_queue_pop_head (&self->out)) != NULL)
    {
      if (frame->queued)
        for (guint i = frame->next; i < frame->pieces->len; i++)
          self->queued -= g_bytes_get_size (g_ptr_array_index (frame->pieces, i));
      g_ptr_array_add (frames, g_ptr_array_ref (frame->pieces));
      out_frame_free (frame);
    }
  return frames;
}

/**
 * dc_peer_send_taken:
 * @frames: (element-type GPtrArray): from dc_peer_take_unsent ()
 *
 * Queues frames taken off another connection to this device, in order,
 * behind whatever is queued here.
 */
gboolean
dc_peer_send_taken (DcPeer     *self,
                    GPtrArray  *frames,
                    GError    **error)
{
  g_return_val_if_fail (DC_IS_PEER (self), FALSE);

  if (self->state != DC_PEER_STATE_OPEN)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER, "peer %s is not connected",
                   self->id);
      return FALSE;
    }
  queue_frames (self, frames);
  return TRUE;
}

/**
 * dc_peer_send_raw:
 * @piece: bytes to put on the channel as they are (at most 64 KiB)
 *
 * For tests of the receiver's fault handling only: bypasses the framing.
 */
gboolean
dc_peer_send_raw (DcPeer  *self,
                  GBytes  *piece,
                  GError **error)
{
  g_return_val_if_fail (DC_IS_PEER (self), FALSE);

  if (self->state != DC_PEER_STATE_OPEN)
    {
      g_set_error (error, DC_MESH_ERROR, DC_MESH_ERROR_PEER, "peer %s is not connected",
                   self->id);
      return FALSE;
    }
  {
    g_autoptr(GPtrArray) pieces = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);

    g_ptr_array_add (pieces, g_bytes_ref (piece));
    self->queued += g_bytes_get_size (piece);
    g_queue_push_tail (&self->out, out_frame_new (pieces, TRUE));
  }
  pump (self);
  return TRUE;
}

const char *
dc_peer_get_id (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), NULL);
  return self->id;
}

/* The name to show: the hello's, made unique by DcMesh when another device
 * of the mesh has it too; NULL before the hello arrived. */
const char *
dc_peer_get_name (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), NULL);
  if (self->remote_hello == NULL)
    return NULL;
  return self->display_name != NULL ? self->display_name : self->remote_hello->name;
}

/* For DcMesh: the hello's name with a suffix, because another device of the
 * mesh already shows the same one. Set before the peer counts as joined. */
void
dc_peer_set_display_name (DcPeer     *self,
                          const char *name)
{
  g_return_if_fail (DC_IS_PEER (self));
  g_free (self->display_name);
  self->display_name = g_strdup (name);
}

DcMeshHello *
dc_peer_get_hello (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), NULL);
  return self->remote_hello;
}

DcPeerState
dc_peer_get_state (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), DC_PEER_STATE_FAILED);
  return self->state;
}

const char *
dc_peer_get_reason (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), NULL);
  return self->reason;
}

/* Bytes handed to the channel that the other side has not credited yet
 * (0 while it sends no credits). */
guint64
dc_peer_get_unacknowledged (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), 0);
  return self->window_on ? self->tx_bytes - self->tx_acked : 0;
}

/* Bytes waiting in this peer's queue, not yet handed to the channel. */
gsize
dc_peer_get_queued (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), 0);
  return self->queued;
}

/**
 * dc_peer_get_slow_sending:
 * @episodes: (out): episodes of slow sending reported, one going on included
 * @slow_us: (out): their slow time, µs
 *
 * What this side's sending to the peer lost to slow episodes
 * (dc-send-pace.c): bench group reports it beside a step's figures.
 */
void
dc_peer_get_slow_sending (DcPeer *self,
                          guint  *episodes,
                          gint64 *slow_us)
{
  g_return_if_fail (DC_IS_PEER (self));

  dc_send_pace_totals (&self->send_pace, episodes, slow_us);
}

/* Teardown ---------------------------------------------------------------
 *
 * GStreamer 1.22's webrtcbin races with its own pipeline going to NULL while
 * a data channel is open: in PAUSED_TO_READY, sctpdec removes its source
 * pads, which webrtcbin reads as the remote's stream reset
 * (_on_sctp_stream_reset ()), so its own thread closes the channel and
 * releases the channel's request pad on sctpenc (_close_sctp_stream ());
 * meanwhile this thread's state change cleans sctpenc up and removes that
 * pad. When the release comes second: "gst_element_release_request_pad:
 * assertion 'GST_PAD_PARENT (pad) == element' failed". A stream reset that
 * the remote sends while the pipeline stops does the same. So the channels
 * are closed first and the pipeline stops once they are CLOSED: then every
 * later reset finds the channel closed and releases nothing. */

/* How long a peer's end waits for its channels to close (the remote's
 * answer to our stream reset) before it stops the pipeline anyway: the
 * round trip is a few ms on loopback and tens on a loaded machine; 1 s
 * bounds how long a remote that stopped answering holds this thread. */
#define CLOSE_WAIT_MS 1000

/* Shared with webrtcbin's threads: the channels' notify::ready-state and
 * the barrier promise's reply wake the waiting thread. */
typedef struct _Closing
{
  GMutex   lock;
  GCond    cond;
  gboolean woken;    /* guarded by lock */
  gint     barrier;  /* atomic: webrtcbin ran every task queued before it */
} Closing;

static void
closing_clear (Closing *closing)
{
  g_mutex_clear (&closing->lock);
  g_cond_clear (&closing->cond);
}

static void
closing_unref (Closing *closing)
{
  g_atomic_rc_box_release_full (closing, (GDestroyNotify) closing_clear);
}

static void
closing_wake (Closing *closing)
{
  g_mutex_lock (&closing->lock);
  closing->woken = TRUE;
  g_cond_broadcast (&closing->cond);
  g_mutex_unlock (&closing->lock);
}

/* webrtcbin's thread. */
static void
closing_state_cb (GObject    *channel,
                  GParamSpec *pspec,
                  gpointer    user_data)
{
  closing_wake (user_data);
}

static void
closing_closure_notify (gpointer  data,
                        GClosure *closure)
{
  closing_unref (data);
}

/* webrtcbin's thread (or this one when webrtcbin is closed already). */
static void
closing_barrier_cb (GstPromise *promise,
                    gpointer    user_data)
{
  Closing *closing = user_data;

  g_atomic_int_set (&closing->barrier, 1);
  closing_wake (closing);
}

static gboolean
channels_closed (GPtrArray *channels)
{
  for (guint i = 0; i < channels->len; i++)
    {
      GstWebRTCDataChannelState ready = GST_WEBRTC_DATA_CHANNEL_STATE_CLOSED;

      g_object_get (g_ptr_array_index (channels, i), "ready-state", &ready, NULL);
      if (ready != GST_WEBRTC_DATA_CHANNEL_STATE_CLOSED)
        return FALSE;
    }
  return TRUE;
}

/* Closes the open or closing channels without waiting: their state and the
 * barrier say when they are done (close_done ()). A remote that went silent
 * (the peer timed out) never answers the reset: then the close is done once
 * webrtcbin's own thread has run the close it queued, which the "get-stats"
 * promise's reply marks (its task runs after every task queued before it).
 * Whatever is not closed CLOSE_WAIT_MS after the close began is left. */
static void
begin_close (DcPeer *self)
{
  g_autoptr(GPtrArray) channels = g_ptr_array_new_with_free_func (g_object_unref);
  GstPromise *promise;

  if (self->close_begun || self->webrtc == NULL)
    return;
  self->close_begun = TRUE;
  self->closing_deadline = g_get_monotonic_time () + (gint64) CLOSE_WAIT_MS * 1000;
  self->closing_silent = self->state == DC_PEER_STATE_FAILED
                         && (g_strcmp0 (self->reason, "timeout") == 0
                             || g_strcmp0 (self->reason, "connect-timeout") == 0);
  for (guint i = 0; i <= self->ignored->len; i++)
    {
      GstWebRTCDataChannel *channel = i < self->ignored->len
                                      ? g_ptr_array_index (self->ignored, i) : self->channel;
      GstWebRTCDataChannelState ready = GST_WEBRTC_DATA_CHANNEL_STATE_CLOSED;

      if (channel == NULL)
        continue;
      g_object_get (channel, "ready-state", &ready, NULL);
      /* A channel still connecting has no stream to release yet. */
      if (ready == GST_WEBRTC_DATA_CHANNEL_STATE_OPEN
          || ready == GST_WEBRTC_DATA_CHANNEL_STATE_CLOSING)
        g_ptr_array_add (channels, g_object_ref (channel));
    }
  if (channels->len == 0)
    return;

  self->closing = g_atomic_rc_box_new0 (Closing);
  self->closing_channels = g_steal_pointer (&channels);
  g_mutex_init (&self->closing->lock);
  g_cond_init (&self->closing->cond);
  for (guint i = 0; i < self->closing_channels->len; i++)
    {
      GstWebRTCDataChannel *channel = g_ptr_array_index (self->closing_channels, i);

      g_signal_connect_data (channel, "notify::ready-state", G_CALLBACK (closing_state_cb),
                             g_atomic_rc_box_acquire (self->closing), closing_closure_notify, 0);
      gst_webrtc_data_channel_close (channel);
    }
  promise = gst_promise_new_with_change_func (closing_barrier_cb,
                                              g_atomic_rc_box_acquire (self->closing),
                                              (GDestroyNotify) closing_unref);
  g_signal_emit_by_name (self->webrtc, "get-stats", NULL, promise);
  gst_promise_unref (promise);
}

/* Whether the close begun asks for no more waiting: the channels are
 * closed, a silent remote's close ran, or its time is up. The states are
 * read outside the lock: their notify may be emitted while the channel's
 * own lock is held. */
static gboolean
close_done (DcPeer *self)
{
  return self->closing == NULL
         || channels_closed (self->closing_channels)
         || (self->closing_silent && g_atomic_int_get (&self->closing->barrier))
         || g_get_monotonic_time () >= self->closing_deadline;
}

/* Waits, blocking this thread, for what is left of the close (at most until
 * its deadline), then lets go of the channels. The wait blocks rather than
 * iterating the main context: the peer is being disposed, from whatever
 * callback dropped it, and nothing of the close needs this thread. A peer
 * retired through dc_peer_begin_close () has nothing left to wait for. */
static void
finish_close (DcPeer *self)
{
  gint64 began = g_get_monotonic_time ();
  gboolean closed;

  if (self->closing == NULL)
    return;
  while (!close_done (self))
    {
      g_mutex_lock (&self->closing->lock);
      if (!self->closing->woken)
        g_cond_wait_until (&self->closing->cond, &self->closing->lock, self->closing_deadline);
      self->closing->woken = FALSE;
      g_mutex_unlock (&self->closing->lock);
    }
  closed = channels_closed (self->closing_channels)
           || (self->closing_silent && g_atomic_int_get (&self->closing->barrier));
  for (guint i = 0; i < self->closing_channels->len; i++)
    g_signal_handlers_disconnect_matched (g_ptr_array_index (self->closing_channels, i),
                                          G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, self->closing);
  g_clear_pointer (&self->closing, closing_unref);
  g_clear_pointer (&self->closing_channels, g_ptr_array_unref);
  if (!closed)
    g_debug ("peer %s: its data channel did not close within %d ms; stopping its pipeline "
             "anyway", self->id, CLOSE_WAIT_MS);
  else
    g_debug ("peer %s: data channel closed (waited %" G_GINT64_FORMAT " µs here)", self->id,
             g_get_monotonic_time () - began);
}

/**
 * dc_peer_begin_close:
 *
 * Starts closing a closed or failed peer's data channels without waiting
 * for the remote's answer, so that the caller can drop its last reference
 * once dc_peer_close_is_done () says so: the dispose that follows then only
 * stops the pipeline. A last reference dropped without it waits for the
 * close in the dispose, on the caller's thread, up to CLOSE_WAIT_MS (one
 * second): a retired connection of a busy group held every device's step
 * that long (docs/BENCHMARKS.md, s22).
 */
void
dc_peer_begin_close (DcPeer *self)
{
  g_return_if_fail (DC_IS_PEER (self));
  g_return_if_fail (self->state == DC_PEER_STATE_CLOSED || self->state == DC_PEER_STATE_FAILED);

  begin_close (self);
}

/**
 * dc_peer_close_is_done:
 *
 * Returns: whether the close dc_peer_begin_close () began needs no more
 *   waiting: the channels closed, or CLOSE_WAIT_MS passed
 */
gboolean
dc_peer_close_is_done (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), TRUE);

  return close_done (self);
}

static void
dc_peer_dispose (GObject *object)
{
  DcPeer *self = DC_PEER (object);

  g_clear_handle_id (&self->tick_id, g_source_remove);
  g_clear_handle_id (&self->pump_id, g_source_remove);
  g_clear_handle_id (&self->credit_hold_id, g_source_remove);
  g_clear_handle_id (&self->idle_credit_id, g_source_remove);
  g_clear_handle_id (&self->bus_watch_id, g_source_remove);
  if (self->channel != NULL)
    g_signal_handlers_disconnect_matched (self->channel, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL,
                                          self->link);
  if (self->webrtc != NULL)
    g_signal_handlers_disconnect_matched (self->webrtc, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL,
                                          self->link);
  if (self->pipeline != NULL)
    {
      begin_close (self);
      finish_close (self);
      gst_element_set_state (self->pipeline, GST_STATE_NULL);
    }
  g_clear_object (&self->channel);
  g_ptr_array_set_size (self->ignored, 0);
  clear_early (self);
  g_clear_pointer (&self->sender, _dc_peer_direct_sender_unref);
  g_clear_pointer (&self->webrtc, gst_object_unref);
  g_clear_pointer (&self->pipeline, gst_object_unref);
  clear_out (self);

  G_OBJECT_CLASS (dc_peer_parent_class)->dispose (object);
}

static void
dc_peer_finalize (GObject *object)
{
  DcPeer *self = DC_PEER (object);

  g_clear_pointer (&self->link, _dc_peer_link_unref);
  g_clear_pointer (&self->ignored, g_ptr_array_unref);
  g_clear_object (&self->check_cancel);
  g_clear_pointer (&self->reader, dc_mesh_reader_free);
  g_clear_pointer (&self->local_hello, dc_mesh_hello_free);
  g_clear_pointer (&self->remote_hello, dc_mesh_hello_free);
  g_clear_pointer (&self->display_name, g_free);
  g_queue_clear_full (&self->handed, g_free);
  g_free (self->config.stun_server);
  g_free (self->config.turn_server);
  g_strfreev (self->config.ice_addresses);
  g_free (self->id);
  g_free (self->reason);

  G_OBJECT_CLASS (dc_peer_parent_class)->finalize (object);
}

static void
dc_peer_get_property (GObject    *object,
                      guint       prop_id,
                      GValue     *value,
                      GParamSpec *pspec)
{
  DcPeer *self = DC_PEER (object);

  switch (prop_id)
    {
    case PROP_STATE:
      g_value_set_enum (value, self->state);
      break;
    case PROP_NAME:
      g_value_set_string (value, dc_peer_get_name (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_peer_class_init (DcPeerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_peer_dispose;
  object_class->finalize = dc_peer_finalize;
  object_class->get_property = dc_peer_get_property;

  properties[PROP_STATE] =
    g_param_spec_enum ("state", NULL, NULL, DC_TYPE_PEER_STATE, DC_PEER_STATE_NEW,
                       G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_NAME] =
    g_param_spec_string ("name", NULL, NULL, NULL,
                         G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /* (body): a relay body (offer, answer, ice) for the signaling service. */
  signals[SIGNAL_SIGNAL_OUT] =
    g_signal_new ("signal-out", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 1, JSON_TYPE_OBJECT);
  /* (type, payload) for every checked message after the hello. */
  signals[SIGNAL_MESSAGE] =
    g_signal_new ("message", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 2, G_TYPE_UINT, G_TYPE_BYTES);
  /* (slow, text): an episode of slow sending to the peer began (TRUE) or
   * ended (dc-send-pace.c), with the line to log. Main thread. */
  signals[SIGNAL_SLOW_SENDING] =
    g_signal_new ("slow-sending", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 2, G_TYPE_BOOLEAN, G_TYPE_STRING);
}

static void
dc_peer_init (DcPeer *self)
{
  self->link = link_new (self);
  self->ignored = g_ptr_array_new_with_free_func (g_object_unref);
  self->reader = dc_mesh_reader_new ();
  self->check_cancel = g_cancellable_new ();
  g_queue_init (&self->out);
  g_queue_init (&self->handed);
  g_queue_init (&self->checking);
  g_queue_init (&self->early);
  self->send_pace.episode_us = peer_tunables ()->pace_episode_us;
}

/**
 * dc_peer_get_message_received_us:
 *
 * Returns: while a message is delivered (the group's and the ring's
 *   handlers), when its last piece left GStreamer, monotonic µs: on
 *   sctpdec's streaming thread (the direct receiving) or in webrtcbin's
 *   on-message-data signal, on webrtcbin's thread (DC_PEER_DIRECT_RECEIVE=0);
 *   the hand-off from there to our main context is the difference to now
 */
gint64
dc_peer_get_message_received_us (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), 0);
  return self->piece_at;
}

/**
 * dc_peer_get_direct_pieces:
 *
 * Returns: how many data-channel messages came without webrtcbin's thread
 *   (its sink bin's probe), those of an ignored channel included; 0 with
 *   DC_PEER_DIRECT_RECEIVE=0 or a webrtcbin without prepare-data-channel
 */
guint64
dc_peer_get_direct_pieces (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), 0);
  return self->direct_pieces;
}

/**
 * dc_peer_get_direct_sends:
 *
 * Returns: how many messages went into sctpenc from this peer's thread
 *   rather than through the channel's appsrc (dc-peer-direct.c, "Sending
 *   without appsrc's thread"); 0 with DC_PEER_DIRECT_SEND=0
 */
guint64
dc_peer_get_direct_sends (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), 0);
  return self->direct_sends;
}

/**
 * dc_peer_get_early_pieces:
 *
 * Returns: of the direct pieces, how many came before the channel was open
 *   here and waited for it
 */
guint64
dc_peer_get_early_pieces (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), 0);
  return self->early_pieces;
}

/**
 * dc_peer_get_message_data_hash:
 *
 * Returns: (nullable): while a chunked message is delivered (::message),
 *   the SHA-256 of its chunk data, taken on the receipt's worker
 *   (dc_mesh_chunk_data_hash ()) for dc_mesh_chunk_decode_prehashed (); %NULL
 *   when it was not taken (a small message checked on the main thread)
 */
const guint8 *
dc_peer_get_message_data_hash (DcPeer *self)
{
  g_return_val_if_fail (DC_IS_PEER (self), NULL);
  return self->message_hash;
}
