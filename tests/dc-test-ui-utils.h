/* dc-test-ui-utils.h: helpers for the ui suite (GTK).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

typedef gboolean (*DcTestWidgetMatch) (GtkWidget *widget,
                                       gpointer   user_data);

void        dc_test_wait_frames         (GtkWidget  *widget,
                                         guint       n_frames);
gboolean    dc_test_widget_is_mapped    (gpointer    widget);
gboolean    dc_test_app_has_no_windows  (gpointer    application);
GtkWidget  *dc_test_find_toplevel       (GType             type,
                                         DcTestWidgetMatch match,
                                         gpointer          user_data);
gboolean    dc_test_toplevel_is_mapped  (gpointer    gtype);
GtkWidget  *dc_test_find_descendant     (GtkWidget        *root,
                                         DcTestWidgetMatch match,
                                         gpointer          user_data);
GdkTexture *dc_test_render_widget       (GtkWidget  *widget,
                                         const char *screenshot_name);

G_END_DECLS
