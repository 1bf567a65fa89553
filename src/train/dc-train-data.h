/* dc-train-data.h: where the training text comes from (--data).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "data/dc-hf-client.h"

G_BEGIN_DECLS

/* The largest local text file `train --data FILE` reads into memory. */
#define DC_TRAIN_DATA_MAX_FILE (G_GUINT64_CONSTANT (1) << 30)

/* How much text a run gathers from a Hugging Face dataset before training:
 * this device's seeded share of the row groups, in order, up to this size. */
#define DC_TRAIN_DATA_DATASET_BYTES ((gsize) 8 << 20)

GBytes *dc_train_data_load (const char    *spec,
                            guint64        seed,
                            gboolean      *used_fallback,
                            GCancellable  *cancellable,
                            GError       **error);

GBytes *dc_train_data_load_with_hub (const char    *spec,
                                     guint64        seed,
                                     DcHfClient    *hub,
                                     gboolean      *used_fallback,
                                     GCancellable  *cancellable,
                                     GError       **error);

G_END_DECLS
