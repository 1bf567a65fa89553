/* dc-gpt-vk-quant.c: dc_quant_pack () on the device (shaders/quantize.comp),
 * with its start-up gate.
 *
 * The gate quantizes a sweep of vectors on the device and with
 * dc_quant_pack_reference () and compares every int8 value and exponent:
 * lengths 1 to 70 and around the workgroup's 64 (127, 128, 129, 257, 1000),
 * values of every binade, exact ties at every rounding position, the clamp at
 * ±127.5, subnormal and all-zero vectors, column vectors (strided), and a
 * vector with a NaN and an infinity, which must be refused with the CPU's
 * message. DC_TEST_BREAK_KERNEL=quantize (or all) loads the broken twin.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-gpt-vk-quant.h"

#include <string.h>

#include "dc-model-error.h"
#include "dc-gpt-vk-step-private.h"

/* Mirrors the push constants of shaders/quantize.comp. */
typedef struct
{
  guint32 n_vectors;
  guint32 k;
  guint32 vector_stride;
  guint32 k_stride;
} DcVkQuantPush;

G_STATIC_ASSERT (sizeof (DcVkQuantPush) == 16);

/* Workgroups per dispatch at most (Vulkan's smallest allowed
 * maxComputeWorkGroupCount); the kernel loops over the rest. */
#define QUANT_MAX_GROUPS 65535

struct _DcGptVkQuant
{
  DcVkContext  *ctx;       /* borrowed */
  DcVkPipeline *pipeline;  /* owned */
};

void
dc_gpt_vk_quant_free (DcGptVkQuant *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->pipeline, dc_vk_pipeline_free);
  g_free (self);
}

/**
 * dc_gpt_vk_quant_pack:
 *
 * dc_quant_pack () computed on the device: the same values, exponents and
 * refusal of NaN and infinity (the same message).
 */
gboolean
dc_gpt_vk_quant_pack (DcGptVkQuant   *self,
                      const char     *what,
                      const float    *src,
                      gsize           vector_stride,
                      gsize           k_stride,
                      DcQuantMatrix  *out,
                      GError        **error)
{
  gsize n = out->n_vectors, k = out->k;
  gsize span = (n - 1) * vector_stride + (k - 1) * k_stride + 1;
  g_autoptr(DcVkBuffer) buf_src = NULL, buf_q = NULL, buf_e = NULL, buf_bad = NULL;
  const guint32 *bad;
  DcVkQuantPush push;

  g_return_val_if_fail (n > 0 && k > 0, FALSE);

  /* Indices are 32-bit in the kernel. */
  if (span > G_MAXUINT32 / 4 || n * k > G_MAXUINT32)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE,
                   "%s: %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " vectors are too large for "
                   "the quantization kernel", what, n, k);
      return FALSE;
    }
  if ((buf_src = dc_vk_buffer_new (self->ctx, span * 4, error)) == NULL
      || (buf_q = dc_vk_buffer_new (self->ctx, MAX (n * k, 4), error)) == NULL
      || (buf_e = dc_vk_buffer_new (self->ctx, n * 4, error)) == NULL
      || (buf_bad = dc_vk_buffer_new (self->ctx, n * 4, error)) == NULL)
    return FALSE;
  memcpy (dc_vk_buffer_get_data (buf_src), src, span * 4);
  push.n_vectors = (guint32) n;
  push.k = (guint32) k;
  push.vector_stride = (guint32) vector_stride;
  push.k_stride = (guint32) k_stride;
  {
    DcVkBuffer *buffers[] = { buf_src, buf_q, buf_e, buf_bad };

    if (!dc_vk_dispatch (self->ctx, self->pipeline, buffers, &push,
                         (guint) MIN (n, QUANT_MAX_GROUPS), 1, 1, error))
      return FALSE;
  }
  bad = dc_vk_buffer_get_data (buf_bad);
  for (gsize v = 0; v < n; v++)
    if (bad[v] != G_MAXUINT32)
      {
        guint32 bits;

        memcpy (&bits, &src[v * vector_stride + bad[v] * k_stride], 4);
        g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE,
                     "%s: %s at vector %" G_GSIZE_FORMAT ", index %u (refused, never quantized)",
                     what, (bits & 0x7fffffffu) == 0x7f800000u ? "infinity" : "NaN", v, bad[v]);
        return FALSE;
      }
  memcpy (out->q, dc_vk_buffer_get_data (buf_q), n * k);
  memcpy (out->exponent, dc_vk_buffer_get_data (buf_e), n * 4);
  return TRUE;
}

/* One gate case: n vectors of length k filled by kind, row vectors or
 * columns; device and reference must agree (values, exponents, or the
 * refusal's message). */
static gboolean
gate_case (DcGptVkQuant  *self,
           gsize          n,
           gsize          k,
           guint          kind,
           gboolean       columns,
           guint64       *state,
           GError       **error)
{
  g_autofree float *src = g_new (float, n * k);
  g_autoptr(DcQuantMatrix) want = dc_quant_matrix_new (n, k, NULL);
  g_autoptr(DcQuantMatrix) got = dc_quant_matrix_new (n, k, NULL);
  g_autoptr(GError) want_error = NULL, got_error = NULL;
  gsize vs = columns ? 1 : k, ks = columns ? n : 1;
  gboolean want_ok, got_ok;

  for (gsize i = 0; i < n * k; i++)
    {
      guint64 r = _dc_gpt_vk_splitmix64 (state);
      guint32 sign = (guint32) r & 0x80000000u;

      switch (kind)
        {
        case 0:  /* every binade of normal floats */
          src[i] = bits_f32 (sign | (guint32) (r >> 8) % 0x7f000000u);
          break;
        case 1:  /* one binade band: many values keep bits below the rounding point */
          src[i] = bits_f32 (sign | ((guint32) (120 + (r >> 40) % 10) << 23)
                             | ((guint32) r & 0x7fffffu));
          break;
        case 2:  /* exact ties at every rounding position, and the clamp */
          {
            static const float ties[] = { 0.5f, 1.5f, 2.5f, 126.5f, 127.5f, 127.0f, 63.5f,
                                          0.25f, 0.75f, 3.5f, 64.5f, 100.5f };

            src[i] = (sign ? -1.0f : 1.0f) * ties[(r >> 33) % G_N_ELEMENTS (ties)];
            src[i] = src[i] * bits_f32 ((guint32) (100 + i % 40) << 23);
          }
          break;
        case 3:  /* subnormals and tiny normals */
          src[i] = bits_f32 (sign | (guint32) (r >> 8) % 0x01000000u);
          break;
        case 4:  /* zeros of both signs */
          src[i] = bits_f32 (sign);
          break;
        default:  /* finite, with a NaN and an infinity in the second vector */
          src[i] = bits_f32 (sign | ((guint32) (127 + (r >> 40) % 8) << 23)
                             | ((guint32) r & 0x7fffffu));
          break;
        }
    }
  if (kind == 5 && n > 1 && k > 9)
    {
      src[1 * vs + 9 * ks] = bits_f32 (0xff800000u);
      src[1 * vs + 5 * ks] = bits_f32 (0x7fc00001u);
    }
  want_ok = dc_quant_pack_reference ("gate", src, vs, ks, want, &want_error);
  got_ok = dc_gpt_vk_quant_pack (self, "gate", src, vs, ks, got, &got_error);
  if (got_error != NULL && !g_error_matches (got_error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE))
    {
      g_propagate_error (error, g_steal_pointer (&got_error));
      return FALSE;
    }
  if (want_ok != got_ok
      || (!want_ok && g_strcmp0 (want_error->message, got_error->message) != 0))
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "%" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " (kind %u): “%s” instead of “%s”",
                   n, k, kind, got_ok ? "accepted" : got_error->message,
                   want_ok ? "accepted" : want_error->message);
      return FALSE;
    }
  if (!want_ok)
    return TRUE;
  for (gsize v = 0; v < n; v++)
    {
      if (got->exponent[v] != want->exponent[v])
        {
          g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                       "%" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " (kind %u): vector %"
                       G_GSIZE_FORMAT " exponent %d instead of %d", n, k, kind, v,
                       got->exponent[v], want->exponent[v]);
          return FALSE;
        }
      for (gsize i = 0; i < k; i++)
        if (got->q[v * k + i] != want->q[v * k + i])
          {
            g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                         "%" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " (kind %u): vector %"
                         G_GSIZE_FORMAT " index %" G_GSIZE_FORMAT ": %d instead of %d", n, k,
                         kind, v, i, got->q[v * k + i], want->q[v * k + i]);
            return FALSE;
          }
    }
  return TRUE;
}

static gboolean
gate (DcGptVkQuant  *self,
      GError       **error)
{
  static const gsize lengths[] = { 1, 2, 7, 31, 63, 64, 65, 70, 127, 128, 129, 257, 1000 };
  guint64 state = G_GUINT64_CONSTANT (0x4461697379517431);  /* "DaisyQt1" */

  for (guint kind = 0; kind < 6; kind++)
    for (guint l = 0; l < G_N_ELEMENTS (lengths); l++)
      if (!gate_case (self, 3 + l % 4, lengths[l], kind, l % 2 == 1, &state, error))
        return FALSE;
  return TRUE;
}

/**
 * dc_gpt_vk_quant_new:
 * @ctx: the device; must outlive the kernel
 *
 * Loads shaders/quantize.comp and gates it against dc_quant_pack_reference ().
 *
 * Returns: (transfer full) (nullable): the kernel, or %NULL with @error set
 *   when the device lacks int8 storage or the gate refused it
 */
DcGptVkQuant *
dc_gpt_vk_quant_new (DcVkContext  *ctx,
                     GError      **error)
{
  g_autoptr(DcGptVkQuant) self = g_new0 (DcGptVkQuant, 1);
  const DcVkFeatures *features = dc_vk_context_get_features (ctx);
  g_autoptr(GError) local_error = NULL;

  if (!features->shader_int8 || !features->storage_buffer_8bit)
    {
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel quantize needs shaderInt8 and storageBuffer8BitAccess, "
                   "which %s lacks", dc_vk_context_get_device_name (ctx));
      return NULL;
    }
  self->ctx = ctx;
  self->pipeline = dc_vk_pipeline_new (ctx,
                                       _dc_gpt_vk_kernel_broken ("quantize") ? "quantize-broken"
                                                                             : "quantize",
                                       4, sizeof (DcVkQuantPush), error);
  if (self->pipeline == NULL)
    return NULL;
  if (!gate (self, &local_error))
    {
      g_message ("Vulkan kernel quantize on %s failed verification (%s) — refused",
                 dc_vk_context_get_device_name (ctx), local_error->message);
      g_set_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_UNSUPPORTED,
                   "Vulkan kernel quantize on %s failed verification — quantization stays "
                   "on the CPU", dc_vk_context_get_device_name (ctx));
      return NULL;
    }
  return g_steal_pointer (&self);
}
