/* dc-train-group.c: the group coordinator (see dc-train-group.h).
 *
 * One state machine on the main context: advance () looks at what has
 * arrived (messages, peers coming and going, a worker's result, the clock)
 * and moves on when the current wait is satisfied; every wait has a
 * deadline (DC_TRAIN_GROUP_WAIT_S, DC_TRAIN_GROUP_CONNECT_S) except waiting
 * for people (min_peers devices, the starter's config).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-train"

#include "config.h"

#include <string.h>
#include <unistd.h>

#include "dc-train-group.h"
#include "dc-train-wire.h"
#include "mesh/dc-mesh-train-protocol.h"
#include "model/dc-checkpoint.h"
#include "model/dc-rng.h"

/* The audit draws' stream of dc_rng, apart from the model's (1-3). */
#define AUDIT_STREAM          0x41554454u  /* "AUDT" */

/* A gradient object: a header (dc-train-wire.h), then n_params
 * little-endian float32. The header names the roster the gradient was
 * computed for (its size and a digest of its sorted ids), so that gradients
 * of a roster a device has not adopted yet are kept apart, and the sender's
 * loss for the step line. The state a joining device receives (WEIGHTS): a
 * header (magic, u32 reserved, u64 n_params, u64 step, f32 β1^step, f32
 * β2^step), then the weights and both Adam moments, 3 × n_params
 * little-endian float32. */
#define GRADIENT_MAGIC        DC_TRAIN_GRADIENT_MAGIC
#define GRADIENT_HEADER_SIZE  DC_TRAIN_GRADIENT_HEADER_SIZE
#define WEIGHTS_MAGIC         DC_TRAIN_WEIGHTS_MAGIC
#define WEIGHTS_HEADER_SIZE   DC_TRAIN_WEIGHTS_HEADER_SIZE

/* How often the waits look at the clock and at the peers. */
#define TICK_MS 250

typedef enum
{
  STATE_WAITING_PEERS,   /* starter: fewer than min_peers devices */
  STATE_WAITING_CONFIG,  /* follower: no config yet */
  STATE_PREPARING,       /* worker: data, model, trainer */
  STATE_WAITING_START,   /* follower: prepared, no step-0 report yet */
  STATE_CONNECTING,      /* waiting to be connected to the whole roster */
  STATE_COMPUTING,       /* worker: this device's gradient */
  STATE_EXCHANGING,      /* waiting for the roster's gradients */
  STATE_APPLYING,        /* worker: sum in rank order, Adam */
  STATE_REPORTING,       /* waiting for the roster's step reports */
  STATE_ROLLING_BACK,    /* the step is taken again without a device that left */
  STATE_WAITING_WEIGHTS, /* joiner: prepared, waiting for the leader's state */
  STATE_ADMITTING,       /* at a step boundary: waiting for the joiners' reports */
  STATE_HOLDING,         /* test only: a step's report waits for a device to join */
  STATE_WAITING_CHECKPOINT, /* follower: the starter's checkpoint (a resumed run) */
  STATE_VERIFYING,       /* worker: recomputing accused gradients (audits) */
  STATE_DONE,
} State;

typedef struct
{
  guint   rank;
  float   loss;
  GBytes *object;
} Gradient;

typedef struct
{
  DcMeshChunkAssembler *assembler;
} Assembly;

/* An audit's accusation (this device's own or a roster device's): verified
 * by every device at the end of the step (verify_accusations ()). */
typedef struct
{
  guint64  step;
  guint    rank;        /* of the step's roster */
  char    *auditor;     /* member ids */
  char    *accused;
  guint8   recomputed[DC_MESH_HASH_SIZE];  /* this device's recomputation */
} Accusation;

static void
accusation_free (Accusation *accusation)
{
  g_free (accusation->auditor);
  g_free (accusation->accused);
  g_free (accusation);
}

/* Training messages dropped from one device since its last log line. */
typedef struct
{
  gint64 next_log;  /* monotonic µs: no line before this */
  guint  dropped;
} Refusal;

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (DcMeshChunk, dc_mesh_chunk_clear)

struct _DcTrainGroup
{
  GObject            parent_instance;

  DcContext         *context;
  DcGroup           *group;
  DcTrainingRequest  request;      /* this device's own flags (starter's when it starts) */
  gboolean           seed_given;
  guint              min_peers;
  DcTrainGroupStarter starter_rule;
  guint64            fault_step;   /* DC_TEST_FAULT=corrupt-weight@STEP, 0: none */
  guint64            fault_partial; /* DC_TEST_FAULT=partial-send@STEP, 0: none */
  guint64            fault_drop;   /* DC_TEST_FAULT=drop-gradient@STEP or drop-repair@STEP */
  gboolean           fault_drop_repair; /* drop-repair: the repairs of that step too */
  guint64            fault_hold;   /* DC_TEST_FAULT=hold-join@STEP, 0: none */
  guint64            fault_corrupt; /* DC_TEST_FAULT=corrupt-gradient@STEP: from STEP on */
  gboolean           audit_all;    /* DC_TEST_FAULT=audit-all: audit every step */
  gboolean           fault_outsider; /* DC_TEST_FAULT=outsider: training messages without a run */
  GHashTable        *refused;      /* peer id → Refusal: messages dropped, for the log */
  guint              audit_rank;   /* the rank audited this step; G_MAXUINT: none */
  float             *audit_grads;
  guint8             audit_hash[DC_MESH_HASH_SIZE];
  GHashTable        *evicted;      /* id → the step after which audits removed it */
  GPtrArray         *accusations;  /* Accusation*: audits of the step, verified at its end */
  guint64            fault_false_audit; /* DC_TEST_FAULT=false-audit@STEP: accuse from STEP on */
  double             last_loss, last_seconds;  /* of the step being published */

  State              state;
  gboolean           starter;
  gboolean           started;
  DcMeshRunConfig   *config;
  DcTrainPlan       *plan;
  DcTrainSession    *session;
  guint64            stop;

  GPtrArray         *roster;       /* char* member ids, sorted */
  guint64            digest;
  guint              rank;
  GHashTable        *logged;       /* ids whose admission was logged */
  GHashTable        *names;        /* id → display name, kept after it left */

  float             *own_grads;
  float              own_loss;
  guint64            step_done;    /* the model's step, as the main thread may read it
                                    * while a worker changes the model */
  gint64             step_started;
  gint64             t_computed, t_sent, t_apply;  /* monotonic µs, for the report */
  /* The step's own work off the main thread (pack_own_gradient (), apply_worker ()). */
  GBytes            *own_object;   /* this step's gradient object, packed by the worker */
  GPtrArray         *own_bodies;   /* its chunks, split (and hashed) once for every peer */
  GError            *own_pack_error; /* why they could not be made */
  gboolean           own_sent;     /* send_own_gradient () ran this step */
  float             *sum_grads;    /* the combined gradient, kept from step to step */
  gsize              sum_len;
  gint64             audit_us;     /* of compute_us: recomputing the audited gradient */

  /* The model before the last step (weights, both moments, step, β powers):
   * taken back when a roster device turns out to have taken that step
   * without a device that left (see rollback ()). */
  float             *snapshot;
  guint64            snap_step;
  float              snap_beta1, snap_beta2;
  guint64            rollback_digest;
  gint64             deadline;     /* monotonic µs; 0: none */

  GHashTable        *gradients;    /* "step/digest/id" → Gradient* (own included), kept
                                    * DC_TRAIN_GROUP_REPAIR_STEPS steps for repairs */
  GHashTable        *answered;     /* "step/rank/peer id" → repairs sent (a count) */
  guint              repair_tries[DC_MESH_ROSTER_MAX]; /* requests per rank, this step */
  gint64             repair_next[DC_MESH_ROSTER_MAX];  /* monotonic µs: when the next may go */
  GHashTable        *start_sent;   /* ids this device's step-0 report went to */
  GHashTable        *joiners;      /* id → the step after which it joins (announced) */
  gboolean           joining;      /* this device joins a run under way */
  char              *join_from;    /* joiner: the leader that sent the config */
  GBytes            *weights;      /* joiner: the state, once received */
  GHashTable        *assemblies;   /* peer id → Assembly* */
  GHashTable        *reports;      /* "step/id" → DcMeshStepReport* */
  DcMeshStepReport  *own_report;

  /* Checkpoint to the group (docs/ARCHITECTURE.md): a run that starts
   * from a checkpoint, and a checkpoint loaded mid-run that every device
   * switches to after the same step. */
  DcGptModel        *resume_model;    /* the model start_run () continues (owned) */
  DcTrainSettings    resume_settings;
  GBytes            *resume_bytes;    /* starter: the checkpoint file sent with CONFIG */
  char              *checkpoint_from; /* follower: who sends the checkpoint it waits for */
  DcMeshRunConfig   *switch_config;   /* the run to switch to after the step being taken */
  GBytes            *switch_bytes;    /* its checkpoint, once whole */
  GHashTable        *switch_reports;  /* "step/id" → reports of that run, before the switch */
  DcMeshRunConfig   *pending_config;  /* leader: a loaded checkpoint, sent at the next step */
  GBytes            *pending_bytes;
  DcMeshRunConfig   *proposal;        /* leader: a roster device's forwarded checkpoint */
  char              *proposal_from;

  guint              tick_id;
  gulong             event_handler;
  gulong             message_handler;
};

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

static void advance (DcTrainGroup *self);

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

static DcMesh *
get_mesh (DcTrainGroup *self)
{
  return dc_group_get_mesh (self->group);
}

static const char *
own_id (DcTrainGroup *self)
{
  DcMesh *mesh = get_mesh (self);

  return mesh != NULL ? dc_mesh_get_id (mesh) : NULL;
}

static DcMeshHello *
own_hello (DcTrainGroup *self)
{
  return g_object_get_data (G_OBJECT (self), "dc-hello");
}

/* The open peer with this member id, its hello received, or NULL. */
static DcPeer *
find_peer (DcTrainGroup *self,
           const char   *id)
{
  DcMesh *mesh = get_mesh (self);
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

static const char *
member_name (DcTrainGroup *self,
             const char   *id)
{
  DcPeer *peer;

  if (g_strcmp0 (id, own_id (self)) == 0)
    return own_hello (self)->name;
  peer = find_peer (self, id);
  if (peer != NULL)
    {
      g_hash_table_replace (self->names, g_strdup (id), g_strdup (dc_peer_get_name (peer)));
      return dc_peer_get_name (peer);
    }
  return g_hash_table_contains (self->names, id) ? g_hash_table_lookup (self->names, id) : id;
}

static void
notice (DcTrainGroup *self,
        const char   *kind,
        const char   *peer,
        const char   *text)
{
  g_message ("%s", text);
  g_signal_emit (self, signals[SIGNAL_NOTICE], 0, kind, peer, text);
}

static void
finish (DcTrainGroup *self,
        GError       *error)
{
  if (self->state == STATE_DONE)
    {
      g_clear_error (&error);
      return;
    }
  self->state = STATE_DONE;
  g_clear_handle_id (&self->tick_id, g_source_remove);
  if (error != NULL)
    g_message ("%s", error->message);
  g_signal_emit (self, signals[SIGNAL_FINISHED], 0, error);
  g_clear_error (&error);
}

/* finish () with a DC_TRAIN_GROUP_ERROR of @code. */
static void
fail (DcTrainGroup      *self,
      DcTrainGroupError  code,
      const char        *format,
      ...)
{
  va_list args;
  GError *error;

  va_start (args, format);
  error = g_error_new_valist (DC_TRAIN_GROUP_ERROR, code, format, args);
  va_end (args);
  finish (self, error);
}

/* Admission (the hello's probe hash and numeric rule): a device whose
 * kernels compute different values would fork the replicas at the first
 * step, so it is never counted, sent to, or listened to for training. */
static gboolean
admitted (DcTrainGroup *self,
          DcPeer       *peer)
{
  DcMeshHello *theirs = dc_peer_get_hello (peer);
  DcMeshHello *ours = own_hello (self);
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
      notice (self, "not-admitted", theirs->name, text);
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
static guint64
roster_digest_strv (char **ids)
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
  value = roster_digest_strv ((char **) roster->pdata);
  g_ptr_array_remove_index (roster, roster->len - 1);
  return value;
}

static void
set_roster (DcTrainGroup *self,
            GPtrArray    *roster)
{
  g_ptr_array_sort (roster, compare_ids);
  g_clear_pointer (&self->roster, g_ptr_array_unref);
  self->roster = g_ptr_array_ref (roster);
  self->digest = roster_digest (roster);
  self->rank = 0;
  for (guint i = 0; i < roster->len; i++)
    if (g_str_equal (g_ptr_array_index (roster, i), own_id (self)))
      self->rank = i;
}

static char **
roster_names (DcTrainGroup *self)
{
  GStrvBuilder *builder = g_strv_builder_new ();
  char **names;

  for (guint i = 0; i < self->roster->len; i++)
    g_strv_builder_add (builder, member_name (self, g_ptr_array_index (self->roster, i)));
  names = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  return names;
}

/* The displayed 16-hex-digit hash as the report's 32 bytes (the rest zero). */
static void
hash_to_bytes (const char *hex,
               guint8      out[DC_MESH_HASH_SIZE])
{
  memset (out, 0, DC_MESH_HASH_SIZE);
  for (guint i = 0; i < DC_MESH_HASH_SIZE && hex[2 * i] != '\0' && hex[2 * i + 1] != '\0'; i++)
    out[i] = (guint8) ((g_ascii_xdigit_value (hex[2 * i]) << 4)
                       | g_ascii_xdigit_value (hex[2 * i + 1]));
}

static char *
hash_to_hex (const guint8 hash[DC_MESH_HASH_SIZE])
{
  GString *hex = g_string_new (NULL);

  for (guint i = 0; i < 8; i++)
    g_string_append_printf (hex, "%02x", hash[i]);
  return g_string_free (hex, FALSE);
}

static void
send_to_roster (DcTrainGroup *self,
                guint         type,
                GBytes       *payload)
{
  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      DcPeer *peer;
      g_autoptr(GError) error = NULL;

      if (i == self->rank || (peer = find_peer (self, id)) == NULL)
        continue;
      if (!dc_peer_send (peer, type, payload, &error))
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

      if (GPOINTER_TO_SIZE (value) != step || (peer = find_peer (self, key)) == NULL)
        continue;
      if (!dc_peer_send (peer, DC_MESH_MSG_STEP_REPORT, payload, &error))
        g_message ("cannot send to %s: %s", dc_peer_get_name (peer), error->message);
    }
}

/* The report of the model's step, with its weight and optimizer hashes
 * (dc_gpt_model_dup_hash () and dc_gpt_model_dup_optimizer_hash ()) taken
 * by the caller. */
static DcMeshStepReport *
make_report_hashed (DcTrainGroup *self,
                    const char   *hash,
                    const char   *optimizer)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  DcMeshStepReport *report = dc_mesh_step_report_new ();

  memcpy (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  report->step = model->step;
  hash_to_bytes (hash, report->weights_hash);
  hash_to_bytes (optimizer, report->optimizer_hash);
  g_ptr_array_add (self->roster, NULL);
  report->roster = g_strdupv ((char **) self->roster->pdata);
  g_ptr_array_remove_index (self->roster, self->roster->len - 1);
  return report;
}

static DcMeshStepReport *
make_report (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autofree char *hash = dc_gpt_model_dup_hash (model);
  g_autofree char *optimizer = dc_gpt_model_dup_optimizer_hash (model);

  return make_report_hashed (self, hash, optimizer);
}

static char *
report_key (guint64     step,
            const char *id)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT "/%s", step, id);
}

static char *
gradient_key (guint64     step,
              guint64     digest,
              const char *id)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT "/%016" G_GINT64_MODIFIER "x/%s", step, digest, id);
}

/* The deadline of the current wait, from now. */
static void
arm (DcTrainGroup *self,
     guint         seconds)
{
  self->deadline = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;
}

/* ---- workers (GTask: the result comes back as a GSource on the main context) ---- */

static void
prepare_worker (GTask        *task,
                gpointer      source,
                gpointer      data,
                GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  GError *error = NULL;
  DcTrainSession *session = dc_train_plan_prepare (self->plan, cancellable, &error);

  if (session == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, session, (GDestroyNotify) dc_train_session_free);
}

/* What start_step () hands the compute worker: the roster as it stands
 * (the main thread's fields are not read from the worker). */
typedef struct
{
  guint    rank;
  guint    n_ranks;
  guint64  digest;
  guint8   run_id[DC_MESH_RUN_ID_SIZE];
} ComputeData;

/* The model before the step (weights, both moments, step, β powers) for
 * rollback (), copied while the gradient is computed (which only reads the
 * model) rather than between the step's gradients and its Adam step. */
static gpointer
snapshot_thread (gpointer data)
{
  DcTrainGroup *self = data;
  DcGptModel *model = dc_train_session_get_model (self->session);

  memcpy (self->snapshot, model->params, 3 * model->n_params * sizeof (float));
  self->snap_step = model->step;
  self->snap_beta1 = model->beta1_pow;
  self->snap_beta2 = model->beta2_pow;
  return NULL;
}

/* This device's gradient object (the header, then n_params little-endian
 * float32) and its chunks, made on the worker: hashing and cutting the
 * object is most of the cost of sending it, and is done once for all
 * peers, not once per peer on the main thread. A split that fails leaves
 * own_bodies NULL and its error for computed_cb () to log per peer. */
static void
pack_own_gradient (DcTrainGroup      *self,
                   const ComputeData *compute)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  gsize size = GRADIENT_HEADER_SIZE + model->n_params * sizeof (float);
  guint8 *data = g_malloc (size);
  guint32 word, loss_bits;
  guint64 digest = GUINT64_TO_LE (compute->digest);
  DcMeshChunk info = { 0 };

  memset (data, 0, GRADIENT_HEADER_SIZE);
  word = GUINT32_TO_LE (GRADIENT_MAGIC);
  memcpy (data, &word, 4);
  word = GUINT32_TO_LE (compute->n_ranks);
  memcpy (data + 4, &word, 4);
  memcpy (data + 8, &digest, 8);
  memcpy (&loss_bits, &self->own_loss, 4);
  loss_bits = GUINT32_TO_LE (loss_bits);
  memcpy (data + 16, &loss_bits, 4);
  /* float32 on the wire is little-endian, as this host's (G_BYTE_ORDER is
   * checked in meson: every supported target is little-endian). */
  memcpy (data + GRADIENT_HEADER_SIZE, self->own_grads, model->n_params * sizeof (float));
  g_clear_pointer (&self->own_object, g_bytes_unref);
  g_clear_pointer (&self->own_bodies, g_ptr_array_unref);
  g_clear_error (&self->own_pack_error);
  self->own_object = g_bytes_new_take (data, size);

  memcpy (info.run_id, compute->run_id, DC_MESH_RUN_ID_SIZE);
  info.step = model->step + 1;
  info.rank = compute->rank;
  self->own_bodies = dc_mesh_chunks_split (DC_MESH_MSG_GRADIENTS, &info, self->own_object,
                                          &self->own_pack_error);
}

static gboolean
compute_own (DcTrainGroup       *self,
             const ComputeData  *compute,
             GError            **error)
{
  DcGptTrainer *trainer = dc_train_session_get_trainer (self->session);
  DcGptModel *model = dc_gpt_trainer_get_model (trainer);

  if (!dc_gpt_trainer_compute_gradients (trainer, compute->rank, compute->n_ranks,
                                         self->own_grads, &self->own_loss, error))
    return FALSE;
  if (self->fault_corrupt != 0 && model->step + 1 >= self->fault_corrupt)
    {
      guint32 bits;

      /* Test only (DC_TEST_FAULT=corrupt-gradient@STEP): one flipped bit
       * in every gradient from STEP on, summed here too (the replicas stay
       * equal: only an audit can tell). */
      memcpy (&bits, &self->own_grads[0], 4);
      bits ^= 1u;
      memcpy (&self->own_grads[0], &bits, 4);
    }
  return TRUE;
}

/* The audited rank's gradient, recomputed on the same weights, and its hash. */
static gboolean
compute_audit (DcTrainGroup       *self,
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

static void send_own_gradient (DcTrainGroup *self);

static gboolean
own_packed_cb (gpointer user_data)
{
  send_own_gradient (user_data);
  return G_SOURCE_REMOVE;
}

/* Own gradient, then (packed and handed to the main thread to send at
 * once) the audit's recomputation: on an audit step the transfer of the
 * gradients overlaps the second gradient instead of following it. */
static void
compute_worker (GTask        *task,
                gpointer      source,
                gpointer      data,
                GCancellable *cancellable)
{
  DcTrainGroup *self = source;
  ComputeData *compute = data;
  GError *error = NULL;
  GThread *snapshot = g_thread_try_new ("dc-snapshot", snapshot_thread, self, NULL);
  gboolean ok;

  if (snapshot == NULL)
    snapshot_thread (self);
  self->audit_us = 0;
  ok = compute_own (self, compute, &error);
  if (snapshot != NULL)
    g_thread_join (snapshot);
  if (!ok)
    {
      g_task_return_error (task, error);
      return;
    }
  /* Read by the main thread once the task's result is there. */
  self->t_computed = g_get_monotonic_time ();
  /* Alone, nobody receives it or asks for its repair. */
  if (compute->n_ranks > 1)
    {
      g_autoptr(GSource) packed = g_idle_source_new ();

      pack_own_gradient (self, compute);
      /* A source on the owner's context, not g_main_context_invoke ()
       * (shared/PLATFORM-NOTES.md). */
      g_source_set_priority (packed, G_PRIORITY_DEFAULT);
      g_source_set_callback (packed, own_packed_cb, g_object_ref (self), g_object_unref);
      g_source_attach (packed, g_task_get_context (task));
    }
  if (self->audit_rank != G_MAXUINT && !compute_audit (self, compute, &error))
    {
      g_task_return_error (task, error);
      return;
    }
  g_task_return_boolean (task, TRUE);
}

typedef struct
{
  const float **grads;
  guint         n;
  char         *weights_hash;    /* out: of the state after the step */
  char         *optimizer_hash;  /* out */
} ApplyData;

static void
apply_data_free (ApplyData *data)
{
  g_free (data->grads);
  g_free (data->weights_hash);
  g_free (data->optimizer_hash);
  g_free (data);
}

static gpointer
optimizer_hash_thread (gpointer data)
{
  return dc_gpt_model_dup_optimizer_hash (data);
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
  GThread *thread;

  /* (The snapshot for rollback () was taken while the gradient was computed.) */
  if (apply->n == 1)
    {
      /* x / 1 = x: a group of one applies its own gradient, as the solo step does. */
      sum = apply->grads[0];
    }
  else
    {
      /* Kept from step to step: a fresh n_params buffer a step costs page faults. */
      if (self->sum_len != model->n_params)
        {
          g_free (self->sum_grads);
          self->sum_grads = g_new (float, model->n_params);
          self->sum_len = model->n_params;
        }
      /* The canonical order (docs/VERIFICATION.md): ranks 0..n-1, as the simulation. */
      dc_gpt_trainer_combine_gradients (apply->grads, apply->n, model->n_params, self->sum_grads);
      sum = self->sum_grads;
    }
  dc_gpt_trainer_apply_gradients (trainer, sum);
  /* The report's two hashes: each SHA-256 is sequential, so they run side
   * by side (the weights' here, the optimizer's on a second thread) instead
   * of one after the other on the main thread. */
  thread = g_thread_try_new ("dc-hash", optimizer_hash_thread, model, NULL);
  apply->weights_hash = dc_gpt_model_dup_hash (model);
  apply->optimizer_hash = thread != NULL ? g_thread_join (thread)
                                         : dc_gpt_model_dup_optimizer_hash (model);
  g_task_return_boolean (task, TRUE);
}

static void start_step (DcTrainGroup *self);

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
          || (peer = find_peer (self, id)) == NULL)
        continue;
      if (!dc_peer_send (peer, DC_MESH_MSG_STEP_REPORT, payload, &error))
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
  self->own_report = make_report (self);
  g_hash_table_remove_all (self->start_sent);
  resend_start_report (self);
  arm (self, DC_TRAIN_GROUP_CONNECT_S);
}

static gboolean reports_complete (DcTrainGroup *self);

static void
prepared_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  GError *error = NULL;
  DcTrainSession *session = g_task_propagate_pointer (G_TASK (result), &error);

  if (self->state == STATE_DONE)
    {
      g_clear_pointer (&session, dc_train_session_free);
      g_clear_error (&error);
      return;
    }
  if (session == NULL)
    {
      finish (self, error);
      return;
    }
  self->session = session;
  self->step_done = dc_train_session_get_model (session)->step;
  g_free (self->own_grads);
  g_free (self->snapshot);
  g_free (self->audit_grads);
  self->own_grads = g_new (float, dc_train_session_get_model (session)->n_params);
  self->snapshot = g_new (float, 3 * dc_train_session_get_model (session)->n_params);
  self->audit_grads = g_new (float, dc_train_session_get_model (session)->n_params);
  self->state = self->starter ? STATE_CONNECTING
                : self->joining ? STATE_WAITING_WEIGHTS : STATE_WAITING_START;
  if (self->starter)
    send_start_report (self);
  advance (self);
}

static gboolean
fault_exit_cb (gpointer user_data)
{
  _exit (3);
  return G_SOURCE_REMOVE;
}

/* This step's gradient to the roster, once: from the worker's source as
 * soon as it is packed, else from computed_cb (). */
static void
send_own_gradient (DcTrainGroup *self)
{
  DcGptModel *model;
  g_autoptr(GBytes) object_bytes = NULL;
  g_autoptr(GPtrArray) bodies = NULL;
  guint64 step;

  if (self->own_sent || self->state != STATE_COMPUTING)
    return;
  self->own_sent = TRUE;
  model = dc_train_session_get_model (self->session);
  step = model->step + 1;
  /* Packed by the worker (pack_own_gradient ()). */
  object_bytes = g_steal_pointer (&self->own_object);
  bodies = g_steal_pointer (&self->own_bodies);

  if (object_bytes != NULL)
    {
      /* Kept with the others': this device may be asked to repair it. */
      Gradient *own = g_new0 (Gradient, 1);

      own->rank = self->rank;
      own->loss = self->own_loss;
      own->object = g_bytes_ref (object_bytes);
      g_hash_table_replace (self->gradients, gradient_key (step, self->digest, own_id (self)),
                            own);
    }

  for (guint i = 0; i < self->roster->len; i++)
    {
      DcPeer *peer;
      g_autoptr(GError) send_error = NULL;

      if (i == self->rank || (peer = find_peer (self, g_ptr_array_index (self->roster, i))) == NULL)
        continue;
      /* The same chunks for every peer: each queues its own frames of them. */
      if (bodies == NULL)
        g_message ("cannot send the gradient to %s: %s", dc_peer_get_name (peer),
                   self->own_pack_error != NULL ? self->own_pack_error->message : "not packed");
      else if (!dc_peer_send_chunks (peer, DC_MESH_MSG_GRADIENTS, bodies, &send_error))
        g_message ("cannot send the gradient to %s: %s", dc_peer_get_name (peer),
                   send_error->message);
      if (self->fault_partial != 0 && step == self->fault_partial)
        {
          /* Test only (DC_TEST_FAULT=partial-send@STEP): this device's
           * gradient reaches one device, then it dies without a bye. */
          g_message ("DC_TEST_FAULT: gradient of step %" G_GUINT64_FORMAT " sent to one device "
                     "only; exiting in 1 s", step);
          self->state = STATE_DONE;
          g_timeout_add_seconds (1, fault_exit_cb, NULL);
          return;
        }
    }
  self->t_sent = g_get_monotonic_time ();
}

static void
computed_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  GError *error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      finish (self, error);
      return;
    }
  send_own_gradient (self);
  if (self->state != STATE_COMPUTING)
    return;
  self->state = STATE_EXCHANGING;
  arm (self, DC_TRAIN_GROUP_WAIT_S);
  advance (self);
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
      const char *name = member_name (self, ids->pdata[i]);
      g_autofree char *hex = hash_to_hex (guard_hash (what, report));
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
  finish (self, g_error_new_literal (DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_SYNC, text->str));
}

static gboolean in_roster (DcTrainGroup *self, const char *id);

/* The leader, after step S: every admitted device connected to it that is
 * not in the roster joins after S. It announces each with a CONFIG whose
 * start_step is S and starter_id the joiner's id, sent to the roster and
 * the joiner before its report of S (a peer's frames arrive in order, so
 * every roster device knows of the joiner when it has the leader's report),
 * then sends the joiner the state after S (WEIGHTS). Everyone then waits at
 * the boundary for the joiner's report of S (STATE_ADMITTING). */
static void
announce_joiners (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (get_mesh (self));
  g_autoptr(GBytes) state = NULL;

  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);
      const char *id = dc_peer_get_id (peer);
      g_autoptr(DcMeshRunConfig) config = NULL;
      g_autoptr(GBytes) payload = NULL;
      g_autoptr(GError) error = NULL;
      DcMeshChunk info = { 0 };
      g_autofree char *text = NULL;

      if (find_peer (self, id) == NULL || in_roster (self, id)
          || g_hash_table_contains (self->joiners, id) || !admitted (self, peer)
          || self->roster->len + g_hash_table_size (self->joiners) >= DC_MESH_ROSTER_MAX)
        continue;
      config = dc_mesh_run_config_new ();
      memcpy (config->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      config->width = self->config->width;
      config->seq = self->config->seq;
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
      payload = dc_mesh_run_config_encode (config, &error);
      if (payload == NULL)
        {
          g_message ("cannot announce %s: %s", dc_peer_get_name (peer), error->message);
          continue;
        }
      g_hash_table_insert (self->joiners, g_strdup (id), GSIZE_TO_POINTER (model->step));
      send_to_roster (self, DC_MESH_MSG_CONFIG, payload);
      if (!dc_peer_send (peer, DC_MESH_MSG_CONFIG, payload, &error))
        g_message ("cannot send the config to %s: %s", dc_peer_get_name (peer), error->message);
      g_clear_error (&error);

      if (state == NULL)
        {
          gsize size = WEIGHTS_HEADER_SIZE + 3 * model->n_params * sizeof (float);
          guint8 *data = g_malloc0 (size);
          guint32 word = GUINT32_TO_LE (WEIGHTS_MAGIC);
          guint64 wide;

          memcpy (data, &word, 4);
          wide = GUINT64_TO_LE ((guint64) model->n_params);
          memcpy (data + 8, &wide, 8);
          wide = GUINT64_TO_LE (model->step);
          memcpy (data + 16, &wide, 8);
          memcpy (data + 24, &model->beta1_pow, 4);
          memcpy (data + 28, &model->beta2_pow, 4);
          memcpy (data + WEIGHTS_HEADER_SIZE, model->params, 3 * model->n_params * sizeof (float));
          state = g_bytes_new_take (data, size);
        }
      memcpy (info.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      info.step = model->step;
      info.rank = self->rank;
      /* Every batch is drawn from (run seed, rank, step): the step is the
       * data position. */
      info.position = model->step;
      if (!dc_peer_send_object (peer, DC_MESH_MSG_WEIGHTS, &info, state, &error))
        g_message ("cannot send the weights to %s: %s", dc_peer_get_name (peer), error->message);
      text = g_strdup_printf ("“%s” joins the run after step %" G_GUINT64_FORMAT
                              ": sending it the weights", member_name (self, id), model->step);
      notice (self, "join", member_name (self, id), text);
    }
}

static void publish_step (DcTrainGroup *self);
static void send_switch (DcTrainGroup *self);

static void
applied_cb (GObject      *object,
            GAsyncResult *result,
            gpointer      user_data)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);
  ApplyData *apply = g_task_get_task_data (G_TASK (result));
  DcGptModel *model;
  float loss_sum = 0.0f;

  g_task_propagate_boolean (G_TASK (result), NULL);
  if (self->state == STATE_DONE)
    return;
  model = dc_train_session_get_model (self->session);
  self->step_done = model->step;
  if (self->fault_step != 0 && model->step == self->fault_step)
    {
      guint32 bits;

      /* Test only (DC_TEST_FAULT=corrupt-weight@STEP): one flipped bit. */
      memcpy (&bits, &model->params[0], 4);
      bits ^= 1u;
      memcpy (&model->params[0], &bits, 4);
      g_message ("DC_TEST_FAULT: flipped a weight bit after step %" G_GUINT64_FORMAT, model->step);
      /* The worker hashed the state before the flip. */
      g_free (apply->weights_hash);
      g_free (apply->optimizer_hash);
      apply->weights_hash = dc_gpt_model_dup_hash (model);
      apply->optimizer_hash = dc_gpt_model_dup_optimizer_hash (model);
    }

  /* The loss as the simulation computes it: the ranks' losses in rank order. */
  for (guint i = 0; i < self->roster->len; i++)
    {
      float loss = self->own_loss;

      if (i != self->rank)
        {
          g_autofree char *key = gradient_key (model->step, self->digest,
                                               g_ptr_array_index (self->roster, i));
          Gradient *gradient = g_hash_table_lookup (self->gradients, key);

          loss = gradient->loss;
        }
      loss_sum = loss_sum + loss;
    }

  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  self->own_report = make_report_hashed (self, apply->weights_hash, apply->optimizer_hash);
  {
    float loss = loss_sum / (float) self->roster->len;

    memcpy (&self->own_report->loss_bits, &loss, 4);
  }
  /* Where the step's time went (for a view's "slowest device"). */
  /* An audit's recomputation runs after the send (compute_worker ()), in
   * what would otherwise be waiting: it counts as compute. */
  self->own_report->compute_us = self->t_computed - self->step_started + self->audit_us;
  self->own_report->send_us = self->t_sent - self->t_computed;
  self->own_report->wait_us = MAX (0, self->t_apply - self->t_sent - self->audit_us);
  self->own_report->combine_us = g_get_monotonic_time () - self->t_apply;
  self->last_loss = (double) (loss_sum / (float) self->roster->len);
  self->last_seconds = MAX (1e-6, (g_get_monotonic_time () - self->step_started) / 1e6);
  if (self->fault_hold != 0 && model->step == self->fault_hold)
    {
      /* Test only (DC_TEST_FAULT=hold-join@STEP): the report of STEP waits
       * for a device to join (at most DC_TRAIN_GROUP_CONNECT_S). */
      g_message ("DC_TEST_FAULT: holding after step %" G_GUINT64_FORMAT " for a device to join",
                 model->step);
      self->state = STATE_HOLDING;
      arm (self, DC_TRAIN_GROUP_CONNECT_S);
      advance (self);
      return;
    }
  publish_step (self);
}

/* The step just applied: announce joiners (the leader), send the report,
 * print the step line, wait for the others' reports. */
static void
publish_step (DcTrainGroup *self)
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
        send_switch (self);
      else if (self->switch_config == NULL)
        announce_joiners (self);
    }
  payload = dc_mesh_step_report_encode (self->own_report, NULL);
  send_to_roster (self, DC_MESH_MSG_STEP_REPORT, payload);
  send_to_joiners (self, model->step, payload);

  /* The report's own: hashing the state again costs as much as the first time. */
  hash = hash_to_hex (self->own_report->weights_hash);
  names = roster_names (self);
  g_signal_emit (self, signals[SIGNAL_STEP], 0, model->step, self->last_loss,
                 (double) self->roster->len * self->plan->settings.batch * model->config.seq
                 / self->last_seconds,
                 hash, names);

  self->state = STATE_REPORTING;
  arm (self, DC_TRAIN_GROUP_WAIT_S);
  advance (self);
}

/* ---- the steps ---- */

/* Roster members that were connected and are not any more. */
static gboolean
drop_gone (DcTrainGroup *self,
           guint64       step)
{
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);
  gboolean dropped = FALSE;

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);

      if (i == self->rank || find_peer (self, id) != NULL)
        g_ptr_array_add (kept, g_strdup (id));
      else
        {
          const char *name = member_name (self, id);
          g_autofree char *text = g_strdup_printf ("“%s” left: dropped from the roster at step %"
                                                   G_GUINT64_FORMAT, name, step);

          notice (self, "dropped", name, text);
          dropped = TRUE;
        }
    }
  if (dropped)
    set_roster (self, kept);
  return dropped;
}

static void
start_step (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  ComputeData *compute;
  g_autoptr(GTask) task = NULL;

  drop_gone (self, model->step + 1);
  for (guint i = 0; i < self->roster->len; i++)
    member_name (self, g_ptr_array_index (self->roster, i));  /* remembered for later */
  self->step_started = g_get_monotonic_time ();
  memset (self->repair_tries, 0, sizeof self->repair_tries);
  memset (self->repair_next, 0, sizeof self->repair_next);
  self->state = STATE_COMPUTING;
  self->own_sent = FALSE;
  self->audit_rank = G_MAXUINT;
  if (self->roster->len >= 2)
    {
      /* DC_TEST_FAULT=false-audit@S: this device audits every step from S
       * (and accuses falsely, see compute_worker). */
      gboolean forced = self->fault_false_audit != 0
                        && model->step + 1 >= self->fault_false_audit;

      self->audit_rank = dc_train_group_audit_rank (self->config->run_seed, model->step + 1,
                                                    self->rank, self->roster->len,
                                                    self->audit_all || forced);
    }
  compute = g_new0 (ComputeData, 1);
  compute->rank = self->rank;
  compute->n_ranks = self->roster->len;
  compute->digest = self->digest;
  memcpy (compute->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
  task = g_task_new (self, NULL, computed_cb, NULL);
  g_task_set_task_data (task, compute, g_free);
  g_task_run_in_thread (task, compute_worker);
}

static gboolean
gradients_complete (DcTrainGroup  *self,
                    const float  **grads)
{
  DcGptModel *model = dc_train_session_get_model (self->session);

  for (guint i = 0; i < self->roster->len; i++)
    {
      g_autofree char *key = NULL;
      Gradient *gradient;

      if (i == self->rank)
        {
          grads[i] = self->own_grads;
          continue;
        }
      key = gradient_key (model->step + 1, self->digest, g_ptr_array_index (self->roster, i));
      gradient = g_hash_table_lookup (self->gradients, key);
      if (gradient == NULL || gradient->rank != i)
        return FALSE;
      grads[i] = (const float *) ((const guint8 *) g_bytes_get_data (gradient->object, NULL)
                                  + GRADIENT_HEADER_SIZE);
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
      g_autofree char *key = report_key (self->own_report->step, id);
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
          if (find_peer (self, id) != NULL && !g_hash_table_contains (self->evicted, id))
            return FALSE;
          continue;
        }
      g_hash_table_insert (theirs, (gpointer) id, report);
      /* Its report of the step with a device this one dropped: it is
       * taking the step again (rollback ()); its new report replaces it.
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
           * taking the step again (rollback ()); its new report replaces it. */
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

/* After the guard passed: every roster device that reported, in rank
 * order, with its own work on the step (its gradient and its combine; the
 * rest of its step is waiting for the others), for a view's slowest device. */
static void
emit_agreed (DcTrainGroup *self)
{
  g_auto(GVariantBuilder) devices = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("a(sd)"));
  g_autofree char *hash = hash_to_hex (self->own_report->weights_hash);

  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      g_autofree char *key = report_key (self->own_report->step, id);
      DcMeshStepReport *report = i == self->rank ? self->own_report
                                                 : g_hash_table_lookup (self->reports, key);

      if (report == NULL)
        continue;  /* it left after its gradient came */
      g_variant_builder_add (&devices, "(sd)", member_name (self, id),
                             (report->compute_us + report->combine_us) / 1e6);
    }
  g_signal_emit (self, signals[SIGNAL_AGREED], 0, self->own_report->step, hash,
                 g_variant_builder_end (&devices));
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
  g_hash_table_iter_init (&iter, self->answered);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_ascii_strtoull (key, NULL, 10) < keep)
      g_hash_table_iter_remove (&iter);
  g_hash_table_iter_init (&iter, self->reports);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    if (g_ascii_strtoull (key, NULL, 10) < step)
      g_hash_table_iter_remove (&iter);
}

static void
timeout_error (DcTrainGroup *self,
               const char   *what)
{
  fail (self, DC_TRAIN_GROUP_ERROR_TIMEOUT,
        "%s: stopping the run", what);
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
      g_autofree char *key = reports ? report_key (model->step, id)
                                     : gradient_key (model->step + 1, self->digest, id);

      /* A device gone owes no report. */
      if (i != self->rank && !(reports && find_peer (self, id) == NULL)
          && !g_hash_table_contains (reports ? self->reports : self->gradients, key))
        g_string_append_printf (names, "%s“%s”", names->len > 0 ? ", " : "",
                                member_name (self, id));
    }
  return g_string_free (g_steal_pointer (&names), FALSE);
}

/* Whether @id reported @step with this device's roster: it took the step
 * with every roster gradient. */
static gboolean
reported (DcTrainGroup *self,
          guint64       step,
          const char   *id)
{
  g_autofree char *key = report_key (step, id);
  DcMeshStepReport *report = g_hash_table_lookup (self->reports, key);

  return report != NULL && memcmp (report->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) == 0
         && report->roster != NULL && g_strv_length (report->roster) == self->roster->len
         && roster_digest_strv (report->roster) == self->digest;
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

      if (i != self->rank && find_peer (self, id) != NULL && reported (self, step, id))
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
static void
maybe_repair (DcTrainGroup *self)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  guint64 step = model->step + 1;
  const char *source;
  DcPeer *peer;
  g_autoptr(GString) missing = g_string_new (NULL);
  g_autoptr(GArray) ranks = g_array_new (FALSE, FALSE, sizeof (guint));
  gint64 now = g_get_monotonic_time ();
  guint tries = 0;

  if ((source = repair_source (self, step)) == NULL || (peer = find_peer (self, source)) == NULL)
    return;
  for (guint i = 0; i < self->roster->len; i++)
    {
      const char *id = g_ptr_array_index (self->roster, i);
      g_autofree char *key = gradient_key (step, self->digest, id);

      if (i == self->rank || g_hash_table_contains (self->gradients, key)
          || now < self->repair_next[i])
        continue;
      /* Not known lost (its sender may be waiting for a repair itself):
       * asked once the leader has used it and it is DC_TRAIN_GROUP_REPAIR_RETRY_S
       * late; if it was only slow, the first copy to come is kept. */
      if (!reported (self, step, id)
          && now < self->t_sent + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC)
        continue;
      if (self->repair_tries[i] >= DC_TRAIN_GROUP_REPAIR_TRIES)
        {
          fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                "SYNC GUARD: stopped — roster gradient of step %"
                G_GUINT64_FORMAT " from “%s” not repaired after %u requests "
                "to “%s”", step, member_name (self, id),
                self->repair_tries[i], member_name (self, source));
          return;
        }
      self->repair_tries[i]++;
      self->repair_next[i] = now + (gint64) DC_TRAIN_GROUP_REPAIR_RETRY_S * G_USEC_PER_SEC;
      tries = MAX (tries, self->repair_tries[i]);
      g_array_append_val (ranks, i);
      g_string_append_printf (missing, "%s“%s”", missing->len > 0 ? ", " : "",
                              member_name (self, id));
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
      if (!dc_peer_send (peer, DC_MESH_MSG_REPAIR_REQUEST, payload, &error))
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
                            step, missing->str, member_name (self, source),
                            g_str_equal (leader, source) ? ""
                            : self->rank == 0 ? ", standing in for this device"
                            : ", standing in for the leader",
                            tries, DC_TRAIN_GROUP_REPAIR_TRIES);
    notice (self, "repair", member_name (self, source), text);
  }
}

static void
start_run (DcTrainGroup *self)
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
  /* A run from a checkpoint continues it exactly as --resume does: its
   * size and settings, the run's steps. The plan takes the model. */
  self->plan = dc_train_plan_new (&request, self->resume_model,
                                  self->resume_model != NULL ? &self->resume_settings : NULL,
                                  &error);
  if (self->plan != NULL)
    self->resume_model = NULL;
  if (self->plan == NULL)
    {
      g_prefix_error (&error, "the run's config cannot be followed: ");
      finish (self, error);
      return;
    }
  dc_train_plan_set_context (self->plan, self->context);
  self->stop = self->plan->stop;
  self->state = STATE_PREPARING;
  task = g_task_new (self, NULL, prepared_cb, NULL);
  g_task_run_in_thread (task, prepare_worker);
}

static void send_resume_config (DcTrainGroup *self);

/* The starter: min_peers admitted devices are here; send them the config. */
static void
send_config (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) roster = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (get_mesh (self));
  DcMeshRunConfig *config;
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GError) error = NULL;
  DcTrainSettings settings;

  if (self->resume_bytes != NULL)
    {
      send_resume_config (self);
      return;
    }
  config = dc_mesh_run_config_new ();
  for (guint i = 0; i < DC_MESH_RUN_ID_SIZE; i++)
    config->run_id[i] = (guint8) g_random_int_range (0, 256);
  dc_train_settings_init_default (&settings);
  config->width = self->request.width;
  config->seq = self->request.seq;
  config->batch = self->request.batch > 0 ? self->request.batch : settings.batch;
  config->steps = self->request.steps > 0 ? self->request.steps : settings.steps;
  config->lr_x1000 = self->request.lr_x1000 > 0 ? self->request.lr_x1000 : settings.lr_x1000;
  config->numeric_rule_id = own_hello (self)->numeric_rule_id;
  /* A fresh run seed unless --seed named one (tests, reproducing a run). */
  config->run_seed = self->seed_given ? self->request.seed
                                      : ((guint64) g_random_int () << 32) | g_random_int ();
  config->start_step = 0;
  g_free (config->dataset_spec);
  config->dataset_spec = g_strdup (g_strcmp0 (self->request.data, "builtin") == 0
                                   || self->request.data == NULL ? "" : self->request.data);
  g_free (config->probe_hash);
  config->probe_hash = g_strdup (own_hello (self)->probe_hash);
  g_free (config->starter_id);
  config->starter_id = g_strdup (own_id (self));
  self->config = config;

  payload = dc_mesh_run_config_encode (config, &error);
  if (payload == NULL)
    {
      finish (self, g_steal_pointer (&error));
      return;
    }
  g_ptr_array_add (roster, g_strdup (own_id (self)));
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (find_peer (self, dc_peer_get_id (peer)) == NULL || !admitted (self, peer))
        continue;
      if (roster->len >= DC_MESH_ROSTER_MAX)
        break;
      g_ptr_array_add (roster, g_strdup (dc_peer_get_id (peer)));
      if (!dc_peer_send (peer, DC_MESH_MSG_CONFIG, payload, &error))
        g_message ("cannot send the config to %s: %s", dc_peer_get_name (peer), error->message);
      g_clear_error (&error);
    }
  set_roster (self, roster);
  {
    g_autofree char *text = g_strdup_printf ("starting the run with %u devices (seed %"
                                             G_GUINT64_FORMAT ")", roster->len, config->run_seed);

    notice (self, "config", NULL, text);
  }
  start_run (self);
}

static guint
count_admitted (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (get_mesh (self));
  guint n = 1;

  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (find_peer (self, dc_peer_get_id (peer)) != NULL && admitted (self, peer))
        n++;
    }
  return n;
}

/* ---- checkpoint to the group ---- */

/* What a checkpoint file may add to its weights and both Adam moments
 * (3 × 4 bytes a parameter): the .pt container's pickle, zip headers and
 * tensor names, under 100 KiB for the largest model; 1 MiB leaves room and
 * still bounds what a lying peer can make this device hold. */
#define CHECKPOINT_SLACK  (1024u * 1024u)

/* The largest checkpoint file a config of @width and @seq can name (a
 * checkpoint may have more layers than the width implies, up to
 * DC_GPT_LAYERS_MAX); 0 when the size is not one the model allows. */
static guint64
checkpoint_cap (guint32 width,
                guint32 seq)
{
  DcGptConfig config;

  dc_gpt_config_init_derived (&config, width, seq);
  config.n_layer = DC_GPT_LAYERS_MAX;
  if (!dc_gpt_config_validate (&config, NULL))
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
  config->numeric_rule_id = own_hello (self)->numeric_rule_id;
  config->run_seed = settings->seed;
  config->start_step = model->step;
  config->resume = TRUE;
  hash_to_bytes (hash, config->resume_hash);
  g_free (config->dataset_spec);
  config->dataset_spec = g_strdup (dataset_spec != NULL && !g_str_equal (dataset_spec, "builtin")
                                   ? dataset_spec : "");
  g_free (config->probe_hash);
  config->probe_hash = g_strdup (own_hello (self)->probe_hash);
  g_free (config->starter_id);
  config->starter_id = g_strdup (own_id (self));
  return config;
}

/* The checkpoint file @blob, checked against the @config that announced it
 * (size, settings, step and weight hash): the model to continue. */
static DcGptModel *
checkpoint_parse (GBytes                 *blob,
                  const DcMeshRunConfig  *config,
                  DcTrainSettings        *settings,
                  GError                **error)
{
  g_autoptr(GError) local = NULL;
  DcGptModel *model = dc_checkpoint_from_bytes (blob, settings, &local);
  g_autofree char *hash = NULL;
  guint8 bytes[DC_MESH_HASH_SIZE];

  if (model == NULL)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the group's checkpoint cannot be read: %s", local->message);
      return NULL;
    }
  hash = dc_gpt_model_dup_hash (model);
  hash_to_bytes (hash, bytes);
  if (model->config.width != config->width || model->config.seq != config->seq
      || settings->batch != config->batch || settings->lr_x1000 != config->lr_x1000
      || settings->seed != config->run_seed || model->step != config->start_step
      || memcmp (bytes, config->resume_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_autofree char *announced = hash_to_hex (config->resume_hash);

      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the group's checkpoint does not match its config (width %u, sequence %u, "
                   "step %" G_GUINT64_FORMAT ", weight hash %s; announced width %u, sequence %u, "
                   "step %" G_GUINT64_FORMAT ", weight hash %s)", model->config.width,
                   model->config.seq, model->step, hash, config->width, config->seq,
                   config->start_step, announced);
      dc_gpt_model_free (model);
      return NULL;
    }
  return model;
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

  if (payload == NULL || !dc_peer_send (peer, DC_MESH_MSG_CONFIG, payload, &error))
    {
      g_message ("cannot send the checkpoint's config to %s: %s", dc_peer_get_name (peer),
                 error->message);
      return;
    }
  memcpy (info.run_id, config->run_id, DC_MESH_RUN_ID_SIZE);
  info.step = config->start_step;
  info.rank = self->roster != NULL ? self->rank : 0;
  info.position = config->start_step;
  if (!dc_peer_send_object (peer, DC_MESH_MSG_CHECKPOINT, &info, blob, &error))
    g_message ("cannot send the checkpoint to %s: %s", dc_peer_get_name (peer), error->message);
}

/* The leader, before its report of the step just taken: the loaded
 * checkpoint goes to every roster device (a peer's frames arrive in order,
 * so each has it whole when it has that report), and every device
 * switches to it once the step's reports agree (switch_run ()). */
static void
send_switch (DcTrainGroup *self)
{
  g_autofree char *text = NULL;

  for (guint i = 0; i < self->roster->len; i++)
    {
      DcPeer *peer;

      if (i != self->rank && (peer = find_peer (self, g_ptr_array_index (self->roster, i))) != NULL)
        send_checkpoint (self, peer, self->pending_config, self->pending_bytes);
    }
  g_clear_pointer (&self->switch_config, dc_mesh_run_config_free);
  g_clear_pointer (&self->switch_bytes, g_bytes_unref);
  self->switch_config = g_steal_pointer (&self->pending_config);
  self->switch_bytes = g_steal_pointer (&self->pending_bytes);
  text = g_strdup_printf ("sending the checkpoint of step %" G_GUINT64_FORMAT " to the group: "
                          "every device continues from it after step %" G_GUINT64_FORMAT,
                          self->switch_config->start_step,
                          dc_train_session_get_model (self->session)->step);
  notice (self, "checkpoint", NULL, text);
}

/* After the step whose reports just agreed: every device leaves the run for
 * the one the leader's checkpoint starts (a new run id, so nothing of the
 * old run is taken for the new), with the same roster, the leader as its
 * starter. From here it is a run started from a checkpoint. */
static void
switch_run (DcTrainGroup *self)
{
  g_autoptr(GError) error = NULL;
  DcGptModel *model;
  GHashTableIter iter;
  gpointer key, value;
  g_autofree char *text = NULL;
  g_autofree char *from = g_strdup (member_name (self, self->switch_config->starter_id));
  g_autofree char *hash = NULL;

  if (self->switch_bytes == NULL)
    {
      fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
            "SYNC GUARD: stopped — the checkpoint “%s” sent to the group "
            "did not arrive whole", from);
      return;
    }
  model = checkpoint_parse (self->switch_bytes, self->switch_config, &self->resume_settings,
                            &error);
  if (model == NULL)
    {
      finish (self, g_steal_pointer (&error));
      return;
    }
  g_clear_pointer (&self->resume_model, dc_gpt_model_free);
  self->resume_model = model;
  g_clear_pointer (&self->config, dc_mesh_run_config_free);
  self->config = g_steal_pointer (&self->switch_config);
  g_clear_pointer (&self->switch_bytes, g_bytes_unref);
  self->starter = g_strcmp0 (self->config->starter_id, own_id (self)) == 0;
  self->joining = FALSE;
  g_hash_table_remove_all (self->gradients);
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
  g_clear_pointer (&self->audit_grads, g_free);
  self->step_done = self->config->start_step;
  hash = dc_gpt_model_dup_hash (model);
  text = g_strdup_printf ("continuing from the checkpoint “%s” sent to the group: step %"
                          G_GUINT64_FORMAT ", weight hash %s, %u devices", from,
                          model->step, hash, self->roster->len);
  notice (self, "checkpoint", from, text);
  start_run (self);
}

/* The starter of a run from a checkpoint (dc_train_group_set_resume ()):
 * CONFIG with the resume flag, then the checkpoint file, to every admitted
 * device connected; they prepare from it and answer with their report of
 * its step, as for a fresh run's step 0. */
static void
send_resume_config (DcTrainGroup *self)
{
  g_autoptr(GPtrArray) roster = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (get_mesh (self));
  guint32 steps = self->request.steps > 0 ? self->request.steps : self->resume_settings.steps;
  g_autofree char *text = NULL;

  self->config = resume_config_new (self, self->resume_model, &self->resume_settings, steps,
                                    self->request.data);
  g_ptr_array_add (roster, g_strdup (own_id (self)));
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (find_peer (self, dc_peer_get_id (peer)) == NULL || !admitted (self, peer))
        continue;
      if (roster->len >= DC_MESH_ROSTER_MAX)
        break;
      g_ptr_array_add (roster, g_strdup (dc_peer_get_id (peer)));
      send_checkpoint (self, peer, self->config, self->resume_bytes);
    }
  set_roster (self, roster);
  g_clear_pointer (&self->resume_bytes, g_bytes_unref);
  text = g_strdup_printf ("starting the run with %u devices from the checkpoint at step %"
                          G_GUINT64_FORMAT " (seed %" G_GUINT64_FORMAT ")", roster->len,
                          self->config->start_step, self->config->run_seed);
  notice (self, "config", NULL, text);
  start_run (self);
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
  notice (self, "checkpoint", who, text);
}

/* While a run is under way, a CONFIG with the resume flag: the leader's
 * switch to a checkpoint (from the roster's first device), or, on the
 * leader, a checkpoint a roster device loaded and forwards. Returns FALSE
 * for any other config (a join announcement). */
static gboolean
handle_checkpoint_config (DcTrainGroup *self,
                          DcPeer       *peer,
                          GBytes       *payload)
{
  g_autoptr(DcMeshRunConfig) config = NULL;
  const char *from = dc_peer_get_id (peer);
  g_autofree char *assembly_key = NULL;

  if (self->config == NULL || self->roster == NULL || self->roster->len == 0
      || (config = dc_mesh_run_config_decode (payload, NULL)) == NULL || !config->resume)
    return FALSE;
  if (!in_roster (self, from) || g_strcmp0 (config->starter_id, from) != 0
      || config->start_step >= config->steps || checkpoint_cap (config->width, config->seq) == 0)
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
                              member_name (self, from), config->start_step);
      self->switch_config = g_steal_pointer (&config);
      g_clear_pointer (&self->switch_bytes, g_bytes_unref);
      g_hash_table_remove_all (self->switch_reports);
      notice (self, "checkpoint", member_name (self, from), text);
    }
  else if (self->rank == 0)
    {
      g_message ("“%s” forwards a checkpoint of step %" G_GUINT64_FORMAT " to the leader",
                 member_name (self, from), config->start_step);
      g_clear_pointer (&self->proposal, dc_mesh_run_config_free);
      g_free (self->proposal_from);
      self->proposal = g_steal_pointer (&config);
      self->proposal_from = g_strdup (from);
    }
  return TRUE;
}

/* A CHECKPOINT chunk: the starter's checkpoint this follower waits for, the
 * leader's checkpoint the group switches to, or (on the leader) one a
 * roster device forwards. Anything else is dropped. */
static void
handle_checkpoint (DcTrainGroup *self,
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
  if (!dc_mesh_chunk_decode (DC_MESH_MSG_CHECKPOINT, payload, &chunk, &error))
    {
      g_message ("a malformed checkpoint chunk from %s: %s", dc_peer_get_name (peer),
                 error->message);
      return;
    }
  if (memcmp (chunk.run_id, config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || chunk.step != config->start_step
      || (cap = checkpoint_cap (config->width, config->seq)) == 0)
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
      DcGptModel *model = checkpoint_parse (object, config, &self->resume_settings, &error);

      if (model == NULL)
        {
          finish (self, g_steal_pointer (&error));
          return;
        }
      g_clear_pointer (&self->resume_model, dc_gpt_model_free);
      self->resume_model = model;
      start_run (self);
    }
  else if (config == self->switch_config)
    self->switch_bytes = g_steal_pointer (&object);
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

/* The follower's first roster, from the starter's step-0 report. */
static gboolean
adopt_start (DcTrainGroup *self)
{
  g_autofree char *key = report_key (self->config->start_step, self->config->starter_id);
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
          fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
                "the starter's roster is not in canonical order");
          return FALSE;
        }
      found = found || g_str_equal (report->roster[i], own_id (self));
      g_ptr_array_add (roster, g_strdup (report->roster[i]));
    }
  if (!found)
    {
      fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
            "this device is not in the run's roster (it came too late)");
      return FALSE;
    }
  set_roster (self, roster);
  hash = dc_gpt_model_dup_hash (dc_train_session_get_model (self->session));
  hash_to_bytes (hash, own);
  if (memcmp (own, report->weights_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_autofree char *theirs = hash_to_hex (report->weights_hash);

      fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
            "SYNC GUARD: stopped — weight hash mismatch at step %"
            G_GUINT64_FORMAT ": “%s” %s, “%s” %s", self->config->start_step,
            member_name (self, self->config->starter_id), theirs,
            own_hello (self)->name, hash);
      return FALSE;
    }
  return TRUE;
}

/* After step @step: the devices announced to join after it enter the
 * roster, and the step waits for their reports (STATE_ADMITTING). */
static gboolean
enter_admitting (DcTrainGroup *self,
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
    if (GPOINTER_TO_SIZE (value) == step && !in_roster (self, key)
        && roster->len < DC_MESH_ROSTER_MAX)
      {
        g_ptr_array_add (roster, g_strdup (key));
        any = TRUE;
      }
  if (!any)
    return FALSE;
  set_roster (self, roster);
  g_hash_table_remove_all (self->start_sent);
  self->state = STATE_ADMITTING;
  arm (self, DC_TRAIN_GROUP_CONNECT_S);
  return TRUE;
}

/* The joiner: the state after step S from the leader, checked against the
 * leader's report of S (which also names the roster it joins). */
static void
load_weights (DcTrainGroup *self)
{
  g_autofree char *key = NULL;
  DcMeshStepReport *report;
  DcGptModel *model = dc_train_session_get_model (self->session);
  const guint8 *data;
  gsize size;
  DcTrainWeightsHeader header;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) roster = NULL;
  g_autofree char *hash = NULL;
  g_autofree char *optimizer = NULL;
  guint8 own[DC_MESH_HASH_SIZE], own_optimizer[DC_MESH_HASH_SIZE];
  g_autofree char *text = NULL;

  key = report_key (self->config->start_step, self->join_from);
  report = g_hash_table_lookup (self->reports, key);
  if (self->weights == NULL || report == NULL)
    return;
  data = g_bytes_get_data (self->weights, &size);
  if (!dc_train_weights_header_parse (data, size, model->n_params, self->config->start_step,
                                      &header, &error))
    {
      fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
            "the weights from “%s” do not fit the run's model (%"
            G_GSIZE_FORMAT " bytes for %" G_GSIZE_FORMAT " parameters): %s",
            member_name (self, self->join_from), size, model->n_params,
            error->message);
      return;
    }
  memcpy (model->params, data + WEIGHTS_HEADER_SIZE, 3 * model->n_params * sizeof (float));
  model->beta1_pow = header.beta1_pow;
  model->beta2_pow = header.beta2_pow;
  model->step = self->config->start_step;
  self->step_done = model->step;
  g_clear_pointer (&self->weights, g_bytes_unref);

  hash = dc_gpt_model_dup_hash (model);
  optimizer = dc_gpt_model_dup_optimizer_hash (model);
  hash_to_bytes (hash, own);
  hash_to_bytes (optimizer, own_optimizer);
  if (memcmp (own, report->weights_hash, DC_MESH_HASH_SIZE) != 0
      || memcmp (own_optimizer, report->optimizer_hash, DC_MESH_HASH_SIZE) != 0)
    {
      g_autofree char *theirs = hash_to_hex (report->weights_hash);

      fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
            "SYNC GUARD: stopped — weight hash mismatch at step %"
            G_GUINT64_FORMAT ": “%s” %s, “%s” (joining) %s", model->step,
            member_name (self, self->join_from), theirs,
            own_hello (self)->name, hash);
      return;
    }
  roster = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; report->roster[i] != NULL && i + 1 < DC_MESH_ROSTER_MAX; i++)
    if (!g_str_equal (report->roster[i], own_id (self)))
      g_ptr_array_add (roster, g_strdup (report->roster[i]));
  g_ptr_array_add (roster, g_strdup (own_id (self)));
  set_roster (self, roster);
  g_clear_pointer (&self->own_report, dc_mesh_step_report_free);
  self->own_report = make_report (self);
  g_hash_table_remove_all (self->start_sent);
  text = g_strdup_printf ("joined the run after step %" G_GUINT64_FORMAT " with %u devices "
                          "(weights %s)", model->step, self->roster->len, hash);
  notice (self, "joined-run", NULL, text);
  self->state = STATE_ADMITTING;
  arm (self, DC_TRAIN_GROUP_CONNECT_S);
  advance (self);
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
 * step (verify_accusations ()). */
static void
check_audit (DcTrainGroup  *self,
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
  send_to_roster (self, DC_MESH_MSG_AUDIT, payload);
  add_accusation (self, audit.step, audit.rank, own_id (self));
  text = g_strdup_printf ("AUDIT: the gradient of “%s” at step %" G_GUINT64_FORMAT " does not "
                          "reproduce here: accused to the group, which checks it",
                          member_name (self, id), audit.step);
  g_message ("%s", text);
}

/* After step @step: devices an audit caught leave the roster. */
static void
remove_evicted (DcTrainGroup *self,
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
    set_roster (self, kept);
}

/* After the step whose reports agreed (and whose accusations were
 * checked): the roster of the next step, then that step. */
static void
next_step (DcTrainGroup *self)
{
  guint64 step = dc_train_session_get_model (self->session)->step;

  remove_evicted (self, step);
  if (self->switch_config != NULL)
    switch_run (self);
  else if (enter_admitting (self, step))
    advance (self);
  else
    start_step (self);
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
      finish (self, error);
      return;
    }
  if (self->state == STATE_DONE)
    return;
  for (guint i = 0; i < verify->n_accused; i++)
    {
      Accusation *accusation = g_ptr_array_index (self->accusations, i);
      g_autofree char *key = gradient_key (accusation->step, self->digest, accusation->accused);
      Gradient *gradient = g_hash_table_lookup (self->gradients, key);
      g_autoptr(GBytes) values = NULL;
      guint8 received[DC_MESH_HASH_SIZE];
      g_autofree char *auditor = g_strdup (member_name (self, accusation->auditor));
      g_autofree char *accused = g_strdup (member_name (self, accusation->accused));
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
      if (g_str_equal (removed, own_id (self)))
        {
          fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
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
      notice (self, "audit", reproduces ? auditor : accused, text);
    }
  g_ptr_array_set_size (self->accusations, 0);
  next_step (self);
}

/* At the end of step S: accusations of S are checked on a worker
 * (STATE_VERIFYING) before the next roster is made. Returns FALSE when
 * there are none (older ones are dropped: their step's end is past). */
static gboolean
verify_accusations (DcTrainGroup *self)
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

static void
advance (DcTrainGroup *self)
{
  gboolean late = self->deadline != 0 && g_get_monotonic_time () > self->deadline;

  switch (self->state)
    {
    case STATE_WAITING_PEERS:
      if (get_mesh (self) != NULL && own_id (self) != NULL
          && count_admitted (self) >= self->min_peers)
        send_config (self);
      break;

    case STATE_WAITING_CONFIG:
    case STATE_PREPARING:
    case STATE_VERIFYING:
    case STATE_COMPUTING:
    case STATE_APPLYING:
    case STATE_DONE:
      break;

    case STATE_WAITING_START:
      if (adopt_start (self))
        {
          self->state = STATE_CONNECTING;
          send_start_report (self);
          advance (self);
        }
      break;

    case STATE_CONNECTING:
      {
        g_autoptr(GString) missing = g_string_new (NULL);

        resend_start_report (self);
        for (guint i = 0; i < self->roster->len; i++)
          if (i != self->rank && find_peer (self, g_ptr_array_index (self->roster, i)) == NULL)
            g_string_append_printf (missing, "%s%s", missing->len > 0 ? ", " : "",
                                    (const char *) g_ptr_array_index (self->roster, i));
        if (missing->len == 0 && reports_complete (self))
          {
            self->deadline = 0;
            start_step (self);
          }
        else if (late && self->state == STATE_CONNECTING)
          {
            g_autofree char *what = g_strdup_printf ("not connected to every ready device of the "
                                                     "run within %u s (not connected: %s)",
                                                     DC_TRAIN_GROUP_CONNECT_S, missing->str);
            timeout_error (self, what);
          }
      }
      break;

    case STATE_EXCHANGING:
      {
        g_autofree const float **grads = g_new0 (const float *, self->roster->len);
        DcGptModel *model = dc_train_session_get_model (self->session);

        if (gradients_complete (self, grads))
          {
            ApplyData *data = g_new0 (ApplyData, 1);
            g_autoptr(GTask) task = g_task_new (self, NULL, applied_cb, NULL);

            check_audit (self, grads);
            data->grads = g_steal_pointer (&grads);
            data->n = self->roster->len;
            self->state = STATE_APPLYING;
            self->t_apply = g_get_monotonic_time ();
            self->deadline = 0;
            g_task_set_task_data (task, data, (GDestroyNotify) apply_data_free);
            g_task_run_in_thread (task, apply_worker);
          }
        else if (drop_gone (self, model->step + 1))
          /* Someone left before its gradient came: the step again without it. */
          start_step (self);
        else if ((maybe_repair (self), self->state != STATE_EXCHANGING))
          ;
        else if (late)
          {
            g_autofree char *names = missing_names (self, FALSE);
            g_autofree char *what = g_strdup_printf ("no gradient from %s for step %"
                                                     G_GUINT64_FORMAT " within %u s while "
                                                     "connected", names, model->step + 1,
                                                     DC_TRAIN_GROUP_WAIT_S);
            timeout_error (self, what);
          }
      }
      break;

    case STATE_WAITING_WEIGHTS:
      load_weights (self);
      break;

    case STATE_WAITING_CHECKPOINT:
      if (find_peer (self, self->checkpoint_from) == NULL)
        fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
              "“%s” left before its checkpoint arrived",
              member_name (self, self->checkpoint_from));
      else if (late)
        timeout_error (self, "the starter's checkpoint did not arrive whole within the wait");
      break;

    case STATE_HOLDING:
      {
        g_autoptr(GPtrArray) peers = dc_mesh_dup_peers (get_mesh (self));
        gboolean joiner = FALSE;

        for (guint i = 0; i < peers->len; i++)
          {
            DcPeer *peer = g_ptr_array_index (peers, i);

            if (find_peer (self, dc_peer_get_id (peer)) != NULL
                && !in_roster (self, dc_peer_get_id (peer)) && admitted (self, peer))
              joiner = TRUE;
          }
        if (joiner || late)
          {
            self->deadline = 0;
            publish_step (self);
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
            g_autofree char *key = report_key (step, id);
            DcMeshStepReport *report = g_hash_table_lookup (self->reports, key);
            gpointer value;
            gboolean joiner;

            if (i == self->rank)
              continue;
            joiner = g_hash_table_lookup_extended (self->joiners, id, NULL, &value)
                     && GPOINTER_TO_SIZE (value) == step;
            if (find_peer (self, id) == NULL || (joiner && report == NULL))
              {
                g_string_append_printf (waiting, "%s“%s”", waiting->len > 0 ? ", " : "",
                                        member_name (self, id));
                continue;
              }
            if (joiner
                && (memcmp (report->weights_hash, self->own_report->weights_hash,
                            DC_MESH_HASH_SIZE) != 0
                    || memcmp (report->optimizer_hash, self->own_report->optimizer_hash,
                               DC_MESH_HASH_SIZE) != 0))
              {
                g_autofree char *theirs = hash_to_hex (report->weights_hash);
                g_autofree char *ours = hash_to_hex (self->own_report->weights_hash);

                fail (self, DC_TRAIN_GROUP_ERROR_SYNC,
                      "SYNC GUARD: stopped — weight hash mismatch at step %"
                      G_GUINT64_FORMAT ": “%s” (joining) %s, “%s” %s", step,
                      member_name (self, id), theirs,
                      own_hello (self)->name, ours);
                return;
              }
          }
        if (waiting->len == 0)
          {
            self->deadline = 0;
            start_step (self);
          }
        else if (late && self->joining && step == self->config->start_step)
          {
            g_autofree char *what = g_strdup_printf ("not connected to %s (joining after step %"
                                                     G_GUINT64_FORMAT ") within %u s",
                                                     waiting->str, step,
                                                     DC_TRAIN_GROUP_CONNECT_S);
            timeout_error (self, what);
          }
        else if (late)
          {
            /* A joiner that never got ready is left out (it stays in
             * joiners: it is not announced again); a roster device that
             * is not connected is dropped by start_step (). Were a
             * joiner's report to reach one device just past its deadline
             * and another just before, the rosters would differ and the
             * sync guard would say so at the next step. */
            g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

            for (guint i = 0; i < self->roster->len; i++)
              {
                const char *id = g_ptr_array_index (self->roster, i);
                g_autofree char *key = report_key (step, id);
                gpointer value;

                if (i != self->rank
                    && g_hash_table_lookup_extended (self->joiners, id, NULL, &value)
                    && GPOINTER_TO_SIZE (value) == step
                    && (find_peer (self, id) == NULL
                        || !g_hash_table_contains (self->reports, key)))
                  {
                    g_autofree char *text = g_strdup_printf ("“%s” did not join within %u s "
                                                             "(no report of step %"
                                                             G_GUINT64_FORMAT "): left out of "
                                                             "the roster",
                                                             member_name (self, id),
                                                             DC_TRAIN_GROUP_CONNECT_S, step);

                    notice (self, "dropped", member_name (self, id), text);
                    continue;
                  }
                g_ptr_array_add (kept, g_strdup (id));
              }
            set_roster (self, kept);
            self->deadline = 0;
            start_step (self);
          }
      }
      break;

    case STATE_ROLLING_BACK:
      drop_gone (self, self->step_done + 1);
      if (self->digest == self->rollback_digest)
        start_step (self);
      else if (late)
        timeout_error (self, "a device took the last step with another roster than this "
                             "one's, and no device left to explain it");
      break;

    case STATE_REPORTING:
      if (reports_complete (self))
        {
          DcGptModel *model = dc_train_session_get_model (self->session);

          self->deadline = 0;
          emit_agreed (self);
          prune (self, model->step);
          if (model->step >= self->stop)
            finish (self, NULL);
          else if (!verify_accusations (self))
            next_step (self);
        }
      else if (self->state == STATE_REPORTING && late)
        {
          g_autofree char *names = missing_names (self, TRUE);
          g_autofree char *what = g_strdup_printf ("no step report from %s for step %"
                                                   G_GUINT64_FORMAT " within %u s while "
                                                   "connected", names,
                                                   self->own_report->step, DC_TRAIN_GROUP_WAIT_S);
          timeout_error (self, what);
        }
      break;
    }
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

/* ---- the mesh ---- */

static gboolean
in_roster (DcTrainGroup *self,
           const char   *id)
{
  if (self->roster == NULL)
    return FALSE;
  for (guint i = 0; i < self->roster->len; i++)
    if (g_str_equal (g_ptr_array_index (self->roster, i), id))
      return TRUE;
  return FALSE;
}

static void
handle_config (DcTrainGroup *self,
               DcPeer       *peer,
               GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshRunConfig *config;
  gboolean join;

  if (!admitted (self, peer))
    return;
  if (self->state != STATE_WAITING_CONFIG)
    {
      g_autoptr(DcMeshRunConfig) announced = NULL;

      if (handle_checkpoint_config (self, peer, payload))
        return;
      /* The leader announces a device joining after the step it took. */
      if (self->config == NULL || self->roster == NULL || self->roster->len == 0
          || !g_str_equal (g_ptr_array_index (self->roster, 0), dc_peer_get_id (peer))
          || (announced = dc_mesh_run_config_decode (payload, NULL)) == NULL
          || memcmp (announced->run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
          || announced->start_step + 1 < self->step_done
          || announced->start_step > self->step_done + 1
          || in_roster (self, announced->starter_id)
          || g_hash_table_contains (self->joiners, announced->starter_id))
        return;
      g_hash_table_insert (self->joiners, g_strdup (announced->starter_id),
                           GSIZE_TO_POINTER (announced->start_step));
      {
        g_autofree char *text = g_strdup_printf ("“%s” joins the run after step %"
                                                 G_GUINT64_FORMAT,
                                                 member_name (self, announced->starter_id),
                                                 announced->start_step);

        notice (self, "join", member_name (self, announced->starter_id), text);
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
  join = config->start_step > 0 && g_strcmp0 (config->starter_id, own_id (self)) == 0
         && config->start_step < config->steps && !config->resume;
  if ((!join && g_strcmp0 (config->starter_id, dc_peer_get_id (peer)) != 0)
      || (!join && !config->resume && config->start_step != 0)
      || (config->resume && (config->start_step >= config->steps
                             || checkpoint_cap (config->width, config->seq) == 0)))
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
      fail (self, DC_TRAIN_GROUP_ERROR_CONFIG,
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

      /* The model comes with the config: wait for it, then prepare. */
      self->checkpoint_from = g_strdup (dc_peer_get_id (peer));
      self->step_done = config->start_step;
      self->state = STATE_WAITING_CHECKPOINT;
      arm (self, DC_TRAIN_GROUP_WAIT_S);
      text = g_strdup_printf ("following the run “%s” started from its checkpoint at step %"
                              G_GUINT64_FORMAT ": width %u, sequence %u, batch %u, %u steps, "
                              "lr %u/1000, seed %" G_GUINT64_FORMAT, dc_peer_get_name (peer),
                              config->start_step, config->width, config->seq, config->batch,
                              config->steps, config->lr_x1000, config->run_seed);
      notice (self, "config", dc_peer_get_name (peer), text);
      return;
    }
  if (join)
    {
      g_autofree char *text = NULL;

      self->joining = TRUE;
      self->join_from = g_strdup (dc_peer_get_id (peer));
      g_hash_table_insert (self->joiners, g_strdup (own_id (self)),
                           GSIZE_TO_POINTER (config->start_step));
      text = g_strdup_printf ("joining the run under way after step %" G_GUINT64_FORMAT
                              " (“%s” sends the weights): width %u, sequence %u, batch %u, %u "
                              "steps, lr %u/1000, seed %" G_GUINT64_FORMAT, config->start_step,
                              dc_peer_get_name (peer), config->width, config->seq,
                              config->batch, config->steps, config->lr_x1000, config->run_seed);
      notice (self, "config", dc_peer_get_name (peer), text);
    }
  else
  {
    g_autofree char *text = g_strdup_printf ("following the run “%s” started: width %u, "
                                             "sequence %u, batch %u, %u steps, lr %u/1000, seed %"
                                             G_GUINT64_FORMAT, dc_peer_get_name (peer),
                                             config->width, config->seq, config->batch,
                                             config->steps, config->lr_x1000, config->run_seed);

    notice (self, "config", dc_peer_get_name (peer), text);
  }
  start_run (self);
}

static void
handle_report (DcTrainGroup *self,
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
          key = report_key (report->step, dc_peer_get_id (peer));
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
  key = report_key (report->step, dc_peer_get_id (peer));
  g_hash_table_replace (self->reports, g_steal_pointer (&key), g_steal_pointer (&report));
}

/* Takes the last step back: the model as it was before it, to take it again
 * with the roster whose digest is @digest once this device sees the same
 * departures. Its step line and report of that step are superseded. */
static void
rollback (DcTrainGroup *self,
          DcPeer       *peer,
          guint64       digest)
{
  DcGptModel *model = dc_train_session_get_model (self->session);
  g_autofree char *text = NULL;

  memcpy (model->params, self->snapshot, 3 * model->n_params * sizeof (float));
  /* Accusations of the step name ranks of the roster it is taken back
   * from: the step taken again is audited again. */
  g_ptr_array_set_size (self->accusations, 0);
  model->step = self->snap_step;
  model->beta1_pow = self->snap_beta1;
  model->beta2_pow = self->snap_beta2;
  self->step_done = model->step;
  self->rollback_digest = digest;
  self->state = STATE_ROLLING_BACK;
  arm (self, DC_TRAIN_GROUP_WAIT_S);
  text = g_strdup_printf ("“%s” takes step %" G_GUINT64_FORMAT " without a device that left: "
                          "taking it again with the same roster", dc_peer_get_name (peer),
                          model->step + 1);
  notice (self, "retake", dc_peer_get_name (peer), text);
}

/* A roster device asks for the gradient of (step, rank) it lacks: sent as
 * REPAIR chunks, each (step, rank) at most DC_TRAIN_GROUP_REPAIR_TRIES
 * times to one device, so that a peer cannot make this one send megabytes
 * at will. */
static void
handle_repair_request (DcTrainGroup *self,
                       DcPeer       *peer,
                       GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshRepairRequest request = { 0 };
  g_autofree char *prefix = NULL;
  g_autofree char *answered_key = NULL;
  GHashTableIter iter;
  gpointer key, value;
  guint sent, count = 0;

  if (self->session == NULL || !in_roster (self, dc_peer_get_id (peer)))
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
  g_hash_table_iter_init (&iter, self->gradients);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      Gradient *gradient = value;
      DcMeshChunk info = { 0 };
      g_autoptr(GError) send_error = NULL;

      /* Every roster this device kept a gradient of (rank) for: the
       * requester keeps the one of its own roster (the header's digest). */
      if (!g_str_has_prefix (key, prefix) || gradient->rank != request.rank)
        continue;
      memcpy (info.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE);
      info.step = request.step;
      info.rank = request.rank;
      if (!dc_peer_send_object (peer, DC_MESH_MSG_REPAIR, &info, gradient->object, &send_error))
        g_message ("cannot send a repair to %s: %s", dc_peer_get_name (peer),
                   send_error->message);
      count++;
    }
  g_hash_table_replace (self->answered, g_steal_pointer (&answered_key),
                        GUINT_TO_POINTER (sent + 1));
  g_message ("repair of step %" G_GUINT64_FORMAT " rank %u for %s: %u gradient%s sent",
             request.step, request.rank, dc_peer_get_name (peer), count, count == 1 ? "" : "s");
}

/* A GRADIENTS chunk from its author, or a REPAIR chunk of another roster
 * device's gradient (chunk.rank) from the device that repairs it. */
static void
handle_chunk (DcTrainGroup *self,
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
  guint64 expected, step;

  if (self->session == NULL || !in_roster (self, from))
    return;
  if (!dc_mesh_chunk_decode (type, payload, &chunk, &error))
    {
      g_message ("a malformed gradient chunk from %s: %s", dc_peer_get_name (peer), error->message);
      return;
    }
  if (self->fault_drop != 0 && chunk.step == self->fault_drop
      && (!repair || self->fault_drop_repair))
    {
      /* Test only (DC_TEST_FAULT=drop-gradient@STEP, drop-repair@STEP). */
      if (chunk.index == 0)
        g_message ("DC_TEST_FAULT: dropped a %s of step %" G_GUINT64_FORMAT " from %s",
                   repair ? "repair" : "gradient", chunk.step, dc_peer_get_name (peer));
      return;
    }
  model = dc_train_session_get_model (self->session);
  step = self->step_done + 1;  /* not model->step: a worker may be stepping it */
  expected = GRADIENT_HEADER_SIZE + (guint64) model->n_params * sizeof (float);
  if (memcmp (chunk.run_id, self->config->run_id, DC_MESH_RUN_ID_SIZE) != 0
      || chunk.total != expected || chunk.step + 1 < step || chunk.step > step + 1
      || (chunk.step + 1 == step && self->state != STATE_REPORTING))
    return;
  /* A repair is of the step being taken, by a rank of this device's roster. */
  if (repair && (chunk.step != step || chunk.rank >= self->roster->len || chunk.rank == self->rank
                 || (self->state != STATE_EXCHANGING && self->state != STATE_COMPUTING)))
    return;
  id = repair ? g_ptr_array_index (self->roster, chunk.rank) : from;

  assembly_key = repair ? g_strconcat ("repair/", from, NULL) : g_strdup (from);
  assembly = g_hash_table_lookup (self->assemblies, assembly_key);
  if (assembly == NULL)
    {
      assembly = g_new0 (Assembly, 1);
      assembly->assembler = dc_mesh_chunk_assembler_new (type, expected);
      g_hash_table_insert (self->assemblies, g_strdup (assembly_key), assembly);
    }
  if (!dc_mesh_chunk_assembler_push (assembly->assembler, &chunk, &object, &error))
    {
      /* A sender queues whole objects in order: a chunk of another object
       * means the one before was cut short (the sender restarted the step). */
      g_clear_error (&error);
      dc_mesh_chunk_assembler_free (assembly->assembler);
      assembly->assembler = dc_mesh_chunk_assembler_new (type, expected);
      if (!dc_mesh_chunk_assembler_push (assembly->assembler, &chunk, &object, &error))
        {
          g_message ("a bad gradient chunk from %s: %s", dc_peer_get_name (peer), error->message);
          return;
        }
    }
  if (object == NULL)
    return;
  dc_mesh_chunk_assembler_free (assembly->assembler);
  assembly->assembler = dc_mesh_chunk_assembler_new (type, expected);

  {
    gsize size;
    const guint8 *data = g_bytes_get_data (object, &size);
    DcTrainGradientHeader header;
    guint32 n, loss_bits;
    guint64 digest;
    Gradient *gradient;
    guint stashed = 0;
    GHashTableIter iter;
    gpointer key;
    g_autofree char *prefix = g_strdup_printf ("%" G_GUINT64_FORMAT "/", chunk.step);
    g_autofree char *suffix = g_strdup_printf ("/%s", id);

    if (!dc_train_gradient_header_parse (data, size, model->n_params, chunk.rank, &header,
                                         &error))
      {
        g_message ("a gradient from %s with a bad header: dropped (%s)", dc_peer_get_name (peer),
                   error->message);
        return;
      }
    /* As they were on the wire, for the code below. */
    n = GUINT32_TO_LE (header.roster_size);
    digest = GUINT64_TO_LE (header.digest);
    loss_bits = GUINT32_TO_LE (header.loss_bits);
    if (repair)
      {
        g_autofree char *own_key = gradient_key (chunk.step, self->digest, id);

        /* Another roster's gradient (the repairer kept several), or one
         * that came meanwhile: nothing to do. */
        if (GUINT64_FROM_LE (digest) != self->digest || GUINT32_FROM_LE (n) != self->roster->len
            || g_hash_table_contains (self->gradients, own_key))
          return;
        g_message ("repaired the gradient of step %" G_GUINT64_FORMAT " from %s (sent by %s)",
                   chunk.step, member_name (self, id), dc_peer_get_name (peer));
      }
    g_hash_table_iter_init (&iter, self->gradients);
    while (g_hash_table_iter_next (&iter, &key, NULL))
      if (g_str_has_prefix (key, prefix) && g_str_has_suffix (key, suffix))
        stashed++;
    if (stashed >= DC_TRAIN_GROUP_STASH_MAX)
      {
        g_message ("more than %u gradients of step %" G_GUINT64_FORMAT " from %s: dropped",
                   DC_TRAIN_GROUP_STASH_MAX, chunk.step, dc_peer_get_name (peer));
        return;
      }
    if (chunk.step + 1 == step)
      {
        /* A gradient of the step just taken: its sender is taking it again
         * with a smaller roster (it lacked the gradient of a device that
         * left, which reached this one). */
        if (GUINT64_FROM_LE (digest) == self->digest)
          return;  /* the same step again: nothing new */
        rollback (self, peer, GUINT64_FROM_LE (digest));
        /* … and this gradient is one of the step to take again. */
      }
    gradient = g_new0 (Gradient, 1);
    gradient->rank = chunk.rank;
    loss_bits = GUINT32_FROM_LE (loss_bits);
    memcpy (&gradient->loss, &loss_bits, 4);
    gradient->object = g_steal_pointer (&object);
    g_hash_table_replace (self->gradients,
                          gradient_key (chunk.step, GUINT64_FROM_LE (digest), id), gradient);
  }
}

/* Another roster device's audit of the step being taken or just taken: an
 * accusation, recorded. It is not trusted: at the end of the step every
 * device (on every device, since the auditor sent it before its report of
 * the step) recomputes the gradient and removes the accused, or the
 * accuser when the gradient reproduces (verify_accusations ()). */
static void
handle_audit (DcTrainGroup *self,
              DcPeer       *peer,
              GBytes       *payload)
{
  g_autoptr(GError) error = NULL;
  DcMeshAudit audit = { 0 };
  const char *id;

  if (self->session == NULL || !in_roster (self, dc_peer_get_id (peer)))
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
    g_autofree char *key = gradient_key (audit.step, self->digest, dc_peer_get_id (peer));

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
             member_name (self, id), audit.step);
  add_accusation (self, audit.step, audit.rank, dc_peer_get_id (peer));
}

/* The joiner: the state after the step it joins after, from the leader
 * that announced it. */
static void
handle_weights (DcTrainGroup *self,
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
  if (!dc_mesh_chunk_decode (DC_MESH_MSG_WEIGHTS, payload, &chunk, &error))
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
                                                         DC_MESH_WEIGHTS_MAX_TOTAL);
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

static gboolean
is_training_type (guint type)
{
  return type == DC_MESH_MSG_CONFIG || type == DC_MESH_MSG_STEP_REPORT
         || type == DC_MESH_MSG_GRADIENTS || type == DC_MESH_MSG_REPAIR
         || type == DC_MESH_MSG_REPAIR_REQUEST || type == DC_MESH_MSG_WEIGHTS
         || type == DC_MESH_MSG_CHECKPOINT || type == DC_MESH_MSG_AUDIT;
}

/* A training message from a device that has no part in it is dropped and
 * never counted; the log names the device at most once every
 * DC_TRAIN_GROUP_REFUSE_LOG_S with how many were dropped since, so that a
 * flooding peer cannot flood the log. */
static void
refuse (DcTrainGroup *self,
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
  notice (self, "refused", name, text);
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

  if (!admitted (self, peer))
    {
      refuse (self, peer, type,
              theirs == NULL ? "no hello yet"
              : theirs->numeric_rule_id != own_hello (self)->numeric_rule_id
              ? "not admitted to training (numeric rule mismatch)"
              : "not admitted to training (probe hash mismatch)");
      return FALSE;
    }
  /* Weights and checkpoints come from a roster device too once this one
   * has a roster (a joiner and a follower waiting for the starter's
   * checkpoint have none yet). */
  if ((type == DC_MESH_MSG_GRADIENTS || type == DC_MESH_MSG_REPAIR
       || type == DC_MESH_MSG_REPAIR_REQUEST || type == DC_MESH_MSG_AUDIT
       || type == DC_MESH_MSG_WEIGHTS || type == DC_MESH_MSG_CHECKPOINT)
      && self->roster != NULL && !in_roster (self, dc_peer_get_id (peer)))
    {
      refuse (self, peer, type, "not in the run's roster");
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

  if (!self->fault_outsider || self->state != STATE_WAITING_CONFIG || get_mesh (self) == NULL)
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
  peers = dc_mesh_dup_peers (get_mesh (self));
  for (guint i = 0; i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);

      if (dc_peer_get_state (peer) != DC_PEER_STATE_OPEN || dc_peer_get_name (peer) == NULL)
        continue;
      dc_peer_send (peer, DC_MESH_MSG_GRADIENTS, gradient, NULL);
      dc_peer_send (peer, DC_MESH_MSG_AUDIT, audit_payload, NULL);
      dc_peer_send (peer, DC_MESH_MSG_REPAIR_REQUEST, request_payload, NULL);
    }
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
      handle_config (self, peer, payload);
      break;
    case DC_MESH_MSG_STEP_REPORT:
      handle_report (self, peer, payload);
      break;
    case DC_MESH_MSG_GRADIENTS:
    case DC_MESH_MSG_REPAIR:
      handle_chunk (self, peer, type, payload);
      break;
    case DC_MESH_MSG_REPAIR_REQUEST:
      handle_repair_request (self, peer, payload);
      break;
    case DC_MESH_MSG_WEIGHTS:
      handle_weights (self, peer, payload);
      break;
    case DC_MESH_MSG_CHECKPOINT:
      handle_checkpoint (self, peer, payload);
      break;
    case DC_MESH_MSG_AUDIT:
      handle_audit (self, peer, payload);
      break;
    default:
      return;
    }
  advance (self);
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
      g_autoptr(GPtrArray) peers = get_mesh (self) != NULL ? dc_mesh_dup_peers (get_mesh (self))
                                                           : NULL;

      for (guint i = 0; peers != NULL && i < peers->len; i++)
        if (dc_peer_get_name (g_ptr_array_index (peers, i)) != NULL)
          admitted (self, g_ptr_array_index (peers, i));
    }
  fault_outsider_send (self);
  advance (self);
}

static gboolean
tick_cb (gpointer user_data)
{
  fault_outsider_send (user_data);
  advance (user_data);
  return G_SOURCE_CONTINUE;
}

/* ---- the object ---- */

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
  if (fault != NULL && g_str_has_prefix (fault, "drop-gradient@"))
    self->fault_drop = g_ascii_strtoull (fault + strlen ("drop-gradient@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "corrupt-gradient@"))
    self->fault_corrupt = g_ascii_strtoull (fault + strlen ("corrupt-gradient@"), NULL, 10);
  self->audit_all = g_strcmp0 (fault, "audit-all") == 0;
  self->fault_outsider = g_strcmp0 (fault, "outsider") == 0;
  if (fault != NULL && g_str_has_prefix (fault, "false-audit@"))
    self->fault_false_audit = g_ascii_strtoull (fault + strlen ("false-audit@"), NULL, 10);
  self->audit_rank = G_MAXUINT;
  if (fault != NULL && g_str_has_prefix (fault, "hold-join@"))
    self->fault_hold = g_ascii_strtoull (fault + strlen ("hold-join@"), NULL, 10);
  if (fault != NULL && g_str_has_prefix (fault, "drop-repair@"))
    {
      self->fault_drop = g_ascii_strtoull (fault + strlen ("drop-repair@"), NULL, 10);
      self->fault_drop_repair = TRUE;
    }
  g_object_set_data_full (G_OBJECT (self), "dc-hello",
                          dc_mesh_hello_new (hello->name, hello->backend, hello->probe_hash,
                                             hello->numeric_rule_id),
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
  advance (self);
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
  if ((peer = find_peer (self, leader)) == NULL)
    {
      g_set_error (error, DC_TRAIN_GROUP_ERROR, DC_TRAIN_GROUP_ERROR_CONFIG,
                   "the leader “%s” is not connected: load the checkpoint again once the "
                   "group has a leader", member_name (self, leader));
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
                          member_name (self, leader));
  notice (self, "checkpoint", member_name (self, leader), text);
  return TRUE;
}

void
dc_train_group_stop (DcTrainGroup *self)
{
  g_return_if_fail (DC_IS_TRAIN_GROUP (self));
  finish (self, g_error_new_literal (G_IO_ERROR, G_IO_ERROR_CANCELLED, "the run was stopped"));
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
 * dc_train_group_get_audit_time:
 * @audit_us: (out): of the last step's compute time, the part spent
 *   recomputing another rank's gradient for an audit (0 on a step without)
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

static void
dc_train_group_dispose (GObject *object)
{
  DcTrainGroup *self = DC_TRAIN_GROUP (object);

  g_clear_handle_id (&self->tick_id, g_source_remove);
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
  g_clear_pointer (&self->pending_config, dc_mesh_run_config_free);
  g_clear_pointer (&self->pending_bytes, g_bytes_unref);
  g_clear_pointer (&self->proposal, dc_mesh_run_config_free);
  g_free (self->proposal_from);
  g_free (self->audit_grads);
  g_free (self->join_from);
  g_clear_pointer (&self->weights, g_bytes_unref);
  g_hash_table_unref (self->logged);
  g_hash_table_unref (self->names);
  g_free (self->own_grads);
  g_free (self->snapshot);
  g_free (self->sum_grads);
  g_clear_pointer (&self->own_object, g_bytes_unref);
  g_clear_pointer (&self->own_bodies, g_ptr_array_unref);
  g_clear_error (&self->own_pack_error);
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
