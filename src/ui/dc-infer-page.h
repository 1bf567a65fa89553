/* dc-infer-page.h: the Infer view.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "dc-context.h"
#include "infer/dc-model-repo.h"

G_BEGIN_DECLS

#define DC_TYPE_INFER_PAGE (dc_infer_page_get_type ())

G_DECLARE_FINAL_TYPE (DcInferPage, dc_infer_page, DC, INFER_PAGE, AdwBin)

void         dc_infer_page_set_context      (DcInferPage *self,
                                             DcContext   *context);
void         dc_infer_page_set_settings     (DcInferPage *self,
                                             GSettings   *settings);
void         dc_infer_page_set_repo         (DcInferPage *self,
                                             DcModelRepo *repo);
DcModelRepo *dc_infer_page_get_repo         (DcInferPage *self);
void         dc_infer_page_set_prompt       (DcInferPage *self,
                                             const char  *prompt);
char        *dc_infer_page_dup_output       (DcInferPage *self);
const char  *dc_infer_page_get_status       (DcInferPage *self);
const char  *dc_infer_page_get_held         (DcInferPage *self);
guint        dc_infer_page_get_queue_length (DcInferPage *self);
gboolean     dc_infer_page_is_busy          (DcInferPage *self);

G_END_DECLS
