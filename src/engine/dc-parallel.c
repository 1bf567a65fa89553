/* dc-parallel.c: the pool behind dc_parallel_for().
 *
 * A call publishes a job (a chunk counter and a count of helpers wanted) on
 * the pool's list, runs chunks itself, and waits only for chunks that
 * helpers have claimed and not finished. Helpers claim chunks from the same
 * atomic counter, so a helper the scheduler starts late finds nothing left
 * and the caller has done the work: the caller never waits for a thread to
 * start, only for one that is computing.
 *
 * Wake-ups: a helper that finishes a job spins for a bounded time (SPIN_US)
 * on the pool's job count before it sleeps on the pool's condition, so the
 * products of a step, microseconds apart, find it awake and need no futex
 * wake. The caller waits the same way: it spins briefly on the chunk
 * counter, then sleeps. The spin is pause instructions, not sched_yield: on
 * a loaded 2-vCPU machine a yielding helper gave its core away and was
 * rarely running when the next product came (DC_PARALLEL_SPIN_YIELD=1 keeps
 * the yielding spin, for measuring). The spin is bounded and adapts: while
 * helpers come too late to take any chunk (an oversubscribed machine, where
 * a spinning helper only takes time from the caller's share), the spin
 * halves per call down to none; it doubles back once helpers help.
 *
 * Nested calls (a chunk that calls dc_parallel_for, e.g. a GEMM inside an
 * attention head) run inline on the calling thread: the result is the same
 * and no helper ever waits for another.
 *
 * Two pools: the step's, and the idle pool for background work that must
 * use only the cycles the step leaves (a group's audits). The idle pool's
 * helpers run at the lowest CPU priority (SCHED_IDLE on Linux, nice 19
 * where that is refused); the step's pool and its threads are never
 * touched. A thread in idle mode (dc_parallel_set_idle ()) sends its calls
 * there and runs no chunk itself, only the serial code between them, at
 * its own priority: a lowered thread could not be raised again, and when
 * the step waits for that work (its `urgent` flag) the caller joins in
 * and later calls go to the step's pool, so that work waited for never
 * starves behind other programs' normal threads. Same chunks, same bits.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"
/* SCHED_IDLE */
#define _GNU_SOURCE

#include "config.h"

#include "dc-parallel.h"

#include <stdlib.h>

#ifdef __linux__
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* How long an idle helper or a waiting caller spins before sleeping. 50 µs
 * covers the gap between the products and kernels of a training step or a
 * decode step (a few µs to tens of µs), so most wake-ups cost no system
 * call; it is short enough that a helper of an idle process is asleep
 * within a blink. DC_PARALLEL_SPIN_US overrides it (0: sleep at once), for
 * measuring. */
#define SPIN_US_DEFAULT 50

typedef struct _Job Job;

struct _Job
{
  DcParallelFunc func;
  gpointer       data;
  gsize          n;
  gsize          chunk;
  gsize          n_chunks;
  gint           next_chunk;    /* atomic: the next unclaimed chunk */
  gint           chunks_done;   /* atomic */
  gint           helpers_wanted;/* under pool lock: helpers still to attach */
  gint           next_worker;   /* under pool lock: worker index for the next helper */
  /* The caller sleeps on these only when its spin ran out. */
  GMutex         lock;
  GCond          done;
  gboolean       caller_asleep; /* under lock */
  gboolean       finished;      /* under lock */
};

typedef struct
{
  GMutex  lock;
  GCond   work;          /* helpers sleep here */
  GQueue  jobs;          /* of Job *, those still wanting helpers */
  gint    wanted;        /* atomic: Σ helpers_wanted, the spinners' flag */
  guint   n_helpers;     /* under lock: threads started */
  guint   n_sleeping;    /* under lock */
  gboolean idle;         /* helpers lower themselves (the idle pool) */
  gint    lowest;        /* atomic: the weakest DcParallelPriority its helpers read back */
  /* The adaptive spin (spin_adapt ()), and helpers spin (never sleep)
   * until warm_until, µs (dc_parallel_warm (), the step's pool only). */
  gint    spin_now_us;   /* atomic; -1 until first set */
  guint   spin_calls;    /* atomic */
  gint64  warm_until;    /* __atomic builtins */
  gint    n_warm;        /* atomic: helpers 0 … n_warm - 1 keep a warm window */
} Pool;

static Pool pool = { .spin_now_us = -1, .lowest = DC_PARALLEL_PRIORITY_IDLE };
static Pool idle_pool = { .idle = TRUE, .spin_now_us = -1, .lowest = DC_PARALLEL_PRIORITY_IDLE };
static gint64 spin_us_config = 0;
static gint default_threads = 1;   /* atomic */

static guint64 stat_jobs = 0;      /* __atomic builtins: GLib has no 64-bit atomics */
static guint64 stat_inline = 0;
static guint64 stat_wait_ns = 0;
static gint stat_warm_seen = 0;    /* atomic: 1 + the highest helper index woken to spin warm */
static gint64 warm_woken_at = 0;   /* __atomic: when the last warm woke sleeping helpers, µs */
static guint64 stat_warm_wakes = 0;
static guint64 stat_warm_wake_ns = 0;
static guint64 stat_job_wakes = 0;  /* helpers a published job signalled awake */
static guint64 stat_idle_wait_ns = 0;
static guint64 stat_idle_jobs = 0;

/* How often a caller in idle mode looks at its urgent flag while the idle
 * helpers compute: 1 ms is far below a training kernel's length on the
 * idle pool and costs a thousand wake-ups a second at most, on a thread
 * that otherwise sleeps. */
#define IDLE_POLL_US 1000

static GPrivate in_worker_key;     /* non-NULL inside a chunk */
static GPrivate idle_key;          /* const gint *: dc_parallel_set_idle ()'s urgent flag */

typedef struct
{
  DcParallelGateFunc func;
  gpointer           data;
} Gate;

static GPrivate gate_key = G_PRIVATE_INIT (g_free);  /* Gate *: dc_parallel_set_gate () */


/* One round of a spin: a few pause instructions, or, with
 * DC_PARALLEL_SPIN_YIELD=1, a yield of the CPU (measuring). */
static void
spin_pause (void)
{
  static gint yield = -1;

  if (G_UNLIKELY (g_atomic_int_get (&yield) < 0))
    g_atomic_int_set (&yield, g_strcmp0 (g_getenv ("DC_PARALLEL_SPIN_YIELD"), "1") == 0);
  if (yield)
    {
      g_thread_yield ();
      return;
    }
  for (int i = 0; i < 32; i++)
    {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause ();
#elif defined(__aarch64__)
      __asm__ __volatile__ ("yield");
#endif
    }
}

static gint64
spin_us (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      const char *env = g_getenv ("DC_PARALLEL_SPIN_US");
      gint64 v = SPIN_US_DEFAULT;

      if (env != NULL && *env != '\0')
        v = CLAMP (g_ascii_strtoll (env, NULL, 10), 0, 10000);
      spin_us_config = v;
      g_once_init_leave (&once, 1);
    }
  return spin_us_config;
}

/* DC_PARALLEL_WAKE_ALL=1: a published job signals as many sleepers as it
 * wants helpers inside a warm window too (before branch ring-head; an A/B). */
static gboolean
wake_all_config (void)
{
  static gint all = -1;

  if (G_UNLIKELY (g_atomic_int_get (&all) < 0))
    g_atomic_int_set (&all, g_strcmp0 (g_getenv ("DC_PARALLEL_WAKE_ALL"), "1") == 0);
  return g_atomic_int_get (&all);
}

/* The spin actually used, in µs, between 0 and spin_us (): halved after a
 * call whose helpers ran no chunk (they came too late: the machine is
 * oversubscribed, and a spinning helper would only take CPU time from the
 * caller's own share), doubled back after a call they helped with. Every
 * SPIN_PROBE_CALLS calls it is reset to the full spin, because a sleeping
 * helper can also be too late on a quiet machine (short products) and only
 * a spinning one shows that helpers could help. */
#define SPIN_PROBE_CALLS 64

static gint64
spin_budget (Pool *p)
{
  gint v = g_atomic_int_get (&p->spin_now_us);

  return v < 0 ? spin_us () : v;
}

static void
spin_adapt (Pool     *p,
            gboolean  helped)
{
  gint max = (gint) spin_us ();
  gint v = g_atomic_int_get (&p->spin_now_us);

  if (v < 0 || (guint) g_atomic_int_add (&p->spin_calls, 1) % SPIN_PROBE_CALLS == 0)
    v = max;
  else
    v = helped ? MIN (max, v * 2 + 1) : v / 2;
  g_atomic_int_set (&p->spin_now_us, v);
}

#ifdef __linux__
static pid_t
thread_id (void)
{
  return (pid_t) syscall (SYS_gettid);
}
#endif

/**
 * dc_parallel_get_thread_priority:
 *
 * Reads the calling thread's scheduling back from the kernel (not from
 * what was asked): SCHED_IDLE, else a nice value of 19, else normal.
 *
 * Returns: the calling thread's priority
 */
DcParallelPriority
dc_parallel_get_thread_priority (void)
{
#ifdef __linux__
  int nice_value;

  /* On Linux, pid 0 and a thread id name one thread, not the process. */
  if (sched_getscheduler (0) == SCHED_IDLE)
    return DC_PARALLEL_PRIORITY_IDLE;
  errno = 0;
  nice_value = getpriority (PRIO_PROCESS, (id_t) thread_id ());
  if (errno == 0 && nice_value >= 19)
    return DC_PARALLEL_PRIORITY_NICE;
#endif
  return DC_PARALLEL_PRIORITY_NORMAL;
}

/* Lowers the calling thread (an idle pool's helper), for good (an
 * unprivileged process cannot raise it again): SCHED_IDLE runs it only on a core no normal thread
 * wants; where that is refused, nice 19 gives it the least share. Not on
 * other systems, where nice is the whole process's. */
static DcParallelPriority
lower_thread (void)
{
#ifdef __linux__
  struct sched_param param = { 0 };

  if (pthread_setschedparam (pthread_self (), SCHED_IDLE, &param) != 0)
    (void) setpriority (PRIO_PROCESS, (id_t) thread_id (), 19);
#endif
  return dc_parallel_get_thread_priority ();
}

static void
job_clear (Job *job)
{
  g_cond_clear (&job->done);
  g_mutex_clear (&job->lock);
}

static void
job_unref (Job *job)
{
  g_atomic_rc_box_release_full (job, (GDestroyNotify) job_clear);
}

/* Runs chunks of @job until none is left; returns how many it ran. */
static gint
run_chunks (Job   *job,
            guint  worker)
{
  gint ran = 0;

  g_private_set (&in_worker_key, GINT_TO_POINTER (1));
  for (gsize c = (gsize) g_atomic_int_add (&job->next_chunk, 1); c < job->n_chunks;
       c = (gsize) g_atomic_int_add (&job->next_chunk, 1))
    {
      gsize begin = c * job->chunk;

      job->func (begin, MIN (begin + job->chunk, job->n), worker, job->data);
      ran++;
    }
  g_private_set (&in_worker_key, NULL);
  return ran;
}

/* Takes the first job that still wants a helper, with a reference (the
 * queue's own when it is the last helper wanted); p->lock held. */
static Job *
take_job_locked (Pool  *p,
                 guint *worker)
{
  Job *job = g_queue_peek_head (&p->jobs);

  if (job == NULL)
    return NULL;
  *worker = (guint) job->next_worker++;
  g_atomic_int_add (&p->wanted, -1);
  if (--job->helpers_wanted == 0)
    return g_queue_pop_head (&p->jobs);
  return g_atomic_rc_box_acquire (job);
}

/* Whether helper INDEX of P spins through the warm window: only as many as
 * the warming caller's products will use. The pool never shrinks, so after
 * a 16-thread call a process that now computes with 5 threads kept 15
 * helpers spinning on a warm, on cores its neighbours (a ring's other
 * stages on the same host) and its own generation thread needed. */
static inline gboolean
warm_for (Pool  *p,
          guint  index)
{
  return (gint) index < g_atomic_int_get (&p->n_warm) &&
         g_get_monotonic_time () < __atomic_load_n (&p->warm_until, __ATOMIC_RELAXED);
}

/* How many helpers a warm window keeps spinning now: helpers 0 …
 * n_warm - 1 (the caller's own pool lock held or not: a stale answer only
 * costs a wake-up too many or too few, never a chunk). */
static inline guint
warm_covers (Pool *p)
{
  if (g_get_monotonic_time () >= __atomic_load_n (&p->warm_until, __ATOMIC_RELAXED))
    return 0;
  return (guint) MAX (g_atomic_int_get (&p->n_warm), 0);
}

/* What a helper thread starts with: its pool and its index in it. */
typedef struct
{
  Pool  *pool;
  guint  index;
} HelperStart;

static gpointer
helper_worker (gpointer data)
{
  HelperStart *start = data;
  Pool *p = start->pool;
  const guint index = start->index;

  g_free (start);

  if (p->idle)
    {
      DcParallelPriority got = lower_thread ();
      gint lowest = g_atomic_int_get (&p->lowest);

      /* The weakest of the helpers' priorities, read back. */
      while ((gint) got < lowest && !g_atomic_int_compare_and_exchange (&p->lowest, lowest, got))
        lowest = g_atomic_int_get (&p->lowest);
    }
  for (;;)
    {
      Job *job;
      guint worker = 0;
      gint ran;

      /* Spin, then sleep, until a job wants a helper. */
      if (g_atomic_int_get (&p->wanted) <= 0)
        {
          gint64 until = g_get_monotonic_time () + spin_budget (p);
          gint64 now;

          /* The warm window is read anew each round: dc_parallel_cool ends it. */
          while (g_atomic_int_get (&p->wanted) <= 0 &&
                 ((now = g_get_monotonic_time ()) < until || warm_for (p, index)))
            spin_pause ();
        }
      g_mutex_lock (&p->lock);
      {
        gboolean slept = FALSE;

        while ((job = take_job_locked (p, &worker)) == NULL)
          {
            if (warm_for (p, index))
              {
                /* Woken by dc_parallel_warm: spin instead. */
                gint seen = (gint) index + 1;
                gint old = g_atomic_int_get (&stat_warm_seen);
                gint64 woken_at = __atomic_load_n (&warm_woken_at, __ATOMIC_RELAXED);

                while (old < seen &&
                       !g_atomic_int_compare_and_exchange (&stat_warm_seen, old, seen))
                  old = g_atomic_int_get (&stat_warm_seen);
                /* How long the wake took (a ring's stage: a hop's products
                 * start before its helpers run). */
                if (slept && woken_at > 0)
                  {
                    __atomic_add_fetch (&stat_warm_wakes, 1, __ATOMIC_RELAXED);
                    __atomic_add_fetch (&stat_warm_wake_ns,
                                        (guint64) MAX (g_get_monotonic_time () - woken_at, 0)
                                        * 1000, __ATOMIC_RELAXED);
                  }
                break;
              }
            p->n_sleeping++;
            g_cond_wait (&p->work, &p->lock);
            p->n_sleeping--;
            slept = TRUE;
          }
      }
      g_mutex_unlock (&p->lock);
      if (job == NULL)
        continue;

      ran = run_chunks (job, worker);
      if (ran > 0 && g_atomic_int_add (&job->chunks_done, ran) + ran == (gint) job->n_chunks)
        {
          /* This helper finished the job: wake the caller if it sleeps. */
          g_mutex_lock (&job->lock);
          job->finished = TRUE;
          if (job->caller_asleep)
            g_cond_signal (&job->done);
          g_mutex_unlock (&job->lock);
        }
      job_unref (job);
    }
  return NULL;
}

/* Starts helpers until the pool has @n; p->lock held. A helper that cannot
 * be started leaves the pool smaller: calls still complete, on fewer threads. */
static void
grow_locked (Pool  *p,
             guint  n)
{
  while (p->n_helpers < n)
    {
      GError *error = NULL;
      HelperStart *start = g_new (HelperStart, 1);
      GThread *thread;

      start->pool = p;
      start->index = p->n_helpers;
      /* Names within 15 characters: the kernel refuses longer ones, and
       * the thread then shows under its parent's name. */
      thread = g_thread_try_new (p->idle ? "dc-par-idle" : "dc-parallel",
                                 helper_worker, start, &error);
      if (thread == NULL)
        {
          g_free (start);
          g_warning ("could not start a helper thread (%s); running on %u threads",
                     error->message, p->n_helpers + 1);
          g_error_free (error);
          return;
        }
      g_thread_unref (thread);
      p->n_helpers++;
    }
}

/**
 * dc_parallel_for:
 * @n_threads: the most threads to use, the caller included; 0 means
 *   dc_parallel_get_default_threads ()
 * @n: indices [0, n)
 * @chunk: indices per call of @func (the last chunk may be shorter); fixed
 *   by the caller, never derived from @n_threads, so the split is the same
 *   at every thread count
 * @func: runs one chunk; may run on any thread, in any order
 *
 * Runs @func over every chunk exactly once and returns when all are done.
 * Inside a chunk, a nested call runs inline on that thread.
 */
void
dc_parallel_for (guint          n_threads,
                 gsize          n,
                 gsize          chunk,
                 DcParallelFunc func,
                 gpointer       data)
{
  const gint *urgent = NULL;
  gboolean idle = FALSE;
  Pool *p = &pool;
  gsize n_chunks;
  guint helpers;
  Job *job;
  gint ran;

  g_return_if_fail (func != NULL);
  if (n == 0)
    return;
  if (g_private_get (&in_worker_key) == NULL)
    {
      Gate *gate = g_private_get (&gate_key);

      if (gate != NULL && gate->func != NULL)
        gate->func (gate->data);
      /* Read after the gate, which may have set it. */
      urgent = g_private_get (&idle_key);
      idle = urgent != NULL && !g_atomic_int_get (urgent);
      if (idle)
        p = &idle_pool;
    }
  chunk = MAX (chunk, 1);
  n_chunks = n / chunk + (n % chunk != 0);
  if (n_threads == 0)
    n_threads = dc_parallel_get_default_threads ();
  n_threads = MIN (n_threads, DC_PARALLEL_MAX_THREADS);
  /* In idle mode the caller runs no chunk: helpers take every worker
   * index, 0 included, even for one chunk or one thread. */
  helpers = idle ? (guint) MIN ((gsize) n_threads, n_chunks)
                 : (guint) MIN ((gsize) n_threads - 1, n_chunks - 1);
  /* The chunk counter is a gint; no caller comes near this. */
  g_return_if_fail (n_chunks < G_MAXINT / 2);

  if (helpers == 0 || g_private_get (&in_worker_key) != NULL)
    {
      for (gsize begin = 0; begin < n; begin += chunk)
        func (begin, MIN (begin + chunk, n), 0, data);
      __atomic_add_fetch (&stat_inline, 1, __ATOMIC_RELAXED);
      return;
    }

  job = g_atomic_rc_box_new0 (Job);
  job->func = func;
  job->data = data;
  job->n = n;
  job->chunk = chunk;
  job->n_chunks = n_chunks;
  job->helpers_wanted = (gint) helpers;
  job->next_worker = idle ? 0 : 1;
  g_mutex_init (&job->lock);
  g_cond_init (&job->done);

  (void) spin_us ();
  g_mutex_lock (&p->lock);
  grow_locked (p, helpers);
  g_queue_push_tail (&p->jobs, g_atomic_rc_box_acquire (job));
  g_atomic_int_add (&p->wanted, (gint) helpers);
  /* Spinning helpers see `wanted` without a wake-up; sleeping ones need one
   * each, up to the number wanted, less the helpers a warm window keeps
   * spinning (dc_parallel_warm_threads: woken when it began, they take the
   * job without one). A pool larger than a warm device's threads (a ring's
   * head: 15 helpers for its 16-thread head, 4 warm for its layers)
   * otherwise signalled 4 sleepers at every product of its layers while its
   * 4 warm helpers spun: on the H200 host 170 futex wake-ups and 50
   * migrations a decoded token, helpers that came to find the job taken,
   * and layers 20 % slower than a stage's (BENCHMARKS.md, "Branch
   * ring-head"). Outside a warm window nothing changes: there the extra
   * wake-ups keep more helpers spinning for the next, larger product, and
   * waking only the shortfall of the spinning ones made one device's
   * decode slower. No chunk ever waits for a wake: the caller runs every
   * chunk nobody claims. */
  {
    guint covered = wake_all_config () ? 0 : warm_covers (p);
    guint wake = helpers > covered ? helpers - covered : 0;

    wake = MIN (wake, p->n_sleeping);
    for (guint i = 0; i < wake; i++)
      g_cond_signal (&p->work);
    __atomic_add_fetch (&stat_job_wakes, wake, __ATOMIC_RELAXED);
  }
  g_mutex_unlock (&p->lock);

  if (idle)
    {
      /* Idle mode: the helpers compute; the caller joins once the work is
       * urgent (checked every IDLE_POLL_US while it waits). */
      gint64 start = g_get_monotonic_time ();

      g_mutex_lock (&job->lock);
      job->caller_asleep = TRUE;
      while (!job->finished && g_atomic_int_get (&job->chunks_done) != (gint) n_chunks
             && !g_atomic_int_get (urgent))
        g_cond_wait_until (&job->done, &job->lock, g_get_monotonic_time () + IDLE_POLL_US);
      job->caller_asleep = FALSE;
      g_mutex_unlock (&job->lock);
      __atomic_add_fetch (&stat_idle_wait_ns, (guint64) (g_get_monotonic_time () - start) * 1000,
                          __ATOMIC_RELAXED);
      __atomic_add_fetch (&stat_idle_jobs, 1, __ATOMIC_RELAXED);
      ran = 0;
      if (g_atomic_int_get (&job->chunks_done) != (gint) n_chunks)
        {
          guint worker = 0;
          gboolean join = FALSE;

          /* Urgent: the caller takes a worker index that no helper took
           * yet (a helper that already has one finishes its chunk; the
           * rest of the chunks come to the caller). */
          g_mutex_lock (&p->lock);
          if (job->helpers_wanted > 0)
            {
              worker = (guint) job->next_worker++;
              g_atomic_int_add (&p->wanted, -1);
              if (--job->helpers_wanted == 0 && g_queue_remove (&p->jobs, job))
                job_unref (job);
              join = TRUE;
            }
          g_mutex_unlock (&p->lock);
          if (join)
            ran = run_chunks (job, worker);
        }
    }
  else
    {
      ran = run_chunks (job, 0);
      spin_adapt (p, ran < (gint) n_chunks);
    }
  if (g_atomic_int_add (&job->chunks_done, ran) + ran != (gint) n_chunks)
    {
      gint64 start = g_get_monotonic_time ();
      gint64 until = start + spin_budget (p);

      while (g_atomic_int_get (&job->chunks_done) != (gint) n_chunks &&
             g_get_monotonic_time () < until)
        spin_pause ();
      g_mutex_lock (&job->lock);
      job->caller_asleep = TRUE;
      while (!job->finished && g_atomic_int_get (&job->chunks_done) != (gint) n_chunks)
        g_cond_wait (&job->done, &job->lock);
      g_mutex_unlock (&job->lock);
      __atomic_add_fetch (&stat_wait_ns, (guint64) (g_get_monotonic_time () - start) * 1000,
                         __ATOMIC_RELAXED);
    }

  /* Helpers that never came must not take the job later. */
  g_mutex_lock (&p->lock);
  if (job->helpers_wanted > 0)
    {
      g_atomic_int_add (&p->wanted, -job->helpers_wanted);
      job->helpers_wanted = 0;
      if (g_queue_remove (&p->jobs, job))
        job_unref (job);
    }
  g_mutex_unlock (&p->lock);
  __atomic_add_fetch (&stat_jobs, 1, __ATOMIC_RELAXED);
  job_unref (job);
}

/**
 * dc_parallel_set_gate:
 * @func: (nullable): called before each of this thread's top-level calls;
 *   %NULL clears the gate
 * @data: passed to @func
 *
 * Background work on this thread (a group's audit) waits in @func between
 * two kernels while more urgent work of the process runs: cooperative, so
 * it needs no scheduler priorities (an unprivileged process cannot raise a
 * lowered thread's priority again).
 */
void
dc_parallel_set_gate (DcParallelGateFunc func,
                      gpointer           data)
{
  Gate *gate = g_private_get (&gate_key);

  if (gate == NULL)
    {
      if (func == NULL)
        return;
      gate = g_new0 (Gate, 1);
      g_private_set (&gate_key, gate);
    }
  gate->func = func;
  gate->data = data;
}

/**
 * dc_parallel_warm:
 * @us: how long helpers should stay awake, at most 10 ms
 *
 * Wakes the sleeping helpers and keeps every helper spinning for @us
 * microseconds: for a caller that knows products are about to come after
 * an idle gap (a ring's stage when a hop arrives), so that the helpers are
 * running when the first one is published instead of starting from a
 * futex wake, which on an idle server core costs tens to hundreds of µs
 * and leaves a one-row product to the caller alone. Any thread.
 */
void
dc_parallel_warm (guint us)
{
  dc_parallel_warm_threads (us, DC_PARALLEL_MAX_THREADS);
}

/**
 * dc_parallel_warm_threads:
 * @us: how long helpers should stay awake, at most 10 ms
 * @n_threads: the threads the coming products use, the caller included
 *
 * dc_parallel_warm() for @n_threads - 1 helpers: the pool's other helpers
 * (started by an earlier call with more threads) sleep on, instead of
 * spinning on cores that the products will not use.
 */
void
dc_parallel_warm_threads (guint us,
                          guint n_threads)
{
  gint64 until = g_get_monotonic_time () + MIN (us, 10000);
  gint n_warm = (gint) CLAMP (n_threads, 1, DC_PARALLEL_MAX_THREADS) - 1;

  g_atomic_int_set (&pool.n_warm, n_warm);
  if (n_warm == 0 || until <= __atomic_load_n (&pool.warm_until, __ATOMIC_RELAXED))
    return;
  __atomic_store_n (&pool.warm_until, until, __ATOMIC_RELAXED);
  g_mutex_lock (&pool.lock);
  if (pool.n_sleeping > 0)
    {
      __atomic_store_n (&warm_woken_at, g_get_monotonic_time (), __ATOMIC_RELAXED);
      g_cond_broadcast (&pool.work);
    }
  g_mutex_unlock (&pool.lock);
}

/**
 * dc_parallel_cool:
 *
 * Ends a dc_parallel_warm() window early: the helpers go back to their
 * short spin, then sleep (the caller's products are done; spinning on
 * would take cores from the next device of a ring on the same host).
 */
void
dc_parallel_cool (void)
{
  __atomic_store_n (&pool.warm_until, 0, __ATOMIC_RELAXED);
}

/**
 * dc_parallel_set_idle:
 * @urgent: (nullable): a flag (read atomically) that says the work is
 *   waited for; %NULL leaves idle mode
 *
 * Puts the calling thread in idle mode: while *@urgent is 0, its top-level
 * dc_parallel_for () calls run their chunks on the idle pool, whose
 * helpers run at the lowest CPU priority (SCHED_IDLE; nice 19 where that
 * is refused), and the caller runs none itself; the kernel gives them only
 * the cycles that normal threads (the step's pool) leave idle. Once
 * *@urgent is set, a waiting caller joins the chunks left and later calls
 * run on the step's pool as usual. The calling thread keeps its priority
 * (it may be a shared pool's thread, GTask's): clear the mode before it
 * goes back. Helpers take the worker indices 0 … n_threads − 1 (a call of
 * one thread goes to one helper); the urgent caller takes one none took.
 */
void
dc_parallel_set_idle (const gint *urgent)
{
  g_private_set (&idle_key, (gpointer) urgent);
}

/**
 * dc_parallel_get_idle_pool_priority:
 *
 * Returns: the weakest priority that the idle pool's helpers read back
 *   (IDLE while none was started)
 */
DcParallelPriority
dc_parallel_get_idle_pool_priority (void)
{
  return (DcParallelPriority) g_atomic_int_get (&idle_pool.lowest);
}

/**
 * dc_parallel_get_default_threads:
 *
 * Returns: the thread count chosen once for the process (`--threads`, the
 *   settings); 1 until someone sets it
 */
guint
dc_parallel_get_default_threads (void)
{
  return (guint) g_atomic_int_get (&default_threads);
}

void
dc_parallel_set_default_threads (guint n_threads)
{
  g_atomic_int_set (&default_threads, (gint) CLAMP (n_threads, 1, DC_PARALLEL_MAX_THREADS));
}

/**
 * dc_parallel_in_worker:
 *
 * Returns: whether the calling thread is running a chunk (a nested
 *   dc_parallel_for() would run inline)
 */
gboolean
dc_parallel_in_worker (void)
{
  return g_private_get (&in_worker_key) != NULL;
}

void
dc_parallel_get_stats (DcParallelStats *out)
{
  out->jobs = __atomic_load_n (&stat_jobs, __ATOMIC_RELAXED);
  out->inline_jobs = __atomic_load_n (&stat_inline, __ATOMIC_RELAXED);
  out->wait_ns = __atomic_load_n (&stat_wait_ns, __ATOMIC_RELAXED);
  out->idle_wait_ns = __atomic_load_n (&stat_idle_wait_ns, __ATOMIC_RELAXED);
  out->idle_jobs = __atomic_load_n (&stat_idle_jobs, __ATOMIC_RELAXED);
  out->warm_wakes = __atomic_load_n (&stat_warm_wakes, __ATOMIC_RELAXED);
  out->warm_wake_ns = __atomic_load_n (&stat_warm_wake_ns, __ATOMIC_RELAXED);
  out->job_wakes = __atomic_load_n (&stat_job_wakes, __ATOMIC_RELAXED);
  g_mutex_lock (&pool.lock);
  out->warm_helpers = (guint) g_atomic_int_get (&stat_warm_seen);
  out->helpers = pool.n_helpers;
  out->sleeping = pool.n_sleeping;
  g_mutex_unlock (&pool.lock);
}

/**
 * dc_parallel_priority_to_string:
 *
 * Returns: "normal", "nice" or "idle" (step lines, `bench group`)
 */
const char *
dc_parallel_priority_to_string (DcParallelPriority priority)
{
  switch (priority)
    {
    case DC_PARALLEL_PRIORITY_IDLE:
      return "idle";
    case DC_PARALLEL_PRIORITY_NICE:
      return "nice";
    case DC_PARALLEL_PRIORITY_NORMAL:
    default:
      return "normal";
    }
}
