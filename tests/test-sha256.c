/* test-sha256.c: the fast SHA-256 (src/dc-sha256.c) gives GChecksum's
 * digests, so that weight hashes, gradient hashes and every pinned hash
 * stay the same whichever implementation a build has (suite core).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <glib.h>

#include "dc-sha256.h"

static char *
reference_hex (const guint8 *data,
               gsize         length)
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  g_checksum_update (sum, data, (gssize) length);
  return g_strdup (g_checksum_get_string (sum));
}

/* Fed in pieces of @piece bytes (0: whole). */
static char *
ours_hex (const guint8 *data,
          gsize         length,
          gsize         piece)
{
  g_autoptr(DcSha256) sum = dc_sha256_new ();

  if (piece == 0)
    dc_sha256_update (sum, data, length);
  else
    for (gsize at = 0; at < length; at += piece)
      dc_sha256_update (sum, data + at, MIN (piece, length - at));
  return dc_sha256_dup_hex (sum, 64);
}

static void
test_vectors (void)
{
  g_autoptr(DcSha256) empty = dc_sha256_new ();
  g_autoptr(DcSha256) abc = dc_sha256_new ();
  g_autofree char *empty_hex = dc_sha256_dup_hex (empty, 64);
  g_autofree char *abc_hex = NULL;

  /* FIPS 180-2's examples. */
  g_assert_cmpstr (empty_hex, ==,
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  dc_sha256_update (abc, "abc", 3);
  abc_hex = dc_sha256_dup_hex (abc, 16);
  g_assert_cmpstr (abc_hex, ==, "ba7816bf8f01cfea");
  g_test_message ("implementation: %s", dc_sha256_get_implementation ());
}

/* Every length around the 64-byte block and its 55/56-byte padding edge,
 * and a buffer of a few MiB (a gradient's order of size), whole and in
 * uneven pieces, against GChecksum. */
static void
test_same_as_glib (void)
{
  gsize big = 3 * 1024 * 1024 + 17;
  g_autofree guint8 *data = g_malloc (big);
  static const gsize pieces[] = { 0, 1, 63, 64, 65, 4099 };
  guint32 state = 12345;

  for (gsize i = 0; i < big; i++)
    {
      state = state * 1664525u + 1013904223u;
      data[i] = (guint8) (state >> 24);
    }
  for (gsize length = 0; length <= 200; length++)
    for (guint p = 0; p < G_N_ELEMENTS (pieces); p++)
      {
        g_autofree char *want = reference_hex (data, length);
        g_autofree char *got = ours_hex (data, length, pieces[p]);

        g_assert_cmpstr (got, ==, want);
      }
  for (guint p = 0; p < G_N_ELEMENTS (pieces); p++)
    {
      g_autofree char *want = reference_hex (data, big);
      g_autofree char *got = NULL;

      if (pieces[p] == 1)
        continue;  /* 3 MiB one byte at a time: slow, and proves nothing new */
      got = ours_hex (data, big, pieces[p]);
      g_assert_cmpstr (got, ==, want);
    }
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sha256/vectors", test_vectors);
  g_test_add_func ("/sha256/same-as-glib", test_same_as_glib);
  return g_test_run ();
}
