/* dc-train-group.c: the group coordinator (see dc-train-group.h).
 *
 * One state machine on the main context: advance () looks at what has
 * arrived (messages, peers coming and going, a worker's result, the clock)
 * and moves on when the current wait is satisfied; every wait has a
 * deadline (DC_TRAIN_GROUP_WAIT_S, DC_TRAIN_GROUP_CONNECT_S) except waiting
 * for people (min_peers devices, the starter's config).
 *
 * The coordinator is split by responsibility: this file (the object, the
 * shared helpers, the mesh's messages), dc-train-group-step.c,
 * dc-train-group-roster.c, dc-train-group-repair.c, dc-train-group-audit.c
 * and dc-train-group-checkpoint.c; their shared state is in
 * dc-train-group-private.h.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include "dc-train-group-private.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

G_DEFINE_FINAL_TYPE (DcTrainGroup, dc_train_group, G_TYPE_OBJECT)
G_DEFINE_QUARK (dc-train-group-error-quark, dc_train_group_error)

enum {
  SIGNAL_NOTICE,
  SIGNAL_STEP,
  SIGNAL_AGREED,
  SIGNAL_FINISHED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
accusation_free (Accusation *accusation)
{
  g_free (accusation->auditor);
  g_free (accusation->accused);
  g_free (accusation);
}

static void
gradient_free (Gradient *gradient)
{
  g_bytes_unref (gradient->object);
  g_free (gradient);
}

static void
assembly_free (Assembly *assembly)
{
  dc_mesh_chunk_assembler_free (assembly->assembler);
  g_free (assembly);
}

DcMesh *
_dc_train_group_get_mesh (DcTrainGroup *self)
{
  return dc_group_get_mesh (self->group);
}

const char *
_dc_train_group_own_id (DcTrainGroup *self)
{
  DcMesh *mesh = _dc_train_group_get_mesh (self);

  return mesh != NULL ? dc_mesh_get_id (mesh) : NULL;
}

DcMeshHello *
_dc_train_group_own_hello (DcTrainGroup *self)
{
  return g_object_get_data (G_OBJECT (self), "dc-hello");
}

/* The open peer with this member id, its hello received, or NULL. */
DcPeer *
_dc_train_group_find_peer (DcTrainGroup *self,
                           const char   *id)
{
  DcMesh *mesh = _dc_train_group_get_mesh (self);
  g_autoptr(GPtrArray) peers = NULL;

  if (mesh == NULL)
    return NULL;
  peers = dc_mesh_dup_peers (mesh);
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (g_strcmp0 (dc_peer_get_id (peer), id) == 0
          && dc_peer_get_state (peer) == DC_PEER_STATE_OPEN && dc_peer_get_name (peer) != NULL)
        return peer;
    }
  return NULL;
}

const char *
_dc_train_group_member_name (DcTrainGroup *self,
                             const char   *id)
{
  DcPeer *peer;

  if (g_strcmp0 (id, _dc_train_group_own_id (self)) == 0)
    return _dc_train_group_own_hello (self)->name;
  peer = _dc_train_group_find_peer (self, id);
  if (peer != NULL)
    {
      g_hash_table_replace (self->names, g_strdup (id), g_strdup (dc_peer_get_name (peer)));
      return dc_peer_get_name (peer);
    }
  return g_hash_table_contains (self->names, id) ? g_hash_table_lookup (self->names, id) : id;
}

void
_dc_train_group_notice (DcTrainGroup *self,
                        const char   *kind,
                        const char   *peer,
                        const char   *text)
{
  g_message ("%s", text);
  g_signal_emit (self, signals[SIGNAL_NOTICE], 0, kind, peer, text);
}

void
_dc_train_group_finish (DcTrainGroup *self,
                        GError       *error)
{
  if (self->state == STATE_DONE)
    {
      g_clear_error (&error);
      return;
    }
  self->state = STATE_DONE;
  g_clear_handle_id (&self->tick_id, g_source_remove);
  _dc_train_group_drop_reduce (self);
  if (error != NULL)
    g_message ("%s", error->message);
  g_signal_emit (self, signals[SIGNAL_FINISHED], 0, error);
  g_clear_error (&error);
}

/* _dc_train_group_finish () with a DC_TRAIN_GROUP_ERROR of @code. */
void
_dc_train_group_fail (DcTrainGroup      *self,
                      DcTrainGroupError  code,
                      const char        *format,
                      ...)
{
  va_list args;
  GError *error;

  va_start (args, format);
  error = g_error_new_valist (DC_TRAIN_GROUP_ERROR, code, format, args);
  va_end (args);
  _dc_train_group_finish (self, error);
}

/* Admission (the hello's probe hash and numeric rule): a device whose
 * kernels compute different values would fork the replicas at the first
 * step, so it is never counted, sent to, or listened to for training. */
gboolean
_dc_train_group_admitted (DcTrainGroup *self,
                          DcPeer       *peer)
{
  DcMeshHello *theirs = dc_peer_get_hello (peer);
  DcMeshHello *ours = _dc_train_group_own_hello (self);
  const char *id = dc_peer_get_id (peer);
  gboolean same_probe, same_rule;

  if (theirs == NULL)
    return FALSE;
  same_probe = g_strcmp0 (theirs->probe_hash, ours->probe_hash) == 0;
  same_rule = theirs->numeric_rule_id == ours->numeric_rule_id;
  if (same_probe && same_rule)
    return TRUE;
  if (!g_hash_table_contains (self->logged, id))
    {
      g_autofree char *text = NULL;

      g_hash_table_add (self->logged, g_strdup (id));
      if (!same_rule)
        text = g_strdup_printf ("“%s” is not admitted to training: numeric rule mismatch "
                                "(theirs %08x, ours %08x). It runs a build with different "
                                "math; run the same version of DaisyChain on every device.",
                                theirs->name, theirs->numeric_rule_id, ours->numeric_rule_id);
      else
        text = g_strdup_printf ("“%s” is not admitted to training: probe hash mismatch "
                                "(theirs “%s”, ours “%s”). Its kernels produce different "
                                "values (the seeded probe GEMM does not match); that device "
                                "should rejoin: its gates re-run at init and demote it to "
                                "the CPU if its GPU misbehaves.",
                                theirs->name, theirs->probe_hash, ours->probe_hash);
      _dc_train_group_notice (self, "not-admitted", theirs->name, text);
    }
  return FALSE;
}

static int
compare_ids (gconstpointer a,
             gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

/* The first 8 bytes of the SHA-256 of the sorted ids, one per line. */
guint64
_dc_train_group_roster_digest_strv (char **ids)
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize size = sizeof digest;
  guint64 value = 0;

  for (guint i = 0; ids[i] != NULL; i++)
    {
      g_checksum_update (sum, (const guchar *) ids[i], -1);
      g_checksum_update (sum, (const guchar *) "\n", 1);
    }
  g_checksum_get_digest (sum, digest, &size);
  for (guint i = 0; i < 8; i++)
    value = (value << 8) | digest[i];
  return value;
}

static guint64
roster_digest (GPtrArray *roster)
{
  guint64 value;

  g_ptr_array_add (roster, NULL);
  value = _dc_train_group_roster_digest_strv ((char **) roster->pdata);
  g_ptr_array_remove_index (roster, roster->len - 1);
  return value;
}

void
_dc_train_group_set_roster (DcTrainGroup *self,
                            GPtrArray    *roster)
{
  g_ptr_array_sort (roster, compare_ids);
  g_clear_pointer (&self->roster, g_ptr_array_unref);
  self->roster = g_ptr_array_ref (roster);
  self->digest = roster_digest (roster);
  self->rank = 0;
  for (guint i = 0; i < roster->len; i++)
    if (g_str_equal (g_ptr_array_index (roster, i), _dc_train_group_own_id (self)))
      self->rank = i;
}

static char **
roster_names (DcTrainGroup *self)
{
  GStrvBuilder *builder = g_strv_builder_new ();
  char **names;

  for (guint i = 0; i < self->roster->len; i++)
    g_strv_builder_add (builder, _dc_train_group_member_name (self, g_ptr_array_index (self->roster,
                                                                                       i)));
  names = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  return names;
}

/* The displayed 16-hex-digit hash as the report's 32 bytes (the rest zero). */
void
_dc_train_group_hash_to_bytes (const char *hex,
                               guint8      out[DC_MESH_HASH_SIZE])
{
  memset (out, 0, DC_MESH_HASH_SIZE);
  for (guint i = 0; i < DC_MESH_HASH_SIZE && hex[2 * i] != '\0' && hex[2 * i + 1] != '\0'; i++)
    out[i] = (guint8) ((g_ascii_xdigit_value (hex[2 * i]) << 4)
                       | g_ascii_xdigit_value (hex[2 * i + 1]));
}

char *
_dc_train_group_hash_to_hex (const guint8 hash[DC_MESH_HASH_SIZE])
{
  GString *hex = g_string_new (NULL);

  for (guint i = 0; i < 8; i++)
    g_string_append_printf (hex, "%02x", hash[i]);
  return g_string_free (hex, FALSE);
}

/* dc_peer_send () and its chunked kinds, counting the message bodies sent
 * (sent_bytes: bench group's bytes a device sends a step). */
gboolean
_dc_train_group_send (DcTrainGroup  *self,
                      DcPeer        *peer,
                      guint          type,
                      GBytes        *payload,
                      GError       **error)
{
  if (!dc_peer_send (peer, type, payload, error))
    return FALSE;
  self->sent_bytes += g_bytes_get_size (payload);
  return TRUE;
}

gboolean
_dc_train_group_send_chunks (DcTrainGroup  *self,
                             DcPeer        *peer,
                             guint          type,
                             GPtrArray     *bodies,
                             GError       **error)
{
  if (!dc_peer_send_chunks (peer, type, bodies, error))
    return FALSE;
  for (guint i = 0; i < bodies->len; i++)
    self->sent_bytes += g_bytes_get_size (g_ptr_array_index (bodies, i));
  return TRUE;
}

/* _dc_train_group_send_chunks () of chunks framed already
 * (dc_mesh_chunk_frames_encode ()), counted as their bodies. */
gboolean
_dc_train_group_send_frames (DcTrainGroup  *self,
                             DcPeer        *peer,
                             guint          type,
                             GPtrArray     *frames,
                             GError       **error)
{
  if (!dc_peer_send_frames (peer, type, frames, error))
    return FALSE;
  for (guint i = 0; i < frames->len; i++)
    {
      GPtrArray *pieces = g_ptr_array_index (frames, i);

      for (guint j = 0; j < pieces->len; j++)
        self->sent_bytes += g_bytes_get_size (g_ptr_array_index (pieces, j));
      self->sent_bytes -= DC_MESH_HEADER_SIZE;
    }
  return TRUE;
}

gboolean
_dc_train_group_send_object (DcTrainGroup       *self,
                             DcPeer             *peer,
                             guint               type,
                             const DcMeshChunk  *info,
                             GBytes             *object,
                             GError            **error)
{
  gsize size = g_bytes_get_size (object);

  if (!dc_peer_send_object (peer, type, info, object, error))
    return FALSE;
  /* The object's bytes and each chunk's header (dc_mesh_chunks_split ()). */
  self->sent_bytes += size + (size + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX
                             * DC_MESH_CHUNK_HEADER_SIZE;
  return TRUE;
}

void
_dc_train_group_send_to_roster (DcTrainGroup *self,
                                guint         type,
                                GBytes       *payload)
{
  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      DcPeer *peer;
      g_autoptr(GError) error = NULL;

      if (i == self->rank || (peer = _dc_train_group_find_peer (self, id)) == NULL)
        continue;
      if (!_dc_train_group_send (self, peer, type, payload, &error))
        g_message ("cannot send to %s: %s", dc_peer_get_name (peer), error->message);
    }
}

/* A message to the devices joining after @step (not in the roster yet). */
static void
send_to_joiners (DcTrainGroup *self,
                 guint64       step,
                 GBytes       *payload)
{
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, self->joiners);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      DcPeer *peer;
      g_autoptr(GError) error = NULL;

      if (GPOINTER_TO_SIZE (value) != step || (peer = _dc_train_group_find_peer (self,
                                                                                 key)) == NULL)
        continue;
      if (!_dc_train_group_send (self, peer, DC_MESH_MSG_STEP_REPORT, payload, &error))
        g_message ("cannot send to %s: %s", dc_peer_get_name (peer), error->message);
    }
}

/* The report of the model's step, with its weight and optimizer hashes
 * (dc_gpt_model_dup_hash () and dc_gpt_model_dup_optimizer_hash ()) taken
 * by the caller. */
DcMeshStepReport *
_dc_train_group_make_report_hashed (DcTrainGroup *self,
                                    const char   *hash,
                                    const char   *optimizer)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  DcMeshStepReport *report = dc_mesh_step_report_new ();

  memcpy (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  report->step = model->step;
  _dc_train_group_hash_to_bytes (hash, report->weights_hash);
  _dc_train_group_hash_to_bytes (optimizer, report->optimizer_hash);
  g_ptr_array_add (self->roster, NULL);
  report->roster = g_strdupv ((char **) self->roster->pdata);
  g_ptr_array_remove_index (self->roster, self->roster->len - 1);
  return report;
}

/* The weight and optimizer hashes of @model (dc_gpt_model_dup_hash (),
 * dc_gpt_model_dup_optimizer_hash ()). They read the weights and both
 * moments once: about 1 GB at a GPT-2-small width, seconds on a loaded
 * machine. Take them on a worker, never on the main
 * thread: the peers' heartbeats are answered there. */
void
_dc_train_group_hash_state (DcTrainGroup      *self,
                            const DcGptModel  *model,
                            char             **hash,
                            char             **optimizer)
{
  if (self->fault_slow_hash)
    g_usleep (SLOW_HASH_US);
  dc_gpt_model_dup_hashes (model, hash, optimizer);
}

DcMeshStepReport *
_dc_train_group_make_report (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autofree char *hash = NULL;
  g_autofree char *optimizer = NULL;

  _dc_train_group_hash_state (self, model, &hash, &optimizer);
  return _dc_train_group_make_report_hashed (self, hash, optimizer);
}

/* The step-0 report, with the hashes prepare_worker () took; hashed here
 * (on the main thread) only when the model moved on since, which a run's
 * start does not do. */
DcMeshStepReport *
_dc_train_group_make_start_report (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);

  if (self->start_hash == NULL || self->start_hash_step != model->step)
    return _dc_train_group_make_report (self);
  return _dc_train_group_make_report_hashed (self, self->start_hash, self->start_optimizer);
}

char *
_dc_train_group_report_key (guint64     step,
                            const char *id)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT "/%s", step, id);
}

char *
_dc_train_group_gradient_key (guint64     step,
                              guint64     digest,
                              const char *id)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT "/%016" G_GINT64_MODIFIER "x/%s", step, digest, id);
}

/* contribs' key: the step first, as prune () reads it. */
char *
_dc_train_group_contrib_key (guint64     step,
                             guint64     digest,
                             const char *id,
                             guint       shard)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT "/%016" G_GINT64_MODIFIER "x/%s/%u", step, digest,
                          id, shard);
}

/* How @model's gradients are cut into shards (dc_train_shard_layout_init_run ()):
 * the tail layout, or with DC_TRAIN_GROUP_SHARDS=even the even shards of
 * before, =weighted the tail layout's block-weighted early shards of
 * before (2026-12-02), for comparing in bench group (every device of the
 * run must say the same: the other's shards have other sizes and are
 * refused). */
void
_dc_train_group_layout (const DcGptModel   *model,
                        DcTrainShardLayout *layout)
{
  dc_train_shard_layout_init_run (layout, &model->config, model->n_params);
}

/* The float32 values of a kept shard object (its header was checked when
 * it came, or this device wrote it). */
const float *
_dc_train_group_shard_values (GBytes *object,
                              gsize  *n_values)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (object, &size);
  guint32 n;
  gsize trailer = 0;

  /* A summed shard's contribution hashes follow its values. */
  memcpy (&n, data + 8, 4);
  if (data[4] == DC_TRAIN_SHARD_SUMMED)
    trailer = (gsize) GUINT32_FROM_LE (n) * DC_TRAIN_SHARD_HASH_SIZE;
  *n_values = (size - DC_TRAIN_SHARD_HEADER_SIZE - trailer) / sizeof (float);
  return (const float *) (data + DC_TRAIN_SHARD_HEADER_SIZE);
}

/* The deadline of the current wait, from now. */
void
_dc_train_group_arm (DcTrainGroup *self,
                     guint         seconds)
{
  self->deadline = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;
}

/* The step just applied: announce joiners (the leader), send the report,
 * print the step line, wait for the others' reports. */
void
_dc_train_group_publish_step (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autoptr(GBytes) payload = NULL;
  g_autofree char *hash = NULL;
  g_auto(GStrv) names = NULL;

  if (self->rank == 0 && model->step < self->plan->stop && model->step < self->config->steps)
    {
      /* A checkpoint loaded on the leader (or forwarded to it) goes first;
       * devices waiting to join are announced after the switch. */
      if (self->pending_config != NULL && self->switch_config == NULL)
        _dc_train_group_send_switch (self);
      else if (self->switch_config == NULL)
        _dc_train_group_announce_joiners (self);
    }
  payload = dc_mesh_step_report_encode (self->own_report, NULL);
  _dc_train_group_send_to_roster (self, DC_MESH_MSG_STEP_REPORT, payload);
  DC_TRAIN_GROUP_TRACE ("report_sent step=%" G_GUINT64_FORMAT, model->step);
  send_to_joiners (self, model->step, payload);
  _dc_train_group_audit_published (self, model->step);

  /* The report's own: hashing the state again costs as much as the first time. */
  hash = _dc_train_group_hash_to_hex (self->own_report->weights_hash);
  names = roster_names (self);
  g_signal_emit (self, signals[SIGNAL_STEP], 0, model->step, self->last_loss,
                 (double) self->roster->len * self->plan->settings.batch * model->config.seq
                 / self->last_seconds,
                 hash, names);
  /* The line above showed the audits that ended since the last one; one
   * that ends while this step waits for the roster's reports belongs to
   * the next (reset at the next step's start, it showed on no line). */
  self->audit_us = 0;
  self->audit_paused_us = 0;
  self->audit_beside = 0;
  self->audit_priority = -1;

  self->state = STATE_REPORTING;
  _dc_train_group_arm (self, DC_TRAIN_GROUP_WAIT_S);
  _dc_train_group_advance (self);
}

/* After the guard passed: every roster device that reported, in rank
 * order, with its own work on the step (its gradient and its combine; the
 * rest of its step is waiting for the others), for a view's slowest device. */
void
_dc_train_group_emit_agreed (DcTrainGroup *self)
{
  g_auto(GVariantBuilder) devices = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("a(sd)"));
  g_autofree char *hash = _dc_train_group_hash_to_hex (self->own_report->weights_hash);

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      g_autofree char *key = _dc_train_group_report_key (self->own_report->step, id);
      DcMeshStepReport *report = i == self->rank ? self->own_report
                                                 : g_hash_table_lookup (self->reports, key);

      if (report == NULL)
        continue;  /* it left after its gradient came */
      g_variant_builder_add (&devices, "(sd)", _dc_train_group_member_name (self, id),
                             (report->compute_us + report->combine_us) / 1e6);
    }
  g_signal_emit (self, signals[SIGNAL_AGREED], 0, self->own_report->step, hash,
                 g_variant_builder_end (&devices));
}

void
_dc_train_group_timeout_error (DcTrainGroup *self,
                               const char   *what)
{
  _dc_train_group_fail (self, DC_TRAIN_GROUP_ERROR_TIMEOUT,
                        "%s: stopping the run", what);
}

gboolean
_dc_train_group_in_roster (DcTrainGroup *self,
                           const char   *id)
{
  if (self->roster == NULL)
    return FALSE;
  for (guint i = 0; i < self->roster->len; i++)
    if (g_str_equal (g_ptr_array_index (self->roster, i), id))
      return TRUE;
  return FALSE;
}

static gboolean
is_training_type (guint type)
{
  return type == DC_MESH_MSG_CONFIG || type == DC_MESH_MSG_STEP_REPORT
         || type == DC_MESH_MSG_GRADIENTS || type == DC_MESH_MSG_REPAIR
         || type == DC_MESH_MSG_REPAIR_REQUEST || type == DC_MESH_MSG_WEIGHTS
         || type == DC_MESH_MSG_CHECKPOINT || type == DC_MESH_MSG_AUDIT
         || type == DC_MESH_MSG_CONTRIB_REQUEST;
}

/* A training message from a device that has no part in it, or a chunk
 * that fails its own hash, is dropped and never counted; the log names the
 * device at most once every DC_TRAIN_GROUP_REFUSE_LOG_S with how many were
 * dropped since, so that a flooding peer cannot flood the log. */
void
_dc_train_group_refuse (DcTrainGroup *self,
                        DcPeer       *peer,
                        guint         type,
                        const char   *why)
{
  const char *id = dc_peer_get_id (peer);
  Refusal *refusal = g_hash_table_lookup (self->refused, id);
  gint64 now = g_get_monotonic_time ();
  g_autofree char *text = NULL;
  const char *name = dc_peer_get_name (peer) != NULL ? dc_peer_get_name (peer) : id;

  if (refusal == NULL)
    {
      refusal = g_new0 (Refusal, 1);
      g_hash_table_insert (self->refused, g_strdup (id), refusal);
    }
  refusal->dropped++;
  if (now < refusal->next_log)
    return;
  text = g_strdup_printf ("dropped %u training message%s from “%s” (the last: %s): %s",
                          refusal->dropped, refusal->dropped == 1 ? "" : "s", name,
                          dc_mesh_message_type_to_string (type), why);
  refusal->dropped = 0;
  refusal->next_log = now + (gint64) DC_TRAIN_GROUP_REFUSE_LOG_S * G_USEC_PER_SEC;
  _dc_train_group_notice (self, "refused", name, text);
}

/* Admission and the roster, checked for every training message before it
 * is read. Step reports and configs of admitted devices outside the roster
 * pass (and weights and checkpoints while this device has no roster): a
 * joiner's first report may come before its announcement, and the first
 * config and report come before there is a roster; neither is ever counted
 * for a device outside the roster (the guard compares roster devices'
 * reports only). */
static gboolean
accept_from (DcTrainGroup *self,
             DcPeer       *peer,
             guint         type)
{
  DcMeshHello *theirs = dc_peer_get_hello (peer);

  if (!_dc_train_group_admitted (self, peer))
    {
      _dc_train_group_refuse (self, peer, type,
                              theirs == NULL ? "no hello yet"
                              : theirs->numeric_rule_id
                                != _dc_train_group_own_hello (self)->numeric_rule_id
                              ? "not admitted to training (numeric rule mismatch)"
                              : "not admitted to training (probe hash mismatch)");
      return FALSE;
    }
  /* Weights and checkpoints come from a roster device too once this one
   * has a roster (a joiner and a follower waiting for the starter's
   * checkpoint have none yet). */
  if ((type == DC_MESH_MSG_GRADIENTS || type == DC_MESH_MSG_REPAIR
       || type == DC_MESH_MSG_REPAIR_REQUEST || type == DC_MESH_MSG_AUDIT
       || type == DC_MESH_MSG_CONTRIB_REQUEST || type == DC_MESH_MSG_WEIGHTS || type == DC_MESH_MSG_CHECKPOINT)
      && self->roster != NULL && !_dc_train_group_in_roster (self, dc_peer_get_id (peer)))
    {
      _dc_train_group_refuse (self, peer, type, "not in the run's roster");
      return FALSE;
    }
  return TRUE;
}

/* Test only (DC_TEST_FAULT=outsider): while waiting for a config, send
 * every connected device a gradient chunk, an audit and a repair request of
 * no run, as a device outside the run pushing messages would. */
static void
fault_outsider_send (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) peers = NULL;
  DcMeshChunk chunk = { 0 };
  DcMeshAudit audit = { 0 };
  DcMeshRepairRequest request = { 0 };
  g_autoptr(GBytes) data = g_bytes_new_static ("x", 1);
  g_autoptr(GBytes) gradient = NULL, audit_payload = NULL, request_payload = NULL;

  if (!self->fault_outsider || self->state != STATE_WAITING_CONFIG
      || _dc_train_group_get_mesh (self) == NULL)
    return;
  chunk.step = 1;
  chunk.count = 1;
  chunk.total = 1;
  chunk.data = data;
  dc_mesh_train_hash (data, chunk.hash);
  gradient = dc_mesh_chunk_encode (DC_MESH_MSG_GRADIENTS, &chunk, NULL);
  audit.step = 1;
  audit_payload = dc_mesh_audit_encode (&audit);
  request.step = 1;
  request_payload = dc_mesh_repair_request_encode (&request);
  peers = dc_mesh_dup_peers (_dc_train_group_get_mesh (self));
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (dc_peer_get_state (peer) != DC_PEER_STATE_OPEN || dc_peer_get_name (peer) == NULL)
        continue;
      _dc_train_group_send (self, peer, DC_MESH_MSG_GRADIENTS, gradient, NULL);
      _dc_train_group_send (self, peer, DC_MESH_MSG_AUDIT, audit_payload, NULL);
      _dc_train_group_send (self, peer, DC_MESH_MSG_REPAIR_REQUEST, request_payload, NULL);
    }
}

static FILE *trace_file;

/* Whether DC_TRAIN_GROUP_TRACE names a folder (opened once). */
gboolean
_dc_train_group_tracing (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      const char *dir = g_getenv ("DC_TRAIN_GROUP_TRACE");

      if (dir != NULL && *dir != '\0')
        {
          g_autofree char *name = g_strdup_printf ("trace-%d.txt", (int) getpid ());
          g_autofree char *path = g_build_filename (dir, name, NULL);

          /* The devices of a bench start at once: each makes the folder. */
          (void) g_mkdir_with_parents (dir, 0755);
          trace_file = fopen (path, "w");
          if (trace_file == NULL)
            g_message ("DC_TRAIN_GROUP_TRACE: could not write %s: %s", path, g_strerror (errno));
        }
      g_once_init_leave (&once, 1);
    }
  return trace_file != NULL;
}

/* One line: monotonic µs, then @format (any thread; stdio locks). */
void
_dc_train_group_trace (const char *format,
                       ...)
{
  va_list args;

  if (trace_file == NULL)
    return;
  flockfile (trace_file);
  fprintf (trace_file, "%" G_GINT64_FORMAT " ", g_get_monotonic_time ());
  va_start (args, format);
  vfprintf (trace_file, format, args);
  va_end (args);
  fputc ('\n', trace_file);
  funlockfile (trace_file);
  fflush (trace_file);
}

static void
message_cb (DcGroup  *group,
            DcPeer   *peer,
            guint     type,
            GBytes   *payload,
            gpointer  user_data)
{
  DcTrainGroup *self = user_data;

  if (self->state == STATE_DONE || !is_training_type (type) || !accept_from (self, peer, type))
    return;
  switch (type)
    {
    case DC_MESH_MSG_CONFIG:
      /* Test only (DC_TEST_FAULT=outsider): the config's sender has an open
       * channel now; its messages without a run go out before the config
       * ends the wait (on a loaded machine the config could come before any
       * group event or tick found a channel open). */
      fault_outsider_send (self);
      _dc_train_group_handle_config (self, peer, payload);
      break;
    case DC_MESH_MSG_STEP_REPORT:
      _dc_train_group_handle_report (self, peer, payload);
      break;
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_REPAIR:
      _dc_train_group_handle_chunk (self, peer, type, payload);
      break;
    case DC_MESH_MSG_REPAIR_REQUEST:
      _dc_train_group_handle_repair_request (self, peer, payload);
      break;
    case DC_MESH_MSG_WEIGHTS:
      _dc_train_group_handle_weights (self, peer, payload);
      break;
    case DC_MESH_MSG_CHECKPOINT:
      _dc_train_group_handle_checkpoint (self, peer, payload);
      break;
    case DC_MESH_MSG_AUDIT:
      _dc_train_group_handle_audit (self, peer, payload);
      break;
    case DC_MESH_MSG_CONTRIB_REQUEST:
      _dc_train_group_handle_contrib_request (self, peer, payload);
      break;
    default:
      return;
    }
  _dc_train_group_advance (self);
}

static void
event_cb (DcGroup    *group,
          const char *event,
          const char *peer,
          guint       n_peers,
          const char *reason,
          gpointer    user_data)
{
  DcTrainGroup *self = user_data;

  /* Slow sending to a peer (src/mesh/dc-send-pace.c) makes steps slow: the
   * log says which link and how slow, and how its new connection (the
   * mesh's renewal) went. */
  if ((g_str_equal (event, "slow-sending") || g_str_equal (event, "sending-recovered")
       || g_str_equal (event, "renewing") || g_str_equal (event, "renewed")
       || g_str_equal (event, "renewal-failed"))
      && reason != NULL)
    {
      _dc_train_group_notice (self, event, peer, reason);
      return;
    }
  /* The device that created the room (its host) starts the run. */
  if (g_str_equal (event, "joined") && self->state == STATE_WAITING_CONFIG && self->config == NULL
      && g_strcmp0 (reason, "host") == 0 && self->starter_rule == DC_TRAIN_GROUP_STARTER_HOST)
    {
      self->starter = TRUE;
      self->state = STATE_WAITING_PEERS;
    }
  if (self->state == STATE_WAITING_PEERS || self->state == STATE_WAITING_CONFIG)
    {
      /* Log admission as soon as a device is there. */
      DcMesh *mesh = _dc_train_group_get_mesh (self);
      g_autoptr(GPtrArray) peers = mesh != NULL ? dc_mesh_dup_peers (mesh) : NULL;

      for (guint i = 0; peers != NULL && i < peers->len; i++)
        if (dc_peer_get_name (g_ptr_array_index (peers, i)) != NULL)
          _dc_train_group_admitted (self, g_ptr_array_index (peers, i));
    }
  fault_outsider_send (self);
  _dc_train_group_advance (self);
}

/* This thread's own CPU time, in µs (0 where the clock is missing). */
static gint64
thread_cpu_us (void)
{
  struct timespec ts;

  if (clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (gint64) ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

/* The states of a step (computing to auditing), where a stall is the
 * step's own work on the main thread. */
static gboolean
is_step_state (guint state)
{
  switch (state)
    {
    case STATE_COMPUTING:
    case STATE_EXCHANGING:
    case STATE_APPLYING:
    case STATE_REPORTING:
    case STATE_ROLLING_BACK:
    case STATE_VERIFYING:
    case STATE_AUDITING:
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
tick_cb (gpointer user_data)
{
  DcTrainGroup *self = user_data;
  gint64 now = g_get_monotonic_time ();
  gint64 cpu = thread_cpu_us ();

  /* A late tick is a main loop that did not run: heartbeats were not
   * answered meanwhile. */
  if (self->last_tick != 0 && now - self->last_tick > (TICK_MS + STALL_LOG_MS) * 1000)
    {
      g_debug ("main loop stalled for %" G_GINT64_FORMAT " ms (state %d)",
               (now - self->last_tick) / 1000 - TICK_MS, self->state);
      /* Whether the thread worked (its own CPU time) or waited: for a
       * lock, for memory, or for a core on a loaded machine. */
      g_debug ("… of the %" G_GINT64_FORMAT " ms since the last tick, %" G_GINT64_FORMAT
               " ms were the main thread's own CPU time (state %u before)",
               (now - self->last_tick) / 1000, (cpu - self->last_tick_cpu) / 1000,
               self->last_tick_state);
    }
  /* Test only: the late tick is this thread's own work (its CPU time since
   * the last tick, not a machine that gave the core to others) in a step:
   * the work that belongs on a worker. */
  if (self->max_stall_ms != 0 && self->last_tick != 0
      && (is_step_state (self->state) || is_step_state (self->last_tick_state))
      && now - self->last_tick > (gint64) (TICK_MS + self->max_stall_ms) * 1000
      && cpu - self->last_tick_cpu > (gint64) self->max_stall_ms * 1000)
    g_error ("DC_TEST_MAX_STALL_MS: the main thread was busy for %" G_GINT64_FORMAT " ms of "
             "%" G_GINT64_FORMAT " ms between two ticks in a step (state %u, then %d), over %u ms",
             (cpu - self->last_tick_cpu) / 1000, (now - self->last_tick) / 1000,
             self->last_tick_state, self->state, self->max_stall_ms);
  self->last_tick = now;
  self->last_tick_cpu = cpu;
  self->last_tick_state = self->state;
  fault_outsider_send (user_data);
  _dc_train_group_audit_tick (user_data);
  _dc_train_group_advance (user_data);
  return G_SOURCE_CONTINUE;
}

/**
 * dc_train_group_new:
 * @context: this device's context (backend, probe hash)
 * @group: the group it trains with (joined or joining)
 * @hello: what this device told its peers (its probe hash and numeric rule
 *   are what admission compares)
 * @request: this device's training flags; used when it starts the run, and
 *   for what stays local (threads, --stop-at) when it follows
 * @seed_given: whether @request's seed was chosen (else the starter draws one)
 * @min_peers: how many devices, this one included, the run waits for
 */
DcTrainGroup *
dc_train_group_new (DcContext               *context,
                    DcGroup                 *group,
                    const DcMeshHello       *hello,
                    const DcTrainingRequest *request,
                    gboolean                 seed_given,
                    guint                    min_peers)
{
  DcTrainGroup *self = g_object_new (DC_TYPE_TRAIN_GROUP, NULL);
  const char *fault = g_getenv ("DC_TEST_FAULT");

  self->context = g_object_ref (context);
  self->group = g_object_ref (group);
  self->request = *request;
  self->request.data = g_strdup (request->data);
  self->seed_given = seed_given;
  self->min_peers = MAX (min_peers, 1);
  if (fault != NULL && g_str_has_prefix (fault, "corrupt-weight@"))
    self->fault_step = g_ascii_strtoull (fault + strlen ("corrupt-weight@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "partial-send@"))
    self->fault_partial = g_ascii_strtoull (fault + strlen ("partial-send@"), NULL, 10);
  /* no-repair: what this device lacks of that step is never asked for, so
   * a device that left is only dropped (a retake where the others had it). */
  if (fault != NULL && g_str_has_prefix (fault, "no-repair@"))
    self->fault_no_repair = g_ascii_strtoull (fault + strlen ("no-repair@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "corrupt-chunk@"))
    self->fault_chunk = g_ascii_strtoull (fault + strlen ("corrupt-chunk@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "drop-gradient@"))
    self->fault_drop = g_ascii_strtoull (fault + strlen ("drop-gradient@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "corrupt-gradient@"))
    self->fault_corrupt = g_ascii_strtoull (fault + strlen ("corrupt-gradient@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "corrupt-unaudited@"))
    {
      self->fault_corrupt = g_ascii_strtoull (fault + strlen ("corrupt-unaudited@"), NULL, 10);
      self->fault_corrupt_unaudited = TRUE;
    }
  if (fault != NULL && g_str_has_prefix (fault, "corrupt-sum@"))
    self->fault_corrupt_sum = g_ascii_strtoull (fault + strlen ("corrupt-sum@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "drop-contribution@"))
    self->fault_drop_contrib = g_ascii_strtoull (fault + strlen ("drop-contribution@"), NULL, 10);
  self->audit_all = g_strcmp0 (fault, "audit-all") == 0;
  self->fault_wire_f32 = g_strcmp0 (fault, "wire-f32") == 0;
  /* audit-after-report: audit-all, each verdict after its step's report. */
  self->fault_audit_after_report = g_strcmp0 (fault, "audit-after-report") == 0;
  self->audit_all |= self->fault_audit_after_report;
  /* audit-scribble: audit-all, the snapshot rewritten under each audit. */
  self->fault_audit_scribble = g_strcmp0 (fault, "audit-scribble") == 0;
  self->audit_all |= self->fault_audit_scribble;
  /* audit-overlap: audit-all, each audit begun with the gradient computed
   * ahead (audit_gate ()). */
  self->fault_audit_overlap = g_strcmp0 (fault, "audit-overlap") == 0;
  self->audit_all |= self->fault_audit_overlap;
  self->fault_outsider = g_strcmp0 (fault, "outsider") == 0;
  /* Apart from DC_TEST_FAULT, so that it combines with one of those. */
  self->fault_slow_hash = g_strcmp0 (g_getenv ("DC_TEST_SLOW_HASH"), "1") == 0;
  /* DC_TEST_MAX_STALL_MS=N: a step's main-thread work of more than N ms
   * between two ticks aborts this process (tick_cb ()). */
  if (g_getenv ("DC_TEST_MAX_STALL_MS") != NULL)
    self->max_stall_ms = (guint) MIN (g_ascii_strtoull (g_getenv ("DC_TEST_MAX_STALL_MS"), NULL,
                                                        10), G_MAXUINT);
  if (fault != NULL && g_str_has_prefix (fault, "false-audit@"))
    self->fault_false_audit = g_ascii_strtoull (fault + strlen ("false-audit@"), NULL, 10);
  self->audit_rank = G_MAXUINT;
  if (fault != NULL && g_str_has_prefix (fault, "hold-join@"))
    self->fault_hold = g_ascii_strtoull (fault + strlen ("hold-join@"), NULL, 10);
  /* Computing the next step's gradient ahead (dc-train-group-step.c,
   * start_ahead ()); 0 turns it off, for comparing in bench group. */
  self->overlap = g_strcmp0 (g_getenv ("DC_TRAIN_GROUP_OVERLAP"), "0") != 0;
  /* Audits only in the step's waits (dc-train-group-audit.c, audit_gate
   * ()): 1 turns the gate on. Off by default: on the H200 host an audit
   * step cost the group about 320 ms gated against about 180 beside the
   * step (docs/BENCHMARKS.md, "Audits in the step's waits"). */
  self->lane_gate = g_strcmp0 (g_getenv ("DC_TRAIN_GROUP_AUDIT_GATE"), "1") == 0;
  /* Audits at the lowest CPU priority (dc-train-group-audit.c,
   * audit_worker ()) with 1; off by default since 2026-12-02: on the H200
   * host an audit on the idle pool cost the group 300–570 ms of step time
   * against 190–245 beside the step (docs/BENCHMARKS.md, "Audits one step
   * in 32"): the idle helpers, starved by the 16 compute threads, held
   * chunks of an audit that the step then waited for. The gate keeps its own
   * scheme (normal priority, only in the step's waits), as measured
   * before. */
  self->audit_idle = !self->lane_gate
                     && g_strcmp0 (g_getenv ("DC_TRAIN_GROUP_AUDIT_IDLE"), "1") == 0;
  self->audit_priority = -1;
  /* This device's audit rate (docs/ARCHITECTURE.md, "Audits"): fewer
   * audits for speed in a group of trusted devices, said in the log at
   * the first audit draw. */
  self->audit_period = DC_TRAIN_GROUP_AUDIT_PERIOD;
  {
    const char *period = g_getenv ("DC_TRAIN_GROUP_AUDIT_PERIOD");
    guint64 value;

    if (period != NULL && *period != '\0')
      {
        if (g_ascii_string_to_unsigned (period, 10, 0, DC_TRAIN_GROUP_AUDIT_PERIOD_MAX, &value,
                                        NULL))
          self->audit_period = (guint) value;
        else
          g_message ("DC_TRAIN_GROUP_AUDIT_PERIOD=%s is not a number from 0 to %u: audits "
                     "stay at one step in %u", period, DC_TRAIN_GROUP_AUDIT_PERIOD_MAX,
                     DC_TRAIN_GROUP_AUDIT_PERIOD);
      }
  }
  if (fault != NULL && g_str_has_prefix (fault, "drop-repair@"))
    {
      self->fault_drop = g_ascii_strtoull (fault + strlen ("drop-repair@"), NULL, 10);
      self->fault_drop_repair = TRUE;
    }
  g_object_set_data_full (G_OBJECT (self), "dc-hello", dc_mesh_hello_copy (hello),
                          (GDestroyNotify) dc_mesh_hello_free);
  return self;
}

/**
 * dc_train_group_set_starter:
 * @starter: who starts the run (DC_TRAIN_GROUP_STARTER_HOST by default)
 *
 * Call before dc_train_group_start().
 */
void
dc_train_group_set_starter (DcTrainGroup        *self,
                            DcTrainGroupStarter  starter)
{
  g_return_if_fail (DC_IS_TRAIN_GROUP (self));
  g_return_if_fail (!self->started);

  self->starter_rule = starter;
}

/**
 * dc_train_group_get_plan:
 *
 * Returns: (transfer none) (nullable): the run's plan (the starter's config
 *   as this device follows it), once a config was sent or followed
 */
const DcTrainPlan *
dc_train_group_get_plan (DcTrainGroup *self)
{
  g_return_val_if_fail (DC_IS_TRAIN_GROUP (self), NULL);

  return self->plan;
}

/**
 * dc_train_group_start:
 *
 * Begins waiting: the room's host for min_peers devices, the others for its
 * config. Call it once the group is joining (its host is known by the time
 * any peer is connected).
 */
void
dc_train_group_start (DcTrainGroup *self)
{
  g_return_if_fail (DC_IS_TRAIN_GROUP (self));

  if (self->started)
    return;
  self->started = TRUE;
  self->event_handler = g_signal_connect (self->group, "event", G_CALLBACK (event_cb), self);
  self->message_handler = g_signal_connect (self->group, "message", G_CALLBACK (message_cb), self);
  self->tick_id = g_timeout_add (TICK_MS, tick_cb, self);
  self->state = STATE_WAITING_CONFIG;
  if (self->starter_rule == DC_TRAIN_GROUP_STARTER_SELF)
    {
      self->starter = TRUE;
      self->state = STATE_WAITING_PEERS;
    }
  _dc_train_group_advance (self);
}

void
dc_train_group_stop (DcTrainGroup *self)
{
  g_return_if_fail (DC_IS_TRAIN_GROUP (self));
  _dc_train_group_finish (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                                                     "the run was stopped"));
}

/**
 * dc_train_group_get_model:
 *
 * Returns: (transfer none) (nullable): the model, once prepared
 */
DcGptModel *
dc_train_group_get_model (DcTrainGroup *self)
{
  return self->session != NULL ? dc_train_session_get_model (self->session) : NULL;
}

/**
 * dc_train_group_get_step_times:
 * @compute_us: (out): computing this device's gradient
 * @send_us: (out): encoding and queueing it to the roster
 * @wait_us: (out): waiting for the other roster devices' gradients
 * @combine_us: (out): summing them and taking the Adam step
 *
 * Where this device's last step went, as its STEP_REPORT says (read in a
 * ::step handler for that step). Microseconds on the monotonic clock.
 *
 * Returns: FALSE before the first step
 */
gboolean
dc_train_group_get_step_times (DcTrainGroup *self,
                               guint64      *compute_us,
                               guint64      *send_us,
                               guint64      *wait_us,
                               guint64      *combine_us)
{
  if (self->own_report == NULL)
    return FALSE;
  *compute_us = self->own_report->compute_us;
  *send_us = self->own_report->send_us;
  *wait_us = self->own_report->wait_us;
  *combine_us = self->own_report->combine_us;
  return TRUE;
}

/**
 * dc_train_group_get_step_phases:
 * @phases: (out): the phases of the last step (#DcTrainGroupPhases)
 * @ahead: (out): whether its gradient was computed ahead, before the step
 *   began (docs/ARCHITECTURE.md, "Computing the next gradient ahead")
 *
 * Returns: FALSE before the first step
 */
gboolean
dc_train_group_get_step_phases (DcTrainGroup       *self,
                                DcTrainGroupPhases *phases,
                                gboolean           *ahead)
{
  if (self->own_report == NULL)
    return FALSE;
  *phases = self->phases;
  /* The audit that ended during the step ends after its update (the step's
   * report waits for it): read now, as dc_train_group_get_audit_time (). */
  phases->audit_paused_us = self->audit_paused_us;
  phases->audit_beside = self->audit_beside;
  phases->audit_priority = self->audit_priority;
  *ahead = self->step_ahead;
  return TRUE;
}

/**
 * dc_train_group_get_audit_time:
 * @audit_us: (out): the recomputation of another rank's gradient for an
 *   audit (of the step before) that ended during the last step, on a worker
 *   beside it: not part of its compute time (0 on a step without)
 *
 * Returns: FALSE before the first step
 */
gboolean
dc_train_group_get_audit_time (DcTrainGroup *self,
                               guint64      *audit_us)
{
  if (self->own_report == NULL)
    return FALSE;
  *audit_us = (guint64) self->audit_us;
  return TRUE;
}

/**
 * dc_train_group_get_sent_bytes:
 *
 * The training messages' bodies this device sent since its run began
 * (gradients with their chunk headers, step reports, repairs, weights,
 * checkpoints, audits; not the frame layer's headers nor the mesh's own
 * messages). bench group divides its growth by the steps measured.
 *
 * Returns: bytes
 */
guint64
dc_train_group_get_sent_bytes (DcTrainGroup *self)
{
  g_return_val_if_fail (DC_IS_TRAIN_GROUP (self), 0);

  return self->sent_bytes;
}

/**
 * dc_train_group_get_slow_sending:
 * @episodes: (out): episodes of slow sending to the group's peers since the
 *   mesh began (dc_mesh_get_slow_sending ())
 * @slow_ms: (out): their slow time, ms
 *
 * bench group subtracts the figures of two steps, as the sent bytes.
 */
void
dc_train_group_get_slow_sending (DcTrainGroup *self,
                                 guint        *episodes,
                                 double       *slow_ms)
{
  DcMesh *mesh;
  gint64 slow_us = 0;

  g_return_if_fail (DC_IS_TRAIN_GROUP (self));

  *episodes = 0;
  mesh = _dc_train_group_get_mesh (self);
  if (mesh != NULL)
    dc_mesh_get_slow_sending (mesh, episodes, &slow_us);
  *slow_ms = slow_us / 1000.0;
}

/**
 * dc_train_group_get_renewals:
 *
 * Returns: connections to the group's peers that a new one replaced since
 *   the mesh began (dc_mesh_get_renewals ())
 */
guint
dc_train_group_get_renewals (DcTrainGroup *self)
{
  DcMesh *mesh;

  g_return_val_if_fail (DC_IS_TRAIN_GROUP (self), 0);

  mesh = _dc_train_group_get_mesh (self);
  return mesh != NULL ? dc_mesh_get_renewals (mesh) : 0;
}

static void
dc_train_group_dispose (GObject *object)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);

  g_clear_handle_id (&self->tick_id, g_source_remove);
  _dc_train_group_stream_drop (self);
  if (self->group != NULL)
    {
      g_clear_signal_handler (&self->event_handler, self->group);
      g_clear_signal_handler (&self->message_handler, self->group);
    }
  g_clear_object (&self->group);
  G_OBJECT_CLASS (dc_train_group_parent_class)->dispose (object);
}

static void
dc_train_group_finalize (GObject *object)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);

  g_clear_pointer (&self->session, dc_train_session_free);
  g_clear_pointer (&self->plan, dc_train_plan_free);
  g_clear_pointer (&self->config, dc_mesh_run_config_free);
  g_clear_pointer (&self->roster, g_ptr_array_unref);
  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  g_hash_table_unref (self->gradients);
  g_hash_table_unref (self->contribs);
  g_hash_table_unref (self->assemblies);
  g_hash_table_unref (self->reports);
  g_hash_table_unref (self->answered);
  g_hash_table_unref (self->start_sent);
  g_hash_table_unref (self->joiners);
  g_hash_table_unref (self->evicted);
  g_hash_table_unref (self->switch_reports);
  g_hash_table_unref (self->refused);
  g_ptr_array_unref (self->accusations);
  g_clear_pointer (&self->resume_model, dc_gpt_model_free);
  g_clear_pointer (&self->resume_bytes, g_bytes_unref);
  g_free (self->checkpoint_from);
  g_clear_pointer (&self->switch_config, dc_mesh_run_config_free);
  g_clear_pointer (&self->switch_bytes, g_bytes_unref);
  g_clear_pointer (&self->switch_parsed, _dc_train_group_parse_job_free);
  g_clear_pointer (&self->pending_config, dc_mesh_run_config_free);
  g_clear_pointer (&self->pending_bytes, g_bytes_unref);
  g_clear_pointer (&self->proposal, dc_mesh_run_config_free);
  g_free (self->proposal_from);
  _dc_train_group_audit_job_free (self->audit_job);
  _dc_train_group_audit_job_free (self->audit_next);
  g_mutex_clear (&self->audit_lock);
  g_cond_clear (&self->audit_cond);
  g_mutex_clear (&self->worker_lock);
  g_cond_clear (&self->worker_cond);
  g_mutex_clear (&self->lane_lock);
  g_cond_clear (&self->lane_cond);
  g_free (self->join_from);
  g_clear_pointer (&self->weights, g_bytes_unref);
  g_hash_table_unref (self->logged);
  g_hash_table_unref (self->names);
  g_free (self->own_grads);
  g_free (self->start_hash);
  g_free (self->start_optimizer);
  g_free (self->snapshot);
  g_free (self->snapshot_prev);
  g_free (self->snapshot_prev2);
  g_free (self->sum_grads);
  g_clear_pointer (&self->own_objects, g_ptr_array_unref);
  g_clear_pointer (&self->own_frames, g_ptr_array_unref);
  g_clear_object (&self->reduce_cancel);
  g_async_queue_unref (self->early);
  g_clear_error (&self->own_pack_error);
  g_clear_error (&self->own_round_error);
  g_free ((char *) self->request.data);
  g_clear_object (&self->context);
  G_OBJECT_CLASS (dc_train_group_parent_class)->finalize (object);
}

static void
dc_train_group_class_init (DcTrainGroupClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_train_group_dispose;
  object_class->finalize = dc_train_group_finalize;

  /* (kind, peer name or NULL, text): "config", "not-admitted", "dropped",
   * "retake", "repair", "join", "joined-run", "audit". */
  signals[SIGNAL_NOTICE] =
    g_signal_new ("notice", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING);
  /* (step, loss, tokens/s of the group, weight hash, the roster's names in rank order). */
  signals[SIGNAL_STEP] =
    g_signal_new ("step", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 5, G_TYPE_UINT64, G_TYPE_DOUBLE, G_TYPE_DOUBLE, G_TYPE_STRING,
                  G_TYPE_STRV);
  /* (step, weight hash, a(sd): each reporting roster device's name and its
   * own work on the step in seconds, rank order): the sync guard passed. */
  signals[SIGNAL_AGREED] =
    g_signal_new ("agreed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_UINT64, G_TYPE_STRING, G_TYPE_VARIANT);
  /* (error or NULL): the run ended; NULL when it reached its last step. */
  signals[SIGNAL_FINISHED] =
    g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_ERROR);
}

static void
dc_train_group_init (DcTrainGroup *self)
{
  self->gradients = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                           (GDestroyNotify) gradient_free);
  self->contribs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) gradient_free);
  self->early = g_async_queue_new ();
  g_mutex_init (&self->audit_lock);
  g_cond_init (&self->audit_cond);
  g_mutex_init (&self->worker_lock);
  g_cond_init (&self->worker_cond);
  g_mutex_init (&self->lane_lock);
  g_cond_init (&self->lane_cond);
  self->assemblies = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                            (GDestroyNotify) assembly_free);
  self->reports = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) dc_mesh_step_report_free);
  self->logged = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->answered = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->start_sent = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->joiners = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->evicted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->accusations = g_ptr_array_new_with_free_func ((GDestroyNotify) accusation_free);
  self->refused = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->switch_reports = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                (GDestroyNotify) dc_mesh_step_report_free);
  self->names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
}
