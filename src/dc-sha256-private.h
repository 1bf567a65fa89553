/* dc-sha256-private.h: the SHA-extension code behind dc-sha256.c
 * (dc-sha256-x86.c). Callers use DcSha256, dc_sha256_digest () and
 * dc_sha256_digest_pair (), which pick it when the CPU has it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-sha256.h"

G_BEGIN_DECLS

/* A running SHA-256 on the SHA extensions: the chain (ABEF, CDGH as
 * stored from their registers), the partial block, the bytes so far. */
typedef struct
{
  guint8  chain[32];
  guint8  block[64];
  guint   fill;
  guint64 length;
} DcSha256X86;

gboolean _dc_sha256_x86_available   (void);
void     _dc_sha256_x86_init        (DcSha256X86 *s);
void     _dc_sha256_x86_update      (DcSha256X86 *s,
                                     const void  *data,
                                     gsize        length);
void     _dc_sha256_x86_update_pair (DcSha256X86 *a,
                                     const void  *a_data,
                                     DcSha256X86 *b,
                                     const void  *b_data,
                                     gsize        length);
void     _dc_sha256_x86_final       (DcSha256X86 *s,
                                     guint8       digest[DC_SHA256_SIZE]);

G_END_DECLS
