/* dc-cli-output.c: option parsing and output shared by the subcommands.
 *
 * With --json every line on stdout is one JSON object (docs/CLI.md); human
 * text goes to stdout without it, and errors always go to stderr as well.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <glib/gi18n.h>

#include "dc-cli.h"

/* The CPU time this process has used so far, all its threads, ms: it
 * advances only while they run, so it tells a process's own work apart from
 * a machine shared with other programs (bench's GOPS per CPU-second, the
 * training step lines' `cpu_ms`, which bench group compares between a
 * device in a group and one alone). -1 when unknown. */
double
dc_cli_process_cpu_ms (void)
{
  struct timespec t;

  if (clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &t) != 0)
    return -1;
  return t.tv_sec * 1000.0 + t.tv_nsec / 1e6;
}

/* /proc/stat's aggregate line: "cpu" and then user, nice, system, idle,
 * iowait, irq, softirq and steal (Linux 2.6.11 on), then guest and
 * guest_nice, which user and nice already count and are left out. FALSE
 * without those eight. */
static gboolean
host_cpu_parse (const char   *stat_text,
                DcCliHostCpu *out)
{
  guint64 v[8];
  const char *p = stat_text;

  if (stat_text == NULL || !g_str_has_prefix (stat_text, "cpu "))
    return FALSE;
  p += 4;
  out->total = 0;
  for (guint i = 0; i < G_N_ELEMENTS (v); i++)
    {
      char *end;

      while (*p == ' ')
        p++;
      if (!g_ascii_isdigit (*p))
        return FALSE;
      errno = 0;
      v[i] = g_ascii_strtoull (p, &end, 10);
      if (errno != 0 || end == p)
        return FALSE;
      out->total += v[i];
      p = end;
    }
  out->steal = v[7];
  return TRUE;
}

/* The machine's CPU time now (host_cpu_parse ()); FALSE where
 * /proc/stat cannot be read. */
gboolean
dc_cli_host_cpu_read (DcCliHostCpu *out)
{
  g_autofree char *text = NULL;

  if (!g_file_get_contents ("/proc/stat", &text, NULL, NULL))
    return FALSE;
  return host_cpu_parse (text, out);
}

/* The share of the machine's CPU time between two readings that the
 * hypervisor took for other guests: what a virtual machine's benchmark
 * lost to its neighbours in that time. -1 when nothing was counted. */
double
dc_cli_host_steal (const DcCliHostCpu *before,
                   const DcCliHostCpu *after)
{
  if (after->total <= before->total || after->steal < before->steal)
    return -1;
  return (double) (after->steal - before->steal) / (double) (after->total - before->total);
}

/* A g_array_sort () order for doubles, ascending (the benches' figures). */
int
dc_cli_compare_doubles (gconstpointer a,
                        gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

/* The median of @values (doubles, sorted in place, so that the first and
 * last are then the range), or -1 when empty. */
double
dc_cli_median (GArray *values)
{
  guint n = values->len;

  if (n == 0)
    return -1;
  g_array_sort (values, dc_cli_compare_doubles);
  return n % 2 ? g_array_index (values, double, n / 2)
               : (g_array_index (values, double, n / 2 - 1)
                  + g_array_index (values, double, n / 2)) / 2;
}

gboolean
dc_cli_parse_options (const DcCliCommand  *command,
                      DcCliOptions        *options,
                      const GOptionEntry  *entries,
                      int                 *argc,
                      char              ***argv)
{
  const GOptionEntry common[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &options->json,
      N_("Print one JSON object per line (fields in docs/CLI.md)"), NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *parameter = NULL;

  parameter = g_strdup_printf ("%s %s", command->name, command->parameter_string);
  context = g_option_context_new (parameter);
  g_option_context_set_summary (context, _(command->summary));
  g_option_context_set_translation_domain (context, GETTEXT_PACKAGE);
  g_option_context_add_main_entries (context, common, GETTEXT_PACKAGE);
  if (entries != NULL)
    g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);

  if (!g_option_context_parse (context, argc, argv, &error))
    {
      g_printerr ("daisychain-cli %s: %s\n", command->name, error->message);
      g_printerr (_("Try “daisychain-cli %s --help”.\n"), command->name);
      return FALSE;
    }
  return TRUE;
}

/**
 * dc_cli_print_json:
 * @builder: a builder holding one complete object
 *
 * Prints the object on one line and flushes, so that a reader of a pipe sees
 * each event as it happens.
 */
void
dc_cli_print_json (JsonBuilder *builder)
{
  g_autoptr(JsonGenerator) generator = json_generator_new ();
  g_autoptr(JsonNode) root = json_builder_get_root (builder);
  g_autofree char *text = NULL;

  json_generator_set_root (generator, root);
  json_generator_set_pretty (generator, FALSE);
  text = json_generator_to_data (generator, NULL);
  fputs (text, stdout);
  fputc ('\n', stdout);
  fflush (stdout);
}

/**
 * dc_cli_fail:
 *
 * Reports @error on stderr and, with --json, as an `{"event": "error"}` line on
 * stdout, so that scripts reading only stdout learn why the command stopped.
 *
 * Returns: %DC_CLI_EXIT_FAILED
 */
int
dc_cli_fail (DcCliOptions *options,
             const GError *error)
{
  g_printerr ("daisychain-cli: %s\n", error->message);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "error");
      json_builder_set_member_name (builder, "message");
      json_builder_add_string_value (builder, error->message);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }

  return DC_CLI_EXIT_FAILED;
}

int
dc_cli_usage_error (const DcCliCommand *command,
                    const char         *format,
                    ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);

  g_printerr ("daisychain-cli %s: %s\n", command->name, message);
  g_printerr (_("Try “daisychain-cli %s --help”.\n"), command->name);
  return DC_CLI_EXIT_USAGE;
}
