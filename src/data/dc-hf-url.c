/* dc-hf-url.c: every Hugging Face Hub URL, built in one place.
 *
 * Layout (the Hub's, as huggingface_hub builds it):
 *   {base}/{repo}/resolve/{rev}/{path}              model files
 *   {base}/datasets/{repo}/resolve/{rev}/{path}     dataset files
 *   {base}/api/models/{repo}                        model info (JSON)
 *   {base}/api/datasets/{repo}/tree/{rev}/{path}    dataset listing (JSON)
 * A repo id is "owner/name"; a revision may itself contain slashes
 * ("refs/convert/parquet") and is escaped as one segment.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-hf-url.h"

#include <gio/gio.h>
#include <string.h>

#include "dc-data-error.h"

/**
 * dc_hf_url_dup_default_base:
 *
 * Returns: (transfer full): `$HF_ENDPOINT` when set and not empty, else the
 *   Hub, without a trailing slash
 */
char *
dc_hf_url_dup_default_base (void)
{
  const char *env = g_getenv ("HF_ENDPOINT");
  char *base = g_strdup (env != NULL && *env != '\0' ? env : DC_HF_DEFAULT_ENDPOINT);
  gsize len = strlen (base);

  while (len > 0 && base[len - 1] == '/')
    base[--len] = '\0';
  return base;
}

/* Escapes each '/'-separated segment of @path, keeping the separators. */
static char *
escape_path (const char *path)
{
  g_auto(GStrv) parts = g_strsplit (path, "/", -1);

  for (guint i = 0; parts[i] != NULL; i++)
    {
      char *escaped = g_uri_escape_string (parts[i], NULL, FALSE);

      g_free (parts[i]);
      parts[i] = escaped;
    }
  return g_strjoinv ("/", parts);
}

static char *
build (const char *base,
       const char *kind,
       const char *repo,
       const char *middle,
       const char *revision,
       const char *path)
{
  g_autofree char *repo_e = escape_path (repo);
  g_autofree char *rev_e = revision != NULL ? g_uri_escape_string (revision, NULL, FALSE) : NULL;
  g_autofree char *path_e = path != NULL && *path != '\0' ? escape_path (path) : NULL;
  GString *url = g_string_new (base);

  if (url->len > 0 && url->str[url->len - 1] == '/')
    g_string_truncate (url, url->len - 1);
  if (kind != NULL)
    g_string_append_printf (url, "/%s", kind);
  g_string_append_printf (url, "/%s", repo_e);
  if (middle != NULL)
    g_string_append_printf (url, "/%s/%s", middle, rev_e);
  if (path_e != NULL)
    g_string_append_printf (url, "/%s", path_e);
  return g_string_free (url, FALSE);
}

char *
dc_hf_url_model_file (const char *base,
                      const char *repo,
                      const char *revision,
                      const char *path)
{
  return build (base, NULL, repo, "resolve", revision ? revision : DC_HF_DEFAULT_REVISION, path);
}

char *
dc_hf_url_dataset_file (const char *base,
                        const char *repo,
                        const char *revision,
                        const char *path)
{
  return build (base, "datasets", repo, "resolve", revision ? revision : DC_HF_DEFAULT_REVISION,
                path);
}

char *
dc_hf_url_model_info (const char *base,
                      const char *repo)
{
  return build (base, "api/models", repo, NULL, NULL, NULL);
}

char *
dc_hf_url_dataset_tree (const char *base,
                        const char *repo,
                        const char *revision,
                        const char *path)
{
  return build (base, "api/datasets", repo, "tree", revision ? revision : DC_HF_DEFAULT_REVISION,
                path);
}

/**
 * dc_hf_url_describe:
 *
 * Names what a URL points at for error messages: “file F of dataset R”
 * for the Hub's layout, else the URL without its query (which could hold
 * a signature).
 *
 * Returns: (transfer full): the description
 */
char *
dc_hf_url_describe (const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  g_auto(GStrv) parts = NULL;
  const char *kind = "model";
  guint i = 0;
  guint n;

  if (uri == NULL)
    return g_strdup ("an invalid URL");
  parts = g_strsplit (g_uri_get_path (uri) + (g_uri_get_path (uri)[0] == '/'), "/", -1);
  n = g_strv_length (parts);
  if (n > 0 && g_str_equal (parts[0], "datasets"))
    {
      kind = "dataset";
      i = 1;
    }
  if (n >= i + 5 && g_str_equal (parts[i + 2], "resolve"))
    {
      g_autofree char *owner = g_uri_unescape_string (parts[i], NULL);
      g_autofree char *name = g_uri_unescape_string (parts[i + 1], NULL);
      g_autofree char *joined = g_strjoinv ("/", parts + i + 4);
      g_autofree char *file = g_uri_unescape_string (joined, NULL);

      return g_strdup_printf ("file “%s” of %s “%s/%s”", file, kind, owner, name);
    }
  if (n >= 4 && g_str_equal (parts[0], "api"))
    {
      g_autofree char *owner = g_uri_unescape_string (parts[2], NULL);
      g_autofree char *name = g_uri_unescape_string (parts[3], NULL);

      return g_strdup_printf ("the listing of %s “%s/%s”",
                              g_str_equal (parts[1], "datasets") ? "dataset" : "model",
                              owner, name);
    }
  return g_uri_to_string_partial (uri, G_URI_HIDE_QUERY | G_URI_HIDE_USERINFO
                                  | G_URI_HIDE_FRAGMENT);
}

/**
 * dc_hf_url_is_loopback:
 *
 * Returns: %TRUE when @url's host is this machine by definition:
 *   `localhost`, 127.0.0.0/8 or ::1 (never a name that merely resolves there)
 */
gboolean
dc_hf_url_is_loopback (const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  g_autoptr(GInetAddress) address = NULL;
  const char *host;

  if (uri == NULL || (host = g_uri_get_host (uri)) == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (host, "localhost") == 0 || g_ascii_strcasecmp (host, "localhost.") == 0)
    return TRUE;
  address = g_inet_address_new_from_string (host);
  return address != NULL && g_inet_address_get_is_loopback (address);
}

/**
 * dc_hf_url_may_carry_token:
 *
 * The transport rule for the token: it travels only inside TLS, or to a
 * loopback host (a local mirror or a test server), where plain http cannot
 * be read on the way.
 *
 * Returns: %TRUE when a request to @url may carry the Authorization header
 */
gboolean
dc_hf_url_may_carry_token (const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);

  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (g_uri_get_scheme (uri), "https") == 0)
    return TRUE;
  return g_ascii_strcasecmp (g_uri_get_scheme (uri), "http") == 0 && dc_hf_url_is_loopback (url);
}

/**
 * dc_hf_url_check_redirect:
 * @from: the URL that answered with a redirect
 * @to: the absolute URL it leads to
 *
 * The redirect rule, for every request: a redirect may not leave https for
 * anything else (a downgrade would expose the request, and whatever it
 * returns could be altered on the way), and may lead only to http or https.
 *
 * Returns: %TRUE when the client may follow it, else %FALSE with @error set
 */
gboolean
dc_hf_url_check_redirect (const char  *from,
                          const char  *to,
                          GError     **error)
{
  g_autoptr(GUri) a = g_uri_parse (from, G_URI_FLAGS_ENCODED, NULL);
  g_autoptr(GUri) b = g_uri_parse (to, G_URI_FLAGS_ENCODED, NULL);
  g_autofree char *description = dc_hf_url_describe (from);

  if (a == NULL || b == NULL || g_uri_get_host (b) == NULL
      || (g_ascii_strcasecmp (g_uri_get_scheme (b), "https") != 0
          && g_ascii_strcasecmp (g_uri_get_scheme (b), "http") != 0))
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                   "redirect to an invalid location for %s", description);
      return FALSE;
    }
  if (g_ascii_strcasecmp (g_uri_get_scheme (a), "https") == 0
      && g_ascii_strcasecmp (g_uri_get_scheme (b), "https") != 0)
    {
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                   "refused a redirect from https to plain http for %s", description);
      return FALSE;
    }
  return TRUE;
}
