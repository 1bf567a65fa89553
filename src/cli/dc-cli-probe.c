/* dc-cli-probe.c: `daisychain-cli probe`, the hash of a device's arithmetic.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"
#include "engine/dc-gemm-backend.h"
#include "engine/dc-gemm-probe.h"

int
dc_cli_probe_run (const DcCliCommand  *command,
                  DcCliOptions        *options,
                  int                  argc,
                  char               **argv)
{
  g_autofree char *backend_name = NULL;
  g_autofree char *vulkan_device = NULL;
  int n_threads = 0;
  const GOptionEntry entries[] = {
    { "backend", 'b', 0, G_OPTION_ARG_STRING, &backend_name,
      N_("Where the probe runs: cpu-scalar, cpu (default) or vulkan"), N_("BACKEND") },
    { "vulkan-device", 0, 0, G_OPTION_ARG_STRING, &vulkan_device,
      N_("The Vulkan device, by the id “daisychain-cli info” shows (implies --backend vulkan; "
         "default: the best device)"), "ID" },
    { "threads", 't', 0, G_OPTION_ARG_INT, &n_threads,
      N_("CPU threads (default: all processors)"), N_("N") },
    { NULL }
  };
  g_autoptr(DcGemmBackend) backend = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *hash = NULL;
  DcBackendKind kind = DC_BACKEND_CPU;

  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (backend_name != NULL && !dc_backend_kind_from_string (backend_name, &kind))
    return dc_cli_usage_error (command, _("unknown backend “%s” (cpu-scalar, cpu, vulkan)"),
                               backend_name);
  if (vulkan_device != NULL && backend_name == NULL)
    kind = DC_BACKEND_VULKAN;
  else if (vulkan_device != NULL && kind != DC_BACKEND_VULKAN)
    return dc_cli_usage_error (command, _("--vulkan-device needs --backend vulkan"));
  if (n_threads < 0 || n_threads > 1024)
    return dc_cli_usage_error (command, _("--threads must be between 1 and 1024"));

  backend = dc_gemm_backend_new_for_device (kind, vulkan_device, &error);
  if (backend == NULL)
    return dc_cli_fail (options, error);
  if (n_threads > 0)
    dc_gemm_backend_set_n_threads (backend, n_threads);

  hash = dc_gemm_probe (backend, &error);
  if (hash == NULL)
    return dc_cli_fail (options, error);

  /* The backend printed is the one that computed: a Vulkan device whose
   * kernels all failed their gates reports "cpu". */
  if (options->json)
    {
      g_autoptr(JsonBuilder) builder = json_builder_new ();
      DcBackendKind used = dc_gemm_backend_get_kind (backend);

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "backend");
      json_builder_add_string_value (builder, dc_backend_kind_to_string (used));
      json_builder_set_member_name (builder, "device");
      json_builder_add_string_value (builder, dc_gemm_backend_get_device_name (backend));
      if (dc_gemm_backend_get_device_id (backend) != NULL)
        {
          json_builder_set_member_name (builder, "device_id");
          json_builder_add_string_value (builder, dc_gemm_backend_get_device_id (backend));
        }
      json_builder_set_member_name (builder, "hash");
      json_builder_add_string_value (builder, hash);
      json_builder_end_object (builder);
      dc_cli_print_json (builder);
    }
  else
    {
      g_print (_("backend: %s\n"), dc_backend_kind_to_string (dc_gemm_backend_get_kind (backend)));
      g_print (_("device: %s\n"), dc_gemm_backend_get_device_name (backend));
      g_print (_("kernel: %s\n"), dc_gemm_backend_get_kernel_name (backend));
      g_print (_("numeric rule: %s\n"), dc_gemm_rule_id ());
      g_print (_("hash: %s\n"), hash);
    }
  return DC_CLI_EXIT_OK;
}
