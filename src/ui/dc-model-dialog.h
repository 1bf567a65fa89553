/* dc-model-dialog.h: picks a Hugging Face model or a local folder.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "infer/dc-model-repo.h"

G_BEGIN_DECLS

/* The Hub's limit for the owner and for the name of a repository. */
#define DC_MODEL_ID_MAX_PART   96
/* A revision (branch, tag, commit or refs/pr/N) longer than this is a typo:
 * git's own ref names stay far below it. */
#define DC_MODEL_ID_MAX_REVISION 255
/* A refused text is quoted up to this many characters: enough to recognise
 * it, and a pasted megabyte does not become a megabyte label. */
#define DC_MODEL_ID_QUOTE_MAX  64
/* Recent models kept in GSettings: all of them fit in the dialog unscrolled. */
#define DC_MODEL_RECENT_MAX    5
/* One look-up once typing pauses this long, not one per key: each look-up
 * downloads the config and tokenizer.json (up to a few MB). */
#define DC_MODEL_LOOKUP_DELAY_MS 400

#define DC_TYPE_MODEL_DIALOG (dc_model_dialog_get_type ())

G_DECLARE_FINAL_TYPE (DcModelDialog, dc_model_dialog, DC, MODEL_DIALOG, AdwMessageDialog)

gboolean       dc_model_dialog_check_spec  (const char     *spec,
                                            gboolean       *is_folder,
                                            GError        **error);
void           dc_model_dialog_add_recent  (GSettings      *settings,
                                            const char     *spec);

DcModelDialog *dc_model_dialog_new         (GtkWindow      *parent,
                                            DcHfClient     *client,
                                            GSettings      *settings);
void           dc_model_dialog_set_spec    (DcModelDialog  *self,
                                            const char     *spec);
DcModelRepo   *dc_model_dialog_get_repo    (DcModelDialog  *self);
const char    *dc_model_dialog_get_status  (DcModelDialog  *self);
gboolean       dc_model_dialog_is_busy     (DcModelDialog  *self);

G_END_DECLS
