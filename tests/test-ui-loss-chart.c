/* test-ui-loss-chart.c: the loss chart widget in a real window under Xvfb.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <adwaita.h>

#include "dc-loss-chart.h"
#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"

#define TIMEOUT_MS 20000

static gboolean
widget_has_width (gpointer widget)
{
  return dc_test_widget_is_mapped (widget) && gtk_widget_get_width (GTK_WIDGET (widget)) > 0;
}

static void
notify_cb (GObject    *object,
           GParamSpec *pspec,
           guint      *count)
{
  (*count)++;
}

/* Renders the widget and returns the fraction of its area that was drawn on
 * (pixels that are not fully transparent): a blank render gives 0. */
static double
render_ink_fraction (GtkWidget  *widget,
                     const char *screenshot_name)
{
  g_autoptr(GdkTexture) texture = dc_test_render_widget (widget, screenshot_name);
  int width = gdk_texture_get_width (texture);
  int height = gdk_texture_get_height (texture);
  gsize stride = (gsize) width * 4, inked = 0;
  g_autofree guchar *pixels = g_malloc (stride * height);

  gdk_texture_download (texture, pixels, stride);
  /* GDK_MEMORY_DEFAULT is premultiplied B8G8R8A8: alpha is the fourth byte. */
  for (gsize i = 0; i < stride * height; i += 4)
    if (pixels[i + 3] != 0)
      inked++;
  return (double) inked / ((double) gtk_widget_get_width (widget) *
                           gtk_widget_get_height (widget));
}

static void
test_chart (void)
{
  GtkWidget *window = gtk_window_new ();
  GtkWidget *chart = dc_loss_chart_new ();
  DcLossChart *self = DC_LOSS_CHART (chart);
  g_autofree char *readout = NULL;
  double empty_ink, full_ink, log_ink;
  guint notifications = 0;

  gtk_window_set_default_size (GTK_WINDOW (window), 640, 360);
  gtk_window_set_child (GTK_WINDOW (window), chart);
  gtk_window_present (GTK_WINDOW (window));
  g_assert_true (dc_test_wait_until (widget_has_width, chart, TIMEOUT_MS));

  g_signal_connect (chart, "notify::n-points", G_CALLBACK (notify_cb), &notifications);
  g_assert_cmpuint (dc_loss_chart_get_n_points (self), ==, 0);
  g_assert_true (isnan (dc_loss_chart_get_smoothed (self)));
  g_assert_null (dc_loss_chart_dup_readout_at (self, 300));
  empty_ink = render_ink_fraction (chart, "loss-chart-empty");

  /* A falling loss with noise, as training gives. */
  for (guint step = 1; step <= 200; step++)
    dc_loss_chart_append (self, step, 5.5 * exp (-(double) step / 60.0) + 1.2 + 0.15 * sin (step * 1.7));
  g_assert_cmpuint (dc_loss_chart_get_n_points (self), ==, 200);
  g_assert_cmpuint (notifications, ==, 200);

  /* The smoothed curve follows the trend: close to the last losses' level. */
  g_assert_cmpfloat (dc_loss_chart_get_smoothed (self), >, 1.0);
  g_assert_cmpfloat (dc_loss_chart_get_smoothed (self), <, 1.8);

  full_ink = render_ink_fraction (chart, "loss-chart-linear");
  g_assert_cmpfloat (full_ink, >, empty_ink);

  /* The hover read-out names the step nearest to the pointer; outside the plot, nothing. */
  readout = dc_loss_chart_dup_readout_at (self, gtk_widget_get_width (chart) - 17);
  g_assert_nonnull (readout);
  g_assert_true (g_str_has_prefix (readout, "Step 200 "));
  g_assert_null (dc_loss_chart_dup_readout_at (self, 2));

  dc_loss_chart_set_log_scale (self, TRUE);
  g_assert_true (dc_loss_chart_get_log_scale (self));
  log_ink = render_ink_fraction (chart, "loss-chart-log");
  g_assert_cmpfloat (log_ink, >, empty_ink);

  /* A NaN loss leaves a gap and keeps the smoothed value; clear empties the chart. */
  dc_loss_chart_append (self, 201, NAN);
  g_assert_cmpuint (dc_loss_chart_get_n_points (self), ==, 201);
  g_assert_false (isnan (dc_loss_chart_get_smoothed (self)));
  dc_loss_chart_clear (self);
  g_assert_cmpuint (dc_loss_chart_get_n_points (self), ==, 0);

  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int    argc,
      char **argv)
{
  gtk_test_init (&argc, &argv, NULL);
  adw_init ();

  g_test_add_func ("/dc/ui/loss-chart/points-smoothing-readout-scales", test_chart);

  return g_test_run ();
}
