/* test-layering.c: the core library stays headless, and its layers point down.
 *
 * Nothing outside src/ui/ may include GTK or libadwaita (shared/DESIGN.md,
 * "Layers"); the engine must be usable with no display. The core layers
 * include only the layers below them: engine/ nothing of the others; model/
 * only engine/; data/ and mesh/ nothing of model/, train/, infer/; train/
 * and infer/ nothing of ui/ or cli/. The shared context (src/dc-context.h)
 * sits at the train/infer level: the layers below may not include it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <glib.h>
#include <glib/gstdio.h>

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


/* The layer an #include line reaches ("model" for "model/dc-gpt.h" or
 * "../model/dc-gpt.h", "context" for the shared context), or NULL for a
 * file of the same layer, a shared root header or a system header. */
static char *
dup_included_layer (const char *line)
{
  static const char * const layers[] = {
    "engine", "model", "data", "mesh", "train", "infer", "ui", "cli",
  };
  const char *p = line;
  const char *end;
  g_autofree char *target = NULL;

  while (*p == ' ' || *p == '\t')
    p++;
  if (*p != '#')
    return NULL;
  p++;
  while (*p == ' ' || *p == '\t')
    p++;
  if (!g_str_has_prefix (p, "include"))
    return NULL;
  p += strlen ("include");
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p != '"' && *p != '<')
    return NULL;
  end = strchr (p + 1, *p == '"' ? '"' : '>');
  if (end == NULL)
    return NULL;
  target = g_strndup (p + 1, end - p - 1);
  p = target;
  while (g_str_has_prefix (p, "../"))
    p += 3;
  if (g_str_equal (p, "dc-context.h"))
    return g_strdup ("context");
  for (guint i = 0; i < G_N_ELEMENTS (layers); i++)
    if (g_str_has_prefix (p, layers[i]) && p[strlen (layers[i])] == '/')
      return g_strdup (layers[i]);
  return NULL;
}

/* Which layers a layer may not include. */
static gboolean
layer_forbids (const char *layer,
               const char *included)
{
  static const struct { const char *layer; const char *forbidden; } rules[] = {
    { "engine", "model data mesh train infer ui cli context" },
    { "model",  "data mesh train infer ui cli context" },
    { "data",   "model train infer ui cli context" },
    { "mesh",   "model train infer ui cli context" },
    { "train",  "ui cli" },
    { "infer",  "ui cli" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rules); i++)
    if (g_str_equal (layer, rules[i].layer))
      {
        g_auto(GStrv) names = g_strsplit (rules[i].forbidden, " ", -1);

        return g_strv_contains ((const char * const *) names, included);
      }
  return FALSE;
}

/* Appends "path:line: text" for each include under @src/@layer that reaches
 * a layer it may not; counts the files read. */
static void
scan_layer (const char *dir,
            const char *layer,
            GPtrArray  *offenders,
            guint      *n_files)
{
  g_autoptr(GDir) handle = NULL;
  const char *name;

  handle = g_dir_open (dir, 0, NULL);
  if (handle == NULL)
    return;  /* a layer not written yet (infer/) */
  while ((name = g_dir_read_name (handle)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *contents = NULL;
      g_auto(GStrv) lines = NULL;
      g_autoptr(GError) error = NULL;

      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        {
          scan_layer (path, layer, offenders, n_files);
          continue;
        }
      if (!g_str_has_suffix (name, ".c") && !g_str_has_suffix (name, ".h"))
        continue;
      (*n_files)++;
      g_file_get_contents (path, &contents, NULL, &error);
      g_assert_no_error (error);
      lines = g_strsplit (contents, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        {
          g_autofree char *included = dup_included_layer (lines[i]);

          if (included != NULL && layer_forbids (layer, included))
            g_ptr_array_add (offenders, g_strdup_printf ("%s:%u: %s (%s may not include %s)",
                                                         path, i + 1, lines[i], layer,
                                                         included));
        }
    }
}

static void
scan_layers (const char *src,
             GPtrArray  *offenders,
             guint      *n_files)
{
  static const char * const layers[] = { "engine", "model", "data", "mesh", "train", "infer" };

  for (guint i = 0; i < G_N_ELEMENTS (layers); i++)
    {
      g_autofree char *dir = g_build_filename (src, layers[i], NULL);

      scan_layer (dir, layers[i], offenders, n_files);
    }
}

static void
test_layers_point_down (void)
{
  g_autofree char *src = dc_test_dup_source_path ("src", NULL);
  g_autoptr(GPtrArray) offenders = g_ptr_array_new_with_free_func (g_free);
  guint n_files = 0;

  scan_layers (src, offenders, &n_files);

  g_assert_cmpuint (n_files, >, 50);  /* the scan did reach every core layer */
  for (guint i = 0; i < offenders->len; i++)
    g_test_message ("include against the layer order: %s", (char *) offenders->pdata[i]);
  g_assert_cmpuint (offenders->len, ==, 0);
}

static void
write_file (const char *dir,
            const char *name,
            const char *contents)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr(GError) error = NULL;

  g_mkdir_with_parents (dir, 0700);
  g_file_set_contents (path, contents, -1, &error);
  g_assert_no_error (error);
}

/* The order check must catch what it is for: a planted tree with one
 * violation per rule gives exactly those, and the allowed includes none. */
static void
test_layer_detector (void)
{
  g_autofree char *src = g_dir_make_tmp ("dc-layering-XXXXXX", NULL);
  g_autofree char *engine = g_build_filename (src, "engine", NULL);
  g_autofree char *model = g_build_filename (src, "model", NULL);
  g_autofree char *data = g_build_filename (src, "data", NULL);
  g_autofree char *mesh = g_build_filename (src, "mesh", NULL);
  g_autofree char *train = g_build_filename (src, "train", NULL);
  g_autoptr(GPtrArray) offenders = g_ptr_array_new_with_free_func (g_free);
  guint n_files = 0;
  g_autofree char *layer = NULL;

  layer = dup_included_layer ("  #  include \"../model/dc-gpt.h\"");
  g_assert_cmpstr (layer, ==, "model");
  g_clear_pointer (&layer, g_free);
  layer = dup_included_layer ("#include <gio/gio.h>");
  g_assert_null (layer);
  layer = dup_included_layer ("#include \"dc-gpt-trainer.h\"");
  g_assert_null (layer);
  layer = dup_included_layer ("/* #include \"ui/dc-window.h\" */");
  g_assert_null (layer);

  write_file (engine, "a.c", "#include \"engine/dc-gemm.h\"\n#include \"model/dc-gpt.h\"\n");
  write_file (model, "b.c", "#include \"engine/dc-gemm.h\"\n#include \"data/dc-dataset.h\"\n"
                            "#include \"dc-context.h\"\n#include \"dc-json-bounds.h\"\n");
  write_file (data, "c.h", "#include \"train/dc-train-plan.h\"\n");
  write_file (mesh, "d.c", "#include \"model/dc-gpt.h\"\n#include \"data/dc-hf-client.h\"\n");
  write_file (train, "e.c", "#include \"model/dc-gpt-trainer.h\"\n#include \"dc-context.h\"\n"
                            "#include \"ui/dc-window.h\"\n#include \"cli/dc-cli.h\"\n");

  scan_layers (src, offenders, &n_files);
  for (guint i = 0; i < offenders->len; i++)
    g_test_message ("caught: %s", (char *) offenders->pdata[i]);
  g_assert_cmpuint (n_files, ==, 5);
  /* engine→model, model→data, model→context, data→train, mesh→model,
   * train→ui, train→cli. */
  g_assert_cmpuint (offenders->len, ==, 7);
  dc_test_remove_tree (src);
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
  g_test_add_func ("/dc/layering/layer-detector", test_layer_detector);
  g_test_add_func ("/dc/layering/layers-point-down", test_layers_point_down);

  return g_test_run ();
}
