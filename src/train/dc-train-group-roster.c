/* dc-train-group-roster.c: membership: the first roster, devices leaving,
 * devices joining mid-run (CONFIG after a step, WEIGHTS); see
 * dc-train-group.h and dc-train-group-private.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

/* The WEIGHTS object for the devices joining after a step, cut into
 * chunks (each hashed) on a worker: at a GPT-2-small width 1 GB to hash,
 * seconds that the main thread (the peers' heartbeats) must not wait. */
typedef struct
{
  GBytes      *state;
  DcMeshChunk  info;
  GPtrArray   *ids;     /* char*: the joiners to send it to */
  GPtrArray   *bodies;  /* GBytes*: its chunks, once split */
} SplitWeights;

static void
split_weights_free (SplitWeights *split)
{
  g_clear_pointer (&split->state, g_bytes_unref);
  g_clear_pointer (&split->ids, g_ptr_array_unref);
  g_clear_pointer (&split->bodies, g_ptr_array_unref);
  g_free (split);
}

static void
split_weights_worker (GTask        *task,
                      gpointer      source,
                      gpointer      data,
                      GCancellable *cancellable)
{
  SplitWeights *split = data;
  GError *error = NULL;

  split->bodies = dc_mesh_chunks_split (DC_MESH_MSG_WEIGHTS, &split->info, split->state,
                                        &error);
  if (split->bodies == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
weights_split_cb (GObject      *object,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  SplitWeights *split = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      g_message ("cannot send the weights: %s", error->message);
      return;
    }
  if (self->state == STATE_DONE)
    return;
  for (guint i = 0; i < split->ids->len; i++)
    {
      const char *id = g_ptr_array_index (split->ids, i);
      DcPeer *peer = _dc_train_group_find_peer (self, id);
      g_autoptr(GError) send_error = NULL;

      /* One that left meanwhile is dropped at the boundary's wait. */
      if (peer != NULL
          && !_dc_train_group_send_chunks (self, peer, DC_MESH_MSG_WEIGHTS, split->bodies,
                                           &send_error))
        g_message ("cannot send the weights to %s: %s", dc_peer_get_name (peer),
                   send_error->message);
    }
}

/* The leader, after step S: every admitted device connected to it that is
 * not in the roster joins after S. It announces each with a CONFIG whose
 * start_step is S and starter_id the joiner's id, sent to the roster and
 * the joiner before its report of S (a peer's frames arrive in order, so
 * every roster device knows of the joiner when it has the leader's report),
 * then sends the joiner the state after S (WEIGHTS). Everyone then waits at
 * the boundary for the joiner's report of S (STATE_ADMITTING). */
void
_dc_train_group_announce_joiners (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
  SplitWeights *split = NULL;

  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);
      const char *id = dc_peer_get_id (peer);
      g_autoptr(DcMeshRunConfig) config = NULL;
      g_autoptr(GBytes) payload = NULL;
      g_autoptr(GError) error = NULL;
      g_autofree char *text = NULL;

      if (_dc_train_group_find_peer (self, id) == NULL || _dc_train_group_in_roster (self, id)
          || g_hash_table_contains (self->joiners, id) || !_dc_train_group_admitted (self, peer)
          || self->roster->len + g_hash_table_size (self->joiners) >= DC_MESH_ROSTER_MAX
          || !_dc_train_group_joiner_can_hold (self, peer))
        continue;
      config = dc_mesh_run_config_new ();
      memcpy (config->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      config->width = self->config->width;
      config->seq = self->config->seq;
      config->n_layer = self->config->n_layer;
      config->n_head = self->config->n_head;
      config->batch = self->config->batch;
      config->steps = self->config->steps;
      config->lr_x1000 = self->config->lr_x1000;
      config->numeric_rule_id = self->config->numeric_rule_id;
      config->run_seed = self->config->run_seed;
      config->start_step = model->step;
      g_free (config->dataset_spec);
      config->dataset_spec = g_strdup (self->config->dataset_spec);
      g_free (config->probe_hash);
      config->probe_hash = g_strdup (self->config->probe_hash);
      g_free (config->starter_id);
      config->starter_id = g_strdup (id);
      config->gradient_bf16 = self->config->gradient_bf16;
      config->gradient_int8 = self->config->gradient_int8;
      config->chunks_zstd = self->config->chunks_zstd;
      payload = dc_mesh_run_config_encode (config, &error);
      if (payload == NULL)
        {
          g_message ("cannot announce %s: %s", dc_peer_get_name (peer), error->message);
          continue;
        }
      g_hash_table_insert (self->joiners, g_strdup (id), GSIZE_TO_POINTER (model->step));
      _dc_train_group_send_to_roster (self, DC_MESH_MSG_CONFIG, payload);
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_CONFIG, payload, &error))
        g_message ("cannot send the config to %s: %s", dc_peer_get_name (peer), error->message);
      g_clear_error (&error);

      if (split == NULL)
        {
          gsize size = WEIGHTS_HEADER_SIZE + 3 * model->n_params * sizeof (float);
          guint8 *data = g_malloc (size);
          guint32 word = GUINT32_TO_LE (WEIGHTS_MAGIC);
          guint64 wide;

          memset (data, 0, WEIGHTS_HEADER_SIZE);
          memcpy (data, &word, 4);
          wide = GUINT64_TO_LE ((guint64) model->n_params);
          memcpy (data + 8, &wide, 8);
          wide = GUINT64_TO_LE (model->step);
          memcpy (data + 16, &wide, 8);
          memcpy (data + 24, &model->beta1_pow, 4);
          memcpy (data + 28, &model->beta2_pow, 4);
          /* A copy (one pass, far below a heartbeat's timeout), so that the
           * worker never reads a model the next step may change. */
          memcpy (data + WEIGHTS_HEADER_SIZE, model->params, 3 * model->n_params * sizeof (float));
          split = g_new0 (SplitWeights, 1);
          split->state = g_bytes_new_take (data, size);
          split->ids = g_ptr_array_new_with_free_func (g_free);
          memcpy (split->info.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
          split->info.step = model->step;
          split->info.rank = self->rank;
          /* Every batch is drawn from (run seed, rank, step): the step is
           * the data position. */
          split->info.position = model->step;
        }
      g_ptr_array_add (split->ids, g_strdup (id));
      text = g_strdup_printf ("“%s” joins the run after step %" G_GUINT64_FORMAT
                              ": sending it the weights",
                              _dc_train_group_member_name (self, id), model->step);
      _dc_train_group_notice (self, "join", _dc_train_group_member_name (self, id), text);
    }
  if (split != NULL)
    {
      g_autoptr(GTask) task = g_task_new (self, NULL, weights_split_cb, NULL);

      g_task_set_task_data (task, split, (GDestroyNotify) split_weights_free);
      g_task_run_in_thread (task, split_weights_worker);
    }
}

/* Roster members that were connected and are not any more. */
gboolean
_dc_train_group_drop_gone (DcTrainGroup *self,
                           guint64       step)
{
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);
  gboolean dropped = FALSE;

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);

      if (i == self->rank || _dc_train_group_find_peer (self, id) != NULL)
        g_ptr_array_add (kept, g_strdup (id));
      else
        {
          const char *name = _dc_train_group_member_name (self, id);
          g_autofree char *text = g_strdup_printf ("“%s” left: dropped from the roster at step %"
                                                   G_GUINT64_FORMAT, name, step);

          _dc_train_group_notice (self, "dropped", name, text);
          dropped = TRUE;
        }
    }
  if (dropped)
    _dc_train_group_set_roster (self, kept);
  return dropped;
}

/* The follower's first roster, from the starter's step-0 report. */
gboolean
_dc_train_group_adopt_start (DcTrainGroup *self)
{
  g_autofree char *key = _dc_train_group_report_key (self->config->start_step,
                                                     self->config->starter_id);
  DcMeshStepReport *report = g_hash_table_lookup (self->reports, key);
  g_autoptr(GPtrArray) roster = NULL;
  g_autofree char *hash = NULL;
  guint8 own[DC_MESH_HASH_SIZE];
  gboolean found = FALSE;

  if (report == NULL
      || memcmp (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0)
    return FALSE;
  roster = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; report->roster[i] != NULL; i++)
    {
      if (i > 0 && strcmp (report->roster[i - 1], report->roster[i]) >= 0)
        {
          _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                                "the starter's roster is not in canonical order");
          return FALSE;
        }
      found = found || g_str_equal (report->roster[i], _dc_train_group_own_id (self));
      g_ptr_array_add (roster, g_strdup (report->roster[i]));
    }
  if (!found)
    {
      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                            "this device is not in the run's roster (it came too late)");
      return FALSE;
    }
  _dc_train_group_set_roster (self, roster);
  /* Hashed by prepare_worker (): seconds at the Advanced sizes. */
  if (self->start_hash != NULL
      && self->start_hash_step == dc_train_session_get_model (self->session)->step)
    hash = g_strdup (self->start_hash);
  else
    hash = dc_gpt_model_dup_hash (dc_train_session_get_model (self->session));
  _dc_train_group_hash_to_bytes (hash, own);
  if (memcmp (own, report->weights_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_autofree char *theirs = _dc_train_group_hash_to_hex (report->weights_hash);

      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                            "SYNC GUARD: stopped — weight hash mismatch at step %"
                            G_GUINT64_FORMAT ": “%s” %s, “%s” %s", self->config->start_step,
                            _dc_train_group_member_name (self, self->config->starter_id), theirs,
                            _dc_train_group_own_hello (self)->name, hash);
      return FALSE;
    }
  return TRUE;
}

/* After step @step: the devices announced to join after it enter the
 * roster, and the step waits for their reports (STATE_ADMITTING). */
gboolean
_dc_train_group_enter_admitting (DcTrainGroup *self,
                                 guint64       step)
{
  g_autoptr(GPtrArray) roster = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer key, value;
  gboolean any = FALSE;

  for (guint i = 0; i < self->roster->len; i++)
    g_ptr_array_add (roster, g_strdup (g_ptr_array_index (self->roster, i)));
  g_hash_table_iter_init (&iter, self->joiners);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (GPOINTER_TO_SIZE (value) == step && !_dc_train_group_in_roster (self, key)
        && roster->len < DC_MESH_ROSTER_MAX)
      {
        g_ptr_array_add (roster, g_strdup (key));
        any = TRUE;
      }
  if (!any)
    return FALSE;
  _dc_train_group_set_roster (self, roster);
  g_hash_table_remove_all (self->start_sent);
  self->state = STATE_ADMITTING;
  _dc_train_group_arm (self, DC_TRAIN_GROUP_CONNECT_S);
  return TRUE;
}

/* What load_weights_worker () is given and hands back. */
typedef struct
{
  GBytes  *weights;
  guint64  step;
  float    beta1_pow, beta2_pow;
  char    *hash, *optimizer;
} LoadWeights;

static void
load_weights_free (LoadWeights *load)
{
  g_clear_pointer (&load->weights, g_bytes_unref);
  g_free (load->hash);
  g_free (load->optimizer);
  g_free (load);
}

/* The copy of the state into the model and its hashes: at a GPT-2-small
 * width 1 GB copied and 1.7 GB hashed, seconds that the main thread (the
 * peers' heartbeats) must not wait. Nothing else touches the model while
 * the joiner waits for its weights. */
static void
load_weights_worker (GTask        *task,
                     gpointer      source,
                     gpointer      data,
                     GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  LoadWeights *load = data;
  DcGptModel *model = dc_train_session_get_model (self->session);
  const guint8 *bytes = g_bytes_get_data (load->weights, NULL);

  memcpy (model->params, bytes + WEIGHTS_HEADER_SIZE, 3 * model->n_params * sizeof (float));
  model->beta1_pow = load->beta1_pow;
  model->beta2_pow = load->beta2_pow;
  model->step = load->step;
  g_clear_pointer (&load->weights, g_bytes_unref);
  _dc_train_group_hash_state (self, model, &load->hash, &load->optimizer);
  g_task_return_boolean (task, TRUE);
}

/* The joiner, on the main thread again: the loaded state checked against
 * the leader's report of S (which also names the roster it joins). */
static void
weights_loaded_cb (GObject      *object,
                   GAsyncResult *result,
                   gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  LoadWeights *load = g_task_get_task_data (G_TASK (result));
  DcGptModel *model;
  g_autofree char *key = NULL;
  DcMeshStepReport *report;
  g_autoptr(GPtrArray) roster = NULL;
  guint8 own[DC_MESH_HASH_SIZE], own_optimizer[DC_MESH_HASH_SIZE];
  g_autofree char *text = NULL;

  self->loading_weights = FALSE;
  if (self->state != STATE_WAITING_WEIGHTS)
    return;
  model = dc_train_session_get_model (self->session);
  self->step_done = model->step;
  key = _dc_train_group_report_key (self->config->start_step, self->join_from);
  report = g_hash_table_lookup (self->reports, key);
  if (report == NULL)
    {
      /* Only a checkpoint switched to meanwhile drops it. */
      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                            "the report of step %" G_GUINT64_FORMAT " from “%s” went away "
                            "while its weights were loaded", model->step,
                            _dc_train_group_member_name (self, self->join_from));
      return;
    }
  _dc_train_group_hash_to_bytes (load->hash, own);
  _dc_train_group_hash_to_bytes (load->optimizer, own_optimizer);
  if (memcmp (own, report->weights_hash, DC_MESH_HASH_SIZE) != 0
      || memcmp (own_optimizer, report->optimizer_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_autofree char *theirs = _dc_train_group_hash_to_hex (report->weights_hash);

      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                            "SYNC GUARD: stopped — weight hash mismatch at step %"
                            G_GUINT64_FORMAT ": “%s” %s, “%s” (joining) %s", model->step,
                            _dc_train_group_member_name (self, self->join_from), theirs,
                            _dc_train_group_own_hello (self)->name, load->hash);
      return;
    }
  roster = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; report->roster[i] != NULL && i + 1 < DC_MESH_ROSTER_MAX; i++)
    if (!g_str_equal (report->roster[i], _dc_train_group_own_id (self)))
      g_ptr_array_add (roster, g_strdup (report->roster[i]));
  g_ptr_array_add (roster, g_strdup (_dc_train_group_own_id (self)));
  _dc_train_group_set_roster (self, roster);
  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  self->own_report = _dc_train_group_make_report_hashed (self, load->hash, load->optimizer);
  g_hash_table_remove_all (self->start_sent);
  text = g_strdup_printf ("joined the run after step %" G_GUINT64_FORMAT " with %u devices "
                          "(weights %s)", model->step, self->roster->len, load->hash);
  _dc_train_group_notice (self, "joined-run", NULL, text);
  self->state = STATE_ADMITTING;
  _dc_train_group_arm (self, DC_TRAIN_GROUP_CONNECT_S);
  _dc_train_group_advance (self);
}

/* The joiner: the state after step S from the leader, loaded on a worker
 * (weights_loaded_cb () checks it). */
void
_dc_train_group_load_weights (DcTrainGroup *self)
{
  g_autofree char *key = NULL;
  DcMeshStepReport *report;
  DcGptModel *model = dc_train_session_get_model (self->session);
  const guint8 *data;
  gsize size;
  DcTrainWeightsHeader header;
  g_autoptr(GError) error = NULL;
  g_autoptr(GTask) task = NULL;
  LoadWeights *load;

  if (self->loading_weights)
    return;
  key = _dc_train_group_report_key (self->config->start_step, self->join_from);
  report = g_hash_table_lookup (self->reports, key);
  if (self->weights == NULL || report == NULL)
    return;
  data = g_bytes_get_data (self->weights, &size);
  if (!dc_train_weights_header_parse (data, size, model->n_params, self->config->start_step,
                                      &header, &error))
    {
      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                            "the weights from “%s” do not fit the run's model (%"
                            G_GSIZE_FORMAT " bytes for %" G_GSIZE_FORMAT " parameters): %s",
                            _dc_train_group_member_name (self, self->join_from), size,
                            model->n_params, error->message);
      return;
    }
  load = g_new0 (LoadWeights, 1);
  load->weights = g_steal_pointer (&self->weights);
  load->step = self->config->start_step;
  load->beta1_pow = header.beta1_pow;
  load->beta2_pow = header.beta2_pow;
  self->loading_weights = TRUE;
  task = g_task_new (self, NULL, weights_loaded_cb, NULL);
  g_task_set_task_data (task, load, (GDestroyNotify) load_weights_free);
  g_task_run_in_thread (task, load_weights_worker);
}

/* A run's settings as a follower's notice shows them, with its gradient
 * wire when it is not f32's (a run of another wire has other hashes: the
 * user should see why), and whether its chunks go compressed. */
static char *
settings_text (DcTrainGroup          *self,
               const DcMeshRunConfig *config)
{
  DcTrainWire wire = _dc_train_group_wire (self);

  return g_strdup_printf ("width %u, sequence %u, batch %u, %u steps, lr %u/1000, seed %"
                          G_GUINT64_FORMAT "%s%s%s", config->width, config->seq, config->batch,
                          config->steps, config->lr_x1000, config->run_seed,
                          wire == DC_TRAIN_WIRE_F32 ? "" : ", gradients on the wire as ",
                          wire == DC_TRAIN_WIRE_F32 ? "" : dc_train_wire_to_string (wire),
                          config->chunks_zstd ? ", compressed (zstd)" : "");
}

void
_dc_train_group_handle_config (DcTrainGroup *self,
                               DcPeer       *peer,
                               GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshRunConfig *config;
  gboolean join;

  if (!_dc_train_group_admitted (self, peer))
    return;
  if (self->state != STATE_WAITING_CONFIG)
    {
      g_autoptr(DcMeshRunConfig) announced = NULL;

      if (_dc_train_group_handle_checkpoint_config (self, peer, payload))
        return;
      /* The leader announces a device joining after the step it took. */
      if (self->config == NULL || self->roster == NULL || self->roster->len == 0
          || !g_str_equal (g_ptr_array_index (self->roster, 0), dc_peer_get_id (peer))
          || (announced = dc_mesh_run_config_decode (payload, NULL)) == NULL
          || memcmp (announced->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
          || announced->start_step + 1 < self->step_done
          || announced->start_step > self->step_done + 1
          || _dc_train_group_in_roster (self, announced->starter_id)
          || g_hash_table_contains (self->joiners, announced->starter_id))
        return;
      g_hash_table_insert (self->joiners, g_strdup (announced->starter_id),
                           GSIZE_TO_POINTER (announced->start_step));
      {
        const char *name = _dc_train_group_member_name (self, announced->starter_id);
        g_autofree char *text = g_strdup_printf ("“%s” joins the run after step %"
                                                 G_GUINT64_FORMAT, name, announced->start_step);

        _dc_train_group_notice (self, "join", name, text);
      }
      return;
    }
  config = dc_mesh_run_config_decode (payload, &error);
  if (config == NULL)
    {
      g_message ("a malformed run config from %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  /* A run under way: start_step > 0 and the joiner's own id as starter_id. */
  join = config->start_step > 0 && g_strcmp0 (config->starter_id,
                                              _dc_train_group_own_id (self)) == 0
         && config->start_step < config->steps && !config->resume;
  if ((!join && g_strcmp0 (config->starter_id, dc_peer_get_id (peer)) != 0)
      || (!join && !config->resume && config->start_step != 0)
      || (config->resume && (config->start_step >= config->steps
                             || _dc_train_group_checkpoint_cap (config->width, config->seq) == 0)))
    {
      g_message ("ignoring a run config from %s: not a fresh run it started",
                 dc_peer_get_name (peer));
      dc_mesh_run_config_free (config);
      return;
    }
  if (*config->dataset_spec != '\0' && !g_str_equal (config->dataset_spec, "builtin")
      && (config->dataset_spec[0] == '/' || config->dataset_spec[0] == '.'
          || g_file_test (config->dataset_spec, G_FILE_TEST_EXISTS)))
    {
      /* A path names a file on the starter's device (or, worse, one here). */
      _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                            "the run's data “%s” is a file, which a group cannot share: "
                            "train together on builtin or a Hugging Face dataset",
                            config->dataset_spec);
      dc_mesh_run_config_free (config);
      return;
    }
  self->config = config;
  if (config->resume)
    {
      g_autofree char *text = NULL;
      g_autofree char *settings = settings_text (self, config);

      /* The model comes with the config: wait for it, then prepare. */
      self->checkpoint_from = g_strdup (dc_peer_get_id (peer));
      self->step_done = config->start_step;
      self->state = STATE_WAITING_CHECKPOINT;
      _dc_train_group_arm (self, DC_TRAIN_GROUP_WAIT_S);
      text = g_strdup_printf ("following the run “%s” started from its checkpoint at step %"
                              G_GUINT64_FORMAT ": %s", dc_peer_get_name (peer),
                              config->start_step, settings);
      _dc_train_group_notice (self, "config", dc_peer_get_name (peer), text);
      return;
    }
  if (join)
    {
      g_autofree char *text = NULL;
      g_autofree char *settings = settings_text (self, config);

      self->joining = TRUE;
      self->join_from = g_strdup (dc_peer_get_id (peer));
      g_hash_table_insert (self->joiners, g_strdup (_dc_train_group_own_id (self)),
                           GSIZE_TO_POINTER (config->start_step));
      text = g_strdup_printf ("joining the run under way after step %" G_GUINT64_FORMAT
                              " (“%s” sends the weights): %s", config->start_step,
                              dc_peer_get_name (peer), settings);
      _dc_train_group_notice (self, "config", dc_peer_get_name (peer), text);
    }
  else
  {
    g_autofree char *settings = settings_text (self, config);
    g_autofree char *text = g_strdup_printf ("following the run “%s” started: %s",
                                             dc_peer_get_name (peer), settings);

    _dc_train_group_notice (self, "config", dc_peer_get_name (peer), text);
  }
  _dc_train_group_start_run (self);
}

/* The joiner: the state after the step it joins after, from the leader
 * that announced it. */
void
_dc_train_group_handle_weights (DcTrainGroup *self,
                                DcPeer       *peer,
                                GBytes       *payload)
{
  g_auto(DcMeshChunk) chunk = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) object = NULL;
  g_autofree char *assembly_key = NULL;
  Assembly *assembly;

  if (!self->joining || self->weights != NULL || self->state == STATE_ADMITTING
      || g_strcmp0 (self->join_from, dc_peer_get_id (peer)) != 0)
    return;
  if (!dc_mesh_chunk_decode_prehashed (DC_MESH_MSG_WEIGHTS, payload,
                                       _dc_train_group_weights_cap (self),
                                       dc_peer_get_message_data_hash (peer), &chunk, &error))
    {
      g_message ("a malformed weights chunk from %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (memcmp (chunk.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || chunk.step != self->config->start_step)
    return;
  assembly_key = g_strconcat ("weights/", dc_peer_get_id (peer), NULL);
  assembly = g_hash_table_lookup (self->assemblies, assembly_key);
  if (assembly == NULL)
    {
      assembly = g_new0 (Assembly, 1);
      assembly->assembler = dc_mesh_chunk_assembler_new (DC_MESH_MSG_WEIGHTS,
                                                         _dc_train_group_weights_cap (self));
      g_hash_table_insert (self->assemblies, g_strdup (assembly_key), assembly);
    }
  if (!dc_mesh_chunk_assembler_push (assembly->assembler, &chunk, &object, &error))
    {
      g_message ("a bad weights chunk from %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (object == NULL)
    return;
  g_hash_table_remove (self->assemblies, assembly_key);
  self->weights = g_steal_pointer (&object);
}
