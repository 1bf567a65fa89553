/* dc-parallel.h: the one way the engine and the model run work in parallel.
 *
 * One process-wide pool of helper threads, kept for the life of the process
 * (the GEMM's tiles, packing, attention, norms, the optimizer all use it; no
 * thread is created per product or per pass). dc_parallel_for() cuts
 * [0, n) into fixed chunks of `chunk` indices and returns when every chunk
 * has run exactly once, on the caller or on a helper.
 *
 * Determinism is the caller's part, and cheap to keep: chunk boundaries do
 * not depend on the thread count, so a function that writes only its own
 * chunk's outputs (and reduces across chunks, if at all, in a fixed order
 * afterwards) gives the same bits with 1 thread or 64.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The most threads one call uses (the caller and 63 helpers): far above the
 * cores of the machines we run on, and it bounds the per-worker scratch the
 * callers keep. */
#define DC_PARALLEL_MAX_THREADS 64

/**
 * DcParallelFunc:
 * @begin: the chunk's first index
 * @end: one past its last index
 * @worker: which participant runs it, in [0, n_threads): 0 is the caller;
 *   for per-worker scratch only (never for what is computed)
 * @data: the caller's data
 */
typedef void (*DcParallelFunc) (gsize    begin,
                                gsize    end,
                                guint    worker,
                                gpointer data);

void     dc_parallel_for              (guint           n_threads,
                                       gsize           n,
                                       gsize           chunk,
                                       DcParallelFunc  func,
                                       gpointer        data);

guint    dc_parallel_get_default_threads (void);
void     dc_parallel_set_default_threads (guint n_threads);

gboolean dc_parallel_in_worker        (void);

/* Keeps the helpers awake and spinning for US µs (at most 10 ms): products
 * are about to come after an idle gap. */
void     dc_parallel_warm             (guint           us);
/* The same for the N_THREADS - 1 helpers that products of N_THREADS use:
 * the pool's other helpers sleep on. */
void     dc_parallel_warm_threads     (guint           us,
                                       guint           n_threads);
/* Ends a warm window early: helpers spin briefly, then sleep again. */
void     dc_parallel_cool             (void);

/**
 * DcParallelGateFunc:
 * @data: the data given to dc_parallel_set_gate ()
 *
 * Called on the calling thread before each of its dc_parallel_for () calls
 * (not the nested ones inside a chunk); it may block until that thread's
 * work may go on. For background work that must yield its cores to more
 * urgent work of the same process between two kernels (a group's audit
 * while the device's own gradient computes: src/train/).
 */
typedef void (*DcParallelGateFunc) (gpointer data);

/* Sets (or, with a NULL @func, clears) the calling thread's gate. A thread
 * of a pool (GTask's) must clear it before it returns to the pool. */
void     dc_parallel_set_gate         (DcParallelGateFunc func,
                                       gpointer           data);

/**
 * DcParallelPriority:
 * @DC_PARALLEL_PRIORITY_NORMAL: the scheduler's normal policy
 * @DC_PARALLEL_PRIORITY_NICE: nice 19 (SCHED_IDLE was refused)
 * @DC_PARALLEL_PRIORITY_IDLE: SCHED_IDLE: runs only where no normal thread wants the core
 *
 * A thread's CPU priority, lowest last.
 */
typedef enum
{
  DC_PARALLEL_PRIORITY_NORMAL,
  DC_PARALLEL_PRIORITY_NICE,
  DC_PARALLEL_PRIORITY_IDLE,
} DcParallelPriority;

void               dc_parallel_set_idle               (const gint *urgent);
DcParallelPriority dc_parallel_get_thread_priority    (void);
DcParallelPriority dc_parallel_get_idle_pool_priority (void);
const char *       dc_parallel_priority_to_string     (DcParallelPriority priority);

/**
 * DcParallelStats:
 * @jobs: calls that used helpers
 * @inline_jobs: calls run on the caller alone
 * @wait_ns: time callers spent waiting for helpers to finish their chunks
 * @helpers: helper threads started (the pool never shrinks)
 * @sleeping: helpers asleep now
 * @warm_helpers: the most helpers a warm window woke to spin (the highest
 *   helper index so woken, plus one)
 * @idle_wait_ns: time callers in idle mode (dc_parallel_set_idle ()) waited
 *   for the idle pool's helpers (not in @wait_ns)
 * @idle_jobs: calls run on the idle pool
 * @warm_wakes: sleeping helpers a warm window woke
 * @warm_wake_ns: their time from the warm's wake-up call to running
 * @job_wakes: sleeping helpers that published calls signalled (one per
 *   helper wanted, less those a warm window keeps spinning; with
 *   DC_PARALLEL_WAKE_ALL=1 not less them, as before branch ring-head)
 *
 * Totals since the process started, for `bench train`'s time split.
 */
typedef struct
{
  guint64 jobs;
  guint64 inline_jobs;
  guint64 wait_ns;
  guint   helpers;
  guint   sleeping;
  guint   warm_helpers;
  guint64 idle_wait_ns;
  guint64 idle_jobs;
  guint64 warm_wakes;
  guint64 warm_wake_ns;
  guint64 job_wakes;
} DcParallelStats;

void     dc_parallel_get_stats        (DcParallelStats *out);

G_END_DECLS
