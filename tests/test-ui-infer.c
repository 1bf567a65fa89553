/* test-ui-infer.c: the model dialog, the token dialog and the Infer view.
 *
 * Under Xvfb, with a Hub of our own: a libsoup server on loopback (in its
 * own thread) that serves tests/data/hf/models/llama-tiny in the Hub layout
 * as "open/llama-tiny" and answers 401 for everything of "gated/model".
 *
 * - the repo id is checked as typed; a wrong one says so and Load stays off;
 * - the token dialog appears for a 401 or 403 only, sets the client's token
 *   (in memory) and Forget Token removes it;
 * - a failure other than 401/403 shows its message and no token dialog;
 * - end to end (needs FETCH's DcModelRepo and SESSION's DcInferSession; with
 *   their placeholders these cases report a skip): what was found, the
 *   gated repo's token dialog, then load, generate with a queued second
 *   prompt, stop.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <signal.h>

#include <adwaita.h>
#include <gst/gst.h>
#include <libsoup/soup.h>

#include "dc-infer-page.h"
#include "dc-model-dialog.h"
#include "dc-test-ui-utils.h"
#include "dc-ui-resources.h"
#include "dc-test-utils.h"
#include "dc-token-dialog.h"
#include "dc-train-page.h"
#include "data/dc-data-error.h"
#include "dc-test-proc.h"
#include "infer/dc-infer-ring.h"
#include "infer/dc-ring-server.h"
#include "mesh/dc-group.h"
#include "mesh/dc-room.h"
#include "model/dc-hf-model.h"
#include "mesh/dc-gst-quirks.h"

#define TIMEOUT_MS 60000

/* ---- a Hub of our own ---- */

typedef struct
{
  GThread      *thread;
  GMainContext *context;
  GMainLoop    *loop;
  SoupServer   *server;
  char         *url;
  char         *model_dir;
  GMutex        lock;
  GCond         cond;
  gboolean      ready;
  guint         gated_requests;
  guint         gated_with_token;  /* of them, with "Bearer hf_secret" */
  guint         stalled;           /* weight requests under /stall, never answered */
} Hub;

static Hub *hub;

static void
hub_handler (SoupServer        *server,
             SoupServerMessage *msg,
             const char        *path,
             GHashTable        *query,
             gpointer           user_data)
{
  const char *prefix = "/open/llama-tiny/resolve/main/";
  g_autofree char *contents = NULL;
  g_autofree char *file = NULL;
  gsize length;
  gboolean stall = FALSE;

  /* A Hub that stalls: under /stall the same files, but weight bytes (a
   * range past the safetensors header) never come. */
  if (g_str_has_prefix (path, "/stall/"))
    {
      path += strlen ("/stall");
      stall = TRUE;
    }

  if (strstr (path, "gated/") != NULL)
    {
      const char *auth = soup_message_headers_get_one (
          soup_server_message_get_request_headers (msg), "Authorization");

      g_mutex_lock (&hub->lock);
      hub->gated_requests++;
      hub->gated_with_token += g_strcmp0 (auth, "Bearer hf_secret") == 0;
      g_mutex_unlock (&hub->lock);
      soup_server_message_set_status (msg, 401, NULL);
      return;
    }
  /* The model API (GET /api/models/REPO[/revision/REV]), should the
   * repository ask for the file list or the commit. */
  if (g_str_equal (path, "/api/models/open/llama-tiny")
      || g_str_equal (path, "/api/models/open/llama-tiny/revision/main"))
    {
      g_autoptr(GString) json = g_string_new ("{\"id\":\"open/llama-tiny\",\"sha\":\"");
      g_autoptr(GDir) dir = g_dir_open (hub->model_dir, 0, NULL);
      const char *name;
      gboolean first = TRUE;

      g_string_append (json, "0123456789abcdef0123456789abcdef01234567\",\"siblings\":[");
      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          g_string_append_printf (json, "%s{\"rfilename\":\"%s\"}", first ? "" : ",", name);
          first = FALSE;
        }
      g_string_append (json, "]}");
      soup_server_message_set_status (msg, 200, NULL);
      soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, json->str,
                                        json->len);
      return;
    }
  if (!g_str_has_prefix (path, prefix) || strchr (path + strlen (prefix), '/') != NULL
      || path[strlen (prefix)] == '.')
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  file = g_build_filename (hub->model_dir, path + strlen (prefix), NULL);
  if (!g_file_get_contents (file, &contents, &length, NULL))
    {
      soup_server_message_set_status (msg, 404, NULL);
      return;
    }
  if (stall && g_str_has_suffix (path, ".safetensors") && length >= 8)
    {
      const char *range = soup_message_headers_get_one (
          soup_server_message_get_request_headers (msg), "Range");
      guint64 header_len = GUINT64_FROM_LE (*(guint64 *) contents);
      guint64 first = range != NULL && g_str_has_prefix (range, "bytes=")
                      ? g_ascii_strtoull (range + 6, NULL, 10) : 0;

      if (first >= 8 + header_len)
        {
          g_mutex_lock (&hub->lock);
          hub->stalled++;
          g_mutex_unlock (&hub->lock);
          soup_server_message_pause (msg);
          return;
        }
    }
  /* SoupServer answers a Range itself (206) from the whole body. */
  soup_message_headers_append (soup_server_message_get_response_headers (msg),
                               "Accept-Ranges", "bytes");
  soup_server_message_set_status (msg, 200, NULL);
  if (g_str_equal (soup_server_message_get_method (msg), "HEAD"))
    soup_message_headers_set_content_length (soup_server_message_get_response_headers (msg),
                                             length);
  else
    soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_TAKE,
                                      g_steal_pointer (&contents), length);
}

static gpointer
hub_thread (gpointer data)
{
  g_autoptr(GInetAddress) inet = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (inet, 0);
  g_autoptr(GError) error = NULL;
  GSList *uris;

  g_main_context_push_thread_default (hub->context);
  hub->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (hub->server, "/", hub_handler, NULL, NULL);
  soup_server_listen (hub->server, address, 0, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (hub->server);
  hub->url = g_uri_to_string (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  if (g_str_has_suffix (hub->url, "/"))
    hub->url[strlen (hub->url) - 1] = '\0';

  g_mutex_lock (&hub->lock);
  hub->ready = TRUE;
  g_cond_signal (&hub->cond);
  g_mutex_unlock (&hub->lock);

  g_main_loop_run (hub->loop);

  soup_server_disconnect (hub->server);
  g_clear_object (&hub->server);
  g_main_context_pop_thread_default (hub->context);
  return NULL;
}

static void
hub_start (void)
{
  hub = g_new0 (Hub, 1);
  g_mutex_init (&hub->lock);
  g_cond_init (&hub->cond);
  hub->model_dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny", NULL);
  hub->context = g_main_context_new ();
  hub->loop = g_main_loop_new (hub->context, FALSE);
  hub->thread = g_thread_new ("test-hub", hub_thread, NULL);
  g_mutex_lock (&hub->lock);
  while (!hub->ready)
    g_cond_wait (&hub->cond, &hub->lock);
  g_mutex_unlock (&hub->lock);
}

static gboolean
quit_cb (gpointer data)
{
  g_main_loop_quit (hub->loop);
  return G_SOURCE_REMOVE;
}

static void
hub_stop (void)
{
  GSource *source = g_idle_source_new ();

  /* A source attached to the hub's context: it runs on the hub's thread. */
  g_source_set_callback (source, quit_cb, NULL, NULL);
  g_source_attach (source, hub->context);
  g_source_unref (source);
  g_thread_join (hub->thread);
  g_main_loop_unref (hub->loop);
  g_main_context_unref (hub->context);
  g_free (hub->url);
  g_free (hub->model_dir);
  g_mutex_clear (&hub->lock);
  g_cond_clear (&hub->cond);
  g_clear_pointer (&hub, g_free);
}

/* ---- helpers ---- */

typedef struct
{
  GtkWindow   *window;
  DcInferPage *page;
  DcContext   *context;
  GSettings   *settings;
  char        *last_toast;
} Fixture;

static void
toast_cb (DcInferPage *page,
          const char  *message,
          Fixture     *fixture)
{
  g_free (fixture->last_toast);
  fixture->last_toast = g_strdup (message);
}

static void
fixture_set_up (Fixture       *fixture,
                gconstpointer  data)
{
  g_autoptr(GError) error = NULL;

  /* Peers stop in this case's process (g_test_run () clears the quirk's
   * fatal handler before every case). */
  dc_gst_quirks_install ();
  /* The context's client reads HF_ENDPOINT when it is first used. */
  g_setenv ("HF_ENDPOINT", hub->url, TRUE);
  fixture->context = dc_context_new (DC_BACKEND_CPU, &error);
  g_assert_no_error (error);
  fixture->settings = g_settings_new (APP_ID);
  g_settings_reset (fixture->settings, "infer-recent-models");

  fixture->window = GTK_WINDOW (gtk_window_new ());
  gtk_window_set_default_size (fixture->window, 900, 700);
  fixture->page = g_object_new (DC_TYPE_INFER_PAGE, NULL);
  dc_infer_page_set_settings (fixture->page, fixture->settings);
  dc_infer_page_set_context (fixture->page, fixture->context);
  g_signal_connect (fixture->page, "toast", G_CALLBACK (toast_cb), fixture);
  gtk_window_set_child (fixture->window, GTK_WIDGET (fixture->page));
  gtk_window_present (fixture->window);
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, fixture->window, TIMEOUT_MS));
}

static void
fixture_tear_down (Fixture       *fixture,
                   gconstpointer  data)
{
  gtk_window_destroy (fixture->window);
  g_clear_object (&fixture->settings);
  g_clear_object (&fixture->context);
  g_clear_pointer (&fixture->last_toast, g_free);
}

static gboolean
is_entry_row (GtkWidget *widget,
              gpointer   user_data)
{
  return ADW_IS_ENTRY_ROW (widget);
}

static gboolean
is_row_titled (GtkWidget *widget,
               gpointer   title)
{
  return ADW_IS_ACTION_ROW (widget)
         && g_strcmp0 (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)), title) == 0;
}

static DcModelDialog *
open_model_dialog (Fixture *fixture)
{
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (fixture->page), "infer.choose-model",
                                             NULL));
  g_assert_true (dc_test_wait_until (dc_test_toplevel_is_mapped,
                                     GSIZE_TO_POINTER (DC_TYPE_MODEL_DIALOG), TIMEOUT_MS));
  return DC_MODEL_DIALOG (dc_test_find_toplevel (DC_TYPE_MODEL_DIALOG, NULL, NULL));
}

static void
type_spec (DcModelDialog *dialog,
           const char    *text)
{
  GtkWidget *row = dc_test_find_descendant (GTK_WIDGET (dialog), is_entry_row, NULL);

  g_assert_nonnull (row);
  gtk_editable_set_text (GTK_EDITABLE (row), text);
}

static gboolean
dialog_is_idle (gpointer dialog)
{
  return !dc_model_dialog_is_busy (dialog);
}

static gboolean
load_enabled (DcModelDialog *dialog)
{
  return adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog), "load");
}

/* ---- the tests ---- */

static void
test_check_spec (void)
{
  const char *good[] = {
    "HuggingFaceTB/SmolLM-135M", "openai-community/gpt2", "Qwen/Qwen2.5-0.5B",
    "owner/name@main", "a/b@refs/pr/1", "  owner/name  ", "a_b/c.d-e",
  };
  const char *bad[] = {
    "", "gpt2", "owner/", "/name" + 1, "a//b", "a/b/c", "-a/b", "a/b-", "a./b", "a--b/c",
    "a/b..c", "a b/c", "ö/x", "a/b@", "a/b@../x", "a/b@x/", "@main/x", "owner/na me",
  };
  g_autofree char *long_name = g_strnfill (DC_MODEL_ID_MAX_PART + 1, 'x');
  g_autofree char *longest_name = g_strnfill (DC_MODEL_ID_MAX_PART, 'x');
  g_autofree char *too_long = g_strconcat ("owner/", long_name, NULL);
  g_autofree char *longest = g_strconcat ("owner/", longest_name, NULL);
  g_autofree char *long_revision = g_strnfill (DC_MODEL_ID_MAX_REVISION + 1, 'r');
  g_autofree char *too_long_revision = g_strconcat ("owner/name@", long_revision, NULL);
  gboolean is_folder = TRUE;

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_true (dc_model_dialog_check_spec (good[i], &is_folder, &error));
      g_assert_no_error (error);
      g_assert_false (is_folder);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;

      g_test_message ("bad: “%s”", bad[i]);
      g_assert_false (dc_model_dialog_check_spec (bad[i], NULL, &error));
      g_assert_nonnull (strstr (error->message, "is not a model id"));
    }
  g_assert_true (dc_model_dialog_check_spec (longest, NULL, NULL));
  g_assert_false (dc_model_dialog_check_spec (too_long, NULL, NULL));
  g_assert_false (dc_model_dialog_check_spec (too_long_revision, NULL, NULL));
  /* A long paste is quoted only in part. */
  {
    g_autofree char *paste = g_strnfill (1 << 20, 'x');
    g_autoptr(GError) error = NULL;

    g_assert_false (dc_model_dialog_check_spec (paste, NULL, &error));
    g_assert_cmpuint (strlen (error->message), <, 400);
    g_assert_nonnull (strstr (error->message, "xxx…”"));
  }
  g_assert_true (dc_model_dialog_check_spec ("/srv/models/llama", &is_folder, NULL));
  g_assert_true (is_folder);
}

static void
test_recent (void)
{
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);
  g_auto(GStrv) recent = NULL;
  char id[32];

  g_settings_reset (settings, "infer-recent-models");
  for (guint i = 0; i < DC_MODEL_RECENT_MAX + 3; i++)
    {
      g_snprintf (id, sizeof id, "owner/model-%u", i);
      dc_model_dialog_add_recent (settings, id);
    }
  dc_model_dialog_add_recent (settings, "owner/model-5");
  recent = g_settings_get_strv (settings, "infer-recent-models");
  /* Newest first, no duplicates, at most DC_MODEL_RECENT_MAX. */
  g_assert_cmpuint (g_strv_length (recent), ==, DC_MODEL_RECENT_MAX);
  g_assert_cmpstr (recent[0], ==, "owner/model-5");
  g_assert_cmpstr (recent[1], ==, "owner/model-7");
  g_assert_cmpstr (recent[2], ==, "owner/model-6");
  g_assert_cmpstr (recent[3], ==, "owner/model-4");
  g_settings_reset (settings, "infer-recent-models");
}

static void
test_dialog_validation (Fixture       *fixture,
                        gconstpointer  data)
{
  const char *recent[] = { "someone/recent-model", "not an id", NULL };
  DcModelDialog *dialog;

  g_settings_set_strv (fixture->settings, "infer-recent-models", recent);
  dialog = open_model_dialog (fixture);

  /* The seed's suggestions and the (well-formed) recent model are offered. */
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (dialog), is_row_titled,
                                             (gpointer) "HuggingFaceTB/SmolLM-135M"));
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (dialog), is_row_titled,
                                             (gpointer) "openai-community/gpt2"));
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (dialog), is_row_titled,
                                             (gpointer) "Qwen/Qwen2.5-0.5B"));
  g_assert_nonnull (dc_test_find_descendant (GTK_WIDGET (dialog), is_row_titled,
                                             (gpointer) "someone/recent-model"));
  g_assert_null (dc_test_find_descendant (GTK_WIDGET (dialog), is_row_titled,
                                          (gpointer) "not an id"));
  g_assert_false (load_enabled (dialog));

  /* Checked as typed, before any look-up. */
  type_spec (dialog, "gpt2 small");
  g_assert_nonnull (strstr (dc_model_dialog_get_status (dialog), "is not a model id"));
  g_object_unref (dc_test_render_widget (GTK_WIDGET (dialog), "infer-model-dialog-invalid"));
  g_assert_false (dc_model_dialog_is_busy (dialog));
  g_assert_false (load_enabled (dialog));

  /* A well-formed id waits for typing to pause; a new text cancels it. */
  type_spec (dialog, "owner/name");
  g_assert_true (dc_model_dialog_is_busy (dialog));
  g_assert_cmpstr (dc_model_dialog_get_status (dialog), ==, "");
  type_spec (dialog, "");
  g_assert_false (dc_model_dialog_is_busy (dialog));
  g_assert_cmpstr (dc_model_dialog_get_status (dialog), ==, "");

  /* A 404 is not a token matter: its message, and no token dialog. */
  dc_model_dialog_set_spec (dialog, "nobody/missing");
  g_assert_true (dc_test_wait_until (dialog_is_idle, dialog, TIMEOUT_MS));
  g_assert_cmpstr (dc_model_dialog_get_status (dialog), !=, "");
  g_assert_false (dc_test_toplevel_is_mapped (GSIZE_TO_POINTER (DC_TYPE_TOKEN_DIALOG)));
  g_assert_null (dc_model_dialog_get_repo (dialog));
  g_assert_false (load_enabled (dialog));

  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_assert_null (dc_infer_page_get_repo (fixture->page));
}

static void
test_token_dialog (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autoptr(DcHfClient) client = dc_hf_client_new (hub->url);
  g_autoptr(GError) unauthorized = g_error_new (DC_DATA_ERROR, DC_DATA_ERROR_UNAUTHORIZED, "401");
  g_autoptr(GError) forbidden = g_error_new (DC_DATA_ERROR, DC_DATA_ERROR_FORBIDDEN, "403");
  g_autoptr(GError) not_found = g_error_new (DC_DATA_ERROR, DC_DATA_ERROR_NOT_FOUND, "404");
  g_autoptr(GError) http = g_error_new (DC_DATA_ERROR, DC_DATA_ERROR_HTTP, "500");
  g_autoptr(GError) cancelled = g_error_new (G_IO_ERROR, G_IO_ERROR_CANCELLED, "cancelled");
  DcTokenDialog *dialog;
  GtkWidget *row;

  /* Only a 401 or a 403 asks for a token. */
  g_assert_true (dc_token_dialog_wants (unauthorized));
  g_assert_true (dc_token_dialog_wants (forbidden));
  g_assert_false (dc_token_dialog_wants (not_found));
  g_assert_false (dc_token_dialog_wants (http));
  g_assert_false (dc_token_dialog_wants (cancelled));
  g_assert_false (dc_token_dialog_wants (NULL));

  /* 401 without a token: asks for one; nothing to forget; Use needs text. */
  dialog = dc_token_dialog_new (fixture->window, client, "gated/model", unauthorized);
  gtk_window_present (GTK_WINDOW (dialog));
  g_assert_cmpstr (adw_message_dialog_get_heading (ADW_MESSAGE_DIALOG (dialog)), ==,
                   "Hugging Face Token Needed");
  g_assert_nonnull (strstr (adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (dialog)),
                            "“gated/model” needs a Hugging Face token"));
  g_assert_false (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog),
                                                           "forget"));
  g_assert_false (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog), "use"));
  row = dc_test_find_descendant (GTK_WIDGET (dialog), is_entry_row, NULL);
  g_assert_true (ADW_IS_PASSWORD_ENTRY_ROW (row));
  gtk_editable_set_text (GTK_EDITABLE (row), "  hf_secret  ");
  g_assert_true (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog), "use"));
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "use");
  g_assert_true (dc_hf_client_has_token (client));
  /* The entry's copy is gone with the answer. */
  g_assert_cmpstr (gtk_editable_get_text (GTK_EDITABLE (row)), ==, "");
  gtk_window_destroy (GTK_WINDOW (dialog));

  /* 401 with a token: the token was refused; Forget Token removes it. */
  dialog = dc_token_dialog_new (fixture->window, client, "gated/model", unauthorized);
  g_assert_cmpstr (adw_message_dialog_get_heading (ADW_MESSAGE_DIALOG (dialog)), ==,
                   "Token Refused");
  g_assert_true (adw_message_dialog_get_response_enabled (ADW_MESSAGE_DIALOG (dialog),
                                                          "forget"));
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "forget");
  g_assert_false (dc_hf_client_has_token (client));
  gtk_window_destroy (GTK_WINDOW (dialog));

  /* 403: the licence comes first. Cancel keeps things as they were. */
  dialog = dc_token_dialog_new (fixture->window, client, "gated/model", forbidden);
  g_assert_cmpstr (adw_message_dialog_get_heading (ADW_MESSAGE_DIALOG (dialog)), ==,
                   "Access Forbidden");
  g_assert_nonnull (strstr (adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (dialog)),
                            "accept its licence on the model page first"));
  row = dc_test_find_descendant (GTK_WIDGET (dialog), is_entry_row, NULL);
  gtk_editable_set_text (GTK_EDITABLE (row), "typed but cancelled");
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_assert_false (dc_hf_client_has_token (client));
  gtk_window_destroy (GTK_WINDOW (dialog));

  /* The Infer view's Forget Token forgets the context's token. */
  dc_hf_client_set_token (dc_context_get_hf_client (fixture->context), "hf_secret");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (fixture->page), "infer.forget-token",
                                             NULL));
  g_assert_false (dc_hf_client_has_token (dc_context_get_hf_client (fixture->context)));
  g_assert_cmpstr (fixture->last_toast, ==, "Hugging Face token forgotten");
}

static gboolean
token_dialog_shown (gpointer data)
{
  return dc_test_toplevel_is_mapped (GSIZE_TO_POINTER (DC_TYPE_TOKEN_DIALOG));
}

static void
test_gated_and_open (Fixture       *fixture,
                     gconstpointer  data)
{
  DcModelDialog *dialog = open_model_dialog (fixture);
  guint gated_before = hub->gated_requests;
  GtkWidget *token_dialog;

  /* The open repository: found, no token asked for. */
  dc_model_dialog_set_spec (dialog, "open/llama-tiny");
  g_assert_true (dc_model_dialog_is_busy (dialog));
  g_assert_true (dc_test_wait_until (dialog_is_idle, dialog, TIMEOUT_MS));
  g_test_message ("open/llama-tiny: %s", dc_model_dialog_get_status (dialog));
  g_assert_nonnull (dc_model_dialog_get_repo (dialog));
  g_assert_nonnull (strstr (dc_model_dialog_get_status (dialog), "LlamaForCausalLM"));
  g_assert_true (load_enabled (dialog));
  g_assert_false (token_dialog_shown (NULL));
  g_assert_cmpuint (hub->gated_requests, ==, gated_before);
  /* What the dialog found, before anything large moves (docs/screenshots). */
  g_object_unref (dc_test_render_widget (GTK_WIDGET (dialog), "infer-model-dialog-found"));

  /* The gated one: a 401, so the token dialog, naming the repository. */
  dc_model_dialog_set_spec (dialog, "gated/model");
  g_assert_false (load_enabled (dialog));
  g_assert_true (dc_test_wait_until (token_dialog_shown, NULL, TIMEOUT_MS));
  g_assert_true (dc_test_wait_until (dialog_is_idle, dialog, TIMEOUT_MS));
  g_assert_cmpuint (hub->gated_requests, >, gated_before);
  token_dialog = dc_test_find_toplevel (DC_TYPE_TOKEN_DIALOG, NULL, NULL);
  g_assert_nonnull (strstr (adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (token_dialog)),
                            "gated/model"));
  g_assert_null (dc_model_dialog_get_repo (dialog));
  g_assert_false (load_enabled (dialog));
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (token_dialog), "cancel");
  g_assert_false (dc_hf_client_has_token (dc_context_get_hf_client (fixture->context)));

  /* Back to the open one, and Load it: the view shows it, and it is recent. */
  dc_model_dialog_set_spec (dialog, "open/llama-tiny");
  g_assert_true (dc_test_wait_until (dialog_is_idle, dialog, TIMEOUT_MS));
  g_assert_true (load_enabled (dialog));
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "load");
  g_assert_nonnull (dc_infer_page_get_repo (fixture->page));
  g_assert_nonnull (strstr (dc_infer_page_get_held (fixture->page), "6 layers"));
  g_object_unref (dc_test_render_widget (GTK_WIDGET (fixture->window), "infer-view-chosen"));
  {
    g_auto(GStrv) recent = g_settings_get_strv (fixture->settings, "infer-recent-models");

    g_assert_cmpstr (recent[0], ==, "open/llama-tiny");
  }
}

static gboolean
page_is_idle (gpointer page)
{
  return !dc_infer_page_is_busy (page) && dc_infer_page_get_queue_length (page) == 0;
}

static void
test_generate_stop (Fixture       *fixture,
                    gconstpointer  data)
{
  GtkWidget *page = GTK_WIDGET (fixture->page);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autofree char *output = NULL;

  repo = dc_model_repo_open (dc_context_get_hf_client (fixture->context), "open/llama-tiny",
                             NULL, &error);
  g_assert_no_error (error);
  dc_infer_page_set_repo (fixture->page, repo);

  /* Two prompts before the weights arrive: both wait for them. Stop then
   * stops the download and drops them: nothing is generated. */
  dc_infer_page_set_prompt (fixture->page, "Once upon a time");
  g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
  g_assert_true (dc_infer_page_is_busy (fixture->page));
  dc_infer_page_set_prompt (fixture->page, "The first prompt");
  g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
  g_assert_cmpuint (dc_infer_page_get_queue_length (fixture->page), ==, 2);
  /* The queue holds 64; one more is refused with a toast and kept typed. */
  for (guint i = 2; i < 64; i++)
    {
      dc_infer_page_set_prompt (fixture->page, "again");
      g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
    }
  g_assert_cmpuint (dc_infer_page_get_queue_length (fixture->page), ==, 64);
  g_assert_null (fixture->last_toast);
  dc_infer_page_set_prompt (fixture->page, "one too many");
  g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
  g_assert_cmpuint (dc_infer_page_get_queue_length (fixture->page), ==, 64);
  g_assert_cmpstr (fixture->last_toast, ==,
                   "The queue is full: wait for a prompt to finish, or clear the queue");
  g_clear_pointer (&fixture->last_toast, g_free);
  g_assert_true (gtk_widget_activate_action (page, "infer.stop", NULL));
  g_assert_cmpuint (dc_infer_page_get_queue_length (fixture->page), ==, 0);

  /* Generate at once after Stop, before the stopped download has answered:
   * this prompt is not dropped with the others; it loads (the download's
   * progress in the view), then streams. */
  dc_infer_page_set_prompt (fixture->page, "Once upon a time");
  g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
  g_assert_cmpuint (dc_infer_page_get_queue_length (fixture->page), ==, 1);
  g_assert_true (dc_test_wait_until (page_is_idle, fixture->page, TIMEOUT_MS));
  g_test_message ("held: %s", dc_infer_page_get_held (fixture->page));
  g_assert_cmpstr (dc_infer_page_get_status (fixture->page), ==, "Done");
  output = dc_infer_page_dup_output (fixture->page);
  g_assert_true (g_str_has_prefix (output, "Once upon a time"));
  g_object_unref (dc_test_render_widget (GTK_WIDGET (fixture->window), "infer-view-generated"));
  g_assert_cmpuint (strlen (output), >, strlen ("Once upon a time"));
  g_clear_pointer (&output, g_free);

  /* A prompt sent while one generates is queued; Stop ends the running
   * one (whatever it had reached) and keeps the queue: the second runs to
   * its end and is what the view shows last. The first asks for 4,096
   * tokens (0.35 s here), so that Stop finds it running: with the default
   * 60, a loaded machine finished it before Stop, which then stopped the
   * second (status "Stopped", the fresh-clone CI of 2026-12-04 13:41). Should
   * that still happen (the output is the second prompt's, stopped), the
   * case is tried again, at most three times; a Stop that dropped the queue
   * leaves the first prompt's output and fails at once. */
  for (guint attempt = 1; ; attempt++)
    {
      const char *status;

      g_settings_set_int (fixture->settings, "infer-tokens", 4096);
      dc_infer_page_set_prompt (fixture->page, "The first prompt");
      g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
      g_settings_set_int (fixture->settings, "infer-tokens", 8);
      dc_infer_page_set_prompt (fixture->page, "The second prompt");
      g_assert_true (gtk_widget_activate_action (page, "infer.generate", NULL));
      g_assert_true (dc_infer_page_is_busy (fixture->page));
      g_assert_true (gtk_widget_activate_action (page, "infer.stop", NULL));
      g_assert_true (dc_test_wait_until (page_is_idle, fixture->page, TIMEOUT_MS));
      status = dc_infer_page_get_status (fixture->page);
      output = dc_infer_page_dup_output (fixture->page);
      g_test_message ("attempt %u: %s, output: %s", attempt, status, output);
      g_assert_true (g_str_has_prefix (output, "The second prompt"));
      if (g_str_equal (status, "Done"))
        break;
      g_assert_cmpstr (status, ==, "Stopped");
      g_assert_cmpuint (attempt, <, 3);
      g_clear_pointer (&output, g_free);
    }
  g_assert_null (fixture->last_toast);
  g_settings_reset (fixture->settings, "infer-tokens");
}

static guint
gated_with_token (void)
{
  guint n;

  g_mutex_lock (&hub->lock);
  n = hub->gated_with_token;
  g_mutex_unlock (&hub->lock);
  return n;
}

static gboolean
token_dialog_headed (gpointer heading)
{
  GtkWidget *dialog = dc_test_find_toplevel (DC_TYPE_TOKEN_DIALOG, NULL, NULL);

  return dialog != NULL
         && g_strcmp0 (adw_message_dialog_get_heading (ADW_MESSAGE_DIALOG (dialog)), heading) == 0;
}

/* The Train view: a gated dataset (401) opens the same token dialog, and the
 * token typed there reaches the training worker's requests. */
static void
test_train_dataset_token (Fixture       *fixture,
                          gconstpointer  data)
{
  GtkWindow *window = GTK_WINDOW (gtk_window_new ());
  DcTrainPage *page = g_object_new (DC_TYPE_TRAIN_PAGE, NULL);
  DcHfClient *client = dc_context_get_hf_client (fixture->context);
  GtkWidget *dialog;
  GtkWidget *row;

  g_settings_set_int (fixture->settings, "train-width", 16);
  g_settings_set_int (fixture->settings, "train-seq-len", 16);
  g_settings_set_int (fixture->settings, "train-batch", 2);
  g_settings_set_int (fixture->settings, "train-steps", 100);
  g_settings_set_string (fixture->settings, "train-dataset", "gated/dataset");
  dc_train_page_set_settings (page, fixture->settings);
  dc_train_page_set_context (page, fixture->context);
  gtk_window_set_child (window, GTK_WIDGET (page));
  gtk_window_present (window);
  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));

  /* Without a token: the 401 fails the run and asks (no built-in corpus). */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "train.start", NULL));
  g_assert_true (dc_test_wait_until (token_dialog_headed, (gpointer) "Hugging Face Token Needed",
                                     TIMEOUT_MS));
  g_assert_false (dc_train_page_is_running (page));
  dialog = dc_test_find_toplevel (DC_TYPE_TOKEN_DIALOG, NULL, NULL);
  g_assert_nonnull (strstr (adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (dialog)),
                            "“gated/dataset” needs a Hugging Face token"));
  g_assert_cmpuint (gated_with_token (), ==, 0);

  /* Use Token starts again; the worker's requests carry it; still refused. */
  row = dc_test_find_descendant (dialog, is_entry_row, NULL);
  gtk_editable_set_text (GTK_EDITABLE (row), "hf_secret");
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "use");
  gtk_window_destroy (GTK_WINDOW (dialog));
  g_assert_true (dc_hf_client_has_token (client));
  g_assert_true (dc_test_wait_until (token_dialog_headed, (gpointer) "Token Refused",
                                     TIMEOUT_MS));
  g_assert_cmpuint (gated_with_token (), >=, 1);
  dialog = dc_test_find_toplevel (DC_TYPE_TOKEN_DIALOG, NULL, NULL);
  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "forget");
  gtk_window_destroy (GTK_WINDOW (dialog));
  g_assert_false (dc_hf_client_has_token (client));
  g_assert_false (dc_train_page_is_running (page));

  gtk_window_destroy (window);
  g_settings_reset (fixture->settings, "train-dataset");
}

/* Preferences › Model Cache take effect on the next look-up: the folder
 * holds the model's cache, and a limit below its weights refuses it before
 * anything is downloaded. */
static void
test_cache_settings (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-ui-cache-XXXXXX", NULL);
  DcModelDialog *dialog;

  g_settings_set_string (fixture->settings, "model-cache-dir", dir);
  dialog = open_model_dialog (fixture);
  dc_model_dialog_set_spec (dialog, "open/llama-tiny");
  g_assert_true (dc_test_wait_until (dialog_is_idle, dialog, TIMEOUT_MS));
  g_assert_nonnull (dc_model_dialog_get_repo (dialog));
  g_test_message ("cache: %s", dc_model_repo_get_cache_dir (dc_model_dialog_get_repo (dialog)));
  g_assert_true (g_str_has_prefix (dc_model_repo_get_cache_dir (dc_model_dialog_get_repo (dialog)),
                                   dir));

  /* 1 MB: below llama-tiny's 5.4 MB of weights. */
  g_settings_set_uint (fixture->settings, "model-cache-limit-mb", 1);
  dc_model_dialog_set_spec (dialog, "open/llama-tiny@main");
  g_assert_true (dc_test_wait_until (dialog_is_idle, dialog, TIMEOUT_MS));
  g_test_message ("limit 1 MB: %s", dc_model_dialog_get_status (dialog));
  g_assert_null (dc_model_dialog_get_repo (dialog));
  g_assert_nonnull (strstr (dc_model_dialog_get_status (dialog),
                            "more than the model cache's limit"));
  g_assert_false (load_enabled (dialog));

  adw_message_dialog_response (ADW_MESSAGE_DIALOG (dialog), "cancel");
  g_settings_reset (fixture->settings, "model-cache-dir");
  g_settings_reset (fixture->settings, "model-cache-limit-mb");
  dc_test_remove_tree (dir);
}

/* ---- the ring display ---- */

static gboolean
ring_prepared (gpointer data)
{
  return *(gboolean *) data;
}

static void
ring_prepared_cb (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_infer_ring_prepare_finish (DC_INFER_RING (source), result, &error));
  g_assert_no_error (error);
  *(gboolean *) user_data = TRUE;
}

static gboolean
session_done (gpointer data)
{
  return GPOINTER_TO_UINT (g_object_get_data (data, "test-finished")) != 0;
}

static void
session_finished_cb (DcInferSession *session, guint id, gboolean stopped, const char *message,
                     double rate, gpointer data)
{
  g_assert_null (message);
  g_object_set_data (G_OBJECT (session), "test-finished", GUINT_TO_POINTER (1));
}

/* The Ring group: hidden without a ring; a plan of three devices shows one
 * row each with its layers, MB and ms per token, its download as it comes,
 * then the ring's hops (stages × tokens), tokens per second and the Verify
 * result. Then a real ring (this device alone, llama-tiny from its folder)
 * followed through dc_infer_page_set_ring: its plan row, its download
 * complete once prepared, and the hops of a generation. */
static void
test_ring_display (Fixture       *fixture,
                   gconstpointer  data)
{
  const DcRingShape shape = { .n_layers = 6, .layer_bytes = 1000000, .layer_download = 2000000,
                              .ends_bytes = 3000000, .ends_download = 4000000,
                              .layer_macs = 1e6, .ends_macs = 2e6, .hop_ms = 0.5 };
  const DcRingDevice devices[] = {
    { "", "alpha", "p", 5500000, 1.0 },
    { "b", "beta", "p", 2500000, 1.0 },
    { "c", "gamma", "p", 2500000, 1.0 },
  };
  const char *names[] = { "alpha", "beta", "gamma", NULL };
  g_autoptr(DcRingPlan) plan = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL, *dir = NULL, *after = NULL;
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(DcModelRepo) shown = NULL;
  g_autoptr(DcInferRing) ring = NULL;
  DcInferSettings settings;
  DcInferSession *session;
  gboolean prepared = FALSE;

  text = dc_infer_page_dup_ring_text (fixture->page);
  g_assert_cmpstr (text, ==, "");
  g_clear_pointer (&text, g_free);

  /* The model the ring runs, from the test's Hub, as the view shows it for
   * the screenshot. */
  shown = dc_model_repo_open (dc_context_get_hf_client (fixture->context), "open/llama-tiny",
                              NULL, &error);
  g_assert_no_error (error);
  dc_infer_page_set_repo (fixture->page, shown);

  plan = dc_ring_plan_new (&shape, devices, G_N_ELEMENTS (devices), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (dc_ring_plan_get_n_stages (plan), ==, 3);
  dc_infer_page_show_ring_plan (fixture->page, plan, names);
  text = dc_infer_page_dup_ring_text (fixture->page);
  g_test_message ("%s", text);
  g_assert_nonnull (strstr (text, "alpha: layers 0–1 and the embedding and head · 8.0 MB · "));
  g_assert_nonnull (strstr (text, "beta: layers 2–3 · 4.0 MB · 2.0 ms per token [Waiting]"));
  g_assert_nonnull (strstr (text, "gamma: layers 4–5 · 4.0 MB"));
  g_assert_nonnull (strstr (text, "Ring Hops: 0 hops · 0.0 tokens/s · lap estimate"));
  g_assert_null (strstr (text, "Verify"));
  g_clear_pointer (&text, g_free);

  dc_infer_page_set_ring_downloaded (fixture->page, 1, 2000000);
  dc_infer_page_set_ring_downloaded (fixture->page, 2, 4000000);
  dc_infer_page_set_ring_downloaded (fixture->page, 7, 1);   /* no such stage: ignored */
  g_assert_cmpfloat (dc_infer_page_get_ring_fraction (fixture->page, 0), ==, 0.0);
  g_assert_cmpfloat (dc_infer_page_get_ring_fraction (fixture->page, 1), ==, 0.5);
  g_assert_cmpfloat (dc_infer_page_get_ring_fraction (fixture->page, 2), ==, 1.0);
  dc_infer_page_set_ring_rate (fixture->page, 10, 25.0);
  dc_infer_page_set_ring_verify (fixture->page, "VERIFIED: the distributed run and the "
                                                "single-device run produced identical token ids");
  text = dc_infer_page_dup_ring_text (fixture->page);
  g_test_message ("%s", text);
  g_assert_nonnull (strstr (text, "beta: layers 2–3 · 4.0 MB · 2.0 ms per token [2.0 of 4.0 MB]"));
  g_assert_nonnull (strstr (text, "Ring Hops: 30 hops · 25.0 tokens/s"));
  g_assert_nonnull (strstr (text, "Verify: VERIFIED: the distributed run"));
  g_clear_pointer (&text, g_free);
  /* The view with its model and the Ring group (docs/screenshots/infer.png). */
  g_object_unref (dc_test_render_widget (GTK_WIDGET (fixture->window), "infer-view-ring"));

  /* A real ring of one device. */
  dir = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny", NULL);
  repo = dc_model_repo_open (dc_context_get_hf_client (fixture->context), dir, NULL, &error);
  g_assert_no_error (error);
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ALL;
  config.hello = dc_context_new_hello (fixture->context, "solo");
  group = dc_group_new (&config);
  ring = dc_infer_ring_new (fixture->context, group, repo, config.hello->probe_hash, 0);
  dc_infer_page_set_ring (fixture->page, ring);
  text = dc_infer_page_dup_ring_text (fixture->page);
  g_assert_cmpstr (text, ==, "");   /* a new ring: nothing planned yet */
  g_clear_pointer (&text, g_free);
  dc_infer_ring_prepare_async (ring, 64, NULL, ring_prepared_cb, &prepared);
  g_assert_true (dc_test_wait_until (ring_prepared, &prepared, TIMEOUT_MS));
  text = dc_infer_page_dup_ring_text (fixture->page);
  g_test_message ("%s", text);
  g_assert_nonnull (strstr (text, "layers 0–5 and the embedding and head"));
  g_assert_cmpfloat (dc_infer_page_get_ring_fraction (fixture->page, 0), ==, 1.0);
  g_assert_nonnull (strstr (text, "Ring Hops: 0 hops"));
  session = dc_infer_ring_get_session (ring);
  g_signal_connect (session, "finished", G_CALLBACK (session_finished_cb), NULL);
  dc_infer_settings_init_default (&settings);
  settings.n_tokens = 5;
  dc_infer_session_submit (session, "The ring", &settings);
  g_assert_true (dc_test_wait_until (session_done, session, TIMEOUT_MS));
  after = dc_infer_page_dup_ring_text (fixture->page);
  g_test_message ("%s", after);
  g_assert_nonnull (strstr (after, "Ring Hops: 5 hops · "));
  dc_infer_page_set_ring (fixture->page, NULL);
  dc_infer_ring_close (ring);
}

/* ---- running across the group ---- */

static gboolean
ring_has_offer (gpointer data)
{
  DcInferRing *ring = data;

  return dc_infer_ring_get_n_offers (ring) >= 1 && dc_infer_ring_get_n_measured (ring) >= 1;
}

static gboolean
group_run_over (gpointer data)
{
  DcInferPage *page = data;
  g_autofree char *text = dc_infer_page_dup_ring_text (page);

  return strstr (text, "Verify: ") != NULL ||
         g_str_has_prefix (dc_infer_page_get_status (page), "Could not");
}

static void
count_offers_cb (DcGroup  *group,
                 DcPeer   *peer,
                 guint     type,
                 GBytes   *payload,
                 guint    *offers)
{
  if (type == DC_MESH_MSG_RING_OFFER)
    (*offers)++;
}

static gboolean
offer_arrived (gpointer data)
{
  return *(guint *) data > 0;
}

static gboolean
group_is_host (gpointer data)
{
  return dc_group_get_state (data) == DC_GROUP_STATE_HOST;
}

static gboolean
is_run_on_row (GtkWidget *widget,
               gpointer   user_data)
{
  return ADW_IS_COMBO_ROW (widget) &&
         g_strcmp0 (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)), "Run On") == 0;
}

/* Issue 16 (starting a ring from the app): the Infer view runs its prompt
 * across the group. This app is the head of a room it created; a
 * `daisychain-cli join --serve-layers` process (its own cache, the same
 * local Hub) joins it.
 * Run On is off until that device is there; then “Across the Group” plans
 * (the Ring group shows both devices before anything runs), streams the
 * answer into the output and checks it on this device: VERIFIED. The
 * memory this device offers (two of llama-tiny's six layers and the ends)
 * makes the plan need the other device. */
static void
test_across_group (Fixture       *fixture,
                   gconstpointer  data)
{
  const char *signal_args[] = { "signal", "--json", "--port", "0", "--bind", "127.0.0.1",
                                NULL };
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *room = dc_room_generate_code ();
  g_autofree char *cache = NULL, *stage_memory = NULL, *output = NULL, *text = NULL;
  g_autofree char *url = NULL;
  char *ice[] = { (char *) "127.0.0.1", NULL };
  DcTestProc *signal_proc, *stage;
  const DcHfConfig *hf;
  guint offers = 0;
  guint64 layer, ends;
  GtkWidget *run_on;

  signal_proc = dc_test_proc_spawn ("signal", NULL, FALSE, signal_args);
  url = g_strdup (json_object_get_string_member (
    dc_test_proc_expect (signal_proc, "listening", NULL, TIMEOUT_MS), "url"));

  repo = dc_model_repo_open (dc_context_get_hf_client (fixture->context), "open/llama-tiny",
                             NULL, &error);
  g_assert_no_error (error);
  hf = dc_model_repo_get_config (repo);
  layer = dc_hf_model_part_memory_bytes (hf, 0, 1, FALSE, 64);
  ends = dc_hf_model_part_memory_bytes (hf, 0, 0, TRUE, 64);
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ALL;
  config.hello = dc_context_new_hello (fixture->context, "alpha");
  config.peer.ice_addresses = g_strdupv (ice);
  group = dc_group_new (&config);
  g_assert_true (dc_group_join_room (group, url, room, &error));
  g_assert_no_error (error);
  /* This device hosts the room before the other asks to join it. */
  g_assert_true (dc_test_wait_until (group_is_host, group, TIMEOUT_MS));
  dc_infer_page_set_group (fixture->page, group);
  _dc_infer_page_set_ring_memory (fixture->page, ends + 2 * layer + layer / 2);
  g_settings_set_int (fixture->settings, "infer-tokens", 8);
  g_settings_set_int (fixture->settings, "infer-context", 64);
  g_settings_set_int (fixture->settings, "infer-temperature-x100", 0);
  g_signal_connect (group, "message", G_CALLBACK (count_offers_cb), &offers);
  run_on = dc_test_find_descendant (GTK_WIDGET (fixture->page), is_run_on_row, NULL);
  g_assert_nonnull (run_on);
  /* No model yet: this device only. */
  g_assert_false (gtk_widget_get_sensitive (run_on));

  /* The other device: a CLI stage with a cache of its own. It joins, and
   * offers its layers, before a model is chosen here: the view's ring,
   * made then, must ask for that offer again. */
  cache = g_dir_make_tmp ("dc-ui-ring-XXXXXX", NULL);
  g_assert_nonnull (cache);
  stage_memory = g_strdup_printf ("%.6f", (4 * layer + layer / 2) / 1e6);
  {
    const char *stage_args[] = { "join", "--json", "--serve-layers", "--signal", url, "--room",
                                 room, "--name", "beta", "--ice-address", "127.0.0.1",
                                 "--memory-mb", stage_memory, NULL };

    /* The child copies the environment when it is spawned. */
    g_setenv ("DC_MODEL_CACHE_DIR", cache, TRUE);
    stage = dc_test_proc_spawn ("beta", NULL, FALSE, stage_args);
    g_unsetenv ("DC_MODEL_CACHE_DIR");
  }
  g_assert_true (dc_test_wait_until (offer_arrived, &offers, TIMEOUT_MS));
  g_assert_false (gtk_widget_get_sensitive (run_on));
  dc_infer_page_set_repo (fixture->page, repo);
  g_assert_true (dc_test_wait_until (ring_has_offer,
                                     dc_infer_page_get_group_ring (fixture->page),
                                     TIMEOUT_MS));
  g_assert_true (gtk_widget_get_sensitive (run_on));

  adw_combo_row_set_selected (ADW_COMBO_ROW (run_on), 1);
  dc_infer_page_set_prompt (fixture->page, "The ring of devices");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (fixture->page), "infer.generate",
                                             NULL));
  g_assert_true (dc_infer_page_is_busy (fixture->page));
  g_assert_true (dc_test_wait_until (group_run_over, fixture->page, 3 * TIMEOUT_MS));
  text = dc_infer_page_dup_ring_text (fixture->page);
  g_test_message ("%s", text);
  g_test_message ("status: %s", dc_infer_page_get_status (fixture->page));
  /* The plan as shown: this device with the ends, the other with the rest. */
  g_assert_nonnull (strstr (text, "alpha: layers 0–"));
  g_assert_nonnull (strstr (text, "and the embedding and head"));
  g_assert_nonnull (strstr (text, "beta: layers "));
  g_assert_nonnull (strstr (text, "Verify: VERIFIED: the distributed run and the single-device "
                                  "run produced identical token ids"));
  g_assert_cmpstr (dc_infer_page_get_status (fixture->page), ==, "Done");
  g_assert_false (dc_infer_page_is_busy (fixture->page));
  output = dc_infer_page_dup_output (fixture->page);
  g_assert_true (g_str_has_prefix (output, "The ring of devices"));
  g_assert_cmpuint (strlen (output), >, strlen ("The ring of devices"));
  g_object_unref (dc_test_render_widget (GTK_WIDGET (fixture->window), "infer-across-group"));
  /* The other device held its layers, saw the answer, and was released. */
  dc_test_proc_expect (stage, "ring-assigned", NULL, TIMEOUT_MS);
  dc_test_proc_expect (stage, "ring-token", NULL, TIMEOUT_MS);
  dc_test_proc_expect (stage, "ring-closed", NULL, TIMEOUT_MS);

  dc_infer_page_set_group (fixture->page, NULL);
  g_signal_handlers_disconnect_by_data (group, &offers);
  g_subprocess_send_signal (stage->process, SIGTERM);
  dc_test_proc_expect_exit (stage, TIMEOUT_MS);
  dc_test_proc_free (stage);
  g_subprocess_send_signal (signal_proc->process, SIGTERM);
  dc_test_proc_free (signal_proc);
  dc_test_remove_tree (cache);
}

static gboolean
hub_stalled (gpointer data)
{
  guint n;

  g_mutex_lock (&hub->lock);
  n = hub->stalled;
  g_mutex_unlock (&hub->lock);
  return n > 0;
}

static gboolean
head_loaded (gpointer data)
{
  DcInferRing *ring = data;

  return dc_infer_ring_get_plan (ring) != NULL &&
         dc_infer_ring_get_stage_downloaded (ring, 0) > 0;
}

static gboolean
page_not_busy (gpointer data)
{
  return !dc_infer_page_is_busy (data);
}

/* Stop while a device of the group is still fetching its layers (its Hub
 * stalls; this device's cache is empty, so it cannot send them) ends the
 * run at once: “Stopped”, the device released, Run On back on. Without
 * the ring's cancel it would wait for that device (15 minutes). */
static void
test_group_stop (Fixture       *fixture,
                 gconstpointer  data)
{
  const char *signal_args[] = { "signal", "--json", "--port", "0", "--bind", "127.0.0.1",
                                NULL };
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcModelRepo) repo = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *room = dc_room_generate_code ();
  g_autofree char *cache = NULL, *head_cache = NULL, *stage_memory = NULL, *url = NULL;
  g_autofree char *stall_url = g_strdup_printf ("%s/stall", hub->url);
  char *ice[] = { (char *) "127.0.0.1", NULL };
  DcModelRepoOptions options = { 0 };
  DcTestProc *signal_proc, *stage;
  const DcHfConfig *hf;
  guint64 layer, ends;
  GtkWidget *run_on;

  signal_proc = dc_test_proc_spawn ("signal", NULL, FALSE, signal_args);
  url = g_strdup (json_object_get_string_member (
    dc_test_proc_expect (signal_proc, "listening", NULL, TIMEOUT_MS), "url"));
  head_cache = g_dir_make_tmp ("dc-ui-ring-head-XXXXXX", NULL);
  options.cache_dir = head_cache;
  repo = dc_model_repo_open_full (dc_context_get_hf_client (fixture->context),
                                  "open/llama-tiny", &options, NULL, &error);
  g_assert_no_error (error);
  hf = dc_model_repo_get_config (repo);
  layer = dc_hf_model_part_memory_bytes (hf, 0, 1, FALSE, 64);
  ends = dc_hf_model_part_memory_bytes (hf, 0, 0, TRUE, 64);
  config.create = TRUE;
  config.approve = DC_MESH_APPROVE_ALL;
  config.hello = dc_context_new_hello (fixture->context, "alpha");
  config.peer.ice_addresses = g_strdupv (ice);
  group = dc_group_new (&config);
  g_assert_true (dc_group_join_room (group, url, room, &error));
  g_assert_true (dc_test_wait_until (group_is_host, group, TIMEOUT_MS));
  dc_infer_page_set_group (fixture->page, group);
  _dc_infer_page_set_ring_memory (fixture->page, ends + 2 * layer + layer / 2);
  g_settings_set_int (fixture->settings, "infer-context", 64);
  dc_infer_page_set_repo (fixture->page, repo);

  cache = g_dir_make_tmp ("dc-ui-ring-XXXXXX", NULL);
  stage_memory = g_strdup_printf ("%.6f", (4 * layer + layer / 2) / 1e6);
  {
    const char *stage_args[] = { "join", "--json", "--serve-layers", "--signal", url, "--room",
                                 room, "--name", "beta", "--ice-address", "127.0.0.1",
                                 "--memory-mb", stage_memory, NULL };

    g_setenv ("DC_MODEL_CACHE_DIR", cache, TRUE);
    g_setenv ("HF_ENDPOINT", stall_url, TRUE);
    stage = dc_test_proc_spawn ("beta", NULL, FALSE, stage_args);
    g_setenv ("HF_ENDPOINT", hub->url, TRUE);
    g_unsetenv ("DC_MODEL_CACHE_DIR");
  }
  g_assert_true (dc_test_wait_until (ring_has_offer,
                                     dc_infer_page_get_group_ring (fixture->page),
                                     TIMEOUT_MS));
  run_on = dc_test_find_descendant (GTK_WIDGET (fixture->page), is_run_on_row, NULL);
  adw_combo_row_set_selected (ADW_COMBO_ROW (run_on), 1);
  dc_infer_page_set_prompt (fixture->page, "The ring of devices");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (fixture->page), "infer.generate",
                                             NULL));
  /* This device holds its part; the other waits for its Hub. */
  g_assert_true (dc_test_wait_until (hub_stalled, NULL, TIMEOUT_MS));
  g_assert_true (dc_test_wait_until (head_loaded, dc_infer_page_get_group_ring (fixture->page),
                                     TIMEOUT_MS));
  g_assert_true (dc_infer_page_is_busy (fixture->page));
  g_assert_false (gtk_widget_get_sensitive (run_on));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (fixture->page), "infer.stop", NULL));
  g_assert_true (dc_test_wait_until (page_not_busy, fixture->page, TIMEOUT_MS));
  g_assert_cmpstr (dc_infer_page_get_status (fixture->page), ==, "Stopped");
  g_assert_true (gtk_widget_get_sensitive (run_on));
  dc_test_proc_expect (stage, "ring-closed", NULL, TIMEOUT_MS);

  dc_infer_page_set_group (fixture->page, NULL);
  g_subprocess_send_signal (stage->process, SIGTERM);
  dc_test_proc_expect_exit (stage, TIMEOUT_MS);
  dc_test_proc_free (stage);
  g_subprocess_send_signal (signal_proc->process, SIGTERM);
  dc_test_proc_free (signal_proc);
  dc_test_remove_tree (cache);
  dc_test_remove_tree (head_cache);
}

/* This device as another device's stage: the Serving row (and the line
 * under Choose Model) says what it holds and for what, a toast announces
 * the request, the answer streams into the output, and the row goes when
 * the ring closes. The events are the DcRingServer's (test-infer-ring runs
 * the server itself against a real head). */
static void
test_serving_display (Fixture       *fixture,
                      gconstpointer  data)
{
  g_auto(DcMeshConfig) config = { 0 };
  g_autoptr(DcGroup) group = NULL;
  g_autoptr(DcRingServer) server = NULL;
  g_autofree char *output = NULL;
  const char *says = "A device of the group runs a model across it: this device holds "
                     "test/llama-tiny layers 2-3";

  config.create = TRUE;
  config.hello = dc_context_new_hello (fixture->context, "beta");
  group = dc_group_new (&config);
  server = dc_ring_server_new (fixture->context, group, 1000000);
  dc_infer_page_set_ring_server (fixture->page, server);
  g_assert_cmpstr (dc_infer_page_get_serving (fixture->page), ==, "");

  g_signal_emit_by_name (server, "event", "assigned", "test/llama-tiny layers 2-3",
                         (guint64) 1);
  g_assert_cmpstr (dc_infer_page_get_serving (fixture->page), ==, says);
  g_assert_cmpstr (fixture->last_toast, ==, says);
  g_signal_emit_by_name (server, "event", "loaded", "test/llama-tiny", (guint64) 1452032);
  g_assert_true (g_str_has_prefix (dc_infer_page_get_serving (fixture->page),
                                   "Holding the layers of test/llama-tiny for the group ("));
  g_signal_emit_by_name (server, "event", "token", " ring", (guint64) 7);
  output = dc_infer_page_dup_output (fixture->page);
  g_assert_cmpstr (output, ==, " ring");
  g_signal_emit_by_name (server, "event", "closed", "alpha", (guint64) 0);
  g_assert_cmpstr (dc_infer_page_get_serving (fixture->page), ==, "");
  dc_infer_page_set_ring_server (fixture->page, NULL);
}

int
main (int    argc,
      char **argv)
{
  int status;

  gtk_test_init (&argc, &argv, NULL);
  adw_init ();
  /* The group's peers are webrtcbin pipelines (the app's main does this). */
  gst_init (&argc, &argv);
  /* DcApplication registers them at startup; these tests run without it. */
  dc_ui_register_resource ();
  hub_start ();

  /* Peers stop in these cases' process: GStreamer 1.22's sctp teardown
   * warning (each case installs its quirk: g_test_run () clears it). */
  dc_gst_quirks_add_test ("/dc/ui/infer/check-spec", test_check_spec);
  dc_gst_quirks_add_test ("/dc/ui/infer/recent", test_recent);
  g_test_add ("/dc/ui/infer/dialog-validation", Fixture, NULL, fixture_set_up,
              test_dialog_validation, fixture_tear_down);
  g_test_add ("/dc/ui/infer/token-dialog", Fixture, NULL, fixture_set_up,
              test_token_dialog, fixture_tear_down);
  g_test_add ("/dc/ui/infer/gated-401-only", Fixture, NULL, fixture_set_up,
              test_gated_and_open, fixture_tear_down);
  g_test_add ("/dc/ui/infer/train-dataset-token", Fixture, NULL, fixture_set_up,
              test_train_dataset_token, fixture_tear_down);
  g_test_add ("/dc/ui/infer/generate-stop", Fixture, NULL, fixture_set_up,
              test_generate_stop, fixture_tear_down);
  g_test_add ("/dc/ui/infer/cache-settings", Fixture, NULL, fixture_set_up,
              test_cache_settings, fixture_tear_down);
  g_test_add ("/dc/ui/infer/ring-display", Fixture, NULL, fixture_set_up,
              test_ring_display, fixture_tear_down);
  g_test_add ("/dc/ui/infer/across-group", Fixture, NULL, fixture_set_up,
              test_across_group, fixture_tear_down);
  g_test_add ("/dc/ui/infer/serving-display", Fixture, NULL, fixture_set_up,
              test_serving_display, fixture_tear_down);
  g_test_add ("/dc/ui/infer/group-stop", Fixture, NULL, fixture_set_up,
              test_group_stop, fixture_tear_down);

  status = g_test_run ();
  hub_stop ();
  return status;
}
