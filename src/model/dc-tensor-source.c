/* PLACEHOLDER: owned by MODEL (hf-contract.md section 1); the lead keeps MODEL's version.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-tensor-source.h"

#include "dc-model-error.h"

G_DEFINE_INTERFACE (DcTensorSource, dc_tensor_source, G_TYPE_OBJECT)

static void
dc_tensor_source_default_init (DcTensorSourceInterface *iface)
{
}

const DcSafetensorsTensor *
dc_tensor_source_lookup (DcTensorSource *self,
                         const char     *name)
{
  g_return_val_if_fail (DC_IS_TENSOR_SOURCE (self), NULL);
  return DC_TENSOR_SOURCE_GET_IFACE (self)->lookup (self, name);
}

gboolean
dc_tensor_source_read (DcTensorSource             *self,
                       const DcSafetensorsTensor  *t,
                       guint8                     *dst,
                       GCancellable               *cancellable,
                       GError                    **error)
{
  g_return_val_if_fail (DC_IS_TENSOR_SOURCE (self), FALSE);
  return DC_TENSOR_SOURCE_GET_IFACE (self)->read (self, t, dst, cancellable, error);
}
