/* dc-cli-python.h: running a script the program carries (the benchmarks'
 * PyTorch references, bench decode's model writer) under the machine's
 * python3.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

char *dc_cli_python_run (const char         *resource,
                         const char * const *args,
                         GError            **error);

G_END_DECLS
