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

G_END_DECLS
