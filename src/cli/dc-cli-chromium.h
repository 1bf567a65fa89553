/* dc-cli-chromium.h: headless Chromium driven over the DevTools protocol
 * (libsoup's WebSocket client), with the network blocked and every request
 * recorded: how `bench kit` and the kit tests open the inference kit. Firefox
 * is driven the same way over WebDriver BiDi (dc_chromium_new_firefox ()).
 *
 * Not thread-safe: one thread drives one browser. Every call iterates the
 * browser's own GMainContext (pushed as thread default for its duration)
 * and gives up after its timeout, so no caller can hang.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct _DcChromium DcChromium;

char       *dc_chromium_find_program (void);
char       *dc_chromium_find_firefox (void);
DcChromium *dc_chromium_new          (const char  *program,
                                      guint        timeout_ms,
                                      GError     **error);
DcChromium *dc_chromium_new_firefox  (const char  *program,
                                      guint        timeout_ms,
                                      GError     **error);
gboolean    dc_chromium_navigate     (DcChromium  *self,
                                      const char  *url,
                                      guint        timeout_ms,
                                      GError     **error);
JsonNode   *dc_chromium_evaluate     (DcChromium  *self,
                                      const char  *expression,
                                      guint        timeout_ms,
                                      GError     **error);
char       *dc_chromium_wait_string  (DcChromium  *self,
                                      const char  *expression,
                                      guint        timeout_ms,
                                      GError     **error);
gboolean    dc_chromium_screenshot   (DcChromium  *self,
                                      guint        width,
                                      guint        height,
                                      gboolean     mobile,
                                      const char  *png_path,
                                      guint        timeout_ms,
                                      GError     **error);
gboolean    dc_chromium_set_dark     (DcChromium  *self,
                                      gboolean     dark,
                                      guint        timeout_ms,
                                      GError     **error);
gboolean    dc_chromium_is_firefox   (DcChromium  *self);
GPtrArray  *dc_chromium_get_requests (DcChromium  *self);
GPtrArray  *dc_chromium_get_console  (DcChromium  *self);
void        dc_chromium_free         (DcChromium  *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (DcChromium, dc_chromium_free)

G_END_DECLS
