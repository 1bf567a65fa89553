/* dc-types.h: forward declarations and enums shared by every layer.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib-object.h>

G_BEGIN_DECLS

typedef struct _DcContext   DcContext;
typedef struct _DcVkContext DcVkContext;

/**
 * DcBackendKind:
 * @DC_BACKEND_CPU_SCALAR: the readable scalar reference path
 * @DC_BACKEND_CPU: the fastest CPU path (SIMD, threaded)
 * @DC_BACKEND_VULKAN: a Vulkan compute device
 *
 * Where matrix products run. Every backend computes the same bits.
 */
typedef enum
{
  DC_BACKEND_CPU_SCALAR,
  DC_BACKEND_CPU,
  DC_BACKEND_VULKAN,
} DcBackendKind;

G_END_DECLS
