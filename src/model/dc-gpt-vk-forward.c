/* dc-gpt-vk-forward.c: the GPT forward pass, and for training the backward
 * pass after it, recorded once on a Vulkan device
 * (shaders/resident-forward.comp, resident-loss.comp, resident-backward.comp)
 * and replayed per call.
 *
 * Layout. F (device-local, floats): the weights at offset 0 (the one weight
 * array of dc_gpt_config_tensor ()), for training their gradients next,
 * then every activation kept per layer as dc-gpt.c's LayerActs (the
 * residual stream at each block's input, the norms with their means and
 * rstds, qkv, every (sequence, head) pair's probabilities, the heads'
 * outputs, the residual after attention, the MLP before and after ReLU), the
 * final norm, the pairs' scores, the logits, and the backward's scratch.
 * Q (device-local, int8): the left and right operands of the current
 * product, sized by a dry run of the recording. E (host-visible, int32): E[0]
 * the "not finite" flag, then both operands' exponents. T (host-visible): the
 * tokens, then the targets. A product is two quantizations and one GEMM
 * dispatch (the attention's pairs side by side in each); every dispatch is
 * separated from the next by a full barrier (dc-vk-context.c's recordings),
 * so the operand buffers are reused in order.
 *
 * The order of operations is dc_gpt_run_forward ()'s and
 * dc_gpt_run_backward ()'s, and each operation is the CPU's rule bit for bit
 * (docs/VERIFICATION.md, "Operations on the GPU"). The forward gate runs
 * each forward operation once on fixed inputs against the CPU function it
 * stands for (layer norm, quantization of rows and columns, a product, bias,
 * residual add, ReLU, a causal softmax block, the loss, the embedding:
 * gate_ops ()), then a width-16 model (two layers, sequence 16, batch 2)
 * against dc_gpt_run_forward (), every logit. INT8 quantization hides most
 * one-ulp errors from the logits, hence the per-operation part. The training
 * pass adds the backward's gate (gate_backward_ops (), then that model's every
 * gradient against dc_gpt_run_backward ()). DC_TEST_BREAK_KERNEL=
 * resident-forward (or all) loads the broken twin (the exponential's
 * polynomial a term short), =resident-loss the loss's (it forgets the low
 * part of x − max), =resident-backward the backward's (the norm's input
 * gradient without its n̂ · mean (g n̂) term). The products run on
 * resident-gemm.comp, and where the device has int8 cooperative matrices
 * and their gate passes on resident-coop.comp (=resident-coop: its twin
 * forgets the last 16 bytes of K). Where their own gates pass
 * (dc-gpt-vk-rows.c), the quantizations run on resident-quant.comp's
 * coalesced tiles and the softmax rows on resident-softmax.comp, a
 * workgroup per row; the model gates then run with them.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-forward.h"
#include "dc-gpt-vk-forward-private.h"

#include <string.h>

#include "engine/dc-gemm.h"
#include "engine/dc-math.h"
#include "engine/dc-vk-context.h"
#include "dc-gpt.h"
#include "dc-gpt-model.h"
#include "dc-gpt-vk-fuse.h"
#include "dc-gpt-vk-rows.h"
#include "dc-gpt-vk-norm.h"
#include "dc-gpt-vk-softmax.h"
#include "dc-model-error.h"
#include "dc-gpt-vk-step-private.h"

/* Mirrors the push constants of shaders/resident-forward.comp. */
typedef struct
{
  guint32 op;
  guint32 a[15];
} DcVkForwardPush;

G_STATIC_ASSERT (sizeof (DcVkForwardPush) == 64);

enum
{
  OP_EMBED,
  OP_LAYER_NORM,
  OP_QUANTIZE,
  OP_GEMM,
  OP_BIAS,
  OP_ADD,
  OP_RELU,
  OP_SOFTMAX,
  OP_LOSS,
  OP_MEAN,
  /* shaders/resident-backward.comp */
  OP_HEAD_DX,
  OP_HEAD_DW,
  OP_ZERO,
  OP_LN_DX,
  OP_LN_DW,
  OP_COLSUM,
  OP_RELU_BACK,
  OP_SOFTMAX_BACK,
  OP_EMBED_BACK,
  /* shaders/resident-gemm.comp: the slices of a split product summed */
  OP_GEMM_SUM = 100,
};

/* Invocations per workgroup (the shader's local_size_x), and the most
 * workgroups one dispatch uses (the smallest maxComputeWorkGroupCount Vulkan
 * allows); the shader's loops cover the rest. */
#define FWD_GROUP 64
#define FWD_MAX_GROUPS 65535
/* Vectors up to this length are quantized one per invocation, longer ones
 * one per workgroup: the attention's heads of 8 and 16 channels and the
 * short sequences fall below it. So are columns side by side when there are
 * at least QUANT_COLUMNS_MIN of them (the attention's probabilities: 32,768
 * columns at width 128, 2,048 at the tests' 1,024 rows): 32 workgroups of
 * 64; fewer columns (a weight's 128 to 512) keep a workgroup each, which
 * spreads their long vectors over more of the device. */
#define QUANT_SMALL_K 32
#define QUANT_COLUMNS_MIN 2048
/* Outputs per side of resident-gemm.comp's workgroup (its TILE). */
#define GEMM_TILE 64
/* A product of one matrix with fewer 64 × 64 blocks than this is split over
 * K, for about this many workgroups: a few per multiprocessor of a large GPU
 * (the H200 has 132), where the weights' gradients (128 × 512 outputs,
 * 16 blocks) would otherwise occupy 16 of them. K must be this long
 * (bytes), and each slice at least GEMM_SPLIT_MIN_WORDS words of it, so that
 * a slice's work outweighs writing and re-reading its int32 partial sums. */
#define GEMM_SPLIT_BLOCKS 512
/* Rows this long or shorter are normalized (and their norm's input gradient
 * formed) a workgroup per row, their sums in shared memory: the shaders'
 * WG_SUM_MAX (sum-tree-wg.glsl: 4.6 KB, GPT-2's 768 with room). */
#define NORM_ROW_WG_MAX 1024
#define GEMM_SPLIT_MIN_K 1024
#define GEMM_SPLIT_MIN_WORDS 32

/* Which kernels run the products (pass_new ()'s gates decide): flags. */
enum
{
  PRODUCTS_TILED = 1 << 0,     /* resident-gemm.comp */
  PRODUCTS_COOP = 1 << 1,      /* resident-coop.comp, where K is a multiple of 16 */
  PRODUCTS_COOP_KHR = 1 << 2,  /* …rewritten for VK_KHR_cooperative_matrix */
};

/* resident-coop.comp's tile shapes, its specialization constants BM, BN,
 * WM, WN, BKQ, PAD, NT: the standalone GEMM's best on the H200
 * (dc-gemm-vk.c's sc128x128-w64x32-k128-p1-s1: 128 × 128 outputs, eight
 * subgroups of 64 × 32, 128 bytes of K a step, rows padded by one word),
 * and the same with 64 columns for products of at most 64 (the attention's
 * att · v and its gradients, one head's D columns), where the wide tile would
 * compute half its outputs for nothing. */
enum { COOP_WIDE, COOP_NARROW, N_COOP };
static const guint32 coop_shapes[N_COOP][7] = {
  { 128, 128, 64, 32, 8, 1, 256 },
  { 128, 64, 64, 32, 8, 1, 128 },
};
#define COOP_BM 128
#define COOP_NARROW_N 64
/* Shared memory of a shape: (BM + BN) rows of BKQ + PAD 16-byte words. */
#define COOP_SHARED(sc) (((sc)[0] + (sc)[1]) * ((sc)[4] + (sc)[5]) * 16)
/* The causal structure of the attention's products (resident-coop.comp's
 * op bits 8-9; dc-gpt.c's matmul_causal ()). */
enum { CAUSAL_NONE, CAUSAL_OUT, CAUSAL_A_LOWER, CAUSAL_A_UPPER };
/* A product on cooperative matrices of one matrix with fewer 128 × 128
 * blocks than this is split over K: two workgroups per multiprocessor of the
 * H200 (132), the most that its registers hold at once (256 invocations, at
 * most 128 registers each, of 65,536): more slices would only add partial
 * sums to write and read. Each slice is at least COOP_SPLIT_MIN_WORDS 16-byte
 * words (512 bytes, four steps) of K. */
#define COOP_SPLIT_BLOCKS 264
#define COOP_SPLIT_MIN_WORDS 32

/* One layer's activations in F, kept for the backward pass (dc-gpt.c's
 * LayerActs), offsets in floats. */
typedef struct
{
  gsize ln1, ln1_mean, ln1_rstd, qkv, att, atty, res_mid, ln2, ln2_mean, ln2_rstd, fc, fc_act;
} VkLayerActs;

struct _DcGptVkForward
{
  /* owned */
  DcVkContext   *ctx;
  DcVkPipeline  *pipeline;       /* resident-forward.comp */
  DcVkPipeline  *loss_pipeline;  /* resident-loss.comp, on the same buffers */
  DcVkPipeline  *backward_pipeline;  /* resident-backward.comp (with a backward) */
  DcVkPipeline  *gemm_pipeline;  /* resident-gemm.comp: the tiled products */
  DcVkPipeline  *coop_pipelines[N_COOP];  /* resident-coop.comp (with PRODUCTS_COOP) */
  DcVkPipeline  *colsum_pipeline;  /* resident-colsum.comp: the sums over rows (gate passed) */
  DcVkPipeline  *chains_pipeline;  /* resident-chains.comp: the column chains (gate passed) */
  DcVkPipeline  *fuse_pipeline;  /* resident-fuse.comp: producers + quantization (gate passed) */
  DcVkBuffer    *f, *q, *e, *tokens;
  /* What submit () writes to T: the tokens, then (a training pass) their
   * lists; copied into device-local T at the start of each replay. */
  DcVkBuffer    *tokens_staging;
  DcVkBuffer    *params_staging, *logits_staging, *grads_staging;
  DcVkRecording *recording;      /* the body: tokens in F, the loss (or logits) out */
  DcVkRecording *upload;         /* the weights in: params_staging → F */
  DcVkRecording *download;       /* the gradients out: F → grads_staging (with a backward) */
  VkLayerActs   *layers;         /* (n_layer) */
  /* state */
  DcGptConfig    config;
  guint          batch;
  gboolean       backward;       /* the recording ends with the gradients, not the logits */
  DcVkF32Mode    native;         /* + − × on the float unit (f32-exact.glsl's DC_NATIVE_F32) */
  gboolean       tiled;          /* the products through resident-gemm.comp (its gate passed) */
  guint          products;       /* PRODUCTS_* */
  /* Quantization through resident-quant.comp's tiles, the softmax rows
   * through resident-softmax.comp (their gates passed). */
  gboolean       quant_tiles;
  gboolean       softmax_rows;
  DcVkPipeline  *quant_pipeline;    /* owned */
  DcVkPipeline  *softmax_pipeline;  /* owned */
  guint64        n_quant_dispatches;
  guint64        n_softmax_dispatches;
  gsize          quant_scratch;        /* bytes into Q: split columns' slice maxima */
  gsize          quant_scratch_bytes;  /* their largest size, from the dry run */
  gsize          n_params;
  gsize          grads_off;    /* in floats, into F: the gradients, after the weights */
  gsize          logits_off;   /* in floats, into F; the mean loss follows the logits */
  gsize          res;          /* (L + 1, BT, C): the residual stream at each block's input */
  gsize          lnf, lnf_mean, lnf_rstd, scores, row_loss, loss_scratch;
  gsize          probs, d_res, d_a, d_b, d_qkv;  /* the backward's */
  gsize          split_scratch;  /* in floats, into F: split products' int32 partial sums */
  gsize          split_words;    /* their size, from the dry run (0: no split product) */
  guint64        n_dispatches;
  guint64        n_loss_dispatches;
  guint64        n_backward_dispatches;
  guint64        n_gemm_dispatches;
  guint64        n_coop_dispatches[N_COOP];
  guint64        n_colsum_dispatches;
  guint64        n_chains_dispatches;
  guint64        n_fuse_dispatches;
  /* The next linear backward's dy rows are in the left operand already
   * (record_fuse_relu_back ()); record_linear_backward () takes it back. */
  gboolean       dy_rows_ready;
  gboolean       gating;         /* a gate's pass (forward_new's twins): refusals are quiet */
  DcGptVkForwardTimes times;
  /* recording state: the regions of Q and E; a dry run only measures them */
  gboolean       dry;
  gsize          q_left, q_right, e_left, e_right;
  gsize          qa, qb, ea, eb;
};
void
dc_gpt_vk_forward_free (DcGptVkForward *self)
{
  if (self == NULL)
    return;
  if (self->recording != NULL)
    {
      /* DC_VK_PROFILE=1: where the device's time went, for the developers
       * (docs/BENCHMARKS.md); DC_VK_PROFILE_TOP=N commands (15). */
      const char *top = g_getenv ("DC_VK_PROFILE_TOP");
      g_autofree char *table
        = dc_vk_recording_profile_table (self->recording,
                                         top != NULL ? (guint) g_ascii_strtoull (top, NULL, 10)
                                                     : 15);

      if (table != NULL)
        g_printerr ("DC_VK_PROFILE: resident %s pass, width %u, seq %u, batch %u, %u layers: "
                    "%s", self->backward ? "training" : "forward", self->config.width,
                    self->config.seq, self->batch, self->config.n_layer, table);
    }
  g_clear_pointer (&self->recording, dc_vk_recording_free);
  g_clear_pointer (&self->upload, dc_vk_recording_free);
  g_clear_pointer (&self->download, dc_vk_recording_free);
  g_clear_pointer (&self->grads_staging, dc_vk_buffer_free);
  g_clear_pointer (&self->logits_staging, dc_vk_buffer_free);
  g_clear_pointer (&self->params_staging, dc_vk_buffer_free);
  g_clear_pointer (&self->tokens, dc_vk_buffer_free);
  g_clear_pointer (&self->tokens_staging, dc_vk_buffer_free);
  g_clear_pointer (&self->e, dc_vk_buffer_free);
  g_clear_pointer (&self->q, dc_vk_buffer_free);
  g_clear_pointer (&self->f, dc_vk_buffer_free);
  g_clear_pointer (&self->backward_pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->gemm_pipeline, dc_vk_pipeline_free);
  for (guint i = 0; i < N_COOP; i++)
    g_clear_pointer (&self->coop_pipelines[i], dc_vk_pipeline_free);
  g_clear_pointer (&self->quant_pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->softmax_pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->colsum_pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->chains_pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->fuse_pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->loss_pipeline, dc_vk_pipeline_free);
  g_free (self->layers);
  g_clear_pointer (&self->pipeline, dc_vk_pipeline_free);
  g_clear_pointer (&self->ctx, dc_vk_context_free);
  g_free (self);
}

/* The ops' names, for DC_VK_PROFILE's table. */
static const char * const op_names[] = {
  "embed", "layer-norm", "quantize", "gemm", "bias", "add", "relu", "softmax", "loss", "mean",
  "head-dx", "head-dw", "zero", "ln-dx", "ln-dw", "colsum", "relu-back", "softmax-back",
  "embed-back",
};

G_STATIC_ASSERT (G_N_ELEMENTS (op_names) == OP_EMBED_BACK + 1);

/* The profile's label of an op: its name and shape (a product's M×N×K and
 * pairs, a quantization's vectors × length, by rows or by columns). */
static char *
op_label (guint          op,
          gsize          work,
          const guint32 *args)
{
  if (op == OP_GEMM)
    return args[9] > 1 ? g_strdup_printf ("gemm %ux%ux%u x%u pairs", args[2], args[5], args[6],
                                          args[9])
                       : g_strdup_printf ("gemm %ux%ux%u", args[2], args[5], args[6]);
  if (op == OP_QUANTIZE)
    return g_strdup_printf ("quantize %ux%u %s", args[3], args[4], args[2] == 1 ? "rows" : "cols");
  return g_strdup_printf ("%s %" G_GSIZE_FORMAT, op_names[op], work);
}

/* T's size: the inputs and the targets, then (a training pass) the
 * inputs' and the targets' token lists, offsets (V + 1) and rows each. */
static gsize
tokens_bytes (DcGptVkForward *self)
{
  gsize bt = (gsize) self->batch * self->config.seq;

  return (2 * bt + (self->backward ? 2 * (self->config.vocab + 1 + bt) : 0)) * 4;
}

/* Records one operation over `work` items (elements, rows or vectors). */
static gboolean
record_op (DcGptVkForward  *self,
           guint            op,
           gsize            work,
           const guint32   *args,
           guint            n_args,
           GError         **error)
{
  DcVkForwardPush push = { op, { 0 } };
  DcVkBuffer *buffers[] = { self->f, self->q, self->e, self->tokens };
  /* A workgroup per vector to quantize, or an invocation per vector where
   * record_quantize_pairs () chose it (args[11]). */
  gsize groups = op == OP_QUANTIZE && !(n_args > 11 && args[11] != 0) ? work
                 : (work + FWD_GROUP - 1) / FWD_GROUP;
  DcVkPipeline *pipeline = self->pipeline;
  guint64 *count = &self->n_dispatches;

  g_assert (n_args <= G_N_ELEMENTS (push.a));
  if (self->dry)
    return TRUE;
  /* A workgroup per row where record_layer_norm () chose it (args[10]). */
  if (op == OP_LAYER_NORM && args[10] != 0)
    groups = work;
  if (op == OP_LOSS || op == OP_MEAN)
    {
      pipeline = self->loss_pipeline;
      count = &self->n_loss_dispatches;
    }
  else if ((op == OP_LN_DW || op == OP_COLSUM) && self->chains_pipeline != NULL)
    {
      /* resident-chains.comp: a workgroup per 4 columns (the norms' two
       * chains each) or 8 (the biases'), their chains in one warp fed by
       * 256 loaders. */
      gsize cw = op == OP_LN_DW ? DC_GPT_VK_CHAINS_COLUMNS : DC_GPT_VK_CHAINS_SUM_COLUMNS;

      pipeline = self->chains_pipeline;
      count = &self->n_chains_dispatches;
      groups = (work + cw - 1) / cw;
    }
  else if ((op == OP_EMBED_BACK || op == OP_HEAD_DW) && self->colsum_pipeline != NULL)
    {
      /* resident-colsum.comp: a workgroup per token and 64 columns, each
       * element's chain over its token's rows alone (T's lists), where
       * every invocation of resident-backward.comp scans every row's token:
       * work = (tokens [+ positions]) · C. */
      gsize c = op == OP_HEAD_DW ? args[3] : args[4];

      pipeline = self->colsum_pipeline;
      count = &self->n_colsum_dispatches;
      groups = work / c * ((c + 63) / 64);
    }
  else if ((op == OP_LN_DW || (op == OP_LN_DX && args[9] != 0))
           && self->colsum_pipeline != NULL)
    {
      /* resident-colsum.comp: a workgroup per DC_GPT_VK_COLSUM_COLUMNS columns,
       * or per row of the norm's input gradient (record_layer_norm_backward ()
       * chose it: args[9]; resident-backward.comp ignores it). The biases'
       * column sums stay resident-backward.comp's: on the H200 they took
       * 150 µs a 4,096-row dispatch there against 68 µs (docs/BENCHMARKS.md,
       * gpu-norm); its OP_COLSUM is gated and can be routed here again. */
      pipeline = self->colsum_pipeline;
      count = &self->n_colsum_dispatches;
      groups = op == OP_LN_DX ? work
               : (work + DC_GPT_VK_COLSUM_COLUMNS - 1) / DC_GPT_VK_COLSUM_COLUMNS;
    }
  else if (op >= OP_HEAD_DX)
    {
      pipeline = self->backward_pipeline;
      count = &self->n_backward_dispatches;
    }
  memcpy (push.a, args, n_args * sizeof (guint32));
  ++*count;
  if (dc_vk_recording_is_profiled (self->recording))
    {
      g_autofree char *label = op_label (op, work, push.a);

      dc_vk_recording_label (self->recording, label);
    }
  /* Each pipeline's set is written at its first dispatch only. */
  return dc_vk_recording_dispatch (self->recording, pipeline, *count == 1 ? buffers : NULL, &push,
                                   (guint) CLAMP (groups, 1, FWD_MAX_GROUPS), 1, 1, error);
}

/* Records one dispatch of a row kernel (resident-quant.comp,
 * resident-softmax.comp) on the pass's buffers, labelled for DC_VK_PROFILE. */
static gboolean
record_rows (DcGptVkForward  *self,
             DcVkPipeline    *pipeline,
             guint64         *count,
             const char      *label,
             guint32          op,
             const guint32   *args,
             guint            n_args,
             gsize            groups,
             gsize            groups_y,
             GError         **error)
{
  DcVkForwardPush push = { op, { 0 } };
  DcVkBuffer *buffers[] = { self->f, self->q, self->e, self->tokens };

  g_assert (n_args <= G_N_ELEMENTS (push.a));
  memcpy (push.a, args, n_args * sizeof (guint32));
  if (dc_vk_recording_is_profiled (self->recording))
    dc_vk_recording_label (self->recording, label);
  /* Each pipeline's set is written at its first dispatch only. */
  return dc_vk_recording_dispatch (self->recording, pipeline, ++*count == 1 ? buffers : NULL,
                                   &push, (guint) CLAMP (groups, 1, FWD_MAX_GROUPS),
                                   (guint) groups_y, 1, error);
}

/* A softmax operation (OP_SOFTMAX, OP_SOFTMAX_BACK) over rows of len: a
 * workgroup per row, or per few short rows (resident-softmax.comp), where
 * its gate passed and the row fits its shared memory, else an invocation
 * per row. */
static gboolean
record_softmax (DcGptVkForward  *self,
                guint            op,
                gsize            rows,
                gsize            len,
                const guint32   *args,
                guint            n_args,
                GError         **error)
{
  g_autofree char *label = NULL;

  if (!self->softmax_rows || len > DC_GPT_VK_ROWS_SOFTMAX_MAX_LEN)
    return record_op (self, op, rows, args, n_args, error);
  if (self->dry)
    return TRUE;
  if (dc_vk_recording_is_profiled (self->recording))
    label = g_strdup_printf ("%s-rows %" G_GSIZE_FORMAT "x%" G_GSIZE_FORMAT,
                             op_names[op], rows, len);
  {
    guint32 rows_args[15] = { 0 };

    memcpy (rows_args, args, n_args * sizeof (guint32));
    rows_args[14] = dc_gpt_vk_rows_softmax_lanes_log2 (len);
    return record_rows (self, self->softmax_pipeline, &self->n_softmax_dispatches, label, op,
                        rows_args, G_N_ELEMENTS (rows_args),
                        dc_gpt_vk_rows_softmax_groups (rows, len), 1, error);
  }
}

/* The attention's (sequence, head) pairs side by side in one dispatch:
 * pair p is sequence p / heads, head p mod heads, its matrix at
 * seq_stride · sequence + head_stride · head from the base offset. */
typedef struct
{
  gsize pairs, heads, seq_stride, head_stride;
  /* Each pair's square matrix is lower triangular, its upper part +0 (the
   * softmaxes' P and dS): resident-quant.comp does not read it. */
  gboolean lower;
} Pairs;

static const Pairs ONE = { 1, 1, 0, 0 };

static gboolean record_quantize_pairs (DcGptVkForward *self, gboolean left, gsize src, gsize vs,
                                       gsize ks, gsize n, gsize k, const Pairs *pairs,
                                       GError **error);

/* The attention's softmax (OP_SOFTMAX of the scores into att, OP_SOFTMAX_BACK
 * in place into dS) over rows of len, then its output (len × len of each
 * pair at @out, the pairs' matrices one after the other) quantized by rows
 * into the left operand: in the same dispatch where resident-softmax.comp
 * runs the rows (its gate covers the fused quantization), else as two. */
static gboolean
record_softmax_quantized (DcGptVkForward  *self,
                          guint            op,
                          gsize            rows,
                          gsize            len,
                          const guint32   *args,
                          guint            n_args,
                          gsize            out,
                          const Pairs     *pairs,
                          GError         **error)
{
  g_autofree char *label = NULL;
  guint32 rows_args[15] = { 0 };

  if (self->dry || !self->softmax_rows || len > DC_GPT_VK_ROWS_SOFTMAX_MAX_LEN)
    return record_softmax (self, op, rows, len, args, n_args, error)
           && record_quantize_pairs (self, TRUE, out, len, 1, len, len, pairs, error);
  g_assert (n_args + 2 <= 14 && rows == pairs->pairs * len
            && pairs->head_stride == len * len && pairs->seq_stride == pairs->heads * len * len);
  if (dc_vk_recording_is_profiled (self->recording))
    label = g_strdup_printf ("%s-rows+quant %" G_GSIZE_FORMAT "x%" G_GSIZE_FORMAT,
                             op_names[op], rows, len);
  memcpy (rows_args, args, n_args * sizeof (guint32));
  rows_args[n_args] = (guint32) self->qa;
  rows_args[n_args + 1] = (guint32) self->ea;
  rows_args[14] = dc_gpt_vk_rows_softmax_lanes_log2 (len);
  return record_rows (self, self->softmax_pipeline, &self->n_softmax_dispatches, label,
                      op | DC_GPT_VK_SOFTMAX_QUANT_ROWS, rows_args, G_N_ELEMENTS (rows_args),
                      dc_gpt_vk_rows_softmax_groups (rows, len), 1, error);
}

/* Quantizes n vectors of length k (element i of vector v at
 * src + v·vs + i·ks) of each pair into the left (a) or right operand
 * region. */
static gboolean
record_quantize_pairs (DcGptVkForward  *self,
                       gboolean         left,
                       gsize            src,
                       gsize            vs,
                       gsize            ks,
                       gsize            n,
                       gsize            k,
                       const Pairs     *pairs,
                       GError         **error)
{
  /* One invocation per vector for short vectors, and for many columns
   * side by side (neighbouring invocations then load neighbouring
   * floats); a workgroup per vector otherwise. */
  gboolean per_invocation = k <= QUANT_SMALL_K
                            || (vs == 1 && ks != 1 && n * pairs->pairs >= QUANT_COLUMNS_MIN);
  guint32 args[] = { (guint32) src, (guint32) vs, (guint32) ks, (guint32) (n * pairs->pairs),
                     (guint32) k, (guint32) (left ? self->qa : self->qb),
                     (guint32) (left ? self->ea : self->eb), (guint32) n,
                     (guint32) pairs->heads, (guint32) pairs->seq_stride,
                     (guint32) pairs->head_stride, (guint32) per_invocation };

  DcGptVkQuantTile tile;

  dc_gpt_vk_rows_quant_tile (n * pairs->pairs, k, vs, ks, &tile);
  /* The dry run measures the largest operand on each side (and the split
   * columns' scratch). */
  if (self->dry)
    {
      gsize *q = left ? &self->q_left : &self->q_right;
      gsize *e = left ? &self->e_left : &self->e_right;

      *q = MAX (*q, n * pairs->pairs * k);
      *e = MAX (*e, n * pairs->pairs);
      if (self->quant_tiles)
        self->quant_scratch_bytes = MAX (self->quant_scratch_bytes,
                                         DC_GPT_VK_QUANT_AMAX_SCRATCH (&tile, n * pairs->pairs));
      return TRUE;
    }
  if (self->quant_tiles)
    {
      /* Coalesced tiles (resident-quant.comp): a[11] to a[14] say how;
       * split columns take a dispatch for their slices' maxima first. */
      guint32 tiled_args[15];
      guint32 lower = pairs->lower ? DC_GPT_VK_QUANT_LOWER : 0;
      g_autofree char *label = NULL;

      memcpy (tiled_args, args, 11 * sizeof (guint32));
      tiled_args[11] = tile.columns;
      tiled_args[12] = tile.tv_log2;
      tiled_args[13] = tile.slice;
      tiled_args[14] = (guint32) self->quant_scratch;
      if (dc_vk_recording_is_profiled (self->recording))
        label = g_strdup_printf ("quantize-tile %" G_GSIZE_FORMAT "x%" G_GSIZE_FORMAT " %s%s%s",
                                 n * pairs->pairs, k, ks == 1 ? "rows" : "cols",
                                 tile.slices > 1 ? " split" : "", lower ? " lower" : "");
      if (tile.slices > 1
          && !record_rows (self, self->quant_pipeline, &self->n_quant_dispatches, label,
                           DC_GPT_VK_QUANT_OP_AMAX | lower, tiled_args,
                           G_N_ELEMENTS (tiled_args), tile.groups, tile.slices, error))
        return FALSE;
      return record_rows (self, self->quant_pipeline, &self->n_quant_dispatches, label,
                          OP_QUANTIZE | lower, tiled_args, G_N_ELEMENTS (tiled_args),
                          tile.groups, tile.slices, error);
    }
  return record_op (self, OP_QUANTIZE, n * pairs->pairs, args, G_N_ELEMENTS (args), error);
}

static gboolean
record_quantize (DcGptVkForward  *self,
                 gboolean         left,
                 gsize            src,
                 gsize            vs,
                 gsize            ks,
                 gsize            n,
                 gsize            k,
                 GError         **error)
{
  return record_quantize_pairs (self, left, src, vs, ks, n, k, &ONE, error);
}

/* How a product of one matrix with @blocks workgroups and @k_words words of
 * K is split over K for about @target workgroups, each slice at least
 * @min_words long and a whole number of @step_words: the slice's words (0:
 * not split) and, in @slices, their number. */
static gsize
split_plan (gsize  k_words,
            gsize  blocks,
            gsize  target,
            gsize  min_words,
            gsize  step_words,
            gsize *slices)
{
  gsize slice_words;

  *slices = MIN ((target + blocks - 1) / blocks, k_words / min_words);
  if (*slices <= 1)
    {
      *slices = 1;
      return 0;
    }
  slice_words = ((k_words + *slices - 1) / *slices + step_words - 1) / step_words * step_words;
  *slices = (k_words + slice_words - 1) / slice_words;
  if (*slices <= 1)
    {
      *slices = 1;
      return 0;
    }
  return slice_words;
}

/* The product on cooperative matrices (resident-coop.comp), when the pass
 * has them and K and both operands' starts are multiples of 16 bytes (its
 * wide loads); *recorded says whether it took it. */
static gboolean
record_gemm_coop (DcGptVkForward  *self,
                  const guint32   *args,
                  gsize            m,
                  gsize            n,
                  gsize            k,
                  gsize            pairs,
                  guint            causal,
                  gboolean        *recorded,
                  GError         **error)
{
  guint shape = n <= COOP_NARROW_N ? COOP_NARROW : COOP_WIDE;
  gsize groups_x = (n + coop_shapes[shape][1] - 1) / coop_shapes[shape][1];
  gsize groups_y = (m + COOP_BM - 1) / COOP_BM;
  gsize slice_words = 0, slices = 1;

  *recorded = FALSE;
  if (!(self->products & PRODUCTS_COOP) || k % 16 != 0 || self->qa % 16 != 0
      || self->qb % 16 != 0 || groups_x > FWD_MAX_GROUPS || groups_y > FWD_MAX_GROUPS
      || pairs > FWD_MAX_GROUPS)
    return TRUE;
  *recorded = TRUE;
  if (pairs == 1 && k >= GEMM_SPLIT_MIN_K && groups_x * groups_y < COOP_SPLIT_BLOCKS)
    slice_words = split_plan (k / 16, groups_x * groups_y, COOP_SPLIT_BLOCKS,
                              COOP_SPLIT_MIN_WORDS, coop_shapes[shape][4], &slices);
  if (self->dry)
    {
      if (slices > 1)
        self->split_words = MAX (self->split_words, slices * m * n);
      return TRUE;
    }
  {
    DcVkForwardPush push = { OP_GEMM | causal << 8, { 0 } };
    DcVkBuffer *buffers[] = { self->f, self->q, self->e, self->tokens };

    memcpy (push.a, args, 13 * sizeof (guint32));
    push.a[13] = (guint32) slice_words;
    push.a[14] = (guint32) self->split_scratch;
    if (dc_vk_recording_is_profiled (self->recording))
      {
        g_autofree char *label = op_label (OP_GEMM, m * n * pairs, push.a);
        static const char * const causal_names[] = { "", " causal-out", " causal-a-lower",
                                                     " causal-a-upper" };
        g_autofree char *coop = g_strdup_printf ("coop-%s%s%s", label,
                                                 slices > 1 ? " split" : "",
                                                 causal_names[causal]);

        dc_vk_recording_label (self->recording, coop);
      }
    if (!dc_vk_recording_dispatch (self->recording, self->coop_pipelines[shape],
                                   ++self->n_coop_dispatches[shape] == 1 ? buffers : NULL,
                                   &push, (guint) groups_x, (guint) groups_y,
                                   (guint) (slices > 1 ? slices : pairs), error))
      return FALSE;
    if (slices == 1)
      return TRUE;
    /* The slices summed (256 invocations a workgroup) by resident-gemm.comp's
     * OP_GEMM_SUM where the pass has it: the same rule, and a light kernel
     * keeps more workgroups in flight than the wide tile's (its 36 KiB of
     * shared memory; on the H200 the sums took 48 µs each through it). */
    push.op = OP_GEMM_SUM;
    push.a[13] = (guint32) slices;
    if (dc_vk_recording_is_profiled (self->recording))
      dc_vk_recording_label (self->recording, "coop-gemm-sum");
    {
      DcVkPipeline *sum = self->tiled ? self->gemm_pipeline : self->coop_pipelines[COOP_WIDE];
      guint64 *count = self->tiled ? &self->n_gemm_dispatches
                                   : &self->n_coop_dispatches[COOP_WIDE];

      return dc_vk_recording_dispatch (self->recording, sum, ++*count == 1 ? buffers : NULL,
                                       &push, (guint) ((m * n + 255) / 256), 1, 1, error);
    }
  }
}

/* c[m · ldc + n] of each pair (its output matrix placed as its operands'
 * are) for the quantized left (M) and right (N) operands; @causal (CAUSAL_*)
 * what the cooperative-matrix kernel may skip. */
static gboolean
record_gemm_causal (DcGptVkForward  *self,
                    gsize            m,
                    gsize            n,
                    gsize            k,
                    gsize            out,
                    gsize            ldc,
                    const Pairs     *pairs,
                    guint            causal,
                    GError         **error)
{
  guint32 args[] = { (guint32) self->qa, (guint32) self->ea, (guint32) m, (guint32) self->qb,
                     (guint32) self->eb, (guint32) n, (guint32) k, (guint32) out,
                     (guint32) ldc, (guint32) pairs->pairs, (guint32) pairs->heads,
                     (guint32) pairs->seq_stride, (guint32) pairs->head_stride };
  gsize groups_x = (n + GEMM_TILE - 1) / GEMM_TILE, groups_y = (m + GEMM_TILE - 1) / GEMM_TILE;
  gsize slice_words = 0, slices = 1;
  gboolean coop;

  if (!record_gemm_coop (self, args, m, n, k, pairs->pairs, causal, &coop, error))
    return FALSE;
  /* The dry run sizes the split scratch for both kernels: measure () assumes
   * both gates pass, and either kernel may take a product. */
  if (coop && !self->dry)
    return TRUE;
  /* resident-gemm.comp reads the operands a word at a time, and its grid is
   * one workgroup per 64 × 64 block of each pair; elsewhere the untiled
   * product of resident-forward.comp. */
  if (!self->tiled || k % 4 != 0 || self->qa % 4 != 0 || self->qb % 4 != 0
      || groups_x > FWD_MAX_GROUPS || groups_y > FWD_MAX_GROUPS || pairs->pairs > FWD_MAX_GROUPS)
    return record_op (self, OP_GEMM, m * n * pairs->pairs, args, G_N_ELEMENTS (args), error);
  /* One matrix of few blocks and a long K (the weights' gradients): split
   * K so that the device has GEMM_SPLIT_BLOCKS workgroups to run (in whole
   * stages of 8 words). */
  if (pairs->pairs == 1 && k >= GEMM_SPLIT_MIN_K && groups_x * groups_y < GEMM_SPLIT_BLOCKS)
    slice_words = split_plan (k / 4, groups_x * groups_y, GEMM_SPLIT_BLOCKS,
                              GEMM_SPLIT_MIN_WORDS, 8, &slices);
  if (self->dry)
    {
      if (slices > 1)
        self->split_words = MAX (self->split_words, slices * m * n);
      return TRUE;
    }
  {
    DcVkForwardPush push = { OP_GEMM, { 0 } };
    DcVkBuffer *buffers[] = { self->f, self->q, self->e, self->tokens };

    memcpy (push.a, args, sizeof args);
    push.a[13] = (guint32) slice_words;
    push.a[14] = (guint32) self->split_scratch;
    if (dc_vk_recording_is_profiled (self->recording))
      {
        g_autofree char *label = op_label (OP_GEMM, m * n * pairs->pairs, push.a);
        g_autofree char *tiled = g_strdup_printf ("tiled-%s%s", label,
                                                  slices > 1 ? " split" : "");

        dc_vk_recording_label (self->recording, tiled);
      }
    if (!dc_vk_recording_dispatch (self->recording, self->gemm_pipeline,
                                   ++self->n_gemm_dispatches == 1 ? buffers : NULL, &push,
                                   (guint) groups_x, (guint) groups_y,
                                   (guint) (slices > 1 ? slices : pairs->pairs), error))
      return FALSE;
    if (slices == 1)
      return TRUE;
    push.op = OP_GEMM_SUM;
    push.a[13] = (guint32) slices;
    if (dc_vk_recording_is_profiled (self->recording))
      dc_vk_recording_label (self->recording, "gemm-sum");
    self->n_gemm_dispatches++;
    return dc_vk_recording_dispatch (self->recording, self->gemm_pipeline, NULL, &push,
                                     (guint) ((m * n + 255) / 256), 1, 1, error);
  }
}

static gboolean
record_gemm_pairs (DcGptVkForward  *self,
                   gsize            m,
                   gsize            n,
                   gsize            k,
                   gsize            out,
                   gsize            ldc,
                   const Pairs     *pairs,
                   GError         **error)
{
  return record_gemm_causal (self, m, n, k, out, ldc, pairs, CAUSAL_NONE, error);
}

static gboolean
record_gemm (DcGptVkForward  *self,
             gsize            m,
             gsize            n,
             gsize            k,
             gsize            out,
             gsize            ldc,
             GError         **error)
{
  return record_gemm_pairs (self, m, n, k, out, ldc, &ONE, error);
}

/* dc-gpt.c's linear_forward: y (rows, n) = x (rows, k) · w (k, n) + bias.
 * With x_ready, x's rows are in the left operand already (a fused kernel
 * quantized them); with FUSED_BIAS for bias, the kernel after the product
 * adds it (resident-fuse.comp). */
#define FUSED_BIAS G_MAXSIZE

static gboolean
record_linear (DcGptVkForward  *self,
               gsize            x,
               gboolean         x_ready,
               gsize            rows,
               gsize            w,
               gsize            bias,
               gsize            k,
               gsize            n,
               gsize            y,
               GError         **error)
{
  guint32 bias_args[] = { (guint32) y, (guint32) bias, (guint32) (rows * n), (guint32) n };

  return (x_ready || record_quantize (self, TRUE, x, k, 1, rows, k, error))
         && record_quantize (self, FALSE, w, 1, n, n, k, error)
         && record_gemm (self, rows, n, k, y, n, error)
         && (bias == FUSED_BIAS
             || record_op (self, OP_BIAS, rows * n, bias_args, G_N_ELEMENTS (bias_args), error));
}

/* Whether resident-fuse.comp records the producers and their output's
 * quantization (its gate passed; rows the norm's shared memory holds; not
 * in the dry run, which measures the operands through the unfused ops: the
 * same regions). */
static gboolean
fusing (DcGptVkForward *self)
{
  return self->fuse_pipeline != NULL && !self->dry
         && self->config.width <= DC_GPT_VK_FUSE_MAX_WIDTH
         && self->config.n_head <= DC_GPT_VK_FUSE_MAX_HEADS;
}

/* One resident-fuse.comp dispatch, a workgroup per row. */
static gboolean
record_fused (DcGptVkForward  *self,
              guint32          op,
              const char      *name,
              gsize            rows,
              gsize            n,
              const guint32   *args,
              guint            n_args,
              GError         **error)
{
  g_autofree char *label = NULL;

  if (dc_vk_recording_is_profiled (self->recording))
    label = g_strdup_printf ("%s %" G_GSIZE_FORMAT "x%" G_GSIZE_FORMAT, name, rows, n);
  return record_rows (self, self->fuse_pipeline, &self->n_fuse_dispatches, label, op, args,
                      n_args, rows, 1, error);
}

/* The bias on x (unless NO_FUSE_ARG), the residual add x = add + x (unless
 * NO_FUSE_ARG), x's layer norm into y and y's rows quantized into the left
 * operand: one dispatch. The caller checked fusing (). */
#define NO_FUSE_ARG G_MAXSIZE

static gboolean
record_fuse_norm (DcGptVkForward  *self,
                  gsize            x,
                  gsize            w,
                  gsize            b,
                  gsize            y,
                  gsize            mean,
                  gsize            rstd,
                  gsize            rows,
                  gsize            bias,
                  gsize            add,
                  GError         **error)
{
  guint32 c = self->config.width;
  guint32 args[] = { (guint32) x, (guint32) w, (guint32) b, (guint32) y, (guint32) mean,
                     (guint32) rstd, (guint32) rows, c, f32_bits ((float) c),
                     f32_bits (DC_MATH_GPT2_LN_EPS), (guint32) self->qa, (guint32) self->ea,
                     bias == NO_FUSE_ARG ? DC_GPT_VK_FUSE_NONE : (guint32) bias,
                     add == NO_FUSE_ARG ? DC_GPT_VK_FUSE_NONE : (guint32) add };

  return record_fused (self, DC_GPT_VK_FUSE_OP_NORM,
                       bias == NO_FUSE_ARG ? "fuse-norm" : "fuse-bias-add-norm", rows, c, args,
                       G_N_ELEMENTS (args), error);
}

static gboolean
record_layer_norm (DcGptVkForward  *self,
                   gsize            x,
                   gsize            w,
                   gsize            b,
                   gsize            y,
                   gsize            mean,
                   gsize            rstd,
                   gsize            rows,
                   GError         **error)
{
  guint32 c = self->config.width;
  guint32 args[] = { (guint32) x, (guint32) w, (guint32) b, (guint32) y, (guint32) mean,
                     (guint32) rstd, (guint32) rows, c, f32_bits ((float) c),
                     f32_bits (DC_MATH_GPT2_LN_EPS), c <= NORM_ROW_WG_MAX };

  return record_op (self, OP_LAYER_NORM, rows, args, G_N_ELEMENTS (args), error);
}

static gsize
tensor_offset (const DcGptConfig *c,
               guint              index)
{
  DcGptTensor info;

  dc_gpt_config_tensor (c, index, &info);
  return info.offset;
}

/* dc-gpt.c's linear_backward: from dy (rows, n), dx (rows, k) = dy · wᵀ
 * (unless dx is NO_DX), dw (k, n) = xᵀ · dy, dbias (n) = Σ rows dy. */
#define NO_DX G_MAXSIZE

static gboolean
record_linear_backward (DcGptVkForward  *self,
                        gsize            x,
                        gsize            dy,
                        gsize            rows,
                        gsize            w,
                        gsize            k,
                        gsize            n,
                        gsize            dx,
                        gsize            dw,
                        gsize            dbias,
                        GError         **error)
{
  guint32 colsum[] = { (guint32) dy, (guint32) rows, (guint32) n, (guint32) dbias };

  gboolean dy_ready = self->dy_rows_ready;

  self->dy_rows_ready = FALSE;
  if (dx != NO_DX
      && !((dy_ready || record_quantize (self, TRUE, dy, n, 1, rows, n, error))
           && record_quantize (self, FALSE, w, n, 1, k, n, error)
           && record_gemm (self, rows, k, n, dx, k, error)))
    return FALSE;
  return record_quantize (self, TRUE, x, 1, k, k, rows, error)
         && record_quantize (self, FALSE, dy, 1, n, n, rows, error)
         && record_gemm (self, k, n, rows, dw, n, error)
         && record_op (self, OP_COLSUM, n, colsum, G_N_ELEMENTS (colsum), error);
}

/* dc-gpt.c's layer_norm_rows_backward: the input gradient of each row added
 * to d_res, then the weight and bias gradients by columns. */
static gboolean
record_layer_norm_backward (DcGptVkForward  *self,
                            gsize            x,
                            gsize            w,
                            gsize            mean,
                            gsize            rstd,
                            gsize            dy,
                            gsize            rows,
                            gsize            dw,
                            gsize            db,
                            GError         **error)
{
  guint32 c = self->config.width;
  guint32 dx[] = { (guint32) x, (guint32) w, (guint32) mean, (guint32) rstd, (guint32) dy,
                   (guint32) self->d_res, (guint32) rows, c, f32_bits ((float) c),
                   c <= NORM_ROW_WG_MAX };
  guint32 grad[] = { (guint32) x, (guint32) dy, (guint32) mean, (guint32) rstd, (guint32) rows,
                     c, (guint32) dw, (guint32) db };

  return record_op (self, OP_LN_DX, rows, dx, G_N_ELEMENTS (dx), error)
         && record_op (self, OP_LN_DW, c, grad, G_N_ELEMENTS (grad), error);
}

/* The body of the pass, in dc_gpt_run_forward ()'s and dc_gpt_run_backward ()'s
 * order: recorded once dry (measuring Q and E), then for real. */
static gboolean
record_body (DcGptVkForward  *self,
             GError         **error)
{
  const DcGptConfig *cfg = &self->config;
  gsize c = cfg->width, t = cfg->seq, v = cfg->vocab, h_n = cfg->n_head, d = c / h_n;
  gsize bt = (gsize) self->batch * t;
  guint lnf_index = dc_gpt_config_n_tensors (cfg) - 2;
  float scale = 1.0f / __builtin_sqrtf ((float) d);  /* dc-gpt.c's attention_scale */
  gsize wte = tensor_offset (cfg, 0), g_wte = self->grads_off + wte;

  {
    guint32 args[] = { (guint32) self->res, (guint32) wte, (guint32) tensor_offset (cfg, 1),
                       (guint32) (bt * c), (guint32) c, (guint32) t };

    if (!record_op (self, OP_EMBED, bt * c, args, G_N_ELEMENTS (args), error))
      return FALSE;
  }
  for (guint l = 0; l < cfg->n_layer; l++)
    {
      const VkLayerActs *a = &self->layers[l];
      gsize x = self->res + l * bt * c, out = x + bt * c;
      gsize p[DC_GPT_TENSORS_PER_LAYER];

      for (guint i = 0; i < DC_GPT_TENSORS_PER_LAYER; i++)
        p[i] = tensor_offset (cfg, 2 + l * DC_GPT_TENSORS_PER_LAYER + i);
      /* p: ln1 w, b; attn w, b; proj w, b; ln2 w, b; fc w, b; fcproj w, b.
       * Fused (resident-fuse.comp), the previous layer's last kernel made
       * ln1 and its rows' operand, the first layer's is one dispatch, and
       * the bias on qkv goes with the quantization of q and k. */
      if (fusing (self) && l == 0
          && !record_fuse_norm (self, x, p[0], p[1], a->ln1, a->ln1_mean, a->ln1_rstd, bt,
                                NO_FUSE_ARG, NO_FUSE_ARG, error))
        return FALSE;
      if ((!fusing (self)
           && !record_layer_norm (self, x, p[0], p[1], a->ln1, a->ln1_mean, a->ln1_rstd, bt,
                                  error))
          || !record_linear (self, a->ln1, fusing (self), bt, p[2],
                             fusing (self) ? FUSED_BIAS : p[3], c, 3 * c, a->qkv, error))
        return FALSE;
      {
        /* Every (sequence, head) pair at once, each as head_forward ():
         * scores (t, t) = q · kᵀ; att = softmax; y (t, d) = att · v. */
        Pairs in = { self->batch * h_n, h_n, t * 3 * c, d };
        Pairs sq = { self->batch * h_n, h_n, h_n * t * t, t * t, FALSE };
        Pairs att = { self->batch * h_n, h_n, h_n * t * t, t * t, TRUE };
        Pairs y = { self->batch * h_n, h_n, t * c, d };
        guint32 sm[] = { (guint32) self->scores, (guint32) a->att,
                         (guint32) (self->batch * h_n * t), (guint32) t, f32_bits (scale), 1 };

        guint32 qk[] = { (guint32) a->qkv, (guint32) p[3], (guint32) bt, (guint32) c,
                         (guint32) d, (guint32) h_n, (guint32) t, (guint32) self->qa,
                         (guint32) self->ea, (guint32) self->qb, (guint32) self->eb };

        if (fusing (self))
          {
            if (!record_fused (self, DC_GPT_VK_FUSE_OP_QK, "fuse-bias-qk", bt, 3 * c, qk,
                               G_N_ELEMENTS (qk), error))
              return FALSE;
          }
        else if (!record_quantize_pairs (self, TRUE, a->qkv, 3 * c, 1, t, d, &in, error)
                 || !record_quantize_pairs (self, FALSE, a->qkv + c, 3 * c, 1, t, d, &in, error))
          return FALSE;
        if (!record_gemm_causal (self, t, t, d, self->scores, t, &sq, CAUSAL_OUT, error)
            || !record_softmax_quantized (self, OP_SOFTMAX, self->batch * h_n * t, t, sm,
                                          G_N_ELEMENTS (sm), a->att, &att, error)
            || !record_quantize_pairs (self, FALSE, a->qkv + 2 * c, 1, 3 * c, d, t, &in, error)
            || !record_gemm_causal (self, t, d, t, a->atty, c, &y, CAUSAL_A_LOWER, error))
          return FALSE;
      }
      {
        guint32 add_mid[] = { (guint32) x, (guint32) a->res_mid, (guint32) (bt * c) };
        guint32 relu[] = { (guint32) a->fc, (guint32) a->fc_act, (guint32) (bt * 4 * c) };
        guint32 add_out[] = { (guint32) a->res_mid, (guint32) out, (guint32) (bt * c) };
        guint32 fuse_relu[] = { (guint32) a->fc, (guint32) p[9], (guint32) a->fc_act,
                                (guint32) bt, (guint32) (4 * c), (guint32) self->qa,
                                (guint32) self->ea };
        gboolean fuse = fusing (self), last = l + 1 == cfg->n_layer;
        /* The norm after this layer: the next layer's ln1, or the final one. */
        guint next_index = last ? lnf_index : 2 + (l + 1) * DC_GPT_TENSORS_PER_LAYER;
        const VkLayerActs *next = last ? NULL : &self->layers[l + 1];

        /* Fused: the bias, the residual add, ln2 and its rows' operand in
         * one dispatch; the bias, ReLU and the activation's operand in
         * another; the bias, the residual add, the next norm and its
         * operand in a third. */
        if (!record_linear (self, a->atty, FALSE, bt, p[4], fuse ? FUSED_BIAS : p[5], c, c,
                            a->res_mid, error)
            || (fuse
                ? !record_fuse_norm (self, a->res_mid, p[6], p[7], a->ln2, a->ln2_mean,
                                     a->ln2_rstd, bt, p[5], x, error)
                : (!record_op (self, OP_ADD, bt * c, add_mid, G_N_ELEMENTS (add_mid), error)
                   || !record_layer_norm (self, a->res_mid, p[6], p[7], a->ln2, a->ln2_mean,
                                          a->ln2_rstd, bt, error)))
            || !record_linear (self, a->ln2, fuse, bt, p[8], fuse ? FUSED_BIAS : p[9], c, 4 * c,
                               a->fc, error)
            || (fuse
                ? !record_fused (self, DC_GPT_VK_FUSE_OP_RELU, "fuse-bias-relu", bt, 4 * c,
                                 fuse_relu, G_N_ELEMENTS (fuse_relu), error)
                : !record_op (self, OP_RELU, bt * 4 * c, relu, G_N_ELEMENTS (relu), error))
            || !record_linear (self, a->fc_act, fuse, bt, p[10], fuse ? FUSED_BIAS : p[11],
                               4 * c, c, out, error)
            || (fuse
                ? !record_fuse_norm (self, out, tensor_offset (cfg, next_index),
                                     tensor_offset (cfg, next_index + 1),
                                     last ? self->lnf : next->ln1,
                                     last ? self->lnf_mean : next->ln1_mean,
                                     last ? self->lnf_rstd : next->ln1_rstd, bt, p[11],
                                     a->res_mid, error)
                : !record_op (self, OP_ADD, bt * c, add_out, G_N_ELEMENTS (add_out), error)))
          return FALSE;
      }
    }
  /* The final norm and the tied head: logits (BT, V) = lnf · wteᵀ (fused,
   * the last layer's kernel made lnf and its rows' operand). */
  if ((!fusing (self)
       && (!record_layer_norm (self, self->res + cfg->n_layer * bt * c,
                               tensor_offset (cfg, lnf_index),
                               tensor_offset (cfg, lnf_index + 1), self->lnf, self->lnf_mean,
                               self->lnf_rstd, bt, error)
           || !record_quantize (self, TRUE, self->lnf, c, 1, bt, c, error)))
      || !record_quantize (self, FALSE, wte, c, 1, v, c, error)
      || !record_gemm (self, bt, v, c, self->logits_off, v, error))
    return FALSE;
  /* The loss: each row's −log_softmax at its target, then their mean. */
  {
    guint32 loss[] = { (guint32) self->logits_off, (guint32) v, (guint32) bt,
                       (guint32) self->row_loss, (guint32) bt, (guint32) self->loss_scratch };
    guint32 mean_loss[] = { (guint32) self->row_loss, (guint32) bt,
                            (guint32) (self->logits_off + bt * v), f32_bits ((float) bt) };

    if (!record_op (self, OP_LOSS, bt, loss, G_N_ELEMENTS (loss), error)
        || !record_op (self, OP_MEAN, 1, mean_loss, G_N_ELEMENTS (mean_loss), error))
      return FALSE;
  }
  if (!self->backward)
    return TRUE;

  /* The backward pass (dc_gpt_run_backward ()): the probabilities (the
   * softmax of each row, dc_math_softmax: the scale 1 is exact), the head's
   * two products on them, the target rows' exact corrections, then / BT. */
  {
    guint32 probs[] = { (guint32) self->logits_off, (guint32) self->probs, (guint32) bt,
                        (guint32) v, f32_bits (1.0f), 0 };
    guint32 head_dx[] = { (guint32) self->d_a, (guint32) wte, (guint32) (bt * c), (guint32) c,
                          (guint32) bt, f32_bits ((float) bt) };
    /* The targets' token lists follow the tokens in T (submit ()). */
    guint32 head_dw[] = { (guint32) g_wte, (guint32) self->lnf, (guint32) bt, (guint32) c,
                          (guint32) v, (guint32) bt, f32_bits ((float) bt),
                          (guint32) (3 * bt + v + 1), (guint32) (3 * bt + 2 * v + 2) };
    guint32 zero[] = { (guint32) self->d_res, (guint32) (bt * c) };

    if (!record_softmax (self, OP_SOFTMAX, bt, v, probs, G_N_ELEMENTS (probs), error)
        || !record_quantize (self, TRUE, self->probs, v, 1, bt, v, error)
        || !record_quantize (self, FALSE, wte, 1, c, c, v, error)
        || !record_gemm (self, bt, c, v, self->d_a, c, error)
        || !record_quantize (self, TRUE, self->probs, 1, v, v, bt, error)
        || !record_quantize (self, FALSE, self->lnf, 1, c, c, bt, error)
        || !record_gemm (self, v, c, bt, g_wte, c, error)
        || !record_op (self, OP_HEAD_DX, bt * c, head_dx, G_N_ELEMENTS (head_dx), error)
        || !record_op (self, OP_HEAD_DW, v * c, head_dw, G_N_ELEMENTS (head_dw), error)
        || !record_op (self, OP_ZERO, bt * c, zero, G_N_ELEMENTS (zero), error)
        || !record_layer_norm_backward (self, self->res + cfg->n_layer * bt * c,
                                        tensor_offset (cfg, lnf_index), self->lnf_mean,
                                        self->lnf_rstd, self->d_a, bt,
                                        self->grads_off + tensor_offset (cfg, lnf_index),
                                        self->grads_off + tensor_offset (cfg, lnf_index + 1),
                                        error))
      return FALSE;
  }
  for (guint l = cfg->n_layer; l-- > 0;)
    {
      const VkLayerActs *a = &self->layers[l];
      gsize x = self->res + l * bt * c;
      gsize p[DC_GPT_TENSORS_PER_LAYER], g[DC_GPT_TENSORS_PER_LAYER];

      for (guint i = 0; i < DC_GPT_TENSORS_PER_LAYER; i++)
        {
          p[i] = tensor_offset (cfg, 2 + l * DC_GPT_TENSORS_PER_LAYER + i);
          g[i] = self->grads_off + p[i];
        }
      {
        guint32 relu[] = { (guint32) a->fc, (guint32) self->d_a, (guint32) self->d_a,
                           (guint32) (bt * 4 * c) };
        guint32 fuse_relu[] = { (guint32) a->fc, (guint32) self->d_a, (guint32) self->d_a,
                                (guint32) bt, (guint32) (4 * c), (guint32) self->qa,
                                (guint32) self->ea };

        /* MLP: out = res_mid + c_proj (relu (c_fc (ln2 (res_mid)))). */
        if (!record_linear_backward (self, a->fc_act, self->d_res, bt, p[10], 4 * c, c,
                                     self->d_a, g[10], g[11], error)
            || (fusing (self)
                /* ReLU's backward with d_a's rows' operand for the next product. */
                ? !(self->dy_rows_ready
                    = record_fused (self, DC_GPT_VK_FUSE_OP_RELU_BACK, "fuse-relu-back", bt,
                                    4 * c, fuse_relu, G_N_ELEMENTS (fuse_relu), error))
                : !record_op (self, OP_RELU_BACK, bt * 4 * c, relu, G_N_ELEMENTS (relu), error))
            || !record_linear_backward (self, a->ln2, self->d_a, bt, p[8], c, 4 * c, self->d_b,
                                        g[8], g[9], error)
            || !record_layer_norm_backward (self, a->res_mid, p[6], a->ln2_mean, a->ln2_rstd,
                                            self->d_b, bt, g[6], g[7], error)
            /* Attention: res_mid = x + c_proj (attn (c_attn (ln1 (x)))). */
            || !record_linear_backward (self, a->atty, self->d_res, bt, p[4], c, c, self->d_a,
                                        g[4], g[5], error))
          return FALSE;
      }
      {
        /* Every pair at once, each as head_backward (): d_att = dy · vᵀ;
         * dv = attᵀ · dy; d_scores through the softmax and the scale;
         * dq = d_scores · k; dk = d_scoresᵀ · q (q, k, v and their
         * gradients in qkv's layout). */
        Pairs in = { self->batch * h_n, h_n, t * 3 * c, d };
        Pairs sq = { self->batch * h_n, h_n, h_n * t * t, t * t, FALSE };
        Pairs tri = { self->batch * h_n, h_n, h_n * t * t, t * t, TRUE };
        Pairs dy = { self->batch * h_n, h_n, t * c, d };
        guint32 sm[] = { (guint32) a->att, (guint32) self->scores, (guint32) t, f32_bits (scale),
                         (guint32) (self->batch * h_n * t) };

        if (!record_quantize_pairs (self, TRUE, self->d_a, c, 1, t, d, &dy, error)
            || !record_quantize_pairs (self, FALSE, a->qkv + 2 * c, 3 * c, 1, t, d, &in, error)
            || !record_gemm_causal (self, t, t, d, self->scores, t, &sq, CAUSAL_OUT, error)
            || !record_quantize_pairs (self, TRUE, a->att, 1, t, t, t, &tri, error)
            || !record_quantize_pairs (self, FALSE, self->d_a, 1, c, d, t, &dy, error)
            || !record_gemm_causal (self, t, d, t, self->d_qkv + 2 * c, 3 * c, &in,
                                    CAUSAL_A_UPPER, error)
            || !record_softmax_quantized (self, OP_SOFTMAX_BACK, self->batch * h_n * t, t, sm,
                                          G_N_ELEMENTS (sm), self->scores, &tri, error)
            || !record_quantize_pairs (self, FALSE, a->qkv + c, 1, 3 * c, d, t, &in, error)
            || !record_gemm_causal (self, t, d, t, self->d_qkv, 3 * c, &in, CAUSAL_A_LOWER,
                                    error)
            || !record_quantize_pairs (self, TRUE, self->scores, 1, t, t, t, &tri, error)
            || !record_quantize_pairs (self, FALSE, a->qkv, 1, 3 * c, d, t, &in, error)
            || !record_gemm_causal (self, t, d, t, self->d_qkv + c, 3 * c, &in, CAUSAL_A_UPPER,
                                    error))
          return FALSE;
      }
      if (!record_linear_backward (self, a->ln1, self->d_qkv, bt, p[2], c, 3 * c, self->d_b,
                                   g[2], g[3], error)
          || !record_layer_norm_backward (self, x, p[0], a->ln1_mean, a->ln1_rstd, self->d_b, bt,
                                          g[0], g[1], error))
        return FALSE;
    }
  /* The embeddings: rows in order into d_wte (which holds the head's share)
   * and d_wpe. */
  {
    guint32 args[] = { (guint32) g_wte, (guint32) (self->grads_off + tensor_offset (cfg, 1)),
                       (guint32) self->d_res, (guint32) bt, (guint32) c, (guint32) t,
                       (guint32) t, (guint32) v, (guint32) (2 * bt), (guint32) (2 * bt + v + 1) };

    return record_op (self, OP_EMBED_BACK, (v + t) * c, args, G_N_ELEMENTS (args), error);
  }
}

/* Lays out F (returns its size in floats), Q and E: the offsets, then a dry
 * run of the body for the operands' regions. Needs no device. */
static gsize
layout (DcGptVkForward *self)
{
  const DcGptConfig *cfg = &self->config;
  gsize c = cfg->width, t = cfg->seq, v = cfg->vocab;
  gsize bt = (gsize) self->batch * t;
  gsize off = self->n_params;

#define REGION(var, n) G_STMT_START { var = off; off += (n); } G_STMT_END
  if (self->backward)
    {
      /* The gradients start at a multiple of 64 floats (256 bytes, the
       * largest minStorageBufferOffsetAlignment Vulkan allows): the resident
       * Adam step binds them as a range of F of their own. */
      off = (off + 63) / 64 * 64;
      REGION (self->grads_off, self->n_params);
    }
  REGION (self->res, (cfg->n_layer + 1) * bt * c);
  self->layers = g_new0 (VkLayerActs, cfg->n_layer);
  for (guint l = 0; l < cfg->n_layer; l++)
    {
      VkLayerActs *a = &self->layers[l];

      REGION (a->ln1, bt * c);
      REGION (a->ln1_mean, bt);
      REGION (a->ln1_rstd, bt);
      REGION (a->qkv, bt * 3 * c);
      REGION (a->att, (gsize) self->batch * cfg->n_head * t * t);
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
  REGION (self->scores, (gsize) self->batch * cfg->n_head * t * t);
  REGION (self->row_loss, bt);
  REGION (self->loss_scratch, bt * v);
  REGION (self->logits_off, bt * v + 1);
  if (self->backward)
    {
      REGION (self->probs, bt * v);
      REGION (self->d_res, bt * c);
      REGION (self->d_a, bt * 4 * c);
      REGION (self->d_b, bt * 4 * c);
      REGION (self->d_qkv, bt * 3 * c);
    }
#undef REGION
  /* The largest left operand (M·K) and right operand (N·K) of any product,
   * and their exponents, from a dry run of the body (it cannot fail: a dry
   * run records nothing). */
  self->dry = TRUE;
  record_body (self, NULL);
  self->dry = FALSE;
  /* The split products' int32 partial sums, after everything else in F. */
  self->split_scratch = off;
  off += self->split_words;
  /* The right operands start 16-byte aligned (the GEMM's wide loads). */
  self->qa = 0;
  self->qb = (self->q_left + 15) / 16 * 16;
  self->quant_scratch = (self->qb + self->q_right + 15) / 16 * 16;
  self->ea = 1;
  self->eb = 1 + self->e_left;
  return off;
}

/* Fills the memory a pass of @config at @batch takes (its layout, no
 * device). */
static void
measure (const DcGptConfig     *config,
         guint                  batch,
         gboolean               backward,
         DcGptVkForwardMemory  *out)
{
  g_autoptr(DcGptVkForward) self = g_new0 (DcGptVkForward, 1);
  gsize bt = (gsize) batch * config->seq, f;

  self->config = *config;
  self->batch = batch;
  self->backward = backward;
  self->n_params = dc_gpt_config_n_params (config);
  /* As with the tiled products and those on cooperative matrices (their
   * gates usually pass where offered) and the quantization tiles: the split
   * products' scratch is then part of F, sized for either kernel, and the
   * split columns' maxima part of Q, so this is the larger layout. */
  self->tiled = TRUE;
  self->products = PRODUCTS_TILED | PRODUCTS_COOP;
  self->quant_tiles = TRUE;
  f = layout (self);
  out->f_bytes = (guint64) f * 4;
  out->q_bytes = MAX (MAX (self->qb + self->q_right, 4),
                      self->quant_scratch + self->quant_scratch_bytes);
  out->e_bytes = (guint64) (self->eb + self->e_right) * 4;
  out->tokens_bytes = tokens_bytes (self);
  out->staging_bytes = (guint64) (backward ? 2 : 1) * self->n_params * 4
                       + (guint64) (bt * config->vocab + 1) * 4;
  out->device_bytes = out->f_bytes + out->q_bytes + out->tokens_bytes;
  out->host_bytes = out->e_bytes + out->tokens_bytes + out->staging_bytes;
}

/**
 * dc_gpt_vk_forward_measure:
 * @backward: the training pass (dc_gpt_vk_forward_new_training ())
 * @out: (out): the buffers' sizes
 *
 * What the resident pass of @config at @batch allocates, without a device:
 * F (weights, gradients and every activation, one storage-buffer binding
 * with 32-bit offsets: it must fit both the device's maxStorageBufferRange
 * and 4 GiB − 1), the int8 operands, and the host-visible buffers. The
 * memory shown before a run (`bench train`, docs/ARCHITECTURE.md) adds it.
 */
void
dc_gpt_vk_forward_measure (const DcGptConfig     *config,
                           guint                  batch,
                           gboolean               backward,
                           DcGptVkForwardMemory  *out)
{
  g_return_if_fail (batch > 0);
  measure (config, batch, backward, out);
}

/**
 * dc_gpt_vk_train_memory:
 * @device_bytes: (out): device-local memory
 * @host_bytes: (out): host-visible memory
 *
 * What training @config at @batch resident on a Vulkan device allocates:
 * the training pass (dc_gpt_vk_forward_measure ()) and the resident Adam
 * step's buffers (dc-gpt-vk-step.c: m and v device-local, w and g being the
 * pass's own; the gradients in and w, m, v out host-visible; its 36 bytes
 * of scalars). Shown before a run beside what the CPU needs
 * (`train --dry-run`, `bench train`).
 */
void
dc_gpt_vk_train_memory (const DcGptConfig *config,
                        guint              batch,
                        guint64           *device_bytes,
                        guint64           *host_bytes)
{
  DcGptVkForwardMemory pass;
  guint64 n = dc_gpt_config_n_params (config);

  measure (config, batch, TRUE, &pass);
  *device_bytes = pass.device_bytes + 2 * 4 * n;
  *host_bytes = pass.host_bytes + 4 * 4 * n + 36;
}

/**
 * dc_gpt_vk_forward_fits:
 * @max_storage_buffer_range: the device's limit, bytes per binding
 *
 * Whether @memory's F fits one binding of such a device with the shaders'
 * 32-bit offsets (in floats, and the bytes under 4 GiB: the largest range
 * Vulkan can report). Otherwise sets @error with the message the pass
 * refuses with.
 */
gboolean
dc_gpt_vk_forward_fits (const DcGptVkForwardMemory  *memory,
                        guint32                      max_storage_buffer_range,
                        const char                  *device_name,
                        GError                     **error)
{
  if (memory->f_bytes > max_storage_buffer_range || memory->f_bytes > G_MAXUINT32)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "the resident forward pass needs %" G_GUINT64_FORMAT " bytes in one storage "
                   "buffer; %s allows %u", memory->f_bytes, device_name,
                   max_storage_buffer_range);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_gpt_vk_forward_coop_offered:
 * @features: what a device offers
 * @khr: (out) (optional): whether the kernel must be rewritten for
 *   VK_KHR_cooperative_matrix (the device lists the shape under it only)
 * @why: (out) (optional) (transfer full): why not, when not offered
 *
 * Whether the resident pass's products may run on cooperative matrices
 * (resident-coop.comp) on such a device, before their gate: an int8
 * 16 × 8 × 32 shape under VK_NV_cooperative_matrix or
 * VK_KHR_cooperative_matrix on 32-wide subgroups, and the shared memory and
 * invocations of its wide tile. Split out so that the test can check the
 * decision with the features of devices it does not have (lavapipe has no
 * cooperative matrices).
 */
gboolean
dc_gpt_vk_forward_coop_offered (const DcVkFeatures  *features,
                                gboolean            *khr,
                                char               **why)
{
  guint32 shared = COOP_SHARED (coop_shapes[COOP_WIDE]);

  if (khr != NULL)
    *khr = !features->coop_matrix_nv_int8;
  if (!features->coop_matrix_nv_int8 && !(features->coop_matrix_khr_int8 & 1))
    {
      if (why != NULL)
        *why = g_strdup ("no int8 cooperative matrix of 16 × 8 × 32");
      return FALSE;
    }
  if (features->subgroup_size != 32)
    {
      if (why != NULL)
        *why = g_strdup_printf ("cooperative matrices on %u-wide subgroups, not 32",
                                features->subgroup_size);
      return FALSE;
    }
  if (features->max_shared_memory < shared
      || features->max_invocations < coop_shapes[COOP_WIDE][6])
    {
      if (why != NULL)
        *why = g_strdup_printf ("its tile takes %u bytes of shared memory and %u invocations, "
                                "the device allows %u and %u", shared,
                                coop_shapes[COOP_WIDE][6], features->max_shared_memory,
                                features->max_invocations);
      return FALSE;
    }
  return TRUE;
}

/* resident-coop.comp's pipelines, one per tile shape, when @products has
 * PRODUCTS_COOP (with @broken, the twin's). */
static gboolean
coop_pipelines_new (DcVkContext   *ctx,
                    guint          products,
                    gboolean       broken,
                    DcVkPipeline **pipelines,
                    GError       **error)
{
  g_autofree char *file = NULL;

  if (!(products & PRODUCTS_COOP))
    return TRUE;
  file = g_strconcat ("resident-coop", broken ? "-broken" : "",
                      products & PRODUCTS_COOP_KHR ? "+khr" : "", NULL);
  for (guint i = 0; i < N_COOP; i++)
    if ((pipelines[i] = dc_vk_pipeline_new_specialized (ctx, file, 4, sizeof (DcVkForwardPush),
                                                        coop_shapes[i], 7, error)) == NULL)
      return FALSE;
  return TRUE;
}

/* Lays out F, Q and E and records the whole pass: the weights' upload, the
 * body, the results' download. */
static gboolean
record_forward (DcGptVkForward  *self,
                gboolean         broken,
                gboolean         broken_loss,
                gboolean         broken_backward,
                gboolean         broken_gemm,
                gboolean         broken_coop,
                gboolean         broken_quant,
                gboolean         broken_softmax,
                GError         **error)
{
  const DcGptConfig *cfg = &self->config;
  gsize v = cfg->vocab;
  gsize bt = (gsize) self->batch * cfg->seq;
  gsize off, q_size, e_size;
  g_autofree char *forward_file = NULL, *loss_file = NULL, *backward_file = NULL;
  g_autofree char *gemm_file = NULL;
  g_autofree char *quant_file = NULL, *softmax_file = NULL;
  DcGptVkForwardMemory memory = { 0 };

  off = layout (self);
  q_size = MAX (self->qb + self->q_right, self->quant_scratch + self->quant_scratch_bytes);
  e_size = self->eb + self->e_right;
  /* Offsets are 32-bit in the shader; one binding holds F. */
  memory.f_bytes = (guint64) off * 4;
  if (!dc_gpt_vk_forward_fits (&memory,
                               dc_vk_context_get_features (self->ctx)->max_storage_buffer_range,
                               dc_vk_context_get_device_name (self->ctx), error))
    return FALSE;

  forward_file = _dc_gpt_vk_kernel_file ("resident-forward", self->native, broken);
  loss_file = _dc_gpt_vk_kernel_file ("resident-loss", self->native, broken_loss);
  backward_file = _dc_gpt_vk_kernel_file ("resident-backward", self->native, broken_backward);
  /* Integers only: one variant whatever the float mode. */
  gemm_file = _dc_gpt_vk_kernel_file ("resident-gemm", DC_VK_F32_EMULATED, broken_gemm);
  quant_file = _dc_gpt_vk_kernel_file ("resident-quant", DC_VK_F32_EMULATED, broken_quant);
  softmax_file = _dc_gpt_vk_kernel_file ("resident-softmax", self->native, broken_softmax);
  self->pipeline = dc_vk_pipeline_new (self->ctx, forward_file, 4, sizeof (DcVkForwardPush),
                                       error);
  if (self->pipeline == NULL
      || (self->loss_pipeline = dc_vk_pipeline_new (self->ctx, loss_file, 4,
                                                    sizeof (DcVkForwardPush), error)) == NULL
      || (self->backward
          && (self->backward_pipeline
                = dc_vk_pipeline_new (self->ctx, backward_file, 4, sizeof (DcVkForwardPush),
                                      error)) == NULL)
      || (self->tiled
          && (self->gemm_pipeline = dc_vk_pipeline_new (self->ctx, gemm_file, 4,
                                                    sizeof (DcVkForwardPush), error)) == NULL)
      || !coop_pipelines_new (self->ctx, self->products, broken_coop, self->coop_pipelines, error)
      || (self->quant_tiles
          && (self->quant_pipeline = dc_vk_pipeline_new (self->ctx, quant_file, 4,
                                                         sizeof (DcVkForwardPush),
                                                         error)) == NULL)
      || (self->softmax_rows
          && (self->softmax_pipeline = dc_vk_pipeline_new (self->ctx, softmax_file, 4,
                                                           sizeof (DcVkForwardPush),
                                                           error)) == NULL)
      || (self->f = dc_vk_buffer_new_device_local (self->ctx, off * 4, error)) == NULL
      || (self->q = dc_vk_buffer_new_device_local (self->ctx, MAX (q_size, 4), error)) == NULL
      || (self->e = dc_vk_buffer_new (self->ctx, e_size * 4, error)) == NULL
      || (self->tokens = dc_vk_buffer_new_device_local (self->ctx, tokens_bytes (self),
                                                        error)) == NULL
      || (self->tokens_staging = dc_vk_buffer_new (self->ctx, tokens_bytes (self), error)) == NULL
      || (self->params_staging = dc_vk_buffer_new (self->ctx, self->n_params * 4, error)) == NULL
      || (self->logits_staging = dc_vk_buffer_new (self->ctx, (bt * v + 1) * 4, error)) == NULL
      || (self->backward
          && (self->grads_staging = dc_vk_buffer_new_cached (self->ctx, self->n_params * 4,
                                                             error)) == NULL)
      || (self->upload = dc_vk_recording_new (self->ctx, error)) == NULL
      || (self->backward && (self->download = dc_vk_recording_new (self->ctx, error)) == NULL)
      || (self->recording = dc_vk_recording_new (self->ctx, error)) == NULL)
    return FALSE;
  /* The backward's sums over rows through resident-colsum.comp where its
   * gate passes; resident-backward.comp's otherwise (same bits, slower). */
  if (self->backward)
    {
      g_autoptr(GError) local_error = NULL;

      self->colsum_pipeline
        = _dc_gpt_vk_colsum_new (self->ctx, self->native,
                                 _dc_gpt_vk_kernel_twin ("resident-colsum", self->native),
                                 &local_error);
      if (self->colsum_pipeline == NULL && !self->gating)
        g_message ("Vulkan kernel resident-colsum on %s failed verification (%s) — using "
                   "resident-backward's column sums",
                   dc_vk_context_get_device_name (self->ctx), local_error->message);
      g_clear_error (&local_error);
      /* The norms' weight and bias gradients and the biases' gradients
       * through resident-chains.comp where its gate passes. */
      self->chains_pipeline
        = _dc_gpt_vk_chains_new (self->ctx, self->native,
                                 _dc_gpt_vk_kernel_twin ("resident-chains", self->native),
                                 &local_error);
      if (self->chains_pipeline == NULL && !self->gating)
        g_message ("Vulkan kernel resident-chains on %s failed verification (%s) — using "
                   "%s's column sums", dc_vk_context_get_device_name (self->ctx),
                   local_error->message,
                   self->colsum_pipeline != NULL ? "resident-colsum" : "resident-backward");
    }
  /* The producers fused with their output's quantization through
   * resident-fuse.comp where its gate passes (DC_VK_FUSE=0 keeps the
   * unfused ops, for comparisons); the unfused ops otherwise (same bits). */
  if (g_strcmp0 (g_getenv ("DC_VK_FUSE"), "0") != 0)
    {
      g_autoptr(GError) local_error = NULL;

      self->fuse_pipeline
        = _dc_gpt_vk_fuse_new (self->ctx, self->native,
                               _dc_gpt_vk_kernel_twin ("resident-fuse", self->native),
                               &local_error);
      if (self->fuse_pipeline == NULL && !self->gating)
        g_message ("Vulkan kernel resident-fuse on %s failed verification (%s) — the "
                   "producers and quantizations stay apart",
                   dc_vk_context_get_device_name (self->ctx), local_error->message);
    }

  /* The weights' upload and the gradients' download are recordings of their
   * own: a resident step (dc-gpt-vk-step.c) keeps the weights in F and the
   * gradients there for its Adam kernel, and submits the body alone. */
  {
    DcVkCopy in = { self->params_staging, 0, self->f, 0, self->n_params * 4 };

    dc_vk_recording_copy (self->upload, &in, 1);
    if (!dc_vk_recording_end (self->upload, error))
      return FALSE;
  }
  if (self->backward)
    {
      DcVkCopy out = { self->f, self->grads_off * 4, self->grads_staging, 0,
                       self->n_params * 4 };

      dc_vk_recording_copy (self->download, &out, 1);
      if (!dc_vk_recording_end (self->download, error))
        return FALSE;
    }
  {
    DcVkCopy in = { self->tokens_staging, 0, self->tokens, 0, tokens_bytes (self) };

    dc_vk_recording_copy (self->recording, &in, 1);
  }
  if (!record_body (self, error))
    return FALSE;
  if (self->backward)
    {
      DcVkCopy out = { self->f, (self->logits_off + bt * v) * 4, self->logits_staging,
                       bt * v * 4, 4 };

      dc_vk_recording_copy (self->recording, &out, 1);
    }
  else
    {
      DcVkCopy out = { self->f, self->logits_off * 4, self->logits_staging, 0,
                       (bt * v + 1) * 4 };

      dc_vk_recording_copy (self->recording, &out, 1);
    }
  return dc_vk_recording_end (self->recording, error);
}

/* One replay: the weights (unless @params is NULL: those in F already) and
 * tokens in, the recording submitted. */
static gboolean
submit (DcGptVkForward  *self,
        const float     *params,
        const guint8    *inputs,
        const guint8    *targets,
        GError         **error)
{
  gsize bt = (gsize) self->batch * self->config.seq;
  guint32 *tokens = dc_vk_buffer_get_data (self->tokens_staging);
  gint32 *e = dc_vk_buffer_get_data (self->e);

  gint64 t0 = g_get_monotonic_time (), t1;

  if (params != NULL)
    memcpy (dc_vk_buffer_get_data (self->params_staging), params, self->n_params * 4);
  for (gsize i = 0; i < bt; i++)
    {
      tokens[i] = inputs[i];
      tokens[bt + i] = targets != NULL ? targets[i] : 0;
    }
  /* The head's and the embeddings' scatter-adds (resident-colsum.comp)
   * read each token's rows from these lists: the inputs', the targets'. */
  if (self->backward)
    {
      guint v = self->config.vocab;

      _dc_gpt_vk_token_lists (tokens, bt, v, tokens + 2 * bt, tokens + 2 * bt + v + 1);
      _dc_gpt_vk_token_lists (tokens + bt, bt, v, tokens + 3 * bt + v + 1,
                              tokens + 3 * bt + 2 * v + 2);
    }
  e[0] = 0;
  t1 = g_get_monotonic_time ();
  if ((params != NULL && !dc_vk_recording_submit (self->upload, error))
      || !dc_vk_recording_submit (self->recording, error))
    return FALSE;
  self->times.passes++;
  self->times.host_ns += (guint64) (t1 - t0) * 1000;
  self->times.device_ns += (guint64) (g_get_monotonic_time () - t1) * 1000;
  if (e[0] != 0)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID,
                   "resident %s pass: a value to quantize was not finite (refused, "
                   "never quantized)", self->backward ? "training" : "forward");
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_gpt_vk_forward_run:
 * @params: the weights, laid out by dc_gpt_config_tensor ()
 * @inputs: (array): batch × seq token ids
 * @targets: (array) (nullable): the next token at each position, for @loss
 * @logits: (out caller-allocates) (array): (batch · seq, V)
 * @loss: (out) (optional): the mean cross-entropy (needs @targets)
 *
 * dc_gpt_run_forward ()'s logits and loss, computed on the device. Fails when
 * a value was not finite (training diverged), as the CPU pass does. Only for
 * a pass made by dc_gpt_vk_forward_new ().
 */
gboolean
dc_gpt_vk_forward_run (DcGptVkForward  *self,
                       const float     *params,
                       const guint8    *inputs,
                       const guint8    *targets,
                       float           *logits,
                       float           *loss,
                       GError         **error)
{
  gsize n = (gsize) self->batch * self->config.seq * self->config.vocab;

  g_return_val_if_fail (!self->backward, FALSE);
  g_return_val_if_fail (loss == NULL || targets != NULL, FALSE);

  if (!submit (self, params, inputs, targets, error))
    return FALSE;
  memcpy (logits, dc_vk_buffer_get_data (self->logits_staging), n * 4);
  if (loss != NULL)
    memcpy (loss, (float *) dc_vk_buffer_get_data (self->logits_staging) + n, 4);
  return TRUE;
}

/**
 * dc_gpt_vk_forward_gradients:
 * @params: the weights, laid out by dc_gpt_config_tensor ()
 * @inputs: (array): batch × seq token ids
 * @targets: (array): the next token at each position
 * @grads: (out caller-allocates) (array): n_params gradients of the mean loss
 * @loss: (out) (optional): the mean cross-entropy
 *
 * dc_gpt_run_forward () then dc_gpt_run_backward (), their bits, in one
 * submission: the weights and tokens in, the gradients and the loss out.
 * Only for a pass made by dc_gpt_vk_forward_new_training ().
 */
gboolean
dc_gpt_vk_forward_gradients (DcGptVkForward  *self,
                             const float     *params,
                             const guint8    *inputs,
                             const guint8    *targets,
                             float           *grads,
                             float           *loss,
                             GError         **error)
{
  g_return_val_if_fail (params != NULL, FALSE);

  return _dc_gpt_vk_forward_gradients_resident (self, params, inputs, targets, grads, loss, error);
}

/* dc_gpt_vk_forward_gradients () where @params may be NULL (the weights in F
 * already: a resident step's) and @grads may be NULL (the gradients stay in
 * F for the step's Adam kernel): only the loss then leaves the device. */
gboolean
_dc_gpt_vk_forward_gradients_resident (DcGptVkForward  *self,
                                       const float     *params,
                                       const guint8    *inputs,
                                       const guint8    *targets,
                                       float           *grads,
                                       float           *loss,
                                       GError         **error)
{
  gsize n = (gsize) self->batch * self->config.seq * self->config.vocab;
  gint64 t0;

  g_return_val_if_fail (self->backward, FALSE);
  g_return_val_if_fail (targets != NULL, FALSE);

  if (!submit (self, params, inputs, targets, error))
    return FALSE;
  if (grads != NULL)
    {
      t0 = g_get_monotonic_time ();
      if (!dc_vk_recording_submit (self->download, error))
        return FALSE;
      self->times.device_ns += (guint64) (g_get_monotonic_time () - t0) * 1000;
      t0 = g_get_monotonic_time ();
      memcpy (grads, dc_vk_buffer_get_data (self->grads_staging), self->n_params * 4);
      self->times.host_ns += (guint64) (g_get_monotonic_time () - t0) * 1000;
    }
  if (loss != NULL)
    memcpy (loss, (float *) dc_vk_buffer_get_data (self->logits_staging) + n, 4);
  return TRUE;
}

/* The pass's context and F, with the offset (floats) of the gradients in
 * it: a resident step shares them (dc-gpt-vk-step.c). */
DcVkContext *
_dc_gpt_vk_forward_get_context (DcGptVkForward *self)
{
  return self->ctx;
}

DcVkBuffer *
_dc_gpt_vk_forward_get_f (DcGptVkForward *self,
                          gsize          *grads_off)
{
  *grads_off = self->grads_off;
  return self->f;
}

guint64
dc_gpt_vk_forward_get_n_dispatches (DcGptVkForward *self)
{
  return self->n_dispatches + self->n_loss_dispatches + self->n_backward_dispatches
         + self->n_gemm_dispatches + self->n_coop_dispatches[COOP_WIDE]
         + self->n_coop_dispatches[COOP_NARROW] + self->n_quant_dispatches
         + self->n_softmax_dispatches + self->n_colsum_dispatches + self->n_chains_dispatches
         + self->n_fuse_dispatches;
}

/* With @twins, each kernel named in DC_TEST_BREAK_KERNEL is its broken twin
 * (the gates' tests). */
static DcGptVkForward *
forward_new (DcVkContext        *ctx,
             const DcGptConfig  *config,
             guint               batch,
             gboolean            backward,
             DcVkF32Mode         native,
             guint               products,
             gboolean            quant_tiles,
             gboolean            softmax_rows,
             gboolean            twins,
             GError            **error)
{
  g_autoptr(DcGptVkForward) self = g_new0 (DcGptVkForward, 1);

  self->ctx = ctx;
  self->config = *config;
  self->batch = batch;
  self->backward = backward;
  self->native = native;
  self->tiled = (products & PRODUCTS_TILED) != 0;
  self->products = products;
  self->quant_tiles = quant_tiles;
  self->softmax_rows = softmax_rows;
  self->gating = twins;
  self->n_params = dc_gpt_config_n_params (config);
  if (!record_forward (self, twins && _dc_gpt_vk_kernel_twin ("resident-forward", native),
                       twins && _dc_gpt_vk_kernel_twin ("resident-loss", native),
                       twins && _dc_gpt_vk_kernel_twin ("resident-backward", native),
                       twins && _dc_gpt_vk_kernel_broken ("resident-gemm"),
                       twins && _dc_gpt_vk_kernel_broken ("resident-coop"),
                       twins && _dc_gpt_vk_kernel_broken ("resident-quant"),
                       twins && _dc_gpt_vk_kernel_twin ("resident-softmax", native), error))
    {
      self->ctx = NULL;  /* the caller's */
      return NULL;
    }
  return g_steal_pointer (&self);
}

/* ---- The per-operation gate ---------------------------------------------- */

static gboolean
same_bits (const char  *op,
           const float *got,
           const float *want,
           gsize        n,
           GError     **error)
{
  for (gsize i = 0; i < n; i++)
    {
      guint32 a = f32_bits (got[i]), b = f32_bits (want[i]);

      if (a != b && !((a & 0x7fffffffu) > 0x7f800000u && (b & 0x7fffffffu) > 0x7f800000u))
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                       "%s, element %" G_GSIZE_FORMAT ": 0x%08x instead of 0x%08x", op, i, a, b);
          return FALSE;
        }
    }
  return TRUE;
}

/* Gate sizes: rows of a length that is not a power of two (the sum tree's
 * peeled parts), and a causal softmax block of 33. */
#define GATE_R 6
#define GATE_N 100
#define GATE_L 33
#define GATE_V 8
#define GATE_LOSS_ROWS 32

/* Each operation of the shader once, on fixed inputs in host-visible
 * buffers, against the CPU function it stands for. */
static gboolean
gate_ops (DcVkContext  *ctx,
          DcVkF32Mode   native,
          gboolean      broken,
          gboolean      broken_loss,
          GError      **error)
{
  enum { X = 0, W = X + GATE_R * GATE_N, B = W + GATE_N, Y = B + GATE_N, MEAN = Y + GATE_R * GATE_N,
         RSTD = MEAN + GATE_R, X2 = RSTD + GATE_R, OUT = X2 + GATE_R * GATE_N,
         SCORES = OUT + GATE_R * GATE_N, ATT = SCORES + GATE_L * GATE_L, MM = ATT + GATE_L * GATE_L,
         WTE = MM + GATE_R * GATE_R, WPE = WTE + GATE_V * GATE_N, EMB = WPE + GATE_L * GATE_N,
         LOSS_IN = EMB + GATE_L * GATE_N, LOSS_SCRATCH = LOSS_IN + GATE_LOSS_ROWS * GATE_N,
         LOSS_OUT = LOSS_SCRATCH + GATE_LOSS_ROWS * GATE_N,
         F_SIZE = LOSS_OUT + GATE_LOSS_ROWS + 1 };
  g_autoptr(DcVkPipeline) pipeline = NULL, loss_pipeline = NULL;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  g_autoptr(DcQuantMatrix) qa = dc_quant_matrix_new (GATE_R, GATE_N, NULL);
  g_autoptr(DcQuantMatrix) qb = dc_quant_matrix_new (GATE_R, GATE_N, NULL);
  g_autoptr(DcQuantMatrix) qc = dc_quant_matrix_new (GATE_N, GATE_R, NULL);
  guint64 state = G_GUINT64_CONSTANT (0x4461697379467731);
  float want[GATE_L * GATE_N];
  gint32 acc[GATE_R * GATE_R];
  float *f;
  gint8 *q;
  gint32 *e;
  guint32 *tok;

  g_autofree char *forward_file = _dc_gpt_vk_kernel_file ("resident-forward", native, broken);
  g_autofree char *loss_file = _dc_gpt_vk_kernel_file ("resident-loss", native, broken_loss);

  pipeline = dc_vk_pipeline_new (ctx, forward_file, 4, sizeof (DcVkForwardPush), error);
  loss_pipeline = dc_vk_pipeline_new (ctx, loss_file, 4, sizeof (DcVkForwardPush), error);
  if (pipeline == NULL || loss_pipeline == NULL
      || (bf = dc_vk_buffer_new (ctx, F_SIZE * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, 3 * GATE_R * GATE_N, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, 4 * (1 + GATE_N + 2 * GATE_R), error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4 * GATE_L, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  q = dc_vk_buffer_get_data (bq);
  e = dc_vk_buffer_get_data (be);
  tok = dc_vk_buffer_get_data (bt);
  for (guint i = 0; i < F_SIZE; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (&state);
      guint32 sign = (guint32) r & 0x80000000u;

      /* Activations of every usual size, some exact zeros, a few subnormals
       * and large values. */
      switch ((r >> 32) % 16)
        {
        case 0: f[i] = 0.0f; break;
        case 1: f[i] = bits_f32 (sign | (guint32) (r >> 40) % 0x800000u); break;
        case 2: f[i] = bits_f32 (sign | (guint32) (150 + (r >> 40) % 20) << 23 | ((guint32) r & 0x7fffffu)); break;
        default: f[i] = bits_f32 (sign | (guint32) (118 + (r >> 40) % 14) << 23 | ((guint32) r & 0x7fffffu)); break;
        }
    }
  for (guint i = 0; i < GATE_L; i++)
    tok[i] = (i * 5) % GATE_V;

#define RUN(op_, work_, ...) \
  G_STMT_START { \
    DcVkForwardPush push_ = { op_, { __VA_ARGS__ } }; \
    DcVkBuffer *buffers_[] = { bf, bq, be, bt }; \
    gsize groups_ = (op_) == OP_QUANTIZE ? (work_) : ((work_) + FWD_GROUP - 1) / FWD_GROUP; \
    DcVkPipeline *pipeline_ = (op_) == OP_LOSS || (op_) == OP_MEAN ? loss_pipeline : pipeline; \
    if (!dc_vk_dispatch (ctx, pipeline_, buffers_, &push_, (guint) groups_, 1, 1, error)) \
      return FALSE; \
  } G_STMT_END

  /* Layer norm of the rows of X into Y: an invocation, then a workgroup,
   * per row (a[10]). */
  for (guint32 wg = 0; wg < 2; wg++)
    {
      RUN (OP_LAYER_NORM, GATE_R, X, W, B, Y, MEAN, RSTD, GATE_R, GATE_N,
           f32_bits ((float) GATE_N), f32_bits (DC_MATH_GPT2_LN_EPS), wg);
      for (guint r = 0; r < GATE_R; r++)
        {
          float mean, rstd;

          dc_math_layer_norm (f + X + r * GATE_N, f + W, f + B, DC_MATH_GPT2_LN_EPS,
                              want + r * GATE_N, &mean, &rstd, GATE_N);
          if (!same_bits (wg ? "layer norm (a workgroup per row)" : "layer norm",
                          f + Y + r * GATE_N, want + r * GATE_N, GATE_N, error)
              || !same_bits ("layer norm mean", f + MEAN + r, &mean, 1, error)
              || !same_bits ("layer norm rstd", f + RSTD + r, &rstd, 1, error))
            return FALSE;
        }
    }
  /* Rows of X and of X2, and columns of X, quantized, both ways (a[11]: a
   * workgroup or an invocation per vector); the products of the rows. */
  for (guint32 mode = 0; mode < 2; mode++)
    {
      memset (q, 0x55, 3 * GATE_R * GATE_N);
      RUN (OP_QUANTIZE, GATE_R, X, GATE_N, 1, GATE_R, GATE_N, 0, 1, 0, 0, 0, 0, mode);
      RUN (OP_QUANTIZE, GATE_R, X2, GATE_N, 1, GATE_R, GATE_N, GATE_R * GATE_N, 1 + GATE_R,
           0, 0, 0, 0, mode);
      RUN (OP_GEMM, GATE_R * GATE_R, 0, 1, GATE_R, GATE_R * GATE_N, 1 + GATE_R, GATE_R, GATE_N,
           MM, GATE_R);
      if (!dc_quant_pack_reference ("gate", f + X, GATE_N, 1, qa, error)
          || !dc_quant_pack_reference ("gate", f + X2, GATE_N, 1, qb, error))
        return FALSE;
      if (memcmp (q, qa->q, GATE_R * GATE_N) != 0 || memcmp (e + 1, qa->exponent, GATE_R * 4) != 0
          || memcmp (q + GATE_R * GATE_N, qb->q, GATE_R * GATE_N) != 0
          || memcmp (e + 1 + GATE_R, qb->exponent, GATE_R * 4) != 0)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                       "quantized rows differ from dc_quant_pack's (%s)",
                       mode ? "an invocation per vector" : "a workgroup per vector");
          return FALSE;
        }
      dc_gemm_reference_i32 (qa, qb, acc);
      for (guint i = 0; i < GATE_R * GATE_R; i++)
        want[i] = dc_gemm_epilogue (acc[i], qa->exponent[i / GATE_R], qb->exponent[i % GATE_R]);
      if (!same_bits ("product", f + MM, want, GATE_R * GATE_R, error))
        return FALSE;
      RUN (OP_QUANTIZE, GATE_N, X, 1, GATE_N, GATE_N, GATE_R, 2 * GATE_R * GATE_N, 1, 0, 0, 0, 0,
           mode);
      if (!dc_quant_pack_reference ("gate", f + X, 1, GATE_N, qc, error))
        return FALSE;
      if (memcmp (q + 2 * GATE_R * GATE_N, qc->q, GATE_R * GATE_N) != 0
          || memcmp (e + 1, qc->exponent, GATE_N * 4) != 0)
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                       "quantized columns differ from dc_quant_pack's (%s)",
                       mode ? "an invocation per vector" : "a workgroup per vector");
          return FALSE;
        }
    }
  /* Bias, residual add, ReLU: Y += B; OUT = X + OUT; X2 = relu (X). */
  for (guint i = 0; i < GATE_R * GATE_N; i++)
    want[i] = f[Y + i] + f[B + i % GATE_N];
  RUN (OP_BIAS, GATE_R * GATE_N, Y, B, GATE_R * GATE_N, GATE_N);
  if (!same_bits ("bias", f + Y, want, GATE_R * GATE_N, error))
    return FALSE;
  for (guint i = 0; i < GATE_R * GATE_N; i++)
    want[i] = f[X + i] + f[OUT + i];
  RUN (OP_ADD, GATE_R * GATE_N, X, OUT, GATE_R * GATE_N);
  if (!same_bits ("residual add", f + OUT, want, GATE_R * GATE_N, error))
    return FALSE;
  for (guint i = 0; i < GATE_R * GATE_N; i++)
    want[i] = dc_math_reluf (f[X + i]);
  RUN (OP_RELU, GATE_R * GATE_N, X, X2, GATE_R * GATE_N);
  if (!same_bits ("ReLU", f + X2, want, GATE_R * GATE_N, error))
    return FALSE;
  /* Attention's causal softmax of a block of scores, scaled by 1/√24. */
  for (guint i = 0; i < GATE_L * GATE_L; i++)
    {
      /* Scores in attention's range, ±16, in steps of 2^-16. */
      guint64 r = _dc_gpt_vk_splitmix64 (&state);

      f[SCORES + i] = (float) ((gint32) (r % 2097152) - 1048576) * 0x1p-16f;
    }
  dc_gpt_vk_softmax_reference (f + SCORES, 1.0f / __builtin_sqrtf (24.0f), TRUE, GATE_L, GATE_L,
                               want);
  RUN (OP_SOFTMAX, GATE_L, SCORES, ATT, GATE_L, GATE_L, f32_bits (1.0f / __builtin_sqrtf (24.0f)),
       1);
  if (!same_bits ("softmax", f + ATT, want, GATE_L * GATE_L, error))
    return FALSE;
  /* The loss of the rows of X (targets from the tokens) and their mean. */
  {
    float row_loss[GATE_LOSS_ROWS], mean_want;

    /* Logits of ±[1, 64) with full mantissas: x − max often rounds, so its
     * low part matters. */
    for (guint i = 0; i < GATE_LOSS_ROWS * GATE_N; i++)
      {
        guint64 r = _dc_gpt_vk_splitmix64 (&state);

        f[LOSS_IN + i] = bits_f32 (((guint32) r & 0x807fffffu)
                                   | (guint32) (127 + (r >> 40) % 6) << 23);
      }
    for (guint r = 0; r < GATE_LOSS_ROWS; r++)
      {
        dc_math_log_softmax (f + LOSS_IN + r * GATE_N, want, GATE_N);
        row_loss[r] = -want[tok[r]];
      }
    mean_want = dc_math_sum (row_loss, GATE_LOSS_ROWS) / (float) GATE_LOSS_ROWS;
    RUN (OP_LOSS, GATE_LOSS_ROWS, LOSS_IN, GATE_N, 0, LOSS_OUT, GATE_LOSS_ROWS, LOSS_SCRATCH);
    RUN (OP_MEAN, 1, LOSS_OUT, GATE_LOSS_ROWS, LOSS_OUT + GATE_LOSS_ROWS,
         f32_bits ((float) GATE_LOSS_ROWS));
    if (!same_bits ("loss", f + LOSS_OUT, row_loss, GATE_LOSS_ROWS, error)
        || !same_bits ("mean loss", f + LOSS_OUT + GATE_LOSS_ROWS, &mean_want, 1, error))
      return FALSE;
    /* The mean of more leaves than the workgroup has invocations' blocks
     * (376 blocks of 8 over 64 invocations), in eight parts of the tree
     * (3,003 = 2,048 + 512 + 256 + 128 + 32 + 16 + 8 + 3), and of the most
     * leaves a part may leave (7 × 8 + 7). */
    for (guint k = 0; k < 2; k++)
      {
        guint32 n = k == 0 ? 3003 : 63;

        mean_want = dc_math_sum (f + LOSS_IN, n) / (float) n;
        RUN (OP_MEAN, 1, LOSS_IN, n, LOSS_OUT + GATE_LOSS_ROWS, f32_bits ((float) n));
        if (!same_bits ("mean of many", f + LOSS_OUT + GATE_LOSS_ROWS, &mean_want, 1, error))
          return FALSE;
      }
  }
  /* Token plus position embedding of GATE_L positions. */
  for (guint r = 0; r < GATE_L; r++)
    for (guint i = 0; i < GATE_N; i++)
      want[r * GATE_N + i] = f[WTE + tok[r] * GATE_N + i] + f[WPE + r * GATE_N + i];
  RUN (OP_EMBED, GATE_L * GATE_N, EMB, WTE, WPE, GATE_L * GATE_N, GATE_N, GATE_L);
  if (!same_bits ("embedding", f + EMB, want, GATE_L * GATE_N, error))
    return FALSE;
#undef RUN
  return TRUE;
}

/* A width-16 model's logits on the device and on the CPU, every bit. */
static gboolean
gate (DcVkContext  *ctx,
      DcVkF32Mode   native,
      guint         products,
      gboolean      quant_tiles,
      gboolean      softmax_rows,
      GError      **error)
{
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(DcGptRun) run = NULL;
  g_autofree float *logits = NULL;
  DcGptVkForward *fwd;
  DcGptConfig config;
  guint8 tokens[2 * 16 + 1];
  float loss = 0.0f, want_loss = 0.0f;
  gboolean ok;
  gsize n;

  if (!gate_ops (ctx, native, _dc_gpt_vk_kernel_twin ("resident-forward", native),
                 _dc_gpt_vk_kernel_twin ("resident-loss", native), error))
    return FALSE;
  dc_gpt_config_init_derived (&config, 16, 16);
  model = dc_gpt_model_new (&config, error);
  if (model == NULL)
    return FALSE;
  dc_gpt_model_init_weights (model, 7);
  for (guint i = 0; i < G_N_ELEMENTS (tokens); i++)
    tokens[i] = (guint8) (i * 37 + 11);
  run = dc_gpt_run_new (&config, 2, DC_GPT_PRECISION_INT8, 1);
  if (!dc_gpt_run_forward (run, model->params, tokens, tokens + 1, 2, 16, &want_loss, error))
    return FALSE;
  fwd = forward_new (ctx, &config, 2, FALSE, native, products, quant_tiles, softmax_rows, TRUE,
                     error);
  if (fwd == NULL)
    return FALSE;
  n = (gsize) 2 * 16 * config.vocab;
  logits = g_new (float, n);
  ok = dc_gpt_vk_forward_run (fwd, model->params, tokens, tokens + 1, logits, &loss, error);
  fwd->ctx = NULL;  /* borrowed */
  dc_gpt_vk_forward_free (fwd);
  if (!ok)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (f32_bits (logits[i]) != f32_bits (dc_gpt_run_get_logits (run)[i]))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "logit %" G_GSIZE_FORMAT ": 0x%08x instead of 0x%08x", i,
                     f32_bits (logits[i]), f32_bits (dc_gpt_run_get_logits (run)[i]));
        return FALSE;
      }
  return same_bits ("the small model's loss", &loss, &want_loss, 1, error);
}

/* The backward operations once each on fixed inputs, against the CPU
 * functions they stand for: the norm's input and weight gradients, the
 * causal softmax's backward, ReLU's, a column sum. Their results reach the
 * weights' gradients through INT8 products, which hide most one-ulp errors,
 * hence this part besides the small model's gradients. */
static gboolean
gate_backward_ops (DcVkContext  *ctx,
                   DcVkF32Mode   native,
                   gboolean      broken,
                   GError      **error)
{
  enum { X = 0, W = X + GATE_R * GATE_N, DY = W + GATE_N, MEAN = DY + GATE_R * GATE_N,
         RSTD = MEAN + GATE_R, DRES = RSTD + GATE_R, DW = DRES + GATE_R * GATE_N,
         DB = DW + GATE_N, ATT = DB + GATE_N, DATT = ATT + GATE_L * GATE_L,
         RELU = DATT + GATE_L * GATE_L, COLS = RELU + GATE_R * GATE_N,
         F_SIZE = COLS + GATE_N };
  g_autoptr(DcVkPipeline) pipeline = NULL;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x4461697379427731);
  g_autofree float *want = g_new0 (float, F_SIZE);
  float scale = 1.0f / __builtin_sqrtf (24.0f);
  float *f;

  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-backward", native, broken);

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkForwardPush), error);
  if (pipeline == NULL
      || (bf = dc_vk_buffer_new (ctx, F_SIZE * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  for (guint i = 0; i < F_SIZE; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (&state);
      guint32 sign = (guint32) r & 0x80000000u;

      /* Gradients and activations of the usual sizes, some exact zeros
       * (ReLU's +0 and −0) and a few subnormals. */
      switch ((r >> 32) % 16)
        {
        case 0: f[i] = 0.0f; break;
        case 1: f[i] = bits_f32 (sign); break;
        case 2: f[i] = bits_f32 (sign | (guint32) (r >> 40) % 0x800000u); break;
        default: f[i] = bits_f32 (sign | (guint32) (112 + (r >> 40) % 20) << 23 | ((guint32) r & 0x7fffffu)); break;
        }
    }
  for (guint r = 0; r < GATE_R; r++)
    {
      /* Real statistics of the rows. */
      dc_math_layer_norm (f + X + r * GATE_N, f + W, f + W, DC_MATH_GPT2_LN_EPS, want, f + MEAN + r,
                          f + RSTD + r, GATE_N);
    }
  for (guint i = 0; i < GATE_L * GATE_L; i++)
    f[ATT + i] = 0.0f;
  for (guint t = 0; t < GATE_L; t++)
    {
      float row[GATE_L];

      for (guint j = 0; j <= t; j++)
        row[j] = (float) ((gint32) (_dc_gpt_vk_splitmix64 (&state) % 65536) - 32768) * 0x1p-11f;
      dc_math_softmax (row, f + ATT + t * GATE_L, t + 1);
    }

#define RUN(op_, work_, ...) \
  G_STMT_START { \
    DcVkForwardPush push_ = { op_, { __VA_ARGS__ } }; \
    DcVkBuffer *buffers_[] = { bf, bq, be, bt }; \
    if (!dc_vk_dispatch (ctx, pipeline, buffers_, &push_, \
                         (guint) (((work_) + FWD_GROUP - 1) / FWD_GROUP), 1, 1, error)) \
      return FALSE; \
  } G_STMT_END

  /* The norm's backward: dx added to DRES, then dw, db by columns. */
  {
    float dx[GATE_N], dw[GATE_N] = { 0 }, db[GATE_N] = { 0 };

    memcpy (want + DRES, f + DRES, GATE_R * GATE_N * 4);
    for (guint r = 0; r < GATE_R; r++)
      {
        dc_math_layer_norm_backward (f + X + r * GATE_N, f + W, f[MEAN + r], f[RSTD + r],
                                     f + DY + r * GATE_N, dx, dw, db, GATE_N);
        dc_math_add (want + DRES + r * GATE_N, dx, want + DRES + r * GATE_N, GATE_N);
      }
    RUN (OP_LN_DX, GATE_R, X, W, MEAN, RSTD, DY, DRES, GATE_R, GATE_N, f32_bits ((float) GATE_N));
    RUN (OP_LN_DW, GATE_N, X, DY, MEAN, RSTD, GATE_R, GATE_N, DW, DB);
    if (!same_bits ("layer norm backward", f + DRES, want + DRES, GATE_R * GATE_N, error)
        || !same_bits ("layer norm weight gradient", f + DW, dw, GATE_N, error)
        || !same_bits ("layer norm bias gradient", f + DB, db, GATE_N, error))
      return FALSE;
  }
  /* The causal softmax's backward, in place on DATT, scaled. */
  for (guint t = 0; t < GATE_L; t++)
    {
      float *row = want + DATT + t * GATE_L;

      memcpy (row, f + DATT + t * GATE_L, GATE_L * 4);
      dc_math_softmax_backward (f + ATT + t * GATE_L, row, row, t + 1);
      for (guint j = 0; j < GATE_L; j++)
        row[j] = j <= t ? row[j] * scale : 0.0f;
    }
  RUN (OP_SOFTMAX_BACK, GATE_L, ATT, DATT, GATE_L, f32_bits (scale));
  if (!same_bits ("softmax backward", f + DATT, want + DATT, GATE_L * GATE_L, error))
    return FALSE;
  /* ReLU's backward (x from X, dy from DY) and a column sum of DY. */
  dc_math_relu_backward (f + X, f + DY, want + RELU, GATE_R * GATE_N);
  RUN (OP_RELU_BACK, GATE_R * GATE_N, X, DY, RELU, GATE_R * GATE_N);
  for (guint j = 0; j < GATE_N; j++)
    {
      float acc = 0.0f;

      for (guint r = 0; r < GATE_R; r++)
        acc = acc + f[DY + r * GATE_N + j];
      want[COLS + j] = acc;
    }
  RUN (OP_COLSUM, GATE_N, DY, GATE_R, GATE_N, COLS);
  if (!same_bits ("ReLU backward", f + RELU, want + RELU, GATE_R * GATE_N, error)
      || !same_bits ("column sum", f + COLS, want + COLS, GATE_N, error))
    return FALSE;
#undef RUN
  return TRUE;
}

/* A width-16 model's gradients and loss on the device and on the CPU,
 * every bit: the backward operations in place, the head's and the
 * embeddings' scatter-adds, every product of the backward pass. */
static gboolean
gate_backward (DcVkContext  *ctx,
               DcVkF32Mode   native,
               guint         products,
               gboolean      quant_tiles,
               gboolean      softmax_rows,
               GError      **error)
{
  g_autoptr(DcGptModel) model = NULL;
  g_autoptr(DcGptRun) run = NULL;
  g_autofree float *grads = NULL, *want = NULL;
  DcGptVkForward *pass;
  DcGptConfig config;
  guint8 tokens[2 * 16 + 1];
  float loss = 0.0f, want_loss = 0.0f;
  gboolean ok;

  if (!gate_backward_ops (ctx, native, _dc_gpt_vk_kernel_twin ("resident-backward", native),
                          error))
    return FALSE;
  dc_gpt_config_init_derived (&config, 16, 16);
  model = dc_gpt_model_new (&config, error);
  if (model == NULL)
    return FALSE;
  dc_gpt_model_init_weights (model, 7);
  for (guint i = 0; i < G_N_ELEMENTS (tokens); i++)
    tokens[i] = (guint8) (i * 37 + 11);
  run = dc_gpt_run_new (&config, 2, DC_GPT_PRECISION_INT8, 1);
  want = g_new (float, model->n_params);
  grads = g_new (float, model->n_params);
  if (!dc_gpt_run_forward (run, model->params, tokens, tokens + 1, 2, 16, &want_loss, error)
      || !dc_gpt_run_backward (run, model->params, want, error))
    return FALSE;
  pass = forward_new (ctx, &config, 2, TRUE, native, products, quant_tiles, softmax_rows, TRUE,
                      error);
  if (pass == NULL)
    return FALSE;
  ok = dc_gpt_vk_forward_gradients (pass, model->params, tokens, tokens + 1, grads, &loss, error);
  pass->ctx = NULL;  /* borrowed */
  dc_gpt_vk_forward_free (pass);
  return ok
         && same_bits ("the small model's gradients", grads, want, model->n_params, error)
         && same_bits ("the small model's loss", &loss, &want_loss, 1, error);
}

/* A product gate's operands: int8 values of the whole range, −127 to 127
 * (the extremes often: they carry the largest sums), the left operand's
 * (the first @qb of @n_q) zero where @causal says A is; and exponents that
 * reach the epilogue's rounding, its subnormal and its overflow cases. */
static void
gate_product_fill (gint8    *q,
                   gsize     n_q,
                   gsize     qb,
                   guint     k,
                   guint     m_rows,
                   guint     causal,
                   gint32   *e,
                   gsize     n_e,
                   guint64  *state)
{
  for (gsize i = 0; i < n_q; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (state);
      gsize row = i / k % m_rows, col = i % k;

      q[i] = (gint8) ((r >> 8) % 4 == 0 ? ((r & 1) ? 127 : -127) : (gint) (r % 255) - 127);
      if (i < qb && ((causal == CAUSAL_A_LOWER && col > row)
                     || (causal == CAUSAL_A_UPPER && col < row)))
        q[i] = 0;
    }
  for (gsize i = 0; i < n_e; i++)
    e[i] = (gint32) (_dc_gpt_vk_splitmix64 (state) % 40) - 30 - (i % 7 == 0 ? 50 : 0)
           + (i % 11 == 0 ? 60 : 0);
}

/* The first output of a product gate's @f (pairs placed as the attention's)
 * that differs from the integer dot product through dc_gemm_epilogue ();
 * with CAUSAL_OUT only the outputs on and below the diagonal count.
 * Returns: FALSE with the pair, row, column and both values, or TRUE. */
static gboolean
gate_product_check (const float   *f,
                    const gint8   *q,
                    gsize          qb,
                    const gint32  *e,
                    guint          pairs,
                    guint          heads,
                    guint          m_rows,
                    guint          n_cols,
                    guint          k,
                    guint          causal,
                    guint         *where,
                    float         *got,
                    float         *want)
{
  const guint ldc = heads * n_cols;

  for (guint p = 0; p < pairs; p++)
    for (guint m = 0; m < m_rows; m++)
      for (guint n = 0; n < n_cols; n++)
        {
          const gint8 *a = q + ((gsize) p * m_rows + m) * k;
          const gint8 *b = q + qb + ((gsize) p * n_cols + n) * k;
          gsize at = 1 + (p / heads) * m_rows * ldc + (p % heads) * n_cols + (gsize) m * ldc + n;
          gint32 acc = 0;

          if (causal == CAUSAL_OUT && n > m)
            continue;
          for (guint i = 0; i < k; i++)
            acc += (gint32) a[i] * b[i];
          *want = dc_gemm_epilogue (acc, e[1 + p * m_rows + m],
                                    e[1 + pairs * m_rows + p * n_cols + n]);
          if (!same_f32 (f[at], *want))
            {
              where[0] = p;
              where[1] = m;
              where[2] = n;
              *got = f[at];
              return FALSE;
            }
        }
  return TRUE;
}

/* resident-gemm.comp's gate: products of random int8 operands with random
 * exponents against the integer dot products and dc_gemm_epilogue (), on a
 * shape with partial tiles on every side (M, N not multiples of 64, K not of
 * 32): pairs placed as the attention's are (two heads side by side), then
 * one matrix split over K into slices (the last one short) and summed by
 * OP_GEMM_SUM. */
#define GEMM_GATE_M 70
#define GEMM_GATE_N 67

static gboolean
gate_gemm_case (DcVkContext   *ctx,
                DcVkPipeline  *pipeline,
                guint          k,
                guint          pairs,
                guint          heads,
                guint          slice_words,
                guint64       *state,
                GError       **error)
{
  const guint m_rows = GEMM_GATE_M, n_cols = GEMM_GATE_N, ldc = heads * n_cols;
  const gsize qb = (gsize) pairs * m_rows * k, n_out = (gsize) (pairs / heads) * m_rows * ldc;
  const guint slices = slice_words > 0 ? (k / 4 + slice_words - 1) / slice_words : 1;
  const gsize scratch = 1 + n_out, n_f = scratch + (gsize) slices * m_rows * n_cols;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  DcVkBuffer *buffers[4];
  gint8 *q;
  gint32 *e;
  float *f;

  g_assert (qb % 16 == 0 && pairs % heads == 0 && k % 4 == 0);
  if ((bf = dc_vk_buffer_new (ctx, n_f * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, 2 * qb, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, 4 * (1 + pairs * (m_rows + n_cols)), error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4, error)) == NULL)
    return FALSE;
  q = dc_vk_buffer_get_data (bq);
  e = dc_vk_buffer_get_data (be);
  f = dc_vk_buffer_get_data (bf);
  gate_product_fill (q, 2 * qb, qb, k, m_rows, CAUSAL_NONE, e, 1 + pairs * (m_rows + n_cols),
                     state);
  memset (f, 0xff, n_f * 4);
  buffers[0] = bf;
  buffers[1] = bq;
  buffers[2] = be;
  buffers[3] = bt;
  {
    DcVkForwardPush push = { OP_GEMM, { 0, 1, m_rows, (guint32) qb, 1 + pairs * m_rows, n_cols,
                                        k, 1, ldc, pairs, heads, m_rows * ldc, n_cols,
                                        slice_words, (guint32) scratch } };

    if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, (n_cols + GEMM_TILE - 1) / GEMM_TILE,
                         (m_rows + GEMM_TILE - 1) / GEMM_TILE, slice_words > 0 ? slices : pairs,
                         error))
      return FALSE;
    if (slice_words > 0)
      {
        push.op = OP_GEMM_SUM;
        push.a[13] = slices;
        if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, (m_rows * n_cols + 255) / 256, 1, 1,
                             error))
          return FALSE;
      }
  }
  {
    guint where[3];
    float got, want;

    if (!gate_product_check (f, q, qb, e, pairs, heads, m_rows, n_cols, k, CAUSAL_NONE, where,
                             &got, &want))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "product (K %u%s) of pair %u, row %u, column %u: 0x%08x instead of "
                     "0x%08x", k, slice_words > 0 ? ", split" : "", where[0], where[1], where[2],
                     f32_bits (got), f32_bits (want));
        return FALSE;
      }
  }
  return TRUE;
}

static gboolean
gate_gemm (DcVkContext  *ctx,
           gboolean      broken,
           GError      **error)
{
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-gemm", DC_VK_F32_EMULATED, broken);
  g_autoptr(DcVkPipeline) pipeline = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x4461697379476d31);  /* "DaisyGm1" */

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkForwardPush), error);
  return pipeline != NULL
         && gate_gemm_case (ctx, pipeline, 100, 4, 2, 0, &state, error)
         /* 250 words of K in slices of 64: three whole, one of 58. */
         && gate_gemm_case (ctx, pipeline, 1000, 1, 1, 64, &state, error)
         /* Slices of 24: OP_GEMM_SUM's four at a time twice, then three. */
         && gate_gemm_case (ctx, pipeline, 1000, 1, 1, 24, &state, error);
}

/* resident-coop.comp's gate, each tile shape: products of random int8
 * operands with random exponents against the integer dot products and
 * dc_gemm_epilogue (), on shapes with partial tiles on every side and K
 * both shorter than one step and several steps long: pairs placed as the
 * attention's; one matrix split over K into slices (the last one short)
 * summed by OP_GEMM_SUM; and the three causal structures (the left operand's
 * skipped triangle zero, as the softmaxes leave it; of CAUSAL_OUT's outputs
 * only those read, n ≤ m, compared). */
typedef struct
{
  guint m, n, k, pairs, heads, slice_words, causal;
} CoopCase;

static const CoopCase coop_cases[] = {
  { 200, 137, 400, 4, 2, 0, CAUSAL_NONE },
  { 150, 70, 96, 2, 1, 0, CAUSAL_NONE },
  /* 63 words of K in slices of 16: three whole, one of 15. */
  { 150, 130, 1008, 1, 1, 16, CAUSAL_NONE },
  { 144, 144, 32, 2, 2, 0, CAUSAL_OUT },
  { 272, 40, 272, 2, 1, 0, CAUSAL_A_LOWER },
  { 272, 40, 272, 2, 1, 0, CAUSAL_A_UPPER },
};

static gboolean
gate_coop_case (DcVkContext     *ctx,
                DcVkPipeline    *pipeline,
                DcVkPipeline    *sum_pipeline,
                const guint32   *shape,
                const CoopCase  *c,
                guint64         *state,
                GError         **error)
{
  const guint m_rows = c->m, n_cols = c->n, k = c->k, pairs = c->pairs, heads = c->heads;
  const guint ldc = heads * n_cols;
  const gsize qb = (gsize) pairs * m_rows * k, n_out = (gsize) (pairs / heads) * m_rows * ldc;
  const guint slices = c->slice_words > 0 ? (k / 16 + c->slice_words - 1) / c->slice_words : 1;
  const gsize scratch = 1 + n_out, n_f = scratch + (gsize) slices * m_rows * n_cols;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  DcVkBuffer *buffers[4];
  gint8 *q;
  gint32 *e;
  float *f;

  g_assert (qb % 16 == 0 && pairs % heads == 0 && k % 16 == 0);
  g_assert (c->causal == CAUSAL_NONE || c->causal == CAUSAL_OUT || m_rows == k);
  if ((bf = dc_vk_buffer_new (ctx, n_f * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, qb + (gsize) pairs * n_cols * k, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, 4 * (1 + pairs * (m_rows + n_cols)), error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4, error)) == NULL)
    return FALSE;
  q = dc_vk_buffer_get_data (bq);
  e = dc_vk_buffer_get_data (be);
  f = dc_vk_buffer_get_data (bf);
  gate_product_fill (q, qb + (gsize) pairs * n_cols * k, qb, k, m_rows, c->causal, e,
                     1 + pairs * (m_rows + n_cols), state);
  memset (f, 0xff, n_f * 4);
  buffers[0] = bf;
  buffers[1] = bq;
  buffers[2] = be;
  buffers[3] = bt;
  {
    DcVkForwardPush push = { OP_GEMM | c->causal << 8,
                             { 0, 1, m_rows, (guint32) qb, 1 + pairs * m_rows, n_cols, k, 1,
                               ldc, pairs, heads, m_rows * ldc, n_cols, c->slice_words,
                               (guint32) scratch } };

    if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, (n_cols + shape[1] - 1) / shape[1],
                         (m_rows + shape[0] - 1) / shape[0],
                         c->slice_words > 0 ? slices : pairs, error))
      return FALSE;
    if (c->slice_words > 0)
      {
        push.op = OP_GEMM_SUM;
        push.a[13] = slices;
        if (!dc_vk_dispatch (ctx, sum_pipeline, buffers, &push, (m_rows * n_cols + 255) / 256,
                             1, 1, error))
          return FALSE;
      }
  }
  {
    guint where[3];
    float got, want;

    if (!gate_product_check (f, q, qb, e, pairs, heads, m_rows, n_cols, k, c->causal, where,
                             &got, &want))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "product on cooperative matrices (%u × %u tiles, %u × %u × %u%s, "
                     "causal %u) of pair %u, row %u, column %u: 0x%08x instead of 0x%08x",
                     shape[0], shape[1], m_rows, n_cols, k,
                     c->slice_words > 0 ? ", split" : "", c->causal, where[0], where[1],
                     where[2], f32_bits (got), f32_bits (want));
        return FALSE;
      }
  }
  return TRUE;
}

static gboolean
gate_coop (DcVkContext  *ctx,
           gboolean      khr,
           gboolean      broken,
           GError      **error)
{
  DcVkPipeline *pipelines[N_COOP] = { NULL };
  guint64 state = G_GUINT64_CONSTANT (0x4461697379436d31);  /* "DaisyCm1" */
  gboolean ok = coop_pipelines_new (ctx, PRODUCTS_COOP | (khr ? PRODUCTS_COOP_KHR : 0), broken,
                                    pipelines, error);

  for (guint s = 0; ok && s < N_COOP; s++)
    for (guint i = 0; ok && i < G_N_ELEMENTS (coop_cases); i++)
      ok = gate_coop_case (ctx, pipelines[s], pipelines[COOP_WIDE], coop_shapes[s],
                           &coop_cases[i], &state, error);
  for (guint s = 0; s < N_COOP; s++)
    g_clear_pointer (&pipelines[s], dc_vk_pipeline_free);
  return ok;
}

/* The forward gate, and with @backward the backward's, for the native or
 * the emulated kernels; @kernel names the one refused. */
static gboolean
gates (DcVkContext  *ctx,
       gboolean      backward,
       DcVkF32Mode   native,
       guint         products,
       gboolean      quant_tiles,
       gboolean      softmax_rows,
       const char  **kernel,
       GError      **error)
{
  *kernel = "resident-forward";
  if (!gate (ctx, native, products, quant_tiles, softmax_rows, error))
    return FALSE;
  *kernel = "resident-backward";
  return !backward || gate_backward (ctx, native, products, quant_tiles, softmax_rows, error);
}

/* Whether resident-softmax.comp's variant for @native passes its gate; a
 * refusal keeps the softmax rows on an invocation each (same bits). */
static gboolean
softmax_rows_gate (DcVkContext *ctx,
                   DcVkF32Mode  native)
{
  g_autoptr(GError) local_error = NULL;

  if (dc_gpt_vk_rows_gate_softmax (ctx, native, _dc_gpt_vk_kernel_twin ("resident-softmax",
                                                                         native),
                                   &local_error))
    return TRUE;
  g_message ("Vulkan kernel resident-softmax%s on %s failed verification (%s) — the softmax "
             "keeps an invocation per row", native ? "-native" : "",
             dc_vk_context_get_device_name (ctx), local_error->message);
  return FALSE;
}

/* Opens the best Vulkan device, gates what the pass needs and records it:
 * with the native-float kernels where the device promises IEEE + − × and
 * their gates (f32-exact-check's too) pass, otherwise the emulated ones. */
static DcGptVkForward *
pass_new (const DcGptConfig  *config,
          guint               batch,
          gboolean            backward,
          GError            **error)
{
  g_autoptr(DcVkContext) ctx = NULL;
  g_autoptr(GError) local_error = NULL;
  DcGptVkForward *self;
  const DcVkFeatures *features;
  const char *kernel = "resident-forward";
  g_autofree char *why_not = NULL;
  DcVkF32Mode native;
  gboolean tiled, khr = FALSE, quant_tiles, softmax_rows = FALSE;
  guint products;

  g_return_val_if_fail (batch > 0, NULL);

  ctx = dc_vk_context_new (-1, error);
  if (ctx == NULL)
    return NULL;
  features = dc_vk_context_get_features (ctx);
  if (!features->shader_int8 || !features->storage_buffer_8bit)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel resident-forward needs shaderInt8 and "
                   "storageBuffer8BitAccess, which %s lacks", dc_vk_context_get_device_name (ctx));
      return NULL;
    }
  /* Too large for one binding: refused before the gates run. */
  {
    DcGptVkForwardMemory memory;

    measure (config, batch, backward, &memory);
    if (!dc_gpt_vk_forward_fits (&memory, features->max_storage_buffer_range,
                                 dc_vk_context_get_device_name (ctx), error))
      return NULL;
  }
  /* The tiled products first: the model gates below run with them. */
  tiled = gate_gemm (ctx, _dc_gpt_vk_kernel_broken ("resident-gemm"), &local_error);
  if (!tiled)
    {
      g_message ("Vulkan kernel resident-gemm on %s failed verification (%s) — using the "
                 "untiled products", dc_vk_context_get_device_name (ctx), local_error->message);
      g_clear_error (&local_error);
    }
  products = tiled ? PRODUCTS_TILED : 0;
  /* Then the products on cooperative matrices, where the device has them:
   * the model gates below run with them too. */
  if (!dc_gpt_vk_forward_coop_offered (features, &khr, &why_not))
    {
      g_debug ("Resident %s pass on %s: no products on cooperative matrices (%s)",
               backward ? "training" : "forward", dc_vk_context_get_device_name (ctx), why_not);
      g_clear_pointer (&why_not, g_free);
    }
  else if (!gate_coop (ctx, khr, _dc_gpt_vk_kernel_broken ("resident-coop"), &local_error))
    {
      g_message ("Vulkan kernel resident-coop on %s failed verification (%s) — using the %s "
                 "products", dc_vk_context_get_device_name (ctx), local_error->message,
                 tiled ? "tiled" : "untiled");
      g_clear_error (&local_error);
    }
  else
    {
      products |= PRODUCTS_COOP | (khr ? PRODUCTS_COOP_KHR : 0);
      g_debug ("Resident %s pass on %s: products on cooperative matrices (resident-coop%s), "
               "their gate passed", backward ? "training" : "forward",
               dc_vk_context_get_device_name (ctx), khr ? " rewritten for KHR" : "");
    }
  /* The quantization tiles likewise (integers only: one variant). */
  quant_tiles = dc_gpt_vk_rows_gate_quant (ctx, _dc_gpt_vk_kernel_broken ("resident-quant"),
                                           &local_error);
  if (!quant_tiles)
    {
      g_message ("Vulkan kernel resident-quant on %s failed verification (%s) — quantizing a "
                 "vector per workgroup", dc_vk_context_get_device_name (ctx),
                 local_error->message);
      g_clear_error (&local_error);
    }
  native = _dc_gpt_vk_native_wanted (ctx, &why_not);
  if (native)
    {
      gboolean f32_ok = _dc_gpt_vk_step_gate_f32 (ctx, native, &local_error);

      kernel = "f32-exact";
      /* The softmax rows in the same float mode, before the model gates
       * that run with them. */
      softmax_rows = f32_ok && softmax_rows_gate (ctx, native);
      if (!(f32_ok && gates (ctx, backward, native, products, quant_tiles, softmax_rows, &kernel,
                             &local_error)))
        {
          g_message ("Vulkan kernel %s-native on %s failed verification (%s) — using the "
                     "emulated kernels", kernel, dc_vk_context_get_device_name (ctx),
                     local_error->message);
          g_clear_error (&local_error);
          native = DC_VK_F32_EMULATED;
        }
      else
        g_debug ("Resident %s pass on %s: native float arithmetic (%s), its gates passed",
                 backward ? "training" : "forward", dc_vk_context_get_device_name (ctx),
                 native == DC_VK_F32_NATIVE_NODENORM ? "DenormPreserve not declared"
                                                     : "DenormPreserve declared");
    }
  else
    g_info ("Resident %s pass on %s: emulated float arithmetic (%s)",
            backward ? "training" : "forward", dc_vk_context_get_device_name (ctx), why_not);
  if (!native)
    softmax_rows = softmax_rows_gate (ctx, DC_VK_F32_EMULATED);
  if (native || gates (ctx, backward, DC_VK_F32_EMULATED, products, quant_tiles, softmax_rows,
                       &kernel, &local_error))
    ;
  else
    {
      g_message ("Vulkan kernel %s on %s failed verification (%s) — refused", kernel,
                 dc_vk_context_get_device_name (ctx), local_error->message);
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel %s on %s failed verification — the %s pass stays on the CPU",
                   kernel, dc_vk_context_get_device_name (ctx),
                   backward ? "training" : "forward");
      return NULL;
    }
  self = forward_new (ctx, config, batch, backward, native, products, quant_tiles, softmax_rows,
                      FALSE, error);
  if (self == NULL)
    return NULL;
  g_steal_pointer (&ctx);
  return self;
}

/**
 * dc_gpt_vk_forward_new:
 * @batch: sequences per call (each of config->seq tokens)
 *
 * Opens the best Vulkan device, gates the pass on a small model and records
 * the pass for @config and @batch.
 *
 * Returns: (transfer full) (nullable): the resident forward pass, or %NULL
 *   with @error set
 */
DcGptVkForward *
dc_gpt_vk_forward_new (const DcGptConfig  *config,
                       guint               batch,
                       GError            **error)
{
  return pass_new (config, batch, FALSE, error);
}

/**
 * dc_gpt_vk_forward_new_training:
 * @batch: sequences per call (each of config->seq tokens)
 *
 * Like dc_gpt_vk_forward_new (), with the backward pass recorded after the
 * loss (and gated too: its operations, then a small model's every
 * gradient): dc_gpt_vk_forward_gradients () replays both.
 *
 * Returns: (transfer full) (nullable): the resident training pass, or %NULL
 *   with @error set
 */
DcGptVkForward *
dc_gpt_vk_forward_new_training (const DcGptConfig  *config,
                                guint               batch,
                                GError            **error)
{
  return pass_new (config, batch, TRUE, error);
}

/**
 * dc_gpt_vk_forward_get_device_name:
 *
 * Returns: (transfer none): the Vulkan device the pass runs on
 */
const char *
dc_gpt_vk_forward_get_device_name (DcGptVkForward *self)
{
  return dc_vk_context_get_device_name (self->ctx);
}

/**
 * dc_gpt_vk_forward_get_products:
 *
 * Returns: how the pass's products run: "coop" (resident-coop.comp on
 *   cooperative matrices, its gate passed, for the products whose K is a
 *   multiple of 16; the others as below), "tiled" (resident-gemm.comp, its
 *   gate passed) or "untiled" (resident-forward.comp's, one invocation per
 *   output)
 */
const char *
dc_gpt_vk_forward_get_products (DcGptVkForward *self)
{
  if (self->products & PRODUCTS_COOP)
    return "coop";
  return self->tiled ? "tiled" : "untiled";
}

/**
 * dc_gpt_vk_forward_get_quantize:
 *
 * Returns: how the pass quantizes its operands: "tiles" (resident-quant.comp,
 *   coalesced tiles, its gate passed) or "vectors" (resident-forward.comp's,
 *   a workgroup or an invocation per vector)
 */
const char *
dc_gpt_vk_forward_get_quantize (DcGptVkForward *self)
{
  return self->quant_tiles ? "tiles" : "vectors";
}

/**
 * dc_gpt_vk_forward_get_softmax:
 *
 * Returns: how the pass runs its softmax rows and their backward: "rows"
 *   (resident-softmax.comp, a workgroup per row, its gate passed) or
 *   "invocations" (an invocation per row)
 */
const char *
dc_gpt_vk_forward_get_softmax (DcGptVkForward *self)
{
  return self->softmax_rows ? "rows" : "invocations";
}

/**
 * dc_gpt_vk_forward_get_column_sums:
 *
 * Returns: which kernel runs the backward's sums over rows (the norms'
 *   weight and bias gradients, the biases' gradients): "resident-chains"
 *   (a workgroup per 4 columns, its gate passed), "resident-colsum"
 *   (a workgroup per 8 columns, its gate passed) or "resident-backward"
 *   (an invocation per column); "resident-backward" for a forward pass
 */
const char *
dc_gpt_vk_forward_get_column_sums (DcGptVkForward *self)
{
  return self->chains_pipeline != NULL ? "resident-chains"
         : self->colsum_pipeline != NULL ? "resident-colsum" : "resident-backward";
}

/**
 * dc_gpt_vk_forward_get_fused:
 *
 * Returns: whether the producers and the quantization of their output run
 *   fused ("resident-fuse", its gate passed) or apart ("none")
 */
const char *
dc_gpt_vk_forward_get_fused (DcGptVkForward *self)
{
  return self->fuse_pipeline != NULL ? "resident-fuse" : "none";
}

/**
 * dc_gpt_vk_forward_get_arithmetic:
 *
 * Returns: how the pass's kernels do float + − ×: "native" (the device's
 *   float unit, its gates passed) or "emulated" (in integers)
 */
const char *
dc_gpt_vk_forward_get_arithmetic (DcGptVkForward *self)
{
  return self->native ? "native" : "emulated";
}

/**
 * dc_gpt_vk_forward_get_times:
 *
 * Totals since the pass was made (`bench train` reports them).
 */
void
dc_gpt_vk_forward_get_times (DcGptVkForward      *self,
                             DcGptVkForwardTimes *out)
{
  *out = self->times;
}
