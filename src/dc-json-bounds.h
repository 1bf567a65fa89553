/* dc-json-bounds.h: size and nesting limits on untrusted JSON, checked before
 * json-glib sees the text. Shared by every layer.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define DC_JSON_ERROR (dc_json_error_quark ())

typedef enum
{
  DC_JSON_ERROR_TOO_LARGE,   /* more bytes than the caller's limit */
  DC_JSON_ERROR_TOO_DEEP,    /* brackets nested deeper than the caller's limit */
  DC_JSON_ERROR_INVALID,     /* not JSON text (found by the checker or by json-glib) */
} DcJsonError;

/* Limits per use. Debian 12's json-glib 1.6 recurses once per bracket and
 * overflows the stack at about 80,000 levels, so every depth here stays far
 * below that; sizes follow what each message can legitimately be. */

/* A signaling frame is a flat object (depth 1); 8 leaves room for new fields.
 * Its size is already capped at 256 KiB by the WebSocket. */
#define DC_JSON_SIGNAL_MAX_BYTES   (256 * 1024)
#define DC_JSON_SIGNAL_MAX_DEPTH   8
/* A relay body travels inside a signaling frame, so it cannot be larger;
 * today's bodies reach depth 2 (an object holding a member list). */
#define DC_JSON_RELAY_MAX_BYTES    (256 * 1024)
#define DC_JSON_RELAY_MAX_DEPTH    16
/* A discovery announcement fits one small datagram and is a flat object. */
#define DC_JSON_DISCOVERY_MAX_BYTES 1024
#define DC_JSON_DISCOVERY_MAX_DEPTH 4
/* Hub API answers (file listings, dataset manifests): the largest pages seen
 * are a few MiB; the Hub's own documents nest fewer than 10 levels. */
#define DC_JSON_HUB_MAX_BYTES      (32u * 1024u * 1024u)
#define DC_JSON_HUB_MAX_DEPTH      64

GQuark    dc_json_error_quark    (void);

gboolean  dc_json_check_bounds   (const char  *text,
                                  gsize        len,
                                  gsize        max_bytes,
                                  guint        max_depth,
                                  GError     **error);
JsonNode *dc_json_parse_bounded  (const char  *text,
                                  gssize       len,
                                  gsize        max_bytes,
                                  guint        max_depth,
                                  GError     **error);

G_END_DECLS
