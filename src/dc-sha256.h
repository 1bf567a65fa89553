/* dc-sha256.h: SHA-256 of large buffers (weights, moments, gradients).
 *
 * GLib's GChecksum is portable C (150–400 MB/s on the machines measured),
 * which made hashing a group step's 28 MB of weights and moments, and every
 * 9.5 MB gradient sent and received, a large share of the step at width
 * 128. Nettle (the library under GnuTLS, in Debian 12 and the GNOME
 * runtime) uses the CPU's SHA extensions where it has them: 5–10× faster.
 * It is used when meson finds it, GChecksum otherwise; the digest is
 * SHA-256 either way, so every hash (pinned in tests, exchanged between
 * devices) is the same whichever a build has.
 *
 * Where CPUID says the CPU has the SHA extensions (and SSSE3, SSE4.1), all
 * of it runs on src/dc-sha256-x86.c instead: one chain 1.13× nettle's
 * rate on the VM's EPYC, and two independent hashes fed together
 * (dc_sha256_update_pair (), dc_sha256_digest_pair ()) as two interleaved
 * chains, 1.7× nettle's. DC_SHA256_INTERLEAVE=0 keeps nettle (or
 * GChecksum), one hash after the other, for comparing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DC_SHA256_SIZE 32

typedef struct _DcSha256 DcSha256;

DcSha256   *dc_sha256_new        (void);
void        dc_sha256_update     (DcSha256      *self,
                                  const void    *data,
                                  gsize          length);
void        dc_sha256_update_pair (DcSha256   *a,
                                   const void *a_data,
                                   DcSha256   *b,
                                   const void *b_data,
                                   gsize       length);
void        dc_sha256_get_digest (DcSha256      *self,
                                  guint8         digest[DC_SHA256_SIZE]);
char       *dc_sha256_dup_hex    (DcSha256      *self,
                                  guint          n_digits);
void        dc_sha256_free       (DcSha256      *self);
const char *dc_sha256_get_implementation (void);

void        dc_sha256_digest      (const void   *data,
                                   gsize         length,
                                   guint8        digest[DC_SHA256_SIZE]);
void        dc_sha256_digest_pair (const void   *a,
                                   gsize         a_length,
                                   const void   *b,
                                   gsize         b_length,
                                   guint8        a_digest[DC_SHA256_SIZE],
                                   guint8        b_digest[DC_SHA256_SIZE]);
const char *dc_sha256_get_pair_implementation (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcSha256, dc_sha256_free)

G_END_DECLS
