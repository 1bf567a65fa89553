/* dc-regular-file.h: open user-given paths only when they are regular files.
 *
 * A FIFO, a device or a socket given as a checkpoint or a data file would
 * block open () or read () forever (a FIFO without a writer) or never end.
 * These helpers stat the path first, then open it with O_NONBLOCK and check
 * fstat () on the descriptor, so that a path swapped between the two checks
 * is refused too, never opened blocking.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

GMappedFile *dc_regular_file_map          (const char  *path,
                                           GError     **error);
gboolean     dc_regular_file_get_contents (const char  *path,
                                           gsize        max_size,
                                           char       **contents,
                                           gsize       *length,
                                           GError     **error);

G_END_DECLS
