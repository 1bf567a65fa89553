/* dc-cli-export.c: `daisychain-cli export`, a checkpoint as a Hugging Face
 * folder (--hf) or as the inference kit, one offline HTML file (--kit).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"
#include "model/dc-checkpoint.h"
#include "model/dc-hf-export.h"
#include "model/dc-kit-export.h"

#include <math.h>
#include <glib/gstdio.h>

int
dc_cli_export_run (const DcCliCommand  *command,
                   DcCliOptions        *options,
                   int                  argc,
                   char               **argv)
{
  g_autofree char *checkpoint = NULL, *hf = NULL, *kit = NULL;
  const GOptionEntry entries[] = {
    { "checkpoint", 0, 0, G_OPTION_ARG_FILENAME, &checkpoint, N_("The .pt file"), "FILE" },
    { "hf", 0, 0, G_OPTION_ARG_FILENAME, &hf, N_("Folder to write (created if missing)"), "DIR" },
    { "kit", 0, 0, G_OPTION_ARG_FILENAME, &kit,
      N_("Inference kit to write: one offline HTML file"), "FILE" },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (checkpoint == NULL || (hf == NULL && kit == NULL))
    return dc_cli_usage_error (command, _("--checkpoint and --hf or --kit are required"));

  model = dc_checkpoint_load (checkpoint, NULL, &error);
  if (model == NULL || (hf != NULL && !dc_hf_export (model, hf, &error)))
    return dc_cli_fail (options, error);
  /* Checkpoints do not record a loss: the kit says "not recorded". */
  if (kit != NULL && !dc_kit_export (model, NAN, kit, NULL, &error))
    return dc_cli_fail (options, error);
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "event");
      json_builder_add_string_value (builder, "exported");
      if (hf != NULL)
        {
          json_builder_set_member_name (builder, "dir");
          json_builder_add_string_value (builder, hf);
        }
      if (kit != NULL)
        {
          GStatBuf st;
          g_autofree char *hash = dc_gpt_model_dup_hash (model);

          json_builder_set_member_name (builder, "kit");
          json_builder_add_string_value (builder, kit);
          json_builder_set_member_name (builder, "bytes");
          json_builder_add_int_value (builder, g_stat (kit, &st) == 0 ? (gint64) st.st_size : -1);
          json_builder_set_member_name (builder, "weight_hash");
          json_builder_add_string_value (builder, hash);
        }
      json_builder_set_member_name (builder, "step");
      json_builder_add_int_value (builder, model->step);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      if (hf != NULL)
        g_print (_("Exported %s\n"), hf);
      if (kit != NULL)
        g_print (_("Exported %s\n"), kit);
    }
  return DC_CLI_EXIT_OK;
}
