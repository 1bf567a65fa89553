/* dc-train-page.c: the Train view.
 *
 * The run settings (saved in GSettings as they change), the dataset choice,
 * the live loss chart, the run statistics, the log, generation and the model
 * files. A DcTrainingRun trains off the main thread; the page follows its
 * state: each train.* action is enabled only when it can work. The actions
 * with a path parameter (save-checkpoint-to, load-checkpoint-from,
 * export-hf-to, export-kit-to) do the work; the plain ones ask for the path
 * first.
 *
 * Save, Load, Export and Generate run off the main thread too (the run's
 * _async calls, on a snapshot of the model), one at a time: a bar at the
 * top shows what runs, its progress (tensors or chunks written or read,
 * generated tokens)
 * and Cancel. Generated text streams in as it comes.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-token-dialog.h"
#include "dc-train-page.h"
#include "dc-train-page-private.h"
#include "mesh/dc-mesh.h"
#include "mesh/dc-peer.h"
#include "train/dc-train-group.h"
#include "train/dc-training-run.h"

/* The log keeps this many lines; older ones are dropped from the top. */
#define LOG_MAX_LINES 2000

struct _DcTrainPage
{
  AdwBin          parent_instance;

  /* template widgets */
  GtkSpinButton  *width_spin;
  GtkSpinButton  *seq_spin;
  GtkSpinButton  *batch_spin;
  GtkSpinButton  *steps_spin;
  GtkSpinButton  *lr_spin;
  GtkLabel       *size_hint;
  AdwExpanderRow *advanced_row;
  GtkSpinButton  *advanced_width_spin;
  GtkSpinButton  *advanced_layers_spin;
  GtkSpinButton  *advanced_heads_spin;
  GtkSpinButton  *advanced_seq_spin;
  GtkLabel       *memory_label;
  AdwComboRow    *dataset_row;
  AdwEntryRow    *dataset_id_row;
  DcLossChart    *chart;
  GtkToggleButton *log_scale_button;
  GtkTextView    *log_view;
  GtkLabel       *step_label;
  GtkLabel       *rate_label;
  GtkLabel       *eta_label;
  GtkLabel       *hash_label;
  GtkLabel       *group_label;
  GtkLabel       *devices_label;
  AdwEntryRow    *prompt_row;
  GtkSpinButton  *tokens_spin;
  GtkSpinButton  *temperature_spin;
  GtkSpinButton  *seed_spin;
  GtkLabel       *generated_label;
  GtkRevealer    *job_revealer;
  GtkProgressBar *job_progress;
  GtkMenuButton  *model_menu_button;
  AdwActionRow   *backend_row;

  /* owned references */
  GSettings      *settings;
  DcTrainingRun  *run;
  GtkNativeDialog *chooser;
  DcContext      *context;     /* nullable: its client holds the Hub token */
  GCancellable   *job_cancellable; /* the file or generation job in progress, or NULL */
  GByteArray     *generated;   /* the bytes of the generation in progress */
  GApplication   *held;        /* held while a file is written: closing waits for it */

  /* borrowed references */
  GtkWidget      *token_dialog; /* while it is shown */

  /* state */
  char           *agreed_hash; /* the last hash every device of the group reported */
  DcTrainingState last_state;  /* to see a run begin, whoever started it */
  gint64          started_at;  /* monotonic µs at the run's first step report */
  guint64         first_step;  /* the step reported first, for the rate of the ETA */
  guint           job_tokens;  /* the tokens asked of the generation in progress */
  guint64         available_override; /* tests: the memory this device has, 0: ask */
  guint           advanced_refused : 1; /* the Advanced size chosen cannot start */
};

enum {
  SIGNAL_TOAST,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (DcTrainPage, dc_train_page, ADW_TYPE_BIN)


/* The dataset combo's items, in order. */
enum {
  DATASET_BUILTIN,
  DATASET_FINEWEB_EDU,
  DATASET_OTHER,
};

#define FINEWEB_EDU_ID "HuggingFaceFW/fineweb-edu"

static void
update_size_hint (DcTrainPage *self)
{
  /* The seeds' advice: big settings need more devices. */
  gtk_widget_set_visible (GTK_WIDGET (self->size_hint),
                          gtk_spin_button_get_value_as_int (self->width_spin) > 64 ||
                          gtk_spin_button_get_value_as_int (self->seq_spin) > 64);
}

static void update_actions (DcTrainPage *self);

/* In a group (host or member of a room), the run is the group's: an
 * Advanced size is offered when every device can hold it. */
static gboolean
in_group (DcTrainPage *self)
{
  DcGroup *group = self->context != NULL ? dc_context_get_group (self->context) : NULL;
  DcGroupState state;

  if (group == NULL)
    return FALSE;
  state = dc_group_get_state (group);
  return state == DC_GROUP_STATE_HOST || state == DC_GROUP_STATE_MEMBER;
}

static gboolean
advanced_enabled (DcTrainPage *self)
{
  return adw_expander_row_get_enable_expansion (self->advanced_row);
}

/* What Start asks for: the seeds' sizes, or the Advanced ones when chosen. */
static void
fill_request (DcTrainPage       *self,
              DcTrainingRequest *request)
{
  if (advanced_enabled (self))
    {
      request->advanced = TRUE;
      request->width = gtk_spin_button_get_value_as_int (self->advanced_width_spin);
      request->seq = gtk_spin_button_get_value_as_int (self->advanced_seq_spin);
      request->n_layer = gtk_spin_button_get_value_as_int (self->advanced_layers_spin);
      request->n_head = gtk_spin_button_get_value_as_int (self->advanced_heads_spin);
    }
  else
    {
      request->width = gtk_spin_button_get_value_as_int (self->width_spin);
      request->seq = gtk_spin_button_get_value_as_int (self->seq_spin);
    }
  request->batch = gtk_spin_button_get_value_as_int (self->batch_spin);
  request->steps = gtk_spin_button_get_value_as_int (self->steps_spin);
  request->lr_x1000 = gtk_spin_button_get_value_as_int (self->lr_spin);
}

/* The plan of the Advanced size chosen, made as the CLI's `train --dry-run`
 * makes it (the same memory figure), with the test override of the memory
 * available applied. */
static DcTrainPlan *
advanced_plan (DcTrainPage  *self,
               GError      **error)
{
  DcTrainingRequest request = { 0 };
  DcTrainPlan *plan;

  fill_request (self, &request);
  request.data = (char *) "builtin";
  plan = dc_train_plan_new (&request, NULL, NULL, error);
  if (plan != NULL && self->available_override > 0)
    plan->available = self->available_override;
  return plan;
}

/* In a group: the text about the memory each device needs for @plan's
 * size and the smallest memory of the group (this device's, and what each
 * connected peer announced in its hello); *@refused when a device cannot
 * hold it or did not announce its memory, as the starter would refuse. */
static char *
group_memory_text (DcTrainPage       *self,
                   const DcTrainPlan *plan,
                   gboolean          *refused)
{
  DcGroup *group = dc_context_get_group (self->context);
  DcMesh *mesh = dc_group_get_mesh (group);
  g_autoptr(GPtrArray) peers = mesh != NULL ? dc_mesh_dup_peers (mesh) : NULL;
  guint64 need = dc_train_group_memory_need (&plan->config, plan->settings.batch);
  guint64 smallest = self->available_override > 0 ? self->available_override
                                                  : dc_train_group_announced_memory ();
  g_autofree char *need_text = g_format_size (need);
  g_autofree char *smallest_text = NULL;
  /* Translators: the device itself, as the one with the least memory. */
  const char *who = _("this device");

  for (guint i = 0; peers != NULL && i < peers->len; i++)
    {
      DcPeer *peer = g_ptr_array_index (peers, i);
      DcMeshHello *hello = dc_peer_get_hello (peer);

      if (dc_peer_get_state (peer) != DC_PEER_STATE_OPEN || hello == NULL)
        continue;
      if (hello->memory == 0)
        {
          *refused = TRUE;
          /* Translators: a peer's name; its build is older than this one. */
          return g_strdup_printf (_("Not offered in this group: “%s” did not announce its "
                                    "memory (an older version); the group trains the seeds’ "
                                    "sizes"), dc_peer_get_name (peer));
        }
      if (hello->memory < smallest)
        {
          smallest = hello->memory;
          who = dc_peer_get_name (peer);
        }
    }
  smallest_text = g_format_size (smallest);
  if (smallest > 0 && smallest < need)
    {
      *refused = TRUE;
      /* Translators: the memory each device needs, the smallest memory of the
       * group, the device that has it. */
      return g_strdup_printf (_("Needs %s of memory on each device of the group; the smallest "
                                "is %s (%s): not offered, choose a smaller size"), need_text,
                              smallest_text, who);
    }
  if (smallest == 0)
    /* Translators: the memory each device of a group needs. */
    return g_strdup_printf (_("Needs %s of memory on each device of the group; this device’s "
                              "available memory is unknown"), need_text);
  /* Translators: the memory each device needs, the smallest memory of the
   * group, the device that has it. */
  return g_strdup_printf (_("Needs %s of memory on each device of the group; the smallest is "
                            "%s (%s)"), need_text, smallest_text, who);
}

/* The memory the chosen Advanced size needs, before Start; Start is refused
 * when the size is invalid or does not fit. */
static void
update_advanced (DcTrainPage *self)
{
  gboolean grouped = in_group (self);
  gboolean advanced = advanced_enabled (self);
  gboolean refused = FALSE;

  adw_expander_row_set_subtitle (self->advanced_row,
                                 grouped
                                 ? _("Larger models, up to the GPT-2-small shape, offered when "
                                     "every device of the group can hold them")
                                 : _("Larger models on this device alone, up to the GPT-2-small "
                                     "shape; they replace the width and sequence above"));
  /* The seeds' rows do not count while the Advanced sizes do. */
  gtk_widget_set_sensitive (GTK_WIDGET (self->width_spin), !advanced);
  gtk_widget_set_sensitive (GTK_WIDGET (self->seq_spin), !advanced);

  if (advanced)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(DcTrainPlan) plan = advanced_plan (self, &error);
      g_autofree char *text = NULL;

      if (plan == NULL)
        {
          /* Translators: why the Advanced size chosen cannot be trained. */
          text = g_strdup_printf (_("This size cannot be trained: %s"), error->message);
          refused = TRUE;
        }
      else if (grouped)
        text = group_memory_text (self, plan, &refused);
      else
        {
          g_autofree char *need = g_format_size (plan->memory.total_bytes);
          g_autofree char *have = g_format_size (plan->available);

          if (plan->available == 0)
            /* Translators: the memory a training run of this size needs. */
            text = g_strdup_printf (_("Needs %s of memory; this device’s available memory is "
                                      "unknown"), need);
          else if (!dc_train_plan_check_memory (plan, NULL))
            {
              /* Translators: the memory the run needs, then the memory available. */
              text = g_strdup_printf (_("Needs %s of memory, this device has %s available: "
                                        "too large to start here, choose a smaller size"),
                                      need, have);
              refused = TRUE;
            }
          else
            /* Translators: the memory the run needs, then the memory available. */
            text = g_strdup_printf (_("Needs %s of memory, this device has %s available"),
                                    need, have);
        }
      if (plan != NULL && self->context != NULL
          && dc_context_get_backend_kind (self->context) == DC_BACKEND_VULKAN)
        {
          /* The resident step's own buffers on the GPU this device trains
           * on (issue 15), beside the host memory above. */
          g_autofree char *device = g_format_size (plan->resident_device_bytes);
          g_autofree char *both = NULL;

          /* Translators: the memory text above, the GPU's name, then the
           * GPU memory the run keeps resident there. */
          both = g_strdup_printf (_("%s; on the GPU (%s): %s of device memory"), text,
                                  dc_context_get_device_name (self->context), device);
          g_free (text);
          text = g_steal_pointer (&both);
          if (plan->settings.batch > plan->resident_max_batch)
            {
              /* Translators: appended to the memory text; the batch chosen,
               * then the largest batch whose passes fit the GPU's buffer. */
              both = plan->resident_max_batch == 0
                     ? g_strdup_printf (_("%s; the forward and backward passes stay on the "
                                          "CPU at this size (over 4 GiB of buffers)"), text)
                     : g_strdup_printf (_("%s; at batch %u the forward and backward passes "
                                          "stay on the CPU (over 4 GiB of buffers): batch %u "
                                          "or less trains them on the GPU"), text,
                                        plan->settings.batch, plan->resident_max_batch);
              g_free (text);
              text = g_steal_pointer (&both);
            }
        }
      gtk_label_set_label (self->memory_label, text);
    }
  gtk_widget_set_visible (GTK_WIDGET (self->memory_label), advanced);
  if (refused)
    gtk_widget_add_css_class (GTK_WIDGET (self->memory_label), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->memory_label), "error");
  if (self->advanced_refused != refused)
    {
      self->advanced_refused = refused;
      update_actions (self);
    }
}

/* The expander row's own switch shows no text: name it for assistive
 * technologies (libadwaita 1.2 leaves it unnamed). */
static void
name_advanced_switch (DcTrainPage *self)
{
  GtkWidget *widget = GTK_WIDGET (self->advanced_row);

  /* Depth-first: the switch sits in the row's header. */
  while (widget != NULL && !GTK_IS_SWITCH (widget))
    {
      GtkWidget *next = gtk_widget_get_first_child (widget);

      while (next == NULL && widget != GTK_WIDGET (self->advanced_row))
        {
          next = gtk_widget_get_next_sibling (widget);
          if (next == NULL)
            widget = gtk_widget_get_parent (widget);
        }
      widget = next;
    }
  if (widget != NULL)
    gtk_accessible_update_property (GTK_ACCESSIBLE (widget), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                    _("Use the Advanced sizes"), -1);
}

static void
size_changed_cb (DcTrainPage *self)
{
  update_size_hint (self);
}

static void
advanced_changed_cb (DcTrainPage *self)
{
  update_advanced (self);
}

/* The "train-dataset" setting holds "builtin", or a Hub dataset id. */
static void
save_dataset (DcTrainPage *self)
{
  const char *value;

  if (self->settings == NULL)
    return;

  switch (adw_combo_row_get_selected (self->dataset_row))
    {
    case DATASET_FINEWEB_EDU:
      value = FINEWEB_EDU_ID;
      break;

    case DATASET_OTHER:
      value = gtk_editable_get_text (GTK_EDITABLE (self->dataset_id_row));
      if (value[0] == '\0')
        return;  /* nothing typed yet: keep the last choice */
      break;

    case DATASET_BUILTIN:
    default:
      value = "builtin";
      break;
    }
  g_settings_set_string (self->settings, "train-dataset", value);
}

static void
dataset_selected_cb (DcTrainPage *self)
{
  gtk_widget_set_visible (GTK_WIDGET (self->dataset_id_row),
                          adw_combo_row_get_selected (self->dataset_row) == DATASET_OTHER);
  save_dataset (self);
}

static void
dataset_id_changed_cb (DcTrainPage *self)
{
  save_dataset (self);
}

static void
load_dataset (DcTrainPage *self)
{
  g_autofree char *dataset = g_settings_get_string (self->settings, "train-dataset");

  if (g_str_equal (dataset, "builtin"))
    {
      adw_combo_row_set_selected (self->dataset_row, DATASET_BUILTIN);
    }
  else if (g_str_equal (dataset, FINEWEB_EDU_ID))
    {
      adw_combo_row_set_selected (self->dataset_row, DATASET_FINEWEB_EDU);
    }
  else
    {
      gtk_editable_set_text (GTK_EDITABLE (self->dataset_id_row), dataset);
      adw_combo_row_set_selected (self->dataset_row, DATASET_OTHER);
    }
}

/**
 * dc_train_page_set_settings:
 *
 * Binds the run settings to @settings: they start from the last values and
 * are saved as they change.
 */
void
dc_train_page_set_settings (DcTrainPage *self,
                            GSettings   *settings)
{
  g_return_if_fail (DC_IS_TRAIN_PAGE (self));
  g_return_if_fail (G_IS_SETTINGS (settings));
  g_return_if_fail (self->settings == NULL);

  self->settings = g_object_ref (settings);
  g_settings_bind (settings, "train-width", self->width_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "train-seq-len", self->seq_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "train-batch", self->batch_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "train-steps", self->steps_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "train-lr-x1000", self->lr_spin, "value", G_SETTINGS_BIND_DEFAULT);
  load_dataset (self);
  update_size_hint (self);
}

/**
 * dc_train_page_get_chart:
 *
 * Returns: (transfer none): the loss chart
 */
DcLossChart *
dc_train_page_get_chart (DcTrainPage *self)
{
  g_return_val_if_fail (DC_IS_TRAIN_PAGE (self), NULL);

  return self->chart;
}

/**
 * dc_train_page_append_log:
 * @line: one message, without a trailing newline
 *
 * Adds a line to the log and scrolls to it. The log keeps the last
 * LOG_MAX_LINES lines.
 */
void
dc_train_page_append_log (DcTrainPage *self,
                          const char  *line)
{
  GtkTextBuffer *buffer;
  GtkTextIter end;

  g_return_if_fail (DC_IS_TRAIN_PAGE (self));

  buffer = gtk_text_view_get_buffer (self->log_view);
  gtk_text_buffer_get_end_iter (buffer, &end);
  if (gtk_text_buffer_get_char_count (buffer) > 0)
    gtk_text_buffer_insert (buffer, &end, "\n", 1);
  gtk_text_buffer_insert (buffer, &end, line, -1);

  if (gtk_text_buffer_get_line_count (buffer) > LOG_MAX_LINES)
    {
      GtkTextIter start, cut;

      gtk_text_buffer_get_start_iter (buffer, &start);
      gtk_text_buffer_get_iter_at_line (buffer, &cut,
                                        gtk_text_buffer_get_line_count (buffer) - LOG_MAX_LINES);
      gtk_text_buffer_delete (buffer, &start, &cut);
    }

  gtk_text_buffer_get_end_iter (buffer, &end);
  gtk_text_view_scroll_to_iter (self->log_view, &end, 0.0, FALSE, 0.0, 1.0);
}

static void
toast (DcTrainPage *self,
       const char  *message)
{
  g_signal_emit (self, signals[SIGNAL_TOAST], 0, message);
}

static void
report_error (DcTrainPage  *self,
              const char   *what,
              const GError *error)
{
  g_autofree char *line = g_strdup_printf ("%s: %s", what, error->message);

  dc_train_page_append_log (self, line);
  toast (self, line);
}

static void
update_actions (DcTrainPage *self)
{
  DcTrainingState state = dc_training_run_get_state (self->run);
  gboolean busy = state == DC_TRAINING_STATE_RUNNING || state == DC_TRAINING_STATE_STOPPING;
  /* One file or generation job at a time. */
  gboolean working = self->job_cancellable != NULL;
  gboolean has_model = !busy && !working && dc_training_run_get_hash (self->run) != NULL;
  GtkWidget *widget = GTK_WIDGET (self);

  /* An Advanced size that cannot be trained here is refused before Start. */
  gtk_widget_action_set_enabled (widget, "train.start", !busy && !self->advanced_refused);
  gtk_widget_action_set_enabled (widget, "train.stop", state == DC_TRAINING_STATE_RUNNING);
  gtk_widget_action_set_enabled (widget, "train.generate", has_model);
  gtk_widget_action_set_enabled (widget, "train.save-checkpoint", has_model);
  gtk_widget_action_set_enabled (widget, "train.save-checkpoint-to", has_model);
  /* During a group run a loaded checkpoint goes to the whole group. */
  gtk_widget_action_set_enabled (widget, "train.load-checkpoint",
                                 !working && dc_training_run_can_load (self->run));
  gtk_widget_action_set_enabled (widget, "train.load-checkpoint-from",
                                 !working && dc_training_run_can_load (self->run));
  gtk_widget_action_set_enabled (widget, "train.export-hf", has_model);
  gtk_widget_action_set_enabled (widget, "train.export-hf-to", has_model);
  gtk_widget_action_set_enabled (widget, "train.export-kit", has_model);
  gtk_widget_action_set_enabled (widget, "train.export-kit-to", has_model);
  gtk_widget_action_set_enabled (widget, "train.cancel", working);
}

/* Save, Load and Export report their fraction (per tensor, or per chunk
 * of the kit's weights); Generate counts tokens. */
static void
run_job_fraction_cb (DcTrainPage *self)
{
  if (self->job_cancellable == NULL || self->job_tokens > 0)
    return;
  gtk_progress_bar_set_fraction (self->job_progress,
                                 dc_training_run_get_job_fraction (self->run));
}

/* A job begins: the bar says what runs.
 * Returns: (transfer none): the job's cancellable */
static GCancellable *
begin_job (DcTrainPage *self,
           const char  *what)
{
  g_assert (self->job_cancellable == NULL);

  self->job_cancellable = g_cancellable_new ();
  gtk_progress_bar_set_text (self->job_progress, what);
  gtk_progress_bar_set_fraction (self->job_progress, 0.0);
  gtk_revealer_set_reveal_child (self->job_revealer, TRUE);
  update_actions (self);
  return self->job_cancellable;
}

/* A job that writes a file finishes even when the window closes (dispose
 * does not cancel it): the application is held until it has. */
static void
hold_application (DcTrainPage *self)
{
  GApplication *app = g_application_get_default ();

  if (app == NULL || self->held != NULL)
    return;
  self->held = g_object_ref (app);
  g_application_hold (app);
}

static void
release_application (DcTrainPage *self)
{
  if (self->held == NULL)
    return;
  g_application_release (self->held);
  g_clear_object (&self->held);
}

static void
end_job (DcTrainPage *self)
{
  g_clear_object (&self->job_cancellable);
  self->job_tokens = 0;
  gtk_revealer_set_reveal_child (self->job_revealer, FALSE);
  update_actions (self);
}

/* Whether a finished job's callback still has a page to report to: a page
 * disposed meanwhile cancelled the job and is gone from the window. */
static gboolean
job_is_current (GObject *page)
{
  return DC_IS_TRAIN_PAGE (page) && DC_TRAIN_PAGE (page)->job_cancellable != NULL;
}

static void
show_hash (DcTrainPage *self)
{
  const char *hash = dc_training_run_get_hash (self->run);
  g_autofree char *marked = NULL;

  /* ✓: the sync guard compared every device's hash of this step. */
  if (hash != NULL && g_strcmp0 (hash, self->agreed_hash) == 0)
    {
      marked = g_strdup_printf ("✓ %s", hash);
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->hash_label),
                                   _("Every device of the group has this weight hash"));
    }
  else
    gtk_widget_set_tooltip_text (GTK_WIDGET (self->hash_label), NULL);
  gtk_label_set_label (self->hash_label, marked != NULL ? marked : hash != NULL ? hash : "—");
}

static void
show_step (DcTrainPage *self)
{
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT " / %u",
                                           dc_training_run_get_step (self->run),
                                           dc_training_run_get_steps (self->run));

  gtk_label_set_label (self->step_label, text);
}

/* A new run's view: no points, no rate, the group not known yet. */
static void
reset_view (DcTrainPage *self)
{
  dc_loss_chart_clear (self->chart);
  gtk_label_set_label (self->rate_label, "—");
  gtk_label_set_label (self->eta_label, "—");
  gtk_label_set_label (self->group_label, _("This device alone"));
  gtk_label_set_label (self->devices_label, "");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->hash_label), NULL);
  g_clear_pointer (&self->agreed_hash, g_free);
  self->started_at = 0;
}

/* A run another device started shows its settings here (the starter's own
 * are the same); they are the device's settings from now on. */
static void
run_steps_cb (DcTrainPage *self)
{
  const DcTrainPlan *plan = dc_training_run_get_plan (self->run);

  if (plan == NULL || dc_training_run_get_state (self->run) != DC_TRAINING_STATE_RUNNING)
    return;
  gtk_spin_button_set_value (self->width_spin, plan->config.width);
  gtk_spin_button_set_value (self->seq_spin, plan->config.seq);
  gtk_spin_button_set_value (self->batch_spin, plan->settings.batch);
  gtk_spin_button_set_value (self->steps_spin, plan->settings.steps);
  gtk_spin_button_set_value (self->lr_spin, plan->settings.lr_x1000);
  show_step (self);
}

static void
token_response_cb (AdwMessageDialog *dialog,
                   const char       *response,
                   DcTrainPage      *self)
{
  self->token_dialog = NULL;
  /* The token dialog has set the token: start again with it. */
  if (g_str_equal (response, "use"))
    gtk_widget_activate_action (GTK_WIDGET (self), "train.start", NULL);
}

/* A dataset refused with 401/403: the same token dialog as the Infer view's,
 * setting the token of the context's client, which the next run reads with. */
static gboolean
ask_token (DcTrainPage  *self,
           const GError *error)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  g_autofree char *dataset = NULL;
  DcTokenDialog *dialog;

  if (self->context == NULL || !dc_token_dialog_wants (error))
    return FALSE;
  if (self->token_dialog != NULL)
    return TRUE;
  dataset = self->settings != NULL ? g_settings_get_string (self->settings, "train-dataset")
                                   : g_strdup ("");
  dialog = dc_token_dialog_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                dc_context_get_hf_client (self->context), dataset, error);
  self->token_dialog = GTK_WIDGET (dialog);
  g_signal_connect_object (dialog, "response", G_CALLBACK (token_response_cb), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
  return TRUE;
}

static void
run_state_cb (DcTrainPage *self)
{
  DcTrainingState state = dc_training_run_get_state (self->run);
  gboolean began = state == DC_TRAINING_STATE_RUNNING
                   && self->last_state != DC_TRAINING_STATE_RUNNING
                   && self->last_state != DC_TRAINING_STATE_STOPPING;

  self->last_state = state;
  if (began)
    reset_view (self);
  update_actions (self);
  if (state == DC_TRAINING_STATE_FAILED
      && ask_token (self, dc_training_run_get_error (self->run)))
    {
      /* The dialog says what happened; the log has the message. */
    }
  else if (state == DC_TRAINING_STATE_FAILED && dc_training_run_get_message (self->run) != NULL)
    {
      g_autofree char *text = g_strdup_printf (_("Training failed: %s"),
                                               dc_training_run_get_message (self->run));

      toast (self, text);
    }
  if (state == DC_TRAINING_STATE_READY || state == DC_TRAINING_STATE_FAILED)
    {
      gtk_label_set_label (self->eta_label, "—");
      show_step (self);
      show_hash (self);
    }
}

static void
run_step_cb (DcTrainingRun *run,
             guint64        step,
             double         loss,
             double         tokens_per_s,
             const char    *hash,
             DcTrainPage   *self)
{
  guint steps = dc_training_run_get_steps (run);
  gint64 now = g_get_monotonic_time ();
  char text[64];

  guint n_devices = dc_training_run_get_n_devices (run);
  const DcTrainPlan *plan = dc_training_run_get_plan (run);

  dc_loss_chart_append (self->chart, step, loss);
  show_step (self);
  g_snprintf (text, sizeof text, "%.0f", tokens_per_s);
  gtk_label_set_label (self->rate_label, text);
  /* Unmarked until every device's report of this step agrees (run_agreed_cb). */
  gtk_label_set_label (self->hash_label, hash);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->hash_label), NULL);
  if (n_devices > 1 && plan != NULL)
    {
      g_autofree char *group =
        g_strdup_printf (ngettext ("%u device · effective batch %u",
                                   "%u devices · effective batch %u", n_devices),
                         n_devices, n_devices * plan->settings.batch);

      gtk_label_set_label (self->group_label, group);
    }

  /* The time left from the average pace since the first report. */
  if (self->started_at == 0)
    {
      self->started_at = now;
      self->first_step = step;
      gtk_label_set_label (self->eta_label, "—");
    }
  else if (step > self->first_step)
    {
      double per_step = (now - self->started_at) / 1e6 / (double) (step - self->first_step);
      guint left = (guint) (per_step * (steps > step ? steps - step : 0) + 0.5);

      if (left >= 3600)
        g_snprintf (text, sizeof text, "%u:%02u:%02u", left / 3600, left / 60 % 60, left % 60);
      else
        g_snprintf (text, sizeof text, "%u:%02u", left / 60, left % 60);
      gtk_label_set_label (self->eta_label, text);
    }
}

/* Bytes of the generation in progress: shown as they come (a character
 * split between two deliveries shows whole with the second). */
static void
run_generated_cb (DcTrainPage *self,
                  GBytes      *bytes)
{
  g_autofree char *text = NULL;
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);

  if (self->generated == NULL)
    return;  /* not ours: the generation was cancelled or has ended */
  g_byte_array_append (self->generated, data, len);
  text = g_utf8_make_valid ((const char *) self->generated->data, self->generated->len);
  gtk_label_set_label (self->generated_label, text);
  if (self->job_tokens > 0)
    gtk_progress_bar_set_fraction (self->job_progress,
                                   MIN (1.0, self->generated->len / (double) self->job_tokens));
}

/* Every device reported the same hash for @step: mark it, and show each
 * device's own work on the step with the slowest (whom the others wait for). */
static void
run_agreed_cb (DcTrainingRun *run,
               guint64        step,
               const char    *hash,
               GVariant      *devices,
               DcTrainPage   *self)
{
  g_autoptr(GString) text = g_string_new (NULL);
  gsize n = g_variant_n_children (devices);
  gsize slowest = 0;
  double most = -1.0;

  if (step != dc_training_run_get_step (run))
    return;
  for (gsize i = 0; i < n; i++)
    {
      double seconds;

      g_variant_get_child (devices, i, "(&sd)", NULL, &seconds);
      if (seconds > most)
        {
          most = seconds;
          slowest = i;
        }
    }
  for (gsize i = 0; i < n; i++)
    {
      const char *name;
      double seconds;

      g_variant_get_child (devices, i, "(&sd)", &name, &seconds);
      if (text->len > 0)
        g_string_append (text, " · ");
      if (i == slowest && n > 1)
        g_string_append_printf (text, _("%s %.3f s (slowest)"), name, seconds);
      else
        g_string_append_printf (text, _("%s %.3f s"), name, seconds);
    }
  gtk_label_set_label (self->devices_label, text->str);
  g_free (self->agreed_hash);
  self->agreed_hash = g_strdup (hash);
  show_hash (self);
}

static void
run_log_cb (DcTrainingRun *run,
            const char    *line,
            DcTrainPage   *self)
{
  dc_train_page_append_log (self, line);
}

static void
set_run (DcTrainPage   *self,
         DcTrainingRun *run)
{
  if (self->run != NULL)
    g_signal_handlers_disconnect_by_data (self->run, self);
  g_clear_object (&self->run);
  self->run = run;
  g_signal_connect_object (self->run, "step", G_CALLBACK (run_step_cb), self, 0);
  g_signal_connect_object (self->run, "log", G_CALLBACK (run_log_cb), self, 0);
  g_signal_connect_object (self->run, "agreed", G_CALLBACK (run_agreed_cb), self, 0);
  g_signal_connect_object (self->run, "generated", G_CALLBACK (run_generated_cb), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->run, "notify::steps", G_CALLBACK (run_steps_cb), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->run, "notify::state", G_CALLBACK (run_state_cb), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->run, "notify::job-fraction", G_CALLBACK (run_job_fraction_cb),
                           self, G_CONNECT_SWAPPED);
  update_actions (self);
}

/* What computes this device's share of a run: the context's backend
 * (training uses it through src/train/), and why not a GPU when the
 * context says so. */
static void
show_backend (DcTrainPage *self)
{
  g_autofree char *where = NULL;
  g_autofree char *name = NULL;
  const char *note = NULL;

  if (self->context == NULL)
    {
      where = g_strdup (_("CPU"));
    }
  else
    {
      const char *device = dc_context_get_device_name (self->context);
      const char *kernel = dc_context_get_kernel_name (self->context);

      note = dc_context_get_backend_note (self->context);
      if (dc_context_get_backend_kind (self->context) == DC_BACKEND_VULKAN)
        /* Translators: the Vulkan device, then the GEMM kernel's name. */
        where = g_strdup_printf (_("Vulkan GPU: %s, kernel %s"), device, kernel);
      else
        /* Translators: the processor, then the GEMM kernel's name. */
        where = g_strdup_printf (_("CPU: %s, kernel %s"), device, kernel);
    }
  if (note != NULL)
    {
      /* Translators: the backend in use, then why it is not a GPU. */
      g_autofree char *both = g_strdup_printf (_("%s. Not on a GPU: %s"), where, note);

      g_free (where);
      where = g_steal_pointer (&both);
    }
  adw_action_row_set_subtitle (self->backend_row, where);
  /* Translators: the accessible name of the Train view's backend row. */
  name = g_strdup_printf (_("Computes on: %s"), where);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->backend_row),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
}

/**
 * dc_train_page_set_context:
 * @context: (nullable): the application's context, whose backend the runs use
 *
 * Call once, before anything is trained (the window does, at construction).
 */
void
dc_train_page_set_context (DcTrainPage *self,
                           DcContext   *context)
{
  g_return_if_fail (DC_IS_TRAIN_PAGE (self));
  g_return_if_fail (context == NULL || DC_IS_CONTEXT (context));
  g_return_if_fail (dc_training_run_get_state (self->run) == DC_TRAINING_STATE_IDLE);

  g_set_object (&self->context, context);
  set_run (self, dc_training_run_new_for_context (context));
  show_backend (self);
  if (context != NULL && dc_context_get_group (context) != NULL)
    {
      g_signal_connect_object (dc_context_get_group (context), "notify::state",
                               G_CALLBACK (advanced_changed_cb), self, G_CONNECT_SWAPPED);
      /* A device that comes or goes changes the group's smallest memory. */
      g_signal_connect_object (dc_context_get_group (context), "event",
                               G_CALLBACK (advanced_changed_cb), self, G_CONNECT_SWAPPED);
    }
  update_advanced (self);
}

/**
 * _dc_train_page_set_available_memory:
 * @bytes: the memory this device is taken to have available, 0 to ask the
 *   system again
 *
 * For tests: a size that cannot fit, without a machine that small.
 */
void
_dc_train_page_set_available_memory (DcTrainPage *self,
                                     guint64      bytes)
{
  g_return_if_fail (DC_IS_TRAIN_PAGE (self));

  self->available_override = bytes;
  update_advanced (self);
}

static void
start_action (GtkWidget  *widget,
              const char *action_name,
              GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  g_autoptr(GError) error = NULL;
  g_autofree char *data = NULL;
  DcTrainingRequest request = { 0 };

  data = self->settings != NULL ? g_settings_get_string (self->settings, "train-dataset")
                                : g_strdup ("builtin");
  fill_request (self, &request);
  /* Alone: a fixed seed, so that a run can be repeated. With a group, the
   * coordinator draws a fresh run seed and sends it with the config. */
  request.seed = 1;
  request.data = data;
  /* A group's gradient wire (Preferences): the starter's CONFIG carries it. */
  if (self->settings != NULL)
    {
      g_autofree char *wire = g_settings_get_string (self->settings, "group-gradient-wire");

      if (!dc_train_wire_from_string (wire, &request.gradient_wire))
        request.gradient_wire = DC_TRAIN_WIRE_F32;
    }

  /* The memory check of the CLI's `train --advanced` (the view shows it
   * before Start and disables Start; a shortcut may still get here). */
  if (request.advanced)
    {
      g_autoptr(DcTrainPlan) plan = advanced_plan (self, &error);

      if (plan == NULL || !dc_train_plan_check_memory (plan, &error))
        {
          report_error (self, _("Could not start training"), error);
          return;
        }
    }

  reset_view (self);

  if (!dc_training_run_start (self->run, &request, &error))
    {
      report_error (self, _("Could not start training"), error);
      return;
    }
  show_step (self);
}

static void
stop_action (GtkWidget  *widget,
             const char *action_name,
             GVariant   *parameter)
{
  dc_training_run_stop (DC_TRAIN_PAGE (widget)->run);
}

static void
generate_cb (GObject      *object,
             GAsyncResult *result,
             gpointer      user_data)
{
  g_autoptr(DcTrainPage) self = user_data;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = dc_training_run_generate_finish (DC_TRAINING_RUN (object), result,
                                                           &error);

  if (!job_is_current (G_OBJECT (self)))
    return;
  g_clear_pointer (&self->generated, g_byte_array_unref);
  end_job (self);
  if (text != NULL)
    gtk_label_set_label (self->generated_label, text);
  else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    toast (self, _("Generation stopped"));
  else
    report_error (self, _("Could not generate"), error);
}

static void
generate_action (GtkWidget  *widget,
                 const char *action_name,
                 GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  GCancellable *cancellable;

  if (self->job_cancellable != NULL)
    return;
  self->job_tokens = gtk_spin_button_get_value_as_int (self->tokens_spin);
  gtk_label_set_label (self->generated_label, "");
  self->generated = g_byte_array_new ();
  cancellable = begin_job (self, _("Generating…"));
  dc_training_run_generate_async (self->run,
                                  gtk_editable_get_text (GTK_EDITABLE (self->prompt_row)),
                                  self->job_tokens,
                                  gtk_spin_button_get_value_as_int (self->temperature_spin)
                                    / 100.0f,
                                  gtk_spin_button_get_value_as_int (self->seed_spin),
                                  cancellable, generate_cb, g_object_ref (self));
}

static void
cancel_action (GtkWidget  *widget,
               const char *action_name,
               GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);

  if (self->job_cancellable != NULL)
    g_cancellable_cancel (self->job_cancellable);
}

/* The end of a Save, Export or Kit job: @done on success, "@failed: why"
 * otherwise. */
static void
finish_file_job (DcTrainPage  *self,
                 gboolean      ok,
                 const GError *error,
                 const char   *done,
                 const char   *failed)
{
  end_job (self);
  if (ok)
    toast (self, done);
  else if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    toast (self, _("Cancelled"));
  else
    report_error (self, failed, error);
}

static void
save_checkpoint_cb (GObject      *object,
                    GAsyncResult *result,
                    gpointer      user_data)
{
  g_autoptr(DcTrainPage) self = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = dc_training_run_save_checkpoint_finish (DC_TRAINING_RUN (object), result,
                                                        &error);

  release_application (self);
  if (job_is_current (G_OBJECT (self)))
    finish_file_job (self, ok, error, _("Checkpoint saved"),
                     _("Could not save the checkpoint"));
}

static void
save_checkpoint_to_action (GtkWidget  *widget,
                           const char *action_name,
                           GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  GCancellable *cancellable;

  if (self->job_cancellable != NULL)
    return;
  cancellable = begin_job (self, _("Saving the checkpoint…"));
  hold_application (self);
  dc_training_run_save_checkpoint_async (self->run, g_variant_get_string (parameter, NULL),
                                         cancellable, save_checkpoint_cb, g_object_ref (self));
}

static void
load_checkpoint_cb (GObject      *object,
                    GAsyncResult *result,
                    gpointer      user_data)
{
  g_autoptr(DcTrainPage) self = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = dc_training_run_load_checkpoint_finish (DC_TRAINING_RUN (object), result,
                                                        &error);

  if (!job_is_current (G_OBJECT (self)))
    return;
  end_job (self);
  if (!ok)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        toast (self, _("Cancelled"));
      else
        report_error (self, _("Could not load the checkpoint"), error);
      return;
    }
  if (dc_training_run_get_state (self->run) == DC_TRAINING_STATE_RUNNING)
    {
      /* A group run: every device switches to it after a step. */
      toast (self, _("Checkpoint sent to the group"));
      return;
    }
  dc_loss_chart_clear (self->chart);
  show_step (self);
  show_hash (self);
  toast (self, _("Checkpoint loaded"));
}

static void
load_checkpoint_from_action (GtkWidget  *widget,
                             const char *action_name,
                             GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  GCancellable *cancellable;

  if (self->job_cancellable != NULL)
    return;
  cancellable = begin_job (self, _("Loading the checkpoint…"));
  dc_training_run_load_checkpoint_async (self->run, g_variant_get_string (parameter, NULL),
                                         cancellable, load_checkpoint_cb, g_object_ref (self));
}

static void
export_hf_cb (GObject      *object,
              GAsyncResult *result,
              gpointer      user_data)
{
  g_autoptr(DcTrainPage) self = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = dc_training_run_export_hf_finish (DC_TRAINING_RUN (object), result, &error);

  release_application (self);
  if (job_is_current (G_OBJECT (self)))
    finish_file_job (self, ok, error, _("Hugging Face folder exported"),
                     _("Could not export the model"));
}

static void
export_hf_to_action (GtkWidget  *widget,
                     const char *action_name,
                     GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  GCancellable *cancellable;

  if (self->job_cancellable != NULL)
    return;
  cancellable = begin_job (self, _("Exporting the Hugging Face folder…"));
  hold_application (self);
  dc_training_run_export_hf_async (self->run, g_variant_get_string (parameter, NULL),
                                   cancellable, export_hf_cb, g_object_ref (self));
}

static void
export_kit_cb (GObject      *object,
               GAsyncResult *result,
               gpointer      user_data)
{
  g_autoptr(DcTrainPage) self = user_data;
  g_autoptr(GError) error = NULL;
  gboolean ok = dc_training_run_export_kit_finish (DC_TRAINING_RUN (object), result, &error);

  release_application (self);
  if (job_is_current (G_OBJECT (self)))
    finish_file_job (self, ok, error, _("Inference kit saved"),
                     _("Could not export the inference kit"));
}

static void
export_kit_to_action (GtkWidget  *widget,
                      const char *action_name,
                      GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  GCancellable *cancellable;

  if (self->job_cancellable != NULL)
    return;
  cancellable = begin_job (self, _("Writing the inference kit…"));
  hold_application (self);
  dc_training_run_export_kit_async (self->run, g_variant_get_string (parameter, NULL),
                                    cancellable, export_kit_cb, g_object_ref (self));
}

/* The chooser answered: run the path variant of the action it was opened for. */
static void
chooser_response_cb (GtkNativeDialog *dialog,
                     int              response,
                     DcTrainPage     *self)
{
  const char *then = g_object_get_data (G_OBJECT (dialog), "dc-then-action");

  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = file != NULL ? g_file_get_path (file) : NULL;

      if (path != NULL)
        gtk_widget_activate_action (GTK_WIDGET (self), then, "s", path);
      else if (file != NULL)
        toast (self, _("Choose a local file"));
    }
  gtk_native_dialog_destroy (dialog);
  g_clear_object (&self->chooser);
}

static void
choose_path (DcTrainPage          *self,
             const char           *title,
             GtkFileChooserAction  mode,
             const char           *accept,
             const char           *suggested_name,
             const char           *filter_name,
             const char           *filter_pattern,
             const char           *then_action)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkFileChooserNative *chooser;

  if (self->chooser != NULL)
    return;  /* one question at a time */

  chooser = gtk_file_chooser_native_new (title, GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                         mode, accept, _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  if (suggested_name != NULL)
    gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (chooser), suggested_name);
  if (filter_name != NULL)
    {
      g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

      gtk_file_filter_set_name (filter, filter_name);
      gtk_file_filter_add_pattern (filter, filter_pattern);
      gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), filter);
    }
  g_object_set_data (G_OBJECT (chooser), "dc-then-action", (gpointer) then_action);
  g_signal_connect (chooser, "response", G_CALLBACK (chooser_response_cb), self);
  self->chooser = GTK_NATIVE_DIALOG (chooser);
  gtk_native_dialog_show (self->chooser);
}

static void
save_checkpoint_action (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  g_autofree char *name = g_strdup_printf ("daisychain-step-%" G_GUINT64_FORMAT ".pt",
                                           dc_training_run_get_step (self->run));

  choose_path (self, _("Save Checkpoint"), GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"), name,
               _("PyTorch checkpoints"), "*.pt", "train.save-checkpoint-to");
}

static void
load_checkpoint_action (GtkWidget  *widget,
                        const char *action_name,
                        GVariant   *parameter)
{
  choose_path (DC_TRAIN_PAGE (widget), _("Load Checkpoint"), GTK_FILE_CHOOSER_ACTION_OPEN,
               _("_Load"), NULL, _("PyTorch checkpoints"), "*.pt", "train.load-checkpoint-from");
}

static void
export_hf_action (GtkWidget  *widget,
                  const char *action_name,
                  GVariant   *parameter)
{
  choose_path (DC_TRAIN_PAGE (widget), _("Export Hugging Face Folder"),
               GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER, _("_Export"), NULL, NULL, NULL,
               "train.export-hf-to");
}

static void
export_kit_action (GtkWidget  *widget,
                   const char *action_name,
                   GVariant   *parameter)
{
  DcTrainPage *self = DC_TRAIN_PAGE (widget);
  g_autofree char *name = g_strdup_printf ("daisychain-kit-step-%" G_GUINT64_FORMAT ".html",
                                           dc_training_run_get_step (self->run));

  choose_path (self, _("Download Inference Kit"), GTK_FILE_CHOOSER_ACTION_SAVE, _("_Save"),
               name, _("Web pages"), "*.html", "train.export-kit-to");
}

/**
 * dc_train_page_is_running:
 *
 * Returns: whether a training run is in progress (closing the window should ask)
 */
gboolean
dc_train_page_is_running (DcTrainPage *self)
{
  DcTrainingState state;

  g_return_val_if_fail (DC_IS_TRAIN_PAGE (self), FALSE);

  state = dc_training_run_get_state (self->run);
  return state == DC_TRAINING_STATE_RUNNING || state == DC_TRAINING_STATE_STOPPING;
}

void
dc_train_page_stop (DcTrainPage *self)
{
  g_return_if_fail (DC_IS_TRAIN_PAGE (self));

  dc_training_run_stop (self->run);
}

/**
 * dc_train_page_dup_log:
 *
 * Returns: (transfer full): the log's text, one message per line
 */
char *
dc_train_page_dup_log (DcTrainPage *self)
{
  GtkTextBuffer *buffer;
  GtkTextIter start, end;

  g_return_val_if_fail (DC_IS_TRAIN_PAGE (self), NULL);

  buffer = gtk_text_view_get_buffer (self->log_view);
  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

/**
 * dc_train_page_is_working:
 *
 * Returns: whether a Save, Load, Export or Generate job is in progress
 */
gboolean
dc_train_page_is_working (DcTrainPage *self)
{
  g_return_val_if_fail (DC_IS_TRAIN_PAGE (self), FALSE);

  return self->job_cancellable != NULL;
}

/**
 * dc_train_page_get_generated_text:
 *
 * Returns: (transfer none): the last generated text, or ""
 */
const char *
dc_train_page_get_generated_text (DcTrainPage *self)
{
  g_return_val_if_fail (DC_IS_TRAIN_PAGE (self), NULL);

  return gtk_label_get_label (self->generated_label);
}


static void
dc_train_page_dispose (GObject *object)
{
  DcTrainPage *self = DC_TRAIN_PAGE (object);

  if (self->chooser != NULL)
    gtk_native_dialog_destroy (self->chooser);
  g_clear_object (&self->chooser);
  /* A job's callback then finds the page without one and reports nothing.
   * A file being written (the application held) is finished, not lost. */
  if (self->job_cancellable != NULL && self->held == NULL)
    g_cancellable_cancel (self->job_cancellable);
  g_clear_object (&self->job_cancellable);
  g_clear_pointer (&self->generated, g_byte_array_unref);
  if (self->token_dialog != NULL)
    gtk_window_destroy (GTK_WINDOW (self->token_dialog));
  self->token_dialog = NULL;
  /* Disposing the run stops and joins its worker (after the step in progress). */
  g_clear_object (&self->run);
  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_TRAIN_PAGE);
  g_clear_object (&self->settings);
  g_clear_object (&self->context);
  g_clear_pointer (&self->agreed_hash, g_free);

  G_OBJECT_CLASS (dc_train_page_parent_class)->dispose (object);
}

static void
dc_train_page_class_init (DcTrainPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = dc_train_page_dispose;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-train-page.ui");
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, backend_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, width_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, seq_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, batch_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, steps_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, lr_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, size_hint);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, advanced_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, advanced_width_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, advanced_layers_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, advanced_heads_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, advanced_seq_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, memory_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, dataset_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, dataset_id_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, chart);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, log_scale_button);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, log_view);

  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, step_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, rate_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, eta_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, hash_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, group_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, devices_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, prompt_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, tokens_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, temperature_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, seed_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, generated_label);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, job_revealer);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, job_progress);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, model_menu_button);

  gtk_widget_class_install_action (widget_class, "train.start", NULL, start_action);
  gtk_widget_class_install_action (widget_class, "train.stop", NULL, stop_action);
  gtk_widget_class_install_action (widget_class, "train.generate", NULL, generate_action);
  gtk_widget_class_install_action (widget_class, "train.save-checkpoint", NULL,
                                   save_checkpoint_action);
  gtk_widget_class_install_action (widget_class, "train.save-checkpoint-to", "s",
                                   save_checkpoint_to_action);
  gtk_widget_class_install_action (widget_class, "train.load-checkpoint", NULL,
                                   load_checkpoint_action);
  gtk_widget_class_install_action (widget_class, "train.load-checkpoint-from", "s",
                                   load_checkpoint_from_action);
  gtk_widget_class_install_action (widget_class, "train.export-hf", NULL, export_hf_action);
  gtk_widget_class_install_action (widget_class, "train.export-hf-to", "s",
                                   export_hf_to_action);
  gtk_widget_class_install_action (widget_class, "train.export-kit", NULL, export_kit_action);
  gtk_widget_class_install_action (widget_class, "train.export-kit-to", "s",
                                   export_kit_to_action);
  gtk_widget_class_install_action (widget_class, "train.cancel", NULL, cancel_action);

  /* While the focus is in the view; gtk/help-overlay.ui lists the same. */
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Return, GDK_CONTROL_MASK,
                                       "train.start", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_period, GDK_CONTROL_MASK,
                                       "train.stop", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_g, GDK_CONTROL_MASK,
                                       "train.generate", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_s, GDK_CONTROL_MASK,
                                       "train.save-checkpoint", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_o, GDK_CONTROL_MASK,
                                       "train.load-checkpoint", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_e, GDK_CONTROL_MASK,
                                       "train.export-hf", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_k, GDK_CONTROL_MASK,
                                       "train.export-kit", NULL);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "train.cancel", NULL);

  /**
   * DcTrainPage::toast:
   * @message: a short message for the window to show
   */
  signals[SIGNAL_TOAST] =
    g_signal_new ("toast", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_STRING);
}

static void
dc_train_page_init (DcTrainPage *self)
{
  g_type_ensure (DC_TYPE_LOSS_CHART);
  gtk_widget_init_template (GTK_WIDGET (self));

  set_run (self, dc_training_run_new ());

  g_object_bind_property (self->log_scale_button, "active", self->chart, "log-scale",
                          G_BINDING_BIDIRECTIONAL | G_BINDING_SYNC_CREATE);
  g_signal_connect_swapped (self->width_spin, "value-changed", G_CALLBACK (size_changed_cb), self);
  g_signal_connect_swapped (self->seq_spin, "value-changed", G_CALLBACK (size_changed_cb), self);
  g_signal_connect_swapped (self->advanced_row, "notify::enable-expansion",
                            G_CALLBACK (advanced_changed_cb), self);
  g_signal_connect_swapped (self->advanced_width_spin, "value-changed",
                            G_CALLBACK (advanced_changed_cb), self);
  g_signal_connect_swapped (self->advanced_layers_spin, "value-changed",
                            G_CALLBACK (advanced_changed_cb), self);
  g_signal_connect_swapped (self->advanced_heads_spin, "value-changed",
                            G_CALLBACK (advanced_changed_cb), self);
  g_signal_connect_swapped (self->advanced_seq_spin, "value-changed",
                            G_CALLBACK (advanced_changed_cb), self);
  /* The Advanced range's bounds are the model's (dc-gpt-config.h); the .ui
   * holds the same numbers for the designer. 12 heads: the GPT-2-small
   * shape's, the largest this range is meant for. */
  gtk_adjustment_set_upper (gtk_spin_button_get_adjustment (self->advanced_width_spin),
                            DC_GPT_ADVANCED_WIDTH_MAX);
  gtk_adjustment_set_upper (gtk_spin_button_get_adjustment (self->advanced_layers_spin),
                            DC_GPT_LAYERS_MAX);
  gtk_adjustment_set_upper (gtk_spin_button_get_adjustment (self->advanced_seq_spin),
                            DC_GPT_ADVANCED_SEQ_MAX);
  name_advanced_switch (self);
  /* The batch counts in the memory a run needs. */
  g_signal_connect_swapped (self->batch_spin, "value-changed",
                            G_CALLBACK (advanced_changed_cb), self);
  update_advanced (self);
  g_signal_connect_swapped (self->dataset_row, "notify::selected",
                            G_CALLBACK (dataset_selected_cb), self);
  g_signal_connect_swapped (self->dataset_id_row, "changed",
                            G_CALLBACK (dataset_id_changed_cb), self);
}
