/* test-cli.c: daisychain-cli's command table, --help, --version and --json.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <sys/stat.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-test-utils.h"

#define TIMEOUT_MS 30000

static int
run_cli (const char * const  *args,
         char               **out,
         char               **err)
{
  return dc_test_run_cli (args, out, err, TIMEOUT_MS);
}

/* Parses every stdout line as one JSON object, as docs/CLI.md promises. */
static JsonObject *
parse_single_json_line (const char *text)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  JsonNode *root;

  g_assert_cmpuint (g_strv_length (lines), ==, 2);  /* one line and the final newline */
  g_assert_cmpstr (lines[1], ==, "");
  json_parser_load_from_data (parser, lines[0], -1, &error);
  g_assert_no_error (error);
  root = json_parser_get_root (parser);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (root));
  return json_object_ref (json_node_get_object (root));
}

static void
test_help_lists_commands (void)
{
  const char *args[] = { "--help", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  g_assert_nonnull (strstr (out, "Usage:"));
  g_assert_nonnull (strstr (out, "  info "));
  g_assert_nonnull (strstr (out, "  version "));
}

static void
test_version (void)
{
  const char *args[] = { "--version", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  g_assert_cmpstr (out, ==, "daisychain-cli " PACKAGE_VERSION "\n");
}

static void
test_version_json (void)
{
  const char *args[] = { "--json", "--version", NULL };
  const char *args2[] = { "version", "--json", NULL };
  g_autofree char *out = NULL;
  g_autofree char *out2 = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) object = NULL;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  object = parse_single_json_line (out);
  g_assert_cmpstr (json_object_get_string_member (object, "version"), ==, PACKAGE_VERSION);
  g_assert_cmpstr (json_object_get_string_member (object, "app_id"), ==, APP_ID);

  g_assert_cmpint (run_cli (args2, &out2, NULL), ==, 0);
  g_assert_cmpstr (out, ==, out2);
}

static const char *vulkan_driver;

static void
test_info_json (void)
{
  const char *args[] = { "info", "--json", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) object = NULL;
  JsonArray *devices;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  object = parse_single_json_line (out);
  g_assert_cmpstr (json_object_get_string_member (object, "version"), ==, PACKAGE_VERSION);
  g_assert_true (json_object_has_member (object, "libraries"));
  devices = json_object_get_array_member (object, "vulkan_devices");
  g_assert_nonnull (devices);
  /* Either devices were listed or the reason there are none is given; with
   * a driver installed (lavapipe) there is at least its device. */
  g_assert_true (json_array_get_length (devices) > 0 ||
                 json_object_has_member (object, "vulkan_error"));
  if (vulkan_driver != NULL)
    {
      JsonObject *controls;

      g_assert_cmpuint (json_array_get_length (devices), >, 0);
      /* The float controls the native-float kernels may declare: lavapipe
       * reports RTE rounding and signed zero/inf/NaN, not DenormPreserve. */
      controls = json_object_get_object_member (json_array_get_object_element (devices, 0),
                                                "float32_controls");
      g_assert_nonnull (controls);
      g_assert_false (json_object_get_boolean_member (controls, "denorm_preserve"));
      g_assert_true (json_object_get_boolean_member (controls, "rounding_mode_rte"));
      g_assert_true (json_object_get_boolean_member (controls, "signed_zero_inf_nan_preserve"));
    }
}

/* --vulkan-device: a listed id runs there, an unknown one is refused with
 * the ids there are, and it goes only with --backend vulkan. */
static void
test_vulkan_device (void)
{
  const char *info[] = { "info", "--json", NULL };
  const char *unknown[] = { "probe", "--vulkan-device", "ffff:ffff", NULL };
  const char *not_vulkan[] = { "probe", "--backend", "cpu", "--vulkan-device", "x", NULL };
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err3 = NULL;
  g_autoptr(JsonObject) object = NULL;
  g_autoptr(JsonObject) probe = NULL;
  JsonArray *devices;
  const char *id;

  g_assert_cmpint (run_cli (info, &out, NULL), ==, 0);
  object = parse_single_json_line (out);
  devices = json_object_get_array_member (object, "vulkan_devices");
  if (devices == NULL || json_array_get_length (devices) == 0)
    {
      g_test_skip ("no Vulkan device (install mesa-vulkan-drivers)");
      return;
    }
  id = json_object_get_string_member (json_array_get_object_element (devices, 0), "id");
  g_assert_nonnull (id);
  {
    const char *chosen[] = { "probe", "--json", "--vulkan-device", id, NULL };

    g_assert_cmpint (run_cli (chosen, &out2, NULL), ==, 0);
    probe = parse_single_json_line (out2);
    g_assert_cmpstr (json_object_get_string_member (probe, "backend"), ==, "vulkan");
    g_assert_cmpstr (json_object_get_string_member (probe, "device_id"), ==, id);
  }
  g_assert_cmpint (run_cli (unknown, NULL, &err), ==, 1);
  g_assert_nonnull (strstr (err, "No Vulkan device has the id “ffff:ffff”"));
  g_assert_nonnull (strstr (err, id));
  g_assert_cmpint (run_cli (not_vulkan, NULL, &err3), ==, 2);
  g_assert_nonnull (strstr (err3, "--vulkan-device needs --backend vulkan"));
}

static void
test_usage_errors (void)
{
  const char *unknown_command[] = { "no-such-command", NULL };
  const char *unknown_option[] = { "info", "--no-such-option", NULL };
  const char *nothing[] = { NULL };
  const char *stray[] = { "version", "extra", NULL };
  g_autofree char *err1 = NULL;
  g_autofree char *err2 = NULL;
  g_autofree char *err3 = NULL;
  g_autofree char *err4 = NULL;

  g_assert_cmpint (run_cli (unknown_command, NULL, &err1), ==, 2);
  g_assert_nonnull (strstr (err1, "unknown command “no-such-command”"));
  g_assert_cmpint (run_cli (unknown_option, NULL, &err2), ==, 2);
  g_assert_nonnull (strstr (err2, "--no-such-option"));
  g_assert_cmpint (run_cli (nothing, NULL, &err3), ==, 2);
  g_assert_nonnull (strstr (err3, "Usage:"));
  g_assert_cmpint (run_cli (stray, NULL, &err4), ==, 2);
  g_assert_nonnull (strstr (err4, "unexpected argument “extra”"));
}

/* bench gemm on a tiny product: one object per shape and path, medians over
 * the rounds asked for, the weights' GB/s and GOPS per CPU-second, the
 * PyTorch fields null with --no-torch; --rounds is checked. */
static void
test_bench_gemm_rounds (void)
{
  const char *args[] = { "bench", "gemm", "--json", "--paths", "cpu", "--sizes", "64",
                         "--no-model-shapes", "--no-torch", "--min-time", "0.01",
                         "--rounds", "3", NULL };
  const char *zero[] = { "bench", "gemm", "--rounds", "0", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) object = NULL;

  g_assert_cmpint (run_cli (args, &out, NULL), ==, 0);
  object = parse_single_json_line (out);
  g_assert_cmpstr (json_object_get_string_member (object, "shape"), ==, "square-64");
  g_assert_cmpstr (json_object_get_string_member (object, "path"), ==, "cpu");
  g_assert_cmpint (json_object_get_int_member (object, "m"), ==, 64);
  g_assert_cmpint (json_object_get_int_member (object, "rounds"), ==, 3);
  g_assert_cmpfloat (json_object_get_double_member (object, "gops"), >, 0);
  /* Issue 14: the weights' streaming rate and the rate per CPU-second. */
  g_assert_cmpfloat (json_object_get_double_member (object, "weights_gbytes_per_s"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (object, "gops_per_cpu_second"), >, 0);
  g_assert_true (json_object_has_member (object, "cpu_peak_ratio"));
  /* Issue 14: the measured peak beside the estimate; peak_ratio uses it
   * where there is one (every SIMD kernel, dc-gemm-peak.c). */
  g_assert_true (json_object_has_member (object, "peak_nominal_gops"));
  g_assert_true (json_object_has_member (object, "peak_ratio_nominal"));
  if (g_str_equal (json_object_get_string_member (object, "kernel"), "avx2")
      || g_str_equal (json_object_get_string_member (object, "kernel"), "avx512-vnni"))
    {
      double measured = json_object_get_double_member (object, "peak_measured_gops");
      double ratio = json_object_get_double_member (object, "gops") / measured;

      g_assert_cmpfloat (measured, >, 0);

      g_assert_cmpfloat (ABS (json_object_get_double_member (object, "peak_ratio") - ratio),
                         <=, 1e-3 * ratio);
    }
  else
    g_assert_true (json_object_get_null_member (object, "peak_measured_gops"));
  g_assert_true (json_object_get_null_member (object, "torch_gflops"));
  g_assert_true (json_object_get_null_member (object, "ratio_vs_torch"));
  g_assert_true (json_object_get_null_member (object, "ratio_vs_torch_min"));
  /* Issue 15: the dispatch latency is the Vulkan path's only. */
  g_assert_true (json_object_get_null_member (object, "dispatch_ms"));
  g_assert_true (json_object_get_null_member (object, "gops_less_dispatch"));

  g_assert_cmpint (run_cli (zero, NULL, &err), ==, 2);
  g_assert_nonnull (strstr (err, "--rounds must be between 1 and 50"));
}

/* Issue 15: bench train --sizes takes presets and W/S/B[/L/H] shapes, builds
 * the layers and heads asked for (the JSON says which), measures only the
 * backends named, and refuses what no run could take. */
static void
test_bench_train_sizes (void)
{
  const char *args[] = { "bench", "train", "--json", "--no-torch", "--backends", "cpu",
                         "--sizes", "16/16/2/1/2", "--min-time", "0.01", "--threads", "1",
                         NULL };
  const char *bad[][8] = {
    { "bench", "train", "--sizes", "gpt3", NULL },
    { "bench", "train", "--sizes", "16/16", NULL },
    { "bench", "train", "--sizes", "16/16/33", NULL },
    { "bench", "train", "--sizes", "16/16/1", NULL },
    { "bench", "train", "--sizes", "768/2048/2", NULL },
    { "bench", "train", "--sizes", "96/16/2/2/7", NULL },
    { "bench", "train", "--backends", "tpu", NULL },
  };
  const char *why[] = { "expected default, w128, gpt2-small", "expected default",
                        "batch must be 2–32", "batch must be 2–32", "outside the Advanced range",
                        "heads must divide the width", "unknown backend “tpu”" };
  g_autofree char *out = NULL;
  g_autoptr(JsonObject) object = NULL;

  g_assert_cmpint (run_cli (args, &out, NULL), ==, 0);
  object = parse_single_json_line (out);
  g_assert_cmpstr (json_object_get_string_member (object, "size"), ==, "16/16/2/1/2");
  g_assert_cmpstr (json_object_get_string_member (object, "backend"), ==, "cpu");
  g_assert_cmpint (json_object_get_int_member (object, "width"), ==, 16);
  g_assert_cmpint (json_object_get_int_member (object, "batch"), ==, 2);
  g_assert_cmpint (json_object_get_int_member (object, "layers"), ==, 1);
  g_assert_cmpint (json_object_get_int_member (object, "heads"), ==, 2);
  g_assert_cmpfloat (json_object_get_double_member (object, "tokens_per_s"), >, 0);
  g_assert_true (json_object_get_null_member (object, "torch_cuda_tokens_per_s"));
  g_assert_true (json_object_get_null_member (object, "ratio_vs_torch_cuda"));
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *err = NULL;

      g_assert_cmpint (run_cli (bad[i], NULL, &err), ==, 2);
      if (strstr (err, why[i]) == NULL)
        g_error ("%s: %s", bad[i][3], err);
    }
}

/* Issue 15: bench gemm on the Vulkan path reports the latency of an almost
 * empty dispatch (1 × 1 × 32) and the rate with it taken out, so that a
 * product's time can be split into submission and kernel. */
static void
test_bench_gemm_dispatch (void)
{
  const char *args[] = { "bench", "gemm", "--json", "--paths", "vulkan", "--sizes", "64",
                         "--no-model-shapes", "--no-torch", "--min-time", "0.02", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) object = NULL;
  double gops, dispatch_ms;

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  if (out == NULL || strstr (out, "\"path\":\"vulkan\"") == NULL)
    {
      dc_test_skip_without_vulkan (err != NULL ? err : "no Vulkan row");
      return;
    }
  object = parse_single_json_line (out);
  gops = json_object_get_double_member (object, "gops");
  dispatch_ms = json_object_get_double_member (object, "dispatch_ms");
  g_assert_cmpfloat (dispatch_ms, >, 0);
  /* A 64³ product takes at least one dispatch's time, so what is left is
   * faster, or null when nothing is left. */
  if (!json_object_get_null_member (object, "gops_less_dispatch"))
    g_assert_cmpfloat (json_object_get_double_member (object, "gops_less_dispatch"), >=, gops);
  /* Issue 15 item 2: the same dispatches queued in one submission (how
   * torch._int_mm is timed), and one per submission by fence wait, by poll
   * and with a command buffer made per call; timestamps may be absent. */
  g_assert_cmpfloat (json_object_get_double_member (object, "queued_gops"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (object, "fence_wait_ms"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (object, "fence_poll_ms"), >, 0);
  g_assert_cmpfloat (json_object_get_double_member (object, "fence_wait_fresh_ms"), >, 0);
  g_assert_true (json_object_has_member (object, "gpu_timestamp_gops"));
  g_test_message ("dispatch %.3f ms, %.3f GOPS, queued %.3f GOPS", dispatch_ms, gops,
                  json_object_get_double_member (object, "queued_gops"));
}

/* Issue 15 item 2: --kernels measures each named Vulkan kernel as its own
 * path in one invocation (the tile sweep); one the device cannot run is
 * reported by name and skipped; --paths with it is a usage error. */
static void
test_bench_gemm_kernels (void)
{
  const char *args[] = { "bench", "gemm", "--json", "--kernels", "tiled,no-such-kernel,dot",
                         "--sizes", "64", "--no-model-shapes", "--no-torch", "--min-time",
                         "0.02", NULL };
  const char *both[] = { "bench", "gemm", "--kernels", "tiled", "--paths", "cpu", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autofree char *both_err = NULL;

  g_assert_cmpint (run_cli (both, NULL, &both_err), ==, 2);
  g_assert_nonnull (strstr (both_err, "--kernels and --paths exclude each other"));

  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
  if (out == NULL || strstr (out, "\"kernel\":\"tiled\"") == NULL)
    {
      dc_test_skip_without_vulkan (err != NULL ? err : "no Vulkan row");
      return;
    }
  g_assert_nonnull (strstr (err, "path no-such-kernel unavailable"));
  /* Each kernel its own row, in the order asked for. */
  g_assert_nonnull (strstr (out, "\"path\":\"vulkan\",\"kernel\":\"tiled\""));
  if (strstr (out, "\"kernel\":\"dot\"") != NULL)
    g_assert_true (strstr (out, "\"kernel\":\"tiled\"") < strstr (out, "\"kernel\":\"dot\""));
  else
    g_test_message ("dot not offered here: %s", err);
}

/* Runs @args, whose @path is a FIFO nobody writes to: the command must exit 1
 * with "“PATH” is not a regular file" instead of blocking in open (). A
 * reader that still blocks is killed at TIMEOUT_MS and the test fails. */
static void
assert_fifo_refused (const char * const *args,
                     const char         *path)
{
  g_autofree char *err = NULL;
  g_autofree char *expected = g_strdup_printf ("“%s” is not a regular file", path);

  g_assert_cmpint (run_cli (args, NULL, &err), ==, 1);
  g_test_message ("%s", err);
  g_assert_nonnull (strstr (err, expected));
}

static void
test_fifo_refused (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("dc-cli-fifo-XXXXXX", &error);
  g_autofree char *fifo = NULL;
  g_autofree char *out = NULL;

  g_assert_no_error (error);
  fifo = g_build_filename (dir, "model.pt", NULL);
  out = g_build_filename (dir, "hf", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  {
    const char *generate[] = { "generate", "--checkpoint", fifo, "--tokens", "1", NULL };
    const char *resume[] = { "train", "--resume", fifo, "--steps", "1", NULL };
    const char *export[] = { "export", "--checkpoint", fifo, "--hf", out, NULL };
    const char *data_read[] = { "data", "read", fifo, NULL };
    const char *signal[] = { "signal", "--bind", "127.0.0.1", "--port", "0",
                             "--tls-cert", fifo, "--tls-key", fifo, NULL };

    assert_fifo_refused (generate, fifo);
    assert_fifo_refused (resume, fifo);
    assert_fifo_refused (export, fifo);
    assert_fifo_refused (data_read, fifo);
    assert_fifo_refused (signal, fifo);
  }
  dc_test_remove_tree (dir);
}

/* `tokenize` on the fixture models' folders gives reference.json's input_ids,
 * from --text and from standard input alike; a repo id is refused for now. */
static void
test_tokenize (void)
{
  g_autofree char *gpt2 = dc_test_dup_source_path ("tests", "data", "hf", "models", "gpt2-tiny", NULL);
  g_autofree char *llama = dc_test_dup_source_path ("tests", "data", "hf", "models", "llama-tiny", NULL);
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(JsonObject) object = NULL;
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  JsonArray *ids;

  {
    const char *args[] = { "tokenize", "--model", gpt2, "--text", "The secret of", NULL };

    g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
    g_assert_cmpstr (out, ==, "464,3200,286\n");
    g_clear_pointer (&out, g_free);
    g_clear_pointer (&err, g_free);
  }
  {
    const char *args[] = { "tokenize", "--model", llama, "--json", "--text",
                           "In 1984, 42 programmers wrote 1,000,000 lines of code; it didn't work.",
                           NULL };
    const gint64 expected[] = { 700, 804, 24, 20, 12, 221, 20, 18, 683, 77, 382, 631, 305, 69, 508,
                                12, 724, 16, 12, 724, 16, 291, 260, 277, 289, 275, 429, 69, 27, 316,
                                771, 78, 368, 634, 14 };

    g_assert_cmpint (run_cli (args, &out, &err), ==, 0);
    object = parse_single_json_line (out);
    ids = json_object_get_array_member (object, "ids");
    g_assert_cmpuint (json_array_get_length (ids), ==, G_N_ELEMENTS (expected));
    for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
      g_assert_cmpint (json_array_get_int_element (ids, i), ==, expected[i]);
    g_clear_pointer (&out, g_free);
    g_clear_pointer (&err, g_free);
    g_clear_pointer (&object, json_object_unref);
  }

  /* Standard input, with a multi-byte character and no trailing newline. */
  proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                           G_SUBPROCESS_FLAGS_STDERR_PIPE, &error,
                           cli, "tokenize", "--model", gpt2, "--json", NULL);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (proc, "Unicode: café", NULL, &out, &err, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (proc));
  g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);
  object = parse_single_json_line (out);
  ids = json_object_get_array_member (object, "ids");
  g_assert_cmpuint (json_array_get_length (ids), ==, 5);
  g_assert_cmpint (json_array_get_int_element (ids, 4), ==, 40304);   /* " café" */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  {
    /* A repo id goes to the Hub (HF_ENDPOINT: a closed port here, never the
     * internet), and its failure is a message and exit 1. */
    const char *args[] = { "tokenize", "--model", "openai-community/gpt2", "--text", "x", NULL };
    g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u", dc_test_closed_port ());

    g_setenv ("HF_ENDPOINT", endpoint, TRUE);
    g_assert_cmpint (run_cli (args, &out, &err), ==, 1);
    g_unsetenv ("HF_ENDPOINT");
    g_assert_nonnull (strstr (err, "could not reach the server"));
    g_assert_nonnull (strstr (err, "openai-community/gpt2"));
  }
}

int
main (int    argc,
      char **argv)
{
  /* The messages checked carry curly quotes, which the CLI writes in the
   * locale's charset: in a C locale (the Flatpak build sandbox's) they come
   * out as '?'. C.UTF-8 is built into glibc ≥ 2.35 and is in the sandbox. */
  g_setenv ("LC_ALL", "C.UTF-8", TRUE);
  g_test_init (&argc, &argv, NULL);
  vulkan_driver = dc_test_use_lavapipe ();  /* `info` lists lavapipe's device */

  g_test_add_func ("/dc/cli/help", test_help_lists_commands);
  g_test_add_func ("/dc/cli/version", test_version);
  g_test_add_func ("/dc/cli/version-json", test_version_json);
  g_test_add_func ("/dc/cli/info-json", test_info_json);
  g_test_add_func ("/dc/cli/vulkan-device", test_vulkan_device);
  g_test_add_func ("/dc/cli/usage-errors", test_usage_errors);
  g_test_add_func ("/dc/cli/bench-train-sizes", test_bench_train_sizes);
  g_test_add_func ("/dc/cli/bench-gemm-rounds", test_bench_gemm_rounds);
  g_test_add_func ("/dc/cli/bench-gemm-dispatch", test_bench_gemm_dispatch);
  g_test_add_func ("/dc/cli/bench-gemm-kernels", test_bench_gemm_kernels);
  g_test_add_func ("/dc/cli/fifo-refused", test_fifo_refused);
  g_test_add_func ("/dc/cli/tokenize", test_tokenize);

  return g_test_run ();
}
