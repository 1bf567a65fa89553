/* dc-gst-quirks.h: what DaisyChain does about known faults of the GStreamer
 * it runs on, each in one place with the reason.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void     dc_gst_quirks_install                    (void);
void     dc_gst_quirks_add_test                   (const char *path,
                                                   GTestFunc   func);
gboolean dc_gst_quirks_is_sctp_teardown_warning   (const char *log_domain,
                                                   const char *message);

G_END_DECLS
