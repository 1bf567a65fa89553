/* dc-kit-export.h: a trained model as one offline HTML file (the inference
 * kit) that generates exactly what dc_generate () generates.
 *
 * The page, its worker and the engine's JavaScript live in src/kit/ and are
 * embedded from a GResource; the weights travel as the kit blob
 * (dc-kit-blob.h), base64 in <script type="application/octet-stream"
 * id="dc-kit-data">.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-checkpoint.h"
#include "dc-gpt-model.h"

G_BEGIN_DECLS

/**
 * dc_kit_export:
 * @model: the trained model (only read; safe from a worker thread while no
 *   one writes the model)
 * @loss: the last training loss, or NAN when unknown (the page says so)
 * @path: the .html file to write, replaced atomically
 * @cancellable: (nullable): checked between stages
 *
 * Returns: TRUE when the whole file was written.
 */
gboolean dc_kit_export (const DcGptModel  *model,
                        double             loss,
                        const char        *path,
                        GCancellable      *cancellable,
                        GError           **error);

/**
 * dc_kit_export_full:
 * @progress: (nullable): told the chunks of the weights written (and, last,
 *   the rename, with @done = @total), on this thread; @cancellable is also
 *   checked after each chunk
 *
 * dc_kit_export () with progress.
 */
gboolean dc_kit_export_full (const DcGptModel      *model,
                             double                 loss,
                             const char            *path,
                             GCancellable          *cancellable,
                             DcCheckpointProgress   progress,
                             gpointer               user_data,
                             GError               **error);

G_END_DECLS
