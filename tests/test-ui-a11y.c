/* test-ui-a11y.c: every control of the window has a name for assistive
 * technologies, read from the accessibility tree.
 *
 * Under Xvfb: each view of the main window (Train, Infer, Devices), the
 * Preferences window and the shortcuts window are walked; every button,
 * menu button, switch, spin button, drop-down and text field must have an
 * accessible name: the "label" property, a "labelled-by" relation (which
 * the rows of libadwaita set to their title), or for a button the text it
 * shows (GTK labels a button by its content, an icon too, so the relation
 * alone proves nothing there). A control that only has an icon fails.
 * The Train view is walked with its Advanced sizes switched on and shown.
 * The Train view's "Computes on" row is named by what it shows (the
 * backend, device and kernel in use) and opens Preferences.
 * The shortcuts window must list every key binding of the Train view. The
 * window renders light and dark (mean luminance of a screenshot in each).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <adwaita.h>

#include "dc-application.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-window.h"

#define TIMEOUT_MS 60000

static gboolean
is_control (GtkWidget *widget)
{
  return GTK_IS_BUTTON (widget) || GTK_IS_MENU_BUTTON (widget) || GTK_IS_SWITCH (widget)
         || GTK_IS_SPIN_BUTTON (widget) || GTK_IS_DROP_DOWN (widget) || GTK_IS_ENTRY (widget)
         || GTK_IS_PASSWORD_ENTRY (widget) || GTK_IS_SEARCH_ENTRY (widget)
         || GTK_IS_TEXT_VIEW (widget) || ADW_IS_ENTRY_ROW (widget)
         || (GTK_IS_TEXT (widget) && !GTK_IS_EDITABLE (gtk_widget_get_parent (widget))
             && gtk_widget_get_ancestor (widget, ADW_TYPE_ENTRY_ROW) == NULL);
}

/* The text a button shows, which is its name when it has no other. */
static gboolean
button_shows_text (GtkWidget *widget)
{
  GtkWidget *child;

  if (GTK_IS_BUTTON (widget) && gtk_button_get_label (GTK_BUTTON (widget)) != NULL
      && gtk_button_get_icon_name (GTK_BUTTON (widget)) == NULL)
    return TRUE;
  if (GTK_IS_MENU_BUTTON (widget) && gtk_menu_button_get_label (GTK_MENU_BUTTON (widget)) != NULL)
    return TRUE;
  for (child = gtk_widget_get_first_child (widget); child != NULL;
       child = gtk_widget_get_next_sibling (child))
    if ((GTK_IS_LABEL (child) && gtk_label_get_label (GTK_LABEL (child))[0] != '\0')
        || (!GTK_IS_IMAGE (child) && button_shows_text (child)))
      return TRUE;
  return FALSE;
}

static gboolean
has_name (GtkWidget *widget)
{
  GtkAccessible *accessible = GTK_ACCESSIBLE (widget);

  if (gtk_test_accessible_has_property (accessible, GTK_ACCESSIBLE_PROPERTY_LABEL))
    return TRUE;
  /* An entry row is named by its title. */
  if (ADW_IS_ENTRY_ROW (widget))
    return adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget))[0] != '\0';
  /* A button is "labelled by" its own content, an icon included: only the
   * text it shows names it. */
  if (GTK_IS_BUTTON (widget) || GTK_IS_MENU_BUTTON (widget))
    return button_shows_text (widget);
  return gtk_test_accessible_has_relation (accessible, GTK_ACCESSIBLE_RELATION_LABELLED_BY);
}

static char *
describe (GtkWidget *widget)
{
  GString *path = g_string_new (G_OBJECT_TYPE_NAME (widget));

  for (GtkWidget *up = gtk_widget_get_parent (widget); up != NULL; up = gtk_widget_get_parent (up))
    {
      const char *name = gtk_widget_get_name (up);

      if (ADW_IS_PREFERENCES_ROW (up))
        g_string_prepend (path, " › ");
      if (ADW_IS_PREFERENCES_ROW (up))
        g_string_prepend (path, adw_preferences_row_get_title (ADW_PREFERENCES_ROW (up)));
      else if (GTK_IS_ROOT (up))
        {
          g_string_prepend (path, " › ");
          g_string_prepend (path, name != NULL ? name : G_OBJECT_TYPE_NAME (up));
        }
    }
  return g_string_free (path, FALSE);
}

/* Adds to @missing each control under @widget without a name. */
static void
walk (GtkWidget *widget,
      GPtrArray *missing,
      guint     *n_controls)
{
  /* What is not shown is not presented either (hidden views, unused
   * buttons of libadwaita's rows). */
  if (!gtk_widget_get_mapped (widget))
    return;
  if (is_control (widget))
    {
      (*n_controls)++;
      if (!has_name (widget))
        g_ptr_array_add (missing, describe (widget));
      /* A button's own children are its content, not controls. */
      if (GTK_IS_BUTTON (widget) || GTK_IS_MENU_BUTTON (widget) || GTK_IS_SPIN_BUTTON (widget)
          || GTK_IS_ENTRY (widget)
          || GTK_IS_PASSWORD_ENTRY (widget) || GTK_IS_SEARCH_ENTRY (widget))
        return;
    }
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child != NULL;
       child = gtk_widget_get_next_sibling (child))
    walk (child, missing, n_controls);
}

static void
check_named (GtkWidget  *root,
             const char *what)
{
  g_autoptr(GPtrArray) missing = g_ptr_array_new_with_free_func (g_free);
  guint n_controls = 0;

  walk (root, missing, &n_controls);
  g_test_message ("%s: %u controls, %u without a name", what, n_controls, missing->len);
  for (guint i = 0; i < missing->len; i++)
    g_test_message ("  no accessible name: %s", (const char *) g_ptr_array_index (missing, i));
  g_assert_cmpuint (n_controls, >, 0);
  g_assert_cmpuint (missing->len, ==, 0);
}

static gboolean
is_shortcuts_shortcut (GtkWidget *widget,
                       gpointer   user_data)
{
  g_autofree char *accelerator = NULL;
  guint key;
  GdkModifierType mods;

  if (!GTK_IS_SHORTCUTS_SHORTCUT (widget))
    return FALSE;
  g_object_get (widget, "accelerator", &accelerator, NULL);
  if (accelerator != NULL && gtk_accelerator_parse (accelerator, &key, &mods))
    g_hash_table_add (user_data, gtk_accelerator_name (key, mods));
  return FALSE;  /* visit them all */
}

/* Every key binding of the Train view is in the shortcuts window. */
static void
check_train_shortcuts_listed (GtkWidget *page,
                              GtkWidget *shortcuts)
{
  g_autoptr(GHashTable) listed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GListModel) controllers = gtk_widget_observe_controllers (page);
  guint n_bindings = 0;

  dc_test_find_descendant (shortcuts, is_shortcuts_shortcut, listed);
  for (guint i = 0; i < g_list_model_get_n_items (controllers); i++)
    {
      g_autoptr(GtkEventController) controller = g_list_model_get_item (controllers, i);

      if (!GTK_IS_SHORTCUT_CONTROLLER (controller))
        continue;
      for (guint j = 0; j < g_list_model_get_n_items (G_LIST_MODEL (controller)); j++)
        {
          g_autoptr(GtkShortcut) shortcut = g_list_model_get_item (G_LIST_MODEL (controller), j);
          GtkShortcutTrigger *trigger = gtk_shortcut_get_trigger (shortcut);
          GtkShortcutAction *action = gtk_shortcut_get_action (shortcut);
          g_autofree char *name = NULL;

          if (!GTK_IS_KEYVAL_TRIGGER (trigger) || !GTK_IS_NAMED_ACTION (action)
              || !g_str_has_prefix (gtk_named_action_get_action_name (GTK_NAMED_ACTION (action)),
                                    "train."))
            continue;
          name = gtk_accelerator_name (gtk_keyval_trigger_get_keyval (GTK_KEYVAL_TRIGGER (trigger)),
                                       gtk_keyval_trigger_get_modifiers (GTK_KEYVAL_TRIGGER (trigger)));
          n_bindings++;
          if (!g_hash_table_contains (listed, name))
            g_error ("the shortcuts window does not list %s (%s)", name,
                     gtk_named_action_get_action_name (GTK_NAMED_ACTION (action)));
        }
    }
  /* Start, Stop, Generate, Save, Load, Export, Kit, Cancel. */
  g_assert_cmpuint (n_bindings, ==, 8);
}

/* The mean luminance (0–1) of @texture. */
static double
mean_luminance (GdkTexture *texture)
{
  int width = gdk_texture_get_width (texture), height = gdk_texture_get_height (texture);
  g_autofree guchar *pixels = g_malloc ((gsize) width * height * 4);
  double sum = 0;

  gdk_texture_download (texture, pixels, (gsize) width * 4);
  for (gsize i = 0; i < (gsize) width * height; i++)
    {
      /* Cairo's ARGB32, premultiplied, little-endian: B, G, R, A. */
      const guchar *p = pixels + i * 4;

      sum += (0.0722 * p[0] + 0.7152 * p[1] + 0.2126 * p[2]) / 255.0;
    }
  return sum / ((double) width * height);
}

/* The window follows the dark style: forced dark, it renders dark (the
 * hand-drawn loss chart too, which reads its colours from the style). */
static void
check_styles (DcWindow *window)
{
  AdwStyleManager *styles = adw_style_manager_get_default ();
  g_autoptr(GdkTexture) light = NULL;
  g_autoptr(GdkTexture) dark = NULL;
  double light_mean, dark_mean;

  g_action_group_activate_action (G_ACTION_GROUP (window), "view", g_variant_new_string ("train"));
  adw_style_manager_set_color_scheme (styles, ADW_COLOR_SCHEME_FORCE_LIGHT);
  dc_test_wait_frames (GTK_WIDGET (window), 3);
  light = dc_test_render_widget (GTK_WIDGET (window), "window-train-light");
  adw_style_manager_set_color_scheme (styles, ADW_COLOR_SCHEME_FORCE_DARK);
  dc_test_wait_frames (GTK_WIDGET (window), 3);
  dark = dc_test_render_widget (GTK_WIDGET (window), "window-train-dark");
  adw_style_manager_set_color_scheme (styles, ADW_COLOR_SCHEME_DEFAULT);
  light_mean = mean_luminance (light);
  dark_mean = mean_luminance (dark);
  g_test_message ("mean luminance: light %.2f, dark %.2f", light_mean, dark_mean);
  g_assert_cmpfloat (light_mean, >, 0.7);
  g_assert_cmpfloat (dark_mean, <, 0.3);
}

static gboolean
is_backend_row (GtkWidget *widget,
                gpointer   user_data)
{
  return ADW_IS_ACTION_ROW (widget)
         && g_str_equal (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)),
                         "Computes on");
}

/* The backend row reads as "Computes on: " and what it shows. */
static void
check_backend_row (DcWindow *window)
{
  GtkWidget *row = dc_test_find_descendant (GTK_WIDGET (dc_window_get_train_page (window)),
                                            is_backend_row, NULL);
  g_autofree char *expected = NULL;
  g_autofree char *mismatch = NULL;

  g_assert_nonnull (row);
  expected = g_strdup_printf ("Computes on: %s",
                              adw_action_row_get_subtitle (ADW_ACTION_ROW (row)));
  mismatch = gtk_test_accessible_check_property (GTK_ACCESSIBLE (row),
                                                 GTK_ACCESSIBLE_PROPERTY_LABEL, expected);
  if (mismatch != NULL)
    g_error ("backend row: %s", mismatch);
  /* Activated, it opens Preferences, where the backend is chosen. */
  g_assert_true (gtk_widget_activate (row));
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (ADW_TYPE_PREFERENCES_WINDOW), TIMEOUT_MS));
  gtk_window_destroy (GTK_WINDOW (dc_test_find_toplevel (ADW_TYPE_PREFERENCES_WINDOW, NULL, NULL)));
}

static void
check_window (DcApplication *app)
{
  DcWindow *window = DC_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  const char *views[] = { "train", "infer", "devices" };
  GtkWidget *preferences;
  GtkWidget *shortcuts;

  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  /* The check itself: an icon-only button has no name; a label gives one. */
  {
    g_autoptr(GtkWidget) icon_only = g_object_ref_sink (gtk_button_new_from_icon_name ("edit-copy-symbolic"));
    g_autoptr(GtkWidget) with_label = g_object_ref_sink (gtk_button_new_with_mnemonic ("_Copy"));

    g_assert_false (has_name (icon_only));
    g_assert_true (has_name (with_label));
    gtk_accessible_update_property (GTK_ACCESSIBLE (icon_only), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                    "Copy", -1);
    g_assert_true (has_name (icon_only));
  }
  for (guint i = 0; i < G_N_ELEMENTS (views); i++)
    {
      g_action_group_activate_action (G_ACTION_GROUP (window), "view",
                                      g_variant_new_string (views[i]));
      /* The Advanced sizes shown: their switch, spins and memory text too. */
      if (g_str_equal (views[i], "train"))
        {
          GObject *advanced = gtk_widget_get_template_child (
            GTK_WIDGET (dc_window_get_train_page (window)), DC_TYPE_TRAIN_PAGE, "advanced_row");

          g_assert_nonnull (advanced);
          adw_expander_row_set_enable_expansion (ADW_EXPANDER_ROW (advanced), TRUE);
          adw_expander_row_set_expanded (ADW_EXPANDER_ROW (advanced), TRUE);
        }
      dc_test_wait_frames (GTK_WIDGET (window), 2);
      check_named (GTK_WIDGET (window), views[i]);
    }
  check_backend_row (window);

  g_action_group_activate_action (G_ACTION_GROUP (app), "preferences", NULL);
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (ADW_TYPE_PREFERENCES_WINDOW), TIMEOUT_MS));
  preferences = dc_test_find_toplevel (ADW_TYPE_PREFERENCES_WINDOW, NULL, NULL);
  check_named (preferences, "preferences");
  gtk_window_destroy (GTK_WINDOW (preferences));

  g_action_group_activate_action (G_ACTION_GROUP (window), "show-help-overlay", NULL);
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (GTK_TYPE_SHORTCUTS_WINDOW), TIMEOUT_MS));
  shortcuts = dc_test_find_toplevel (GTK_TYPE_SHORTCUTS_WINDOW, NULL, NULL);
  check_train_shortcuts_listed (GTK_WIDGET (dc_window_get_train_page (window)), shortcuts);
  gtk_window_destroy (GTK_WINDOW (shortcuts));

  check_styles (window);

  gtk_window_close (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_app_has_no_windows, app, TIMEOUT_MS));
}

static void
activate_cb (DcApplication *app,
             gpointer       user_data)
{
  gboolean *checked = user_data;

  check_window (app);
  *checked = TRUE;
}

static void
test_named (void)
{
  g_autoptr(DcApplication) app = dc_application_new ();
  gboolean checked = FALSE;
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);

  g_application_set_flags (G_APPLICATION (app), G_APPLICATION_NON_UNIQUE);
  g_signal_connect_after (app, "activate", G_CALLBACK (activate_cb), &checked);
  g_settings_set_boolean (settings, "group-autostart", FALSE);
  g_assert_cmpint (g_application_run (G_APPLICATION (app), 0, NULL), ==, 0);
  g_assert_true (checked);
}

int
main (int    argc,
      char **argv)
{
  /* The test backend keeps every accessible property where
   * gtk_test_accessible_has_property () reads it (the suite's GTK_A11Y=none
   * keeps none). */
  g_setenv ("GTK_A11Y", "test", TRUE);
  gtk_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/ui/a11y/every-control-named", test_named);

  return g_test_run ();
}
