/* dc-group-page.c: the Devices view: this device's group and its peers.
 *
 * Shows the state of the application's DcGroup (bound through notify) and
 * the connected devices from the hello each one sent, and offers the group.*
 * actions. As host it shows one AdwMessageDialog per device asking to join
 * and passes the answer to dc_group_answer_request(); closing such a dialog
 * declines, so no request is left waiting for an answer nobody can give.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-group-page.h"
#include "dc-join-room-dialog.h"
#include "mesh/dc-identity.h"
#include "mesh/dc-mesh-error.h"

struct _DcGroupPage
{
  AdwBin       parent_instance;

  /* template widgets */
  AdwActionRow *name_row;
  AdwActionRow *identity_row;
  AdwActionRow *state_row;
  AdwActionRow *room_row;
  AdwActionRow *url_row;
  GtkListBox   *peer_list;

  /* owned references */
  DcGroup      *group;
  GPtrArray    *requests;     /* AdwMessageDialog, open approval requests */
  char         *last_url;     /* offered again by the next Join dialog */
  GSettings    *settings;     /* nullable: "signal-url" keeps last_url across runs */
};

G_DEFINE_FINAL_TYPE (DcGroupPage, dc_group_page, ADW_TYPE_BIN)

enum
{
  SIGNAL_TOAST,
  SIGNAL_OFFER_LEAVE,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
toast (DcGroupPage *self,
       const char  *message)
{
  g_signal_emit (self, signals[SIGNAL_TOAST], 0, message);
}

static const char *
state_text (DcGroupState state)
{
  switch (state)
    {
    case DC_GROUP_STATE_SEARCHING:
      return _("Searching the local network…");
    case DC_GROUP_STATE_JOINING:
      return _("Joining…");
    case DC_GROUP_STATE_HOST:
      return _("Host of a group");
    case DC_GROUP_STATE_MEMBER:
      return _("Member of a group");
    case DC_GROUP_STATE_OFFLINE:
    default:
      return _("Offline");
    }
}

static void
update_actions (DcGroupPage *self)
{
  DcGroupState state = self->group != NULL ? dc_group_get_state (self->group)
                                           : DC_GROUP_STATE_OFFLINE;
  gboolean has_group = self->group != NULL;

  gtk_widget_action_set_enabled (GTK_WIDGET (self), "group.search", has_group);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "group.create-room", has_group);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "group.join-room", has_group);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "group.leave",
                                 state != DC_GROUP_STATE_OFFLINE);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "group.copy-code",
                                 has_group && dc_group_get_room_code (self->group) != NULL);
}

/* A request dialog outlives neither its room nor this device's hosting. */
static void
close_requests (DcGroupPage *self)
{
  g_autoptr(GPtrArray) open = g_steal_pointer (&self->requests);

  self->requests = g_ptr_array_new ();
  for (guint i = 0; i < open->len; i++)
    gtk_window_destroy (g_ptr_array_index (open, i));
}

static void
update (DcGroupPage *self)
{
  const char *code = self->group != NULL ? dc_group_get_room_code (self->group) : NULL;
  const char *url = self->group != NULL ? dc_group_get_signal_url (self->group) : NULL;
  DcGroupState state = self->group != NULL ? dc_group_get_state (self->group)
                                           : DC_GROUP_STATE_OFFLINE;

  g_autofree char *fingerprint = NULL;
  g_autofree char *identity = NULL;
  const char *address = self->group != NULL ? dc_group_get_address (self->group) : NULL;

  adw_action_row_set_subtitle (self->name_row,
                               self->group != NULL ? dc_group_get_name (self->group) : "");
  /* What a host's approval dialog shows for this device, to compare. */
  if (self->group != NULL)
    fingerprint = dc_group_dup_fingerprint (self->group, FALSE);
  if (fingerprint != NULL && address != NULL)
    /* Translators: a certificate fingerprint, then this device's network address. */
    identity = g_strdup_printf (_("%s · address %s"), fingerprint, address);
  gtk_widget_set_visible (GTK_WIDGET (self->identity_row), fingerprint != NULL);
  adw_action_row_set_subtitle (self->identity_row,
                               identity != NULL ? identity : fingerprint != NULL ? fingerprint : "");
  adw_action_row_set_subtitle (self->state_row, state_text (state));
  gtk_widget_set_visible (GTK_WIDGET (self->room_row), code != NULL);
  adw_action_row_set_subtitle (self->room_row, code != NULL ? code : "");
  gtk_widget_set_visible (GTK_WIDGET (self->url_row), url != NULL);
  adw_action_row_set_subtitle (self->url_row, url != NULL ? url : "");
  if (state != DC_GROUP_STATE_HOST)
    close_requests (self);
  update_actions (self);
}

static GtkWidget *
create_peer_row (gpointer item,
                 gpointer user_data)
{
  DcPeer *peer = item;
  DcMeshHello *hello = dc_peer_get_hello (peer);
  GtkWidget *row = adw_action_row_new ();
  g_autofree char *subtitle = NULL;

  /* The hello's strings come from the peer: shown as text, never markup. */
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  /* dc_peer_get_name() is unique in the mesh (a second "laptop" is "laptop (2)"). */
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row),
                                 hello != NULL ? dc_peer_get_name (peer) : dc_peer_get_id (peer));
  if (hello != NULL)
    /* Translators: a connected device's compute backend and probe hash. */
    subtitle = g_strdup_printf (_("Backend %s · probe %s"),
                                hello->backend != NULL ? hello->backend : "",
                                hello->probe_hash != NULL && *hello->probe_hash != '\0'
                                ? hello->probe_hash : _("unknown"));
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle != NULL ? subtitle : "");
  adw_action_row_set_icon_name (ADW_ACTION_ROW (row), "computer-symbolic");
  return row;
}

static void
request_response_cb (AdwMessageDialog *dialog,
                     const char       *response,
                     DcGroupPage      *self)
{
  const char *id = g_object_get_data (G_OBJECT (dialog), "dc-request-id");

  if (self->group != NULL && id != NULL)
    dc_group_answer_request (self->group, id, g_str_equal (response, "accept"));
}

static void
request_destroy_cb (GtkWidget   *dialog,
                    DcGroupPage *self)
{
  if (self->requests != NULL)
    g_ptr_array_remove (self->requests, dialog);
}

static void
approval_requested_cb (DcGroup     *group,
                       const char  *id,
                       const char  *name,
                       const char  *fingerprint,
                       const char  *address,
                       const char  *via,
                       DcGroupPage *self)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkWidget *dialog;
  g_autofree char *short_form = dc_identity_short_fingerprint (fingerprint);
  const char *how;

  /* Say honestly what the room code proves: nothing, when it is announced. */
  if (g_str_equal (via, "lan"))
    how = _("This group is announced on the local network, so every device on it can "
            "read the room code: knowing it proves nothing.");
  else
    how = _("It has the room code that you or a member shared, and anyone it was passed "
            "on to has it too.");
  dialog = adw_message_dialog_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                   _("Let a Device Join?"), NULL);
  /* Translators: the name the other device gave itself, its certificate
   * fingerprint, its network address, then a sentence on the room code. */
  adw_message_dialog_format_body (ADW_MESSAGE_DIALOG (dialog),
                                  _("“%s” asks to join.\n\n"
                                    "Certificate: %s\nAddress: %s\n\n"
                                    "%s Accept only if the device’s own window "
                                    "(Devices, Certificate) shows the same certificate."),
                                  name, short_form != NULL ? short_form : _("none sent"),
                                  *address != '\0' ? address : _("unknown"), how);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog),
                                    "decline", _("_Decline"),
                                    "accept", _("_Accept"),
                                    NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "decline",
                                              ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "accept",
                                              ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_close_response (ADW_MESSAGE_DIALOG (dialog), "decline");
  g_object_set_data_full (G_OBJECT (dialog), "dc-request-id", g_strdup (id), g_free);
  g_object_set_data_full (G_OBJECT (dialog), "dc-request-name", g_strdup (name), g_free);
  g_signal_connect_object (dialog, "response", G_CALLBACK (request_response_cb), self, 0);
  /* Answered or not, a destroyed dialog leaves the list. */
  g_signal_connect_object (dialog, "destroy", G_CALLBACK (request_destroy_cb), self, 0);
  g_ptr_array_add (self->requests, dialog);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
approval_withdrawn_cb (DcGroup     *group,
                       const char  *id,
                       DcGroupPage *self)
{
  for (guint i = 0; i < self->requests->len; i++)
    {
      GtkWindow *dialog = g_ptr_array_index (self->requests, i);
      g_autofree char *text = NULL;

      if (g_strcmp0 (g_object_get_data (G_OBJECT (dialog), "dc-request-id"), id) != 0)
        continue;
      /* Translators: %s is the name the other device gave itself. */
      text = g_strdup_printf (_("“%s” stopped asking to join"),
                              (const char *) g_object_get_data (G_OBJECT (dialog),
                                                                "dc-request-name"));
      /* Destroying emits no response; the destroy handler drops it from the list. */
      gtk_window_destroy (dialog);
      toast (self, text);
      return;
    }
}

static void
event_cb (DcGroup     *group,
          const char  *event,
          const char  *peer,
          guint        n_peers,
          const char  *reason,
          DcGroupPage *self)
{
  g_autofree char *text = NULL;

  if (g_str_equal (event, "peer-joined") && peer != NULL)
    /* Translators: %s is another device's name. */
    text = g_strdup_printf (_("“%s” joined the group"), peer);
  else if (g_str_equal (event, "peer-left") && peer != NULL)
    text = g_strdup_printf (_("“%s” left the group"), peer);
  else if (g_str_equal (event, "declined") && peer != NULL)
    text = g_strdup_printf (_("“%s” was declined"), peer);
  else if (g_str_equal (event, "refused") && g_strcmp0 (reason, "auth") == 0)
    text = g_strdup (_("A device with a wrong room code was refused"));
  else if (g_str_equal (event, "refused") && g_strcmp0 (reason, "fingerprint") == 0)
    text = g_strdup (_("A device connected with another certificate than it asked with, "
                       "and was disconnected"));
  else if (g_str_equal (event, "refused") && peer != NULL)
    /* Translators: %s is another device's name; it was declined a moment ago. */
    text = g_strdup_printf (_("“%s” asked again too soon and was refused"), peer);
  else if (g_str_equal (event, "unverified")
           && dc_group_get_state (group) == DC_GROUP_STATE_JOINING)
    text = g_strdup (_("A message from the group could not be verified: check the room code"));
  else if (g_str_equal (event, "joined") && g_strcmp0 (reason, "member") == 0
           && dc_group_get_via_lan (group))
    {
      /* Joined without being asked: say so, and offer the way back. */
      g_signal_emit (self, signals[SIGNAL_OFFER_LEAVE], 0,
                     _("Joined a group found on the local network"));
      return;
    }
  else if (g_str_equal (event, "host"))
    text = g_strdup (_("The host left: this device now hosts the group"));
  if (text != NULL)
    toast (self, text);
}

static void
failed_cb (DcGroup      *group,
           const GError *error,
           DcGroupPage  *self)
{
  g_autofree char *text = NULL;

  g_message ("group failed: %s", error->message);
  if (g_error_matches (error, DC_MESH_ERROR, DC_MESH_ERROR_DECLINED))
    text = g_strdup (_("The group’s host declined this device"));
  else if (g_error_matches (error, DC_MESH_ERROR, DC_MESH_ERROR_AUTH))
    text = g_strdup (_("The room code is wrong"));
  else if (g_error_matches (error, DC_MESH_ERROR, DC_MESH_ERROR_NO_ROOM))
    text = g_strdup (_("Nobody is in a room with this code"));
  else if (g_error_matches (error, DC_MESH_ERROR, DC_MESH_ERROR_MISSING_PLUGINS))
    text = g_strdup (_("Groups need GStreamer plugins that are not installed"));
  else
    /* Translators: %s is a technical reason, in English. */
    text = g_strdup_printf (_("Could not take part in a group: %s"), error->message);
  toast (self, text);
}

static void
report (DcGroupPage  *self,
        const GError *error)
{
  g_autofree char *text = NULL;

  g_message ("group action failed: %s", error->message);
  /* Translators: %s is a technical reason, in English. */
  text = g_strdup_printf (_("Could not start: %s"), error->message);
  toast (self, text);
}

/**
 * dc_group_page_set_group:
 * @group: (nullable): the application's group
 */
void
dc_group_page_set_group (DcGroupPage *self,
                         DcGroup     *group)
{
  g_return_if_fail (DC_IS_GROUP_PAGE (self));
  g_return_if_fail (group == NULL || DC_IS_GROUP (group));

  if (self->group == group)
    return;
  if (self->group != NULL)
    g_signal_handlers_disconnect_by_data (self->group, self);
  g_set_object (&self->group, group);
  close_requests (self);
  gtk_list_box_bind_model (self->peer_list, group != NULL ? dc_group_get_peers (group) : NULL,
                           group != NULL ? create_peer_row : NULL, NULL, NULL);
  if (group != NULL)
    {
      g_signal_connect_object (group, "notify", G_CALLBACK (update), self, G_CONNECT_SWAPPED);
      g_signal_connect_object (group, "approval-requested", G_CALLBACK (approval_requested_cb),
                               self, 0);
      g_signal_connect_object (group, "approval-withdrawn", G_CALLBACK (approval_withdrawn_cb),
                               self, 0);
      g_signal_connect_object (group, "event", G_CALLBACK (event_cb), self, 0);
      g_signal_connect_object (group, "failed", G_CALLBACK (failed_cb), self, 0);
    }
  update (self);
}

/**
 * dc_group_page_get_group:
 *
 * Returns: (transfer none) (nullable): the group shown
 */
DcGroup *
dc_group_page_get_group (DcGroupPage *self)
{
  g_return_val_if_fail (DC_IS_GROUP_PAGE (self), NULL);

  return self->group;
}

static void
search_action (GtkWidget  *widget,
               const char *action_name,
               GVariant   *parameter)
{
  DcGroupPage *self = DC_GROUP_PAGE (widget);
  g_autoptr(GError) error = NULL;

  if (!dc_group_start_discovery (self->group, 0, NULL, &error))
    report (self, error);
}

static void
create_room_action (GtkWidget  *widget,
                    const char *action_name,
                    GVariant   *parameter)
{
  DcGroupPage *self = DC_GROUP_PAGE (widget);
  g_autoptr(GError) error = NULL;

  if (!dc_group_create_room (self->group, NULL, &error))
    report (self, error);
}

static void
join_response_cb (DcJoinRoomDialog *dialog,
                  const char       *response,
                  DcGroupPage      *self)
{
  g_autoptr(GError) error = NULL;

  if (!g_str_equal (response, "join") || self->group == NULL)
    return;
  g_free (self->last_url);
  self->last_url = g_strdup (dc_join_room_dialog_get_url (dialog));
  if (self->settings != NULL)
    g_settings_set_string (self->settings, "signal-url", self->last_url);
  if (!dc_group_join_room (self->group, dc_join_room_dialog_get_url (dialog),
                           dc_join_room_dialog_get_code (dialog), &error))
    report (self, error);
}

static void
join_room_action (GtkWidget  *widget,
                  const char *action_name,
                  GVariant   *parameter)
{
  DcGroupPage *self = DC_GROUP_PAGE (widget);
  GtkRoot *root = gtk_widget_get_root (widget);
  DcJoinRoomDialog *dialog;
  g_autofree char *url = self->settings != NULL
                         ? g_settings_get_string (self->settings, "signal-url")
                         : g_strdup (self->last_url);

  dialog = dc_join_room_dialog_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                    url != NULL && *url != '\0' ? url : NULL);
  g_signal_connect_object (dialog, "response", G_CALLBACK (join_response_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
leave_action (GtkWidget  *widget,
              const char *action_name,
              GVariant   *parameter)
{
  dc_group_leave (DC_GROUP_PAGE (widget)->group);
}

/**
 * dc_group_page_set_settings:
 *
 * The Join dialog then offers the "signal-url" setting (Preferences ›
 * Network › *Signaling service*), which a Join updates.
 */
void
dc_group_page_set_settings (DcGroupPage *self,
                            GSettings   *settings)
{
  g_return_if_fail (DC_IS_GROUP_PAGE (self));
  g_return_if_fail (G_IS_SETTINGS (settings));

  g_set_object (&self->settings, settings);
}

static void
copy_code_action (GtkWidget  *widget,
                  const char *action_name,
                  GVariant   *parameter)
{
  DcGroupPage *self = DC_GROUP_PAGE (widget);
  const char *code = dc_group_get_room_code (self->group);

  if (code == NULL)
    return;
  gdk_clipboard_set_text (gtk_widget_get_clipboard (widget), code);
  toast (self, _("Room code copied"));
}

static void
dc_group_page_dispose (GObject *object)
{
  DcGroupPage *self = DC_GROUP_PAGE (object);

  if (self->requests != NULL)
    close_requests (self);
  if (self->group != NULL)
    g_signal_handlers_disconnect_by_data (self->group, self);
  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_GROUP_PAGE);
  g_clear_object (&self->group);
  g_clear_object (&self->settings);

  G_OBJECT_CLASS (dc_group_page_parent_class)->dispose (object);
}

static void
dc_group_page_finalize (GObject *object)
{
  DcGroupPage *self = DC_GROUP_PAGE (object);

  g_clear_pointer (&self->requests, g_ptr_array_unref);
  g_free (self->last_url);

  G_OBJECT_CLASS (dc_group_page_parent_class)->finalize (object);
}

static void
dc_group_page_class_init (DcGroupPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dc_group_page_dispose;
  object_class->finalize = dc_group_page_finalize;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-group-page.ui");
  gtk_widget_class_bind_template_child (widget_class, DcGroupPage, name_row);
  gtk_widget_class_bind_template_child (widget_class, DcGroupPage, identity_row);
  gtk_widget_class_bind_template_child (widget_class, DcGroupPage, state_row);
  gtk_widget_class_bind_template_child (widget_class, DcGroupPage, room_row);
  gtk_widget_class_bind_template_child (widget_class, DcGroupPage, url_row);
  gtk_widget_class_bind_template_child (widget_class, DcGroupPage, peer_list);

  gtk_widget_class_install_action (widget_class, "group.search", NULL, search_action);
  gtk_widget_class_install_action (widget_class, "group.create-room", NULL, create_room_action);
  gtk_widget_class_install_action (widget_class, "group.join-room", NULL, join_room_action);
  gtk_widget_class_install_action (widget_class, "group.leave", NULL, leave_action);
  gtk_widget_class_install_action (widget_class, "group.copy-code", NULL, copy_code_action);

  /**
   * DcGroupPage::toast:
   * @message: a short message for the window to show
   */
  signals[SIGNAL_TOAST] =
    g_signal_new ("toast", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_STRING);
  /**
   * DcGroupPage::offer-leave:
   * @message: a short message for a toast with a Leave button (win.leave-group)
   */
  signals[SIGNAL_OFFER_LEAVE] =
    g_signal_new ("offer-leave", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dc_group_page_init (DcGroupPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->requests = g_ptr_array_new ();
  update (self);
}
