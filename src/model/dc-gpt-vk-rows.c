/* dc-gpt-vk-rows.c: the resident pass's quantization tiles
 * (shaders/resident-quant.comp) and softmax rows
 * (shaders/resident-softmax.comp): the tile choice and their start-up gates.
 *
 * The quantization gate runs rows and columns of one matrix and of the
 * attention's (sequence, head) pairs side by side, with tiles of every
 * width (1 to 256 vectors), ragged tiles and chunks, a loop over tiles (one
 * workgroup for many), and six kinds of values (every binade, one binade
 * band, exact ties at every rounding position and the ±127.5 clamp,
 * subnormals, zeros, a NaN and an infinity that must raise E[0]) against
 * dc_quant_pack_reference (): every int8 value and exponent, and nothing
 * written outside the operand. DC_TEST_BREAK_KERNEL=resident-quant (or all)
 * loads the broken twin (ties away from zero).
 *
 * The softmax gate runs causal blocks (two blocks of 33 rows, one of 200:
 * four and two rows a workgroup) at 1/√24 and full rows (lengths 1, 7, 300
 * and the longest, 4,096: four, four, one and one a workgroup) at
 * scale 1, with ordinary and wide scores, −∞ masks, NaN, +∞, all −∞ and
 * signed-zero rows, against dc_gpt_vk_softmax_reference (); then the
 * backward of causal blocks against dc_math_softmax_backward () times the
 * scale (and a block of 1,100: past the elements a lane loads at once).
 * Every case runs plain and with the rows' quantization fused
 * (DC_GPT_VK_SOFTMAX_QUANT_ROWS: int8 values and exponents against
 * dc_quant_pack_reference () of the CPU's rows), and two backward cases put
 * exact ties in dS (y = 1, half-integer dy summing to 0). The quantization
 * gate's lower-triangular cases (DC_GPT_VK_QUANT_LOWER) zero each pair's
 * upper part, as the softmaxes do. DC_TEST_BREAK_KERNEL=resident-softmax
 * (or all; -native for the native variant only) loads the broken twin (the
 * blocks summed left to right, not in the tree, and ties rounded away from
 * zero).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-rows.h"

#include <string.h>

#include "engine/dc-gemm.h"
#include "engine/dc-math.h"
#include "dc-gpt-vk-softmax.h"
#include "dc-model-error.h"

/* Mirrors DcVkForwardPush (dc-gpt-vk-forward.c) and the shaders' op
 * numbers: the new kernels run on the pass's buffers and push constants. */
typedef struct
{
  guint32 op;
  guint32 a[15];
} DcVkRowsPush;

G_STATIC_ASSERT (sizeof (DcVkRowsPush) == 64);

#define OP_QUANTIZE 2
#define OP_SOFTMAX 7
#define OP_SOFTMAX_BACK 17

/* resident-quant.comp's workgroup (its GROUP). */
#define QUANT_GROUP 256
/* Columns are tiled 32 vectors wide (a subgroup of 32 loads one 128-byte
 * row of the tile), narrower down to 8 (32 bytes, still a whole memory
 * sector a row) while that leaves fewer than this many workgroups: about
 * two per multiprocessor of a large GPU (the H200 has 132), so that few
 * long columns (a weight's 3,072 columns of 2,048 rows) still fill it. */
#define QUANT_TILE_GROUPS 256
/* Vulkan's smallest allowed maxComputeWorkGroupCount; the kernels loop. */
#define ROWS_MAX_GROUPS 65535

/**
 * dc_gpt_vk_rows_quant_tile:
 *
 * The tile resident-quant.comp uses for n vectors of length k (element i of
 * vector v at v·vector_stride + i·k_stride): columns when neighbouring
 * vectors are neighbouring floats, else rows with about 4 elements per lane
 * (lanes a power of two up to the workgroup's 256). Columns whose tiles are
 * fewer than QUANT_TILE_GROUPS have their K split into about that many
 * workgroups' slices, each a whole number of transposing chunks.
 */
void
dc_gpt_vk_rows_quant_tile (gsize              n_vectors,
                           gsize              k,
                           gsize              vector_stride,
                           gsize              k_stride,
                           DcGptVkQuantTile  *out)
{
  gsize tv;

  out->columns = vector_stride == 1 && k_stride != 1;
  if (out->columns)
    {
      tv = 32;
      while (tv > 8 && (n_vectors + tv - 1) / tv < QUANT_TILE_GROUPS)
        tv /= 2;
    }
  else
    {
      gsize lanes = 1;

      while (lanes < QUANT_GROUP && lanes * 4 < k)
        lanes *= 2;
      tv = QUANT_GROUP / lanes;
    }
  out->tv_log2 = (guint32) g_bit_nth_lsf (tv, -1);
  out->groups = (guint32) MIN ((n_vectors + tv - 1) / tv, ROWS_MAX_GROUPS);
  out->slice = 0;
  out->slices = 1;
  if (out->columns && out->groups < QUANT_TILE_GROUPS)
    {
      gsize chunk = 4 * (QUANT_GROUP / tv);  /* the shader's transposing chunk */
      gsize slices = MIN ((QUANT_TILE_GROUPS + out->groups - 1) / out->groups,
                          (k + chunk - 1) / chunk);
      gsize slice = ((k + slices - 1) / slices + chunk - 1) / chunk * chunk;

      slices = (k + slice - 1) / slice;
      if (slices > 1)
        {
          out->slice = (guint32) slice;
          out->slices = (guint32) slices;
        }
    }
}

/* resident-softmax.comp's workgroup (its GROUP). */
#define SOFTMAX_GROUP 128

/**
 * dc_gpt_vk_rows_softmax_lanes_log2:
 *
 * A row of len takes about len / 32 invocations, a power of two from 32 (a
 * subgroup of most GPUs) to the workgroup's 128 (the fewest that keep
 * (128 / lanes) · len within the kernel's MAX_LEN); a workgroup takes
 * 128 / lanes rows at once, so that its barriers and its waits for memory
 * serve several rows (the attention's rows of 1,024 at GPT-2 small: four a
 * workgroup, where one a workgroup left the H200 waiting on a row at a time:
 * docs/BENCHMARKS.md) and short rows do not leave most of it idle.
 */
guint32
dc_gpt_vk_rows_softmax_lanes_log2 (gsize len)
{
  gsize lanes = 32;

  while (lanes < SOFTMAX_GROUP && lanes * 32 < len)
    lanes *= 2;
  return (guint32) g_bit_nth_lsf (lanes, -1);
}

guint32
dc_gpt_vk_rows_softmax_groups (gsize rows,
                               gsize len)
{
  gsize per_group = SOFTMAX_GROUP >> dc_gpt_vk_rows_softmax_lanes_log2 (len);

  return (guint32) MIN ((rows + per_group - 1) / per_group, ROWS_MAX_GROUPS);
}

/* ---- The quantization gate --------------------------------------------- */

typedef struct
{
  guint per, k, vs, ks, pairs, heads, sb, sh;
  gboolean one_group;  /* one workgroup loops over every tile */
  gboolean lower;      /* each pair's square matrix lower triangular (OP_LOWER) */
} QuantCase;

static float
quant_value (guint     kind,
             gsize     i,
             guint64  *state)
{
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  guint32 sign = (guint32) r & 0x80000000u;
  static const float ties[] = { 0.5f, 1.5f, 2.5f, 126.5f, 127.5f, 127.0f, 63.5f,
                                0.25f, 0.75f, 3.5f, 64.5f, 100.5f };

  switch (kind)
    {
    case 0:  /* every binade of normal floats */
      return bits_f32 (sign | (guint32) (r >> 8) % 0x7f000000u);
    case 1:  /* one binade band: many values keep bits below the rounding point */
      return bits_f32 (sign | ((guint32) (120 + (r >> 40) % 10) << 23) | ((guint32) r & 0x7fffffu));
    case 2:  /* exact ties at every rounding position, and the clamp */
      return (sign ? -1.0f : 1.0f) * ties[(r >> 33) % G_N_ELEMENTS (ties)]
             * bits_f32 ((guint32) (100 + i % 40) << 23);
    case 3:  /* subnormals and tiny normals */
      return bits_f32 (sign | (guint32) (r >> 8) % 0x01000000u);
    case 4:  /* zeros of both signs */
      return bits_f32 (sign);
    default:  /* finite; the caller adds a NaN and an infinity */
      return bits_f32 (sign | ((guint32) (127 + (r >> 40) % 8) << 23) | ((guint32) r & 0x7fffffu));
    }
}

#define GATE_Q_OFFSET 16  /* bytes before the operand in Q, which must stay */
#define GATE_SENTINEL 0x55

static gboolean
gate_quant_case (DcVkContext      *ctx,
                 DcVkPipeline     *pipeline,
                 const QuantCase  *qc,
                 guint             kind,
                 guint64          *state,
                 GError          **error)
{
  gsize n = (gsize) qc->per * qc->pairs, k = qc->k;
  gsize last = (gsize) (qc->pairs - 1) / qc->heads * qc->sb
               + (gsize) (qc->pairs - 1) % qc->heads * qc->sh;
  gsize span = last + (gsize) (qc->per - 1) * qc->vs + (k - 1) * qc->ks + 1;
  gsize q_bytes, scratch;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  g_autoptr(DcQuantMatrix) want = dc_quant_matrix_new (qc->per, k, NULL);
  DcGptVkQuantTile tile;
  gboolean finite = TRUE;
  float *f;
  gint8 *q;
  gint32 *e;

  dc_gpt_vk_rows_quant_tile (n, k, qc->vs, qc->ks, &tile);
  /* The slices' maxima after the operand and a gap that must stay. */
  scratch = (GATE_Q_OFFSET + n * k + 64 + 15) / 16 * 16;
  q_bytes = scratch + DC_GPT_VK_QUANT_AMAX_SCRATCH (&tile, n);
  if ((bf = dc_vk_buffer_new (ctx, span * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, q_bytes, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, (n + 2) * 4, error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  q = dc_vk_buffer_get_data (bq);
  e = dc_vk_buffer_get_data (be);
  for (gsize i = 0; i < span; i++)
    f[i] = quant_value (kind, i, state);
  if (kind == 5)
    {
      /* Pair 0's second vector (or first): a NaN, and an infinity. */
      gsize v = qc->lower && qc->ks == 1 ? qc->per - 1 : MIN (1, qc->per - 1);

      f[v * qc->vs + MIN (9, k - 1) * qc->ks] = bits_f32 (0x7fc00001u);
      f[v * qc->vs + (k - 1) / 2 * qc->ks] = bits_f32 (0xff800000u);
    }
  if (qc->lower)
    {
      /* Row i, column j of each pair's matrix zero for j > i (+0 or −0, as
       * the kind draws signs: the kernel must not read them). Rows are
       * vectors (ks = 1) or columns are (vs = 1). */
      for (guint p = 0; p < qc->pairs; p++)
        for (gsize v = 0; v < qc->per; v++)
          for (gsize i = 0; i < k; i++)
            if (qc->ks == 1 ? i > v : i < v)
              {
                gsize at = (gsize) p / qc->heads * qc->sb + (gsize) p % qc->heads * qc->sh
                           + v * qc->vs + i * qc->ks;

                f[at] = bits_f32 (f32_bits (f[at]) & 0x80000000u);
              }
    }
  memset (q, GATE_SENTINEL, q_bytes);
  memset (e, GATE_SENTINEL, (n + 2) * 4);
  e[0] = 0;
  {
    guint32 lower = qc->lower ? DC_GPT_VK_QUANT_LOWER : 0;
    DcVkRowsPush push = { OP_QUANTIZE | lower, { 0, qc->vs, qc->ks, (guint32) n, (guint32) k,
                                         GATE_Q_OFFSET, 1, qc->per, qc->heads, qc->sb, qc->sh,
                                         tile.columns, tile.tv_log2, tile.slice,
                                         (guint32) scratch } };
    DcVkBuffer *buffers[] = { bf, bq, be, bt };
    guint groups = qc->one_group ? 1 : tile.groups;

    if (tile.slices > 1)
      {
        push.op = DC_GPT_VK_QUANT_OP_AMAX | lower;
        if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, groups, tile.slices, 1, error))
          return FALSE;
        push.op = OP_QUANTIZE | lower;
      }
    if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, groups, tile.slices, 1, error))
      return FALSE;
  }
  for (guint p = 0; p < qc->pairs; p++)
    {
      gsize base = (gsize) p / qc->heads * qc->sb + (gsize) p % qc->heads * qc->sh;
      g_autoptr(GError) local_error = NULL;

      if (!dc_quant_pack_reference ("gate", f + base, qc->vs, qc->ks, want, &local_error))
        {
          finite = FALSE;
          break;
        }
      for (gsize v = 0; v < qc->per; v++)
        {
          gsize vec = (gsize) p * qc->per + v;

          if (e[1 + vec] != want->exponent[v]
              || memcmp (q + GATE_Q_OFFSET + vec * k, want->q + v * k, k) != 0)
            {
              g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                           "%s of %u × %u (%u pairs, kind %u, %u vectors a tile): vector %"
                           G_GSIZE_FORMAT " differs from dc_quant_pack's",
                           tile.columns ? "columns" : "rows", qc->per, qc->k, qc->pairs, kind,
                           1u << tile.tv_log2, vec);
              return FALSE;
            }
        }
    }
  if ((e[0] != 0) == finite)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "%s of %u × %u (kind %u): the not-finite flag is %d", tile.columns ? "columns"
                   : "rows", qc->per, qc->k, kind, e[0]);
      return FALSE;
    }
  for (gsize i = 0; i < scratch; i++)
    if ((i < GATE_Q_OFFSET || i >= GATE_Q_OFFSET + n * k) && q[i] != GATE_SENTINEL)
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "%s of %u × %u: byte %" G_GSIZE_FORMAT " outside the operand written",
                     tile.columns ? "columns" : "rows", qc->per, qc->k, i);
        return FALSE;
      }
  return TRUE;
}

/**
 * dc_gpt_vk_rows_gate_quant:
 * @broken: load the broken twin (the gates' tests)
 *
 * Gates shaders/resident-quant.comp against dc_quant_pack_reference ().
 *
 * Returns: whether the kernel may quantize the resident pass's operands
 */
gboolean
dc_gpt_vk_rows_gate_quant (DcVkContext  *ctx,
                           gboolean      broken,
                           GError      **error)
{
  /* per, k, vs, ks, pairs, heads, sb, sh, one_group. The attention's are
   * a batch of 2 with 3 heads of 8 channels over 10 positions (C = 24: qkv
   * rows of 72 floats). */
  static const QuantCase cases[] = {
    { 7, 100, 100, 1, 1, 1, 0, 0, FALSE },      /* rows: 32 lanes, 8 vectors a tile */
    { 3, 1000, 1003, 1, 1, 1, 0, 0, FALSE },    /* 256 lanes, one vector a tile */
    { 2, 3000, 3000, 1, 1, 1, 0, 0, FALSE },    /* past the four elements a lane keeps,
                                                 * eight loads at a time, then the rest */
    { 5, 3, 3, 1, 1, 1, 0, 0, FALSE },          /* one lane, 256 vectors a tile */
    { 10, 8, 72, 1, 6, 3, 720, 8, FALSE },      /* a head's q rows: tiles across pairs */
    { 300, 33, 33, 1, 1, 1, 0, 0, TRUE },       /* one workgroup loops over the tiles */
    { 67, 1000, 1, 67, 1, 1, 0, 0, FALSE },     /* columns: 8 a tile, K in 8 slices */
    { 8, 10, 1, 72, 6, 3, 720, 8, FALSE },      /* a head's v columns across pairs */
    { 4100, 3, 1, 4100, 1, 1, 0, 0, FALSE },    /* 16 a tile */
    { 8200, 5, 1, 8200, 1, 1, 0, 0, FALSE },    /* 32 a tile, chunks of 32 */
    { 8200, 70, 1, 8200, 1, 1, 0, 0, FALSE },   /* 32 a tile, eight loads at a time */
    { 200, 33, 1, 200, 1, 1, 0, 0, TRUE },      /* one workgroup loops */
    { 2100, 130, 1, 2100, 1, 1, 0, 0, FALSE },  /* 8 a tile, 263 tiles: two chunks, one short */
    { 20, 1000, 1, 20, 1, 1, 0, 0, FALSE },     /* K split: 8 slices of 128, the last short */
    { 100, 700, 1, 100, 1, 1, 0, 0, FALSE },    /* 13 tiles, 6 slices of 128 */
    /* The attention's lower-triangular P and dS, 6 pairs of 33 × 33 (3
     * heads): rows, columns; then 2 pairs of 200, columns in 2 slices. */
    { 33, 33, 33, 1, 6, 3, 3 * 33 * 33, 33 * 33, FALSE, TRUE },
    { 33, 33, 1, 33, 6, 3, 3 * 33 * 33, 33 * 33, FALSE, TRUE },
    { 200, 200, 1, 200, 2, 1, 200 * 200, 200 * 200, FALSE, TRUE },
    /* 130 pairs of 64 × 64 (2 heads): columns 32 a tile, eight loads at a
     * time from the tile's diagonal. */
    { 64, 64, 1, 64, 130, 2, 2 * 64 * 64, 64 * 64, FALSE, TRUE },
  };
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-quant", DC_VK_F32_EMULATED, broken);
  g_autoptr(DcVkPipeline) pipeline = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x4461697379517432);  /* "DaisyQt2" */

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkRowsPush), error);
  if (pipeline == NULL)
    return FALSE;
  for (guint kind = 0; kind < 6; kind++)
    for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
      if (!gate_quant_case (ctx, pipeline, &cases[c], kind, &state, error))
        return FALSE;
  return TRUE;
}

/* ---- The softmax gate -------------------------------------------------- */

/* Score j of a row of this kind. */
static float
softmax_score (guint     kind,
               gsize     j,
               guint64  *state)
{
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  float u = (float) (gint32) (r >> 40 & 0xffffff) * 0x1p-24f;  /* [0, 1), exact */

  switch (kind % 7)
    {
    case 0:  /* ordinary scores */
      return (u - 0.5f) * 32.0f;
    case 1:  /* wide: most exponentials underflow, some subnormal */
      return -u * 480.0f;
    case 2:  /* masks */
      return j % 3 == 1 ? -__builtin_inff () : (u - 0.5f) * 8.0f;
    case 3:
      return j == 2 ? bits_f32 (0x7fc00000u) : u;
    case 4:
      return j == 1 ? __builtin_inff () : u;
    case 5:
      return -__builtin_inff ();
    default:  /* signed zeros and negatives: the maximum a zero, −0 or +0 first */
      return (r & 3) == 0 ? -u : bits_f32 ((guint32) r & 0x80000000u);
    }
}

/* The fused quantization's output rows (OP_QUANT_ROWS) against
 * dc_quant_pack_reference () of the CPU's rows @want: every int8 value and
 * exponent, E[0] set exactly when a row holds a NaN or an infinity, and
 * nothing written outside the operand. */
static gboolean
gate_softmax_quant (const float   *want,
                    gsize          rows,
                    gsize          len,
                    const gint8   *q,
                    const gint32  *e,
                    GError       **error)
{
  g_autoptr(DcQuantMatrix) ref = dc_quant_matrix_new (1, len, NULL);
  gboolean finite = TRUE;

  for (gsize r = 0; r < rows; r++)
    {
      g_autoptr(GError) local_error = NULL;

      if (!dc_quant_pack_reference ("gate", want + r * len, len, 1, ref, &local_error))
        {
          finite = FALSE;
          continue;
        }
      if (e[1 + r] != ref->exponent[0] || memcmp (q + GATE_Q_OFFSET + r * len, ref->q, len) != 0)
        {
          gsize j = 0;

          while (j + 1 < len && q[GATE_Q_OFFSET + r * len + j] == ref->q[j])
            j++;
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                       "quantized row %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT ": exponent %d "
                       "(want %d), element %" G_GSIZE_FORMAT " %d (want %d, of 0x%08x)", r, len,
                       e[1 + r], ref->exponent[0], j, q[GATE_Q_OFFSET + r * len + j], ref->q[j],
                       f32_bits (want[r * len + j]));
          return FALSE;
        }
    }
  if ((e[0] != 0) == finite)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "quantized rows of %" G_GSIZE_FORMAT ": the not-finite flag is %d", len, e[0]);
      return FALSE;
    }
  for (gsize i = 0; i < GATE_Q_OFFSET; i++)
    if (q[i] != GATE_SENTINEL || q[GATE_Q_OFFSET + rows * len + i] != GATE_SENTINEL)
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "quantized rows of %" G_GSIZE_FORMAT ": a byte outside the operand "
                     "written", len);
        return FALSE;
      }
  if (e[1 + rows] != 0x55555555)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "quantized rows of %" G_GSIZE_FORMAT ": an exponent past the last written",
                   len);
      return FALSE;
    }
  return TRUE;
}

/* One case: rows of len, forward (scores of every kind) or backward
 * (probabilities of ordinary scores and gradients of ±1; with @ties,
 * probabilities of 1 and half-integer gradients summing to 0 exactly, so
 * that dS is the gradients and its quantization meets exact ties); with
 * @quant the fused quantization of the output rows too. */
static gboolean
gate_softmax_case (DcVkContext   *ctx,
                   DcVkPipeline  *pipeline,
                   gboolean       backward,
                   gboolean       causal,
                   gsize          rows,
                   gsize          len,
                   float          scale,
                   gboolean       quant,
                   gboolean       ties,
                   guint64       *state,
                   GError       **error)
{
  gsize n = rows * len;
  g_autoptr(DcVkBuffer) bf = NULL, bd = NULL, bq = NULL, be = NULL;
  g_autofree float *in = g_new (float, n), *want = g_new (float, n);
  float *f;
  gint8 *q;
  gint32 *e;

  if ((bf = dc_vk_buffer_new (ctx, 2 * n * 4, error)) == NULL
      || (bd = dc_vk_buffer_new (ctx, 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, 2 * GATE_Q_OFFSET + n, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, (rows + 2) * 4, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  q = dc_vk_buffer_get_data (bq);
  e = dc_vk_buffer_get_data (be);
  memset (q, GATE_SENTINEL, 2 * GATE_Q_OFFSET + n);
  memset (e, GATE_SENTINEL, (rows + 2) * 4);
  e[0] = 0;
  for (gsize r = 0; r < rows; r++)
    for (gsize j = 0; j < len; j++)
      in[r * len + j] = softmax_score ((guint) r, j, state);
  if (!backward)
    {
      memcpy (f, in, n * 4);
      memset (f + n, 0xff, n * 4);
      dc_gpt_vk_softmax_reference (in, scale, causal, rows, len, want);
    }
  else
    {
      /* The probabilities of ordinary scores, and gradients of ±1. */
      for (gsize r = 0; r < rows; r++)
        {
          gsize m = r % len + 1;

          for (gsize j = 0; j < len; j++)
            f[r * len + j] = (float) ((gint32) (_dc_gpt_vk_splitmix64 (state) % 65536) - 32768)
                             * 0x1p-11f;
          dc_math_softmax (f + r * len, f + r * len, m);
          for (gsize j = m; j < len; j++)
            f[r * len + j] = 0.0f;
          for (gsize j = 0; j < len; j++)
            f[n + r * len + j] = (float) ((gint32) (_dc_gpt_vk_splitmix64 (state) % 65536)
                                          - 32768) * 0x1p-15f;
          if (ties)
            {
              /* y = 1 and dy = ±(k + ½) in pairs of opposite signs (the
               * first ±127.5, so that the exponent is 0), an odd one out
               * zero: Σ y · dy = 0 exactly and dS = dy. */
              for (gsize j = 0; j < len; j++)
                {
                  float h = j < 2 ? 127.5f
                            : (float) (_dc_gpt_vk_splitmix64 (state) % 128) + 0.5f;

                  f[r * len + j] = j < m ? 1.0f : 0.0f;
                  f[n + r * len + j] = j % 2 == 0 ? h : -f[n + r * len + j - 1];
                }
              if (m % 2 == 1)
                f[n + r * len + m - 1] = 0.0f;
            }
          memcpy (want + r * len, f + n + r * len, len * 4);
          dc_math_softmax_backward (f + r * len, want + r * len, want + r * len, m);
          for (gsize j = 0; j < len; j++)
            want[r * len + j] = j < m ? want[r * len + j] * scale : 0.0f;
        }
    }
  {
    guint32 fused = quant ? DC_GPT_VK_SOFTMAX_QUANT_ROWS : 0;
    DcVkRowsPush fwd = { OP_SOFTMAX | fused, { 0, (guint32) n, (guint32) rows, (guint32) len,
                                               f32_bits (scale), causal ? 1 : 0, GATE_Q_OFFSET,
                                               1 } };
    DcVkRowsPush back = { OP_SOFTMAX_BACK | fused, { 0, (guint32) n, (guint32) len,
                                                     f32_bits (scale), (guint32) rows,
                                                     GATE_Q_OFFSET, 1 } };
    DcVkBuffer *buffers[] = { bf, bq, be, bd };

    fwd.a[14] = back.a[14] = dc_gpt_vk_rows_softmax_lanes_log2 (len);
    if (!dc_vk_dispatch (ctx, pipeline, buffers, backward ? &back : &fwd,
                         dc_gpt_vk_rows_softmax_groups (rows, len), 1, 1, error))
      return FALSE;
  }
  for (gsize i = 0; i < n; i++)
    if (!same_f32 (f[n + i], want[i]))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "softmax%s (%s, %" G_GSIZE_FORMAT " rows of %" G_GSIZE_FORMAT
                     "): row %" G_GSIZE_FORMAT ", element %" G_GSIZE_FORMAT
                     ": 0x%08x instead of 0x%08x", backward ? " backward" : "",
                     causal ? "causal" : "full", rows, len, i / len, i % len, f32_bits (f[n + i]),
                     f32_bits (want[i]));
        return FALSE;
      }
  if (quant)
    return gate_softmax_quant (want, rows, len, q, e, error);
  if (e[0] != 0 || q[0] != GATE_SENTINEL || q[GATE_Q_OFFSET] != GATE_SENTINEL)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "softmax without quantization wrote Q or E");
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_gpt_vk_rows_gate_softmax:
 * @native: the float mode of the variant to gate
 * @broken: load the broken twin (the gates' tests)
 *
 * Gates shaders/resident-softmax.comp against the CPU's softmax and its
 * backward.
 *
 * Returns: whether the kernel may run the resident pass's softmax rows
 */
gboolean
dc_gpt_vk_rows_gate_softmax (DcVkContext  *ctx,
                             DcVkF32Mode   native,
                             gboolean      broken,
                             GError      **error)
{
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-softmax", native, broken);
  g_autoptr(DcVkPipeline) pipeline = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x4461697379536d32);  /* "DaisySm2" */
  float scale = 1.0f / __builtin_sqrtf (24.0f);

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkRowsPush), error);
  if (pipeline == NULL)
    return FALSE;
  /* Each case plain and with the rows' quantization fused. */
  for (guint fused = 0; fused < 2; fused++)
    if (!(gate_softmax_case (ctx, pipeline, FALSE, TRUE, 66, 33, scale, fused, FALSE, &state,
                             error)
          && gate_softmax_case (ctx, pipeline, FALSE, TRUE, 200, 200, scale, fused, FALSE,
                                &state, error)
          && gate_softmax_case (ctx, pipeline, FALSE, FALSE, 7, 1, 1.0f, fused, FALSE, &state,
                                error)
          && gate_softmax_case (ctx, pipeline, FALSE, FALSE, 14, 7, 1.0f, fused, FALSE, &state,
                                error)
          && gate_softmax_case (ctx, pipeline, FALSE, FALSE, 14, 300, 1.0f, fused, FALSE,
                                &state, error)
          && gate_softmax_case (ctx, pipeline, FALSE, FALSE, 2, DC_GPT_VK_ROWS_SOFTMAX_MAX_LEN,
                                1.0f, fused, FALSE, &state, error)
          && gate_softmax_case (ctx, pipeline, TRUE, TRUE, 66, 33, scale, fused, FALSE, &state,
                                error)
          && gate_softmax_case (ctx, pipeline, TRUE, TRUE, 200, 200, scale, fused, FALSE,
                                &state, error)
          /* Rows past the CACHE · 128 elements a workgroup keeps in
           * registers. */
          && gate_softmax_case (ctx, pipeline, TRUE, TRUE, 1100, 1100, scale, fused, FALSE,
                                &state, error)))
      return FALSE;
  /* The quantization's exact ties (dS = dy, half-integers at exponent 0). */
  return gate_softmax_case (ctx, pipeline, TRUE, TRUE, 66, 33, 1.0f, TRUE, TRUE, &state, error)
         && gate_softmax_case (ctx, pipeline, TRUE, TRUE, 40, 200, 1.0f, TRUE, TRUE, &state,
                               error);
}
