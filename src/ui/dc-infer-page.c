/* dc-infer-page.c: the Infer view.
 *
 * The model dialog, the ring plan and the token stream arrive with the
 * inference ring issue; until then the view says what it is for.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-ui"

#include "config.h"

#include "dc-infer-page.h"

struct _DcInferPage
{
  AdwBin parent_instance;
};

G_DEFINE_FINAL_TYPE (DcInferPage, dc_infer_page, ADW_TYPE_BIN)

static void
dc_infer_page_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), DC_TYPE_INFER_PAGE);

  G_OBJECT_CLASS (dc_infer_page_parent_class)->dispose (object);
}

static void
dc_infer_page_class_init (DcInferPageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = dc_infer_page_dispose;
  gtk_widget_class_set_template_from_resource (widget_class,
                                               RESOURCE_BASE "/ui/dc-infer-page.ui");
}

static void
dc_infer_page_init (DcInferPage *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}
