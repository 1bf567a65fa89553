/* dc-kit-export.c: PLACEHOLDER until the kit exporter lands (issue 13): it
 * refuses with a clear message so that callers can be built and tested
 * against the interface.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-kit-export.h"

gboolean
dc_kit_export (const DcGptModel  *model,
               double             loss,
               const char        *path,
               GCancellable      *cancellable,
               GError           **error)
{
  g_return_val_if_fail (model != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                       "the inference kit exporter is not built yet");
  return FALSE;
}
