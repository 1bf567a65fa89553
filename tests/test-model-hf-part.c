/* test-model-hf-part.c: a model split into parts (a ring's stages) computes
 * the same bits as the whole model, and each part reads only its tensors.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "engine/dc-gemm-backend.h"
#include "model/dc-hf-config.h"
#include "model/dc-hf-model.h"
#include "model/dc-tensor-source-files.h"

typedef struct
{
  DcHfConfig     *config;
  DcTensorSource *source;
  DcGemmBackend  *backend;
} Fixture;

static void
fixture_open (Fixture    *f,
              const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "data", "hf", "models", name, NULL);
  g_autofree char *config_path = g_build_filename (dir, "config.json", NULL);

  f->config = dc_hf_config_new_from_file (config_path, &error);
  g_assert_no_error (error);
  f->source = dc_tensor_source_files_new (dir, &error);
  g_assert_no_error (error);
  f->backend = dc_gemm_backend_new (DC_BACKEND_CPU, &error);
  g_assert_no_error (error);
}

static void
fixture_close (Fixture *f)
{
  g_clear_pointer (&f->config, dc_hf_config_free);
  g_clear_object (&f->source);
  g_clear_pointer (&f->backend, dc_gemm_backend_free);
}

static guint64
bytes_of (GPtrArray *tensors)
{
  guint64 total = 0;

  for (guint i = 0; i < tensors->len; i++)
    {
      const DcSafetensorsTensor *t = g_ptr_array_index (tensors, i);

      total += t->end - t->begin;
    }
  return total;
}

/* Splits NAME's layers at CUT1 and CUT2 (the head holds [0, CUT1) and the
 * ends) and runs a prompt, then tokens one at a time, through the parts and
 * through the whole model: every logit must be the same bits. */
static void
check_parts (gconstpointer data)
{
  const char *name = data;
  g_autoptr(GError) error = NULL;
  Fixture f = { 0 };
  guint L, cuts[4];
  DcHfModel *parts[3] = { NULL };
  DcHfKvCache *caches[3] = { NULL };
  g_autoptr(DcHfModel) whole = NULL;
  g_autoptr(DcHfKvCache) whole_cache = NULL;
  g_autoptr(GPtrArray) all = NULL;
  g_autofree float *expect = NULL, *got = NULL, *x = NULL;
  guint32 ids[24];
  guint64 part_bytes = 0;
  gsize C, V;

  fixture_open (&f, name);
  L = f.config->n_layers;
  C = f.config->hidden_size;
  V = f.config->vocab_size;
  cuts[0] = 0;
  cuts[1] = L / 3;
  cuts[2] = 2 * L / 3 + 1;
  cuts[3] = L;
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
    ids[i] = (guint32) ((i * 37 + 11) % V);

  whole = dc_hf_model_load (f.config, f.source, f.backend, NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  whole_cache = dc_hf_kv_cache_new (whole, 64, &error);
  g_assert_no_error (error);
  for (guint p = 0; p < 3; p++)
    {
      g_autoptr(GPtrArray) mine = NULL;

      parts[p] = dc_hf_model_load_part (f.config, f.source, f.backend, cuts[p], cuts[p + 1],
                                        p == 0, NULL, NULL, NULL, &error);
      g_assert_no_error (error);
      caches[p] = dc_hf_kv_cache_new (parts[p], 64, &error);
      g_assert_no_error (error);
      mine = dc_hf_model_list_part_tensors (f.config, f.source, cuts[p], cuts[p + 1], p == 0,
                                            &error);
      g_assert_no_error (error);
      part_bytes += bytes_of (mine);
      g_assert_cmpuint (dc_hf_model_part_memory_bytes (f.config, cuts[p], cuts[p + 1], p == 0,
                                                       64), <,
                        dc_hf_model_memory_bytes (f.config, 64));
    }
  /* The parts read every tensor exactly once between them. */
  all = dc_hf_model_list_tensors (f.config, f.source, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (part_bytes, ==, bytes_of (all));

  expect = g_new (float, V);
  got = g_new (float, V);
  x = g_new (float, G_N_ELEMENTS (ids) * C);
  /* A prompt of 20 in one call, then 4 tokens one at a time. */
  for (guint step = 0; step < 5; step++)
    {
      const guint32 *in = step == 0 ? ids : ids + 19 + step;
      gsize n = step == 0 ? 20 : 1;

      g_assert_true (dc_hf_model_forward (whole, whole_cache, in, n, expect, &error));
      g_assert_no_error (error);
      g_assert_true (dc_hf_model_forward_part (parts[0], caches[0], in, x, n, &error));
      g_assert_no_error (error);
      for (guint p = 1; p < 3; p++)
        {
          g_assert_true (dc_hf_model_forward_part (parts[p], caches[p], NULL, x, n, &error));
          g_assert_no_error (error);
        }
      g_assert_true (dc_hf_model_head (parts[0], x + (n - 1) * C, got, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (got, V * sizeof (float), expect, V * sizeof (float));
      for (guint p = 0; p < 3; p++)
        g_assert_cmpuint (dc_hf_kv_cache_get_length (caches[p]), ==,
                          dc_hf_kv_cache_get_length (whole_cache));
    }

  for (guint p = 0; p < 3; p++)
    {
      dc_hf_kv_cache_free (caches[p]);
      dc_hf_model_free (parts[p]);
    }
  fixture_close (&f);
}

/* A part without the ends has no embedding: ids are refused by contract,
 * and a part without layers (a head alone) still counts positions. */
static void
test_head_without_layers (void)
{
  g_autoptr(GError) error = NULL;
  Fixture f = { 0 };
  g_autoptr(DcHfModel) head = NULL;
  g_autoptr(DcHfKvCache) cache = NULL;
  g_autoptr(GPtrArray) mine = NULL;
  float x[3 * 128];
  const guint32 ids[3] = { 5, 6, 7 };

  fixture_open (&f, "llama-tiny");
  head = dc_hf_model_load_part (f.config, f.source, f.backend, 0, 0, TRUE, NULL, NULL, NULL,
                                &error);
  g_assert_no_error (error);
  cache = dc_hf_kv_cache_new (head, 8, &error);
  g_assert_no_error (error);
  g_assert_true (dc_hf_model_forward_part (head, cache, ids, x, 3, &error));
  g_assert_cmpuint (dc_hf_kv_cache_get_length (cache), ==, 3);
  mine = dc_hf_model_list_part_tensors (f.config, f.source, 0, 0, TRUE, &error);
  g_assert_no_error (error);
  /* embed_tokens, norm, lm_head (untied). */
  g_assert_cmpuint (mine->len, ==, 3);
  fixture_close (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_data_func ("/model/hf-part/same-bits/llama-tiny", "llama-tiny", check_parts);
  g_test_add_data_func ("/model/hf-part/same-bits/gpt2-noprefix-tiny", "gpt2-noprefix-tiny",
                        check_parts);
  g_test_add_data_func ("/model/hf-part/same-bits/qwen2-tiny-bf16", "qwen2-tiny-bf16",
                        check_parts);
  g_test_add_func ("/model/hf-part/head-without-layers", test_head_without_layers);
  return g_test_run ();
}
