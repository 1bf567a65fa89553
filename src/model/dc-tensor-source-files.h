/* dc-tensor-source-files.h: a DcTensorSource over a local folder.
 *
 * The folder holds model.safetensors, or model.safetensors.index.json and the
 * shards it names. Headers are read at construction; tensor bytes with
 * pread () when asked, so several threads may read distinct tensors at once.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "dc-tensor-source.h"

G_BEGIN_DECLS

#define DC_TYPE_TENSOR_SOURCE_FILES (dc_tensor_source_files_get_type ())
G_DECLARE_FINAL_TYPE (DcTensorSourceFiles, dc_tensor_source_files, DC, TENSOR_SOURCE_FILES,
                      GObject)

/* A sharded checkpoint of a 405B model has under 200 shards; 4096 bounds the
 * open descriptors an untrusted index can ask for. */
#define DC_TENSOR_SOURCE_MAX_SHARDS 4096

DcTensorSource *dc_tensor_source_files_new (const char  *dir,
                                            GError     **error);

G_END_DECLS
