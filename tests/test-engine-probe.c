/* test-engine-probe.c: the probe hash is the same on every CPU path and
 * thread count, is pinned (a change of any bit of the rule must come with a
 * new DC_GEMM_RULE_VERSION and a new pinned value), and `daisychain-cli probe
 * --json` prints exactly the fields backend, device and hash.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "dc-test-utils.h"
#include "engine/dc-gemm-probe.h"

/* The probe hash of rule "daisychain-int8-gemm/1" (docs/VERIFICATION.md). */
#define PINNED_HASH "7ddc8f551c0232c11e4a2b0bf716534eab195201dcc8892983a3f6e139298342"
#define PINNED_RULE_ID "9990314f3f6d5a56"

static void
test_probe_cpu_paths (void)
{
  const guint threads[] = { 1, 2, 3, 7 };

  for (DcBackendKind kind = DC_BACKEND_CPU_SCALAR; kind <= DC_BACKEND_CPU; kind++)
    for (gsize t = 0; t < G_N_ELEMENTS (threads); t++)
      {
        g_autoptr(GError) error = NULL;
        g_autoptr(DcGemmBackend) backend = dc_gemm_backend_new (kind, &error);
        g_autofree char *hash = NULL;

        g_assert_no_error (error);
        dc_gemm_backend_set_n_threads (backend, threads[t]);
        hash = dc_gemm_probe (backend, &error);
        g_assert_no_error (error);
        g_assert_cmpstr (hash, ==, PINNED_HASH);
      }
}

static void
test_rule_id_pinned (void)
{
  g_assert_cmpstr (dc_gemm_rule_id (), ==, PINNED_RULE_ID);
}

static void
test_probe_cli_json (void)
{
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  const char *backends[] = { "cpu-scalar", "cpu" };

  for (gsize i = 0; i < G_N_ELEMENTS (backends); i++)
    {
      const char *argv[] = { cli, "probe", "--backend", backends[i], "--json", NULL };
      g_autofree char *out = NULL;
      g_autofree char *err = NULL;
      g_autoptr(JsonParser) parser = json_parser_new ();
      g_autoptr(GError) error = NULL;
      JsonObject *object;
      int status = -1;

      g_assert_true (dc_test_spawn (argv, &out, &err, &status, 30000));
      g_assert_cmpint (status, ==, 0);
      json_parser_load_from_data (parser, out, -1, &error);
      g_assert_no_error (error);
      object = json_node_get_object (json_parser_get_root (parser));
      g_assert_cmpuint (json_object_get_size (object), ==, 3);
      g_assert_cmpstr (json_object_get_string_member (object, "backend"), ==, backends[i]);
      g_assert_cmpstr (json_object_get_string_member (object, "hash"), ==, PINNED_HASH);
      g_assert_nonnull (json_object_get_string_member (object, "device"));
    }
}

static void
test_probe_cli_bad_backend (void)
{
  g_autofree char *cli = dc_test_dup_build_path ("src", "cli", "daisychain-cli", NULL);
  const char *argv[] = { cli, "probe", "--backend", "abacus", NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status = -1;

  g_assert_true (dc_test_spawn (argv, &out, &err, &status, 30000));
  g_assert_cmpint (status, ==, 2);
  g_assert_nonnull (strstr (err, "abacus"));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/engine/probe/cpu-paths", test_probe_cpu_paths);
  g_test_add_func ("/dc/engine/probe/rule-id", test_rule_id_pinned);
  g_test_add_func ("/dc/engine/probe/cli-json", test_probe_cli_json);
  g_test_add_func ("/dc/engine/probe/cli-bad-backend", test_probe_cli_bad_backend);

  return g_test_run ();
}
