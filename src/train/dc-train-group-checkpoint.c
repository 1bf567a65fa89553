/* dc-train-group-checkpoint.c: checkpoint to the group: a run that starts
 * from a checkpoint, and one loaded mid-run; see dc-train-group.h and
 * dc-train-group-private.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

/* What a checkpoint file may add to its weights and both Adam moments
 * (3 × 4 bytes a parameter): the .pt container's pickle, zip headers and
 * tensor names, under 100 KiB for the largest model; 1 MiB leaves room and
 * still bounds what a lying peer can make this device hold. */
#define CHECKPOINT_SLACK  (1024u * 1024u)

/* The largest checkpoint file a config of @width and @seq can name (a
 * checkpoint may have more layers than the width implies, up to
 * DC_GPT_LAYERS_MAX); 0 when the size is not one a group trains (the
 * seeds' range: the Advanced range is for a device alone). */
guint64
_dc_train_group_checkpoint_cap (guint32 width,
                                guint32 seq)
{
  DcGptConfig config;

  dc_gpt_config_init_derived (&config, width, seq);
  config.n_layer = DC_GPT_LAYERS_MAX;
  if (!dc_gpt_config_in_seed_range (&config))
    return 0;
  return MIN ((guint64) 3 * sizeof (float) * dc_gpt_config_n_params (&config) + CHECKPOINT_SLACK,
              (guint64) DC_MESH_WEIGHTS_MAX_TOTAL);
}

/* The config of a run that continues @model: its size and settings (as
 * dc_train_plan_new () takes them), the run's @steps, a fresh run id, and
 * this device as the one that sends the checkpoint. */
static DcMeshRunConfig *
resume_config_new (DcTrainGroup          *self,
                   const DcGptModel      *model,
                   const DcTrainSettings *settings,
                   guint32                steps,
                   const char            *dataset_spec)
{
  DcMeshRunConfig *config = dc_mesh_run_config_new ();
  g_autofree char *hash = dc_gpt_model_dup_hash (model);

  for (guint i = 0; i < DC_MESH_RUN_ID_SIZE; i++)
    config->run_id[i] = (guint8) g_random_int_range (0, 256);
  config->width = model->config.width;
  config->seq = model->config.seq;
  config->batch = settings->batch;
  config->steps = steps;
  config->lr_x1000 = settings->lr_x1000;
  config->numeric_rule_id = _dc_train_group_own_hello (self)->numeric_rule_id;
  config->run_seed = settings->seed;
  config->start_step = model->step;
  config->resume = TRUE;
  _dc_train_group_hash_to_bytes (hash, config->resume_hash);
  g_free (config->dataset_spec);
  config->dataset_spec = g_strdup (dataset_spec != NULL && !g_str_equal (dataset_spec, "builtin")
                                   ? dataset_spec : "");
  g_free (config->probe_hash);
  config->probe_hash = g_strdup (_dc_train_group_own_hello (self)->probe_hash);
  g_free (config->starter_id);
  config->starter_id = g_strdup (_dc_train_group_own_id (self));
  /* A checkpoint loaded mid-run keeps the run's gradient wire. */
  config->gradient_bf16 = self->config != NULL ? self->config->gradient_bf16
                                               : self->request.gradient_wire == DC_TRAIN_WIRE_BF16;
  config->gradient_int8 = self->config != NULL ? self->config->gradient_int8
                                               : self->request.gradient_wire == DC_TRAIN_WIRE_INT8;
  config->chunks_zstd = self->config != NULL
                        ? self->config->chunks_zstd
                        : _dc_train_group_chunks_zstd_for (self->request.gradient_wire);
  return config;
}

/* The checkpoint file @blob read, and its weight hash (@hash): no group
 * state is touched, so a worker runs it (ParseJob). */
static DcGptModel *
checkpoint_read (GBytes           *blob,
                 DcTrainSettings  *settings,
                 char            **hash,
                 GError          **error)
{
  g_autoptr(GError) local = NULL;
  DcGptModel *model = dc_checkpoint_from_bytes (blob, settings, &local);

  if (model == NULL)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the group's checkpoint cannot be read: %s", local->message);
      return NULL;
    }
  *hash = dc_gpt_model_dup_hash (model);
  return model;
}

/* @model (read by checkpoint_read (), weight hash @hash) checked against
 * the @config that announced it (size, settings, step and weight hash). */
static gboolean
checkpoint_check (const DcGptModel       *model,
                  const char             *hash,
                  const DcTrainSettings  *settings,
                  const DcMeshRunConfig  *config,
                  GError                **error)
{
  guint8 bytes[DC_MESH_HASH_SIZE];

  _dc_train_group_hash_to_bytes (hash, bytes);
  if (model->config.width != config->width || model->config.seq != config->seq
      || settings->batch != config->batch || settings->lr_x1000 != config->lr_x1000
      || settings->seed != config->run_seed || model->step != config->start_step
      || memcmp (bytes, config->resume_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_autofree char *announced = _dc_train_group_hash_to_hex (config->resume_hash);

      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the group's checkpoint does not match its config (width %u, sequence %u, "
                   "step %" G_GUINT64_FORMAT ", weight hash %s; announced width %u, sequence %u, "
                   "step %" G_GUINT64_FORMAT ", weight hash %s)", model->config.width,
                   model->config.seq, model->step, hash, config->width, config->seq,
                   config->start_step, announced);
      return FALSE;
    }
  return TRUE;
}

/* The checkpoint file @blob, checked against the @config that announced it
 * (size, settings, step and weight hash): the model to continue. */
static DcGptModel *
checkpoint_parse (GBytes                 *blob,
                  const DcMeshRunConfig  *config,
                  DcTrainSettings        *settings,
                  GError                **error)
{
  g_autofree char *hash = NULL;
  DcGptModel *model = checkpoint_read (blob, settings, &hash, error);

  if (model != NULL && !checkpoint_check (model, hash, settings, config, error))
    g_clear_pointer (&model, dc_gpt_model_free);
  return model;
}

/* A checkpoint read on a worker (parse_worker ()): reading a GPT-2-small
 * state and hashing it (about 1.7 GB) takes seconds, which on the main
 * thread cost a device its peers (4 s). */
struct _ParseJob
{
  guint            gen;       /* self->parse_gen when it began */
  GBytes          *blob;
  /* out */
  DcTrainSettings  settings;
  DcGptModel      *model;
  char            *hash;
  GError          *error;
};

void
_dc_train_group_parse_job_free (ParseJob *job)
{
  if (job == NULL)
    return;
  g_clear_pointer (&job->blob, g_bytes_unref);
  g_clear_pointer (&job->model, dc_gpt_model_free);
  g_free (job->hash);
  g_clear_error (&job->error);
  g_free (job);
}

static void
parse_worker (GTask        *task,
              gpointer      source,
              gpointer      task_data,
              GCancellable *cancellable)
{
  ParseJob *job = task_data;

  job->model = checkpoint_read (job->blob, &job->settings, &job->hash, &job->error);
  g_task_return_boolean (task, TRUE);
}

static void start_from_checkpoint (DcTrainGroup *self,
                                   ParseJob     *job);

/* Back on the main thread: the checkpoint the run switches to is ready
 * (_dc_train_group_switch_run () takes it), or the one a follower waited
 * for starts its run. A later checkpoint or the run's end drops it. */
static void
parsed_cb (GObject      *object,
           GAsyncResult *result,
           gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  ParseJob *job = g_task_get_task_data (G_TASK (result));

  if (job->gen != self->parse_gen || self->state == STATE_DONE)
    return;
  self->parsing = FALSE;
  if (self->switch_config != NULL && self->switch_bytes != NULL)
    {
      ParseJob *kept = g_new0 (ParseJob, 1);

      /* The results move out; the task frees the rest with its data. */
      kept->gen = job->gen;
      kept->settings = job->settings;
      kept->model = g_steal_pointer (&job->model);
      kept->hash = g_steal_pointer (&job->hash);
      kept->error = g_steal_pointer (&job->error);
      _dc_train_group_parse_job_free (self->switch_parsed);
      self->switch_parsed = kept;
      if (self->switch_next_pending)
        _dc_train_group_next_step (self);
      else
        _dc_train_group_advance (self);
    }
  else if (self->state == STATE_WAITING_CHECKPOINT)
    start_from_checkpoint (self, job);
}

/* Reads @blob on a worker; parsed_cb () goes on. One at a time: a new one
 * drops the one out (parse_gen). */
static void
parse_begin (DcTrainGroup *self,
             GBytes       *blob)
{
  g_autoptr(GTask) task = g_task_new (self, NULL, parsed_cb, NULL);
  ParseJob *job = g_new0 (ParseJob, 1);

  job->gen = ++self->parse_gen;
  job->blob = g_bytes_ref (blob);
  self->parsing = TRUE;
  g_clear_pointer (&self->switch_parsed, _dc_train_group_parse_job_free);
  g_task_set_source_tag (task, parse_begin);
  g_task_set_task_data (task, job, (GDestroyNotify) _dc_train_group_parse_job_free);
  g_task_run_in_thread (task, parse_worker);
}

/* Drops a read that is out or done (a switch replaced or abandoned). */
static void
parse_drop (DcTrainGroup *self)
{
  self->parse_gen++;
  self->parsing = FALSE;
  g_clear_pointer (&self->switch_parsed, _dc_train_group_parse_job_free);
}

/* Whether the switch to a checkpoint waits for its read (parse_begin ()). */
gboolean
_dc_train_group_switch_waits (DcTrainGroup *self)
{
  return self->switch_config != NULL && self->switch_bytes != NULL && self->parsing;
}

/* CONFIG, then the checkpoint as CHECKPOINT chunks (step and data position
 * the checkpoint's step), on @peer's one ordered channel. */
static void
send_checkpoint (DcTrainGroup          *self,
                 DcPeer                *peer,
                 const DcMeshRunConfig *config,
                 GBytes                *blob)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) payload = dc_mesh_run_config_encode (config, &error);
  DcMeshChunk info = { 0 };

  if (payload == NULL || !_dc_train_group_send (self, peer, DC_MESH_MSG_CONFIG, payload, &error))
    {
      g_message ("cannot send the checkpoint's config to %s: %s", dc_peer_get_name (peer),
                 error->message);
      return;
    }
  memcpy (info.run_id, config->run_id, DC_MESH_RUN_ID_SIZE);
  info.step = config->start_step;
  info.rank = self->roster != NULL ? self->rank : 0;
  info.position = config->start_step;
  if (!_dc_train_group_send_object (self, peer, DC_MESH_MSG_CHECKPOINT, &info, blob, &error))
    g_message ("cannot send the checkpoint to %s: %s", dc_peer_get_name (peer), error->message);
}

/* The leader, before its report of the step just taken: the loaded
 * checkpoint goes to every roster device (a peer's frames arrive in order,
 * so each has it whole when it has that report), and every device
 * switches to it once the step's reports agree (_dc_train_group_switch_run ()). */
void
_dc_train_group_send_switch (DcTrainGroup *self)
{
  g_autofree char *text = NULL;

  for (guint i = 0; i < self->roster->len; i++)
    {
      DcPeer *peer;

      if (i != self->rank && (peer = _dc_train_group_find_peer (self,
                                                                g_ptr_array_index (self->roster,
                                                                                   i))) != NULL)
        send_checkpoint (self, peer, self->pending_config, self->pending_bytes);
    }
  g_clear_pointer (&self->switch_config, dc_mesh_run_config_free);
  g_clear_pointer (&self->switch_bytes, g_bytes_unref);
  self->switch_config = g_steal_pointer (&self->pending_config);
  self->switch_bytes = g_steal_pointer (&self->pending_bytes);
  if (self->switch_bytes != NULL)
    parse_begin (self, self->switch_bytes);
  text = g_strdup_printf ("sending the checkpoint of step %" G_GUINT64_FORMAT " to the group: "
                          "every device continues from it after step %" G_GUINT64_FORMAT,
                          self->switch_config->start_step,
                          dc_train_session_get_model (self->session)->step);
  _dc_train_group_notice (self, "checkpoint", NULL, text);
}

/* After the step whose reports just agreed: every device leaves the run for
 * the one the leader's checkpoint starts (a new run id, so nothing of the
 * old run is taken for the new), with the same roster, the leader as its
 * starter. From here it is a run started from a checkpoint. */
void
_dc_train_group_switch_run (DcTrainGroup *self)
{
  g_autoptr(GError) error = NULL;
  DcGptModel *model;
  GHashTableIter iter;
  gpointer key, value;
  g_autofree char *text = NULL;
  g_autofree char *from = g_strdup (_dc_train_group_member_name (self,
                                                                 self->switch_config->starter_id));
  g_autofree char *hash = NULL;

  if (self->switch_bytes == NULL)
    {
      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                            "SYNC GUARD: stopped — the checkpoint “%s” sent to the group "
                            "did not arrive whole", from);
      return;
    }
  /* Read and hashed on a worker (parse_begin ()); _dc_train_group_next_step ()
   * waited for it. */
  if (self->switch_parsed == NULL)
    {
      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                            "SYNC GUARD: stopped — the checkpoint “%s” sent to the group "
                            "did not arrive whole", from);
      return;
    }
  if (self->switch_parsed->model == NULL)
    {
      _dc_train_group_finish (self, g_steal_pointer (&self->switch_parsed->error));
      return;
    }
  if (!checkpoint_check (self->switch_parsed->model, self->switch_parsed->hash,
                         &self->switch_parsed->settings, self->switch_config, &error))
    {
      _dc_train_group_finish (self, g_steal_pointer (&error));
      return;
    }
  model = g_steal_pointer (&self->switch_parsed->model);
  self->resume_settings = self->switch_parsed->settings;
  hash = g_steal_pointer (&self->switch_parsed->hash);
  parse_drop (self);
  g_clear_pointer (&self->resume_model, dc_gpt_model_free);
  self->resume_model = model;
  g_clear_pointer (&self->config, dc_mesh_run_config_free);
  self->config = g_steal_pointer (&self->switch_config);
  g_clear_pointer (&self->switch_bytes, g_bytes_unref);
  self->starter = g_strcmp0 (self->config->starter_id, _dc_train_group_own_id (self)) == 0;
  self->joining = FALSE;
  g_hash_table_remove_all (self->gradients);
  g_hash_table_remove_all (self->contribs);
  g_hash_table_remove_all (self->assemblies);
  g_hash_table_remove_all (self->answered);
  g_hash_table_remove_all (self->joiners);
  g_hash_table_remove_all (self->evicted);
  g_ptr_array_set_size (self->accusations, 0);
  g_hash_table_remove_all (self->start_sent);
  g_hash_table_remove_all (self->reports);
  g_hash_table_iter_init (&iter, self->switch_reports);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      g_hash_table_insert (self->reports, g_strdup (key), value);
      g_hash_table_iter_steal (&iter);
      g_free (key);
    }
  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_pointer (&self->plan, dc_train_plan_free);
  g_clear_pointer (&self->own_grads, g_free);
  g_clear_pointer (&self->snapshot, g_free);
  g_clear_pointer (&self->snapshot_prev, g_free);
  g_clear_pointer (&self->snapshot_prev2, g_free);
  /* Audits of the run left (none runs: _dc_train_group_next_step () waited). */
  g_clear_pointer (&self->audit_next, _dc_train_group_audit_job_free);
  self->step_done = self->config->start_step;
  text = g_strdup_printf ("continuing from the checkpoint “%s” sent to the group: step %"
                          G_GUINT64_FORMAT ", weight hash %s, %u devices", from,
                          model->step, hash, self->roster->len);
  _dc_train_group_notice (self, "checkpoint", from, text);
  _dc_train_group_start_run (self);
}

/* The starter of a run from a checkpoint (dc_train_group_set_resume ()):
 * CONFIG with the resume flag, then the checkpoint file, to every admitted
 * device connected; they prepare from it and answer with their report of
 * its step, as for a fresh run's step 0. */
void
_dc_train_group_send_resume_config (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) roster = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
  guint32 steps = self->request.steps > 0 ? self->request.steps : self->resume_settings.steps;
  g_autofree char *text = NULL;

  self->config = resume_config_new (self, self->resume_model, &self->resume_settings, steps,
                                    self->request.data);
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
      send_checkpoint (self, peer, self->config, self->resume_bytes);
    }
  _dc_train_group_set_roster (self, roster);
  g_clear_pointer (&self->resume_bytes, g_bytes_unref);
  text = g_strdup_printf ("starting the run with %u devices from the checkpoint at step %"
                          G_GUINT64_FORMAT " (seed %" G_GUINT64_FORMAT ")", roster->len,
                          self->config->start_step, self->config->run_seed);
  _dc_train_group_notice (self, "config", NULL, text);
  _dc_train_group_start_run (self);
}

/* The leader takes a checkpoint (loaded here, or forwarded by @who): it
 * goes to the group before the leader's next step report. */
static void
take_checkpoint (DcTrainGroup          *self,
                 const DcGptModel      *model,
                 const DcTrainSettings *settings,
                 const char            *who)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) blob = dc_checkpoint_to_bytes (model, settings, &error);
  g_autofree char *text = NULL;

  if (blob == NULL)
    {
      g_message ("cannot send the checkpoint to the group: %s", error->message);
      return;
    }
  g_clear_pointer (&self->pending_config, dc_mesh_run_config_free);
  g_clear_pointer (&self->pending_bytes, g_bytes_unref);
  self->pending_config = resume_config_new (self, model, settings, self->config->steps,
                                            self->config->dataset_spec);
  self->pending_bytes = g_steal_pointer (&blob);
  text = g_strdup_printf ("%s%s%s a checkpoint of step %" G_GUINT64_FORMAT ": the group switches "
                          "to it after the next step", who != NULL ? "“" : "",
                          who != NULL ? who : "loaded", who != NULL ? "” sent" : "",
                          model->step);
  _dc_train_group_notice (self, "checkpoint", who, text);
}

/* While a run is under way, a CONFIG with the resume flag: the leader's
 * switch to a checkpoint (from the roster's first device), or, on the
 * leader, a checkpoint a roster device loaded and forwards. Returns FALSE
 * for any other config (a join announcement). */
gboolean
_dc_train_group_handle_checkpoint_config (DcTrainGroup *self,
                                          DcPeer       *peer,
                                          GBytes       *payload)
{
  g_autoptr(DcMeshRunConfig) config = NULL;
  const char *from = dc_peer_get_id (peer);
  g_autofree char *assembly_key = NULL;

  if (self->config == NULL || self->roster == NULL || self->roster->len == 0
      || (config = dc_mesh_run_config_decode (payload, NULL)) == NULL || !config->resume)
    return FALSE;
  if (!_dc_train_group_in_roster (self, from) || g_strcmp0 (config->starter_id, from) != 0
      || config->start_step >= config->steps || _dc_train_group_checkpoint_cap (config->width,
                                                                                config->seq) == 0)
    return TRUE;
  assembly_key = g_strconcat ("checkpoint/", from, NULL);
  g_hash_table_remove (self->assemblies, assembly_key);
  if (g_str_equal (g_ptr_array_index (self->roster, 0), from) && self->rank != 0)
    {
      g_autofree char *text = NULL;

      if (self->switch_config != NULL)
        return TRUE;  /* one switch at a time */
      text = g_strdup_printf ("“%s” sends the group a checkpoint of step %" G_GUINT64_FORMAT
                              ": every device continues from it after this step",
                              _dc_train_group_member_name (self, from), config->start_step);
      self->switch_config = g_steal_pointer (&config);
      g_clear_pointer (&self->switch_bytes, g_bytes_unref);
      parse_drop (self);
      g_hash_table_remove_all (self->switch_reports);
      _dc_train_group_notice (self, "checkpoint", _dc_train_group_member_name (self, from), text);
    }
  else if (self->rank == 0)
    {
      g_message ("“%s” forwards a checkpoint of step %" G_GUINT64_FORMAT " to the leader",
                 _dc_train_group_member_name (self, from), config->start_step);
      g_clear_pointer (&self->proposal, dc_mesh_run_config_free);
      g_free (self->proposal_from);
      self->proposal = g_steal_pointer (&config);
      self->proposal_from = g_strdup (from);
    }
  return TRUE;
}

/* The starter's checkpoint this follower waited for, read on a worker:
 * checked against the run's config, it starts the run. */
static void
start_from_checkpoint (DcTrainGroup *self,
                       ParseJob     *job)
{
  g_autoptr(GError) error = NULL;

  if (job->model == NULL)
    {
      _dc_train_group_finish (self, g_steal_pointer (&job->error));
      return;
    }
  if (!checkpoint_check (job->model, job->hash, &job->settings, self->config, &error))
    {
      _dc_train_group_finish (self, g_steal_pointer (&error));
      return;
    }
  self->resume_settings = job->settings;
  g_clear_pointer (&self->resume_model, dc_gpt_model_free);
  self->resume_model = g_steal_pointer (&job->model);
  _dc_train_group_start_run (self);
}

/* A CHECKPOINT chunk: the starter's checkpoint this follower waits for, the
 * leader's checkpoint the group switches to, or (on the leader) one a
 * roster device forwards. Anything else is dropped. */
void
_dc_train_group_handle_checkpoint (DcTrainGroup *self,
                                   DcPeer       *peer,
                                   GBytes       *payload)
{
  g_auto(DcMeshChunk) chunk = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) object = NULL;
  g_autofree char *assembly_key = NULL;
  const char *from = dc_peer_get_id (peer);
  DcMeshRunConfig *config;
  Assembly *assembly;
  guint64 cap;

  if (self->state == STATE_WAITING_CHECKPOINT && g_strcmp0 (from, self->checkpoint_from) == 0)
    config = self->config;
  else if (self->switch_config != NULL && self->switch_bytes == NULL
           && g_strcmp0 (from, self->switch_config->starter_id) == 0)
    config = self->switch_config;
  else if (self->proposal != NULL && g_strcmp0 (from, self->proposal_from) == 0)
    config = self->proposal;
  else
    return;
  if (!dc_mesh_chunk_decode_prehashed (DC_MESH_MSG_CHECKPOINT, payload, 0,
                                       dc_peer_get_message_data_hash (peer), &chunk, &error))
    {
      g_message ("a malformed checkpoint chunk from %s: %s", dc_peer_get_name (peer),
                 error->message);
      return;
    }
  if (memcmp (chunk.run_id, config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || chunk.step != config->start_step
      || (cap = _dc_train_group_checkpoint_cap (config->width, config->seq)) == 0)
    return;
  assembly_key = g_strconcat ("checkpoint/", from, NULL);
  assembly = g_hash_table_lookup (self->assemblies, assembly_key);
  if (assembly == NULL)
    {
      assembly = g_new0 (Assembly, 1);
      assembly->assembler = dc_mesh_chunk_assembler_new (DC_MESH_MSG_CHECKPOINT, cap);
      g_hash_table_insert (self->assemblies, g_strdup (assembly_key), assembly);
    }
  if (!dc_mesh_chunk_assembler_push (assembly->assembler, &chunk, &object, &error))
    {
      g_message ("a bad checkpoint chunk from %s: %s", dc_peer_get_name (peer), error->message);
      g_hash_table_remove (self->assemblies, assembly_key);
      return;
    }
  if (object == NULL)
    return;
  g_hash_table_remove (self->assemblies, assembly_key);

  if (config == self->config)
    {
      /* Read and hashed on a worker; start_from_checkpoint () goes on. */
      if (!self->parsing)
        parse_begin (self, object);
    }
  else if (config == self->switch_config)
    {
      self->switch_bytes = g_steal_pointer (&object);
      parse_begin (self, self->switch_bytes);
    }
  else
    {
      DcTrainSettings settings;
      DcGptModel *model = checkpoint_parse (object, config, &settings, &error);
      g_autofree char *name = g_strdup (dc_peer_get_name (peer));

      g_clear_pointer (&self->proposal, dc_mesh_run_config_free);
      g_clear_pointer (&self->proposal_from, g_free);
      if (model == NULL)
        {
          g_message ("the checkpoint %s sent is not taken: %s", name, error->message);
          return;
        }
      take_checkpoint (self, model, &settings, name);
      dc_gpt_model_free (model);
    }
}

/**
 * dc_train_group_set_resume:
 * @model: (transfer none): the checkpoint's model to continue
 * @settings: its saved settings
 *
 * Makes the run this device starts continue @model, as `train --resume`
 * does (its size and settings; the request's steps, when given, extend or
 * shorten the run): the config carries the resume flag and every device
 * receives the checkpoint with it. Call before dc_train_group_start(); it
 * matters only where this device starts the run.
 *
 * Returns: %FALSE with @error set when the checkpoint cannot be sent or
 *   has nothing left to train
 */
gboolean
dc_train_group_set_resume (DcTrainGroup           *self,
                           const DcGptModel       *model,
                           const DcTrainSettings  *settings,
                           GError                **error)
{
  g_autoptr(GBytes) blob = NULL;
  DcTrainSettings saved = *settings;
  DcGptModel *copy;

  g_return_val_if_fail (DC_IS_TRAIN_GROUP (self), FALSE);
  g_return_val_if_fail (!self->started, FALSE);

  if (self->request.steps > 0)
    saved.steps = self->request.steps;
  if (model->step >= saved.steps)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the checkpoint is at step %" G_GUINT64_FORMAT " and the run ends at step %u: "
                   "nothing left to train (give more steps)", model->step, saved.steps);
      return FALSE;
    }
  blob = dc_checkpoint_to_bytes (model, &saved, error);
  if (blob == NULL)
    return FALSE;
  /* Every device, this one included, continues what it reads from these
   * bytes: the same model by construction. */
  copy = dc_checkpoint_from_bytes (blob, &self->resume_settings, error);
  if (copy == NULL)
    return FALSE;
  g_clear_pointer (&self->resume_model, dc_gpt_model_free);
  self->resume_model = copy;
  g_clear_pointer (&self->resume_bytes, g_bytes_unref);
  self->resume_bytes = g_steal_pointer (&blob);
  return TRUE;
}

/**
 * dc_train_group_load_checkpoint:
 * @model: (transfer none): a checkpoint's model, loaded on this device
 * @settings: its saved settings
 *
 * Applies a checkpoint to the whole group while a run is under way: the
 * leader (the first roster device) sends it to every roster device before
 * its next step report, and after that step every device continues from
 * it, with its size and settings, to the run's last step (a new run with
 * the same devices). On another device the checkpoint is forwarded to the
 * leader, which does the same (docs/ARCHITECTURE.md, "Checkpoint to the
 * group").
 *
 * Returns: %FALSE with @error set when no run is under way or the
 *   checkpoint has nothing left to train
 */
gboolean
dc_train_group_load_checkpoint (DcTrainGroup           *self,
                                const DcGptModel       *model,
                                const DcTrainSettings  *settings,
                                GError                **error)
{
  g_autoptr(DcMeshRunConfig) config = NULL;
  g_autoptr(GBytes) blob = NULL;
  const char *leader;
  DcPeer *peer;
  g_autofree char *text = NULL;

  g_return_val_if_fail (DC_IS_TRAIN_GROUP (self), FALSE);

  if (self->state == STATE_DONE || self->session == NULL || self->roster == NULL
      || self->config == NULL)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "no group run is under way: Start continues a loaded checkpoint");
      return FALSE;
    }
  if (model->step >= self->config->steps)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the checkpoint is at step %" G_GUINT64_FORMAT " and the run ends at step %u: "
                   "nothing left to train", model->step, self->config->steps);
      return FALSE;
    }
  if (self->rank == 0)
    {
      take_checkpoint (self, model, settings, NULL);
      return TRUE;
    }
  leader = g_ptr_array_index (self->roster, 0);
  if ((peer = _dc_train_group_find_peer (self, leader)) == NULL)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the leader “%s” is not connected: load the checkpoint again once the "
                   "group has a leader", _dc_train_group_member_name (self, leader));
      return FALSE;
    }
  blob = dc_checkpoint_to_bytes (model, settings, error);
  if (blob == NULL)
    return FALSE;
  config = resume_config_new (self, model, settings, self->config->steps,
                              self->config->dataset_spec);
  send_checkpoint (self, peer, config, blob);
  text = g_strdup_printf ("loaded a checkpoint of step %" G_GUINT64_FORMAT ": sent to the leader "
                          "“%s”, which switches the group to it after a step", model->step,
                          _dc_train_group_member_name (self, leader));
  _dc_train_group_notice (self, "checkpoint", _dc_train_group_member_name (self, leader), text);
  return TRUE;
}
