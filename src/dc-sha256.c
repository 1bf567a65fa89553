/* dc-sha256.c: SHA-256 on the CPU's SHA extensions where it has them
 * (dc-sha256-x86.c), else through nettle when the build has it, else
 * GChecksum.
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
  /* Decided once per process (use_sha_extensions ()): x86 or the other. */
  DcSha256X86        x86;
#if HAVE_NETTLE
  struct sha256_ctx  ctx;
#else
  GChecksum         *checksum;
#endif
};

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
 * dc_sha256_new:
 *
 * Returns: (transfer full): a SHA-256 of nothing yet
 */
DcSha256 *
dc_sha256_new (void)
{
  DcSha256 *self = g_new0 (DcSha256, 1);

  if (use_sha_extensions ())
    _dc_sha256_x86_init (&self->x86);
  else
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

  if (use_sha_extensions ())
    {
      _dc_sha256_x86_update (&self->x86, data, length);
      return;
    }
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
 * dc_sha256_update_pair:
 * @a: one running hash
 * @a_data: (array length=length): bytes to add to @a
 * @b: another (it may be @a: then @a_data, then @b_data)
 * @b_data: (array length=length): as many bytes to add to @b
 *
 * dc_sha256_update () of both; with the SHA extensions, as two interleaved
 * chains while both stand at the same offset in their blocks (as hashes
 * fed the same lengths do), 1.5–1.7× the rate of one after the other.
 */
void
dc_sha256_update_pair (DcSha256   *a,
                       const void *a_data,
                       DcSha256   *b,
                       const void *b_data,
                       gsize       length)
{
  if (use_sha_extensions ())
    {
      _dc_sha256_x86_update_pair (&a->x86, a_data, &b->x86, b_data, length);
      return;
    }
  dc_sha256_update (a, a_data, length);
  dc_sha256_update (b, b_data, length);
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
  if (use_sha_extensions ())
    {
      _dc_sha256_x86_final (&self->x86, digest);
      return;
    }
#if HAVE_NETTLE
  sha256_digest (&self->ctx, DC_SHA256_SIZE, digest);
#else
  {
    gsize length = DC_SHA256_SIZE;

    g_checksum_get_digest (self->checksum, digest, &length);
  }
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
  g_clear_pointer (&self->checksum, g_checksum_free);
#endif
  g_free (self);
}

/**
 * dc_sha256_get_implementation:
 *
 * Returns: "sha-extensions" (dc-sha256-x86.c), "nettle" or "glib", for
 *   tests' and benchmarks' notes
 */
const char *
dc_sha256_get_implementation (void)
{
  if (use_sha_extensions ())
    return "sha-extensions";
  return HAVE_NETTLE ? "nettle" : "glib";
}

/**
 * dc_sha256_digest:
 * @data: (array length=length): the whole message
 * @digest: (out caller-allocates): its SHA-256
 */
void
dc_sha256_digest (const void *data,
                  gsize       length,
                  guint8      digest[DC_SHA256_SIZE])
{
  g_autoptr(DcSha256) sum = dc_sha256_new ();

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
 * Two independent digests: their common length as two interleaved chains
 * (dc_sha256_update_pair ()), the rest of the longer one alone.
 */
void
dc_sha256_digest_pair (const void *a,
                       gsize       a_length,
                       const void *b,
                       gsize       b_length,
                       guint8      a_digest[DC_SHA256_SIZE],
                       guint8      b_digest[DC_SHA256_SIZE])
{
  g_autoptr(DcSha256) sa = dc_sha256_new ();
  g_autoptr(DcSha256) sb = dc_sha256_new ();
  const gsize both = MIN (a_length, b_length);

  dc_sha256_update_pair (sa, a, sb, b, both);
  dc_sha256_update (sa, (const guint8 *) a + both, a_length - both);
  dc_sha256_update (sb, (const guint8 *) b + both, b_length - both);
  dc_sha256_get_digest (sa, a_digest);
  dc_sha256_get_digest (sb, b_digest);
}

/**
 * dc_sha256_get_pair_implementation:
 *
 * Returns: "sha-extensions-2x" where dc_sha256_update_pair () interleaves
 *   two chains, else dc_sha256_get_implementation ()
 */
const char *
dc_sha256_get_pair_implementation (void)
{
  return use_sha_extensions () ? "sha-extensions-2x" : dc_sha256_get_implementation ();
}
