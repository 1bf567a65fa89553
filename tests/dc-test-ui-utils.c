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

/* Lets the widget lay out and draw @n_frames frames, or 20 s pass. Frames
 * come every ~16 ms; on a machine at load 20 the first ones of a new window
 * took over 2 s (the former bound: a screenshot of an unmapped widget then
 * had no render node, 2026-12-02), so only a hang reaches this one. */
void
dc_test_wait_frames (GtkWidget *widget,
                     guint      n_frames)
{
  FrameCount count = { 0, n_frames };
  guint tick;

  tick = gtk_widget_add_tick_callback (widget, count_frame_cb, &count, NULL);
  gtk_widget_queue_draw (widget);
  if (!dc_test_wait_until (frames_passed, &count, 20000))
    g_test_message ("%u of %u frames in 20 s", count.seen, count.wanted);
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

/* Conditions for dc_test_wait_until (). */
gboolean
dc_test_widget_is_mapped (gpointer widget)
{
  return gtk_widget_get_mapped (GTK_WIDGET (widget));
}

gboolean
dc_test_app_has_no_windows (gpointer application)
{
  return gtk_application_get_windows (GTK_APPLICATION (application)) == NULL;
}

/**
 * dc_test_find_toplevel:
 * @match: (nullable): a further condition, or %NULL for any
 *
 * Returns: (transfer none) (nullable): a mapped toplevel of @type that
 *   @match accepts, or %NULL
 */
GtkWidget *
dc_test_find_toplevel (GType             type,
                       DcTestWidgetMatch match,
                       gpointer          user_data)
{
  GListModel *toplevels = gtk_window_get_toplevels ();

  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr(GtkWidget) window = g_list_model_get_item (toplevels, i);

      if (G_TYPE_CHECK_INSTANCE_TYPE (window, type) && gtk_widget_get_mapped (window)
          && (match == NULL || match (window, user_data)))
        return window;  /* the toplevel list keeps its own reference */
    }
  return NULL;
}

/* A condition: a mapped toplevel of the GType in @gtype exists. */
gboolean
dc_test_toplevel_is_mapped (gpointer gtype)
{
  return dc_test_find_toplevel (GPOINTER_TO_SIZE (gtype), NULL, NULL) != NULL;
}

/**
 * dc_test_find_descendant:
 *
 * Searches the widget tree under @root (itself included), depth first, as a
 * person would look at the window.
 *
 * Returns: (transfer none) (nullable): the first widget @match accepts
 */
GtkWidget *
dc_test_find_descendant (GtkWidget        *root,
                         DcTestWidgetMatch match,
                         gpointer          user_data)
{
  if (match (root, user_data))
    return root;
  for (GtkWidget *child = gtk_widget_get_first_child (root); child != NULL;
       child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = dc_test_find_descendant (child, match, user_data);

      if (found != NULL)
        return found;
    }
  return NULL;
}
