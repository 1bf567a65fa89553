/* dc-gpt-vk-fuse.c: the gate of shaders/resident-fuse.comp, the resident
 * pass's producers fused with the quantization of their output's rows.
 *
 * Each op runs on fixed inputs in host-visible buffers and the whole of F,
 * Q and E afterwards is compared with what the CPU's functions give
 * (dc_math_layer_norm (), the bias and residual add as C float sums,
 * dc_math_reluf (), dc_math_relu_backward (), dc_quant_pack_reference ()):
 * every float written (NaN as NaN), every int8 value and exponent, and
 * nothing written elsewhere (sentinels). The shapes reach the sums' peeled
 * parts (rows of 100 and GPT-2's 768), rows longer than the workgroup and
 * not a multiple of it, fewer workgroups than rows (the loop), the norm with
 * and without its bias and residual add, and the attention's heads of 8 and
 * 16 channels; the values are activations of every usual size with zeros,
 * subnormals and large values, and in every op a case whose quantization
 * meets exact ties at every rounding position and the ±127.5 clamp; a NaN
 * and an infinity must raise E[0]. DC_TEST_BREAK_KERNEL=resident-fuse (or
 * all; -native for the native variant) loads the broken twin (ties away
 * from zero), which the ties refuse.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-fuse.h"

#include <string.h>

#include "engine/dc-gemm.h"
#include "engine/dc-math.h"
#include "dc-model-error.h"

/* Mirrors DcVkForwardPush (dc-gpt-vk-forward.c). */
typedef struct
{
  guint32 op;
  guint32 a[15];
} DcVkFusePush;

G_STATIC_ASSERT (sizeof (DcVkFusePush) == 64);

#define GATE_Q_OFFSET 16  /* bytes before the operands in Q, which must stay */
#define GATE_SENTINEL 0x55
#define GATE_E_SENTINEL 0x55555555

typedef enum
{
  VALUES_ACTIVATIONS,  /* every usual size, zeros, subnormals, large values */
  VALUES_TIES,         /* exact ties at every rounding position, the clamp */
  VALUES_NOT_FINITE,   /* activations with a NaN and an infinity */
} Values;

typedef struct
{
  guint32 op;
  guint rows, n;        /* QK: rows = sequences · T, n = C */
  gboolean extra;       /* NORM: with the bias and the residual add */
  guint heads, seq;     /* QK */
  Values values;
} FuseCase;

static float
activation (guint64 *state)
{
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  guint32 sign = (guint32) r & 0x80000000u;

  switch ((r >> 32) % 16)
    {
    case 0: return bits_f32 (sign);
    case 1: return bits_f32 (sign | (guint32) (r >> 40) % 0x800000u);
    case 2: return bits_f32 (sign | (guint32) (150 + (r >> 40) % 20) << 23
                             | ((guint32) r & 0x7fffffu));
    default: return bits_f32 (sign | (guint32) (118 + (r >> 40) % 14) << 23
                              | ((guint32) r & 0x7fffffu));
    }
}

/* Element i of a vector whose largest |x| is 127.5 · 2^k (element 0):
 * exact ties and the clamp at the rounding position 2^k. */
static float
tie (gsize     i,
     gint      k,
     guint64  *state)
{
  static const float ties[] = { 0.5f, 1.5f, 2.5f, 126.5f, 127.5f, 127.0f, 63.5f,
                                0.25f, 0.75f, 3.5f, 64.5f, 100.5f, 0.0f };
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  float v = i == 0 ? 127.5f : ties[(r >> 33) % G_N_ELEMENTS (ties)];

  return ((r & 1) ? -v : v) * bits_f32 ((guint32) (127 + k) << 23);
}

static gboolean
quant_rows (const float *src,
            gsize        vs,
            gsize        n_vectors,
            gsize        k,
            gint8       *q,
            gint32      *e)
{
  g_autoptr(DcQuantMatrix) m = dc_quant_matrix_new (n_vectors, k, NULL);

  if (!dc_quant_pack_reference ("gate", src, vs, 1, m, NULL))
    return FALSE;
  memcpy (q, m->q, n_vectors * k);
  memcpy (e, m->exponent, n_vectors * 4);
  return TRUE;
}

static gboolean
gate_case (DcVkContext     *ctx,
           DcVkPipeline    *pipeline,
           const FuseCase  *fc,
           guint64         *state,
           GError         **error)
{
  gsize rows = fc->rows, n = fc->n, rn = rows * n;
  gboolean qk = fc->op == DC_GPT_VK_FUSE_OP_QK, norm = fc->op == DC_GPT_VK_FUSE_OP_NORM;
  gsize width = qk ? 3 * n : n;  /* floats a row of X */
  /* F: X (rows × width), W, B, BIAS (width each), Y, ADDX (rows × n), MEAN, RSTD. */
  gsize X = 0, W = X + rows * width, B = W + width, BIAS = B + width, Y = BIAS + width;
  gsize ADDX = Y + rn, MEAN = ADDX + rn, RSTD = MEAN + rows, F_SIZE = RSTD + rows;
  /* Q: the left operand (and QK's right one after it); E: flag, left, right. */
  gsize q_size = GATE_Q_OFFSET + (qk ? 2 : 1) * rn + 64;
  gsize e_size = 1 + (qk ? 2 * rows * fc->heads : rows) + 4;
  g_autoptr(DcVkBuffer) bf = NULL, bq = NULL, be = NULL, bt = NULL;
  g_autofree float *want = g_new (float, F_SIZE);
  g_autofree gint8 *want_q = g_new (gint8, q_size);
  g_autofree gint32 *want_e = g_new (gint32, e_size);
  gboolean finite = TRUE;
  float *f;
  gint8 *q;
  gint32 *e;

  if ((bf = dc_vk_buffer_new (ctx, F_SIZE * 4, error)) == NULL
      || (bq = dc_vk_buffer_new (ctx, q_size, error)) == NULL
      || (be = dc_vk_buffer_new (ctx, e_size * 4, error)) == NULL
      || (bt = dc_vk_buffer_new (ctx, 4, error)) == NULL)
    return FALSE;
  f = dc_vk_buffer_get_data (bf);
  q = dc_vk_buffer_get_data (bq);
  e = dc_vk_buffer_get_data (be);
  for (gsize i = 0; i < F_SIZE; i++)
    f[i] = activation (state);
  if (fc->values == VALUES_TIES)
    {
      /* The quantized values are the ties themselves: the norm's output is
       * its bias where its weight is 0; the bias adds +0 elsewhere; ReLU's
       * backward passes dy where x > 0. */
      if (norm)
        for (gsize i = 0; i < n; i++)
          {
            f[W + i] = 0.0f;
            f[B + i] = tie (i, -3, state);
          }
      for (gsize r = 0; r < rows && !norm; r++)
        {
          gint k = (gint) (r % 40) - 20;

          if (fc->op == DC_GPT_VK_FUSE_OP_RELU_BACK)
            for (gsize i = 0; i < n; i++)
              f[Y + r * n + i] = tie (i, k, state);  /* dy */
          else
            for (gsize i = 0; i < width; i++)
              {
                f[BIAS + i] = 0.0f;
                f[X + r * width + i] = tie (qk ? i % (n / fc->heads) : i, k, state);
              }
        }
    }
  else if (fc->values == VALUES_NOT_FINITE)
    {
      f[X + (rows - 1) * width + width / 2] = bits_f32 (0x7fc00001u);
      f[X + width - 1] = bits_f32 (0xff800000u);
    }
  memcpy (want, f, F_SIZE * 4);
  memset (q, GATE_SENTINEL, q_size);
  memset (want_q, GATE_SENTINEL, q_size);
  for (gsize i = 0; i < e_size; i++)
    e[i] = want_e[i] = GATE_E_SENTINEL;
  e[0] = want_e[0] = 0;

  /* The CPU's side into want, want_q, want_e. */
  if (norm)
    {
      for (gsize i = 0; i < rn; i++)
        {
          float x = want[X + i];

          if (fc->extra)
            x = want[ADDX + i] + (x + want[BIAS + i % n]);
          want[X + i] = x;
        }
      for (gsize r = 0; r < rows; r++)
        dc_math_layer_norm (want + X + r * n, want + W, want + B, DC_MATH_GPT2_LN_EPS,
                            want + Y + r * n, want + MEAN + r, want + RSTD + r, n);
      finite = quant_rows (want + Y, n, rows, n, want_q + GATE_Q_OFFSET, want_e + 1);
    }
  else if (fc->op == DC_GPT_VK_FUSE_OP_RELU)
    {
      for (gsize i = 0; i < rn; i++)
        {
          want[X + i] = want[X + i] + want[BIAS + i % n];
          want[Y + i] = dc_math_reluf (want[X + i]);
        }
      finite = quant_rows (want + Y, n, rows, n, want_q + GATE_Q_OFFSET, want_e + 1);
    }
  else if (fc->op == DC_GPT_VK_FUSE_OP_RELU_BACK)
    {
      /* dy is Y and dx ADDX. */
      dc_math_relu_backward (want + X, want + Y, want + ADDX, rn);
      finite = quant_rows (want + ADDX, n, rows, n, want_q + GATE_Q_OFFSET, want_e + 1);
    }
  else
    {
      gsize d = n / fc->heads, h_n = fc->heads, t = fc->seq;

      for (gsize i = 0; i < rows * width; i++)
        want[X + i] = want[X + i] + want[BIAS + i % width];
      for (gsize r = 0; r < rows && finite; r++)
        for (gsize part = 0; part < 2 && finite; part++)
          for (gsize h = 0; h < h_n && finite; h++)
            {
              gsize vec = ((r / t) * h_n + h) * t + r % t;

              finite = quant_rows (want + X + r * width + part * n + h * d, d, 1, d,
                                   want_q + GATE_Q_OFFSET + part * rn + vec * d,
                                   want_e + 1 + part * rows * h_n + vec);
            }
    }

  {
    guint32 none = DC_GPT_VK_FUSE_NONE;
    DcVkFusePush push = { fc->op, { 0 } };
    DcVkBuffer *buffers[] = { bf, bq, be, bt };

    if (norm)
      {
        guint32 a[] = { (guint32) X, (guint32) W, (guint32) B, (guint32) Y, (guint32) MEAN,
                        (guint32) RSTD, (guint32) rows, (guint32) n, f32_bits ((float) n),
                        f32_bits (DC_MATH_GPT2_LN_EPS), GATE_Q_OFFSET, 1,
                        fc->extra ? (guint32) BIAS : none, fc->extra ? (guint32) ADDX : none };

        memcpy (push.a, a, sizeof a);
      }
    else if (fc->op == DC_GPT_VK_FUSE_OP_RELU)
      {
        guint32 a[] = { (guint32) X, (guint32) BIAS, (guint32) Y, (guint32) rows, (guint32) n,
                        GATE_Q_OFFSET, 1 };

        memcpy (push.a, a, sizeof a);
      }
    else if (fc->op == DC_GPT_VK_FUSE_OP_RELU_BACK)
      {
        guint32 a[] = { (guint32) X, (guint32) Y, (guint32) ADDX, (guint32) rows, (guint32) n,
                        GATE_Q_OFFSET, 1 };

        memcpy (push.a, a, sizeof a);
      }
    else
      {
        guint32 a[] = { (guint32) X, (guint32) BIAS, (guint32) rows, (guint32) n,
                        (guint32) (n / fc->heads), fc->heads, fc->seq, GATE_Q_OFFSET, 1,
                        (guint32) (GATE_Q_OFFSET + rn), (guint32) (1 + rows * fc->heads) };

        memcpy (push.a, a, sizeof a);
      }
    /* Fewer workgroups than rows: the kernel's loop. */
    if (!dc_vk_dispatch (ctx, pipeline, buffers, &push, (guint) (rows + 1) / 2, 1, 1, error))
      return FALSE;
  }

  if ((e[0] != 0) == finite)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "op %u, %u × %u: the not-finite flag is %d", fc->op, fc->rows, fc->n, e[0]);
      return FALSE;
    }
  /* A refused pass's operands are never used. */
  if (!finite)
    return TRUE;
  for (gsize i = 0; i < F_SIZE; i++)
    if (!same_f32 (f[i], want[i]))
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "op %u, %u × %u: float %" G_GSIZE_FORMAT " is 0x%08x instead of 0x%08x",
                     fc->op, fc->rows, fc->n, i, f32_bits (f[i]), f32_bits (want[i]));
        return FALSE;
      }
  for (gsize i = 0; i < q_size; i++)
    if (q[i] != want_q[i])
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "op %u, %u × %u: int8 byte %" G_GSIZE_FORMAT " is %d instead of %d",
                     fc->op, fc->rows, fc->n, i, q[i], want_q[i]);
        return FALSE;
      }
  for (gsize i = 0; i < e_size; i++)
    if (e[i] != want_e[i])
      {
        g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                     "op %u, %u × %u: exponent %" G_GSIZE_FORMAT " is %d instead of %d",
                     fc->op, fc->rows, fc->n, i, e[i], want_e[i]);
        return FALSE;
      }
  return TRUE;
}

/**
 * _dc_gpt_vk_fuse_new:
 * @native: the pass's float mode (the variant loaded)
 * @broken: load the broken twin (DC_TEST_BREAK_KERNEL=resident-fuse)
 *
 * Loads shaders/resident-fuse.comp and gates each of its ops against the
 * CPU's functions.
 *
 * Returns: (transfer full) (nullable): the pipeline, or %NULL with @error
 *   set (the caller records the unfused ops)
 */
DcVkPipeline *
_dc_gpt_vk_fuse_new (DcVkContext  *ctx,
                     DcVkF32Mode   native,
                     gboolean      broken,
                     GError      **error)
{
  static const FuseCase cases[] = {
    { DC_GPT_VK_FUSE_OP_NORM, 5, 100, FALSE, 0, 0, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_NORM, 5, 100, TRUE, 0, 0, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_NORM, 3, 768, TRUE, 0, 0, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_NORM, 4, 100, FALSE, 0, 0, VALUES_TIES },
    { DC_GPT_VK_FUSE_OP_NORM, 3, 100, TRUE, 0, 0, VALUES_NOT_FINITE },
    { DC_GPT_VK_FUSE_OP_RELU, 5, 300, FALSE, 0, 0, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_RELU, 41, 200, FALSE, 0, 0, VALUES_TIES },
    { DC_GPT_VK_FUSE_OP_RELU, 3, 70, FALSE, 0, 0, VALUES_NOT_FINITE },
    /* longer than a chunk of 8 × 64: two, the second short */
    { DC_GPT_VK_FUSE_OP_RELU, 3, 1100, FALSE, 0, 0, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_RELU_BACK, 5, 300, FALSE, 0, 0, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_RELU_BACK, 41, 200, FALSE, 0, 0, VALUES_TIES },
    { DC_GPT_VK_FUSE_OP_RELU_BACK, 3, 1100, FALSE, 0, 0, VALUES_ACTIVATIONS },
    /* qkv of 2 sequences of 5 (3 heads of 8; 2 of 16, GPT-2's 64 in four). */
    { DC_GPT_VK_FUSE_OP_QK, 10, 24, FALSE, 3, 5, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_QK, 14, 32, FALSE, 2, 7, VALUES_TIES },
    { DC_GPT_VK_FUSE_OP_QK, 4, 256, FALSE, 4, 2, VALUES_ACTIVATIONS },
    { DC_GPT_VK_FUSE_OP_QK, 10, 24, FALSE, 3, 5, VALUES_NOT_FINITE },
  };
  g_autofree char *file = _dc_gpt_vk_kernel_file ("resident-fuse", native, broken);
  g_autoptr(DcVkPipeline) pipeline = NULL;
  guint64 state = G_GUINT64_CONSTANT (0x446169737946757a);  /* "DaisyFuz" */

  pipeline = dc_vk_pipeline_new (ctx, file, 4, sizeof (DcVkFusePush), error);
  if (pipeline == NULL)
    return NULL;
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    if (!gate_case (ctx, pipeline, &cases[c], &state, error))
      return NULL;
  return g_steal_pointer (&pipeline);
}
