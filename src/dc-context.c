/* dc-context.c: what the jobs of one front end share.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-context"

#include "config.h"

#include "dc-context.h"

#include "engine/dc-gemm-probe.h"
#include "engine/dc-vk-context.h"
#include "model/dc-gpt-trainer.h"

struct _DcContext
{
  GObject        parent_instance;

  /* owned references */
  DcGemmBackend *backend;
  DcHfClient    *hf_client;
  DcGroup       *group;

  /* state */
  DcBackendKind  asked;
  char          *probe_hash;   /* 64 hex digits, or "" when the probe failed */
};

G_DEFINE_FINAL_TYPE (DcContext, dc_context, G_TYPE_OBJECT)

/* The probe runs on the backend the jobs will use: its hash is what peers
 * compare. A 67×61×131 product: milliseconds. */
static void
run_probe (DcContext *self)
{
  g_autoptr(GError) error = NULL;

  self->probe_hash = dc_gemm_probe (self->backend, &error);
  if (self->probe_hash == NULL)
    {
      g_warning ("The probe GEMM failed: %s", error->message);
      self->probe_hash = g_strdup ("");
    }
}

/**
 * dc_context_new:
 * @kind: the backend asked for (the CLI's --backend)
 *
 * Opens the backend (for Vulkan: the device and every kernel's init gate)
 * and runs the probe on it.
 *
 * Returns: (transfer full): the context, or %NULL with @error set when the
 *   backend cannot be opened at all
 */
DcContext *
dc_context_new (DcBackendKind   kind,
                GError        **error)
{
  g_autoptr(DcContext) self = g_object_new (DC_TYPE_CONTEXT, NULL);

  self->asked = kind;
  self->backend = dc_gemm_backend_new (kind, error);
  if (self->backend == NULL)
    return NULL;
  run_probe (self);
  return g_steal_pointer (&self);
}

/* "auto" uses Vulkan only on a GPU: a device that emulates one on the CPU
 * (Mesa's lavapipe) is slower than the CPU path it would replace. */
static gboolean
has_vulkan_gpu (void)
{
  g_autoptr(GPtrArray) devices = dc_vk_list_devices (NULL);

  for (guint i = 0; devices != NULL && i < devices->len; i++)
    {
      DcVkDeviceInfo *info = devices->pdata[i];

      if (info->has_compute && info->type != VK_PHYSICAL_DEVICE_TYPE_CPU)
        return TRUE;
    }
  return FALSE;
}

/**
 * dc_context_new_for_preference:
 * @preference: the app's "backend" setting: "auto", "cpu" or "vulkan"
 *
 * "cpu" is the CPU path; "vulkan" opens the best Vulkan device, whatever it
 * is; "auto" does so only when a GPU is there, else it is the CPU path. A
 * Vulkan device that cannot be opened falls back to the CPU with a log
 * line. Never fails: the CPU is always there.
 *
 * Returns: (transfer full): the context
 */
DcContext *
dc_context_new_for_preference (const char *preference)
{
  g_autoptr(GError) error = NULL;
  DcBackendKind kind = DC_BACKEND_CPU;
  DcContext *self;

  if (g_strcmp0 (preference, "vulkan") == 0
      || (g_strcmp0 (preference, "auto") == 0 && has_vulkan_gpu ()))
    kind = DC_BACKEND_VULKAN;
  self = dc_context_new (kind, &error);
  if (self == NULL)
    {
      g_message ("No Vulkan device can be used (%s): computing on the CPU", error->message);
      g_clear_error (&error);
      self = dc_context_new (DC_BACKEND_CPU, &error);
      /* The CPU backend needs no device: failing here is a build defect. */
      g_assert_no_error (error);
    }
  return self;
}

/**
 * dc_context_get_backend:
 *
 * Returns: (transfer none): the backend every job of this front end uses
 */
DcGemmBackend *
dc_context_get_backend (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return self->backend;
}

/* The backend in use, after any fallback (every kernel refused). */
DcBackendKind
dc_context_get_backend_kind (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), DC_BACKEND_CPU);

  return dc_gemm_backend_get_kind (self->backend);
}

const char *
dc_context_get_device_name (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return dc_gemm_backend_get_device_name (self->backend);
}

const char *
dc_context_get_probe_hash (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return self->probe_hash;
}

/**
 * dc_context_get_offload_min:
 *
 * Returns: the smallest product (multiply-adds) a training run sends to the
 *   backend: every product for cpu-scalar (it exists for checking), none
 *   for the CPU (it takes the small ones anyway), DC_GPT_TRAINER_OFFLOAD_MIN for
 *   a device
 */
guint64
dc_context_get_offload_min (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), 0);

  return self->asked == DC_BACKEND_CPU_SCALAR ? 0 : DC_GPT_TRAINER_OFFLOAD_MIN;
}

/**
 * dc_context_get_hf_client:
 *
 * Returns: (transfer none): the Hugging Face client of the main thread (made
 *   on first use; HF_ENDPOINT points it elsewhere)
 */
DcHfClient *
dc_context_get_hf_client (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  if (self->hf_client == NULL)
    self->hf_client = dc_hf_client_new (NULL);
  return self->hf_client;
}

/**
 * dc_context_get_group:
 *
 * Returns: (transfer none) (nullable): this device's group
 */
DcGroup *
dc_context_get_group (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return self->group;
}

void
dc_context_set_group (DcContext *self,
                      DcGroup   *group)
{
  g_return_if_fail (DC_IS_CONTEXT (self));
  g_return_if_fail (group == NULL || DC_IS_GROUP (group));

  g_set_object (&self->group, group);
}

/**
 * dc_context_new_hello:
 * @name: the device's display name
 *
 * Returns: (transfer full): the hello peers see: the backend really in use,
 *   its probe hash and the numeric rule id (the rule's first 32 bits)
 */
DcMeshHello *
dc_context_new_hello (DcContext  *self,
                      const char *name)
{
  guint32 rule_id;

  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  rule_id = (guint32) (g_ascii_strtoull (dc_gemm_rule_id (), NULL, 16) >> 32);
  return dc_mesh_hello_new (name, dc_backend_kind_to_string (dc_context_get_backend_kind (self)),
                            self->probe_hash, rule_id);
}

static void
dc_context_dispose (GObject *object)
{
  DcContext *self = DC_CONTEXT (object);

  g_clear_object (&self->group);
  g_clear_object (&self->hf_client);

  G_OBJECT_CLASS (dc_context_parent_class)->dispose (object);
}

static void
dc_context_finalize (GObject *object)
{
  DcContext *self = DC_CONTEXT (object);

  g_clear_pointer (&self->backend, dc_gemm_backend_free);
  g_free (self->probe_hash);

  G_OBJECT_CLASS (dc_context_parent_class)->finalize (object);
}

static void
dc_context_class_init (DcContextClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = dc_context_dispose;
  object_class->finalize = dc_context_finalize;
}

static void
dc_context_init (DcContext *self)
{
}
