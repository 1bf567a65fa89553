/* dc-window.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "dc-application.h"
#include "dc-group-page.h"
#include "dc-infer-page.h"
#include "dc-train-page.h"

G_BEGIN_DECLS

#define DC_TYPE_WINDOW (dc_window_get_type ())

G_DECLARE_FINAL_TYPE (DcWindow, dc_window, DC, WINDOW, AdwApplicationWindow)

DcWindow   *dc_window_new              (DcApplication *application);
const char *dc_window_get_visible_view (DcWindow      *self);
void        dc_window_add_toast        (DcWindow      *self,
                                        const char    *message);
DcTrainPage *dc_window_get_train_page  (DcWindow      *self);
DcInferPage *dc_window_get_infer_page  (DcWindow      *self);
DcGroupPage *dc_window_get_group_page  (DcWindow      *self);

G_END_DECLS
