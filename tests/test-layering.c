/* test-layering.c: the core library stays headless.
 *
 * Nothing outside src/ui/ may include GTK or libadwaita (shared/DESIGN.md,
 * "Layers"); the engine must be usable with no display.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <glib.h>

#include "dc-test-utils.h"

static gboolean
line_includes_toolkit (const char *line)
{
  const char *p = line;

  while (*p == ' ' || *p == '\t')
    p++;
  if (*p != '#')
    return FALSE;
  p++;
  while (*p == ' ' || *p == '\t')
    p++;
  if (!g_str_has_prefix (p, "include"))
    return FALSE;
  return strstr (p, "gtk/") != NULL || strstr (p, "gdk/") != NULL ||
         strstr (p, "adwaita.h") != NULL || strstr (p, "gsk/") != NULL;
}

/* Appends "path:line" for each offending include under @dir, recursively. */
static void
scan_dir (const char *dir,
          gboolean    allowed,
          GPtrArray  *offenders,
          guint      *n_files)
{
  g_autoptr(GDir) handle = NULL;
  g_autoptr(GError) error = NULL;
  const char *name;

  handle = g_dir_open (dir, 0, &error);
  g_assert_no_error (error);

  while ((name = g_dir_read_name (handle)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);

      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        {
          /* src/ui/ and everything under it may use the toolkit. */
          scan_dir (path, allowed || g_str_has_suffix (path, "/src/ui"), offenders, n_files);
        }
      else if (g_str_has_suffix (name, ".c") || g_str_has_suffix (name, ".h"))
        {
          g_autofree char *contents = NULL;
          g_auto(GStrv) lines = NULL;

          (*n_files)++;
          if (allowed)
            continue;
          g_file_get_contents (path, &contents, NULL, &error);
          g_assert_no_error (error);
          lines = g_strsplit (contents, "\n", -1);
          for (guint i = 0; lines[i] != NULL; i++)
            if (line_includes_toolkit (lines[i]))
              g_ptr_array_add (offenders, g_strdup_printf ("%s:%u: %s", path, i + 1, lines[i]));
        }
    }
}

static void
test_core_is_headless (void)
{
  g_autofree char *src = dc_test_dup_source_path ("src", NULL);
  g_autoptr(GPtrArray) offenders = g_ptr_array_new_with_free_func (g_free);
  guint n_files = 0;

  scan_dir (src, FALSE, offenders, &n_files);

  g_assert_cmpuint (n_files, >, 10);  /* the scan did reach the sources */
  for (guint i = 0; i < offenders->len; i++)
    g_test_message ("toolkit include outside src/ui/: %s", (char *) offenders->pdata[i]);
  g_assert_cmpuint (offenders->len, ==, 0);
}

static void
test_detector (void)
{
  /* The check itself must catch the spellings a file could use. */
  g_assert_true (line_includes_toolkit ("#include <gtk/gtk.h>"));
  g_assert_true (line_includes_toolkit ("  #  include \"adwaita.h\""));
  g_assert_true (line_includes_toolkit ("#include <gdk/gdk.h>"));
  g_assert_false (line_includes_toolkit ("#include <glib.h>"));
  g_assert_false (line_includes_toolkit ("/* gtk/gtk.h is not allowed here */"));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/layering/detector", test_detector);
  g_test_add_func ("/dc/layering/core-is-headless", test_core_is_headless);

  return g_test_run ();
}
