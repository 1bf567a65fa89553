/* dc-model-dialog.c: picks a Hugging Face model or a local folder.
 *
 * The repo id is checked as it is typed (owner/name, optionally
 * @revision). A valid one is looked up once typing pauses: the repository
 * is opened with dc_model_repo_open_async (config, tokenizer and weight
 * headers only), never blocking the window, with a spinner; a new text
 * cancels the look-up in flight. The dialog shows what was found (the
 * repository's summary) or the refusal, and Load is enabled only when a
 * model was found. A 401 or 403 opens the token dialog, and the look-up is
 * retried with the token. Loading a Hub model puts it first among the
 * recent models (GSettings "infer-recent-models").
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-model-dialog.h"
#include "dc-token-dialog.h"

struct _DcModelDialog
{
  AdwMessageDialog      parent_instance;

  /* template widgets */
  AdwEntryRow          *spec_row;
  GtkSpinner           *spinner;
  GtkLabel             *status_label;
  GtkListBox           *suggested_list;
  GtkWidget            *recent_heading;
  GtkListBox           *recent_list;

  /* owned references */
  DcHfClient           *client;
  GSettings            *settings;     /* nullable */
  DcModelRepo          *repo;         /* what the current text found */
  GCancellable         *lookup;       /* the look-up in flight, if any */
  GtkNativeDialog      *chooser;
  char                 *spec;         /* the text being looked up */

  /* borrowed references */
  GtkWidget            *token_dialog; /* while it is shown */

  /* state */
  guint                 lookup_timeout;
};

G_DEFINE_FINAL_TYPE (DcModelDialog, dc_model_dialog, ADW_TYPE_MESSAGE_DIALOG)

/* The seed's models to start with. */
static const struct
{
  const char *id;
  const char *notes;
} suggested_models[] = {
  { "HuggingFaceTB/SmolLM-135M", N_("513 MB f32 · 30 layers, small and quick") },
  { "openai-community/gpt2", N_("523 MB f32 · the GPT-2 path") },
  { "Qwen/Qwen2.5-0.5B", N_("942 MB f32 · GQA 14/2, and it ships QKV biases") },
};

static gboolean
is_id_char (char c)
{
  return g_ascii_isalnum (c) || c == '-' || c == '_' || c == '.';
}

/* One part of owner/name: the Hub's rule (letters, digits, "-", "_", ".";
 * no "-" or "." at either end; no "--" or ".."). */
static gboolean
check_part (const char *part,
            gsize       len)
{
  if (len == 0 || len > DC_MODEL_ID_MAX_PART)
    return FALSE;
  if (part[0] == '-' || part[0] == '.' || part[len - 1] == '-' || part[len - 1] == '.')
    return FALSE;
  for (gsize i = 0; i < len; i++)
    {
      if (!is_id_char (part[i]))
        return FALSE;
      if (i > 0 && (part[i] == '-' || part[i] == '.') && part[i] == part[i - 1])
        return FALSE;
    }
  return TRUE;
}

static gboolean
check_revision (const char *revision)
{
  gsize len = strlen (revision);

  if (len == 0 || len > DC_MODEL_ID_MAX_REVISION || strstr (revision, "..") != NULL
      || revision[0] == '/' || revision[len - 1] == '/')
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!is_id_char (revision[i]) && revision[i] != '/')
      return FALSE;
  return TRUE;
}

/**
 * dc_model_dialog_check_spec:
 * @spec: what the user typed (leading and trailing spaces ignored)
 * @is_folder: (out) (optional): set when @spec is a folder path
 *
 * Checks the form only: "owner/name", "owner/name@revision", or an absolute
 * folder path. Whether the model exists is for the look-up to find.
 *
 * Returns: %FALSE with @error set (a message for the dialog) when @spec is
 *   neither
 */
gboolean
dc_model_dialog_check_spec (const char  *spec,
                            gboolean    *is_folder,
                            GError     **error)
{
  g_autofree char *text = g_strstrip (g_strdup (spec != NULL ? spec : ""));
  const char *slash, *at;
  gsize owner_len, name_len;

  if (is_folder != NULL)
    *is_folder = FALSE;
  if (g_path_is_absolute (text))
    {
      if (is_folder != NULL)
        *is_folder = TRUE;
      return TRUE;
    }

  slash = strchr (text, '/');
  at = strchr (text, '@');
  if (slash != NULL && (at == NULL || at > slash))
    {
      owner_len = (gsize) (slash - text);
      name_len = at != NULL ? (gsize) (at - slash - 1) : strlen (slash + 1);
      if (check_part (text, owner_len) && check_part (slash + 1, name_len)
          && (at == NULL || check_revision (at + 1)))
        return TRUE;
    }

  /* The text is the user's, of any length (a paste): quote only its start. */
  if (g_utf8_strlen (text, -1) > DC_MODEL_ID_QUOTE_MAX)
    {
      g_autofree char *start = g_utf8_substring (text, 0, DC_MODEL_ID_QUOTE_MAX);

      g_free (text);
      text = g_strconcat (start, "…", NULL);
    }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
               _("“%s” is not a model id: type owner/name (letters, digits, “-”, “_” and "
                 "“.”, up to %u characters each), for example HuggingFaceTB/SmolLM-135M, "
                 "or open a local folder"),
               text, DC_MODEL_ID_MAX_PART);
  return FALSE;
}

/**
 * dc_model_dialog_add_recent:
 * @spec: a Hub model id that was loaded
 *
 * Puts @spec first in "infer-recent-models", without duplicates, keeping
 * at most DC_MODEL_RECENT_MAX.
 */
void
dc_model_dialog_add_recent (GSettings  *settings,
                            const char *spec)
{
  g_auto(GStrv) old = g_settings_get_strv (settings, "infer-recent-models");
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_auto(GStrv) recent = NULL;
  guint n = 1;

  g_strv_builder_add (builder, spec);
  for (guint i = 0; old[i] != NULL && n < DC_MODEL_RECENT_MAX; i++)
    if (!g_str_equal (old[i], spec))
      {
        g_strv_builder_add (builder, old[i]);
        n++;
      }
  recent = g_strv_builder_end (builder);
  g_settings_set_strv (settings, "infer-recent-models", (const char * const *) recent);
}

static void
set_status (DcModelDialog *self,
            const char    *text,
            gboolean       busy)
{
  gtk_label_set_label (self->status_label, text);
  gtk_widget_set_visible (GTK_WIDGET (self->spinner), busy);
  gtk_spinner_set_spinning (self->spinner, busy);
}

/* Safe in dispose: touches no widget. */
static void
drop_lookup (DcModelDialog *self)
{
  g_clear_handle_id (&self->lookup_timeout, g_source_remove);
  if (self->lookup != NULL)
    g_cancellable_cancel (self->lookup);
  g_clear_object (&self->lookup);
  g_clear_object (&self->repo);
}

static void
cancel_lookup (DcModelDialog *self)
{
  drop_lookup (self);
  adw_message_dialog_set_response_enabled (ADW_MESSAGE_DIALOG (self), "load", FALSE);
}

static void start_lookup (DcModelDialog *self);

static void
token_response_cb (AdwMessageDialog *dialog,
                   const char       *response,
                   DcModelDialog    *self)
{
  self->token_dialog = NULL;
  /* The token dialog has set the token: try again with it. */
  if (g_str_equal (response, "use") && self->spec != NULL)
    start_lookup (self);
}

static void
ask_token (DcModelDialog *self,
           const GError  *error)
{
  DcTokenDialog *dialog;

  if (self->token_dialog != NULL)
    return;
  dialog = dc_token_dialog_new (GTK_WINDOW (self), self->client, self->spec, error);
  self->token_dialog = GTK_WIDGET (dialog);
  g_signal_connect_object (dialog, "response", G_CALLBACK (token_response_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

typedef struct
{
  DcModelDialog *self;     /* owned */
  GCancellable  *lookup;   /* owned: which look-up this answers */
} Lookup;

static void
lookup_free (Lookup *lookup)
{
  g_object_unref (lookup->self);
  g_object_unref (lookup->lookup);
  g_free (lookup);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Lookup, lookup_free)

static void
open_cb (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  g_autoptr(Lookup) lookup = user_data;
  DcModelDialog *self = lookup->self;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcModelRepo) repo = dc_model_repo_open_finish (result, &error);
  g_autofree char *summary = NULL;

  /* Superseded by a newer text, or the dialog went away: not ours to show. */
  if (lookup->lookup != self->lookup || g_cancellable_is_cancelled (lookup->lookup))
    return;
  g_clear_object (&self->lookup);

  if (repo == NULL)
    {
      g_debug ("looking up %s failed: %s", self->spec, error->message);
      set_status (self, error->message, FALSE);
      if (dc_token_dialog_wants (error))
        ask_token (self, error);
      return;
    }

  summary = dc_model_repo_dup_summary (repo);
  set_status (self, summary, FALSE);
  self->repo = g_steal_pointer (&repo);
  adw_message_dialog_set_response_enabled (ADW_MESSAGE_DIALOG (self), "load", TRUE);
}

static void
start_lookup (DcModelDialog *self)
{
  g_autofree char *text = NULL;
  Lookup *lookup;

  cancel_lookup (self);
  text = g_strdup_printf (_("Looking up “%s”…"), self->spec);
  set_status (self, text, TRUE);

  self->lookup = g_cancellable_new ();
  lookup = g_new0 (Lookup, 1);
  lookup->self = g_object_ref (self);
  lookup->lookup = g_object_ref (self->lookup);
  /* Preferences › Model Cache: a folder and a limit; empty and 0 keep the
   * defaults ($DC_MODEL_CACHE_DIR, $DC_MODEL_CACHE_MAX_MB, else the user's
   * cache folder and 20 GB). */
  if (self->settings != NULL)
    {
      g_autofree char *dir = g_settings_get_string (self->settings, "model-cache-dir");
      DcModelRepoOptions options = { 0 };

      if (*g_strstrip (dir) != '\0')
        options.cache_dir = dir;
      options.cache_limit = (guint64) g_settings_get_uint (self->settings,
                                                           "model-cache-limit-mb") * 1000000;
      dc_model_repo_open_full_async (self->client, self->spec, &options, self->lookup, open_cb,
                                     lookup);
    }
  else
    dc_model_repo_open_async (self->client, self->spec, self->lookup, open_cb, lookup);
}

static gboolean
lookup_timeout_cb (gpointer user_data)
{
  DcModelDialog *self = user_data;

  self->lookup_timeout = 0;
  start_lookup (self);
  return G_SOURCE_REMOVE;
}

/* Checks the text at once; looks it up now, or once typing pauses. */
static void
update_spec (DcModelDialog *self,
             gboolean       now)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *text = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->spec_row))));

  cancel_lookup (self);
  g_clear_pointer (&self->spec, g_free);
  if (*text == '\0')
    {
      set_status (self, "", FALSE);
      return;
    }
  if (!dc_model_dialog_check_spec (text, NULL, &error))
    {
      set_status (self, error->message, FALSE);
      return;
    }
  self->spec = g_steal_pointer (&text);
  if (now)
    start_lookup (self);
  else
    {
      set_status (self, "", FALSE);
      self->lookup_timeout = g_timeout_add (DC_MODEL_LOOKUP_DELAY_MS, lookup_timeout_cb, self);
    }
}

static void
spec_changed_cb (DcModelDialog *self)
{
  update_spec (self, FALSE);
}

/**
 * dc_model_dialog_set_spec:
 *
 * Puts @spec in the entry, as a suggestion clicked would, and looks it up
 * at once (no pause for typing).
 */
void
dc_model_dialog_set_spec (DcModelDialog *self,
                          const char    *spec)
{
  g_return_if_fail (DC_IS_MODEL_DIALOG (self));
  g_return_if_fail (spec != NULL);

  g_signal_handlers_block_by_func (self->spec_row, spec_changed_cb, self);
  gtk_editable_set_text (GTK_EDITABLE (self->spec_row), spec);
  g_signal_handlers_unblock_by_func (self->spec_row, spec_changed_cb, self);
  update_spec (self, TRUE);
}

/**
 * dc_model_dialog_get_repo:
 *
 * Returns: (transfer none) (nullable): the model the current text found
 */
DcModelRepo *
dc_model_dialog_get_repo (DcModelDialog *self)
{
  g_return_val_if_fail (DC_IS_MODEL_DIALOG (self), NULL);

  return self->repo;
}

/**
 * dc_model_dialog_get_status:
 *
 * Returns: (transfer none): what the dialog says under the entry: the
 *   validation message, "Looking up …", the summary, or the refusal
 */
const char *
dc_model_dialog_get_status (DcModelDialog *self)
{
  g_return_val_if_fail (DC_IS_MODEL_DIALOG (self), NULL);

  return gtk_label_get_label (self->status_label);
}

/* Whether a look-up is waiting or in flight. */
gboolean
dc_model_dialog_is_busy (DcModelDialog *self)
{
  g_return_val_if_fail (DC_IS_MODEL_DIALOG (self), FALSE);

  return self->lookup != NULL || self->lookup_timeout != 0;
}

static void
row_activated_cb (AdwActionRow  *row,
                  DcModelDialog *self)
{
  dc_model_dialog_set_spec (self, adw_preferences_row_get_title (ADW_PREFERENCES_ROW (row)));
}

static GtkWidget *
new_model_row (DcModelDialog *self,
               const char    *id,
               const char    *notes)
{
  GtkWidget *row = adw_action_row_new ();

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), id);
  /* Ids and paths are plain text, never markup. */
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  if (notes != NULL)
    adw_action_row_set_subtitle (ADW_ACTION_ROW (row), notes);
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
  adw_action_row_add_suffix (ADW_ACTION_ROW (row), gtk_image_new_from_icon_name ("go-next-symbolic"));
  g_signal_connect_object (row, "activated", G_CALLBACK (row_activated_cb), self, 0);
  return row;
}

static void
fill_recent (DcModelDialog *self)
{
  g_auto(GStrv) recent = NULL;
  GtkWidget *child;
  guint n = 0;

  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->recent_list))) != NULL)
    gtk_list_box_remove (self->recent_list, child);
  if (self->settings != NULL)
    {
      recent = g_settings_get_strv (self->settings, "infer-recent-models");
      /* The setting is the user's to edit: show only well-formed ids. */
      for (guint i = 0; recent[i] != NULL && n < DC_MODEL_RECENT_MAX; i++)
        if (dc_model_dialog_check_spec (recent[i], NULL, NULL))
          {
            gtk_list_box_append (self->recent_list, new_model_row (self, recent[i], NULL));
            n++;
          }
    }
  gtk_widget_set_visible (self->recent_heading, n > 0);
  gtk_widget_set_visible (GTK_WIDGET (self->recent_list), n > 0);
}

static void
chooser_response_cb (GtkNativeDialog *chooser,
                     int              response,
                     DcModelDialog   *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      g_autofree char *path = file != NULL ? g_file_get_path (file) : NULL;

      if (path != NULL)
        dc_model_dialog_set_spec (self, path);
      else if (file != NULL)
        set_status (self, _("Choose a local folder"), FALSE);
    }
  gtk_native_dialog_destroy (chooser);
  g_clear_object (&self->chooser);
}

static void
folder_clicked_cb (DcModelDialog *self)
{
  GtkFileChooserNative *chooser;

  if (self->chooser != NULL)
    return;
  /* Through the portal where there is one (a sandbox sees only what is chosen). */
  chooser = gtk_file_chooser_native_new (_("Open Model Folder"), GTK_WINDOW (self),
                                         GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER, _("_Open"),
                                         _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_signal_connect (chooser, "response", G_CALLBACK (chooser_response_cb), self);
  self->chooser = GTK_NATIVE_DIALOG (chooser);
  gtk_native_dialog_show (self->chooser);
}

/* Connected in init: runs before the handlers of whoever showed the dialog. */
static void
response_cb (DcModelDialog *self,
             const char    *response)
{
  if (g_str_equal (response, "load") && self->repo != NULL && self->settings != NULL
      && self->spec != NULL && !g_path_is_absolute (self->spec))
    dc_model_dialog_add_recent (self->settings, self->spec);
}

/**
 * dc_model_dialog_new:
 * @client: the Hub client the look-ups use (the context's, with its token)
 * @settings: (nullable): where the recent models are kept
 *
 * Returns: (transfer none): a new modal dialog, not yet presented. On the
 *   "load" response, dc_model_dialog_get_repo() is the model to load.
 */
DcModelDialog *
dc_model_dialog_new (GtkWindow  *parent,
                     DcHfClient *client,
                     GSettings  *settings)
{
  DcModelDialog *self;

  g_return_val_if_fail (DC_IS_HF_CLIENT (client), NULL);
  g_return_val_if_fail (settings == NULL || G_IS_SETTINGS (settings), NULL);

  self = g_object_new (DC_TYPE_MODEL_DIALOG,
                       "transient-for", parent,
                       "modal", TRUE,
                       NULL);
  self->client = g_object_ref (client);
  self->settings = settings != NULL ? g_object_ref (settings) : NULL;
  fill_recent (self);
  return self;
}

static void
dc_model_dialog_dispose (GObject *object)
{
  DcModelDialog *self = DC_MODEL_DIALOG (object);

  drop_lookup (self);
  if (self->chooser != NULL)
    gtk_native_dialog_destroy (self->chooser);
  g_clear_object (&self->chooser);
  if (self->token_dialog != NULL)
    gtk_window_destroy (GTK_WINDOW (self->token_dialog));
  self->token_dialog = NULL;
  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_MODEL_DIALOG);
  g_clear_object (&self->client);
  g_clear_object (&self->settings);

  G_OBJECT_CLASS (dc_model_dialog_parent_class)->dispose (object);
}

static void
dc_model_dialog_finalize (GObject *object)
{
  g_free (DC_MODEL_DIALOG (object)->spec);

  G_OBJECT_CLASS (dc_model_dialog_parent_class)->finalize (object);
}

static void
dc_model_dialog_class_init (DcModelDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dc_model_dialog_dispose;
  object_class->finalize = dc_model_dialog_finalize;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-model-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, DcModelDialog, spec_row);
  gtk_widget_class_bind_template_child (widget_class, DcModelDialog, spinner);
  gtk_widget_class_bind_template_child (widget_class, DcModelDialog, status_label);
  gtk_widget_class_bind_template_child (widget_class, DcModelDialog, suggested_list);
  gtk_widget_class_bind_template_child (widget_class, DcModelDialog, recent_heading);
  gtk_widget_class_bind_template_child (widget_class, DcModelDialog, recent_list);
  gtk_widget_class_bind_template_callback (widget_class, spec_changed_cb);
  gtk_widget_class_bind_template_callback (widget_class, folder_clicked_cb);
}

static void
dc_model_dialog_init (DcModelDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  for (guint i = 0; i < G_N_ELEMENTS (suggested_models); i++)
    gtk_list_box_append (self->suggested_list,
                         new_model_row (self, suggested_models[i].id,
                                        _(suggested_models[i].notes)));
  g_signal_connect (self, "response", G_CALLBACK (response_cb), NULL);
}
