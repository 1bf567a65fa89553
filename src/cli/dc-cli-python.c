/* dc-cli-python.c: a carried script under the first python3 that runs it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <gio/gio.h>
#include <glib/gi18n.h>

#include "dc-cli-python.h"
#include "dc-cli-resources.h"

/**
 * dc_cli_python_run:
 * @resource: the script's path in the program's resources
 * @args: (array zero-terminated=1): its arguments
 *
 * Runs the script as `python3 -c SCRIPT ARGS…` under the first interpreter
 * that runs it to a zero exit status: $DC_BENCH_PYTHON, then Debian's
 * /usr/bin/python3 (where python3-torch and numpy live), then python3 on
 * PATH (the GPU machine keeps torch in its own). An interpreter that lacks a
 * module the script imports fails and the next one is tried.
 *
 * Returns: (transfer full) (nullable): the script's standard output, or %NULL
 *   with @error naming the last failure
 */
char *
dc_cli_python_run (const char         *resource,
                   const char * const *args,
                   GError            **error)
{
  g_autoptr(GBytes) script = g_resource_lookup_data (dc_cli_get_resource (), resource,
                                                     G_RESOURCE_LOOKUP_FLAGS_NONE, error);
  const char *candidates[] = { g_getenv ("DC_BENCH_PYTHON"), "/usr/bin/python3", "python3" };
  g_autofree char *text = NULL;
  g_autofree char *failure = NULL;

  if (script == NULL)
    return NULL;
  text = g_strndup (g_bytes_get_data (script, NULL), g_bytes_get_size (script));
  for (guint c = 0; c < G_N_ELEMENTS (candidates); c++)
    {
      g_autoptr(GPtrArray) argv = g_ptr_array_new ();
      g_autoptr(GError) local = NULL;
      g_autofree char *out = NULL;
      g_autofree char *err = NULL;
      int status = 0;

      if (candidates[c] == NULL)
        continue;
      g_ptr_array_add (argv, (gpointer) candidates[c]);
      g_ptr_array_add (argv, (gpointer) "-c");
      g_ptr_array_add (argv, text);
      for (guint i = 0; args[i] != NULL; i++)
        g_ptr_array_add (argv, (gpointer) args[i]);
      g_ptr_array_add (argv, NULL);
      if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                         &out, &err, &status, &local))
        {
          g_free (failure);
          failure = g_strdup_printf ("%s: %s", candidates[c], local->message);
          continue;
        }
      if (g_spawn_check_wait_status (status, NULL))
        return g_steal_pointer (&out);
      {
        g_auto(GStrv) lines = g_strsplit (g_strstrip (err), "\n", -1);
        guint n = g_strv_length (lines);

        g_free (failure);
        failure = g_strdup_printf ("%s: %s", candidates[c], n > 0 ? lines[n - 1] : "failed");
      }
    }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, _("%s: no python3 ran it (%s; set "
                                                       "DC_BENCH_PYTHON)"),
               resource, failure != NULL ? failure : _("none found"));
  return NULL;
}
