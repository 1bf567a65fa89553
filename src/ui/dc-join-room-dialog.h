/* dc-join-room-dialog.h: asks for a room code and a signaling URL.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define DC_TYPE_JOIN_ROOM_DIALOG (dc_join_room_dialog_get_type ())

G_DECLARE_FINAL_TYPE (DcJoinRoomDialog, dc_join_room_dialog, DC, JOIN_ROOM_DIALOG,
                      AdwMessageDialog)

DcJoinRoomDialog *dc_join_room_dialog_new          (GtkWindow        *parent,
                                                    const char       *signal_url);
const char       *dc_join_room_dialog_get_code     (DcJoinRoomDialog *self);
const char       *dc_join_room_dialog_get_url      (DcJoinRoomDialog *self);
void              dc_join_room_dialog_set_code     (DcJoinRoomDialog *self,
                                                    const char       *code);
void              dc_join_room_dialog_set_url      (DcJoinRoomDialog *self,
                                                    const char       *url);

G_END_DECLS
