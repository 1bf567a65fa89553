/* dc-tensor-source.c: the DcTensorSource interface.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-tensor-source.h"

G_DEFINE_INTERFACE (DcTensorSource, dc_tensor_source, G_TYPE_OBJECT)

static void
dc_tensor_source_default_init (DcTensorSourceInterface *iface)
{
}

/**
 * dc_tensor_source_lookup:
 * @name: a tensor name as the checkpoint spells it
 *
 * Returns: (transfer none) (nullable): the tensor's header entry, valid as
 *   long as @self, or %NULL when no shard has it
 */
const DcSafetensorsTensor *
dc_tensor_source_lookup (DcTensorSource *self,
                         const char     *name)
{
  g_return_val_if_fail (DC_IS_TENSOR_SOURCE (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);

  return DC_TENSOR_SOURCE_GET_IFACE (self)->lookup (self, name);
}

/**
 * dc_tensor_source_read:
 * @t: an entry returned by dc_tensor_source_lookup() on @self
 * @dst: (out caller-allocates): t->end - t->begin bytes
 *
 * Reads the tensor's bytes as stored (little-endian, the file's dtype). May
 * block; call it from a worker thread.
 */
gboolean
dc_tensor_source_read (DcTensorSource            *self,
                       const DcSafetensorsTensor *t,
                       guint8                    *dst,
                       GCancellable              *cancellable,
                       GError                   **error)
{
  g_return_val_if_fail (DC_IS_TENSOR_SOURCE (self), FALSE);
  g_return_val_if_fail (t != NULL && dst != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  return DC_TENSOR_SOURCE_GET_IFACE (self)->read (self, t, dst, cancellable, error);
}
