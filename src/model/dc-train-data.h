/* dc-train-data.h: where the training text comes from (--data).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The largest local text file `train --data FILE` reads into memory. */
#define DC_TRAIN_DATA_MAX_FILE (G_GUINT64_CONSTANT (1) << 30)

GBytes *dc_train_data_load (const char  *spec,
                            GError     **error);

G_END_DECLS
