/* test-model-advanced.c: the Advanced size range (issue 15, item 3).
 *
 * Proves: the config accepts the Advanced range up to the GPT-2-small shape
 * (width 768, 12 layers of 12 heads, sequence 1024) and refuses past it; a
 * plan takes those sizes only when asked (a group never asks, and a group's
 * config check refuses them: its gradient limits were sized for the seeds'
 * range), refuses past the device's memory, and its memory figure's arena
 * part equals the arena a run really allocates; a training step at width 768 / 12 layers / 12 heads
 * (sequence 32, batch 2: the smallest batch the settings allow) gives the
 * same pinned weight hash on every CPU GEMM path this machine has.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "dc-test-utils.h"
#include "engine/dc-gemm-cpu.h"
#include "model/dc-gpt.h"
#include "model/dc-gpt-trainer.h"
#include "model/dc-model-error.h"
#include "model/dc-pt-reader.h"
#include "train/dc-token-source.h"
#include "train/dc-train-group-private.h"
#include "train/dc-train-plan.h"

static DcGptConfig
config_of (guint width,
           guint seq,
           guint layers,
           guint heads)
{
  DcGptConfig c;

  dc_gpt_config_init_derived (&c, width, seq);
  c.n_layer = layers;
  c.n_head = heads;
  return c;
}

static void
test_config_range (void)
{
  const DcGptConfig gpt2_small = config_of (768, 1024, 12, 12);
  const DcGptConfig seeds_top = config_of (128, 128, 12, 8);
  const struct { guint width, seq, layers, heads; } refused[] = {
    { 769, 32, 1, 1 }, { 776, 32, 2, 8 }, { 768, 1025, 12, 12 }, { 768, 32, 13, 12 },
    { 768, 32, 0, 12 }, { 768, 32, 12, 7 }, { 768, 32, 12, 0 }, { 15, 32, 1, 1 },
    { 64, 15, 2, 4 },
  };
  g_autoptr(GError) error = NULL;
  DcGptConfig c;

  g_assert_true (dc_gpt_config_validate (&gpt2_small, &error));
  g_assert_no_error (error);
  g_assert_false (dc_gpt_config_in_seed_range (&gpt2_small));
  g_assert_true (dc_gpt_config_validate (&seeds_top, NULL));
  g_assert_true (dc_gpt_config_in_seed_range (&seeds_top));
  /* The seeds' range stops at 128 either way. */
  c = config_of (144, 128, 4, 9);
  g_assert_true (dc_gpt_config_validate (&c, NULL));
  g_assert_false (dc_gpt_config_in_seed_range (&c));
  c = config_of (128, 129, 4, 8);
  g_assert_false (dc_gpt_config_in_seed_range (&c));

  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr(GError) e = NULL;

      c = config_of (refused[i].width, refused[i].seq, refused[i].layers, refused[i].heads);
      g_assert_false (dc_gpt_config_validate (&c, &e));
      g_assert_error (e, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS);
      g_test_message ("%s", e->message);
      g_assert_false (dc_gpt_config_in_seed_range (&c));
    }
  {
    g_autoptr(GError) e = NULL;

    c = config_of (1024, 32, 12, 16);
    g_assert_false (dc_gpt_config_validate (&c, &e));
    g_assert_nonnull (strstr (e->message, "outside the Advanced range (width 16–768, "
                                          "sequence 16–1024, layers 1–12"));
  }
  /* GPT-2 small's shape with this build's 256-byte vocabulary. */
  g_assert_cmpuint (dc_gpt_config_n_params (&gpt2_small), ==,
                    256 * 768 + 1024 * 768 + 12 * (12 * 768 * 768 + 13 * 768) + 2 * 768);
  /* Its checkpoint (weights and both moments) fits the reader's file limit
   * with room for the pickle and the zip headers. */
  g_assert_cmpuint (12 * (guint64) dc_gpt_config_n_params (&gpt2_small) + 16 * 1024 * 1024, <,
                    DC_PT_MAX_FILE_SIZE);
}

static void
test_plan_asks_for_advanced (void)
{
  DcTrainingRequest request = { .width = 768, .seq = 32, .batch = 2, .n_layer = 12,
                                .n_head = 12, .seed = 1 };
  g_autoptr(DcTrainPlan) refused = NULL;
  g_autoptr(DcTrainPlan) plan = NULL;
  g_autoptr(DcTrainPlan) seeds = NULL;
  g_autoptr(GError) error = NULL;

  refused = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_null (refused);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_DIMS);
  g_assert_true (g_str_has_prefix (error->message, "width 768, sequence 32, 12 layers, 12 heads "
                                                   "(width and sequence must be 16–128"));
  g_assert_nonnull (strstr (error->message, "Advanced range"));
  g_clear_error (&error);

  request.advanced = TRUE;
  plan = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (plan->config.n_layer, ==, 12);
  g_assert_cmpuint (plan->config.n_head, ==, 12);
  g_assert_cmpuint (plan->memory.n_params, ==, dc_gpt_config_n_params (&plan->config));
  g_assert_cmpuint (plan->memory.params_bytes, ==, 12 * plan->memory.n_params);
  g_assert_cmpuint (plan->memory.grads_bytes, ==, 4 * plan->memory.n_params);
  g_assert_cmpuint (plan->memory.total_bytes, ==,
                    plan->memory.params_bytes + plan->memory.grads_bytes
                    + plan->memory.arena_bytes + plan->memory.scratch_bytes);
  /* About 1.4 GB: weights, both moments and the gradient of 86 M parameters. */
  g_assert_cmpuint (plan->memory.total_bytes, >, 1300000000u);
  g_assert_cmpuint (plan->memory.total_bytes, <, 1600000000u);

  /* Memory: a device with less than the run needs is refused before Start. */
  plan->available = plan->memory.total_bytes - 1;
  g_assert_false (dc_train_plan_check_memory (plan, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "needs"));
  g_clear_error (&error);
  plan->available = plan->memory.total_bytes;
  g_assert_true (dc_train_plan_check_memory (plan, &error));
  g_assert_no_error (error);

  /* A group never trains the Advanced range: its gradients (4 bytes a
   * parameter: 344 MB here) would pass no peer's 64 MiB limit, so the size
   * check of a group's config refuses it, while the seeds' largest passes. */
  g_assert_cmpuint (_dc_train_group_checkpoint_cap (768, 32), ==, 0);
  g_assert_cmpuint (_dc_train_group_checkpoint_cap (144, 128), ==, 0);
  g_assert_cmpuint (_dc_train_group_checkpoint_cap (128, 129), ==, 0);
  g_assert_cmpuint (_dc_train_group_checkpoint_cap (128, 128), >, 0);

  /* Asking for the Advanced range changes nothing inside the seeds' range. */
  request.width = 64;
  request.n_layer = 0;
  request.n_head = 0;
  seeds = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (seeds->config.n_layer, ==, 3);
  g_assert_cmpuint (seeds->config.n_head, ==, 4);
}

/* The memory figure's arena is the arena a run allocates, at several sizes
 * and thread counts (the attention scratch is per worker). */
static void
test_memory_matches_arena (void)
{
  const struct { guint width, seq, layers, heads, batch, threads; } sizes[] = {
    { 16, 16, 2, 1, 2, 1 }, { 128, 128, 12, 8, 32, 3 }, { 256, 64, 3, 4, 2, 2 },
    { 768, 32, 12, 12, 2, 2 }, { 768, 1024, 12, 12, 1, 1 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      DcGptConfig c = config_of (sizes[i].width, sizes[i].seq, sizes[i].layers, sizes[i].heads);
      DcGptMemory m;
      g_autoptr(DcGptRun) run = NULL;

      dc_gpt_train_memory (&c, sizes[i].batch, sizes[i].threads, &m);
      g_test_message ("width %u seq %u layers %u batch %u: %" G_GUINT64_FORMAT " bytes, arena %"
                      G_GUINT64_FORMAT, c.width, c.seq, c.n_layer, sizes[i].batch, m.total_bytes,
                      m.arena_bytes);
      run = dc_gpt_run_new (&c, sizes[i].batch, DC_GPT_PRECISION_INT8, sizes[i].threads);
      g_assert_cmpuint (m.arena_bytes, ==, dc_gpt_run_get_arena_bytes (run));
      g_assert_cmpuint (m.n_params, ==, dc_gpt_config_n_params (&c));
    }
}

/* The weights' hash after one step at the GPT-2-small shape (sequence 32,
 * batch 2, seed 3), from main's CPU paths when the Advanced range came in
 * (re-pinned for the piece-wise state hash, docs/VERIFICATION.md "State
 * hash": the same state's old SHA-256 pin was 115f1e21a1d75e1d). */
#define PINNED_HASH_W768_L12 "d3982bc6ed4abe32"

static char *
advanced_step_hash (guint n_threads)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
  g_autoptr(GBytes) corpus = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptTrainer) trainer = NULL;
  DcGptConfig c = config_of (768, 32, 12, 12);
  DcTrainSettings settings;
  DcGptModel *model;
  char *text = NULL;
  gsize len = 0;

  g_file_get_contents (path, &text, &len, &error);
  g_assert_no_error (error);
  corpus = g_bytes_new_take (text, len);
  model = dc_gpt_model_new (&c, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 3);
  dc_train_settings_init_default (&settings);
  settings.batch = 2;
  trainer = dc_token_source_new_trainer (model, &settings, corpus, DC_GPT_PRECISION_INT8,
                                         n_threads, &error);
  g_assert_no_error (error);
  g_assert_true (dc_gpt_trainer_step (trainer, NULL, &error));
  g_assert_no_error (error);
  return dc_gpt_model_dup_hash (dc_gpt_trainer_get_model (trainer));
}

/* Every CPU GEMM path this machine has gives the pinned hash. */
static void
test_gpt2_small_step_pinned (void)
{
  static const DcGemmIsa isas[] = {
    DC_GEMM_ISA_SCALAR, DC_GEMM_ISA_AVX2, DC_GEMM_ISA_AVX512_VNNI,
  };
  g_autofree char *saved = g_strdup (g_getenv ("DC_GEMM_ISA"));
  guint paths = 0;

  for (guint i = 0; i < G_N_ELEMENTS (isas); i++)
    {
      g_autofree char *hash = NULL;

      if (!dc_gemm_isa_supported (isas[i]))
        {
          g_test_message ("%s: not on this CPU", dc_gemm_isa_to_string (isas[i]));
          continue;
        }
      g_setenv ("DC_GEMM_ISA", dc_gemm_isa_to_string (isas[i]), TRUE);
      hash = advanced_step_hash (2);
      g_test_message ("%s: %s", dc_gemm_isa_to_string (isas[i]), hash);
      g_assert_cmpstr (hash, ==, PINNED_HASH_W768_L12);
      paths++;
    }
  if (saved != NULL)
    g_setenv ("DC_GEMM_ISA", saved, TRUE);
  else
    g_unsetenv ("DC_GEMM_ISA");
  g_test_message ("%u CPU paths gave the pinned hash", paths);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/model/advanced/config-range", test_config_range);
  g_test_add_func ("/dc/model/advanced/plan-asks-for-advanced", test_plan_asks_for_advanced);
  g_test_add_func ("/dc/model/advanced/memory-matches-arena", test_memory_matches_arena);
  g_test_add_func ("/dc/model/advanced/gpt2-small-step-pinned", test_gpt2_small_step_pinned);
  return g_test_run ();
}
