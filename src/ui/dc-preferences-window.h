/* dc-preferences-window.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

#include "dc-context.h"

G_BEGIN_DECLS

#define DC_TYPE_PREFERENCES_WINDOW (dc_preferences_window_get_type ())

G_DECLARE_FINAL_TYPE (DcPreferencesWindow, dc_preferences_window, DC, PREFERENCES_WINDOW,
                      AdwPreferencesWindow)

DcPreferencesWindow *dc_preferences_window_new             (GSettings *settings);
DcPreferencesWindow *dc_preferences_window_new_for_context (GSettings *settings,
                                                            DcContext *context);

G_END_DECLS
