/* dc-hf-client.c: HTTP access to the Hugging Face Hub (libsoup 3).
 *
 * One request goes through request_once(): redirects are followed here,
 * not by libsoup, so that the Range header is kept on every hop, the token
 * is sent only while the URL stays on the base URL's origin (the Hub
 * redirects file downloads to a CDN on another host) and never over plain
 * http off loopback, and no hop goes from https to http (dc-hf-url.c decides
 * both rules; checking them here, before each request exists, is simpler and
 * safer than undoing what libsoup's own redirect handling already sent).
 * perform() wraps it with the token prompt and with retries on transient
 * failures (network errors, a body cut short, 408/429/5xx), backing off
 * exponentially.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-data"

#include "config.h"

#include "dc-hf-client.h"

#include <libsoup/soup.h>
#include <string.h>

#include "dc-data-error.h"
#include "dc-json-bounds.h"
#include "dc-hf-url.h"

#define MAX_REDIRECTS 10
/* JSON listings larger than this are refused. */
#define MAX_JSON_BYTES (32u * 1024u * 1024u)
#define READ_CHUNK (64u * 1024u)

struct _DcHfClient
{
  GObject         parent_instance;

  /* owned references */
  SoupSession    *session;
  GMainContext   *main_context;   /* where bytes-received is notified */
  char           *base_url;
  GUri           *base_uri;

  /* state; the token fields are guarded by token_lock */
  GMutex          token_lock;
  char           *token;
  gboolean        token_asked;
  DcHfTokenFunc   token_func;
  gpointer        token_data;
  GDestroyNotify  token_destroy;

  guint           max_attempts;
  guint           first_delay_ms;
  guint64         bytes_received;  /* atomic */
  guint           request_count;   /* atomic */
  gint            notify_pending;  /* atomic */
};

G_DEFINE_FINAL_TYPE (DcHfClient, dc_hf_client, G_TYPE_OBJECT)

enum
{
  PROP_0,
  PROP_BASE_URL,
  PROP_BYTES_RECEIVED,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

typedef struct
{
  gboolean active;
  gboolean suffix;   /* the last `length` bytes */
  guint64  offset;
  guint64  length;
} RangeSpec;

static void
dc_hf_client_finalize (GObject *object)
{
  DcHfClient *self = DC_HF_CLIENT (object);

  g_clear_object (&self->session);
  g_clear_pointer (&self->main_context, g_main_context_unref);
  g_clear_pointer (&self->base_uri, g_uri_unref);
  g_free (self->base_url);
  if (self->token != NULL)
    {
      /* Do not leave the secret in freed memory. */
      memset (self->token, 0, strlen (self->token));
      g_free (self->token);
    }
  if (self->token_destroy != NULL)
    self->token_destroy (self->token_data);
  g_mutex_clear (&self->token_lock);

  G_OBJECT_CLASS (dc_hf_client_parent_class)->finalize (object);
}

static void
dc_hf_client_get_property (GObject    *object,
                           guint       prop_id,
                           GValue     *value,
                           GParamSpec *pspec)
{
  DcHfClient *self = DC_HF_CLIENT (object);

  switch (prop_id)
    {
    case PROP_BASE_URL:
      g_value_set_string (value, self->base_url);
      break;
    case PROP_BYTES_RECEIVED:
      g_value_set_uint64 (value, dc_hf_client_get_bytes_received (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_hf_client_set_property (GObject      *object,
                           guint         prop_id,
                           const GValue *value,
                           GParamSpec   *pspec)
{
  DcHfClient *self = DC_HF_CLIENT (object);

  switch (prop_id)
    {
    case PROP_BASE_URL:
      {
        const char *url = g_value_get_string (value);
        gsize len;

        g_free (self->base_url);
        self->base_url = url != NULL ? g_strdup (url) : dc_hf_url_dup_default_base ();
        len = strlen (self->base_url);
        while (len > 0 && self->base_url[len - 1] == '/')
          self->base_url[--len] = '\0';
        g_clear_pointer (&self->base_uri, g_uri_unref);
        self->base_uri = g_uri_parse (self->base_url, G_URI_FLAGS_NONE, NULL);
      }
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_hf_client_class_init (DcHfClientClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = dc_hf_client_finalize;
  object_class->get_property = dc_hf_client_get_property;
  object_class->set_property = dc_hf_client_set_property;

  properties[PROP_BASE_URL] =
    g_param_spec_string ("base-url", NULL, NULL, NULL,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY
                         | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_BYTES_RECEIVED] =
    g_param_spec_uint64 ("bytes-received", NULL, NULL, 0, G_MAXUINT64, 0,
                         G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
dc_hf_client_init (DcHfClient *self)
{
  g_mutex_init (&self->token_lock);
  self->main_context = g_main_context_ref_thread_default ();
  self->max_attempts = 4;
  self->first_delay_ms = 500;
  self->session = soup_session_new_with_options ("user-agent", "DaisyChain/" PACKAGE_VERSION,
                                                 "timeout", 60,
                                                 "idle-timeout", 60,
                                                 NULL);
}

/**
 * dc_hf_client_new:
 * @base_url: (nullable): the Hub's base URL; %NULL follows `$HF_ENDPOINT`
 *   and defaults to https://huggingface.co
 *
 * Returns: (transfer full): a new client
 */
DcHfClient *
dc_hf_client_new (const char *base_url)
{
  return g_object_new (DC_TYPE_HF_CLIENT, "base-url", base_url, NULL);
}

const char *
dc_hf_client_get_base_url (DcHfClient *self)
{
  g_return_val_if_fail (DC_IS_HF_CLIENT (self), NULL);
  return self->base_url;
}

/**
 * dc_hf_client_set_token:
 * @token: (nullable): a Hugging Face access token, or %NULL to forget it
 *
 * Keeps @token in memory only.
 */
void
dc_hf_client_set_token (DcHfClient *self,
                        const char *token)
{
  g_return_if_fail (DC_IS_HF_CLIENT (self));

  g_mutex_lock (&self->token_lock);
  if (self->token != NULL)
    memset (self->token, 0, strlen (self->token));
  g_free (self->token);
  self->token = token != NULL && *token != '\0' ? g_strstrip (g_strdup (token)) : NULL;
  g_mutex_unlock (&self->token_lock);
}

/**
 * dc_hf_client_share_token:
 * @from: a client whose token (if any) @self should send too
 *
 * Copies @from's token into @self, in memory, without it leaving the data
 * layer: for a client made on a worker thread (which reports to that
 * thread's context) that must send the token the user gave the main one.
 * A token function set with no destroy notify is copied too. Thread-safe.
 */
void
dc_hf_client_share_token (DcHfClient *self,
                          DcHfClient *from)
{
  char *token;

  g_return_if_fail (DC_IS_HF_CLIENT (self));
  g_return_if_fail (DC_IS_HF_CLIENT (from));

  g_mutex_lock (&from->token_lock);
  token = g_strdup (from->token);
  /* A token function whose data needs no freeing (the CLI's: a process-wide
   * file name or HF_TOKEN) is shared too, so that the copy asks for the
   * token itself after a 401, as @from would. */
  if (from->token_func != NULL && from->token_destroy == NULL)
    dc_hf_client_set_token_func (self, from->token_func, from->token_data, NULL);
  g_mutex_unlock (&from->token_lock);
  dc_hf_client_set_token (self, token);
  if (token != NULL)
    memset (token, 0, strlen (token));
  g_free (token);
}

gboolean
dc_hf_client_has_token (DcHfClient *self)
{
  gboolean has;

  g_mutex_lock (&self->token_lock);
  has = self->token != NULL;
  g_mutex_unlock (&self->token_lock);
  return has;
}

/**
 * dc_hf_client_set_token_func:
 *
 * Sets how a token is asked for when a request is refused for want of one
 * (a prompt in the UI, an environment variable or a file in the CLI).
 */
void
dc_hf_client_set_token_func (DcHfClient     *self,
                             DcHfTokenFunc   func,
                             gpointer        user_data,
                             GDestroyNotify  destroy)
{
  g_return_if_fail (DC_IS_HF_CLIENT (self));

  if (self->token_destroy != NULL)
    self->token_destroy (self->token_data);
  self->token_func = func;
  self->token_data = user_data;
  self->token_destroy = destroy;
}

/**
 * dc_hf_client_set_retries:
 * @max_attempts: tries per request, at least 1
 * @first_delay_ms: the wait before the second try; it doubles after each
 */
void
dc_hf_client_set_retries (DcHfClient *self,
                          guint       max_attempts,
                          guint       first_delay_ms)
{
  g_return_if_fail (DC_IS_HF_CLIENT (self));
  self->max_attempts = MAX (max_attempts, 1);
  self->first_delay_ms = first_delay_ms;
}

void
dc_hf_client_set_timeout (DcHfClient *self,
                          guint       seconds)
{
  g_return_if_fail (DC_IS_HF_CLIENT (self));
  soup_session_set_timeout (self->session, seconds);
}

guint64
dc_hf_client_get_bytes_received (DcHfClient *self)
{
  return __atomic_load_n (&self->bytes_received, __ATOMIC_RELAXED);
}

guint
dc_hf_client_get_request_count (DcHfClient *self)
{
  return (guint) g_atomic_int_get ((gint *) &self->request_count);
}

static gboolean
notify_bytes_cb (gpointer data)
{
  GWeakRef *ref = data;
  g_autoptr(DcHfClient) self = g_weak_ref_get (ref);

  if (self != NULL)
    {
      g_atomic_int_set (&self->notify_pending, 0);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BYTES_RECEIVED]);
    }
  return G_SOURCE_REMOVE;
}

static void
weak_ref_free (gpointer data)
{
  g_weak_ref_clear (data);
  g_free (data);
}

/* Called per chunk from whichever thread reads; one idle notify at a time. */
static void
add_bytes (DcHfClient *self,
           gsize       n)
{
  /* GLib has no 64-bit atomic add; GCC and clang builtins do it everywhere. */
  __atomic_add_fetch (&self->bytes_received, (guint64) n, __ATOMIC_RELAXED);

  if (g_atomic_int_compare_and_exchange (&self->notify_pending, 0, 1))
    {
      GSource *source = g_idle_source_new ();
      GWeakRef *ref = g_new0 (GWeakRef, 1);

      g_weak_ref_init (ref, self);
      g_source_set_callback (source, notify_bytes_cb, ref, weak_ref_free);
      g_source_set_static_name (source, "[dc] bytes-received notify");
      g_source_attach (source, self->main_context);
      g_source_unref (source);
    }
}

static gboolean
same_origin (GUri *a,
             GUri *b)
{
  if (a == NULL || b == NULL)
    return FALSE;
  return g_ascii_strcasecmp (g_uri_get_scheme (a), g_uri_get_scheme (b)) == 0
         && g_uri_get_host (a) != NULL && g_uri_get_host (b) != NULL
         && g_ascii_strcasecmp (g_uri_get_host (a), g_uri_get_host (b)) == 0
         && g_uri_get_port (a) == g_uri_get_port (b);
}

static gboolean
is_transient_status (guint status)
{
  return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

static gboolean
parse_content_range (const char *value,
                     guint64    *start,
                     guint64    *end,
                     guint64    *total)
{
  /* "bytes START-END/TOTAL"; TOTAL may be "*" (unknown), which we refuse:
   * without it a suffix read cannot learn the file size. */
  char *rest;

  if (value == NULL || !g_str_has_prefix (value, "bytes "))
    return FALSE;
  value += 6;
  *start = g_ascii_strtoull (value, &rest, 10);
  if (rest == value || *rest != '-')
    return FALSE;
  value = rest + 1;
  *end = g_ascii_strtoull (value, &rest, 10);
  if (rest == value || *rest != '/')
    return FALSE;
  value = rest + 1;
  *total = g_ascii_strtoull (value, &rest, 10);
  if (rest == value || *rest != '\0')
    return FALSE;
  return *start <= *end && *end < *total;
}

/* Reads the body into memory: exactly @expected bytes when it is known
 * (G_MAXUINT64 otherwise), at most @limit. */
static GBytes *
read_body (DcHfClient    *self,
           GInputStream  *stream,
           guint64        expected,
           guint64        limit,
           const char    *description,
           gboolean      *transient,
           GCancellable  *cancellable,
           GError       **error)
{
  g_autoptr(GByteArray) body = g_byte_array_sized_new (expected != G_MAXUINT64
                                                       ? (guint) MIN (expected, limit) : 4096);
  g_autoptr(GError) local_error = NULL;

  for (;;)
    {
      gssize n;
      guint old = body->len;
      gsize want = READ_CHUNK;

      if (expected != G_MAXUINT64)
        want = (gsize) MIN ((guint64) want, expected - body->len);
      if (want == 0)
        break;
      g_byte_array_set_size (body, old + (guint) want);
      n = g_input_stream_read (stream, body->data + old, want, cancellable, &local_error);
      if (n < 0)
        {
          g_byte_array_set_size (body, old);
          *transient = !g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
          if (!*transient)
            {
              g_propagate_error (error, g_steal_pointer (&local_error));
              return NULL;
            }
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                       "the connection broke while receiving %s (%u bytes arrived): %s",
                       description, body->len, local_error->message);
          return NULL;
        }
      g_byte_array_set_size (body, old + (guint) n);
      if (n == 0)
        break;
      add_bytes (self, (gsize) n);
      if (body->len > limit)
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                       "%s is larger than the %" G_GUINT64_FORMAT "-byte limit", description,
                       limit);
          return NULL;
        }
    }
  if (expected != G_MAXUINT64 && body->len != expected)
    {
      *transient = TRUE;
      g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                   "the connection closed before the whole body of %s arrived "
                   "(%u of %" G_GUINT64_FORMAT " bytes)", description, body->len, expected);
      return NULL;
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&body));
}

/* Parses `Link: <URL>; rel="next"` (RFC 8288, the form the Hub sends),
 * resolving URL against the request's. */
static char *
find_next_page (GUri               *base,
                SoupMessageHeaders *headers)
{
  const char *link = soup_message_headers_get_list (headers, "Link");
  g_auto(GStrv) links = NULL;

  if (link == NULL)
    return NULL;
  links = g_strsplit (link, ",", -1);
  for (guint i = 0; links[i] != NULL; i++)
    {
      const char *open = strchr (links[i], '<');
      const char *close = open != NULL ? strchr (open, '>') : NULL;
      g_autofree char *target = NULL;
      g_autoptr(GUri) resolved = NULL;

      if (close == NULL || strstr (close, "rel=\"next\"") == NULL)
        continue;
      target = g_strndup (open + 1, (gsize) (close - open - 1));
      resolved = g_uri_parse_relative (base, target, G_URI_FLAGS_ENCODED, NULL);
      if (resolved != NULL)
        return g_uri_to_string (resolved);
    }
  return NULL;
}

/* The sha256 a Hub answer names for the file behind a resolve URL: the
 * `X-Linked-Etag` of an LFS file is its sha256 (a quoted hex string; a
 * 40-digit one is a git blob id, of no use here). */
static char *
dup_linked_sha256 (SoupMessageHeaders *headers)
{
  const char *value = soup_message_headers_get_one (headers, "X-Linked-Etag");
  g_autofree char *hex = NULL;

  if (value == NULL)
    return NULL;
  if (g_str_has_prefix (value, "W/"))
    value += 2;
  hex = g_strdup (value);
  g_strstrip (hex);
  if (hex[0] == '"' && strlen (hex) >= 2 && hex[strlen (hex) - 1] == '"')
    {
      hex[strlen (hex) - 1] = '\0';
      memmove (hex, hex + 1, strlen (hex));
    }
  if (strlen (hex) != 64)
    return NULL;
  for (const char *c = hex; *c != '\0'; c++)
    if (!g_ascii_isxdigit (*c))
      return NULL;
  return g_ascii_strdown (hex, -1);
}

static GBytes *
request_once (DcHfClient       *self,
              const char       *url,
              const RangeSpec  *range,
              guint64           limit,
              guint64          *file_size,
              char            **next_page,
              char            **linked_sha256,
              gboolean         *transient,
              GCancellable     *cancellable,
              GError          **error)
{
  g_autofree char *current = g_strdup (url);
  g_autofree char *description = dc_hf_url_describe (url);

  *transient = FALSE;
  if (linked_sha256 != NULL)
    g_clear_pointer (linked_sha256, g_free);
  for (guint hops = 0; hops <= MAX_REDIRECTS; hops++)
    {
      g_autoptr(SoupMessage) msg = NULL;
      g_autoptr(GInputStream) stream = NULL;
      g_autoptr(GUri) uri = NULL;
      g_autoptr(GError) local_error = NULL;
      SoupMessageHeaders *headers;
      guint status;
      guint64 expected = G_MAXUINT64;
      GBytes *bytes;

      uri = g_uri_parse (current, G_URI_FLAGS_ENCODED, &local_error);
      if (uri == NULL || g_uri_get_host (uri) == NULL
          || (g_strcmp0 (g_uri_get_scheme (uri), "http") != 0
              && g_strcmp0 (g_uri_get_scheme (uri), "https") != 0))
        {
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_FAILED,
                       "not an http(s) URL: %s", description);
          return NULL;
        }
      msg = soup_message_new_from_uri ("GET", uri);
      soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
      headers = soup_message_get_request_headers (msg);
      if (range->active)
        {
          if (range->suffix)
            soup_message_headers_set_range (headers, -(goffset) range->length, -1);
          else
            soup_message_headers_set_range (headers, (goffset) range->offset,
                                            (goffset) (range->offset + range->length - 1));
        }
      /* The token goes only to the base URL's origin: never to a CDN or any
       * other host a redirect leads to. And never over plain http except to
       * loopback: refused here, before any connection is made. */
      g_mutex_lock (&self->token_lock);
      if (self->token != NULL && same_origin (uri, self->base_uri))
        {
          g_autofree char *value = NULL;

          if (!dc_hf_url_may_carry_token (current))
            {
              g_mutex_unlock (&self->token_lock);
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_FAILED,
                           "refused to send the Hugging Face token over plain http to %s "
                           "for %s (use https, or a loopback address for a local mirror)",
                           g_uri_get_host (uri), description);
              return NULL;
            }
          value = g_strconcat ("Bearer ", self->token, NULL);
          soup_message_headers_replace (headers, "Authorization", value);
          memset (value, 0, strlen (value));
        }
      g_mutex_unlock (&self->token_lock);

      g_atomic_int_inc ((gint *) &self->request_count);
      stream = soup_session_send (self->session, msg, cancellable, &local_error);
      if (stream == NULL)
        {
          *transient = !g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
          if (!*transient)
            g_propagate_error (error, g_steal_pointer (&local_error));
          else
            g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                         "could not reach the server for %s: %s", description,
                         local_error->message);
          return NULL;
        }

      status = soup_message_get_status (msg);
      if (linked_sha256 != NULL && *linked_sha256 == NULL)
        *linked_sha256 = dup_linked_sha256 (soup_message_get_response_headers (msg));
      if (SOUP_STATUS_IS_REDIRECTION (status) && status != 304)
        {
          const char *location = soup_message_headers_get_one (
              soup_message_get_response_headers (msg), "Location");
          g_autoptr(GUri) next = NULL;
          g_autofree char *next_url = NULL;

          if (location == NULL)
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                           "redirect without a location for %s", description);
              return NULL;
            }
          next = g_uri_parse_relative (uri, location, G_URI_FLAGS_ENCODED, NULL);
          if (next == NULL)
            {
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                           "redirect to an invalid location for %s", description);
              return NULL;
            }
          next_url = g_uri_to_string (next);
          if (!dc_hf_url_check_redirect (current, next_url, error))
            return NULL;
          g_free (current);
          current = g_steal_pointer (&next_url);
          g_input_stream_close (stream, NULL, NULL);
          continue;
        }

      switch (status)
        {
        case 200:
          if (range->active)
            {
              /* Reading on would download the whole file: stop here. */
              g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_RANGE_IGNORED,
                           "the server ignored the byte range for %s", description);
              return NULL;
            }
          {
            goffset len = soup_message_headers_get_content_length (
                soup_message_get_response_headers (msg));

            if (soup_message_headers_get_encoding (soup_message_get_response_headers (msg))
                == SOUP_ENCODING_CONTENT_LENGTH)
              expected = (guint64) len;
          }
          bytes = read_body (self, stream, expected, limit, description, transient,
                             cancellable, error);
          if (bytes != NULL && file_size != NULL)
            *file_size = g_bytes_get_size (bytes);
          if (bytes != NULL && next_page != NULL)
            *next_page = find_next_page (uri, soup_message_get_response_headers (msg));
          return bytes;

        case 206:
          {
            guint64 start, end, total;
            const char *content_range = soup_message_headers_get_one (
                soup_message_get_response_headers (msg), "Content-Range");

            if (!range->active || !parse_content_range (content_range, &start, &end, &total))
              {
                g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                             "the server sent a partial answer without a usable "
                             "Content-Range for %s", description);
                return NULL;
              }
            if (range->suffix
                ? (end + 1 != total || end - start + 1 != MIN (range->length, total))
                : (start != range->offset || end - start + 1 != range->length))
              {
                g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                             "the server sent bytes %" G_GUINT64_FORMAT "–%" G_GUINT64_FORMAT
                             " of %s, not the range asked for", start, end, description);
                return NULL;
              }
            if (file_size != NULL)
              *file_size = total;
            return read_body (self, stream, end - start + 1, limit, description, transient,
                              cancellable, error);
          }

        case 401:
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED,
                       dc_hf_client_has_token (self)
                       ? "the Hugging Face token was refused for %s"
                       : "%s needs a Hugging Face token (set HF_TOKEN or use --token-file)",
                       description);
          return NULL;

        case 403:
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_FORBIDDEN,
                       "access to %s is forbidden: the repository may be gated or private "
                       "(accept its terms on the Hub, or use a token that may read it)",
                       description);
          return NULL;

        case 404:
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND,
                       "%s was not found (check the repository id, revision and path)",
                       description);
          return NULL;

        case 416:
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                       "the bytes asked for lie beyond the end of %s (changed or truncated "
                       "on the server?)", description);
          return NULL;

        default:
          *transient = is_transient_status (status);
          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
                       "the server answered %u %s for %s", status,
                       soup_message_get_reason_phrase (msg) != NULL
                       ? soup_message_get_reason_phrase (msg) : "", description);
          return NULL;
        }
    }

  g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_HTTP,
               "too many redirects for %s", description);
  return NULL;
}

static gboolean
sleep_cancellable (guint          ms,
                   GCancellable  *cancellable,
                   GError       **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) ms * 1000;

  while (g_get_monotonic_time () < deadline)
    {
      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
      g_usleep (MIN (20000, MAX (0, deadline - g_get_monotonic_time ())));
    }
  return !g_cancellable_set_error_if_cancelled (cancellable, error);
}

static gboolean
ask_token (DcHfClient *self,
           const char *url)
{
  g_autofree char *description = dc_hf_url_describe (url);
  DcHfTokenFunc func;
  gpointer data;
  char *token;

  g_mutex_lock (&self->token_lock);
  if (self->token != NULL || self->token_asked || self->token_func == NULL)
    {
      g_mutex_unlock (&self->token_lock);
      return FALSE;
    }
  self->token_asked = TRUE;
  func = self->token_func;
  data = self->token_data;
  g_mutex_unlock (&self->token_lock);

  token = func (description, data);
  if (token == NULL)
    return FALSE;
  dc_hf_client_set_token (self, token);
  memset (token, 0, strlen (token));
  g_free (token);
  return dc_hf_client_has_token (self);
}

static GBytes *
perform (DcHfClient       *self,
         const char       *url,
         const RangeSpec  *range,
         guint64           limit,
         guint64          *file_size,
         char            **next_page,
         char            **linked_sha256,
         GCancellable     *cancellable,
         GError          **error)
{
  guint delay = self->first_delay_ms;

  for (guint attempt = 1;; attempt++)
    {
      g_autoptr(GError) local_error = NULL;
      gboolean transient = FALSE;
      GBytes *bytes;

      bytes = request_once (self, url, range, limit, file_size, next_page, linked_sha256,
                            &transient, cancellable, &local_error);
      if (bytes != NULL)
        return bytes;

      if (g_error_matches (local_error, DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED)
          && ask_token (self, url))
        {
          attempt--;
          continue;
        }
      if (!transient || attempt >= self->max_attempts)
        {
          if (transient && attempt > 1)
            g_prefix_error (&local_error, "after %u attempts: ", attempt);
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      g_debug ("attempt %u failed (%s); retrying in %u ms", attempt, local_error->message,
               delay);
      if (!sleep_cancellable (delay, cancellable, error))
        return NULL;
      delay = MIN (delay * 2, 30000u);
    }
}

/**
 * dc_hf_client_fetch_tail:
 * @len: how many bytes to read from the end of the file
 * @file_size: (out): the file's whole size, from Content-Range
 *
 * One suffix range request (`Range: bytes=-len`).
 *
 * Returns: (transfer full): the last min(@len, size) bytes, or %NULL
 */
GBytes *
dc_hf_client_fetch_tail (DcHfClient    *self,
                         const char    *url,
                         gsize          len,
                         guint64       *file_size,
                         GCancellable  *cancellable,
                         GError       **error)
{
  RangeSpec range = { TRUE, TRUE, 0, len };

  g_return_val_if_fail (DC_IS_HF_CLIENT (self), NULL);
  g_return_val_if_fail (len > 0, NULL);
  return perform (self, url, &range, DC_HF_MAX_REQUEST, file_size, NULL, NULL, cancellable,
                  error);
}

/**
 * dc_hf_client_fetch_range:
 * @offset: the first byte
 * @length: how many bytes, 1 to %DC_HF_MAX_REQUEST
 * @file_size: (out) (optional): the whole file's size, from Content-Range
 * @linked_sha256: (out) (optional) (nullable): the file's sha256 where the
 *   Hub names it (`X-Linked-Etag` of an LFS file's resolve answer), else %NULL
 *
 * One range request, uncoalesced: what a cache that must tell one version of
 * a file from another (a branch moves) needs to know besides the bytes.
 *
 * Returns: (transfer full): exactly @length bytes, or %NULL
 */
GBytes *
dc_hf_client_fetch_range (DcHfClient    *self,
                          const char    *url,
                          guint64        offset,
                          guint64        length,
                          guint64       *file_size,
                          char         **linked_sha256,
                          GCancellable  *cancellable,
                          GError       **error)
{
  RangeSpec range = { TRUE, FALSE, offset, length };
  g_autofree char *linked = NULL;
  GBytes *bytes;

  g_return_val_if_fail (DC_IS_HF_CLIENT (self), NULL);
  g_return_val_if_fail (length > 0 && length <= DC_HF_MAX_REQUEST, NULL);

  bytes = perform (self, url, &range, DC_HF_MAX_REQUEST, file_size, NULL, &linked, cancellable,
                   error);
  if (bytes != NULL && linked_sha256 != NULL)
    *linked_sha256 = g_steal_pointer (&linked);
  return bytes;
}

static int
compare_by_offset (gconstpointer a,
                   gconstpointer b,
                   gpointer      user_data)
{
  const DcByteRange *ranges = user_data;
  guint64 x = ranges[*(const guint *) a].offset;
  guint64 y = ranges[*(const guint *) b].offset;

  return x < y ? -1 : x > y;
}

/**
 * dc_hf_client_fetch_ranges:
 * @ranges: (array length=n_ranges): byte ranges, in any order, may overlap
 * @out: (out caller-allocates) (array length=n_ranges): one #GBytes per range
 *
 * Reads the ranges with as few requests as sensible: ranges less than
 * %DC_HF_COALESCE_GAP apart share one request, up to %DC_HF_MAX_REQUEST.
 */
gboolean
dc_hf_client_fetch_ranges (DcHfClient         *self,
                           const char         *url,
                           const DcByteRange  *ranges,
                           guint               n_ranges,
                           GBytes            **out,
                           GCancellable       *cancellable,
                           GError            **error)
{
  g_autofree guint *order = g_new (guint, MAX (n_ranges, 1));
  guint i = 0;

  g_return_val_if_fail (DC_IS_HF_CLIENT (self), FALSE);

  for (guint k = 0; k < n_ranges; k++)
    {
      order[k] = k;
      out[k] = NULL;
    }
  g_qsort_with_data (order, (gint) n_ranges, sizeof (guint), compare_by_offset,
                     (gpointer) ranges);

  while (i < n_ranges)
    {
      const DcByteRange *first = &ranges[order[i]];
      guint64 start = first->offset;
      guint64 end = first->offset + first->length;
      guint j = i + 1;
      g_autoptr(GBytes) bytes = NULL;

      while (j < n_ranges)
        {
          const DcByteRange *next = &ranges[order[j]];
          guint64 next_end = MAX (end, next->offset + next->length);

          if (next->offset > end + DC_HF_COALESCE_GAP || next_end - start > DC_HF_MAX_REQUEST)
            break;
          end = next_end;
          j++;
        }

      if (end > start)
        {
          RangeSpec range = { TRUE, FALSE, start, end - start };

          bytes = perform (self, url, &range, DC_HF_MAX_REQUEST, NULL, NULL, NULL, cancellable,
                           error);
          if (bytes == NULL)
            {
              for (guint k = 0; k < n_ranges; k++)
                g_clear_pointer (&out[k], g_bytes_unref);
              return FALSE;
            }
        }
      else
        {
          bytes = g_bytes_new (NULL, 0);
        }
      for (guint k = i; k < j; k++)
        {
          const DcByteRange *r = &ranges[order[k]];

          out[order[k]] = g_bytes_new_from_bytes (bytes, r->offset - start, r->length);
        }
      i = j;
    }
  return TRUE;
}

typedef struct
{
  char        *url;
  DcByteRange *ranges;
  guint        n_ranges;
} FetchData;

static void
fetch_data_free (FetchData *data)
{
  g_free (data->url);
  g_free (data->ranges);
  g_free (data);
}

static void
fetch_ranges_worker (GTask        *task,
                     gpointer      source_object,
                     gpointer      task_data,
                     GCancellable *cancellable)
{
  FetchData *data = task_data;
  g_autofree GBytes **out = g_new0 (GBytes *, MAX (data->n_ranges, 1));
  GError *error = NULL;
  GPtrArray *result;

  if (!dc_hf_client_fetch_ranges (source_object, data->url, data->ranges, data->n_ranges, out,
                                  cancellable, &error))
    {
      g_task_return_error (task, error);
      return;
    }
  result = g_ptr_array_new_full (data->n_ranges, (GDestroyNotify) g_bytes_unref);
  for (guint i = 0; i < data->n_ranges; i++)
    g_ptr_array_add (result, out[i]);
  g_task_return_pointer (task, result, (GDestroyNotify) g_ptr_array_unref);
}

/**
 * dc_hf_client_fetch_ranges_async:
 *
 * Like dc_hf_client_fetch_ranges() without blocking the caller; the
 * callback runs on the caller's thread-default main context.
 */
void
dc_hf_client_fetch_ranges_async (DcHfClient          *self,
                                 const char          *url,
                                 const DcByteRange   *ranges,
                                 guint                n_ranges,
                                 GCancellable        *cancellable,
                                 GAsyncReadyCallback  callback,
                                 gpointer             user_data)
{
  g_autoptr(GTask) task = NULL;
  FetchData *data;

  g_return_if_fail (DC_IS_HF_CLIENT (self));

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, dc_hf_client_fetch_ranges_async);
  data = g_new0 (FetchData, 1);
  data->url = g_strdup (url);
  data->ranges = g_memdup2 (ranges, sizeof (DcByteRange) * n_ranges);
  data->n_ranges = n_ranges;
  g_task_set_task_data (task, data, (GDestroyNotify) fetch_data_free);
  g_task_run_in_thread (task, fetch_ranges_worker);
}

/**
 * dc_hf_client_fetch_ranges_finish:
 *
 * Returns: (transfer container) (element-type GBytes): one #GBytes per range
 */
GPtrArray *
dc_hf_client_fetch_ranges_finish (DcHfClient    *self,
                                  GAsyncResult  *result,
                                  GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/**
 * dc_hf_client_get_json_page:
 * @next_page: (out) (optional) (nullable): the URL of the next page when the
 *   answer has a `Link: <…>; rel="next"` header (the Hub's tree API pages its
 *   listings), else %NULL
 *
 * Fetches and parses a JSON document (an API listing).
 *
 * Returns: (transfer full): the root node, or %NULL
 */
JsonNode *
dc_hf_client_get_json_page (DcHfClient    *self,
                            const char    *url,
                            char         **next_page,
                            GCancellable  *cancellable,
                            GError       **error)
{
  RangeSpec none = { FALSE, FALSE, 0, 0 };
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *description = NULL;
  g_autofree char *next = NULL;
  gsize len;
  const char *data;

  g_return_val_if_fail (DC_IS_HF_CLIENT (self), NULL);

  bytes = perform (self, url, &none, MAX_JSON_BYTES, NULL, &next, NULL, cancellable, error);
  if (bytes == NULL)
    return NULL;
  data = g_bytes_get_data (bytes, &len);
  /* The Hub's answer is untrusted: bounded before json-glib recurses into it. */
  root = dc_json_parse_bounded (data != NULL ? data : "", (gssize) len, DC_JSON_HUB_MAX_BYTES,
                                DC_JSON_HUB_MAX_DEPTH, error);
  if (root == NULL)
    {
      description = dc_hf_url_describe (url);
      g_prefix_error (error, "%s is not valid JSON: ", description);
      return NULL;
    }
  /* An empty page ends a listing whatever its Link says, and so does a link
   * back to the same page: either would otherwise be fetched forever. */
  if (next != NULL
      && ((JSON_NODE_HOLDS_ARRAY (root) && json_array_get_length (json_node_get_array (root)) == 0)
          || g_str_equal (next, url)))
    {
      g_debug ("ignoring the next-page link of an empty or self-linked page");
      g_clear_pointer (&next, g_free);
    }
  if (next_page != NULL)
    *next_page = g_steal_pointer (&next);
  return g_steal_pointer (&root);
}

/**
 * dc_hf_client_get_json:
 *
 * Fetches and parses a JSON document (one page of it).
 *
 * Returns: (transfer full): the root node, or %NULL
 */
JsonNode *
dc_hf_client_get_json (DcHfClient    *self,
                       const char    *url,
                       GCancellable  *cancellable,
                       GError       **error)
{
  return dc_hf_client_get_json_page (self, url, NULL, cancellable, error);
}

static void
get_json_worker (GTask        *task,
                 gpointer      source_object,
                 gpointer      task_data,
                 GCancellable *cancellable)
{
  GError *error = NULL;
  JsonNode *node = dc_hf_client_get_json (source_object, task_data, cancellable, &error);

  if (node == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, node, (GDestroyNotify) json_node_unref);
}

void
dc_hf_client_get_json_async (DcHfClient          *self,
                             const char          *url,
                             GCancellable        *cancellable,
                             GAsyncReadyCallback  callback,
                             gpointer             user_data)
{
  g_autoptr(GTask) task = NULL;

  g_return_if_fail (DC_IS_HF_CLIENT (self));

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, dc_hf_client_get_json_async);
  g_task_set_task_data (task, g_strdup (url), g_free);
  g_task_run_in_thread (task, get_json_worker);
}

/**
 * dc_hf_client_get_json_finish:
 *
 * Returns: (transfer full): the root node, or %NULL
 */
JsonNode *
dc_hf_client_get_json_finish (DcHfClient    *self,
                              GAsyncResult  *result,
                              GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/**
 * dc_hf_client_fetch_file:
 * @expected_sha256: (nullable): the file's sha256 in hex where the caller
 *   knows it (the LFS `oid` of the Hub's tree listing)
 * @max_size: the largest file accepted, in bytes
 *
 * Downloads a whole file into memory. Where the Hub names the file's sha256
 * (@expected_sha256, or the `X-Linked-Etag` of its resolve answer), the bytes
 * must match it: a file damaged or altered on the way is refused.
 *
 * Returns: (transfer full): the file, or %NULL
 */
GBytes *
dc_hf_client_fetch_file (DcHfClient    *self,
                         const char    *url,
                         const char    *expected_sha256,
                         guint64        max_size,
                         GCancellable  *cancellable,
                         GError       **error)
{
  RangeSpec none = { FALSE, FALSE, 0, 0 };
  g_autoptr(GBytes) bytes = NULL;
  g_autofree char *linked = NULL;
  g_autofree char *got = NULL;
  const char *expected[2];

  g_return_val_if_fail (DC_IS_HF_CLIENT (self), NULL);

  bytes = perform (self, url, &none, max_size, NULL, NULL, &linked, cancellable, error);
  if (bytes == NULL)
    return NULL;
  if (expected_sha256 == NULL && linked == NULL)
    return g_steal_pointer (&bytes);

  got = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);
  expected[0] = expected_sha256;
  expected[1] = linked;
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      if (expected[i] != NULL && g_ascii_strcasecmp (expected[i], got) != 0)
        {
          g_autofree char *description = dc_hf_url_describe (url);

          g_set_error (error, DC_DATA_ERROR, DC_DATA_ERROR_CORRUPT,
                       "sha256 mismatch for %s: expected %s, got %s", description, expected[i],
                       got);
          return NULL;
        }
    }
  return g_steal_pointer (&bytes);
}

/* A byte source over one URL, for the parquet reader. */
typedef struct
{
  DcByteSource  parent;
  DcHfClient   *client;
  char         *url;
} HttpSource;

static GBytes *
http_read_tail (DcByteSource  *source,
                gsize          len,
                guint64       *file_size,
                GCancellable  *cancellable,
                GError       **error)
{
  HttpSource *self = (HttpSource *) source;

  return dc_hf_client_fetch_tail (self->client, self->url, len, file_size, cancellable, error);
}

static gboolean
http_read_ranges (DcByteSource       *source,
                  const DcByteRange  *ranges,
                  guint               n_ranges,
                  GBytes            **out,
                  GCancellable       *cancellable,
                  GError            **error)
{
  HttpSource *self = (HttpSource *) source;

  return dc_hf_client_fetch_ranges (self->client, self->url, ranges, n_ranges, out,
                                    cancellable, error);
}

static void
http_finalize (DcByteSource *source)
{
  HttpSource *self = (HttpSource *) source;

  g_clear_object (&self->client);
  g_free (self->url);
}

static const DcByteSourceClass http_source_class = {
  http_read_tail,
  http_read_ranges,
  http_finalize,
};

/**
 * dc_hf_client_open_source:
 *
 * Returns: (transfer full): a byte source reading @url with range requests
 */
DcByteSource *
dc_hf_client_open_source (DcHfClient *self,
                          const char *url)
{
  g_autofree char *name = dc_hf_url_describe (url);
  HttpSource *source = _dc_byte_source_alloc (&http_source_class, sizeof (HttpSource), name);

  source->client = g_object_ref (self);
  source->url = g_strdup (url);
  return (DcByteSource *) source;
}
