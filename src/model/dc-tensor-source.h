/* PLACEHOLDER: owned by MODEL (docs: /work/notes/hf-contract.md section 1); the lead keeps MODEL's version.
 *
 * dc-tensor-source.h: where the weights of a safetensors checkpoint come from.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-safetensors.h"

G_BEGIN_DECLS

#define DC_TYPE_TENSOR_SOURCE (dc_tensor_source_get_type ())
G_DECLARE_INTERFACE (DcTensorSource, dc_tensor_source, DC, TENSOR_SOURCE, GObject)

struct _DcTensorSourceInterface
{
  GTypeInterface parent_iface;

  /* The header entry of tensor NAME across every shard, or NULL. Borrowed. */
  const DcSafetensorsTensor *(*lookup) (DcTensorSource *self, const char *name);
  /* Reads the tensor's raw bytes (t->end - t->begin of them, in the file's dtype) into
   * DST. May block (download); honours CANCELLABLE; thread-safe for distinct tensors. */
  gboolean (*read) (DcTensorSource *self, const DcSafetensorsTensor *t, guint8 *dst,
                    GCancellable *cancellable, GError **error);
};

const DcSafetensorsTensor *dc_tensor_source_lookup (DcTensorSource *self, const char *name);
gboolean dc_tensor_source_read (DcTensorSource *self, const DcSafetensorsTensor *t,
                                guint8 *dst, GCancellable *cancellable, GError **error);

G_END_DECLS
