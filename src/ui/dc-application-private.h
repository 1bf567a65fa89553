/* dc-application-private.h: what the tests check of DcApplication.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "dc-context.h"
#include "mesh/dc-peer.h"

G_BEGIN_DECLS

void _dc_application_fill_peer_config (GSettings    *settings,
                                       DcPeerConfig *config);
DcContext *_dc_application_new_context (GSettings    *settings);

G_END_DECLS
