/* dc-vk-context.h: a Vulkan compute device, its buffers and pipelines.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <vulkan/vulkan.h>

#include "dc-types.h"

G_BEGIN_DECLS

#define DC_VK_ERROR (dc_vk_error_quark ())

typedef enum
{
  DC_VK_ERROR_NO_LOADER,
  DC_VK_ERROR_NO_DEVICE,
  DC_VK_ERROR_FAILED,
  DC_VK_ERROR_SHADER,
} DcVkError;

/* The stable identifier of a device (--vulkan-device, the app's Preferences):
 * its PCI vendor and device ids in hex, "10de:2335", with "/N" appended for
 * the Nth (from 1) further device of the same pair in the loader's order.
 * Unlike the loader's index it survives another kind of device being added. */
typedef struct
{
  char                 *name;
  char                 *id;        /* "vvvv:dddd" or "vvvv:dddd/N" */
  char                 *uuid;      /* deviceUUID, 32 hex digits; also accepted as an id */
  char                 *driver;    /* driverName and driverInfo, or "" before Vulkan 1.2 */
  guint32               vendor_id;
  guint32               device_id;
  guint32               api_version;
  VkPhysicalDeviceType  type;
  gboolean              has_compute;
  /* VkPhysicalDeviceFloatControlsProperties for 32-bit floats (Vulkan 1.2;
   * all FALSE before): what the native-float kernels may declare */
  gboolean              float32_denorm_preserve;
  gboolean              float32_rounding_rte;
  gboolean              float32_signed_zero_inf_nan;
} DcVkDeviceInfo;

/* What kernel variants may rely on; queried once when the context opens.
 * Features marked enabled were also switched on in the logical device. */
typedef struct
{
  gboolean  shader_int8;              /* enabled when present */
  gboolean  storage_buffer_8bit;      /* enabled when present */
  gboolean  integer_dot_product;      /* shaderIntegerDotProduct, enabled when present */
  gboolean  dot_4x8_packed_signed_accelerated;
  gboolean  cooperative_matrix;       /* VK_KHR_cooperative_matrix is offered (not used: the
                                       * baseline glslang has no GLSL for it) */
  gboolean  coop_matrix_nv_int8;      /* VK_NV_cooperative_matrix with a subgroup-scope
                                       * 16 × 8 × 32 int8 → int32 shape; enabled when present */
  guint32   subgroup_size;
  guint32   max_shared_memory;        /* bytes per workgroup */
  guint32   max_invocations;
  guint32   max_storage_buffer_range; /* bytes per binding */
  /* VK_KHR_cooperative_matrix's subgroup int8 → int32 shapes, enabled when
   * any: bit 0 16 × 8 × 32, bit 1 16 × 16 × 32 (the kernels are rewritten
   * from NV SPIR-V, dc-spirv-coop.c); every shape listed, for the logs. */
  guint32   coop_matrix_khr_int8;
  char      coop_matrix_khr_shapes[512];
  /* VkPhysicalDeviceFloatControlsProperties for 32-bit floats: whether a
   * shader may ask for subnormals kept, round to nearest even, and signed
   * zeros, infinities and NaNs honoured (the native-float kernels need all) */
  gboolean  float32_denorm_preserve;
  gboolean  float32_rounding_rte;
  gboolean  float32_signed_zero_inf_nan;
} DcVkFeatures;

typedef struct _DcVkBuffer   DcVkBuffer;

/* One buffer-to-buffer copy of @size bytes. */
typedef struct
{
  DcVkBuffer *src;
  gsize       src_offset;
  DcVkBuffer *dst;
  gsize       dst_offset;
  gsize       size;
} DcVkCopy;
typedef struct _DcVkPipeline DcVkPipeline;
typedef struct _DcVkRecording DcVkRecording;

GQuark        dc_vk_error_quark               (void);

GPtrArray    *dc_vk_list_devices              (GError            **error);
void          dc_vk_device_info_free          (DcVkDeviceInfo     *info);
const char   *dc_vk_device_type_to_string     (VkPhysicalDeviceType type);
int           dc_vk_find_device               (GPtrArray          *devices,
                                               const char         *id,
                                               GError            **error);

DcVkContext  *dc_vk_context_new               (int                 device_index,
                                               GError            **error);
DcVkContext  *dc_vk_context_new_for_id        (const char         *device_id,
                                               GError            **error);
void          dc_vk_context_free              (DcVkContext        *self);
const char   *dc_vk_context_get_device_id     (DcVkContext        *self);
const char   *dc_vk_context_get_device_name   (DcVkContext        *self);
const VkPhysicalDeviceProperties *
              dc_vk_context_get_properties    (DcVkContext        *self);
VkDevice      dc_vk_context_get_device        (DcVkContext        *self);
const DcVkFeatures *
              dc_vk_context_get_features      (DcVkContext        *self);
char         *dc_vk_features_to_string        (const DcVkFeatures *features);

DcVkBuffer   *dc_vk_buffer_new                (DcVkContext        *ctx,
                                               gsize               size,
                                               GError            **error);
DcVkBuffer   *dc_vk_buffer_new_device_local   (DcVkContext        *ctx,
                                               gsize               size,
                                               GError            **error);
DcVkBuffer   *dc_vk_buffer_new_cached         (DcVkContext        *ctx,
                                               gsize               size,
                                               GError            **error);
DcVkBuffer   *dc_vk_buffer_new_view           (DcVkBuffer         *parent,
                                               gsize               offset,
                                               gsize               size,
                                               GError            **error);
gboolean      dc_vk_buffer_copy               (DcVkContext        *ctx,
                                               DcVkBuffer         *src,
                                               DcVkBuffer         *dst,
                                               gsize               size,
                                               GError            **error);
gpointer      dc_vk_buffer_get_data           (DcVkBuffer         *self);
gsize         dc_vk_buffer_get_size           (DcVkBuffer         *self);
void          dc_vk_buffer_free               (DcVkBuffer         *self);

GBytes       *dc_vk_shader_lookup             (const char         *name,
                                               GError            **error);

DcVkPipeline *dc_vk_pipeline_new              (DcVkContext        *ctx,
                                               const char         *shader_name,
                                               guint               n_buffers,
                                               guint               push_size,
                                               GError            **error);
DcVkPipeline *dc_vk_pipeline_new_specialized  (DcVkContext        *ctx,
                                               const char         *shader_name,
                                               guint               n_buffers,
                                               guint               push_size,
                                               const guint32      *constants,
                                               guint               n_constants,
                                               GError            **error);
void          dc_vk_pipeline_free             (DcVkPipeline       *self);

gboolean      dc_vk_dispatch                  (DcVkContext        *ctx,
                                               DcVkPipeline       *pipeline,
                                               DcVkBuffer * const *buffers,
                                               const void         *push,
                                               guint               groups_x,
                                               guint               groups_y,
                                               guint               groups_z,
                                               GError            **error);

gboolean      dc_vk_dispatch_with_copies      (DcVkContext        *ctx,
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
                                               GError            **error);

/* dc_vk_time_dispatches()'s figures, in seconds per dispatch; -1 where not
 * measured. */
typedef struct
{
  double queued;      /* n dispatches in one command buffer, one submission, one
                       * fence wait at the end: how torch times queued launches */
  double gpu;         /* the same, from timestamps written before the first and
                       * after the last dispatch (kernel time, barriers included) */
  double fence_wait;  /* one dispatch submitted and waited for with
                       * vkWaitForFences, as dc_vk_dispatch() does */
  double fence_poll;  /* the same, polling vkGetFenceStatus instead */
  double fresh;       /* one dispatch in a command buffer and fence made, recorded
                       * and freed for each submission, as dc_vk_dispatch() did
                       * until it kept one per context (2026-12-02) */
} DcVkDispatchTiming;

gboolean      dc_vk_time_dispatches           (DcVkContext        *ctx,
                                               DcVkPipeline       *pipeline,
                                               DcVkBuffer * const *buffers,
                                               const void         *push,
                                               guint               groups_x,
                                               guint               groups_y,
                                               guint               groups_z,
                                               guint               n,
                                               DcVkDispatchTiming *timing,
                                               GError            **error);

DcVkRecording *dc_vk_recording_new            (DcVkContext        *ctx,
                                               GError            **error);
void          dc_vk_recording_copy            (DcVkRecording      *self,
                                               const DcVkCopy     *copies,
                                               guint               n_copies);
gboolean      dc_vk_recording_dispatch        (DcVkRecording      *self,
                                               DcVkPipeline       *pipeline,
                                               DcVkBuffer * const *buffers,
                                               const void         *push,
                                               guint               groups_x,
                                               guint               groups_y,
                                               guint               groups_z,
                                               GError            **error);
gboolean      dc_vk_recording_end             (DcVkRecording      *self,
                                               GError            **error);
gboolean      dc_vk_recording_submit          (DcVkRecording      *self,
                                               GError            **error);
void          dc_vk_recording_free            (DcVkRecording      *self);
void          dc_vk_recording_label           (DcVkRecording      *self,
                                               const char         *label);
gboolean      dc_vk_recording_is_profiled     (DcVkRecording      *self);
char         *dc_vk_recording_profile_table   (DcVkRecording      *self,
                                               guint               top);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcVkContext, dc_vk_context_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcVkBuffer, dc_vk_buffer_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcVkPipeline, dc_vk_pipeline_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcVkRecording, dc_vk_recording_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcVkDeviceInfo, dc_vk_device_info_free)

G_END_DECLS
