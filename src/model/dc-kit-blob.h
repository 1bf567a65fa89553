/* dc-kit-blob.h: a trained model as the inference kit's binary blob.
 *
 * The blob is what the kit's JavaScript (src/kit/dc-kit-engine.js) loads:
 * the engine's INT8 form of every matrix the forward pass quantizes, plus f32
 * only where the forward pass needs exact float values. Layout
 * (docs/ARCHITECTURE.md, "Inference kit"), all integers little-endian:
 *
 *   0   "DCK1"                      magic
 *   4   u32 version (1)
 *   8   32 bytes SHA-256 of every byte from offset 40 to the end
 *   40  u32 H, the header's length (48 + H is a multiple of 8)
 *   44  u32 D, the tensor data's length: the blob is 48 + H + D bytes
 *   48  H bytes of JSON (UTF-8, padded with spaces): config, info, tensors
 *   48 + H  D bytes of tensors; each table entry's offset is from here
 *
 * H and D come before the digest is checked, so that a reader tells a
 * truncated blob ("bad-kit") from an altered one ("hash-mismatch").
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-gpt-model.h"

G_BEGIN_DECLS

#define DC_KIT_BLOB_MAGIC "DCK1"
#define DC_KIT_BLOB_VERSION 1
/* Where the header starts: magic, version, digest, header and data lengths. */
#define DC_KIT_BLOB_PREFIX 48
/* The largest header a reader accepts. The biggest model (12 layers) lists
 * 149 tensors of about 110 bytes each, about 17 KiB: 256 KiB leaves room for
 * new fields while keeping a hostile length from costing memory. */
#define DC_KIT_BLOB_HEADER_MAX (256 * 1024)
/* The header nests three levels ({"tensors": [{"shape": [...]}]}); a reader
 * refuses deeper nesting before parsing. */
#define DC_KIT_BLOB_HEADER_DEPTH 8
/* The largest tensor data a reader accepts: the largest model the config
 * allows (width 128, sequence 128, 12 layers) needs about 2.6 MiB; 16 MiB
 * leaves room without letting a hostile length cost memory. */
#define DC_KIT_BLOB_DATA_MAX (16u * 1024u * 1024u)

GBytes *dc_kit_blob_new (const DcGptModel  *model,
                         double             loss,
                         GError           **error);

G_END_DECLS
