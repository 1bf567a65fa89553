/* dc-train-page.c: the Train view.
 *
 * The run settings (saved in GSettings as they change), the dataset choice,
 * the live loss chart, the run statistics, the log, generation and the model
 * files. The train.* actions stay disabled until a trainer drives the page.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"


#include "dc-train-page.h"

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
  AdwComboRow    *dataset_row;
  AdwEntryRow    *dataset_id_row;
  DcLossChart    *chart;
  GtkToggleButton *log_scale_button;
  GtkTextView    *log_view;

  /* owned references */
  GSettings      *settings;
};

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

static void
size_changed_cb (DcTrainPage *self)
{
  update_size_hint (self);
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
dc_train_page_dispose (GObject *object)
{
  DcTrainPage *self = DC_TRAIN_PAGE (object);

  gtk_widget_dispose_template (GTK_WIDGET (self), DC_TYPE_TRAIN_PAGE);
  g_clear_object (&self->settings);

  G_OBJECT_CLASS (dc_train_page_parent_class)->dispose (object);
}

static void
dc_train_page_class_init (DcTrainPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  static const char * const actions[] = {
    "train.start", "train.stop", "train.generate",
    "train.save-checkpoint", "train.load-checkpoint", "train.export-hf",
  };

  object_class->dispose = dc_train_page_dispose;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-train-page.ui");
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, width_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, seq_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, batch_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, steps_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, lr_spin);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, size_hint);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, dataset_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, dataset_id_row);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, chart);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, log_scale_button);
  gtk_widget_class_bind_template_child (widget_class, DcTrainPage, log_view);

  /* Installed now so that the buttons exist; the trainer enables them. */
  for (guint i = 0; i < G_N_ELEMENTS (actions); i++)
    gtk_widget_class_install_action (widget_class, actions[i], NULL, NULL);
}

static void
dc_train_page_init (DcTrainPage *self)
{
  static const char * const actions[] = {
    "train.start", "train.stop", "train.generate",
    "train.save-checkpoint", "train.load-checkpoint", "train.export-hf",
  };

  g_type_ensure (DC_TYPE_LOSS_CHART);
  gtk_widget_init_template (GTK_WIDGET (self));

  for (guint i = 0; i < G_N_ELEMENTS (actions); i++)
    gtk_widget_action_set_enabled (GTK_WIDGET (self), actions[i], FALSE);

  g_object_bind_property (self->log_scale_button, "active", self->chart, "log-scale",
                          G_BINDING_BIDIRECTIONAL | G_BINDING_SYNC_CREATE);
  g_signal_connect_swapped (self->width_spin, "value-changed", G_CALLBACK (size_changed_cb), self);
  g_signal_connect_swapped (self->seq_spin, "value-changed", G_CALLBACK (size_changed_cb), self);
  g_signal_connect_swapped (self->dataset_row, "notify::selected",
                            G_CALLBACK (dataset_selected_cb), self);
  g_signal_connect_swapped (self->dataset_id_row, "changed",
                            G_CALLBACK (dataset_id_changed_cb), self);
}
