/* dc-application.c: the application object, its actions and settings.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-application.h"
#include "dc-preferences-window.h"
#include "dc-ui-resources.h"
#include "dc-window.h"

struct _DcApplication
{
  AdwApplication  parent_instance;

  /* owned references */
  GSettings      *settings;
};

G_DEFINE_FINAL_TYPE (DcApplication, dc_application, ADW_TYPE_APPLICATION)

DcApplication *
dc_application_new (void)
{
  return g_object_new (DC_TYPE_APPLICATION,
                       "application-id", APP_ID,
                       "flags", G_APPLICATION_DEFAULT_FLAGS,
                       /* One resource path for every flavour, .Devel included. */
                       "resource-base-path", RESOURCE_BASE,
                       NULL);
}

/**
 * dc_application_get_settings:
 *
 * Returns: (transfer none): the application's settings
 */
GSettings *
dc_application_get_settings (DcApplication *self)
{
  g_return_val_if_fail (DC_IS_APPLICATION (self), NULL);

  return self->settings;
}

static void
dc_application_activate (GApplication *app)
{
  DcApplication *self = DC_APPLICATION (app);
  GtkWindow *window;

  window = gtk_application_get_active_window (GTK_APPLICATION (app));
  if (window == NULL)
    window = GTK_WINDOW (dc_window_new (self));

  gtk_window_present (window);
}

static void
dc_application_startup (GApplication *app)
{
  DcApplication *self = DC_APPLICATION (app);
  static const char *quit_accels[] = { "<Control>q", NULL };
  static const char *preferences_accels[] = { "<Control>comma", NULL };
  static const char *train_accels[] = { "<Alt>1", NULL };
  static const char *infer_accels[] = { "<Alt>2", NULL };

  /* Before chaining up: GtkApplication's startup looks for gtk/help-overlay.ui
   * and style.css under the resource base path. */
  dc_ui_register_resource ();

  G_APPLICATION_CLASS (dc_application_parent_class)->startup (app);

  self->settings = g_settings_new (APP_ID);

  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "app.quit", quit_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "app.preferences",
                                         preferences_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "win.view::train",
                                         train_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "win.view::infer",
                                         infer_accels);
}

static void
dc_application_quit_action (GSimpleAction *action,
                            GVariant      *parameter,
                            gpointer       user_data)
{
  DcApplication *self = user_data;
  GList *windows;

  /* Close windows one by one so that each can save its state (and, later,
   * ask before stopping a run) instead of g_application_quit() skipping that. */
  windows = gtk_application_get_windows (GTK_APPLICATION (self));
  if (windows == NULL)
    g_application_quit (G_APPLICATION (self));
  for (GList *l = g_list_copy (windows); l != NULL; l = g_list_delete_link (l, l))
    gtk_window_close (l->data);
}

static void
dc_application_about_action (GSimpleAction *action,
                             GVariant      *parameter,
                             gpointer       user_data)
{
  DcApplication *self = user_data;
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (self));
  static const char *developers[] = { "The DaisyChain developers", NULL };
  GtkWidget *about;

  about = g_object_new (ADW_TYPE_ABOUT_WINDOW,
                        "transient-for", parent,
                        "modal", TRUE,
                        "application-icon", APP_ID,
                        "application-name", _("DaisyChain"),
                        "developer-name", _("The DaisyChain developers"),
                        "version", PACKAGE_VERSION,
                        "comments", _("Train a small language model together on the computers "
                                      "of a network, every replica bit-identical, and run "
                                      "Hugging Face models split by layers across them."),
                        "website", PACKAGE_WEBSITE,
                        "issue-url", PACKAGE_WEBSITE "/issues",
                        "license-type", GTK_LICENSE_GPL_3_0,
                        "developers", developers,
                        "copyright", "© 2026 The DaisyChain developers",
                        /* Translators: replace with your names, one per line. */
                        "translator-credits", _("translator-credits"),
                        NULL);
  gtk_window_present (GTK_WINDOW (about));
}

static void
dc_application_preferences_action (GSimpleAction *action,
                                   GVariant      *parameter,
                                   gpointer       user_data)
{
  DcApplication *self = user_data;
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (self));
  DcPreferencesWindow *preferences;

  preferences = dc_preferences_window_new (self->settings);
  gtk_window_set_transient_for (GTK_WINDOW (preferences), parent);
  gtk_window_present (GTK_WINDOW (preferences));
}

static const GActionEntry app_actions[] = {
  { "quit", dc_application_quit_action },
  { "about", dc_application_about_action },
  { "preferences", dc_application_preferences_action },
};

static void
dc_application_dispose (GObject *object)
{
  DcApplication *self = DC_APPLICATION (object);

  g_clear_object (&self->settings);

  G_OBJECT_CLASS (dc_application_parent_class)->dispose (object);
}

static void
dc_application_class_init (DcApplicationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  object_class->dispose = dc_application_dispose;
  app_class->activate = dc_application_activate;
  app_class->startup = dc_application_startup;
}

static void
dc_application_init (DcApplication *self)
{
  g_action_map_add_action_entries (G_ACTION_MAP (self), app_actions,
                                   G_N_ELEMENTS (app_actions), self);
}
