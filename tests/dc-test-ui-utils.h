/* dc-test-ui-utils.h: helpers for the ui suite (GTK).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

void        dc_test_wait_frames         (GtkWidget  *widget,
                                         guint       n_frames);
GdkTexture *dc_test_render_widget       (GtkWidget  *widget,
                                         const char *screenshot_name);

G_END_DECLS
