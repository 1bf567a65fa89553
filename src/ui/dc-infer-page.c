/* dc-infer-page.c: the Infer view.
 *
 * Choose Model… opens the model dialog; the chosen repository gets a
 * DcInferSession. Weights move only when the user generates: the first
 * Generate loads them (download progress in the Model group), and the
 * prompts sent meanwhile wait here, then go to the session in order. The
 * view follows the session's signals only: "load-progress", "started",
 * "token" (the stream), "finished"; Stop stops the run (or the download),
 * and the queue length shows the prompts waiting. A 401 or 403 while
 * loading opens the token dialog, and loading is retried with the token.
 *
 * Run On “Across the Group” (with a group that has peers) runs the prompt
 * through a DcInferRing on the group's devices instead: the plan shows in
 * the Ring group before anything runs, the tokens stream into the output,
 * then the prompt runs again on this device alone and the Verify row says
 * whether the ids were identical. The Serving row (and, without a model,
 * a line under Choose Model) shows this device's share of another
 * device's ring (the application's DcRingServer).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-infer-page.h"
#include "dc-model-dialog.h"
#include "dc-token-dialog.h"
#include "infer/dc-infer-session.h"
#include "infer/dc-ring-server.h"

/* The context spin never offers more than the settings key allows. */
#define CONTEXT_KEY_MAX 32768
/* Prompts waiting at most: far more than anyone types ahead, and a held
 * Enter key cannot grow the queue without bound. */
#define QUEUE_MAX 64

struct _DcInferPage
{
  AdwBin           parent_instance;

  /* template widgets (the stack, AdwBin's child, is not bound: AdwBin
   * unparents its child itself) */
  AdwActionRow    *model_row;
  AdwActionRow    *held_row;
  AdwActionRow    *load_row;
  GtkProgressBar  *load_bar;
  GtkSpinButton   *tokens_spin;
  GtkSpinButton   *context_spin;
  GtkSpinButton   *temperature_spin;
  GtkSpinButton   *seed_spin;
  AdwComboRow     *output_row;
  AdwEntryRow     *prompt_row;
  GtkTextView     *output_view;
  GtkLabel        *status_label;
  GtkLabel        *queue_label;
  GtkLabel        *rate_label;
  GtkWidget       *clear_queue_button;
  AdwPreferencesGroup *ring_group;
  AdwActionRow    *ring_stats_row;
  AdwActionRow    *ring_verify_row;
  AdwComboRow     *run_on_row;
  AdwActionRow    *serving_row;
  GtkLabel        *serving_label;

  /* owned references */
  DcContext       *context;       /* nullable (a bare window in tests) */
  DcHfClient      *own_client;    /* only without a context */
  GSettings       *settings;      /* nullable */
  DcInferSession  *session;
  GCancellable    *load_cancellable;
  GQueue           pending;       /* Pending*: sent before the weights were loaded */
  GHashTable      *prompts;       /* prompt id → prompt text, until finished */

  /* borrowed references */
  GtkWidget       *model_dialog;  /* while it is shown */
  GtkWidget       *token_dialog;  /* while it is shown */

  /* The ring display. */
  DcInferRing     *ring;          /* followed, nullable */
  DcInferSession  *ring_session;  /* its session, once prepared */
  GPtrArray       *ring_rows;     /* AdwActionRow*, one per stage, in the group */
  GPtrArray       *ring_bars;     /* GtkProgressBar*, their downloads */
  GArray          *ring_sizes;    /* guint64: bytes each stage downloads */
  guint            ring_n_stages;
  double           ring_lap_ms;

  /* Running across the group. */
  DcGroup         *group;         /* nullable */
  DcRingServer    *ring_server;   /* nullable: this device as another's stage */
  DcInferRing     *group_ring;    /* for the model of the view, while a group is set */
  guint64          ring_memory;   /* what this device offers as head; 0: the default */
  GCancellable    *ring_cancellable;  /* of the prepare; NULL when no group run */
  DcInferSession  *ring_run;      /* the ring's session while it generates */
  DcInferSession  *verify_session;    /* the single-device rerun */
  char            *ring_prompt;
  DcInferSettings  ring_settings;
  GArray          *ring_ids;      /* guint32: the ring's tokens */
  GArray          *verify_ids;    /* guint32: the rerun's */

  /* state */
  guint            running_id;    /* the prompt generating now, or 0 */
};

typedef struct
{
  char            *prompt;
  DcInferSettings  settings;
} Pending;

static void
pending_free (Pending *pending)
{
  g_free (pending->prompt);
  g_free (pending);
}

enum {
  SIGNAL_TOAST,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (DcInferPage, dc_infer_page, ADW_TYPE_BIN)

static void
toast (DcInferPage *self,
       const char  *message)
{
  g_signal_emit (self, signals[SIGNAL_TOAST], 0, message);
}

static gboolean group_generate (DcInferPage           *self,
                                const char            *prompt,
                                const DcInferSettings *settings);
static void     group_run_end  (DcInferPage           *self,
                                const char            *status);
static void     follow_group_ring (DcInferPage        *self);

static DcHfClient *
get_client (DcInferPage *self)
{
  if (self->context != NULL)
    return dc_context_get_hf_client (self->context);
  if (self->own_client == NULL)
    self->own_client = dc_hf_client_new (NULL);
  return self->own_client;
}

static GtkWindow *
get_window (DcInferPage *self)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));

  return GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL;
}

static gboolean
is_loading (DcInferPage *self)
{
  return self->load_cancellable != NULL;
}

/**
 * dc_infer_page_get_queue_length:
 *
 * Returns: the prompts waiting (not the one generating): those waiting for
 *   the weights and those in the session's queue
 */
guint
dc_infer_page_get_queue_length (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), 0);

  return self->pending.length
         + (self->session != NULL ? dc_infer_session_get_queue_length (self->session) : 0);
}

/* Whether the weights are loading, or a prompt sent to the session has not
 * finished yet (generating, or waiting in the session's queue). */
gboolean
dc_infer_page_is_busy (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), FALSE);

  return is_loading (self) || g_hash_table_size (self->prompts) > 0 ||
         self->ring_cancellable != NULL;
}

static void
update_actions (DcInferPage *self)
{
  GtkWidget *widget = GTK_WIDGET (self);
  guint queued = dc_infer_page_get_queue_length (self);

  /* Across the group: a model chosen (its ring follows the group) and
   * another device there; not switched while a group run goes on. */
  gtk_widget_set_sensitive (GTK_WIDGET (self->run_on_row),
                            self->group_ring != NULL && self->ring_cancellable == NULL &&
                            dc_group_get_n_peers (self->group) > 0);
  gtk_widget_action_set_enabled (widget, "infer.generate", self->session != NULL);
  gtk_widget_action_set_enabled (widget, "infer.stop", dc_infer_page_is_busy (self));
  gtk_widget_action_set_enabled (widget, "infer.clear-queue", queued > 0);
  gtk_widget_set_visible (self->clear_queue_button, queued > 0);
  if (queued > 0)
    {
      g_autofree char *text = g_strdup_printf (ngettext ("%u prompt queued",
                                                         "%u prompts queued", queued), queued);

      gtk_label_set_label (self->queue_label, text);
    }
  else
    gtk_label_set_label (self->queue_label, "");
}

static void
set_status (DcInferPage *self,
            const char  *text)
{
  gtk_label_set_label (self->status_label, text);
}

/* What this device holds: all the layers (one device, no ring), the bytes
 * downloaded so far, and the weights in memory once loaded (the engine's
 * INT8 form: one byte per parameter). */
static void
update_held (DcInferPage *self)
{
  DcModelRepo *repo = self->session != NULL ? dc_infer_session_get_repo (self->session) : NULL;
  const DcHfConfig *config = repo != NULL ? dc_model_repo_get_config (repo) : NULL;
  g_autofree char *downloaded = NULL;
  g_autofree char *held = NULL;
  g_autofree char *text = NULL;
  guint n_layers;

  if (config == NULL)
    {
      adw_action_row_set_subtitle (self->held_row, "—");
      return;
    }
  n_layers = config->n_layers;
  downloaded = g_format_size (dc_model_repo_get_bytes_downloaded (repo));
  held = g_format_size (dc_infer_session_is_loaded (self->session)
                        ? dc_hf_config_n_params (config) : 0);
  text = g_strdup_printf (ngettext ("%u layer · %s downloaded · %s held",
                                    "%u layers · %s downloaded · %s held", n_layers),
                          n_layers, downloaded, held);
  adw_action_row_set_subtitle (self->held_row, text);
}

static void
append_output (DcInferPage *self,
               const char  *text)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->output_view);
  GtkTextIter end;

  gtk_text_buffer_get_end_iter (buffer, &end);
  gtk_text_buffer_insert (buffer, &end, text, -1);
  gtk_text_buffer_get_end_iter (buffer, &end);
  gtk_text_view_scroll_to_iter (self->output_view, &end, 0.0, FALSE, 0.0, 1.0);
}

static void
show_rate (DcInferPage *self,
           double       tokens_per_s)
{
  char text[64];

  g_snprintf (text, sizeof text, _("%.1f tokens/s"), tokens_per_s);
  gtk_label_set_label (self->rate_label, text);
}

static void
session_load_progress_cb (DcInferSession *session,
                          guint64         done,
                          guint64         total,
                          DcInferPage    *self)
{
  g_autofree char *done_text = g_format_size (done);
  g_autofree char *total_text = g_format_size (total);
  g_autofree char *text = g_strdup_printf (_("%s of %s"), done_text, total_text);

  gtk_progress_bar_set_fraction (self->load_bar,
                                 total > 0 ? CLAMP ((double) done / (double) total, 0.0, 1.0)
                                           : 0.0);
  gtk_progress_bar_set_text (self->load_bar, text);
  update_held (self);
}

static void
session_started_cb (DcInferSession *session,
                    guint           prompt_id,
                    guint           n_prompt_tokens,
                    DcInferPage    *self)
{
  const char *prompt = g_hash_table_lookup (self->prompts, GUINT_TO_POINTER (prompt_id));
  g_autofree char *text = NULL;

  self->running_id = prompt_id;
  /* The output shows the prompt, then the tokens as they come. */
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->output_view),
                            prompt != NULL ? prompt : "", -1);
  gtk_label_set_label (self->rate_label, "—");
  text = g_strdup_printf (ngettext ("Generating after a prompt of %u token…",
                                    "Generating after a prompt of %u tokens…", n_prompt_tokens),
                          n_prompt_tokens);
  set_status (self, text);
  update_actions (self);
}

static void
session_token_cb (DcInferSession *session,
                  guint           prompt_id,
                  guint           token_id,
                  const char     *text,
                  double          tokens_per_s,
                  DcInferPage    *self)
{
  if (prompt_id != self->running_id)
    return;
  if (text != NULL)
    append_output (self, text);
  show_rate (self, tokens_per_s);
}

static void
session_finished_cb (DcInferSession *session,
                     guint           prompt_id,
                     gboolean        stopped,
                     const char     *error_message,
                     double          tokens_per_s,
                     DcInferPage    *self)
{
  g_hash_table_remove (self->prompts, GUINT_TO_POINTER (prompt_id));
  if (prompt_id == self->running_id)
    self->running_id = 0;
  show_rate (self, tokens_per_s);
  if (error_message != NULL)
    {
      g_autofree char *text = g_strdup_printf (_("Generation failed: %s"), error_message);

      set_status (self, text);
      toast (self, text);
    }
  else
    set_status (self, stopped ? _("Stopped") : _("Done"));
  update_actions (self);
}

static void
submit (DcInferPage           *self,
        const char            *prompt,
        const DcInferSettings *settings)
{
  guint id = dc_infer_session_submit (self->session, prompt, settings);

  g_hash_table_insert (self->prompts, GUINT_TO_POINTER (id), g_strdup (prompt));
}

static void start_load (DcInferPage *self);

static void
token_response_cb (AdwMessageDialog *dialog,
                   const char       *response,
                   DcInferPage      *self)
{
  self->token_dialog = NULL;
  update_actions (self);
  /* The token dialog has set the token: load again with it. */
  if (g_str_equal (response, "use") && self->session != NULL && self->pending.length > 0)
    start_load (self);
  else if (!g_str_equal (response, "use"))
    {
      g_queue_clear_full (&self->pending, (GDestroyNotify) pending_free);
      update_actions (self);
    }
}

static void
ask_token (DcInferPage  *self,
           const GError *error)
{
  DcModelRepo *repo = dc_infer_session_get_repo (self->session);
  const char *spec = dc_model_repo_get_spec (repo);
  DcTokenDialog *dialog;

  if (self->token_dialog != NULL)
    return;
  dialog = dc_token_dialog_new (get_window (self), get_client (self),
                                spec != NULL ? spec : "", error);
  self->token_dialog = GTK_WIDGET (dialog);
  g_signal_connect_object (dialog, "response", G_CALLBACK (token_response_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

typedef struct
{
  DcInferPage    *self;         /* owned */
  DcInferSession *session;      /* owned: which session this load was for */
  GCancellable   *cancellable;  /* owned: which load of it */
} Load;

static void
load_free (Load *load)
{
  g_object_unref (load->self);
  g_object_unref (load->session);
  g_object_unref (load->cancellable);
  g_free (load);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Load, load_free)

static void
load_cb (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  g_autoptr(Load) load = user_data;
  DcInferPage *self = load->self;
  g_autoptr(GError) error = NULL;
  gboolean loaded = dc_infer_session_load_finish (load->session, result, &error);

  /* Another model was chosen meanwhile, or the page went away. */
  if (load->session != self->session || load->cancellable != self->load_cancellable)
    return;
  g_clear_object (&self->load_cancellable);
  gtk_widget_set_visible (GTK_WIDGET (self->load_row), FALSE);

  if (!loaded)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) && self->pending.length > 0)
        {
          /* Stop dropped the prompts of that load; these came after it. */
          start_load (self);
          return;
        }
      else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        set_status (self, _("Download stopped"));
      else if (dc_token_dialog_wants (error))
        {
          g_autofree char *text = g_strdup_printf (_("Could not load the model: %s"),
                                                   error->message);

          set_status (self, text);
          ask_token (self, error);  /* the prompts wait for the answer */
        }
      else
        {
          g_autofree char *text = g_strdup_printf (_("Could not load the model: %s"),
                                                   error->message);

          set_status (self, text);
          toast (self, text);
          g_queue_clear_full (&self->pending, (GDestroyNotify) pending_free);
        }
      update_held (self);
      update_actions (self);
      return;
    }

  set_status (self, _("Loaded"));
  update_held (self);
  /* The prompts sent while the weights moved, in the order sent. */
  for (Pending *pending; (pending = g_queue_pop_head (&self->pending)) != NULL;)
    {
      submit (self, pending->prompt, &pending->settings);
      pending_free (pending);
    }
  update_actions (self);
}

static void
start_load (DcInferPage *self)
{
  Load *load;

  if (is_loading (self))
    return;
  self->load_cancellable = g_cancellable_new ();
  gtk_progress_bar_set_fraction (self->load_bar, 0.0);
  gtk_progress_bar_set_text (self->load_bar, _("Starting…"));
  gtk_widget_set_visible (GTK_WIDGET (self->load_row), TRUE);
  set_status (self, _("Loading the weights…"));

  load = g_new0 (Load, 1);
  load->self = g_object_ref (self);
  load->session = g_object_ref (self->session);
  load->cancellable = g_object_ref (self->load_cancellable);
  dc_infer_session_load_async (self->session, self->load_cancellable, load_cb, load);
  update_actions (self);
}

/* Drops the session and everything tied to it. Safe in dispose. */
static void
drop_session (DcInferPage *self)
{
  if (self->load_cancellable != NULL)
    g_cancellable_cancel (self->load_cancellable);
  g_clear_object (&self->load_cancellable);
  if (self->session != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->session, self);
      dc_infer_session_clear_queue (self->session);
      dc_infer_session_stop (self->session);
    }
  g_clear_object (&self->session);
  if (self->ring_cancellable != NULL)
    group_run_end (self, NULL);
  g_queue_clear_full (&self->pending, (GDestroyNotify) pending_free);
  g_hash_table_remove_all (self->prompts);
  self->running_id = 0;
}

/**
 * dc_infer_page_set_repo:
 * @repo: a repository opened with dc_model_repo_open*()
 *
 * Shows @repo as the model of the view, as choosing it in the model dialog
 * does; the weights load at the first Generate.
 */
void
dc_infer_page_set_repo (DcInferPage *self,
                        DcModelRepo *repo)
{
  const DcHfConfig *config;
  g_autofree char *summary = NULL;

  g_return_if_fail (DC_IS_INFER_PAGE (self));
  g_return_if_fail (DC_IS_MODEL_REPO (repo));

  drop_session (self);
  self->session = dc_infer_session_new (self->context, repo);
  g_signal_connect_object (self->session, "load-progress",
                           G_CALLBACK (session_load_progress_cb), self, 0);
  g_signal_connect_object (self->session, "started", G_CALLBACK (session_started_cb), self, 0);
  g_signal_connect_object (self->session, "token", G_CALLBACK (session_token_cb), self, 0);
  g_signal_connect_object (self->session, "finished", G_CALLBACK (session_finished_cb), self, 0);

  summary = dc_model_repo_dup_summary (repo);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->model_row),
                                 dc_model_repo_get_spec (repo) != NULL
                                 ? dc_model_repo_get_spec (repo) : "");
  adw_action_row_set_subtitle (self->model_row, summary);

  /* The context length goes up to the model's limit. */
  config = dc_model_repo_get_config (repo);
  if (config != NULL && config->max_positions > 0)
    gtk_spin_button_set_range (self->context_spin, 8,
                               MAX (8, MIN (config->max_positions, CONTEXT_KEY_MAX)));

  follow_group_ring (self);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->output_view), "", -1);
  gtk_label_set_label (self->rate_label, "—");
  set_status (self, _("The weights download when you generate"));
  gtk_widget_set_visible (GTK_WIDGET (self->load_row), FALSE);
  gtk_stack_set_visible_child_name (GTK_STACK (adw_bin_get_child (ADW_BIN (self))), "model");
  update_held (self);
  update_actions (self);
}

/**
 * dc_infer_page_get_repo:
 *
 * Returns: (transfer none) (nullable): the model of the view
 */
DcModelRepo *
dc_infer_page_get_repo (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);

  return self->session != NULL ? dc_infer_session_get_repo (self->session) : NULL;
}

void
dc_infer_page_set_prompt (DcInferPage *self,
                          const char  *prompt)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));

  gtk_editable_set_text (GTK_EDITABLE (self->prompt_row), prompt);
}

/**
 * dc_infer_page_dup_output:
 *
 * Returns: (transfer full): the output shown: the last prompt started and
 *   the text generated after it so far
 */
char *
dc_infer_page_dup_output (DcInferPage *self)
{
  GtkTextBuffer *buffer;
  GtkTextIter start, end;

  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);

  buffer = gtk_text_view_get_buffer (self->output_view);
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

/* Returns: (transfer none): the line under the output ("Done", an error, …) */
const char *
dc_infer_page_get_status (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);

  return gtk_label_get_label (self->status_label);
}

/* Returns: (transfer none): what this device holds, as the view shows it */
const char *
dc_infer_page_get_held (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);

  return adw_action_row_get_subtitle (self->held_row);
}

static void
read_settings (DcInferPage     *self,
               DcInferSettings *settings)
{
  dc_infer_settings_init_default (settings);
  settings->n_tokens = (guint) gtk_spin_button_get_value_as_int (self->tokens_spin);
  settings->context = (guint) gtk_spin_button_get_value_as_int (self->context_spin);
  settings->temperature = (guint) gtk_spin_button_get_value_as_int (self->temperature_spin);
  settings->seed = (guint64) gtk_spin_button_get_value_as_int (self->seed_spin);
  settings->output = adw_combo_row_get_selected (self->output_row) == 1 ? DC_INFER_OUTPUT_JSON
                                                                        : DC_INFER_OUTPUT_FREE;
}

static void
generate_action (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  DcInferPage *self = DC_INFER_PAGE (widget);
  DcModelRepo *repo;
  const DcHfConfig *config;
  g_autoptr(GError) error = NULL;
  DcInferSettings settings;
  const char *prompt = gtk_editable_get_text (GTK_EDITABLE (self->prompt_row));

  if (self->session == NULL)
    return;
  if (*prompt == '\0')
    {
      toast (self, _("Type a prompt first"));
      return;
    }
  if (dc_infer_page_get_queue_length (self) >= QUEUE_MAX)
    {
      toast (self, _("The queue is full: wait for a prompt to finish, or clear the queue"));
      return;
    }
  repo = dc_infer_session_get_repo (self->session);
  config = dc_model_repo_get_config (repo);
  read_settings (self, &settings);
  if (!dc_infer_settings_validate (&settings, config != NULL ? config->max_positions : 0,
                                   &error))
    {
      g_autofree char *text = g_strdup_printf (_("Cannot generate: %s"), error->message);

      toast (self, text);
      return;
    }

  if (adw_combo_row_get_selected (self->run_on_row) == 1)
    {
      if (group_generate (self, prompt, &settings))
        gtk_editable_set_text (GTK_EDITABLE (self->prompt_row), "");
      update_actions (self);
      return;
    }

  /* While a load is under way its prompts go first, in order, even if the
   * session already counts as loaded before load_cb has run. */
  if (!is_loading (self) && dc_infer_session_is_loaded (self->session))
    submit (self, prompt, &settings);
  else
    {
      Pending *pending = g_new0 (Pending, 1);

      pending->prompt = g_strdup (prompt);
      pending->settings = settings;
      g_queue_push_tail (&self->pending, pending);
      start_load (self);
    }
  gtk_editable_set_text (GTK_EDITABLE (self->prompt_row), "");
  update_actions (self);
}

static void
prompt_activated_cb (DcInferPage *self)
{
  gtk_widget_activate_action (GTK_WIDGET (self), "infer.generate", NULL);
}

static void
stop_action (GtkWidget  *widget,
             const char *action_name,
             GVariant   *parameter)
{
  DcInferPage *self = DC_INFER_PAGE (widget);

  if (self->ring_cancellable != NULL)
    {
      /* A group run: its plan, its generation or its Verify. */
      g_cancellable_cancel (self->ring_cancellable);
      if (self->ring_run != NULL)
        dc_infer_session_stop (self->ring_run);
      else if (self->verify_session != NULL)
        group_run_end (self, _("Stopped"));
      return;
    }
  if (self->session == NULL)
    return;
  if (is_loading (self))
    {
      /* Nothing generates yet: stopping the download drops what waits for it. */
      g_queue_clear_full (&self->pending, (GDestroyNotify) pending_free);
      g_cancellable_cancel (self->load_cancellable);  /* load_cb says so */
      update_actions (self);
      return;
    }
  /* Even before "started" arrived: the session knows what runs. "finished"
   * follows, stopped; the queue is kept. */
  dc_infer_session_stop (self->session);
}

static void
clear_queue_action (GtkWidget  *widget,
                    const char *action_name,
                    GVariant   *parameter)
{
  DcInferPage *self = DC_INFER_PAGE (widget);

  g_queue_clear_full (&self->pending, (GDestroyNotify) pending_free);
  if (self->session != NULL)
    dc_infer_session_clear_queue (self->session);
  update_actions (self);
}

/* Always enabled: the token may have been set elsewhere (the model dialog's
 * token dialog), and forgetting none is harmless. */
static void
forget_token_action (GtkWidget  *widget,
                     const char *action_name,
                     GVariant   *parameter)
{
  DcInferPage *self = DC_INFER_PAGE (widget);

  dc_hf_client_set_token (get_client (self), NULL);
  toast (self, _("Hugging Face token forgotten"));
  update_actions (self);
}

static void
model_dialog_response_cb (DcModelDialog *dialog,
                          const char    *response,
                          DcInferPage   *self)
{
  DcModelRepo *repo = dc_model_dialog_get_repo (dialog);

  self->model_dialog = NULL;
  if (g_str_equal (response, "load") && repo != NULL)
    dc_infer_page_set_repo (self, repo);
  update_actions (self);  /* a token may have been set there */
}

static void
choose_model_action (GtkWidget  *widget,
                     const char *action_name,
                     GVariant   *parameter)
{
  DcInferPage *self = DC_INFER_PAGE (widget);
  DcModelDialog *dialog;

  if (self->model_dialog != NULL)
    {
      gtk_window_present (GTK_WINDOW (self->model_dialog));
      return;
    }
  dialog = dc_model_dialog_new (get_window (self), get_client (self), self->settings);
  self->model_dialog = GTK_WIDGET (dialog);
  g_signal_connect_object (dialog, "response", G_CALLBACK (model_dialog_response_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

/**
 * dc_infer_page_set_settings:
 *
 * Binds the generation settings to @settings: they start from the last
 * values and are saved as they change.
 */
void
dc_infer_page_set_settings (DcInferPage *self,
                            GSettings   *settings)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));
  g_return_if_fail (G_IS_SETTINGS (settings));
  g_return_if_fail (self->settings == NULL);

  self->settings = g_object_ref (settings);
  g_settings_bind (settings, "infer-tokens", self->tokens_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "infer-context", self->context_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "infer-temperature-x100", self->temperature_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "infer-seed", self->seed_spin, "value", G_SETTINGS_BIND_DEFAULT);
}

/**
 * dc_infer_page_set_context:
 * @context: (nullable): the application's context: its backend runs the
 *   model and its Hub client (with the token) fetches it
 *
 * Call once, before a model is chosen (the window does, at construction).
 */
void
dc_infer_page_set_context (DcInferPage *self,
                           DcContext   *context)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));
  g_return_if_fail (context == NULL || DC_IS_CONTEXT (context));
  g_return_if_fail (self->session == NULL);

  g_set_object (&self->context, context);
  update_actions (self);
}

/* ---- the ring display ------------------------------------------------- */

static void
clear_ring_rows (DcInferPage *self)
{
  for (guint i = 0; i < self->ring_rows->len; i++)
    adw_preferences_group_remove (self->ring_group, g_ptr_array_index (self->ring_rows, i));
  g_ptr_array_set_size (self->ring_rows, 0);
  g_ptr_array_set_size (self->ring_bars, 0);
  g_array_set_size (self->ring_sizes, 0);
}

void
dc_infer_page_show_ring_plan (DcInferPage        *self,
                              const DcRingPlan   *plan,
                              const char * const *names)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self) && plan != NULL && names != NULL);

  clear_ring_rows (self);
  self->ring_n_stages = dc_ring_plan_get_n_stages (plan);
  self->ring_lap_ms = plan->lap_ms;
  for (guint i = 0; i < self->ring_n_stages; i++)
    {
      const DcRingStage *st = dc_ring_plan_get_stage (plan, i);
      GtkWidget *row = adw_action_row_new ();
      GtkWidget *bar = gtk_progress_bar_new ();
      g_autofree char *layers = NULL, *subtitle = NULL;

      if (st->last > st->first)
        /* Translators: a device's layers in the ring, first and last. */
        layers = g_strdup_printf (_("layers %u–%u"), st->first, st->last - 1);
      else
        layers = g_strdup (_("no layers"));
      /* Translators: a device's share of the ring: its layers (and whether it holds
       * the embedding and head), the MB it downloads, its estimated ms per token. */
      subtitle = g_strdup_printf (_("%s%s · %.1f MB · %.1f ms per token"), layers,
                                  st->ends ? _(" and the embedding and head") : "",
                                  st->download_bytes / 1e6, st->ms_per_token);
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), names[i]);
      adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), subtitle);
      gtk_widget_set_valign (bar, GTK_ALIGN_CENTER);
      gtk_widget_set_size_request (bar, 120, -1);
      gtk_progress_bar_set_show_text (GTK_PROGRESS_BAR (bar), TRUE);
      gtk_progress_bar_set_text (GTK_PROGRESS_BAR (bar), _("Waiting"));
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), bar);
      adw_preferences_group_add (self->ring_group, row);
      g_ptr_array_add (self->ring_rows, row);
      g_ptr_array_add (self->ring_bars, bar);
      g_array_append_val (self->ring_sizes, st->download_bytes);
    }
  dc_infer_page_set_ring_rate (self, 0, 0.0);
  gtk_widget_set_visible (GTK_WIDGET (self->ring_verify_row), FALSE);
  gtk_widget_set_visible (GTK_WIDGET (self->ring_group), TRUE);
}

void
dc_infer_page_set_ring_downloaded (DcInferPage *self,
                                   guint        stage,
                                   guint64      bytes)
{
  guint64 size;
  g_autofree char *text = NULL;

  g_return_if_fail (DC_IS_INFER_PAGE (self));
  if (stage >= self->ring_bars->len)
    return;
  size = g_array_index (self->ring_sizes, guint64, stage);
  gtk_progress_bar_set_fraction (g_ptr_array_index (self->ring_bars, stage),
                                 size > 0 ? MIN (1.0, (double) bytes / size) : 1.0);
  /* Translators: MB a device of the ring downloaded so far, of the MB it needs. */
  text = g_strdup_printf (_("%.1f of %.1f MB"), bytes / 1e6, size / 1e6);
  gtk_progress_bar_set_text (g_ptr_array_index (self->ring_bars, stage), text);
}

void
dc_infer_page_set_ring_rate (DcInferPage *self,
                             guint        tokens,
                             double       tokens_per_s)
{
  g_autofree char *subtitle = NULL;
  guint hops;

  g_return_if_fail (DC_IS_INFER_PAGE (self));
  /* The seed's ring hops: stages × tokens. */
  hops = self->ring_n_stages * tokens;
  /* Translators: ring hops (stages × tokens), the ring's tokens per second, and the
   * plan's lap estimate. */
  subtitle = g_strdup_printf (ngettext ("%u hop · %.1f tokens/s · lap estimate %.1f ms",
                                        "%u hops · %.1f tokens/s · lap estimate %.1f ms", hops),
                              hops, tokens_per_s, self->ring_lap_ms);
  adw_action_row_set_subtitle (self->ring_stats_row, subtitle);
}

void
dc_infer_page_set_ring_verify (DcInferPage *self,
                               const char  *message)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));

  adw_action_row_set_subtitle (self->ring_verify_row, message != NULL ? message : "");
  gtk_widget_set_visible (GTK_WIDGET (self->ring_verify_row), message != NULL);
}

char *
dc_infer_page_dup_ring_text (DcInferPage *self)
{
  GString *text = g_string_new (NULL);

  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);
  if (!gtk_widget_get_visible (GTK_WIDGET (self->ring_group)))
    return g_string_free (text, FALSE);
  for (guint i = 0; i < self->ring_rows->len; i++)
    {
      AdwActionRow *row = g_ptr_array_index (self->ring_rows, i);

      g_string_append_printf (text, "%s: %s [%s]\n",
                              adw_preferences_row_get_title (ADW_PREFERENCES_ROW (row)),
                              adw_action_row_get_subtitle (row),
                              gtk_progress_bar_get_text (g_ptr_array_index (self->ring_bars, i)));
    }
  g_string_append_printf (text, "%s: %s\n",
                          adw_preferences_row_get_title (ADW_PREFERENCES_ROW (self->ring_stats_row)),
                          adw_action_row_get_subtitle (self->ring_stats_row));
  if (gtk_widget_get_visible (GTK_WIDGET (self->ring_verify_row)))
    g_string_append_printf (text, "%s: %s\n",
                            adw_preferences_row_get_title (
                              ADW_PREFERENCES_ROW (self->ring_verify_row)),
                            adw_action_row_get_subtitle (self->ring_verify_row));
  return g_string_free (text, FALSE);
}

double
dc_infer_page_get_ring_fraction (DcInferPage *self,
                                 guint        stage)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), 0.0);
  g_return_val_if_fail (stage < self->ring_bars->len, 0.0);

  return gtk_progress_bar_get_fraction (g_ptr_array_index (self->ring_bars, stage));
}

/* A stage that holds its layers: its bar full, and what it fetched (less
 * than its share when its cache already had bytes). */
static void
set_ring_ready (DcInferPage *self,
                guint        stage,
                guint64      downloaded)
{
  g_autofree char *text = NULL;

  if (stage >= self->ring_bars->len)
    return;
  gtk_progress_bar_set_fraction (g_ptr_array_index (self->ring_bars, stage), 1.0);
  /* Translators: a device of the ring holds its layers; the MB it downloaded for them. */
  text = g_strdup_printf (_("Ready, %.1f MB downloaded"), downloaded / 1e6);
  gtk_progress_bar_set_text (g_ptr_array_index (self->ring_bars, stage), text);
}

static void
ring_token_cb (DcInferSession *session,
               guint           prompt_id,
               guint           token_id,
               const char     *text,
               double          tokens_per_s,
               DcInferPage    *self)
{
  guint n = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (self), "dc-ring-tokens")) + 1;

  g_object_set_data (G_OBJECT (self), "dc-ring-tokens", GUINT_TO_POINTER (n));
  dc_infer_page_set_ring_rate (self, n, tokens_per_s);
}

static void
ring_started_cb (DcInferSession *session,
                 guint           prompt_id,
                 guint           n_prompt_tokens,
                 DcInferPage    *self)
{
  g_object_set_data (G_OBJECT (self), "dc-ring-tokens", NULL);
  dc_infer_page_set_ring_rate (self, 0, 0.0);
}

static void
ring_event_cb (DcInferRing *ring,
               const char  *kind,
               const char  *detail,
               guint64      value,
               DcInferPage *self)
{
  const DcRingPlan *plan = dc_infer_ring_get_plan (ring);

  if (g_str_equal (kind, "planned") && plan != NULL)
    {
      g_autoptr(GPtrArray) names = g_ptr_array_new ();

      for (guint i = 0; i < dc_ring_plan_get_n_stages (plan); i++)
        g_ptr_array_add (names, (gpointer) dc_infer_ring_get_stage_name (ring, i));
      g_ptr_array_add (names, NULL);
      dc_infer_page_show_ring_plan (self, plan, (const char * const *) names->pdata);
    }
  else if (g_str_equal (kind, "stage-ready") && plan != NULL)
    {
      for (guint i = 1; i < dc_ring_plan_get_n_stages (plan); i++)
        if (g_strcmp0 (dc_infer_ring_get_stage_name (ring, i), detail) == 0)
          set_ring_ready (self, i, value);
    }
  else if (g_str_equal (kind, "prepared") && plan != NULL)
    {
      DcInferSession *session = dc_infer_ring_get_session (ring);

      for (guint i = 0; i < dc_ring_plan_get_n_stages (plan); i++)
        set_ring_ready (self, i, dc_infer_ring_get_stage_downloaded (ring, i));
      if (session != self->ring_session)
        {
          if (self->ring_session != NULL)
            g_signal_handlers_disconnect_by_data (self->ring_session, self);
          g_set_object (&self->ring_session, session);
          g_signal_connect_object (session, "started", G_CALLBACK (ring_started_cb), self, 0);
          g_signal_connect_object (session, "token", G_CALLBACK (ring_token_cb), self, 0);
        }
    }
}

void
dc_infer_page_set_ring (DcInferPage *self,
                        DcInferRing *ring)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));
  g_return_if_fail (ring == NULL || DC_IS_INFER_RING (ring));

  if (self->ring_session != NULL)
    g_signal_handlers_disconnect_by_data (self->ring_session, self);
  g_clear_object (&self->ring_session);
  if (self->ring != NULL)
    g_signal_handlers_disconnect_by_data (self->ring, self);
  g_set_object (&self->ring, ring);
  clear_ring_rows (self);
  gtk_widget_set_visible (GTK_WIDGET (self->ring_group), FALSE);
  if (ring == NULL)
    return;
  g_signal_connect_object (ring, "event", G_CALLBACK (ring_event_cb), self, 0);
  if (dc_infer_ring_get_plan (ring) != NULL)
    {
      ring_event_cb (ring, "planned", NULL, 0, self);
      if (dc_infer_ring_get_session (ring) != NULL)
        ring_event_cb (ring, "prepared", NULL, 0, self);
    }
}

/* ---- running across the group ------------------------------------------ */

/* The group's ring for the model of the view: made when both are there, so
 * that the devices' offers (and their round trips) arrive before the user
 * asks for a run. */
static void
follow_group_ring (DcInferPage *self)
{
  DcModelRepo *repo = self->session != NULL ? dc_infer_session_get_repo (self->session) : NULL;

  if (self->group_ring != NULL &&
      (repo == NULL || dc_infer_ring_get_repo (self->group_ring) != repo))
    {
      if (self->ring == self->group_ring)
        dc_infer_page_set_ring (self, NULL);
      dc_infer_ring_close (self->group_ring);
      g_clear_object (&self->group_ring);
    }
  if (self->group_ring == NULL && repo != NULL && self->group != NULL && self->context != NULL)
    {
      self->group_ring = dc_infer_ring_new (self->context, self->group, repo,
                                            dc_context_get_probe_hash (self->context),
                                            self->ring_memory);
      dc_infer_page_set_ring (self, self->group_ring);
    }
  update_actions (self);
}

static gboolean
unref_idle_cb (gpointer data)
{
  g_object_unref (data);
  return G_SOURCE_REMOVE;
}

static void
group_disconnect_run (DcInferPage *self)
{
  if (self->ring_run != NULL)
    g_signal_handlers_disconnect_by_data (self->ring_run, self->ring_ids);
  g_clear_object (&self->ring_run);
  if (self->verify_session != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->verify_session, self->verify_ids);
      dc_infer_session_stop (self->verify_session);
      /* This may run inside the session's own "finished": it goes once
       * that returned. */
      g_idle_add (unref_idle_cb, g_steal_pointer (&self->verify_session));
    }
}

/* Ends the group run; STATUS (nullable) is what the view says then. The
 * stages release their layers. */
static void
group_run_end (DcInferPage *self,
               const char  *status)
{
  group_disconnect_run (self);
  if (self->ring_cancellable != NULL)
    g_cancellable_cancel (self->ring_cancellable);
  g_clear_object (&self->ring_cancellable);
  g_clear_pointer (&self->ring_prompt, g_free);
  if (self->group_ring != NULL)
    dc_infer_ring_close (self->group_ring);
  if (status != NULL)
    set_status (self, status);
  update_actions (self);
}

static void
group_fail (DcInferPage *self,
            const char  *message)
{
  /* Translators: a run across the group failed; the reason follows. */
  g_autofree char *text = g_strdup_printf (_("Could not run across the group: %s"), message);

  toast (self, text);
  group_run_end (self, text);
}

static void
verify_token_cb (DcInferSession *session,
                 guint           prompt_id,
                 guint           token_id,
                 const char     *text,
                 double          tokens_per_s,
                 GArray         *ids)
{
  g_array_append_val (ids, token_id);
}

static void
verify_finished_cb (DcInferSession *session,
                    guint           prompt_id,
                    gboolean        stopped,
                    const char     *error_message,
                    double          tokens_per_s,
                    GArray         *ids)
{
  DcInferPage *self = g_object_get_data (G_OBJECT (session), "dc-infer-page");
  g_autofree char *message = NULL;
  gboolean verified;

  if (error_message != NULL || stopped)
    {
      group_fail (self, error_message != NULL ? error_message : _("stopped"));
      return;
    }
  message = dc_infer_ring_compare_ids (self->ring_ids, ids, &verified);
  dc_infer_page_set_ring_verify (self, message);
  group_run_end (self, _("Done"));
}

static void
verify_loaded_cb (GObject      *source,
                  GAsyncResult *result,
                  gpointer      user_data)
{
  g_autoptr(DcInferPage) self = user_data;
  g_autoptr(GError) error = NULL;
  DcInferSession *session = DC_INFER_SESSION (source);

  if (!dc_infer_session_load_finish (session, result, &error))
    {
      if (session == self->verify_session)
        group_fail (self, error->message);
      return;
    }
  if (session != self->verify_session)
    return;
  g_signal_connect (session, "token", G_CALLBACK (verify_token_cb), self->verify_ids);
  g_signal_connect (session, "finished", G_CALLBACK (verify_finished_cb), self->verify_ids);
  dc_infer_session_submit (session, self->ring_prompt, &self->ring_settings);
}

/* The ring's answer is in: the same prompt again with every layer here. */
static void
group_verify (DcInferPage *self)
{
  DcModelRepo *repo = dc_infer_ring_get_repo (self->group_ring);

  set_status (self, _("Verifying on this device…"));
  g_array_set_size (self->verify_ids, 0);
  self->verify_session = dc_infer_session_new (self->context, repo);
  g_object_set_data (G_OBJECT (self->verify_session), "dc-infer-page", self);
  dc_infer_session_load_async (self->verify_session, self->ring_cancellable, verify_loaded_cb,
                               g_object_ref (self));
}

static void
group_token_cb (DcInferSession *session,
                guint           prompt_id,
                guint           token_id,
                const char     *text,
                double          tokens_per_s,
                GArray         *ids)
{
  DcInferPage *self = g_object_get_data (G_OBJECT (session), "dc-infer-page");

  g_array_append_val (ids, token_id);
  if (text != NULL)
    append_output (self, text);
  show_rate (self, tokens_per_s);
}

static void
group_finished_cb (DcInferSession *session,
                   guint           prompt_id,
                   gboolean        stopped,
                   const char     *error_message,
                   double          tokens_per_s,
                   GArray         *ids)
{
  DcInferPage *self = g_object_get_data (G_OBJECT (session), "dc-infer-page");

  show_rate (self, tokens_per_s);
  g_signal_handlers_disconnect_by_data (session, ids);
  g_clear_object (&self->ring_run);
  if (error_message != NULL)
    group_fail (self, error_message);
  else if (stopped)
    group_run_end (self, _("Stopped"));
  else
    group_verify (self);
}

static void
group_prepared_cb (GObject      *source,
                   GAsyncResult *result,
                   gpointer      user_data)
{
  g_autoptr(DcInferPage) self = user_data;
  g_autoptr(GError) error = NULL;
  DcInferRing *ring = DC_INFER_RING (source);
  DcInferSession *session;

  if (!dc_infer_ring_prepare_finish (ring, result, &error))
    {
      if (ring != self->group_ring || self->ring_cancellable == NULL)
        return;
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        group_run_end (self, _("Stopped"));
      else
        group_fail (self, error->message);
      return;
    }
  if (ring != self->group_ring || self->ring_cancellable == NULL ||
      g_cancellable_is_cancelled (self->ring_cancellable))
    {
      if (ring == self->group_ring && self->ring_cancellable != NULL)
        group_run_end (self, _("Stopped"));
      return;
    }
  session = dc_infer_ring_get_session (ring);
  self->ring_run = g_object_ref (session);
  g_object_set_data (G_OBJECT (session), "dc-infer-page", self);
  g_signal_connect (session, "token", G_CALLBACK (group_token_cb), self->ring_ids);
  g_signal_connect (session, "finished", G_CALLBACK (group_finished_cb), self->ring_ids);
  /* Translators: the prompt runs through the devices of the group. */
  set_status (self, _("Generating across the group…"));
  dc_infer_session_submit (session, self->ring_prompt, &self->ring_settings);
}

/* Plans the ring for PROMPT (the plan shows in the Ring group as soon as it
 * is made, before anything downloads or runs), then generates through it. */
static gboolean
group_generate (DcInferPage           *self,
                const char            *prompt,
                const DcInferSettings *settings)
{
  if (self->group_ring == NULL || dc_group_get_n_peers (self->group) == 0 ||
      dc_infer_ring_get_n_offers (self->group_ring) == 0)
    {
      toast (self, _("No other device of the group offers to hold layers yet: open the app "
                     "or “daisychain-cli join --serve-layers” on another device, or run on "
                     "this device"));
      return FALSE;
    }
  if (self->ring_cancellable != NULL)
    {
      toast (self, _("The group is running a prompt: wait for it to finish, or stop it"));
      return FALSE;
    }
  self->ring_cancellable = g_cancellable_new ();
  self->ring_prompt = g_strdup (prompt);
  self->ring_settings = *settings;
  g_array_set_size (self->ring_ids, 0);
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->output_view), prompt, -1);
  gtk_label_set_label (self->rate_label, "—");
  dc_infer_page_set_ring_verify (self, NULL);
  /* Translators: the devices of the group are given their layers. */
  set_status (self, _("Planning the run across the group…"));
  dc_infer_page_set_ring (self, self->group_ring);
  dc_infer_ring_prepare_async (self->group_ring, settings->context, self->ring_cancellable,
                               group_prepared_cb, g_object_ref (self));
  return TRUE;
}

/**
 * dc_infer_page_set_group:
 * @group: (nullable): the application's group
 *
 * Lets the view run prompts across @group's devices (Run On).
 */
void
dc_infer_page_set_group (DcInferPage *self,
                         DcGroup     *group)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));
  g_return_if_fail (group == NULL || DC_IS_GROUP (group));

  if (self->group != NULL)
    g_signal_handlers_disconnect_by_data (self->group, self);
  if (self->ring_cancellable != NULL)
    group_run_end (self, NULL);
  if (self->group_ring != NULL)
    {
      if (self->ring == self->group_ring)
        dc_infer_page_set_ring (self, NULL);
      g_clear_object (&self->group_ring);
    }
  g_set_object (&self->group, group);
  if (group != NULL)
    g_signal_connect_object (group, "notify::n-peers", G_CALLBACK (update_actions), self,
                             G_CONNECT_SWAPPED);
  follow_group_ring (self);
}

/* Tests: the memory this device offers as a ring's head (0: half of what is
 * installed). Before the model is chosen. */
void
_dc_infer_page_set_ring_memory (DcInferPage *self,
                                guint64      bytes)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));
  self->ring_memory = bytes;
}

/**
 * dc_infer_page_get_group_ring:
 *
 * Returns: (transfer none) (nullable): the ring that runs the model of the
 *   view across the group
 */
DcInferRing *
dc_infer_page_get_group_ring (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);
  return self->group_ring;
}

/* ---- this device as another's stage ------------------------------------ */

static void
set_serving (DcInferPage *self,
             const char  *text)
{
  adw_action_row_set_subtitle (self->serving_row, text != NULL ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->serving_row), text != NULL);
  gtk_label_set_label (self->serving_label, text != NULL ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->serving_label), text != NULL);
}

static void
ring_server_event_cb (DcRingServer *server,
                      const char   *kind,
                      const char   *detail,
                      guint64       value,
                      DcInferPage  *self)
{
  g_autofree char *text = NULL;

  if (g_str_equal (kind, "assigned"))
    {
      /* Translators: another device runs a model across the group and asked
       * this one to hold some of its layers ("MODEL layers A-B"). */
      text = g_strdup_printf (_("A device of the group runs a model across it: this device "
                                "holds %s"), detail);
      toast (self, text);
      gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->output_view), "", -1);
    }
  else if (g_str_equal (kind, "loaded"))
    {
      g_autofree char *size = g_format_size (value);

      /* Translators: this device holds its layers of another device's run. */
      text = g_strdup_printf (_("Holding the layers of %s for the group (%s downloaded)"),
                              detail, size);
    }
  else if (g_str_equal (kind, "token"))
    {
      /* The answer streams on every device of the ring. */
      append_output (self, detail);
      return;
    }
  else if (g_str_equal (kind, "refused") || g_str_equal (kind, "failed"))
    {
      /* Translators: this device cannot hold its layers of another's run. */
      text = g_strdup_printf (_("Could not serve layers for the group: %s"), detail);
      toast (self, text);
    }
  else if (g_str_equal (kind, "released") || g_str_equal (kind, "closed"))
    text = NULL;   /* the run is over: nothing held */
  else
    return;
  set_serving (self, text);
}

/**
 * dc_infer_page_set_ring_server:
 * @server: (nullable): this device as a stage of the group's rings
 *
 * Shows what @server holds for other devices' runs, and their answers.
 */
void
dc_infer_page_set_ring_server (DcInferPage  *self,
                               DcRingServer *server)
{
  g_return_if_fail (DC_IS_INFER_PAGE (self));
  g_return_if_fail (server == NULL || DC_IS_RING_SERVER (server));

  if (self->ring_server != NULL)
    g_signal_handlers_disconnect_by_data (self->ring_server, self);
  g_set_object (&self->ring_server, server);
  set_serving (self, NULL);
  if (server != NULL)
    g_signal_connect_object (server, "event", G_CALLBACK (ring_server_event_cb), self, 0);
}

/* Returns: (transfer none): what the Serving row says ("" when nothing is held) */
const char *
dc_infer_page_get_serving (DcInferPage *self)
{
  g_return_val_if_fail (DC_IS_INFER_PAGE (self), NULL);
  return gtk_widget_get_visible (GTK_WIDGET (self->serving_row))
         ? adw_action_row_get_subtitle (self->serving_row) : "";
}

static void
dc_infer_page_dispose (GObject *object)
{
  DcInferPage *self = DC_INFER_PAGE (object);

  if (self->ring_session != NULL)
    g_signal_handlers_disconnect_by_data (self->ring_session, self);
  g_clear_object (&self->ring_session);
  if (self->ring != NULL)
    g_signal_handlers_disconnect_by_data (self->ring, self);
  g_clear_object (&self->ring);
  if (self->ring_cancellable != NULL)
    group_run_end (self, NULL);
  if (self->group != NULL)
    g_signal_handlers_disconnect_by_data (self->group, self);
  g_clear_object (&self->group);
  if (self->group_ring != NULL)
    dc_infer_ring_close (self->group_ring);
  g_clear_object (&self->group_ring);
  if (self->ring_server != NULL)
    g_signal_handlers_disconnect_by_data (self->ring_server, self);
  g_clear_object (&self->ring_server);

  drop_session (self);
  if (self->model_dialog != NULL)
    gtk_window_destroy (GTK_WINDOW (self->model_dialog));
  self->model_dialog = NULL;
  if (self->token_dialog != NULL)
    gtk_window_destroy (GTK_WINDOW (self->token_dialog));
  self->token_dialog = NULL;
  gtk_widget_dispose_template (GTK_WIDGET (object), DC_TYPE_INFER_PAGE);
  g_clear_object (&self->settings);
  g_clear_object (&self->own_client);
  g_clear_object (&self->context);

  G_OBJECT_CLASS (dc_infer_page_parent_class)->dispose (object);
}

static void
dc_infer_page_finalize (GObject *object)
{
  g_hash_table_unref (DC_INFER_PAGE (object)->prompts);
  g_ptr_array_unref (DC_INFER_PAGE (object)->ring_rows);
  g_ptr_array_unref (DC_INFER_PAGE (object)->ring_bars);
  g_array_unref (DC_INFER_PAGE (object)->ring_sizes);
  g_array_unref (DC_INFER_PAGE (object)->ring_ids);
  g_array_unref (DC_INFER_PAGE (object)->verify_ids);

  G_OBJECT_CLASS (dc_infer_page_parent_class)->finalize (object);
}

static void
dc_infer_page_class_init (DcInferPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dc_infer_page_dispose;
  object_class->finalize = dc_infer_page_finalize;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-infer-page.ui");
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, model_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, held_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, load_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, load_bar);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, tokens_spin);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, context_spin);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, temperature_spin);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, seed_spin);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, output_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, prompt_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, output_view);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, status_label);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, queue_label);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, rate_label);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, clear_queue_button);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, ring_group);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, ring_stats_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, ring_verify_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, run_on_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, serving_row);
  gtk_widget_class_bind_template_child (widget_class, DcInferPage, serving_label);
  gtk_widget_class_bind_template_callback (widget_class, prompt_activated_cb);

  gtk_widget_class_install_action (widget_class, "infer.choose-model", NULL,
                                   choose_model_action);
  gtk_widget_class_install_action (widget_class, "infer.generate", NULL, generate_action);
  gtk_widget_class_install_action (widget_class, "infer.stop", NULL, stop_action);
  gtk_widget_class_install_action (widget_class, "infer.clear-queue", NULL, clear_queue_action);
  gtk_widget_class_install_action (widget_class, "infer.forget-token", NULL,
                                   forget_token_action);

  /**
   * DcInferPage::toast:
   * @message: a short message for the window to show
   */
  signals[SIGNAL_TOAST] =
    g_signal_new ("toast", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dc_infer_page_init (DcInferPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));

  g_queue_init (&self->pending);
  self->prompts = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  self->ring_rows = g_ptr_array_new ();
  self->ring_bars = g_ptr_array_new ();
  self->ring_sizes = g_array_new (FALSE, TRUE, sizeof (guint64));
  self->ring_ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  self->verify_ids = g_array_new (FALSE, FALSE, sizeof (guint32));
  update_actions (self);
}
