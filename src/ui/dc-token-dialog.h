/* dc-token-dialog.h: asks for a Hugging Face token after a 401 or 403.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "data/dc-hf-client.h"

G_BEGIN_DECLS

#define DC_TYPE_TOKEN_DIALOG (dc_token_dialog_get_type ())

G_DECLARE_FINAL_TYPE (DcTokenDialog, dc_token_dialog, DC, TOKEN_DIALOG, AdwMessageDialog)

gboolean       dc_token_dialog_wants (const GError *error);
DcTokenDialog *dc_token_dialog_new   (GtkWindow    *parent,
                                      DcHfClient   *client,
                                      const char   *what,
                                      const GError *error);

G_END_DECLS
