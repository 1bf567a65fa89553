/* dc-train-group-repair.c: repair (a missing roster gradient from the
 * leader) and rollback (a step taken again without a device that left);
 * see dc-train-group.h and dc-train-group-private.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

/* Whether @id reported @step with this device's roster: it took the step
 * with every roster gradient. */
gboolean
_dc_train_group_reported (DcTrainGroup *self,
                          guint64       step,
                          const char   *id)
{
  g_autofree char *key = _dc_train_group_report_key (step, id);
  DcMeshStepReport *report = g_hash_table_lookup (self->reports, key);

  return report != NULL && memcmp (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) == 0
         && report->roster != NULL && g_strv_length (report->roster) == self->roster->len
         && _dc_train_group_roster_digest_strv (report->roster) == self->digest;
}

/* Who holds every roster gradient of @step: the leader (the first roster
 * device) once its report of the step came, else the next that reported
 * it with the same roster; NULL while none has. */
static const char *
repair_source (DcTrainGroup *self,
               guint64       step)
{
  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);

      if (i != self->rank && _dc_train_group_find_peer (self, id) != NULL
          && _dc_train_group_reported (self, step, id))
        return id;
    }
  return NULL;
}

/* Roster gradients of the step being taken that the leader
 * (repair_source ()) already used and this device lacks: at once when it is
 * known lost (its sender's report of the step came, and a peer's frames
 * arrive in the order it queued them: one reliable ordered channel, one
 * frame queue, only credits go ahead), else DC_TRAIN_GROUP_REPAIR_RETRY_S
 * after this device sent its own (its sender may itself be waiting for a
 * repair). Asked again every DC_TRAIN_GROUP_REPAIR_RETRY_S; after
 * DC_TRAIN_GROUP_REPAIR_TRIES requests the sync guard stops the run. While
 * no device has used it, it is waited for (DC_TRAIN_GROUP_WAIT_S). */
void
_dc_train_group_maybe_repair (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint64 step = model->step + 1;
  const char *source;
  DcPeer *peer;
  g_autoptr(GString) missing = g_string_new (NULL);
  g_autoptr(GArray) ranks = g_array_new (FALSE, FALSE, sizeof (guint));
  gint64 now = g_get_monotonic_time ();
  guint tries = 0;

  if (self->fault_no_repair != 0 && step == self->fault_no_repair)
    return;
  if ((source = repair_source (self, step)) == NULL
      || (peer = _dc_train_group_find_peer (self, source)) == NULL)
    return;
  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      g_autofree char *key = _dc_train_group_gradient_key (step, self->digest, id);

      if (i == self->rank || g_hash_table_contains (self->gradients, key)
          || now < self->repair_next[i])
        continue;
      /* Not known lost (its sender may be waiting for a repair itself):
       * asked once the leader has used it and it is DC_TRAIN_GROUP_REPAIR_RETRY_S
       * late; if it was only slow, the first copy to come is kept. */
      if (!_dc_train_group_reported (self, step, id)
          && now < self->t_sent + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC)
        continue;
      if (self->repair_tries[i] >= DC_TRAIN_GROUP_REPAIR_TRIES)
        {
          _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                                "SYNC GUARD: stopped — roster gradient of step %"
                                G_GUINT64_FORMAT " from “%s” not repaired after %u requests "
                                "to “%s”", step, _dc_train_group_member_name (self, id),
                                self->repair_tries[i], _dc_train_group_member_name (self, source));
          return;
        }
      self->repair_tries[i]++;
      self->repair_next[i] = now + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC;
      tries = MAX (tries, self->repair_tries[i]);
      g_array_append_val (ranks, i);
      g_string_append_printf (missing, "%s“%s”", missing->len > 0 ? ", " : "",
                              _dc_train_group_member_name (self, id));
    }
  if (ranks->len == 0)
    return;
  for (guint i = 0; i < ranks->len; i++)
    {
      DcMeshRepairRequest request = { 0 };
      g_autoptr(GBytes) payload = NULL;
      g_autoptr(GError) error = NULL;

      memcpy (request.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      request.step = step;
      request.rank = g_array_index (ranks, guint, i);
      payload = dc_mesh_repair_request_encode (&request);
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_REPAIR_REQUEST, payload, &error))
        g_message ("cannot send a repair request to %s: %s", dc_peer_get_name (peer),
                   error->message);
    }
  {
    const char *leader = g_ptr_array_index (self->roster, 0);
    g_autofree char *text = NULL;

    /* The leader is the first roster device; when that is this device, or
     * it has not finished the step, the next that did stands in. */
    text = g_strdup_printf ("missing a roster gradient of step %" G_GUINT64_FORMAT " (from %s): "
                            "requesting repair from the leader “%s”%s (request %u of %u)",
                            step, missing->str, _dc_train_group_member_name (self, source),
                            g_str_equal (leader, source) ? ""
                            : self->rank == 0 ? ", standing in for this device"
                            : ", standing in for the leader",
                            tries, DC_TRAIN_GROUP_REPAIR_TRIES);
    _dc_train_group_notice (self, "repair", _dc_train_group_member_name (self, source), text);
  }
}

/* Contributions to this device's shard of the step being taken that have
 * not come (the reduce-scatter): asked of their author, which keeps its
 * own. Known lost (the author's summed shard or report came: it queued its
 * contribution to this device before either, on the same ordered
 * channel): at once, again every DC_TRAIN_GROUP_REPAIR_RETRY_S, and after
 * DC_TRAIN_GROUP_REPAIR_TRIES requests the sync guard stops the run. Else
 * asked DC_TRAIN_GROUP_REPAIR_RETRY_S after this device sent its own and
 * every DC_TRAIN_GROUP_REPAIR_RETRY_S after, uncounted. */
void
_dc_train_group_maybe_repair_contributions (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint64 step = model->step + 1;
  gint64 now = g_get_monotonic_time ();

  if (!self->own_sent || self->own_reduced || self->roster->len < 2
      || (self->fault_no_repair != 0 && step == self->fault_no_repair))
    return;
  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      g_autofree char *key = _dc_train_group_contrib_key (step, self->digest, id, self->rank);
      g_autofree char *summed_key = _dc_train_group_gradient_key (step, self->digest, id);
      DcMeshRepairRequest request = { 0 };
      g_autoptr(GBytes) payload = NULL;
      g_autoptr(GError) error = NULL;
      g_autofree char *text = NULL;
      DcPeer *peer;
      gboolean lost;

      if (i == self->rank || g_hash_table_contains (self->contribs, key)
          || now < self->contrib_next[i] || (peer = _dc_train_group_find_peer (self, id)) == NULL)
        continue;
      /* (A summed shard sent during its reducer's backward pass may come
       * before that reducer's contribution to this device's shard.) */
      lost = (g_hash_table_contains (self->gradients, summed_key)
              && _dc_train_group_summed_implies (self, i))
             || _dc_train_group_reported (self, step, id);
      if (!lost && now < self->t_sent + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC)
        continue;
      if (!lost)
        {
          /* Its author may only be slow (a step can take seconds on a slow
           * CPU, and it has nothing to send before it is computed): asked
           * every DC_TRAIN_GROUP_REPAIR_RETRY_S without counting towards the
           * limit; the exchange's 120 s wait bounds it. Two reducers that
           * each lost the other's contribution get out of it this way. */
          self->contrib_next[i] = now + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC;
          memcpy (request.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
          request.step = step;
          request.rank = self->rank;
          payload = dc_mesh_repair_request_encode (&request);
          if (!_dc_train_group_send (self, peer, DC_MESH_MSG_REPAIR_REQUEST, payload, &error))
            g_message ("cannot send a repair request to %s: %s", dc_peer_get_name (peer),
                       error->message);
          g_message ("the contribution of “%s” to this device's shard of step %" G_GUINT64_FORMAT
                     " is %u s late: asked of its author", _dc_train_group_member_name (self, id),
                     step, DC_TRAIN_GROUP_REPAIR_RETRY_S);
          continue;
        }
      if (self->contrib_tries[i] >= DC_TRAIN_GROUP_REPAIR_TRIES)
        {
          _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                                "SYNC GUARD: stopped — contribution of step %" G_GUINT64_FORMAT
                                " from “%s” to this device's shard not repaired after %u "
                                "requests", step, _dc_train_group_member_name (self, id),
                                self->contrib_tries[i]);
          return;
        }
      self->contrib_tries[i]++;
      self->contrib_next[i] = now + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC;
      memcpy (request.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      request.step = step;
      /* This device's own rank: "your contribution to my shard". */
      request.rank = self->rank;
      payload = dc_mesh_repair_request_encode (&request);
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_REPAIR_REQUEST, payload, &error))
        g_message ("cannot send a repair request to %s: %s", dc_peer_get_name (peer),
                   error->message);
      text = g_strdup_printf ("missing the contribution of “%s” to this device's shard of step %"
                              G_GUINT64_FORMAT ": requesting it again from its author "
                              "(request %u of %u)", _dc_train_group_member_name (self, id), step,
                              self->contrib_tries[i], DC_TRAIN_GROUP_REPAIR_TRIES);
      _dc_train_group_notice (self, "repair", _dc_train_group_member_name (self, id), text);
    }
}

/* Takes the last step back: the model as it was before it, to take it again
 * with the roster whose digest is @digest once this device sees the same
 * departures. Its step line and report of that step are superseded. */
void
_dc_train_group_rollback (DcTrainGroup *self,
                          DcPeer       *peer,
                          guint64       digest)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autofree char *text = NULL;

  memcpy (model->params, self->snapshot, 3 * model->n_params * sizeof (float));
  /* Accusations of the step name ranks of the roster it is taken back
   * from: the step taken again is audited again. Those of the step before
   * (checked at the end of this one) stay. */
  for (guint i = self->accusations->len; i > 0; i--)
    if (((Accusation *) g_ptr_array_index (self->accusations, i - 1))->step == model->step)
      g_ptr_array_remove_index (self->accusations, i - 1);
  model->step = self->snap_step;
  model->beta1_pow = self->snap_beta1;
  model->beta2_pow = self->snap_beta2;
  self->step_done = model->step;
  self->rollback_digest = digest;
  self->state = STATE_ROLLING_BACK;
  _dc_train_group_arm (self, DC_TRAIN_GROUP_WAIT_S);
  text = g_strdup_printf ("“%s” takes step %" G_GUINT64_FORMAT " without a device that left: "
                          "taking it again with the same roster", dc_peer_get_name (peer),
                          model->step + 1);
  _dc_train_group_notice (self, "retake", dc_peer_get_name (peer), text);
}

/* A repair answer framed on a worker (repair_frame_worker ()): a shard
 * object is encoded (bf16), cut, hashed and framed (copied and
 * checksummed) there, which for a 72 MB shard held the main thread for
 * hundreds of ms; repair_framed_cb () queues it to the requester, if it is
 * still connected. */
typedef struct
{
  char        *peer_id;
  DcMeshChunk  info;
  GBytes      *object;     /* float32 shard object, as kept */
  DcTrainWire  send_wire;
  gboolean     compress;
  GPtrArray   *frames;     /* out */
  GError      *error;      /* out */
} RepairSend;

static void
repair_send_free (RepairSend *send)
{
  g_free (send->peer_id);
  g_clear_pointer (&send->object, g_bytes_unref);
  g_clear_pointer (&send->frames, g_ptr_array_unref);
  g_clear_error (&send->error);
  g_free (send);
}

static void
repair_frame_worker (GTask        *task,
                     gpointer      source,
                     gpointer      task_data,
                     GCancellable *cancellable)
{
  RepairSend *send = task_data;
  g_autoptr(GBytes) wire = dc_train_shard_encode (send->object, send->send_wire);
  g_autoptr(GPtrArray) bodies = dc_mesh_chunks_split (DC_MESH_MSG_REPAIR, &send->info, wire,
                                                      &send->error);

  if (bodies != NULL)
    send->frames = dc_mesh_chunk_frames_encode_coded (DC_MESH_MSG_REPAIR, bodies, send->compress,
                                                      &send->error);
  g_task_return_boolean (task, TRUE);
}

static void
repair_framed_cb (GObject      *object,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  RepairSend *send = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  DcPeer *peer;

  if (self->state == STATE_DONE || (peer = _dc_train_group_find_peer (self, send->peer_id)) == NULL)
    return;
  if (send->frames == NULL)
    g_message ("cannot send a repair to %s: %s", dc_peer_get_name (peer),
               send->error != NULL ? send->error->message : "not framed");
  else if (!_dc_train_group_send_frames (self, peer, DC_MESH_MSG_REPAIR, send->frames, &error))
    g_message ("cannot send a repair to %s: %s", dc_peer_get_name (peer), error->message);
}

static void
repair_send_later (DcTrainGroup      *self,
                   DcPeer            *peer,
                   const DcMeshChunk *info,
                   GBytes            *object)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, repair_framed_cb, NULL);
  RepairSend *send = g_new0 (RepairSend, 1);

  send->peer_id = g_strdup (dc_peer_get_id (peer));
  send->info = *info;
  send->info.data = NULL;
  send->object = g_bytes_ref (object);
  send->send_wire = _dc_train_group_send_wire (self);
  send->compress = _dc_train_group_compress (self);
  g_task_set_source_tag (task, repair_send_later);
  g_task_set_task_data (task, send, (GDestroyNotify) repair_send_free);
  g_task_run_in_thread (task, repair_frame_worker);
}

/* A roster device asks for the gradient of (step, rank) it lacks: sent as
 * REPAIR chunks, each (step, rank) at most DC_TRAIN_GROUP_REPAIR_TRIES
 * times to one device, so that a peer cannot make this one send megabytes
 * at will. */
void
_dc_train_group_handle_repair_request (DcTrainGroup *self,
                                       DcPeer       *peer,
                                       GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshRepairRequest request = { 0 };
  g_autofree char *prefix = NULL;
  g_autofree char *answered_key = NULL;
  g_autofree char *suffix = NULL;
  gboolean contribution = FALSE;
  GHashTableIter iter;
  gpointer key, value;
  guint sent, count = 0;

  if (self->session == NULL || !_dc_train_group_in_roster (self, dc_peer_get_id (peer)))
    return;
  if (!dc_mesh_repair_request_decode (payload, &request, &error))
    {
      g_message ("a malformed repair request from %s: %s", dc_peer_get_name (peer),
                 error->message);
      return;
    }
  if (memcmp (request.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0)
    return;
  answered_key = g_strdup_printf ("%" G_GUINT64_FORMAT "/%u/%s", request.step, request.rank,
                                  dc_peer_get_id (peer));
  sent = GPOINTER_TO_UINT (g_hash_table_lookup (self->answered, answered_key));
  if (sent >= DC_TRAIN_GROUP_REPAIR_TRIES)
    return;
  prefix = g_strdup_printf ("%" G_GUINT64_FORMAT "/", request.step);
  /* The requester's own rank asks for this device's contribution to its
   * shard (it never lacks its own summed shard); another rank, for that
   * reducer's summed shard. */
  for (guint i = 0; i < self->roster->len; i++)
    if (g_str_equal (g_ptr_array_index (self->roster, i), dc_peer_get_id (peer)))
      contribution = request.rank == i;
  suffix = g_strdup_printf ("/%s/%u", _dc_train_group_own_id (self), request.rank);
  g_hash_table_iter_init (&iter, contribution ? self->contribs : self->gradients);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      Gradient *gradient = value;
      DcMeshChunk info = { 0 };

      /* Every roster this device kept a shard (rank) for: the requester
       * keeps the one of its own roster (the header's digest). */
      if (!g_str_has_prefix (key, prefix)
          || (contribution ? !g_str_has_suffix (key, suffix) : gradient->rank != request.rank))
        continue;
      memcpy (info.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      info.step = request.step;
      info.rank = gradient->rank;
      /* Framed on a worker, then queued (repair_framed_cb ()). */
      repair_send_later (self, peer, &info, gradient->object);
      count++;
    }
  /* A request this device had nothing for (an author asked before it
   * computed its gradient) does not use up the requester's answers. */
  if (count > 0)
    g_hash_table_replace (self->answered, g_steal_pointer (&answered_key),
                          GUINT_TO_POINTER (sent + 1));
  g_message ("repair of step %" G_GUINT64_FORMAT " rank %u for %s: %u %s%s sent",
             request.step, request.rank, dc_peer_get_name (peer), count,
             contribution ? "contribution" : "summed shard", count == 1 ? "" : "s");
}
