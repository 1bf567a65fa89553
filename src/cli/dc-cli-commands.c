/* dc-cli-commands.c: the one table of daisychain-cli subcommands.
 *
 * Add a subcommand by writing dc-cli-<name>.c with its run function and
 * listing it here; --help is generated from this table. A name may have two
 * words ("data read", "bench data"): the first two arguments are matched
 * together before the first alone, so layers can add to a group such as
 * "bench" without sharing one entry.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"

#include "config.h"

#include <glib/gi18n.h>

#include "dc-cli.h"

const DcCliCommand dc_cli_commands[] = {
  { "info", "", N_("Show this build, its libraries and the Vulkan devices found"),
    dc_cli_info_run },
  { "version", "", N_("Print the version"), dc_cli_version_run },
  { "probe", "", N_("Hash a seeded INT8 GEMM: the same on every device that computes exactly"),
    dc_cli_probe_run },
  { "bench gemm", "", N_("Measure INT8 GEMM throughput per path next to PyTorch"),
    dc_cli_bench_run },
  { "bench train", "",
    N_("Measure training tokens/s per backend next to PyTorch"), dc_cli_bench_train_run },
  { "bench data", N_("[FILE…]"),
    N_("Measure parquet text decoding (MB/s) next to parquet-wasm"), dc_cli_bench_data_run },
  { "bench channel", "", N_("Measure data-channel throughput and round trips against TCP"),
    dc_cli_bench_channel_run },
  { "bench group", "",
    N_("Measure a training group's step time (compute, send, wait, combine) for 1–N devices"),
    dc_cli_bench_group_run },
  { "bench ring", "",
    N_("Measure the inference ring's tokens/s with 1, 2 and 3 stages on loopback"),
    dc_cli_bench_ring_run },
  { "bench decode", "",
    N_("Measure a Hugging Face model's prefill and decode tokens/s next to PyTorch"),
    dc_cli_bench_decode_run },
  { "bench kit", "",
    N_("Measure the inference kit's tokens/s in headless Chromium next to the native generator"),
    dc_cli_bench_kit_run },
  { "data read", N_("FILE|URL"),
    N_("Read a parquet file's text column: rows, UTF-8 bytes, first and last value"),
    dc_cli_data_read_run },
  { "data ls", N_("[DATASET]"), N_("List a Hugging Face dataset's parquet files"),
    dc_cli_data_ls_run },
  { "train", "", N_("Train the GPT-2 model on this device"), dc_cli_train_run },
  { "generate", "", N_("Generate text from a checkpoint"), dc_cli_generate_run },
  { "export", "", N_("Export a checkpoint as a Hugging Face folder or an inference kit"), dc_cli_export_run },
  { "tokenize", "", N_("Turn a text into a Hugging Face model's token ids"),
    dc_cli_tokenize_run },
  { "infer", "",
    N_("Generate text with a Hugging Face model (repo id or folder), or score token ids"),
    dc_cli_infer_run },
  { "signal", "", N_("Run the signaling service that introduces devices"), dc_cli_signal_run },
  { "join", "", N_("Join a group of devices and print peer events"), dc_cli_join_run },
  /* The benches' delay hub (dc-cli-netns.c starts it in a namespace). */
  { "net-hub", "", N_("Hold every frame between links for a delay (the benches' shaped network)"),
    dc_cli_net_hub_run, TRUE },
};

const gsize dc_cli_n_commands = G_N_ELEMENTS (dc_cli_commands);
