/* dc-identity.c: this process's DTLS certificate fingerprint and its short form.
 *
 * GStreamer's dtls elements share one certificate per process, generated
 * when the first dtlsdec is created and used by every webrtcbin after it;
 * reading the "pem" property of a throwaway dtlsdec gives that certificate
 * (without its key), so the fingerprint is known before any connection and
 * equals the one webrtcbin writes into its SDP.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-mesh"

#include "config.h"

#include "dc-identity.h"

#include <string.h>
#include <gio/gio.h>
#include <gst/gst.h>

#include "dc-mesh-error.h"

static char *
format_fingerprint (const guint8 *digest,
                    gsize         size)
{
  GString *out = g_string_sized_new (3 * size);

  for (gsize i = 0; i < size; i++)
    g_string_append_printf (out, "%s%02X", i > 0 ? ":" : "", digest[i]);
  return g_string_free (out, FALSE);
}

static char *
compute_local_fingerprint (GError **error)
{
  g_autoptr(GstElement) dtls = NULL;
  g_autoptr(GTlsCertificate) certificate = NULL;
  g_autoptr(GByteArray) der = NULL;
  g_autoptr(GChecksum) checksum = NULL;
  g_autofree char *pem = NULL;
  guint8 digest[32];
  gsize size = sizeof digest;

  if (!gst_init_check (NULL, NULL, error))
    return NULL;
  dtls = gst_element_factory_make ("dtlsdec", NULL);
  if (dtls == NULL)
    {
      g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_MISSING_PLUGINS,
                           "GStreamer's dtls plugin is missing: no certificate to show");
      return NULL;
    }
  gst_object_ref_sink (dtls);
  g_object_get (dtls, "pem", &pem, NULL);
  if (pem == NULL
      || (certificate = g_tls_certificate_new_from_pem (pem, -1, error)) == NULL)
    {
      if (error != NULL && *error == NULL)
        g_set_error_literal (error, DC_MESH_ERROR, DC_MESH_ERROR_SIGNALING,
                             "GStreamer's dtls plugin gave no certificate");
      else
        g_prefix_error (error, "Cannot read this device's DTLS certificate: ");
      return NULL;
    }
  g_object_get (certificate, "certificate", &der, NULL);
  checksum = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (checksum, der->data, der->len);
  g_checksum_get_digest (checksum, digest, &size);
  return format_fingerprint (digest, size);
}

/**
 * dc_identity_get_local_fingerprint:
 *
 * Returns: (transfer none): this process's DTLS certificate fingerprint,
 *   "AB:CD:…" (SHA-256 of its DER), computed once
 */
const char *
dc_identity_get_local_fingerprint (GError **error)
{
  static char *fingerprint;  /* main thread only, like every mesh object */

  if (fingerprint == NULL)
    fingerprint = compute_local_fingerprint (error);
  return fingerprint;
}

gboolean
dc_identity_fingerprint_is_valid (const char *fingerprint)
{
  if (fingerprint == NULL || strlen (fingerprint) != DC_IDENTITY_FINGERPRINT_LEN)
    return FALSE;
  for (guint i = 0; i < DC_IDENTITY_FINGERPRINT_LEN; i++)
    if (i % 3 == 2 ? fingerprint[i] != ':' : !g_ascii_isxdigit (fingerprint[i]))
      return FALSE;
  return TRUE;
}

/**
 * dc_identity_short_fingerprint:
 * @fingerprint: (nullable): a full fingerprint
 *
 * Returns: (transfer full) (nullable): its first 8 bytes as four groups,
 *   "AB12 CD34 EF56 7890", or %NULL when @fingerprint is not valid
 */
char *
dc_identity_short_fingerprint (const char *fingerprint)
{
  GString *out;

  if (!dc_identity_fingerprint_is_valid (fingerprint))
    return NULL;
  out = g_string_new (NULL);
  for (guint i = 0; i < 8; i++)
    {
      if (i > 0 && i % 2 == 0)
        g_string_append_c (out, ' ');
      g_string_append_c (out, g_ascii_toupper (fingerprint[3 * i]));
      g_string_append_c (out, g_ascii_toupper (fingerprint[3 * i + 1]));
    }
  return g_string_free (out, FALSE);
}

/**
 * dc_identity_sdp_fingerprint:
 * @sdp: an SDP text
 *
 * Returns: (transfer full) (nullable): the first a=fingerprint:sha-256 value,
 *   upper-case, or %NULL when there is none or it is malformed
 */
char *
dc_identity_sdp_fingerprint (const char *sdp)
{
  static const char tag[] = "a=fingerprint:sha-256 ";
  const char *at = sdp;

  while (at != NULL && (at = strstr (at, tag)) != NULL)
    {
      if (at == sdp || at[-1] == '\n')
        {
          g_autofree char *value = g_strndup (at + strlen (tag), DC_IDENTITY_FINGERPRINT_LEN);

          if (!dc_identity_fingerprint_is_valid (value))
            return NULL;
          return g_ascii_strup (value, -1);
        }
      at += strlen (tag);
    }
  return NULL;
}
