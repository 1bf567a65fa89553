/* dc-cli.h: what every daisychain-cli subcommand shares.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Exit statuses: 0 success, 1 the work failed, 2 the command line was wrong. */
#define DC_CLI_EXIT_OK      0
#define DC_CLI_EXIT_FAILED  1
#define DC_CLI_EXIT_USAGE   2

typedef struct
{
  gboolean json;  /* print one JSON object per line instead of text */
} DcCliOptions;

typedef struct _DcCliCommand DcCliCommand;

typedef int (*DcCliRunFunc) (const DcCliCommand  *command,
                             DcCliOptions        *options,
                             int                  argc,
                             char               **argv);

struct _DcCliCommand
{
  const char   *name;
  const char   *parameter_string;  /* shown after the name in --help */
  const char   *summary;
  DcCliRunFunc  run;
  gboolean      hidden;            /* left out of --help: for this program's own use */
};

/* The one table of subcommands (dc-cli-commands.c). */
extern const DcCliCommand dc_cli_commands[];
extern const gsize        dc_cli_n_commands;

gboolean dc_cli_parse_options   (const DcCliCommand  *command,
                                 DcCliOptions        *options,
                                 const GOptionEntry  *entries,
                                 int                 *argc,
                                 char              ***argv);
void     dc_cli_print_json      (JsonBuilder         *builder);
int      dc_cli_compare_doubles (gconstpointer        a,
                                 gconstpointer        b);
double   dc_cli_median          (GArray              *values);
double   dc_cli_process_cpu_ms  (void);

/* The machine's CPU time as /proc/stat's first line counts it, in clock
 * ticks: all of it (user … steal) and the hypervisor's steal, the time a
 * virtual CPU was ready to run and the host ran something else. */
typedef struct
{
  guint64 total;
  guint64 steal;
} DcCliHostCpu;

gboolean dc_cli_host_cpu_read   (DcCliHostCpu        *out);
double   dc_cli_host_steal      (const DcCliHostCpu  *before,
                                 const DcCliHostCpu  *after);
int      dc_cli_fail            (DcCliOptions        *options,
                                 const GError        *error);
int      dc_cli_usage_error     (const DcCliCommand  *command,
                                 const char          *format,
                                 ...) G_GNUC_PRINTF (2, 3);

/* Subcommand entry points, one file each. */
int dc_cli_info_run    (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_version_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_probe_run   (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_run   (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_join_run    (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_signal_run  (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_train_run    (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_generate_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_export_run   (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_data_read_run   (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_data_ls_run     (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_data_run  (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_channel_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_infer_run       (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_tokenize_run    (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_train_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_group_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_decode_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_kit_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_bench_ring_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);
int dc_cli_net_hub_run (const DcCliCommand *command, DcCliOptions *options, int argc, char **argv);

G_END_DECLS
