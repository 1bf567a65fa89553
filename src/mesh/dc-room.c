/* dc-room.c: room codes, room ids and message authentication.
 *
 * room id = hex HMAC-SHA256 (key "daisychain room id v1", code)
 * room key = HMAC-SHA256 (key "daisychain room key v1", code)
 * mac      = hex HMAC-SHA256 (room key, room id "\n" from "\n" to "\n" body)
 *
 * Generated codes carry 80 random bits from the kernel's generator, which is
 * what makes the room id safe to show the signaling service; a short typed
 * code can be guessed offline from its room id, so docs/PROTOCOL.md tells
 * users to prefer generated codes.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-room.h"

#include <string.h>
#include <sys/random.h>

/* Crockford's base 32: no I, L, O or U, so codes survive being read aloud. */
static const char code_alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

static void
random_bytes (guint8 *out,
              gsize   n)
{
  gsize done = 0;

  while (done < n)
    {
      ssize_t got = getrandom (out + done, n - done, 0);

      /* getrandom only fails on EINTR here (the size is small and flags 0);
       * falling back to GLib's PRNG would silently weaken the code. */
      if (got > 0)
        done += (gsize) got;
    }
}

char *
dc_room_random_hex (gsize n_bytes)
{
  g_autofree guint8 *bytes = g_malloc (n_bytes);
  GString *out = g_string_sized_new (2 * n_bytes);

  random_bytes (bytes, n_bytes);
  for (gsize i = 0; i < n_bytes; i++)
    g_string_append_printf (out, "%02x", bytes[i]);
  return g_string_free (out, FALSE);
}

/**
 * dc_room_generate_code:
 *
 * Returns: (transfer full): a code like `7KQ2-M9XD-4TNB-H3VA` (80 bits)
 */
char *
dc_room_generate_code (void)
{
  guint8 bytes[16];
  GString *code = g_string_new (NULL);

  random_bytes (bytes, sizeof bytes);
  for (guint i = 0; i < 16; i++)
    {
      if (i > 0 && i % 4 == 0)
        g_string_append_c (code, '-');
      g_string_append_c (code, code_alphabet[bytes[i] & 31]);
    }
  return g_string_free (code, FALSE);
}

static void
hmac_raw (const char   *key,
          const guint8 *data,
          gsize         size,
          guint8        out[32])
{
  g_autoptr(GHmac) hmac = g_hmac_new (G_CHECKSUM_SHA256, (const guchar *) key, strlen (key));
  gsize len = 32;

  g_hmac_update (hmac, data, size);
  g_hmac_get_digest (hmac, out, &len);
}

DcRoom *
dc_room_new (const char *code)
{
  DcRoom *room = g_new0 (DcRoom, 1);
  guint8 id[32];
  GString *hex = g_string_new (NULL);

  g_return_val_if_fail (code != NULL && *code != '\0', NULL);

  room->code = g_strdup (code);
  hmac_raw ("daisychain room id v1", (const guint8 *) code, strlen (code), id);
  hmac_raw ("daisychain room key v1", (const guint8 *) code, strlen (code), room->key);
  for (guint i = 0; i < 32; i++)
    g_string_append_printf (hex, "%02x", id[i]);
  room->room_id = g_string_free (hex, FALSE);
  return room;
}

void
dc_room_free (DcRoom *room)
{
  if (room == NULL)
    return;
  memset (room->key, 0, sizeof room->key);
  g_free (room->code);
  g_free (room->room_id);
  g_free (room);
}

char *
dc_room_sign (const DcRoom *room,
              const char   *from,
              const char   *to,
              const char   *body)
{
  g_autoptr(GHmac) hmac = g_hmac_new (G_CHECKSUM_SHA256, room->key, sizeof room->key);

  g_hmac_update (hmac, (const guchar *) room->room_id, -1);
  g_hmac_update (hmac, (const guchar *) "\n", 1);
  g_hmac_update (hmac, (const guchar *) from, -1);
  g_hmac_update (hmac, (const guchar *) "\n", 1);
  g_hmac_update (hmac, (const guchar *) to, -1);
  g_hmac_update (hmac, (const guchar *) "\n", 1);
  g_hmac_update (hmac, (const guchar *) body, -1);
  return g_strdup (g_hmac_get_string (hmac));
}

gboolean
dc_room_verify (const DcRoom *room,
                const char   *from,
                const char   *to,
                const char   *body,
                const char   *mac)
{
  g_autofree char *want = NULL;
  guint8 diff = 0;
  gsize n;

  if (mac == NULL || from == NULL || to == NULL || body == NULL)
    return FALSE;
  want = dc_room_sign (room, from, to, body);
  n = strlen (want);
  if (strlen (mac) != n)
    return FALSE;
  /* Constant time, so the service cannot learn the MAC byte by byte. */
  for (gsize i = 0; i < n; i++)
    diff |= (guint8) (want[i] ^ mac[i]);
  return diff == 0;
}
