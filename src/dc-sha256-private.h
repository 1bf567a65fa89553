/* dc-sha256-private.h: the SHA-extension code behind dc-sha256.c
 * (dc-sha256-x86.c). Callers use dc_sha256_digest () and
 * dc_sha256_digest_pair (), which pick it when the CPU has it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "dc-sha256.h"

G_BEGIN_DECLS

gboolean _dc_sha256_x86_available   (void);
void     _dc_sha256_x86_digest      (const void *data,
                                     gsize       length,
                                     guint8      digest[DC_SHA256_SIZE]);
void     _dc_sha256_x86_digest_pair (const void *a,
                                     gsize       a_length,
                                     const void *b,
                                     gsize       b_length,
                                     guint8      a_digest[DC_SHA256_SIZE],
                                     guint8      b_digest[DC_SHA256_SIZE]);

G_END_DECLS
