/* test-model-hf-vk.c: a Hugging Face model's forward with a Vulkan backend
 * gives the same logits, bit for bit, as on the CPU.
 *
 * Proves: with the prompt's projections on the Vulkan GEMM (lavapipe in CI)
 * and the rest on the model's own CPU backend, the logits of a 69-token
 * prompt and of one decoded token equal the CPU run's. Skipped, with the
 * reason, when no Vulkan device is usable.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-test-utils.h"
#include "engine/dc-gemm-backend.h"
#include "model/dc-hf-config.h"
#include "model/dc-hf-model.h"
#include "model/dc-tensor-source-files.h"

#define PROMPT 69

/* Logits after PROMPT ids and after one more (2 × vocab floats), or NULL
 * when KIND is not usable here. */
static float *
run (const char    *name,
     DcBackendKind  kind)
{
  g_autofree char *dir = dc_test_dup_source_path ("tests", "data", "hf", "models", name, NULL);
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcHfConfig) config = dc_hf_config_new_from_file (config_path, &error);
  g_autoptr(DcTensorSource) source = NULL;
  g_autoptr(DcGemmBackend) backend = NULL;
  g_autoptr(DcHfModel) model = NULL;
  g_autoptr(DcHfKvCache) cache = NULL;
  guint32 ids[PROMPT + 1];
  float *logits;

  g_assert_no_error (error);
  backend = dc_gemm_backend_new (kind, &error);
  if (backend == NULL || dc_gemm_backend_get_kind (backend) != kind)
    {
      g_test_message ("no %s backend: %s", dc_backend_kind_to_string (kind),
                      error != NULL ? error->message : "its kernels were refused");
      return NULL;
    }
  source = dc_tensor_source_files_new (dir, &error);
  g_assert_no_error (error);
  model = dc_hf_model_load (config, source, backend, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  cache = dc_hf_kv_cache_new (model, PROMPT + 1, &error);
  g_assert_no_error (error);
  for (guint i = 0; i <= PROMPT; i++)
    ids[i] = (i * 37 + 11) % config->vocab_size;
  logits = g_new (float, 2 * (gsize) config->vocab_size);
  g_assert_true (dc_hf_model_forward (model, cache, ids, PROMPT, logits, &error));
  g_assert_true (dc_hf_model_forward (model, cache, ids + PROMPT, 1, logits + config->vocab_size,
                                      &error));
  g_assert_no_error (error);
  return logits;
}

static void
test_vulkan_equals_cpu (gconstpointer data)
{
  g_autofree float *cpu = run (data, DC_BACKEND_CPU);
  g_autofree float *vulkan = NULL;
  g_autofree char *config_path = NULL;
  g_autoptr(DcHfConfig) config = NULL;

  vulkan = run (data, DC_BACKEND_VULKAN);
  if (vulkan == NULL)
    {
      dc_test_skip_without_vulkan ("no usable Vulkan backend (the log above says why)");
      return;
    }
  config_path = dc_test_dup_source_path ("tests", "data", "hf", "models", data, "config.json",
                                         NULL);
  config = dc_hf_config_new_from_file (config_path, NULL);
  g_assert_cmpmem (vulkan, 2 * config->vocab_size * sizeof (float), cpu,
                   2 * config->vocab_size * sizeof (float));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dc_test_use_lavapipe ();
  g_test_add_data_func ("/model/hf/vulkan/llama-tiny", "llama-tiny", test_vulkan_equals_cpu);
  g_test_add_data_func ("/model/hf/vulkan/qwen2-tiny-bf16", "qwen2-tiny-bf16",
                        test_vulkan_equals_cpu);
  g_test_add_data_func ("/model/hf/vulkan/gpt2-tiny", "gpt2-tiny", test_vulkan_equals_cpu);
  return g_test_run ();
}
