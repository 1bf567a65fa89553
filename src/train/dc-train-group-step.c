/* dc-train-group-step.c: a step: the workers (gradient, Adam), the
 * exchange of gradients and step reports, the sync guard, and advance (),
 * the state machine (see dc-train-group.h and dc-train-group-private.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

static void send_own_gradient (DcTrainGroup *self);
static void computed_cb (GObject *object, GAsyncResult *result, gpointer user_data);
static void start_ahead (DcTrainGroup *self);

/* What prepare_worker () hands back: the session and its state's hashes,
 * which the step-0 report and the follower's check of the starter's need. */
typedef struct
{
  DcTrainSession *session;
  char           *hash;
  char           *optimizer;
} Prepared;

static void
prepared_free (Prepared *prepared)
{
  g_clear_pointer (&prepared->session, dc_train_session_free);
  g_free (prepared->hash);
  g_free (prepared->optimizer);
  g_free (prepared);
}

static void
prepare_worker (GTask        *task,
                gpointer      source,
                gpointer      data,
                GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  GError *error = NULL;
  DcTrainSession *session = dc_train_plan_prepare (self->plan, cancellable, &error);
  Prepared *prepared;

  if (session == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  prepared = g_new0 (Prepared, 1);
  prepared->session = session;
  /* Here, not on the main thread: seconds at the Advanced sizes. */
  _dc_train_group_hash_state (self, dc_train_session_get_model (session), &prepared->hash,
                              &prepared->optimizer);
  g_task_return_pointer (task, prepared, (GDestroyNotify) prepared_free);
}

/* The model before the step (weights, both moments, step, β powers) for
 * _dc_train_group_rollback () and the audits is kept in self->snapshot.
 * On the host the Adam step writes the new state to that buffer and the
 * model's old one becomes the snapshot (apply_worker ()): nothing is
 * copied. Where a GPU keeps the state (a resident step), it is copied from
 * the host model, and this says so. */
static gboolean
snapshot_by_copy (DcTrainGroup *self)
{
  return !dc_gpt_trainer_can_apply_into (dc_train_session_get_trainer (self->session));
}

/* The snapshot by copy, while the gradient is computed (which only reads
 * the model) rather than between the step's gradients and its Adam step. */
static gpointer
snapshot_thread (gpointer data)
{
  DcTrainGroup *self = data;
  DcGptModel *model = dc_train_session_get_model (self->session);

  /* An audit's launch may still copy from this buffer (two steps ago). */
  _dc_train_group_audit_copy_wait (self, self->snapshot);
  memcpy (self->snapshot, model->params, 3 * model->n_params * sizeof (float));
  self->snap_step = model->step;
  self->snap_taken = TRUE;
  self->snap_beta1 = model->beta1_pow;
  self->snap_beta2 = model->beta2_pow;
  return NULL;
}

static void
bytes_unref0 (gpointer data)
{
  if (data != NULL)
    g_bytes_unref (data);
}

static void
ptr_array_unref0 (gpointer data)
{
  if (data != NULL)
    g_ptr_array_unref (data);
}

/* Empty slots for this step's contributions, one per shard (on the worker,
 * before the gradient is computed). */
static void
pack_begin (DcTrainGroup      *self,
            const ComputeData *compute)
{
  g_clear_pointer (&self->own_objects, g_ptr_array_unref);
  g_clear_pointer (&self->own_frames, g_ptr_array_unref);
  g_clear_error (&self->own_pack_error);
  self->own_objects = g_ptr_array_new_full (compute->n_ranks, bytes_unref0);
  self->own_frames = g_ptr_array_new_full (compute->n_ranks, ptr_array_unref0);
  g_ptr_array_set_size (self->own_objects, compute->n_ranks);
  g_ptr_array_set_size (self->own_frames, compute->n_ranks);
  memset (self->own_packed, 0, sizeof self->own_packed);
  memset (self->own_rounded, 0, sizeof self->own_rounded);
  g_clear_error (&self->own_round_error);
}

/* Rounds shard @r of this device's gradient to the run's wire, once (as
 * it is packed during the backward pass, or after it: compute_own ()); the
 * first value that is not finite is kept for compute_own () to report. */
static void
round_own_shard (DcTrainGroup *self,
                 guint         r,
                 gsize         start,
                 gsize         length)
{
  if (self->own_rounded[r])
    return;
  self->own_rounded[r] = TRUE;
  dc_train_session_round (self->session, self->own_grads + start, length,
                          self->own_round_error == NULL ? &self->own_round_error : NULL);
}

/* This device's contribution to shard @r (dc-train-wire.h: the "DRS1"
 * header, then shard r's little-endian float32; kept so, and sent as the
 * run's wire says: dc_train_shard_encode ()) and its chunks, framed, made
 * on the worker: hashing, cutting and framing them (the frame's copy and
 * CRC-32) is all the cost of sending, and is done once, not once per peer
 * on the main thread. A split that fails leaves the slot's frames NULL and
 * its error for send_shard () to log. */
static void
pack_shard (DcTrainGroup      *self,
            const ComputeData *compute,
            guint              r)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  DcTrainShardHeader header = { 0 };
  DcMeshChunk info = { 0 };
  gsize start, length;
  DcTrainShardLayout layout;
  gsize size;
  guint8 *data;
  GBytes *object;
  g_autoptr(GBytes) wire = NULL;
  g_autoptr(GPtrArray) bodies = NULL;
  GError **error = self->own_pack_error == NULL ? &self->own_pack_error : NULL;

  _dc_train_group_layout (model, &layout);
  size = dc_train_shard_object_size (DC_TRAIN_SHARD_CONTRIBUTION, &layout, compute->n_ranks, r);
  data = g_malloc (size);
  header.kind = DC_TRAIN_SHARD_CONTRIBUTION;
  header.roster_size = compute->n_ranks;
  header.shard = r;
  header.digest = compute->digest;
  memcpy (&header.loss_bits, &self->own_loss, 4);
  memcpy (info.run_id, compute->run_id, DC_MESH_RUN_ID_SIZE);
  info.step = model->step + 1;
  info.rank = compute->rank;
  dc_train_shard_range (&layout, compute->n_ranks, r, &start, &length);
  dc_train_shard_header_write (data, &header);
  /* A bf16 or int8 run keeps the contribution as it sends it (rounded),
   * since it sums and audits with it; a shard packed during the backward
   * pass is rounded here, the others were by compute_own (), which reports
   * a value that is not finite. */
  round_own_shard (self, r, start, length);
  /* float32 on the wire is little-endian, as this host's (G_BYTE_ORDER is
   * checked in meson: every supported target is little-endian). */
  memcpy (data + DC_TRAIN_SHARD_HEADER_SIZE, self->own_grads + start, length * sizeof (float));
  object = g_bytes_new_take (data, size);
  self->own_objects->pdata[r] = object;
  self->own_packed[r] = TRUE;
  /* This device's contribution to its own shard is summed here and never
   * sent (send_shard ()): no chunks, no frames. */
  if (r == compute->rank)
    return;
  wire = dc_train_shard_encode (object, _dc_train_group_send_wire (self));
  bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, wire, error);
  if (bodies != NULL)
    self->own_frames->pdata[r] = dc_mesh_chunk_frames_encode_coded (
      DC_MESH_MSG_GRADIENTS, bodies, _dc_train_group_compress (self), error);
}

static void send_early (DcTrainGroup *self);

/* Whether a run started here compresses its chunks: by default on every
 * wire (zstd keeps 59–63 % of the bytes: an int8 gradient's values are a
 * few bits of entropy short of 8, and the exact engine's f32 and bf16
 * gradients have short mantissas; on the VM an f32 group's step was 15 %
 * shorter, s32); DC_TRAIN_GROUP_ZSTD=0 or 1 decides instead (for comparing
 * in bench group, whose devices inherit it, and for tests that count an
 * exchange's raw bytes). */
gboolean
_dc_train_group_chunks_zstd_for (DcTrainWire wire)
{
  const char *env = g_getenv ("DC_TRAIN_GROUP_ZSTD");

  (void) wire;
  if (env != NULL && (g_str_equal (env, "0") || g_str_equal (env, "1")))
    return g_str_equal (env, "1");
  return TRUE;
}

/* A worker's note to the main thread, for the compute task of @gen only:
 * a later task (a gradient computed ahead and dropped, then computed
 * again) makes it stale. */
typedef struct
{
  DcTrainGroup *self;
  guint         gen;
} GenNote;

static void
gen_note_free (gpointer data)
{
  GenNote *note = data;

  g_object_unref (note->self);
  g_free (note);
}

/* Attaches @func (given a GenNote) to @context: a source on the owner's
 * context, not g_main_context_invoke () (shared/PLATFORM-NOTES.md). */
static void
attach_note (DcTrainGroup *self,
             guint         gen,
             GMainContext *context,
             GSourceFunc   func)
{
  g_autoptr(GSource) source = g_idle_source_new ();
  GenNote *note = g_new0 (GenNote, 1);

  note->self = g_object_ref (self);
  note->gen = gen;
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, func, note, gen_note_free);
  g_source_attach (source, context);
}

static gboolean
early_cb (gpointer user_data)
{
  send_early (((GenNote *) user_data)->self);
  return G_SOURCE_REMOVE;
}

/* The early queue's items: the task's generation (low 24 bits) and the
 * shard + 1 (8 bits: DC_MESH_ROSTER_MAX is 64). */
#define EARLY_ITEM(gen, r) GUINT_TO_POINTER ((((gen) & 0xffffffu) << 8) | ((r) + 1))

typedef struct
{
  DcTrainGroup *self;
  ComputeData  *compute;
  GMainContext *context;
} EarlyData;

/* From the backward pass (the worker), once every gradient from
 * @first_final on is final: the contributions whose whole shard is are
 * packed now and handed to the main thread, which sends them while the
 * pass goes on (the last blocks' shards first). Shard 0 holds the token
 * embedding, which the tied head makes final only at the very end. */
static void
layer_done (gsize    first_final,
            gpointer user_data)
{
  EarlyData *early = user_data;
  DcTrainGroup *self = early->self;
  DcGptModel *model = dc_train_session_get_model (self->session);
  DcTrainShardLayout layout;

  _dc_train_group_layout (model, &layout);
  for (guint r = early->compute->n_ranks; r-- > 1;)
    {
      gsize start, length;

      dc_train_shard_range (&layout, early->compute->n_ranks, r, &start, &length);
      /* This device's own contribution to its own shard too (never sent):
       * the streamed reduce may begin with it (send_early ()). */
      if (self->own_packed[r] || start < first_final)
        continue;
      /* Packed once block 0 is all that is left (the tail layout's values
       * final last, dc_train_shard_range ()): the exchange's tail. */
      if (first_final < layout.late_end && r != early->compute->rank)
        early->compute->tail_values += length;
      pack_shard (self, early->compute, r);
      g_async_queue_push (self->early, EARLY_ITEM (early->compute->gen, r));
      attach_note (self, early->compute->gen, early->context, early_cb);
    }
}

static gboolean
compute_own (DcTrainGroup       *self,
             const ComputeData  *compute,
             GError            **error)
{
  DcGptTrainer *trainer = dc_train_session_get_trainer (self->session);
  DcGptModel *model = dc_gpt_trainer_get_model (trainer);

  /* A bf16 or int8 run rounds its own gradient as it sends it, so that its
   * own contribution is summed as the others receive it: alone all of it,
   * in a group the shards the backward pass did not pack (and round). */
  if (!dc_gpt_trainer_compute_gradients (trainer, compute->rank, compute->n_ranks,
                                         self->own_grads, &self->own_loss, error))
    return FALSE;
  if (compute->n_ranks < 2)
    {
      if (!dc_train_session_round_gradient (self->session, self->own_grads, 1, error))
        return FALSE;
    }
  else
    {
      DcTrainShardLayout layout;

      _dc_train_group_layout (model, &layout);
      for (guint r = 0; r < compute->n_ranks; r++)
        {
          gsize start, length;

          dc_train_shard_range (&layout, compute->n_ranks, r, &start, &length);
          round_own_shard (self, r, start, length);
        }
      if (self->own_round_error != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&self->own_round_error));
          return FALSE;
        }
    }
  if (self->fault_corrupt != 0 && model->step + 1 >= self->fault_corrupt
      && (!self->fault_corrupt_unaudited || compute->n_ranks < 2
          || dc_train_group_audit_rank (self->config->run_seed, model->step + 1, 0,
                                        compute->n_ranks, FALSE) == G_MAXUINT))
    {
      /* Test only (DC_TEST_FAULT=corrupt-gradient@STEP): one changed
       * value in every gradient from STEP on, summed here too (the
       * replicas stay equal: only an audit can tell), one the run's wire
       * sends as it is (dc_train_wire_corrupt ()). */
      dc_train_wire_corrupt (_dc_train_group_wire (self), self->own_grads, model->n_params);
    }
  return TRUE;
}

static gboolean
own_packed_cb (gpointer user_data)
{
  GenNote *note = user_data;

  if (note->gen == note->self->compute_gen)
    send_own_gradient (note->self);
  return G_SOURCE_REMOVE;
}

/* The worker no longer reads the model (wait_worker ()). */
static void
worker_done (DcTrainGroup *self)
{
  g_mutex_lock (&self->worker_lock);
  self->worker_busy = FALSE;
  g_cond_broadcast (&self->worker_cond);
  g_mutex_unlock (&self->worker_lock);
}

/* Before the model changes under a compute task (a rollback while the next
 * gradient is computed ahead, or the corrupt-weight test fault): at most
 * the rest of one gradient's compute, on a rare path (a device left
 * mid-exchange). */
static void
wait_worker (DcTrainGroup *self)
{
  g_mutex_lock (&self->worker_lock);
  while (self->worker_busy)
    g_cond_wait (&self->worker_cond, &self->worker_lock);
  g_mutex_unlock (&self->worker_lock);
}

static void
snapshot_worker (GTask        *task,
                 gpointer      source,
                 gpointer      task_data,
                 GCancellable *cancellable)
{
  DcTrainGroup *self = source;

  snapshot_thread (self);
  worker_done (self);
  g_task_return_boolean (task, TRUE);
}

/* The step's snapshot (snapshot_thread ()) for a gradient computed ahead,
 * on a GTask thread: 3 × 4 bytes a parameter (428 MB for 36 M), which on
 * the main thread held it for seconds. It only reads the model; it counts
 * as the worker (worker_busy), so a rollback (wait_worker ()) and the
 * Adam step (apply_worker ()) wait for it before changing the model. */
static void
snapshot_later (DcTrainGroup *self)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, NULL, NULL);

  g_mutex_lock (&self->worker_lock);
  self->worker_busy = TRUE;
  g_mutex_unlock (&self->worker_lock);
  g_task_set_source_tag (task, snapshot_later);
  g_task_run_in_thread (task, snapshot_worker);
}

/* Own gradient, packed and handed to the main thread to send at once (an
 * audit's recomputation runs on a worker of its own, off the step:
 * _dc_train_group_launch_audit ()). */
static void
compute_worker (GTask        *task,
                gpointer      source,
                gpointer      data,
                GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  ComputeData *compute = data;
  GError *error = NULL;
  GThread *snapshot = NULL;
  gboolean ok;

  EarlyData early = { self, compute, g_task_get_context (task) };
  DcGptRun *run = dc_gpt_trainer_get_run (dc_train_session_get_trainer (self->session));

  compute->began = g_get_monotonic_time ();
  /* An audit waits while this gradient computes (docs/ARCHITECTURE.md,
   * "Audits in the step's waits"); computed ahead, it waits instead while
   * the step waits for the audit's verdict. */
  _dc_train_group_lane_compute (self, TRUE);
  if (compute->ahead)
    dc_parallel_set_gate (_dc_train_group_ahead_gate, self);
  /* Ahead of its step, the snapshot still holds the state before the step
   * just taken, which a rollback of it needs: start_step () takes the new
   * one when it adopts this gradient. */
  if (!compute->ahead && snapshot_by_copy (self))
    {
      snapshot = g_thread_try_new ("dc-snapshot", snapshot_thread, self, NULL);
      if (snapshot == NULL)
        snapshot_thread (self);
    }
  if (compute->n_ranks > 1)
    {
      pack_begin (self, compute);
      dc_gpt_run_set_layer_done_func (run, layer_done, &early);
    }
  ok = compute_own (self, compute, &error);
  /* Not for any later pass. */
  dc_gpt_run_set_layer_done_func (run, NULL, NULL);
  /* This thread goes back to GTask's pool. */
  dc_parallel_set_gate (NULL, NULL);
  g_mutex_lock (&self->lane_lock);
  compute->paused_us = self->lane_ahead_paused_us;
  g_mutex_unlock (&self->lane_lock);
  _dc_train_group_lane_compute (self, FALSE);
  if (snapshot != NULL)
    g_thread_join (snapshot);
  if (!ok)
    {
      worker_done (self);
      g_task_return_error (task, error);
      return;
    }
  /* Read by the main thread once the task's result is there. */
  compute->done = g_get_monotonic_time ();
  /* Alone, nobody receives it or asks for its repair. */
  if (compute->n_ranks > 1)
    {
      DcTrainShardLayout layout;

      /* The shards not sent during the backward pass (shard 0 at least),
       * each handed to the main thread as soon as it is packed, as
       * layer_done () does: the first leaves while the next is packed.
       * This device's own contribution to its own shard last: it is only
       * summed here. */
      _dc_train_group_layout (dc_train_session_get_model (self->session), &layout);
      for (guint r = 0; r < compute->n_ranks; r++)
        if (!self->own_packed[r] && r != compute->rank)
          {
            gsize start, length;

            /* What is left to send after the last gradient (the step
             * line's tail_values). */
            dc_train_shard_range (&layout, compute->n_ranks, r, &start, &length);
            compute->tail_values += length;
            pack_shard (self, compute, r);
            g_async_queue_push (self->early, EARLY_ITEM (compute->gen, r));
            attach_note (self, compute->gen, g_task_get_context (task), early_cb);
          }
      if (!self->own_packed[compute->rank])
        pack_shard (self, compute, compute->rank);
      attach_note (self, compute->gen, g_task_get_context (task), own_packed_cb);
    }
  worker_done (self);
  g_task_return_boolean (task, TRUE);
}

typedef struct
{
  const float **grads;
  guint         n;
  char         *weights_hash;    /* out: of the state after the step */
  char         *optimizer_hash;  /* out */
  gint64        began, stepped, hashed;  /* out: monotonic µs */
} ApplyData;

static void
apply_data_free (ApplyData *data)
{
  g_free (data->grads);
  g_free (data->weights_hash);
  g_free (data->optimizer_hash);
  g_free (data);
}

/* The Adam step is done (apply_worker () still hashes the state, which only
 * reads it): the next gradient may start beside the hashes. */
static gboolean
stepped_cb (gpointer user_data)
{
  DcTrainGroup *self = user_data;

  if (self->state != STATE_APPLYING)
    return G_SOURCE_REMOVE;
  self->model_version++;
  self->apply_counted = TRUE;
  DC_TRAIN_GROUP_TRACE ("stepped");
  start_ahead (self);
  return G_SOURCE_REMOVE;
}

static void
apply_worker (GTask        *task,
              gpointer      source,
              gpointer      data,
              GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  ApplyData *apply = data;
  DcGptTrainer *trainer = dc_train_session_get_trainer (self->session);
  DcGptModel *model = dc_gpt_trainer_get_model (trainer);
  const float *sum;

  apply->began = g_get_monotonic_time ();
  /* (A snapshot by copy was taken while the gradient was computed, or, for
   * one computed ahead, is being taken: snapshot_later ().) */
  wait_worker (self);
  if (apply->n == 1)
    {
      /* x / 1 = x: a group of one applies its own gradient, as the solo step does. */
      sum = apply->grads[0];
    }
  else
    {
      DcTrainShardLayout layout;

      /* Kept from step to step: a fresh n_params buffer a step costs page faults. */
      if (self->sum_len != model->n_params)
        {
          g_free (self->sum_grads);
          self->sum_grads = g_new (float, model->n_params);
          self->sum_len = model->n_params;
        }
      /* The summed shards, each already the canonical sum of its elements
       * (maybe_reduce ()), side by side in rank order. */
      _dc_train_group_layout (model, &layout);
      for (guint r = 0; r < apply->n; r++)
        {
          gsize start, length;

          dc_train_shard_range (&layout, apply->n, r, &start, &length);
          memcpy (self->sum_grads + start, apply->grads[r], length * sizeof (float));
        }
      sum = self->sum_grads;
    }
  if (dc_gpt_trainer_can_apply_into (trainer))
    {
      float *before;

      /* The snapshot without a copy: the new state goes to the snapshot
       * buffer (free: start_step () moved the last one back, or a step
       * taken again holds the model's state there), and the model's
       * buffer, the state before the step, becomes the snapshot. An
       * audit's launch may still copy from that buffer (two steps ago). */
      _dc_train_group_audit_copy_wait (self, self->snapshot);
      self->snap_step = model->step;
      self->snap_beta1 = model->beta1_pow;
      self->snap_beta2 = model->beta2_pow;
      before = dc_gpt_trainer_apply_gradients_into (trainer, sum, self->snapshot);
      self->snapshot = before;
      self->snap_taken = TRUE;
    }
  else
    dc_gpt_trainer_apply_gradients (trainer, sum);
  apply->stepped = g_get_monotonic_time ();
  if (apply->n > 1)
    {
      g_autoptr(GSource) stepped = g_idle_source_new ();

      /* A source on the owner's context, not g_main_context_invoke ()
       * (shared/PLATFORM-NOTES.md). */
      g_source_set_priority (stepped, G_PRIORITY_DEFAULT);
      g_source_set_callback (stepped, stepped_cb, g_object_ref (self), g_object_unref);
      g_source_attach (stepped, g_task_get_context (task));
    }
  /* The report's two hashes at once: their 64 KiB pieces are digested on
   * the pool, the moments' once for both (they were hashed twice, on two
   * threads, while each hash was one sequential SHA-256). */
  dc_gpt_model_dup_hashes (model, &apply->weights_hash, &apply->optimizer_hash);
  apply->hashed = g_get_monotonic_time ();
  g_task_return_boolean (task, TRUE);
}

/* The step-0 report to every roster device connected since it was last
 * sent: a follower that gets the roster before it is connected to every
 * other follower would otherwise never reach them, and they would wait
 * for it until DC_TRAIN_GROUP_CONNECT_S. */
static void
resend_start_report (DcTrainGroup *self)
{
  g_autoptr(GBytes) payload = dc_mesh_step_report_encode (self->own_report, NULL);

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      DcPeer *peer;
      g_autoptr(GError) error = NULL;

      if (i == self->rank || g_hash_table_contains (self->start_sent, id)
          || (peer = _dc_train_group_find_peer (self, id)) == NULL)
        continue;
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_STEP_REPORT, payload, &error))
        g_message ("cannot send to %s: %s", dc_peer_get_name (peer), error->message);
      else
        g_hash_table_add (self->start_sent, g_strdup (id));
    }
}

/* Step 0: the roster and the seeded weights' hash. The starter's names the
 * first roster; everyone's shows it built the same weights, and that it is
 * ready: nobody sends a gradient before it has every device's. */
static void
send_start_report (DcTrainGroup *self)
{
  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  self->own_report = _dc_train_group_make_start_report (self);
  g_hash_table_remove_all (self->start_sent);
  resend_start_report (self);
  _dc_train_group_arm (self, DC_TRAIN_GROUP_CONNECT_S);
}

static void
prepared_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  GError *error = NULL;
  Prepared *prepared = g_task_propagate_pointer (G_TASK (result), &error);
  DcTrainSession *session;

  if (self->state == STATE_DONE)
    {
      g_clear_pointer (&prepared, prepared_free);
      g_clear_error (&error);
      return;
    }
  if (prepared == NULL)
    {
      _dc_train_group_finish (self, error);
      return;
    }
  session = g_steal_pointer (&prepared->session);
  g_free (self->start_hash);
  g_free (self->start_optimizer);
  self->start_hash = g_steal_pointer (&prepared->hash);
  self->start_optimizer = g_steal_pointer (&prepared->optimizer);
  self->start_hash_step = dc_train_session_get_model (session)->step;
  prepared_free (prepared);
  self->session = session;
  self->step_done = dc_train_session_get_model (session)->step;
  g_free (self->own_grads);
  _dc_train_group_audit_copy_wait (self, self->snapshot_prev);
  _dc_train_group_audit_copy_wait (self, self->snapshot_prev2);
  g_free (self->snapshot);
  g_free (self->snapshot_prev);
  g_free (self->snapshot_prev2);
  self->own_grads = g_new (float, dc_train_session_get_model (session)->n_params);
  self->snapshot = g_new (float, 3 * dc_train_session_get_model (session)->n_params);
  self->snapshot_prev = g_new (float, 3 * dc_train_session_get_model (session)->n_params);
  self->snapshot_prev2 = g_new (float, 3 * dc_train_session_get_model (session)->n_params);
  self->snap_taken = FALSE;
  self->snap_prev_valid = FALSE;
  self->snap_prev2_valid = FALSE;
  self->state = self->starter ? STATE_CONNECTING
                : self->joining ? STATE_WAITING_WEIGHTS : STATE_WAITING_START;
  if (self->starter)
    send_start_report (self);
  _dc_train_group_advance (self);
}

static gboolean
fault_exit_cb (gpointer user_data)
{
  _exit (3);
  return G_SOURCE_REMOVE;
}

/* @frames with one data byte of its second chunk (or only one) flipped:
 * that chunk framed again from a changed copy of its body (@bodies), so it
 * passes the frame's checksum and fails the chunk's own hash. */
static GPtrArray *
corrupt_chunk (GPtrArray *bodies,
               GPtrArray *frames)
{
  GPtrArray *copy = g_ptr_array_new_full (frames->len, (GDestroyNotify) g_ptr_array_unref);
  guint which = MIN (1u, frames->len - 1);

  for (guint i = 0; i < frames->len; i++)
    {
      g_autoptr(GBytes) body = NULL;
      gsize size;
      guint8 *data;
      GPtrArray *pieces;

      if (i != which)
        {
          g_ptr_array_add (copy, g_ptr_array_ref (g_ptr_array_index (frames, i)));
          continue;
        }
      data = g_bytes_unref_to_data (g_bytes_ref (g_ptr_array_index (bodies, i)), &size);
      data[DC_MESH_CHUNK_HEADER_SIZE] ^= 1u;
      body = g_bytes_new_take (data, size);
      pieces = dc_mesh_message_encode_pieces (DC_MESH_MSG_GRADIENTS, body, NULL);
      g_ptr_array_add (copy, pieces != NULL ? pieces
                             : g_ptr_array_ref (g_ptr_array_index (frames, i)));
    }
  return copy;
}

/* Sends @object's framed chunks (@frames) to @peer, counting them; logs a
 * failure. */
static void
send_frames (DcTrainGroup *self,
             DcPeer       *peer,
             GPtrArray    *frames,
             const char   *what)
{
  g_autoptr(GError) error = NULL;

  if (frames == NULL)
    g_message ("cannot send the %s to %s: %s", what, dc_peer_get_name (peer),
               self->own_pack_error != NULL ? self->own_pack_error->message : "not packed");
  else if (!_dc_train_group_send_frames (self, peer, DC_MESH_MSG_GRADIENTS, frames, &error))
    g_message ("cannot send the %s to %s: %s", what, dc_peer_get_name (peer), error->message);
}

/* This step's contribution to shard @r (the reduce-scatter), once: to
 * rank r, unless this device is r. (An auditor of rank r asks for it
 * afterwards: the audit draw is known only once every contribution was
 * sent, _dc_train_group_launch_audit ().) */
static void
send_shard (DcTrainGroup *self,
            guint         r)
{
  guint n = self->roster->len;
  GPtrArray *frames;

  if (r >= n || r == self->rank || self->own_shard_sent[r] || self->own_frames == NULL)
    return;
  self->own_shard_sent[r] = TRUE;
  frames = g_ptr_array_index (self->own_frames, r);
  DC_TRAIN_GROUP_TRACE ("send_contrib shard=%u", r);
  for (guint i = 0; i < n; i++)
    {
      DcPeer *peer;

      if (i == self->rank || i != r
          || (peer = _dc_train_group_find_peer (self, g_ptr_array_index (self->roster, i)))
             == NULL)
        continue;
      send_frames (self, peer, frames, "gradient");
    }
  /* The summed-shard chunks held for it (DC_TRAIN_GROUP_STREAM=hold). */
  _dc_train_group_stream_release (self, r);
}

/* The contributions the worker packed during the backward pass, sent as
 * they come (layer_done ()). */
static void
send_early (DcTrainGroup *self)
{
  gpointer item;

  /* Computed ahead: they wait in the queue until the step starts
   * (start_step () sends them then). */
  if (self->state != STATE_COMPUTING)
    return;
  while ((item = g_async_queue_try_pop (self->early)) != NULL)
    {
      guint value = GPOINTER_TO_UINT (item);
      guint r = (value & 0xffu) - 1;

      /* Not those of a task dropped since. */
      if (value >> 8 != (self->compute_gen & 0xffffffu) || self->own_sent)
        continue;
      /* This device's own contribution to its own shard, final during the
       * backward pass: its summed shard may stream from now on
       * (dc-train-group-stream.c), during the backward pass. */
      if (r == self->rank && self->own_objects != NULL && r < self->own_objects->len)
        _dc_train_group_stream_start_early (self, g_ptr_array_index (self->own_objects, r));
      else
        send_shard (self, r);
    }
}

/* This step's contributions, the rest of them, once the worker packed them
 * all: from the worker's source, else from computed_cb (). */
static void
send_own_gradient (DcTrainGroup *self)
{
  guint64 step;
  g_autoptr(GPtrArray) objects = NULL;
  g_autoptr(GPtrArray) frames = NULL;

  if (self->own_sent || self->state != STATE_COMPUTING)
    return;
  send_early (self);
  for (guint r = 0; r < self->roster->len; r++)
    send_shard (self, r);
  self->own_sent = TRUE;
  for (guint r = 0; r < self->roster->len; r++)
    _dc_train_group_stream_release (self, r);
  step = dc_train_session_get_model (self->session)->step + 1;
  /* Packed by the worker (pack_shard ()). */
  objects = g_steal_pointer (&self->own_objects);
  frames = g_steal_pointer (&self->own_frames);
  for (guint r = 0; objects != NULL && r < objects->len; r++)
    {
      /* Kept: this device may be asked for them again, and re-sums with
       * its own on an audit step. */
      Gradient *own;

      if (g_ptr_array_index (objects, r) == NULL)
        continue;
      own = g_new0 (Gradient, 1);
      own->rank = self->rank;
      own->loss = self->own_loss;
      own->object = g_bytes_ref (g_ptr_array_index (objects, r));
      g_hash_table_replace (self->contribs,
                            _dc_train_group_contrib_key (step, self->digest,
                                                         _dc_train_group_own_id (self), r),
                            own);
      if (r == self->rank)
        _dc_train_group_stream_object (self, self->rank, own->object);
    }
  self->t_sent = g_get_monotonic_time ();
}

/* What reduce_worker () needs, copied on the main thread (the worker
 * touches nothing of the group), and what it hands back. */
typedef struct
{
  guint         gen;           /* self->reduce_gen when it began */
  guint         n;
  guint         rank;
  guint64       step;
  guint64       digest;
  DcTrainShardLayout layout;    /* the model's (_dc_train_group_layout ()) */
  float         loss;
  DcTrainWire   wire;          /* the run's: a bf16 run rounds its sum */
  DcTrainWire   send_wire;     /* what goes out (dc_train_shard_encode ()) */
  gboolean      compress;      /* the chunks' data zstd-compressed (the run's CONFIG) */
  guint64       fault_corrupt_sum;
  guint8        run_id[DC_MESH_RUN_ID_SIZE];
  GBytes      **objects;       /* n contributions to this device's shard, in rank order */
  /* out */
  GBytes       *object;        /* the summed shard object (kept, audited, repaired from) */
  GPtrArray    *bodies;        /* its chunks (a corrupted copy is made from them) */
  GPtrArray    *frames;        /* … framed once, shared by every peer */
  GError       *error;         /* why the chunks could not be made */
} ReduceData;

static void
reduce_data_free (ReduceData *data)
{
  for (guint i = 0; i < data->n; i++)
    g_clear_pointer (&data->objects[i], g_bytes_unref);
  g_free (data->objects);
  g_clear_pointer (&data->object, g_bytes_unref);
  g_clear_pointer (&data->bodies, g_ptr_array_unref);
  g_clear_pointer (&data->frames, g_ptr_array_unref);
  g_clear_error (&data->error);
  g_free (data);
}

/* The sum of this device's shard, on a GTask thread: for a 36 M-parameter
 * model of two devices that is 72 MB hashed twice, summed, cut into chunks
 * (hashed again) and framed (copied and checksummed), seconds on a loaded
 * machine, which on the main thread kept heartbeats from being answered.
 * Its result comes back through the task's completion (a GSource on the
 * group's context). */
static void
reduce_worker (GTask        *task,
               gpointer      source,
               gpointer      task_data,
               GCancellable *cancellable)
{
  ReduceData *data = task_data;
  guint n = data->n;
  g_autofree const float **values = g_new0 (const float *, n);
  DcTrainShardHeader header = { 0 };
  DcMeshChunk info = { 0 };
  gsize start, length, size;
  guint8 *bytes;
  float *out;
  g_autoptr(GBytes) wire = NULL;

  for (guint i = 0; i < n; i++)
    {
      gsize n_values;

      values[i] = _dc_train_group_shard_values (data->objects[i], &n_values);
    }
  dc_train_shard_range (&data->layout, n, data->rank, &start, &length);
  size = dc_train_shard_object_size (DC_TRAIN_SHARD_SUMMED, &data->layout, n, data->rank);
  bytes = g_malloc (size);
  header.kind = DC_TRAIN_SHARD_SUMMED;
  header.roster_size = n;
  header.shard = data->rank;
  header.digest = data->digest;
  memcpy (&header.loss_bits, &data->loss, 4);
  dc_train_shard_header_write (bytes, &header);
  /* The contribution hashes after the values (docs/PROTOCOL.md). */
  for (guint i = 0; i < n; i++)
    {
      g_autoptr(GBytes) floats = g_bytes_new_static (values[i], length * sizeof (float));

      dc_mesh_train_hash (floats, bytes + DC_TRAIN_SHARD_HEADER_SIZE + length * sizeof (float)
                                  + (gsize) i * DC_TRAIN_SHARD_HASH_SIZE);
    }
  out = (float *) (bytes + DC_TRAIN_SHARD_HEADER_SIZE);
  dc_gpt_trainer_combine_gradients (values, n, length, out);
  /* A bf16 or int8 run applies its own summed shard as the others
   * receive it. A mean of values the wire carries is no larger than the
   * largest, so this rounding cannot fail. */
  dc_train_wire_round (data->wire, out, length);
  /* Test only (DC_TEST_FAULT=corrupt-sum@STEP): one changed value in this
   * device's summed shard from STEP on, applied here too (the replicas
   * stay equal: only an audit can tell). */
  if (data->fault_corrupt_sum != 0 && data->step >= data->fault_corrupt_sum)
    dc_train_wire_corrupt (data->wire, out, length);
  data->object = g_bytes_new_take (bytes, size);
  DC_TRAIN_GROUP_TRACE ("reduce_summed step=%" G_GUINT64_FORMAT, data->step);
  /* Dropped meanwhile (the step restarts, the run ends): the rest is not
   * needed. */
  if (g_cancellable_is_cancelled (cancellable))
    {
      g_task_return_boolean (task, FALSE);
      return;
    }
  memcpy (info.run_id, data->run_id, DC_MESH_RUN_ID_SIZE);
  info.step = data->step;
  info.rank = data->rank;
  wire = dc_train_shard_encode (data->object, data->send_wire);
  data->bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, wire, &data->error);
  if (data->bodies != NULL && !g_cancellable_is_cancelled (cancellable))
    data->frames = dc_mesh_chunk_frames_encode_coded (DC_MESH_MSG_GRADIENTS, data->bodies,
                                                      data->compress, &data->error);
  DC_TRAIN_GROUP_TRACE ("reduce_framed step=%" G_GUINT64_FORMAT, data->step);
  g_task_return_boolean (task, TRUE);
}

static void reduced_cb (GObject      *object,
                        GAsyncResult *result,
                        gpointer      user_data);

/* The summed shard of this device's rank (the all-gather), once every
 * roster device's contribution to it is here (its own included): summed in
 * the canonical order (dc_gpt_trainer_combine_gradients (): ranks 0..n-1,
 * then ÷ n, element by element, so the result is bit for bit the whole
 * gradient's sum), with the SHA-256 of each contribution it used (the
 * audits compare them) and the step's loss, kept and sent to every roster
 * device. The sum runs on a worker (reduce_worker ()); reduced_cb () keeps
 * and sends it. One reduce is out at a time (own_reduced), so its memory
 * is bounded by one summed shard, its chunks and one framing of them. */
static void
maybe_reduce (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint64 step = model->step + 1;
  guint n = self->roster->len;
  ReduceData *data;
  float loss_sum = 0.0f;
  g_autoptr(GTask) task = NULL;
  gboolean streamed;

  if (!self->own_sent || self->own_reduced || n < 2 || self->state != STATE_EXCHANGING)
    return;
  /* The streamed reduce (dc-train-group-stream.c): it sums and sends as
   * the contributions come, from now on (this device's own are queued). */
  streamed = _dc_train_group_stream_start (self);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *key = _dc_train_group_contrib_key (step, self->digest,
                                                          g_ptr_array_index (self->roster, i),
                                                          self->rank);
      Gradient *contribution = g_hash_table_lookup (self->contribs, key);

      if (contribution == NULL || contribution->rank != i)
        return;
    }
  if (streamed)
    {
      /* Every contribution is in: the stream ends on its own (its
       * completion keeps the summed shard, stream_note_cb ()). */
      self->own_reduced = TRUE;
      self->t_reduce_began = g_get_monotonic_time ();
      DC_TRAIN_GROUP_TRACE ("reduce_begin step=%" G_GUINT64_FORMAT, step);
      return;
    }
  data = g_new0 (ReduceData, 1);
  data->objects = g_new0 (GBytes *, n);
  data->n = n;
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *key = _dc_train_group_contrib_key (step, self->digest,
                                                          g_ptr_array_index (self->roster, i),
                                                          self->rank);
      Gradient *contribution = g_hash_table_lookup (self->contribs, key);

      /* A reference: the table may drop it while the worker reads it. */
      data->objects[i] = g_bytes_ref (contribution->object);
      /* The losses as the simulation sums them: rank order. */
      loss_sum = loss_sum + contribution->loss;
    }
  self->own_reduced = TRUE;
  self->t_reduce_began = g_get_monotonic_time ();
  DC_TRAIN_GROUP_TRACE ("reduce_begin step=%" G_GUINT64_FORMAT, step);
  data->gen = ++self->reduce_gen;
  data->rank = self->rank;
  data->step = step;
  data->digest = self->digest;
  _dc_train_group_layout (model, &data->layout);
  data->loss = loss_sum / (float) n;
  data->wire = _dc_train_group_wire (self);
  data->send_wire = _dc_train_group_send_wire (self);
  data->compress = _dc_train_group_compress (self);
  data->fault_corrupt_sum = self->fault_corrupt_sum;
  memcpy (data->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  g_clear_object (&self->reduce_cancel);
  self->reduce_cancel = g_cancellable_new ();
  task = g_task_new (self, self->reduce_cancel, reduced_cb, NULL);
  g_task_set_source_tag (task, maybe_reduce);
  g_task_set_task_data (task, data, (GDestroyNotify) reduce_data_free);
  g_task_run_in_thread (task, reduce_worker);
}

/* Drops the reduce that is out, if any: its step is taken again or the run
 * ended (start_step (), _dc_train_group_finish ()). */
void
_dc_train_group_drop_reduce (DcTrainGroup *self)
{
  _dc_train_group_stream_drop (self);
  self->reduce_gen++;
  if (self->reduce_cancel != NULL)
    g_cancellable_cancel (self->reduce_cancel);
  g_clear_object (&self->reduce_cancel);
}

/* Back on the main thread: keeps this device's summed shard and queues the
 * same framed chunks to every roster device. */
static void
reduced_cb (GObject      *object,
            GAsyncResult *result,
            gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  ReduceData *data = g_task_get_task_data (G_TASK (result));
  gboolean done = g_task_propagate_boolean (G_TASK (result), NULL);
  Gradient *own;

  if (!done || data->gen != self->reduce_gen || self->state == STATE_DONE
      || self->session == NULL)
    return;
  g_clear_object (&self->reduce_cancel);
  own = g_new0 (Gradient, 1);
  own->rank = data->rank;
  own->loss = data->loss;
  own->object = g_bytes_ref (data->object);
  g_hash_table_replace (self->gradients,
                        _dc_train_group_gradient_key (data->step, data->digest,
                                                      _dc_train_group_own_id (self)),
                        own);
  for (guint i = 0; i < data->n && i < self->roster->len; i++)
    {
      DcPeer *peer;
      g_autoptr(GPtrArray) corrupt = NULL;

      if (i == data->rank || (peer = _dc_train_group_find_peer (self,
                                                                g_ptr_array_index (self->roster,
                                                                                   i))) == NULL)
        continue;
      if (data->frames == NULL)
        {
          g_message ("cannot send the summed shard to %s: %s", dc_peer_get_name (peer),
                     data->error != NULL ? data->error->message : "not framed");
          continue;
        }
      if (self->fault_chunk != 0 && data->step == self->fault_chunk && i != 0)
        {
          /* Test only (DC_TEST_FAULT=corrupt-chunk@STEP): one byte of one
           * chunk's data changed on the way to one device that is not the
           * leader (rank 0), which keeps a clean copy to repair it from. */
          self->fault_chunk = 0;
          corrupt = corrupt_chunk (data->bodies, data->frames);
          g_message ("DC_TEST_FAULT: a corrupted chunk of the gradient of step %" G_GUINT64_FORMAT
                     " to %s", data->step, dc_peer_get_name (peer));
        }
      send_frames (self, peer, corrupt != NULL ? corrupt : data->frames, "summed shard");
      if (self->fault_partial != 0 && data->step == self->fault_partial)
        {
          /* Test only (DC_TEST_FAULT=partial-send@STEP): this device's
           * summed shard (the step's gradient) reaches one device, then it
           * dies without a bye. */
          g_message ("DC_TEST_FAULT: gradient of step %" G_GUINT64_FORMAT " sent to one device "
                     "only; exiting in 1 s", data->step);
          self->state = STATE_DONE;
          g_timeout_add_seconds (1, fault_exit_cb, NULL);
          return;
        }
    }
  self->t_reduced = g_get_monotonic_time ();
  DC_TRAIN_GROUP_TRACE ("reduced_sent step=%" G_GUINT64_FORMAT, data->step);
  _dc_train_group_advance (self);
}

static void
computed_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  ComputeData *compute = g_task_get_task_data (G_TASK (result));
  GError *error = NULL;
  gboolean ok = g_task_propagate_boolean (G_TASK (result), &error);

  self->compute_running = FALSE;
  if (compute->gen != self->compute_gen)
    {
      /* A gradient computed ahead and dropped since (another roster or
       * model): the step it was for is computed again now that the worker
       * is free, or what waited for it goes on. */
      g_clear_error (&error);
      if (self->state == STATE_DONE)
        return;
      if (self->restart_pending)
        {
          self->restart_pending = FALSE;
          _dc_train_group_start_step (self);
        }
      else
        _dc_train_group_advance (self);
      return;
    }
  DC_TRAIN_GROUP_TRACE ("computed began=%" G_GINT64_FORMAT " done=%" G_GINT64_FORMAT " ahead=%d",
                        compute->began, compute->done, (int) self->ahead_active);
  if (self->ahead_active)
    {
      /* Ahead of its step: kept until start_step () adopts it, its times
       * too (the step before may not be reported yet); a failure is
       * dropped (the step computes again and reports its own). */
      if (!ok)
        {
          g_clear_error (&error);
          self->ahead_active = FALSE;
          self->compute_gen++;
        }
      else
        {
          self->ahead_ready = TRUE;
          self->ahead_t_began = compute->began;
          self->ahead_t_done = compute->done;
          self->ahead_t_paused = compute->paused_us;
          self->ahead_t_tail_values = compute->tail_values;
        }
      _dc_train_group_advance (self);
      return;
    }
  self->t_compute_began = compute->began;
  self->t_computed = compute->done;
  self->t_compute_paused = compute->paused_us;
  self->t_tail_values = compute->tail_values;
  if (!ok)
    {
      _dc_train_group_finish (self, error);
      return;
    }
  send_own_gradient (self);
  if (self->state != STATE_COMPUTING)
    return;
  self->state = STATE_EXCHANGING;
  _dc_train_group_arm (self, DC_TRAIN_GROUP_WAIT_S);
  _dc_train_group_advance (self);
}

static const guint8 *
guard_hash (const char       *what,
            DcMeshStepReport *report)
{
  return g_str_equal (what, "optimizer state") ? report->optimizer_hash : report->weights_hash;
}

static gboolean
same_value (const char       *what,
            DcMeshStepReport *a,
            DcMeshStepReport *b)
{
  if (g_str_equal (what, "roster"))
    return g_strv_equal ((const char * const *) a->roster, (const char * const *) b->roster);
  return memcmp (guard_hash (what, a), guard_hash (what, b), DC_MESH_HASH_SIZE) == 0;
}

/* "SYNC GUARD: stopped — weight hash mismatch at step S: “a” H, “b” H, “c” H
 * (“c” disagrees with the others)": every roster device that reported, in
 * rank order, then those whose value differs from a strict majority's. */
static void
print_guard (DcTrainGroup     *self,
             const char       *what,
             DcMeshStepReport *own,
             GHashTable       *theirs)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GString) odd = g_string_new (NULL);
  g_autoptr(GPtrArray) reports = g_ptr_array_new ();
  g_autoptr(GPtrArray) ids = g_ptr_array_new ();
  gboolean by_roster = g_str_equal (what, "roster");
  DcMeshStepReport *majority = NULL;

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      DcMeshStepReport *report = i == self->rank ? own : g_hash_table_lookup (theirs, id);

      if (report == NULL)
        continue;
      g_ptr_array_add (reports, report);
      g_ptr_array_add (ids, (gpointer) id);
    }
  for (guint i = 0; i < reports->len && majority == NULL; i++)
    {
      guint same = 0;

      for (guint j = 0; j < reports->len; j++)
        if (same_value (what, reports->pdata[i], reports->pdata[j]))
          same++;
      if (2 * same > reports->len)
        majority = reports->pdata[i];
    }

  g_string_append_printf (text, "SYNC GUARD: stopped — %s mismatch at step %" G_GUINT64_FORMAT ":",
                          what, own->step);
  for (guint i = 0; i < reports->len; i++)
    {
      DcMeshStepReport *report = reports->pdata[i];
      const char *name = _dc_train_group_member_name (self, ids->pdata[i]);
      g_autofree char *hex = _dc_train_group_hash_to_hex (guard_hash (what, report));
      gboolean differs;

      if (by_roster)
        g_string_append_printf (text, "%s “%s” %u devices", i == 0 ? "" : ",", name,
                                g_strv_length (report->roster));
      else
        g_string_append_printf (text, "%s “%s” %s", i == 0 ? "" : ",", name, hex);
      differs = majority != NULL && !same_value (what, report, majority);
      if (differs)
        g_string_append_printf (odd, "%s“%s”", odd->len > 0 ? ", " : "", name);
    }
  if (odd->len > 0)
    g_string_append_printf (text, " (%s disagree%s with the others)", odd->str,
                            strchr (odd->str, ',') != NULL ? "" : "s");
  _dc_train_group_finish (self, g_error_new_literal (DC_TRAIN_GROUP_ERROR,
                                                     DC_TRAIN_GROUP_ERROR_SYNC, text->str));
}

static void
applied_cb (GObject      *object,
            GAsyncResult *result,
            gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  ApplyData *apply = g_task_get_task_data (G_TASK (result));
  DcGptModel *model;
  float step_loss;

  g_task_propagate_boolean (G_TASK (result), NULL);
  if (self->state == STATE_DONE)
    return;
  model = dc_train_session_get_model (self->session);
  self->step_done = model->step;
  DC_TRAIN_GROUP_TRACE ("applied step=%" G_GUINT64_FORMAT " adam_us=%" G_GINT64_FORMAT
                        " hash_us=%" G_GINT64_FORMAT, model->step,
                        apply->stepped - apply->began, apply->hashed - apply->stepped);
  /* Counted once: by stepped_cb () when it came first. */
  if (!self->apply_counted)
    self->model_version++;
  self->apply_counted = FALSE;
  if (self->fault_step != 0 && model->step == self->fault_step)
    {
      guint32 bits;

      /* A gradient computed ahead read the weights before the flip: it
       * is dropped (the version), once it stopped reading. */
      wait_worker (self);
      self->model_version++;
      /* Test only (DC_TEST_FAULT=corrupt-weight@STEP): one flipped bit. */
      memcpy (&bits, &model->params[0], 4);
      bits ^= 1u;
      memcpy (&model->params[0], &bits, 4);
      g_message ("DC_TEST_FAULT: flipped a weight bit after step %" G_GUINT64_FORMAT, model->step);
      /* The worker hashed the state before the flip. */
      g_free (apply->weights_hash);
      g_free (apply->optimizer_hash);
      dc_gpt_model_dup_hashes (model, &apply->weights_hash, &apply->optimizer_hash);
    }

  /* The loss as the simulation computes it: the ranks' losses in rank
   * order, ÷ n; every reducer computed it so (maybe_reduce ()), the
   * leader's summed shard is the one shown. */
  if (self->roster->len == 1)
    step_loss = self->own_loss;
  else
    {
      g_autofree char *key = _dc_train_group_gradient_key (model->step, self->digest,
                                                           g_ptr_array_index (self->roster, 0));
      Gradient *gradient = g_hash_table_lookup (self->gradients, key);

      step_loss = gradient->loss;
    }

  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  self->own_report = _dc_train_group_make_report_hashed (self, apply->weights_hash,
                                                         apply->optimizer_hash);
  memcpy (&self->own_report->loss_bits, &step_loss, 4);
  /* Where the step's time went (for a view's "slowest device"). */
  /* An audit's recomputation runs on a worker of its own, beside the
   * step (_dc_train_group_launch_audit ()): not counted here. */
  {
    gint64 now = g_get_monotonic_time ();
    /* Computed ahead, the gradient may be done before the step began. */
    gint64 from = MAX (self->t_computed, self->step_started);
    gboolean alone = self->roster->len == 1;

    self->own_report->compute_us = MAX (0, self->t_computed - self->t_compute_began);
    self->own_report->send_us = MAX (0, self->t_sent - from);
    self->own_report->wait_us = MAX (0, self->t_apply - self->t_sent);
    self->own_report->combine_us = now - self->t_apply;
    self->phases.compute_us = self->own_report->compute_us;
    self->phases.ahead_us = self->step_ahead
                            ? MAX (0, MIN (self->t_computed, self->step_started)
                                      - self->t_compute_began) : 0;
    self->phases.send_us = self->own_report->send_us;
    self->phases.contrib_wait_us = alone ? 0 : MAX (0, self->t_reduce_began - self->t_sent);
    self->phases.sum_us = alone ? 0 : MAX (0, self->t_reduced - self->t_reduce_began);
    self->phases.gather_wait_us = alone ? 0 : MAX (0, self->t_apply - self->t_reduced);
    self->phases.adam_us = apply->stepped - apply->began;
    self->phases.hash_us = apply->hashed - apply->stepped;
    /* (barrier_us: start_step ().) */
    self->phases.ahead_paused_us = self->t_compute_paused;
    self->phases.tail_values = alone ? 0 : self->t_tail_values;
    self->phases.stream_chunks = alone ? 0 : self->t_stream_chunks;
    self->phases.stream_early = alone ? 0 : self->t_stream_early;
    self->phases.stream_pieces = alone ? 0 : self->t_stream_pieces;
    self->phases.gradient_began_at = self->t_compute_began;
    self->phases.gradient_done_at = self->t_computed;
    self->phases.gathered_at = self->t_apply;
    self->phases.stepped_at = apply->stepped;
    self->t_published = now;
    /* From the gradient's start when it was computed ahead. */
    self->last_seconds = MAX (1e-6, (now - MIN (self->step_started, self->t_compute_began))
                                    / 1e6);
  }
  self->last_loss = (double) step_loss;
  /* The next gradient, while this report's answers (and this device's
   * audit verdict) are awaited. */
  start_ahead (self);
  /* The verdict of this device's audit of the step before goes out before
   * this report (the group checks it at the end of this step). */
  if (!_dc_train_group_wait_audit (self, FALSE))
    _dc_train_group_report_step (self);
}

/* The report of the step just applied (its audit of the step before done). */
void
_dc_train_group_report_step (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);

  if (self->fault_hold != 0 && model->step == self->fault_hold)
    {
      /* Test only (DC_TEST_FAULT=hold-join@STEP): the report of STEP waits
       * for a device to join (at most DC_TRAIN_GROUP_CONNECT_S). */
      g_message ("DC_TEST_FAULT: holding after step %" G_GUINT64_FORMAT " for a device to join",
                 model->step);
      self->state = STATE_HOLDING;
      _dc_train_group_arm (self, DC_TRAIN_GROUP_CONNECT_S);
      _dc_train_group_advance (self);
      return;
    }
  _dc_train_group_publish_step (self);
}

/* A compute task for this device's rank of the roster as it stands; @ahead:
 * for the step after the one just applied, before it starts. */
static void
launch_compute (DcTrainGroup *self,
                gboolean      ahead)
{
  ComputeData *compute = g_new0 (ComputeData, 1);
  g_autoptr(GTask) task = NULL;

  compute->rank = self->rank;
  compute->n_ranks = self->roster->len;
  compute->digest = self->digest;
  memcpy (compute->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  compute->gen = ++self->compute_gen;
  compute->ahead = ahead;
  self->compute_running = TRUE;
  g_mutex_lock (&self->worker_lock);
  self->worker_busy = TRUE;
  g_mutex_unlock (&self->worker_lock);
  task = g_task_new (self, NULL, computed_cb, NULL);
  g_task_set_task_data (task, compute, g_free);
  g_task_run_in_thread (task, compute_worker);
}

/* Computing ahead (docs/ARCHITECTURE.md, "Computing the next gradient
 * ahead"): right after a step's Adam step (beside the report's hashes:
 * stepped_cb (), else applied_cb ()), while its reports (the sync guard),
 * this device's audit verdict and any verification are awaited,
 * the worker computes the next step's gradient for the roster as it
 * stands. It only reads the model; nothing leaves before start_step ()
 * adopts it, which it does only for the same step, roster and model. A
 * group of one has nothing to wait for. */
static void
start_ahead (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);

  if (!self->overlap || self->roster->len < 2 || self->compute_running || self->ahead_active
      || self->state == STATE_DONE || model->step >= self->stop
      || model->step >= self->config->steps || self->switch_config != NULL
      || self->pending_config != NULL)
    return;
  self->ahead_step = model->step + 1;
  self->ahead_digest = self->digest;
  self->ahead_rank = self->rank;
  self->ahead_n = self->roster->len;
  self->ahead_version = self->model_version;
  self->ahead_active = TRUE;
  self->ahead_ready = FALSE;
  launch_compute (self, TRUE);
}

void
_dc_train_group_start_step (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  gboolean adopt;

  _dc_train_group_drop_gone (self, model->step + 1);
  for (guint i = 0; i < self->roster->len; i++)
    _dc_train_group_member_name (self, g_ptr_array_index (self->roster,
                                                          i));  /* remembered for later */
  self->step_started = g_get_monotonic_time ();
  DC_TRAIN_GROUP_TRACE ("start step=%" G_GUINT64_FORMAT " rank=%u n=%u ahead_ready=%d",
                        model->step + 1, self->rank, self->roster->len,
                        (int) self->ahead_ready);
  memset (self->repair_tries, 0, sizeof self->repair_tries);
  memset (self->repair_next, 0, sizeof self->repair_next);
  memset (self->contrib_tries, 0, sizeof self->contrib_tries);
  memset (self->contrib_next, 0, sizeof self->contrib_next);
  self->state = STATE_COMPUTING;
  self->own_sent = FALSE;
  self->own_reduced = FALSE;
  _dc_train_group_drop_reduce (self);
  self->t_stream_chunks = self->t_stream_early = self->t_stream_pieces = 0;
  memset (self->own_shard_sent, 0, sizeof self->own_shard_sent);
  /* A new step (not one taken again): the snapshots move one step back
   * (the audit of the step before last recomputes on the previous one, the
   * check of its accusations on the one before that), and the oldest
   * buffer takes this step's. */
  if (self->snap_taken && self->snap_step != model->step)
    {
      float *oldest = self->snapshot_prev2;

      self->snapshot_prev2 = self->snapshot_prev;
      self->snap_prev2_step = self->snap_prev_step;
      self->snap_prev2_valid = self->snap_prev_valid;
      self->snapshot_prev = self->snapshot;
      self->snapshot = oldest;
      self->snap_prev_step = self->snap_step;
      self->snap_prev_valid = TRUE;
      self->snap_taken = FALSE;
    }
  self->phases.barrier_us = self->t_published != 0
                            ? MAX (0, self->step_started - self->t_published) : 0;

  /* The gradient computed ahead is this step's only for the same step,
   * rank, roster and model (the digest names the roster; the version
   * moves with every change of the model: an Adam step, a rollback, a
   * checkpoint switch). */
  adopt = self->ahead_active && self->ahead_step == model->step + 1
          && self->ahead_rank == self->rank && self->ahead_n == self->roster->len
          && self->ahead_digest == self->digest && self->ahead_version == self->model_version;
  self->step_ahead = adopt;
  if (adopt)
    {
      self->ahead_active = FALSE;
      self->ahead_used++;
      /* The state before this step, for a rollback of it, where it is
       * copied (snapshot_by_copy (); the worker did not take it: the
       * buffer still held the step before's). The model is the one the
       * gradient reads; both only read it. Copied (10 MB at width 128)
       * once the gradient is on its way, not before: nothing changes the
       * model before the exchange below goes on. */
      if (self->ahead_ready)
        {
          self->ahead_ready = FALSE;
          self->t_compute_began = self->ahead_t_began;
          self->t_computed = self->ahead_t_done;
          self->t_compute_paused = self->ahead_t_paused;
          self->t_tail_values = self->ahead_t_tail_values;
          send_own_gradient (self);
          if (snapshot_by_copy (self))
            snapshot_later (self);
          self->state = STATE_EXCHANGING;
          _dc_train_group_arm (self, DC_TRAIN_GROUP_WAIT_S);
          _dc_train_group_advance (self);
        }
      else
        {
          send_early (self);
          if (snapshot_by_copy (self))
            snapshot_later (self);
        }
      return;
    }
  if (self->ahead_active)
    {
      /* Computed for another roster or model: dropped. */
      self->ahead_active = FALSE;
      self->ahead_ready = FALSE;
      self->compute_gen++;
    }
  if (self->compute_running)
    {
      /* Its worker still runs (it uses the trainer's buffers): this step
       * starts when it returns (computed_cb ()). */
      self->restart_pending = TRUE;
      return;
    }
  launch_compute (self, FALSE);
}

/* The roster's summed shards of the step, in rank order (this device's
 * own once maybe_reduce () made it); alone, its own gradient. */
static gboolean
gradients_complete (DcTrainGroup  *self,
                    const float  **grads)
{
  DcGptModel *model = dc_train_session_get_model (self->session);

  if (self->roster->len == 1)
    {
      grads[0] = self->own_grads;
      return TRUE;
    }
  for (guint i = 0; i < self->roster->len; i++)
    {
      g_autofree char *key = NULL;
      Gradient *gradient;
      gsize n_values;

      key = _dc_train_group_gradient_key (model->step + 1, self->digest,
                                          g_ptr_array_index (self->roster, i));
      gradient = g_hash_table_lookup (self->gradients, key);
      if (gradient == NULL || gradient->rank != i)
        return FALSE;
      grads[i] = _dc_train_group_shard_values (gradient->object, &n_values);
    }
  return TRUE;
}

static gboolean
roster_contains_all (char       **big,
                     char       **small)
{
  for (guint i = 0; small[i] != NULL; i++)
    if (!g_strv_contains ((const char * const *) big, small[i]))
      return FALSE;
  return g_strv_length (big) > g_strv_length (small);
}

/* The reports of the step just taken, compared (the sync guard) once every
 * roster device still here has sent its own, so that every device names
 * the same devices and hashes. */
static gboolean
reports_complete (DcTrainGroup *self)
{
  g_autoptr(GHashTable) theirs = g_hash_table_new (g_str_hash, g_str_equal);
  const char *what = NULL;

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      g_autofree char *key = _dc_train_group_report_key (self->own_report->step, id);
      DcMeshStepReport *report;

      if (i == self->rank)
        continue;
      report = g_hash_table_lookup (self->reports, key);
      if (report != NULL
          && memcmp (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0)
        report = NULL;
      if (report == NULL)
        {
          /* A device that left after its gradient came, or that an audit
           * caught, owes no report. */
          if (_dc_train_group_find_peer (self, id) != NULL && !g_hash_table_contains (self->evicted,
                                                                                      id))
            return FALSE;
          continue;
        }
      g_hash_table_insert (theirs, (gpointer) id, report);
      /* Its report of the step with a device this one dropped: it is
       * taking the step again (_dc_train_group_rollback ()); its new report replaces it.
       * Checked before the hashes, which differ for that reason alone. */
      if (!g_strv_equal ((const char * const *) report->roster,
                         (const char * const *) self->own_report->roster)
          && roster_contains_all (report->roster, self->own_report->roster))
        return FALSE;
      if (what != NULL)
        continue;
      if (memcmp (report->weights_hash, self->own_report->weights_hash, DC_MESH_HASH_SIZE) != 0)
        what = "weight hash";
      else if (memcmp (report->optimizer_hash, self->own_report->optimizer_hash,
                       DC_MESH_HASH_SIZE) != 0)
        what = "optimizer state";
      else if (!g_strv_equal ((const char * const *) report->roster,
                              (const char * const *) self->own_report->roster))
        {
          /* Its report of the step with a device this one dropped: it is
           * taking the step again (_dc_train_group_rollback ()); its new report replaces it. */
          if (roster_contains_all (report->roster, self->own_report->roster))
            return FALSE;
          what = "roster";
        }
    }
  if (what != NULL)
    {
      print_guard (self, what, self->own_report, theirs);
      return FALSE;
    }
  return TRUE;
}

/* Forget the reports of steps before @step, and the gradients (and repairs
 * answered) of steps before the last DC_TRAIN_GROUP_REPAIR_STEPS. */
static void
prune (DcTrainGroup *self,
       guint64       step)
{
  GHashTableIter iter;
  gpointer key;
  guint64 keep = step >= DC_TRAIN_GROUP_REPAIR_STEPS ? step + 1 - DC_TRAIN_GROUP_REPAIR_STEPS : 0;

  g_hash_table_iter_init (&iter, self->gradients);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_ascii_strtoull (key, NULL, 10) < keep)
      g_hash_table_iter_remove (&iter);
  g_hash_table_iter_init (&iter, self->contribs);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_ascii_strtoull (key, NULL, 10) < keep)
      g_hash_table_iter_remove (&iter);
  g_hash_table_iter_init (&iter, self->answered);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_ascii_strtoull (key, NULL, 10) < keep)
      g_hash_table_iter_remove (&iter);
  g_hash_table_iter_init (&iter, self->reports);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_ascii_strtoull (key, NULL, 10) < step)
      g_hash_table_iter_remove (&iter);
}

/* Who of the roster has not sent @what yet (for the timeout's message). */
static char *
missing_names (DcTrainGroup *self,
               gboolean      reports)
{
  g_autoptr(GString) names = g_string_new (NULL);
  DcGptModel *model = dc_train_session_get_model (self->session);

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      /* Before this device summed its shard, what it lacks are
       * contributions to it; after, the others' summed shards. */
      gboolean contribution = !reports && !self->own_reduced;
      g_autofree char *key = reports ? _dc_train_group_report_key (model->step, id)
                             : contribution ? _dc_train_group_contrib_key (model->step + 1,
                                                                           self->digest, id,
                                                                           self->rank)
                             : _dc_train_group_gradient_key (model->step + 1, self->digest, id);

      /* A device gone owes no report. */
      if (i != self->rank && !(reports && _dc_train_group_find_peer (self, id) == NULL)
          && !g_hash_table_contains (reports ? self->reports
                                     : contribution ? self->contribs : self->gradients, key))
        g_string_append_printf (names, "%s“%s”", names->len > 0 ? ", " : "",
                                _dc_train_group_member_name (self, id));
    }
  return g_string_free (g_steal_pointer (&names), FALSE);
}

void
_dc_train_group_start_run (DcTrainGroup *self)
{
  DcTrainingRequest request = self->request;
  GError *error = NULL;
  g_autoptr(GTask) task = NULL;

  request.width = self->config->width;
  request.seq = self->config->seq;
  request.batch = self->config->batch;
  request.steps = self->config->steps;
  request.lr_x1000 = self->config->lr_x1000;
  request.seed = self->config->run_seed;
  request.data = *self->config->dataset_spec != '\0' ? self->config->dataset_spec : "builtin";
  request.simulate_peers = 0;
  request.group = TRUE;  /* the audits' memory counts (dc_train_plan_audit_bytes ()) */
  _dc_train_group_request_set_size (self, &request);
  request.gradient_wire = _dc_train_group_wire (self);
  /* A run from a checkpoint continues it exactly as --resume does: its
   * size and settings, the run's steps. The plan takes the model. */
  self->plan = dc_train_plan_new (&request, self->resume_model,
                                  self->resume_model != NULL ? &self->resume_settings : NULL,
                                  &error);
  if (self->plan != NULL)
    self->resume_model = NULL;
  if (self->plan != NULL && !dc_train_plan_check_memory (self->plan, &error))
    g_clear_pointer (&self->plan, dc_train_plan_free);
  if (self->plan == NULL)
    {
      g_prefix_error (&error, "the run's config cannot be followed: ");
      _dc_train_group_finish (self, error);
      return;
    }
  /* A device that received an Advanced config measures its own memory
   * again, whatever its hello said. */
  if (!_dc_train_group_check_own_memory_for (self, self->config, &error))
    {
      _dc_train_group_finish (self, error);
      return;
    }
  dc_train_plan_set_context (self->plan, self->context);
  self->stop = self->plan->stop;
  self->state = STATE_PREPARING;
  task = g_task_new (self, NULL, prepared_cb, NULL);
  g_task_run_in_thread (task, prepare_worker);
}

/* The starter: min_peers admitted devices are here; send them the config. */
static void
send_config (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) roster = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
  DcMeshRunConfig *config;
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;
  DcTrainSettings settings;

  if (self->resume_bytes != NULL)
    {
      _dc_train_group_send_resume_config (self);
      return;
    }
  config = dc_mesh_run_config_new ();
  for (guint i = 0; i < DC_MESH_RUN_ID_SIZE; i++)
    config->run_id[i] = (guint8) g_random_int_range (0, 256);
  dc_train_settings_init_default (&settings);
  config->width = self->request.width;
  config->seq = self->request.seq;
  _dc_train_group_config_set_size (self, config);
  config->batch = self->request.batch > 0 ? self->request.batch : settings.batch;
  config->steps = self->request.steps > 0 ? self->request.steps : settings.steps;
  config->lr_x1000 = self->request.lr_x1000 > 0 ? self->request.lr_x1000 : settings.lr_x1000;
  config->numeric_rule_id = _dc_train_group_own_hello (self)->numeric_rule_id;
  /* A fresh run seed unless --seed named one (tests, reproducing a run). */
  config->run_seed = self->seed_given ? self->request.seed
                                      : ((guint64) g_random_int () << 32) | g_random_int ();
  config->start_step = 0;
  g_free (config->dataset_spec);
  config->dataset_spec = g_strdup (g_strcmp0 (self->request.data, "builtin") == 0
                                   || self->request.data == NULL ? "" : self->request.data);
  g_free (config->probe_hash);
  config->probe_hash = g_strdup (_dc_train_group_own_hello (self)->probe_hash);
  g_free (config->starter_id);
  config->starter_id = g_strdup (_dc_train_group_own_id (self));
  config->gradient_bf16 = self->request.gradient_wire == DC_TRAIN_WIRE_BF16;
  config->gradient_int8 = self->request.gradient_wire == DC_TRAIN_WIRE_INT8;
  config->chunks_zstd = _dc_train_group_chunks_zstd_for (self->request.gradient_wire);
  self->config = config;

  payload = dc_mesh_run_config_encode (config, &error);
  if (payload == NULL || !_dc_train_group_check_roster_memory (self, config, &error))
    {
      _dc_train_group_finish (self, g_steal_pointer (&error));
      return;
    }
  g_ptr_array_add (roster, g_strdup (_dc_train_group_own_id (self)));
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (_dc_train_group_find_peer (self, dc_peer_get_id (peer)) == NULL
          || !_dc_train_group_admitted (self, peer))
        continue;
      if (roster->len >= DC_MESH_ROSTER_MAX)
        break;
      g_ptr_array_add (roster, g_strdup (dc_peer_get_id (peer)));
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_CONFIG, payload, &error))
        g_message ("cannot send the config to %s: %s", dc_peer_get_name (peer), error->message);
      g_clear_error (&error);
    }
  _dc_train_group_set_roster (self, roster);
  {
    g_autofree char *text = g_strdup_printf ("starting the run with %u devices (seed %"
                                             G_GUINT64_FORMAT ")", roster->len, config->run_seed);

    _dc_train_group_notice (self, "config", NULL, text);
  }
  _dc_train_group_start_run (self);
}

static guint
count_admitted (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
  guint n = 1;

  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (_dc_train_group_find_peer (self, dc_peer_get_id (peer)) != NULL
          && _dc_train_group_admitted (self, peer))
        n++;
    }
  return n;
}

/* After the step whose reports agreed (and whose accusations were
 * checked): the roster of the next step, then that step. */
void
_dc_train_group_next_step (DcTrainGroup *self)
{
  guint64 step = dc_train_session_get_model (self->session)->step;

  /* A checkpoint switch replaces the session the audit's worker reads. */
  if (self->switch_config != NULL && _dc_train_group_wait_audit (self, TRUE))
    return;
  /* The checkpoint is still read and hashed on its worker: parsed_cb ()
   * comes back here (the step's reports were agreed and pruned already). */
  if (_dc_train_group_switch_waits (self))
    {
      self->switch_next_pending = TRUE;
      return;
    }
  self->switch_next_pending = FALSE;
  _dc_train_group_remove_evicted (self, step);
  if (self->switch_config != NULL)
    {
      /* (No gradient is computed ahead now: the reports waited for it.) */
      self->model_version++;
      self->ahead_active = FALSE;
      _dc_train_group_switch_run (self);
    }
  else if (_dc_train_group_enter_admitting (self, step))
    _dc_train_group_advance (self);
  else
    _dc_train_group_start_step (self);
}

void
_dc_train_group_advance (DcTrainGroup *self)
{
  gboolean late = self->deadline != 0 && g_get_monotonic_time () > self->deadline;

  switch (self->state)
    {
    case STATE_WAITING_PEERS:
      if (_dc_train_group_get_mesh (self) != NULL && _dc_train_group_own_id (self) != NULL
          && count_admitted (self) >= self->min_peers)
        send_config (self);
      break;

    case STATE_WAITING_CONFIG:
    case STATE_PREPARING:
    case STATE_VERIFYING:
    case STATE_AUDITING:
    case STATE_COMPUTING:
    case STATE_APPLYING:
    case STATE_DONE:
      break;

    case STATE_WAITING_START:
      if (_dc_train_group_adopt_start (self))
        {
          self->state = STATE_CONNECTING;
          send_start_report (self);
          _dc_train_group_advance (self);
        }
      break;

    case STATE_CONNECTING:
      {
        g_autoptr(GString) missing = g_string_new (NULL);

        resend_start_report (self);
        for (guint i = 0; i < self->roster->len; i++)
          if (i != self->rank && _dc_train_group_find_peer (self, g_ptr_array_index (self->roster,
                                                                                     i)) == NULL)
            g_string_append_printf (missing, "%s%s", missing->len > 0 ? ", " : "",
                                    (const char *) g_ptr_array_index (self->roster, i));
        if (missing->len == 0 && reports_complete (self))
          {
            self->deadline = 0;
            _dc_train_group_start_step (self);
          }
        else if (late && self->state == STATE_CONNECTING)
          {
            g_autofree char *what = g_strdup_printf ("not connected to every ready device of the "
                                                     "run within %u s (not connected: %s)",
                                                     DC_TRAIN_GROUP_CONNECT_S, missing->str);
            _dc_train_group_timeout_error (self, what);
          }
      }
      break;

    case STATE_EXCHANGING:
      {
        g_autofree const float **grads = g_new0 (const float *, self->roster->len);
        DcGptModel *model = dc_train_session_get_model (self->session);

        maybe_reduce (self);
        if (gradients_complete (self, grads))
          {
            ApplyData *data = g_new0 (ApplyData, 1);
            g_autoptr(GTask) task = g_task_new (self, NULL, applied_cb, NULL);

            /* Before the update: the audit recomputes on the weights the
             * step's gradients were computed on (the snapshot). */
            _dc_train_group_launch_audit (self);
            data->grads = g_steal_pointer (&grads);
            data->n = self->roster->len;
            self->state = STATE_APPLYING;
            self->t_apply = g_get_monotonic_time ();
            DC_TRAIN_GROUP_TRACE ("apply step=%" G_GUINT64_FORMAT, model->step + 1);
            self->deadline = 0;
            g_task_set_task_data (task, data, (GDestroyNotify) apply_data_free);
            g_task_run_in_thread (task, apply_worker);
          }
        else if (_dc_train_group_drop_gone (self, model->step + 1))
          /* Someone left before its gradient came: the step again without it. */
          _dc_train_group_start_step (self);
        else if ((_dc_train_group_maybe_repair_contributions (self),
                  self->state != STATE_EXCHANGING))
          ;
        else if ((_dc_train_group_maybe_repair (self), self->state != STATE_EXCHANGING))
          ;
        else if (late)
          {
            g_autofree char *names = missing_names (self, FALSE);
            g_autofree char *what = g_strdup_printf ("no gradient from %s for step %"
                                                     G_GUINT64_FORMAT " within %u s while "
                                                     "connected", names, model->step + 1,
                                                     DC_TRAIN_GROUP_WAIT_S);
            _dc_train_group_timeout_error (self, what);
          }
      }
      break;

    case STATE_WAITING_WEIGHTS:
      _dc_train_group_load_weights (self);
      break;

    case STATE_WAITING_CHECKPOINT:
      if (_dc_train_group_find_peer (self, self->checkpoint_from) == NULL)
        _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                              "“%s” left before its checkpoint arrived",
                              _dc_train_group_member_name (self, self->checkpoint_from));
      else if (late)
        _dc_train_group_timeout_error (self, "the starter's checkpoint did not arrive whole "
                                             "within the wait");
      break;

    case STATE_HOLDING:
      {
        g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
        gboolean joiner = FALSE;

        for (guint i = 0; i < peers->len; i++)
          {
            DcPeer *peer = g_ptr_array_index (peers, i);

            if (_dc_train_group_find_peer (self, dc_peer_get_id (peer)) != NULL
                && !_dc_train_group_in_roster (self, dc_peer_get_id (peer))
                && _dc_train_group_admitted (self, peer))
              joiner = TRUE;
          }
        if (joiner || late)
          {
            self->deadline = 0;
            _dc_train_group_publish_step (self);
          }
      }
      break;

    case STATE_ADMITTING:
      {
        guint64 step = self->step_done;
        g_autoptr(GString) waiting = g_string_new (NULL);

        resend_start_report (self);
        for (guint i = 0; i < self->roster->len; i++)
          {
            const char *id = g_ptr_array_index (self->roster, i);
            g_autofree char *key = _dc_train_group_report_key (step, id);
            DcMeshStepReport *report = g_hash_table_lookup (self->reports, key);
            gpointer value;
            gboolean joiner;

            if (i == self->rank)
              continue;
            joiner = g_hash_table_lookup_extended (self->joiners, id, NULL, &value)
                     && GPOINTER_TO_SIZE (value) == step;
            if (_dc_train_group_find_peer (self, id) == NULL || (joiner && report == NULL))
              {
                g_string_append_printf (waiting, "%s“%s”", waiting->len > 0 ? ", " : "",
                                        _dc_train_group_member_name (self, id));
                continue;
              }
            if (joiner
                && (memcmp (report->weights_hash, self->own_report->weights_hash,
                            DC_MESH_HASH_SIZE) != 0
                    || memcmp (report->optimizer_hash, self->own_report->optimizer_hash,
                               DC_MESH_HASH_SIZE) != 0))
              {
                g_autofree char *theirs = _dc_train_group_hash_to_hex (report->weights_hash);
                g_autofree char *ours =
                  _dc_train_group_hash_to_hex (self->own_report->weights_hash);

                _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                                      "SYNC GUARD: stopped — weight hash mismatch at step %"
                                      G_GUINT64_FORMAT ": “%s” (joining) %s, “%s” %s", step,
                                      _dc_train_group_member_name (self, id), theirs,
                                      _dc_train_group_own_hello (self)->name, ours);
                return;
              }
          }
        if (waiting->len == 0)
          {
            self->deadline = 0;
            _dc_train_group_start_step (self);
          }
        else if (late && self->joining && step == self->config->start_step)
          {
            g_autofree char *what = g_strdup_printf ("not connected to %s (joining after step %"
                                                     G_GUINT64_FORMAT ") within %u s",
                                                     waiting->str, step,
                                                     DC_TRAIN_GROUP_CONNECT_S);
            _dc_train_group_timeout_error (self, what);
          }
        else if (late)
          {
            /* A joiner that never got ready is left out (it stays in
             * joiners: it is not announced again); a roster device that
             * is not connected is dropped by _dc_train_group_start_step (). Were a
             * joiner's report to reach one device just past its deadline
             * and another just before, the rosters would differ and the
             * sync guard would say so at the next step. */
            g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

            for (guint i = 0; i < self->roster->len; i++)
              {
                const char *id = g_ptr_array_index (self->roster, i);
                g_autofree char *key = _dc_train_group_report_key (step, id);
                gpointer value;

                if (i != self->rank
                    && g_hash_table_lookup_extended (self->joiners, id, NULL, &value)
                    && GPOINTER_TO_SIZE (value) == step
                    && (_dc_train_group_find_peer (self, id) == NULL
                        || !g_hash_table_contains (self->reports, key)))
                  {
                    g_autofree char *text = g_strdup_printf ("“%s” did not join within %u s "
                                                             "(no report of step %"
                                                             G_GUINT64_FORMAT "): left out of "
                                                             "the roster",
                                                             _dc_train_group_member_name (self, id),
                                                             DC_TRAIN_GROUP_CONNECT_S, step);

                    _dc_train_group_notice (self, "dropped", _dc_train_group_member_name (self, id),
                                            text);
                    continue;
                  }
                g_ptr_array_add (kept, g_strdup (id));
              }
            _dc_train_group_set_roster (self, kept);
            self->deadline = 0;
            _dc_train_group_start_step (self);
          }
      }
      break;

    case STATE_ROLLING_BACK:
      _dc_train_group_drop_gone (self, self->step_done + 1);
      if (self->digest == self->rollback_digest)
        _dc_train_group_start_step (self);
      else if (late)
        _dc_train_group_timeout_error (self,
                                       "a device took the last step with another roster than this "
                                             "one's, and no device left to explain it");
      break;

    case STATE_REPORTING:
      /* A checkpoint switch frees what a gradient computed ahead reads,
       * and verifying accusations computes on the same trainer: both wait
       * for its worker (computed_cb () comes back here). */
      if (self->compute_running
          && (self->switch_config != NULL || self->accusations->len > 0))
        break;
      /* Agreed already; the switch waits for its checkpoint's read. */
      if (self->switch_next_pending)
        break;
      if (reports_complete (self))
        {
          DcGptModel *model = dc_train_session_get_model (self->session);

          self->deadline = 0;
          _dc_train_group_emit_agreed (self);
          prune (self, model->step);
          if (model->step >= self->stop)
            _dc_train_group_finish (self, NULL);
          else if (!_dc_train_group_verify_accusations (self))
            _dc_train_group_next_step (self);
        }
      else if (self->state == STATE_REPORTING && late)
        {
          g_autofree char *names = missing_names (self, TRUE);
          g_autofree char *what = g_strdup_printf ("no step report from %s for step %"
                                                   G_GUINT64_FORMAT " within %u s while "
                                                   "connected", names,
                                                   self->own_report->step, DC_TRAIN_GROUP_WAIT_S);
          _dc_train_group_timeout_error (self, what);
        }
      break;
    }
}

void
_dc_train_group_handle_report (DcTrainGroup *self,
                               DcPeer       *peer,
                               GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(DcMeshStepReport) report = dc_mesh_step_report_decode (payload, &error);
  g_autofree char *key = NULL;
  guint64 current;

  if (report == NULL)
    {
      g_message ("a malformed step report from %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  /* Before the config came (another device may be quicker than the
   * starter's channel), kept: the run id is checked where it is used. */
  if (self->config != NULL
      && memcmp (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0)
    {
      /* A device that switched to the leader's checkpoint before this one
       * (which still waits for a report of the old run): kept for the
       * switch, apart, since the step numbers of the two runs overlap. */
      if (self->switch_config != NULL
          && memcmp (report->run_id, self->switch_config->run_id, DC_MESH_RUN_ID_SIZE) == 0
          && report->step >= self->switch_config->start_step
          && report->step <= self->switch_config->start_step + 1)
        {
          key = _dc_train_group_report_key (report->step, dc_peer_get_id (peer));
          g_hash_table_replace (self->switch_reports, g_steal_pointer (&key),
                                g_steal_pointer (&report));
        }
      return;
    }
  current = self->step_done;
  /* A joiner waits for the leader's report of the step it joins after. */
  if (self->joining && self->step_done < self->config->start_step)
    current = self->config->start_step;
  /* Only the step just taken and the next matter: the rest is stale or a lie. */
  if (report->step + 1 < current || report->step > current + 1)
    return;
  DC_TRAIN_GROUP_TRACE ("report_in from=%s step=%" G_GUINT64_FORMAT " recv=%" G_GINT64_FORMAT,
                        dc_peer_get_name (peer), report->step,
                        dc_peer_get_message_received_us (peer));
  key = _dc_train_group_report_key (report->step, dc_peer_get_id (peer));
  g_hash_table_replace (self->reports, g_steal_pointer (&key), g_steal_pointer (&report));
}

/* Whether @assembly collects an object that @chunk continues. */
static gboolean
assembly_expects (const Assembly    *assembly,
                  const DcMeshChunk *chunk)
{
  return assembly != NULL && assembly->active && assembly->step == chunk->step
         && assembly->total == chunk->total && assembly->next == chunk->index;
}

/* A GRADIENTS chunk from its sender (a contribution it wrote, or its
 * summed shard), or a REPAIR chunk (a contribution from its author, or
 * another reducer's summed shard from a device that has it; chunk.rank is
 * the author's or reducer's rank). */
void
_dc_train_group_handle_chunk (DcTrainGroup *self,
                              DcPeer       *peer,
                              guint         type,
                              GBytes       *payload)
{
  g_auto(DcMeshChunk) chunk = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) object = NULL;
  const char *from = dc_peer_get_id (peer);
  g_autofree char *assembly_key = NULL;
  const char *id;
  gboolean repair = type == DC_MESH_MSG_REPAIR;
  Assembly *assembly;
  DcGptModel *model;
  guint64 largest, step;

  if (self->session == NULL || !_dc_train_group_in_roster (self, from))
    return;
  /* The chunk's SHA-256 was taken on the peer's receipt worker. */
  if (!dc_mesh_chunk_decode_prehashed (type, payload, _dc_train_group_gradient_cap (self),
                                       dc_peer_get_message_data_hash (peer), &chunk, &error))
    {
      g_message ("a malformed gradient chunk from %s: %s", dc_peer_get_name (peer), error->message);
      /* Named to the front end too (rate-limited): a chunk that fails its
       * own hash is not used, and the gradient it belonged to is repaired. */
      _dc_train_group_refuse (self, peer, type, error->message);
      return;
    }
  DC_TRAIN_GROUP_TRACE ("chunk from=%s type=%u step=%" G_GUINT64_FORMAT " rank=%u index=%u "
                        "count=%u recv=%" G_GINT64_FORMAT, dc_peer_get_name (peer), type,
                        chunk.step, chunk.rank, chunk.index, chunk.count,
                        dc_peer_get_message_received_us (peer));
  /* An answer to this device's contribution request for an audit. */
  if (repair && _dc_train_group_audit_take_chunk (self, peer, &chunk))
    return;
  model = dc_train_session_get_model (self->session);
  step = self->step_done + 1;  /* not model->step: a worker may be stepping it */
  /* The largest shard object: a summed shard 0 of a roster of 64 (hashes)
   * or the whole gradient of a roster of one; the header says which. */
  largest = DC_TRAIN_SHARD_HEADER_SIZE
            + (guint64) DC_TRAIN_GRADIENT_ROSTER_MAX * DC_TRAIN_SHARD_HASH_SIZE
            + (guint64) model->n_params * sizeof (float);
  if (memcmp (chunk.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || chunk.total > largest || chunk.step + 1 < step || chunk.step > step + 1
      || (chunk.step + 1 == step && self->state != STATE_REPORTING
          && self->state != STATE_AUDITING))
    return;
  /* A repair is of the step being taken, by a rank of this device's roster. */
  if (repair && (chunk.step != step || chunk.rank >= self->roster->len || chunk.rank == self->rank
                 || (self->state != STATE_EXCHANGING && self->state != STATE_COMPUTING)))
    return;
  id = repair ? g_ptr_array_index (self->roster, chunk.rank) : from;

  if (repair)
    assembly_key = g_strconcat ("repair/", from, NULL);
  else
    {
      /* A sender's summed shard may stream while its contributions still
       * go out (dc-train-group-stream.c: its chunks interleave with theirs,
       * each object's in order): chunk 0 says its kind, a later chunk
       * belongs to the object in progress that expects it (the sender
       * streams early only when the two sizes differ). */
      g_autofree char *summed_key = g_strconcat ("summed/", from, NULL);
      Assembly *summed_assembly = g_hash_table_lookup (self->assemblies, summed_key);
      Assembly *contrib_assembly = g_hash_table_lookup (self->assemblies, from);
      gboolean to_summed;

      if (chunk.index == 0)
        {
          gsize size = chunk.data != NULL ? g_bytes_get_size (chunk.data) : 0;

          to_summed = size > 4
                      && ((const guint8 *) g_bytes_get_data (chunk.data, NULL))[4]
                         == DC_TRAIN_SHARD_SUMMED;
        }
      else
        to_summed = assembly_expects (summed_assembly, &chunk)
                    && !assembly_expects (contrib_assembly, &chunk);
      assembly_key = to_summed ? g_steal_pointer (&summed_key) : g_strdup (from);
    }
  assembly = g_hash_table_lookup (self->assemblies, assembly_key);
  if (assembly == NULL)
    {
      assembly = g_new0 (Assembly, 1);
      assembly->assembler = dc_mesh_chunk_assembler_new (type, largest);
      g_hash_table_insert (self->assemblies, g_strdup (assembly_key), assembly);
    }
  if (!dc_mesh_chunk_assembler_push (assembly->assembler, &chunk, &object, &error))
    {
      /* A sender queues whole objects in order: a chunk of another object
       * means the one before was cut short (the sender restarted the step),
       * or it was done (a contribution, then the next object). */
      g_clear_error (&error);
      dc_mesh_chunk_assembler_free (assembly->assembler);
      assembly->assembler = dc_mesh_chunk_assembler_new (type, largest);
      if (!dc_mesh_chunk_assembler_push (assembly->assembler, &chunk, &object, &error))
        {
          g_message ("a bad gradient chunk from %s: %s", dc_peer_get_name (peer), error->message);
          assembly->active = FALSE;
          return;
        }
    }
  assembly->active = object == NULL;
  assembly->step = chunk.step;
  assembly->total = chunk.total;
  assembly->next = chunk.index + 1;
  if (object == NULL)
    {
      /* A contribution to this device's shard, chunk by chunk, for the
       * streamed reduce (its last chunk goes with the whole object). */
      if (!repair && chunk.step == step && !g_str_has_prefix (assembly_key, "summed/"))
        for (guint i = 0; i < self->roster->len; i++)
          if (i == chunk.rank && g_strcmp0 (g_ptr_array_index (self->roster, i), from) == 0)
            _dc_train_group_stream_chunk (self, i, &chunk);
      return;
    }
  dc_mesh_chunk_assembler_free (assembly->assembler);
  assembly->assembler = dc_mesh_chunk_assembler_new (type, largest);

  {
    gsize size;
    const guint8 *data = g_bytes_get_data (object, &size);
    DcTrainShardHeader header;
    Gradient *gradient;
    guint stashed = 0;
    GHashTableIter iter;
    gpointer key;
    gboolean summed;
    GHashTable *table;
    g_autofree char *prefix = g_strdup_printf ("%" G_GUINT64_FORMAT "/", chunk.step);
    g_autofree char *infix = g_strdup_printf ("/%s", id);
    DcTrainShardLayout layout;

    _dc_train_group_layout (model, &layout);
    if (!dc_train_shard_header_parse (data, size, &layout, &header, &error))
      {
        g_message ("a gradient from %s with a bad header: dropped (%s)", dc_peer_get_name (peer),
                   error->message);
        return;
      }
    /* The run's CONFIG says the element type every device sends: another
     * one would be summed with values rounded otherwise. */
    if (header.wire != _dc_train_group_wire (self))
      {
        g_autofree char *why = g_strdup_printf ("a gradient shard in %s, but the run's CONFIG "
                                                "says %s",
                                                dc_train_wire_to_string (header.wire),
                                                dc_train_wire_to_string (_dc_train_group_wire (self)));

        g_message ("a gradient from %s: dropped (%s)", dc_peer_get_name (peer), why);
        _dc_train_group_refuse (self, peer, type, why);
        return;
      }
    {
      /* Kept in float32 (bf16 widened: exact); a bf16 NaN or infinity is
       * refused here. */
      GBytes *wide = dc_train_shard_decode (object, &header, &error);

      if (wide == NULL)
        {
          g_message ("a gradient from %s: dropped (%s)", dc_peer_get_name (peer), error->message);
          _dc_train_group_refuse (self, peer, type, error->message);
          return;
        }
      g_bytes_unref (object);
      object = wide;
    }
    summed = header.kind == DC_TRAIN_SHARD_SUMMED;
    DC_TRAIN_GROUP_TRACE ("object from=%s summed=%d shard=%u step=%" G_GUINT64_FORMAT,
                          dc_peer_get_name (peer), (int) summed, header.shard, chunk.step);
    /* A contribution's author and a summed shard's reducer is the chunk's
     * rank; a reducer sums only its own shard. */
    if (chunk.rank >= header.roster_size || (summed && header.shard != chunk.rank))
      {
        g_message ("a gradient shard %u of rank %u from %s: dropped", header.shard, chunk.rank,
                   dc_peer_get_name (peer));
        return;
      }
    /* A contribution to another shard than this device's own comes only to
     * that shard's auditor on an audit step (send_own_gradient ()); for
     * this roster that is known here, so nothing else is kept. */
    if (!summed && header.digest == self->digest && header.roster_size == self->roster->len
        && header.shard != self->rank)
      {
        g_message ("a contribution to shard %u of step %" G_GUINT64_FORMAT " from %s, which "
                   "this device does not audit: dropped", header.shard, chunk.step,
                   dc_peer_get_name (peer));
        return;
      }
    if (self->fault_drop != 0 && chunk.step == self->fault_drop && summed
        && (!repair || self->fault_drop_repair))
      {
        /* Test only (DC_TEST_FAULT=drop-gradient@STEP, drop-repair@STEP):
         * the summed shards of STEP (the roster's gradient) are lost. */
        g_message ("DC_TEST_FAULT: dropped a %s of step %" G_GUINT64_FORMAT " from %s",
                   repair ? "repair" : "gradient", chunk.step, dc_peer_get_name (peer));
        return;
      }
    if (self->fault_drop_contrib != 0 && chunk.step == self->fault_drop_contrib && !summed
        && !repair)
      {
        /* Test only (DC_TEST_FAULT=drop-contribution@STEP). */
        g_message ("DC_TEST_FAULT: dropped a contribution of step %" G_GUINT64_FORMAT " from %s",
                   chunk.step, dc_peer_get_name (peer));
        return;
      }
    if (repair)
      {
        g_autofree char *own_key = summed
                                   ? _dc_train_group_gradient_key (chunk.step, self->digest, id)
                                   : _dc_train_group_contrib_key (chunk.step, self->digest, id,
                                                                  header.shard);

        /* Another roster's shard (the repairer kept several), or one that
         * came meanwhile: nothing to do. */
        if (header.digest != self->digest || header.roster_size != self->roster->len
            || g_hash_table_contains (summed ? self->gradients : self->contribs, own_key))
          return;
        g_message ("repaired the %s of step %" G_GUINT64_FORMAT " from %s (sent by %s)",
                   summed ? "gradient" : "contribution", chunk.step,
                   _dc_train_group_member_name (self, id), dc_peer_get_name (peer));
      }
    table = summed ? self->gradients : self->contribs;
    g_hash_table_iter_init (&iter, table);
    while (g_hash_table_iter_next (&iter, &key, NULL))
      if (g_str_has_prefix (key, prefix) && strstr (key, infix) != NULL)
        stashed++;
    /* A contribution per shard at most (an auditor gets a second one). */
    if (stashed >= DC_TRAIN_GROUP_STASH_MAX * (summed ? 1 : 2))
      {
        g_message ("more than %u gradients of step %" G_GUINT64_FORMAT " from %s: dropped",
                   DC_TRAIN_GROUP_STASH_MAX, chunk.step, dc_peer_get_name (peer));
        return;
      }
    if (chunk.step + 1 == step)
      {
        /* A shard of the step just taken: its sender is taking it again
         * with a smaller roster (it lacked the shard of a device that
         * left, which reached this one). */
        if (header.digest == self->digest)
          return;  /* the same step again: nothing new */
        /* The rollback rewrites the model a gradient computed ahead may
         * still read; that gradient is dropped (the model's version). */
        wait_worker (self);
        self->model_version++;
        _dc_train_group_rollback (self, peer, header.digest);
        /* … and this shard is one of the step to take again. */
      }
    gradient = g_new0 (Gradient, 1);
    gradient->rank = chunk.rank;
    memcpy (&gradient->loss, &header.loss_bits, 4);
    gradient->object = g_steal_pointer (&object);
    g_hash_table_replace (table,
                          summed ? _dc_train_group_gradient_key (chunk.step, header.digest, id)
                          : _dc_train_group_contrib_key (chunk.step, header.digest, id,
                                                         header.shard),
                          gradient);
    /* Whole: the streamed reduce takes what it has not had chunk by chunk. */
    if (!summed && chunk.step == step && header.digest == self->digest
        && header.roster_size == self->roster->len && header.shard == self->rank
        && chunk.rank < self->roster->len
        && g_strcmp0 (g_ptr_array_index (self->roster, chunk.rank), id) == 0)
      _dc_train_group_stream_object (self, chunk.rank, gradient->object);
  }
}
