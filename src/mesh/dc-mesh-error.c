/* dc-mesh-error.c: the mesh layer's error domain.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-mesh-error.h"

G_DEFINE_QUARK (dc-mesh-error-quark, dc_mesh_error)
