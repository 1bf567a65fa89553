/* dc-join-room-dialog.c: asks for a room code and a signaling URL.
 *
 * The dialog only collects the two fields; whoever shows it answers the
 * "join" response (DcGroupPage calls dc_group_join_room(), which checks them).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include "dc-join-room-dialog.h"

struct _DcJoinRoomDialog
{
  AdwMessageDialog  parent_instance;

  /* template widgets */
  AdwEntryRow      *code_row;
  AdwEntryRow      *url_row;
};

G_DEFINE_FINAL_TYPE (DcJoinRoomDialog, dc_join_room_dialog, ADW_TYPE_MESSAGE_DIALOG)

/**
 * dc_join_room_dialog_new:
 * @signal_url: (nullable): the URL to offer, e.g. the last one used
 *
 * Returns: (transfer none): a new modal dialog, not yet presented
 */
DcJoinRoomDialog *
dc_join_room_dialog_new (GtkWindow  *parent,
                         const char *signal_url)
{
  DcJoinRoomDialog *self = g_object_new (DC_TYPE_JOIN_ROOM_DIALOG,
                                         "transient-for", parent,
                                         "modal", TRUE,
                                         NULL);

  if (signal_url != NULL)
    dc_join_room_dialog_set_url (self, signal_url);
  return self;
}

const char *
dc_join_room_dialog_get_code (DcJoinRoomDialog *self)
{
  g_return_val_if_fail (DC_IS_JOIN_ROOM_DIALOG (self), NULL);

  return gtk_editable_get_text (GTK_EDITABLE (self->code_row));
}

const char *
dc_join_room_dialog_get_url (DcJoinRoomDialog *self)
{
  g_return_val_if_fail (DC_IS_JOIN_ROOM_DIALOG (self), NULL);

  return gtk_editable_get_text (GTK_EDITABLE (self->url_row));
}

void
dc_join_room_dialog_set_code (DcJoinRoomDialog *self,
                              const char       *code)
{
  g_return_if_fail (DC_IS_JOIN_ROOM_DIALOG (self));

  gtk_editable_set_text (GTK_EDITABLE (self->code_row), code);
}

void
dc_join_room_dialog_set_url (DcJoinRoomDialog *self,
                             const char       *url)
{
  g_return_if_fail (DC_IS_JOIN_ROOM_DIALOG (self));

  gtk_editable_set_text (GTK_EDITABLE (self->url_row), url);
}

/* Joining needs both fields; dc_group_join_room() checks what they hold. */
static void
entry_changed_cb (DcJoinRoomDialog *self)
{
  g_autofree char *code = g_strstrip (g_strdup (dc_join_room_dialog_get_code (self)));
  g_autofree char *url = g_strstrip (g_strdup (dc_join_room_dialog_get_url (self)));

  adw_message_dialog_set_response_enabled (ADW_MESSAGE_DIALOG (self), "join",
                                           *code != '\0' && *url != '\0');
}

static void
dc_join_room_dialog_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), DC_TYPE_JOIN_ROOM_DIALOG);

  G_OBJECT_CLASS (dc_join_room_dialog_parent_class)->dispose (object);
}

static void
dc_join_room_dialog_class_init (DcJoinRoomDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dc_join_room_dialog_dispose;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-join-room-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, DcJoinRoomDialog, code_row);
  gtk_widget_class_bind_template_child (widget_class, DcJoinRoomDialog, url_row);
  gtk_widget_class_bind_template_callback (widget_class, entry_changed_cb);
}

static void
dc_join_room_dialog_init (DcJoinRoomDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
