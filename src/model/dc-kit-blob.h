/* dc-kit-blob.h: STAND-IN (kit-page) for kit-engine's blob writer, replaced
 * when the kit-engine branch is merged. Same interface as the contract.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-gpt-model.h"

G_BEGIN_DECLS

#define DC_KIT_BLOB_MAGIC "DCK1"

GBytes *dc_kit_blob_new (const DcGptModel  *model,
                         double             loss,
                         GError           **error);

G_END_DECLS
