/* test-infer-sampler.c: greedy and seeded, position-tied sampling.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <math.h>

#include "infer/dc-sampler.h"
#include "engine/dc-math.h"

static void
test_greedy_is_argmax (void)
{
  float logits[] = { 0.5f, 3.0f, -1.0f, 3.0f, 2.9f };
  guint8 allowed[] = { 1, 0, 1, 1, 1 };

  /* Ties go to the lowest id. */
  g_assert_cmpuint (dc_sampler_pick (logits, NULL, 5, 0, 1234, 7, NULL), ==, 1);
  /* A masked id is never picked, however large. */
  g_assert_cmpuint (dc_sampler_pick (logits, allowed, 5, 0, 1234, 7, NULL), ==, 3);
  /* Greedy ignores the seed and the position. */
  for (guint64 seed = 0; seed < 50; seed++)
    g_assert_cmpuint (dc_sampler_pick (logits, NULL, 5, 0, seed, seed * 3, NULL), ==, 1);
}

static void
test_non_finite_never_picked (void)
{
  float logits[] = { NAN, INFINITY, -INFINITY, -5.0f };
  float scratch[4];
  guint8 none[] = { 0, 0, 0, 0 };

  g_assert_cmpuint (dc_sampler_pick (logits, NULL, 4, 0, 1, 0, NULL), ==, 3);
  for (guint64 p = 0; p < 100; p++)
    g_assert_cmpuint (dc_sampler_pick (logits, NULL, 4, 100, 1, p, scratch), ==, 3);
  g_assert_cmpuint (dc_sampler_pick (logits, none, 4, 0, 1, 0, NULL), ==, DC_SAMPLER_NONE);
  g_assert_cmpuint (dc_sampler_pick (logits, none, 4, 80, 1, 0, scratch), ==, DC_SAMPLER_NONE);
}

/* The same (seed, position) gives the same id whatever was drawn before,
 * and the draw depends on the position. */
static void
test_deterministic_and_position_tied (void)
{
  float logits[64], scratch[64];
  guint32 first[200];
  guint distinct = 0;
  gboolean seen[64] = { FALSE };

  for (guint i = 0; i < G_N_ELEMENTS (logits); i++)
    logits[i] = (float) (i % 7) * 0.25f;
  for (guint64 p = 0; p < G_N_ELEMENTS (first); p++)
    first[p] = dc_sampler_pick (logits, NULL, 64, 100, 1234, p, scratch);
  /* Backwards, with other draws in between: the same ids. */
  for (guint64 p = G_N_ELEMENTS (first); p-- > 0;)
    {
      (void) dc_sampler_pick (logits, NULL, 64, 70, 99, p + 1000, scratch);
      g_assert_cmpuint (dc_sampler_pick (logits, NULL, 64, 100, 1234, p, scratch), ==, first[p]);
    }
  for (guint p = 0; p < G_N_ELEMENTS (first); p++)
    if (!seen[first[p]])
      {
        seen[first[p]] = TRUE;
        distinct++;
      }
  g_assert_cmpuint (distinct, >, 20);
}

/* Over a fixed list of seeds the picks' frequencies match softmax(logits / T)
 * within a bound that 40,000 draws meet with a wide margin (3σ ≈ 0.007). The
 * seeds are fixed, so the check is the same every run: never flaky. */
static void
test_frequencies_match_distribution (void)
{
  const float logits[] = { 1.0f, 2.0f, 0.0f, 1.5f, -3.0f };
  const guint temperatures[] = { 50, 100, 200 };
  const guint n_draws = 40000;

  for (guint t = 0; t < G_N_ELEMENTS (temperatures); t++)
    {
      float expected[5], scratch[5];
      guint counts[5] = { 0 };

      for (guint i = 0; i < 5; i++)
        expected[i] = logits[i] / (temperatures[t] / 100.0f);
      dc_math_softmax (expected, expected, 5);
      for (guint s = 0; s < n_draws; s++)
        {
          guint32 id = dc_sampler_pick (logits, NULL, 5, temperatures[t], 1000 + s, 17, scratch);

          g_assert_cmpuint (id, <, 5);
          counts[id]++;
        }
      for (guint i = 0; i < 5; i++)
        {
          double freq = counts[i] / (double) n_draws;

          g_test_message ("T=%u id %u: %.4f drawn, %.4f expected", temperatures[t], i, freq,
                          expected[i]);
          g_assert_cmpfloat (fabs (freq - expected[i]), <, 0.015);
        }
    }
}

/* A masked id takes no share: the others share its probability. */
static void
test_mask_renormalizes (void)
{
  const float logits[] = { 0.0f, 0.0f, 0.0f, 0.0f };
  const guint8 allowed[] = { 1, 0, 1, 0 };
  float scratch[4];
  guint counts[4] = { 0 };

  for (guint s = 0; s < 10000; s++)
    counts[dc_sampler_pick (logits, allowed, 4, 100, s, 3, scratch)]++;
  g_assert_cmpuint (counts[1], ==, 0);
  g_assert_cmpuint (counts[3], ==, 0);
  g_assert_cmpuint (counts[0], >, 4700);
  g_assert_cmpuint (counts[2], >, 4700);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/infer/sampler/greedy-is-argmax", test_greedy_is_argmax);
  g_test_add_func ("/infer/sampler/non-finite-never-picked", test_non_finite_never_picked);
  g_test_add_func ("/infer/sampler/deterministic-and-position-tied",
                   test_deterministic_and_position_tied);
  g_test_add_func ("/infer/sampler/frequencies-match-distribution",
                   test_frequencies_match_distribution);
  g_test_add_func ("/infer/sampler/mask-renormalizes", test_mask_renormalizes);
  return g_test_run ();
}
