/* dc-identity.h: what a person can check about a device asking to join.
 *
 * A device is known to its peers by the DTLS certificate its webrtcbin
 * presents (GStreamer generates one per process). Its SHA-256 fingerprint
 * travels in the signed join request and in every SDP (a=fingerprint), so
 * the short form shown on both screens pins the connection that follows.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* "AB:CD:…" with 32 upper-case hex pairs, as in SDP. */
#define DC_IDENTITY_FINGERPRINT_LEN (32 * 3 - 1)

const char *dc_identity_get_local_fingerprint (GError     **error);
gboolean    dc_identity_fingerprint_is_valid  (const char  *fingerprint);
char       *dc_identity_short_fingerprint     (const char  *fingerprint);
char       *dc_identity_sdp_fingerprint       (const char  *sdp);

G_END_DECLS
