/* dc-ring-server.c: a stage of another device's ring (see the header).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-infer"

#include "config.h"

#include "dc-ring-server.h"

#include <math.h>
#include <string.h>
#include <unistd.h>
#include <json-glib/json-glib.h>

#include "dc-infer-ring.h"
#include "dc-model-repo.h"
#include "data/dc-data-error.h"
#include "engine/dc-gemm.h"
#include "engine/dc-parallel.h"
#include "mesh/dc-mesh-ring-protocol.h"
#include "model/dc-hf-model.h"
#include "model/dc-model-error.h"

/* Hops waiting for this stage's worker: the head keeps at most two in
 * flight (DC_INFER_RING_IN_FLIGHT), so more is a faulty or hostile sender;
 * each may be 4 MiB. */
#define MAX_QUEUED_HOPS 8

/* A ring-bytes answer the head has not sent within this long is given up
 * and the Hub is asked instead: 4 MiB at 1 MB/s (a slow link) takes 4 s;
 * a head silent for a minute is stuck, not slow. */
#define HEAD_FETCH_TIMEOUT_S 60

/* Weight bytes asked of the head: shared by the server (main thread) and
 * the loading threads that wait for the answers. */
typedef struct
{
  gint          ref_count;
  GMutex        lock;
  GCond         cond;
  GMainContext *main_context;   /* the server's */
  guint8        run_id[DC_MESH_RING_RUN_ID_SIZE];
  char         *head_id;
  char         *head_name;
  /* under lock */
  DcRingServer *server;         /* NULL once released; main thread only reads it */
  guint32       next_request;
  GHashTable   *pending;        /* request → Pending*, owned by the waiting thread */
} HeadFetch;

typedef struct
{
  gboolean  done;
  guint64   offset;
  guint64   total;        /* ring-file answers: the whole file's size (0: it has none) */
  guint64   file_size;    /* and, for a header, the weight file's */
  guint8    sha256[32];
  GBytes   *data;
  char     *message;
} Pending;

static HeadFetch *
head_fetch_ref (HeadFetch *fetch)
{
  g_atomic_int_inc (&fetch->ref_count);
  return fetch;
}

static void
head_fetch_unref (gpointer data)
{
  HeadFetch *fetch = data;

  if (!g_atomic_int_dec_and_test (&fetch->ref_count))
    return;
  g_mutex_clear (&fetch->lock);
  g_cond_clear (&fetch->cond);
  g_main_context_unref (fetch->main_context);
  g_hash_table_unref (fetch->pending);
  g_free (fetch->head_id);
  g_free (fetch->head_name);
  g_free (fetch);
}

/* The layers and cache a stage holds; shared with the worker that runs a hop. */
typedef struct
{
  gint         ref_count;
  DcModelRepo *repo;
  DcHfModel   *model;
  DcHfKvCache *cache;
} Part;

static Part *
part_ref (Part *part)
{
  g_atomic_int_inc (&part->ref_count);
  return part;
}

static void
part_unref (Part *part)
{
  if (!g_atomic_int_dec_and_test (&part->ref_count))
    return;
  g_clear_pointer (&part->cache, dc_hf_kv_cache_free);
  g_clear_pointer (&part->model, dc_hf_model_free);
  g_clear_object (&part->repo);
  g_free (part);
}

struct _DcRingServer
{
  GObject        parent_instance;

  DcContext     *context;
  DcGroup       *group;
  guint64        memory_bytes;
  double         gmacs;

  /* The current assignment. */
  DcMeshRingAssign assign;
  char          *head_id;
  Part          *part;          /* NULL until loaded */
  GCancellable  *cancellable;   /* of the load */
  gboolean       computing;
  GQueue         hops;          /* HopJob*, waiting for the worker */
  HeadFetch     *fetch;         /* weight bytes asked of the head; NULL when none */

  /* Decoded tokens' hops since the assignment, µs (dc_ring_server_get_hop_times). */
  guint          timed_hops;
  guint          inline_hops;   /* of them, computed on the main thread */
  gint64         queue_us, compute_us, send_us;
  gint64         receive_us;    /* webrtcbin's signal → our handler, of timed hops */
  gint64         last_compute_us;   /* the last hop's computation (0: none yet) */
  guint32        last_positions;    /* and its positions */
};

G_DEFINE_FINAL_TYPE (DcRingServer, dc_ring_server, G_TYPE_OBJECT)

enum
{
  SIGNAL_EVENT,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

typedef struct
{
  DcMeshRingHop  hop;
  char          *from;
  /* µs (monotonic): arrival on the main thread; start and end of the
   * computation on the worker (read after the task returned). */
  gint64         arrived, started, ended;
  gint64         received;   /* webrtcbin's signal, before our main context */
} HopJob;

static void
hop_job_free (HopJob *job)
{
  dc_mesh_ring_hop_clear (&job->hop);
  g_free (job->from);
  g_free (job);
}

static void
emit_event (DcRingServer *self,
            const char   *kind,
            const char   *detail,
            guint64       value)
{
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, kind, detail, value);
}

static DcPeer *
find_peer (DcRingServer *self,
           const char   *id)
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

static void
send_to (DcRingServer *self,
         const char   *id,
         guint         type,
         GBytes       *payload)
{
  g_autoptr(DcPeer) peer = find_peer (self, id);
  g_autoptr(GError) error = NULL;

  if (peer == NULL || !dc_peer_send (peer, type, payload, &error))
    g_message ("ring: could not send a %s message to %s: %s",
               dc_mesh_message_type_to_string (type), id,
               error != NULL ? error->message : "not connected");
}

static void
send_ready (DcRingServer *self,
            gboolean      ok,
            guint64       downloaded,
            const char   *message)
{
  DcMeshRingReady ready = { { 0 } };
  g_autoptr(GBytes) payload = NULL;

  if (self->head_id == NULL)
    return;
  memcpy (ready.run_id, self->assign.run_id, sizeof ready.run_id);
  ready.ok = ok;
  ready.downloaded = downloaded;
  ready.message = (char *) message;
  payload = dc_mesh_ring_ready_encode (&ready);
  send_to (self, self->head_id, DC_MESH_MSG_RING_READY, payload);
}

static void
send_offer (DcRingServer *self,
            DcPeer       *peer)
{
  DcMeshRingOffer offer = { self->memory_bytes, self->gmacs, 0 };
  g_autoptr(GBytes) payload = dc_mesh_ring_offer_encode (&offer);
  g_autoptr(GError) error = NULL;

  if (!dc_peer_send (peer, DC_MESH_MSG_RING_OFFER, payload, &error))
    g_message ("ring: could not offer layers to %s: %s", dc_peer_get_name (peer),
               error->message);
}

static void
release (DcRingServer *self)
{
  /* Cancelled first: a thread that wakes sees the cancel, not a refusal. */
  g_cancellable_cancel (self->cancellable);
  if (self->fetch != NULL)
    {
      /* Threads still waiting for the head's bytes give up at once. */
      g_mutex_lock (&self->fetch->lock);
      self->fetch->server = NULL;
      g_cond_broadcast (&self->fetch->cond);
      g_mutex_unlock (&self->fetch->lock);
      g_clear_pointer (&self->fetch, head_fetch_unref);
    }
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->part, part_unref);
  g_queue_clear_full (&self->hops, (GDestroyNotify) hop_job_free);
  dc_mesh_ring_assign_clear (&self->assign);
  memset (&self->assign, 0, sizeof self->assign);
  g_clear_pointer (&self->head_id, g_free);
  self->timed_hops = self->inline_hops = 0;
  self->queue_us = self->compute_us = self->send_us = self->last_compute_us = 0;
  self->receive_us = 0;
}

/* ---- weight bytes from the head's cache -------------------------------- */

typedef struct
{
  HeadFetch *fetch;
  guint      type;
  guint32    request;
  GBytes    *payload;
} FetchSend;

static void
fetch_send_free (gpointer data)
{
  FetchSend *send = data;

  head_fetch_unref (send->fetch);
  g_bytes_unref (send->payload);
  g_free (send);
}

/* Ends the wait of REQUEST with MESSAGE (under the lock). */
static void
pending_fail_locked (HeadFetch  *fetch,
                     guint32     request,
                     const char *message)
{
  Pending *pending = g_hash_table_lookup (fetch->pending, GUINT_TO_POINTER (request));

  if (pending == NULL || pending->done)
    return;
  pending->done = TRUE;
  pending->message = g_strdup (message);
  g_cond_broadcast (&fetch->cond);
}

/* Main thread: sends a loading thread's request to the head. */
static gboolean
fetch_send_cb (gpointer data)
{
  FetchSend *send = data;
  HeadFetch *fetch = send->fetch;
  g_autoptr(DcPeer) peer = NULL;
  g_autoptr(GError) error = NULL;
  DcRingServer *server;

  g_mutex_lock (&fetch->lock);
  server = fetch->server;
  g_mutex_unlock (&fetch->lock);
  /* The server is released on this thread: SERVER cannot go meanwhile. */
  if (server != NULL)
    peer = find_peer (server, fetch->head_id);
  if (peer == NULL || !dc_peer_send (peer, send->type, send->payload, &error))
    {
      g_mutex_lock (&fetch->lock);
      pending_fail_locked (fetch, send->request,
                           error != NULL ? error->message : "it left the ring");
      g_mutex_unlock (&fetch->lock);
    }
  return G_SOURCE_REMOVE;
}

/* A request number for PENDING, which the answer fills (under the lock). */
static guint32
pending_add (HeadFetch *fetch,
             Pending   *pending)
{
  guint32 request;

  g_mutex_lock (&fetch->lock);
  request = ++fetch->next_request;
  g_hash_table_insert (fetch->pending, GUINT_TO_POINTER (request), pending);
  g_mutex_unlock (&fetch->lock);
  return request;
}

/* Sends PAYLOAD (message TYPE, asking for REQUEST) to the head from the main
 * thread and waits for the answer in PENDING; FALSE with ERROR when none
 * came (a release, a cancel, the time limit) or the head refused. WHAT
 * names the file in messages. Any thread but the main one. */
static gboolean
pending_wait (HeadFetch     *fetch,
              guint          type,
              guint32        request,
              GBytes        *payload,
              Pending       *pending,
              const char    *what,
              GCancellable  *cancellable,
              GError       **error)
{
  g_autoptr(GSource) source = NULL;
  FetchSend *send;
  gint64 deadline = g_get_monotonic_time () + HEAD_FETCH_TIMEOUT_S * G_TIME_SPAN_SECOND;
  gboolean released;
  const char *from = fetch->head_name;

  send = g_new0 (FetchSend, 1);
  send->fetch = head_fetch_ref (fetch);
  send->type = type;
  send->request = request;
  send->payload = g_bytes_ref (payload);
  /* Sends go out on the main thread, through a source on its context. */
  source = g_idle_source_new ();
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, fetch_send_cb, send, fetch_send_free);
  g_source_attach (source, fetch->main_context);

  g_mutex_lock (&fetch->lock);
  /* Woken by the answer or a release; the slices only notice a cancel. */
  while (!pending->done && fetch->server != NULL && !g_cancellable_is_cancelled (cancellable) &&
         g_get_monotonic_time () < deadline)
    g_cond_wait_until (&fetch->cond, &fetch->lock,
                       MIN (deadline, g_get_monotonic_time () + 100 * G_TIME_SPAN_MILLISECOND));
  g_hash_table_remove (fetch->pending, GUINT_TO_POINTER (request));
  released = fetch->server == NULL;
  g_mutex_unlock (&fetch->lock);

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  if (!pending->done && released)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED, "the ring was closed");
  else if (!pending->done)
    g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                 "the head “%s” did not send bytes of %s within %u s", from, what,
                 HEAD_FETCH_TIMEOUT_S);
  else if (pending->message != NULL)
    g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                 "the head “%s” did not send bytes of %s: %s", from, what, pending->message);
  else
    return TRUE;
  return FALSE;
}

/* Whether DATA's sha256 is SHA256. */
static gboolean
sha256_matches (GBytes       *data,
                const guint8 *sha256)
{
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 sha[32];
  gsize sha_len = sizeof sha;
  gsize size;
  const guint8 *p = g_bytes_get_data (data, &size);

  g_checksum_update (checksum, p, (gssize) size);
  g_checksum_get_digest (checksum, sha, &sha_len);
  return memcmp (sha, sha256, sizeof sha) == 0;
}

/* One request of at most DC_MESH_RING_CHUNK_MAX bytes, checked: the answer
 * must carry exactly the range asked (its offsets come from the safetensors
 * header this device read and checked itself) and match the sha256 the head
 * sent with it. */
static gboolean
head_fetch_chunk (HeadFetch     *fetch,
                  const char    *file,
                  guint64        offset,
                  guint8        *dst,
                  gsize          length,
                  GCancellable  *cancellable,
                  GError       **error)
{
  DcMeshRingFetch request = { { 0 } };
  g_autoptr(GBytes) payload = NULL;
  Pending pending = { 0 };
  gboolean ok = FALSE;
  const char *from = fetch->head_name;

  memcpy (request.run_id, fetch->run_id, sizeof request.run_id);
  request.offset = offset;
  request.length = (guint32) length;
  request.file = (char *) file;
  request.request = pending_add (fetch, &pending);
  payload = dc_mesh_ring_fetch_encode (&request);
  if (!pending_wait (fetch, DC_MESH_MSG_RING_FETCH, request.request, payload, &pending, file,
                     cancellable, error))
    goto out;
  if (pending.data == NULL || g_bytes_get_size (pending.data) != length ||
      pending.offset != offset)
    g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                 "REFUSED bytes from the head “%s”: %" G_GSIZE_FORMAT " bytes at %"
                 G_GUINT64_FORMAT " of %s for %" G_GSIZE_FORMAT " asked at %" G_GUINT64_FORMAT,
                 from, pending.data != NULL ? g_bytes_get_size (pending.data) : 0,
                 pending.offset, file, length, offset);
  else if (!sha256_matches (pending.data, pending.sha256))
    g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                 "REFUSED bytes from the head “%s”: bytes %" G_GUINT64_FORMAT "–%"
                 G_GUINT64_FORMAT " of %s do not match the sha256 sent with them",
                 from, offset, offset + length, file);
  else
    {
      memcpy (dst, g_bytes_get_data (pending.data, NULL), length);
      ok = TRUE;
    }

out:
  g_clear_pointer (&pending.data, g_bytes_unref);
  g_free (pending.message);
  return ok;
}

/* DcModelRepoPeerFile: config.json, the tokenizer's files, the index and
 * the weight files' headers from the head, in requests of at most
 * DC_MESH_RING_CHUNK_MAX bytes, each checked as weight bytes are (the
 * range asked, its sha256), the whole size against MAX_SIZE before
 * anything is allocated, and the same size in every answer. */
static GBytes *
head_fetch_file (const char    *name,
                 gboolean       header,
                 gsize          max_size,
                 guint64       *file_size,
                 gpointer       user_data,
                 GCancellable  *cancellable,
                 GError       **error)
{
  HeadFetch *fetch = user_data;
  g_autofree char *what = header ? g_strdup_printf ("the header of %s", name) : g_strdup (name);
  g_autofree guint8 *buf = NULL;
  guint64 total = 0, size_of_file = 0, done = 0;
  const char *from = fetch->head_name;

  if (strlen (name) > DC_MESH_RING_FILE_MAX)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "a file name of over %u bytes",
                   DC_MESH_RING_FILE_MAX);
      return NULL;
    }
  do
    {
      DcMeshRingFileFetch request = { { 0 } };
      g_autoptr(GBytes) payload = NULL;
      Pending pending = { 0 };
      gsize got = 0;
      gboolean ok = FALSE;

      memcpy (request.run_id, fetch->run_id, sizeof request.run_id);
      request.kind = header ? DC_MESH_RING_FILE_HEADER : DC_MESH_RING_FILE_WHOLE;
      request.offset = done;
      request.length = done == 0 ? DC_MESH_RING_CHUNK_MAX
                                 : (guint32) MIN (total - done, DC_MESH_RING_CHUNK_MAX);
      request.name = (char *) name;
      request.request = pending_add (fetch, &pending);
      payload = dc_mesh_ring_file_fetch_encode (&request);
      if (!pending_wait (fetch, DC_MESH_MSG_RING_FILE_FETCH, request.request, payload, &pending,
                         what, cancellable, error))
        goto next;
      if (pending.data != NULL)
        got = g_bytes_get_size (pending.data);
      if (done == 0 && pending.total == 0)
        {
          /* The head's model has no such file (an optional one). */
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND, "the head “%s” has no %s",
                       from, what);
          goto next;
        }
      if (done == 0 && pending.total > max_size)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                       "REFUSED %s from the head “%s”: %" G_GUINT64_FORMAT " bytes, more than %"
                       G_GSIZE_FORMAT, what, from, pending.total, max_size);
          goto next;
        }
      if (done == 0)
        {
          total = pending.total;
          size_of_file = pending.file_size;
          buf = g_malloc (total);
        }
      if (pending.total != total || pending.file_size != size_of_file ||
          pending.offset != done || got != MIN (total - done, DC_MESH_RING_CHUNK_MAX))
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                     "REFUSED %s from the head “%s”: %" G_GSIZE_FORMAT " bytes at %"
                     G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " for those at %" G_GUINT64_FORMAT
                     " of %" G_GUINT64_FORMAT, what, from, got, pending.offset, pending.total,
                     done, total);
      else if (!sha256_matches (pending.data, pending.sha256))
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                     "REFUSED %s from the head “%s”: bytes %" G_GUINT64_FORMAT "–%"
                     G_GUINT64_FORMAT " do not match the sha256 sent with them", what, from,
                     done, done + got);
      else
        {
          memcpy (buf + done, g_bytes_get_data (pending.data, NULL), got);
          done += got;
          ok = TRUE;
        }

    next:
      g_clear_pointer (&pending.data, g_bytes_unref);
      g_free (pending.message);
      if (!ok)
        return NULL;
    }
  while (done < total);
  if (file_size != NULL)
    *file_size = header ? size_of_file : total;
  return g_bytes_new_take (g_steal_pointer (&buf), total);
}

/* DcModelRepoPeerFetch: a piece, in requests the protocol carries. */
static gboolean
head_fetch_read (const char    *file,
                 guint64        offset,
                 guint8        *dst,
                 gsize          length,
                 gpointer       user_data,
                 GCancellable  *cancellable,
                 GError       **error)
{
  for (gsize done = 0; done < length; done += DC_MESH_RING_CHUNK_MAX)
    if (!head_fetch_chunk (user_data, file, offset + done, dst + done,
                           MIN (length - done, DC_MESH_RING_CHUNK_MAX), cancellable, error))
      return FALSE;
  return TRUE;
}

static void
handle_bytes (DcRingServer *self,
              DcPeer       *peer,
              GBytes       *payload)
{
  g_auto(DcMeshRingBytes) bytes = { { 0 } };
  g_autoptr(GError) error = NULL;
  Pending *pending;

  if (self->fetch == NULL || g_strcmp0 (dc_peer_get_id (peer), self->fetch->head_id) != 0)
    return;
  if (!dc_mesh_ring_bytes_decode (payload, &bytes, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (memcmp (bytes.run_id, self->fetch->run_id, DC_MESH_RING_RUN_ID_SIZE) != 0)
    return;
  g_mutex_lock (&self->fetch->lock);
  /* An answer after its wait gave up finds nothing: it is dropped. */
  pending = g_hash_table_lookup (self->fetch->pending, GUINT_TO_POINTER (bytes.request));
  if (pending != NULL && !pending->done)
    {
      pending->done = TRUE;
      pending->offset = bytes.offset;
      memcpy (pending->sha256, bytes.sha256, sizeof pending->sha256);
      if (*bytes.message != '\0')
        pending->message = g_strdup (bytes.message);
      else
        pending->data = g_steal_pointer (&bytes.data);
      g_cond_broadcast (&self->fetch->cond);
    }
  g_mutex_unlock (&self->fetch->lock);
}

/* The head's answer to a ring-file-fetch: to the loading thread waiting. */
static void
handle_file (DcRingServer *self,
             DcPeer       *peer,
             GBytes       *payload)
{
  g_auto(DcMeshRingFile) file = { { 0 } };
  g_autoptr(GError) error = NULL;
  Pending *pending;

  if (self->fetch == NULL || g_strcmp0 (dc_peer_get_id (peer), self->fetch->head_id) != 0)
    return;
  if (!dc_mesh_ring_file_decode (payload, &file, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (memcmp (file.run_id, self->fetch->run_id, DC_MESH_RING_RUN_ID_SIZE) != 0)
    return;
  g_mutex_lock (&self->fetch->lock);
  pending = g_hash_table_lookup (self->fetch->pending, GUINT_TO_POINTER (file.request));
  if (pending != NULL && !pending->done)
    {
      pending->done = TRUE;
      pending->offset = file.offset;
      pending->total = file.total;
      pending->file_size = file.file_size;
      memcpy (pending->sha256, file.sha256, sizeof pending->sha256);
      if (*file.message != '\0')
        pending->message = g_strdup (file.message);
      else
        pending->data = g_steal_pointer (&file.data);
      g_cond_broadcast (&self->fetch->cond);
    }
  g_mutex_unlock (&self->fetch->lock);
}

/* ---- loading the assigned layers --------------------------------------- */

typedef struct
{
  Part  *part;
  guint  first, last, context;
} LoadJob;

static void
load_job_free (LoadJob *job)
{
  g_clear_pointer (&job->part, part_unref);
  g_free (job);
}

static void
load_worker (GTask        *task,
             gpointer      source,
             gpointer      data,
             GCancellable *cancellable)
{
  DcRingServer *self = source;
  LoadJob *job = data;
  const DcHfConfig *config = dc_model_repo_get_config (job->part->repo);
  GError *error = NULL;

  job->part->model = dc_hf_model_load_part (config, DC_TENSOR_SOURCE (job->part->repo),
                                            dc_context_get_backend (self->context), job->first,
                                            job->last, FALSE, NULL, NULL, cancellable, &error);
  if (job->part->model == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  job->part->cache = dc_hf_kv_cache_new (job->part->model, job->context, &error);
  if (job->part->cache == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  g_task_return_boolean (task, TRUE);
}

static void
load_done_cb (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  DcRingServer *self = DC_RING_SERVER (source);
  LoadJob *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  g_autofree char *refusal = NULL;
  guint64 downloaded;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) ||
          g_task_get_cancellable (G_TASK (result)) != self->cancellable)
        return;
      emit_event (self, "failed", error->message, 0);
      send_ready (self, FALSE, 0, error->message);
      return;
    }
  if (g_task_get_cancellable (G_TASK (result)) != self->cancellable)
    return;   /* a later assignment replaced this one */
  downloaded = dc_model_repo_get_bytes_downloaded (job->part->repo);
  refusal = dc_model_repo_dup_peer_refusal (job->part->repo);
  if (refusal != NULL)
    emit_event (self, "head-refused", refusal, 0);
  if (dc_model_repo_get_bytes_from_peer (job->part->repo) > 0)
    emit_event (self, "from-head", self->fetch != NULL ? self->fetch->head_name : "",
                dc_model_repo_get_bytes_from_peer (job->part->repo));
  self->part = part_ref (job->part);
  emit_event (self, "loaded", dc_model_repo_get_spec (job->part->repo), downloaded);
  send_ready (self, TRUE, downloaded, NULL);
}

/* What an open borrows: the server, and the head's fetcher for the files. */
typedef struct
{
  DcRingServer *self;
  HeadFetch    *fetch;
} OpenJob;

static void
repo_opened_cb (GObject      *source,
                GAsyncResult *result,
                gpointer      user_data)
{
  OpenJob *open_job = user_data;
  g_autoptr(DcRingServer) self = open_job->self;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = dc_model_repo_open_finish (result, &error);
  g_autoptr(GTask) task = NULL;
  const DcHfConfig *config;
  LoadJob *job;
  guint64 need;

  head_fetch_unref (open_job->fetch);
  g_free (open_job);
  if (repo == NULL)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return;
      emit_event (self, "failed", error->message, 0);
      send_ready (self, FALSE, 0, error->message);
      return;
    }
  config = dc_model_repo_get_config (repo);
  if (self->assign.last > config->n_layers || self->assign.context < 1 ||
      self->assign.context > config->max_positions)
    {
      g_autofree char *message =
        g_strdup_printf ("the head asked for layers %u to %u of a %u-layer model, or a context "
                         "of %u", self->assign.first, self->assign.last, config->n_layers,
                         self->assign.context);

      emit_event (self, "failed", message, 0);
      send_ready (self, FALSE, 0, message);
      return;
    }
  /* The plan keeps within what this device offered; a head that does not
   * is refused before anything is downloaded. */
  need = dc_hf_model_part_memory_bytes (config, self->assign.first, self->assign.last, FALSE,
                                        self->assign.context);
  if (need > self->memory_bytes)
    {
      g_autofree char *message =
        g_strdup_printf ("layers %u to %u need %" G_GUINT64_FORMAT " MB; this device offers %"
                         G_GUINT64_FORMAT " MB", self->assign.first, self->assign.last - 1,
                         need / 1000000, self->memory_bytes / 1000000);

      emit_event (self, "failed", message, 0);
      send_ready (self, FALSE, 0, message);
      return;
    }
  /* The head is asked first: it may have the file cached (this device may
   * have no Hub access, or the Hub is spared); the Hub after its first
   * refusal. */
  if (self->fetch != NULL)
    dc_model_repo_set_peer_fetch (repo, head_fetch_read, head_fetch_ref (self->fetch),
                                  head_fetch_unref);
  job = g_new0 (LoadJob, 1);
  job->part = g_new0 (Part, 1);
  job->part->ref_count = 1;
  job->part->repo = g_object_ref (repo);
  job->first = self->assign.first;
  job->last = self->assign.last;
  job->context = self->assign.context;
  task = g_task_new (self, self->cancellable, load_done_cb, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) load_job_free);
  g_task_run_in_thread (task, load_worker);
}

static void
handle_assign (DcRingServer *self,
               DcPeer       *peer,
               GBytes       *payload)
{
  g_auto(DcMeshRingAssign) assign = { { 0 } };
  g_autoptr(GError) error = NULL;
  g_autofree char *range = NULL;
  DcModelRepoOptions options = { 0 };
  OpenJob *open_job;

  if (!dc_mesh_ring_assign_decode (payload, &assign, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  release (self);
  if (*assign.model == '\0')
    {
      emit_event (self, "released", dc_peer_get_name (peer), 0);
      return;
    }
  self->assign = assign;
  memset (&assign, 0, sizeof assign);   /* moved */
  self->head_id = g_strdup (dc_peer_get_id (peer));
  self->cancellable = g_cancellable_new ();
  self->fetch = g_new0 (HeadFetch, 1);
  self->fetch->ref_count = 1;
  g_mutex_init (&self->fetch->lock);
  g_cond_init (&self->fetch->cond);
  self->fetch->main_context = g_main_context_ref_thread_default ();
  memcpy (self->fetch->run_id, self->assign.run_id, DC_MESH_RING_RUN_ID_SIZE);
  self->fetch->head_id = g_strdup (self->head_id);
  self->fetch->head_name = g_strdup (dc_peer_get_name (peer));
  self->fetch->server = self;
  self->fetch->pending = g_hash_table_new (NULL, NULL);
  range = g_strdup_printf ("%s layers %u-%u", self->assign.model, self->assign.first,
                           self->assign.last - 1);
  emit_event (self, "assigned", range, self->assign.stage);
  /* The head is asked first for config.json, the tokenizer and the
   * headers too: with them a stage needs no Hub at all. */
  open_job = g_new0 (OpenJob, 1);
  open_job->self = g_object_ref (self);
  open_job->fetch = head_fetch_ref (self->fetch);
  options.peer_file = head_fetch_file;
  options.peer_file_data = open_job->fetch;
  dc_model_repo_open_full_async (dc_context_get_hf_client (self->context), self->assign.model,
                                 &options, self->cancellable, repo_opened_cb, open_job);
}

/* ---- hops ------------------------------------------------------------- */

static void run_next_hop (DcRingServer *self);

/* Runs JOB's positions through PART's layers; any thread, one at a time
 * per part. */
static gboolean
compute_hop (Part    *part,
             HopJob  *job,
             GError **error)
{
  job->started = g_get_monotonic_time ();
  if (job->hop.position == 0)
    dc_hf_kv_cache_reset (part->cache);
  else if (job->hop.position < dc_hf_kv_cache_get_length (part->cache))
    dc_hf_kv_cache_truncate (part->cache, job->hop.position);   /* a rejected draft's tail */
  else if (job->hop.position > dc_hf_kv_cache_get_length (part->cache))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "a hop at position %u, but this stage holds %u positions",
                   job->hop.position, dc_hf_kv_cache_get_length (part->cache));
      return FALSE;
    }
  if (!dc_hf_model_forward_part (part->model, part->cache, NULL, job->hop.data, job->hop.n,
                                 error))
    {
      /* A failure inside the computation leaves the cache undefined. */
      dc_hf_kv_cache_reset (part->cache);
      return FALSE;
    }
  job->ended = g_get_monotonic_time ();
  return TRUE;
}

static void
hop_worker (GTask        *task,
            gpointer      source,
            gpointer      data,
            GCancellable *cancellable)
{
  GError *error = NULL;

  if (!compute_hop (g_object_get_data (G_OBJECT (task), "part"), data, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

/* A computed hop (ERROR NULL) goes on to the next device; main thread. */
static void
hop_computed (DcRingServer *self,
              HopJob       *job,
              GError       *error,
              gboolean      on_main)
{
  self->computing = FALSE;
  /* Nothing more to compute until the next hop: the helpers may sleep. */
  if (g_queue_is_empty (&self->hops))
    dc_infer_ring_cool_helpers ();
  if (error != NULL)
    {
      emit_event (self, "failed", error->message, 0);
      send_ready (self, FALSE, 0, error->message);
      return;
    }
  self->last_compute_us = job->ended - job->started;
  self->last_positions = job->hop.n;
  if (self->part != NULL &&
      memcmp (job->hop.run_id, self->assign.run_id, DC_MESH_RING_RUN_ID_SIZE) == 0)
    {
      g_autoptr(GBytes) payload = dc_mesh_ring_hop_encode (&job->hop);

      send_to (self, self->assign.next, DC_MESH_MSG_RING_HOP, payload);
      if (job->hop.n == 1)
        {
          self->timed_hops++;
          self->inline_hops += on_main;
          self->queue_us += job->started - job->arrived;
          if (job->received > 0 && job->received <= job->arrived)
            self->receive_us += job->arrived - job->received;
          self->compute_us += job->ended - job->started;
          self->send_us += g_get_monotonic_time () - job->ended;
        }
    }
}

static void
hop_done_cb (GObject      *source,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcRingServer *self = DC_RING_SERVER (source);
  HopJob *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;

  g_task_propagate_boolean (G_TASK (result), &error);
  hop_computed (self, job, error, FALSE);
  run_next_hop (self);
}

/* Longest computation, µs, of the last hop for which the next decoded
 * token's hop (one position) runs on the main thread instead of the
 * worker: the two thread hand-offs it saves (to the worker and back, each
 * a wake-up of an idle thread) are a stage's share of the lap that is
 * neither compute nor wire. After a prompt chunk (several positions) its
 * time per position is the guess: a decode step costs more than that and
 * less than the whole chunk, so a wrong guess stalls the main loop once,
 * for one decode step, and the next hop goes by the step's own time;
 * the whole chunk's time sent the first decoded hops to the worker (stage
 * 1's 1.08 ms queue on the H200 host, 2026-12-02 03:28). 8 ms,
 * half a 60 Hz frame, bounds the main loop's stall where the stage is the
 * app, and covers a stage's decode step of the SmolLM-135M-shaped model
 * at 2 and 3 stages on the H200 host's Xeon (2.6–3.6 ms at full speed)
 * with room for a slower machine (DC_RING_INLINE_US overrides it; 0:
 * always the worker). */
#define INLINE_MAX_US_DEFAULT 8000

static gint64
inline_max_us (void)
{
  static gsize once = 0;
  static gint64 us = INLINE_MAX_US_DEFAULT;

  if (g_once_init_enter (&once))
    {
      const char *env = g_getenv ("DC_RING_INLINE_US");

      if (env != NULL && *env != '\0')
        us = CLAMP (g_ascii_strtoll (env, NULL, 10), 0, G_USEC_PER_SEC);
      g_once_init_leave (&once, 1);
    }
  return us;
}

static void
run_next_hop (DcRingServer *self)
{
  /* The events a hop computed here emits may drop every other reference. */
  g_autoptr(DcRingServer) keep = g_object_ref (self);
  g_autoptr(GTask) task = NULL;
  HopJob *job;

  while (!self->computing && self->part != NULL &&
         (job = g_queue_peek_head (&self->hops)) != NULL &&
         job->hop.n == 1 &&
         self->last_compute_us / MAX (self->last_positions, 1) < inline_max_us ())
    {
      g_autoptr(GError) error = NULL;
      Part *part = part_ref (self->part);

      g_queue_pop_head (&self->hops);
      self->computing = TRUE;
      compute_hop (part, job, &error);
      part_unref (part);
      hop_computed (self, job, error, TRUE);
      hop_job_free (job);
    }
  if (self->computing || self->part == NULL)
    return;
  job = g_queue_pop_head (&self->hops);
  if (job == NULL)
    return;
  self->computing = TRUE;
  task = g_task_new (self, NULL, hop_done_cb, NULL);
  /* Its result goes on round the ring: ahead of the main loop's other work. */
  g_task_set_priority (task, G_PRIORITY_HIGH);
  g_task_set_task_data (task, job, (GDestroyNotify) hop_job_free);
  g_object_set_data_full (G_OBJECT (task), "part", part_ref (self->part),
                          (GDestroyNotify) part_unref);
  g_task_run_in_thread (task, hop_worker);
}

static void
refuse (DcRingServer *self,
        const char   *message)
{
  g_message ("%s", message);
  emit_event (self, "refused", message, 0);
  /* The head stops at once with the reason instead of waiting for a hop. */
  send_ready (self, FALSE, 0, message);
}

static void
handle_hop (DcRingServer *self,
            DcPeer       *peer,
            GBytes       *payload)
{
  HopJob *job = g_new0 (HopJob, 1);
  g_autoptr(GError) error = NULL;
  g_autofree char *why = NULL;

  job->arrived = g_get_monotonic_time ();
  job->received = dc_peer_get_message_received_us (peer);
  if (!dc_mesh_ring_hop_decode (payload, &job->hop, &error))
    {
      why = g_strdup_printf ("REFUSED activation from “%s”: %s", dc_peer_get_name (peer),
                             error->message);
      goto refused;
    }
  if (self->part == NULL ||
      memcmp (job->hop.run_id, self->assign.run_id, DC_MESH_RING_RUN_ID_SIZE) != 0)
    {
      why = g_strdup_printf ("REFUSED activation from “%s”: this device holds no layers of "
                             "that run", dc_peer_get_name (peer));
      goto refused;
    }
  why = dc_infer_ring_check_hop (&job->hop, dc_peer_get_name (peer), self->assign.model,
                                 dc_hf_model_get_config (self->part->model)->hidden_size);
  if (why != NULL)
    goto refused;
  if (g_queue_get_length (&self->hops) >= MAX_QUEUED_HOPS)
    {
      why = g_strdup_printf ("REFUSED activation from “%s”: %u hops are already waiting",
                             dc_peer_get_name (peer), MAX_QUEUED_HOPS);
      goto refused;
    }
  job->from = g_strdup (dc_peer_get_id (peer));
  dc_infer_ring_warm_helpers (dc_gemm_backend_get_n_threads (
                                dc_context_get_backend (self->context)));
  g_queue_push_tail (&self->hops, job);
  run_next_hop (self);
  return;

refused:
  hop_job_free (job);
  refuse (self, why);
}

/* bench ring: with DC_RING_STAGE_TIMINGS set to a path, a turn's end (and
 * the ring's close) writes this stage's hop times there as one JSON
 * object, for the head's process to read (docs/BENCHMARKS.md). */
static void
write_hop_times (DcRingServer *self)
{
  const char *path = g_getenv ("DC_RING_STAGE_TIMINGS");
  g_autoptr(JsonBuilder) builder = NULL;
  g_autoptr(JsonGenerator) generator = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  double queue_ms, compute_ms, send_ms;
  guint n;

  if (path == NULL || *path == '\0' || self->part == NULL)
    return;
  n = dc_ring_server_get_hop_times (self, &queue_ms, &compute_ms, &send_ms);
  builder = json_builder_new ();
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "stage");
  json_builder_add_int_value (builder, self->assign.stage);
  json_builder_set_member_name (builder, "layers");
  json_builder_begin_array (builder);
  json_builder_add_int_value (builder, self->assign.first);
  json_builder_add_int_value (builder, (gint64) self->assign.last - 1);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "hops");
  json_builder_add_int_value (builder, n);
  json_builder_set_member_name (builder, "inline_hops");
  json_builder_add_int_value (builder, self->inline_hops);
  json_builder_set_member_name (builder, "queue_ms");
  json_builder_add_double_value (builder, queue_ms);
  json_builder_set_member_name (builder, "compute_ms");
  json_builder_add_double_value (builder, compute_ms);
  json_builder_set_member_name (builder, "send_ms");
  json_builder_add_double_value (builder, send_ms);
  /* Before queue_ms: webrtcbin's on-message-data (its thread) → our
   * handler on the main context, through link_push's idle source. */
  json_builder_set_member_name (builder, "receive_ms");
  json_builder_add_double_value (builder, n > 0 ? self->receive_us / (1000.0 * n) : 0.0);
  /* A hop's arrival wakes the sleeping helpers (dc_infer_ring_warm_helpers):
   * how many woke so far in this process, and how long each took to run,
   * while the hop's first products had started without them. */
  {
    DcParallelStats stats;

    dc_parallel_get_stats (&stats);
    json_builder_set_member_name (builder, "helper_wakes");
    json_builder_add_int_value (builder, (gint64) stats.warm_wakes);
    json_builder_set_member_name (builder, "helper_wake_ms");
    json_builder_add_double_value (builder, stats.warm_wakes > 0
                                            ? stats.warm_wake_ns / (1e6 * stats.warm_wakes)
                                            : 0.0);
    /* Sleeping helpers that its products' calls signalled, in the
     * process's whole life (loading and prefill included). */
    json_builder_set_member_name (builder, "job_wakes");
    json_builder_add_int_value (builder, (gint64) stats.job_wakes);
  }
  json_builder_end_object (builder);
  root = json_builder_get_root (builder);
  generator = json_generator_new ();
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  if (!g_file_set_contents (path, text, -1, &error))
    g_message ("ring: could not write the hop times: %s", error->message);
}

static void
handle_token (DcRingServer *self,
              DcPeer       *peer,
              GBytes       *payload)
{
  g_auto(DcMeshRingToken) token = { { 0 } };
  g_autoptr(GError) error = NULL;

  if (self->head_id == NULL || g_strcmp0 (dc_peer_get_id (peer), self->head_id) != 0)
    return;
  if (!dc_mesh_ring_token_decode (payload, &token, &error))
    {
      g_message ("ring: %s sent %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (token.flags & DC_MESH_RING_TOKEN_CLOSE)
    {
      write_hop_times (self);
      emit_event (self, "closed", dc_peer_get_name (peer), 0);
      release (self);
    }
  else if (token.flags & DC_MESH_RING_TOKEN_END)
    {
      write_hop_times (self);
      emit_event (self, "turn-ended", "", token.turn);
    }
  else
    emit_event (self, "token", token.text, token.id);
}

static void
message_cb (DcGroup  *group,
            DcPeer   *peer,
            guint     type,
            GBytes   *payload,
            gpointer  user_data)
{
  DcRingServer *self = user_data;

  switch (type)
    {
    case DC_MESH_MSG_RING_ASSIGN:
      handle_assign (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_HOP:
      handle_hop (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_TOKEN:
      handle_token (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_BYTES:
      handle_bytes (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_FILE:
      handle_file (self, peer, payload);
      break;
    case DC_MESH_MSG_RING_OFFER:
      {
        DcMeshRingOffer offer;

        /* A head that came after this device met it asks for the offer. */
        if (dc_mesh_ring_offer_decode (payload, &offer, NULL) &&
            (offer.flags & DC_MESH_RING_OFFER_ASK))
          {
            /* To the device's connection now: a renewal may have replaced
             * the one the ask came on. */
            g_autoptr(DcPeer) current = find_peer (self, dc_peer_get_id (peer));

            if (current != NULL)
              send_offer (self, current);
          }
      }
      break;
    default:
      break;
    }
}

static void
group_event_cb (DcGroup    *group,
                const char *event,
                const char *peer_name,
                guint       n_peers,
                const char *reason,
                gpointer    user_data)
{
  DcRingServer *self = user_data;

  if (g_str_equal (event, "peer-joined"))
    {
      /* Any newcomer may be a head: every open peer gets the offer again
       * (21 bytes), so none is missed whatever the order of events. */
      g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (dc_group_get_mesh (group));

      for (guint i = 0; i < peers->len; i++)
        if (dc_peer_get_state (g_ptr_array_index (peers, i)) == DC_PEER_STATE_OPEN)
          send_offer (self, g_ptr_array_index (peers, i));
    }
  else if (g_str_equal (event, "peer-left") && self->head_id != NULL)
    {
      g_autoptr(DcPeer) head = find_peer (self, self->head_id);

      if (head == NULL || dc_peer_get_state (head) != DC_PEER_STATE_OPEN)
        {
          emit_event (self, "released", "the head left", 0);
          release (self);
        }
    }
}

/* ---- speed and memory ------------------------------------------------- */

/* One row times a (16384 × 4096)ᵀ matrix, repeated for at least 50 ms: the
 * shape of a decoded token through a stage's
 * projections. A lap is a decoded token, and decode streams every weight
 * once per token, so its speed is the memory's, not the multipliers': a
 * 64-row prompt chunk (this probe until 2026-12-02) estimated the H200
 * host's lap at 0.17 ms against the 6.4 ms measured, and 16 MB of weights
 * stayed in the 2-core VM's L3 (2.6 ms estimated, 9.1 measured). 64 MB is
 * more than most caches hold, as a stage's layers are. */
double
dc_ring_measure_gmacs (DcGemmBackend *backend)
{
  const gsize M = 1, N = 16384, K = 4096;
  g_autoptr(DcQuantMatrix) a = dc_quant_matrix_new (M, K, NULL);
  g_autoptr(DcQuantMatrix) b = dc_quant_matrix_new (N, K, NULL);
  g_autofree float *c = g_new (float, M * N);
  gint64 t0, elapsed;
  guint runs = 0;

  if (a == NULL || b == NULL)
    return 0.0;
  for (gsize i = 0; i < K; i++)
    {
      a->q[i] = (gint8) ((i * 7) % 255 - 127);
      b->q[i] = (gint8) ((i * 13) % 255 - 127);
    }
  /* Every row of B the first one's values: the memory traffic is what
   * counts, and copying is quicker than computing 64 M values (it also
   * touches every page, so no run is timed with page faults: this runs at
   * start-up, on the main thread, and needs no warm-up run). */
  for (gsize r = 1; r < N; r++)
    memcpy (b->q + r * K, b->q, K);
  t0 = g_get_monotonic_time ();
  do
    {
      if (!dc_gemm_run_packed (backend, a, b, c, NULL))
        return 0.0;
      runs++;
      elapsed = g_get_monotonic_time () - t0;
    }
  while (elapsed < 50000 && runs < 1000);
  return (double) runs * M * N * K / (MAX (elapsed, 1) * 1e3);
}

guint64
dc_ring_default_memory_bytes (void)
{
  long pages = sysconf (_SC_PHYS_PAGES), size = sysconf (_SC_PAGESIZE);

  if (pages <= 0 || size <= 0)
    return 1024ull * 1024 * 1024;
  return (guint64) pages * (guint64) size / 2;
}

/* ---- object ----------------------------------------------------------- */

static void
dc_ring_server_dispose (GObject *object)
{
  DcRingServer *self = DC_RING_SERVER (object);

  if (self->group != NULL)
    g_signal_handlers_disconnect_by_data (self->group, self);
  release (self);
  g_clear_object (&self->group);
  g_clear_object (&self->context);
  G_OBJECT_CLASS (dc_ring_server_parent_class)->dispose (object);
}

static void
dc_ring_server_class_init (DcRingServerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_ring_server_dispose;

  /* (kind, detail, value): "assigned" (what, stage), "loaded" (model,
   * bytes downloaded), "from-head" (the head's name, bytes of them it
   * sent), "head-refused" (why the Hub was used instead), "token" (text,
   * id), "turn-ended", "refused" (message), "failed" (message), "released",
   * "closed". */
  signals[SIGNAL_EVENT] =
    g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_UINT64);
}

static void
dc_ring_server_init (DcRingServer *self)
{
  g_queue_init (&self->hops);
}

/**
 * dc_ring_server_new:
 * @memory_bytes: what this device offers to hold (0: dc_ring_default_memory_bytes())
 *
 * Returns: (transfer full): a stage that answers @group's heads
 */
DcRingServer *
dc_ring_server_new (DcContext *context,
                    DcGroup   *group,
                    guint64    memory_bytes)
{
  DcRingServer *self;

  g_return_val_if_fail (DC_IS_CONTEXT (context) && DC_IS_GROUP (group), NULL);

  self = g_object_new (DC_TYPE_RING_SERVER, NULL);
  self->context = g_object_ref (context);
  self->group = g_object_ref (group);
  self->memory_bytes = memory_bytes > 0 ? memory_bytes : dc_ring_default_memory_bytes ();
  self->gmacs = dc_ring_measure_gmacs (dc_context_get_backend (context));
  g_signal_connect (group, "message", G_CALLBACK (message_cb), self);
  g_signal_connect (group, "event", G_CALLBACK (group_event_cb), self);
  return self;
}

void
_dc_ring_server_set_gmacs (DcRingServer *self,
                           double        gmacs)
{
  g_return_if_fail (DC_IS_RING_SERVER (self) && gmacs > 0.0);
  self->gmacs = gmacs;
}

guint
dc_ring_server_get_hop_times (DcRingServer *self,
                              double       *queue_ms,
                              double       *compute_ms,
                              double       *send_ms)
{
  guint n;

  g_return_val_if_fail (DC_IS_RING_SERVER (self), 0);
  n = self->timed_hops;
  *queue_ms = n > 0 ? self->queue_us / (1000.0 * n) : 0.0;
  *compute_ms = n > 0 ? self->compute_us / (1000.0 * n) : 0.0;
  *send_ms = n > 0 ? self->send_us / (1000.0 * n) : 0.0;
  return n;
}

double
dc_ring_server_get_gmacs (DcRingServer *self)
{
  g_return_val_if_fail (DC_IS_RING_SERVER (self), 0.0);
  return self->gmacs;
}
