/* test-ui-window.c: the real application window under Xvfb.
 *
 * Runs DcApplication as a user would start it (the last session's window
 * size and view come back, and the view is saved on quit), switches views through
 * win.view, opens Preferences, About and the shortcuts window through their
 * actions, and saves a screenshot of the window to the build tree
 * (tests/screenshots/window-*.png) for people to look at.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <adwaita.h>

#include "dc-application.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-window.h"

#define TIMEOUT_MS 20000

/* Not the schema's defaults (1000 × 720), so a window that ignored them
 * shows; wider than the window's minimum (925 px here), which GTK would apply. */
#define REMEMBERED_WIDTH 1100
#define REMEMBERED_HEIGHT 760

static void
save_screenshot (GtkWidget  *widget,
                 const char *name)
{
  g_autoptr(GdkTexture) texture = dc_test_render_widget (widget, name);

  g_assert_cmpint (gdk_texture_get_width (texture), >=, 360);
}

static void
check_window (DcApplication *app)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (app));
  GActionGroup *actions;
  g_autoptr(GVariant) state = NULL;
  int width, height;

  g_assert_true (DC_IS_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));

  /* The size and view of the last session (set by test_main_window) come back. */
  gtk_window_get_default_size (window, &width, &height);
  g_assert_cmpint (width, ==, REMEMBERED_WIDTH);
  g_assert_cmpint (height, ==, REMEMBERED_HEIGHT);
  g_assert_cmpstr (dc_window_get_visible_view (DC_WINDOW (window)), ==, "devices");

  actions = G_ACTION_GROUP (window);

  /* Views switch through their action; the action's state follows. */
  g_action_group_activate_action (actions, "view", g_variant_new_string ("infer"));
  g_assert_cmpstr (dc_window_get_visible_view (DC_WINDOW (window)), ==, "infer");
  state = g_action_group_get_action_state (actions, "view");
  g_assert_cmpstr (g_variant_get_string (state, NULL), ==, "infer");
  save_screenshot (GTK_WIDGET (window), "window-infer");

  /* Devices: with group-autostart off the group stays offline. */
  g_action_group_activate_action (actions, "view", g_variant_new_string ("devices"));
  g_assert_cmpstr (dc_window_get_visible_view (DC_WINDOW (window)), ==, "devices");
  g_assert_cmpint (dc_group_get_state (dc_application_get_group (app)), ==,
                   DC_GROUP_STATE_OFFLINE);
  save_screenshot (GTK_WIDGET (window), "window-devices");

  g_action_group_activate_action (actions, "view", g_variant_new_string ("train"));
  g_assert_cmpstr (dc_window_get_visible_view (DC_WINDOW (window)), ==, "train");
  save_screenshot (GTK_WIDGET (window), "window-train");

  /* The primary menu's entries open their windows. */
  g_assert_false (dc_test_toplevel_is_mapped (GSIZE_TO_POINTER (ADW_TYPE_PREFERENCES_WINDOW)));
  g_action_group_activate_action (G_ACTION_GROUP (app), "preferences", NULL);
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (ADW_TYPE_PREFERENCES_WINDOW), TIMEOUT_MS));
  g_action_group_activate_action (G_ACTION_GROUP (app), "about", NULL);
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (ADW_TYPE_ABOUT_WINDOW), TIMEOUT_MS));
  g_assert_true (g_action_group_has_action (actions, "show-help-overlay"));
  g_action_group_activate_action (actions, "show-help-overlay", NULL);
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (GTK_TYPE_SHORTCUTS_WINDOW), TIMEOUT_MS));
}

static void
activate_cb (DcApplication *app,
             gpointer       user_data)
{
  gboolean *checked = user_data;

  check_window (app);
  *checked = TRUE;

  /* app.quit closes every window through close-request; the app then exits. */
  g_action_group_activate_action (G_ACTION_GROUP (app), "quit", NULL);
  g_assert_true (dc_test_wait_until (dc_test_app_has_no_windows, app, TIMEOUT_MS));
}

static void
test_main_window (void)
{
  g_autoptr(DcApplication) app = dc_application_new ();
  gboolean checked = FALSE;
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  int status;

  g_application_set_flags (G_APPLICATION (app), G_APPLICATION_NON_UNIQUE);
  g_signal_connect_after (app, "activate", G_CALLBACK (activate_cb), &checked);
  /* The ui suite sends no multicast: the group stays offline. */
  g_settings_set_boolean (settings, "group-autostart", FALSE);
  /* As a last session would have left them; check_window ends on Train,
   * which the window must save when it closes. */
  g_settings_set_int (settings, "window-width", REMEMBERED_WIDTH);
  g_settings_set_int (settings, "window-height", REMEMBERED_HEIGHT);
  g_settings_set_string (settings, "last-view", "devices");
  status = g_application_run (G_APPLICATION (app), 0, NULL);

  g_assert_cmpint (status, ==, 0);
  g_assert_true (checked);
  {
    g_autofree char *view = g_settings_get_string (settings, "last-view");

    g_assert_cmpstr (view, ==, "train");
  }
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/ui/window/views-actions-screenshot", test_main_window);

  return g_test_run ();
}
