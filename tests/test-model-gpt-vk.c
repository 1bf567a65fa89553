/* test-model-gpt-vk.c: INT8 training on Vulkan equals training on the CPU.
 *
 * Proves: with every product of the forward and backward pass sent to the
 * Vulkan GEMM (lavapipe in CI), each training step gives the same weight hash
 * as the CPU path and as the scalar reference. Skipped, with the reason, when
 * no Vulkan device is usable.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <json-glib/json-glib.h>

#include "dc-test-utils.h"
#include "model/dc-gpt-trainer.h"
#include "train/dc-token-source.h"

#define STEPS 3

static GPtrArray *
train_hashes (DcBackendKind kind)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptTrainer) trainer = NULL;
  g_autoptr(GBytes) corpus = NULL;
  GPtrArray *hashes = g_ptr_array_new_with_free_func (g_free);
  DcGemmBackend *device = NULL;
  DcTrainSettings settings;
  DcGptConfig config;
  DcGptModel *model;
  char *text = NULL;
  gsize len = 0;

  g_file_get_contents (path, &text, &len, &error);
  g_assert_no_error (error);
  corpus = g_bytes_new_take (text, len);
  dc_train_settings_init_default (&settings);
  settings.batch = 2;
  dc_gpt_config_init_derived (&config, 32, 16);
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 21);
  trainer = dc_token_source_new_trainer (model, &settings, corpus, DC_GPT_PRECISION_INT8, 1,
                                         &error);
  g_assert_no_error (error);
  if (kind != DC_BACKEND_CPU)
    {
      device = dc_gemm_backend_new (kind, &error);
      if (device == NULL || dc_gemm_backend_get_kind (device) != kind)
        {
          g_test_message ("no %s backend: %s", dc_backend_kind_to_string (kind),
                          error != NULL ? error->message : "its kernels were refused");
          g_clear_pointer (&device, dc_gemm_backend_free);
          g_ptr_array_unref (hashes);
          return NULL;
        }
      g_test_message ("%s: %s", dc_gemm_backend_get_device_name (device),
                      dc_gemm_backend_get_kernel_name (device));
      /* Every product, however small, on the device. */
      dc_gpt_trainer_set_device (trainer, device, 0);
    }
  for (guint s = 0; s < STEPS; s++)
    {
      g_assert_true (dc_gpt_trainer_step (trainer, NULL, &error));
      g_assert_no_error (error);
      g_ptr_array_add (hashes, dc_gpt_model_dup_hash (dc_gpt_trainer_get_model (trainer)));
    }
  return hashes;
}

static void
test_vulkan_equals_cpu (void)
{
  g_autoptr(GPtrArray) cpu = train_hashes (DC_BACKEND_CPU);
  g_autoptr(GPtrArray) scalar = train_hashes (DC_BACKEND_CPU_SCALAR);
  g_autoptr(GPtrArray) vulkan = train_hashes (DC_BACKEND_VULKAN);

  g_assert_nonnull (scalar);
  if (vulkan == NULL)
    {
      dc_test_skip_without_vulkan ("no usable Vulkan backend (the log above says why)");
      return;
    }
  for (guint s = 0; s < STEPS; s++)
    {
      g_assert_cmpstr (cpu->pdata[s], ==, scalar->pdata[s]);
      g_assert_cmpstr (cpu->pdata[s], ==, vulkan->pdata[s]);
    }
  g_test_message ("hash after %d steps on all three: %s", STEPS, (const char *) cpu->pdata[STEPS - 1]);
  /* main's value before the engine's pool took over the model's threads
   * (issue 14): moving work between threads must not change a bit
   * (re-pinned for the piece-wise state hash, docs/VERIFICATION.md). */
  g_assert_cmpstr (cpu->pdata[STEPS - 1], ==, "bdc99a0db418688d");
}

/* `daisychain-cli train --json` for 3 steps at 32 × 16 × 2 on @backend,
 * saving to @out: the step lines' hashes (appended to @hashes) and the done
 * event's resident counters (NULL when no resident step ran). */
static JsonObject *
cli_train (const char *backend,
           const char *out,
           GPtrArray  *hashes)
{
  const char *args[] = { "train", "--json", "--backend", backend, "--width", "32", "--seq",
                         "16", "--batch", "2", "--steps", "100", "--stop-at", "3", "--threads",
                         "2", "--out", out, NULL };
  g_autofree char *text = NULL, *err = NULL;
  g_auto(GStrv) lines = NULL;
  JsonObject *resident = NULL;

  g_assert_cmpint (dc_test_run_cli (args, &text, &err, 240000), ==, 0);
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *event;

      if (lines[i][0] != '{' || !json_parser_load_from_data (parser, lines[i], -1, NULL))
        continue;
      event = json_node_get_object (json_parser_get_root (parser));
      if (g_str_equal (json_object_get_string_member (event, "event"), "step"))
        g_ptr_array_add (hashes, g_strdup (json_object_get_string_member (event, "hash")));
      else if (g_str_equal (json_object_get_string_member (event, "event"), "done")
               && json_object_has_member (event, "resident"))
        resident = json_object_ref (json_object_get_object_member (event, "resident"));
    }
  return resident;
}

/* Issue 15 item 1 for the CLI's `train`: with the resident step (lavapipe)
 * the state stays on the device between steps (read back once, for the
 * checkpoint at the end), each step's hash is digested there, the hashes
 * are the CPU run's step for step, and the checkpoint is byte-identical. */
static void
test_cli_train_lazy (void)
{
  g_autofree char *dir = g_dir_make_tmp ("dc-gpt-vk-XXXXXX", NULL);
  g_autofree char *cpu_out = g_build_filename (dir, "cpu.ckpt", NULL);
  g_autofree char *vk_out = g_build_filename (dir, "vulkan.ckpt", NULL);
  g_autoptr(GPtrArray) cpu = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) vk = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(JsonObject) none = NULL, resident = NULL;
  g_autofree char *cpu_bytes = NULL, *vk_bytes = NULL;
  gsize cpu_len = 0, vk_len = 0;

  none = cli_train ("cpu", cpu_out, cpu);
  g_assert_null (none);
  resident = cli_train ("vulkan", vk_out, vk);
  if (resident == NULL)
    {
      dc_test_skip_without_vulkan ("no resident training step on Vulkan (the log says why)");
      dc_test_remove_tree (dir);
      return;
    }
  g_assert_cmpuint (cpu->len, ==, 3);
  g_assert_cmpuint (vk->len, ==, 3);
  for (guint s = 0; s < 3; s++)
    g_assert_cmpstr (vk->pdata[s], ==, cpu->pdata[s]);
  g_assert_cmpint (json_object_get_int_member (resident, "steps"), ==, 3);
  g_assert_cmpint (json_object_get_int_member (resident, "device_hashes"), ==, 3);
  /* The one for the checkpoint, none between steps. */
  g_assert_cmpint (json_object_get_int_member (resident, "state_downloads"), ==, 1);
  g_assert_cmpint (json_object_get_int_member (resident, "weight_downloads"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (resident, "uploads"), ==, 1);
  g_assert_true (g_file_get_contents (cpu_out, &cpu_bytes, &cpu_len, NULL));
  g_assert_true (g_file_get_contents (vk_out, &vk_bytes, &vk_len, NULL));
  g_assert_cmpmem (vk_bytes, vk_len, cpu_bytes, cpu_len);
  dc_test_remove_tree (dir);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dc_test_use_lavapipe ();
  g_test_add_func ("/dc/model/gpt/vulkan-equals-cpu", test_vulkan_equals_cpu);
  g_test_add_func ("/dc/model/gpt/cli-train-lazy", test_cli_train_lazy);
  return g_test_run ();
}
