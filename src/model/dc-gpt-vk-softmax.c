/* dc-gpt-vk-softmax.c: attention's softmax on the device
 * (shaders/softmax.comp), with its start-up gate.
 *
 * The gate runs rows of every length from 1 to 20 and 31, 32, 33, 64, 65,
 * 128, 129, 257, causal and full, with two scales (1/√16, exact, and 1/√24,
 * rounded), against dc_gpt_vk_softmax_reference () (head_forward ()'s loop
 * around dc_math_softmax ()): ordinary scores, wide ones (e^(x − max)
 * underflowing to 0 and into subnormals), −∞ masks, and rows with a NaN, a
 * +∞ or only −∞ (NaN rows). DC_TEST_BREAK_KERNEL=softmax (or all) loads the
 * broken twin.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-softmax.h"

#include <string.h>

#include "engine/dc-math.h"
#include "dc-model-error.h"
#include "dc-gpt-vk-step-private.h"

/* Mirrors the push constants of shaders/softmax.comp. */
typedef struct
{
  guint32 rows;
  guint32 len;
  guint32 scale;
  guint32 causal;
} DcVkSoftmaxPush;

G_STATIC_ASSERT (sizeof (DcVkSoftmaxPush) == 16);

/* Invocations per workgroup (softmax.comp's local_size_x). */
#define SOFTMAX_GROUP 64
/* The sum tree's stack holds rows up to 2^26 values; attention rows are at
 * most the sequence (128 in the seeds' range, 1024 for GPT-2 small). */
#define SOFTMAX_MAX_LEN (1u << 20)

struct _DcGptVkSoftmax
{
  DcVkContext  *ctx;       /* borrowed */
  DcVkPipeline *pipeline;  /* owned */
};

/**
 * dc_gpt_vk_softmax_reference:
 * @scores: (array): (rows, len)
 * @att: (out caller-allocates) (array): (rows, len)
 *
 * The CPU's rule, as head_forward () (dc-gpt.c) applies it to each row t of
 * a (len, len) block: the first n scores times @scale, dc_math_softmax ()
 * of them, zeros after; n = t + 1 (t = row mod len) when @causal, else len.
 */
void
dc_gpt_vk_softmax_reference (const float *scores,
                             float        scale,
                             gboolean     causal,
                             gsize        rows,
                             gsize        len,
                             float       *att)
{
  for (gsize r = 0; r < rows; r++)
    {
      const float *s = scores + r * len;
      float *row = att + r * len;
      gsize n = causal ? r % len + 1 : len;

      for (gsize j = 0; j < n; j++)
        row[j] = s[j] * scale;
      dc_math_softmax (row, row, n);
      for (gsize j = n; j < len; j++)
        row[j] = 0.0f;
    }
}

void
dc_gpt_vk_softmax_free (DcGptVkSoftmax *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->pipeline, dc_vk_pipeline_free);
  g_free (self);
}

/**
 * dc_gpt_vk_softmax_rows:
 *
 * dc_gpt_vk_softmax_reference () computed on the device.
 */
gboolean
dc_gpt_vk_softmax_rows (DcGptVkSoftmax  *self,
                        const float     *scores,
                        float            scale,
                        gboolean         causal,
                        gsize            rows,
                        gsize            len,
                        float           *att,
                        GError         **error)
{
  g_autoptr(DcVkBuffer) bs = NULL, ba = NULL;
  DcVkSoftmaxPush push;

  g_return_val_if_fail (rows > 0 && len > 0, FALSE);

  if (len > SOFTMAX_MAX_LEN || rows * len > G_MAXUINT32 / 4)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "softmax of %" G_GSIZE_FORMAT " rows of %" G_GSIZE_FORMAT
                   " values is too large for the kernel", rows, len);
      return FALSE;
    }
  if ((bs = dc_vk_buffer_new (self->ctx, rows * len * 4, error)) == NULL
      || (ba = dc_vk_buffer_new (self->ctx, rows * len * 4, error)) == NULL)
    return FALSE;
  memcpy (dc_vk_buffer_get_data (bs), scores, rows * len * 4);
  push.rows = (guint32) rows;
  push.len = (guint32) len;
  push.scale = f32_bits (scale);
  push.causal = causal ? 1 : 0;
  {
    DcVkBuffer *buffers[] = { bs, ba };

    if (!dc_vk_dispatch (self->ctx, self->pipeline, buffers, &push,
                         (guint) ((rows + SOFTMAX_GROUP - 1) / SOFTMAX_GROUP), 1, 1, error))
      return FALSE;
  }
  memcpy (att, dc_vk_buffer_get_data (ba), rows * len * 4);
  return TRUE;
}

/* Score j of a row of this kind. */
static float
gate_score (guint     kind,
            gsize     j,
            guint64  *state)
{
  guint64 r = _dc_gpt_vk_splitmix64 (state);
  float u = (float) (gint32) (r >> 40 & 0xffffff) * 0x1p-24f;  /* [0, 1), exact */

  switch (kind % 6)
    {
    case 0:  /* ordinary scores */
      return (u - 0.5f) * 16.0f;
    case 1:  /* wide: most exponentials underflow, some subnormal */
      return -u * 480.0f;
    case 2:  /* masks */
      return j % 3 == 1 ? -__builtin_inff () : (u - 0.5f) * 8.0f;
    case 3:
      return j == 2 ? bits_f32 (0x7fc00000u) : u;
    case 4:
      return j == 1 ? __builtin_inff () : u;
    default:
      return -__builtin_inff ();
    }
}

static gboolean
gate (DcGptVkSoftmax  *self,
      GError         **error)
{
  static const gsize extra[] = { 31, 32, 33, 64, 65, 128, 129, 257 };
  guint64 state = G_GUINT64_CONSTANT (0x4461697379536d31);
  const float scales[] = { 0.25f, 1.0f / __builtin_sqrtf (24.0f) };

  for (guint l = 0; l < 20 + G_N_ELEMENTS (extra); l++)
    for (guint c = 0; c < 4; c++)
      {
        gsize len = l < 20 ? l + 1 : extra[l - 20];
        gboolean causal = c % 2 == 0;
        float scale = scales[c / 2];
        /* Full rows: one row of each kind; causal: a whole (len, len) block
         * of one kind per length (every prefix length), kinds rotating. */
        gsize rows = causal ? len : 6;
        g_autofree float *scores = g_new (float, rows * len);
        g_autofree float *got = g_new (float, rows * len), *want = g_new (float, rows * len);

        for (gsize r = 0; r < rows; r++)
          for (gsize j = 0; j < len; j++)
            scores[r * len + j] = gate_score (causal ? l + c : (guint) r, j, &state);
        if (!dc_gpt_vk_softmax_rows (self, scores, scale, causal, rows, len, got, error))
          return FALSE;
        dc_gpt_vk_softmax_reference (scores, scale, causal, rows, len, want);
        for (gsize i = 0; i < rows * len; i++)
          if (!same_f32 (got[i], want[i]))
            {
              g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                           "%s row %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT ", element %"
                           G_GSIZE_FORMAT " (score 0x%08x): 0x%08x instead of 0x%08x",
                           causal ? "causal" : "full", i / len, len, i % len,
                           f32_bits (scores[i]), f32_bits (got[i]), f32_bits (want[i]));
              return FALSE;
            }
      }
  return TRUE;
}

/**
 * dc_gpt_vk_softmax_new:
 * @ctx: the device; must outlive the kernel
 *
 * Loads shaders/softmax.comp and gates it against the CPU.
 *
 * Returns: (transfer full) (nullable): the kernel, or %NULL with @error set
 */
DcGptVkSoftmax *
dc_gpt_vk_softmax_new (DcVkContext  *ctx,
                       GError      **error)
{
  g_autoptr(DcGptVkSoftmax) self = g_new0 (DcGptVkSoftmax, 1);
  g_autoptr(GError) local_error = NULL;

  self->ctx = ctx;
  self->pipeline = dc_vk_pipeline_new (ctx, _dc_gpt_vk_kernel_broken ("softmax") ? "softmax-broken"
                                                                     : "softmax",
                                       2, sizeof (DcVkSoftmaxPush), error);
  if (self->pipeline == NULL)
    return NULL;
  if (!gate (self, &local_error))
    {
      g_message ("Vulkan kernel softmax on %s failed verification (%s) — refused",
                 dc_vk_context_get_device_name (ctx), local_error->message);
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel softmax on %s failed verification — attention stays on the "
                   "CPU", dc_vk_context_get_device_name (ctx));
      return NULL;
    }
  return g_steal_pointer (&self);
}
