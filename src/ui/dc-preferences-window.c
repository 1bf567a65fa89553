/* dc-preferences-window.c: settings that apply to this device.
 *
 * Rows are bound to GSettings, so a change is saved as it is made.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include "dc-preferences-window.h"

struct _DcPreferencesWindow
{
  AdwPreferencesWindow  parent_instance;

  /* template widgets */
  AdwEntryRow          *device_name_row;
  AdwComboRow          *backend_row;
  AdwEntryRow          *stun_row;
  AdwEntryRow          *turn_row;
  AdwEntryRow          *signal_url_row;
  AdwEntryRow          *cache_dir_row;
  GtkSpinButton        *cache_limit_spin;
  GtkSwitch            *autostart_switch;

  /* owned references */
  GSettings            *settings;
};

enum {
  PROP_0,
  PROP_SETTINGS,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (DcPreferencesWindow, dc_preferences_window, ADW_TYPE_PREFERENCES_WINDOW)

/* The combo row's items, in order, and the settings' enum nicks they stand for. */
static const char * const backend_nicks[] = { "auto", "cpu", "vulkan" };

DcPreferencesWindow *
dc_preferences_window_new (GSettings *settings)
{
  return g_object_new (DC_TYPE_PREFERENCES_WINDOW, "settings", settings, NULL);
}

static gboolean
backend_get_mapping (GValue   *value,
                     GVariant *variant,
                     gpointer  user_data)
{
  const char *nick = g_variant_get_string (variant, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (backend_nicks); i++)
    {
      if (g_str_equal (nick, backend_nicks[i]))
        {
          g_value_set_uint (value, i);
          return TRUE;
        }
    }
  return FALSE;
}

static GVariant *
backend_set_mapping (const GValue       *value,
                     const GVariantType *expected_type,
                     gpointer            user_data)
{
  guint selected = g_value_get_uint (value);

  if (selected >= G_N_ELEMENTS (backend_nicks))
    return NULL;
  return g_variant_new_string (backend_nicks[selected]);
}

/* The cache limit: megabytes in the settings, gigabytes in the window. */
static gboolean
mb_to_gb_mapping (GValue   *value,
                  GVariant *variant,
                  gpointer  user_data)
{
  g_value_set_double (value, g_variant_get_uint32 (variant) / 1000.0);
  return TRUE;
}

static GVariant *
gb_to_mb_mapping (const GValue       *value,
                  const GVariantType *expected_type,
                  gpointer            user_data)
{
  return g_variant_new_uint32 ((guint32) (g_value_get_double (value) * 1000.0 + 0.5));
}

static void
dc_preferences_window_constructed (GObject *object)
{
  DcPreferencesWindow *self = DC_PREFERENCES_WINDOW (object);

  G_OBJECT_CLASS (dc_preferences_window_parent_class)->constructed (object);

  g_settings_bind (self->settings, "device-name", self->device_name_row, "text",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "stun-servers", self->stun_row, "text",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "turn-server", self->turn_row, "text",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "signal-url", self->signal_url_row, "text",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "model-cache-dir", self->cache_dir_row, "text",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind_with_mapping (self->settings, "model-cache-limit-mb", self->cache_limit_spin,
                                "value", G_SETTINGS_BIND_DEFAULT,
                                mb_to_gb_mapping, gb_to_mb_mapping, NULL, NULL);
  g_settings_bind (self->settings, "group-autostart", self->autostart_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind_with_mapping (self->settings, "backend", self->backend_row, "selected",
                                G_SETTINGS_BIND_DEFAULT,
                                backend_get_mapping, backend_set_mapping, NULL, NULL);
}

static void
dc_preferences_window_set_property (GObject      *object,
                                    guint         prop_id,
                                    const GValue *value,
                                    GParamSpec   *pspec)
{
  DcPreferencesWindow *self = DC_PREFERENCES_WINDOW (object);

  switch (prop_id)
    {
    case PROP_SETTINGS:
      self->settings = g_value_dup_object (value);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_preferences_window_get_property (GObject    *object,
                                    guint       prop_id,
                                    GValue     *value,
                                    GParamSpec *pspec)
{
  DcPreferencesWindow *self = DC_PREFERENCES_WINDOW (object);

  switch (prop_id)
    {
    case PROP_SETTINGS:
      g_value_set_object (value, self->settings);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_preferences_window_dispose (GObject *object)
{
  DcPreferencesWindow *self = DC_PREFERENCES_WINDOW (object);

  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_PREFERENCES_WINDOW);
  g_clear_object (&self->settings);

  G_OBJECT_CLASS (dc_preferences_window_parent_class)->dispose (object);
}

static void
dc_preferences_window_class_init (DcPreferencesWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->constructed = dc_preferences_window_constructed;
  object_class->dispose = dc_preferences_window_dispose;
  object_class->get_property = dc_preferences_window_get_property;
  object_class->set_property = dc_preferences_window_set_property;

  properties[PROP_SETTINGS] =
    g_param_spec_object ("settings", NULL, NULL, G_TYPE_SETTINGS,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY |
                         G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-preferences-window.ui");
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, device_name_row);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, backend_row);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, stun_row);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, turn_row);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, signal_url_row);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, cache_dir_row);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, cache_limit_spin);
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, autostart_switch);
}

static void
dc_preferences_window_init (DcPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
