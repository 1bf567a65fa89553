/* dc-train-group.h: this device training together with its group.
 *
 * DcTrainGroup is the group coordinator (docs/ARCHITECTURE.md, "The group
 * coordinator"): it runs on the main context with the group's DcMesh and
 * plugs into the training layer's group-step seam. The room's host starts
 * the run: it sends CONFIG once min_peers devices (itself included) are
 * connected and admitted, then the step-0 STEP_REPORT that names the first
 * roster and the seeded weights' hash. Every step, each roster device
 * computes the gradient of its own batch (rank = position in the sorted
 * roster) on a worker thread, sends it to the others (chunked GRADIENTS),
 * sums all of them in rank order and applies Adam, then exchanges
 * STEP_REPORTs (the sync guard) before the next step. A device that leaves
 * is dropped from the next roster; a step a peer took without it while this
 * device took it with it is taken back and again. Workers report back
 * through GTask, whose completion is a GSource on the main context.
 *
 * Signals: ::notice (kind, peer, text) for "config", "not-admitted",
 * "dropped", "retake", "repair", "join" (a device joins after a step),
 * "joined-run" (this one did), "audit"; ::step (step, loss, tokens/s, hash,
 * names in rank order); ::agreed (step, hash, each roster device's name and
 * step time) once every device's step report matched this one's; ::finished
 * (error or NULL).
 *
 * Who starts: by default the room's host (the CLI's train --room). A front
 * end where a person presses Start sets DC_TRAIN_GROUP_STARTER_SELF on the
 * coordinator it makes for that press, and DC_TRAIN_GROUP_STARTER_FOLLOW on
 * the one that waits for someone else's config meanwhile.
 *
 * Repair: every device keeps the roster gradients of the last
 * DC_TRAIN_GROUP_REPAIR_STEPS steps; a device missing one that the leader
 * (the first roster device, or the next that finished the step) has already
 * used asks it (REPAIR_REQUEST) and gets it back (REPAIR chunks); after
 * DC_TRAIN_GROUP_REPAIR_TRIES unanswered requests the sync guard stops it.
 * Leader failover: the leader is only the first device of the current
 * roster; when it leaves, the next in canonical order is, with the same
 * kept gradients.
 *
 * Mid-run join: after step S the leader announces every admitted device
 * outside the roster (CONFIG with start_step S, starter_id the joiner's id)
 * to the roster and sends the joiner the state after S (WEIGHTS) and its
 * report of S; everyone adds the joiner to the roster of S+1 and waits for
 * its report of S (same hashes) before stepping on.
 *
 * Audits: the audit of step S is drawn from S + 1's contribution hashes
 * (dc_train_group_audit_draw ()); a device that recomputes another's
 * gradient of S and gets another hash sends AUDIT to the roster before its
 * report of S + 2; every device recomputes that gradient itself once the
 * reports of S + 2 agree and removes the audited one after that step, or
 * the auditor when the gradient reproduces (a false accusation).
 *
 * Checkpoint to the group: the starter may continue a checkpoint
 * (dc_train_group_set_resume: CONFIG with the resume flag, then the file as
 * CHECKPOINT chunks); mid-run, a checkpoint loaded on any device
 * (dc_train_group_load_checkpoint) reaches the leader, which sends it to
 * the roster before its next report; after that step every device
 * continues from it (a new run id, the same roster).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "dc-train-plan.h"
#include "mesh/dc-group.h"

G_BEGIN_DECLS

/* How long a step waits for a gradient or step report of a roster device
 * that is still connected: the slowest device at the largest size (width
 * 128, sequence 128, batch 32) takes tens of seconds a step on a slow CPU,
 * and its 9.5 MB gradient about a second a peer; past this it is stuck, and
 * the run stops rather than guessing. */
#define DC_TRAIN_GROUP_WAIT_S      120
/* How long the first step waits to be connected to every device of the
 * first roster: twice a peer's own connect timeout (DC_PEER_CONNECT_MS). */
#define DC_TRAIN_GROUP_CONNECT_S   60
/* Summed shards of one step from one device kept for different rosters (a
 * device that saw someone leave earlier than this one did): a roster only
 * shrinks within a step, and more than this means a confused or lying
 * peer. Contributions: twice this (an auditor also gets one of the shard
 * it audits). */
#define DC_TRAIN_GROUP_STASH_MAX   4
/* Steps whose roster gradients (the summed shards) and contributions every
 * device keeps to repair another's (the seeds' "the leader retains the
 * last 8 steps"; every device keeps them so that the next leader has them
 * when the leader leaves). A device asks only for the step it is taking,
 * so 8 is ample slack; at the largest size it costs 8 × 3 × 9.5 MB (the
 * summed gradient, this device's gradient, the contributions it got). */
#define DC_TRAIN_GROUP_REPAIR_STEPS    8
/* How long a repair request waits for its answer before it is sent again:
 * a 9.5 MB gradient takes about a second on a LAN, a few on a loaded host. */
#define DC_TRAIN_GROUP_REPAIR_RETRY_S  5
/* Requests for one step before the sync guard stops the run: one lost
 * answer is bad luck, three in a row mean the leader (or a contribution's
 * author) cannot deliver. */
#define DC_TRAIN_GROUP_REPAIR_TRIES    3
/* Audits: on a step whose draw (the first 8 bytes of the hash of the
 * step's contribution hashes, dc_train_group_audit_draw (); from the run
 * seed before 2026-12-02) is a multiple of this, every device recomputes
 * one other rank's gradient (a rotation chosen by the same draw) and
 * compares hashes. The group then spends 1/32 more compute, all devices on
 * the same steps; each gradient is checked with a chance of 1/32 a step,
 * so a device that corrupts every gradient escapes k steps with
 * (31/32)^k: caught within 124 steps with 98 %, within 256 with 99.97 %
 * (half a minute and a minute at width 128 on the H200 host). Why 32, not
 * 8 (until 2026-12-02): an audit is a whole second gradient, which on a
 * host the step already fills costs the group 200–570 ms of step time
 * (docs/BENCHMARKS.md), 25–70 ms a step at one in 8: more than issue 11's
 * 0.8 × N leaves for it; at 32 it is 6–18 ms. */
#define DC_TRAIN_GROUP_AUDIT_PERIOD    32
/* The period of the run seed's draw (dc_train_group_audit_rank ()), the
 * one audits followed until 2026-12-02: kept as it was then, since only
 * DC_TEST_FAULT=corrupt-unaudited still uses it, to cheat on the steps it
 * did not audit. */
#define DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW 8
/* The most steps DC_TRAIN_GROUP_AUDIT_PERIOD=N may put between a device's
 * audits (0 turns them off): at one in 64 a device that corrupts every
 * gradient is still caught within about 250 steps with 98 %, minutes of a
 * run at width 128; a larger N is as good as off and should say so. */
#define DC_TRAIN_GROUP_AUDIT_PERIOD_MAX 64
/* How long an auditor waits for the contributions to the audited shard
 * that it asked their authors for (asked again every
 * DC_TRAIN_GROUP_REPAIR_RETRY_S, DC_TRAIN_GROUP_REPAIR_TRIES times): the
 * three requests' time, so a lost answer is asked for twice; after that
 * the re-sum is skipped (its verdict waits no longer: the report of the
 * next step waits for it). */
#define DC_TRAIN_GROUP_AUDIT_FETCH_S   15
/* Training messages from a device outside the run (not admitted, or not in
 * the roster) are dropped; the log names it at most once every this many
 * seconds, with the count since: a device that floods cannot flood the log,
 * and a person reading it still sees within seconds who is refused. */
#define DC_TRAIN_GROUP_REFUSE_LOG_S    10

#define DC_TRAIN_GROUP_ERROR (dc_train_group_error_quark ())
GQuark dc_train_group_error_quark (void);

typedef enum
{
  DC_TRAIN_GROUP_ERROR_CONFIG,     /* the run's config cannot be followed */
  DC_TRAIN_GROUP_ERROR_SYNC,       /* the sync guard stopped the run */
  DC_TRAIN_GROUP_ERROR_TIMEOUT,    /* a connected device stayed silent */
  DC_TRAIN_GROUP_ERROR_ALONE,      /* the mesh is gone */
  DC_TRAIN_GROUP_ERROR_MEMORY,     /* a device cannot hold the run's Advanced size */
} DcTrainGroupError;

/**
 * DcTrainGroupStarter:
 * @DC_TRAIN_GROUP_STARTER_HOST: the room's host starts once min_peers
 *   devices are there; the others follow (the default)
 * @DC_TRAIN_GROUP_STARTER_SELF: this device starts, at once, with the
 *   admitted devices connected then (and waits for min_peers of them)
 * @DC_TRAIN_GROUP_STARTER_FOLLOW: this device only follows a config, even
 *   when it is the room's host
 */
typedef enum
{
  DC_TRAIN_GROUP_STARTER_HOST,
  DC_TRAIN_GROUP_STARTER_SELF,
  DC_TRAIN_GROUP_STARTER_FOLLOW,
} DcTrainGroupStarter;

#define DC_TYPE_TRAIN_GROUP (dc_train_group_get_type ())
G_DECLARE_FINAL_TYPE (DcTrainGroup, dc_train_group, DC, TRAIN_GROUP, GObject)

guint64       dc_train_group_memory_need      (const DcGptConfig *config,
                                               guint              batch);
guint64       dc_train_group_announced_memory (void);

DcTrainGroup *dc_train_group_new      (DcContext                *context,
                                       DcGroup                  *group,
                                       const DcMeshHello        *hello,
                                       const DcTrainingRequest  *request,
                                       gboolean                  seed_given,
                                       guint                     min_peers);
void          dc_train_group_set_starter (DcTrainGroup          *self,
                                       DcTrainGroupStarter       starter);
const DcTrainPlan *
              dc_train_group_get_plan (DcTrainGroup             *self);
gboolean      dc_train_group_set_resume (DcTrainGroup         *self,
                                         const DcGptModel     *model,
                                         const DcTrainSettings *settings,
                                         GError              **error);
gboolean      dc_train_group_load_checkpoint (DcTrainGroup    *self,
                                              const DcGptModel *model,
                                              const DcTrainSettings *settings,
                                              GError         **error);
void          dc_train_group_start    (DcTrainGroup             *self);
void          dc_train_group_stop     (DcTrainGroup             *self);
DcGptModel   *dc_train_group_get_model (DcTrainGroup            *self);
gboolean      dc_train_group_get_step_times (DcTrainGroup       *self,
                                             guint64            *compute_us,
                                             guint64            *send_us,
                                             guint64            *wait_us,
                                             guint64            *combine_us);
/**
 * DcTrainGroupPhases:
 * @compute_us: this rank's gradient, the whole of it
 * @ahead_us: of @compute_us: before the step began (computed ahead, while
 *   the step before's reports were awaited)
 * @send_us: from the gradient (or the step's start) to its contributions queued
 * @contrib_wait_us: then to the last contribution to this device's shard
 * @sum_us: summing that shard, hashing and queueing it to the roster
 * @gather_wait_us: then to the last roster device's summed shard
 * @adam_us: the Adam step
 * @hash_us: the report's weight and optimizer hashes
 * @barrier_us: from this device's report of the step before to this
 *   step's start: the others' reports (the sync guard) and audit verdicts
 *
 * Where this device's last step went, finer than its STEP_REPORT's four
 * times (microseconds, monotonic clock). bench group prints their means.
 */
typedef struct
{
  gint64 compute_us;
  gint64 ahead_us;
  gint64 send_us;
  gint64 contrib_wait_us;
  gint64 sum_us;
  gint64 gather_wait_us;
  gint64 adam_us;
  gint64 hash_us;
  gint64 barrier_us;
  /* Audits in the step's waits (docs/ARCHITECTURE.md): of the audit that
   * ended during the step, the time it waited for this device's own
   * gradient and its kernels begun while that gradient computed (0 with
   * the gate); the time this step's gradient, computed ahead, waited for
   * an audit whose verdict the step before's report waited for. */
  gint64 audit_paused_us;
  guint  audit_beside;
  gint64 ahead_paused_us;
  /* The weakest CPU priority (a DcParallelPriority: dc-parallel.h) that
   * the audit ending during the step ran at, its thread and its idle
   * pool's helpers read back; -1 without one. */
  gint   audit_priority;
  /* The gradient values of this device's contributions packed and sent
   * once its backward pass had passed block 1 (block 0 and the embeddings
   * left to compute) or after it: what the exchange's tail carries from
   * this device (docs/ARCHITECTURE.md, "The sharded exchange", the tail
   * layout); the rest left while a block or more was still computed. */
  gsize  tail_values;
  /* The streamed reduce (docs/ARCHITECTURE.md, "The streamed reduce"):
   * the chunks of this device's summed shard it made as the contributions
   * came (0: summed whole), of them those queued before every contribution
   * to its shard was whole, and the contributions' chunks it summed as
   * they came (not from a whole object). */
  guint  stream_chunks;
  guint  stream_early;
  guint  stream_pieces;
  /* When (monotonic µs, this host's clock: comparable between the devices
   * of one host only, as bench group's are): this step's gradient began
   * (before the step when computed ahead) and ended, the last summed shard
   * was here (the Adam step launched), and the Adam step ended (the next
   * gradient may begin). bench group lines the devices up on them: the
   * step's critical path (docs/CLI.md, `critical_path`). */
  gint64 gradient_began_at;
  gint64 gradient_done_at;
  gint64 gathered_at;
  gint64 stepped_at;
} DcTrainGroupPhases;

gboolean      dc_train_group_get_step_phases (DcTrainGroup      *self,
                                              DcTrainGroupPhases *phases,
                                              gboolean          *ahead);
gboolean      dc_train_group_get_audit_time (DcTrainGroup       *self,
                                             guint64            *audit_us);
guint64       dc_train_group_get_sent_bytes (DcTrainGroup       *self);
void          dc_train_group_get_slow_sending (DcTrainGroup     *self,
                                               guint            *episodes,
                                               double           *slow_ms);
guint         dc_train_group_get_renewals (DcTrainGroup     *self);
guint         dc_train_group_audit_rank (guint64              run_seed,
                                         guint64              step,
                                         guint                rank,
                                         guint                n_ranks,
                                         gboolean             every_step);
guint         dc_train_group_audit_draw (const guint8        *draw_hash,
                                         guint                rank,
                                         guint                n_ranks,
                                         gboolean             every_step);

G_END_DECLS
