/* dc-application.c: the application object, its actions and settings.
 *
 * It makes the process's DcContext at startup (the backend from the
 * "backend" setting, the Hugging Face client, the device's DcGroup), hands
 * it to each window, and starts looking for a group on the local network at
 * startup when the group-autostart setting says so.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-application.h"
#include "dc-application-private.h"
#include "dc-preferences-window.h"
#include "dc-ui-resources.h"
#include "dc-window.h"
#include "train/dc-train-group.h"

struct _DcApplication
{
  AdwApplication  parent_instance;

  /* owned references */
  GSettings      *settings;
  DcContext      *context;   /* from startup on */
  DcGroup        *group;     /* a group given before startup, until then */
  DcRingServer   *ring_server;  /* this device as a stage of the group's rings */
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

/**
 * dc_application_get_ring_server:
 *
 * Returns: (transfer none) (nullable): this device as a stage of the
 *   group's inference rings, from startup on
 */
DcRingServer *
dc_application_get_ring_server (DcApplication *self)
{
  g_return_val_if_fail (DC_IS_APPLICATION (self), NULL);

  return self->ring_server;
}

/**
 * dc_application_get_group:
 *
 * Returns: (transfer none) (nullable): this device's group, %NULL before startup
 */
DcGroup *
dc_application_get_group (DcApplication *self)
{
  g_return_val_if_fail (DC_IS_APPLICATION (self), NULL);

  return self->context != NULL ? dc_context_get_group (self->context) : self->group;
}

/**
 * dc_application_get_context:
 *
 * Returns: (transfer none) (nullable): the context shared by the windows,
 *   %NULL before startup
 */
DcContext *
dc_application_get_context (DcApplication *self)
{
  g_return_val_if_fail (DC_IS_APPLICATION (self), NULL);

  return self->context;
}

/**
 * dc_application_set_group:
 * @group: a group configured by the caller (tests: ICE and serving on loopback)
 *
 * Replaces the group startup would build from the settings. Call before
 * g_application_run().
 */
void
dc_application_set_group (DcApplication *self,
                          DcGroup       *group)
{
  g_return_if_fail (DC_IS_APPLICATION (self));
  g_return_if_fail (DC_IS_GROUP (group));

  if (self->context != NULL)
    dc_context_set_group (self->context, group);
  else
    g_set_object (&self->group, group);
}

/**
 * _dc_application_fill_peer_config:
 *
 * Sets @config's STUN server (the first of "stun-servers") and TURN server
 * ("turn-server", when it is a turn:// or turns:// URL; anything else is
 * ignored with a log line) from @settings.
 */
void
_dc_application_fill_peer_config (GSettings    *settings,
                                  DcPeerConfig *config)
{
  g_autofree char *stun = g_settings_get_string (settings, "stun-servers");
  g_autofree char *turn = g_settings_get_string (settings, "turn-server");
  g_auto(GStrv) stuns = g_strsplit (stun, ",", 2);

  if (stuns[0] != NULL && *g_strstrip (stuns[0]) != '\0')
    config->stun_server = g_strdup_printf ("stun://%s", stuns[0]);
  g_strstrip (turn);
  if (g_str_has_prefix (turn, "turn://") || g_str_has_prefix (turn, "turns://"))
    config->turn_server = g_strdup (turn);
  else if (*turn != '\0')
    g_message ("The TURN server setting is not a turn:// or turns:// URL: ignored");
}

/**
 * _dc_application_new_context:
 *
 * Returns: (transfer full): the context on the backend the settings ask for
 *   ("backend" and "vulkan-device"), or the fallback the context chose and
 *   notes (dc_context_get_backend_note ())
 */
DcContext *
_dc_application_new_context (GSettings *settings)
{
  g_autofree char *backend = g_settings_get_string (settings, "backend");
  g_autofree char *device = g_settings_get_string (settings, "vulkan-device");

  return dc_context_new_for_settings (backend, device);
}

/* The hello peers see: the device name from the settings; the backend
 * really in use, its probe hash and the numeric rule id from the context. */
static DcGroup *
create_group (DcApplication *self)
{
  g_auto(DcMeshConfig) config = { 0 };
  g_autofree char *name = g_settings_get_string (self->settings, "device-name");

  g_strstrip (name);
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ASK;
  config.hello = dc_context_new_hello (self->context,
                                       *name != '\0' ? name : g_get_host_name ());
  /* A group trains an Advanced size only when every device announced
   * enough memory for it. */
  config.hello->memory = dc_train_group_announced_memory ();
  _dc_application_fill_peer_config (self->settings, &config.peer);
  return dc_group_new (&config);
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

/* Switching "Find a group at start" off means: take part in no local-network
 * group unless asked again. A search in progress would join (or announce) a
 * group by itself, and a group found or announced on the LAN was joined
 * without asking: both are left. Rooms joined by code are kept. */
static void
autostart_changed_cb (GSettings     *settings,
                      const char    *key,
                      DcApplication *self)
{
  DcGroup *group = dc_application_get_group (self);
  DcGroupState state;

  if (group == NULL || g_settings_get_boolean (settings, key))
    return;
  state = dc_group_get_state (group);
  if (state == DC_GROUP_STATE_SEARCHING
      || (state != DC_GROUP_STATE_OFFLINE && dc_group_get_via_lan (group)))
    {
      g_message ("Automatic grouping switched off: leaving the local-network group");
      dc_group_leave (group);
    }
}

static void
dc_application_startup (GApplication *app)
{
  DcApplication *self = DC_APPLICATION (app);
  static const char *quit_accels[] = { "<Control>q", NULL };
  static const char *preferences_accels[] = { "<Control>comma", NULL };
  static const char *train_accels[] = { "<Alt>1", NULL };
  static const char *infer_accels[] = { "<Alt>2", NULL };
  static const char *devices_accels[] = { "<Alt>3", NULL };

  /* Before chaining up: GtkApplication's startup looks for gtk/help-overlay.ui
   * and style.css under the resource base path. */
  dc_ui_register_resource ();

  G_APPLICATION_CLASS (dc_application_parent_class)->startup (app);

  self->settings = g_settings_new (APP_ID);

  self->context = _dc_application_new_context (self->settings);
  /* Listed now, while starting: Preferences shows them without waiting. */
  {
    const char * const *ids, * const *labels;

    dc_context_get_vulkan_devices (self->context, &ids, &labels);
  }
  if (self->group == NULL)
    self->group = create_group (self);
  dc_context_set_group (self->context, self->group);
  /* Any device of the group may run a model across it: this one holds
   * layers when a head asks (issue 16), as `join --serve-layers` does. */
  self->ring_server = dc_ring_server_new (self->context, self->group, 0);
  g_clear_object (&self->group);
  g_signal_connect_object (self->settings, "changed::group-autostart",
                           G_CALLBACK (autostart_changed_cb), self, 0);
  /* Off in tests (GSETTINGS_BACKEND=memory), which must not send multicast. */
  if (g_settings_get_boolean (self->settings, "group-autostart"))
    {
      g_autoptr(GError) error = NULL;

      if (!dc_group_start_discovery (dc_application_get_group (self), 0, NULL, &error))
        g_message ("Looking for a group on the local network failed: %s", error->message);
    }

  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "app.quit", quit_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "app.preferences",
                                         preferences_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "win.view::train",
                                         train_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "win.view::infer",
                                         infer_accels);
  gtk_application_set_accels_for_action (GTK_APPLICATION (app), "win.view::devices",
                                         devices_accels);
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
                        "comments", _("Pretrain a small language model from scratch together "
                                      "on the computers of a network, or alone, every replica "
                                      "bit-identical, and run Hugging Face models on this "
                                      "device."),
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

  preferences = dc_preferences_window_new_for_context (self->settings, self->context);
  gtk_window_set_transient_for (GTK_WINDOW (preferences), parent);
  gtk_window_present (GTK_WINDOW (preferences));
}

static void
dc_application_shutdown (GApplication *app)
{
  DcApplication *self = DC_APPLICATION (app);

  /* Say bye to the peers; the byes leave while the loop winds down. */
  if (dc_application_get_group (self) != NULL)
    dc_group_leave (dc_application_get_group (self));

  G_APPLICATION_CLASS (dc_application_parent_class)->shutdown (app);
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
  g_clear_object (&self->ring_server);
  g_clear_object (&self->group);
  g_clear_object (&self->context);

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
  app_class->shutdown = dc_application_shutdown;
}

static void
dc_application_init (DcApplication *self)
{
  g_action_map_add_action_entries (G_ACTION_MAP (self), app_actions,
                                   G_N_ELEMENTS (app_actions), self);
}
