/* dc-signal-server.h: the signaling service (libsoup WebSockets).
 *
 * Introduces devices that present the same room id and relays their
 * authenticated messages; it never sees room codes, keys or training data.
 * Lives on the thread-default main context it was created on.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define DC_TYPE_SIGNAL_SERVER (dc_signal_server_get_type ())
G_DECLARE_FINAL_TYPE (DcSignalServer, dc_signal_server, DC, SIGNAL_SERVER, GObject)

/* What one remote address may hold at once (docs/PROTOCOL.md, "Limits"). */
typedef struct
{
  guint join_timeout_s;               /* close connections with no join after this; 0: never */
  guint max_connections_per_address;  /* open WebSockets */
  guint max_rooms_per_address;        /* rooms it created that still exist */
  guint max_pending_per_address;      /* joins still waiting for a host's approval */
} DcSignalLimits;

/* Ten seconds is ample for a join, which devices send as soon as connected. */
#define DC_SIGNAL_DEFAULT_JOIN_TIMEOUT_S   10
/* A classroom or office behind one NAT: a few dozen devices, one WebSocket each. */
#define DC_SIGNAL_DEFAULT_MAX_CONNECTIONS  64
/* Each device hosts one room at a time; as many hosting devices per NAT as a team has. */
#define DC_SIGNAL_DEFAULT_MAX_ROOMS        16
/* A person approves each join by hand; more waiting than this from one address is a flood. */
#define DC_SIGNAL_DEFAULT_MAX_PENDING      16

DcSignalServer *dc_signal_server_new       (void);
gboolean        dc_signal_server_listen    (DcSignalServer  *self,
                                            const char      *address,
                                            guint            port,
                                            const char      *tls_cert_file,
                                            const char      *tls_key_file,
                                            GError         **error);
char           *dc_signal_server_dup_url   (DcSignalServer  *self);
guint           dc_signal_server_get_port  (DcSignalServer  *self);
guint           dc_signal_server_get_n_rooms (DcSignalServer *self);
void            dc_signal_limits_init_default (DcSignalLimits *limits);
void            dc_signal_server_set_limits   (DcSignalServer       *self,
                                               const DcSignalLimits *limits);

G_END_DECLS
