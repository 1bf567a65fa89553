/* dc-signaling.h: one device's connection to the signaling service.
 *
 * Joins a room by its id, relays messages to other members signed with the
 * room key, and emits only messages whose signature verifies. Main thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

#include "dc-room.h"

G_BEGIN_DECLS

#define DC_TYPE_SIGNALING (dc_signaling_get_type ())
G_DECLARE_FINAL_TYPE (DcSignaling, dc_signaling, DC, SIGNALING, GObject)

DcSignaling *dc_signaling_new          (const char   *url,
                                        const DcRoom *room,
                                        const char   *room_id_override);
void         dc_signaling_connect      (DcSignaling  *self,
                                        gboolean      create);
void         dc_signaling_close        (DcSignaling  *self);
const char  *dc_signaling_get_id       (DcSignaling  *self);
const char  *dc_signaling_get_host_id  (DcSignaling  *self);
gboolean     dc_signaling_is_host      (DcSignaling  *self);
void         dc_signaling_send         (DcSignaling  *self,
                                        const char   *to,
                                        JsonObject   *body);
const char  *dc_signaling_get_address  (DcSignaling  *self);
const char  *dc_signaling_get_peer_address (DcSignaling *self,
                                            const char  *id);
void         dc_signaling_admit        (DcSignaling  *self,
                                        const char   *id);

G_END_DECLS
