/* test-train-group-bf16.c: a group whose run CONFIG says bf16 gradients on
 * the wire (train --gradient-wire bf16) between separate processes (suite
 * net).
 *
 * As test-train-group-shard.c: a signaling service and `daisychain-cli
 * train --room …` processes, ICE limited to 127.0.0.1, the smallest model.
 * What is checked is exactness (hashes against `--simulate-peers` with
 * bf16, a pinned hash), the bytes each device sends, and who is refused,
 * never timing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"
#include "model/dc-gpt-config.h"

/* As test-train-group.c: far above what an event takes on an idle machine. */
#define EVENT_BOUND_MS 60000
/* A run of small steps by four processes sharing two cores. */
#define RUN_BOUND_MS   200000

#define SMALL "--width", "16", "--seq", "16", "--batch", "2", "--steps", "100", "--threads", "1"

/* `train --simulate-peers 4 --gradient-wire bf16 --seed 11 --stop-at 16`
 * at SMALL's size after step 16 (f32: ad46eaae08136b0e; both re-pinned for
 * the piece-wise state hash, docs/VERIFICATION.md "State hash"). Pinned: the
 * rounding (to nearest even, of every contribution and of the sum) is part
 * of the run's numerics, and a change to it must show. */
#define BF16_SIM4_HASH16 "dadb22f56ff0d004"

/* The starter: only its --gradient-wire counts (the followers follow its
 * CONFIG and name none). */
static DcTestProc *
start_host (const char  *url,
            const char  *stop_at,
            const char  *min_peers,
            char       **room)
{
  return dc_test_proc_start_host_with (url, stop_at, min_peers, room, "--gradient-wire", "bf16",
                                       SMALL, NULL);
}

static DcTestProc *
start_follower (const char *url,
                const char *room,
                const char *name,
                const char *stop_at)
{
  return dc_test_proc_start_follower (url, room, name, stop_at, "--threads", "1", NULL);
}

/* Four processes, the starter's CONFIG saying bf16, and `--simulate-peers 4
 * --gradient-wire bf16`: the same weight hash and loss at every step on
 * every device (each rounds its own contribution and its own summed shard
 * as the others receive them; one that used its own unrounded would drift
 * from the others at step 1), the simulation's hash at step 16 pinned and
 * not f32's; and each device sends about half the bytes of an f32 run:
 * 2 · 3/4 of a gradient in bf16 is 0.75 float32 gradients a step (audit
 * steps, 1 in 8, and headers add a little). An f32 run sends over 1.2
 * (test-train-group-shard.c) and fails the byte check. */
static void
test_exact4 (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = start_host (url, "16", "4", &room);
  g_autoptr(DcTestProc) beta = start_follower (url, room, "beta", "16");
  g_autoptr(DcTestProc) gamma = start_follower (url, room, "gamma", "16");
  g_autoptr(DcTestProc) delta = start_follower (url, room, "delta", "16");
  g_autoptr(DcTestProc) sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11",
                                                       "--stop-at", "16",
                                     "--simulate-peers", "4", "--gradient-wire", "bf16", SMALL,
                                     NULL);
  DcTestProc *procs[] = { alpha, beta, gamma, delta };
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcGptConfig config;
  double gradient;

  dc_gpt_config_init_derived (&config, 16, 16);
  gradient = 4.0 * (double) dc_gpt_config_n_params (&config);
  dc_test_proc_wait_done (sim, 16, RUN_BOUND_MS);
  sim_steps = dc_test_proc_steps (sim, TRUE);
  g_assert_cmpstr (dc_test_proc_hash_at (sim_steps, 16), ==, BF16_SIM4_HASH16);
  for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
    {
      g_autoptr(GPtrArray) steps = NULL;
      double per_step;

      dc_test_proc_wait_done (procs[p], 16, RUN_BOUND_MS);
      steps = dc_test_proc_steps (procs[p], TRUE);
      g_assert_cmpuint (steps->len, ==, 17);
      for (guint s = 1; s <= 16; s++)
        {
          g_assert_cmpstr (dc_test_proc_hash_at (steps, s), ==,
                           dc_test_proc_hash_at (sim_steps, s));
          g_assert_cmpfloat (json_object_get_double_member (dc_test_proc_step_at (steps, s),
                                                            "loss"), ==,
                             json_object_get_double_member (dc_test_proc_step_at (sim_steps, s),
                                                            "loss"));
          g_assert_cmpint (json_object_get_int_member (dc_test_proc_step_at (steps, s), "roster"),
                           ==, 4);
        }
      per_step = (json_object_get_int_member (dc_test_proc_step_at (steps, 16), "sent_bytes")
                  - json_object_get_int_member (dc_test_proc_step_at (steps, 1),
                                                "sent_bytes")) / 15.0;
      g_test_message ("%s: %.0f bytes a step, %.2f float32 gradients of %.0f bytes",
                      procs[p]->label, per_step, per_step / gradient, gradient);
      g_assert_cmpfloat (per_step, >, 0.6 * gradient);
      g_assert_cmpfloat (per_step, <, 1.0 * gradient);
    }
}

/* Audits of a bf16 run: three devices, alpha and beta auditing every step
 * (DC_TEST_FAULT=audit-all). The recomputed gradient is rounded as its
 * author rounded what it sent, and the re-summed shard as its reducer
 * rounded it, before the hashes and values are compared: nobody is
 * accused, every step keeps three devices, and every hash equals
 * `--simulate-peers 3 --gradient-wire bf16`. An audit that compared the
 * unrounded recomputation would accuse (and remove) every device it
 * audits. */
static void
test_audits3 (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  g_autoptr(DcTestProc) sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11",
                                                       "--stop-at", "10",
                                     "--simulate-peers", "3", "--gradient-wire", "bf16", SMALL,
                                     NULL);
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcTestProc *procs[3];

  g_setenv ("DC_TEST_FAULT", "audit-all", TRUE);
  alpha = start_host (url, "10", "3", &room);
  beta = start_follower (url, room, "beta", "10");
  g_unsetenv ("DC_TEST_FAULT");
  gamma = start_follower (url, room, "gamma", "10");
  procs[0] = alpha;
  procs[1] = beta;
  procs[2] = gamma;

  dc_test_proc_wait_done (sim, 10, RUN_BOUND_MS);
  sim_steps = dc_test_proc_steps (sim, TRUE);
  for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
    {
      g_autoptr(GPtrArray) steps = NULL;

      dc_test_proc_wait_done (procs[p], 10, RUN_BOUND_MS);
      steps = dc_test_proc_steps (procs[p], TRUE);
      g_assert_cmpint (dc_test_proc_find (procs[p], 0, "audit", NULL), ==, -1);
      for (guint s = 1; s <= 10; s++)
        {
          g_assert_cmpstr (dc_test_proc_hash_at (steps, s), ==,
                           dc_test_proc_hash_at (sim_steps, s));
          g_assert_cmpint (json_object_get_int_member (dc_test_proc_step_at (steps, s), "roster"),
                           ==, 3);
        }
    }
}

/* A device whose run CONFIG says bf16 but that sends its shards as f32
 * (DC_TEST_FAULT=wire-f32 on gamma): the others refuse them, naming the
 * device and why ("a gradient shard in f32, but the run's CONFIG says
 * bf16"), instead of summing values rounded otherwise. Without the check
 * they would be taken (the header and size are those of an f32 shard). */
static void
test_wrong_wire (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  JsonObject *event;

  alpha = start_host (url, "6", "3", &room);
  beta = start_follower (url, room, "beta", "6");
  g_setenv ("DC_TEST_FAULT", "wire-f32", TRUE);
  gamma = start_follower (url, room, "gamma", "6");
  g_unsetenv ("DC_TEST_FAULT");

  event = dc_test_proc_expect (alpha, "refused", "gamma", RUN_BOUND_MS);
  g_test_message ("alpha: %s", json_object_get_string_member (event, "message"));
  g_assert_nonnull (strstr (json_object_get_string_member (event, "message"),
                            "a gradient shard in f32, but the run's CONFIG says bf16"));
  event = dc_test_proc_expect (beta, "refused", "gamma", RUN_BOUND_MS);
  g_assert_nonnull (strstr (json_object_get_string_member (event, "message"),
                            "a gradient shard in f32, but the run's CONFIG says bf16"));
  /* Nothing of gamma's is summed: no device reports step 1 with it. */
  g_assert_cmpint (dc_test_proc_find (alpha, 0, "step", NULL), ==, -1);
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/train/group/bf16/exact4", test_exact4);
  g_test_add_func ("/dc/train/group/bf16/audits3", test_audits3);
  g_test_add_func ("/dc/train/group/bf16/wrong-wire", test_wrong_wire);
  return g_test_run ();
}
