/* dc-gpt-vk-norm.c: layer norm of rows on the device (shaders/layer-norm.comp),
 * with its start-up gate.
 *
 * The gate normalizes rows of every length from 1 to 40 and 63, 64, 65, 100,
 * 127, 128, 129, 300, 768 (each sum tree's shapes: the left-to-right blocks,
 * balanced powers of two, the peeled remainders) against
 * dc_math_layer_norm (): ordinary values, a large common offset (the
 * variance's cancellation), constant rows (exactly the bias), subnormals,
 * values whose variance overflows and a NaN (NaN rows), and compares y, mean
 * and rstd (NaN payloads aside, as f32-exact.glsl says).
 * DC_TEST_BREAK_KERNEL=layer-norm (or all) loads the broken twin.
 *
 * Also the gate of shaders/resident-colsum.comp, the resident training
 * pass's kernel for its sums over rows (the norms' weight and bias
 * gradients, the biases' gradients), the norm's input gradient a workgroup
 * per row, and the head's and embeddings' scatter-adds
 * (_dc_gpt_vk_colsum_new ()); DC_TEST_BREAK_KERNEL=resident-colsum loads its
 * broken twin.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-norm.h"

#include <string.h>

#include "engine/dc-math.h"
#include "dc-model-error.h"
#include "dc-gpt-vk-step-private.h"

/* Mirrors the push constants of shaders/layer-norm.comp. */
typedef struct
{
  guint32 rows;
  guint32 n;
  guint32 fn;
  guint32 eps;
} DcVkNormPush;

G_STATIC_ASSERT (sizeof (DcVkNormPush) == 16);

/* The kernel's sum stack holds 20 levels of blocks of 8: rows up to 2^22
 * values (far beyond GPT-2's 768 and the library's 2^24 only in theory). */
#define NORM_MAX_N (1u << 22)
/* Invocations per workgroup (layer-norm.comp's local_size_x). */
#define NORM_GROUP 64

struct _DcGptVkNorm
{
  DcVkContext  *ctx;       /* borrowed */
  DcVkPipeline *pipeline;  /* owned */
};

void
dc_gpt_vk_norm_free (DcGptVkNorm *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->pipeline, dc_vk_pipeline_free);
  g_free (self);
}

/**
 * dc_gpt_vk_norm_rows:
 * @x: (array): (rows, n) row-major
 * @y: (out caller-allocates) (array): (rows, n)
 * @mean: (out caller-allocates) (array): (rows)
 * @rstd: (out caller-allocates) (array): (rows)
 *
 * dc_math_layer_norm () of each row, computed on the device.
 */
gboolean
dc_gpt_vk_norm_rows (DcGptVkNorm  *self,
                     const float  *x,
                     const float  *weight,
                     const float  *bias,
                     float         eps,
                     gsize         rows,
                     gsize         n,
                     float        *y,
                     float        *mean,
                     float        *rstd,
                     GError      **error)
{
  g_autoptr(DcVkBuffer) bx = NULL, bw = NULL, bb = NULL, by = NULL, bm = NULL, br = NULL;
  DcVkNormPush push;

  g_return_val_if_fail (rows > 0 && n > 0, FALSE);

  if (n > NORM_MAX_N || rows * n > G_MAXUINT32 / 4)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "layer norm of %" G_GSIZE_FORMAT " rows of %" G_GSIZE_FORMAT
                   " values is too large for the kernel", rows, n);
      return FALSE;
    }
  if ((bx = dc_vk_buffer_new (self->ctx, rows * n * 4, error)) == NULL
      || (bw = dc_vk_buffer_new (self->ctx, n * 4, error)) == NULL
      || (bb = dc_vk_buffer_new (self->ctx, n * 4, error)) == NULL
      || (by = dc_vk_buffer_new (self->ctx, rows * n * 4, error)) == NULL
      || (bm = dc_vk_buffer_new (self->ctx, rows * 4, error)) == NULL
      || (br = dc_vk_buffer_new (self->ctx, rows * 4, error)) == NULL)
    return FALSE;
  memcpy (dc_vk_buffer_get_data (bx), x, rows * n * 4);
  memcpy (dc_vk_buffer_get_data (bw), weight, n * 4);
  memcpy (dc_vk_buffer_get_data (bb), bias, n * 4);
  push.rows = (guint32) rows;
  push.n = (guint32) n;
  push.fn = f32_bits ((float) n);
  push.eps = f32_bits (eps);
  {
    DcVkBuffer *buffers[] = { bx, bw, bb, by, bm, br };

    if (!dc_vk_dispatch (self->ctx, self->pipeline, buffers, &push,
                         (guint) ((rows + NORM_GROUP - 1) / NORM_GROUP), 1, 1, error))
      return FALSE;
  }
  memcpy (y, dc_vk_buffer_get_data (by), rows * n * 4);
  memcpy (mean, dc_vk_buffer_get_data (bm), rows * 4);
  memcpy (rstd, dc_vk_buffer_get_data (br), rows * 4);
  return TRUE;
}

/* A value for element i of a row of this kind. */
static float
gate_value (guint     kind,
            gsize     i,
            guint64  *state)
{
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  guint32 sign = (guint32) r & 0x80000000u;
  float u = bits_f32 (sign | (guint32) (124 + (r >> 40) % 6) << 23 | ((guint32) r & 0x7fffffu));

  switch (kind)
    {
    case 0:  /* ordinary activations */
      return u;
    case 1:  /* a large common offset: the variance cancels */
      return 1000.0f + u;
    case 2:  /* a constant row: exactly the bias */
      return 0.375f;
    case 3:  /* subnormals */
      return bits_f32 (sign | (guint32) (r >> 40) % 0x800000u);
    case 4:  /* squares beyond the float range: a NaN row */
      return i % 2 == 0 ? 3e19f : -3e19f;
    default:  /* a NaN in the middle */
      return i == 1 ? bits_f32 (0x7fc00000u) : u;
    }
}

static gboolean
gate (DcGptVkNorm  *self,
      GError      **error)
{
  static const gsize extra[] = { 63, 64, 65, 100, 127, 128, 129, 300, 768 };
  guint64 state = G_GUINT64_CONSTANT (0x446169737953746e);
  const guint n_kinds = 6;

  for (guint l = 0; l < 40 + G_N_ELEMENTS (extra); l++)
    {
      gsize n = l < 40 ? l + 1 : extra[l - 40];
      gsize rows = n_kinds;
      g_autofree float *x = g_new (float, rows * n), *w = g_new (float, n);
      g_autofree float *b = g_new (float, n), *y = g_new (float, rows * n);
      g_autofree float *want = g_new (float, rows * n);
      float mean[6], rstd[6];

      for (gsize i = 0; i < n; i++)
        {
          w[i] = gate_value (0, i, &state);
          b[i] = gate_value (0, i, &state);
        }
      for (guint k = 0; k < rows; k++)
        for (gsize i = 0; i < n; i++)
          x[k * n + i] = gate_value (k, i, &state);
      if (!dc_gpt_vk_norm_rows (self, x, w, b, DC_MATH_GPT2_LN_EPS, rows, n, y, mean, rstd,
                                error))
        return FALSE;
      for (guint k = 0; k < rows; k++)
        {
          float want_mean, want_rstd;

          dc_math_layer_norm (x + k * n, w, b, DC_MATH_GPT2_LN_EPS, want + k * n, &want_mean,
                              &want_rstd, n);
          if (!same_f32 (mean[k], want_mean) || !same_f32 (rstd[k], want_rstd))
            {
              g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                           "row of %" G_GSIZE_FORMAT " (kind %u): mean 0x%08x rstd 0x%08x "
                           "instead of 0x%08x 0x%08x", n, k, f32_bits (mean[k]),
                           f32_bits (rstd[k]), f32_bits (want_mean), f32_bits (want_rstd));
              return FALSE;
            }
          for (gsize i = 0; i < n; i++)
            if (!same_f32 (y[k * n + i], want[k * n + i]))
              {
                g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                             "row of %" G_GSIZE_FORMAT " (kind %u), element %" G_GSIZE_FORMAT
                             ": 0x%08x instead of 0x%08x", n, k, i, f32_bits (y[k * n + i]),
                             f32_bits (want[k * n + i]));
                return FALSE;
              }
        }
    }
  return TRUE;
}

/**
 * dc_gpt_vk_norm_new:
 * @ctx: the device; must outlive the kernel
 *
 * Loads shaders/layer-norm.comp and gates it against dc_math_layer_norm ().
 *
 * Returns: (transfer full) (nullable): the kernel, or %NULL with @error set
 */
DcGptVkNorm *
dc_gpt_vk_norm_new (DcVkContext  *ctx,
                    GError      **error)
{
  g_autoptr(DcGptVkNorm) self = g_new0 (DcGptVkNorm, 1);
  g_autoptr(GError) local_error = NULL;

  self->ctx = ctx;
  self->pipeline = dc_vk_pipeline_new (ctx,
                                       _dc_gpt_vk_kernel_broken ("layer-norm") ? "layer-norm-broken"
                                                                               : "layer-norm",
                                       6, sizeof (DcVkNormPush), error);
  if (self->pipeline == NULL)
    return NULL;
  if (!gate (self, &local_error))
    {
      g_message ("Vulkan kernel layer-norm on %s failed verification (%s) — refused",
                 dc_vk_context_get_device_name (ctx), local_error->message);
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel layer-norm on %s failed verification — layer norm stays "
                   "on the CPU", dc_vk_context_get_device_name (ctx));
      return NULL;
    }
  return g_steal_pointer (&self);
}

/* ---- resident-colsum.comp: the resident backward's sums over rows -------- */

/* Mirrors DcVkForwardPush (dc-gpt-vk-forward.c): the op, then its
 * arguments, as resident-backward.comp's OP_LN_DW and OP_COLSUM take them. */
typedef struct
{
  guint32 op;
  guint32 a[15];
} DcVkColsumPush;

G_STATIC_ASSERT (sizeof (DcVkColsumPush) == 64);

#define COLSUM_OP_HEAD_DW 11
#define COLSUM_OP_LN_DX 13
#define COLSUM_OP_LN_DW 14
#define COLSUM_OP_COLSUM 15
#define COLSUM_OP_EMBED_BACK 18

void
_dc_gpt_vk_token_lists (const guint32 *tokens,
                        gsize          rows,
                        guint          n_v,
                        guint32       *offsets,
                        guint32       *list)
{
  memset (offsets, 0, (n_v + 1) * sizeof (guint32));
  for (gsize r = 0; r < rows; r++)
    {
      g_return_if_fail (tokens[r] < n_v);
      offsets[tokens[r] + 1]++;
    }
  for (guint v = 0; v < n_v; v++)
    offsets[v + 1] += offsets[v];
  /* Each token's rows in order, offsets[v] moving to where v's end; then
   * back by one token. */
  for (gsize r = 0; r < rows; r++)
    list[offsets[tokens[r]]++] = (guint32) r;
  for (guint v = n_v; v > 0; v--)
    offsets[v] = offsets[v - 1];
  offsets[0] = 0;
}

/* A gate value: activations and gradients of the usual sizes, exact zeros
 * of both signs (ReLU's) and subnormals, as gate_backward_ops () draws. */
static float
colsum_gate_value (guint64 *state)
{
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  guint32 sign = (guint32) r & 0x80000000u;

  switch ((r >> 32) % 16)
    {
    case 0: return 0.0f;
    case 1: return bits_f32 (sign);
    case 2: return bits_f32 (sign | (guint32) (r >> 40) % 0x800000u);
    default: return bits_f32 (sign | (guint32) (112 + (r >> 40) % 20) << 23
                              | ((guint32) r & 0x7fffffu));
    }
}

/* One shape: @rows rows of @n columns through OP_LN_DX (a workgroup per
 * row: the sum trees in shared memory; where @with_dx), OP_LN_DW (a
 * workgroup per @columns columns) and OP_COLSUM (per @sum_columns), against
 * dc_math_layer_norm_backward () added to d_res and layer_norm_grad_chunk's
 * and column_sum_chunk's serial chains. */
static gboolean
colsum_gate_case (DcVkContext   *ctx,
                  DcVkPipeline  *pipeline,
                  guint          columns,
                  guint          sum_columns,
                  gboolean       with_dx,
                  guint          rows,
                  guint          n,
                  guint64       *state,
                  GError       **error)
{
  const gsize X = 0, DY = X + (gsize) rows * n, MEAN = DY + (gsize) rows * n;
  const gsize RSTD = MEAN + rows, DW = RSTD + rows, DB = DW + n, COLS = DB + n;
  const gsize WN = COLS + n, DRES = WN + n, size = DRES + (gsize) rows * n;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  g_autofree float *y = g_new (float, n), *w = g_new (float, n);
  g_autofree float *dx = g_new (float, n), *dw_row = g_new0 (float, n);
  g_autofree float *db_row = g_new0 (float, n), *want = g_new (float, (gsize) rows * n);
  float *f;

  if ((bf = dc_vk_buffer_new (ctx, size * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  for (gsize i = 0; i < size; i++)
    f[i] = colsum_gate_value (state);
  for (guint i = 0; i < n; i++)
    w[i] = 1.0f;
  /* Real statistics of the rows. */
  for (guint r = 0; r < rows; r++)
    dc_math_layer_norm (f + X + (gsize) r * n, w, w, DC_MATH_GPT2_LN_EPS, y, f + MEAN + r,
                        f + RSTD + r, n);
  memcpy (want, f + DRES, (gsize) rows * n * 4);
  for (guint r = 0; r < rows; r++)
    {
      gsize at = (gsize) r * n;

      dc_math_layer_norm_backward (f + X + at, f + WN, f[MEAN + r], f[RSTD + r], f + DY + at, dx,
                                   dw_row, db_row, n);
      dc_math_add (want + at, dx, want + at, n);
    }
  {
    DcVkBuffer *buffers[] = { bf, bq, be, bt };
    guint groups = (n + columns - 1) / columns;
    DcVkColsumPush ln = { COLSUM_OP_LN_DW, { X, DY, MEAN, RSTD, rows, n, DW, DB } };
    DcVkColsumPush cs = { COLSUM_OP_COLSUM, { DY, rows, n, COLS } };
    DcVkColsumPush dx_push = { COLSUM_OP_LN_DX, { X, WN, MEAN, RSTD, DY, DRES, rows, n,
                                                  f32_bits ((float) n), 1 } };

    if (!dc_vk_dispatch (ctx, pipeline, buffers, &ln, groups, 1, 1, error)
        || !dc_vk_dispatch (ctx, pipeline, buffers, &cs, (n + sum_columns - 1) / sum_columns,
                            1, 1, error)
        || (with_dx && !dc_vk_dispatch (ctx, pipeline, buffers, &dx_push, rows, 1, 1, error)))
      return FALSE;
  }
  for (gsize i = 0; with_dx && i < (gsize) rows * n; i++)
    if (!same_f32 (f[DRES + i], want[i]))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "%u rows of %u, norm input gradient %" G_GSIZE_FORMAT ": 0x%08x instead "
                     "of 0x%08x", rows, n, i, f32_bits (f[DRES + i]), f32_bits (want[i]));
        return FALSE;
      }
  for (guint j = 0; j < n; j++)
    {
      float dw = 0.0f, db = 0.0f;

      for (guint r = 0; r < rows; r++)
        {
          gsize at = (gsize) r * n + j;
          float norm = (f[X + at] - f[MEAN + r]) * f[RSTD + r];

          dw = dw + f[DY + at] * norm;
          db = db + f[DY + at];
        }
      if (!same_f32 (f[DW + j], dw) || !same_f32 (f[DB + j], db)
          || !same_f32 (f[COLS + j], db))
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                       "%u rows of %u, column %u: weight gradient 0x%08x, bias gradient "
                       "0x%08x, column sum 0x%08x instead of 0x%08x, 0x%08x, 0x%08x", rows, n, j,
                       f32_bits (f[DW + j]), f32_bits (f[DB + j]), f32_bits (f[COLS + j]),
                       f32_bits (dw), f32_bits (db), f32_bits (db));
          return FALSE;
        }
    }
  return TRUE;
}

/* The head's and the embeddings' scatter-adds through their token lists:
 * @rows rows of @c columns, @n_v tokens (token 0 in about half the rows:
 * lists longer than a staged chunk of 64; the last token in none), d_wpe's
 * @seq rows of which the first @len have rows, against head_dw_chunk's and
 * embed_backward_chunk's chains (dc-gpt.c). */
static gboolean
scatter_gate_case (DcVkContext   *ctx,
                   DcVkPipeline  *pipeline,
                   guint          rows,
                   guint          c,
                   guint          n_v,
                   guint          seq,
                   guint          len,
                   guint64       *state,
                   GError       **error)
{
  const gsize WTE = 0, WPE = WTE + (gsize) n_v * c, SRC = WPE + (gsize) seq * c;
  const gsize size = SRC + (gsize) rows * c;
  /* T: inputs, targets, the inputs' offsets and rows, the targets'. */
  const gsize T_IN_OFF = 2 * (gsize) rows, T_IN_ROWS = T_IN_OFF + n_v + 1;
  const gsize T_TG_OFF = T_IN_ROWS + rows, T_TG_ROWS = T_TG_OFF + n_v + 1;
  const gsize t_size = T_TG_ROWS + rows;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  g_autofree float *wte = g_new (float, (gsize) n_v * c), *wpe = g_new0 (float, (gsize) seq * c);
  float *f;
  guint32 *tok;

  if ((bf = dc_vk_buffer_new (ctx, size * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, t_size * 4, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  tok = dc_vk_buffer_get_data (bt);
  for (gsize i = 0; i < size; i++)
    f[i] = colsum_gate_value (state);
  for (guint r = 0; r < 2 * rows; r++)
    {
      guint64 x = _dc_gpt_vk_splitmix64 (state);

      tok[r] = x % 2 == 0 ? 0 : (guint32) ((x >> 8) % (n_v - 1));
    }
  _dc_gpt_vk_token_lists (tok, rows, n_v, tok + T_IN_OFF, tok + T_IN_ROWS);
  _dc_gpt_vk_token_lists (tok + rows, rows, n_v, tok + T_TG_OFF, tok + T_TG_ROWS);
  {
    DcVkBuffer *buffers[] = { bf, bq, be, bt };
    guint chunks = (c + 63) / 64;
    DcVkColsumPush head = { COLSUM_OP_HEAD_DW, { WTE, SRC, rows, c, n_v, rows,
                                                 f32_bits ((float) rows), T_TG_OFF,
                                                 T_TG_ROWS } };
    DcVkColsumPush embed = { COLSUM_OP_EMBED_BACK, { WTE, WPE, SRC, rows, c, seq, len, n_v,
                                                     T_IN_OFF, T_IN_ROWS } };

    /* The CPU's: the head's share, then the embeddings' onto it. */
    memcpy (wte, f + WTE, (gsize) n_v * c * 4);
    for (guint r = 0; r < rows; r++)
      for (guint j = 0; j < c; j++)
        wte[(gsize) tok[rows + r] * c + j] = wte[(gsize) tok[rows + r] * c + j]
                                             - f[SRC + (gsize) r * c + j];
    for (gsize i = 0; i < (gsize) n_v * c; i++)
      wte[i] = wte[i] / (float) rows;
    for (guint r = 0; r < rows; r++)
      for (guint j = 0; j < c; j++)
        {
          wte[(gsize) tok[r] * c + j] = wte[(gsize) tok[r] * c + j] + f[SRC + (gsize) r * c + j];
          if (r % len < seq)
            wpe[(gsize) (r % len) * c + j] = wpe[(gsize) (r % len) * c + j]
                                             + f[SRC + (gsize) r * c + j];
        }
    if (!dc_vk_dispatch (ctx, pipeline, buffers, &head, n_v * chunks, 1, 1, error)
        || !dc_vk_dispatch (ctx, pipeline, buffers, &embed, (n_v + seq) * chunks, 1, 1, error))
      return FALSE;
  }
  for (gsize i = 0; i < (gsize) n_v * c; i++)
    if (!same_f32 (f[WTE + i], wte[i]))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "scatter-adds of %u rows, token %" G_GSIZE_FORMAT " column %" G_GSIZE_FORMAT
                     ": 0x%08x instead of 0x%08x", rows, i / c, i % c, f32_bits (f[WTE + i]),
                     f32_bits (wte[i]));
        return FALSE;
      }
  for (gsize i = 0; i < (gsize) seq * c; i++)
    if (!same_f32 (f[WPE + i], wpe[i]))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "scatter-adds of %u rows, position %" G_GSIZE_FORMAT " column %"
                     G_GSIZE_FORMAT ": 0x%08x instead of 0x%08x", rows, i / c, i % c,
                     f32_bits (f[WPE + i]), f32_bits (wpe[i]));
        return FALSE;
      }
  return TRUE;
}

/**
 * _dc_gpt_vk_colsum_new:
 * @native: the pass's float mode (the variant loaded)
 * @broken: load the broken twin (DC_TEST_BREAK_KERNEL=resident-colsum)
 *
 * Loads shaders/resident-colsum.comp and gates it: the norm's weight and
 * bias gradients and a column sum on shapes that reach every path of its
 * blocks (fewer rows than a block, whole blocks and a partial one; a last
 * group of columns partly empty), and the head's and the embeddings'
 * scatter-adds through their token lists, against the CPU's chains.
 *
 * Returns: (transfer full) (nullable): the pipeline, or %NULL with @error
 *   set (the caller keeps resident-backward.comp's sums)
 */
DcVkPipeline *
_dc_gpt_vk_colsum_new (DcVkContext  *ctx,
                       DcVkF32Mode   native,
                       gboolean      broken,
                       GError      **error)
{
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-colsum", native, broken);
  g_autoptr(DcVkPipeline) pipeline = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x446169737943736d);  /* "DaisyCsm" */
  const guint cw = DC_GPT_VK_COLSUM_COLUMNS;

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkColsumPush), error);
  if (pipeline == NULL
      || !colsum_gate_case (ctx, pipeline, cw, cw, TRUE, 5, 3, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, cw, TRUE, 300, 13, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, cw, TRUE, 3, 200, &state, error)
      /* 768 = 512 + 256 as GPT-2's rows: a power-of-two part after a peeled one */
      || !colsum_gate_case (ctx, pipeline, cw, cw, TRUE, 2, 768, &state, error)
      /* Lists of 1 to ~150 rows (two staged chunks of 64 and a tail, the
       * loads' batches of 16 and their rest), a token without rows, a last
       * chunk of columns partly empty, positions without rows. */
      || !scatter_gate_case (ctx, pipeline, 300, 70, 5, 7, 6, &state, error)
      || !scatter_gate_case (ctx, pipeline, 40, 16, 40, 16, 16, &state, error))
    return NULL;
  return g_steal_pointer (&pipeline);
}

/**
 * _dc_gpt_vk_chains_new:
 * @native: the pass's float mode (the variant loaded)
 * @broken: load the broken twin (DC_TEST_BREAK_KERNEL=resident-chains)
 *
 * Loads shaders/resident-chains.comp and gates it: the norm's weight and
 * bias gradients and a column sum against the CPU's chains, on shapes that
 * reach every path of its ring of 512-row blocks (fewer rows than a block;
 * one whole block and a partial one; exactly two whole blocks; four whole
 * blocks and a partial one, each buffer reused; the first block alone;
 * last groups of columns partly empty).
 *
 * Returns: (transfer full) (nullable): the pipeline, or %NULL with @error
 *   set (the caller keeps resident-colsum.comp's and resident-backward.comp's
 *   sums)
 */
DcVkPipeline *
_dc_gpt_vk_chains_new (DcVkContext  *ctx,
                       DcVkF32Mode   native,
                       gboolean      broken,
                       GError      **error)
{
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-chains", native, broken);
  g_autoptr(DcVkPipeline) pipeline = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x4461697379436863);  /* "DaisyChc" */
  const guint cw = DC_GPT_VK_CHAINS_COLUMNS, sw = DC_GPT_VK_CHAINS_SUM_COLUMNS;

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkColsumPush), error);
  if (pipeline == NULL
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 5, 3, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 300, 13, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 512, 6, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 700, 9, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 1024, 4, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 2100, 7, &state, error)
      || !colsum_gate_case (ctx, pipeline, cw, sw, FALSE, 3, 200, &state, error))
    return NULL;
  return g_steal_pointer (&pipeline);
}
