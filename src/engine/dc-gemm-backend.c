/* dc-gemm-backend.c: choosing and running a GEMM path.
 *
 * The backend checks operands once, here, so that every path may rely on
 * what the rule guarantees (equal K, |q| ≤ 127, exponents in range).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-gemm-backend.h"

#include <string.h>

#include "dc-gemm-cpu.h"
#include "dc-gemm-vk.h"

struct _DcGemmBackend
{
  /* owned */
  DcGemmVk      *vk;            /* non-NULL only for a working Vulkan backend */
  char          *device_name;
  char          *fallback;      /* why Vulkan computes nothing, when asked for and refused */
  /* state */
  DcBackendKind  kind;
  DcGemmIsa      isa;
  guint          n_threads;
};

const char *
dc_backend_kind_to_string (DcBackendKind kind)
{
  switch (kind)
    {
    case DC_BACKEND_CPU_SCALAR: return "cpu-scalar";
    case DC_BACKEND_CPU: return "cpu";
    case DC_BACKEND_VULKAN: return "vulkan";
    default: return "unknown";
    }
}

gboolean
dc_backend_kind_from_string (const char    *name,
                             DcBackendKind *kind)
{
  for (DcBackendKind k = DC_BACKEND_CPU_SCALAR; k <= DC_BACKEND_VULKAN; k++)
    if (g_strcmp0 (name, dc_backend_kind_to_string (k)) == 0)
      {
        *kind = k;
        return TRUE;
      }
  return FALSE;
}

static char *
cpu_model_name (void)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/cpuinfo", &text, NULL, NULL))
    return g_strdup ("CPU");
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], "model name"))
      {
        const char *colon = strchr (lines[i], ':');

        if (colon != NULL)
          return g_strstrip (g_strdup (colon + 1));
      }
  return g_strdup ("CPU");
}

DcGemmBackend *
dc_gemm_backend_new (DcBackendKind   kind,
                     GError        **error)
{
  return dc_gemm_backend_new_for_device (kind, NULL, error);
}

DcGemmBackend *
dc_gemm_backend_new_for_device (DcBackendKind   kind,
                                const char     *device_id,
                                GError        **error)
{
  g_autoptr(DcGemmBackend) self = g_new0 (DcGemmBackend, 1);
  g_autofree char *cpu = NULL;

  self->kind = kind;
  self->n_threads = MAX (g_get_num_processors (), 1);
  self->isa = kind == DC_BACKEND_CPU_SCALAR ? DC_GEMM_ISA_SCALAR : dc_gemm_isa_best ();

  if (kind == DC_BACKEND_VULKAN)
    {
      g_autoptr(GError) local_error = NULL;

      self->vk = dc_gemm_vk_new_for_device (device_id, &local_error);
      if (self->vk == NULL)
        {
          /* No kernel passed its gate: the device computes nothing, and the
           * CPU path does the work (dc-gemm-vk.c logged which kernels). */
          if (g_error_matches (local_error, DC_GEMM_ERROR, DC_GEMM_ERROR_VERIFICATION))
            {
              g_message ("%s", local_error->message);
              self->fallback = g_strdup (local_error->message);
              self->kind = DC_BACKEND_CPU;
            }
          else
            {
              g_propagate_error (error, g_steal_pointer (&local_error));
              return NULL;
            }
        }
      else
        {
          self->device_name = g_strdup (dc_gemm_vk_get_device_name (self->vk));
          return g_steal_pointer (&self);
        }
    }

  cpu = cpu_model_name ();
  self->device_name = g_strdup_printf ("%s (%s)", cpu, dc_gemm_isa_to_string (self->isa));
  return g_steal_pointer (&self);
}

void
dc_gemm_backend_free (DcGemmBackend *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->vk, dc_gemm_vk_free);
  g_free (self->device_name);
  g_free (self->fallback);
  g_free (self);
}

/* Why a Vulkan backend computes on the CPU (every kernel refused), or NULL. */
const char *
dc_gemm_backend_get_fallback_reason (DcGemmBackend *self)
{
  return self->fallback;
}

/* The Vulkan device's stable id (DcVkDeviceInfo.id), or NULL off Vulkan. */
const char *
dc_gemm_backend_get_device_id (DcGemmBackend *self)
{
  return self->vk != NULL ? dc_gemm_vk_get_device_id (self->vk) : NULL;
}

DcBackendKind
dc_gemm_backend_get_kind (DcGemmBackend *self)
{
  return self->kind;
}

const char *
dc_gemm_backend_get_device_name (DcGemmBackend *self)
{
  return self->device_name;
}

const char *
dc_gemm_backend_get_kernel_name (DcGemmBackend *self)
{
  if (self->vk != NULL)
    return dc_gemm_vk_get_kernel_name (self->vk);
  return dc_gemm_isa_to_string (self->isa);
}

void
dc_gemm_backend_set_n_threads (DcGemmBackend *self,
                               guint          n_threads)
{
  self->n_threads = MAX (n_threads, 1);
}

guint
dc_gemm_backend_get_n_threads (DcGemmBackend *self)
{
  return self->n_threads;
}

static gboolean
check_operands (const DcQuantMatrix  *a,
                const DcQuantMatrix  *b,
                gboolean              packed,
                GError              **error)
{
  gsize n_out;

  if (a->k != b->k)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_SHAPE,
                   "GEMM operands do not fit: K = %" G_GSIZE_FORMAT " on the left, %"
                   G_GSIZE_FORMAT " on the right", a->k, b->k);
      return FALSE;
    }
  if (a->k > DC_GEMM_MAX_K)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE,
                   "GEMM with K = %" G_GSIZE_FORMAT " exceeds the largest exact K (%d)",
                   a->k, DC_GEMM_MAX_K);
      return FALSE;
    }
  if (!g_size_checked_mul (&n_out, a->n_vectors, b->n_vectors) || n_out > G_MAXSIZE / 8)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE,
                   "GEMM output of %" G_GSIZE_FORMAT " × %" G_GSIZE_FORMAT " is too large",
                   a->n_vectors, b->n_vectors);
      return FALSE;
    }
  /* Operands dc_quant_pack has just filled pass the value check by
   * construction; it was 3-5% of a training step. */
  if (packed)
    return TRUE;
  return dc_quant_matrix_check ("GEMM left operand", a, error) &&
         dc_quant_matrix_check ("GEMM right operand", b, error);
}

static gboolean
run (DcGemmBackend        *self,
     const DcQuantMatrix  *a,
     const DcQuantMatrix  *b,
     gint32               *acc,
     float                *c,
     gboolean              packed,
     GError              **error)
{
  if (!check_operands (a, b, packed, error))
    return FALSE;

  if (self->vk != NULL)
    return dc_gemm_vk_run (self->vk, a, b, acc, c, error);

  if (acc != NULL)
    dc_gemm_cpu_i32 (a, b, acc, self->isa,
                     self->kind == DC_BACKEND_CPU_SCALAR ? 1 : self->n_threads);
  else
    dc_gemm_cpu (a, b, c, self->isa, self->kind == DC_BACKEND_CPU_SCALAR ? 1 : self->n_threads);
  return TRUE;
}

gboolean
dc_gemm_run (DcGemmBackend        *self,
             const DcQuantMatrix  *a,
             const DcQuantMatrix  *b,
             float                *c,
             GError              **error)
{
  g_return_val_if_fail (self != NULL && a != NULL && b != NULL && c != NULL, FALSE);
  return run (self, a, b, NULL, c, FALSE, error);
}

gboolean
dc_gemm_run_packed (DcGemmBackend        *self,
                    const DcQuantMatrix  *a,
                    const DcQuantMatrix  *b,
                    float                *c,
                    GError              **error)
{
  g_return_val_if_fail (self != NULL && a != NULL && b != NULL && c != NULL, FALSE);
  return run (self, a, b, NULL, c, TRUE, error);
}

gboolean
dc_gemm_run_fill (DcGemmBackend        *self,
                  DcQuantMatrix        *a,
                  DcQuantMatrix        *b,
                  const DcGemmFill     *fill,
                  float                *c,
                  GError              **error)
{
  gboolean ok;

  g_return_val_if_fail (self != NULL && a != NULL && b != NULL && c != NULL, FALSE);
  g_return_val_if_fail (fill != NULL && fill->func != NULL, FALSE);
  g_return_val_if_fail (fill->a_chunk > 0 && fill->b_chunk > 0, FALSE);
  if (!check_operands (a, b, TRUE, error))
    return FALSE;
  if (self->vk == NULL)
    ok = dc_gemm_cpu_fill (a, b, fill, c, self->isa,
                           self->kind == DC_BACKEND_CPU_SCALAR ? 1 : self->n_threads);
  else
    {
      ok = dc_gemm_cpu_fill_operands (a, b, fill);
      if (ok)
        return dc_gemm_vk_run (self->vk, a, b, NULL, c, error);
    }
  if (!ok)
    g_set_error_literal (error, DC_GEMM_ERROR, DC_GEMM_ERROR_NOT_FINITE,
                         "an operand of the product could not be quantized");
  return ok;
}

gboolean
dc_gemm_run_i32 (DcGemmBackend        *self,
                 const DcQuantMatrix  *a,
                 const DcQuantMatrix  *b,
                 gint32               *acc,
                 GError              **error)
{
  g_return_val_if_fail (self != NULL && a != NULL && b != NULL && acc != NULL, FALSE);
  return run (self, a, b, acc, NULL, FALSE, error);
}

gboolean
dc_gemm_backend_time (DcGemmBackend        *self,
                      const DcQuantMatrix  *a,
                      const DcQuantMatrix  *b,
                      guint                 repeat,
                      double               *seconds,
                      GError              **error)
{
  g_autofree float *c = NULL;
  gint64 start;

  if (!check_operands (a, b, FALSE, error))
    return FALSE;
  if (self->vk != NULL)
    return dc_gemm_vk_time (self->vk, a, b, MAX (repeat, 1), seconds, error);

  c = g_try_new (float, a->n_vectors * b->n_vectors);
  if (c == NULL)
    {
      g_set_error (error, DC_GEMM_ERROR, DC_GEMM_ERROR_TOO_LARGE, "Out of memory for the output");
      return FALSE;
    }
  start = g_get_monotonic_time ();
  for (guint r = 0; r < MAX (repeat, 1); r++)
    if (!run (self, a, b, NULL, c, TRUE, error))
      return FALSE;
  *seconds = (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC;
  return TRUE;
}

gboolean
dc_gemm_backend_time_queued (DcGemmBackend        *self,
                             const DcQuantMatrix  *a,
                             const DcQuantMatrix  *b,
                             guint                 repeat,
                             DcGemmQueuedTiming   *timing,
                             GError              **error)
{
  DcVkDispatchTiming t;

  if (!check_operands (a, b, FALSE, error))
    return FALSE;
  if (self->vk == NULL)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                           "Queued timing is for the Vulkan path only");
      return FALSE;
    }
  if (!dc_gemm_vk_time_queued (self->vk, a, b, repeat, &t, error))
    return FALSE;
  timing->queued = t.queued;
  timing->gpu = t.gpu;
  timing->fence_wait = t.fence_wait;
  timing->fence_poll = t.fence_poll;
  timing->fresh = t.fresh;
  return TRUE;
}
