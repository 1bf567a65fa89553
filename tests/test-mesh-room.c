/* test-mesh-room.c: room codes, ids and message authentication (suite core).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "mesh/dc-identity.h"
#include "mesh/dc-room.h"

static void
test_codes (void)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; i < 1000; i++)
    {
      char *code = dc_room_generate_code ();

      /* XXXX-XXXX-XXXX-XXXX from Crockford's alphabet. */
      g_assert_cmpuint (strlen (code), ==, 19);
      for (guint c = 0; c < 19; c++)
        {
          if (c % 5 == 4)
            g_assert_cmpint (code[c], ==, '-');
          else
            g_assert_nonnull (strchr ("0123456789ABCDEFGHJKMNPQRSTVWXYZ", code[c]));
        }
      g_assert_false (g_hash_table_contains (seen, code));
      g_hash_table_add (seen, code);
    }
}

static void
test_derivation (void)
{
  g_autoptr(DcRoom) a = dc_room_new ("MY-SECRET-CODE");
  g_autoptr(DcRoom) b = dc_room_new ("MY-SECRET-CODE");
  g_autoptr(DcRoom) c = dc_room_new ("MY-SECRET-CODF");
  g_autoptr(GHmac) hmac = NULL;

  /* Deterministic, 64 hex digits, different for a one-letter change, and
   * not the key (the service must not learn the key from the id). */
  g_assert_cmpstr (a->room_id, ==, b->room_id);
  g_assert_cmpuint (strlen (a->room_id), ==, 64);
  g_assert_cmpstr (a->room_id, !=, c->room_id);
  g_assert_cmpmem (a->key, DC_ROOM_KEY_SIZE, b->key, DC_ROOM_KEY_SIZE);
  g_assert_true (memcmp (a->key, c->key, DC_ROOM_KEY_SIZE) != 0);

  /* The documented formula (docs/PROTOCOL.md). */
  hmac = g_hmac_new (G_CHECKSUM_SHA256, (const guchar *) "daisychain room id v1", 21);
  g_hmac_update (hmac, (const guchar *) "MY-SECRET-CODE", -1);
  g_assert_cmpstr (a->room_id, ==, g_hmac_get_string (hmac));
}

static void
test_sign_verify (void)
{
  g_autoptr(DcRoom) room = dc_room_new ("ROOM");
  g_autoptr(DcRoom) other = dc_room_new ("MOOR");
  g_autofree char *mac = dc_room_sign (room, "aaaa", "bbbb", "{\"kind\":\"approve\"}");
  g_autofree char *bad = g_strdup (mac);

  g_assert_true (dc_room_verify (room, "aaaa", "bbbb", "{\"kind\":\"approve\"}", mac));
  /* Any change of key, sender, recipient, body or MAC fails. */
  g_assert_false (dc_room_verify (other, "aaaa", "bbbb", "{\"kind\":\"approve\"}", mac));
  g_assert_false (dc_room_verify (room, "aaab", "bbbb", "{\"kind\":\"approve\"}", mac));
  g_assert_false (dc_room_verify (room, "aaaa", "bbba", "{\"kind\":\"approve\"}", mac));
  g_assert_false (dc_room_verify (room, "aaaa", "bbbb", "{\"kind\":\"decline\"}", mac));
  bad[0] = bad[0] == '0' ? '1' : '0';
  g_assert_false (dc_room_verify (room, "aaaa", "bbbb", "{\"kind\":\"approve\"}", bad));
  g_assert_false (dc_room_verify (room, "aaaa", "bbbb", "{\"kind\":\"approve\"}", ""));
  g_assert_false (dc_room_verify (room, "aaaa", "bbbb", "{\"kind\":\"approve\"}", NULL));
  /* Field boundaries are part of the MAC: moving a character across fails. */
  g_assert_false (dc_room_verify (room, "aaaab", "bbb", "{\"kind\":\"approve\"}", mac));
}

/* Fingerprints come from peers (requests, SDP): malformed ones are refused,
 * and the short form people compare is the first 8 bytes in 4 groups. */
static void
test_fingerprints (void)
{
  const char *fp = "e4:03:07:8e:ea:a2:bb:f7:00:11:22:33:44:55:66:77:"
                   "88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77";
  g_autofree char *upper = g_ascii_strup (fp, -1);
  g_autofree char *sdp = g_strdup_printf ("v=0\r\na=group:BUNDLE 0\r\n"
                                          "a=fingerprint:sha-256 %s\r\n", fp);
  g_autofree char *not_at_start = g_strdup_printf ("v=0\r\nx a=fingerprint:sha-256 %s\r\n",
                                                   fp);
  g_autofree char *truncated = g_strndup (sdp, strlen (sdp) - 10);
  g_autofree char *from_sdp = dc_identity_sdp_fingerprint (sdp);
  g_autofree char *short_form = dc_identity_short_fingerprint (fp);
  g_autofree char *none1 = dc_identity_sdp_fingerprint (not_at_start);
  g_autofree char *none2 = dc_identity_sdp_fingerprint (truncated);
  g_autofree char *none3 = dc_identity_sdp_fingerprint ("a=fingerprint:sha-1 AB:CD\r\n");
  g_autofree char *none4 = dc_identity_short_fingerprint ("E4:03");
  g_autoptr(GError) error = NULL;
  const char *local;

  g_assert_true (dc_identity_fingerprint_is_valid (fp));
  g_assert_false (dc_identity_fingerprint_is_valid (NULL));
  g_assert_false (dc_identity_fingerprint_is_valid (""));
  g_assert_false (dc_identity_fingerprint_is_valid ("E4-03"));
  g_assert_cmpstr (from_sdp, ==, upper);
  g_assert_cmpstr (short_form, ==, "E403 078E EAA2 BBF7");
  g_assert_null (none1);
  g_assert_null (none2);
  g_assert_null (none3);
  g_assert_null (none4);
  g_assert_null (dc_identity_short_fingerprint (NULL));

  /* This process's certificate: stable within the process. */
  local = dc_identity_get_local_fingerprint (&error);
  if (local == NULL)
    {
      g_test_skip (error->message);
      return;
    }
  g_assert_true (dc_identity_fingerprint_is_valid (local));
  g_assert_true (local == dc_identity_get_local_fingerprint (NULL));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/mesh/room/codes", test_codes);
  g_test_add_func ("/dc/mesh/room/derivation", test_derivation);
  g_test_add_func ("/dc/mesh/room/sign-verify", test_sign_verify);
  g_test_add_func ("/dc/mesh/room/fingerprints", test_fingerprints);

  return g_test_run ();
}
