/* dc-version.h: what this build is, for --version, About and the mesh hello.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

const char *dc_version_get_string      (void);
const char *dc_version_get_app_id      (void);
char       *dc_version_dup_library_info (void);

G_END_DECLS
