/* dc-discovery.h: finding a group on the local network without configuration.
 *
 * UDP multicast on 239.255.77.77:47777 (docs/PROTOCOL.md, "Discovery").
 * Main thread.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define DC_DISCOVERY_GROUP        "239.255.77.77"
#define DC_DISCOVERY_PORT         47777
#define DC_DISCOVERY_INTERVAL_MS  1000
#define DC_DISCOVERY_MAX_SIZE     1024

#define DC_TYPE_DISCOVERY (dc_discovery_get_type ())
G_DECLARE_FINAL_TYPE (DcDiscovery, dc_discovery, DC, DISCOVERY, GObject)

DcDiscovery *dc_discovery_new            (guint         port);
gboolean     dc_discovery_start          (DcDiscovery  *self,
                                          GError      **error);
void         dc_discovery_announce       (DcDiscovery  *self,
                                          guint         signal_port,
                                          const char   *room_code,
                                          const char   *name);

G_END_DECLS
