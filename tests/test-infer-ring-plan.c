/* test-infer-ring-plan.c: who holds which layers of a model split across a group.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>

#include "infer/dc-ring-plan.h"
#include "model/dc-model-error.h"

#define MB 1000000ull

/* A 30-layer model, 10 MB a layer, 60 MB of ends; 1 ms a layer at 1 GMAC/s. */
static DcRingShape
shape_30 (void)
{
  DcRingShape shape = {
    .n_layers = 30,
    .layer_bytes = 10 * MB,
    .layer_download = 9 * MB,
    .ends_bytes = 60 * MB,
    .ends_download = 50 * MB,
    .layer_macs = 1e6,
    .ends_macs = 2e6,
    .hop_ms = 1.0,
  };

  return shape;
}

static void
check_contiguous (const DcRingPlan *plan,
                  guint             n_layers)
{
  guint next = 0;

  g_assert_true (dc_ring_plan_get_stage (plan, 0)->ends);
  g_assert_cmpuint (dc_ring_plan_get_stage (plan, 0)->device, ==, 0);
  for (guint i = 0; i < dc_ring_plan_get_n_stages (plan); i++)
    {
      const DcRingStage *s = dc_ring_plan_get_stage (plan, i);

      g_assert_cmpuint (s->first, ==, next);
      g_assert_cmpuint (s->last, >=, s->first);
      g_assert_true (i == 0 || s->last > s->first);
      g_assert_true (s->ends == (i == 0));
      next = s->last;
    }
  g_assert_cmpuint (next, ==, n_layers);
}

static void
test_alone_when_it_fits (void)
{
  DcRingShape shape = shape_30 ();
  DcRingDevice devices[] = {
    { "", "head", "abc", 400 * MB, 1.0 },
    { "p1", "fast", "abc", 400 * MB, 10.0 },
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcRingPlan) plan = dc_ring_plan_new (&shape, devices, 2, &error);

  g_assert_no_error (error);
  /* 60 + 30 × 10 = 360 MB fit the head: no ring, however fast the peer. */
  g_assert_cmpuint (dc_ring_plan_get_n_stages (plan), ==, 1);
  check_contiguous (plan, 30);
  g_assert_cmpuint (dc_ring_plan_get_stage (plan, 0)->download_bytes, ==, 50 * MB + 30 * 9 * MB);
  g_assert_cmpuint (dc_ring_plan_get_stage (plan, 0)->hold_bytes, ==, 360 * MB);
  /* 32 ms of compute, no hop. */
  g_assert_cmpfloat_with_epsilon (plan->lap_ms, 32.0, 1e-9);
}

static void
test_split_by_memory_and_speed (void)
{
  DcRingShape shape = shape_30 ();
  DcRingDevice devices[] = {
    { "", "head", "abc", 160 * MB, 1.0 },    /* ends + 10 layers */
    { "p1", "slow", "abc", 1000 * MB, 0.5 },
    { "p2", "fast", "abc", 120 * MB, 4.0 },  /* 12 layers */
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcRingPlan) plan = dc_ring_plan_new (&shape, devices, 3, &error);
  const DcRingStage *s;

  g_assert_no_error (error);
  check_contiguous (plan, 30);
  g_assert_cmpuint (dc_ring_plan_get_n_stages (plan), ==, 3);
  /* The fastest fills up first (12), then the head (10), the slow one the rest (8). */
  s = dc_ring_plan_get_stage (plan, 0);
  g_assert_cmpuint (s->last - s->first, ==, 10);
  g_assert_cmpuint (s->hold_bytes, ==, 160 * MB);
  g_assert_cmpuint (s->download_bytes, ==, 50 * MB + 90 * MB);
  s = dc_ring_plan_get_stage (plan, 1);
  g_assert_cmpuint (s->device, ==, 1);
  g_assert_cmpuint (s->last - s->first, ==, 8);
  g_assert_cmpfloat_with_epsilon (s->ms_per_token, 16.0, 1e-9);
  s = dc_ring_plan_get_stage (plan, 2);
  g_assert_cmpuint (s->device, ==, 2);
  g_assert_cmpuint (s->last - s->first, ==, 12);
  g_assert_cmpuint (s->hold_bytes, ==, 120 * MB);
  g_assert_cmpfloat_with_epsilon (s->ms_per_token, 3.0, 1e-9);
  /* 12 (head: 10 layers + ends) + 16 + 3, and three hops. */
  g_assert_cmpfloat_with_epsilon (plan->lap_ms, 12.0 + 16.0 + 3.0 + 3.0, 1e-9);
  /* Never more than a device offers. */
  for (guint i = 0; i < dc_ring_plan_get_n_stages (plan); i++)
    {
      s = dc_ring_plan_get_stage (plan, i);
      g_assert_cmpuint (s->hold_bytes, <=, devices[s->device].memory_bytes);
    }
  g_assert_cmpint (dc_ring_plan_find_layer (plan, 0), ==, 0);
  g_assert_cmpint (dc_ring_plan_find_layer (plan, 29), ==, 2);
  g_assert_cmpint (dc_ring_plan_find_layer (plan, 30), ==, -1);
}

static void
test_probe_mismatch_stays_out (void)
{
  DcRingShape shape = shape_30 ();
  DcRingDevice devices[] = {
    { "", "head", "abc", 160 * MB, 1.0 },
    { "p1", "odd", "xyz", 1000 * MB, 9.0 },
    { "p2", "good", "abc", 1000 * MB, 1.0 },
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(DcRingPlan) plan = dc_ring_plan_new (&shape, devices, 3, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (dc_ring_plan_get_n_stages (plan), ==, 2);
  g_assert_cmpuint (dc_ring_plan_get_stage (plan, 1)->device, ==, 2);
  /* When the plan fails, its message says who stayed out and why. */
  {
    DcRingDevice two[] = { devices[0], devices[1] };
    DcRingPlan *none;

    g_clear_error (&error);
    none = dc_ring_plan_new (&shape, two, 2, &error);
    g_assert_null (none);
    g_assert_nonnull (strstr (error->message, "hold 10 of its 30 layers; add a device or pick "
                                              "a smaller model (“odd” stays out of the plan: "
                                              "kernel probe xyz differs"));
    g_clear_error (&error);
  }
  g_assert_cmpuint (plan->excluded->len, ==, 1);
  g_assert_nonnull (strstr (g_ptr_array_index (plan->excluded, 0),
                            "“odd” stays out of the plan: kernel probe"));
  check_contiguous (plan, 30);
}

static void
test_refusals (void)
{
  DcRingShape shape = shape_30 ();
  DcRingDevice small[] = {
    { "", "head", "abc", 100 * MB, 1.0 },
    { "p1", "b", "abc", 100 * MB, 1.0 },
  };
  DcRingDevice tiny[] = { { "", "head", "abc", 59 * MB, 1.0 } };
  DcRingDevice slow[] = {
    { "", "head", "abc", 160 * MB, 1e-4 },
    { "p1", "b", "abc", 1000 * MB, 1e-4 },
  };
  g_autoptr(GError) error = NULL;
  DcRingPlan *plan;

  /* 4 + 10 layers of 30: never a plan that would run out of memory. */
  plan = dc_ring_plan_new (&shape, small, 2, &error);
  g_assert_null (plan);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, "its devices hold 14 of its 30 layers"));
  g_clear_error (&error);

  plan = dc_ring_plan_new (&shape, tiny, 1, &error);
  g_assert_null (plan);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE);
  g_clear_error (&error);

  /* 32 M multiply-adds at 0.1 M a second: 320 s a token. */
  plan = dc_ring_plan_new (&shape, slow, 2, &error);
  g_assert_null (plan);
  g_assert_error (error, DC_MODEL_ERROR, DC_MODEL_ERROR_TOO_LARGE);
  g_assert_true (g_str_has_prefix (error->message, "refusing the run: estimated 320002 ms per "
                                                   "token"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/infer/ring-plan/alone-when-it-fits", test_alone_when_it_fits);
  g_test_add_func ("/infer/ring-plan/split-by-memory-and-speed", test_split_by_memory_and_speed);
  g_test_add_func ("/infer/ring-plan/probe-mismatch-stays-out", test_probe_mismatch_stays_out);
  g_test_add_func ("/infer/ring-plan/refusals", test_refusals);
  return g_test_run ();
}
