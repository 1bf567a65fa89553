/* dc-cli-info.c: `daisychain-cli info`, what this build is and what it finds.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"
#include "dc-version.h"
#include "engine/dc-vk-context.h"

int
dc_cli_info_run (const DcCliCommand  *command,
                 DcCliOptions        *options,
                 int                  argc,
                 char               **argv)
{
  g_autoptr(GPtrArray) devices = NULL;
  g_autoptr(GError) vk_error = NULL;
  g_autofree char *libraries = NULL;
  g_auto(GStrv) library_lines = NULL;

  if (!dc_cli_parse_options (command, options, NULL, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);

  libraries = dc_version_dup_library_info ();
  library_lines = g_strsplit (libraries, "\n", -1);
  /* No Vulkan is a normal state (the CPU path computes the same bits): report it. */
  devices = dc_vk_list_devices (&vk_error);

  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "version");
      json_builder_add_string_value (builder, dc_version_get_string ());
      json_builder_set_member_name (builder, "app_id");
      json_builder_add_string_value (builder, dc_version_get_app_id ());
      json_builder_set_member_name (builder, "libraries");
      json_builder_begin_array (builder);
      for (guint i = 0; library_lines[i] != NULL; i++)
        json_builder_add_string_value (builder, library_lines[i]);
      json_builder_end_array (builder);
      json_builder_set_member_name (builder, "vulkan_devices");
      json_builder_begin_array (builder);
      for (guint i = 0; devices != NULL && i < devices->len; i++)
        {
          DcVkDeviceInfo *info = g_ptr_array_index (devices, i);

          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "index");
          json_builder_add_int_value (builder, i);
          json_builder_set_member_name (builder, "id");
          json_builder_add_string_value (builder, info->id);
          json_builder_set_member_name (builder, "name");
          json_builder_add_string_value (builder, info->name);
          json_builder_set_member_name (builder, "uuid");
          json_builder_add_string_value (builder, info->uuid);
          json_builder_set_member_name (builder, "driver");
          json_builder_add_string_value (builder, info->driver);
          json_builder_set_member_name (builder, "type");
          json_builder_add_string_value (builder, dc_vk_device_type_to_string (info->type));
          json_builder_set_member_name (builder, "compute");
          json_builder_add_boolean_value (builder, info->has_compute);
          json_builder_set_member_name (builder, "float32_controls");
          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "denorm_preserve");
          json_builder_add_boolean_value (builder, info->float32_denorm_preserve);
          json_builder_set_member_name (builder, "rounding_mode_rte");
          json_builder_add_boolean_value (builder, info->float32_rounding_rte);
          json_builder_set_member_name (builder, "signed_zero_inf_nan_preserve");
          json_builder_add_boolean_value (builder, info->float32_signed_zero_inf_nan);
          json_builder_end_object (builder);
          json_builder_end_object (builder);
        }
      json_builder_end_array (builder);
      if (vk_error != NULL)
        {
          json_builder_set_member_name (builder, "vulkan_error");
          json_builder_add_string_value (builder, vk_error->message);
        }
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print ("DaisyChain %s (%s)\n", dc_version_get_string (), dc_version_get_app_id ());
      for (guint i = 0; library_lines[i] != NULL; i++)
        g_print ("  %s\n", library_lines[i]);
      if (vk_error != NULL)
        g_print (_("Vulkan: unavailable: %s\n"), vk_error->message);
      else if (devices->len == 0)
        g_print (_("Vulkan: no devices\n"));
      for (guint i = 0; devices != NULL && i < devices->len; i++)
        {
          DcVkDeviceInfo *info = g_ptr_array_index (devices, i);

          g_print (_("Vulkan device %u: %s (%s, API %u.%u)%s\n"), i, info->name,
                   dc_vk_device_type_to_string (info->type),
                   VK_API_VERSION_MAJOR (info->api_version),
                   VK_API_VERSION_MINOR (info->api_version),
                   info->has_compute ? "" : _(", no compute queue"));
          /* The id is what --vulkan-device and Preferences take. */
          g_print (_("  id: %s, driver: %s\n"), info->id,
                   *info->driver != '\0' ? info->driver : _("unknown"));
          /* What the native-float kernels may declare (docs/VERIFICATION.md). */
          g_print (_("  float controls (32-bit): denormPreserve=%s roundingModeRTE=%s "
                     "signedZeroInfNanPreserve=%s\n"),
                   info->float32_denorm_preserve ? "yes" : "no",
                   info->float32_rounding_rte ? "yes" : "no",
                   info->float32_signed_zero_inf_nan ? "yes" : "no");
        }
    }
  return DC_CLI_EXIT_OK;
}
