/* dc-kit-export.c: the inference kit, one offline HTML file (issue 13).
 *
 * The page template (src/kit/kit.html) has @KIT_…@ slots that are filled in
 * one pass (a value is never scanned again, so no part can inject a slot
 * into another): the style, the page's script, the engine's and the
 * worker's texts (inert <script type="text/plain">, read by the page to
 * build the worker's Blob URL), the blob (dc-kit-blob.h) as base64, and the
 * Content-Security-Policy. The policy allows no network at all
 * (default-src 'none', connect-src 'none'), only the inline style and page
 * script whose SHA-256 it names, and blob: workers.
 *
 * Stages (each followed by a cancellation check): read the parts, build the
 * blob, assemble, write. The file is written to a temporary file beside
 * @path and renamed over it (g_file_replace_contents), so a reader sees the
 * old kit or the new one, never half of one.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-model"

#include "config.h"

#include "dc-kit-export.h"

#include <string.h>

#include "dc-kit-blob.h"
#include "kit/dc-kit-resources.h"

#define KIT_RESOURCE_PREFIX "/io/github/daisychain/DaisyChain/kit/"

typedef struct
{
  const char *name;    /* the slot, "@KIT_CSS@" */
  const char *value;   /* borrowed */
} Slot;

static GBytes *
lookup_part (const char  *name,
             GError     **error)
{
  g_autofree char *path = g_strconcat (KIT_RESOURCE_PREFIX, name, NULL);
  GBytes *bytes = g_resource_lookup_data (dc_kit_get_resource (), path,
                                          G_RESOURCE_LOOKUP_FLAGS_NONE, error);

  if (bytes == NULL)
    g_prefix_error (error, "the kit's part %s is missing from the program: ", name);
  return bytes;
}

/* A part's text, refusing one that would end its <script> or <style>
 * element early: the HTML parser ends a raw-text element at the first
 * "</script" or "</style" whatever the script means by it. */
static const char *
part_text (GBytes      *bytes,
           const char  *name,
           const char  *closing,
           GError     **error)
{
  gsize size;
  const char *text = g_bytes_get_data (bytes, &size);
  g_autofree char *lower = NULL;

  /* GResource data is always NUL-terminated; a NUL inside would cut the text. */
  if (text == NULL || strlen (text) != size || !g_utf8_validate (text, size, NULL))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "the kit's part %s is not UTF-8 text", name);
      return NULL;
    }
  lower = g_ascii_strdown (text, size);
  if (closing != NULL && strstr (lower, closing) != NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "the kit's part %s contains “%s” and cannot be embedded in the page",
                   name, closing);
      return NULL;
    }
  return text;
}

/* 'sha256-BASE64' of @text, for the page's Content-Security-Policy. */
static char *
csp_hash (const char *text)
{
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;
  g_autofree char *b64 = NULL;

  g_checksum_update (checksum, (const guchar *) text, strlen (text));
  g_checksum_get_digest (checksum, digest, &len);
  b64 = g_base64_encode (digest, len);
  return g_strdup_printf ("'sha256-%s'", b64);
}

/* Fills every @KIT_…@ slot of @template in one pass. */
static GString *
fill_template (const char  *template,
               const Slot  *slots,
               guint        n_slots,
               GError     **error)
{
  g_autoptr(GString) page = g_string_sized_new (strlen (template));
  const char *p = template;

  for (;;)
    {
      const char *at = strstr (p, "@KIT_");
      const char *end;
      guint i;

      if (at == NULL)
        break;
      end = strchr (at + 1, '@');
      g_string_append_len (page, p, at - p);
      for (i = 0; end != NULL && i < n_slots; i++)
        if (strlen (slots[i].name) == (gsize) (end + 1 - at)
            && strncmp (slots[i].name, at, end + 1 - at) == 0)
          break;
      if (end == NULL || i == n_slots)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                       "the kit's page template has an unknown slot near “%.24s”", at);
          return NULL;
        }
      g_string_append (page, slots[i].value);
      p = end + 1;
    }
  g_string_append (page, p);
  return g_steal_pointer (&page);
}

gboolean
dc_kit_export (const DcGptModel  *model,
               double             loss,
               const char        *path,
               GCancellable      *cancellable,
               GError           **error)
{
  g_autoptr(GBytes) html = NULL, css = NULL, page_js = NULL, engine_js = NULL, worker_js = NULL;
  g_autoptr(GBytes) blob = NULL;
  g_autoptr(GString) page = NULL;
  g_autoptr(GFile) file = NULL;
  g_autofree char *data = NULL, *csp = NULL, *css_hash = NULL, *page_hash = NULL;
  const char *html_text, *css_text, *page_text, *engine_text, *worker_text;

  g_return_val_if_fail (model != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (cancellable == NULL || G_IS_CANCELLABLE (cancellable), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  if ((html = lookup_part ("kit.html", error)) == NULL
      || (css = lookup_part ("kit.css", error)) == NULL
      || (page_js = lookup_part ("kit-page.js", error)) == NULL
      || (engine_js = lookup_part ("dc-kit-engine.js", error)) == NULL
      || (worker_js = lookup_part ("kit-worker.js", error)) == NULL)
    return FALSE;
  if ((html_text = part_text (html, "kit.html", NULL, error)) == NULL
      || (css_text = part_text (css, "kit.css", "</style", error)) == NULL
      || (page_text = part_text (page_js, "kit-page.js", "</script", error)) == NULL
      || (engine_text = part_text (engine_js, "dc-kit-engine.js", "</script", error)) == NULL
      || (worker_text = part_text (worker_js, "kit-worker.js", "</script", error)) == NULL)
    return FALSE;

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  blob = dc_kit_blob_new (model, loss, error);
  if (blob == NULL)
    {
      g_prefix_error (error, "could not pack the model for the kit: ");
      return FALSE;
    }

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  data = g_base64_encode (g_bytes_get_data (blob, NULL), g_bytes_get_size (blob));
  css_hash = csp_hash (css_text);
  page_hash = csp_hash (page_text);
  /* No network of any kind: default-src 'none' covers fetch, images, fonts,
   * media and frames; scripts are only the hashed page script and the
   * blob: worker; the worker itself inherits this policy. 'wasm-unsafe-eval'
   * lets the engine compile the WebAssembly products it assembles itself
   * (it allows no JavaScript eval). */
  csp = g_strdup_printf ("default-src 'none'; script-src %s 'wasm-unsafe-eval'; style-src %s; "
                         "worker-src blob:; "
                         "connect-src 'none'; img-src 'none'; font-src 'none'; "
                         "base-uri 'none'; form-action 'none'", page_hash, css_hash);
  {
    const Slot slots[] = {
      { "@KIT_CSP@", csp },
      { "@KIT_CSS@", css_text },
      { "@KIT_ENGINE@", engine_text },
      { "@KIT_WORKER@", worker_text },
      { "@KIT_DATA@", data },
      { "@KIT_PAGE@", page_text },
    };

    page = fill_template (html_text, slots, G_N_ELEMENTS (slots), error);
    if (page == NULL)
      return FALSE;
  }

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  file = g_file_new_for_path (path);
  if (!g_file_replace_contents (file, page->str, page->len, NULL, FALSE, G_FILE_CREATE_NONE,
                                NULL, cancellable, error))
    {
      g_prefix_error (error, "could not write the kit %s: ", path);
      return FALSE;
    }
  return TRUE;
}
