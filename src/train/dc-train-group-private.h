/* dc-train-group-private.h: the coordinator's state, shared by its files
 * (dc-train-group.c and dc-train-group-*.c; see dc-train-group.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <string.h>
#include <unistd.h>

#include "dc-train-group.h"
#include "dc-train-wire.h"
#include "engine/dc-parallel.h"
#include "mesh/dc-mesh-train-protocol.h"
#include "model/dc-checkpoint.h"
#include "model/dc-rng.h"

G_BEGIN_DECLS

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
/* A main-loop stall longer than this is logged (debug): a peer hears
 * nothing while it lasts and gives up after DC_PEER_TIMEOUT_MS (4 s), so
 * 500 ms shows a stall well before it costs peers. */
#define STALL_LOG_MS 500
/* DC_TEST_SLOW_HASH=1: every start or join hash of the state waits
 * this long first, as hashing a GPT-2-small state (about 1.7 GB read)
 * does on a loaded machine; longer than DC_PEER_TIMEOUT_MS (4 s), so that
 * a hash taken on the main thread costs the device its peers. */
#define SLOW_HASH_US (6 * G_USEC_PER_SEC)

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
  STATE_AUDITING,        /* this device's audit of the last step is not done yet */
  STATE_DONE,
} State;

/* A shard object kept by the coordinator (dc-train-wire.h, "DRS1"): a
 * summed shard in gradients (rank: its reducer's), a contribution in
 * contribs (rank: its author's). loss: the header's. */
typedef struct
{
  guint   rank;
  float   loss;
  GBytes *object;
} Gradient;

typedef struct
{
  DcMeshChunkAssembler *assembler;
  /* The object in progress (GRADIENTS): its step, size and next chunk, so
   * that a sender's summed shard streamed during its backward pass and its
   * contributions, interleaved, each find their own assembly. */
  gboolean              active;
  guint64               step;
  guint64               total;
  guint32               next;
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
typedef struct _DcTrainStream DcTrainStream;
typedef struct _AuditJob AuditJob;
typedef struct _ParseJob ParseJob;

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
  guint64            fault_no_repair; /* DC_TEST_FAULT=no-repair@STEP: asks none for STEP */
  guint64            fault_chunk;  /* DC_TEST_FAULT=corrupt-chunk@STEP, 0: none */
  guint64            fault_drop;   /* DC_TEST_FAULT=drop-gradient@STEP or drop-repair@STEP */
  gboolean           fault_drop_repair; /* drop-repair: the repairs of that step too */
  guint64            fault_hold;   /* DC_TEST_FAULT=hold-join@STEP, 0: none */
  guint64            fault_corrupt; /* DC_TEST_FAULT=corrupt-gradient@STEP: from STEP on */
  gboolean           fault_corrupt_unaudited; /* corrupt-unaudited@STEP: only on steps the
                                               * run seed's draw does not audit */
  gboolean           fault_audit_scribble; /* DC_TEST_FAULT=audit-scribble */
  gboolean           fault_audit_overlap;  /* DC_TEST_FAULT=audit-overlap */
  guint              audit_period; /* DC_TRAIN_GROUP_AUDIT_PERIOD: this device audits one step
                                    * in this many (0: none); default
                                    * DC_TRAIN_GROUP_AUDIT_PERIOD */
  gboolean           audit_period_noted; /* the notice saying so went out */
  guint64            fault_corrupt_sum; /* DC_TEST_FAULT=corrupt-sum@STEP: from STEP on */
  gboolean           fault_wire_f32;    /* DC_TEST_FAULT=wire-f32: shards sent as f32 whatever
                                         * the run's CONFIG says */
  guint64            fault_drop_contrib; /* DC_TEST_FAULT=drop-contribution@STEP */
  gboolean           audit_all;    /* DC_TEST_FAULT=audit-all: audit every step */
  gboolean           fault_outsider; /* DC_TEST_FAULT=outsider: training messages without a run */
  GHashTable        *refused;      /* peer id → Refusal: messages dropped, for the log */
  guint              audit_rank;   /* the rank audited at the step whose exchange ended
                                    * last (drawn then); G_MAXUINT: none */
  /* Audits off the step's critical path (dc-train-group-audit.c): the
   * audit of step S is drawn at the end of S + 1's exchange and recomputed
   * on a trainer of its own while S + 2 is taken; its verdict goes out
   * before this device's report of S + 2. */
  AuditJob          *audit_job;    /* recomputing now; NULL: none */
  AuditJob          *audit_next;   /* drawn while audit_job still ran */
  /* The snapshot buffer an audit's launch copies on a worker (worker_lock;
   * NULL: none): whoever rewrites or frees it waits for the copy first
   * (_dc_train_group_audit_copy_wait ()). */
  const float       *audit_copy_from;
  gboolean           audit_then_next; /* STATE_AUDITING: then the next step, not the report */
  gboolean           fault_audit_after_report; /* DC_TEST_FAULT=audit-after-report */
  GMutex             audit_lock;   /* published_step, for that fault */
  GCond              audit_cond;
  guint64            published_step;
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
  /* The step's phases beyond the report's four (dc_train_group_get_step_phases ()). */
  gint64             t_compute_began;  /* the gradient's compute began (maybe before the step) */
  gint64             t_compute_paused; /* of that, waiting for an audit (ComputeData.paused_us) */
  gsize              t_tail_values;    /* ComputeData.tail_values */
  /* The same of a gradient computed ahead and ready, until its step adopts
   * it: the step still being reported keeps its own (a gradient can be
   * done before the report's hashes are). */
  gint64             ahead_t_began, ahead_t_done, ahead_t_paused;
  gsize              ahead_t_tail_values;
  guint              t_stream_chunks, t_stream_early, t_stream_pieces;  /* the phases' */
  gint64             t_reduce_began, t_reduced;  /* maybe_reduce (): this device's shard */
  gint64             t_published;  /* this device's report of the step before went out */
  DcTrainGroupPhases phases;       /* of the step last applied */
  /* The next step's gradient, computed while the step's reports (the sync
   * guard) and this device's audit verdict are awaited (start_overlap ()):
   * it only reads the model, nothing is sent before the step starts, and
   * start_step () adopts it only for the same step, roster and model;
   * otherwise it is dropped (a stale compute_gen) and computed again. */
  gboolean           overlap;      /* DC_TRAIN_GROUP_OVERLAP=0 turns it off */
  guint              compute_gen;  /* of the latest compute task; older ones are stale */
  gboolean           compute_running; /* a compute task is out (main thread) */
  gboolean           ahead_active; /* compute_gen's task is ahead, not adopted yet */
  gboolean           ahead_ready;  /* … and its gradient is back, packed */
  gboolean           restart_pending; /* start_step () waits for a stale task to return */
  guint64            ahead_step, ahead_digest, ahead_version;
  guint              ahead_rank, ahead_n;
  guint64            model_version; /* bumped whenever the model changes (apply, rollback,
                                     * switch) */
  gboolean           apply_counted; /* stepped_cb () bumped it for the step being applied */
  guint64            ahead_used;   /* steps whose gradient was computed ahead */
  gboolean           step_ahead;   /* this step's gradient was */
  GMutex             worker_lock;  /* worker_busy, for a rollback during a compute ahead */
  GCond              worker_cond;
  gboolean           worker_busy;  /* the compute worker may still read the model */
  /* The step's own work off the main thread (pack_own_gradient (), apply_worker ()). */
  GPtrArray         *own_objects;  /* GBytes*: this step's contribution to each shard,
                                    * packed by the worker */
  GPtrArray         *own_frames;   /* GPtrArray* per shard: their chunks, split (and
                                    * hashed) and framed once, shared by the peers */
  gboolean           own_reduced;  /* this device's summed shard begun (maybe_reduce ())
                                    * this step: reduced_cb () keeps and sends it */
  guint              reduce_gen;   /* of the reduce out; older results are dropped */
  GCancellable      *reduce_cancel; /* cancels that reduce's worker */
  /* The streamed reduce (dc-train-group-stream.c): this step's, if any. */
  DcTrainStream     *stream;
  guint              stream_id;
  guint64            stream_off_step; /* a step whose stream broke: summed whole */
  /* Sending during the backward pass: the worker packs a contribution as
   * soon as its shard's gradients are final (dc_gpt_run_set_layer_done_func
   * ()) and pushes its index + 1 here; the main thread sends it. */
  GAsyncQueue       *early;
  gboolean           own_packed[DC_MESH_ROSTER_MAX];     /* worker only */
  /* Shards of own_grads rounded to the run's wire (worker only): each once,
   * as it is packed or after the pass, whichever comes first; an int8
   * block costs more than a bf16 value. */
  gboolean           own_rounded[DC_MESH_ROSTER_MAX];
  GError            *own_round_error;                    /* the first that was not finite */
  gboolean           own_shard_sent[DC_MESH_ROSTER_MAX]; /* main thread only */
  GError            *own_pack_error; /* why they could not be made */
  gboolean           own_sent;     /* send_own_gradient () ran this step */
  float             *sum_grads;    /* the combined gradient, kept from step to step */
  gsize              sum_len;
  gint64             audit_us;     /* recomputing audited gradients, since the last step line */
  gint64             audit_paused_us; /* … of which it waited for the step's compute */
  guint              audit_beside; /* … its kernels begun while the step's gradient computed */
  /* Audits in the step's waits (docs/ARCHITECTURE.md, "Audits in the
   * step's waits"): the audit's recomputation yields the cores to this
   * device's own gradient between two kernels (dc_parallel_set_gate ()),
   * and runs while the step waits for the exchange; when the step waits
   * for the audit's verdict (STATE_AUDITING) the audit goes first and a
   * gradient computed ahead yields instead. Workers and main thread, under
   * lane_lock. */
  GMutex             lane_lock;
  GCond              lane_cond;
  gboolean           lane_gate;     /* DC_TRAIN_GROUP_AUDIT_GATE=1 turns it on (off by default) */
  gboolean           lane_computing; /* the compute worker computes this device's gradient */
  gboolean           lane_auditing; /* the audit worker recomputes */
  gboolean           lane_urgent;   /* the step waits for the audit's verdict */
  gint64             lane_ahead_paused_us; /* the gradient computed ahead waited for it */
  /* Audits at the lowest CPU priority (docs/ARCHITECTURE.md, "Audits at
   * idle priority"): the recomputation's kernels run on the engine's idle
   * pool (dc_parallel_set_idle ()) until the step waits for the verdict
   * (lane_urgent, read atomically there), so the kernel gives them only
   * the cycles the step leaves; DC_TRAIN_GROUP_AUDIT_IDLE=1 only, since
   * 2026-12-02 (slower on the H200 host): by default they run on the
   * step's pool beside the step. */
  gboolean           audit_idle;
  gint               audit_priority; /* DcParallelPriority of the last audit that ended since
                                      * the last step line, -1 without one (main thread) */
  guint64            sent_bytes;   /* training message bodies sent since the run began */

  /* The model before the last step (weights, both moments, step, β powers):
   * taken back when a roster device turns out to have taken that step
   * without a device that left (see rollback ()). */
  float             *snapshot;
  guint64            snap_step;
  gboolean           snap_taken;
  /* The snapshot before that (swapped at each new step): the weights an
   * audit of the step before the last one recomputes on (both moments too,
   * unused). snap_prev_valid: it holds the model at snap_prev_step. */
  float             *snapshot_prev;
  guint64            snap_prev_step;
  gboolean           snap_prev_valid;
  /* The snapshot before that: the audit of step S is drawn at the end of
   * S + 1's exchange and its accusations are checked at the end of S + 2,
   * on the weights before S (both moments too, unused). */
  float             *snapshot_prev2;
  guint64            snap_prev2_step;
  gboolean           snap_prev2_valid;
  float              snap_beta1, snap_beta2;
  guint64            rollback_digest;
  gint64             deadline;     /* monotonic µs; 0: none */

  GHashTable        *gradients;    /* "step/digest/id" → Gradient*: the summed shard of
                                    * reducer id (own included), kept
                                    * DC_TRAIN_GROUP_REPAIR_STEPS steps for repairs */
  GHashTable        *contribs;     /* "step/digest/id/shard" → Gradient*: contributions
                                    * of author id (own: every shard), as long */
  guint              contrib_tries[DC_MESH_ROSTER_MAX]; /* contribution requests per rank */
  gint64             contrib_next[DC_MESH_ROSTER_MAX];
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
  ParseJob          *switch_parsed;   /* … read and hashed on a worker (parse_begin ()) */
  gboolean           parsing;         /* a checkpoint read is out */
  guint              parse_gen;       /* of the read out; older results are dropped */
  gboolean           switch_next_pending; /* _dc_train_group_next_step () waits for that read */
  GHashTable        *switch_reports;  /* "step/id" → reports of that run, before the switch */
  DcMeshRunConfig   *pending_config;  /* leader: a loaded checkpoint, sent at the next step */
  GBytes            *pending_bytes;
  DcMeshRunConfig   *proposal;        /* leader: a roster device's forwarded checkpoint */
  char              *proposal_from;

  /* The state's hashes at a run's start, taken by prepare_worker () (never
   * on the main thread: see _dc_train_group_hash_state ()); NULL once used
   * or when the model has moved on from start_hash_step. */
  char              *start_hash;
  char              *start_optimizer;
  guint64            start_hash_step;
  gboolean           fault_slow_hash; /* DC_TEST_SLOW_HASH=1 */
  gboolean           loading_weights; /* joiner: load_weights_worker () runs */

  guint              tick_id;
  gint64             last_tick;    /* monotonic µs: the stall log (STALL_LOG_MS) */
  gint64             last_tick_cpu; /* µs of the main thread's own CPU time then */
  guint              last_tick_state;
  guint              max_stall_ms; /* DC_TEST_MAX_STALL_MS: 0, or the child aborts past it */
  gulong             event_handler;
  gulong             message_handler;
};


/* What start_step () hands the compute worker: the roster as it stands
 * (the main thread's fields are not read from the worker). */
typedef struct
{
  guint    rank;
  guint    n_ranks;
  guint64  digest;
  guint8   run_id[DC_MESH_RUN_ID_SIZE];
  guint    gen;        /* DcTrainGroup.compute_gen when launched */
  gboolean ahead;      /* for the next step, before it starts: no snapshot, nothing sent */
  gint64   began, done;  /* monotonic µs (the worker's) */
  gint64   paused_us;  /* of done − began: ahead, waiting for an audit's verdict */
  gsize    tail_values; /* of the contributions sent, those packed past block 1 */
} ComputeData;

/* dc-train-group.c */
gboolean _dc_train_group_send (DcTrainGroup  *self,
                               DcPeer        *peer,
                               guint          type,
                               GBytes        *payload,
                               GError       **error);
gboolean _dc_train_group_send_chunks (DcTrainGroup  *self,
                                      DcPeer        *peer,
                                      guint          type,
                                      GPtrArray     *bodies,
                                      GError       **error);
gboolean _dc_train_group_send_frames (DcTrainGroup  *self,
                                      DcPeer        *peer,
                                      guint          type,
                                      GPtrArray     *frames,
                                      GError       **error);
gboolean _dc_train_group_send_object (DcTrainGroup       *self,
                                      DcPeer             *peer,
                                      guint               type,
                                      const DcMeshChunk  *info,
                                      GBytes             *object,
                                      GError            **error);
DcMesh * _dc_train_group_get_mesh (DcTrainGroup *self);
const char * _dc_train_group_own_id (DcTrainGroup *self);
DcMeshHello * _dc_train_group_own_hello (DcTrainGroup *self);
DcPeer * _dc_train_group_find_peer (DcTrainGroup *self,
                                    const char   *id);
const char * _dc_train_group_member_name (DcTrainGroup *self,
                                          const char   *id);
void _dc_train_group_notice (DcTrainGroup *self,
                             const char   *kind,
                             const char   *peer,
                             const char   *text);
void _dc_train_group_finish (DcTrainGroup *self,
                             GError       *error);
void _dc_train_group_fail (DcTrainGroup      *self,
                           DcTrainGroupError  code,
                           const char        *format,
                           ...) G_GNUC_PRINTF (3, 4);
gboolean _dc_train_group_admitted (DcTrainGroup *self,
                                   DcPeer       *peer);
guint64 _dc_train_group_roster_digest_strv (char **ids);
void _dc_train_group_set_roster (DcTrainGroup *self,
                                 GPtrArray    *roster);
void _dc_train_group_hash_to_bytes (const char *hex,
                                    guint8      out[DC_MESH_HASH_SIZE]);
char * _dc_train_group_hash_to_hex (const guint8 hash[DC_MESH_HASH_SIZE]);
void _dc_train_group_send_to_roster (DcTrainGroup *self,
                                     guint         type,
                                     GBytes       *payload);
DcMeshStepReport * _dc_train_group_make_report_hashed (DcTrainGroup *self,
                                                       const char   *hash,
                                                       const char   *optimizer);
DcMeshStepReport * _dc_train_group_make_report (DcTrainGroup *self);
void _dc_train_group_hash_state (DcTrainGroup      *self,
                                 const DcGptModel  *model,
                                 char             **hash,
                                 char             **optimizer);
DcMeshStepReport * _dc_train_group_make_start_report (DcTrainGroup *self);
char * _dc_train_group_report_key (guint64     step,
                                   const char *id);
char * _dc_train_group_gradient_key (guint64     step,
                                     guint64     digest,
                                     const char *id);
char * _dc_train_group_contrib_key (guint64     step,
                                    guint64     digest,
                                    const char *id,
                                    guint       shard);
/* The run's gradient wire (its CONFIG): every device sends and uses the same. */
static inline DcTrainWire
_dc_train_group_wire (DcTrainGroup *self)
{
  if (self->config == NULL)
    return DC_TRAIN_WIRE_F32;
  return self->config->gradient_int8 ? DC_TRAIN_WIRE_INT8
         : self->config->gradient_bf16 ? DC_TRAIN_WIRE_BF16 : DC_TRAIN_WIRE_F32;
}

/* The element type this device encodes its shards in: the run's, but for
 * the wire-f32 test fault. */
static inline DcTrainWire
_dc_train_group_send_wire (DcTrainGroup *self)
{
  return self->fault_wire_f32 ? DC_TRAIN_WIRE_F32 : _dc_train_group_wire (self);
}

gboolean _dc_train_group_chunks_zstd_for (DcTrainWire wire);

/* Whether the run's chunk data goes zstd-compressed where that pays (its
 * CONFIG's flag: docs/PROTOCOL.md, "Chunks"). */
static inline gboolean
_dc_train_group_compress (DcTrainGroup *self)
{
  return self->config != NULL && self->config->chunks_zstd;
}

void _dc_train_group_layout (const DcGptModel   *model,
                             DcTrainShardLayout *layout);
const float * _dc_train_group_shard_values (GBytes *object,
                                            gsize  *n_values);
void _dc_train_group_arm (DcTrainGroup *self,
                          guint         seconds);
void _dc_train_group_publish_step (DcTrainGroup *self);
void _dc_train_group_emit_agreed (DcTrainGroup *self);
void _dc_train_group_timeout_error (DcTrainGroup *self,
                                    const char   *what);
void _dc_train_group_refuse (DcTrainGroup *self,
                             DcPeer       *peer,
                             guint         type,
                             const char   *why);
gboolean _dc_train_group_in_roster (DcTrainGroup *self,
                                    const char   *id);

/* dc-train-group-step.c */
void     _dc_train_group_drop_reduce (DcTrainGroup *self);
void _dc_train_group_start_step (DcTrainGroup *self);
void _dc_train_group_report_step (DcTrainGroup *self);
void _dc_train_group_start_run (DcTrainGroup *self);
void _dc_train_group_next_step (DcTrainGroup *self);
void _dc_train_group_advance (DcTrainGroup *self);
void _dc_train_group_handle_report (DcTrainGroup *self,
                                    DcPeer       *peer,
                                    GBytes       *payload);
void _dc_train_group_handle_chunk (DcTrainGroup *self,
                                   DcPeer       *peer,
                                   guint         type,
                                   GBytes       *payload);

/* dc-train-group-stream.c */
gboolean _dc_train_group_stream_wanted (DcTrainGroup      *self,
                                        guint64            step);
void     _dc_train_group_stream_chunk  (DcTrainGroup      *self,
                                        guint              rank,
                                        const DcMeshChunk *chunk);
void     _dc_train_group_stream_object (DcTrainGroup      *self,
                                        guint              rank,
                                        GBytes            *object);
gboolean _dc_train_group_stream_start  (DcTrainGroup      *self);
void     _dc_train_group_stream_start_early (DcTrainGroup *self,
                                             GBytes       *own);
gboolean _dc_train_group_stream_early  (const DcTrainShardLayout *layout,
                                        guint              n,
                                        guint              rank);
gboolean _dc_train_group_summed_implies (DcTrainGroup     *self,
                                         guint             author);
void     _dc_train_group_stream_drop   (DcTrainGroup      *self);
void     _dc_train_group_stream_release (DcTrainGroup     *self,
                                         guint             i);

/* dc-train-group-roster.c */
void _dc_train_group_announce_joiners (DcTrainGroup *self);
gboolean _dc_train_group_drop_gone (DcTrainGroup *self,
                                    guint64       step);
gboolean _dc_train_group_adopt_start (DcTrainGroup *self);
gboolean _dc_train_group_enter_admitting (DcTrainGroup *self,
                                          guint64       step);
void _dc_train_group_load_weights (DcTrainGroup *self);
void _dc_train_group_handle_config (DcTrainGroup *self,
                                    DcPeer       *peer,
                                    GBytes       *payload);
void _dc_train_group_handle_weights (DcTrainGroup *self,
                                     DcPeer       *peer,
                                     GBytes       *payload);

/* dc-train-group-repair.c */
gboolean _dc_train_group_reported (DcTrainGroup *self,
                                   guint64       step,
                                   const char   *id);
void _dc_train_group_maybe_repair (DcTrainGroup *self);
void _dc_train_group_maybe_repair_contributions (DcTrainGroup *self);
void _dc_train_group_rollback (DcTrainGroup *self,
                               DcPeer       *peer,
                               guint64       digest);
void _dc_train_group_handle_repair_request (DcTrainGroup *self,
                                            DcPeer       *peer,
                                            GBytes       *payload);

/* dc-train-group-audit.c */
void _dc_train_group_lane_compute (DcTrainGroup *self,
                                   gboolean      computing);
void _dc_train_group_lane_urgent (DcTrainGroup *self,
                                  gboolean      urgent);
void _dc_train_group_ahead_gate (gpointer data);
void _dc_train_group_launch_audit (DcTrainGroup *self);
gboolean _dc_train_group_wait_audit (DcTrainGroup *self,
                                     gboolean      then_next);
void _dc_train_group_audit_published (DcTrainGroup *self,
                                      guint64       step);
void _dc_train_group_audit_job_free (AuditJob *job);
void _dc_train_group_audit_copy_wait (DcTrainGroup *self,
                                      const float  *buffer);
void _dc_train_group_shards_hash (const float              *grads,
                                  const DcTrainShardLayout *layout,
                                  guint        n_ranks,
                                  guint8       out[DC_MESH_HASH_SIZE]);
gboolean _dc_train_group_received_hash (DcTrainGroup *self,
                                        guint64       step,
                                        guint         rank,
                                        guint8        out[DC_MESH_HASH_SIZE]);
void _dc_train_group_remove_evicted (DcTrainGroup *self,
                                     guint64       step);
gboolean _dc_train_group_verify_accusations (DcTrainGroup *self);
gboolean _dc_train_group_draw_hash (DcTrainGroup *self,
                                    guint64       step,
                                    guint8        out[DC_MESH_HASH_SIZE]);
void _dc_train_group_audit_tick (DcTrainGroup *self);
gboolean _dc_train_group_audit_take_chunk (DcTrainGroup      *self,
                                           DcPeer            *peer,
                                           const DcMeshChunk *chunk);
void _dc_train_group_handle_contrib_request (DcTrainGroup *self,
                                             DcPeer       *peer,
                                             GBytes       *payload);
void _dc_train_group_handle_audit (DcTrainGroup *self,
                                   DcPeer       *peer,
                                   GBytes       *payload);

/* dc-train-group-checkpoint.c */
void     _dc_train_group_parse_job_free (ParseJob *job);
gboolean _dc_train_group_switch_waits (DcTrainGroup *self);
guint64 _dc_train_group_checkpoint_cap (guint32 width,
                                        guint32 seq);
void _dc_train_group_send_switch (DcTrainGroup *self);
void _dc_train_group_switch_run (DcTrainGroup *self);
void _dc_train_group_send_resume_config (DcTrainGroup *self);
gboolean _dc_train_group_handle_checkpoint_config (DcTrainGroup *self,
                                                   DcPeer       *peer,
                                                   GBytes       *payload);
void _dc_train_group_handle_checkpoint (DcTrainGroup *self,
                                        DcPeer       *peer,
                                        GBytes       *payload);

/* dc-train-group-memory.c: Advanced sizes in a group. */
void     _dc_train_group_config_set_size       (DcTrainGroup          *self,
                                                DcMeshRunConfig       *config);
void     _dc_train_group_request_set_size      (DcTrainGroup          *self,
                                                DcTrainingRequest     *request);
gboolean _dc_train_group_check_roster_memory   (DcTrainGroup          *self,
                                                const DcMeshRunConfig *config,
                                                GError               **error);
gboolean _dc_train_group_check_own_memory_for  (DcTrainGroup          *self,
                                                const DcMeshRunConfig *config,
                                                GError               **error);
gboolean _dc_train_group_joiner_can_hold       (DcTrainGroup          *self,
                                                DcPeer                *peer);
guint64  _dc_train_group_gradient_cap          (DcTrainGroup          *self);
guint64  _dc_train_group_weights_cap           (DcTrainGroup          *self);

/* dc-train-group.c: DC_TRAIN_GROUP_TRACE=DIR (for `bench group`'s analysis
 * only): one line per exchange event, monotonic µs first (one clock for
 * every process of a host), to DIR/trace-PID.txt. Off: one branch. */
gboolean _dc_train_group_tracing (void);
void     _dc_train_group_trace   (const char *format,
                                  ...) G_GNUC_PRINTF (1, 2);
#define DC_TRAIN_GROUP_TRACE(...) \
  G_STMT_START { if (_dc_train_group_tracing ()) _dc_train_group_trace (__VA_ARGS__); } G_STMT_END

G_END_DECLS
