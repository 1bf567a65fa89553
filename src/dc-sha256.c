/* dc-sha256.c: SHA-256 through nettle when the build has it, else GChecksum.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc"

#include "config.h"

#include "dc-sha256.h"
#include "dc-sha256-private.h"

#if HAVE_NETTLE
#include <nettle/sha2.h>
#endif

struct _DcSha256
{
#if HAVE_NETTLE
  struct sha256_ctx  ctx;
#else
  GChecksum         *checksum;
#endif
};

/**
 * dc_sha256_new:
 *
 * Returns: (transfer full): a SHA-256 of nothing yet
 */
DcSha256 *
dc_sha256_new (void)
{
  DcSha256 *self = g_new0 (DcSha256, 1);

#if HAVE_NETTLE
  sha256_init (&self->ctx);
#else
  self->checksum = g_checksum_new (G_CHECKSUM_SHA256);
#endif
  return self;
}

/**
 * dc_sha256_update:
 * @data: (array length=length): bytes to add
 *
 * Any length: GChecksum's gssize limit is handled here.
 */
void
dc_sha256_update (DcSha256   *self,
                  const void *data,
                  gsize       length)
{
  const guint8 *bytes = data;

  while (length > 0)
    {
      /* Both take at most G_MAXSSIZE (GChecksum) or size_t (nettle) at once. */
      gsize n = MIN (length, (gsize) G_MAXINT32);

#if HAVE_NETTLE
      sha256_update (&self->ctx, n, bytes);
#else
      g_checksum_update (self->checksum, bytes, (gssize) n);
#endif
      bytes += n;
      length -= n;
    }
}

/**
 * dc_sha256_get_digest:
 * @digest: (out caller-allocates): the 32 bytes
 *
 * Ends the hash: no update may follow.
 */
void
dc_sha256_get_digest (DcSha256 *self,
                      guint8    digest[DC_SHA256_SIZE])
{
#if HAVE_NETTLE
  sha256_digest (&self->ctx, DC_SHA256_SIZE, digest);
#else
  gsize length = DC_SHA256_SIZE;

  g_checksum_get_digest (self->checksum, digest, &length);
#endif
}

/**
 * dc_sha256_dup_hex:
 * @n_digits: how many lowercase hex digits (at most 64), as GChecksum's
 *   string would begin
 *
 * Ends the hash: no update may follow.
 *
 * Returns: (transfer full): the digest's first @n_digits hex digits
 */
char *
dc_sha256_dup_hex (DcSha256 *self,
                   guint     n_digits)
{
  guint8 digest[DC_SHA256_SIZE];
  char *hex;

  g_return_val_if_fail (n_digits <= 2 * DC_SHA256_SIZE, NULL);

  dc_sha256_get_digest (self, digest);
  hex = g_malloc (2 * DC_SHA256_SIZE + 1);
  for (guint i = 0; i < DC_SHA256_SIZE; i++)
    g_snprintf (hex + 2 * i, 3, "%02x", digest[i]);
  hex[n_digits] = '\0';
  return hex;
}

void
dc_sha256_free (DcSha256 *self)
{
  if (self == NULL)
    return;
#if !HAVE_NETTLE
  g_checksum_free (self->checksum);
#endif
  g_free (self);
}

/**
 * dc_sha256_get_implementation:
 *
 * Returns: "nettle" or "glib", for benchmarks' notes
 */
const char *
dc_sha256_get_implementation (void)
{
  return HAVE_NETTLE ? "nettle" : "glib";
}

static gboolean
use_sha_extensions (void)
{
  static gsize once = 0;
  static gboolean use = FALSE;

  if (g_once_init_enter (&once))
    {
      use = _dc_sha256_x86_available () && g_strcmp0 (g_getenv ("DC_SHA256_INTERLEAVE"), "0") != 0;
      g_once_init_leave (&once, 1);
    }
  return use;
}

/**
 * dc_sha256_digest:
 * @data: (array length=length): the whole message
 * @digest: (out caller-allocates): its SHA-256
 *
 * One message at once, with the SHA extensions where dc_sha256_digest_pair ()
 * uses them (so that the odd piece out of a pair costs what it did).
 */
void
dc_sha256_digest (const void *data,
                  gsize       length,
                  guint8      digest[DC_SHA256_SIZE])
{
  g_autoptr(DcSha256) sum = NULL;

  if (use_sha_extensions ())
    {
      _dc_sha256_x86_digest (data, length, digest);
      return;
    }
  sum = dc_sha256_new ();
  dc_sha256_update (sum, data, length);
  dc_sha256_get_digest (sum, digest);
}

/**
 * dc_sha256_digest_pair:
 * @a: (array length=a_length): one message
 * @b: (array length=b_length): another (any length; it may be @a)
 * @a_digest: (out caller-allocates): @a's SHA-256
 * @b_digest: (out caller-allocates): @b's SHA-256
 *
 * Two independent digests: with the x86 SHA extensions their blocks run as
 * two interleaved chains (dc-sha256-x86.c), else one after the other.
 */
void
dc_sha256_digest_pair (const void *a,
                       gsize       a_length,
                       const void *b,
                       gsize       b_length,
                       guint8      a_digest[DC_SHA256_SIZE],
                       guint8      b_digest[DC_SHA256_SIZE])
{
  if (use_sha_extensions ())
    {
      _dc_sha256_x86_digest_pair (a, a_length, b, b_length, a_digest, b_digest);
      return;
    }
  dc_sha256_digest (a, a_length, a_digest);
  dc_sha256_digest (b, b_length, b_digest);
}

/**
 * dc_sha256_get_pair_implementation:
 *
 * Returns: "sha-extensions-2x" where dc_sha256_digest_pair () interleaves
 *   two chains, else dc_sha256_get_implementation ()
 */
const char *
dc_sha256_get_pair_implementation (void)
{
  return use_sha_extensions () ? "sha-extensions-2x" : dc_sha256_get_implementation ();
}
