/* dc-infer-ring.c: the head of an inference ring (see the header).
 *
 * Threads: everything on the main thread (the creator's context) except
 * ring_forward(), which the session calls on its generation thread. It runs
 * the head's own part, then hands the activations to the main thread
 * through an idle GSource attached to the creator's context and waits on a
 * condition for the ring's answer (or a failure, or the hop timeout). The
 * main thread sets the answer when the last stage's hop arrives.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-infer-ring.h"

#include <math.h>
#include <string.h>

#include "dc-ring-server.h"
#include "data/dc-data-error.h"
#include "engine/dc-gemm-backend.h"
#include "engine/dc-parallel.h"
#include "model/dc-hf-model.h"
#include "model/dc-model-error.h"

/* Round trips measured to each device that offers layers: the plan's hop
 * cost is half their median (one hop is one way). Five pings of 16 bytes
 * take a few ms on a LAN and show a median that one scheduling hiccup
 * does not move. */
#define RING_PINGS 5
/* The pings' first bytes, which tell them from other PINGs (bench channel). */
#define RING_PING_TAG 0x676e6952u   /* "Ring", little-endian */

typedef struct
{
  char     *id;        /* member id */
  char     *name;
  char     *probe_hash;
  DcMeshRingOffer offer;
  guint32   ping_seq;  /* the ping in flight (numbered from 1) */
  gint64    ping_sent; /* when it left, µs (monotonic) */
  double    rtt_ms[RING_PINGS];
  guint     n_rtt;
} Offer;

static void
offer_free (Offer *offer)
{
  g_free (offer->id);
  g_free (offer->name);
  g_free (offer->probe_hash);
  g_free (offer);
}

typedef struct
{
  char     *id;        /* NULL for this device */
  char     *name;
  gboolean  ready;
  guint64   downloaded;
  guint64   served;    /* weight bytes this device sent it from its cache */
  GPtrArray *tensors;  /* its layers' DcSafetensorsTensor*, once it asked for bytes */
} StageInfo;

static void
stage_info_clear (gpointer data)
{
  StageInfo *info = data;

  g_free (info->id);
  g_free (info->name);
  g_clear_pointer (&info->tensors, g_ptr_array_unref);
}

struct _DcInferRing
{
  GObject         parent_instance;

  DcContext      *context;
  DcGroup        *group;
  DcModelRepo    *repo;
  char           *probe_hash;
  guint64         memory_bytes;
  double          gmacs;
  GMainContext   *main_context;
  GHashTable     *offers;        /* member id → Offer* */

  /* The prepared ring. */
  DcRingPlan     *plan;
  GArray         *stages;        /* StageInfo, in plan order */
  guint8          run_id[DC_MESH_RING_RUN_ID_SIZE];
  GTask          *prepare;       /* while preparing */
  guint           prepare_gen;   /* which prepare a finishing load belongs to */
  guint           prepare_timeout;
  GCancellable   *prepare_cancellable;   /* the caller's, while preparing */
  gulong          prepare_cancel_id;
  gboolean        own_loaded;
  DcHfModel      *model;         /* this device's part */
  DcHfKvCache    *cache;
  guint           context_len;
  gsize           vocab_size;
  DcInferSession *session;
  gboolean        lost_peer;
  char           *test_fault;    /* generation thread, set before it runs */
  gboolean        test_lie;      /* serve stages bytes that do not match their sha256 */
  gboolean        test_lie_files;   /* and model files */
  guint           serving;       /* cache reads for stages under way */

  /* Between the generation thread and the main thread. */
  GMutex          lock;
  GCond           cond;
  guint32         sent_seq;      /* hops sent so far (numbered from 1) */
  guint32         answered_seq;  /* the last hop that came back */
  guint32         awaited_seq;   /* the hop the generation thread waits for (0: none) */
  float          *answer;        /* its activations */
  guint32         answer_rows;
  char           *failure;       /* why the ring cannot answer */
  /* Decoded tokens' laps (one position, logits wanted), for bench ring:
   * this device's compute and its wait for the ring, µs. */
  guint           lap_count;
  gint64          lap_compute_us;
  gint64          lap_wait_us;
  /* Inside the wait, on this device: from the generation thread's hand-off
   * to the main thread's send, and from the answer's arrival on the main
   * thread to the generation thread running again, µs. */
  guint           lap_sends;
  gint64          lap_send_us;
  gint64          lap_wake_us;
  gint64          answer_at;     /* when the answer arrived, µs (monotonic) */
  gint64          answer_received;  /* when webrtcbin handed it over, µs */
  gint64          lap_receive_us;
  /* Of lap_compute_us: this device's layers (embedding, layers, the hop's
   * encoding) and its final norm and head, µs; and between two decoded
   * tokens' forward passes, the session's own work (sampling, the token's
   * bytes and event), µs over lap_between_count. */
  gint64          lap_layers_us;
  gint64          lap_head_us;
  gint64          lap_between_us;
  guint           lap_between_count;
  gint64          last_forward_end;   /* generation thread: the last call with logits, µs */
  /* Threads of the final norm and head in a ring of two or more (0: the
   * backend's, as the layers), and how many helpers an answer's arrival
   * warms (the most either uses); both atomic. */
  gint            head_threads;
  gint            warm_threads;
};

G_DEFINE_FINAL_TYPE (DcInferRing, dc_infer_ring, G_TYPE_OBJECT)

enum
{
  SIGNAL_EVENT,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
emit_event (DcInferRing *self,
            const char  *kind,
            const char  *detail,
            guint64      value)
{
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, kind, detail, value);
}

static const char *
model_id (DcInferRing *self)
{
  return dc_model_repo_get_spec (self->repo);
}

/* ---- checks ----------------------------------------------------------- */

char *
dc_infer_ring_check_hop (const DcMeshRingHop *hop,
                         const char          *from,
                         const char          *model,
                         guint                width)
{
  gsize count;

  g_return_val_if_fail (hop != NULL && from != NULL && model != NULL, NULL);

  if (g_strcmp0 (hop->model, model) != 0)
    return g_strdup_printf ("REFUSED activation from “%s”: it belongs to model %s; this device "
                            "holds a slice of %s", from, hop->model, model);
  if (hop->width != width)
    return g_strdup_printf ("REFUSED activation from “%s”: %u values a position, the model "
                            "has %u", from, hop->width, width);
  count = (gsize) hop->n * hop->width;
  for (gsize i = 0; i < count; i++)
    if (!isfinite (hop->data[i]))
      return g_strdup_printf ("REFUSED activation from “%s”: a non-finite value at position "
                              "%" G_GSIZE_FORMAT, from, hop->position + i / hop->width);
  return NULL;
}

/* ---- peers ------------------------------------------------------------ */

static DcPeer *
find_peer (DcInferRing *self,
           const char  *id)
{
  g_autoptr(GPtrArray) peers = NULL;

  /* The group left its room: no peer. */
  if (dc_group_get_mesh (self->group) == NULL)
    return NULL;
  peers = dc_mesh_dup_peers (dc_group_get_mesh (self->group));
  for (guint i = 0; i < peers->len; i++)
    if (g_strcmp0 (dc_peer_get_id (g_ptr_array_index (peers, i)), id) == 0)
      return g_object_ref (g_ptr_array_index (peers, i));
  return NULL;
}

static gboolean
send_to (DcInferRing  *self,
         const char   *id,
         guint         type,
         GBytes       *payload,
         GError      **error)
{
  g_autoptr(DcPeer) peer = find_peer (self, id);

  if (peer == NULL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "a peer left the ring (member %s)", id);
      return FALSE;
    }
  return dc_peer_send (peer, type, payload, error);
}

/* The generation thread waits; this ends the wait with MESSAGE. */
static void
fail_waiting (DcInferRing *self,
              const char  *message)
{
  g_mutex_lock (&self->lock);
  if (self->failure == NULL)
    self->failure = g_strdup (message);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
}

static int
stage_of (DcInferRing *self,
          const char  *id)
{
  for (guint i = 1; self->stages != NULL && i < self->stages->len; i++)
    if (g_strcmp0 (g_array_index (self->stages, StageInfo, i).id, id) == 0)
      return (int) i;
  return -1;
}

static void prepare_check (DcInferRing *self);
static void send_ping (DcInferRing *self, Offer *offer);
static void prepare_fail (DcInferRing *self, GError *error);

static void
handle_ready (DcInferRing *self,
              DcPeer      *peer,
              GBytes      *payload)
{
  g_auto(DcMeshRingReady) ready = { { 0 } };
  g_autoptr(GError) error = NULL;
  int stage = stage_of (self, dc_peer_get_id (peer));
  StageInfo *info;

  if (stage < 0)
    return;
  if (!dc_mesh_ring_ready_decode (payload, &ready, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (memcmp (ready.run_id, self->run_id, sizeof self->run_id) != 0)
    return;
  info = &g_array_index (self->stages, StageInfo, stage);
  if (!ready.ok)
    {
      g_autofree char *message = g_str_has_prefix (ready.message, "REFUSED")
        ? g_strdup (ready.message)
        : g_strdup_printf ("“%s” cannot run its layers: %s", info->name, ready.message);

      if (self->prepare != NULL)
        prepare_fail (self, g_error_new_literal (DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                                                 message));
      else
        fail_waiting (self, message);
      return;
    }
  info->ready = TRUE;
  info->downloaded = ready.downloaded;
  emit_event (self, "stage-ready", info->name, ready.downloaded);
  prepare_check (self);
}

static void
handle_hop (DcInferRing *self,
            DcPeer      *peer,
            GBytes      *payload)
{
  g_auto(DcMeshRingHop) hop = { { 0 } };
  g_autoptr(GError) error = NULL;
  g_autofree char *why = NULL;
  int stage = stage_of (self, dc_peer_get_id (peer));
  gboolean warm = FALSE;

  if (!dc_mesh_ring_hop_decode (payload, &hop, &error))
    why = g_strdup_printf ("REFUSED activation from “%s”: %s", dc_peer_get_name (peer),
                           error->message);
  else if (self->plan == NULL || stage != (int) self->stages->len - 1 ||
           memcmp (hop.run_id, self->run_id, sizeof self->run_id) != 0)
    why = g_strdup_printf ("REFUSED activation from “%s”: it is not the last stage of this "
                           "device's ring", dc_peer_get_name (peer));
  else
    why = dc_infer_ring_check_hop (&hop, dc_peer_get_name (peer), model_id (self),
                                   dc_hf_model_get_config (self->model)->hidden_size);
  if (why != NULL)
    {
      g_message ("%s", why);
      emit_event (self, "refused", why, 0);
      fail_waiting (self, why);
      return;
    }
  /* Hops come back in the order they were sent. */
  g_mutex_lock (&self->lock);
  if (hop.turn > self->answered_seq && hop.turn <= self->sent_seq)
    {
      /* The generation thread computes the head and the next token's
       * layers next; an answer nobody waits for yet (a prompt's earlier
       * chunk) warms nothing: its helpers would spin on cores the stages
       * on this host are computing on. */
      warm = self->awaited_seq != 0 && hop.turn >= self->awaited_seq;
      self->answered_seq = hop.turn;
      self->answer_at = g_get_monotonic_time ();
      self->answer_received = dc_peer_get_message_received_us (peer);
      g_free (self->answer);
      self->answer = g_steal_pointer (&hop.data);
      self->answer_rows = hop.n;
      g_cond_broadcast (&self->cond);
    }
  g_mutex_unlock (&self->lock);
  /* After the generation thread's wake-up, not before: the helpers' wake
   * is a broadcast, and the woken helpers came first to the free cores
   * (head_wake_ms). */
  if (warm)
    dc_infer_ring_warm_helpers ((guint) MAX (g_atomic_int_get (&self->warm_threads), 1));
}

static void
handle_offer (DcInferRing *self,
              DcPeer      *peer,
              GBytes      *payload)
{
  g_autoptr(GError) error = NULL;
  Offer *offer = g_new0 (Offer, 1);
  DcMeshHello *hello = dc_peer_get_hello (peer);

  if (!dc_mesh_ring_offer_decode (payload, &offer->offer, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      offer_free (offer);
      return;
    }
  /* Another head asking for offers: for this device's ring server. */
  if (offer->offer.flags & DC_MESH_RING_OFFER_ASK)
    {
      offer_free (offer);
      return;
    }
  offer->id = g_strdup (dc_peer_get_id (peer));
  offer->name = g_strdup (dc_peer_get_name (peer));
  offer->probe_hash = g_strdup (hello != NULL ? hello->probe_hash : "");
  if (g_hash_table_contains (self->offers, offer->id))
    {
      Offer *old = g_hash_table_lookup (self->offers, offer->id);

      /* The same device again: what was measured still holds. */
      offer->ping_seq = old->ping_seq;
      offer->ping_sent = old->ping_sent;
      offer->n_rtt = old->n_rtt;
      memcpy (offer->rtt_ms, old->rtt_ms, sizeof offer->rtt_ms);
      g_hash_table_replace (self->offers, offer->id, offer);
      return;
    }
  g_hash_table_replace (self->offers, offer->id, offer);
  emit_event (self, "offer", offer->name, offer->offer.memory_bytes);
  send_ping (self, offer);
}

/* Devices already in the group offered their layers when they met this one,
 * before this ring existed: they are asked again (an app that chooses a
 * model after its group formed). Newcomers offer by themselves. */
static void
ask_offers (DcInferRing *self)
{
  DcMeshRingOffer ask = { 0, 1.0, DC_MESH_RING_OFFER_ASK };
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GPtrArray) peers = NULL;

  if (dc_group_get_mesh (self->group) == NULL)
    return;   /* in no room yet */
  payload = dc_mesh_ring_offer_encode (&ask);
  peers = dc_mesh_dup_peers (dc_group_get_mesh (self->group));
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);
      g_autoptr(GError) error = NULL;

      if (dc_peer_get_state (peer) == DC_PEER_STATE_OPEN &&
          !dc_peer_send (peer, DC_MESH_MSG_RING_OFFER, payload, &error))
        g_message ("ring: could not ask %s for layers: %s", dc_peer_get_name (peer),
                   error->message);
    }
}

/* ---- a ring's devices on one host ---------------------------------------- */

guint
dc_infer_ring_shared_host_threads (guint processors,
                                   guint stages)
{
  return MAX (1, processors / CLAMP (stages, 1, DC_INFER_RING_IN_FLIGHT));
}

/* ---- waking the helpers --------------------------------------------------- */

void
dc_infer_ring_warm_helpers (guint n_threads)
{
  static gsize once = 0;
  static guint us = DC_INFER_RING_WARM_US;

  if (g_once_init_enter (&once))
    {
      const char *env = g_getenv ("DC_RING_WARM_US");

      if (env != NULL && *env != '\0')
        us = (guint) CLAMP (g_ascii_strtoll (env, NULL, 10), 0, 10000);
      g_once_init_leave (&once, 1);
    }
  /* DC_RING_WARM_ALL=1: every helper of the pool, as before (an A/B). */
  if (us > 0 && g_strcmp0 (g_getenv ("DC_RING_WARM_ALL"), "1") == 0)
    dc_parallel_warm (us);
  else if (us > 0)
    dc_parallel_warm_threads (us, n_threads);
}

void
dc_infer_ring_cool_helpers (void)
{
  dc_parallel_cool ();
}

/* ---- hop cost ----------------------------------------------------------- */

static void
send_ping (DcInferRing *self,
           Offer       *offer)
{
  guint8 body[DC_MESH_HEARTBEAT_SIZE] = { 0 };
  g_autoptr(GBytes) payload = NULL;
  guint32 tag = GUINT32_TO_LE (RING_PING_TAG), seq;

  seq = GUINT32_TO_LE (++offer->ping_seq);
  offer->ping_sent = g_get_monotonic_time ();
  memcpy (body, &tag, 4);
  memcpy (body + 4, &seq, 4);
  payload = g_bytes_new (body, sizeof body);
  /* A failed send leaves the hop cost to the other devices or the default. */
  send_to (self, offer->id, DC_MESH_MSG_PING, payload, NULL);
}

static void
handle_pong (DcInferRing *self,
             DcPeer      *peer,
             GBytes      *payload)
{
  Offer *offer = g_hash_table_lookup (self->offers, dc_peer_get_id (peer));
  const guint8 *body;
  guint32 tag, seq;
  gsize size;

  body = g_bytes_get_data (payload, &size);
  if (offer == NULL || size != DC_MESH_HEARTBEAT_SIZE)
    return;
  memcpy (&tag, body, 4);
  memcpy (&seq, body + 4, 4);
  if (GUINT32_FROM_LE (tag) != RING_PING_TAG || GUINT32_FROM_LE (seq) != offer->ping_seq ||
      offer->n_rtt >= RING_PINGS)
    return;
  offer->rtt_ms[offer->n_rtt++] = (g_get_monotonic_time () - offer->ping_sent) / 1000.0;
  if (offer->n_rtt < RING_PINGS)
    send_ping (self, offer);
  else
    emit_event (self, "hop-measured", offer->name, (guint64) (dc_infer_ring_get_hop_ms (self)
                                                             * 1000.0));
}

static int
compare_doubles (gconstpointer a,
                 gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : (x > y ? 1 : 0);
}

/**
 * dc_infer_ring_get_hop_ms:
 *
 * Returns: one hop's measured cost: half the median round trip of the pings
 *   to the devices that offered layers, or -1 before any came back
 */
double
dc_infer_ring_get_hop_ms (DcInferRing *self)
{
  g_autoptr(GArray) all = g_array_new (FALSE, FALSE, sizeof (double));
  GHashTableIter iter;
  Offer *offer;

  g_return_val_if_fail (DC_IS_INFER_RING (self), -1.0);
  g_hash_table_iter_init (&iter, self->offers);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &offer))
    g_array_append_vals (all, offer->rtt_ms, offer->n_rtt);
  if (all->len == 0)
    return -1.0;
  g_array_sort (all, compare_doubles);
  return g_array_index (all, double, all->len / 2) / 2.0;
}

guint
dc_infer_ring_get_n_measured (DcInferRing *self)
{
  GHashTableIter iter;
  Offer *offer;
  guint n = 0;

  g_return_val_if_fail (DC_IS_INFER_RING (self), 0);
  g_hash_table_iter_init (&iter, self->offers);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &offer))
    n += offer->n_rtt >= RING_PINGS;
  return n;
}

/* ---- weight bytes for the stages -------------------------------------- */

/* Cache reads for stages at once: a stage reads its tensors one at a time
 * and waits for each answer, so 8 stages load at once; 8 reads hold at most
 * 8 × (a 16 MiB cached piece and a 4 MiB answer), 160 MB. More are refused
 * (that stage uses its Hub). */
#define RING_MAX_SERVING 8

typedef struct
{
  DcModelRepo *repo;
  char        *peer_id;
  guint        stage;
  guint8       run_id[DC_MESH_RING_RUN_ID_SIZE];
  guint32      request;
  guint64      offset;
  guint32      length;
  char        *file;
  gboolean     lie;
  GBytes      *data;       /* the answer */
  guint8       sha256[32];
  char        *message;    /* or why not */
} ServeJob;

static void
serve_job_free (ServeJob *job)
{
  g_object_unref (job->repo);
  g_free (job->peer_id);
  g_free (job->file);
  g_clear_pointer (&job->data, g_bytes_unref);
  g_free (job->message);
  g_free (job);
}

static void
send_bytes (DcInferRing  *self,
            const char   *peer_id,
            const guint8 *run_id,
            guint32       request,
            guint64       offset,
            const guint8 *sha256,
            GBytes       *data,
            const char   *message)
{
  DcMeshRingBytes answer = { { 0 } };
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;

  memcpy (answer.run_id, run_id, sizeof answer.run_id);
  answer.request = request;
  answer.offset = offset;
  if (sha256 != NULL)
    memcpy (answer.sha256, sha256, sizeof answer.sha256);
  answer.message = (char *) message;
  answer.data = data;
  payload = dc_mesh_ring_bytes_encode (&answer);
  if (!send_to (self, peer_id, DC_MESH_MSG_RING_BYTES, payload, &error))
    g_message ("ring: could not send weight bytes to %s: %s", peer_id, error->message);
}

static void
serve_worker (GTask        *task,
              gpointer      source,
              gpointer      data,
              GCancellable *cancellable)
{
  ServeJob *job = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GChecksum) checksum = NULL;
  gsize len = sizeof job->sha256;

  job->data = dc_model_repo_read_held (job->repo, job->file, job->offset, job->length, &error);
  if (job->data == NULL)
    {
      job->message = g_strdup (error->message);
      g_task_return_boolean (task, TRUE);
      return;
    }
  checksum = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (checksum, g_bytes_get_data (job->data, NULL), job->length);
  g_checksum_get_digest (checksum, job->sha256, &len);
  if (job->lie)
    {
      /* Tests: the bytes differ from the ones hashed. */
      g_autofree guint8 *copy = g_memdup2 (g_bytes_get_data (job->data, NULL), job->length);

      copy[0] ^= 0x5a;
      g_bytes_unref (job->data);
      job->data = g_bytes_new_take (g_steal_pointer (&copy), job->length);
    }
  g_task_return_boolean (task, TRUE);
}

static void
serve_done_cb (GObject      *source,
               GAsyncResult *result,
               gpointer      user_data)
{
  DcInferRing *self = DC_INFER_RING (source);
  ServeJob *job = g_task_get_task_data (G_TASK (result));

  self->serving--;
  /* A ring replanned meanwhile: that stage's run is over. */
  if (self->stages == NULL || memcmp (job->run_id, self->run_id, sizeof self->run_id) != 0)
    return;
  if (job->data != NULL && job->stage < self->stages->len)
    g_array_index (self->stages, StageInfo, job->stage).served += job->length;
  send_bytes (self, job->peer_id, job->run_id, job->request, job->offset, job->sha256,
              job->data, job->message);
}

/* A stage asks for bytes of its layers: served from this device's cache
 * only (never downloaded for it), and only inside its own tensors. */
static void
handle_fetch (DcInferRing *self,
              DcPeer      *peer,
              GBytes      *payload)
{
  g_auto(DcMeshRingFetch) fetch = { { 0 } };
  g_autoptr(GError) error = NULL;
  g_autoptr(GTask) task = NULL;
  int stage = stage_of (self, dc_peer_get_id (peer));
  const DcRingStage *s;
  StageInfo *info;
  ServeJob *job;

  if (!dc_mesh_ring_fetch_decode (payload, &fetch, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (stage < 0 || self->plan == NULL ||
      memcmp (fetch.run_id, self->run_id, sizeof self->run_id) != 0)
    {
      send_bytes (self, dc_peer_get_id (peer), fetch.run_id, fetch.request, fetch.offset, NULL,
                  NULL, "this device runs no ring with you");
      return;
    }
  info = &g_array_index (self->stages, StageInfo, stage);
  s = dc_ring_plan_get_stage (self->plan, (guint) stage);
  if (info->tensors == NULL)
    info->tensors = dc_hf_model_list_part_tensors (dc_model_repo_get_config (self->repo),
                                                   DC_TENSOR_SOURCE (self->repo), s->first,
                                                   s->last, FALSE, &error);
  if (info->tensors == NULL ||
      !dc_model_repo_range_in_tensors (self->repo, fetch.file, fetch.offset,
                                       fetch.offset + fetch.length, info->tensors))
    {
      g_autofree char *why =
        g_strdup_printf ("bytes %" G_GUINT64_FORMAT "–%" G_GUINT64_FORMAT " of %s are not in "
                         "layers %u to %u", fetch.offset, fetch.offset + fetch.length,
                         fetch.file, s->first, s->last - 1);

      send_bytes (self, dc_peer_get_id (peer), fetch.run_id, fetch.request, fetch.offset, NULL,
                  NULL, why);
      return;
    }
  if (self->serving >= RING_MAX_SERVING)
    {
      send_bytes (self, dc_peer_get_id (peer), fetch.run_id, fetch.request, fetch.offset, NULL,
                  NULL, "too many requests at once");
      return;
    }
  job = g_new0 (ServeJob, 1);
  job->repo = g_object_ref (self->repo);
  job->peer_id = g_strdup (dc_peer_get_id (peer));
  job->stage = (guint) stage;
  memcpy (job->run_id, fetch.run_id, sizeof job->run_id);
  job->request = fetch.request;
  job->offset = fetch.offset;
  job->length = fetch.length;
  job->file = g_steal_pointer (&fetch.file);
  job->lie = self->test_lie;
  self->serving++;
  task = g_task_new (self, NULL, serve_done_cb, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) serve_job_free);
  g_task_run_in_thread (task, serve_worker);
}

static void
send_file (DcInferRing                *self,
           const char                 *peer_id,
           const DcMeshRingFileFetch  *fetch,
           guint64                     total,
           guint64                     file_size,
           GBytes                     *data,
           const char                 *message)
{
  DcMeshRingFile answer = { { 0 } };
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;

  memcpy (answer.run_id, fetch->run_id, sizeof answer.run_id);
  answer.request = fetch->request;
  answer.offset = fetch->offset;
  answer.total = total;
  answer.file_size = file_size;
  answer.message = (char *) message;
  answer.data = data;
  if (data != NULL)
    {
      g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
      gsize len = sizeof answer.sha256;
      gsize size;
      const guint8 *p = g_bytes_get_data (data, &size);

      g_checksum_update (checksum, p, (gssize) size);
      g_checksum_get_digest (checksum, answer.sha256, &len);
      if (self->test_lie_files && size > 0)
        {
          /* Tests: the bytes differ from the ones hashed. */
          g_autofree guint8 *copy = g_memdup2 (p, size);

          copy[0] ^= 0x5a;
          answer.data = g_bytes_new_take (g_steal_pointer (&copy), size);
        }
    }
  payload = dc_mesh_ring_file_encode (&answer);
  if (answer.data != data)
    g_bytes_unref (answer.data);
  if (!send_to (self, peer_id, DC_MESH_MSG_RING_FILE, payload, &error))
    g_message ("ring: could not send a model file to %s: %s", peer_id, error->message);
}

/* A stage asks for one of the files it reads when it opens the model
 * (config.json, the tokenizer's, the index, a weight file's header): what
 * this device read when it opened it, so the stage needs no Hub. Only a
 * stage of this run, only those files; a missing optional one is an answer
 * of size 0. At most 4 MiB is hashed here, on the main thread, while the
 * stages load (never while tokens are made). */
static void
handle_file_fetch (DcInferRing *self,
                   DcPeer      *peer,
                   GBytes      *payload)
{
  g_auto(DcMeshRingFileFetch) fetch = { { 0 } };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) whole = NULL;
  g_autoptr(GBytes) slice = NULL;
  int stage = stage_of (self, dc_peer_get_id (peer));
  guint64 file_size = 0;
  gsize total;

  if (!dc_mesh_ring_file_fetch_decode (payload, &fetch, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (stage < 0 || self->plan == NULL ||
      memcmp (fetch.run_id, self->run_id, sizeof self->run_id) != 0)
    {
      send_file (self, dc_peer_get_id (peer), &fetch, 0, 0, NULL,
                 "this device runs no ring with you");
      return;
    }
  whole = dc_model_repo_dup_opened_file (self->repo, fetch.name,
                                         fetch.kind == DC_MESH_RING_FILE_HEADER, &file_size,
                                         &error);
  if (whole == NULL)
    {
      /* Size 0 and no message: the model has no such file. */
      if (g_error_matches (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND))
        send_file (self, dc_peer_get_id (peer), &fetch, 0, 0, NULL, NULL);
      else
        send_file (self, dc_peer_get_id (peer), &fetch, 0, 0, NULL, error->message);
      return;
    }
  total = g_bytes_get_size (whole);
  if (total == 0 || total > DC_MESH_RING_FILE_TOTAL_MAX || fetch.offset >= total)
    {
      g_autofree char *why = g_strdup_printf ("byte %" G_GUINT64_FORMAT " of %s is past its %"
                                              G_GSIZE_FORMAT " bytes", fetch.offset,
                                              fetch.name, total);

      send_file (self, dc_peer_get_id (peer), &fetch, 0, 0, NULL, why);
      return;
    }
  slice = g_bytes_new_from_bytes (whole, fetch.offset, MIN (total - fetch.offset, fetch.length));
  send_file (self, dc_peer_get_id (peer), &fetch, total, file_size, slice, NULL);
}

static void
message_cb (DcGroup  *group,
            DcPeer   *peer,
            guint     type,
            GBytes   *payload,
            gpointer  user_data)
{
  DcInferRing *self = user_data;

  switch (type)
    {
    case DC_MESH_MSG_RING_OFFER:
      handle_offer (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_READY:
      handle_ready (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_HOP:
      handle_hop (self, peer, payload);
      break;
    case DC_MESH_MSG_PONG:
      handle_pong (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_FETCH:
      handle_fetch (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_FILE_FETCH:
      handle_file_fetch (self, peer, payload);
      break;
    default:
      break;
    }
}

/* A stage that is gone: its offer goes, and a ring that needs it stops. */
static void
group_event_cb (DcGroup    *group,
                const char *event,
                const char *peer_name,
                guint       n_peers,
                const char *reason,
                gpointer    user_data)
{
  DcInferRing *self = user_data;
  GHashTableIter iter;
  Offer *offer;

  if (!g_str_equal (event, "peer-left"))
    return;
  g_hash_table_iter_init (&iter, self->offers);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &offer))
    {
      g_autoptr(DcPeer) peer = find_peer (self, offer->id);

      if (peer == NULL || dc_peer_get_state (peer) != DC_PEER_STATE_OPEN)
        g_hash_table_iter_remove (&iter);
    }
  for (guint i = 1; self->stages != NULL && i < self->stages->len; i++)
    {
      StageInfo *info = &g_array_index (self->stages, StageInfo, i);
      g_autoptr(DcPeer) peer = find_peer (self, info->id);

      if (peer == NULL || dc_peer_get_state (peer) != DC_PEER_STATE_OPEN)
        {
          g_autofree char *message = g_strdup_printf ("a peer left the ring: “%s”", info->name);

          self->lost_peer = TRUE;
          emit_event (self, "peer-left", info->name, 0);
          if (self->prepare != NULL)
            prepare_fail (self, g_error_new_literal (DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                                                     message));
          else
            fail_waiting (self, message);
          return;
        }
    }
}

/* ---- the forward pass, on the session's generation thread -------------- */

typedef struct
{
  DcInferRing *ring;     /* ref */
  char        *to;
  GBytes      *payload;
  gint64       queued;   /* µs; 0 when not a decoded token's hop */
} SendJob;

static gboolean
send_hop_cb (gpointer data)
{
  SendJob *job = data;
  g_autoptr(GError) error = NULL;

  if (!send_to (job->ring, job->to, DC_MESH_MSG_RING_HOP, job->payload, &error))
    fail_waiting (job->ring, error->message);
  else if (job->queued != 0)
    {
      gint64 now = g_get_monotonic_time ();

      g_mutex_lock (&job->ring->lock);
      job->ring->lap_sends++;
      job->ring->lap_send_us += now - job->queued;
      g_mutex_unlock (&job->ring->lock);
    }
  return G_SOURCE_REMOVE;
}

static void
send_job_free (gpointer data)
{
  SendJob *job = data;

  g_object_unref (job->ring);
  g_free (job->to);
  g_bytes_unref (job->payload);
  g_free (job);
}

/* Waits, with the lock held, until hop SEQ came back; FALSE with ERROR
 * set when the ring failed or did not answer in time. */
static gboolean
wait_answer_locked (DcInferRing  *self,
                    guint32       seq,
                    GError      **error)
{
  gint64 deadline = g_get_monotonic_time () + DC_INFER_RING_HOP_TIMEOUT_S * G_TIME_SPAN_SECOND;

  self->awaited_seq = seq;
  while (self->answered_seq < seq && self->failure == NULL)
    if (!g_cond_wait_until (&self->cond, &self->lock, deadline))
      break;
  self->awaited_seq = 0;
  if (self->answered_seq >= seq)
    return TRUE;
  if (self->failure != NULL)
    g_set_error_literal (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID, self->failure);
  else
    g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                 "the ring did not answer within %u s", DC_INFER_RING_HOP_TIMEOUT_S);
  return FALSE;
}

/* The final norm and head of one position, on the head's own thread count
 * (dc_infer_ring_set_head_threads) in a ring of two or more: every other
 * device waits for the token meanwhile, so the head may take the cores
 * its share left idle. The products' chunks do not depend on the thread
 * count (dc-parallel.h): the same bits on any count. Generation thread,
 * the only one computing with this device's backend while a ring runs. */
static gboolean
run_head (DcInferRing  *self,
          const float  *x,
          float        *logits,
          GError      **error)
{
  DcGemmBackend *backend = dc_context_get_backend (self->context);
  guint layers = dc_gemm_backend_get_n_threads (backend);
  guint head = (guint) g_atomic_int_get (&self->head_threads);
  gboolean ok;

  if (head == 0 || head == layers || self->stages->len < 2)
    return dc_hf_model_head (self->model, x, logits, error);
  dc_gemm_backend_set_n_threads (backend, head);
  ok = dc_hf_model_head (self->model, x, logits, error);
  dc_gemm_backend_set_n_threads (backend, layers);
  /* The answer warmed the head's helpers; the layers next use fewer: the
   * others sleep instead of spinning beside the sends on this host. */
  if (head > layers)
    dc_infer_ring_warm_helpers (layers);
  return ok;
}

/* The session's forward pass through the ring. A prompt's chunks before
 * its last (LOGITS NULL) do not wait for their answer: up to
 * DC_INFER_RING_IN_FLIGHT hops go round at once, so that a stage computes
 * chunk k + 1 while the next computes chunk k (each stage runs its hops in
 * order, so its cache sees the positions in order). */
static gboolean
ring_forward_any (DcInferRing    *self,
                  const guint32  *ids,
                  gsize           n_ids,
                  guint           start,
                  float          *logits,
                  gboolean        every_row,
                  GError        **error)
{
  const gsize C = dc_hf_model_get_config (self->model)->hidden_size;
  g_autofree float *x = NULL;
  g_autofree float *answer = NULL;
  guint32 rows = 0, seq;
  gint64 t_start = g_get_monotonic_time (), t_sent = 0, t_answer = 0, answer_at = 0;
  gint64 answer_received = 0, t_part;
  gboolean ok, decoded = n_ids == 1 && logits != NULL && !every_row;
  guint layer_threads = dc_gemm_backend_get_n_threads (dc_context_get_backend (self->context));

  g_atomic_int_set (&self->warm_threads,
                    (gint) MAX (layer_threads, (guint) g_atomic_int_get (&self->head_threads)));
  if (start == 0)
    self->last_forward_end = 0;
  else if (decoded && self->last_forward_end != 0)
    {
      /* The session's work between two tokens' passes (sampling, …). */
      g_mutex_lock (&self->lock);
      self->lap_between_us += t_start - self->last_forward_end;
      self->lap_between_count++;
      g_mutex_unlock (&self->lock);
    }
  if (n_ids == 0 || n_ids > DC_MESH_RING_MAX_POSITIONS)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "a hop carries 1 to %u positions, not %" G_GSIZE_FORMAT,
                   DC_MESH_RING_MAX_POSITIONS, n_ids);
      return FALSE;
    }
  if (start == 0)
    dc_hf_kv_cache_reset (self->cache);
  else if (start < dc_hf_kv_cache_get_length (self->cache))
    dc_hf_kv_cache_truncate (self->cache, start);   /* a draft span's rejected tail */
  else if (start != dc_hf_kv_cache_get_length (self->cache))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the ring is at position %u, not %u", dc_hf_kv_cache_get_length (self->cache),
                   start);
      return FALSE;
    }
  x = g_new (float, n_ids * C);
  if (!dc_hf_model_forward_part (self->model, self->cache, ids, x, n_ids, error))
    return FALSE;
  t_part = g_get_monotonic_time ();

  if (self->stages->len == 1)
    {
      if (logits == NULL)
        return TRUE;
      if (!every_row)
        {
          ok = run_head (self, x + (n_ids - 1) * C, logits, error);
          self->last_forward_end = g_get_monotonic_time ();
          if (ok && n_ids == 1)
            {
              g_mutex_lock (&self->lock);
              self->lap_count++;
              self->lap_compute_us += self->last_forward_end - t_start;
              self->lap_layers_us += t_part - t_start;
              self->lap_head_us += self->last_forward_end - t_part;
              g_mutex_unlock (&self->lock);
            }
          return ok;
        }
      for (gsize i = 0; i < n_ids; i++)
        if (!run_head (self, x + i * C, logits + i * self->vocab_size, error))
          return FALSE;
      self->last_forward_end = g_get_monotonic_time ();
      return TRUE;
    }

  {
    DcMeshRingHop hop = { { 0 } };
    SendJob *job = g_new0 (SendJob, 1);
    GSource *source;

    g_mutex_lock (&self->lock);
    if (self->sent_seq - self->answered_seq >= DC_INFER_RING_IN_FLIGHT &&
        !wait_answer_locked (self, self->sent_seq - DC_INFER_RING_IN_FLIGHT + 1, error))
      {
        g_mutex_unlock (&self->lock);
        g_free (job);
        return FALSE;
      }
    seq = ++self->sent_seq;
    g_mutex_unlock (&self->lock);

    memcpy (hop.run_id, self->run_id, sizeof hop.run_id);
    hop.turn = seq;
    hop.position = start;
    hop.n = (guint32) n_ids;
    hop.width = (guint32) C;
    hop.model = (char *) model_id (self);
    hop.data = x;
    if (g_strcmp0 (self->test_fault, "nan") == 0)
      x[n_ids * C - 1] = NAN;
    else if (g_strcmp0 (self->test_fault, "model") == 0)
      hop.model = (char *) "test/another-model";
    g_clear_pointer (&self->test_fault, g_free);
    job->ring = g_object_ref (self);
    job->to = g_strdup (g_array_index (self->stages, StageInfo, 1).id);
    job->payload = dc_mesh_ring_hop_encode (&hop);
    if (n_ids == 1 && logits != NULL && !every_row)
      job->queued = g_get_monotonic_time ();
    source = g_idle_source_new ();
    /* Ahead of idle work and the mesh's own sources: the ring waits for it. */
    g_source_set_priority (source, G_PRIORITY_HIGH);
    g_source_set_callback (source, send_hop_cb, job, send_job_free);
    g_source_set_static_name (source, "[dc] ring hop");
    g_source_attach (source, self->main_context);
    g_source_unref (source);
  }
  if (logits == NULL)
    return TRUE;

  t_sent = g_get_monotonic_time ();
  /* This device's products are done until the answer: its helpers sleep
   * rather than take cores from the stages on the same host. */
  dc_infer_ring_cool_helpers ();
  g_mutex_lock (&self->lock);
  if (wait_answer_locked (self, seq, error))
    {
      answer = g_steal_pointer (&self->answer);
      rows = self->answer_rows;
      answer_at = self->answer_at;
      answer_received = self->answer_received;
    }
  g_mutex_unlock (&self->lock);
  if (answer == NULL)
    return FALSE;
  t_answer = g_get_monotonic_time ();
  if (!every_row)
    {
      ok = run_head (self, answer + (gsize) (rows - 1) * C, logits, error);
      self->last_forward_end = g_get_monotonic_time ();
      if (ok && n_ids == 1)
        {
          gint64 t_end = self->last_forward_end;

          g_mutex_lock (&self->lock);
          self->lap_count++;
          self->lap_compute_us += (t_sent - t_start) + (t_end - t_answer);
          self->lap_layers_us += t_sent - t_start;
          self->lap_head_us += t_end - t_answer;
          self->lap_wait_us += t_answer - t_sent;
          self->lap_wake_us += t_answer - MAX (answer_at, t_sent);
          if (answer_received > 0 && answer_received <= answer_at)
            self->lap_receive_us += answer_at - answer_received;
          g_mutex_unlock (&self->lock);
        }
      return ok;
    }
  if (rows != n_ids)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "the ring answered %u positions for %" G_GSIZE_FORMAT, rows, n_ids);
      return FALSE;
    }
  for (guint32 i = 0; i < rows; i++)
    if (!run_head (self, answer + (gsize) i * C, logits + i * self->vocab_size, error))
      return FALSE;
  self->last_forward_end = g_get_monotonic_time ();
  return TRUE;
}

static gboolean
ring_forward (gpointer        user_data,
              const guint32  *ids,
              gsize           n_ids,
              guint           start,
              float          *logits,
              GError        **error)
{
  return ring_forward_any (user_data, ids, n_ids, start, logits, FALSE, error);
}

/* A draft span: the logits of every position, still one lap. */
static gboolean
ring_forward_rows (gpointer        user_data,
                   const guint32  *ids,
                   gsize           n_ids,
                   guint           start,
                   float          *logits,
                   GError        **error)
{
  return ring_forward_any (user_data, ids, n_ids, start, logits, TRUE, error);
}

/* ---- tokens to every stage ---------------------------------------------- */

static void
broadcast_token (DcInferRing *self,
                 guint        turn,
                 guint        index,
                 guint        id,
                 guint8       flags,
                 const char  *text)
{
  DcMeshRingToken token = { { 0 } };
  g_autoptr(GBytes) payload = NULL;
  g_autofree char *cut = NULL;

  if (self->stages == NULL)
    return;
  memcpy (token.run_id, self->run_id, sizeof token.run_id);
  token.turn = turn;
  token.index = index;
  token.id = id;
  token.flags = flags;
  cut = g_strndup (text != NULL ? text : "", DC_MESH_RING_TEXT_MAX);
  token.text = cut;
  payload = dc_mesh_ring_token_encode (&token);
  for (guint i = 1; i < self->stages->len; i++)
    send_to (self, g_array_index (self->stages, StageInfo, i).id, DC_MESH_MSG_RING_TOKEN,
             payload, NULL);
}

static void
session_started_cb (DcInferSession *session,
                    guint           prompt_id,
                    guint           n_prompt_tokens,
                    DcInferRing    *self)
{
  g_object_set_data (G_OBJECT (session), "dc-ring-index", GUINT_TO_POINTER (0));
}

static void
session_token_cb (DcInferSession *session,
                  guint           prompt_id,
                  guint           token_id,
                  const char     *text,
                  double          tokens_per_s,
                  DcInferRing    *self)
{
  guint index = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (session), "dc-ring-index"));

  broadcast_token (self, prompt_id, index, token_id, 0, text);
  g_object_set_data (G_OBJECT (session), "dc-ring-index", GUINT_TO_POINTER (index + 1));
}

static void
session_finished_cb (DcInferSession *session,
                     guint           prompt_id,
                     gboolean        stopped,
                     const char     *error_message,
                     double          tokens_per_s,
                     DcInferRing    *self)
{
  broadcast_token (self, prompt_id, 0, 0, DC_MESH_RING_TOKEN_END, "");
}

/* ---- preparing ------------------------------------------------------- */

static void
clear_ring (DcInferRing *self)
{
  if (self->session != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->session, self);
      dc_infer_session_clear_queue (self->session);
      dc_infer_session_stop (self->session);
      /* A forward waiting for the ring returns at once; the session joins
       * its worker, which holds no reference to us, before we go on. */
      fail_waiting (self, "the ring was closed");
    }
  g_clear_object (&self->session);
  g_clear_pointer (&self->cache, dc_hf_kv_cache_free);
  g_clear_pointer (&self->model, dc_hf_model_free);
  g_clear_pointer (&self->plan, dc_ring_plan_free);
  g_clear_pointer (&self->stages, g_array_unref);
  g_mutex_lock (&self->lock);
  g_clear_pointer (&self->answer, g_free);
  g_clear_pointer (&self->failure, g_free);
  self->sent_seq = self->answered_seq = 0;
  self->lap_count = 0;
  self->lap_compute_us = self->lap_wait_us = 0;
  self->lap_sends = 0;
  self->lap_send_us = self->lap_wake_us = 0;
  self->lap_receive_us = 0;
  self->lap_layers_us = self->lap_head_us = self->lap_between_us = 0;
  self->lap_between_count = 0;
  g_mutex_unlock (&self->lock);
  self->own_loaded = FALSE;
  self->lost_peer = FALSE;
}

static void
prepare_finish_task (DcInferRing *self,
                     GError      *error)   /* taken; NULL: success */
{
  g_autoptr(GTask) task = g_steal_pointer (&self->prepare);

  if (self->prepare_timeout != 0)
    g_source_remove (self->prepare_timeout);
  self->prepare_timeout = 0;
  /* Never called from the cancelled handler itself (it only schedules). */
  if (self->prepare_cancel_id != 0)
    g_cancellable_disconnect (self->prepare_cancellable, self->prepare_cancel_id);
  self->prepare_cancel_id = 0;
  g_clear_object (&self->prepare_cancellable);
  if (task == NULL)
    {
      g_clear_error (&error);
      return;
    }
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
prepare_fail (DcInferRing *self,
              GError      *error)
{
  prepare_finish_task (self, error);
}

static void
prepare_check (DcInferRing *self)
{
  if (self->prepare == NULL || !self->own_loaded)
    return;
  for (guint i = 1; i < self->stages->len; i++)
    if (!g_array_index (self->stages, StageInfo, i).ready)
      return;
  self->session = dc_infer_session_new_with_forward (self->context, self->repo, ring_forward,
                                                     self);
  dc_infer_session_set_forward_rows (self->session, ring_forward_rows);
  emit_event (self, "prepared", NULL, dc_ring_plan_get_n_stages (self->plan));
  g_signal_connect (self->session, "started", G_CALLBACK (session_started_cb), self);
  g_signal_connect (self->session, "token", G_CALLBACK (session_token_cb), self);
  g_signal_connect (self->session, "finished", G_CALLBACK (session_finished_cb), self);
  prepare_finish_task (self, NULL);
}

static gboolean
prepare_timeout_cb (gpointer data)
{
  DcInferRing *self = data;

  self->prepare_timeout = 0;
  prepare_fail (self, g_error_new (DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                                   "the ring's devices were not ready within %u s",
                                   DC_INFER_RING_READY_TIMEOUT_S));
  return G_SOURCE_REMOVE;
}

static gboolean
prepare_cancelled_idle_cb (gpointer data)
{
  DcInferRing *self = data;

  if (self->prepare != NULL && self->prepare_cancellable != NULL &&
      g_cancellable_is_cancelled (self->prepare_cancellable))
    prepare_fail (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                             "the run was stopped"));
  return G_SOURCE_REMOVE;
}

/* A cancel while the stages fetch their layers ends the prepare at once,
 * not when they are ready. The handler may run on any thread: it only
 * schedules the end on the ring's context. */
static void
prepare_cancelled_cb (GCancellable *cancellable,
                      gpointer      data)
{
  DcInferRing *self = data;
  g_autoptr(GSource) source = g_idle_source_new ();

  g_source_set_callback (source, prepare_cancelled_idle_cb, g_object_ref (self),
                         g_object_unref);
  g_source_attach (source, self->main_context);
}

typedef struct
{
  guint first, last, context;
  guint gen;
} OwnLoad;

static void
own_load_worker (GTask        *task,
                 gpointer      source,
                 gpointer      data,
                 GCancellable *cancellable)
{
  DcInferRing *self = source;
  OwnLoad *load = data;
  GError *error = NULL;
  DcHfModel *model;
  DcHfKvCache *cache;

  model = dc_hf_model_load_part (dc_model_repo_get_config (self->repo),
                                 DC_TENSOR_SOURCE (self->repo),
                                 dc_context_get_backend (self->context), load->first, load->last,
                                 TRUE, NULL, NULL, cancellable, &error);
  if (model == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  cache = dc_hf_kv_cache_new (model, load->context, &error);
  if (cache == NULL)
    {
      dc_hf_model_free (model);
      g_task_return_error (task, error);
      return;
    }
  g_object_set_data_full (G_OBJECT (task), "cache", cache, (GDestroyNotify) dc_hf_kv_cache_free);
  g_task_return_pointer (task, model, (GDestroyNotify) dc_hf_model_free);
}

static void
own_load_done_cb (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  DcInferRing *self = DC_INFER_RING (source);
  GError *error = NULL;
  DcHfModel *model = g_task_propagate_pointer (G_TASK (result), &error);

  if (model == NULL)
    {
      if (((OwnLoad *) g_task_get_task_data (G_TASK (result)))->gen == self->prepare_gen)
        prepare_fail (self, error);
      else
        g_clear_error (&error);
      return;
    }
  /* A load of an earlier prepare (a replay replanned meanwhile) is dropped. */
  if (self->prepare == NULL || self->model != NULL ||
      ((OwnLoad *) g_task_get_task_data (G_TASK (result)))->gen != self->prepare_gen)
    {
      dc_hf_model_free (model);
      return;
    }
  self->model = model;
  self->cache = g_object_steal_data (G_OBJECT (result), "cache");
  g_array_index (self->stages, StageInfo, 0).downloaded =
    dc_model_repo_get_bytes_downloaded (self->repo);
  self->own_loaded = TRUE;
  prepare_check (self);
}

/* Multiply-adds of one layer for one token over a full context. */
static void
fill_shape (DcInferRing *self,
            guint        context,
            DcRingShape *shape,
            GError     **error)
{
  const DcHfConfig *c = dc_model_repo_get_config (self->repo);
  DcTensorSource *source = DC_TENSOR_SOURCE (self->repo);
  g_autoptr(GPtrArray) layer = dc_hf_model_list_part_tensors (c, source, 0, 1, FALSE, error);
  g_autoptr(GPtrArray) ends = layer != NULL
                              ? dc_hf_model_list_part_tensors (c, source, 0, 0, TRUE, error)
                              : NULL;
  const double C = c->hidden_size, F = c->intermediate_size, D = c->head_dim;
  const double qkv = (c->n_heads + 2.0 * c->n_kv_heads) * D;
  const double up = c->family == DC_HF_FAMILY_GPT2 ? F : 2 * F;

  memset (shape, 0, sizeof *shape);
  shape->n_layers = c->n_layers;
  shape->layer_bytes = dc_hf_model_part_memory_bytes (c, 0, 1, FALSE, context);
  shape->ends_bytes = dc_hf_model_part_memory_bytes (c, 0, 0, TRUE, context);
  for (guint i = 0; layer != NULL && i < layer->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (layer, i);

      shape->layer_download += t->end - t->begin;
    }
  for (guint i = 0; ends != NULL && i < ends->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (ends, i);

      shape->ends_download += t->end - t->begin;
    }
  shape->layer_macs = qkv * C + C * c->n_heads * D + up * C + C * F
                      + 2.0 * c->n_heads * D * context;
  shape->ends_macs = (double) c->vocab_size * C;
  /* Measured (pings to the devices that offered); before any came back, a
   * millisecond: a hop on the shaped local network. */
  shape->hop_ms = dc_infer_ring_get_hop_ms (self);
  if (shape->hop_ms < 0.0)
    shape->hop_ms = DC_INFER_RING_DEFAULT_HOP_MS;
}

static int
compare_offer_names (gconstpointer a,
                     gconstpointer b)
{
  const Offer *x = *(Offer * const *) a, *y = *(Offer * const *) b;
  int by_name = g_strcmp0 (x->name, y->name);

  return by_name != 0 ? by_name : g_strcmp0 (x->id, y->id);
}

void
dc_infer_ring_prepare_async (DcInferRing         *self,
                             guint                context,
                             GCancellable        *cancellable,
                             GAsyncReadyCallback  callback,
                             gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GArray) devices = g_array_new (FALSE, TRUE, sizeof (DcRingDevice));
  g_autoptr(GPtrArray) offers = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GTask) load = NULL;
  DcRingShape shape;
  DcRingDevice head = { "", dc_group_get_name (self->group), self->probe_hash,
                        self->memory_bytes, self->gmacs };
  GHashTableIter iter;
  Offer *offer;
  OwnLoad *own;

  g_return_if_fail (DC_IS_INFER_RING (self));
  g_return_if_fail (self->prepare == NULL);

  clear_ring (self);
  if (head.name == NULL)
    head.name = g_get_host_name ();
  fill_shape (self, context, &shape, &error);
  if (error != NULL)
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  g_array_append_val (devices, head);
  g_hash_table_iter_init (&iter, self->offers);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &offer))
    g_ptr_array_add (offers, offer);
  /* The order the plan sees: by name, so that equal devices get the same plan. */
  g_ptr_array_sort (offers, compare_offer_names);
  for (guint i = 0; i < offers->len && devices->len < DC_RING_PLAN_MAX_DEVICES; i++)
    {
      Offer *o = g_ptr_array_index (offers, i);
      DcRingDevice d = { o->id, o->name, o->probe_hash, o->offer.memory_bytes, o->offer.gmacs };

      g_array_append_val (devices, d);
    }
  self->plan = dc_ring_plan_new (&shape, (DcRingDevice *) devices->data, devices->len, &error);
  if (self->plan == NULL)
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  for (guint i = 0; i < self->plan->excluded->len; i++)
    {
      g_message ("%s", (const char *) g_ptr_array_index (self->plan->excluded, i));
      emit_event (self, "excluded", g_ptr_array_index (self->plan->excluded, i), 0);
    }
  if (dc_ring_plan_get_n_stages (self->plan) > 1 && dc_model_repo_is_local (self->repo))
    {
      g_task_return_new_error (task, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                               "a model in a local folder cannot be split: the other devices "
                               "fetch their layers from the Hub; give its repo id");
      g_clear_pointer (&self->plan, dc_ring_plan_free);
      return;
    }

  self->stages = g_array_new (FALSE, TRUE, sizeof (StageInfo));
  g_array_set_clear_func (self->stages, stage_info_clear);
  for (guint i = 0; i < dc_ring_plan_get_n_stages (self->plan); i++)
    {
      const DcRingStage *s = dc_ring_plan_get_stage (self->plan, i);
      const DcRingDevice *d = &g_array_index (devices, DcRingDevice, s->device);
      StageInfo info = { 0 };

      info.id = i == 0 ? NULL : g_strdup (d->id);
      info.name = g_strdup (d->name);
      g_array_append_val (self->stages, info);
    }
  for (guint i = 0; i < sizeof self->run_id; i += 4)
    {
      guint32 r = g_random_int ();

      memcpy (self->run_id + i, &r, 4);
    }
  self->context_len = context;
  self->vocab_size = dc_model_repo_get_config (self->repo)->vocab_size;
  self->prepare = g_object_ref (task);
  emit_event (self, "planned", NULL, dc_ring_plan_get_n_stages (self->plan));

  for (guint i = 1; i < self->stages->len; i++)
    {
      const DcRingStage *s = dc_ring_plan_get_stage (self->plan, i);
      DcMeshRingAssign assign = { { 0 } };
      g_autoptr(GBytes) payload = NULL;

      memcpy (assign.run_id, self->run_id, sizeof assign.run_id);
      assign.first = s->first;
      assign.last = s->last;
      assign.context = context;
      assign.stage = i;
      assign.n_stages = self->stages->len;
      assign.model = (char *) model_id (self);
      assign.next = (char *) (i + 1 < self->stages->len
                              ? g_array_index (self->stages, StageInfo, i + 1).id
                              : dc_mesh_get_id (dc_group_get_mesh (self->group)));
      payload = dc_mesh_ring_assign_encode (&assign);
      if (!send_to (self, g_array_index (self->stages, StageInfo, i).id, DC_MESH_MSG_RING_ASSIGN,
                    payload, &error))
        {
          prepare_fail (self, g_steal_pointer (&error));
          return;
        }
    }
  self->prepare_timeout = g_timeout_add_seconds (DC_INFER_RING_READY_TIMEOUT_S,
                                                 prepare_timeout_cb, self);
  if (cancellable != NULL)
    {
      self->prepare_cancellable = g_object_ref (cancellable);
      self->prepare_cancel_id = g_cancellable_connect (cancellable,
                                                       G_CALLBACK (prepare_cancelled_cb),
                                                       self, NULL);
    }
  own = g_new0 (OwnLoad, 1);
  own->first = dc_ring_plan_get_stage (self->plan, 0)->first;
  own->last = dc_ring_plan_get_stage (self->plan, 0)->last;
  own->context = context;
  own->gen = ++self->prepare_gen;
  load = g_task_new (self, cancellable, own_load_done_cb, NULL);
  g_task_set_task_data (load, own, g_free);
  g_task_run_in_thread (load, own_load_worker);
}

gboolean
dc_infer_ring_prepare_finish (DcInferRing   *self,
                              GAsyncResult  *result,
                              GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- getters and closing ----------------------------------------------- */

guint
dc_infer_ring_get_n_offers (DcInferRing *self)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self), 0);
  return g_hash_table_size (self->offers);
}

const DcRingPlan *
dc_infer_ring_get_plan (DcInferRing *self)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self), NULL);
  return self->plan;
}

const char *
dc_infer_ring_get_stage_name (DcInferRing *self,
                              guint        stage)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self) && self->stages != NULL, NULL);
  g_return_val_if_fail (stage < self->stages->len, NULL);
  return g_array_index (self->stages, StageInfo, stage).name;
}

guint64
dc_infer_ring_get_stage_downloaded (DcInferRing *self,
                                    guint        stage)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self) && self->stages != NULL, 0);
  g_return_val_if_fail (stage < self->stages->len, 0);
  return g_array_index (self->stages, StageInfo, stage).downloaded;
}

DcModelRepo *
dc_infer_ring_get_repo (DcInferRing *self)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self), NULL);
  return self->repo;
}

/**
 * dc_infer_ring_compare_ids:
 * @ring_ids: (element-type guint32): the distributed run's token ids
 * @ids: (element-type guint32): the single-device run's
 * @verified: (out): whether they are identical
 *
 * Returns: (transfer full): the Verify line: “VERIFIED: …” or “NOT
 *   VERIFIED: …” with the first token that differs
 */
char *
dc_infer_ring_compare_ids (GArray   *ring_ids,
                           GArray   *ids,
                           gboolean *verified)
{
  guint n = MIN (ids->len, ring_ids->len);

  *verified = FALSE;
  for (guint i = 0; i < n; i++)
    if (g_array_index (ids, guint32, i) != g_array_index (ring_ids, guint32, i))
      return g_strdup_printf ("NOT VERIFIED: the distributed run and the single-device run "
                              "differ first at token %u (%u distributed, %u on one device)", i,
                              g_array_index (ring_ids, guint32, i),
                              g_array_index (ids, guint32, i));
  if (ids->len != ring_ids->len)
    return g_strdup_printf ("NOT VERIFIED: the distributed run made %u tokens, the "
                            "single-device run %u", ring_ids->len, ids->len);
  *verified = TRUE;
  return g_strdup ("VERIFIED: the distributed run and the single-device run produced "
                   "identical token ids");
}

guint64
dc_infer_ring_get_stage_served (DcInferRing *self,
                                guint        stage)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self) && self->stages != NULL, 0);
  g_return_val_if_fail (stage < self->stages->len, 0);
  return g_array_index (self->stages, StageInfo, stage).served;
}

void
_dc_infer_ring_set_test_lie (DcInferRing *self,
                             gboolean     lie)
{
  g_return_if_fail (DC_IS_INFER_RING (self));
  self->test_lie = lie;
}

void
_dc_infer_ring_set_test_lie_files (DcInferRing *self,
                                   gboolean     lie)
{
  g_return_if_fail (DC_IS_INFER_RING (self));
  self->test_lie_files = lie;
}

DcInferSession *
dc_infer_ring_get_session (DcInferRing *self)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self), NULL);
  return self->session;
}

void
_dc_infer_ring_set_test_fault (DcInferRing *self,
                               const char  *fault)
{
  g_return_if_fail (DC_IS_INFER_RING (self));
  g_free (self->test_fault);
  self->test_fault = g_strdup (fault);
}

guint
dc_infer_ring_get_lap_times (DcInferRing *self,
                             double      *compute_ms,
                             double      *wait_ms)
{
  guint n;

  g_return_val_if_fail (DC_IS_INFER_RING (self), 0);
  g_mutex_lock (&self->lock);
  n = self->lap_count;
  *compute_ms = n > 0 ? self->lap_compute_us / (1000.0 * n) : 0.0;
  *wait_ms = n > 0 ? self->lap_wait_us / (1000.0 * n) : 0.0;
  g_mutex_unlock (&self->lock);
  return n;
}

/**
 * dc_infer_ring_get_lap_handoffs:
 * @send_ms: (out): per decoded token, from the generation thread's hand-off
 *   of the hop to the main thread's send
 * @wake_ms: (out): per decoded token, from the answer's arrival on the main
 *   thread to the generation thread running again
 *
 * The parts of dc_infer_ring_get_lap_times()'s wait spent on this device.
 */
void
dc_infer_ring_get_lap_handoffs (DcInferRing *self,
                                double      *send_ms,
                                double      *wake_ms)
{
  g_return_if_fail (DC_IS_INFER_RING (self));
  g_mutex_lock (&self->lock);
  *send_ms = self->lap_sends > 0 ? self->lap_send_us / (1000.0 * self->lap_sends) : 0.0;
  *wake_ms = self->lap_count > 0 ? self->lap_wake_us / (1000.0 * self->lap_count) : 0.0;
  g_mutex_unlock (&self->lock);
}

/**
 * dc_infer_ring_get_lap_receive_ms:
 *
 * Returns: of a decoded token's wait, the answer's way from webrtcbin's
 *   on-message-data signal (its thread) to our handler on the main
 *   context, ms on average (a part of what `bench ring` calls transport)
 */
double
dc_infer_ring_get_lap_receive_ms (DcInferRing *self)
{
  double ms;

  g_return_val_if_fail (DC_IS_INFER_RING (self), 0.0);
  g_mutex_lock (&self->lock);
  ms = self->lap_count > 0 ? self->lap_receive_us / (1000.0 * self->lap_count) : 0.0;
  g_mutex_unlock (&self->lock);
  return ms;
}

/**
 * dc_infer_ring_get_lap_split:
 * @layers_ms: (out): per decoded token, this device's layers (from the
 *   token's embedding to the hop handed to the main thread, or to the head)
 * @head_ms: (out): per decoded token, its final norm and head
 * @between_ms: (out): per decoded token after the first, the session's
 *   work between two forward passes (sampling, the token's text and event)
 *
 * The parts of dc_infer_ring_get_lap_times()'s compute, and what a lap
 * spends outside the forward pass (`bench ring`'s head_layers_ms, …).
 */
void
dc_infer_ring_get_lap_split (DcInferRing *self,
                             double      *layers_ms,
                             double      *head_ms,
                             double      *between_ms)
{
  g_return_if_fail (DC_IS_INFER_RING (self));
  g_mutex_lock (&self->lock);
  *layers_ms = self->lap_count > 0 ? self->lap_layers_us / (1000.0 * self->lap_count) : 0.0;
  *head_ms = self->lap_count > 0 ? self->lap_head_us / (1000.0 * self->lap_count) : 0.0;
  *between_ms = self->lap_between_count > 0
                ? self->lap_between_us / (1000.0 * self->lap_between_count) : 0.0;
  g_mutex_unlock (&self->lock);
}

/**
 * dc_infer_ring_set_head_threads:
 * @n_threads: threads of this device's final norm and head when the ring
 *   has two or more devices (0: the backend's, as its layers)
 *
 * While the head computes the token's logits every other device of the
 * ring waits, so where the ring's devices share one host (`bench ring`)
 * the head may use the cores their shares left idle. Set it before a
 * prompt runs. The ids do not change: the products give the same bits on
 * any thread count.
 */
void
dc_infer_ring_set_head_threads (DcInferRing *self,
                                guint        n_threads)
{
  g_return_if_fail (DC_IS_INFER_RING (self));
  g_atomic_int_set (&self->head_threads, (gint) MIN (n_threads, DC_PARALLEL_MAX_THREADS));
}

gboolean
dc_infer_ring_lost_peer (DcInferRing *self)
{
  g_return_val_if_fail (DC_IS_INFER_RING (self), FALSE);
  return self->lost_peer;
}

void
dc_infer_ring_close (DcInferRing *self)
{
  g_return_if_fail (DC_IS_INFER_RING (self));

  broadcast_token (self, 0, 0, 0, DC_MESH_RING_TOKEN_CLOSE, "");
}

static void
dc_infer_ring_dispose (GObject *object)
{
  DcInferRing *self = DC_INFER_RING (object);

  if (self->group != NULL)
    g_signal_handlers_disconnect_by_data (self->group, self);
  prepare_fail (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED, "closed"));
  clear_ring (self);
  g_clear_object (&self->group);
  g_clear_object (&self->repo);
  g_clear_object (&self->context);
  g_clear_pointer (&self->offers, g_hash_table_unref);
  G_OBJECT_CLASS (dc_infer_ring_parent_class)->dispose (object);
}

static void
dc_infer_ring_finalize (GObject *object)
{
  DcInferRing *self = DC_INFER_RING (object);

  g_free (self->probe_hash);
  g_free (self->test_fault);
  g_main_context_unref (self->main_context);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (dc_infer_ring_parent_class)->finalize (object);
}

static void
dc_infer_ring_class_init (DcInferRingClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_infer_ring_dispose;
  object_class->finalize = dc_infer_ring_finalize;

  /* (kind, detail, value): "offer" (name, memory), "excluded" (the line),
   * "planned" (NULL, stages), "stage-ready" (name, bytes downloaded),
   * "refused" (message), "peer-left" (name), "hop-measured" (name, the
   * hop cost in µs), "prepared" (NULL, stages: every stage is ready and
   * the session exists). */
  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_UINT64);
}

static void
dc_infer_ring_init (DcInferRing *self)
{
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  self->main_context = g_main_context_ref_thread_default ();
  self->offers = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                        (GDestroyNotify) offer_free);
}

/**
 * dc_infer_ring_new:
 * @probe_hash: this device's kernel probe hash; devices reporting another stay out
 * @memory_bytes: what this device offers to hold (0: half of what is installed)
 *
 * Returns: (transfer full): the head of a ring on @group's devices
 */
DcInferRing *
dc_infer_ring_new (DcContext   *context,
                   DcGroup     *group,
                   DcModelRepo *repo,
                   const char  *probe_hash,
                   guint64      memory_bytes)
{
  DcInferRing *self;

  g_return_val_if_fail (DC_IS_CONTEXT (context) && DC_IS_GROUP (group), NULL);
  g_return_val_if_fail (DC_IS_MODEL_REPO (repo), NULL);

  self = g_object_new (DC_TYPE_INFER_RING, NULL);
  self->context = g_object_ref (context);
  self->group = g_object_ref (group);
  self->repo = g_object_ref (repo);
  self->probe_hash = g_strdup (probe_hash != NULL ? probe_hash : "");
  self->memory_bytes = memory_bytes > 0 ? memory_bytes : dc_ring_default_memory_bytes ();
  self->gmacs = dc_ring_measure_gmacs (dc_context_get_backend (context));
  g_signal_connect (group, "message", G_CALLBACK (message_cb), self);
  g_signal_connect (group, "event", G_CALLBACK (group_event_cb), self);
  ask_offers (self);
  return self;
}
