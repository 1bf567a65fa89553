/* dc-spirv-coop.h: SPIR-V written for VK_NV_cooperative_matrix, rewritten for
 * VK_KHR_cooperative_matrix (Debian 12's glslang has GLSL for the first only).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Returns: (transfer full) (nullable): the rewritten module, or %NULL with
 * @error set (G_IO_ERROR_INVALID_DATA) when the module is malformed or uses
 * what the rewrite does not handle. */
GBytes *dc_spirv_coop_nv_to_khr (GBytes  *module,
                                 GError **error);

G_END_DECLS
