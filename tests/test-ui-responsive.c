/* test-ui-responsive.c: Save, Load, Export and Generate leave the window
 * responsive, and the Train view's Download Inference Kit… action.
 *
 * Under Xvfb: a large checkpoint (the largest model the format allows:
 * width and sequence 128, 12 layers; about 29 MB with Adam's moments) is
 * loaded, saved, exported as a Hugging Face folder and generated from
 * through the Train view's actions, while a tick callback on the window
 * records the longest gap between two frame clock ticks. Done on the main
 * thread, each of these blocks it for several hundred milliseconds: the
 * test asks for a tick at least every 100 ms while they work. The exports
 * show real progress (the job bar's fraction rises, never backwards, to 1;
 * it used to pulse and stay at 0). The text
 * generated token by token off the main thread must equal dc_generate ()'s
 * in one call, greedy and sampled. The kit action is disabled without a
 * model, enabled with one, and writes an .html file while frames keep
 * coming.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <time.h>
#include <glib/gstdio.h>
#include <adwaita.h>

#include "dc-application.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"
#include "dc-window.h"
#include "model/dc-checkpoint.h"
#include "model/dc-generate.h"

#define TIMEOUT_MS 120000

/* The bound for a responsive window is a frame at least every
 * 100 ms (six frames at 60 Hz). Wall-clock gaps depend on the machine's
 * load: in the suite, two tests share two cores with Xvfb and the jobs'
 * threads, and the scheduler alone left gaps of 100–780 ms (load 8–31).
 * So the 100 ms is checked on what the main thread itself does: its own
 * CPU time between two frames (below), which a thread waiting for a core
 * does not accumulate and a job blocking the main thread does (the
 * synchronous Load blocked 1,360 ms, all of it computing). The wall-clock
 * bound stays as a backstop against blocking without computing (a
 * synchronous wait): 2 s, far above what load alone caused. On a quiet
 * machine run with DC_TEST_MAX_FRAME_GAP_MS=100 (docs/TEST_RESULTS.md). */
#define MAX_GAP_MS 2000

/* The main thread's own CPU time between two frames. Load's is the
 * largest: 57–94 ms, of which DaisyChain's own work is 3 ms: the rest is
 * GTK repainting the whole window in software under Xvfb after the view
 * changes (perf: in that window 118 of 166 ms in gsk_renderer_render,
 * cairo_fill and pixman_blt). The others are 6–16 ms. The bound leaves
 * room for a slower CI machine's software rendering and still refuses any
 * job that computes on the main thread for longer. */
#define MAX_CPU_BETWEEN_FRAMES_MS 200

/* The 100 ms itself, on what DaisyChain does between two frames:
 * the main thread's CPU time less GTK's own frame cycle (before-paint to
 * after-paint: layout and drawing). Measured 2–5 ms for every action here,
 * quiet or loaded; a job run on the main thread counts whole (the
 * synchronous Load: 1,360 ms). */
#define MAX_APP_CPU_BETWEEN_FRAMES_MS 100

static gint64
max_gap_us (void)
{
  const char *env = g_getenv ("DC_TEST_MAX_FRAME_GAP_MS");
  guint64 ms = MAX_GAP_MS;

  if (env != NULL && !g_ascii_string_to_unsigned (env, 10, 1, 60000, &ms, NULL))
    g_error ("DC_TEST_MAX_FRAME_GAP_MS=%s: expected milliseconds, 1–60000", env);
  return (gint64) ms * G_TIME_SPAN_MILLISECOND;
}

static gint64
max_cpu_between_frames_us (void)
{
  const char *env = g_getenv ("DC_TEST_MAX_FRAME_CPU_MS");
  guint64 ms = MAX_CPU_BETWEEN_FRAMES_MS;

  if (env != NULL && !g_ascii_string_to_unsigned (env, 10, 1, 60000, &ms, NULL))
    g_error ("DC_TEST_MAX_FRAME_CPU_MS=%s: expected milliseconds, 1–60000", env);
  return (gint64) ms * G_TIME_SPAN_MILLISECOND;
}

static gint64
max_app_cpu_between_frames_us (void)
{
  const char *env = g_getenv ("DC_TEST_MAX_APP_CPU_MS");
  guint64 ms = MAX_APP_CPU_BETWEEN_FRAMES_MS;

  if (env != NULL && !g_ascii_string_to_unsigned (env, 10, 1, 60000, &ms, NULL))
    g_error ("DC_TEST_MAX_APP_CPU_MS=%s: expected milliseconds, 1–60000", env);
  return (gint64) ms * G_TIME_SPAN_MILLISECOND;
}

/* The calling thread's CPU time in µs. */
static gint64
thread_cpu_us (void)
{
  struct timespec ts;

  g_assert_cmpint (clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts), ==, 0);
  return (gint64) ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

typedef struct
{
  gint64       last_tick;   /* monotonic µs, 0 before the first tick */
  gint64       max_gap;     /* the longest gap since measuring began */
  gint64       last_cpu;    /* the main thread's CPU time at the last tick, µs */
  gint64       max_cpu_gap; /* its most CPU time between two ticks since then */
  gint64       paint_start; /* the main thread's CPU time at before-paint */
  gint64       frame_cpu;   /* its CPU time in GTK's frame cycles (before- to after-paint) */
  gint64       last_frame_cpu;     /* frame_cpu at the last tick */
  gint64       max_app_cpu_gap;    /* most CPU between two ticks outside the frame cycles */
  guint        n_ticks;
  guint        n_working;   /* ticks seen while the page had a job */
  DcTrainPage *page;
} Ticks;

static gboolean
tick_cb (GtkWidget     *widget,
         GdkFrameClock *clock,
         gpointer       user_data)
{
  Ticks *ticks = user_data;
  gint64 now = g_get_monotonic_time ();
  gint64 cpu = thread_cpu_us ();

  if (ticks->last_tick != 0)
    {
      ticks->max_gap = MAX (ticks->max_gap, now - ticks->last_tick);
      ticks->max_cpu_gap = MAX (ticks->max_cpu_gap, cpu - ticks->last_cpu);
      ticks->max_app_cpu_gap = MAX (ticks->max_app_cpu_gap,
                                    (cpu - ticks->last_cpu) -
                                    (ticks->frame_cpu - ticks->last_frame_cpu));
    }
  ticks->last_tick = now;
  ticks->last_cpu = cpu;
  ticks->last_frame_cpu = ticks->frame_cpu;
  ticks->n_ticks++;
  if (dc_train_page_is_working (ticks->page))
    ticks->n_working++;
  return G_SOURCE_CONTINUE;
}

/* GTK's own frame cycle (layout and drawing; drawn in software with cairo
 * under Xvfb, 60–90 ms for a whole-window repaint here) is counted apart
 * from what the application does between frames. */
static void
before_paint_cb (GdkFrameClock *clock,
                 Ticks         *ticks)
{
  ticks->paint_start = thread_cpu_us ();
}

static void
after_paint_cb (GdkFrameClock *clock,
                Ticks         *ticks)
{
  if (ticks->paint_start != 0)
    ticks->frame_cpu += thread_cpu_us () - ticks->paint_start;
  ticks->paint_start = 0;
}

static gboolean
page_has_no_job (gpointer user_data)
{
  return !dc_train_page_is_working (user_data);
}

typedef struct
{
  Ticks *ticks;
  guint  until;
} TickWait;

static gboolean
ticked_past (gpointer user_data)
{
  TickWait *wait = user_data;

  return wait->ticks->n_ticks >= wait->until;
}

/* Runs @action (with @path) and waits for its job to end and one more
 * frame; returns the longest gap between frames from just before the
 * action until then. Timing-free: the action returns while its job still
 * runs, and frames come while it does (the work takes hundreds of
 * milliseconds here, several frames even on a fast machine). */
static gint64
measure_action (GtkWidget  *page,
                Ticks      *ticks,
                const char *action,
                const char *path)
{
  TickWait wait = { ticks, 0 };
  gint64 started = g_get_monotonic_time ();
  gint64 took;

  /* Start from a fresh frame, so that the gap counts only the action. */
  wait.until = ticks->n_ticks + 1;
  g_assert_true (dc_test_wait_until (ticked_past, &wait, TIMEOUT_MS));
  ticks->max_gap = 0;
  ticks->max_cpu_gap = 0;
  ticks->max_app_cpu_gap = 0;
  ticks->n_working = 0;
  started = g_get_monotonic_time ();
  if (path != NULL)
    g_assert_true (gtk_widget_activate_action (page, action, "s", path));
  else
    g_assert_true (gtk_widget_activate_action (page, action, NULL));
  g_assert_true (dc_train_page_is_working (DC_TRAIN_PAGE (page)));
  g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
  wait.until = ticks->n_ticks + 1;
  g_assert_true (dc_test_wait_until (ticked_past, &wait, TIMEOUT_MS));
  took = g_get_monotonic_time () - started;
  g_test_message ("%s: %.0f ms, %u frames while it worked, longest frame gap %.0f ms, "
                  "most main-thread CPU between frames %.0f ms (%.0f ms outside GTK's frame "
                  "cycle)", action, took / 1000.0, ticks->n_working, ticks->max_gap / 1000.0,
                  ticks->max_cpu_gap / 1000.0, ticks->max_app_cpu_gap / 1000.0);
  g_assert_cmpuint (ticks->n_working, >, 0);
  g_assert_cmpint (ticks->max_cpu_gap, <, max_cpu_between_frames_us ());
  g_assert_cmpint (ticks->max_app_cpu_gap, <, max_app_cpu_between_frames_us ());
  return ticks->max_gap;
}

static void
bar_fraction_cb (GtkProgressBar *bar,
                 GParamSpec     *pspec,
                 GArray         *seen)
{
  double fraction = gtk_progress_bar_get_fraction (bar);

  g_array_append_val (seen, fraction);
}

/* The job bar's fractions since @seen was emptied: from 0 (the job's
 * start), never backwards, ending at 1. */
static void
assert_bar_rose (GtkProgressBar *bar,
                 GArray         *seen)
{
  g_assert_cmpuint (seen->len, >=, 1);
  for (guint i = 1; i < seen->len; i++)
    g_assert_cmpfloat (g_array_index (seen, double, i), >=, g_array_index (seen, double, i - 1));
  g_assert_cmpfloat (gtk_progress_bar_get_fraction (bar), ==, 1.0);
  g_array_set_size (seen, 0);
}

static gboolean
is_actionable_for (GtkWidget *widget,
                   gpointer   action_name)
{
  return GTK_IS_ACTIONABLE (widget) &&
         g_strcmp0 (gtk_actionable_get_action_name (GTK_ACTIONABLE (widget)), action_name) == 0;
}

static gboolean
action_enabled (GtkWidget  *page,
                const char *action_name)
{
  GtkWidget *button = dc_test_find_descendant (page, is_actionable_for, (gpointer) action_name);

  g_assert_nonnull (button);
  return gtk_widget_is_sensitive (button);
}

/* The largest model the checkpoint format and the generator accept. */
static DcGptModel *
new_large_model (void)
{
  DcGptConfig config;
  g_autoptr(GError) error = NULL;
  DcGptModel *model;

  dc_gpt_config_init_derived (&config, DC_GPT_WIDTH_MAX, DC_GPT_SEQ_MAX);
  config.n_layer = DC_GPT_LAYERS_MAX;
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 7);
  return model;
}

static char *
generate_at_once (const DcGptModel *model,
                  const char       *prompt,
                  guint             n_tokens,
                  float             temperature,
                  guint64           seed)
{
  g_autoptr(GByteArray) out = g_byte_array_new ();
  g_autoptr(GError) error = NULL;

  g_assert_true (dc_generate (model, (const guint8 *) prompt, strlen (prompt), n_tokens,
                              temperature, seed, out, &error));
  g_assert_no_error (error);
  return g_utf8_make_valid ((const char *) out->data, out->len);
}

static GObject *
template_child (DcTrainPage *page,
                const char  *name)
{
  GObject *child = gtk_widget_get_template_child (GTK_WIDGET (page), DC_TYPE_TRAIN_PAGE, name);

  g_assert_nonnull (child);
  return child;
}

/* The Generate group's fields, as a user would fill them. */
static void
set_generation (DcTrainPage *page,
                const char  *prompt,
                guint        n_tokens,
                float        temperature,
                guint        seed)
{
  gtk_editable_set_text (GTK_EDITABLE (template_child (page, "prompt_row")), prompt);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (template_child (page, "tokens_spin")), n_tokens);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (template_child (page, "temperature_spin")),
                             temperature * 100);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (template_child (page, "seed_spin")), seed);
}

static char *closing_save;
static char *closing_dir;

static void
check_responsive (DcApplication *app)
{
  DcWindow *window = DC_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  DcTrainPage *page = dc_window_get_train_page (window);
  GtkWidget *widget = GTK_WIDGET (page);
  g_autofree char *dir = g_dir_make_tmp ("dc-ui-responsive-XXXXXX", NULL);
  g_autofree char *big = g_build_filename (dir, "big.pt", NULL);
  g_autofree char *saved = g_build_filename (dir, "saved.pt", NULL);
  g_autofree char *hf = g_build_filename (dir, "hf", NULL);
  g_autofree char *kit = g_build_filename (dir, "kit.html", NULL);
  g_autoptr(DcGptModel) model = new_large_model ();
  g_autoptr(GError) error = NULL;
  g_autofree char *log = NULL;
  Ticks ticks = { .page = page };
  GtkProgressBar *bar = GTK_PROGRESS_BAR (gtk_widget_get_template_child (widget,
                                                                         DC_TYPE_TRAIN_PAGE,
                                                                         "job_progress"));
  g_autoptr(GArray) fractions = g_array_new (FALSE, FALSE, sizeof (double));
  DcTrainSettings train_settings;
  guint tick_id;
  gint64 gap;

  dc_train_settings_init_default (&train_settings);
  g_assert_true (dc_checkpoint_save (model, &train_settings, big, &error));
  g_assert_no_error (error);

  g_assert_true (dc_test_wait_until (dc_test_widget_is_mapped, window, TIMEOUT_MS));
  g_action_group_activate_action (G_ACTION_GROUP (window), "view", g_variant_new_string ("train"));
  tick_id = gtk_widget_add_tick_callback (GTK_WIDGET (window), tick_cb, &ticks, NULL);
  {
    GdkFrameClock *clock = gtk_widget_get_frame_clock (GTK_WIDGET (window));

    g_signal_connect (clock, "before-paint", G_CALLBACK (before_paint_cb), &ticks);
    g_signal_connect (clock, "after-paint", G_CALLBACK (after_paint_cb), &ticks);
  }

  /* The view's Model menu offers the kit. */
  {
    GtkMenuButton *button = GTK_MENU_BUTTON (gtk_widget_get_template_child (
                                               widget, DC_TYPE_TRAIN_PAGE, "model_menu_button"));
    GMenuModel *menu = gtk_menu_button_get_menu_model (button);
    gboolean found = FALSE;

    for (int s = 0; s < g_menu_model_get_n_items (menu); s++)
      {
        g_autoptr(GMenuModel) section = g_menu_model_get_item_link (menu, s, G_MENU_LINK_SECTION);

        for (int i = 0; section != NULL && i < g_menu_model_get_n_items (section); i++)
          {
            g_autofree char *action = NULL;
            g_autofree char *label = NULL;

            g_menu_model_get_item_attribute (section, i, G_MENU_ATTRIBUTE_ACTION, "s", &action);
            g_menu_model_get_item_attribute (section, i, G_MENU_ATTRIBUTE_LABEL, "s", &label);
            if (g_strcmp0 (action, "train.export-kit") == 0)
              found = g_strcmp0 (label, "_Download Inference Kit…") == 0;
          }
      }
    g_assert_true (found);
  }

  /* No model yet: nothing to export. */
  g_assert_false (action_enabled (widget, "train.export-kit"));
  g_assert_false (action_enabled (widget, "train.save-checkpoint"));

  gap = measure_action (widget, &ticks, "train.load-checkpoint-from", big);
  log = dc_train_page_dup_log (page);
  g_assert_nonnull (strstr (log, "checkpoint loaded: "));
  g_assert_cmpint (gap, <, max_gap_us ());
  g_assert_true (action_enabled (widget, "train.export-kit"));

  gap = measure_action (widget, &ticks, "train.save-checkpoint-to", saved);
  g_assert_true (g_file_test (saved, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpint (gap, <, max_gap_us ());

  g_signal_connect (bar, "notify::fraction", G_CALLBACK (bar_fraction_cb), fractions);
  /* Away from 0, so that the job's start shows as a 0. */
  gtk_progress_bar_set_fraction (bar, 0.5);
  g_array_set_size (fractions, 0);
  gap = measure_action (widget, &ticks, "train.export-hf-to", hf);
  g_assert_cmpfloat (g_array_index (fractions, double, 0), ==, 0.0);
  assert_bar_rose (bar, fractions);
  {
    g_autofree char *safetensors = g_build_filename (hf, "model.safetensors", NULL);

    g_assert_true (g_file_test (safetensors, G_FILE_TEST_IS_REGULAR));
  }
  g_assert_cmpint (gap, <, max_gap_us ());

  /* Generation, greedy then sampled: streamed off the main thread, the
   * same text as one dc_generate () call. 40 tokens of this model are
   * 40 forward passes of 12 layers: long enough to matter. */
  {
    const struct { float temperature; guint seed; } runs[] = { { 0.0f, 1 }, { 0.8f, 42 } };

    for (guint i = 0; i < G_N_ELEMENTS (runs); i++)
      {
        g_autofree char *expected = NULL;

        set_generation (page, "The ", 40, runs[i].temperature, runs[i].seed);
        gap = measure_action (widget, &ticks, "train.generate", NULL);
        expected = generate_at_once (model, "The ", 40, runs[i].temperature, runs[i].seed);
        g_assert_cmpstr (dc_train_page_get_generated_text (page), ==, expected);
        g_assert_cmpint (gap, <, max_gap_us ());
      }
  }

  /* The inference kit: an .html file holding the blob, written off the
   * main thread while frames keep coming. */
  {
    g_autofree char *html = NULL;

    gtk_progress_bar_set_fraction (bar, 0.5);
    g_array_set_size (fractions, 0);
    gap = measure_action (widget, &ticks, "train.export-kit-to", kit);
    g_assert_cmpfloat (g_array_index (fractions, double, 0), ==, 0.0);
    assert_bar_rose (bar, fractions);
    g_assert_true (dc_test_wait_until (page_has_no_job, page, TIMEOUT_MS));
    g_clear_pointer (&log, g_free);
    log = dc_train_page_dup_log (page);
    g_assert_true (g_file_get_contents (kit, &html, NULL, NULL));
    g_assert_nonnull (strstr (html, "id=\"dc-kit-data\""));
    g_assert_nonnull (strstr (log, "inference kit exported: "));
    g_assert_cmpint (gap, <, max_gap_us ());
  }
  g_assert_true (action_enabled (widget, "train.export-kit"));

  gtk_widget_remove_tick_callback (GTK_WIDGET (window), tick_id);
  g_signal_handlers_disconnect_by_data (gtk_widget_get_frame_clock (GTK_WIDGET (window)), &ticks);
  g_signal_handlers_disconnect_by_func (bar, bar_fraction_cb, fractions);

  /* Closing the window while a checkpoint is written does not lose it: the
   * application runs until the file is there (test_responsive checks). */
  closing_save = g_build_filename (dir, "closing.pt", NULL);
  closing_dir = g_strdup (dir);
  g_assert_true (gtk_widget_activate_action (widget, "train.save-checkpoint-to", "s",
                                             closing_save));
  g_assert_true (dc_train_page_is_working (page));
  gtk_window_close (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (dc_test_app_has_no_windows, app, TIMEOUT_MS));
}

static void
activate_cb (DcApplication *app,
             gpointer       user_data)
{
  gboolean *checked = user_data;

  check_responsive (app);
  *checked = TRUE;
}

static void
test_responsive (void)
{
  g_autoptr(DcApplication) app = dc_application_new ();
  gboolean checked = FALSE;
  g_autoptr(GSettings) settings = g_settings_new (APP_ID);

  g_application_set_flags (G_APPLICATION (app), G_APPLICATION_NON_UNIQUE);
  g_signal_connect_after (app, "activate", G_CALLBACK (activate_cb), &checked);
  /* The ui suite sends no multicast: the group stays offline. */
  g_settings_set_boolean (settings, "group-autostart", FALSE);
  g_assert_cmpint (g_application_run (G_APPLICATION (app), 0, NULL), ==, 0);
  g_assert_true (checked);
  g_assert_true (g_file_test (closing_save, G_FILE_TEST_IS_REGULAR));
  dc_test_remove_tree (closing_dir);
  g_clear_pointer (&closing_save, g_free);
  g_clear_pointer (&closing_dir, g_free);
}

int
main (int    argc,
      char **argv)
{
  /* Frames drawn by llvmpipe's GL under Xvfb cost 50–190 ms each on two
   * loaded cores, which would be measured as gaps; the test is about the
   * main thread being free, so frames are drawn the cheap way. */
  g_setenv ("GSK_RENDERER", "cairo", FALSE);
  gtk_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/ui/train/responsive-and-kit", test_responsive);

  return g_test_run ();
}
