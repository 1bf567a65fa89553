/* test-train.c: the training layer's pieces: token sources, the group
 * rule, the simulated group step, the optimizer hash.
 *
 * Proves: rank k of n cuts the rows k·B … k·B + B − 1 of what one device
 * with batch n·B cuts, and rank 0 of 1 is the solo rule written out here;
 * gradients are combined in rank order, left to right (a crafted case where
 * another order gives other bits); a simulated group of one is the solo step
 * bit for bit; a simulated group of three does not depend on the thread
 * count; the optimizer hash moves with the Adam state.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dc-test-utils.h"
#include "engine/dc-parallel.h"
#include "model/dc-model-error.h"
#include "model/dc-rng.h"
#include "train/dc-token-source.h"
#include "train/dc-train-plan.h"
#include "train/dc-train-group.h"

static GBytes *
load_corpus (void)
{
  g_autofree char *path = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
  g_autoptr(GError) error = NULL;
  char *text = NULL;
  gsize len = 0;

  g_file_get_contents (path, &text, &len, &error);
  g_assert_no_error (error);
  return g_bytes_new_take (text, len);
}

static void
test_rank_rule (void)
{
  const guint n = 3, b = 2, t = 16;
  const guint64 seed = 9;
  g_autoptr(GBytes) corpus = load_corpus ();
  g_autoptr(DcTokenSource) source = dc_token_source_new_corpus (corpus, "corpus", seed);
  g_autoptr(GError) error = NULL;
  guint8 wide_in[3 * 2 * 16], wide_tg[3 * 2 * 16];
  guint8 in[2 * 16], tg[2 * 16];
  gsize len = 0;
  const guint8 *text = g_bytes_get_data (corpus, &len);

  for (guint64 step = 0; step < 4; step++)
    {
      /* One device with batch n·B. */
      g_assert_true (dc_token_source_fill_batch (source, step, 0, 1, n * b, t, wide_in, wide_tg,
                                                 &error));
      g_assert_no_error (error);
      /* The solo rule, written out: row r starts at rng (seed, BATCH, s << 16 | r). */
      for (guint r = 0; r < n * b; r++)
        {
          guint64 start = dc_rng_u64 (seed, DC_RNG_STREAM_BATCH, (step << 16) | r) % (len - t - 1);

          g_assert_cmpmem (wide_in + r * t, t, text + start, t);
          g_assert_cmpmem (wide_tg + r * t, t, text + start + 1, t);
        }
      /* n ranks of batch B see the same rows, rank k the k-th slice. */
      for (guint k = 0; k < n; k++)
        {
          g_assert_true (dc_token_source_fill_batch (source, step, k, n, b, t, in, tg, &error));
          g_assert_cmpmem (in, b * t, wide_in + k * b * t, b * t);
          g_assert_cmpmem (tg, b * t, wide_tg + k * b * t, b * t);
        }
    }

  /* A text shorter than a row and its target is refused, not read past. */
  {
    g_autoptr(GBytes) tiny = g_bytes_new_static ("short", 5);
    g_autoptr(DcTokenSource) small = dc_token_source_new_corpus (tiny, "tiny", seed);

    g_assert_false (dc_token_source_fill_batch (small, 0, 0, 1, b, t, in, tg, &error));
    g_assert_nonnull (error);
  }
}

/* 1 + 1e8 rounds to 1e8 in f32: (1 + 1e8) + (−1e8) is 0, while
 * 1 + (1e8 + (−1e8)) is 1. Only rank order, left to right, gives 0. */
static void
test_combine_order (void)
{
  const float g0[] = { 1.0f, -0.0f }, g1[] = { 1e8f, -0.0f }, g2[] = { -1e8f, -0.0f };
  const float *ranks[] = { g0, g1, g2 };
  const float *rotated[] = { g1, g2, g0 };
  const float *one[] = { g0 };
  float out[2];

  dc_gpt_trainer_combine_gradients (ranks, 3, 2, out);
  g_assert_cmpfloat (out[0], ==, 0.0f);
  g_assert_true (signbit (out[1]));  /* −0 + −0 + −0 stays −0 */

  /* Another order gives other bits: the order is part of the rule. */
  dc_gpt_trainer_combine_gradients (rotated, 3, 2, out);
  g_assert_cmpfloat (out[0], ==, 1.0f / 3.0f);

  /* A group of one is its own gradient, −0 included. */
  dc_gpt_trainer_combine_gradients (one, 1, 2, out);
  g_assert_cmpmem (out, sizeof out, g0, sizeof g0);
}

static GPtrArray *
session_hashes (guint simulate_peers,
                guint n_threads,
                guint steps)
{
  g_autofree char *corpus = dc_test_dup_source_path ("tests", "data", "train-corpus.txt", NULL);
  DcTrainingRequest request = {
    .width = 16, .seq = 16, .batch = 2, .steps = 100, .lr_x1000 = 10, .seed = 3,
    .n_threads = n_threads, .data = corpus, .stop_at = steps, .simulate_peers = simulate_peers,
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcTrainPlan) plan = dc_train_plan_new (&request, NULL, NULL, &error);
  g_autoptr(DcTrainSession) session = NULL;
  GPtrArray *hashes = g_ptr_array_new_with_free_func (g_free);
  DcGptModel *model;

  g_assert_no_error (error);
  session = dc_train_plan_prepare (plan, NULL, &error);
  g_assert_no_error (error);
  model = dc_train_session_get_model (session);
  while (model->step < plan->stop)
    {
      float loss = 0.0f;

      g_assert_true (dc_train_session_step (session, &loss, &error));
      g_assert_no_error (error);
      g_assert_true (loss > 0.0f);
      g_ptr_array_add (hashes, dc_gpt_model_dup_hash (model));
      g_ptr_array_add (hashes, dc_gpt_model_dup_optimizer_hash (model));
    }
  return hashes;
}

static void
assert_same_hashes (GPtrArray *a,
                    GPtrArray *b)
{
  g_assert_cmpuint (a->len, ==, b->len);
  for (guint i = 0; i < a->len; i++)
    g_assert_cmpstr (a->pdata[i], ==, b->pdata[i]);
}

/* The group path (compute, combine, apply) of one device is the solo step. */
static void
test_group_of_one_is_solo (void)
{
  g_autoptr(GPtrArray) solo = session_hashes (0, 2, 5);
  g_autoptr(GPtrArray) one = session_hashes (1, 2, 5);

  assert_same_hashes (solo, one);
}

/* Three simulated devices: the same bits with one thread or three, run
 * twice; different bits from the solo run (each rank sees other rows). */
static void
test_group_of_three (void)
{
  g_autoptr(GPtrArray) solo = session_hashes (0, 1, 5);
  g_autoptr(GPtrArray) one_thread = session_hashes (3, 1, 5);
  g_autoptr(GPtrArray) three_threads = session_hashes (3, 3, 5);
  g_autoptr(GPtrArray) again = session_hashes (3, 3, 5);

  assert_same_hashes (one_thread, three_threads);
  assert_same_hashes (three_threads, again);
  g_assert_cmpstr (solo->pdata[0], !=, one_thread->pdata[0]);
}

/* A prepared run sets the engine's process default to its threads, so the
 * pool calls that take the default (the state hashes of every step among
 * them) run on the run's threads, not on one; the bits stay those of one
 * thread (above). */
static void
test_plan_engine_threads (void)
{
  g_autoptr(GPtrArray) hashes = NULL;

  dc_parallel_set_default_threads (1);
  hashes = session_hashes (0, 3, 1);
  g_assert_cmpuint (dc_parallel_get_default_threads (), ==, 3);
  g_clear_pointer (&hashes, g_ptr_array_unref);
  hashes = session_hashes (0, 2, 1);
  g_assert_cmpuint (dc_parallel_get_default_threads (), ==, 2);
}

static void
test_optimizer_hash (void)
{
  g_autoptr(GPtrArray) hashes = session_hashes (0, 1, 2);
  g_autoptr(GError) error = NULL;
  g_autoptr(DcGptModel) model = NULL;
  g_autofree char *fresh = NULL;
  DcGptConfig config;

  dc_gpt_config_init_derived (&config, 16, 16);
  model = dc_gpt_model_new (&config, &error);
  g_assert_no_error (error);
  dc_gpt_model_init_weights (model, 3);
  fresh = dc_gpt_model_dup_optimizer_hash (model);
  g_assert_cmpuint (strlen (fresh), ==, 16);
  /* [weights 1, optimizer 1, weights 2, optimizer 2]: each step moves the Adam state. */
  g_assert_cmpstr (fresh, !=, hashes->pdata[1]);
  g_assert_cmpstr (hashes->pdata[1], !=, hashes->pdata[3]);
  g_assert_cmpstr (hashes->pdata[0], !=, hashes->pdata[1]);
}

static void
test_plan_limits (void)
{
  DcTrainingRequest request = { .width = 16, .seq = 16, .seed = 1 };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcTrainPlan) plan = NULL;

  request.simulate_peers = DC_TRAIN_SIMULATE_PEERS_MAX + 1;
  plan = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_null (plan);
  g_assert_nonnull (strstr (error->message, "at most"));
  g_clear_error (&error);

  request.simulate_peers = DC_TRAIN_SIMULATE_PEERS_MAX;
  plan = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (plan->n_ranks, ==, DC_TRAIN_SIMULATE_PEERS_MAX);
  /* The largest group of the largest batch fits the batch stream's row bits. */
  g_assert_cmpuint (DC_TRAIN_SIMULATE_PEERS_MAX * DC_TRAIN_BATCH_MAX, <=, DC_TOKEN_SOURCE_MAX_ROWS);
}

/* The context's hello carries the backend really in use and its probe
 * hash, never the preference's name ("auto" was sent before the context). */
static void
test_context_hello (void)
{
  const char *preferences[] = { "cpu", "auto" };

  for (guint i = 0; i < G_N_ELEMENTS (preferences); i++)
    {
      g_autoptr(DcContext) context = dc_context_new_for_preference (preferences[i]);
      g_autoptr(DcMeshHello) hello = dc_context_new_hello (context, "test");
      DcBackendKind kind = dc_context_get_backend_kind (context);

      if (g_str_equal (preferences[i], "cpu"))
        g_assert_cmpint (kind, ==, DC_BACKEND_CPU);
      g_test_message ("%s: %s on %s", preferences[i], dc_backend_kind_to_string (kind),
                      dc_context_get_device_name (context));
      g_assert_cmpstr (hello->backend, ==, dc_backend_kind_to_string (kind));
      g_assert_cmpstr (hello->probe_hash, ==, dc_context_get_probe_hash (context));
      g_assert_cmpuint (strlen (hello->probe_hash), ==, 64);
      g_assert_cmpuint (hello->numeric_rule_id, !=, 0);
      g_assert_nonnull (dc_context_get_hf_client (context));
      g_assert_null (dc_context_get_group (context));
    }
}

/* Audits fall on the same steps for the whole roster and check every
 * gradient there, each by one other device (a rotation): the step then
 * costs every device the same recomputation at once, instead of waiting on
 * most steps for the one device that drew an audit. About one step in
 * DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW (8, the rate of that draw's time)
 * audits. */
static void
test_audit_draw (void)
{
  const guint64 seeds[] = { 1, 0x5eed, G_GUINT64_CONSTANT (1374105927237489533) };
  guint audited_steps = 0, steps = 0;

  for (guint s = 0; s < G_N_ELEMENTS (seeds); s++)
    for (guint n = 2; n <= 8; n++)
      for (guint64 step = 1; step <= 400; step++)
        {
          gboolean seen[8] = { FALSE };
          guint auditing = 0;

          for (guint r = 0; r < n; r++)
            {
              guint a = dc_train_group_audit_rank (seeds[s], step, r, n, FALSE);
              guint every = dc_train_group_audit_rank (seeds[s], step, r, n, TRUE);

              g_assert_cmpuint (every, <, n);
              g_assert_cmpuint (every, !=, r);
              if (a == G_MAXUINT)
                continue;
              g_assert_cmpuint (a, ==, every);
              g_assert_false (seen[a]);
              seen[a] = TRUE;
              auditing++;
            }
          /* All or none, and then every rank audited once. */
          g_assert_true (auditing == 0 || auditing == n);
          audited_steps += auditing > 0;
          steps++;
        }
  g_test_message ("%u of %u steps audited", audited_steps, steps);
  g_assert_cmpuint (audited_steps, >, steps / DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW * 8 / 10);
  g_assert_cmpuint (audited_steps, <, steps / DC_TRAIN_GROUP_AUDIT_PERIOD_SEED_DRAW * 12 / 10);
}

/* The draw from a step's contribution hashes (dc_train_group_audit_draw
 * ()) has the same shape: all or none of the roster audits, every rank
 * then by exactly one other, about one step in DC_TRAIN_GROUP_AUDIT_PERIOD,
 * and it follows the hash's first 8 bytes only. */
static void
test_audit_draw_hash (void)
{
  guint audited_steps = 0, steps = 0;

  for (guint n = 2; n <= 8; n++)
    for (guint i = 0; i < 1200; i++)
      {
        guint8 hash[32];
        gsize len = sizeof hash;
        g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
        gboolean seen[8] = { FALSE };
        guint auditing = 0;

        g_checksum_update (checksum, (const guchar *) &i, sizeof i);
        g_checksum_update (checksum, (const guchar *) &n, sizeof n);
        g_checksum_get_digest (checksum, hash, &len);
        for (guint r = 0; r < n; r++)
          {
            guint a = dc_train_group_audit_draw (hash, r, n, FALSE);
            guint every = dc_train_group_audit_draw (hash, r, n, TRUE);

            g_assert_cmpuint (every, <, n);
            g_assert_cmpuint (every, !=, r);
            if (a == G_MAXUINT)
              continue;
            g_assert_cmpuint (a, ==, every);
            g_assert_false (seen[a]);
            seen[a] = TRUE;
            auditing++;
          }
        g_assert_true (auditing == 0 || auditing == n);
        audited_steps += auditing > 0;
        steps++;
        /* Bytes past the first 8 do not move the draw. */
        hash[31] ^= 0xff;
        g_assert_cmpuint (dc_train_group_audit_draw (hash, 0, n, TRUE), ==,
                          dc_train_group_audit_draw (hash, 0, n, TRUE));
      }
  g_test_message ("%u of %u draws audit", audited_steps, steps);
  g_assert_cmpuint (audited_steps, >, steps / DC_TRAIN_GROUP_AUDIT_PERIOD * 8 / 10);
  g_assert_cmpuint (audited_steps, <, steps / DC_TRAIN_GROUP_AUDIT_PERIOD * 12 / 10);
}

/* The default audit rate (DC_TRAIN_GROUP_AUDIT_PERIOD, one step in 32
 * since 2026-12-02: an audit is a whole second gradient, too dear at one
 * in 8 for issue 11's 0.8 × N). A draw that is a multiple of 8 but not of
 * 32 audits nothing now (it did at one in 8); a multiple of 32 audits, the
 * rotation unchanged. And the guarantee docs/ARCHITECTURE.md states for
 * the rate: a device that corrupts every gradient escapes 124 steps with
 * at most 2 %, 256 with at most 0.03 %. */
static void
test_audit_default_rate (void)
{
  guint8 hash[32] = { 0 };
  const guint64 draws[] = { 8, 16, 24, 40, 32 * 7 + 8 };
  const double miss = 1.0 - 1.0 / DC_TRAIN_GROUP_AUDIT_PERIOD;

  g_assert_cmpuint (DC_TRAIN_GROUP_AUDIT_PERIOD, ==, 32);
  g_assert_cmpuint (DC_TRAIN_GROUP_AUDIT_PERIOD, <=, DC_TRAIN_GROUP_AUDIT_PERIOD_MAX);
  for (guint i = 0; i < G_N_ELEMENTS (draws); i++)
    {
      guint64 le = GUINT64_TO_LE (draws[i]);

      memcpy (hash, &le, 8);
      for (guint r = 0; r < 4; r++)
        g_assert_cmpuint (dc_train_group_audit_draw (hash, r, 4, FALSE), ==, G_MAXUINT);
    }
  for (guint64 k = 0; k < 3; k++)
    {
      guint64 le = GUINT64_TO_LE (k * 32);

      memcpy (hash, &le, 8);
      for (guint r = 0; r < 4; r++)
        g_assert_cmpuint (dc_train_group_audit_draw (hash, r, 4, FALSE), ==,
                          (r + 1 + k % 3) % 4);
    }
  g_assert_cmpfloat (pow (miss, 124), <=, 0.02);
  g_assert_cmpfloat (pow (miss, 256), <=, 0.0003);
}

/* A group's plan counts what its audits hold besides the run
 * (dc_train_plan_audit_bytes ()): the audit trainer's model with both
 * moments, activations and scratch, two gradient buffers, the second and
 * third snapshots and the audit's copy of its weights; so a device with memory
 * for the run alone is refused a group's run before it starts, not killed
 * by the kernel at the first audit. */
static void
test_plan_audit_memory (void)
{
  DcTrainingRequest request = { .width = 128, .seq = 128, .batch = 8, .steps = 100,
                                .n_threads = 1 };
  g_autoptr(DcTrainPlan) alone = NULL;
  g_autoptr(DcTrainPlan) group = NULL;
  g_autoptr(GError) error = NULL;
  const DcGptMemory *m;

  alone = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_no_error (error);
  request.group = TRUE;
  group = dc_train_plan_new (&request, NULL, NULL, &error);
  g_assert_no_error (error);
  m = &alone->memory;
  g_assert_cmpuint (alone->audit_bytes, ==, 0);
  g_assert_cmpuint (group->audit_bytes, ==,
                    12 * m->n_params + m->arena_bytes + m->scratch_bytes + 8 * m->n_params
                    + 24 * m->n_params + 4 * m->n_params);
  g_assert_cmpuint (group->memory.total_bytes, ==, m->total_bytes + group->audit_bytes);
  /* Room for the run alone is not room for a group's run. */
  alone->available = m->total_bytes;
  group->available = m->total_bytes;
  g_assert_true (dc_train_plan_check_memory (alone, &error));
  g_assert_no_error (error);
  g_assert_false (dc_train_plan_check_memory (group, &error));
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_INVALID);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  group->available = group->memory.total_bytes;
  g_assert_true (dc_train_plan_check_memory (group, &error));
  g_assert_no_error (error);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/train/token-source/rank-rule", test_rank_rule);
  g_test_add_func ("/dc/train/group/combine-order", test_combine_order);
  g_test_add_func ("/dc/train/group/of-one-is-solo", test_group_of_one_is_solo);
  g_test_add_func ("/dc/train/group/of-three-any-threads", test_group_of_three);
  g_test_add_func ("/dc/train/group/audit-draw", test_audit_draw);
  g_test_add_func ("/dc/train/group/audit-draw-hash", test_audit_draw_hash);
  g_test_add_func ("/dc/train/group/audit-default-rate", test_audit_default_rate);
  g_test_add_func ("/dc/train/plan-audit-memory", test_plan_audit_memory);
  g_test_add_func ("/dc/train/optimizer-hash", test_optimizer_hash);
  g_test_add_func ("/dc/train/plan-engine-threads", test_plan_engine_threads);
  g_test_add_func ("/dc/train/plan-limits", test_plan_limits);
  g_test_add_func ("/dc/train/context-hello", test_context_hello);

  return g_test_run ();
}
