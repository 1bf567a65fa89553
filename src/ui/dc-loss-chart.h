/* dc-loss-chart.h
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define DC_TYPE_LOSS_CHART (dc_loss_chart_get_type ())

G_DECLARE_FINAL_TYPE (DcLossChart, dc_loss_chart, DC, LOSS_CHART, GtkWidget)

GtkWidget *dc_loss_chart_new            (void);
void       dc_loss_chart_append         (DcLossChart *self,
                                         guint        step,
                                         double       loss);
void       dc_loss_chart_clear          (DcLossChart *self);
guint      dc_loss_chart_get_n_points   (DcLossChart *self);
gboolean   dc_loss_chart_get_log_scale  (DcLossChart *self);
void       dc_loss_chart_set_log_scale  (DcLossChart *self,
                                         gboolean     log_scale);
double     dc_loss_chart_get_smoothed   (DcLossChart *self);
char      *dc_loss_chart_dup_readout_at (DcLossChart *self,
                                         double       x);

G_END_DECLS
