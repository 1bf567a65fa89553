/* dc-train-group-audit.c: audits: recomputing another device's gradient,
 * accusations, and their verification by every device; see
 * dc-train-group.h and dc-train-group-private.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

/* A gradient's hash in the sharded exchange: SHA-256 of the SHA-256 of
 * each of its n_ranks shards' float32 values, in shard order, so that it
 * can be compared with the contribution hashes the reducers list in their
 * summed shards (_dc_train_group_received_hash ()). */
void
_dc_train_group_shards_hash (const float              *grads,
                             const DcTrainShardLayout *layout,
                             guint                     n_ranks,
                             guint8       out[DC_MESH_HASH_SIZE])
{
  g_autofree guint8 *hashes = g_malloc ((gsize) n_ranks * DC_MESH_HASH_SIZE);
  g_autoptr(GBytes) all = NULL;

  for (guint r = 0; r < n_ranks; r++)
    {
      gsize start, length;
      g_autoptr(GBytes) shard = NULL;

      dc_train_shard_range (layout, n_ranks, r, &start, &length);
      shard = g_bytes_new_static (grads + start, length * sizeof (float));
      dc_mesh_train_hash (shard, hashes + (gsize) r * DC_MESH_HASH_SIZE);
    }
  all = g_bytes_new_static (hashes, (gsize) n_ranks * DC_MESH_HASH_SIZE);
  dc_mesh_train_hash (all, out);
}

/* The contribution hashes a kept summed shard lists (after its values). */
static const guint8 *
summed_hashes (GBytes *object)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (object, &size);

  return dc_train_shard_listed_hashes (data, size);
}

/* Rank @rank's gradient at @step as the roster used it: the hashes of its
 * contributions that the reducers listed in their summed shards, hashed as
 * _dc_train_group_shards_hash () does. Every device holds the same summed
 * shards (they are the step's gradient), so every one gets the same hash.
 * FALSE when a summed shard is not here. */
gboolean
_dc_train_group_received_hash (DcTrainGroup *self,
                               guint64       step,
                               guint         rank,
                               guint8        out[DC_MESH_HASH_SIZE])
{
  guint n = self->roster->len;
  g_autofree guint8 *hashes = g_malloc ((gsize) n * DC_MESH_HASH_SIZE);
  g_autoptr(GBytes) all = NULL;

  for (guint r = 0; r < n; r++)
    {
      g_autofree char *key = _dc_train_group_gradient_key (step, self->digest,
                                                           g_ptr_array_index (self->roster, r));
      Gradient *summed = g_hash_table_lookup (self->gradients, key);
      const guint8 *data;

      if (summed == NULL)
        return FALSE;
      data = summed_hashes (summed->object);
      memcpy (hashes + (gsize) r * DC_MESH_HASH_SIZE,
              data + (gsize) rank * DC_TRAIN_SHARD_HASH_SIZE, DC_MESH_HASH_SIZE);
    }
  all = g_bytes_new_static (hashes, (gsize) n * DC_MESH_HASH_SIZE);
  dc_mesh_train_hash (all, out);
  return TRUE;
}

/* An audit of step S, off the step's critical path: drawn at the end of
 * S + 1's exchange from the hash of S + 1's contribution hashes (every
 * byte of S was sent before any of them could be known), recomputed on the
 * audit trainer of the session (its own buffers, on the CPU) from a copy
 * of the weights before S, while S + 1's update, its report and S + 2's
 * compute and exchange go on. The audited reducer's shard is re-summed
 * from the contributions to it, which the auditor asks their authors for
 * once the draw is known. */
struct _AuditJob
{
  guint64       step;
  guint64       digest;     /* of S's roster */
  guint         rank;       /* the audited rank */
  guint         n_ranks;
  guint8        received[DC_MESH_HASH_SIZE];  /* its gradient as the roster used it */
  float        *weights;    /* before S: this job's own copy of the snapshot, which
                             * the compute of a step taken again or the next rewrites
                             * while the job may still run; made on a worker
                             * (copy_worker ()) */
  gboolean      copying;    /* weights are being copied (the group's worker_lock) */
  guint64       weights_step;
  float        *grads;      /* out: the recomputed gradient */
  guint8        hash[DC_MESH_HASH_SIZE];  /* out: its shards' hash */
  gint64        us;         /* out: how long it took */
  gint64        paused_us;  /* out: of us, waiting for this device's own gradient */
  gboolean      begun;      /* audit_gate () ran once */
  guint         beside;     /* out: kernels begun while it computed (gate off) */
  DcTrainGroup *group;      /* for audit_gate () (the worker's task holds it) */
  gboolean      after_report; /* out: DC_TEST_FAULT=audit-after-report saw the report */
  gint          priority;   /* out: the weakest DcParallelPriority it ran at (read back) */
  gboolean      computed;   /* the recomputation is done (main thread) */
  /* The re-sum of shard `rank` (main thread only). */
  char        **ids;        /* S's roster */
  guint         own_rank;   /* this device's rank in it */
  GBytes       *summed;     /* the audited rank's summed shard of S */
  guint8       *listed;     /* n × 32: the contribution hashes it lists, rank order */
  GBytes      **fetched;    /* n: the contributions to it, checked against listed
                             * (this device's own from the start; the audited rank's
                             * is the recomputation) */
  DcMeshChunkAssembler **assemblers;  /* n: authors' answers as they arrive */
  guint         fetch_tries;
  gint64        fetch_next;      /* monotonic µs: when to ask again */
  gint64        fetch_deadline;  /* monotonic µs: when the re-sum is given up */
};

/* An accusation of (step, rank) by @auditor, at most one per auditor and
 * step (an auditor audits one rank a step). */
static void
add_accusation (DcTrainGroup *self,
                guint64       step,
                guint         rank,
                const char   *auditor)
{
  Accusation *accusation;

  for (guint i = 0; i < self->accusations->len; i++)
    {
      Accusation *other = g_ptr_array_index (self->accusations, i);

      if (other->step == step && g_str_equal (other->auditor, auditor))
        return;
    }
  accusation = g_new0 (Accusation, 1);
  accusation->step = step;
  accusation->rank = rank;
  accusation->auditor = g_strdup (auditor);
  accusation->accused = g_strdup (g_ptr_array_index (self->roster, rank));
  g_ptr_array_add (self->accusations, accusation);
}

/* The authors a job still waits for: their contribution to the audited
 * shard has not come (nor been refused). */
static guint
fetch_missing (const AuditJob *job)
{
  guint missing = 0;

  for (guint j = 0; j < job->n_ranks; j++)
    if (j != job->rank && job->fetched[j] == NULL)
      missing++;
  return missing;
}

/* The audited rank's summed shard re-summed here, when every contribution
 * to it is at hand: this device's own, the audited device's as recomputed
 * here, and the others' as their authors sent them on request
 * (_dc_train_group_audit_take_chunk ()), each checked against the hash the
 * audited reducer listed for it. -1: cannot tell (one did not come within
 * DC_TRAIN_GROUP_AUDIT_FETCH_S, or its author left); 0: it reproduces;
 * 1: it does not. */
static int
check_summed (DcTrainGroup   *self,
              const AuditJob *job)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint n = job->n_ranks, a = job->rank;
  g_autofree const float **values = g_new0 (const float *, n);
  g_autofree float *sum = NULL;
  gsize start, length, n_values;
  const float *received;
  DcTrainShardLayout layout;

  _dc_train_group_layout (model, &layout);
  dc_train_shard_range (&layout, n, a, &start, &length);
  for (guint j = 0; j < n; j++)
    {
      if (j == a)
        {
          values[j] = job->grads + start;
          continue;
        }
      if (job->fetched[j] == NULL)
        {
          g_message ("the re-sum of the summed shard of “%s” at step %" G_GUINT64_FORMAT
                     " is skipped: the contribution of “%s” to it did not come",
                     _dc_train_group_member_name (self, job->ids[a]), job->step,
                     _dc_train_group_member_name (self, job->ids[j]));
          return -1;
        }
      values[j] = _dc_train_group_shard_values (job->fetched[j], &n_values);
      if (n_values != length)
        return -1;
    }
  sum = g_new (float, MAX (length, 1));
  dc_gpt_trainer_combine_gradients (values, n, length, sum);
  /* As the reducer rounded its summed shard (a bf16 or int8 run). */
  dc_train_session_round (self->session, sum, length, NULL);
  received = _dc_train_group_shard_values (job->summed, &n_values);
  return n_values != length || memcmp (sum, received, length * sizeof (float)) != 0;
}

/* The audited rank's gradient as the roster used it (the contribution
 * hashes in the summed shards, read when the audit was drawn) against this
 * device's recomputation, and its summed shard re-summed (check_summed ()):
 * a difference is sent to the roster as AUDIT. It goes before this
 * device's report of S + 2 (_dc_train_group_wait_audit ()), so everyone
 * has it when it has that report; every device, this one included,
 * checks the accusation at the end of that step
 * (_dc_train_group_verify_accusations ()). */
static void
check_audit (DcTrainGroup *self,
             AuditJob     *job)
{
  DcMeshAudit audit = { 0 };
  g_autoptr(GBytes) payload = NULL;
  const char *id;
  g_autofree char *text = NULL;
  gboolean gradient_differs, sum_differs;

  /* Ranks of another roster: a device left or joined in between, and
   * every device ignores accusations of that step (handle_audit ()). */
  if (job->digest != self->digest)
    {
      g_message ("the audit of step %" G_GUINT64_FORMAT " is dropped: the roster changed "
                 "before it was done", job->step);
      return;
    }
  if (self->fault_false_audit != 0 && job->step >= self->fault_false_audit)
    {
      /* Test only (DC_TEST_FAULT=false-audit@STEP): a dishonest auditor
       * accuses a gradient that reproduces. */
      job->hash[0] = (guint8) (job->received[0] ^ 1u);
      g_message ("DC_TEST_FAULT: a false accusation of rank %u at step %" G_GUINT64_FORMAT,
                 job->rank, job->step);
    }
  gradient_differs = memcmp (job->received, job->hash, DC_MESH_HASH_SIZE) != 0;
  sum_differs = !gradient_differs && check_summed (self, job) == 1;
  if (!gradient_differs && !sum_differs)
    return;
  id = g_ptr_array_index (self->roster, job->rank);
  memcpy (audit.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  audit.step = job->step;
  audit.rank = job->rank;
  memcpy (audit.gradient_hash, job->hash, DC_MESH_HASH_SIZE);
  payload = dc_mesh_audit_encode (&audit);
  _dc_train_group_send_to_roster (self, DC_MESH_MSG_AUDIT, payload);
  add_accusation (self, audit.step, audit.rank, _dc_train_group_own_id (self));
  text = g_strdup_printf ("AUDIT: the %s of “%s” at step %" G_GUINT64_FORMAT " does not "
                          "reproduce here: accused to the group, which checks it",
                          sum_differs ? "summed shard" : "gradient",
                          _dc_train_group_member_name (self, id), audit.step);
  g_message ("%s", text);
}

/* Until @job's weights are copied (copy_worker ()); any thread. */
static void
wait_copied (AuditJob *job)
{
  DcTrainGroup *self = job->group;

  g_mutex_lock (&self->worker_lock);
  while (job->copying)
    g_cond_wait (&self->worker_cond, &self->worker_lock);
  g_mutex_unlock (&self->worker_lock);
}

/**
 * _dc_train_group_audit_copy_wait:
 * @buffer: a snapshot buffer about to be rewritten or freed
 *
 * Waits until no audit launch copies from @buffer (at most the copy of one
 * snapshot's weights, which started at the end of the step before). Any
 * thread: the compute worker's snapshot calls it before it writes.
 */
void
_dc_train_group_audit_copy_wait (DcTrainGroup *self,
                                 const float  *buffer)
{
  g_mutex_lock (&self->worker_lock);
  while (buffer != NULL && self->audit_copy_from == buffer)
    g_cond_wait (&self->worker_cond, &self->worker_lock);
  g_mutex_unlock (&self->worker_lock);
}

void
_dc_train_group_audit_job_free (AuditJob *job)
{
  if (job == NULL)
    return;
  /* A job dropped while its weights are copied (a step taken again draws
   * anew): the copy writes into it until it ends. */
  if (job->group != NULL)
    wait_copied (job);
  for (guint j = 0; job->fetched != NULL && j < job->n_ranks; j++)
    {
      g_clear_pointer (&job->fetched[j], g_bytes_unref);
      g_clear_pointer (&job->assemblers[j], dc_mesh_chunk_assembler_free);
    }
  g_free (job->fetched);
  g_free (job->assemblers);
  g_clear_pointer (&job->summed, g_bytes_unref);
  g_free (job->listed);
  g_strfreev (job->ids);
  g_free (job->weights);
  g_free (job->grads);
  g_free (job);
}

/* Audits in the step's waits (docs/ARCHITECTURE.md), with
 * DC_TRAIN_GROUP_AUDIT_GATE=1 (off by default: measured slower on the H200
 * host, docs/BENCHMARKS.md). An audit step costs
 * every device a whole second gradient; run beside the step's own
 * gradient, both shared one process's pool and cores (two callers, one
 * set of helpers, 4 + 1 threads on 4 cores), and the step's compute grew
 * by more than the audit's own work. The audit instead runs only while
 * this device's gradient does not compute: in the exchange's waits, after
 * the gradient was sent, and while the step waits for its verdict, when
 * it goes first and a gradient computed ahead yields instead. Either
 * waits only between two kernels (dc_parallel_set_gate ()); the hashes
 * and the verdict are the same. */

/* The compute worker begins (@computing) or ends this device's gradient.
 * Compute worker. */
void
_dc_train_group_lane_compute (DcTrainGroup *self,
                              gboolean      computing)
{
  g_mutex_lock (&self->lane_lock);
  self->lane_computing = computing;
  if (computing)
    self->lane_ahead_paused_us = 0;
  g_cond_broadcast (&self->lane_cond);
  g_mutex_unlock (&self->lane_lock);
}

/* The step waits for the running audit's verdict (STATE_AUDITING), or no
 * longer. Main thread. */
void
_dc_train_group_lane_urgent (DcTrainGroup *self,
                             gboolean      urgent)
{
  g_mutex_lock (&self->lane_lock);
  /* Atomic: the audit's caller reads it without the lock while it waits
   * for the idle pool (dc_parallel_set_idle ()). */
  g_atomic_int_set (&self->lane_urgent, urgent);
  g_cond_broadcast (&self->lane_cond);
  g_mutex_unlock (&self->lane_lock);
}

/* Before each kernel of the audit's recomputation: waits while this
 * device's own gradient computes, unless the step waits for this audit.
 * Audit worker. */
static void
audit_gate (gpointer data)
{
  AuditJob *job = data;
  DcTrainGroup *self = job->group;

  g_mutex_lock (&self->lane_lock);
  if (self->fault_audit_overlap && !job->begun)
    {
      /* Test only (DC_TEST_FAULT=audit-overlap): the first kernel waits
       * until this device's gradient computes (computed ahead, it starts
       * right after the Adam step) or the step waits for this audit, at
       * most a second (the run's last audits have no gradient after them),
       * so that every audit meets the gate. */
      gint64 end = g_get_monotonic_time () + G_TIME_SPAN_SECOND;

      while (!self->lane_computing && !self->lane_urgent
             && g_cond_wait_until (&self->lane_cond, &self->lane_lock, end))
        ;
    }
  job->begun = TRUE;
  if (self->lane_gate && self->lane_computing && !self->lane_urgent)
    {
      gint64 start = g_get_monotonic_time ();

      while (self->lane_computing && !self->lane_urgent)
        g_cond_wait (&self->lane_cond, &self->lane_lock);
      job->paused_us += g_get_monotonic_time () - start;
    }
  else if (self->lane_computing && !self->lane_urgent)
    job->beside++;  /* without DC_TRAIN_GROUP_AUDIT_GATE=1 */
  g_mutex_unlock (&self->lane_lock);
}

/* Before each kernel of a gradient computed ahead: waits while the step
 * waits for the running audit's verdict (its report cannot go out before
 * it). Compute worker. */
void
_dc_train_group_ahead_gate (gpointer data)
{
  DcTrainGroup *self = data;

  g_mutex_lock (&self->lane_lock);
  /* Not for an audit at idle priority: once urgent, its kernels run on the
   * step's pool beside this gradient, and the cores of the devices waiting
   * for this one's report help both (pausing the gradient left them idle:
   * measured on the H200 host, docs/BENCHMARKS.md "Audits at idle
   * priority"). */
  if (self->lane_gate && self->lane_urgent && self->lane_auditing)
    {
      gint64 start = g_get_monotonic_time ();

      self->lane_computing = FALSE;
      g_cond_broadcast (&self->lane_cond);
      while (self->lane_urgent && self->lane_auditing)
        g_cond_wait (&self->lane_cond, &self->lane_lock);
      self->lane_computing = TRUE;
      self->lane_ahead_paused_us += g_get_monotonic_time () - start;
    }
  g_mutex_unlock (&self->lane_lock);
}

static void
audit_worker (GTask        *task,
              gpointer      source,
              gpointer      data,
              GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  AuditJob *job = data;
  GError *error = NULL;
  gint64 start = g_get_monotonic_time ();
  DcGptTrainer *trainer = dc_train_session_get_audit_trainer (self->session, &error);
  DcGptModel *model;
  DcParallelStats before, after;
  DcTrainShardLayout layout;
  float loss;
  gboolean ok;

  if (trainer == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  model = dc_gpt_trainer_get_model (trainer);
  wait_copied (job);
  memcpy (model->params, job->weights, model->n_params * sizeof (float));
  model->step = job->weights_step;
  job->grads = g_new (float, model->n_params);
  g_mutex_lock (&self->lane_lock);
  self->lane_auditing = TRUE;
  g_mutex_unlock (&self->lane_lock);
  dc_parallel_set_gate (audit_gate, job);
  /* The kernels on the idle pool until the step waits for the verdict. */
  if (self->audit_idle)
    dc_parallel_set_idle (&self->lane_urgent);
  dc_parallel_get_stats (&before);
  ok = dc_gpt_trainer_compute_gradients (trainer, job->rank, job->n_ranks, job->grads, &loss,
                                         &error);
  dc_parallel_get_stats (&after);
  /* This thread goes back to GTask's pool. */
  dc_parallel_set_idle (NULL);
  dc_parallel_set_gate (NULL, NULL);
  /* What its kernels ran at, read back by the idle pool's helpers; normal
   * when none ran there (one thread, or urgent from the start). */
  job->priority = after.idle_jobs > before.idle_jobs ? dc_parallel_get_idle_pool_priority ()
                                                     : DC_PARALLEL_PRIORITY_NORMAL;
  g_mutex_lock (&self->lane_lock);
  self->lane_auditing = FALSE;
  g_cond_broadcast (&self->lane_cond);
  g_mutex_unlock (&self->lane_lock);
  if (!ok)
    {
      g_task_return_error (task, error);
      return;
    }
  /* Rounded as its author rounded what it sent (a bf16 run): the hashes
   * compared are of the values the roster summed. */
  dc_train_session_round_gradient (self->session, job->grads, job->n_ranks, NULL);
  _dc_train_group_layout (model, &layout);
  _dc_train_group_shards_hash (job->grads, &layout, job->n_ranks, job->hash);
  job->us = g_get_monotonic_time () - start;
  if (self->fault_audit_after_report)
    {
      /* Test only (DC_TEST_FAULT=audit-after-report): the verdict waits
       * until this device published its report of the audited step (at
       * most DC_TRAIN_GROUP_WAIT_S), which an audit on the step's own
       * path never sees. */
      gint64 end = g_get_monotonic_time () + DC_TRAIN_GROUP_WAIT_S * G_TIME_SPAN_SECOND;

      g_mutex_lock (&self->audit_lock);
      while (self->published_step < job->step
             && g_cond_wait_until (&self->audit_cond, &self->audit_lock, end))
        ;
      job->after_report = self->published_step >= job->step;
      g_mutex_unlock (&self->audit_lock);
    }
  g_task_return_boolean (task, TRUE);
}

static void start_audit (DcTrainGroup *self,
                         AuditJob     *job);

/* Asks the authors whose contribution to the audited shard has not come
 * for it (contribution-request); they keep their own
 * DC_TRAIN_GROUP_REPAIR_STEPS steps. */
static void
fetch_contributions (DcTrainGroup *self,
                     AuditJob     *job)
{
  DcTrainContribRequest request = { 0 };
  g_autoptr(GBytes) payload = NULL;

  memcpy (request.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  request.step = job->step;
  request.digest = job->digest;
  request.shard = job->rank;
  request.roster_size = job->n_ranks;
  payload = dc_train_contrib_request_write (&request);
  job->fetch_tries++;
  job->fetch_next = g_get_monotonic_time ()
                    + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC;
  for (guint j = 0; j < job->n_ranks; j++)
    {
      DcPeer *peer;
      g_autoptr(GError) error = NULL;

      if (j == job->rank || job->fetched[j] != NULL
          || (peer = _dc_train_group_find_peer (self, job->ids[j])) == NULL)
        continue;
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_CONTRIB_REQUEST, payload, &error))
        g_message ("cannot send a contribution request to %s: %s", dc_peer_get_name (peer),
                   error->message);
    }
}

/* The verdict of the running audit, once its recomputation is done and,
 * unless its gradient already differs, every contribution to the audited
 * shard came (or DC_TRAIN_GROUP_AUDIT_FETCH_S passed, or their authors
 * left): the accusation, if any, then the next audit, and the report or
 * the next step that waited for it. */
static void
maybe_conclude (DcTrainGroup *self)
{
  AuditJob *job = self->audit_job;
  gboolean waiting = FALSE;

  if (job == NULL || !job->computed || self->state == STATE_DONE || self->session == NULL)
    return;
  if (memcmp (job->received, job->hash, DC_MESH_HASH_SIZE) == 0 && self->fault_false_audit == 0
      && job->digest == self->digest && g_get_monotonic_time () < job->fetch_deadline)
    for (guint j = 0; j < job->n_ranks; j++)
      if (j != job->rank && job->fetched[j] == NULL
          && _dc_train_group_find_peer (self, job->ids[j]) != NULL)
        waiting = TRUE;
  if (waiting)
    return;
  self->audit_job = NULL;
  _dc_train_group_lane_urgent (self, FALSE);
  check_audit (self, job);
  _dc_train_group_audit_job_free (job);
  if (self->audit_next != NULL)
    start_audit (self, g_steal_pointer (&self->audit_next));
  if (self->state == STATE_AUDITING && !_dc_train_group_wait_audit (self, self->audit_then_next))
    {
      if (self->audit_then_next)
        _dc_train_group_next_step (self);
      else
        _dc_train_group_report_step (self);
    }
}

static void
audited_cb (GObject      *object,
            GAsyncResult *result,
            gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  AuditJob *job = self->audit_job;
  GError *error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      self->audit_job = NULL;
      _dc_train_group_audit_job_free (job);
      if (self->state != STATE_DONE)
        _dc_train_group_finish (self, error);
      else
        g_clear_error (&error);
      return;
    }
  if (self->state == STATE_DONE)
    {
      self->audit_job = NULL;
      _dc_train_group_audit_job_free (job);
      return;
    }
  /* Summed until the next step line shows them (report_step ()): an audit
   * may end after this device's report, while it waits for the others'. */
  self->audit_us += job->us;
  self->audit_paused_us += job->paused_us;
  self->audit_beside += job->beside;
  self->audit_priority = job->priority;
  if (self->fault_audit_after_report)
    {
      g_autofree char *text = g_strdup_printf ("DC_TEST_FAULT: the audit of step %"
                                               G_GUINT64_FORMAT " finished %s", job->step,
                                               job->after_report ? "after its step's report"
                                                                 : "before its step's report");

      _dc_train_group_notice (self, "test-fault", NULL, text);
    }
  job->computed = TRUE;
  maybe_conclude (self);
}

static void
start_audit (DcTrainGroup *self,
             AuditJob     *job)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, audited_cb, NULL);

  self->audit_job = job;
  job->priority = DC_PARALLEL_PRIORITY_NORMAL;
  /* Not urgent until the step waits for it (_dc_train_group_wait_audit ()). */
  _dc_train_group_lane_urgent (self, FALSE);
  /* The job is self->audit_job's until maybe_conclude () takes it; the
   * worker reads only its weights, rank and sizes and writes its results. */
  g_task_set_task_data (task, job, NULL);
  g_task_run_in_thread (task, audit_worker);
}

/* The draw hash of @step: SHA-256 of the contribution hashes the reducers
 * listed in their summed shards of @step, shard by shard, each author's in
 * rank order, leaving out each reducer's own contribution to its own
 * shard. Known only once every summed shard is here. An author sends its
 * contributions to the other shards before it can know the other
 * reducers' lists, so no single device can choose a contribution that
 * steers the draw (with three devices or more; its own shard's entry,
 * which it could choose last, is not in it). It draws the audit of the
 * step before (_dc_train_group_launch_audit ()): a reducer knows the draw
 * of @step before it sends its own summed shard of @step, but everything
 * of the step before is out by then. FALSE when a summed shard is not
 * here. */
gboolean
_dc_train_group_draw_hash (DcTrainGroup *self,
                           guint64       step,
                           guint8        out[DC_MESH_HASH_SIZE])
{
  guint n = self->roster->len;
  g_autoptr(GByteArray) hashes = g_byte_array_new ();
  g_autoptr(GBytes) all = NULL;

  for (guint r = 0; r < n; r++)
    {
      g_autofree char *key = _dc_train_group_gradient_key (step, self->digest,
                                                           g_ptr_array_index (self->roster, r));
      Gradient *summed = g_hash_table_lookup (self->gradients, key);
      const guint8 *data;

      if (summed == NULL)
        return FALSE;
      data = summed_hashes (summed->object);
      for (guint j = 0; j < n; j++)
        if (j != r)
          g_byte_array_append (hashes, data + (gsize) j * DC_TRAIN_SHARD_HASH_SIZE,
                               DC_TRAIN_SHARD_HASH_SIZE);
    }
  all = g_byte_array_free_to_bytes (g_steal_pointer (&hashes));
  dc_mesh_train_hash (all, out);
  return TRUE;
}

typedef struct
{
  AuditJob    *job;
  const float *from;
  gsize        n;
} CopyData;

/* A GTask thread: the job's weights, copied from the snapshot buffer that
 * its launch named. The buffer is not rewritten meanwhile (its writers
 * wait: _dc_train_group_audit_copy_wait ()) and the job is not freed
 * (wait_copied ()). */
static void
copy_worker (GTask        *task,
             gpointer      source,
             gpointer      task_data,
             GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  CopyData *copy = task_data;
  gint64 began = g_get_monotonic_time ();
  float *weights = g_memdup2 (copy->from, copy->n * sizeof (float));

  g_debug ("the audit of step %" G_GUINT64_FORMAT ": its %" G_GSIZE_FORMAT " weights copied on "
           "a worker in %" G_GINT64_FORMAT " ms", copy->job->step, copy->n,
           (g_get_monotonic_time () - began) / 1000);

  g_mutex_lock (&self->worker_lock);
  copy->job->weights = weights;
  copy->job->copying = FALSE;
  self->audit_copy_from = NULL;
  g_cond_broadcast (&self->worker_cond);
  g_mutex_unlock (&self->worker_lock);
  g_task_return_boolean (task, TRUE);
}

static void
start_copy (DcTrainGroup *self,
            AuditJob     *job,
            const float  *from,
            gsize         n)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, NULL, NULL);
  CopyData *copy = g_new0 (CopyData, 1);

  copy->job = job;
  copy->from = from;
  copy->n = n;
  g_mutex_lock (&self->worker_lock);
  /* One copy at a time: the one before (a step ago) has long ended. */
  while (self->audit_copy_from != NULL)
    g_cond_wait (&self->worker_cond, &self->worker_lock);
  job->copying = TRUE;
  self->audit_copy_from = from;
  g_mutex_unlock (&self->worker_lock);
  g_task_set_source_tag (task, start_copy);
  g_task_set_task_data (task, copy, g_free);
  g_task_run_in_thread (task, copy_worker);
}

/* At the end of step S + 1's exchange, before its update: the audit of S
 * is drawn from S + 1's draw hash (the same draw on every device); when
 * this device audits, the recomputation starts (or waits for the one
 * before to end) and the contributions to the audited shard are asked of
 * their authors. Drawn from S's own hash, a reducer would know whether S
 * is audited before it sends its summed shard of S, and could sum wrongly
 * (or change its own contribution to its own shard) on the other steps. */
void
_dc_train_group_launch_audit (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint64 step = model->step;  /* the audited step; S + 1 is being applied */
  guint n = self->roster->len;
  guint8 draw[DC_MESH_HASH_SIZE];
  gboolean forced;
  AuditJob *job;

  self->audit_rank = G_MAXUINT;
  if (n < 2 || step == 0 || !self->snap_prev_valid || self->snap_prev_step + 1 != step
      || !_dc_train_group_draw_hash (self, step + 1, draw))
    return;
  /* DC_TEST_FAULT=false-audit@S: this device audits every step from S
   * (and accuses falsely, check_audit ()). */
  forced = self->audit_all || (self->fault_false_audit != 0 && step >= self->fault_false_audit);
  if (self->audit_period != DC_TRAIN_GROUP_AUDIT_PERIOD && !self->audit_period_noted)
    {
      g_autofree char *text = NULL;

      if (self->audit_period == 0)
        text = g_strdup ("audits: off on this device (DC_TRAIN_GROUP_AUDIT_PERIOD=0): it checks "
                         "no other device's gradients");
      else
        text = g_strdup_printf ("audits: this device audits one step in %u "
                                "(DC_TRAIN_GROUP_AUDIT_PERIOD; the default is one in %u)",
                                self->audit_period, DC_TRAIN_GROUP_AUDIT_PERIOD);
      self->audit_period_noted = TRUE;
      _dc_train_group_notice (self, "audit-rate", NULL, text);
    }
  if (!forced && self->audit_period != DC_TRAIN_GROUP_AUDIT_PERIOD)
    {
      guint64 d;

      /* The same draw, another period (the rotation as
       * dc_train_group_audit_draw () makes it). */
      memcpy (&d, draw, 8);
      d = GUINT64_FROM_LE (d);
      if (self->audit_period == 0 || d % self->audit_period != 0)
        return;
      forced = TRUE;
    }
  self->audit_rank = dc_train_group_audit_draw (draw, self->rank, n, forced);
  if (self->audit_rank == G_MAXUINT)
    return;
  job = g_new0 (AuditJob, 1);
  job->step = step;
  job->digest = self->digest;
  job->rank = self->audit_rank;
  job->n_ranks = n;
  /* S's gradients under this roster (a device left or joined after S:
   * its ranks name other devices, and nobody audits it). */
  if (!_dc_train_group_received_hash (self, job->step, job->rank, job->received))
    {
      _dc_train_group_audit_job_free (job);
      return;
    }
  /* Its own copy: the snapshot buffers are rewritten by the compute
   * worker of the next step and of a step taken again (a rollback), and
   * move at each new step, while this job, or the one before it, may
   * still run. Made on a worker (143 MB held the main thread for about a
   * second at 36 M parameters); whoever rewrites the buffer waits for it. */
  job->group = self;
  job->weights_step = self->snap_prev_step;
  start_copy (self, job, self->snapshot_prev, model->n_params);
  if (self->fault_audit_scribble)
    {
      /* Test only (DC_TEST_FAULT=audit-scribble): the snapshot is
       * rewritten before the audit read it, as a step's compute may (once
       * the copy is made, which any writer waits for). */
      _dc_train_group_audit_copy_wait (self, self->snapshot_prev);
      for (gsize i = 0; i < model->n_params; i++)
        self->snapshot_prev[i] = 1.0f;
    }
  job->ids = g_new0 (char *, n + 1);
  for (guint j = 0; j < n; j++)
    job->ids[j] = g_strdup (g_ptr_array_index (self->roster, j));
  job->own_rank = self->rank;
  job->fetched = g_new0 (GBytes *, n);
  job->assemblers = g_new0 (DcMeshChunkAssembler *, n);
  {
    g_autofree char *summed_key = _dc_train_group_gradient_key (step, self->digest,
                                                                job->ids[job->rank]);
    g_autofree char *own_key = _dc_train_group_contrib_key (step, self->digest,
                                                            _dc_train_group_own_id (self),
                                                            job->rank);
    Gradient *summed = g_hash_table_lookup (self->gradients, summed_key);
    Gradient *own = g_hash_table_lookup (self->contribs, own_key);

    job->summed = g_bytes_ref (summed->object);
    job->listed = g_memdup2 (summed_hashes (summed->object),
                             (gsize) n * DC_TRAIN_SHARD_HASH_SIZE);
    if (own != NULL)
      job->fetched[self->rank] = g_bytes_ref (own->object);
  }
  job->fetch_deadline = g_get_monotonic_time ()
                        + (gint64) DC_TRAIN_GROUP_AUDIT_FETCH_S * G_USEC_PER_SEC;
  if (fetch_missing (job) > 0)
    fetch_contributions (self, job);
  if (self->audit_job != NULL)
    {
      /* The audit of the step before still runs: this one follows (a
       * step taken again replaces its earlier draw). */
      _dc_train_group_audit_job_free (self->audit_next);
      self->audit_next = job;
      return;
    }
  start_audit (self, job);
}

/* Every tick: contributions that have not come are asked again every
 * DC_TRAIN_GROUP_REPAIR_RETRY_S, and a verdict that waits for them is
 * given once DC_TRAIN_GROUP_AUDIT_FETCH_S passed or their authors left. */
void
_dc_train_group_audit_tick (DcTrainGroup *self)
{
  gint64 now = g_get_monotonic_time ();

  if (self->state == STATE_DONE || self->session == NULL)
    return;
  for (guint i = 0; i < 2; i++)
    {
      AuditJob *job = i == 0 ? self->audit_job : self->audit_next;

      if (job != NULL && job->fetched != NULL && fetch_missing (job) > 0
          && now >= job->fetch_next && now < job->fetch_deadline
          && job->fetch_tries < DC_TRAIN_GROUP_REPAIR_TRIES)
        fetch_contributions (self, job);
    }
  maybe_conclude (self);
}

/* A REPAIR chunk that answers this device's contribution request for a
 * running or waiting audit: assembled apart from repairs of the step being
 * taken, checked (header, then the hash its reducer listed) and kept.
 * FALSE: not such an answer (handle_chunk () goes on with it). */
gboolean
_dc_train_group_audit_take_chunk (DcTrainGroup      *self,
                                  DcPeer            *peer,
                                  const DcMeshChunk *chunk)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  AuditJob *job = NULL;
  guint j = G_MAXUINT;
  g_autoptr(GBytes) object = NULL;
  g_autoptr(GError) error = NULL;
  DcTrainShardHeader header;
  const guint8 *data;
  gsize size, n_values;
  const float *values;
  guint8 hash[DC_MESH_HASH_SIZE];
  DcTrainShardLayout layout;

  _dc_train_group_layout (model, &layout);
  for (guint i = 0; i < 2 && job == NULL; i++)
    {
      AuditJob *candidate = i == 0 ? self->audit_job : self->audit_next;

      if (candidate != NULL && candidate->fetched != NULL && candidate->step == chunk->step
          && chunk->rank < candidate->n_ranks && chunk->rank != candidate->rank
          && chunk->rank != candidate->own_rank
          && g_str_equal (candidate->ids[chunk->rank], dc_peer_get_id (peer)))
        job = candidate;
    }
  if (job == NULL)
    return FALSE;
  j = chunk->rank;
  if (job->fetched[j] != NULL)
    return TRUE;  /* a second answer: already here */
  if (job->assemblers[j] == NULL)
    job->assemblers[j] = dc_mesh_chunk_assembler_new (DC_MESH_MSG_REPAIR,
                                                      dc_train_shard_object_size (
                                                        DC_TRAIN_SHARD_CONTRIBUTION,
                                                        &layout, job->n_ranks,
                                                        job->rank));
  if (!dc_mesh_chunk_assembler_push (job->assemblers[j], chunk, &object, &error))
    {
      g_message ("a bad chunk of the contribution of %s to an audited shard: %s",
                 dc_peer_get_name (peer), error->message);
      g_clear_pointer (&job->assemblers[j], dc_mesh_chunk_assembler_free);
      return TRUE;
    }
  if (object == NULL)
    return TRUE;
  g_clear_pointer (&job->assemblers[j], dc_mesh_chunk_assembler_free);
  data = g_bytes_get_data (object, &size);
  if (!dc_train_shard_header_parse (data, size, &layout, &header, &error)
      || header.kind != DC_TRAIN_SHARD_CONTRIBUTION || header.shard != job->rank
      || header.digest != job->digest || header.roster_size != job->n_ranks)
    {
      g_message ("the contribution of %s to the audited shard %u of step %" G_GUINT64_FORMAT
                 " is not one: not used (%s)", dc_peer_get_name (peer), job->rank, job->step,
                 error != NULL ? error->message : "another shard or roster");
      return TRUE;
    }
  /* In the run's element type, kept in float32 as every shard is
   * (handle_chunk () does the same for the step's). */
  if (header.wire != _dc_train_group_wire (self))
    {
      g_message ("the contribution of %s to the audited shard %u of step %" G_GUINT64_FORMAT
                 " is in %s, but the run's CONFIG says %s: not used", dc_peer_get_name (peer),
                 job->rank, job->step, dc_train_wire_to_string (header.wire),
                 dc_train_wire_to_string (_dc_train_group_wire (self)));
      return TRUE;
    }
  {
    GBytes *wide = dc_train_shard_decode (object, &header, &error);

    if (wide == NULL)
      {
        g_message ("the contribution of %s to the audited shard %u of step %" G_GUINT64_FORMAT
                   " is not one: not used (%s)", dc_peer_get_name (peer), job->rank, job->step,
                   error->message);
        return TRUE;
      }
    g_bytes_unref (object);
    object = wide;
  }
  values = _dc_train_group_shard_values (object, &n_values);
  {
    g_autoptr(GBytes) floats = g_bytes_new_static (values, n_values * sizeof (float));

    dc_mesh_train_hash (floats, hash);
  }
  if (memcmp (hash, job->listed + (gsize) j * DC_TRAIN_SHARD_HASH_SIZE, DC_MESH_HASH_SIZE) != 0)
    {
      /* The reducer summed (and listed) what the author sent it; another
       * value now is the author's doing, and proves nothing about the sum. */
      g_message ("the contribution of %s to shard %u of step %" G_GUINT64_FORMAT " does not "
                 "match the hash its reducer listed: not used", dc_peer_get_name (peer),
                 job->rank, job->step);
      return TRUE;
    }
  job->fetched[j] = g_steal_pointer (&object);
  maybe_conclude (self);
  return TRUE;
}

/* An auditor asks for this device's contribution to the shard it audits
 * (contribution-request): sent as REPAIR chunks (rank: this device's in
 * that roster) when this device still keeps it (DC_TRAIN_GROUP_REPAIR_STEPS
 * steps), each (step, shard, requester) at most DC_TRAIN_GROUP_REPAIR_TRIES
 * times, so that a peer cannot make this one send megabytes at will. */
void
_dc_train_group_handle_contrib_request (DcTrainGroup *self,
                                        DcPeer       *peer,
                                        GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcTrainContribRequest request = { 0 };
  g_autofree char *answered_key = NULL;
  g_autofree char *key = NULL;
  g_autoptr(GBytes) wire = NULL;
  Gradient *own;
  DcMeshChunk info = { 0 };
  gsize size;
  const guint8 *data = g_bytes_get_data (payload, &size);
  guint sent;

  if (self->session == NULL || !_dc_train_group_in_roster (self, dc_peer_get_id (peer)))
    return;
  if (!dc_train_contrib_request_parse (data, size, &request, &error))
    {
      g_message ("a malformed contribution request from %s: %s", dc_peer_get_name (peer),
                 error->message);
      _dc_train_group_refuse (self, peer, DC_MESH_MSG_CONTRIB_REQUEST, error->message);
      return;
    }
  if (memcmp (request.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0)
    return;
  /* The step first, as prune () reads it; "c": apart from repairs' keys. */
  answered_key = g_strdup_printf ("%" G_GUINT64_FORMAT "/c%u/%s", request.step, request.shard,
                                  dc_peer_get_id (peer));
  sent = GPOINTER_TO_UINT (g_hash_table_lookup (self->answered, answered_key));
  if (sent >= DC_TRAIN_GROUP_REPAIR_TRIES)
    return;
  key = _dc_train_group_contrib_key (request.step, request.digest, _dc_train_group_own_id (self),
                                     request.shard);
  own = g_hash_table_lookup (self->contribs, key);
  if (own == NULL)
    {
      g_debug ("no contribution to shard %u of step %" G_GUINT64_FORMAT " for %s's audit",
               request.shard, request.step, dc_peer_get_name (peer));
      return;
    }
  memcpy (info.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  info.step = request.step;
  info.rank = own->rank;
  wire = dc_train_shard_encode (own->object, _dc_train_group_send_wire (self));
  if (!_dc_train_group_send_object (self, peer, DC_MESH_MSG_REPAIR, &info, wire, &error))
    {
      g_message ("cannot send a contribution to %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  g_hash_table_replace (self->answered, g_steal_pointer (&answered_key),
                        GUINT_TO_POINTER (sent + 1));
}

/* TRUE (and STATE_AUDITING) while this device's audit of an earlier step
 * than the one just applied runs (@then_next: any audit, before a
 * checkpoint switch replaces the session): its verdict must go out before
 * the report; audited_cb () goes on. */
gboolean
_dc_train_group_wait_audit (DcTrainGroup *self,
                            gboolean      then_next)
{
  guint64 step = dc_train_session_get_model (self->session)->step;

  /* The audit of S is drawn at the end of S + 1's exchange: the report of
   * S + 2 waits for it, not that of S + 1. */
  if (self->audit_job == NULL || (!then_next && self->audit_job->step + 1 >= step))
    return FALSE;
  self->audit_then_next = then_next;
  self->state = STATE_AUDITING;
  _dc_train_group_lane_urgent (self, TRUE);
  return TRUE;
}

/* This device's report of @step went out (DC_TEST_FAULT=audit-after-report). */
void
_dc_train_group_audit_published (DcTrainGroup *self,
                                 guint64       step)
{
  g_mutex_lock (&self->audit_lock);
  self->published_step = step;
  g_cond_broadcast (&self->audit_cond);
  g_mutex_unlock (&self->audit_lock);
}

/* After step @step: devices an audit caught leave the roster. */
void
_dc_train_group_remove_evicted (DcTrainGroup *self,
                                guint64       step)
{
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);
  gboolean any = FALSE;

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      gpointer value;

      if (i != self->rank && g_hash_table_lookup_extended (self->evicted, id, NULL, &value)
          && GPOINTER_TO_SIZE (value) <= step)
        any = TRUE;
      else
        g_ptr_array_add (kept, g_strdup (id));
    }
  if (any)
    _dc_train_group_set_roster (self, kept);
}

static void
accusation_free0 (gpointer data)
{
  Accusation *accusation = data;

  g_free (accusation->auditor);
  g_free (accusation->accused);
  g_free (accusation);
}

typedef struct
{
  guint64      step;    /* the audited step */
  GPtrArray   *accusations;  /* Accusation*: those of that step */
  const float *weights; /* before it (snapshot_prev2) */
  guint64      weights_step;
  guint     n;          /* roster size */
  guint     n_accused;
  guint    *ranks;      /* the accused ranks, in the order of the accusations */
  guint8  (*received)[DC_MESH_HASH_SIZE];  /* each accused gradient as the roster used it */
  guint8   *listed;     /* n hashes per accused: the contributions its summed shard lists */
  GBytes  **summed;     /* each accused rank's summed shard */
  gboolean *gradient_bad;  /* out: its gradient does not reproduce */
  gboolean *sum_bad;       /* out: its summed shard is not the sum of the roster's gradients */
} VerifyData;

static void
verify_data_free (VerifyData *data)
{
  for (guint i = 0; i < data->n_accused; i++)
    g_clear_pointer (&data->summed[i], g_bytes_unref);
  g_free (data->ranks);
  g_free (data->received);
  g_free (data->listed);
  g_free (data->summed);
  g_free (data->gradient_bad);
  g_free (data->sum_bad);
  g_ptr_array_unref (data->accusations);
  g_free (data);
}

/* Recomputes every roster gradient of the audited step (the one before the
 * step before the one just taken) on the weights before it (snapshot_prev2), then puts the model back
 * as it was. For each accused rank k: whether k's gradient reproduces (its
 * shards' hashes against those the reducers listed), and whether k's
 * summed shard is the canonical sum of the recomputed gradients' shard k.
 * When a listed contribution to shard k is not what its author's gradient
 * gives, the sum is not held against k: that author is the one whose
 * gradient does not reproduce (its own audit names it). n gradients, only
 * on an accusation. */
static void
verify_worker (GTask        *task,
               gpointer      source,
               gpointer      data,
               GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  VerifyData *verify = data;
  DcGptTrainer *trainer = dc_train_session_get_trainer (self->session);
  DcGptModel *model = dc_gpt_trainer_get_model (trainer);
  g_autofree float *saved = g_memdup2 (model->params, model->n_params * sizeof (float));
  g_autofree float *grads = g_new (float, model->n_params);
  g_autofree float **sums = g_new0 (float *, verify->n_accused);
  g_autofree gboolean *listed_bad = g_new0 (gboolean, verify->n_accused);
  const float divisor = (float) verify->n;
  guint64 step = model->step;
  GError *error = NULL;
  DcTrainShardLayout layout;
  float loss;

  _dc_train_group_layout (model, &layout);

  memcpy (model->params, verify->weights, model->n_params * sizeof (float));
  model->step = verify->weights_step;
  for (guint j = 0; j < verify->n && error == NULL; j++)
    {
      if (!dc_gpt_trainer_compute_gradients (trainer, j, verify->n, grads, &loss, &error))
        break;
      /* As its author rounded it (a bf16 run). */
      dc_train_session_round_gradient (self->session, grads, verify->n, NULL);
      for (guint i = 0; i < verify->n_accused; i++)
        {
          guint k = verify->ranks[i];
          gsize start, length;
          guint8 hash[DC_MESH_HASH_SIZE];
          g_autoptr(GBytes) shard = NULL;

          if (j == k)
            {
              _dc_train_group_shards_hash (grads, &layout, verify->n, hash);
              verify->gradient_bad[i] = memcmp (hash, verify->received[i], DC_MESH_HASH_SIZE) != 0;
            }
          dc_train_shard_range (&layout, verify->n, k, &start, &length);
          shard = g_bytes_new_static (grads + start, length * sizeof (float));
          dc_mesh_train_hash (shard, hash);
          if (memcmp (hash, verify->listed + ((gsize) i * verify->n + j) * DC_MESH_HASH_SIZE,
                      DC_MESH_HASH_SIZE) != 0)
            listed_bad[i] = TRUE;
          /* The canonical order (dc_gpt_trainer_combine_gradients ()): rank 0's
           * values, + rank 1's, …, then ÷ n, one rank at a time. */
          if (j == 0)
            sums[i] = g_memdup2 (grads + start, MAX (length, 1) * sizeof (float));
          else
            for (gsize e = 0; e < length; e++)
              sums[i][e] = sums[i][e] + grads[start + e];
        }
    }
  for (guint i = 0; i < verify->n_accused && error == NULL; i++)
    {
      gsize start, length, n_values;
      const float *received = _dc_train_group_shard_values (verify->summed[i], &n_values);

      dc_train_shard_range (&layout, verify->n, verify->ranks[i], &start, &length);
      for (gsize e = 0; e < length; e++)
        sums[i][e] = sums[i][e] / divisor;
      dc_train_session_round (self->session, sums[i], length, NULL);
      verify->sum_bad[i] = !listed_bad[i]
                           && memcmp (sums[i], received, length * sizeof (float)) != 0;
    }
  for (guint i = 0; i < verify->n_accused; i++)
    g_free (sums[i]);
  memcpy (model->params, saved, model->n_params * sizeof (float));
  model->step = step;
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

/* Every accusation of the step, by this device's recomputation of the
 * roster's gradients (verify_worker ()). Every honest device computes the
 * same bits, so every one removes the same device after the same step. */
static void
verified_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  VerifyData *verify = g_task_get_task_data (G_TASK (result));
  GError *error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      _dc_train_group_finish (self, error);
      return;
    }
  if (self->state == STATE_DONE)
    return;
  for (guint i = 0; i < verify->n_accused; i++)
    {
      Accusation *accusation = g_ptr_array_index (verify->accusations, i);
      guint64 after = dc_train_session_get_model (self->session)->step;
      g_autofree char *auditor = g_strdup (_dc_train_group_member_name (self, accusation->auditor));
      g_autofree char *accused = g_strdup (_dc_train_group_member_name (self, accusation->accused));
      g_autofree char *text = NULL;
      gboolean reproduces = !verify->gradient_bad[i] && !verify->sum_bad[i];
      gboolean sum = !verify->gradient_bad[i] && verify->sum_bad[i];
      const char *removed;

      removed = reproduces ? accusation->auditor : accusation->accused;
      if (g_str_equal (removed, _dc_train_group_own_id (self)))
        {
          if (reproduces)
            _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                                  "AUDIT: removed from the run: this device accused “%s” "
                                  "of a gradient of step %" G_GUINT64_FORMAT " that "
                                  "reproduces on the other devices; its audit was wrong "
                                  "(its kernels or its build compute wrong values)",
                                  accused, accusation->step);
          else
            _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                                  "AUDIT: removed from the run: “%s” recomputed this "
                                  "device's %s of step %" G_GUINT64_FORMAT " and got "
                                  "another %s; its kernels or its build compute wrong "
                                  "values", auditor, sum ? "summed shard" : "gradient",
                                  accusation->step, sum ? "sum" : "hash");
          return;
        }
      if (g_hash_table_contains (self->evicted, removed))
        continue;
      /* Checked at the end of the second step after the audited one:
       * removed after this step (it took part in it). */
      g_hash_table_replace (self->evicted, g_strdup (removed), GSIZE_TO_POINTER (after));
      if (reproduces)
        text = g_strdup_printf ("AUDIT: “%s” accused “%s” of a gradient of step %"
                                G_GUINT64_FORMAT " that reproduces here: “%s” is removed from "
                                "the roster after step %" G_GUINT64_FORMAT
                                " (a dishonest auditor)", auditor, accused, accusation->step,
                                auditor, after);
      else
        text = g_strdup_printf ("AUDIT: the %s of “%s” at step %" G_GUINT64_FORMAT
                                " does not reproduce (audited by “%s”): removed from the roster "
                                "after step %" G_GUINT64_FORMAT,
                                sum ? "summed shard" : "gradient", accused, accusation->step,
                                auditor, after);
      _dc_train_group_notice (self, "audit", reproduces ? auditor : accused, text);
    }
  _dc_train_group_next_step (self);
}

/* At the end of step S + 2: accusations of step S (drawn at the end of
 * S + 1's exchange and sent before their auditors' reports of S + 2, so
 * every device has the same ones) are checked on a worker
 * (STATE_VERIFYING) on the weights before S (snapshot_prev2) before the
 * next roster is made; those of S + 1 and S + 2 wait. Returns FALSE when there are
 * none (older ones are dropped: their check is past; and those whose
 * summed shards are not all here under this roster: a device left or
 * joined after the audited step, on every device alike). */
gboolean
_dc_train_group_verify_accusations (DcTrainGroup *self)
{
  guint64 now = dc_train_session_get_model (self->session)->step;
  guint64 step = now - 2;
  VerifyData *data;
  g_autoptr(GTask) task = NULL;
  g_autoptr(GPtrArray) checked = g_ptr_array_new_with_free_func (accusation_free0);
  guint n = self->roster->len;

  for (guint i = self->accusations->len; i > 0; i--)
    {
      Accusation *accusation = g_ptr_array_index (self->accusations, i - 1);
      guint8 hash[DC_MESH_HASH_SIZE];

      if (accusation->step + 1 >= now)
        continue;
      if (now >= 2 && accusation->step == step && self->snap_prev2_valid
          && self->snap_prev2_step + 1 == step
          && _dc_train_group_received_hash (self, step, accusation->rank, hash))
        g_ptr_array_insert (checked, 0, g_ptr_array_steal_index (self->accusations, i - 1));
      else
        g_ptr_array_remove_index (self->accusations, i - 1);
    }
  if (checked->len == 0)
    return FALSE;
  data = g_new0 (VerifyData, 1);
  data->step = step;
  data->weights = self->snapshot_prev2;
  data->weights_step = self->snap_prev2_step;
  data->accusations = g_steal_pointer (&checked);
  data->n = n;
  data->n_accused = data->accusations->len;
  data->ranks = g_new (guint, data->n_accused);
  data->received = g_malloc0_n (data->n_accused, DC_MESH_HASH_SIZE);
  data->listed = g_malloc0_n ((gsize) data->n_accused * n, DC_MESH_HASH_SIZE);
  data->summed = g_new0 (GBytes *, data->n_accused);
  data->gradient_bad = g_new0 (gboolean, data->n_accused);
  data->sum_bad = g_new0 (gboolean, data->n_accused);
  for (guint i = 0; i < data->n_accused; i++)
    {
      Accusation *accusation = g_ptr_array_index (data->accusations, i);
      g_autofree char *key = _dc_train_group_gradient_key (step, self->digest,
                                                           accusation->accused);
      Gradient *summed = g_hash_table_lookup (self->gradients, key);

      data->ranks[i] = accusation->rank;
      _dc_train_group_received_hash (self, step, accusation->rank, data->received[i]);
      data->summed[i] = g_bytes_ref (summed->object);
      memcpy (data->listed + (gsize) i * n * DC_MESH_HASH_SIZE,
              summed_hashes (summed->object), (gsize) n * DC_MESH_HASH_SIZE);
    }
  self->state = STATE_VERIFYING;
  task = g_task_new (self, NULL, verified_cb, NULL);
  g_task_set_task_data (task, data, (GDestroyNotify) verify_data_free);
  g_task_run_in_thread (task, verify_worker);
  return TRUE;
}

/**
 * dc_train_group_audit_rank:
 * @run_seed: the run's seed
 * @step: the step being taken (1-based)
 * @rank: this device's rank in a roster of @n_ranks (≥ 2)
 * @every_step: audit whatever the draw (DC_TEST_FAULT=audit-all)
 *
 * The draw audits followed until 2026-12-02, from the run seed alone, so
 * that every member knew in advance which steps were audited (now
 * dc_train_group_audit_draw (); kept for DC_TEST_FAULT=corrupt-unaudited).
 * Which rank's gradient @rank recomputes at @step. One draw per step for
 * the whole roster, d = dc_rng (run seed, "AUDT" stream, step << 16): when
 * d is a multiple of DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW (8, the rate of
 * that time) every device audits, rank r the rank (r + 1 + (d / period)
 * mod (n − 1)) mod n, a rotation, so each
 * gradient is checked by exactly one other device. Drawn per device, audits
 * fell on different steps and the step waited for whichever device was
 * auditing: with four devices on 68 % of steps, where auditing together
 * costs the group the same quarter of a step that it costs each device.
 *
 * Returns: the audited rank, or G_MAXUINT when @step has no audit
 */
guint
dc_train_group_audit_rank (guint64  run_seed,
                           guint64  step,
                           guint    rank,
                           guint    n_ranks,
                           gboolean every_step)
{
  guint64 draw;

  g_return_val_if_fail (n_ranks >= 2 && rank < n_ranks, G_MAXUINT);

  draw = dc_rng_u64 (run_seed, AUDIT_STREAM, step << 16);
  if (!every_step && draw % DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW != 0)
    return G_MAXUINT;
  return (rank + 1 + (guint) ((draw / DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW) % (n_ranks - 1)))
         % n_ranks;
}

/**
 * dc_train_group_audit_draw:
 * @draw_hash: the step's draw hash (SHA-256 of its contribution hashes as
 *   the reducers listed them, each reducer's own left out)
 * @rank: this device's rank in a roster of @n_ranks (≥ 2)
 * @every_step: audit whatever the draw (DC_TEST_FAULT=audit-all)
 *
 * Which rank's gradient @rank recomputes at the step of @draw_hash: d is
 * the hash's first 8 bytes (little-endian); when d is a multiple of
 * DC_TRAIN_GROUP_AUDIT_PERIOD every device audits, rank r the rank
 * (r + 1 + (d / period) mod (n − 1)) mod n, as dc_train_group_audit_rank ()
 * does from the run seed. The hash is known only once every contribution
 * of the step was sent, so a member cannot tell in advance which steps are
 * audited.
 *
 * Returns: the audited rank, or G_MAXUINT when the step has no audit
 */
guint
dc_train_group_audit_draw (const guint8 *draw_hash,
                           guint         rank,
                           guint         n_ranks,
                           gboolean      every_step)
{
  guint64 draw;

  g_return_val_if_fail (draw_hash != NULL, G_MAXUINT);
  g_return_val_if_fail (n_ranks >= 2 && rank < n_ranks, G_MAXUINT);

  memcpy (&draw, draw_hash, 8);
  draw = GUINT64_FROM_LE (draw);
  if (!every_step && draw % DC_TRAIN_GROUP_AUDIT_PERIOD != 0)
    return G_MAXUINT;
  return (rank + 1 + (guint) ((draw / DC_TRAIN_GROUP_AUDIT_PERIOD) % (n_ranks - 1))) % n_ranks;
}

/* Another roster device's audit of step S (drawn at the end of S + 1's
 * exchange, sent before its report of S + 2): an accusation, recorded. It
 * is not trusted: at the end of S + 2 every device (every one has it,
 * since the auditor sent it before that report) recomputes the gradient
 * and removes the accused, or the accuser when the gradient reproduces
 * (_dc_train_group_verify_accusations ()). */
void
_dc_train_group_handle_audit (DcTrainGroup *self,
                              DcPeer       *peer,
                              GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshAudit audit = { 0 };
  const char *id;

  if (self->session == NULL || !_dc_train_group_in_roster (self, dc_peer_get_id (peer)))
    return;
  if (!dc_mesh_audit_decode (payload, &audit, &error))
    {
      g_message ("a malformed audit from %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  /* An audit of step S comes after its auditor's exchange of S + 1 (the
   * draw) and before its report of S + 2, at the end of which it is
   * checked: while this device ends S + 1's exchange (the auditor may be
   * faster), takes S + 2, or waits for S + 2's reports. */
  if (memcmp (audit.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || audit.step > self->step_done || audit.step + 2 < self->step_done
      || audit.rank >= self->roster->len)
    return;
  /* The rank is of the auditor's roster: only when its gradient of that
   * step is of this device's roster (it came before the audit, on the same
   * ordered channel) does the rank name the same device here. */
  {
    g_autofree char *key = _dc_train_group_gradient_key (audit.step, self->digest,
                                                         dc_peer_get_id (peer));

    if (!g_hash_table_contains (self->gradients, key))
      {
        g_message ("an audit of step %" G_GUINT64_FORMAT " from %s for another roster: ignored",
                   audit.step, dc_peer_get_name (peer));
        return;
      }
  }
  id = g_ptr_array_index (self->roster, audit.rank);
  if (g_str_equal (id, dc_peer_get_id (peer)) || g_hash_table_contains (self->evicted, id))
    return;
  g_message ("AUDIT: “%s” accuses “%s” of a gradient of step %" G_GUINT64_FORMAT " that does "
             "not reproduce: checking it at the end of the step", dc_peer_get_name (peer),
             _dc_train_group_member_name (self, id), audit.step);
  add_accusation (self, audit.step, audit.rank, dc_peer_get_id (peer));
}
