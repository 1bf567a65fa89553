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

static void
reference_digest (const guint8 *data,
                  gsize         length,
                  guint8        digest[DC_SHA256_SIZE])
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  gsize n = DC_SHA256_SIZE;

  g_checksum_update (sum, data, (gssize) length);
  g_checksum_get_digest (sum, digest, &n);
}

static void
check_pair (const guint8 *a,
            gsize         a_length,
            const guint8 *b,
            gsize         b_length)
{
  guint8 want_a[DC_SHA256_SIZE], want_b[DC_SHA256_SIZE];
  guint8 got_a[DC_SHA256_SIZE], got_b[DC_SHA256_SIZE], one[DC_SHA256_SIZE];

  reference_digest (a, a_length, want_a);
  reference_digest (b, b_length, want_b);
  dc_sha256_digest_pair (a, a_length, b, b_length, got_a, got_b);
  if (memcmp (got_a, want_a, DC_SHA256_SIZE) != 0 || memcmp (got_b, want_b, DC_SHA256_SIZE) != 0)
    g_error ("dc_sha256_digest_pair (%s) differs from GChecksum at lengths %" G_GSIZE_FORMAT
             " and %" G_GSIZE_FORMAT, dc_sha256_get_pair_implementation (), a_length, b_length);
  dc_sha256_digest (a, a_length, one);
  g_assert_cmpmem (one, DC_SHA256_SIZE, want_a, DC_SHA256_SIZE);
}

/* dc_sha256_digest_pair () (two interleaved chains where the CPU has the
 * SHA extensions) and dc_sha256_digest () against GChecksum: every pair of
 * lengths to 140 (the padding's one- and two-block ends, unequal lengths
 * that leave one chain blocks of its own), every byte alignment, the
 * state hash's 64 KiB pieces with a short last one, the same buffer twice,
 * and seeded random pairs to 3 MiB. */
static void
test_digest_pair (void)
{
  const gsize big = 3 * 1024 * 1024 + 17;
  g_autofree guint8 *data = g_malloc (big);
  g_autoptr(GRand) rand = g_rand_new_with_seed (20261205);

  for (gsize i = 0; i < big; i++)
    data[i] = (guint8) g_rand_int_range (rand, 0, 256);
  g_test_message ("pair implementation: %s", dc_sha256_get_pair_implementation ());

  for (gsize la = 0; la <= 140; la++)
    for (gsize lb = 0; lb <= 140; lb++)
      check_pair (data + la, la, data + 1000 + lb, lb);
  for (gsize align = 0; align < 64; align++)
    check_pair (data + align, 4096 + align, data + 8192 + 63 - align, 4096 - align);
  check_pair (data, 65536, data + 65536, 65536);
  check_pair (data, 65536, data + 65536, 4 * 1000 + 4);
  check_pair (data + 4, 4 * 1000 + 4, data, 65536);
  check_pair (data, 65536, data, 65536);
  check_pair (data, big, data + 1, 200);
  for (guint t = 0; t < 200; t++)
    {
      const gsize la = g_rand_int_range (rand, 0, 300000);
      const gsize lb = g_rand_int_range (rand, 0, 300000);

      check_pair (data + g_rand_int_range (rand, 0, (gint32) (big - la + 1)), la,
                  data + g_rand_int_range (rand, 0, (gint32) (big - lb + 1)), lb);
    }
}

/* dc_sha256_update_pair () fed in seeded random pieces (chains in step, a
 * piece ending inside a block, and chains put out of step by a single
 * update of one, which must still give both digests), and with one hash
 * as both arguments, against GChecksum. */
static void
test_update_pair (void)
{
  const gsize size = 600000;
  g_autofree guint8 *data = g_malloc (size);
  g_autoptr(GRand) rand = g_rand_new_with_seed (5);

  for (gsize i = 0; i < size; i++)
    data[i] = (guint8) g_rand_int_range (rand, 0, 256);
  for (guint t = 0; t < 300; t++)
    {
      g_autoptr(DcSha256) a = dc_sha256_new ();
      g_autoptr(DcSha256) b = dc_sha256_new ();
      const gsize skew = t % 3 == 0 ? (gsize) g_rand_int_range (rand, 1, 130) : 0;
      gsize at = skew;
      guint8 got_a[DC_SHA256_SIZE], got_b[DC_SHA256_SIZE];
      guint8 want_a[DC_SHA256_SIZE], want_b[DC_SHA256_SIZE];

      /* a takes data[0, skew) alone first; then both take the same
       * lengths: a from data[skew…], b from data[size / 2 + skew…]. */
      dc_sha256_update (a, data, skew);
      for (guint pieces = g_rand_int_range (rand, 1, 40); pieces > 0 && at < size / 2; pieces--)
        {
          const gsize piece = MIN ((gsize) g_rand_int_range (rand, 0, t % 2 == 0 ? 200 : 70000),
                                   size / 2 - at);

          dc_sha256_update_pair (a, data + at, b, data + size / 2 + at, piece);
          at += piece;
        }
      dc_sha256_get_digest (a, got_a);
      dc_sha256_get_digest (b, got_b);
      reference_digest (data, at, want_a);
      reference_digest (data + size / 2 + skew, at - skew, want_b);
      g_assert_cmpmem (got_a, DC_SHA256_SIZE, want_a, DC_SHA256_SIZE);
      g_assert_cmpmem (got_b, DC_SHA256_SIZE, want_b, DC_SHA256_SIZE);
    }

  {
    g_autoptr(DcSha256) same = dc_sha256_new ();
    g_autoptr(GChecksum) ref = g_checksum_new (G_CHECKSUM_SHA256);
    guint8 got[DC_SHA256_SIZE], want[DC_SHA256_SIZE];
    gsize n = DC_SHA256_SIZE;

    for (gsize at = 0; at + 2 * 1000 <= size; at += 2 * 1000)
      {
        dc_sha256_update_pair (same, data + at, same, data + at + 1000, 1000);
        g_checksum_update (ref, data + at, 2 * 1000);
      }
    dc_sha256_get_digest (same, got);
    g_checksum_get_digest (ref, want, &n);
    g_assert_cmpmem (got, DC_SHA256_SIZE, want, DC_SHA256_SIZE);
  }
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sha256/vectors", test_vectors);
  g_test_add_func ("/sha256/same-as-glib", test_same_as_glib);
  g_test_add_func ("/sha256/digest-pair", test_digest_pair);
  g_test_add_func ("/sha256/update-pair", test_update_pair);
  return g_test_run ();
}
