/* dc-cli.c: daisychain-cli, the headless face of the engine.
 *
 * `daisychain-cli COMMAND [OPTIONS]`: the commands come from one table
 * (dc-cli-commands.c). Tests, servers and benchmarks drive the program
 * through it; with --json every output line is one JSON object.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <glib/gi18n.h>

#include "dc-cli.h"
#include "dc-version.h"
#include "mesh/dc-gst-quirks.h"

static void
print_help (FILE *stream)
{
  gsize width = 0;

  fprintf (stream, "%s\n  daisychain-cli [--version] [--help] %s\n\n%s\n",
           _("Usage:"), _("COMMAND [OPTIONS…]"),
           _("Train a language model together and run models split across devices, "
             "without a display."));
  fprintf (stream, "\n%s\n", _("Commands:"));
  for (gsize i = 0; i < dc_cli_n_commands; i++)
    width = MAX (width, strlen (dc_cli_commands[i].name));
  for (gsize i = 0; i < dc_cli_n_commands; i++)
    if (!dc_cli_commands[i].hidden)
      fprintf (stream, "  %-*s  %s\n", (int) width, dc_cli_commands[i].name,
               _(dc_cli_commands[i].summary));
  fprintf (stream, "\n%s\n",
           _("Run “daisychain-cli COMMAND --help” for a command's options. "
             "Every command takes --json."));
}

int
dc_cli_version_run (const DcCliCommand  *command,
                    DcCliOptions        *options,
                    int                  argc,
                    char               **argv)
{
  if (!dc_cli_parse_options (command, options, NULL, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "version");
      json_builder_add_string_value (builder, dc_version_get_string ());
      json_builder_set_member_name (builder, "app_id");
      json_builder_add_string_value (builder, dc_version_get_app_id ());
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("daisychain-cli %s\n", dc_version_get_string ());
    }
  return DC_CLI_EXIT_OK;
}

static const DcCliCommand *
lookup_command (const char *name)
{
  for (gsize i = 0; i < dc_cli_n_commands; i++)
    if (g_str_equal (dc_cli_commands[i].name, name))
      return &dc_cli_commands[i];
  return NULL;
}

int
main (int    argc,
      char **argv)
{
  DcCliOptions options = { 0 };
  const DcCliCommand *command;
  int first = 1;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  g_set_prgname ("daisychain-cli");
  /* Standard output carries the results (--json lines that scripts parse):
   * GLib's debug and info lines (G_MESSAGES_DEBUG) go to standard error
   * with the rest of the log, not between them. */
  g_log_writer_default_set_use_stderr (TRUE);
  dc_gst_quirks_install ();

  /* Options before the command: only --help, --version and --json. */
  for (; first < argc && argv[first][0] == '-'; first++)
    {
      if (g_str_equal (argv[first], "--json"))
        {
          options.json = TRUE;
        }
      else if (g_str_equal (argv[first], "--help") || g_str_equal (argv[first], "-h"))
        {
          print_help (stdout);
          return DC_CLI_EXIT_OK;
        }
      else if (g_str_equal (argv[first], "--version") || g_str_equal (argv[first], "-v"))
        {
          char *version_argv[] = { (char *) "version", NULL };

          return dc_cli_version_run (lookup_command ("version"), &options, 1, version_argv);
        }
      else
        {
          g_printerr (_("daisychain-cli: unknown option “%s”\n"), argv[first]);
          print_help (stderr);
          return DC_CLI_EXIT_USAGE;
        }
    }

  if (first >= argc)
    {
      print_help (stderr);
      return DC_CLI_EXIT_USAGE;
    }

  /* Two-word commands ("data read") first, then one-word ones. A two-word
   * command's run function gets the second word as its argv[0]. */
  if (first + 1 < argc && argv[first + 1][0] != '-')
    {
      g_autofree char *pair = g_strconcat (argv[first], " ", argv[first + 1], NULL);

      command = lookup_command (pair);
      if (command != NULL)
        return command->run (command, &options, argc - first - 1, argv + first + 1);
    }

  command = lookup_command (argv[first]);
  if (command == NULL)
    {
      g_printerr (_("daisychain-cli: unknown command “%s”\n"), argv[first]);
      print_help (stderr);
      return DC_CLI_EXIT_USAGE;
    }

  return command->run (command, &options, argc - first, argv + first);
}
