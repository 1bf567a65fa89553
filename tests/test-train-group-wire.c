/* test-train-group-wire.c: a group whose run CONFIG says bf16 or int8
 * gradients on the wire (train --gradient-wire bf16|int8) between separate
 * processes (suite net).
 *
 * As test-train-group-shard.c: a signaling service and `daisychain-cli
 * train --room …` processes, ICE limited to 127.0.0.1, the smallest model.
 * What is checked is exactness (hashes against `--simulate-peers` with the
 * same wire, a pinned hash), the bytes each device sends, audits (none
 * false, a corrupt device caught) and who is refused, never timing. Each
 * case runs once per wire (the test path names it).
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
/* The same with --gradient-wire int8 (blocks of 39 values, each rounded
 * shard by shard), pinned for the same reason. */
#define INT8_SIM4_HASH16 "0e3fe43b571841c5"

/* A wire's case: its name, the pinned hash, whether the starter compresses
 * the run's chunks (DC_TRAIN_GROUP_ZSTD; both wires do by default), and
 * the bytes a device sends a step, in float32 gradients: 2 · 3/4 of a
 * gradient at 2 bytes a value (bf16) is 0.75, at 40 bytes for 39 values
 * (int8) about 0.39, both plus audits (1 in 8 here) and headers; an f32 run
 * sends over 1.2 (test-train-group-shard.c) and fails both. The int8 case
 * runs compressed: at most 0.37, under any uncompressed int8 run (here
 * 0.30–0.31 compressed, 0.42–0.46 not; at width 128 compression keeps
 * 61–65 % of the bytes). */
typedef struct
{
  const char *wire;
  const char *sim4_hash16;
  const char *zstd;
  double      min_gradients;
  double      max_gradients;
} Wire;

static const Wire bf16 = { "bf16", BF16_SIM4_HASH16, "0", 0.6, 1.0 };
static const Wire int8 = { "int8", INT8_SIM4_HASH16, "1", 0.15, 0.37 };

/* The starter: only its --gradient-wire counts (the followers follow its
 * CONFIG and name none). */
static DcTestProc *
start_host (const Wire  *wire,
            const char  *url,
            const char  *stop_at,
            const char  *min_peers,
            char       **room)
{
  DcTestProc *host;

  /* Only the starter's choice counts: the followers follow its CONFIG. */
  g_setenv ("DC_TRAIN_GROUP_ZSTD", wire->zstd, TRUE);
  host = dc_test_proc_start_host_with (url, stop_at, min_peers, room, "--gradient-wire",
                                       wire->wire, SMALL, NULL);
  g_unsetenv ("DC_TRAIN_GROUP_ZSTD");
  return host;
}

static DcTestProc *
start_follower (const char *url,
                const char *room,
                const char *name,
                const char *stop_at)
{
  return dc_test_proc_start_follower (url, room, name, stop_at, "--threads", "1", NULL);
}

/* Four processes, the starter's CONFIG saying bf16 (int8), and
 * `--simulate-peers 4 --gradient-wire bf16` (int8): the same weight hash
 * and loss at every step on every device (each rounds its own contribution
 * and its own summed shard as the others receive them; one that used its
 * own unrounded would drift from the others at step 1; in int8 one that
 * cut blocks anywhere but from each shard's first value too), the
 * simulation's hash at step 16 pinned and not f32's; and each device sends
 * the wire's share of an f32 run's bytes (Wire). */
static void
test_exact4 (gconstpointer data)
{
  const Wire *wire = data;
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = start_host (wire, url, "16", "4", &room);
  g_autoptr(DcTestProc) beta = start_follower (url, room, "beta", "16");
  g_autoptr(DcTestProc) gamma = start_follower (url, room, "gamma", "16");
  g_autoptr(DcTestProc) delta = start_follower (url, room, "delta", "16");
  g_autoptr(DcTestProc) sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11",
                                                       "--stop-at", "16",
                                     "--simulate-peers", "4", "--gradient-wire", wire->wire,
                                     SMALL, NULL);
  DcTestProc *procs[] = { alpha, beta, gamma, delta };
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcGptConfig config;
  double gradient;

  dc_gpt_config_init_derived (&config, 16, 16);
  gradient = 4.0 * (double) dc_gpt_config_n_params (&config);
  dc_test_proc_wait_done (sim, 16, RUN_BOUND_MS);
  sim_steps = dc_test_proc_steps (sim, TRUE);
  g_assert_cmpstr (dc_test_proc_hash_at (sim_steps, 16), ==, wire->sim4_hash16);
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
      g_assert_cmpfloat (per_step, >, wire->min_gradients * gradient);
      g_assert_cmpfloat (per_step, <, wire->max_gradients * gradient);
      /* A follower says which wire the run uses (its hashes are not
       * f32's). */
      if (procs[p] != alpha)
        {
          g_autofree char *said = g_strdup_printf ("gradients on the wire as %s", wire->wire);
          int i = dc_test_proc_find (procs[p], 0, "config", NULL);

          g_assert_cmpint (i, >=, 0);
          g_assert_true (dc_test_proc_message_has (g_ptr_array_index (procs[p]->events, i), said));
          g_assert_cmpint (dc_test_proc_message_has (g_ptr_array_index (procs[p]->events, i),
                                                     "compressed (zstd)"), ==,
                           g_str_equal (wire->zstd, "1"));
        }
    }
}

/* Audits of a bf16 (int8) run: three devices, alpha and beta auditing
 * every step (DC_TEST_FAULT=audit-all). The recomputed gradient is rounded
 * as its author rounded what it sent (in int8 shard by shard, for the
 * audited step's roster), and the re-summed shard as its reducer rounded
 * it, before the hashes and values are compared: nobody is accused, every
 * step keeps three devices, and every hash equals `--simulate-peers 3
 * --gradient-wire bf16` (int8). An audit that compared the unrounded
 * recomputation would accuse (and remove) every device it audits. */
static void
test_audits3 (gconstpointer data)
{
  const Wire *wire = data;
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  g_autoptr(DcTestProc) sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11",
                                                       "--stop-at", "10",
                                     "--simulate-peers", "3", "--gradient-wire", wire->wire,
                                     SMALL, NULL);
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcTestProc *procs[3];

  g_setenv ("DC_TEST_FAULT", "audit-all", TRUE);
  alpha = start_host (wire, url, "10", "3", &room);
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

/* A device whose run CONFIG says bf16 (int8) but that sends its shards as
 * f32 (DC_TEST_FAULT=wire-f32 on gamma): the others refuse them, naming
 * the device and why ("a gradient shard in f32, but the run's CONFIG says
 * bf16"), instead of summing values rounded otherwise. Without the check
 * they would be taken (the header and size are those of an f32 shard). */
static void
test_wrong_wire (gconstpointer data)
{
  const Wire *wire = data;
  g_autofree char *why = g_strdup_printf ("a gradient shard in f32, but the run's CONFIG says %s",
                                          wire->wire);
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  JsonObject *event;

  alpha = start_host (wire, url, "6", "3", &room);
  beta = start_follower (url, room, "beta", "6");
  g_setenv ("DC_TEST_FAULT", "wire-f32", TRUE);
  gamma = start_follower (url, room, "gamma", "6");
  g_unsetenv ("DC_TEST_FAULT");

  event = dc_test_proc_expect (alpha, "refused", "gamma", RUN_BOUND_MS);
  g_test_message ("alpha: %s", json_object_get_string_member (event, "message"));
  g_assert_nonnull (strstr (json_object_get_string_member (event, "message"), why));
  event = dc_test_proc_expect (beta, "refused", "gamma", RUN_BOUND_MS);
  g_assert_nonnull (strstr (json_object_get_string_member (event, "message"), why));
  /* Nothing of gamma's is summed: no device reports step 1 with it. */
  g_assert_cmpint (dc_test_proc_find (alpha, 0, "step", NULL), ==, -1);
}

/* A corrupt device in an int8 run (DC_TEST_FAULT=corrupt-gradient@5 on
 * gamma: from step 5 the largest value of its gradient's first block has
 * its sign changed, a change the wire carries as it is, and it sums the
 * same corrupt values, so the replicas stay equal): alpha and beta audit
 * every step, and the recomputation, rounded to int8 as an honest author
 * rounds, reproduces the honest gradient and not gamma's. It is caught and
 * removed ("AUDIT: removed from the run", exit 1) and the other two finish
 * with equal hashes. A rounding the auditor and author did not share would
 * accuse the honest devices too (none is). */
static void
test_audit_int8 (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  g_autoptr(GPtrArray) a = NULL, b = NULL;
  JsonObject *error;

  g_setenv ("DC_TEST_FAULT", "audit-all", TRUE);
  alpha = start_host (&int8, url, "24", "3", &room);
  beta = start_follower (url, room, "beta", "24");
  g_setenv ("DC_TEST_FAULT", "corrupt-gradient@5", TRUE);
  gamma = start_follower (url, room, "gamma", "24");
  g_unsetenv ("DC_TEST_FAULT");

  error = dc_test_proc_expect (gamma, "error", NULL, RUN_BOUND_MS);
  g_test_message ("gamma: %s", json_object_get_string_member (error, "message"));
  g_assert_true (dc_test_proc_message_has (error, "AUDIT: removed from the run"));
  g_assert_cmpint (dc_test_proc_expect_exit (gamma, EVENT_BOUND_MS), ==, 1);
  dc_test_proc_wait_done (alpha, 24, RUN_BOUND_MS);
  dc_test_proc_wait_done (beta, 24, RUN_BOUND_MS);
  g_assert_true (dc_test_proc_find (alpha, 0, "audit", "gamma") >= 0
                 || dc_test_proc_find (beta, 0, "audit", "gamma") >= 0);
  g_assert_cmpint (dc_test_proc_find (alpha, 0, "audit", "beta"), ==, -1);
  g_assert_cmpint (dc_test_proc_find (beta, 0, "audit", "alpha"), ==, -1);
  a = dc_test_proc_steps (alpha, TRUE);
  b = dc_test_proc_steps (beta, TRUE);
  for (guint s = 1; s <= 24; s++)
    g_assert_cmpstr (dc_test_proc_hash_at (a, s), ==, dc_test_proc_hash_at (b, s));
  g_assert_cmpint (json_object_get_int_member (g_ptr_array_index (a, 24), "roster"), ==, 2);
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_data_func ("/dc/train/group/bf16/exact4", &bf16, test_exact4);
  g_test_add_data_func ("/dc/train/group/bf16/audits3", &bf16, test_audits3);
  g_test_add_data_func ("/dc/train/group/bf16/wrong-wire", &bf16, test_wrong_wire);
  g_test_add_data_func ("/dc/train/group/int8/exact4", &int8, test_exact4);
  g_test_add_data_func ("/dc/train/group/int8/audits3", &int8, test_audits3);
  g_test_add_data_func ("/dc/train/group/int8/wrong-wire", &int8, test_wrong_wire);
  g_test_add_func ("/dc/train/group/int8/audit", test_audit_int8);
  return g_test_run ();
}
