/* dc-train-page.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "dc-context.h"
#include "dc-loss-chart.h"

G_BEGIN_DECLS

#define DC_TYPE_TRAIN_PAGE (dc_train_page_get_type ())

G_DECLARE_FINAL_TYPE (DcTrainPage, dc_train_page, DC, TRAIN_PAGE, AdwBin)

void         dc_train_page_set_context  (DcTrainPage *self,
                                         DcContext   *context);
void         dc_train_page_set_settings (DcTrainPage *self,
                                         GSettings   *settings);
DcLossChart *dc_train_page_get_chart    (DcTrainPage *self);
void         dc_train_page_append_log   (DcTrainPage *self,
                                         const char  *line);
gboolean     dc_train_page_is_running   (DcTrainPage *self);
void         dc_train_page_stop         (DcTrainPage *self);
gboolean     dc_train_page_is_working   (DcTrainPage *self);
const char  *dc_train_page_get_generated_text (DcTrainPage *self);
char        *dc_train_page_dup_log      (DcTrainPage *self);

G_END_DECLS
