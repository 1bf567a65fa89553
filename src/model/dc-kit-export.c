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
 * blob, assemble the page around the data slot, write. The blob's base64 is
 * encoded while it is written, chunk by chunk (progress and a cancellation
 * check after each), into a hidden file beside @path that is renamed over
 * it only when whole: a reader sees the old kit or the new one, never half
 * of one, and a cancelled export leaves the old one as it was.
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
  const char *value;   /* borrowed; NULL for the data slot, filled while writing */
} Slot;

/* Why 768 KiB of blob per chunk: a multiple of 3 (whole base64 quads), a
 * few milliseconds of encoding and writing, so Cancel answers at once; the
 * GPT-2-small shape (about 124 MB of int8 blob) moves in ~160 steps, the
 * seeds' largest model (about 2.4 MB) in 4. */
#define KIT_CHUNK (768 * 1024)

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

/* Fills every @KIT_…@ slot of @template in one pass; the slot whose value
 * is NULL (the data, exactly once) is left empty, its place in
 * @hole_offset. */
static GString *
fill_template (const char  *template,
               const Slot  *slots,
               guint        n_slots,
               gsize       *hole_offset,
               GError     **error)
{
  gboolean holed = FALSE;

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
      if (slots[i].value == NULL)
        {
          if (holed)
            {
              g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                           "the kit's page template has the slot %s twice", slots[i].name);
              return NULL;
            }
          holed = TRUE;
          *hole_offset = page->len;
        }
      else
        g_string_append (page, slots[i].value);
      p = end + 1;
    }
  g_string_append (page, p);
  if (!holed)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "the kit's page template has no data slot");
      return NULL;
    }
  return g_steal_pointer (&page);
}

/* Progress units of a kit: the blob's chunks, then the rename. */
static guint
kit_chunks (GBytes *blob)
{
  return (guint) ((g_bytes_get_size (blob) + KIT_CHUNK - 1) / KIT_CHUNK);
}

/* The page with @blob's base64 at @hole, into @stream, a chunk at a time. */
static gboolean
write_page (GOutputStream         *stream,
            const GString         *page,
            gsize                  hole,
            GBytes                *blob,
            GCancellable          *cancellable,
            DcCheckpointProgress   progress,
            gpointer               user_data,
            GError               **error)
{
  gsize size;
  const guint8 *data = g_bytes_get_data (blob, &size);
  guint n_chunks = kit_chunks (blob);
  /* Base64 of one chunk: 4 characters per 3 bytes, and the last quad. */
  g_autofree char *out = g_malloc (KIT_CHUNK / 3 * 4 + 8);
  int state = 0, save = 0;
  gsize len;

  if (!g_output_stream_write_all (stream, page->str, hole, NULL, cancellable, error))
    return FALSE;
  for (guint c = 0; c < n_chunks; c++)
    {
      gsize from = (gsize) c * KIT_CHUNK;

      len = g_base64_encode_step (data + from, MIN (KIT_CHUNK, size - from), FALSE, out,
                                  &state, &save);
      if (!g_output_stream_write_all (stream, out, len, NULL, cancellable, error))
        return FALSE;
      if (progress != NULL)
        progress (c + 1, n_chunks + 1, user_data);
      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
    }
  len = g_base64_encode_close (FALSE, out, &state, &save);
  return g_output_stream_write_all (stream, out, len, NULL, cancellable, error)
         && g_output_stream_write_all (stream, page->str + hole, page->len - hole, NULL,
                                       cancellable, error);
}

/* The page into a hidden file beside @path, renamed over @path only when
 * whole; otherwise removed. */
static gboolean
write_kit (const char            *path,
           const GString         *page,
           gsize                  hole,
           GBytes                *blob,
           GCancellable          *cancellable,
           DcCheckpointProgress   progress,
           gpointer               user_data,
           GError               **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *temp = g_strdup_printf ("%s/.%s.partial", dir, base);
  g_autoptr(GFile) temp_file = g_file_new_for_path (temp);
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFileOutputStream) stream = NULL;
  gboolean ok;

  stream = g_file_replace (temp_file, NULL, FALSE, G_FILE_CREATE_NONE, cancellable, error);
  if (stream == NULL)
    return FALSE;
  ok = write_page (G_OUTPUT_STREAM (stream), page, hole, blob, cancellable, progress,
                   user_data, error);
  /* Closed without the cancellable: a cancelled close must not leave the
   * file open; the result of a failed write is dropped below anyway. */
  ok = g_output_stream_close (G_OUTPUT_STREAM (stream), NULL, ok ? error : NULL) && ok;
  ok = ok && !g_cancellable_set_error_if_cancelled (cancellable, error)
       && g_file_move (temp_file, file, G_FILE_COPY_OVERWRITE | G_FILE_COPY_NO_FALLBACK_FOR_MOVE,
                       NULL, NULL, NULL, error);
  if (!ok)
    g_file_delete (temp_file, NULL, NULL);
  return ok;
}

gboolean
dc_kit_export (const DcGptModel  *model,
               double             loss,
               const char        *path,
               GCancellable      *cancellable,
               GError           **error)
{
  return dc_kit_export_full (model, loss, path, cancellable, NULL, NULL, error);
}

gboolean
dc_kit_export_full (const DcGptModel      *model,
                    double                 loss,
                    const char            *path,
                    GCancellable          *cancellable,
                    DcCheckpointProgress   progress,
                    gpointer               user_data,
                    GError               **error)
{
  g_autoptr(GBytes) html = NULL, css = NULL, page_js = NULL, engine_js = NULL, worker_js = NULL;
  g_autoptr(GBytes) blob = NULL;
  g_autoptr(GString) page = NULL;
  g_autofree char *csp = NULL, *css_hash = NULL, *page_hash = NULL;
  const char *html_text, *css_text, *page_text, *engine_text, *worker_text;
  gsize hole = 0;

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
      { "@KIT_DATA@", NULL },
      { "@KIT_PAGE@", page_text },
    };

    page = fill_template (html_text, slots, G_N_ELEMENTS (slots), &hole, error);
    if (page == NULL)
      return FALSE;
  }

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    return FALSE;
  if (!write_kit (path, page, hole, blob, cancellable, progress, user_data, error))
    {
      g_prefix_error (error, "could not write the kit %s: ", path);
      return FALSE;
    }
  if (progress != NULL)
    progress (kit_chunks (blob) + 1, kit_chunks (blob) + 1, user_data);
  return TRUE;
}
