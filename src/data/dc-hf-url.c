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

#include <string.h>

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
