/* dc-preferences-window.c: settings that apply to this device.
 *
 * Rows are bound to GSettings, so a change is saved as it is made.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include "dc-preferences-window.h"

#include <glib/gi18n.h>

#include "dc-context.h"

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
  AdwComboRow          *gradient_wire_row;

  /* owned references */
  GSettings            *settings;
  DcContext            *context;     /* nullable: lists the Vulkan devices */

  /* state */
  GStrv                 device_ids;  /* the backend row's items from the 4th on */
};

enum {
  PROP_0,
  PROP_SETTINGS,
  PROP_CONTEXT,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (DcPreferencesWindow, dc_preferences_window, ADW_TYPE_PREFERENCES_WINDOW)

/* The backend row's first items and the settings' enum nicks they stand
 * for; each Vulkan device follows (backend "vulkan" with its id in
 * "vulkan-device"). */
static const char * const backend_nicks[] = { "auto", "cpu", "vulkan" };

DcPreferencesWindow *
dc_preferences_window_new (GSettings *settings)
{
  return g_object_new (DC_TYPE_PREFERENCES_WINDOW, "settings", settings, NULL);
}

/**
 * dc_preferences_window_new_for_context:
 * @context: (nullable): the application's, whose list of Vulkan devices
 *   (made at start) the backend row shows; %NULL: listed here
 */
DcPreferencesWindow *
dc_preferences_window_new_for_context (GSettings *settings,
                                       DcContext *context)
{
  return g_object_new (DC_TYPE_PREFERENCES_WINDOW, "settings", settings, "context", context,
                       NULL);
}

/* The item the two settings stand for. */
static guint
backend_selected (DcPreferencesWindow *self)
{
  g_autofree char *nick = g_settings_get_string (self->settings, "backend");
  g_autofree char *device = g_settings_get_string (self->settings, "vulkan-device");

  if (g_str_equal (nick, "vulkan") && *device != '\0')
    {
      for (guint i = 0; self->device_ids[i] != NULL; i++)
        if (g_str_equal (self->device_ids[i], device))
          return G_N_ELEMENTS (backend_nicks) + i;
    }
  for (guint i = 0; i < G_N_ELEMENTS (backend_nicks); i++)
    if (g_str_equal (nick, backend_nicks[i]))
      return i;
  return 0;
}

static void
backend_selected_cb (DcPreferencesWindow *self)
{
  guint selected = adw_combo_row_get_selected (self->backend_row);

  if (selected == GTK_INVALID_LIST_POSITION)
    return;
  /* Both are read at start only: their order does not matter. */
  if (selected < G_N_ELEMENTS (backend_nicks))
    {
      g_settings_set_string (self->settings, "vulkan-device", "");
      g_settings_set_string (self->settings, "backend", backend_nicks[selected]);
    }
  else
    {
      g_settings_set_string (self->settings, "vulkan-device",
                             self->device_ids[selected - G_N_ELEMENTS (backend_nicks)]);
      g_settings_set_string (self->settings, "backend", "vulkan");
    }
}

/* Automatic, CPU, the best Vulkan device, then each device; a chosen device
 * that is gone stays listed as such, so that opening Preferences does not
 * change the setting. */
static void
fill_backend_row (DcPreferencesWindow *self)
{
  g_autoptr(GtkStringList) model = gtk_string_list_new (NULL);
  g_autofree char *chosen = g_settings_get_string (self->settings, "vulkan-device");
  g_auto(GStrv) labels = NULL;
  gboolean present = *chosen == '\0';

  if (self->context != NULL)
    {
      const char * const *ids, * const *shared;

      dc_context_get_vulkan_devices (self->context, &ids, &shared);
      self->device_ids = g_strdupv ((char **) ids);
      labels = g_strdupv ((char **) shared);
    }
  else
    {
      dc_context_list_vulkan_devices (&self->device_ids, &labels);
    }
  gtk_string_list_append (model, _("Automatic"));
  gtk_string_list_append (model, _("CPU"));
  gtk_string_list_append (model, _("Vulkan: the best device"));
  for (guint i = 0; labels[i] != NULL; i++)
    {
      /* Translators: a Vulkan device, then its id as --vulkan-device takes it. */
      g_autofree char *item = g_strdup_printf (_("Vulkan: %s, id %s"), labels[i],
                                               self->device_ids[i]);

      gtk_string_list_append (model, item);
      present = present || g_str_equal (chosen, self->device_ids[i]);
    }
  if (!present)
    {
      g_autofree char *item = g_strdup_printf (_("Vulkan: id %s (not found)"), chosen);
      gsize n = g_strv_length (self->device_ids);

      self->device_ids = g_renew (char *, self->device_ids, n + 2);
      self->device_ids[n] = g_strdup (chosen);
      self->device_ids[n + 1] = NULL;
      gtk_string_list_append (model, item);
    }
  adw_combo_row_set_model (self->backend_row, G_LIST_MODEL (model));
  adw_combo_row_set_selected (self->backend_row, backend_selected (self));
  g_signal_connect_object (self->backend_row, "notify::selected",
                           G_CALLBACK (backend_selected_cb), self, G_CONNECT_SWAPPED);
}

/* The gradient wire: its name in the settings ("f32", "bf16", "int8", as
 * train --gradient-wire), the row's position in the window. */
static const char * const wire_nicks[] = { "f32", "bf16", "int8" };

static gboolean
wire_to_row_mapping (GValue   *value,
                     GVariant *variant,
                     gpointer  user_data)
{
  const char *nick = g_variant_get_string (variant, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (wire_nicks); i++)
    if (g_str_equal (nick, wire_nicks[i]))
      {
        g_value_set_uint (value, i);
        return TRUE;
      }
  g_value_set_uint (value, 0);
  return TRUE;
}

static GVariant *
row_to_wire_mapping (const GValue       *value,
                     const GVariantType *expected_type,
                     gpointer            user_data)
{
  guint i = g_value_get_uint (value);

  return i < G_N_ELEMENTS (wire_nicks) ? g_variant_new_string (wire_nicks[i]) : NULL;
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
  g_settings_bind_with_mapping (self->settings, "group-gradient-wire", self->gradient_wire_row,
                                "selected", G_SETTINGS_BIND_DEFAULT,
                                wire_to_row_mapping, row_to_wire_mapping, NULL, NULL);
  g_settings_bind (self->settings, "group-autostart", self->autostart_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  fill_backend_row (self);
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

    case PROP_CONTEXT:
      self->context = g_value_dup_object (value);
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

    case PROP_CONTEXT:
      g_value_set_object (value, self->context);
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
  g_clear_object (&self->context);

  G_OBJECT_CLASS (dc_preferences_window_parent_class)->dispose (object);
}

static void
dc_preferences_window_finalize (GObject *object)
{
  DcPreferencesWindow *self = DC_PREFERENCES_WINDOW (object);

  g_strfreev (self->device_ids);

  G_OBJECT_CLASS (dc_preferences_window_parent_class)->finalize (object);
}

static void
dc_preferences_window_class_init (DcPreferencesWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->constructed = dc_preferences_window_constructed;
  object_class->dispose = dc_preferences_window_dispose;
  object_class->finalize = dc_preferences_window_finalize;
  object_class->get_property = dc_preferences_window_get_property;
  object_class->set_property = dc_preferences_window_set_property;

  properties[PROP_SETTINGS] =
    g_param_spec_object ("settings", NULL, NULL, G_TYPE_SETTINGS,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY |
                         G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_CONTEXT] =
    g_param_spec_object ("context", NULL, NULL, DC_TYPE_CONTEXT,
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
  gtk_widget_class_bind_template_child (widget_class, DcPreferencesWindow, gradient_wire_row);
}

static void
dc_preferences_window_init (DcPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
