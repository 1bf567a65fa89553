/* dc-cli-commands.c: the one table of daisychain-cli subcommands.
 *
 * Add a subcommand by writing dc-cli-<name>.c with its run function and
 * listing it here; --help is generated from this table.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"

const DcCliCommand dc_cli_commands[] = {
  { "bench", "channel", N_("Measure data-channel throughput and round trips against TCP"),
    dc_cli_bench_run },
  { "info", "", N_("Show this build, its libraries and the Vulkan devices found"),
    dc_cli_info_run },
  { "join", "", N_("Join a group of devices and print peer events"), dc_cli_join_run },
  { "signal", "", N_("Run the signaling service that introduces devices"), dc_cli_signal_run },
  { "version", "", N_("Print the version"), dc_cli_version_run },
};

const gsize dc_cli_n_commands = G_N_ELEMENTS (dc_cli_commands);
