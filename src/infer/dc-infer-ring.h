/* dc-infer-ring.h: a Hugging Face model split by layers across the group
 * (docs/ARCHITECTURE.md, "The inference ring").
 *
 * This device is the head: it holds the embedding, the final norm and the
 * head, and the first run of layers the plan gives it. The other devices
 * (`join --serve-layers`, DcRingServer) each fetch and hold a contiguous
 * run of layers; a token's activations go round the ring (head → stage 1 →
 * … → head) once per forward pass. Generation itself is a DcInferSession
 * whose forward pass is the ring, so sampling, the JSON mask, the queue and
 * the window are the single-device code: the same logits give the same ids.
 * Main thread; the session's worker waits for the ring.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "dc-infer-session.h"
#include "dc-model-repo.h"
#include "dc-ring-plan.h"
#include "mesh/dc-group.h"
#include "mesh/dc-mesh-ring-protocol.h"

G_BEGIN_DECLS

/* A hop's round trip may take one lap of the largest plan allowed (the lap
 * budget, 120 s) and some margin; past it the ring is stuck, not slow. */
#define DC_INFER_RING_HOP_TIMEOUT_S   150
/* Hops of one prompt going round at once: two keep every stage busy in a
 * prefill (a stage computes chunk k + 1 while the next computes chunk k);
 * more would only queue at the slowest stage. */
#define DC_INFER_RING_IN_FLIGHT       2
/* Stages fetching their layers: a 1 GB slice at 2 MB/s takes 500 s; past
 * 15 minutes the download is stalled rather than slow. */
#define DC_INFER_RING_READY_TIMEOUT_S 900
/* The hop cost the plan assumes before a ping came back: a millisecond, a
 * hop on the shaped local network (1 Gbit/s, 1 ms). */
#define DC_INFER_RING_DEFAULT_HOP_MS  1.0
/* When a hop arrives, the device's product helpers are kept spinning until
 * its part is computed (dc_infer_ring_cool_helpers), at most this long
 * (µs): its layers' products follow within microseconds, and helpers
 * woken from sleep by the first of them came too late to help on an idle
 * server (a ring ran near one thread's speed). 10 ms, dc_parallel_warm's
 * cap, is the bound for a device that never cools: the earlier 2 ms was
 * shorter than a stage's decode step on the H200 host's Xeon (2.6–3.6 ms
 * at full speed, of products too small to keep dc-parallel's adaptive spin
 * up), and that host's 2- and 3-stage laps fit stages computing at about
 * one thread's speed (not yet confirmed there). DC_RING_WARM_US overrides
 * it (0: off), for measuring. */
#define DC_INFER_RING_WARM_US         10000

/* Threads for each device of a ring of STAGES devices that share one host
 * of PROCESSORS (a bench on loopback): a ring decodes one stage at a time
 * and its prefill keeps DC_INFER_RING_IN_FLIGHT hops going round, so at
 * most that many devices compute at once and each may take that share of
 * the processors without two computing devices sharing a core. One device
 * takes them all; at least 1. */
guint           dc_infer_ring_shared_host_threads (guint processors,
                                                   guint stages);

/* Warms this process's product helpers for a hop about to be computed
 * with N_THREADS (the backend's threads: only those helpers spin). */
void            dc_infer_ring_warm_helpers   (guint n_threads);
/* Ends the warm window: this device's hop is computed (or it now waits). */
void            dc_infer_ring_cool_helpers   (void);

#define DC_TYPE_INFER_RING (dc_infer_ring_get_type ())
G_DECLARE_FINAL_TYPE (DcInferRing, dc_infer_ring, DC, INFER_RING, GObject)

DcInferRing    *dc_infer_ring_new            (DcContext    *context,
                                              DcGroup      *group,
                                              DcModelRepo  *repo,
                                              const char   *probe_hash,
                                              guint64       memory_bytes);
/* Devices that offered to hold layers so far (this one not counted). */
guint           dc_infer_ring_get_n_offers   (DcInferRing  *self);
/* Offering devices whose round trips were measured (pinged on arrival). */
guint           dc_infer_ring_get_n_measured (DcInferRing  *self);
/* One hop's measured cost (half the median round trip), -1 before any. */
double          dc_infer_ring_get_hop_ms     (DcInferRing  *self);

/* Plans for CONTEXT positions, gives every stage its layers and loads this
 * device's; finishes when every stage is ready. */
void            dc_infer_ring_prepare_async  (DcInferRing         *self,
                                              guint                context,
                                              GCancellable        *cancellable,
                                              GAsyncReadyCallback  callback,
                                              gpointer             user_data);
gboolean        dc_infer_ring_prepare_finish (DcInferRing         *self,
                                              GAsyncResult        *result,
                                              GError             **error);

const DcRingPlan *dc_infer_ring_get_plan     (DcInferRing  *self);
const char     *dc_infer_ring_get_stage_name (DcInferRing  *self,
                                              guint         stage);
guint64         dc_infer_ring_get_stage_downloaded (DcInferRing *self,
                                                    guint        stage);
DcModelRepo    *dc_infer_ring_get_repo       (DcInferRing  *self);
/* The Verify line for a distributed run's ids against one device's. */
char           *dc_infer_ring_compare_ids    (GArray       *ring_ids,
                                              GArray       *ids,
                                              gboolean     *verified);
/* Weight bytes this device sent STAGE from its model cache (ring-fetch). */
guint64         dc_infer_ring_get_stage_served (DcInferRing *self,
                                                guint        stage);
/* The session that generates through the ring (after prepare). */
DcInferSession *dc_infer_ring_get_session    (DcInferRing  *self);
/* Decoded tokens' laps since prepare (one position each): how many, and
 * per lap this device's compute (its layers and the head) and its wait for
 * the ring's answer (hops and the other stages' compute), in ms. */
guint           dc_infer_ring_get_lap_times  (DcInferRing  *self,
                                              double       *compute_ms,
                                              double       *wait_ms);
void            dc_infer_ring_get_lap_handoffs (DcInferRing *self,
                                                double      *send_ms,
                                                double      *wake_ms);
double          dc_infer_ring_get_lap_receive_ms (DcInferRing *self);
void            dc_infer_ring_get_lap_split  (DcInferRing  *self,
                                              double       *layers_ms,
                                              double       *head_ms,
                                              double       *between_ms);
void            dc_infer_ring_set_head_threads (DcInferRing *self,
                                                guint        n_threads);
/* Whether the last failure was a stage leaving (the run may be replayed). */
gboolean        dc_infer_ring_lost_peer      (DcInferRing  *self);
/* Releases every stage. */
void            dc_infer_ring_close          (DcInferRing  *self);

/* Tests: the next hop this head sends carries a non-finite value ("nan")
 * or another model's id ("model"), to see the stage refuse it. */
void            _dc_infer_ring_set_test_fault (DcInferRing *self,
                                               const char  *fault);

/* Tests: the weight bytes this head serves its stages differ from the
 * sha256 sent with them, to see the stages refuse them. */
void            _dc_infer_ring_set_test_lie   (DcInferRing *self,
                                               gboolean     lie);
/* Tests: so do the model files (config.json, headers, …) it serves them. */
void            _dc_infer_ring_set_test_lie_files (DcInferRing *self,
                                                   gboolean     lie);

/* The checks every received hop passes: NULL when HOP may be used, else the
 * "REFUSED activation …" message (its model is not MODEL, its width not
 * WIDTH, or a value is not finite). FROM names the sender. */
char           *dc_infer_ring_check_hop      (const DcMeshRingHop *hop,
                                              const char          *from,
                                              const char          *model,
                                              guint                width);

G_END_DECLS
