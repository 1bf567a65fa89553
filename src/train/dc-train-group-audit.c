/* dc-train-group-audit.c: audits: recomputing another device's gradient,
 * accusations, and their verification by every device; see
 * dc-train-group.h and dc-train-group-private.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

/* The audited rank's gradient, recomputed on the same weights, and its hash. */
gboolean
_dc_train_group_compute_audit (DcTrainGroup       *self,
                               const ComputeData  *compute,
                               GError            **error)
{
  DcGptTrainer *trainer = dc_train_session_get_trainer (self->session);
  DcGptModel *model = dc_gpt_trainer_get_model (trainer);
  g_autoptr(GBytes) bytes = NULL;
  gint64 start = g_get_monotonic_time ();
  float loss;

  if (!dc_gpt_trainer_compute_gradients (trainer, self->audit_rank, compute->n_ranks,
                                         self->audit_grads, &loss, error))
    return FALSE;
  bytes = g_bytes_new_static (self->audit_grads, model->n_params * sizeof (float));
  dc_mesh_train_hash (bytes, self->audit_hash);
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

/* The audited rank's gradient as received against this device's
 * recomputation: a difference is sent to the roster as AUDIT (before this
 * device's report of the step, so everyone has it when it has that report);
 * every device, this one included, checks the accusation at the end of the
 * step (_dc_train_group_verify_accusations ()). */
void
_dc_train_group_check_audit (DcTrainGroup  *self,
                             const float  **grads)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint8 hash[DC_MESH_HASH_SIZE];
  g_autoptr(GBytes) bytes = NULL;
  DcMeshAudit audit = { 0 };
  g_autoptr(GBytes) payload = NULL;
  const char *id;
  g_autofree char *text = NULL;

  if (self->audit_rank == G_MAXUINT || self->audit_rank >= self->roster->len)
    return;
  bytes = g_bytes_new_static (grads[self->audit_rank], model->n_params * sizeof (float));
  dc_mesh_train_hash (bytes, hash);
  if (self->fault_false_audit != 0 && model->step + 1 >= self->fault_false_audit)
    {
      /* Test only (DC_TEST_FAULT=false-audit@STEP): a dishonest auditor
       * accuses a gradient that reproduces. */
      self->audit_hash[0] = (guint8) (hash[0] ^ 1u);
      g_message ("DC_TEST_FAULT: a false accusation of rank %u at step %" G_GUINT64_FORMAT,
                 self->audit_rank, model->step + 1);
    }
  if (memcmp (hash, self->audit_hash, DC_MESH_HASH_SIZE) == 0)
    return;
  id = g_ptr_array_index (self->roster, self->audit_rank);
  memcpy (audit.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  audit.step = model->step + 1;
  audit.rank = self->audit_rank;
  memcpy (audit.gradient_hash, self->audit_hash, DC_MESH_HASH_SIZE);
  payload = dc_mesh_audit_encode (&audit);
  _dc_train_group_send_to_roster (self, DC_MESH_MSG_AUDIT, payload);
  add_accusation (self, audit.step, audit.rank, _dc_train_group_own_id (self));
  text = g_strdup_printf ("AUDIT: the gradient of “%s” at step %" G_GUINT64_FORMAT " does not "
                          "reproduce here: accused to the group, which checks it",
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
  guint  n;         /* roster size */
  guint  n_accused;
  guint *ranks;     /* the accused ranks, in the order of the accusations */
  guint8 (*hashes)[DC_MESH_HASH_SIZE];
} VerifyData;

static void
verify_data_free (VerifyData *data)
{
  g_free (data->ranks);
  g_free (data->hashes);
  g_free (data);
}

/* Recomputes the accused gradients of the step just taken on the weights
 * before it (the snapshot the apply worker took), then puts the model back
 * as it was. */
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
  guint64 step = model->step;
  GError *error = NULL;
  float loss;

  memcpy (model->params, self->snapshot, model->n_params * sizeof (float));
  model->step = self->snap_step;
  for (guint i = 0; i < verify->n_accused; i++)
    {
      g_autoptr(GBytes) bytes = NULL;

      if (!dc_gpt_trainer_compute_gradients (trainer, verify->ranks[i], verify->n, grads, &loss,
                                             &error))
        break;
      bytes = g_bytes_new_static (grads, model->n_params * sizeof (float));
      dc_mesh_train_hash (bytes, verify->hashes[i]);
    }
  memcpy (model->params, saved, model->n_params * sizeof (float));
  model->step = step;
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

/* Every accusation of the step, by the hashes: the accused gradient as
 * received (its author's own, for this device's) against this device's
 * recomputation. Every honest device computes the same bits, so every one
 * removes the same device after the same step. */
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
      g_autofree char *key = _dc_train_group_gradient_key (accusation->step, self->digest,
                                                           accusation->accused);
      Gradient *gradient = g_hash_table_lookup (self->gradients, key);
      g_autoptr(GBytes) values = NULL;
      guint8 received[DC_MESH_HASH_SIZE];
      g_autofree char *auditor = g_strdup (_dc_train_group_member_name (self, accusation->auditor));
      g_autofree char *accused = g_strdup (_dc_train_group_member_name (self, accusation->accused));
      g_autofree char *text = NULL;
      gboolean reproduces;
      const char *removed;

      if (gradient == NULL)
        continue;  /* never: the step's gradients are kept DC_TRAIN_GROUP_REPAIR_STEPS */
      values = g_bytes_new_from_bytes (gradient->object, GRADIENT_HEADER_SIZE,
                                       g_bytes_get_size (gradient->object)
                                       - GRADIENT_HEADER_SIZE);
      dc_mesh_train_hash (values, received);
      reproduces = memcmp (received, verify->hashes[i], DC_MESH_HASH_SIZE) == 0;
      removed = reproduces ? accusation->auditor : accusation->accused;
      if (g_str_equal (removed, _dc_train_group_own_id (self)))
        {
          _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                                reproduces
                                ? "AUDIT: removed from the run: this device accused “%s” "
                                  "of a gradient of step %" G_GUINT64_FORMAT " that "
                                  "reproduces on the other devices; its audit was wrong "
                                  "(its kernels or its build compute wrong values)"
                                : "AUDIT: removed from the run: “%s” recomputed this "
                                  "device's gradient of step %" G_GUINT64_FORMAT " and got "
                                  "another hash; its kernels or its build compute wrong "
                                  "values",
                                reproduces ? accused : auditor, accusation->step);
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
        text = g_strdup_printf ("AUDIT: the gradient of “%s” at step %" G_GUINT64_FORMAT
                                " does not reproduce (audited by “%s”): removed from the roster "
                                "after step %" G_GUINT64_FORMAT, accused, accusation->step,
                                auditor, accusation->step);
      _dc_train_group_notice (self, "audit", reproduces ? auditor : accused, text);
    }
  g_ptr_array_set_size (self->accusations, 0);
  _dc_train_group_next_step (self);
}

/* At the end of step S: accusations of S are checked on a worker
 * (STATE_VERIFYING) before the next roster is made. Returns FALSE when
 * there are none (older ones are dropped: their step's end is past). */
gboolean
_dc_train_group_verify_accusations (DcTrainGroup *self)
{
  guint64 step = dc_train_session_get_model (self->session)->step;
  VerifyData *data;
  g_autoptr(GTask) task = NULL;

  for (guint i = self->accusations->len; i > 0; i--)
    {
      Accusation *accusation = g_ptr_array_index (self->accusations, i - 1);

      if (accusation->step != step)
        g_ptr_array_remove_index (self->accusations, i - 1);
    }
  if (self->accusations->len == 0)
    return FALSE;
  data = g_new0 (VerifyData, 1);
  data->n = self->roster->len;
  data->n_accused = self->accusations->len;
  data->ranks = g_new (guint, self->accusations->len);
  data->hashes = g_malloc0_n (self->accusations->len, DC_MESH_HASH_SIZE);
  for (guint i = 0; i < self->accusations->len; i++)
    data->ranks[i] = ((Accusation *) g_ptr_array_index (self->accusations, i))->rank;
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
