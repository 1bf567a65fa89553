/* dc-window.c: the main window, with the Train, Infer and Devices views.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-group-page.h"
#include "dc-infer-page.h"
#include "dc-window.h"

struct _DcWindow
{
  AdwApplicationWindow  parent_instance;

  /* template widgets */
  AdwToastOverlay      *toast_overlay;
  AdwViewStack         *view_stack;
  DcTrainPage          *train_page;
  DcInferPage          *infer_page;
  DcGroupPage          *group_page;
  AdwViewStackPage     *devices_stack_page;

  /* owned references */
  GSettings            *settings;

  /* owned references */
  DcContext            *context;   /* construct-only (nullable in tests) */

  /* state */
  guint                 close_confirmed : 1;
};

enum {
  PROP_0,
  PROP_CONTEXT,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (DcWindow, dc_window, ADW_TYPE_APPLICATION_WINDOW)

DcWindow *
dc_window_new (DcApplication *application)
{
  DcWindow *self = g_object_new (DC_TYPE_WINDOW,
                                 "application", application,
                                 "context", dc_application_get_context (application),
                                 NULL);

  /* Not in constructed(): GtkWindow:application is set after it runs. */
  dc_group_page_set_group (self->group_page, dc_application_get_group (application));
  /* The Infer view runs prompts across the group and shows this device's
   * share of other devices' runs. */
  if (dc_application_get_group (application) != NULL)
    dc_infer_page_set_group (self->infer_page, dc_application_get_group (application));
  if (dc_application_get_ring_server (application) != NULL)
    dc_infer_page_set_ring_server (self->infer_page,
                                   dc_application_get_ring_server (application));
  /* The Devices tab counts the connected devices. */
  g_object_bind_property (dc_application_get_group (application), "n-peers",
                          self->devices_stack_page, "badge-number", G_BINDING_SYNC_CREATE);
  return self;
}

/**
 * dc_window_get_visible_view:
 *
 * Returns: (transfer none): "train", "infer" or "devices"
 */
const char *
dc_window_get_visible_view (DcWindow *self)
{
  g_return_val_if_fail (DC_IS_WINDOW (self), NULL);

  return adw_view_stack_get_visible_child_name (self->view_stack);
}

void
dc_window_add_toast (DcWindow   *self,
                     const char *message)
{
  g_return_if_fail (DC_IS_WINDOW (self));

  adw_toast_overlay_add_toast (self->toast_overlay, adw_toast_new (message));
}

/**
 * dc_window_get_train_page:
 *
 * Returns: (transfer none): the Train view
 */
DcTrainPage *
dc_window_get_train_page (DcWindow *self)
{
  g_return_val_if_fail (DC_IS_WINDOW (self), NULL);

  return self->train_page;
}

/**
 * dc_window_get_infer_page:
 *
 * Returns: (transfer none): the Infer view
 */
DcInferPage *
dc_window_get_infer_page (DcWindow *self)
{
  g_return_val_if_fail (DC_IS_WINDOW (self), NULL);

  return self->infer_page;
}

/**
 * dc_window_get_group_page:
 *
 * Returns: (transfer none): the Devices view
 */
DcGroupPage *
dc_window_get_group_page (DcWindow *self)
{
  g_return_val_if_fail (DC_IS_WINDOW (self), NULL);

  return self->group_page;
}

static void
toast_cb (DcWindow   *self,
          const char *message)
{
  dc_window_add_toast (self, message);
}

/* A group joined without asking the user: the toast undoes it. */
static void
offer_leave_cb (DcWindow   *self,
                const char *message)
{
  AdwToast *toast = adw_toast_new (message);

  adw_toast_set_button_label (toast, _("_Leave"));
  adw_toast_set_action_name (toast, "win.leave-group");
  adw_toast_set_timeout (toast, 10);
  adw_toast_overlay_add_toast (self->toast_overlay, toast);
}

static void
leave_group_action (GtkWidget  *widget,
                    const char *action_name,
                    GVariant   *parameter)
{
  DcWindow *self = DC_WINDOW (widget);

  gtk_widget_activate_action (GTK_WIDGET (self->group_page), "group.leave", NULL);
}

static void
save_window_state (DcWindow *self)
{
  int width, height;

  gtk_window_get_default_size (GTK_WINDOW (self), &width, &height);
  g_settings_delay (self->settings);
  g_settings_set_int (self->settings, "window-width", width);
  g_settings_set_int (self->settings, "window-height", height);
  g_settings_set_boolean (self->settings, "window-maximized",
                          gtk_window_is_maximized (GTK_WINDOW (self)));
  g_settings_set_string (self->settings, "last-view", dc_window_get_visible_view (self));
  g_settings_apply (self->settings);
}

static gboolean
close_after_dialog_cb (gpointer user_data)
{
  gtk_window_close (GTK_WINDOW (user_data));
  return G_SOURCE_REMOVE;
}

static void
confirm_close_response_cb (AdwMessageDialog *dialog,
                           const char       *response,
                           DcWindow         *self)
{
  if (!g_str_equal (response, "stop"))
    return;
  dc_train_page_stop (self->train_page);
  self->close_confirmed = TRUE;
  /* Close once the dialog has finished answering: it is transient for us. */
  g_idle_add_full (G_PRIORITY_DEFAULT_IDLE, close_after_dialog_cb, g_object_ref (self),
                   g_object_unref);
}

static gboolean
dc_window_close_request (GtkWindow *window)
{
  DcWindow *self = DC_WINDOW (window);

  /* Closing mid-run would throw the run away: ask first. */
  if (!self->close_confirmed && dc_train_page_is_running (self->train_page))
    {
      GtkWidget *dialog;

      dialog = adw_message_dialog_new (window, _("Stop Training?"),
                                       _("A training run is in progress. Closing the window "
                                         "stops it, and what was not saved as a checkpoint "
                                         "is lost."));
      adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                        "cancel", _("_Keep Training"),
                                        "stop", _("_Stop and Close"),
                                        NULL);
      adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "stop",
                                                  ADW_RESPONSE_DESTRUCTIVE);
      adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
      adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
      g_signal_connect_object (dialog, "response", G_CALLBACK (confirm_close_response_cb),
                               self, 0);
      gtk_window_present (GTK_WINDOW (dialog));
      return TRUE;
    }

  save_window_state (self);

  return GTK_WINDOW_CLASS (dc_window_parent_class)->close_request (window);
}

static void
dc_window_constructed (GObject *object)
{
  DcWindow *self = DC_WINDOW (object);
  GtkApplication *app = gtk_window_get_application (GTK_WINDOW (self));
  g_autoptr(GPropertyAction) view_action = NULL;
  g_autofree char *last_view = NULL;

  G_OBJECT_CLASS (dc_window_parent_class)->constructed (object);

  /* A window built without an application (tests) still gets settings. */
  if (DC_IS_APPLICATION (app))
    self->settings = g_object_ref (dc_application_get_settings (DC_APPLICATION (app)));
  else
    self->settings = g_settings_new (APP_ID);

  gtk_window_set_default_size (GTK_WINDOW (self),
                               g_settings_get_int (self->settings, "window-width"),
                               g_settings_get_int (self->settings, "window-height"));
  if (g_settings_get_boolean (self->settings, "window-maximized"))
    gtk_window_maximize (GTK_WINDOW (self));

  dc_train_page_set_settings (self->train_page, self->settings);
  dc_train_page_set_context (self->train_page, self->context);
  g_signal_connect_object (self->train_page, "toast", G_CALLBACK (toast_cb), self,
                           G_CONNECT_SWAPPED);

  dc_infer_page_set_settings (self->infer_page, self->settings);
  dc_group_page_set_settings (self->group_page, self->settings);
  dc_infer_page_set_context (self->infer_page, self->context);
  g_signal_connect_object (self->infer_page, "toast", G_CALLBACK (toast_cb), self,
                           G_CONNECT_SWAPPED);

  g_signal_connect_object (self->group_page, "toast", G_CALLBACK (toast_cb), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->group_page, "offer-leave", G_CALLBACK (offer_leave_cb), self,
                           G_CONNECT_SWAPPED);

  last_view = g_settings_get_string (self->settings, "last-view");
  if (adw_view_stack_get_child_by_name (self->view_stack, last_view) != NULL)
    adw_view_stack_set_visible_child_name (self->view_stack, last_view);

  /* win.view switches views by name ("train", "infer"); its state follows the stack. */
  view_action = g_property_action_new ("view", self->view_stack, "visible-child-name");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (view_action));
}

static void
dc_window_dispose (GObject *object)
{
  DcWindow *self = DC_WINDOW (object);

  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_WINDOW);
  g_clear_object (&self->settings);
  g_clear_object (&self->context);

  G_OBJECT_CLASS (dc_window_parent_class)->dispose (object);
}

static void
dc_window_get_property (GObject    *object,
                        guint       prop_id,
                        GValue     *value,
                        GParamSpec *pspec)
{
  DcWindow *self = DC_WINDOW (object);

  switch (prop_id)
    {
    case PROP_CONTEXT:
      g_value_set_object (value, self->context);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_window_set_property (GObject      *object,
                        guint         prop_id,
                        const GValue *value,
                        GParamSpec   *pspec)
{
  DcWindow *self = DC_WINDOW (object);

  switch (prop_id)
    {
    case PROP_CONTEXT:
      self->context = g_value_dup_object (value);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_window_class_init (DcWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  GtkWindowClass *window_class = GTK_WINDOW_CLASS (klass);

  object_class->constructed = dc_window_constructed;
  object_class->dispose = dc_window_dispose;
  object_class->get_property = dc_window_get_property;
  object_class->set_property = dc_window_set_property;
  window_class->close_request = dc_window_close_request;

  /* The application's context: the backend, the Hugging Face client, the
   * group; handed on to the pages. NULL in tests that build a bare window. */
  properties[PROP_CONTEXT] =
    g_param_spec_object ("context", NULL, NULL, DC_TYPE_CONTEXT,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS
                         | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_template_from_resource (widget_class, RESOURCE_BASE "/ui/dc-window.ui");
  gtk_widget_class_bind_template_child (widget_class, DcWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, DcWindow, view_stack);
  gtk_widget_class_bind_template_child (widget_class, DcWindow, train_page);
  gtk_widget_class_bind_template_child (widget_class, DcWindow, infer_page);
  gtk_widget_class_bind_template_child (widget_class, DcWindow, group_page);
  gtk_widget_class_bind_template_child (widget_class, DcWindow, devices_stack_page);

  gtk_widget_class_install_action (widget_class, "win.leave-group", NULL, leave_group_action);
}

static void
dc_window_init (DcWindow *self)
{
  g_type_ensure (DC_TYPE_TRAIN_PAGE);
  g_type_ensure (DC_TYPE_INFER_PAGE);
  g_type_ensure (DC_TYPE_GROUP_PAGE);

  gtk_widget_init_template (GTK_WIDGET (self));

  if (DEVELOPMENT_BUILD)
    gtk_widget_add_css_class (GTK_WIDGET (self), "devel");
}
