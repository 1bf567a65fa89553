/* dc-gpt.c: GPT-2 forward and backward (pre-norm, causal attention, ReLU MLP,
 * tied head) over a batch of byte sequences.
 *
 * Quantization (INT8 precision): every product quantizes its operands per
 * vector with power-of-two scales (dc_quant_pack, docs/VERIFICATION.md), so
 * the int32 accumulation is exact and the result is the same on every backend.
 * The activations kept for the backward pass are the float ones.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt.h"

#include <string.h>
#include <time.h>

#include "engine/dc-gemm.h"
#include "engine/dc-gemm-backend.h"
#include "engine/dc-math.h"
#include "engine/dc-parallel.h"
#include "dc-matmul.h"
#include "dc-model-error.h"

/* Attention runs its (sequence, head) pairs on up to this many threads (the
 * engine pool's own limit: each keeps its scratch here). */
#define DC_GPT_MAX_WORKERS DC_PARALLEL_MAX_THREADS

/* One worker's buffers for one (sequence, head) pair at a time. */
typedef struct
{
  guint          worker;  /* the pool's worker index, for dc_matmul_run_in_worker */
  float         *scores;  /* (T, T) */
  float         *out_a;   /* (T, D) */
  float         *out_b;   /* (T, D) */
  float         *norm_dx; /* (C): a layer norm row's input gradient */
  float         *norm_dw; /* (2C): its discarded weight and bias sums */
} HeadScratch;

typedef struct
{
  float *ln1, *ln1_mean, *ln1_rstd;  /* (BT, C), (BT), (BT) */
  float *qkv;                         /* (BT, 3C) */
  float *att;                         /* (B, H, T, T) softmax, zero above the diagonal */
  float *atty;                        /* (BT, C) heads side by side */
  float *res_mid;                     /* (BT, C) residual after attention */
  float *ln2, *ln2_mean, *ln2_rstd;
  float *fc;                          /* (BT, 4C) before ReLU */
  float *fc_act;                      /* (BT, 4C) after ReLU */
} LayerActs;

struct _DcGptRun
{
  DcGptConfig     config;
  guint           batch;
  DcGptPrecision  precision;
  guint           n_threads;
  DcMatmul       *mm;           /* owned: every product, its buffers and backends */

  /* The shape of the last forward pass. */
  guint           n_seqs;
  guint           len;
  gboolean        have_targets;

  /* The attention's probabilities are zero above the diagonal; those
   * zeros stay, as nothing else writes there, so they are written only
   * when the layout changes: the first att_zero_seqs sequences of every
   * layer hold them for rows of att_zero_len. */
  guint           att_zero_len;
  guint           att_zero_seqs;

  guint8         *inputs;   /* (BT) */
  guint8         *targets;  /* (BT) */
  float          *res;      /* (L + 1, BT, C) residual stream at each block's input */
  LayerActs      *layers;
  float          *lnf, *lnf_mean, *lnf_rstd;
  float          *logits;   /* (BT, V) */
  float          *probs;    /* (BT, V) */
  float          *row_loss; /* (BT) */

  /* Backward scratch. */
  float          *d_res;    /* (BT, C) */
  float          *d_a;      /* (BT, 4C) */
  float          *d_b;      /* (BT, 4C) */
  float          *d_qkv;    /* (BT, 3C) */
  guint           n_workers;                        /* attention workers */
  HeadScratch     scratch[DC_GPT_MAX_WORKERS];

  float          *arena;
  gsize           arena_floats;

  /* The passes' time on the calling thread, by kind (DcGptRunTimes). */
  guint64         phase_ns[DC_GPT_N_PHASES];
  guint64         phase_passes[DC_GPT_N_PHASES];
  guint64         phase_threads[DC_GPT_N_PHASES];

  DcGptLayerDoneFunc layer_done;  /* dc_gpt_run_set_layer_done_func () */
  gpointer           layer_done_data;
  gsize          *offsets;  /* (n_tensors): dc_gpt_config_tensor's offsets */
};

/* Parameter views for one call. */
typedef struct
{
  const float *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
  const float *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} LayerParams;

/* Each tensor's offset in the parameter (and gradient) vector, from the
 * run's table (looked up once, in dc_gpt_run_new). */
static gsize
tensor_offset (DcGptRun *self,
               guint     index)
{
  return self->offsets[index];
}

static void
layer_params (DcGptRun    *self,
              const float *base,
              guint        layer,
              LayerParams *out)
{
  const float **fields[] = {
    &out->ln1_w, &out->ln1_b, &out->attn_w, &out->attn_b, &out->proj_w, &out->proj_b,
    &out->ln2_w, &out->ln2_b, &out->fc_w, &out->fc_b, &out->fcproj_w, &out->fcproj_b,
  };

  for (guint i = 0; i < DC_GPT_TENSORS_PER_LAYER; i++)
    *fields[i] = base + tensor_offset (self, 2 + layer * DC_GPT_TENSORS_PER_LAYER + i);
}

/* One buffer of the arena: where its pointer goes and how many floats. */
typedef struct
{
  float **field;
  gsize   n;
} ArenaRegion;

/* The arena's one table: every float buffer of a run of @self->config and
 * @self->batch, and its length, in order; self->layers and self->n_workers
 * must be set. dc_gpt_train_memory () sizes the arena with the same table. */
static GArray *
arena_table (DcGptRun *self)
{
  const DcGptConfig *config = &self->config;
  GArray *table = g_array_new (FALSE, FALSE, sizeof (ArenaRegion));
  gsize bt = (gsize) self->batch * config->seq;
  gsize c = config->width, t = config->seq, v = config->vocab;
  gsize d = c / config->n_head;

#define REGION(field, count) \
  G_STMT_START { ArenaRegion r_ = { &(field), (count) }; g_array_append_val (table, r_); } G_STMT_END
  REGION (self->res, (config->n_layer + 1) * bt * c);
  for (guint l = 0; l < config->n_layer; l++)
    {
      LayerActs *a = &self->layers[l];

      REGION (a->ln1, bt * c);
      REGION (a->ln1_mean, bt);
      REGION (a->ln1_rstd, bt);
      REGION (a->qkv, bt * 3 * c);
      REGION (a->att, (gsize) self->batch * config->n_head * t * t);
      REGION (a->atty, bt * c);
      REGION (a->res_mid, bt * c);
      REGION (a->ln2, bt * c);
      REGION (a->ln2_mean, bt);
      REGION (a->ln2_rstd, bt);
      REGION (a->fc, bt * 4 * c);
      REGION (a->fc_act, bt * 4 * c);
    }
  REGION (self->lnf, bt * c);
  REGION (self->lnf_mean, bt);
  REGION (self->lnf_rstd, bt);
  REGION (self->logits, bt * v);
  REGION (self->probs, bt * v);
  REGION (self->row_loss, bt);
  REGION (self->d_res, bt * c);
  REGION (self->d_a, bt * 4 * c);
  REGION (self->d_b, bt * 4 * c);
  REGION (self->d_qkv, bt * 3 * c);
  for (guint w = 0; w < self->n_workers; w++)
    {
      REGION (self->scratch[w].scores, t * t);
      REGION (self->scratch[w].out_a, t * d);
      REGION (self->scratch[w].out_b, t * d);
      REGION (self->scratch[w].norm_dx, c);
      REGION (self->scratch[w].norm_dw, 2 * c);
    }
#undef REGION
  return table;
}

static gsize
arena_floats (GArray *table)
{
  gsize total = 0;

  for (guint i = 0; i < table->len; i++)
    total += g_array_index (table, ArenaRegion, i).n;
  return total;
}

/**
 * dc_gpt_run_new:
 * @batch: the most sequences one call takes
 * @n_threads: threads of the engine's pool; 0 for the process default
 *   (dc_parallel_get_default_threads: `--threads`, the settings); results
 *   do not depend on it
 *
 * Returns: (transfer full): the workspace for forward and backward passes
 */
DcGptRun *
dc_gpt_run_new (const DcGptConfig *config,
                guint              batch,
                DcGptPrecision     precision,
                guint              n_threads)
{
  DcGptRun *self = g_new0 (DcGptRun, 1);
  gsize bt = (gsize) batch * config->seq;
  g_autoptr(GArray) table = NULL;
  float *p;

  g_return_val_if_fail (dc_gpt_config_validate (config, NULL), NULL);
  self->config = *config;
  self->batch = batch;
  self->precision = precision;
  self->n_threads = n_threads > 0 ? n_threads : dc_parallel_get_default_threads ();
  self->n_workers = MIN (self->n_threads, DC_GPT_MAX_WORKERS);
  self->mm = dc_matmul_new (precision == DC_GPT_PRECISION_F32, self->n_threads, self->n_workers);
  self->inputs = g_new0 (guint8, bt);
  self->targets = g_new0 (guint8, bt);
  self->layers = g_new0 (LayerActs, config->n_layer);
  self->offsets = g_new (gsize, dc_gpt_config_n_tensors (config));
  for (guint i = 0; i < dc_gpt_config_n_tensors (config); i++)
    {
      DcGptTensor info;

      dc_gpt_config_tensor (config, i, &info);
      self->offsets[i] = info.offset;
    }
  for (guint w = 0; w < self->n_workers; w++)
    self->scratch[w].worker = w;

  table = arena_table (self);
  self->arena_floats = arena_floats (table);
  self->arena = g_new0 (float, self->arena_floats);
  p = self->arena;
  for (guint i = 0; i < table->len; i++)
    {
      ArenaRegion *r = &g_array_index (table, ArenaRegion, i);

      *r->field = p;
      p += r->n;
    }
  return self;
}

/* The arena's size in bytes: activations and backward scratch. */
gsize
dc_gpt_run_get_arena_bytes (DcGptRun *self)
{
  return self->arena_floats * sizeof (float);
}

/**
 * dc_gpt_train_memory:
 * @config: a valid config
 * @batch: sequences per step
 * @n_threads: the trainer's threads (the attention scratch is per worker)
 * @out: (out): the parts
 *
 * What training @config at @batch takes in this process's memory, before
 * anything is allocated: the weights and both Adam moments, the gradient and
 * the arena are exact (the same table dc_gpt_run_new () allocates); the
 * products' int8 operands are a bound (both operands of the largest product,
 * an f32 row copy of one, and their exponents). The app and `train
 * --dry-run` show it before Start.
 */
void
dc_gpt_train_memory (const DcGptConfig *config,
                     guint              batch,
                     guint              n_threads,
                     DcGptMemory       *out)
{
  DcGptRun sizing = { 0 };
  g_autoptr(GArray) table = NULL;
  guint64 n_params = dc_gpt_config_n_params (config);
  guint64 bt = (guint64) batch * config->seq, c = config->width;
  guint64 largest;

  sizing.config = *config;
  sizing.batch = batch;
  sizing.n_workers = MIN (n_threads > 0 ? n_threads : dc_parallel_get_default_threads (),
                          DC_GPT_MAX_WORKERS);
  sizing.layers = g_new0 (LayerActs, config->n_layer);
  table = arena_table (&sizing);
  g_free (sizing.layers);

  /* The largest operand of a product: the MLP's (BT, 4C) activations or
   * its (4C, C) weights, or the head's (BT, V) logits. */
  largest = MAX (MAX (bt * 4 * c, 4 * c * c), bt * config->vocab);
  out->n_params = n_params;
  out->params_bytes = 3 * sizeof (float) * n_params;
  out->grads_bytes = sizeof (float) * n_params;
  out->arena_bytes = sizeof (float) * arena_floats (table);
  out->scratch_bytes = 2 * largest + sizeof (float) * largest
                       + 2 * sizeof (gint32) * MAX (bt, 4 * c)  /* exponents */
                       + 2 * bt;                                /* inputs and targets */
  out->total_bytes = out->params_bytes + out->grads_bytes + out->arena_bytes + out->scratch_bytes;
}

void
dc_gpt_run_free (DcGptRun *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->mm, dc_matmul_free);
  g_free (self->inputs);
  g_free (self->targets);
  g_free (self->layers);
  g_free (self->arena);
  g_free (self->offsets);
  g_free (self);
}

guint
dc_gpt_run_get_batch (DcGptRun *self)
{
  return self->batch;
}

/**
 * dc_gpt_run_get_logits:
 *
 * Returns: (transfer none): (n_seqs · len, V) logits of the last forward pass
 */
const float *
dc_gpt_run_get_logits (DcGptRun *self)
{
  return self->logits;
}

/* The calling thread's products, and a parallel pass's (dc-matmul.h). */
#define matmul(self, ...) dc_matmul_run ((self)->mm, __VA_ARGS__)
#define matmul_in(self, hs, ...) dc_matmul_run_in_worker ((self)->mm, (hs)->worker, __VA_ARGS__)
/* A causal attention product: the masked zeros are skipped (dc-matmul.h). */
#define matmul_causal(self, hs, causal, ...) \
  dc_matmul_run_causal_in_worker ((self)->mm, (hs)->worker, DC_MATMUL_CAUSAL_##causal, __VA_ARGS__)

void
dc_gpt_run_get_times (DcGptRun      *self,
                      DcGptRunTimes *out)
{
  DcMatmulTimes t;

  dc_matmul_get_times (self->mm, &t);
  out->gemm_ns = t.ns;
  out->gemm_wait_ns = t.wait_ns;
  memcpy (out->phase_ns, self->phase_ns, sizeof self->phase_ns);
  memcpy (out->phase_passes, self->phase_passes, sizeof self->phase_passes);
  memcpy (out->phase_threads, self->phase_threads, sizeof self->phase_threads);
}

const char *
dc_gpt_phase_to_string (DcGptPhase phase)
{
  static const char *const names[DC_GPT_N_PHASES] = {
    "embed", "norm", "attention", "bias", "loss",
  };

  g_return_val_if_fail (phase < DC_GPT_N_PHASES, "unknown");
  return names[phase];
}

/* A monotonic clock in ns: passes take microseconds, below
 * g_get_monotonic_time ()'s resolution. */
static guint64
now_ns (void)
{
  struct timespec t;

  clock_gettime (CLOCK_MONOTONIC, &t);
  return (guint64) t.tv_sec * 1000000000u + (guint64) t.tv_nsec;
}

static void
phase_add (DcGptRun   *self,
           DcGptPhase  phase,
           guint64     start_ns,
           guint       n_threads)
{
  self->phase_ns[phase] += now_ns () - start_ns;
  self->phase_passes[phase]++;
  self->phase_threads[phase] += n_threads;
}

/**
 * dc_gpt_run_set_device:
 * @device: (nullable): a backend (Vulkan) that must outlive @self, or %NULL
 * @offload_min: products of at least this many multiply-adds run on @device;
 *   smaller ones stay on the CPU, where a dispatch costs less than they do
 *
 * Every backend computes the same bits (docs/VERIFICATION.md), so where a
 * product runs never changes a result.
 */
void
dc_gpt_run_set_device (DcGptRun      *self,
                       DcGemmBackend *device,
                       guint64        offload_min)
{
  dc_matmul_set_device (self->mm, device, offload_min);
}

/*
 * Everything between the products runs on the engine's pool too. Each pass
 * is cut into fixed chunks (never derived from the thread count) and every
 * output element is computed by one thread with the serial loop's operations
 * in the serial loop's order: row passes own whole rows; sums over rows
 * (bias and norm gradients, the embeddings' backward) own whole columns and
 * add their rows in order. So the bits are those of the serial code at any
 * thread count.
 */

/* Below this many element operations a pass stays on the caller. Waking a
 * helper costs about what 2^15 simple float operations take on a quiet
 * machine, but every spread pass is also a point where the caller may wait
 * for a helper the scheduler has preempted (a loaded machine), so a pass
 * spreads only when its work is several times a wake-up: 2^17. */
#define SPREAD_MIN_WORK (1u << 17)
/* Elements per chunk of an elementwise pass: a few pages, so a chunk
 * outweighs its claim. */
#define ELEMENT_CHUNK 8192
/* Columns per chunk of a column pass (sums over all rows): 8, one AVX
 * register of sums kept in registers for the whole pass. A column pass is
 * split only by columns (each column's rows must be added in order), and
 * the width-128 model's passes have 128 columns: 64 per chunk left 2 chunks,
 * so 14 of 16 cores idled through every norm and bias gradient; with 8 there
 * are 16 (48 and 64 for the 3C and 4C biases). */
#define COLUMN_CHUNK 8
/* Columns per chunk of the passes that add rows into rows of another
 * matrix in memory (the embeddings' and the head's gradients): 16 floats,
 * a cache line, so that two chunks rarely write the same line. */
#define SCATTER_COLUMN_CHUNK 16

/* What one pass reads and writes; each kernel documents its fields. */
typedef struct
{
  DcGptRun     *self;
  const float  *x, *dy, *w, *b, *mean, *rstd;
  const guint8 *ids;
  float        *y, *y2, *y3;
  gsize         rows, n;
} Span;

/* Element operations each thread of a spread pass gets, at least: the
 * threads that join a pass are capped by its work, so a pass just above
 * SPREAD_MIN_WORK wakes 2 threads and one of 2^19 operations (the width-128
 * model's c_proj bias, 4096 × 128) 8, not 16 that would each spend about
 * as long waking as computing. Half SPREAD_MIN_WORK, so a pass
 * that spreads at all gets 2 threads. Only how many threads take the fixed
 * chunks changes, never the chunks, so the bits cannot. */
#define SPREAD_WORK_PER_THREAD (SPREAD_MIN_WORK / 2)

static DcGptPhase phase_of (DcParallelFunc func);

static void
spread (DcGptRun       *self,
        gsize           n_items,
        gsize           chunk,
        gsize           work,
        DcParallelFunc  func,
        Span           *span)
{
  guint64 start = now_ns ();
  guint n_threads = 1;

  span->self = self;
  if (work >= SPREAD_MIN_WORK)
    n_threads = (guint) MIN ((gsize) self->n_threads, work / SPREAD_WORK_PER_THREAD);
  dc_parallel_for (n_threads, n_items, MAX (chunk, 1), func, span);
  phase_add (self, phase_of (func), start, n_threads);
}

/* Rows per chunk for rows of n values. */
static gsize
row_chunk (gsize n)
{
  return MAX (ELEMENT_CHUNK / MAX (n, 1), 1);
}

/* y = x + y2 (elementwise; y may be x or y2). */
static void
add_chunk (gsize b0, gsize b1, guint worker, gpointer data)
{
  Span *s = data;

  dc_math_add (s->x + b0, s->y2 + b0, s->y + b0, b1 - b0);
}

static void
add_rows (DcGptRun    *self,
          const float *x,
          float       *y,
          gsize        n)
{
  Span s = { .x = x, .y = y, .y2 = y };

  spread (self, n, ELEMENT_CHUNK, n, add_chunk, &s);
}

/* y (rows, n) += b (n); with y2, also y2 = relu (y) in the same pass. */
static void
bias_chunk (gsize r0, gsize r1, guint worker, gpointer data)
{
  Span *s = data;

  for (gsize r = r0; r < r1; r++)
    dc_math_bias_relu (s->y + r * s->n, s->b, s->y2 != NULL ? s->y2 + r * s->n : NULL, s->n);
}

static void
relu_backward_chunk (gsize i0, gsize i1, guint worker, gpointer data)
{
  Span *s = data;

  dc_math_relu_backward (s->x + i0, s->dy + i0, s->y + i0, i1 - i0);
}

/* y2[j] = Σ_r dy[r][j] in row order, for columns [j0, j1). The sums stay
 * in registers (a lane per column; lanes are independent, so the vector adds
 * are the serial loop's adds) and are stored once. */
static void
column_sum_chunk (gsize j0, gsize j1, guint worker, gpointer data)
{
  Span *s = data;
  float acc[COLUMN_CHUNK] = { 0 };
  const float *dy = s->dy + j0;

  if (j1 - j0 == COLUMN_CHUNK)
    for (gsize r = 0; r < s->rows; r++)
      for (gsize j = 0; j < COLUMN_CHUNK; j++)
        acc[j] = acc[j] + dy[r * s->n + j];
  else
    for (gsize r = 0; r < s->rows; r++)
      for (gsize j = 0; j < j1 - j0; j++)
        acc[j] = acc[j] + dy[r * s->n + j];
  memcpy (s->y2 + j0, acc, (j1 - j0) * sizeof (float));
}

/* Layer norm of rows: x, w, b → y, mean → y2, rstd → y3. */
static void
layer_norm_chunk (gsize r0, gsize r1, guint worker, gpointer data)
{
  Span *s = data;

  for (gsize r = r0; r < r1; r++)
    dc_math_layer_norm (s->x + r * s->n, s->w, s->b, DC_MATH_GPT2_LN_EPS, s->y + r * s->n,
                        &s->y2[r], &s->y3[r], s->n);
}

static void
layer_norm_rows (DcGptRun    *self,
                 const float *x,
                 const float *w,
                 const float *bias,
                 gsize        rows,
                 gsize        n,
                 float       *y,
                 float       *mean,
                 float       *rstd)
{
  Span s = { .x = x, .w = w, .b = bias, .y = y, .y2 = mean, .y3 = rstd, .n = n };

  spread (self, rows, row_chunk (n), rows * n * 4, layer_norm_chunk, &s);
}

/* The input gradient of each row, added to y (d_res). The kernel also sums
 * the weight and bias gradients; here they go to the worker's discarded
 * scratch, and norm_grad_chunk forms the kept ones by columns. */
static void
layer_norm_dx_chunk (gsize r0, gsize r1, guint worker, gpointer data)
{
  Span *s = data;
  HeadScratch *hs = &s->self->scratch[worker];
  gsize n = s->n;

  memset (hs->norm_dw, 0, 2 * n * sizeof (float));
  for (gsize r = r0; r < r1; r++)
    {
      dc_math_layer_norm_backward (s->x + r * n, s->w, s->mean[r], s->rstd[r], s->dy + r * n,
                                   hs->norm_dx, hs->norm_dw, hs->norm_dw + n, n);
      dc_math_add (s->y + r * n, hs->norm_dx, s->y + r * n, n);
    }
}

/* dw → y2, db → y3 for columns [j0, j1): dc_math_layer_norm_backward's
 * accumulation, rows in order. */
static void
layer_norm_grad_chunk (gsize j0, gsize j1, guint worker, gpointer data)
{
  Span *s = data;
  float dw[COLUMN_CHUNK] = { 0 }, db[COLUMN_CHUNK] = { 0 };
  const gsize w = j1 - j0;

  /* The sums in registers, as in column_sum_chunk; no FMA contraction
   * (-ffp-contract=off), so dy * norm rounds before the add, as before. */
  for (gsize r = 0; r < s->rows; r++)
    {
      const float *dy = s->dy + r * s->n + j0, *x = s->x + r * s->n + j0;
      const float mean = s->mean[r], rstd = s->rstd[r];

      if (w == COLUMN_CHUNK)
        for (gsize j = 0; j < COLUMN_CHUNK; j++)
          {
            float norm = (x[j] - mean) * rstd;

            dw[j] = dw[j] + dy[j] * norm;
            db[j] = db[j] + dy[j];
          }
      else
        for (gsize j = 0; j < w; j++)
          {
            float norm = (x[j] - mean) * rstd;

            dw[j] = dw[j] + dy[j] * norm;
            db[j] = db[j] + dy[j];
          }
    }
  memcpy (s->y2 + j0, dw, w * sizeof (float));
  memcpy (s->y3 + j0, db, w * sizeof (float));
}

/* dx (rows, n) is added to d_res; dw, db are overwritten with the row sums. */
static void
layer_norm_rows_backward (DcGptRun    *self,
                          const float *x,
                          const float *w,
                          const float *mean,
                          const float *rstd,
                          const float *dy,
                          gsize        rows,
                          gsize        n,
                          float       *d_res,
                          float       *dw,
                          float       *db)
{
  Span s = { .x = x, .w = w, .mean = mean, .rstd = rstd, .dy = dy, .y = d_res, .y2 = dw,
             .y3 = db, .rows = rows, .n = n };

  spread (self, rows, row_chunk (n), rows * n * 12, layer_norm_dx_chunk, &s);
  spread (self, n, COLUMN_CHUNK, rows * n * 4, layer_norm_grad_chunk, &s);
}

/* Token plus position embedding of rows: ids, w (wte), b (wpe) → y; n is
 * the width, rows the sequence length (for the position). */
static void
embed_chunk (gsize r0, gsize r1, guint worker, gpointer data)
{
  Span *s = data;
  gsize c = s->n;

  for (gsize r = r0; r < r1; r++)
    {
      const float *te = s->w + (gsize) s->ids[r] * c;
      const float *pe = s->b + (r % s->rows) * c;

      for (gsize i = 0; i < c; i++)
        s->y[r * c + i] = te[i] + pe[i];
    }
}

/* The embeddings' gradients for columns [j0, j1): rows in order into
 * y (d_wte) and y2 (d_wpe, zeroed here) from dy (d_res). */
static void
embed_backward_chunk (gsize j0, gsize j1, guint worker, gpointer data)
{
  Span *s = data;
  DcGptRun *self = s->self;
  gsize c = s->n;

  for (gsize t = 0; t < self->config.seq; t++)
    for (gsize j = j0; j < j1; j++)
      s->y2[t * c + j] = 0.0f;
  for (gsize r = 0; r < s->rows; r++)
    {
      float *te = s->y + (gsize) s->ids[r] * c;
      float *pe = s->y2 + (r % self->len) * c;

      for (gsize j = j0; j < j1; j++)
        {
          te[j] = te[j] + s->dy[r * c + j];
          pe[j] = pe[j] + s->dy[r * c + j];
        }
    }
}

/* Per row of logits x (n = V): log-softmax, the target's loss into y2,
 * then the softmax into y (probs). */
static void
loss_chunk (gsize r0, gsize r1, guint worker, gpointer data)
{
  Span *s = data;
  gsize v = s->n;

  for (gsize r = r0; r < r1; r++)
    {
      /* y holds log-softmax first, then the softmax for the backward pass. */
      dc_math_log_softmax (s->x + r * v, s->y + r * v, v);
      s->y2[r] = -s->y[r * v + s->ids[r]];
      dc_math_softmax (s->x + r * v, s->y + r * v, v);
    }
}

/* d_lnf rows: y (d_a) = (y − w[target]) / rows, n = C. */
static void
head_dx_chunk (gsize r0, gsize r1, guint worker, gpointer data)
{
  Span *s = data;
  gsize c = s->n;

  for (gsize r = r0; r < r1; r++)
    {
      const float *target_row = s->w + (gsize) s->ids[r] * c;

      for (gsize i = 0; i < c; i++)
        s->y[r * c + i] = (s->y[r * c + i] - target_row[i]) / (float) s->rows;
    }
}

/* d_wte columns [j0, j1): y (d_wte) minus x (lnf) at each row's target, rows
 * in order, then every row of y divided by rows (V rows in y3's count). */
static void
head_dw_chunk (gsize j0, gsize j1, guint worker, gpointer data)
{
  Span *s = data;
  gsize c = s->n;

  for (gsize r = 0; r < s->rows; r++)
    {
      float *d_target = s->y + (gsize) s->ids[r] * c;

      for (gsize j = j0; j < j1; j++)
        d_target[j] = d_target[j] - s->x[r * c + j];
    }
  for (gsize v = 0; v < s->self->config.vocab; v++)
    for (gsize j = j0; j < j1; j++)
      s->y[v * c + j] = s->y[v * c + j] / (float) s->rows;
}

/* y (rows, n) = x (rows, k) · w (k, n) + bias, w in Hugging Face Conv1D
 * layout; act (nullable) = relu (y), in the bias's pass. */
static gboolean
linear_forward (DcGptRun     *self,
                const char   *what,
                const float  *x,
                gsize         rows,
                const float  *w,
                const float  *bias,
                gsize         k,
                gsize         n,
                float        *y,
                float        *act,
                GError      **error)
{
  Span s = { .b = bias, .y = y, .y2 = act, .n = n };

  if (!matmul (self, what, x, k, 1, rows, w, 1, n, n, k, y, error))
    return FALSE;
  spread (self, rows, row_chunk (n), rows * n * (act != NULL ? 2 : 1), bias_chunk, &s);
  return TRUE;
}

/* From dy (rows, n): dx (rows, k) = dy · wᵀ (nullable), dw (k, n) = xᵀ · dy,
 * dbias (n) = Σ rows dy in row order. dw and dbias are overwritten. */
static gboolean
linear_backward (DcGptRun     *self,
                 const char   *what,
                 const float  *x,
                 const float  *dy,
                 gsize         rows,
                 const float  *w,
                 gsize         k,
                 gsize         n,
                 float        *dx,
                 float        *dw,
                 float        *dbias,
                 GError      **error)
{
  Span s = { .dy = dy, .y2 = dbias, .rows = rows, .n = n };

  if (dx != NULL && !matmul (self, what, dy, n, 1, rows, w, n, 1, k, n, dx, error))
    return FALSE;
  if (!matmul (self, what, x, 1, k, k, dy, 1, n, n, rows, dw, error))
    return FALSE;
  /* Each chunk of columns reads dy along its rows, adding them in order. */
  spread (self, n, COLUMN_CHUNK, rows * n, column_sum_chunk, &s);
  return TRUE;
}

static float
attention_scale (guint d)
{
  /* 1/√D: exact for D = 16 and 64; otherwise one rounding, the same everywhere. */
  return 1.0f / __builtin_sqrtf ((float) d);
}

static void
head_forward (DcGptRun     *self,
              HeadScratch  *hs,
              LayerActs    *a,
              guint         b,
              guint         h,
              GError      **error)
{
  guint c = self->config.width, h_n = self->config.n_head, t_max = self->config.seq;
  guint d = c / h_n, len = self->len;
  float scale = attention_scale (d);
  const float *q = a->qkv + (gsize) b * len * 3 * c + h * d;
  const float *k = q + c;
  const float *v = q + 2 * c;
  float *att = a->att + ((gsize) b * h_n + h) * t_max * t_max;

  /* scores (len, len) = q · kᵀ */
  if (!matmul_causal (self, hs, OUT, "attention Q·Kᵀ", q, 3 * c, 1, len, k, 3 * c, 1, len, d,
                      hs->scores, error))
    return;
  for (guint t = 0; t < len; t++)
    {
      float *row = att + (gsize) t * len;

      for (guint j = 0; j <= t; j++)
        row[j] = hs->scores[t * len + j] * scale;
      dc_math_softmax (row, row, t + 1);
      if (len != self->att_zero_len || b >= self->att_zero_seqs)
        for (guint j = t + 1; j < len; j++)
          row[j] = 0.0f;
    }
  /* y (len, D) = att · v */
  if (!matmul_causal (self, hs, A_LOWER, "attention P·V", att, len, 1, len, v, 1, 3 * c, d,
                      len, hs->out_a, error))
    return;
  for (guint t = 0; t < len; t++)
    memcpy (a->atty + ((gsize) b * len + t) * c + h * d, hs->out_a + (gsize) t * d,
            d * sizeof (float));
}

static void
head_backward (DcGptRun     *self,
               HeadScratch  *hs,
               LayerActs    *a,
               const float  *d_atty,
               float        *d_qkv,
               guint         b,
               guint         h,
               GError      **error)
{
  guint c = self->config.width, h_n = self->config.n_head, t_max = self->config.seq;
  guint d = c / h_n, len = self->len;
  float scale = attention_scale (d);
  const float *q = a->qkv + (gsize) b * len * 3 * c + h * d;
  const float *k = q + c;
  const float *v = q + 2 * c;
  const float *dy = d_atty + (gsize) b * len * c + h * d;
  float *dq = d_qkv + (gsize) b * len * 3 * c + h * d;
  float *dk = dq + c;
  float *dv = dq + 2 * c;
  const float *att = a->att + ((gsize) b * h_n + h) * t_max * t_max;
  float *d_att = hs->scores;

  /* d_att (len, len) = dy · vᵀ */
  if (!matmul_causal (self, hs, OUT, "attention dP", dy, c, 1, len, v, 3 * c, 1, len, d,
                      d_att, error))
    return;
  /* dv (len, D) = attᵀ · dy */
  if (!matmul_causal (self, hs, A_UPPER, "attention dV", att, 1, len, len, dy, 1, c, d, len,
                      hs->out_a, error))
    return;
  for (guint t = 0; t < len; t++)
    memcpy (dv + (gsize) t * 3 * c, hs->out_a + (gsize) t * d, d * sizeof (float));
  /* d_scores through the causal softmax and the scale */
  for (guint t = 0; t < len; t++)
    {
      float *row = d_att + (gsize) t * len;

      dc_math_softmax_backward (att + (gsize) t * len, row, row, t + 1);
      dc_math_scale (row, scale, row, t + 1);
      for (guint j = t + 1; j < len; j++)
        row[j] = 0.0f;
    }
  /* dq (len, D) = d_scores · k;  dk (len, D) = d_scoresᵀ · q */
  if (!matmul_causal (self, hs, A_LOWER, "attention dQ", d_att, len, 1, len, k, 1, 3 * c, d,
                      len, hs->out_a, error)
      || !matmul_causal (self, hs, A_UPPER, "attention dK", d_att, 1, len, len, q, 1, 3 * c, d,
                         len, hs->out_b, error))
    return;
  for (guint t = 0; t < len; t++)
    {
      memcpy (dq + (gsize) t * 3 * c, hs->out_a + (gsize) t * d, d * sizeof (float));
      memcpy (dk + (gsize) t * 3 * c, hs->out_b + (gsize) t * d, d * sizeof (float));
    }
}

typedef struct
{
  DcGptRun    *self;
  LayerActs   *a;
  const float *d_atty;   /* NULL for the forward pass */
  float       *d_qkv;
  GMutex       lock;
  guint        error_pair; /* under lock: the pair of @error */
  GError      *error;      /* under lock */
} HeadJob;

static void
head_chunk (gsize    first,
            gsize    end,
            guint    worker,
            gpointer data)
{
  HeadJob *job = data;
  DcGptRun *self = job->self;
  HeadScratch *hs = &self->scratch[worker];

  for (gsize p = first; p < end; p++)
    {
      guint b = (guint) p / self->config.n_head, h = (guint) p % self->config.n_head;
      GError *error = NULL;

      if (job->d_atty == NULL)
        head_forward (self, hs, job->a, b, h, &error);
      else
        head_backward (self, hs, job->a, job->d_atty, job->d_qkv, b, h, &error);
      if (error != NULL)
        {
          g_mutex_lock (&job->lock);
          if (job->error == NULL || p < job->error_pair)
            {
              g_clear_error (&job->error);
              job->error = g_steal_pointer (&error);
              job->error_pair = (guint) p;
            }
          g_mutex_unlock (&job->lock);
          g_clear_error (&error);
        }
    }
}

/*
 * Every (sequence, head) pair reads and writes its own slices only, so the
 * pairs run on the engine's pool in any order and the bits do not depend on
 * the thread count; each worker uses its own scratch. The error of the
 * first failing pair (by index) is reported.
 */
static gboolean
run_heads (DcGptRun     *self,
           LayerActs    *a,
           const float  *d_atty,
           float        *d_qkv,
           GError      **error)
{
  HeadJob job = { self, a, d_atty, d_qkv, { 0 }, 0, NULL };
  gsize pairs = (gsize) self->n_seqs * self->config.n_head;
  /* The pairs' work, counted as their two products (len² × D each): the
   * threads are capped by it like a spread pass's, so the default size's
   * 16 pairs of 32 × 32 × 16 take 8 threads, not 16. */
  gsize work = pairs * self->len * self->len * (self->config.width / self->config.n_head) * 2;
  guint n_threads = (guint) CLAMP (work / SPREAD_WORK_PER_THREAD, 1, self->n_workers);
  guint64 start = now_ns ();

  g_mutex_init (&job.lock);
  dc_parallel_for (n_threads, pairs, 1, head_chunk, &job);
  g_mutex_clear (&job.lock);
  phase_add (self, DC_GPT_PHASE_ATTENTION, start, n_threads);
  if (job.error != NULL)
    {
      g_propagate_error (error, job.error);
      return FALSE;
    }
  return TRUE;
}

/* Which kind of pass a spread pass is, for the time split. */
static DcGptPhase
phase_of (DcParallelFunc func)
{
  if (func == embed_chunk || func == embed_backward_chunk)
    return DC_GPT_PHASE_EMBED;
  if (func == layer_norm_chunk || func == layer_norm_dx_chunk || func == layer_norm_grad_chunk)
    return DC_GPT_PHASE_NORM;
  if (func == loss_chunk || func == head_dx_chunk || func == head_dw_chunk)
    return DC_GPT_PHASE_LOSS;
  return DC_GPT_PHASE_BIAS;
}

static gboolean
attention_forward (DcGptRun     *self,
                   LayerActs    *a,
                   GError      **error)
{
  return run_heads (self, a, NULL, NULL, error);
}

static gboolean
attention_backward (DcGptRun     *self,
                    LayerActs    *a,
                    const float  *d_atty,
                    float        *d_qkv,
                    GError      **error)
{
  return run_heads (self, a, d_atty, d_qkv, error);
}

/**
 * dc_gpt_run_forward:
 * @params: the weights, laid out by dc_gpt_config_tensor ()
 * @inputs: (array): n_seqs × len token ids, sequence-major
 * @targets: (array) (nullable): the next token at each position; needed for
 *   the loss and for a backward pass
 * @loss: (out) (optional): mean cross-entropy over every position (nats)
 *
 * Fails only when a value is not finite (training diverged) or sizes are wrong.
 */
gboolean
dc_gpt_run_forward (DcGptRun      *self,
                    const float   *params,
                    const guint8  *inputs,
                    const guint8  *targets,
                    guint          n_seqs,
                    guint          len,
                    float         *loss,
                    GError       **error)
{
  const DcGptConfig *cfg = &self->config;
  gsize c = cfg->width, v = cfg->vocab;
  gsize bt = (gsize) n_seqs * len;
  const float *wte = params + tensor_offset (self, 0);
  const float *wpe = params + tensor_offset (self, 1);
  guint lnf_index = dc_gpt_config_n_tensors (cfg) - 2;
  const float *lnf_w = params + tensor_offset (self, lnf_index);
  const float *lnf_b = params + tensor_offset (self, lnf_index + 1);

  if (n_seqs < 1 || n_seqs > self->batch || len < 1 || len > cfg->seq)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "forward pass of %u × %u tokens does not fit a batch of %u × %u",
                   n_seqs, len, self->batch, cfg->seq);
      return FALSE;
    }
  self->n_seqs = n_seqs;
  self->len = len;
  self->have_targets = targets != NULL;
  if (len != self->att_zero_len)
    self->att_zero_seqs = 0;
  memcpy (self->inputs, inputs, bt);
  if (targets != NULL)
    memcpy (self->targets, targets, bt);

  {
    Span s = { .ids = self->inputs, .w = wte, .b = wpe, .y = self->res, .rows = len, .n = c };

    spread (self, bt, row_chunk (c), bt * c, embed_chunk, &s);
  }

  for (guint l = 0; l < cfg->n_layer; l++)
    {
      LayerActs *a = &self->layers[l];
      LayerParams p;
      const float *x = self->res + l * bt * c;
      float *out = self->res + (l + 1) * bt * c;

      layer_params (self, params, l, &p);
      layer_norm_rows (self, x, p.ln1_w, p.ln1_b, bt, c, a->ln1, a->ln1_mean, a->ln1_rstd);
      if (!linear_forward (self, "attention c_attn", a->ln1, bt, p.attn_w, p.attn_b, c, 3 * c,
                           a->qkv, NULL, error)
          || !attention_forward (self, a, error)
          || !linear_forward (self, "attention c_proj", a->atty, bt, p.proj_w, p.proj_b, c, c,
                              a->res_mid, NULL, error))
        return FALSE;
      add_rows (self, x, a->res_mid, bt * c);
      layer_norm_rows (self, a->res_mid, p.ln2_w, p.ln2_b, bt, c, a->ln2, a->ln2_mean, a->ln2_rstd);
      if (!linear_forward (self, "mlp c_fc", a->ln2, bt, p.fc_w, p.fc_b, c, 4 * c, a->fc,
                           a->fc_act, error))
        return FALSE;
      if (!linear_forward (self, "mlp c_proj", a->fc_act, bt, p.fcproj_w, p.fcproj_b, 4 * c, c,
                           out, NULL, error))
        return FALSE;
      add_rows (self, a->res_mid, out, bt * c);
    }

  /* Every layer's pairs wrote their zeros (a failed pass returned above
   * and left the record as it was, so its pairs write them again). */
  self->att_zero_len = len;
  self->att_zero_seqs = MAX (self->att_zero_seqs, n_seqs);

  layer_norm_rows (self, self->res + cfg->n_layer * bt * c, lnf_w, lnf_b, bt, c, self->lnf,
                   self->lnf_mean, self->lnf_rstd);
  /* logits (BT, V) = lnf · wteᵀ: the head is tied to the token embedding. */
  if (!matmul (self, "lm_head", self->lnf, c, 1, bt, wte, c, 1, v, c, self->logits, error))
    return FALSE;

  if (targets != NULL)
    {
      Span s = { .x = self->logits, .ids = self->targets, .y = self->probs,
                 .y2 = self->row_loss, .n = v };

      spread (self, bt, row_chunk (v), bt * v * 8, loss_chunk, &s);
      if (loss != NULL)
        *loss = dc_math_sum (self->row_loss, bt) / (float) bt;
    }
  return TRUE;
}

/**
 * dc_gpt_run_set_layer_done_func:
 * @func: (nullable): called after each block of the next backward passes
 *
 * See #DcGptLayerDoneFunc; %NULL stops the calls.
 */
void
dc_gpt_run_set_layer_done_func (DcGptRun           *self,
                                DcGptLayerDoneFunc  func,
                                gpointer            user_data)
{
  self->layer_done = func;
  self->layer_done_data = user_data;
}

/**
 * dc_gpt_run_report_layers_done:
 *
 * For gradients formed elsewhere (the resident passes, dc-gpt-vk-forward.h),
 * whole: the layer-done function's calls of a backward pass, last block
 * first, as dc_gpt_run_backward () makes them.
 */
void
dc_gpt_run_report_layers_done (DcGptRun *self)
{
  if (self->layer_done == NULL)
    return;
  for (guint l = self->config.n_layer; l-- > 0;)
    self->layer_done (tensor_offset (self, 2 + l * DC_GPT_TENSORS_PER_LAYER),
                      self->layer_done_data);
}

/**
 * dc_gpt_run_backward:
 * @grads: (out) (array): n_params gradients of the mean loss, overwritten
 *
 * Back-propagates the last forward pass, which must have had targets.
 */
gboolean
dc_gpt_run_backward (DcGptRun     *self,
                     const float  *params,
                     float        *grads,
                     GError      **error)
{
  const DcGptConfig *cfg = &self->config;
  gsize c = cfg->width, v = cfg->vocab;
  gsize bt = (gsize) self->n_seqs * self->len;
  guint lnf_index = dc_gpt_config_n_tensors (cfg) - 2;
  const float *wte = params + tensor_offset (self, 0);
  float *d_wte = grads + tensor_offset (self, 0);
  float *d_wpe = grads + tensor_offset (self, 1);
  float *d_res = self->d_res;

  g_return_val_if_fail (self->have_targets, FALSE);

  /* The loss gradient is (softmax − onehot) / BT. Only the softmax part goes
   * through the GEMMs: quantized together with the −1 of the target, the
   * small probabilities of the other 255 tokens would round to zero (7 bits
   * per vector), biasing every gradient. The onehot part is an exact row
   * lookup, subtracted afterwards; the division by BT comes last.
   *   d_lnf  (BT, C) = (probs · wte − wte[target]) / BT
   *   d_wte  (V, C)  = (probsᵀ · lnf − Σ_{r: target r = v} lnf[r]) / BT   */
  if (!matmul (self, "lm_head dX", self->probs, v, 1, bt, wte, 1, c, c, v, self->d_a, error)
      || !matmul (self, "lm_head dW", self->probs, 1, v, v, self->lnf, 1, c, c, bt,
                  d_wte, error))
    return FALSE;
  {
    Span s = { .w = wte, .x = self->lnf, .ids = self->targets, .y = self->d_a, .rows = bt,
               .n = c };

    spread (self, bt, row_chunk (c), bt * c, head_dx_chunk, &s);
    s.y = d_wte;
    spread (self, c, SCATTER_COLUMN_CHUNK, (bt + v) * c, head_dw_chunk, &s);
  }

  memset (d_res, 0, bt * c * sizeof (float));
  layer_norm_rows_backward (self, self->res + cfg->n_layer * bt * c,
                            params + tensor_offset (self, lnf_index),
                            self->lnf_mean, self->lnf_rstd, self->d_a, bt, c, d_res,
                            grads + tensor_offset (self, lnf_index),
                            grads + tensor_offset (self, lnf_index + 1));

  for (guint l = cfg->n_layer; l-- > 0;)
    {
      LayerActs *a = &self->layers[l];
      LayerParams p, g;
      const float *x = self->res + l * bt * c;

      layer_params (self, params, l, &p);
      layer_params (self, grads, l, &g);

      /* MLP: out = res_mid + c_proj(relu(c_fc(ln2(res_mid)))) */
      if (!linear_backward (self, "mlp c_proj backward", a->fc_act, d_res, bt, p.fcproj_w,
                            4 * c, c, self->d_a, (float *) g.fcproj_w, (float *) g.fcproj_b,
                            error))
        return FALSE;
      {
        Span s = { .x = a->fc, .dy = self->d_a, .y = self->d_a };

        spread (self, bt * 4 * c, ELEMENT_CHUNK, bt * 4 * c, relu_backward_chunk, &s);
      }
      if (!linear_backward (self, "mlp c_fc backward", a->ln2, self->d_a, bt, p.fc_w, c, 4 * c,
                            self->d_b, (float *) g.fc_w, (float *) g.fc_b, error))
        return FALSE;
      /* d_res now holds d(res_mid) after adding the norm's input gradient. */
      layer_norm_rows_backward (self, a->res_mid, p.ln2_w, a->ln2_mean, a->ln2_rstd, self->d_b,
                                bt, c, d_res, (float *) g.ln2_w, (float *) g.ln2_b);

      /* Attention: res_mid = x + c_proj(attn(c_attn(ln1(x)))) */
      if (!linear_backward (self, "attention c_proj backward", a->atty, d_res, bt, p.proj_w, c,
                            c, self->d_a, (float *) g.proj_w, (float *) g.proj_b, error)
          || !attention_backward (self, a, self->d_a, self->d_qkv, error)
          || !linear_backward (self, "attention c_attn backward", a->ln1, self->d_qkv, bt,
                               p.attn_w, c, 3 * c, self->d_b, (float *) g.attn_w,
                               (float *) g.attn_b, error))
        return FALSE;
      layer_norm_rows_backward (self, x, p.ln1_w, a->ln1_mean, a->ln1_rstd, self->d_b, bt, c,
                                d_res, (float *) g.ln1_w, (float *) g.ln1_b);
      /* Block l onwards (and ln_f) is final: the group may send it now. */
      if (self->layer_done != NULL)
        self->layer_done (tensor_offset (self, 2 + l * DC_GPT_TENSORS_PER_LAYER),
                          self->layer_done_data);
    }

  /* Embeddings: rows in order, so the sums are fixed. d_wte already holds
   * the head's share; the input embedding's is added to it. */
  {
    Span s = { .ids = self->inputs, .dy = d_res, .y = d_wte, .y2 = d_wpe, .rows = bt, .n = c };

    spread (self, c, SCATTER_COLUMN_CHUNK, bt * c * 2, embed_backward_chunk, &s);
  }
  return TRUE;
}
