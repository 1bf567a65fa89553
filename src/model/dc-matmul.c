/* dc-matmul.c: the training model's one matrix product (dc-matmul.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-matmul.h"

#include "engine/dc-gemm.h"
#include "engine/dc-parallel.h"

#include <string.h>

/* Quantized operands kept between products of one thread: a step makes
 * thousands of small products (six per head and sequence), and allocating
 * and zeroing their operands each time showed in the profile. Only the
 * buffers are reused; every product packs all of its values anew. */
typedef struct
{
  DcQuantMatrix *m;
  gsize          cap_values;   /* allocated length of m->q */
  gsize          cap_vectors;  /* allocated length of m->exponent */
} QuantSlot;

/* One thread's backend and operand buffers. */
typedef struct
{
  DcGemmBackend *cpu;   /* owned */
  QuantSlot      qa, qb;
  QuantSlot      sa, sb;       /* a causal product's K slices of qa and qb */
  float         *block;        /* a causal product's (CAUSAL_BLOCK, n) output block */
  gsize          block_cap;
} Lane;

/* Rows of a causal product computed together: each block skips what lies
 * past its last row (or before its first), so with 32 rows a 128-row
 * product does 5/8 of the full one's multiply-adds; smaller blocks skip
 * more but make more, smaller products (four GEMM calls per product of the
 * width-128 model's attention here, eight with 16 rows). */
#define CAUSAL_BLOCK 32

/* Below about 2 M multiply-adds a product runs on its caller alone: waking
 * helpers costs more than they save (the GEMM applies its own finer limit
 * per product above this). */
#define THREADED_MIN_MACS (1u << 21)

struct _DcMatmul
{
  gboolean        f32_reference;
  guint           n_threads;
  guint           n_workers;
  Lane            owner;        /* the owning thread's */
  Lane           *workers;      /* (n_workers): a parallel pass's */
  DcGemmBackend  *device;       /* borrowed (nullable): products of ≥ offload_min MACs */
  guint64         offload_min;
  DcMatmulTimes   times;
};

/*
 * dc_quant_pack over vectors whose elements are strided (columns of a
 * row-major matrix) walks memory across rows once per vector; copying the
 * vectors into contiguous rows first (a blocked transpose) reads each cache
 * line once. The vectors, hence the bits, are the same either way.
 */
/* Each thread's transpose buffer, kept between products and grown when
 * one needs more: a fresh buffer per product came from the OS zeroed page
 * by page (glibc returns freed large blocks), and those page faults were a
 * tenth of a training step's CPU time. */
typedef struct
{
  gsize  n;
  float *data;
} TransposeBuffer;

static void
transpose_buffer_free (gpointer data)
{
  TransposeBuffer *buffer = data;

  g_free (buffer->data);
  g_free (buffer);
}

static GPrivate transpose_buffer_key = G_PRIVATE_INIT (transpose_buffer_free);

static float *
transpose_buffer (gsize n)
{
  TransposeBuffer *buffer = g_private_get (&transpose_buffer_key);

  if (buffer == NULL)
    {
      buffer = g_new0 (TransposeBuffer, 1);
      g_private_set (&transpose_buffer_key, buffer);
    }
  if (buffer->n < n)
    {
      g_free (buffer->data);
      buffer->data = g_new (float, n);
      buffer->n = n;
    }
  return buffer->data;
}

/* One cache line of floats. */
#define TRANSPOSE_PAD 16

static gboolean
pack_serial (const char     *what,
             const float    *src,
             gsize           vector_stride,
             gsize           k_stride,
             DcQuantMatrix  *out,
             GError        **error)
{
  float *rows;
  gsize nv = out->n_vectors, k = out->k;
  /* The transposed rows are TRANSPOSE_PAD floats longer than k: at k =
   * 4096 (a weight gradient's operand) rows 16 KiB apart all fell into the
   * same L1 sets, and the transpose's stores evicted each other. */
  gsize ld = k + TRANSPOSE_PAD;

  /* Rows, and columns of a row-major (k, ≥ nv) matrix: dc_quant_pack's own
   * SIMD packers (the column one quantizes and transposes in one pass, with
   * no float copy in between). */
  if (k_stride == 1 || vector_stride == 1 || k < 2)
    return dc_quant_pack (what, src, vector_stride, k_stride, out, error);
  rows = transpose_buffer (nv * ld);
  for (gsize i0 = 0; i0 < k; i0 += 32)
    for (gsize v0 = 0; v0 < nv; v0 += 32)
      for (gsize i = i0; i < MIN (i0 + 32, k); i++)
        for (gsize v = v0; v < MIN (v0 + 32, nv); v++)
          rows[v * ld + i] = src[v * vector_stride + i * k_stride];
  return dc_quant_pack (what, rows, ld, 1, out, error);
}

/* Operands of at least this many values are packed by several threads. */
#define PARALLEL_PACK_MIN 16384
/* Values per chunk of a parallel pack: enough to cover a wake-up. */
#define PACK_CHUNK_VALUES 4096
/* Values per thread of a parallel pack, at least: half PARALLEL_PACK_MIN,
 * so an operand that is packed in parallel at all gets 2 threads, and one
 * of 64k values (the default size's) 8, not 16 that mostly wait to wake. */
#define PACK_VALUES_PER_THREAD (PARALLEL_PACK_MIN / 2)
/* Vectors per chunk, at least, when their elements are strided (columns of
 * a row-major matrix, the weight gradients' operands): 16 floats are one
 * cache line of each source row. With one column per chunk (K = 4096 rows
 * gave 4096 / 4096 = 1) every chunk read a whole line per value it used,
 * 16 times the operand's bytes in all. */
#define PACK_STRIDED_MIN_VECTORS 16

/* Vectors per chunk of a parallel pack of (·, k) vectors with @k_stride. */
static gsize
pack_chunk_vectors (gsize k,
                    gsize k_stride)
{
  gsize chunk = MAX (PACK_CHUNK_VALUES / MAX (k, 1), 1);

  if (k_stride != 1)
    chunk = MAX (chunk, PACK_STRIDED_MIN_VECTORS);
  return chunk;
}

typedef struct
{
  const char    *what;
  const float   *src;
  gsize          vector_stride;
  gsize          k_stride;
  DcQuantMatrix *out;
  gint           failed;  /* atomic */
} PackJob;

static void
pack_chunk (gsize    v0,
            gsize    v1,
            guint    worker,
            gpointer data)
{
  PackJob *job = data;
  gsize k = job->out->k;
  DcQuantMatrix view = { v1 - v0, k, job->out->q + v0 * k, job->out->exponent + v0 };

  if (!pack_serial (job->what, job->src + v0 * job->vector_stride, job->vector_stride,
                    job->k_stride, &view, NULL))
    g_atomic_int_set (&job->failed, 1);
}

/*
 * pack_serial, with the vectors cut into fixed chunks packed on the engine's
 * pool. Every vector is transposed and quantized on its own, so the split
 * cannot change a bit; it takes the packing off the critical path of the
 * large products, where it was the main thread's work while the other cores
 * waited. On any failure the whole operand is packed again on this thread,
 * so that the error names the same vector as before.
 */
static gboolean
pack (const char     *what,
      const float    *src,
      gsize           vector_stride,
      gsize           k_stride,
      DcQuantMatrix  *out,
      guint           n_threads,
      GError        **error)
{
  PackJob job = { what, src, vector_stride, k_stride, out, 0 };
  gsize nv = out->n_vectors, k = out->k, chunk;

  if (n_threads <= 1 || nv < 2 || nv * k < PARALLEL_PACK_MIN)
    return pack_serial (what, src, vector_stride, k_stride, out, error);
  chunk = pack_chunk_vectors (k, k_stride);
  /* Threads capped by the work: each gets PACK_VALUES_PER_THREAD values at
   * least. The chunks stay the same, so the bits do. */
  n_threads = (guint) CLAMP (nv * k / PACK_VALUES_PER_THREAD, 1, n_threads);
  dc_parallel_for (n_threads, nv, chunk, pack_chunk, &job);
  if (g_atomic_int_get (&job.failed))
    return pack_serial (what, src, vector_stride, k_stride, out, error);
  return TRUE;
}

typedef struct
{
  PackJob a, b;
  gsize   a_chunks;
  gsize   a_chunk, b_chunk;   /* vectors per chunk of each operand */
} PackPairJob;

/* Chunks [0, a_chunks) are A's, the rest B's. */
static void
pack_pair_chunk (gsize    c0,
                 gsize    c1,
                 guint    worker,
                 gpointer data)
{
  PackPairJob *job = data;

  for (gsize c = c0; c < c1; c++)
    {
      gboolean is_a = c < job->a_chunks;
      PackJob *one = is_a ? &job->a : &job->b;
      gsize chunk = is_a ? job->a_chunk : job->b_chunk;
      gsize v0 = (is_a ? c : c - job->a_chunks) * chunk;

      pack_chunk (v0, MIN (v0 + chunk, one->out->n_vectors), worker, one);
    }
}

/*
 * Both operands of a product packed in one call of the pool: pack ()'s
 * chunks of A, then of B. At 16 threads a weight gradient's operands (128
 * columns of 4,096 rows: 8 chunks of 16 columns) kept half the threads
 * waiting when each was packed alone, and each call is a wake-up and a
 * wait of the whole pool (docs/BENCHMARKS.md, issue 14). Every vector is
 * quantized on its own, so the chunks cannot change a bit; on any failure
 * both are packed again on this thread, A first, for the same error.
 */
static gboolean
pack_pair (const char     *what,
           const float    *a,
           gsize           a_vs,
           gsize           a_ks,
           DcQuantMatrix  *qa,
           const float    *b,
           gsize           b_vs,
           gsize           b_ks,
           DcQuantMatrix  *qb,
           guint           n_threads,
           GError        **error)
{
  PackPairJob job = { { what, a, a_vs, a_ks, qa, 0 }, { what, b, b_vs, b_ks, qb, 0 }, 0, 0, 0 };
  gsize values = qa->n_vectors * qa->k + qb->n_vectors * qb->k, b_chunks;

  if (n_threads <= 1 || values < PARALLEL_PACK_MIN)
    return pack_serial (what, a, a_vs, a_ks, qa, error) &&
           pack_serial (what, b, b_vs, b_ks, qb, error);
  job.a_chunk = pack_chunk_vectors (qa->k, a_ks);
  job.b_chunk = pack_chunk_vectors (qb->k, b_ks);
  job.a_chunks = (qa->n_vectors + job.a_chunk - 1) / job.a_chunk;
  b_chunks = (qb->n_vectors + job.b_chunk - 1) / job.b_chunk;
  /* Threads capped by the work as in pack (); the chunks stay the same. */
  n_threads = (guint) CLAMP (values / PACK_VALUES_PER_THREAD, 1, n_threads);
  dc_parallel_for (n_threads, job.a_chunks + b_chunks, 1, pack_pair_chunk, &job);
  if (g_atomic_int_get (&job.a.failed) || g_atomic_int_get (&job.b.failed))
    return pack_serial (what, a, a_vs, a_ks, qa, error) &&
           pack_serial (what, b, b_vs, b_ks, qb, error);
  return TRUE;
}

/* A DcGemmFillFunc over a PackPairJob: pack ()'s chunks, called by the
 * GEMM's own preparation. */
static gboolean
fill_operand (gboolean is_b,
              gsize    v0,
              gsize    v1,
              gpointer data)
{
  PackPairJob *job = data;
  PackJob *one = is_b ? &job->b : &job->a;
  gsize k = one->out->k;
  DcQuantMatrix view;

  v1 = MIN (v1, one->out->n_vectors);
  if (v0 >= v1)
    return TRUE;
  view = (DcQuantMatrix) { v1 - v0, k, one->out->q + v0 * k, one->out->exponent + v0 };
  if (pack_serial (one->what, one->src + v0 * one->vector_stride, one->vector_stride,
                   one->k_stride, &view, NULL))
    return TRUE;
  g_atomic_int_set (&one->failed, 1);
  return FALSE;
}

/*
 * A threaded product on the CPU whose operands the GEMM quantizes in its
 * own preparation (dc_gemm_run_fill): pack ()'s chunks of A and B, each
 * followed on the same thread by B's repacked panels or A's row sums, in
 * one call of the pool, then the tiles in a second. pack_pair () and the
 * GEMM's repack were two calls before the tiles: at 16 threads each call
 * is a wake-up and a wait of the whole pool (docs/BENCHMARKS.md, issue
 * 14). Each vector is quantized on its own: the same bits. On a value that
 * is not finite both operands are packed again on this thread, A first,
 * for pack_pair ()'s error.
 */
static gboolean
run_filled (Lane           *lane,
            guint           n_threads,
            const char     *what,
            const float    *a,
            gsize           a_vs,
            gsize           a_ks,
            DcQuantMatrix  *qa,
            const float    *b,
            gsize           b_vs,
            gsize           b_ks,
            DcQuantMatrix  *qb,
            float          *c,
            GError        **error)
{
  PackPairJob job = { { what, a, a_vs, a_ks, qa, 0 }, { what, b, b_vs, b_ks, qb, 0 }, 0, 0, 0 };
  gsize values = qa->n_vectors * qa->k + qb->n_vectors * qb->k;
  DcGemmFill fill = {
    fill_operand, &job, pack_chunk_vectors (qa->k, a_ks), pack_chunk_vectors (qb->k, b_ks),
    /* Threads capped by the work as in pack (); the chunks stay the same. */
    (guint) CLAMP (values / PACK_VALUES_PER_THREAD, 1, n_threads),
  };
  g_autoptr(GError) local = NULL;

  dc_gemm_backend_set_n_threads (lane->cpu, n_threads);
  if (dc_gemm_run_fill (lane->cpu, qa, qb, &fill, c, &local))
    return TRUE;
  if (!g_atomic_int_get (&job.a.failed) && !g_atomic_int_get (&job.b.failed))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (!pack_serial (what, a, a_vs, a_ks, qa, error) ||
      !pack_serial (what, b, b_vs, b_ks, qb, error))
    return FALSE;
  /* Not reached: a fill that failed fails again here. */
  return dc_gemm_run_packed (lane->cpu, qa, qb, c, error);
}

/* slot's matrix shaped (n_vectors, k), reallocated only when it grows. */
static DcQuantMatrix *
quant_slot_reserve (QuantSlot  *slot,
                    gsize       n_vectors,
                    gsize       k,
                    GError    **error)
{
  gsize n_values;

  if (slot->m != NULL && g_size_checked_mul (&n_values, n_vectors, k) &&
      k <= DC_GEMM_MAX_K && n_values <= slot->cap_values && n_vectors <= slot->cap_vectors)
    {
      slot->m->n_vectors = n_vectors;
      slot->m->k = k;
      return slot->m;
    }
  g_clear_pointer (&slot->m, dc_quant_matrix_free);
  slot->m = dc_quant_matrix_new (n_vectors, k, error);
  if (slot->m == NULL)
    return NULL;
  slot->cap_values = n_vectors * k;
  slot->cap_vectors = n_vectors;
  return slot->m;
}

/*
 * c (m, n) = A · Bᵀ where A's row i is a[i·a_vs + k·a_ks] and B's row j
 * is b[j·b_vs + k·b_ks], k < depth: the one place products happen.
 */
/**
 * dc_matmul_new:
 * @f32_reference: products in plain f32 (dc_gemm_reference_f32) instead of INT8
 * @n_threads: threads of the engine's pool for the owner's products; the
 *   bits do not depend on it
 * @n_workers: how many workers of a parallel pass use dc_matmul_run_in_worker()
 *
 * Returns: (transfer full): the product's state
 */
DcMatmul *
dc_matmul_new (gboolean f32_reference,
               guint    n_threads,
               guint    n_workers)
{
  DcMatmul *self = g_new0 (DcMatmul, 1);

  self->f32_reference = f32_reference;
  self->n_threads = MAX (n_threads, 1);
  self->n_workers = MAX (n_workers, 1);
  /* The CPU backend cannot fail to open. */
  self->owner.cpu = dc_gemm_backend_new (DC_BACKEND_CPU, NULL);
  g_assert (self->owner.cpu != NULL);
  self->workers = g_new0 (Lane, self->n_workers);
  for (guint w = 0; w < self->n_workers; w++)
    {
      self->workers[w].cpu = dc_gemm_backend_new (DC_BACKEND_CPU, NULL);
      g_assert (self->workers[w].cpu != NULL);
      dc_gemm_backend_set_n_threads (self->workers[w].cpu, 1);
    }
  return self;
}

static void
lane_clear (Lane *lane)
{
  g_clear_pointer (&lane->cpu, dc_gemm_backend_free);
  g_clear_pointer (&lane->qa.m, dc_quant_matrix_free);
  g_clear_pointer (&lane->qb.m, dc_quant_matrix_free);
  g_clear_pointer (&lane->sa.m, dc_quant_matrix_free);
  g_clear_pointer (&lane->sb.m, dc_quant_matrix_free);
  g_clear_pointer (&lane->block, g_free);
}

void
dc_matmul_free (DcMatmul *self)
{
  if (self == NULL)
    return;
  lane_clear (&self->owner);
  for (guint w = 0; w < self->n_workers; w++)
    lane_clear (&self->workers[w]);
  g_free (self->workers);
  g_free (self);
}

/**
 * dc_matmul_set_device:
 * @device: (nullable): a backend (Vulkan) that must outlive @self, or %NULL
 * @offload_min: the owner's products of at least this many multiply-adds
 *   run on @device; smaller ones stay on the CPU, where a dispatch costs
 *   less than they do
 *
 * Every backend computes the same bits (docs/VERIFICATION.md), so where a
 * product runs never changes a result.
 */
void
dc_matmul_set_device (DcMatmul      *self,
                      DcGemmBackend *device,
                      guint64        offload_min)
{
  self->device = device;
  self->offload_min = offload_min;
}

/* Quantizes both operands into the lane's buffers and multiplies them on
 * the device (owner only, large products), else on the lane's CPU backend. */
static gboolean
run_on (DcMatmul     *self,
        Lane         *lane,
        guint         n_threads,
        gboolean      may_offload,
        const char   *what,
        const float  *a,
        gsize         a_vs,
        gsize         a_ks,
        gsize         m,
        const float  *b,
        gsize         b_vs,
        gsize         b_ks,
        gsize         n,
        gsize         depth,
        float        *c,
        GError      **error)
{
  guint64 macs = (guint64) m * n * depth;
  DcQuantMatrix *qa, *qb;
  gboolean offload;

  if (self->f32_reference)
    {
      dc_gemm_reference_f32 (a, a_vs, a_ks, m, b, b_vs, b_ks, n, depth, c);
      return TRUE;
    }
  if (macs < THREADED_MIN_MACS)
    n_threads = 1;
  qa = quant_slot_reserve (&lane->qa, m, depth, error);
  if (qa == NULL)
    return FALSE;
  qb = quant_slot_reserve (&lane->qb, n, depth, error);
  if (qb == NULL)
    return FALSE;
  offload = may_offload && self->device != NULL && macs >= self->offload_min;
  if (!offload && n_threads > 1 && (m + n) * depth >= PARALLEL_PACK_MIN)
    return run_filled (lane, n_threads, what, a, a_vs, a_ks, qa, b, b_vs, b_ks, qb, c, error);
  if (!pack_pair (what, a, a_vs, a_ks, qa, b, b_vs, b_ks, qb, n_threads, error))
    return FALSE;
  if (offload)
    return dc_gemm_run_packed (self->device, qa, qb, c, error);
  dc_gemm_backend_set_n_threads (lane->cpu, n_threads);
  return dc_gemm_run_packed (lane->cpu, qa, qb, c, error);
}

/**
 * dc_matmul_run:
 * @what: names the product in error messages ("mlp c_fc", …)
 * @c: (out caller-allocates): (m, n), row-major
 *
 * c = A · Bᵀ on the owner's thread (see the file header for the layout).
 * Fails only when an operand is not finite or a backend fails.
 */
gboolean
dc_matmul_run (DcMatmul     *self,
               const char   *what,
               const float  *a,
               gsize         a_vs,
               gsize         a_ks,
               gsize         m,
               const float  *b,
               gsize         b_vs,
               gsize         b_ks,
               gsize         n,
               gsize         depth,
               float        *c,
               GError      **error)
{
  DcParallelStats before, after;
  gint64 start = g_get_monotonic_time ();
  gboolean ok;

  dc_parallel_get_stats (&before);
  ok = run_on (self, &self->owner, self->n_threads, TRUE, what, a, a_vs, a_ks, m, b, b_vs, b_ks,
               n, depth, c, error);
  dc_parallel_get_stats (&after);
  self->times.ns += (guint64) (g_get_monotonic_time () - start) * 1000;
  self->times.wait_ns += after.wait_ns - before.wait_ns;
  return ok;
}

/**
 * dc_matmul_run_in_worker:
 * @worker: the pool's worker index of the calling chunk, below n_workers
 *
 * dc_matmul_run() inside a parallel pass: this worker's buffers and CPU
 * backend, one thread, never the device.
 */
gboolean
dc_matmul_run_in_worker (DcMatmul     *self,
                         guint         worker,
                         const char   *what,
                         const float  *a,
                         gsize         a_vs,
                         gsize         a_ks,
                         gsize         m,
                         const float  *b,
                         gsize         b_vs,
                         gsize         b_ks,
                         gsize         n,
                         gsize         depth,
                         float        *c,
                         GError      **error)
{
  g_return_val_if_fail (worker < self->n_workers, FALSE);
  return run_on (self, &self->workers[worker], 1, FALSE, what, a, a_vs, a_ks, m, b, b_vs, b_ks,
                 n, depth, c, error);
}

/* Elements [k0, k0 + len) of every vector of @src into @slot's matrix; the
 * exponents are the whole vectors' (each vector was quantized whole). */
static DcQuantMatrix *
slice_k (QuantSlot            *slot,
         const DcQuantMatrix  *src,
         gsize                 v0,
         gsize                 v1,
         gsize                 k0,
         gsize                 len,
         GError              **error)
{
  DcQuantMatrix *out = quant_slot_reserve (slot, v1 - v0, len, error);

  if (out == NULL)
    return NULL;
  for (gsize v = v0; v < v1; v++)
    memcpy (out->q + (v - v0) * len, src->q + v * src->k + k0, len);
  memcpy (out->exponent, src->exponent + v0, (v1 - v0) * sizeof (gint32));
  return out;
}

/**
 * dc_matmul_run_causal_in_worker:
 * @causal: which zeros of the product it may skip (#DcMatmulCausal)
 *
 * dc_matmul_run_in_worker() for a causal attention product: the rows are
 * computed in blocks of CAUSAL_BLOCK that leave out the outputs or the
 * stretch of K that the causal mask makes zero, and a block of A's rows is
 * quantized over its own stretch only (5/8 of the packing at 128 rows).
 * Every wanted element is the same exact int32 sum with the same
 * exponents, so the bits are those of the full product.
 */
gboolean
dc_matmul_run_causal_in_worker (DcMatmul       *self,
                                guint           worker,
                                DcMatmulCausal  causal,
                                const char     *what,
                                const float    *a,
                                gsize           a_vs,
                                gsize           a_ks,
                                gsize           m,
                                const float    *b,
                                gsize           b_vs,
                                gsize           b_ks,
                                gsize           n,
                                gsize           depth,
                                float          *c,
                                GError        **error)
{
  Lane *lane;
  DcQuantMatrix *qa, *qb;

  g_return_val_if_fail (worker < self->n_workers, FALSE);
  g_return_val_if_fail (causal != DC_MATMUL_CAUSAL_OUT || m == n, FALSE);
  lane = &self->workers[worker];
  if (self->f32_reference || m <= CAUSAL_BLOCK)
    return run_on (self, lane, 1, FALSE, what, a, a_vs, a_ks, m, b, b_vs, b_ks, n, depth, c,
                   error);
  /* A is quantized whole here only for the output mask; otherwise each
   * block quantizes its own rows over its stretch of K below. */
  if (causal == DC_MATMUL_CAUSAL_OUT)
    {
      qa = quant_slot_reserve (&lane->qa, m, depth, error);
      if (qa == NULL || !pack (what, a, a_vs, a_ks, qa, 1, error))
        return FALSE;
    }
  else
    {
      qa = NULL;
    }
  qb = quant_slot_reserve (&lane->qb, n, depth, error);
  if (qb == NULL || !pack (what, b, b_vs, b_ks, qb, 1, error))
    return FALSE;
  dc_gemm_backend_set_n_threads (lane->cpu, 1);
  if (causal == DC_MATMUL_CAUSAL_OUT && lane->block_cap < CAUSAL_BLOCK * n)
    {
      g_free (lane->block);
      lane->block = g_new (float, CAUSAL_BLOCK * n);
      lane->block_cap = CAUSAL_BLOCK * n;
    }

  for (gsize i0 = 0; i0 < m; i0 += CAUSAL_BLOCK)
    {
      gsize i1 = MIN (i0 + CAUSAL_BLOCK, m);
      DcQuantMatrix va, vb;

      if (causal == DC_MATMUL_CAUSAL_OUT)
        {
          /* Rows [i0, i1) against B's first i1 vectors: whole vectors, so
           * views of qa and qb, no copy. */
          va = (DcQuantMatrix) { i1 - i0, depth, qa->q + i0 * depth, qa->exponent + i0 };
          vb = (DcQuantMatrix) { i1, depth, qb->q, qb->exponent };
          if (!dc_gemm_run_packed (lane->cpu, &va, &vb, lane->block, error))
            return FALSE;
          for (gsize i = i0; i < i1; i++)
            memcpy (c + i * n, lane->block + (i - i0) * i1, i1 * sizeof (float));
        }
      else
        {
          /* A's rows [i0, i1) are zero past i1 - 1 (lower) or before i0
           * (upper): K is cut to the rest, in both operands. */
          gsize k0 = causal == DC_MATMUL_CAUSAL_A_LOWER ? 0 : MIN (i0, depth);
          gsize k1 = causal == DC_MATMUL_CAUSAL_A_LOWER ? MIN (i1, depth) : depth;
          DcQuantMatrix *sa, *sb;

          if (k1 <= k0)
            {
              /* Nothing left to add: the exact sum is 0, which the epilogue
               * writes as +0. */
              memset (c + i0 * n, 0, (i1 - i0) * n * sizeof (float));
              continue;
            }
          /* The block's rows quantized over [k0, k1) alone: what is left
           * out is zero, so the largest magnitude, hence every value and
           * exponent, is that of the whole row. */
          sa = quant_slot_reserve (&lane->sa, i1 - i0, k1 - k0, error);
          if (sa == NULL)
            return FALSE;
          if (!pack (what, a + i0 * a_vs + k0 * a_ks, a_vs, a_ks, sa, 1, NULL))
            {
              /* A value that is not finite: the whole operand again, so
               * that the error names the vector and index it always did. */
              qa = quant_slot_reserve (&lane->qa, m, depth, error);
              if (qa == NULL || !pack (what, a, a_vs, a_ks, qa, 1, error))
                return FALSE;
              sa = slice_k (&lane->sa, qa, i0, i1, k0, k1 - k0, error);
              if (sa == NULL)
                return FALSE;
            }
          sb = slice_k (&lane->sb, qb, 0, n, k0, k1 - k0, error);
          if (sb == NULL || !dc_gemm_run_packed (lane->cpu, sa, sb, c + i0 * n, error))
            return FALSE;
        }
    }
  return TRUE;
}

void
dc_matmul_get_times (DcMatmul      *self,
                     DcMatmulTimes *out)
{
  *out = self->times;
}
