/* dc-vk-context.c: Vulkan instance, device and compute queue selection,
 * host-visible storage buffers, compute pipelines from the shader GResource and
 * synchronous dispatch.
 *
 * The order of operations follows the usual headless compute sequence:
 * instance → physical device with a compute queue → logical device → buffers →
 * shader module → descriptor set layout → pipeline → command buffer → fence.
 * Everything here runs on the thread that owns the context; a context is not
 * shared between threads.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-engine"

#include "config.h"

#include "dc-vk-context.h"

#include <string.h>

#include "dc-spirv-coop.h"

#include "dc-shaders-resources.h"

struct _DcVkContext
{
  VkInstance                        instance;
  VkPhysicalDevice                  physical;
  VkDevice                          device;
  VkQueue                           queue;
  guint32                           queue_family;
  VkCommandPool                     command_pool;
  VkPhysicalDeviceProperties        properties;
  VkPhysicalDeviceMemoryProperties  memory;
  DcVkFeatures                      features;
  char                             *device_id;  /* DcVkDeviceInfo.id of the device chosen */
  /* dc_vk_dispatch ()'s command buffer and fence, made once and reset for
   * each call: making them per call cost about 0.5 ms on the H200
   * (docs/BENCHMARKS.md, fence_wait_fresh_ms), more than a 1024³ product. */
  VkCommandBuffer                   dispatch_cmd;
  VkFence                           dispatch_fence;
};

struct _DcVkBuffer
{
  DcVkContext    *ctx;   /* borrowed: buffers never outlive their context */
  VkBuffer        buffer;
  VkDeviceMemory  memory;
  gsize           size;
  gpointer        data;  /* persistently mapped, host-coherent; NULL when device-local */
  /* A view (dc_vk_buffer_new_view ()): a range of another buffer, whose
   * VkBuffer and memory it borrows; offset is in bytes into that buffer. */
  gsize           offset;
  gboolean        view;
};

struct _DcVkPipeline
{
  DcVkContext           *ctx;
  VkShaderModule         module;
  VkDescriptorSetLayout  set_layout;
  VkPipelineLayout       layout;
  VkPipeline             pipeline;
  VkDescriptorPool       pool;
  VkDescriptorSet        set;
  guint                  n_buffers;
  guint                  push_size;
  const char            *name;    /* interned shader name: the profile's default label */
};

G_DEFINE_QUARK (dc-vk-error-quark, dc_vk_error)

static const char *
vk_result_to_string (VkResult result)
{
  switch (result)
    {
    case VK_SUCCESS: return "success";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case VK_ERROR_INITIALIZATION_FAILED: return "initialization failed";
    case VK_ERROR_DEVICE_LOST: return "device lost";
    case VK_ERROR_MEMORY_MAP_FAILED: return "memory map failed";
    case VK_ERROR_LAYER_NOT_PRESENT: return "layer not present";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "extension not present";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "feature not present";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "incompatible driver (no Vulkan 1.2 driver installed?)";
    case VK_ERROR_TOO_MANY_OBJECTS: return "too many objects";
    case VK_ERROR_INVALID_SHADER_NV: return "invalid shader";
    case VK_TIMEOUT: return "timeout";
    default: return "unknown error";
    }
}

static gboolean
check_vk (VkResult     result,
          const char  *what,
          GError     **error)
{
  if (result == VK_SUCCESS)
    return TRUE;

  g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_FAILED,
               "Vulkan: %s failed: %s (%d)", what, vk_result_to_string (result), result);
  return FALSE;
}

static void
ensure_shader_resources (void)
{
  static gsize registered = 0;

  /* The resource is registered by hand: a constructor in a static library's
   * object file is dropped by the linker when nothing references it. */
  if (g_once_init_enter (&registered))
    {
      dc_shaders_register_resource ();
      g_once_init_leave (&registered, 1);
    }
}

/**
 * dc_vk_shader_lookup:
 * @name: a kernel's base name in shaders/ ("smoke" for smoke.comp)
 *
 * The kernel's SPIR-V as built into the program, without a device (tests of
 * what is done to it before it reaches the driver).
 *
 * Returns: (transfer full) (nullable): the bytes, or %NULL with @error set
 */
GBytes *
dc_vk_shader_lookup (const char  *name,
                     GError     **error)
{
  g_autofree char *path = g_strdup_printf (RESOURCE_BASE "/shaders/%s.spv", name);

  ensure_shader_resources ();
  return g_resources_lookup_data (path, G_RESOURCE_LOOKUP_FLAGS_NONE, error);
}

static VkInstance
create_instance (GError **error)
{
  VkApplicationInfo app_info = {
    .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
    .pApplicationName = "DaisyChain",
    .applicationVersion = VK_MAKE_VERSION (0, 1, 0),
    .pEngineName = "daisychain-engine",
    .engineVersion = VK_MAKE_VERSION (0, 1, 0),
    .apiVersion = VK_API_VERSION_1_2,
  };
  VkInstanceCreateInfo info = {
    .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
    .pApplicationInfo = &app_info,
  };
  VkInstance instance = VK_NULL_HANDLE;
  VkResult result;

  result = vkCreateInstance (&info, NULL, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER)
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_NO_DEVICE,
                   "No Vulkan driver is installed (install mesa-vulkan-drivers for the "
                   "CPU driver, or your GPU's Vulkan driver)");
      return VK_NULL_HANDLE;
    }
  if (!check_vk (result, "creating the instance", error))
    return VK_NULL_HANDLE;

  return instance;
}

static gboolean
find_compute_queue (VkPhysicalDevice  physical,
                    guint32          *family)
{
  g_autofree VkQueueFamilyProperties *families = NULL;
  guint32 n_families = 0;

  vkGetPhysicalDeviceQueueFamilyProperties (physical, &n_families, NULL);
  families = g_new0 (VkQueueFamilyProperties, MAX (n_families, 1));
  vkGetPhysicalDeviceQueueFamilyProperties (physical, &n_families, families);

  /* A compute-only family is usually the asynchronous compute engine: prefer it. */
  for (guint32 i = 0; i < n_families; i++)
    {
      if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
          !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
        {
          *family = i;
          return TRUE;
        }
    }
  for (guint32 i = 0; i < n_families; i++)
    {
      if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
        {
          *family = i;
          return TRUE;
        }
    }
  return FALSE;
}

static GPtrArray *
enumerate_physical (VkInstance   instance,
                    GError     **error)
{
  g_autofree VkPhysicalDevice *devices = NULL;
  GPtrArray *array;
  guint32 n_devices = 0;

  if (!check_vk (vkEnumeratePhysicalDevices (instance, &n_devices, NULL),
                 "enumerating devices", error))
    return NULL;
  devices = g_new0 (VkPhysicalDevice, MAX (n_devices, 1));
  if (!check_vk (vkEnumeratePhysicalDevices (instance, &n_devices, devices),
                 "enumerating devices", error))
    return NULL;

  array = g_ptr_array_new ();
  for (guint32 i = 0; i < n_devices; i++)
    g_ptr_array_add (array, devices[i]);
  return array;
}

const char *
dc_vk_device_type_to_string (VkPhysicalDeviceType type)
{
  switch (type)
    {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_OTHER:
    default: return "other";
    }
}

void
dc_vk_device_info_free (DcVkDeviceInfo *info)
{
  if (info == NULL)
    return;
  g_free (info->name);
  g_free (info->id);
  g_free (info->uuid);
  g_free (info->driver);
  g_free (info);
}

/* deviceUUID (Vulkan 1.1), the driver's name and the float controls
 * (Vulkan 1.2); chained only
 * where the device's API version has them. */
static void
query_identity (VkPhysicalDevice  device,
                guint32           api_version,
                DcVkDeviceInfo   *info)
{
  VkPhysicalDeviceFloatControlsProperties float_controls = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES,
  };
  VkPhysicalDeviceDriverProperties driver = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
    .pNext = &float_controls,
  };
  VkPhysicalDeviceIDProperties id = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
  };
  VkPhysicalDeviceProperties2 props = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
    .pNext = &id,
  };
  g_autoptr(GString) uuid = g_string_new (NULL);

  if (api_version < VK_API_VERSION_1_1)
    {
      info->uuid = g_strdup ("");
      info->driver = g_strdup ("");
      return;
    }
  if (api_version >= VK_API_VERSION_1_2)
    id.pNext = &driver;
  vkGetPhysicalDeviceProperties2 (device, &props);
  for (guint i = 0; i < VK_UUID_SIZE; i++)
    g_string_append_printf (uuid, "%02x", id.deviceUUID[i]);
  info->uuid = g_string_free (g_steal_pointer (&uuid), FALSE);
  if (api_version >= VK_API_VERSION_1_2)
    {
      info->float32_denorm_preserve = float_controls.shaderDenormPreserveFloat32;
      info->float32_rounding_rte = float_controls.shaderRoundingModeRTEFloat32;
      info->float32_signed_zero_inf_nan = float_controls.shaderSignedZeroInfNanPreserveFloat32;
    }
  driver.driverName[VK_MAX_DRIVER_NAME_SIZE - 1] = '\0';
  driver.driverInfo[VK_MAX_DRIVER_INFO_SIZE - 1] = '\0';
  if (api_version < VK_API_VERSION_1_2 || driver.driverName[0] == '\0')
    info->driver = g_strdup ("");
  else if (driver.driverInfo[0] == '\0')
    info->driver = g_strdup (driver.driverName);
  else
    info->driver = g_strdup_printf ("%s %s", driver.driverName, driver.driverInfo);
}

/* @wanted (lower case) against 32 hex digits, ignoring dashes (8-4-4-4-12). */
static gboolean
uuid_matches (const char *wanted,
              const char *uuid)
{
  gsize n = 0;

  if (*uuid == '\0')
    return FALSE;
  for (const char *p = wanted; *p != '\0'; p++)
    {
      if (*p == '-')
        continue;
      if (n >= 32 || *p != uuid[n])
        return FALSE;
      n++;
    }
  return n == 32;
}

/**
 * dc_vk_find_device:
 * @devices: (element-type DcVkDeviceInfo): from dc_vk_list_devices()
 * @id: a device's id ("10de:2335", "10de:2335/1") or its deviceUUID
 *
 * Returns: the loader's index of the device, or -1 with @error set naming
 *   the ids there are
 */
int
dc_vk_find_device (GPtrArray   *devices,
                   const char  *id,
                   GError     **error)
{
  g_autoptr(GString) known = g_string_new (NULL);
  g_autofree char *wanted = g_ascii_strdown (id, -1);

  g_strstrip (wanted);
  for (guint i = 0; i < devices->len; i++)
    {
      DcVkDeviceInfo *info = g_ptr_array_index (devices, i);

      if (g_str_equal (wanted, info->id) || uuid_matches (wanted, info->uuid))
        return (int) i;
      g_string_append_printf (known, "%s%s (%s)", known->len > 0 ? ", " : "", info->id,
                              info->name);
    }
  g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_NO_DEVICE,
               "No Vulkan device has the id “%s” (devices: %s)", id,
               known->len > 0 ? known->str : "none");
  return -1;
}

/**
 * dc_vk_list_devices:
 *
 * Returns: (transfer full) (element-type DcVkDeviceInfo): every Vulkan device
 *   the loader reports, in the loader's order (the index used by
 *   dc_vk_context_new()), or %NULL with @error set when Vulkan is unusable.
 */
GPtrArray *
dc_vk_list_devices (GError **error)
{
  g_autoptr(GPtrArray) physical = NULL;
  GPtrArray *infos;
  VkInstance instance;

  instance = create_instance (error);
  if (instance == VK_NULL_HANDLE)
    return NULL;

  physical = enumerate_physical (instance, error);
  if (physical == NULL)
    {
      vkDestroyInstance (instance, NULL);
      return NULL;
    }

  infos = g_ptr_array_new_with_free_func ((GDestroyNotify) dc_vk_device_info_free);
  for (guint i = 0; i < physical->len; i++)
    {
      DcVkDeviceInfo *info = g_new0 (DcVkDeviceInfo, 1);
      VkPhysicalDevice device = g_ptr_array_index (physical, i);
      VkPhysicalDeviceProperties props;
      guint same = 0;
      guint32 family;

      vkGetPhysicalDeviceProperties (device, &props);
      info->name = g_strdup (props.deviceName);
      info->vendor_id = props.vendorID;
      info->device_id = props.deviceID;
      info->api_version = props.apiVersion;
      info->type = props.deviceType;
      info->has_compute = find_compute_queue (device, &family);
      for (guint j = 0; j < infos->len; j++)
        {
          DcVkDeviceInfo *before = g_ptr_array_index (infos, j);

          if (before->vendor_id == info->vendor_id && before->device_id == info->device_id)
            same++;
        }
      info->id = same == 0 ? g_strdup_printf ("%04x:%04x", info->vendor_id, info->device_id)
                           : g_strdup_printf ("%04x:%04x/%u", info->vendor_id, info->device_id,
                                              same);
      query_identity (device, props.apiVersion, info);
      g_ptr_array_add (infos, info);
    }

  vkDestroyInstance (instance, NULL);
  return infos;
}

static int
device_type_rank (VkPhysicalDeviceType type)
{
  switch (type)
    {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_OTHER:
    default: return 4;
    }
}

static gboolean
has_device_extension (VkPhysicalDevice  physical,
                      const char       *name)
{
  g_autofree VkExtensionProperties *props = NULL;
  guint32 count = 0;

  if (vkEnumerateDeviceExtensionProperties (physical, NULL, &count, NULL) != VK_SUCCESS)
    return FALSE;
  props = g_new0 (VkExtensionProperties, MAX (count, 1));
  if (vkEnumerateDeviceExtensionProperties (physical, NULL, &count, props) != VK_SUCCESS)
    return FALSE;
  for (guint32 i = 0; i < count; i++)
    if (g_str_equal (props[i].extensionName, name))
      return TRUE;
  return FALSE;
}

/* VK_NV_cooperative_matrix, with the one shape the coop kernel is written
 * for: A 16 × 32 and B 32 × 8 of int8, C and D 16 × 8 of int32, one
 * subgroup. The feature bit and the shape list both have to say so. */
static gboolean
query_coop_matrix_nv_int8 (DcVkContext *self)
{
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
  };
  VkPhysicalDeviceFeatures2 features = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
    .pNext = &coop,
  };
  PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get_shapes;
  g_autofree VkCooperativeMatrixPropertiesNV *shapes = NULL;
  guint32 n_shapes = 0;

  if (!has_device_extension (self->physical, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
    return FALSE;
  vkGetPhysicalDeviceFeatures2 (self->physical, &features);
  get_shapes = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)
    vkGetInstanceProcAddr (self->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
  if (!coop.cooperativeMatrix || get_shapes == NULL
      || get_shapes (self->physical, &n_shapes, NULL) != VK_SUCCESS || n_shapes == 0
      || n_shapes > 4096)
    return FALSE;
  shapes = g_new0 (VkCooperativeMatrixPropertiesNV, n_shapes);
  for (guint32 i = 0; i < n_shapes; i++)
    shapes[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  if (get_shapes (self->physical, &n_shapes, shapes) != VK_SUCCESS)
    return FALSE;
  for (guint32 i = 0; i < n_shapes; i++)
    if (shapes[i].MSize == 16 && shapes[i].NSize == 8 && shapes[i].KSize == 32
        && shapes[i].AType == VK_COMPONENT_TYPE_SINT8_NV
        && shapes[i].BType == VK_COMPONENT_TYPE_SINT8_NV
        && shapes[i].CType == VK_COMPONENT_TYPE_SINT32_NV
        && shapes[i].DType == VK_COMPONENT_TYPE_SINT32_NV
        && shapes[i].scope == VK_SCOPE_SUBGROUP_NV)
      return TRUE;
  return FALSE;
}

/* VK_KHR_cooperative_matrix is newer than Debian 12's Vulkan headers (1.3.239):
 * its structures and enums as the registry defines them (extension 507). */
#define DC_STRUCTURE_TYPE_COOP_FEATURES_KHR ((VkStructureType) 1000506000)
#define DC_STRUCTURE_TYPE_COOP_PROPERTIES_KHR ((VkStructureType) 1000506001)
#define DC_COMPONENT_SINT8 3
#define DC_COMPONENT_SINT32 5
#define DC_SCOPE_SUBGROUP 3

typedef struct
{
  VkStructureType sType;
  void           *pNext;
  VkBool32        cooperativeMatrix;
  VkBool32        cooperativeMatrixRobustBufferAccess;
} DcCoopFeaturesKHR;

typedef struct
{
  VkStructureType sType;
  void           *pNext;
  guint32         MSize, NSize, KSize;
  guint32         AType, BType, CType, ResultType;
  VkBool32        saturatingAccumulation;
  guint32         scope;
} DcCoopPropertiesKHR;

typedef VkResult (VKAPI_PTR *DcGetCoopPropertiesKHR) (VkPhysicalDevice, guint32 *,
                                                     DcCoopPropertiesKHR *);

/* VK_KHR_cooperative_matrix's subgroup-scope int8 × int8 → int32 shapes:
 * the feature bit and the shape list both have to say so. Sets
 * coop_matrix_khr_int8 (bit 0: 16 × 8 × 32, bit 1: 16 × 16 × 32) and lists
 * every shape in coop_matrix_khr_shapes, for the logs and benchmarks. */
static void
query_coop_matrix_khr (DcVkContext *self)
{
  DcCoopFeaturesKHR coop = { .sType = DC_STRUCTURE_TYPE_COOP_FEATURES_KHR };
  VkPhysicalDeviceFeatures2 features = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
    .pNext = &coop,
  };
  DcGetCoopPropertiesKHR get_shapes;
  g_autofree DcCoopPropertiesKHR *shapes = NULL;
  g_autoptr(GString) list = g_string_new (NULL);
  guint32 n_shapes = 0;

  if (!has_device_extension (self->physical, "VK_KHR_cooperative_matrix"))
    return;
  vkGetPhysicalDeviceFeatures2 (self->physical, &features);
  get_shapes = (DcGetCoopPropertiesKHR)
    vkGetInstanceProcAddr (self->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  /* 4096 shapes: far more than any driver lists; bounds the allocation. */
  if (!coop.cooperativeMatrix || get_shapes == NULL
      || get_shapes (self->physical, &n_shapes, NULL) != VK_SUCCESS || n_shapes == 0
      || n_shapes > 4096)
    return;
  shapes = g_new0 (DcCoopPropertiesKHR, n_shapes);
  for (guint32 i = 0; i < n_shapes; i++)
    shapes[i].sType = DC_STRUCTURE_TYPE_COOP_PROPERTIES_KHR;
  if (get_shapes (self->physical, &n_shapes, shapes) != VK_SUCCESS)
    return;
  for (guint32 i = 0; i < n_shapes; i++)
    {
      const DcCoopPropertiesKHR *p = &shapes[i];

      g_string_append_printf (list, "%s%ux%ux%u:%u,%u,%u,%u%s/s%u", list->len ? " " : "",
                              p->MSize, p->NSize, p->KSize, p->AType, p->BType, p->CType,
                              p->ResultType, p->saturatingAccumulation ? "sat" : "",
                              p->scope);
      if (p->AType == DC_COMPONENT_SINT8 && p->BType == DC_COMPONENT_SINT8
          && p->CType == DC_COMPONENT_SINT32 && p->ResultType == DC_COMPONENT_SINT32
          && p->scope == DC_SCOPE_SUBGROUP && !p->saturatingAccumulation
          && p->MSize == 16 && p->KSize == 32 && (p->NSize == 8 || p->NSize == 16))
        self->features.coop_matrix_khr_int8 |= p->NSize == 8 ? 1 : 2;
    }
  g_strlcpy (self->features.coop_matrix_khr_shapes, list->str,
             sizeof self->features.coop_matrix_khr_shapes);
}

static void
query_features (DcVkContext *self)
{
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot_features = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR,
  };
  VkPhysicalDeviceVulkan12Features features12 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
  };
  VkPhysicalDeviceFeatures2 features = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
    .pNext = &features12,
  };
  VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR dot_props = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR,
  };
  VkPhysicalDeviceFloatControlsProperties float_controls = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES,
  };
  VkPhysicalDeviceSubgroupProperties subgroup = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
    .pNext = &float_controls,
  };
  VkPhysicalDeviceProperties2 props = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
    .pNext = &subgroup,
  };
  gboolean has_dot = has_device_extension (self->physical,
                                           VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);

  if (has_dot)
    {
      features12.pNext = &dot_features;
      float_controls.pNext = &dot_props;
    }
  vkGetPhysicalDeviceFeatures2 (self->physical, &features);
  vkGetPhysicalDeviceProperties2 (self->physical, &props);

  self->features.shader_int8 = features12.shaderInt8;
  self->features.storage_buffer_8bit = features12.storageBuffer8BitAccess;
  self->features.integer_dot_product = has_dot && dot_features.shaderIntegerDotProduct;
  self->features.dot_4x8_packed_signed_accelerated =
    has_dot && dot_props.integerDotProduct4x8BitPackedSignedAccelerated;
  self->features.cooperative_matrix = has_device_extension (self->physical,
                                                            "VK_KHR_cooperative_matrix");
  self->features.subgroup_size = subgroup.subgroupSize;
  self->features.coop_matrix_nv_int8 = query_coop_matrix_nv_int8 (self);
  query_coop_matrix_khr (self);
  self->features.max_shared_memory = self->properties.limits.maxComputeSharedMemorySize;
  self->features.max_invocations = self->properties.limits.maxComputeWorkGroupInvocations;
  self->features.max_storage_buffer_range = self->properties.limits.maxStorageBufferRange;
  self->features.float32_denorm_preserve = float_controls.shaderDenormPreserveFloat32;
  self->features.float32_rounding_rte = float_controls.shaderRoundingModeRTEFloat32;
  self->features.float32_signed_zero_inf_nan =
    float_controls.shaderSignedZeroInfNanPreserveFloat32;
}

const DcVkFeatures *
dc_vk_context_get_features (DcVkContext *self)
{
  return &self->features;
}

/**
 * dc_vk_features_to_string:
 *
 * Returns: (transfer full): one line for logs and notes.
 */
char *
dc_vk_features_to_string (const DcVkFeatures *f)
{
  return g_strdup_printf ("shaderInt8=%d storageBuffer8BitAccess=%d shaderIntegerDotProduct=%d "
                          "dot4x8PackedSignedAccelerated=%d cooperativeMatrix=%d coopMatrixNVInt8=%d subgroup=%u "
                          "sharedMemory=%u invocations=%u storageBufferRange=%u "
                          "coopMatrixKHRInt8=%u coopMatrixKHRShapes=[%s] "
                          "denormPreserveFloat32=%d roundingModeRTEFloat32=%d "
                          "signedZeroInfNanPreserveFloat32=%d",
                          f->shader_int8, f->storage_buffer_8bit, f->integer_dot_product,
                          f->dot_4x8_packed_signed_accelerated, f->cooperative_matrix,
                          f->coop_matrix_nv_int8, f->subgroup_size, f->max_shared_memory, f->max_invocations,
                          f->max_storage_buffer_range, f->coop_matrix_khr_int8,
                          f->coop_matrix_khr_shapes, f->float32_denorm_preserve,
                          f->float32_rounding_rte, f->float32_signed_zero_inf_nan);
}

/* DcVkDeviceInfo.id of @chosen, counting the devices of the same pair
 * before it in the loader's order (as dc_vk_list_devices() does). */
static char *
device_id_of (GPtrArray                        *physical,
              VkPhysicalDevice                  chosen,
              const VkPhysicalDeviceProperties *props)
{
  guint same = 0;

  for (guint i = 0; i < physical->len && g_ptr_array_index (physical, i) != chosen; i++)
    {
      VkPhysicalDeviceProperties other;

      vkGetPhysicalDeviceProperties (g_ptr_array_index (physical, i), &other);
      if (other.vendorID == props->vendorID && other.deviceID == props->deviceID)
        same++;
    }
  if (same == 0)
    return g_strdup_printf ("%04x:%04x", props->vendorID, props->deviceID);
  return g_strdup_printf ("%04x:%04x/%u", props->vendorID, props->deviceID, same);
}

/**
 * dc_vk_context_new:
 * @device_index: the loader's index of the device, or -1 to pick the best
 *   device with a compute queue (discrete, then integrated, virtual, CPU)
 *
 * Returns: (transfer full) (nullable): a context, or %NULL with @error set.
 */
DcVkContext *
dc_vk_context_new (int      device_index,
                   GError **error)
{
  g_autoptr(DcVkContext) self = g_new0 (DcVkContext, 1);
  g_autoptr(GPtrArray) physical = NULL;
  const float priority = 1.0f;
  int best_rank = G_MAXINT;

  self->instance = create_instance (error);
  if (self->instance == VK_NULL_HANDLE)
    return NULL;

  physical = enumerate_physical (self->instance, error);
  if (physical == NULL)
    return NULL;

  if (device_index >= 0)
    {
      if ((guint) device_index >= physical->len)
        {
          g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_NO_DEVICE,
                       "Vulkan device %d does not exist (%u found)", device_index, physical->len);
          return NULL;
        }
      self->physical = g_ptr_array_index (physical, device_index);
      if (!find_compute_queue (self->physical, &self->queue_family))
        {
          g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_NO_DEVICE,
                       "Vulkan device %d has no compute queue", device_index);
          return NULL;
        }
    }
  else
    {
      for (guint i = 0; i < physical->len; i++)
        {
          VkPhysicalDevice candidate = g_ptr_array_index (physical, i);
          VkPhysicalDeviceProperties props;
          guint32 family;
          int rank;

          vkGetPhysicalDeviceProperties (candidate, &props);
          rank = device_type_rank (props.deviceType);
          if (props.apiVersion < VK_API_VERSION_1_2 || rank >= best_rank ||
              !find_compute_queue (candidate, &family))
            continue;
          best_rank = rank;
          self->physical = candidate;
          self->queue_family = family;
        }
      if (self->physical == VK_NULL_HANDLE)
        {
          g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_NO_DEVICE,
                       "No Vulkan 1.2 device with a compute queue was found (%u devices)",
                       physical->len);
          return NULL;
        }
    }

  vkGetPhysicalDeviceProperties (self->physical, &self->properties);
  vkGetPhysicalDeviceMemoryProperties (self->physical, &self->memory);
  self->device_id = device_id_of (physical, self->physical, &self->properties);

  {
    VkDeviceQueueCreateInfo queue_info = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = self->queue_family,
      .queueCount = 1,
      .pQueuePriorities = &priority,
    };
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot_features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR,
    };
    VkPhysicalDeviceVulkan12Features features12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
    };
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
    };
    DcCoopFeaturesKHR coop_khr_features = { .sType = DC_STRUCTURE_TYPE_COOP_FEATURES_KHR };
    const char *extensions[3];
    guint n_extensions = 0;
    VkDeviceCreateInfo device_info = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = &features12,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &queue_info,
    };
    VkCommandPoolCreateInfo pool_info = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
      .queueFamilyIndex = self->queue_family,
    };

    /* Switch on only what the INT8 kernels use, and only where offered: the
     * plain kernels need shaderInt8 and 8-bit storage, the dot variant the
     * integer dot product. */
    query_features (self);
    features12.shaderInt8 = self->features.shader_int8;
    features12.storageBuffer8BitAccess = self->features.storage_buffer_8bit;
    if (self->features.integer_dot_product)
      {
        dot_features.shaderIntegerDotProduct = VK_TRUE;
        features12.pNext = &dot_features;
        extensions[n_extensions++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
      }
    if (self->features.coop_matrix_khr_int8)
      {
        coop_khr_features.cooperativeMatrix = VK_TRUE;
        coop_khr_features.pNext = (void *) device_info.pNext;
        device_info.pNext = &coop_khr_features;
        extensions[n_extensions++] = "VK_KHR_cooperative_matrix";
      }
    if (self->features.coop_matrix_nv_int8)
      {
        coop_features.cooperativeMatrix = VK_TRUE;
        coop_features.pNext = (void *) device_info.pNext;
        device_info.pNext = &coop_features;
        extensions[n_extensions++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
      }
    device_info.enabledExtensionCount = n_extensions;
    device_info.ppEnabledExtensionNames = extensions;

    if (!check_vk (vkCreateDevice (self->physical, &device_info, NULL, &self->device),
                   "creating the device", error))
      return NULL;
    vkGetDeviceQueue (self->device, self->queue_family, 0, &self->queue);
    if (!check_vk (vkCreateCommandPool (self->device, &pool_info, NULL, &self->command_pool),
                   "creating the command pool", error))
      return NULL;
  }

  g_debug ("Vulkan device: %s (%s, API %u.%u.%u)", self->properties.deviceName,
           dc_vk_device_type_to_string (self->properties.deviceType),
           VK_API_VERSION_MAJOR (self->properties.apiVersion),
           VK_API_VERSION_MINOR (self->properties.apiVersion),
           VK_API_VERSION_PATCH (self->properties.apiVersion));

  return g_steal_pointer (&self);
}

/**
 * dc_vk_context_new_for_id:
 * @device_id: (nullable): a device id (dc_vk_find_device()), or %NULL or ""
 *   for the best device
 *
 * Returns: (transfer full) (nullable): a context on that device, or %NULL
 *   with @error set (an unknown id names the ids there are)
 */
DcVkContext *
dc_vk_context_new_for_id (const char  *device_id,
                          GError     **error)
{
  g_autoptr(GPtrArray) devices = NULL;
  int index;

  if (device_id == NULL || *device_id == '\0')
    return dc_vk_context_new (-1, error);
  devices = dc_vk_list_devices (error);
  if (devices == NULL)
    return NULL;
  index = dc_vk_find_device (devices, device_id, error);
  if (index < 0)
    return NULL;
  return dc_vk_context_new (index, error);
}

void
dc_vk_context_free (DcVkContext *self)
{
  if (self == NULL)
    return;

  if (self->device != VK_NULL_HANDLE)
    {
      vkDeviceWaitIdle (self->device);
      if (self->dispatch_fence != VK_NULL_HANDLE)
        vkDestroyFence (self->device, self->dispatch_fence, NULL);
      if (self->command_pool != VK_NULL_HANDLE)
        vkDestroyCommandPool (self->device, self->command_pool, NULL);
      vkDestroyDevice (self->device, NULL);
    }
  if (self->instance != VK_NULL_HANDLE)
    vkDestroyInstance (self->instance, NULL);
  g_free (self->device_id);
  g_free (self);
}

const char *
dc_vk_context_get_device_name (DcVkContext *self)
{
  return self->properties.deviceName;
}

/* The device's stable id (DcVkDeviceInfo.id). */
const char *
dc_vk_context_get_device_id (DcVkContext *self)
{
  return self->device_id;
}

const VkPhysicalDeviceProperties *
dc_vk_context_get_properties (DcVkContext *self)
{
  return &self->properties;
}

VkDevice
dc_vk_context_get_device (DcVkContext *self)
{
  return self->device;
}

static gboolean
find_memory_type (DcVkContext           *ctx,
                  guint32                type_bits,
                  VkMemoryPropertyFlags  wanted,
                  guint32               *index)
{
  for (guint32 i = 0; i < ctx->memory.memoryTypeCount; i++)
    {
      if ((type_bits & (1u << i)) &&
          (ctx->memory.memoryTypes[i].propertyFlags & wanted) == wanted)
        {
          *index = i;
          return TRUE;
        }
    }
  return FALSE;
}

/* Creates a storage buffer (also a transfer source and destination) and binds
 * memory of the first type with @wanted properties; when @fallback is TRUE and
 * none has them, any type the buffer accepts (lavapipe has one heap). */
static DcVkBuffer *
buffer_create (DcVkContext           *ctx,
               gsize                  size,
               VkMemoryPropertyFlags  wanted,
               gboolean               fallback,
               GError               **error)
{
  g_autoptr(DcVkBuffer) self = g_new0 (DcVkBuffer, 1);
  VkMemoryRequirements req;
  guint32 type_index;
  VkBufferCreateInfo info = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
    .size = size,
    .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };

  g_return_val_if_fail (size > 0, NULL);

  self->ctx = ctx;
  self->size = size;

  if (!check_vk (vkCreateBuffer (ctx->device, &info, NULL, &self->buffer),
                 "creating a buffer", error))
    return NULL;

  vkGetBufferMemoryRequirements (ctx->device, self->buffer, &req);
  if (!find_memory_type (ctx, req.memoryTypeBits, wanted, &type_index) &&
      !(fallback && find_memory_type (ctx, req.memoryTypeBits, 0, &type_index)))
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_FAILED,
                   "Vulkan: no %s for a %" G_GSIZE_FORMAT "-byte buffer",
                   fallback ? "memory type" : "host-visible coherent memory", size);
      return NULL;
    }

  {
    VkMemoryAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = type_index,
    };

    if (!check_vk (vkAllocateMemory (ctx->device, &alloc, NULL, &self->memory),
                   "allocating buffer memory", error))
      return NULL;
  }
  if (!check_vk (vkBindBufferMemory (ctx->device, self->buffer, self->memory, 0),
                 "binding buffer memory", error))
    return NULL;
  return g_steal_pointer (&self);
}

/* Maps a host-visible buffer for good and zero-fills it. */
static gboolean
buffer_map_zeroed (DcVkContext  *ctx,
                   DcVkBuffer   *self,
                   gsize         size,
                   GError      **error)
{
  if (!check_vk (vkMapMemory (ctx->device, self->memory, 0, VK_WHOLE_SIZE, 0, &self->data),
                 "mapping buffer memory", error))
    return FALSE;
  memset (self->data, 0, size);
  return TRUE;
}

/**
 * dc_vk_buffer_new:
 * @size: bytes, more than zero
 *
 * Creates a storage buffer in host-visible, host-coherent memory, mapped for
 * its whole life. Simple and exact; device-local buffers with staging
 * (dc_vk_buffer_new_device_local()) are for speed.
 *
 * Returns: (transfer full) (nullable): the buffer, zero-filled.
 */
DcVkBuffer *
dc_vk_buffer_new (DcVkContext  *ctx,
                  gsize         size,
                  GError      **error)
{
  g_autoptr(DcVkBuffer) self = buffer_create (ctx, size,
                                              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                              FALSE, error);

  if (self == NULL || !buffer_map_zeroed (ctx, self, size, error))
    return NULL;
  return g_steal_pointer (&self);
}

/**
 * dc_vk_buffer_new_cached:
 * @size: bytes, more than zero
 *
 * dc_vk_buffer_new() in host-cached memory where the device has such a
 * host-visible, coherent type (else as dc_vk_buffer_new()): for buffers the
 * host reads. Uncached host-visible memory reads at a fraction of the
 * speed of cached memory (every load goes over the bus), which made
 * reading back a GPT-2-small model's state take hundreds of milliseconds.
 *
 * Returns: (transfer full) (nullable): the buffer, zero-filled.
 */
DcVkBuffer *
dc_vk_buffer_new_cached (DcVkContext  *ctx,
                         gsize         size,
                         GError      **error)
{
  g_autoptr(DcVkBuffer) self = buffer_create (ctx, size,
                                              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                              VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                              FALSE, NULL);

  if (self == NULL)
    return dc_vk_buffer_new (ctx, size, error);
  if (!buffer_map_zeroed (ctx, self, size, error))
    return NULL;
  return g_steal_pointer (&self);
}

/**
 * dc_vk_buffer_new_view:
 * @parent: the buffer whose range this is (not itself a view); it must
 *   outlive the view
 * @offset: bytes into @parent, a multiple of the device's
 *   minStorageBufferOffsetAlignment (256 always is)
 * @size: bytes, more than zero, within @parent
 *
 * A range of @parent that binds, copies and maps as a buffer of its own
 * (offset 0 of the view is @offset of @parent): two objects can then share
 * one allocation, as the resident step's Adam kernel shares the training
 * pass's weights and gradients.
 *
 * Returns: (transfer full) (nullable): the view, or %NULL with @error set
 *   (a misaligned offset)
 */
DcVkBuffer *
dc_vk_buffer_new_view (DcVkBuffer  *parent,
                       gsize        offset,
                       gsize        size,
                       GError     **error)
{
  DcVkBuffer *self;
  VkDeviceSize align;

  g_return_val_if_fail (parent != NULL && !parent->view, NULL);
  g_return_val_if_fail (size > 0 && offset <= parent->size && size <= parent->size - offset,
                        NULL);

  align = MAX (parent->ctx->properties.limits.minStorageBufferOffsetAlignment, 1);
  if (offset % align != 0)
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_FAILED,
                   "Vulkan: a buffer range at byte %" G_GSIZE_FORMAT " is not aligned to %s's "
                   "minStorageBufferOffsetAlignment (%" G_GUINT64_FORMAT ")", offset,
                   parent->ctx->properties.deviceName, (guint64) align);
      return NULL;
    }
  self = g_new0 (DcVkBuffer, 1);
  self->ctx = parent->ctx;
  self->buffer = parent->buffer;
  self->memory = parent->memory;
  self->size = size;
  self->offset = offset;
  self->view = TRUE;
  self->data = parent->data != NULL ? (guint8 *) parent->data + offset : NULL;
  return self;
}

/**
 * dc_vk_buffer_new_device_local:
 * @size: bytes, more than zero
 *
 * A storage buffer in device-local memory, not mapped: fill and read it with
 * dc_vk_buffer_copy() from and to a host-visible buffer (staging). Falls back
 * to any memory type the buffer accepts when none is device-local (lavapipe
 * has one heap).
 *
 * Returns: (transfer full) (nullable): the buffer; its contents are undefined.
 */
DcVkBuffer *
dc_vk_buffer_new_device_local (DcVkContext  *ctx,
                               gsize         size,
                               GError      **error)
{
  return buffer_create (ctx, size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, TRUE, error);
}

/**
 * dc_vk_buffer_copy:
 *
 * Copies the first @size bytes of @src into @dst and waits. Barriers before
 * and after make earlier shader writes visible to the copy, and the copy
 * visible to later shaders and host reads.
 */
gboolean
dc_vk_buffer_copy (DcVkContext  *ctx,
                   DcVkBuffer   *src,
                   DcVkBuffer   *dst,
                   gsize         size,
                   GError      **error)
{
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  gboolean ok = FALSE;
  VkCommandBufferAllocateInfo alloc = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandPool = ctx->command_pool,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
    .commandBufferCount = 1,
  };
  VkCommandBufferBeginInfo begin = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
  };
  VkMemoryBarrier before = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
  };
  VkMemoryBarrier after = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_HOST_READ_BIT,
  };
  VkBufferCopy region = { .srcOffset = src->offset, .dstOffset = dst->offset, .size = size };
  VkFenceCreateInfo fence_info = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  VkSubmitInfo submit = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1,
  };

  g_return_val_if_fail (size <= src->size && size <= dst->size, FALSE);

  if (!check_vk (vkAllocateCommandBuffers (ctx->device, &alloc, &cmd),
                 "allocating a command buffer", error))
    goto out;
  if (!check_vk (vkBeginCommandBuffer (cmd, &begin), "beginning a command buffer", error))
    goto out;
  vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                        VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
  vkCmdCopyBuffer (cmd, src->buffer, dst->buffer, 1, &region);
  vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                        0, 1, &after, 0, NULL, 0, NULL);
  if (!check_vk (vkEndCommandBuffer (cmd), "ending a command buffer", error))
    goto out;
  if (!check_vk (vkCreateFence (ctx->device, &fence_info, NULL, &fence), "creating a fence", error))
    goto out;
  submit.pCommandBuffers = &cmd;
  if (!check_vk (vkQueueSubmit (ctx->queue, 1, &submit, fence), "submitting a copy", error))
    goto out;
  if (!check_vk (vkWaitForFences (ctx->device, 1, &fence, VK_TRUE, 60ull * G_USEC_PER_SEC * 1000),
                 "waiting for a copy", error))
    goto out;
  ok = TRUE;

out:
  if (fence != VK_NULL_HANDLE)
    vkDestroyFence (ctx->device, fence, NULL);
  if (cmd != VK_NULL_HANDLE)
    vkFreeCommandBuffers (ctx->device, ctx->command_pool, 1, &cmd);
  return ok;
}

gpointer
dc_vk_buffer_get_data (DcVkBuffer *self)
{
  return self->data;
}

gsize
dc_vk_buffer_get_size (DcVkBuffer *self)
{
  return self->size;
}

void
dc_vk_buffer_free (DcVkBuffer *self)
{
  if (self == NULL)
    return;

  if (self->view)
    {
      g_free (self);
      return;
    }
  if (self->data != NULL)
    vkUnmapMemory (self->ctx->device, self->memory);
  if (self->buffer != VK_NULL_HANDLE)
    vkDestroyBuffer (self->ctx->device, self->buffer, NULL);
  if (self->memory != VK_NULL_HANDLE)
    vkFreeMemory (self->ctx->device, self->memory, NULL);
  g_free (self);
}

/**
 * dc_vk_pipeline_new:
 * @shader_name: the kernel's base name in shaders/ ("smoke" for smoke.comp)
 * @n_buffers: storage buffers bound at set 0, bindings 0 … n-1
 * @push_size: bytes of push constants (at most the device's limit)
 *
 * Returns: (transfer full) (nullable): the pipeline.
 */
DcVkPipeline *
dc_vk_pipeline_new (DcVkContext  *ctx,
                    const char   *shader_name,
                    guint         n_buffers,
                    guint         push_size,
                    GError      **error)
{
  return dc_vk_pipeline_new_specialized (ctx, shader_name, n_buffers, push_size, NULL, 0, error);
}

/**
 * dc_vk_pipeline_new_specialized:
 * @constants: (array length=n_constants) (nullable): 32-bit values of the
 *   shader's specialization constants 0 … n_constants − 1
 *
 * dc_vk_pipeline_new() for a kernel whose shape is set by specialization
 * constants (gemm-int8-coopsc.comp): one SPIR-V module, one pipeline per set
 * of values, each compiled by the driver with the values as constants.
 *
 * Returns: (transfer full) (nullable): the pipeline.
 */
DcVkPipeline *
dc_vk_pipeline_new_specialized (DcVkContext    *ctx,
                                const char     *shader_name,
                                guint           n_buffers,
                                guint           push_size,
                                const guint32  *constants,
                                guint           n_constants,
                                GError        **error)
{
  g_autoptr(DcVkPipeline) self = g_new0 (DcVkPipeline, 1);
  g_autoptr(GBytes) code = NULL;
  g_autofree char *path = NULL;
  g_autofree VkDescriptorSetLayoutBinding *bindings = NULL;
  g_autoptr(GError) local_error = NULL;
  gsize code_size;
  const void *code_data;
  gboolean khr;

  g_return_val_if_fail (n_buffers > 0, NULL);

  self->ctx = ctx;
  self->n_buffers = n_buffers;
  self->push_size = push_size;
  self->name = g_intern_string (shader_name);

  if (push_size > ctx->properties.limits.maxPushConstantsSize)
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_SHADER,
                   "Kernel %s needs %u bytes of push constants; the device allows %u",
                   shader_name, push_size, ctx->properties.limits.maxPushConstantsSize);
      return NULL;
    }

  ensure_shader_resources ();
  /* "NAME+khr": NAME's NV cooperative-matrix SPIR-V rewritten for
   * VK_KHR_cooperative_matrix (dc-spirv-coop.c). */
  khr = g_str_has_suffix (shader_name, "+khr");
  path = g_strdup_printf (RESOURCE_BASE "/shaders/%.*s.spv",
                          (int) strlen (shader_name) - (khr ? 4 : 0), shader_name);
  code = g_resources_lookup_data (path, G_RESOURCE_LOOKUP_FLAGS_NONE, &local_error);
  if (code == NULL)
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_SHADER,
                   "Kernel %s is not in this build: %s", shader_name, local_error->message);
      return NULL;
    }
  if (khr)
    {
      GBytes *rewritten = dc_spirv_coop_nv_to_khr (code, &local_error);

      if (rewritten == NULL)
        {
          g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_SHADER, "Kernel %s: %s", shader_name,
                       local_error->message);
          return NULL;
        }
      g_bytes_unref (code);
      code = rewritten;
    }
  code_data = g_bytes_get_data (code, &code_size);
  if (code_size == 0 || code_size % 4 != 0)
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_SHADER,
                   "Kernel %s is not valid SPIR-V (%" G_GSIZE_FORMAT " bytes)",
                   shader_name, code_size);
      return NULL;
    }

  {
    VkShaderModuleCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = code_size,
      .pCode = code_data,  /* GResource data is at least 8-byte aligned */
    };

    if (!check_vk (vkCreateShaderModule (ctx->device, &info, NULL, &self->module),
                   "creating a shader module", error))
      return NULL;
  }

  bindings = g_new0 (VkDescriptorSetLayoutBinding, n_buffers);
  for (guint i = 0; i < n_buffers; i++)
    {
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }

  {
    VkDescriptorSetLayoutCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = n_buffers,
      .pBindings = bindings,
    };

    if (!check_vk (vkCreateDescriptorSetLayout (ctx->device, &info, NULL, &self->set_layout),
                   "creating a descriptor set layout", error))
      return NULL;
  }

  {
    VkPushConstantRange range = {
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
      .offset = 0,
      .size = push_size,
    };
    VkPipelineLayoutCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &self->set_layout,
      .pushConstantRangeCount = push_size > 0 ? 1 : 0,
      .pPushConstantRanges = push_size > 0 ? &range : NULL,
    };

    if (!check_vk (vkCreatePipelineLayout (ctx->device, &info, NULL, &self->layout),
                   "creating a pipeline layout", error))
      return NULL;
  }

  {
    g_autofree VkSpecializationMapEntry *entries = g_new0 (VkSpecializationMapEntry,
                                                           MAX (n_constants, 1));
    VkSpecializationInfo specialization = {
      .mapEntryCount = n_constants,
      .pMapEntries = entries,
      .dataSize = n_constants * sizeof (guint32),
      .pData = constants,
    };
    VkComputePipelineCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .stage = VK_SHADER_STAGE_COMPUTE_BIT,
        .module = self->module,
        .pName = "main",
        .pSpecializationInfo = n_constants > 0 ? &specialization : NULL,
      },
      .layout = self->layout,
    };

    for (guint i = 0; i < n_constants; i++)
      {
        entries[i].constantID = i;
        entries[i].offset = i * sizeof (guint32);
        entries[i].size = sizeof (guint32);
      }

    if (!check_vk (vkCreateComputePipelines (ctx->device, VK_NULL_HANDLE, 1, &info, NULL,
                                             &self->pipeline),
                   "creating a compute pipeline", error))
      return NULL;
  }

  {
    VkDescriptorPoolSize pool_size = {
      .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .descriptorCount = n_buffers,
    };
    VkDescriptorPoolCreateInfo pool_info = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
      .maxSets = 1,
      .poolSizeCount = 1,
      .pPoolSizes = &pool_size,
    };
    VkDescriptorSetAllocateInfo set_info = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorSetCount = 1,
    };

    if (!check_vk (vkCreateDescriptorPool (ctx->device, &pool_info, NULL, &self->pool),
                   "creating a descriptor pool", error))
      return NULL;
    set_info.descriptorPool = self->pool;
    set_info.pSetLayouts = &self->set_layout;
    if (!check_vk (vkAllocateDescriptorSets (ctx->device, &set_info, &self->set),
                   "allocating a descriptor set", error))
      return NULL;
  }

  return g_steal_pointer (&self);
}

void
dc_vk_pipeline_free (DcVkPipeline *self)
{
  VkDevice device;

  if (self == NULL)
    return;

  device = self->ctx->device;
  if (self->pool != VK_NULL_HANDLE)
    vkDestroyDescriptorPool (device, self->pool, NULL);
  if (self->pipeline != VK_NULL_HANDLE)
    vkDestroyPipeline (device, self->pipeline, NULL);
  if (self->layout != VK_NULL_HANDLE)
    vkDestroyPipelineLayout (device, self->layout, NULL);
  if (self->set_layout != VK_NULL_HANDLE)
    vkDestroyDescriptorSetLayout (device, self->set_layout, NULL);
  if (self->module != VK_NULL_HANDLE)
    vkDestroyShaderModule (device, self->module, NULL);
  g_free (self);
}

/* A dispatch's group counts within the device's limits. */
static gboolean
check_groups (DcVkContext  *ctx,
              guint         groups_x,
              guint         groups_y,
              guint         groups_z,
              GError      **error)
{
  const VkPhysicalDeviceLimits *limits = &ctx->properties.limits;

  if (groups_x > limits->maxComputeWorkGroupCount[0] ||
      groups_y > limits->maxComputeWorkGroupCount[1] ||
      groups_z > limits->maxComputeWorkGroupCount[2])
    {
      g_set_error (error, DC_VK_ERROR, DC_VK_ERROR_FAILED,
                   "Vulkan: dispatch of %u×%u×%u groups exceeds the device's limits",
                   groups_x, groups_y, groups_z);
      return FALSE;
    }
  return TRUE;
}

/* Points the pipeline's one descriptor set at @buffers, in binding order. */
static void
write_descriptors (DcVkContext        *ctx,
                   DcVkPipeline       *pipeline,
                   DcVkBuffer * const *buffers)
{
  g_autofree VkDescriptorBufferInfo *infos = g_new0 (VkDescriptorBufferInfo, pipeline->n_buffers);
  g_autofree VkWriteDescriptorSet *writes = g_new0 (VkWriteDescriptorSet, pipeline->n_buffers);

  for (guint i = 0; i < pipeline->n_buffers; i++)
    {
      infos[i].buffer = buffers[i]->buffer;
      infos[i].offset = buffers[i]->offset;
      infos[i].range = buffers[i]->view ? buffers[i]->size : VK_WHOLE_SIZE;
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = pipeline->set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
  vkUpdateDescriptorSets (ctx->device, pipeline->n_buffers, writes, 0, NULL);
}

/* Records optional copies in, one dispatch, optional copies out, in one
 * command buffer with one submission and one fence wait. */
static gboolean
submit_dispatch (DcVkContext        *ctx,
                 DcVkPipeline       *pipeline,
                 DcVkBuffer * const *buffers,
                 const void         *push,
                 guint               groups_x,
                 guint               groups_y,
                 guint               groups_z,
                 const DcVkCopy     *uploads,
                 guint               n_uploads,
                 const DcVkCopy     *downloads,
                 guint               n_downloads,
                 GError            **error)
{
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  gboolean ok = FALSE;

  if (!check_groups (ctx, groups_x, groups_y, groups_z, error))
    return FALSE;

  write_descriptors (ctx, pipeline, buffers);

  {
    VkCommandBufferAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = ctx->command_pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 1,
    };
    VkCommandBufferBeginInfo begin = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VkMemoryBarrier barrier = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    VkFenceCreateInfo fence_info = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    VkSubmitInfo submit = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
    };

    /* The context's command buffer and fence, reused: nothing is in flight
     * between calls (each waits for its submission). */
    if (ctx->dispatch_cmd == VK_NULL_HANDLE &&
        !check_vk (vkAllocateCommandBuffers (ctx->device, &alloc, &ctx->dispatch_cmd),
                   "allocating a command buffer", error))
      goto out;
    cmd = ctx->dispatch_cmd;
    if (!check_vk (vkResetCommandBuffer (cmd, 0), "resetting a command buffer", error) ||
        !check_vk (vkBeginCommandBuffer (cmd, &begin), "beginning a command buffer", error))
      goto out;
    if (n_uploads > 0)
      {
        /* Host writes (made visible by the submission) and earlier shader
         * writes → the copies in → the shader's reads. */
        VkMemoryBarrier before = {
          .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
          .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        };
        VkMemoryBarrier after = {
          .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        };

        vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                              VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
        for (guint i = 0; i < n_uploads; i++)
          {
            VkBufferCopy region = {
              .srcOffset = uploads[i].src->offset + uploads[i].src_offset,
              .dstOffset = uploads[i].dst->offset + uploads[i].dst_offset,
              .size = uploads[i].size,
            };

            vkCmdCopyBuffer (cmd, uploads[i].src->buffer, uploads[i].dst->buffer, 1, &region);
          }
        vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0, NULL, 0, NULL);
      }
    vkCmdBindPipeline (cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline);
    vkCmdBindDescriptorSets (cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout, 0, 1,
                             &pipeline->set, 0, NULL);
    if (pipeline->push_size > 0 && push != NULL)
      vkCmdPushConstants (cmd, pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                          pipeline->push_size, push);
    vkCmdDispatch (cmd, groups_x, groups_y, groups_z);
    if (n_downloads > 0)
      {
        /* The shader's writes → the copies out. */
        VkMemoryBarrier to_transfer = {
          .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
          .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
        };

        vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_transfer, 0, NULL, 0, NULL);
        for (guint i = 0; i < n_downloads; i++)
          {
            VkBufferCopy region = {
              .srcOffset = downloads[i].src->offset + downloads[i].src_offset,
              .dstOffset = downloads[i].dst->offset + downloads[i].dst_offset,
              .size = downloads[i].size,
            };

            vkCmdCopyBuffer (cmd, downloads[i].src->buffer, downloads[i].dst->buffer, 1, &region);
          }
        barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                              0, 1, &barrier, 0, NULL, 0, NULL);
      }
    else
      {
        /* Make the shader's writes visible to the host's reads of mapped memory. */
        vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
      }
    if (!check_vk (vkEndCommandBuffer (cmd), "ending a command buffer", error))
      goto out;

    if (ctx->dispatch_fence == VK_NULL_HANDLE &&
        !check_vk (vkCreateFence (ctx->device, &fence_info, NULL, &ctx->dispatch_fence),
                   "creating a fence", error))
      goto out;
    fence = ctx->dispatch_fence;
    if (!check_vk (vkResetFences (ctx->device, 1, &fence), "resetting a fence", error))
      goto out;
    submit.pCommandBuffers = &cmd;
    if (!check_vk (vkQueueSubmit (ctx->queue, 1, &submit, fence), "submitting work", error))
      goto out;
    /* A minute is far beyond any kernel here; a hang becomes an error, not a freeze. */
    if (!check_vk (vkWaitForFences (ctx->device, 1, &fence, VK_TRUE, 60ull * G_USEC_PER_SEC * 1000),
                   "waiting for the device", error))
      goto out;
  }

  ok = TRUE;

out:
  /* After a failure start afresh next time, as before the reuse. */
  if (!ok)
    {
      if (ctx->dispatch_fence != VK_NULL_HANDLE)
        vkDestroyFence (ctx->device, ctx->dispatch_fence, NULL);
      if (ctx->dispatch_cmd != VK_NULL_HANDLE)
        vkFreeCommandBuffers (ctx->device, ctx->command_pool, 1, &ctx->dispatch_cmd);
      ctx->dispatch_fence = VK_NULL_HANDLE;
      ctx->dispatch_cmd = VK_NULL_HANDLE;
    }
  return ok;
}

/**
 * dc_vk_dispatch:
 * @buffers: (array): exactly the pipeline's number of buffers, in binding order
 * @push: (nullable): the pipeline's push constants
 *
 * Records one dispatch, submits it and waits for it to finish. The descriptor
 * set is rewritten each time, which is safe because nothing is in flight.
 */
gboolean
dc_vk_dispatch (DcVkContext        *ctx,
                DcVkPipeline       *pipeline,
                DcVkBuffer * const *buffers,
                const void         *push,
                guint               groups_x,
                guint               groups_y,
                guint               groups_z,
                GError            **error)
{
  return submit_dispatch (ctx, pipeline, buffers, push, groups_x, groups_y, groups_z,
                          NULL, 0, NULL, 0, error);
}

/**
 * dc_vk_dispatch_with_copies:
 * @uploads: (array length=n_uploads): copies recorded before the dispatch
 * @downloads: (array length=n_downloads): copies recorded after it
 *
 * As dc_vk_dispatch(), with staging copies in and out in the same command
 * buffer: one submission and one wait per product instead of one per step.
 * Barriers order host writes → copies in → shader → copies out → host reads.
 */
gboolean
dc_vk_dispatch_with_copies (DcVkContext        *ctx,
                            DcVkPipeline       *pipeline,
                            DcVkBuffer * const *buffers,
                            const void         *push,
                            guint               groups_x,
                            guint               groups_y,
                            guint               groups_z,
                            const DcVkCopy     *uploads,
                            guint               n_uploads,
                            const DcVkCopy     *downloads,
                            guint               n_downloads,
                            GError            **error)
{
  for (guint i = 0; i < n_uploads + n_downloads; i++)
    {
      const DcVkCopy *copy = i < n_uploads ? &uploads[i] : &downloads[i - n_uploads];

      g_return_val_if_fail (copy->size > 0 &&
                            copy->src_offset <= copy->src->size &&
                            copy->size <= copy->src->size - copy->src_offset &&
                            copy->dst_offset <= copy->dst->size &&
                            copy->size <= copy->dst->size - copy->dst_offset, FALSE);
    }
  return submit_dispatch (ctx, pipeline, buffers, push, groups_x, groups_y, groups_z,
                          uploads, n_uploads, downloads, n_downloads, error);
}

/* A minute is far beyond any kernel here; a hang becomes an error, not a freeze. */
#define FENCE_TIMEOUT_NS (60ull * G_USEC_PER_SEC * 1000)

/* Submits @cmd and waits for @fence, by vkWaitForFences or by polling
 * vkGetFenceStatus (a busy loop, for the benchmark's comparison only). */
static gboolean
submit_and_wait (DcVkContext      *ctx,
                 VkCommandBuffer   cmd,
                 VkFence           fence,
                 gboolean          poll,
                 GError          **error)
{
  VkSubmitInfo submit = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1,
    .pCommandBuffers = &cmd,
  };
  gint64 deadline;
  VkResult status;

  if (!check_vk (vkResetFences (ctx->device, 1, &fence), "resetting a fence", error) ||
      !check_vk (vkQueueSubmit (ctx->queue, 1, &submit, fence), "submitting work", error))
    return FALSE;
  if (!poll)
    return check_vk (vkWaitForFences (ctx->device, 1, &fence, VK_TRUE, FENCE_TIMEOUT_NS),
                     "waiting for the device", error);
  deadline = g_get_monotonic_time () + FENCE_TIMEOUT_NS / 1000;
  while ((status = vkGetFenceStatus (ctx->device, fence)) == VK_NOT_READY)
    if (g_get_monotonic_time () > deadline)
      return check_vk (VK_TIMEOUT, "waiting for the device", error);
  return check_vk (status, "waiting for the device", error);
}

/**
 * dc_vk_time_dispatches:
 * @buffers: (array): exactly the pipeline's number of buffers, in binding order
 * @n: dispatches to queue, at least one
 * @timing: (out): the figures, per dispatch
 *
 * Benchmarks one dispatch three ways (DcVkDispatchTiming): @n of them
 * recorded into one command buffer with a barrier between each (in order, as
 * launches on one CUDA stream are), submitted once and waited for once, with
 * GPU timestamps around them where the queue has timestamps; then one
 * dispatch per submission, @n times (at most 1000), waited for by
 * vkWaitForFences and again by polling the fence.
 */
gboolean
dc_vk_time_dispatches (DcVkContext        *ctx,
                       DcVkPipeline       *pipeline,
                       DcVkBuffer * const *buffers,
                       const void         *push,
                       guint               groups_x,
                       guint               groups_y,
                       guint               groups_z,
                       guint               n,
                       DcVkDispatchTiming *timing,
                       GError            **error)
{
  const VkPhysicalDeviceLimits *limits = &ctx->properties.limits;
  VkCommandBuffer cmds[2] = { VK_NULL_HANDLE, VK_NULL_HANDLE };
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool pool = VK_NULL_HANDLE;
  guint32 valid_bits = 0;
  gboolean ok = FALSE;
  /* Single submissions: 1000 average out the timer and scheduling noise
   * and take at most a few seconds at the shapes benchmarked. */
  const guint n_single = MIN (n, 1000);

  g_return_val_if_fail (n > 0, FALSE);

  timing->queued = timing->gpu = timing->fence_wait = timing->fence_poll = timing->fresh = -1;
  if (!check_groups (ctx, groups_x, groups_y, groups_z, error))
    return FALSE;
  write_descriptors (ctx, pipeline, buffers);

  {
    guint32 n_families = 0;
    g_autofree VkQueueFamilyProperties *families = NULL;

    vkGetPhysicalDeviceQueueFamilyProperties (ctx->physical, &n_families, NULL);
    families = g_new0 (VkQueueFamilyProperties, MAX (n_families, 1));
    vkGetPhysicalDeviceQueueFamilyProperties (ctx->physical, &n_families, families);
    if (ctx->queue_family < n_families)
      valid_bits = families[ctx->queue_family].timestampValidBits;
  }

  {
    VkCommandBufferAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
      .commandPool = ctx->command_pool,
      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
      .commandBufferCount = 2,
    };
    VkCommandBufferBeginInfo begin = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
    VkFenceCreateInfo fence_info = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    VkQueryPoolCreateInfo pool_info = {
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
      .queryType = VK_QUERY_TYPE_TIMESTAMP,
      .queryCount = 2,
    };
    VkMemoryBarrier between = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    gint64 start;

    if (!check_vk (vkAllocateCommandBuffers (ctx->device, &alloc, cmds),
                   "allocating a command buffer", error) ||
        !check_vk (vkCreateFence (ctx->device, &fence_info, NULL, &fence),
                   "creating a fence", error))
      goto out;
    if (valid_bits > 0 && limits->timestampPeriod > 0 &&
        !check_vk (vkCreateQueryPool (ctx->device, &pool_info, NULL, &pool),
                   "creating a timestamp pool", error))
      goto out;

    /* cmds[0]: the n dispatches; cmds[1]: one. */
    for (guint c = 0; c < 2; c++)
      {
        guint count = c == 0 ? n : 1;

        if (!check_vk (vkBeginCommandBuffer (cmds[c], &begin), "beginning a command buffer",
                       error))
          goto out;
        if (c == 0 && pool != VK_NULL_HANDLE)
          {
            vkCmdResetQueryPool (cmds[c], pool, 0, 2);
            vkCmdWriteTimestamp (cmds[c], VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0);
          }
        vkCmdBindPipeline (cmds[c], VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline);
        vkCmdBindDescriptorSets (cmds[c], VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout, 0, 1,
                                 &pipeline->set, 0, NULL);
        if (pipeline->push_size > 0 && push != NULL)
          vkCmdPushConstants (cmds[c], pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                              pipeline->push_size, push);
        for (guint i = 0; i < count; i++)
          {
            if (i > 0)
              vkCmdPipelineBarrier (cmds[c], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, NULL,
                                    0, NULL);
            vkCmdDispatch (cmds[c], groups_x, groups_y, groups_z);
          }
        if (c == 0 && pool != VK_NULL_HANDLE)
          vkCmdWriteTimestamp (cmds[c], VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1);
        if (!check_vk (vkEndCommandBuffer (cmds[c]), "ending a command buffer", error))
          goto out;
      }

    start = g_get_monotonic_time ();
    if (!submit_and_wait (ctx, cmds[0], fence, FALSE, error))
      goto out;
    timing->queued = (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC / n;
    if (pool != VK_NULL_HANDLE)
      {
        guint64 stamps[2];
        guint64 mask = valid_bits >= 64 ? G_MAXUINT64 : (G_GUINT64_CONSTANT (1) << valid_bits) - 1;

        if (!check_vk (vkGetQueryPoolResults (ctx->device, pool, 0, 2, sizeof stamps, stamps,
                                              sizeof stamps[0],
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                       "reading timestamps", error))
          goto out;
        timing->gpu = (double) ((stamps[1] - stamps[0]) & mask) * limits->timestampPeriod
                      / 1e9 / n;
      }
    for (guint poll = 0; poll < 2; poll++)
      {
        start = g_get_monotonic_time ();
        for (guint i = 0; i < n_single; i++)
          if (!submit_and_wait (ctx, cmds[1], fence, poll, error))
            goto out;
        *(poll ? &timing->fence_poll : &timing->fence_wait) =
          (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC / n_single;
      }
    /* What dc_vk_dispatch () did per call before it kept one command buffer
     * and fence per context, less the descriptor update. */
    start = g_get_monotonic_time ();
    for (guint i = 0; i < n_single; i++)
      {
        VkCommandBuffer cmd = VK_NULL_HANDLE;
        VkFence one = VK_NULL_HANDLE;
        VkCommandBufferBeginInfo once = {
          .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
          .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        };
        VkMemoryBarrier to_host = {
          .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
          .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
        };
        gboolean done;

        alloc.commandBufferCount = 1;
        done = check_vk (vkAllocateCommandBuffers (ctx->device, &alloc, &cmd),
                         "allocating a command buffer", error) &&
               check_vk (vkBeginCommandBuffer (cmd, &once), "beginning a command buffer", error);
        if (done)
          {
            vkCmdBindPipeline (cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline);
            vkCmdBindDescriptorSets (cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout, 0, 1,
                                     &pipeline->set, 0, NULL);
            if (pipeline->push_size > 0 && push != NULL)
              vkCmdPushConstants (cmd, pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                  pipeline->push_size, push);
            vkCmdDispatch (cmd, groups_x, groups_y, groups_z);
            vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                  VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
            done = check_vk (vkEndCommandBuffer (cmd), "ending a command buffer", error) &&
                   check_vk (vkCreateFence (ctx->device, &fence_info, NULL, &one),
                             "creating a fence", error) &&
                   submit_and_wait (ctx, cmd, one, FALSE, error);
          }
        if (one != VK_NULL_HANDLE)
          vkDestroyFence (ctx->device, one, NULL);
        if (cmd != VK_NULL_HANDLE)
          vkFreeCommandBuffers (ctx->device, ctx->command_pool, 1, &cmd);
        if (!done)
          goto out;
      }
    timing->fresh = (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC / n_single;
  }
  ok = TRUE;

out:
  /* Nothing is in flight: every submission was waited for (or failed). */
  if (pool != VK_NULL_HANDLE)
    vkDestroyQueryPool (ctx->device, pool, NULL);
  if (fence != VK_NULL_HANDLE)
    vkDestroyFence (ctx->device, fence, NULL);
  for (guint c = 0; c < 2; c++)
    if (cmds[c] != VK_NULL_HANDLE)
      vkFreeCommandBuffers (ctx->device, ctx->command_pool, 1, &cmds[c]);
  return ok;
}

/*
 * Recordings: a command buffer recorded once and submitted as often as
 * wanted (the resident training step). Between any two recorded commands
 * there is a full compute/transfer/host memory barrier, so each command sees
 * everything the previous ones wrote; that is simple and, for a handful of
 * commands per step, costs nothing that matters.
 */
struct _DcVkRecording
{
  DcVkContext     *ctx;    /* borrowed: a recording never outlives its context */
  VkCommandBuffer  cmd;
  VkFence          fence;
  guint            n_commands;
  gboolean         ended;
  gboolean         in_flight;  /* submitted and not yet seen done (its wait timed out) */
  /* DC_VK_PROFILE=1: a timestamp at the start and after each command; mark
   * i's time is stamps[i + 1] − stamps[i], summed over the submissions */
  VkQueryPool      pool;
  guint64          stamp_mask;
  double           stamp_ns;     /* timestampPeriod: nanoseconds per tick */
  const char      *next_label;   /* interned; NULL: the pipeline's shader */
  GPtrArray       *labels;       /* (element-type utf8) interned, one per mark */
  guint64         *mark_ns;      /* (labels->len) */
  guint64          profiled;     /* submissions read back */
};

/* Marks one profiled recording holds at most: the GPT-2-small step records
 * about 1,000 commands; past this the rest go unmarked (the last mark then
 * covers them). */
#define PROFILE_MAX_MARKS 8192

/* The queue's valid timestamp bits, 0 where it writes none. */
static guint32
queue_timestamp_bits (DcVkContext *ctx)
{
  guint32 n_families = 0;
  g_autofree VkQueueFamilyProperties *families = NULL;

  vkGetPhysicalDeviceQueueFamilyProperties (ctx->physical, &n_families, NULL);
  families = g_new0 (VkQueueFamilyProperties, MAX (n_families, 1));
  vkGetPhysicalDeviceQueueFamilyProperties (ctx->physical, &n_families, families);
  return ctx->queue_family < n_families ? families[ctx->queue_family].timestampValidBits : 0;
}

/* Whether DC_VK_PROFILE asks for per-command timestamps in recordings. */
static gboolean
profile_wanted (void)
{
  const char *env = g_getenv ("DC_VK_PROFILE");

  return env != NULL && env[0] != '\0' && !g_str_equal (env, "0");
}

/**
 * dc_vk_recording_new:
 *
 * Starts recording a reusable command buffer: add copies and dispatches, end
 * it, then submit it any number of times.
 *
 * Returns: (transfer full) (nullable): the recording, or %NULL with @error set
 */
DcVkRecording *
dc_vk_recording_new (DcVkContext  *ctx,
                     GError      **error)
{
  g_autoptr(DcVkRecording) self = g_new0 (DcVkRecording, 1);
  VkCommandBufferAllocateInfo alloc = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandPool = ctx->command_pool,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
    .commandBufferCount = 1,
  };
  VkCommandBufferBeginInfo begin = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
  };
  VkFenceCreateInfo fence_info = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };

  self->ctx = ctx;
  if (!check_vk (vkAllocateCommandBuffers (ctx->device, &alloc, &self->cmd),
                 "allocating a command buffer", error)
      || !check_vk (vkCreateFence (ctx->device, &fence_info, NULL, &self->fence),
                    "creating a fence", error)
      || !check_vk (vkBeginCommandBuffer (self->cmd, &begin), "beginning a command buffer",
                    error))
    return NULL;
  if (profile_wanted ())
    {
      guint32 bits = queue_timestamp_bits (ctx);
      VkQueryPoolCreateInfo pool_info = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = PROFILE_MAX_MARKS + 1,
      };

      if (bits == 0 || ctx->properties.limits.timestampPeriod <= 0)
        g_message ("DC_VK_PROFILE: %s writes no timestamps on its compute queue — not "
                   "profiled", ctx->properties.deviceName);
      else if (!check_vk (vkCreateQueryPool (ctx->device, &pool_info, NULL, &self->pool),
                          "creating a timestamp pool", error))
        return NULL;
      else
        {
          self->stamp_mask = bits >= 64 ? G_MAXUINT64 : (G_GUINT64_CONSTANT (1) << bits) - 1;
          self->stamp_ns = ctx->properties.limits.timestampPeriod;
          self->labels = g_ptr_array_new ();
          vkCmdResetQueryPool (self->cmd, self->pool, 0, PROFILE_MAX_MARKS + 1);
          vkCmdWriteTimestamp (self->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, self->pool, 0);
        }
    }
  return g_steal_pointer (&self);
}

/* After a command: its timestamp, under the label given for it. */
static void
recording_mark (DcVkRecording *self,
                const char    *label)
{
  if (self->pool == VK_NULL_HANDLE || self->labels->len >= PROFILE_MAX_MARKS)
    return;
  g_ptr_array_add (self->labels, (gpointer) (self->next_label != NULL ? self->next_label : label));
  self->next_label = NULL;
  vkCmdWriteTimestamp (self->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self->pool,
                       self->labels->len);
}

/**
 * dc_vk_recording_label:
 * @label: what the next command is, for DC_VK_PROFILE's table (by default a
 *   dispatch's shader name, or "copy")
 */
void
dc_vk_recording_label (DcVkRecording *self,
                       const char    *label)
{
  self->next_label = g_intern_string (label);
}

/**
 * dc_vk_recording_is_profiled:
 *
 * Returns: whether the recording writes a timestamp after each command
 *   (DC_VK_PROFILE=1 and a queue with timestamps)
 */
gboolean
dc_vk_recording_is_profiled (DcVkRecording *self)
{
  return self->pool != VK_NULL_HANDLE;
}

typedef struct
{
  const char *label;
  guint64     ns;
  guint       count;
} ProfileRow;

static int
profile_row_cmp (gconstpointer a,
                 gconstpointer b)
{
  const ProfileRow *x = a, *y = b;

  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : g_strcmp0 (x->label, y->label);
}

/* Sums the marks by label (up to the first space with @by_kernel), largest
 * first. */
static GArray *
profile_rows (DcVkRecording *self,
              gboolean       by_kernel)
{
  g_autoptr(GHashTable) index = g_hash_table_new (g_str_hash, g_str_equal);
  GArray *rows = g_array_new (FALSE, TRUE, sizeof (ProfileRow));

  for (guint i = 0; i < self->labels->len; i++)
    {
      const char *label = g_ptr_array_index (self->labels, i);
      const char *space = by_kernel ? strchr (label, ' ') : NULL;
      gpointer at;
      ProfileRow *row;

      if (space != NULL)
        {
          g_autofree char *kernel = g_strndup (label, space - label);

          label = g_intern_string (kernel);
        }
      if (!g_hash_table_lookup_extended (index, label, NULL, &at))
        {
          ProfileRow fresh = { label, 0, 0 };

          at = GUINT_TO_POINTER (rows->len);
          g_array_append_val (rows, fresh);
          g_hash_table_insert (index, (gpointer) label, at);
        }
      row = &g_array_index (rows, ProfileRow, GPOINTER_TO_UINT (at));
      row->ns += self->mark_ns[i];
      row->count++;
    }
  g_array_sort (rows, profile_row_cmp);
  return rows;
}

/**
 * dc_vk_recording_profile_table:
 * @top: rows of the table by label
 *
 * The profile so far: the @top labels by device time per submission, then
 * every kernel (a label up to its first space), with their share of the
 * marked time.
 *
 * Returns: (transfer full) (nullable): the table, %NULL when not profiled or
 *   never submitted
 */
char *
dc_vk_recording_profile_table (DcVkRecording *self,
                               guint          top)
{
  g_autoptr(GString) out = NULL;
  guint64 total = 0;

  if (self->pool == VK_NULL_HANDLE || self->profiled == 0)
    return NULL;
  for (guint i = 0; i < self->labels->len; i++)
    total += self->mark_ns[i];
  out = g_string_new (NULL);
  g_string_append_printf (out, "%u commands, %.1f µs a submission (%" G_GUINT64_FORMAT
                          " submissions)\n", self->labels->len,
                          (double) total / self->profiled / 1e3, self->profiled);
  for (guint pass = 0; pass < 2; pass++)
    {
      g_autoptr(GArray) rows = profile_rows (self, pass == 1);

      g_string_append (out, pass == 0 ? "  by command:\n" : "  by kernel:\n");
      for (guint i = 0; i < rows->len && (pass == 1 || i < top); i++)
        {
          const ProfileRow *row = &g_array_index (rows, ProfileRow, i);

          g_string_append_printf (out, "  %9.1f µs %5.1f %%  ×%-4u %s\n",
                                  (double) row->ns / self->profiled / 1e3,
                                  total > 0 ? 100.0 * (double) row->ns / (double) total : 0.0,
                                  row->count, row->label);
        }
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* Adds the last submission's timestamps to the marks' sums. */
static gboolean
recording_read_profile (DcVkRecording  *self,
                        GError        **error)
{
  guint n = self->labels->len;
  g_autofree guint64 *stamps = NULL;

  if (n == 0)
    return TRUE;
  stamps = g_new (guint64, n + 1);
  if (!check_vk (vkGetQueryPoolResults (self->ctx->device, self->pool, 0, n + 1,
                                        (n + 1) * sizeof (guint64), stamps, sizeof (guint64),
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                 "reading timestamps", error))
    return FALSE;
  for (guint i = 0; i < n; i++)
    self->mark_ns[i] += (guint64) ((double) ((stamps[i + 1] - stamps[i]) & self->stamp_mask)
                                   * self->stamp_ns);
  self->profiled++;
  return TRUE;
}

/* Everything recorded (or done by the host before the submission) before this
 * point is visible to everything after it. */
static void
recording_barrier (DcVkRecording *self)
{
  VkMemoryBarrier barrier = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_HOST_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_HOST_READ_BIT,
  };
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT;

  vkCmdPipelineBarrier (self->cmd, stages, stages, 0, 1, &barrier, 0, NULL, 0, NULL);
}

/**
 * dc_vk_recording_copy:
 * @copies: (array length=n_copies): buffer-to-buffer copies, recorded together
 */
void
dc_vk_recording_copy (DcVkRecording  *self,
                      const DcVkCopy *copies,
                      guint           n_copies)
{
  g_return_if_fail (!self->ended);

  recording_barrier (self);
  for (guint i = 0; i < n_copies; i++)
    {
      const DcVkCopy *copy = &copies[i];
      VkBufferCopy region = {
        .srcOffset = copy->src->offset + copy->src_offset,
        .dstOffset = copy->dst->offset + copy->dst_offset,
        .size = copy->size,
      };

      g_return_if_fail (copy->size > 0 &&
                        copy->src_offset <= copy->src->size &&
                        copy->size <= copy->src->size - copy->src_offset &&
                        copy->dst_offset <= copy->dst->size &&
                        copy->size <= copy->dst->size - copy->dst_offset);
      vkCmdCopyBuffer (self->cmd, copy->src->buffer, copy->dst->buffer, 1, &region);
    }
  self->n_commands++;
  recording_mark (self, "copy");
}

/**
 * dc_vk_recording_dispatch:
 * @buffers: (array) (nullable): exactly the pipeline's number of buffers, in
 *   binding order; %NULL to keep the buffers of the pipeline's previous
 *   dispatch (required for a second dispatch of the same pipeline in one
 *   recording: its set must not change once recorded)
 * @push: (nullable): the pipeline's push constants, recorded by value
 *
 * Records one dispatch. The pipeline's one descriptor set is written now, so
 * a pipeline belongs to one recording (and one set of buffers) at a time.
 */
gboolean
dc_vk_recording_dispatch (DcVkRecording      *self,
                          DcVkPipeline       *pipeline,
                          DcVkBuffer * const *buffers,
                          const void         *push,
                          guint               groups_x,
                          guint               groups_y,
                          guint               groups_z,
                          GError            **error)
{
  DcVkContext *ctx = self->ctx;

  g_return_val_if_fail (!self->ended, FALSE);

  if (!check_groups (ctx, groups_x, groups_y, groups_z, error))
    return FALSE;
  if (buffers != NULL)
    write_descriptors (ctx, pipeline, buffers);

  recording_barrier (self);
  vkCmdBindPipeline (self->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline);
  vkCmdBindDescriptorSets (self->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout, 0, 1,
                           &pipeline->set, 0, NULL);
  if (pipeline->push_size > 0 && push != NULL)
    vkCmdPushConstants (self->cmd, pipeline->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                        pipeline->push_size, push);
  vkCmdDispatch (self->cmd, groups_x, groups_y, groups_z);
  self->n_commands++;
  recording_mark (self, pipeline->name);
  return TRUE;
}

/**
 * dc_vk_recording_end:
 *
 * Finishes the recording (a last barrier makes every write visible to the
 * host); nothing can be added afterwards.
 */
gboolean
dc_vk_recording_end (DcVkRecording  *self,
                     GError        **error)
{
  g_return_val_if_fail (!self->ended, FALSE);

  recording_barrier (self);
  self->ended = TRUE;
  if (self->pool != VK_NULL_HANDLE)
    self->mark_ns = g_new0 (guint64, MAX (self->labels->len, 1));
  return check_vk (vkEndCommandBuffer (self->cmd), "ending a command buffer", error);
}

/**
 * dc_vk_recording_submit:
 *
 * Submits the ended recording once and waits for it (a minute at most: a
 * hang becomes an error, not a freeze). Host writes to mapped buffers made
 * before the call are seen by it; its writes are seen by the host after.
 */
gboolean
dc_vk_recording_submit (DcVkRecording  *self,
                        GError        **error)
{
  DcVkContext *ctx = self->ctx;
  VkSubmitInfo submit = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1,
    .pCommandBuffers = &self->cmd,
  };

  g_return_val_if_fail (self->ended, FALSE);

  if (!check_vk (vkResetFences (ctx->device, 1, &self->fence), "resetting a fence", error)
      || !check_vk (vkQueueSubmit (ctx->queue, 1, &submit, self->fence),
                    "submitting a recording", error))
    return FALSE;
  self->in_flight = TRUE;
  /* A failed wait leaves it in flight: dc_vk_recording_free () waits. */
  if (!check_vk (vkWaitForFences (ctx->device, 1, &self->fence, VK_TRUE,
                                  60ull * G_USEC_PER_SEC * 1000),
                 "waiting for the device", error))
    return FALSE;
  self->in_flight = FALSE;
  return self->pool == VK_NULL_HANDLE || recording_read_profile (self, error);
}

void
dc_vk_recording_free (DcVkRecording *self)
{
  if (self == NULL)
    return;

  /* A submission whose wait timed out may still run (lavapipe under load):
   * it reads the buffers the owner frees next, so it is waited for (a lost
   * device answers at once). A fence never submitted is never waited on. */
  if (self->in_flight)
    vkWaitForFences (self->ctx->device, 1, &self->fence, VK_TRUE, UINT64_MAX);
  if (self->pool != VK_NULL_HANDLE)
    vkDestroyQueryPool (self->ctx->device, self->pool, NULL);
  g_clear_pointer (&self->labels, g_ptr_array_unref);
  g_free (self->mark_ns);
  if (self->fence != VK_NULL_HANDLE)
    vkDestroyFence (self->ctx->device, self->fence, NULL);
  if (self->cmd != VK_NULL_HANDLE)
    vkFreeCommandBuffers (self->ctx->device, self->ctx->command_pool, 1, &self->cmd);
  g_free (self);
}
