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
  char          *note;         /* why the backend is not the one asked for, or NULL */
  GStrv          vk_ids;       /* dc_context_get_vulkan_devices ()'s, once listed */
  GStrv          vk_labels;
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
  return dc_context_new_for_device (kind, NULL, error);
}

/**
 * dc_context_new_for_device:
 * @kind: the backend asked for (the CLI's --backend)
 * @device_id: (nullable): for Vulkan, the device's id (the CLI's
 *   --vulkan-device, dc_vk_find_device()); %NULL or "" for the best one
 *
 * dc_context_new() on a chosen Vulkan device. An unknown id fails, naming
 * the ids there are.
 *
 * Returns: (transfer full): the context, or %NULL with @error set
 */
DcContext *
dc_context_new_for_device (DcBackendKind   kind,
                           const char     *device_id,
                           GError        **error)
{
  g_autoptr(DcContext) self = g_object_new (DC_TYPE_CONTEXT, NULL);
  const char *fallback;

  self->asked = kind;
  self->backend = dc_gemm_backend_new_for_device (kind, device_id, error);
  if (self->backend == NULL)
    return NULL;
  fallback = dc_gemm_backend_get_fallback_reason (self->backend);
  if (fallback != NULL)
    self->note = g_strdup (fallback);
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
 * dc_context_list_vulkan_devices:
 * @ids: (out) (transfer full): each device's id (dc_vk_find_device())
 * @labels: (out) (transfer full): "name (type, driver)" for each, in the
 *   same order
 *
 * The Vulkan devices with a compute queue, for a front end's choice. None
 * when Vulkan is unusable (logged at debug level).
 */
void
dc_context_list_vulkan_devices (GStrv *ids,
                                GStrv *labels)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) devices = dc_vk_list_devices (&error);
  g_autoptr(GStrvBuilder) id_builder = g_strv_builder_new ();
  g_autoptr(GStrvBuilder) label_builder = g_strv_builder_new ();

  if (devices == NULL)
    g_debug ("No Vulkan devices to choose from: %s", error->message);
  for (guint i = 0; devices != NULL && i < devices->len; i++)
    {
      DcVkDeviceInfo *info = devices->pdata[i];
      g_autofree char *label = NULL;

      if (!info->has_compute)
        continue;
      label = *info->driver != '\0'
              ? g_strdup_printf ("%s (%s, %s)", info->name,
                                 dc_vk_device_type_to_string (info->type), info->driver)
              : g_strdup_printf ("%s (%s)", info->name, dc_vk_device_type_to_string (info->type));
      g_strv_builder_add (id_builder, info->id);
      g_strv_builder_add (label_builder, label);
    }
  *ids = g_strv_builder_end (id_builder);
  *labels = g_strv_builder_end (label_builder);
}

/**
 * dc_context_get_vulkan_devices:
 * @ids: (out) (transfer none): as dc_context_list_vulkan_devices ()
 * @labels: (out) (transfer none): the same
 *
 * The devices listed once, on the first call (the front end makes it at
 * start, where a Vulkan instance is made anyway): a window that shows them
 * later does not wait for the loader on the main thread. A device added
 * meanwhile shows after a restart, when a choice would take effect.
 */
void
dc_context_get_vulkan_devices (DcContext           *self,
                               const char * const **ids,
                               const char * const **labels)
{
  g_return_if_fail (DC_IS_CONTEXT (self));

  if (self->vk_ids == NULL)
    dc_context_list_vulkan_devices (&self->vk_ids, &self->vk_labels);
  *ids = (const char * const *) self->vk_ids;
  *labels = (const char * const *) self->vk_labels;
}

/**
 * dc_context_new_for_preference:
 * @preference: the app's "backend" setting: "auto", "cpu" or "vulkan"
 *
 * dc_context_new_for_settings() with the best Vulkan device.
 *
 * Returns: (transfer full): the context
 */
DcContext *
dc_context_new_for_preference (const char *preference)
{
  return dc_context_new_for_settings (preference, NULL);
}

/**
 * dc_context_new_for_settings:
 * @preference: the app's "backend" setting: "auto", "cpu" or "vulkan"
 * @device_id: (nullable): the app's "vulkan-device" setting: a device id
 *   (dc_vk_find_device()), or %NULL or "" for the best device
 *
 * "cpu" is the CPU path; "vulkan" opens @device_id, or the best Vulkan
 * device, whatever it is; "auto" does so only when a GPU is there, else it
 * is the CPU path. A device id that no device has is refused with a log
 * line and "auto" is used instead. A Vulkan device that cannot be opened
 * falls back to the CPU with a log line. dc_context_get_backend_note() says
 * why the backend is not the one asked for. Never fails: the CPU is always
 * there.
 *
 * Returns: (transfer full): the context
 */
DcContext *
dc_context_new_for_settings (const char *preference,
                             const char *device_id)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *note = NULL;
  DcBackendKind kind = DC_BACKEND_CPU;
  gboolean vulkan = g_strcmp0 (preference, "vulkan") == 0;
  DcContext *self;

  if (device_id != NULL && *device_id == '\0')
    device_id = NULL;
  if (vulkan && device_id != NULL)
    {
      g_autoptr(GPtrArray) devices = dc_vk_list_devices (&error);

      if (devices == NULL || dc_vk_find_device (devices, device_id, &error) < 0)
        {
          g_message ("The chosen Vulkan device is not used: %s: choosing automatically",
                     error->message);
          note = g_strdup_printf ("The chosen device is not there: %s", error->message);
          g_clear_error (&error);
          device_id = NULL;
          vulkan = FALSE;
          preference = "auto";
        }
    }
  if (vulkan)
    kind = DC_BACKEND_VULKAN;
  else if (g_strcmp0 (preference, "auto") == 0)
    {
      if (has_vulkan_gpu ())
        kind = DC_BACKEND_VULKAN;
      else if (note == NULL)
        note = g_strdup ("No Vulkan GPU was found");
    }
  self = dc_context_new_for_device (kind, device_id, &error);
  if (self == NULL)
    {
      g_message ("No Vulkan device can be used (%s): computing on the CPU", error->message);
      g_clear_pointer (&note, g_free);
      note = g_strdup (error->message);
      g_clear_error (&error);
      self = dc_context_new (DC_BACKEND_CPU, &error);
      /* The CPU backend needs no device: failing here is a build defect. */
      g_assert_no_error (error);
    }
  if (self->note == NULL)
    self->note = g_steal_pointer (&note);
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

/* The Vulkan device's stable id, or NULL off Vulkan. */
const char *
dc_context_get_device_id (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return dc_gemm_backend_get_device_id (self->backend);
}

const char *
dc_context_get_kernel_name (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return dc_gemm_backend_get_kernel_name (self->backend);
}

/**
 * dc_context_get_backend_note:
 *
 * Returns: (nullable): why the backend in use is not the one asked for (a
 *   refused device id, no GPU for "auto", a device that failed to open, every
 *   kernel refused by its start-up gate), for the user; %NULL when it is
 */
const char *
dc_context_get_backend_note (DcContext *self)
{
  g_return_val_if_fail (DC_IS_CONTEXT (self), NULL);

  return self->note;
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
  g_free (self->note);
  g_strfreev (self->vk_ids);
  g_strfreev (self->vk_labels);

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
