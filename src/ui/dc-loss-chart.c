/* dc-loss-chart.c: the live loss chart of the Train view.
 *
 * Drawn with GtkSnapshot: axes, grid, tick labels (PangoLayout nodes), the
 * loss per step as a faint line and a smoothed curve on top (cairo nodes:
 * GTK 4.8 has no GskPath). Colours come from the style (foreground and
 * accent), so it follows light and dark. Hovering shows the step under the
 * pointer. Linear or logarithmic y axis.
 *
 * This is display code: it may use libm (log10, pow) since nothing here enters
 * a model.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include <math.h>
#include <glib/gi18n.h>

#include "dc-loss-chart.h"

/* Smoothing of the curve drawn over the raw losses: an exponential moving
 * average, debiased for the first steps (as TensorBoard does). */
#define SMOOTHING_BETA 0.9

#define MARGIN_LEFT   56.0
#define MARGIN_RIGHT  16.0
#define MARGIN_TOP    12.0
#define MARGIN_BOTTOM 30.0

typedef struct
{
  guint  step;
  double loss;
  double smoothed;
} LossPoint;

struct _DcLossChart
{
  GtkWidget  parent_instance;

  /* state */
  GArray    *points;        /* LossPoint, in arrival order (steps increase) */
  double     ema;           /* undebiased moving average */
  double     beta_power;    /* SMOOTHING_BETA ^ n_points, by repeated multiplication */
  double     hover_x;       /* widget coordinates; < 0 when the pointer is away */
  guint      log_scale : 1;
};

enum {
  PROP_0,
  PROP_LOG_SCALE,
  PROP_N_POINTS,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

G_DEFINE_FINAL_TYPE (DcLossChart, dc_loss_chart, GTK_TYPE_WIDGET)

typedef struct
{
  graphene_rect_t plot;
  double          x_min, x_max;   /* steps */
  double          y_min, y_max;   /* loss, or log10 (loss) on the log scale */
} ChartFrame;

GtkWidget *
dc_loss_chart_new (void)
{
  return g_object_new (DC_TYPE_LOSS_CHART, NULL);
}

static double
value_to_axis (DcLossChart *self,
               double       loss)
{
  if (!self->log_scale)
    return loss;
  /* The log axis shows positive losses; anything else sits at the floor. */
  return log10 (MAX (loss, 1e-6));
}

static gboolean
compute_frame (DcLossChart *self,
               double       width,
               double       height,
               ChartFrame  *frame)
{
  double lo = G_MAXDOUBLE, hi = -G_MAXDOUBLE;
  double pad;

  if (self->points->len == 0 ||
      width <= MARGIN_LEFT + MARGIN_RIGHT + 10 || height <= MARGIN_TOP + MARGIN_BOTTOM + 10)
    return FALSE;

  graphene_rect_init (&frame->plot, MARGIN_LEFT, MARGIN_TOP,
                      width - MARGIN_LEFT - MARGIN_RIGHT, height - MARGIN_TOP - MARGIN_BOTTOM);

  frame->x_min = g_array_index (self->points, LossPoint, 0).step;
  frame->x_max = g_array_index (self->points, LossPoint, self->points->len - 1).step;
  if (frame->x_max <= frame->x_min)
    frame->x_max = frame->x_min + 1;

  for (guint i = 0; i < self->points->len; i++)
    {
      const LossPoint *p = &g_array_index (self->points, LossPoint, i);
      double v;

      if (!isfinite (p->loss))
        continue;
      v = value_to_axis (self, p->loss);
      lo = MIN (lo, v);
      hi = MAX (hi, v);
    }
  if (lo > hi)
    {
      lo = 0;
      hi = 1;
    }
  if (hi - lo < 1e-9)
    {
      lo -= 0.5;
      hi += 0.5;
    }
  pad = (hi - lo) * 0.05;
  frame->y_min = lo - pad;
  frame->y_max = hi + pad;
  if (!self->log_scale && lo >= 0 && frame->y_min < 0)
    frame->y_min = 0;
  return TRUE;
}

static double
frame_x (const ChartFrame *f,
         double            step)
{
  return f->plot.origin.x + (step - f->x_min) / (f->x_max - f->x_min) * f->plot.size.width;
}

static double
frame_y (const ChartFrame *f,
         double            value)
{
  return f->plot.origin.y + f->plot.size.height -
         (value - f->y_min) / (f->y_max - f->y_min) * f->plot.size.height;
}

/* A tick spacing of 1, 2 or 5 × 10^k giving about @target ticks over @range. */
static double
nice_step (double range,
           int    target)
{
  double raw = range / MAX (target, 1);
  double magnitude = pow (10.0, floor (log10 (raw)));
  double fraction = raw / magnitude;

  if (fraction <= 1.0)
    return magnitude;
  if (fraction <= 2.0)
    return 2.0 * magnitude;
  if (fraction <= 5.0)
    return 5.0 * magnitude;
  return 10.0 * magnitude;
}

static void
get_colors (GtkWidget *widget,
            GdkRGBA   *fg,
            GdkRGBA   *accent)
{
  GtkStyleContext *context = gtk_widget_get_style_context (widget);

  gtk_style_context_get_color (context, fg);
  if (!gtk_style_context_lookup_color (context, "accent_color", accent))
    gdk_rgba_parse (accent, "#3584e4");
}

static void
append_label (GtkWidget     *widget,
              GtkSnapshot   *snapshot,
              const char    *text,
              double         x,
              double         y,
              double         x_align,   /* 0 left, 0.5 centre, 1 right of x */
              double         y_align,
              const GdkRGBA *color)
{
  g_autoptr(PangoLayout) layout = gtk_widget_create_pango_layout (widget, text);
  int w, h;

  pango_layout_get_pixel_size (layout, &w, &h);
  gtk_snapshot_save (snapshot);
  gtk_snapshot_translate (snapshot, &GRAPHENE_POINT_INIT (round (x - w * x_align),
                                                         round (y - h * y_align)));
  gtk_snapshot_append_layout (snapshot, layout, color);
  gtk_snapshot_restore (snapshot);
}

static void
format_loss (char   *buffer,
             gsize   size,
             double  value)
{
  if (fabs (value) >= 1000)
    g_snprintf (buffer, size, "%.0f", value);
  else
    g_snprintf (buffer, size, "%.3g", value);
}

static void
draw_axes (DcLossChart      *self,
           GtkSnapshot      *snapshot,
           const ChartFrame *f,
           const GdkRGBA    *fg)
{
  GtkWidget *widget = GTK_WIDGET (self);
  GdkRGBA grid = *fg, label = *fg, axis = *fg;
  double step;
  char text[64];

  grid.alpha *= 0.12;
  label.alpha *= 0.7;
  axis.alpha *= 0.5;

  /* y ticks: nice values on the linear scale, 1-2-5 decades on the log scale. */
  if (self->log_scale)
    {
      /* Within about a decade every mantissa gets a line; wider, 1-2-5. */
      static const double all_mantissas[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
      static const double few_mantissas[] = { 1, 2, 5 };
      gboolean narrow = f->y_max - f->y_min < 1.2;
      const double *mantissas = narrow ? all_mantissas : few_mantissas;
      guint n_mantissas = narrow ? G_N_ELEMENTS (all_mantissas) : G_N_ELEMENTS (few_mantissas);

      for (double decade = floor (f->y_min); decade <= ceil (f->y_max); decade += 1.0)
        {
          for (guint m = 0; m < n_mantissas; m++)
            {
              double value = log10 (mantissas[m]) + decade;
              double y;

              if (value < f->y_min || value > f->y_max)
                continue;
              y = frame_y (f, value);
              gtk_snapshot_append_color (snapshot, &grid,
                                         &GRAPHENE_RECT_INIT (f->plot.origin.x, y,
                                                              f->plot.size.width, 1));
              format_loss (text, sizeof text, mantissas[m] * pow (10.0, decade));
              append_label (widget, snapshot, text, f->plot.origin.x - 6, y, 1.0, 0.5, &label);
            }
        }
    }
  else
    {
      step = nice_step (f->y_max - f->y_min, 5);
      for (double value = ceil (f->y_min / step) * step; value <= f->y_max + step * 1e-9;
           value += step)
        {
          double y = frame_y (f, value);

          gtk_snapshot_append_color (snapshot, &grid,
                                     &GRAPHENE_RECT_INIT (f->plot.origin.x, y,
                                                          f->plot.size.width, 1));
          format_loss (text, sizeof text, fabs (value) < step * 1e-9 ? 0.0 : value);
          append_label (widget, snapshot, text, f->plot.origin.x - 6, y, 1.0, 0.5, &label);
        }
    }

  /* x ticks: whole steps only. */
  step = MAX (1.0, nice_step (f->x_max - f->x_min, MAX (2, (int) (f->plot.size.width / 60))));
  for (double s = ceil (f->x_min / step) * step; s <= f->x_max + 1e-9; s += step)
    {
      double x = frame_x (f, s);

      gtk_snapshot_append_color (snapshot, &grid,
                                 &GRAPHENE_RECT_INIT (x, f->plot.origin.y, 1,
                                                      f->plot.size.height));
      g_snprintf (text, sizeof text, "%.0f", s);
      append_label (widget, snapshot, text, x, f->plot.origin.y + f->plot.size.height + 4,
                    0.5, 0.0, &label);
    }

  /* The axes themselves. */
  gtk_snapshot_append_color (snapshot, &axis,
                             &GRAPHENE_RECT_INIT (f->plot.origin.x,
                                                  f->plot.origin.y + f->plot.size.height,
                                                  f->plot.size.width, 1));
  gtk_snapshot_append_color (snapshot, &axis,
                             &GRAPHENE_RECT_INIT (f->plot.origin.x, f->plot.origin.y, 1,
                                                  f->plot.size.height));
}

static void
draw_curve (DcLossChart      *self,
            cairo_t          *cr,
            const ChartFrame *f,
            gboolean          smoothed)
{
  gboolean pen_down = FALSE;

  for (guint i = 0; i < self->points->len; i++)
    {
      const LossPoint *p = &g_array_index (self->points, LossPoint, i);
      double value = smoothed ? p->smoothed : p->loss;
      double x, y;

      if (!isfinite (value))
        {
          pen_down = FALSE;  /* a gap, not a line through a NaN */
          continue;
        }
      x = frame_x (f, p->step);
      y = frame_y (f, value_to_axis (self, value));
      if (pen_down)
        cairo_line_to (cr, x, y);
      else
        cairo_move_to (cr, x, y);
      pen_down = TRUE;
    }
}

static const LossPoint *
nearest_point (DcLossChart      *self,
               const ChartFrame *f,
               double            x)
{
  const LossPoint *best = NULL;
  double best_distance = G_MAXDOUBLE;

  for (guint i = 0; i < self->points->len; i++)
    {
      const LossPoint *p = &g_array_index (self->points, LossPoint, i);
      double distance = fabs (frame_x (f, p->step) - x);

      if (distance < best_distance)
        {
          best_distance = distance;
          best = p;
        }
    }
  return best;
}

static char *
format_readout (const LossPoint *p)
{
  /* Translators: the chart's hover read-out; %u is a step number. */
  return g_strdup_printf (_("Step %u · loss %.4f · smoothed %.4f"), p->step, p->loss,
                          p->smoothed);
}

static void
dc_loss_chart_snapshot (GtkWidget   *widget,
                        GtkSnapshot *snapshot)
{
  DcLossChart *self = DC_LOSS_CHART (widget);
  double width = gtk_widget_get_width (widget);
  double height = gtk_widget_get_height (widget);
  GdkRGBA fg, accent, faint;
  ChartFrame f;
  cairo_t *cr;

  get_colors (widget, &fg, &accent);

  if (!compute_frame (self, width, height, &f))
    {
      GdkRGBA dim = fg;

      dim.alpha *= 0.55;
      append_label (widget, snapshot, _("The loss appears here once training starts"),
                    width / 2, height / 2, 0.5, 0.5, &dim);
      return;
    }

  draw_axes (self, snapshot, &f, &fg);

  cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));
  cairo_rectangle (cr, f.plot.origin.x, f.plot.origin.y, f.plot.size.width + 1,
                   f.plot.size.height + 1);
  cairo_clip (cr);
  cairo_set_line_join (cr, CAIRO_LINE_JOIN_ROUND);

  faint = accent;
  faint.alpha *= 0.35;
  gdk_cairo_set_source_rgba (cr, &faint);
  cairo_set_line_width (cr, 1.0);
  draw_curve (self, cr, &f, FALSE);
  cairo_stroke (cr);

  gdk_cairo_set_source_rgba (cr, &accent);
  cairo_set_line_width (cr, 2.0);
  draw_curve (self, cr, &f, TRUE);
  cairo_stroke (cr);

  if (self->hover_x >= f.plot.origin.x && self->hover_x <= f.plot.origin.x + f.plot.size.width)
    {
      const LossPoint *p = nearest_point (self, &f, self->hover_x);
      double x = frame_x (&f, p->step);
      GdkRGBA marker = fg;

      marker.alpha *= 0.4;
      gdk_cairo_set_source_rgba (cr, &marker);
      cairo_set_line_width (cr, 1.0);
      cairo_move_to (cr, x + 0.5, f.plot.origin.y);
      cairo_line_to (cr, x + 0.5, f.plot.origin.y + f.plot.size.height);
      cairo_stroke (cr);
      if (isfinite (p->loss))
        {
          gdk_cairo_set_source_rgba (cr, &accent);
          cairo_arc (cr, x, frame_y (&f, value_to_axis (self, p->loss)), 3.5, 0, 2 * G_PI);
          cairo_fill (cr);
        }
    }
  cairo_destroy (cr);

  if (self->hover_x >= f.plot.origin.x && self->hover_x <= f.plot.origin.x + f.plot.size.width)
    {
      g_autofree char *readout = format_readout (nearest_point (self, &f, self->hover_x));

      append_label (widget, snapshot, readout, f.plot.origin.x + 8, f.plot.origin.y + 4,
                    0.0, 0.0, &fg);
    }
}

static void
dc_loss_chart_measure (GtkWidget      *widget,
                       GtkOrientation  orientation,
                       int             for_size,
                       int            *minimum,
                       int            *natural,
                       int            *minimum_baseline,
                       int            *natural_baseline)
{
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      *minimum = 220;
      *natural = 480;
    }
  else
    {
      *minimum = 140;
      *natural = 240;
    }
}

static void
dc_loss_chart_css_changed (GtkWidget         *widget,
                           GtkCssStyleChange *change)
{
  GTK_WIDGET_CLASS (dc_loss_chart_parent_class)->css_changed (widget, change);

  /* Light/dark switches change the colours drawn by hand. */
  gtk_widget_queue_draw (widget);
}

static void
motion_cb (GtkEventControllerMotion *controller,
           double                    x,
           double                    y,
           DcLossChart              *self)
{
  self->hover_x = x;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
leave_cb (GtkEventControllerMotion *controller,
          DcLossChart              *self)
{
  self->hover_x = -1;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

/**
 * dc_loss_chart_append:
 * @step: the training step; steps must increase
 * @loss: the loss at that step (a non-finite loss leaves a gap)
 */
void
dc_loss_chart_append (DcLossChart *self,
                      guint        step,
                      double       loss)
{
  LossPoint point = { step, loss, loss };

  g_return_if_fail (DC_IS_LOSS_CHART (self));

  if (isfinite (loss))
    {
      self->ema = SMOOTHING_BETA * self->ema + (1.0 - SMOOTHING_BETA) * loss;
      self->beta_power *= SMOOTHING_BETA;
      point.smoothed = self->ema / (1.0 - self->beta_power);
    }
  else if (self->points->len > 0)
    {
      point.smoothed = g_array_index (self->points, LossPoint, self->points->len - 1).smoothed;
    }

  g_array_append_val (self->points, point);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_POINTS]);
}

void
dc_loss_chart_clear (DcLossChart *self)
{
  g_return_if_fail (DC_IS_LOSS_CHART (self));

  if (self->points->len == 0)
    return;
  g_array_set_size (self->points, 0);
  self->ema = 0;
  self->beta_power = 1.0;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_POINTS]);
}

guint
dc_loss_chart_get_n_points (DcLossChart *self)
{
  g_return_val_if_fail (DC_IS_LOSS_CHART (self), 0);

  return self->points->len;
}

/**
 * dc_loss_chart_get_smoothed:
 *
 * Returns: the smoothed loss at the last step, or NaN with no points
 */
double
dc_loss_chart_get_smoothed (DcLossChart *self)
{
  g_return_val_if_fail (DC_IS_LOSS_CHART (self), NAN);

  if (self->points->len == 0)
    return NAN;
  return g_array_index (self->points, LossPoint, self->points->len - 1).smoothed;
}

gboolean
dc_loss_chart_get_log_scale (DcLossChart *self)
{
  g_return_val_if_fail (DC_IS_LOSS_CHART (self), FALSE);

  return self->log_scale;
}

void
dc_loss_chart_set_log_scale (DcLossChart *self,
                             gboolean     log_scale)
{
  g_return_if_fail (DC_IS_LOSS_CHART (self));

  log_scale = !!log_scale;
  if (self->log_scale == log_scale)
    return;
  self->log_scale = log_scale;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_LOG_SCALE]);
}

/**
 * dc_loss_chart_dup_readout_at:
 * @x: a horizontal position in widget coordinates
 *
 * Returns: (transfer full) (nullable): the hover read-out for the step nearest
 *   to @x, or %NULL when @x is outside the plot or there are no points
 */
char *
dc_loss_chart_dup_readout_at (DcLossChart *self,
                              double       x)
{
  ChartFrame f;

  g_return_val_if_fail (DC_IS_LOSS_CHART (self), NULL);

  if (!compute_frame (self, gtk_widget_get_width (GTK_WIDGET (self)),
                      gtk_widget_get_height (GTK_WIDGET (self)), &f) ||
      x < f.plot.origin.x || x > f.plot.origin.x + f.plot.size.width)
    return NULL;
  return format_readout (nearest_point (self, &f, x));
}

static void
dc_loss_chart_get_property (GObject    *object,
                            guint       prop_id,
                            GValue     *value,
                            GParamSpec *pspec)
{
  DcLossChart *self = DC_LOSS_CHART (object);

  switch (prop_id)
    {
    case PROP_LOG_SCALE:
      g_value_set_boolean (value, self->log_scale);
      break;

    case PROP_N_POINTS:
      g_value_set_uint (value, self->points->len);
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_loss_chart_set_property (GObject      *object,
                            guint         prop_id,
                            const GValue *value,
                            GParamSpec   *pspec)
{
  DcLossChart *self = DC_LOSS_CHART (object);

  switch (prop_id)
    {
    case PROP_LOG_SCALE:
      dc_loss_chart_set_log_scale (self, g_value_get_boolean (value));
      break;

    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
dc_loss_chart_finalize (GObject *object)
{
  DcLossChart *self = DC_LOSS_CHART (object);

  g_clear_pointer (&self->points, g_array_unref);

  G_OBJECT_CLASS (dc_loss_chart_parent_class)->finalize (object);
}

static void
dc_loss_chart_class_init (DcLossChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = dc_loss_chart_finalize;
  object_class->get_property = dc_loss_chart_get_property;
  object_class->set_property = dc_loss_chart_set_property;
  widget_class->snapshot = dc_loss_chart_snapshot;
  widget_class->measure = dc_loss_chart_measure;
  widget_class->css_changed = dc_loss_chart_css_changed;

  properties[PROP_LOG_SCALE] =
    g_param_spec_boolean ("log-scale", NULL, NULL, FALSE,
                          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_N_POINTS] =
    g_param_spec_uint ("n-points", NULL, NULL, 0, G_MAXUINT, 0,
                       G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_css_name (widget_class, "losschart");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
dc_loss_chart_init (DcLossChart *self)
{
  GtkEventController *motion;

  self->points = g_array_new (FALSE, FALSE, sizeof (LossPoint));
  self->beta_power = 1.0;
  self->hover_x = -1;

  motion = gtk_event_controller_motion_new ();
  g_signal_connect (motion, "motion", G_CALLBACK (motion_cb), self);
  g_signal_connect (motion, "leave", G_CALLBACK (leave_cb), self);
  gtk_widget_add_controller (GTK_WIDGET (self), motion);

  gtk_widget_set_hexpand (GTK_WIDGET (self), TRUE);
  gtk_widget_set_vexpand (GTK_WIDGET (self), TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self),
                                  GTK_ACCESSIBLE_PROPERTY_LABEL, _("Training loss chart"),
                                  -1);
}
