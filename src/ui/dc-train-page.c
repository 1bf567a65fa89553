/* dc-train-page.c: the Train view.
 *
 * The settings, the live loss chart and the run controls arrive with the
 * single-device training issue; until then the view says what it is for.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include "dc-train-page.h"

struct _DcTrainPage
{
  AdwBin parent_instance;
};

G_DEFINE_FINAL_TYPE (DcTrainPage, dc_train_page, ADW_TYPE_BIN)

static void
dc_train_page_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), DC_TYPE_TRAIN_PAGE);

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
}

static void
dc_train_page_init (DcTrainPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
