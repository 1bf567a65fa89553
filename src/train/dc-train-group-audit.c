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
_dc_train_group_shards_hash (const float *grads,
                             gsize        n_params,
                             guint        n_ranks,
                             guint8       out[DC_MESH_HASH_SIZE])
{
  g_autofree guint8 *hashes = g_malloc ((gsize) n_ranks * DC_MESH_HASH_SIZE);
  g_autoptr(GBytes) all = NULL;

  for (guint r = 0; r < n_ranks; r++)
    {
      gsize start, length;
      g_autoptr(GBytes) shard = NULL;

      dc_train_shard_range (n_params, n_ranks, r, &start, &length);
      shard = g_bytes_new_static (grads + start, length * sizeof (float));
      dc_mesh_train_hash (shard, hashes + (gsize) r * DC_MESH_HASH_SIZE);
    }
  all = g_bytes_new_static (hashes, (gsize) n_ranks * DC_MESH_HASH_SIZE);
  dc_mesh_train_hash (all, out);
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
      data = g_bytes_get_data (summed->object, NULL);
      memcpy (hashes + (gsize) r * DC_MESH_HASH_SIZE,
              data + DC_TRAIN_SHARD_HEADER_SIZE + (gsize) rank * DC_TRAIN_SHARD_HASH_SIZE,
              DC_MESH_HASH_SIZE);
    }
  all = g_bytes_new_static (hashes, (gsize) n * DC_MESH_HASH_SIZE);
  dc_mesh_train_hash (all, out);
  return TRUE;
}

/* The audited rank's gradient, recomputed on the same weights, and its hash. */
gboolean
_dc_train_group_compute_audit (DcTrainGroup       *self,
                               const ComputeData  *compute,
                               GError            **error)
{
  DcGptTrainer *trainer = dc_train_session_get_trainer (self->session);
  DcGptModel *model = dc_gpt_trainer_get_model (trainer);
  gint64 start = g_get_monotonic_time ();
  float loss;

  if (!dc_gpt_trainer_compute_gradients (trainer, self->audit_rank, compute->n_ranks,
                                         self->audit_grads, &loss, error))
    return FALSE;
  _dc_train_group_shards_hash (self->audit_grads, model->n_params, compute->n_ranks,
                               self->audit_hash);
  self->audit_us = g_get_monotonic_time () - start;
  return TRUE;
}

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

/* The audited rank's summed shard re-summed here, when every contribution
 * to it is at hand: this device's own, the audited device's as recomputed
 * here, and the others' (sent to this device on audit steps,
 * send_own_gradient ()). -1: cannot tell (one did not come: its author did
 * not draw the audit, DC_TEST_FAULT=audit-all on some devices only);
 * 0: it reproduces; 1: it does not. */
static int
check_summed (DcTrainGroup *self,
              guint64       step)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint n = self->roster->len, a = self->audit_rank;
  g_autofree const float **values = g_new0 (const float *, n);
  g_autofree float *sum = NULL;
  g_autofree char *summed_key = _dc_train_group_gradient_key (step, self->digest,
                                                              g_ptr_array_index (self->roster, a));
  Gradient *summed = g_hash_table_lookup (self->gradients, summed_key);
  gsize start, length, n_values;
  const float *received;

  if (summed == NULL)
    return -1;
  dc_train_shard_range (model->n_params, n, a, &start, &length);
  for (guint j = 0; j < n; j++)
    {
      g_autofree char *key = NULL;
      Gradient *contribution;

      if (j == a)
        {
          values[j] = self->audit_grads + start;
          continue;
        }
      key = _dc_train_group_contrib_key (step, self->digest, g_ptr_array_index (self->roster, j),
                                         a);
      contribution = g_hash_table_lookup (self->contribs, key);
      if (contribution == NULL || contribution->rank != j)
        return -1;
      values[j] = _dc_train_group_shard_values (contribution->object, &n_values);
    }
  sum = g_new (float, MAX (length, 1));
  dc_gpt_trainer_combine_gradients (values, n, length, sum);
  received = _dc_train_group_shard_values (summed->object, &n_values);
  return memcmp (sum, received, length * sizeof (float)) != 0;
}

/* The audited rank's gradient as the roster used it (the contribution
 * hashes in the summed shards) against this device's recomputation, and
 * its summed shard re-summed (check_summed ()): a difference is sent to the
 * roster as AUDIT (before this device's report of the step, so everyone
 * has it when it has that report); every device, this one included, checks
 * the accusation at the end of the step (_dc_train_group_verify_accusations ()). */
void
_dc_train_group_check_audit (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint8 hash[DC_MESH_HASH_SIZE];
  DcMeshAudit audit = { 0 };
  g_autoptr(GBytes) payload = NULL;
  const char *id;
  g_autofree char *text = NULL;
  guint64 step = model->step + 1;
  gboolean gradient_differs, sum_differs;

  if (self->audit_rank == G_MAXUINT || self->audit_rank >= self->roster->len
      || !_dc_train_group_received_hash (self, step, self->audit_rank, hash))
    return;
  if (self->fault_false_audit != 0 && step >= self->fault_false_audit)
    {
      /* Test only (DC_TEST_FAULT=false-audit@STEP): a dishonest auditor
       * accuses a gradient that reproduces. */
      self->audit_hash[0] = (guint8) (hash[0] ^ 1u);
      g_message ("DC_TEST_FAULT: a false accusation of rank %u at step %" G_GUINT64_FORMAT,
                 self->audit_rank, step);
    }
  gradient_differs = memcmp (hash, self->audit_hash, DC_MESH_HASH_SIZE) != 0;
  sum_differs = !gradient_differs && check_summed (self, step) == 1;
  if (!gradient_differs && !sum_differs)
    return;
  id = g_ptr_array_index (self->roster, self->audit_rank);
  memcpy (audit.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  audit.step = step;
  audit.rank = self->audit_rank;
  memcpy (audit.gradient_hash, self->audit_hash, DC_MESH_HASH_SIZE);
  payload = dc_mesh_audit_encode (&audit);
  _dc_train_group_send_to_roster (self, DC_MESH_MSG_AUDIT, payload);
  add_accusation (self, audit.step, audit.rank, _dc_train_group_own_id (self));
  text = g_strdup_printf ("AUDIT: the %s of “%s” at step %" G_GUINT64_FORMAT " does not "
                          "reproduce here: accused to the group, which checks it",
                          sum_differs ? "summed shard" : "gradient",
                          _dc_train_group_member_name (self, id), audit.step);
  g_message ("%s", text);
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

typedef struct
{
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
  g_free (data);
}

/* Recomputes every roster gradient of the step just taken on the weights
 * before it (the snapshot the apply worker took), then puts the model back
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
  float loss;

  memcpy (model->params, self->snapshot, model->n_params * sizeof (float));
  model->step = self->snap_step;
  for (guint j = 0; j < verify->n && error == NULL; j++)
    {
      if (!dc_gpt_trainer_compute_gradients (trainer, j, verify->n, grads, &loss, &error))
        break;
      for (guint i = 0; i < verify->n_accused; i++)
        {
          guint k = verify->ranks[i];
          gsize start, length;
          guint8 hash[DC_MESH_HASH_SIZE];
          g_autoptr(GBytes) shard = NULL;

          if (j == k)
            {
              _dc_train_group_shards_hash (grads, model->n_params, verify->n, hash);
              verify->gradient_bad[i] = memcmp (hash, verify->received[i], DC_MESH_HASH_SIZE) != 0;
            }
          dc_train_shard_range (model->n_params, verify->n, k, &start, &length);
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

      dc_train_shard_range (model->n_params, verify->n, verify->ranks[i], &start, &length);
      for (gsize e = 0; e < length; e++)
        sums[i][e] = sums[i][e] / divisor;
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
      Accusation *accusation = g_ptr_array_index (self->accusations, i);
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
      g_hash_table_replace (self->evicted, g_strdup (removed),
                            GSIZE_TO_POINTER (accusation->step));
      if (reproduces)
        text = g_strdup_printf ("AUDIT: “%s” accused “%s” of a gradient of step %"
                                G_GUINT64_FORMAT " that reproduces here: “%s” is removed from "
                                "the roster after step %" G_GUINT64_FORMAT
                                " (a dishonest auditor)", auditor, accused, accusation->step,
                                auditor, accusation->step);
      else
        text = g_strdup_printf ("AUDIT: the %s of “%s” at step %" G_GUINT64_FORMAT
                                " does not reproduce (audited by “%s”): removed from the roster "
                                "after step %" G_GUINT64_FORMAT,
                                sum ? "summed shard" : "gradient", accused, accusation->step,
                                auditor, accusation->step);
      _dc_train_group_notice (self, "audit", reproduces ? auditor : accused, text);
    }
  g_ptr_array_set_size (self->accusations, 0);
  _dc_train_group_next_step (self);
}

/* At the end of step S: accusations of S are checked on a worker
 * (STATE_VERIFYING) before the next roster is made. Returns FALSE when
 * there are none (older ones are dropped: their step's end is past, and
 * those whose summed shards are not all here: never, they are kept
 * DC_TRAIN_GROUP_REPAIR_STEPS steps). */
gboolean
_dc_train_group_verify_accusations (DcTrainGroup *self)
{
  guint64 step = dc_train_session_get_model (self->session)->step;
  VerifyData *data;
  g_autoptr(GTask) task = NULL;
  guint n = self->roster->len;

  for (guint i = self->accusations->len; i > 0; i--)
    {
      Accusation *accusation = g_ptr_array_index (self->accusations, i - 1);
      guint8 hash[DC_MESH_HASH_SIZE];

      if (accusation->step != step
          || !_dc_train_group_received_hash (self, step, accusation->rank, hash))
        g_ptr_array_remove_index (self->accusations, i - 1);
    }
  if (self->accusations->len == 0)
    return FALSE;
  data = g_new0 (VerifyData, 1);
  data->n = n;
  data->n_accused = self->accusations->len;
  data->ranks = g_new (guint, data->n_accused);
  data->received = g_malloc0_n (data->n_accused, DC_MESH_HASH_SIZE);
  data->listed = g_malloc0_n ((gsize) data->n_accused * n, DC_MESH_HASH_SIZE);
  data->summed = g_new0 (GBytes *, data->n_accused);
  data->gradient_bad = g_new0 (gboolean, data->n_accused);
  data->sum_bad = g_new0 (gboolean, data->n_accused);
  for (guint i = 0; i < data->n_accused; i++)
    {
      Accusation *accusation = g_ptr_array_index (self->accusations, i);
      g_autofree char *key = _dc_train_group_gradient_key (step, self->digest,
                                                           accusation->accused);
      Gradient *summed = g_hash_table_lookup (self->gradients, key);

      data->ranks[i] = accusation->rank;
      _dc_train_group_received_hash (self, step, accusation->rank, data->received[i]);
      data->summed[i] = g_bytes_ref (summed->object);
      memcpy (data->listed + (gsize) i * n * DC_MESH_HASH_SIZE,
              (const guint8 *) g_bytes_get_data (summed->object, NULL)
              + DC_TRAIN_SHARD_HEADER_SIZE, (gsize) n * DC_MESH_HASH_SIZE);
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
 * Which rank's gradient @rank recomputes at @step. One draw per step for
 * the whole roster, d = dc_rng (run seed, "AUDT" stream, step << 16): when
 * d is a multiple of DC_TRAIN_GROUP_AUDIT_PERIOD every device audits, rank
 * r the rank (r + 1 + (d / period) mod (n − 1)) mod n, a rotation, so each
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
  if (!every_step && draw % DC_TRAIN_GROUP_AUDIT_PERIOD != 0)
    return G_MAXUINT;
  return (rank + 1 + (guint) ((draw / DC_TRAIN_GROUP_AUDIT_PERIOD) % (n_ranks - 1))) % n_ranks;
}

/* Another roster device's audit of the step being taken or just taken: an
 * accusation, recorded. It is not trusted: at the end of the step every
 * device (on every device, since the auditor sent it before its report of
 * the step) recomputes the gradient and removes the accused, or the
 * accuser when the gradient reproduces (_dc_train_group_verify_accusations ()). */
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
  /* The step being taken, or the one just taken while its reports come in
   * (the step's end, where accusations are checked, is not past). */
  if (memcmp (audit.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || (audit.step != self->step_done + 1
          && !(audit.step == self->step_done && self->state == STATE_REPORTING))
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
