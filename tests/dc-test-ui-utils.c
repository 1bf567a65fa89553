/* dc-test-ui-utils.c: waiting for frames and rendering widgets to PNG files.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-test-ui-utils.h"
#include "dc-test-utils.h"

typedef struct
{
  guint seen;
  guint wanted;
} FrameCount;

static gboolean
frames_passed (gpointer user_data)
{
  FrameCount *count = user_data;

  return count->seen >= count->wanted;
}

static gboolean
count_frame_cb (GtkWidget     *widget,
                GdkFrameClock *clock,
                gpointer       user_data)
{
  FrameCount *count = user_data;

  count->seen++;
  return G_SOURCE_CONTINUE;
}

/* Lets the widget lay out and draw @n_frames frames (or two seconds pass). */
void
dc_test_wait_frames (GtkWidget *widget,
                     guint      n_frames)
{
  FrameCount count = { 0, n_frames };
  guint tick;

  tick = gtk_widget_add_tick_callback (widget, count_frame_cb, &count, NULL);
  gtk_widget_queue_draw (widget);
  dc_test_wait_until (frames_passed, &count, 2000);
  gtk_widget_remove_tick_callback (widget, tick);
}

/**
 * dc_test_render_widget:
 * @screenshot_name: saved as build/tests/screenshots/NAME.png
 *
 * Draws @widget as it is now through its window's renderer.
 *
 * Returns: (transfer full): the rendered texture
 */
GdkTexture *
dc_test_render_widget (GtkWidget  *widget,
                       const char *screenshot_name)
{
  g_autoptr(GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  g_autoptr(GtkSnapshot) snapshot = gtk_snapshot_new ();
  g_autoptr(GskRenderNode) node = NULL;
  g_autofree char *dir = dc_test_dup_build_path ("tests", "screenshots", NULL);
  g_autofree char *file = g_strdup_printf ("%s.png", screenshot_name);
  g_autofree char *path = g_build_filename (dir, file, NULL);
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (widget));
  GdkTexture *texture;

  dc_test_wait_frames (widget, 3);

  gdk_paintable_snapshot (paintable, snapshot,
                          gtk_widget_get_width (widget), gtk_widget_get_height (widget));
  node = gtk_snapshot_free_to_node (g_steal_pointer (&snapshot));
  g_assert_nonnull (node);
  texture = gsk_renderer_render_texture (renderer, node, NULL);
  g_assert_nonnull (texture);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (gdk_texture_save_to_png (texture, path));
  g_test_message ("screenshot: %s", path);
  return texture;
}
