/* dc-gemm-peak.c: the int8 peak a CPU kernel's instructions reach on this
 * machine, measured rather than estimated.
 *
 * The estimate (threads × the "cpu MHz" of /proc/cpuinfo × MACs per cycle)
 * was wrong both ways: the VM's EPYC boosts above its listed clock (the
 * VNNI GEMM reached 1.06 of it at 2048³), and a Xeon under AVX-512 load on
 * all cores runs below it, with two hyperthreads sharing one core's ports.
 * So every thread of the pool runs a register-only loop of the kernel's own
 * multiply-accumulate instructions at once, and the peak is the sum of what
 * each thread did per second of its own CPU time (CLOCK_THREAD_CPUTIME_ID:
 * time other programs took from it does not count against it). On the
 * loaded 2-vCPU VM it still read 40 % low (host steal time, or the other
 * programs sharing the cores' caches; not separated), so ratios are to be
 * compared from quiet machines (docs/BENCHMARKS.md).
 * More threads than CPUs cannot add to the peak: the sum is scaled down to
 * the CPUs' share.
 *
 * The loops: VNNI, vpdpbusd (64 u8 × s8 MACs into int32) on 16 independent
 * accumulators, enough to cover its latency on two ports; AVX2, the
 * shortest exact int32 sequence of the AVX2 kernel, vpmaddubsw + vpmaddwd
 * + vpaddd per 32 MACs, on 8 accumulators. Other kernels are not measured.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-gemm-peak.h"
#include "dc-parallel.h"

#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DC_PEAK_X86 1
#endif

/* Iterations per timed block: ~10-50 µs, so the clock is read rarely. */
#define BLOCK_ITERS 4096

/* How long a thread waits at the start for the others (µs): a helper the
 * scheduler starts late must not leave the others measuring alone, but a
 * pool with fewer helpers than asked must not hang the call either. */
#define START_WAIT_US 200000

typedef guint64 (*LoopFunc) (guint64 iters);

typedef struct
{
  LoopFunc loop;
  double   macs_per_iter;
  double   seconds;
  gint     n_threads;
  gint     arrived;                               /* atomic */
  double   rate[DC_PARALLEL_MAX_THREADS];         /* MACs per CPU-second */
  guint64  sink;
} PeakJob;

static double
thread_cpu_seconds (void)
{
  struct timespec t;

  if (clock_gettime (CLOCK_THREAD_CPUTIME_ID, &t) != 0)
    return -1;
  return t.tv_sec + t.tv_nsec / 1e9;
}

#ifdef DC_PEAK_X86

/* Keeps the compiler from hoisting or folding the loop's operations. */
#define OPAQUE(v) __asm__ volatile ("" : "+v" (v))

/* a is made opaque before every instruction, so that the compiler cannot
 * see two of them compute the same value and keep one (GCC did: the first
 * version measured four times the hardware's rate). */
#define STEP_VNNI(c) \
  OPAQUE (a);        \
  c = _mm512_dpbusd_epi32 (c, a, b)

__attribute__ ((target ("avx512bw,avx512vnni"))) static guint64
loop_vnni (guint64 iters)
{
  __m512i a = _mm512_set1_epi8 (1), b = _mm512_set1_epi8 (1);
  __m512i c0 = _mm512_set1_epi32 (0), c1 = _mm512_set1_epi32 (1), c2 = _mm512_set1_epi32 (2),
          c3 = _mm512_set1_epi32 (3), c4 = _mm512_set1_epi32 (4), c5 = _mm512_set1_epi32 (5),
          c6 = _mm512_set1_epi32 (6), c7 = _mm512_set1_epi32 (7), c8 = _mm512_set1_epi32 (8),
          c9 = _mm512_set1_epi32 (9), c10 = _mm512_set1_epi32 (10),
          c11 = _mm512_set1_epi32 (11), c12 = _mm512_set1_epi32 (12),
          c13 = _mm512_set1_epi32 (13), c14 = _mm512_set1_epi32 (14),
          c15 = _mm512_set1_epi32 (15);

  for (guint64 i = 0; i < iters; i++)
    {
      STEP_VNNI (c0);
      STEP_VNNI (c1);
      STEP_VNNI (c2);
      STEP_VNNI (c3);
      STEP_VNNI (c4);
      STEP_VNNI (c5);
      STEP_VNNI (c6);
      STEP_VNNI (c7);
      STEP_VNNI (c8);
      STEP_VNNI (c9);
      STEP_VNNI (c10);
      STEP_VNNI (c11);
      STEP_VNNI (c12);
      STEP_VNNI (c13);
      STEP_VNNI (c14);
      STEP_VNNI (c15);
    }
  c0 = _mm512_add_epi32 (_mm512_add_epi32 (_mm512_add_epi32 (c0, c1), _mm512_add_epi32 (c2, c3)),
                         _mm512_add_epi32 (_mm512_add_epi32 (c4, c5), _mm512_add_epi32 (c6, c7)));
  c8 = _mm512_add_epi32 (_mm512_add_epi32 (_mm512_add_epi32 (c8, c9), _mm512_add_epi32 (c10, c11)),
                         _mm512_add_epi32 (_mm512_add_epi32 (c12, c13), _mm512_add_epi32 (c14, c15)));
  /* One lane keeps the loop (GCC 12 warns on the reduce and cast intrinsics). */
  {
    gint32 lanes[16];

    _mm512_storeu_si512 (lanes, _mm512_add_epi32 (c0, c8));
    return (guint32) lanes[0];
  }
}

#define STEP_AVX2(c) \
  OPAQUE (a);        \
  c = _mm256_add_epi32 (c, _mm256_madd_epi16 (_mm256_maddubs_epi16 (a, b), ones))

__attribute__ ((target ("avx2"))) static guint64
loop_avx2 (guint64 iters)
{
  __m256i a = _mm256_set1_epi8 (1), b = _mm256_set1_epi8 (1), ones = _mm256_set1_epi16 (1);
  __m256i c0 = _mm256_set1_epi32 (0), c1 = _mm256_set1_epi32 (1), c2 = _mm256_set1_epi32 (2),
          c3 = _mm256_set1_epi32 (3), c4 = _mm256_set1_epi32 (4), c5 = _mm256_set1_epi32 (5),
          c6 = _mm256_set1_epi32 (6), c7 = _mm256_set1_epi32 (7);

  for (guint64 i = 0; i < iters; i++)
    {
      OPAQUE (b);
      STEP_AVX2 (c0);
      STEP_AVX2 (c1);
      STEP_AVX2 (c2);
      STEP_AVX2 (c3);
      STEP_AVX2 (c4);
      STEP_AVX2 (c5);
      STEP_AVX2 (c6);
      STEP_AVX2 (c7);
    }
  c0 = _mm256_add_epi32 (_mm256_add_epi32 (_mm256_add_epi32 (c0, c1), _mm256_add_epi32 (c2, c3)),
                         _mm256_add_epi32 (_mm256_add_epi32 (c4, c5), _mm256_add_epi32 (c6, c7)));
  return (guint32) _mm256_extract_epi32 (c0, 0);
}

#undef STEP_AVX2
#undef STEP_VNNI
#undef OPAQUE

#endif

static void
peak_chunk (gsize    first,
            gsize    end,
            guint    worker,
            gpointer data)
{
  PeakJob *job = data;

  for (gsize t = first; t < end; t++)
    {
      gint64 deadline = g_get_monotonic_time () + START_WAIT_US;
      gint64 stop;
      double cpu0, cpu1;
      guint64 blocks = 0, sink = 0;

      g_atomic_int_inc (&job->arrived);
      while (g_atomic_int_get (&job->arrived) < job->n_threads
             && g_get_monotonic_time () < deadline)
        ;
      stop = g_get_monotonic_time () + (gint64) (job->seconds * 1e6);
      cpu0 = thread_cpu_seconds ();
      do
        {
          sink += job->loop (BLOCK_ITERS);
          blocks++;
        }
      while (g_get_monotonic_time () < stop);
      cpu1 = thread_cpu_seconds ();
      job->rate[t] = cpu1 > cpu0 ? blocks * BLOCK_ITERS * job->macs_per_iter / (cpu1 - cpu0) : 0;
      __atomic_fetch_add (&job->sink, sink, __ATOMIC_RELAXED);
    }
}

/**
 * dc_gemm_peak_measure:
 * @kernel: a CPU kernel's name, as dc_gemm_backend_get_kernel_name () gives
 * @n_threads: threads that run the loop at once (the benchmark's)
 * @seconds: how long each thread runs it, at most DC_GEMM_PEAK_MAX_SECONDS
 *
 * Returns: the int8 GOPS (two operations a multiply-accumulate) of @kernel's
 *   instruction mix on @n_threads threads at once, or -1 when @kernel is not
 *   one this CPU can run or whose loop exists (scalar, NEON)
 */
double
dc_gemm_peak_measure (const char *kernel,
                      guint       n_threads,
                      double      seconds)
{
  g_autofree PeakJob *job = g_new0 (PeakJob, 1);
  double total = 0;

  g_return_val_if_fail (kernel != NULL, -1);
  n_threads = CLAMP (n_threads, 1, DC_PARALLEL_MAX_THREADS);
  job->seconds = CLAMP (seconds, 1e-3, DC_GEMM_PEAK_MAX_SECONDS);
  job->n_threads = (gint) n_threads;
#ifdef DC_PEAK_X86
  if (g_str_equal (kernel, "avx512-vnni") && __builtin_cpu_supports ("avx512bw")
      && __builtin_cpu_supports ("avx512vnni"))
    {
      job->loop = loop_vnni;
      job->macs_per_iter = 16 * 64;
    }
  else if (g_str_equal (kernel, "avx2") && __builtin_cpu_supports ("avx2"))
    {
      job->loop = loop_avx2;
      job->macs_per_iter = 8 * 32;
    }
#endif
  if (job->loop == NULL)
    return -1;
  /* One chunk per thread: a thread waits at the start for the others, so
   * it cannot take a second chunk while one is unclaimed. */
  dc_parallel_for (n_threads, n_threads, 1, peak_chunk, job);
  for (guint t = 0; t < n_threads; t++)
    total += job->rate[t];
  /* Threads beyond the CPUs take turns: each ran at full rate per second
   * of its own CPU time, but not at once, so they add nothing. */
  if (n_threads > g_get_num_processors ())
    total = total * g_get_num_processors () / n_threads;
  return total * 2 / 1e9;
}
