/* dc-hf-client.h: HTTP access to the Hugging Face Hub (libsoup 3).
 *
 * Byte-range reads with coalescing, JSON listings, redirects followed by
 * hand (the range kept, the token dropped when the host changes), retries
 * with backoff on transient failures, and clear errors for 401/403/404
 * naming the repository and file.
 *
 * The token lives only in this object's memory. It is asked for (through the
 * token function) only after a request failed for want of one, and is sent
 * only to the base URL's origin, and only over https or to a loopback host
 * (a request that would carry it over plain http elsewhere is refused before
 * connecting). It is never logged or put in a URL. No redirect may lead from
 * https to plain http.
 *
 * Threads: create and configure the client on the main thread. The blocking
 * calls may run on any thread (libsoup >= 3.2 allows sending from several);
 * the _async calls run them in a GTask thread and complete on the caller's
 * thread-default context. `bytes-received` is notified on the main context.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "dc-byte-source.h"

G_BEGIN_DECLS

/* Ranges closer than this are fetched in one request (the bytes between are
 * cheaper than another round trip). */
#define DC_HF_COALESCE_GAP   (256u * 1024u)
/* One coalesced request never exceeds this. */
#define DC_HF_MAX_REQUEST    (64u * 1024u * 1024u)
/* A listing (the tree API) may have at most this many pages: the Hub sends
 * up to 1000 entries a page, so 100,000 entries (dc-dataset.c's cap) fit in
 * 100 pages; 1000 leaves room for servers with smaller pages and still ends
 * a server that links pages forever. */
#define DC_HF_MAX_LIST_PAGES 1000u

#define DC_TYPE_HF_CLIENT (dc_hf_client_get_type ())
G_DECLARE_FINAL_TYPE (DcHfClient, dc_hf_client, DC, HF_CLIENT, GObject)

/**
 * DcHfTokenFunc:
 * @description: what was refused, e.g. “file x of dataset y”
 *
 * Called at most once per client, on the thread that made the request,
 * after a 401 when no token is set.
 *
 * Returns: (transfer full) (nullable): a token, or %NULL to give up
 */
typedef char *(*DcHfTokenFunc) (const char *description,
                                gpointer    user_data);

DcHfClient   *dc_hf_client_new                  (const char          *base_url);
const char   *dc_hf_client_get_base_url         (DcHfClient          *self);
void          dc_hf_client_set_token            (DcHfClient          *self,
                                                 const char          *token);
gboolean      dc_hf_client_has_token            (DcHfClient          *self);
void          dc_hf_client_share_token          (DcHfClient          *self,
                                                 DcHfClient          *from);
void          dc_hf_client_set_token_func       (DcHfClient          *self,
                                                 DcHfTokenFunc        func,
                                                 gpointer             user_data,
                                                 GDestroyNotify       destroy);
void          dc_hf_client_set_retries          (DcHfClient          *self,
                                                 guint                max_attempts,
                                                 guint                first_delay_ms);
void          dc_hf_client_set_timeout          (DcHfClient          *self,
                                                 guint                seconds);
guint64       dc_hf_client_get_bytes_received   (DcHfClient          *self);
guint         dc_hf_client_get_request_count    (DcHfClient          *self);

GBytes       *dc_hf_client_fetch_tail           (DcHfClient          *self,
                                                 const char          *url,
                                                 gsize                len,
                                                 guint64             *file_size,
                                                 GCancellable        *cancellable,
                                                 GError             **error);
GBytes       *dc_hf_client_fetch_range          (DcHfClient          *self,
                                                 const char          *url,
                                                 guint64              offset,
                                                 guint64              length,
                                                 guint64             *file_size,
                                                 char               **linked_sha256,
                                                 GCancellable        *cancellable,
                                                 GError             **error);
gboolean      dc_hf_client_fetch_ranges         (DcHfClient          *self,
                                                 const char          *url,
                                                 const DcByteRange   *ranges,
                                                 guint                n_ranges,
                                                 GBytes             **out,
                                                 GCancellable        *cancellable,
                                                 GError             **error);
void          dc_hf_client_fetch_ranges_async   (DcHfClient          *self,
                                                 const char          *url,
                                                 const DcByteRange   *ranges,
                                                 guint                n_ranges,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
GPtrArray    *dc_hf_client_fetch_ranges_finish  (DcHfClient          *self,
                                                 GAsyncResult        *result,
                                                 GError             **error);
GBytes       *dc_hf_client_fetch_file           (DcHfClient          *self,
                                                 const char          *url,
                                                 const char          *expected_sha256,
                                                 guint64              max_size,
                                                 GCancellable        *cancellable,
                                                 GError             **error);
JsonNode     *dc_hf_client_get_json_page        (DcHfClient          *self,
                                                 const char          *url,
                                                 char               **next_page,
                                                 GCancellable        *cancellable,
                                                 GError             **error);
JsonNode     *dc_hf_client_get_json             (DcHfClient          *self,
                                                 const char          *url,
                                                 GCancellable        *cancellable,
                                                 GError             **error);
void          dc_hf_client_get_json_async       (DcHfClient          *self,
                                                 const char          *url,
                                                 GCancellable        *cancellable,
                                                 GAsyncReadyCallback  callback,
                                                 gpointer             user_data);
JsonNode     *dc_hf_client_get_json_finish      (DcHfClient          *self,
                                                 GAsyncResult        *result,
                                                 GError             **error);
DcByteSource *dc_hf_client_open_source          (DcHfClient          *self,
                                                 const char          *url);

G_END_DECLS
