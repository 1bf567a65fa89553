/* dc-room.h: room codes and the keys derived from them.
 *
 * A room code never leaves the device. The signaling service sees only the
 * room id, a keyed hash of the code; the devices authenticate every message
 * they relay through it with a second key derived from the code
 * (docs/PROTOCOL.md, "Rooms").
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_ROOM_KEY_SIZE 32

typedef struct
{
  char   *code;
  char   *room_id;                  /* 64 hex digits, what the server sees */
  guint8  key[DC_ROOM_KEY_SIZE];    /* HMAC key for relayed messages */
} DcRoom;

char   *dc_room_generate_code  (void);
DcRoom *dc_room_new            (const char    *code);
void    dc_room_free           (DcRoom        *room);
char   *dc_room_sign           (const DcRoom  *room,
                                const char    *from,
                                const char    *to,
                                const char    *body);
gboolean dc_room_verify        (const DcRoom  *room,
                                const char    *from,
                                const char    *to,
                                const char    *body,
                                const char    *mac);
char   *dc_room_random_hex     (gsize          n_bytes);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcRoom, dc_room_free)

G_END_DECLS
