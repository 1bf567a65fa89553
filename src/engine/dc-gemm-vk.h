/* dc-gemm-vk.h: the Vulkan path of the INT8 GEMM, with its init gates.
 * Internal to the engine; use dc-gemm-backend.h. Not thread-safe: one thread
 * owns a DcGemmVk and its Vulkan context.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-gemm.h"
#include "dc-vk-context.h"

G_BEGIN_DECLS

typedef struct _DcGemmVk DcGemmVk;

/* Opens a device and gates every kernel variant the device supports against
 * the CPU reference. Fails with DC_GEMM_ERROR_BACKEND when there is no
 * device, or when every variant was refused ("failed verification"). */
DcGemmVk   *dc_gemm_vk_new               (GError              **error);
DcGemmVk   *dc_gemm_vk_new_for_device    (const char           *device_id,
                                          GError              **error);
void        dc_gemm_vk_free              (DcGemmVk             *self);
const char *dc_gemm_vk_get_device_name   (DcGemmVk             *self);
const char *dc_gemm_vk_get_device_id     (DcGemmVk             *self);
const char *dc_gemm_vk_get_kernel_name   (DcGemmVk             *self);
/* A one-line summary of the device features the variants may use. */
const char *dc_gemm_vk_get_features      (DcGemmVk             *self);

/* Exactly one of acc and c is non-NULL. */
gboolean    dc_gemm_vk_run               (DcGemmVk             *self,
                                          const DcQuantMatrix  *a,
                                          const DcQuantMatrix  *b,
                                          gint32               *acc,
                                          float                *c,
                                          GError              **error);

/* Benchmark: uploads once, then times @repeat dispatches (each waited for). */
gboolean    dc_gemm_vk_time              (DcGemmVk             *self,
                                          const DcQuantMatrix  *a,
                                          const DcQuantMatrix  *b,
                                          guint                 repeat,
                                          double               *seconds,
                                          GError              **error);

/* Benchmark: uploads once, then times @repeat dispatches queued in one
 * submission, by GPU timestamps, and single ones by fence wait and poll. */
gboolean    dc_gemm_vk_time_queued       (DcGemmVk             *self,
                                          const DcQuantMatrix  *a,
                                          const DcQuantMatrix  *b,
                                          guint                 repeat,
                                          DcVkDispatchTiming   *timing,
                                          GError              **error);

/* Whether @features allow the variant @name, before its gate (the test of
 * that decision uses features of devices it does not have). */
gboolean    dc_gemm_vk_variant_offered   (const DcVkFeatures   *features,
                                          const char           *name,
                                          char                **why);

/* Every variant's name, most preferred first (NULL-terminated, static): the
 * tests run each one, the tile sweep (`bench gemm --kernels`) lists them. */
const char * const *dc_gemm_vk_variant_names (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcGemmVk, dc_gemm_vk_free)

G_END_DECLS
