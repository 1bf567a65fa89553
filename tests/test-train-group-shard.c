/* test-train-group-shard.c: the sharded step exchange (reduce-scatter, then
 * all-gather) between separate processes (suite net).
 *
 * As test-train-group.c: a signaling service and `daisychain-cli train
 * --room …` processes, ICE limited to 127.0.0.1, the smallest model. What
 * is checked is exactness (hashes, losses, rosters), the bytes each device
 * sends and who is caught or repaired, never timing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"
#include "mesh/dc-mesh-train-protocol.h"
#include "model/dc-gpt-config.h"
#include "train/dc-train-wire.h"

/* As test-train-group.c: far above what an event takes on an idle machine. */
#define EVENT_BOUND_MS 60000
/* A run of small steps by four processes sharing two cores. */
#define RUN_BOUND_MS   200000

#define SMALL "--width", "16", "--seq", "16", "--batch", "2", "--steps", "100", "--threads", "1"

static DcTestProc *
start_follower (const char *url,
                const char *room,
                const char *name,
                const char *stop_at)
{
  return dc_test_proc_start_follower (url, room, name, stop_at, "--threads", "1", NULL);
}

/* The starter of a run whose chunks go raw (DC_TRAIN_GROUP_ZSTD=0; the
 * followers follow its CONFIG): the bytes counted below are the sharded
 * exchange's own, as docs/ARCHITECTURE.md derives them. Compressed chunks:
 * test-train-group-wire.c. */
static DcTestProc *
start_raw_host (const char  *url,
                const char  *stop_at,
                const char  *min_peers,
                char       **room)
{
  DcTestProc *host;

  g_setenv ("DC_TRAIN_GROUP_ZSTD", "0", TRUE);
  host = dc_test_proc_start_host (url, stop_at, min_peers, room);
  g_unsetenv ("DC_TRAIN_GROUP_ZSTD");
  return host;
}

/* Four processes and `--simulate-peers 4`: the same weight hash and loss at
 * every step, four devices in every roster; and each device sends about
 * 2 · 3/4 of a gradient a step (its three contributions, then its summed
 * shard three times), not the 3 whole gradients of an all-to-all exchange:
 * under 2 gradients a step on average (audit steps, 1 in 8, add up to 3/4
 * of one; chunk headers and step reports a little). Main's all-to-all
 * exchange sends over 3 and fails the byte check. */
static void
test_exact4 (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = start_raw_host (url, "16", "4", &room);
  g_autoptr(DcTestProc) beta = start_follower (url, room, "beta", "16");
  g_autoptr(DcTestProc) gamma = start_follower (url, room, "gamma", "16");
  g_autoptr(DcTestProc) delta = start_follower (url, room, "delta", "16");
  g_autoptr(DcTestProc) sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11",
                                                       "--stop-at", "16", "--simulate-peers", "4",
                                                       SMALL, NULL);
  DcTestProc *procs[] = { alpha, beta, gamma, delta };
  GPtrArray *all_steps[G_N_ELEMENTS (procs)] = { NULL };
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcGptConfig config;
  DcGptTensor block1;
  double gradient;

  dc_gpt_config_init_derived (&config, 16, 16);
  gradient = 4.0 * (double) dc_gpt_config_n_params (&config);
  dc_gpt_config_tensor (&config, 2 + DC_GPT_TENSORS_PER_LAYER, &block1);
  dc_test_proc_wait_done (sim, 16, RUN_BOUND_MS);
  sim_steps = dc_test_proc_steps (sim, TRUE);
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
      g_test_message ("%s: %.0f bytes a step, %.2f gradients of %.0f bytes",
                      procs[p]->label, per_step, per_step / gradient, gradient);
      g_assert_cmpfloat (per_step, >, 1.2 * gradient);
      g_assert_cmpfloat (per_step, <, 2.0 * gradient);
      all_steps[p] = g_steal_pointer (&steps);
    }
  /* The tail layout (docs/ARCHITECTURE.md, "The sharded exchange"): what
   * the devices send once their backward pass has passed block 1 is
   * exactly the values final only then (the embeddings and block 0,
   * [0, block 1)), each by the three devices that do not reduce it; none
   * of the values final earlier waits for the end. Even shards send
   * 24,624 values then at width 16 (shard 2 begins inside block 0 and
   * ends in block 1), not 3 × 7,632. */
  for (guint s = 1; s <= 16; s++)
    {
      gint64 tail = 0;

      for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
        {
          gint64 values = json_object_get_int_member (dc_test_proc_step_at (all_steps[p], s),
                                                      "tail_values");

          g_test_message ("step %u, %s: tail_values %" G_GINT64_FORMAT, s, procs[p]->label,
                          values);
          g_assert_cmpint (values, <=, (gint64) block1.offset);
          tail += values;
        }
      g_assert_cmpint (tail, ==, 3 * (gint64) block1.offset);
    }
  for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
    g_ptr_array_unref (all_steps[p]);
}

/* A reducer that sums its shard wrongly (one flipped bit from step 5 on,
 * applied by every device, so the replicas stay equal:
 * DC_TEST_FAULT=corrupt-sum@5 on gamma) is caught by the audits of the
 * summed shards (alpha and beta audit every step, DC_TEST_FAULT=audit-all)
 * and removed: gamma stops with "AUDIT: removed from the run" naming its
 * summed shard (exit 1), the two others log that "the summed shard of
 * “gamma”" does not reproduce and finish 20 steps with equal hashes, three
 * devices to the step it was caught at, two after. Without the re-summing
 * check gamma's gradients reproduce and it trains on unnoticed. */
static void
test_wrong_sum (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  g_autoptr(GPtrArray) a = NULL, b = NULL;
  JsonObject *error;
  guint caught = 0;

  g_setenv ("DC_TEST_FAULT", "audit-all", TRUE);
  alpha = dc_test_proc_start_host (url, "20", "3", &room);
  beta = start_follower (url, room, "beta", "20");
  g_setenv ("DC_TEST_FAULT", "corrupt-sum@5", TRUE);
  gamma = start_follower (url, room, "gamma", "20");
  g_unsetenv ("DC_TEST_FAULT");

  error = dc_test_proc_expect (gamma, "error", NULL, RUN_BOUND_MS);
  g_test_message ("gamma: %s", json_object_get_string_member (error, "message"));
  g_assert_true (dc_test_proc_message_has (error, "AUDIT: removed from the run"));
  g_assert_true (dc_test_proc_message_has (error, "summed shard"));
  g_assert_cmpint (dc_test_proc_expect_exit (gamma, EVENT_BOUND_MS), ==, 1);
  dc_test_proc_wait_done (alpha, 20, RUN_BOUND_MS);
  dc_test_proc_wait_done (beta, 20, RUN_BOUND_MS);
  for (guint p = 0; p < 2; p++)
    {
      DcTestProc *proc = p == 0 ? alpha : beta;
      int i = dc_test_proc_find (proc, 0, "audit", "gamma");

      g_assert_cmpint (i, >=, 0);
      g_assert_true (dc_test_proc_message_has (g_ptr_array_index (proc->events, i),
                                  "the summed shard of “gamma”"));
      g_assert_true (dc_test_proc_message_has (g_ptr_array_index (proc->events, i),
                                               "does not reproduce"));
      g_assert_cmpint (dc_test_proc_find (proc, 0, "audit", "alpha"), ==, -1);
      g_assert_cmpint (dc_test_proc_find (proc, 0, "audit", "beta"), ==, -1);
    }
  a = dc_test_proc_steps (alpha, TRUE);
  b = dc_test_proc_steps (beta, TRUE);
  for (guint s = 1; s <= 20; s++)
    {
      gint64 roster = json_object_get_int_member (dc_test_proc_step_at (a, s), "roster");

      g_assert_cmpstr (dc_test_proc_hash_at (a, s), ==, dc_test_proc_hash_at (b, s));
      g_assert_cmpint (roster, ==, json_object_get_int_member (dc_test_proc_step_at (b, s),
                                                               "roster"));
      if (roster == 3)
        {
          g_assert_cmpuint (caught, ==, s - 1);
          caught = s;
        }
      else
        g_assert_cmpint (roster, ==, 2);
    }
  g_test_message ("caught at step %u", caught);
  g_assert_cmpuint (caught, >=, 5);
  g_assert_cmpuint (caught, <=, 12);
}

/* Four devices; at step 10 gamma loses every contribution sent to it
 * (DC_TEST_FAULT=drop-contribution@10) and delta every summed shard
 * (DC_TEST_FAULT=drop-gradient@10). Gamma asks each author for its
 * contribution again ("missing the contribution"), sums its shard, and the
 * others finish the step; delta has the summed shards repaired by a device
 * that took the step ("missing a roster gradient of step 10 … requesting
 * repair from the leader"). All four equal `--simulate-peers 4` at every
 * step, four devices in every roster. Without the contributions' repair
 * nobody could take step 10 (gamma's shard never summed) until the 120 s
 * timeout stopped the run. */
static void
test_repair4 (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = dc_test_proc_start_host (url, "14", "4", &room);
  g_autoptr(DcTestProc) beta = start_follower (url, room, "beta", "14");
  g_autoptr(DcTestProc) gamma = NULL, delta = NULL;
  g_autoptr(DcTestProc) sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11",
                                                       "--stop-at", "14", "--simulate-peers", "4",
                                                       SMALL, NULL);
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcTestProc *procs[4];
  JsonObject *event;

  g_setenv ("DC_TEST_FAULT", "drop-contribution@10", TRUE);
  gamma = start_follower (url, room, "gamma", "14");
  g_setenv ("DC_TEST_FAULT", "drop-gradient@10", TRUE);
  delta = start_follower (url, room, "delta", "14");
  g_unsetenv ("DC_TEST_FAULT");
  procs[0] = alpha;
  procs[1] = beta;
  procs[2] = gamma;
  procs[3] = delta;

  dc_test_proc_wait_done (sim, 14, RUN_BOUND_MS);
  sim_steps = dc_test_proc_steps (sim, TRUE);
  event = dc_test_proc_expect (gamma, "repair", NULL, RUN_BOUND_MS);
  g_assert_true (dc_test_proc_message_has (event, "missing the contribution of"));
  g_assert_true (dc_test_proc_message_has (event, "shard of step 10"));
  event = dc_test_proc_expect (delta, "repair", NULL, RUN_BOUND_MS);
  g_assert_true (dc_test_proc_message_has (event, "missing a roster gradient of step 10"));
  g_assert_true (dc_test_proc_message_has (event, "requesting repair from the leader"));
  for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
    {
      g_autoptr(GPtrArray) steps = NULL;

      dc_test_proc_wait_done (procs[p], 14, RUN_BOUND_MS);
      steps = dc_test_proc_steps (procs[p], TRUE);
      for (guint s = 1; s <= 14; s++)
        {
          g_assert_cmpstr (dc_test_proc_hash_at (steps, s), ==,
                           dc_test_proc_hash_at (sim_steps, s));
          g_assert_cmpint (json_object_get_int_member (dc_test_proc_step_at (steps, s), "roster"),
                           ==, 4);
        }
    }
}

/* Computing the next gradient ahead (while the step's reports are
 * awaited) and adopting it only for the same roster and model: four
 * devices, delta stopping after step 8 (--stop-at), the other three going
 * on to 16. Every step's hash equals the roster history's simulation
 * (`--simulate-peers 4` to 8, then `--resume` with 3); every step after
 * the first of a roster says `computed_ahead` (the gradient was computed
 * before the step began), and step 9 does not: the gradient computed
 * ahead for four devices is dropped once delta is gone, whether that is
 * seen before or after the step starts. Adopting it anyway (a rank of four
 * in a roster of three) changes step 9's hash; without computing ahead no
 * step says so. */
static void
test_ahead (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = dc_test_proc_start_host (url, "16", "4", &room);
  g_autoptr(DcTestProc) beta = start_follower (url, room, "beta", "16");
  g_autoptr(DcTestProc) gamma = start_follower (url, room, "gamma", "16");
  g_autoptr(DcTestProc) delta = start_follower (url, room, "delta", "8");
  g_autofree char *dir = g_dir_make_tmp ("dc-train-group-ahead-XXXXXX", NULL);
  g_autofree char *checkpoint = g_build_filename (dir, "four.pt", NULL);
  g_autoptr(DcTestProc) sim4 = dc_test_proc_spawn_args ("sim4", "train", "--json", "--seed", "11",
                                                        "--stop-at", "8", "--simulate-peers", "4",
                                                        "--out", checkpoint, SMALL, NULL);
  g_autoptr(DcTestProc) sim3 = NULL;
  g_autoptr(GPtrArray) sim4_steps = NULL, sim3_steps = NULL;
  DcTestProc *procs[] = { alpha, beta, gamma, delta };

  dc_test_proc_wait_done (sim4, 8, RUN_BOUND_MS);
  sim4_steps = dc_test_proc_steps (sim4, TRUE);
  sim3 = dc_test_proc_spawn_args ("sim3", "train", "--json", "--resume", checkpoint,
                                  "--stop-at", "16", "--simulate-peers", "3", "--threads", "1",
                                  NULL);
  dc_test_proc_wait_done (sim3, 16, RUN_BOUND_MS);
  sim3_steps = dc_test_proc_steps (sim3, TRUE);
  for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
    {
      g_autoptr(GPtrArray) steps = NULL;
      guint last = procs[p] == delta ? 8 : 16;

      dc_test_proc_wait_done (procs[p], last, RUN_BOUND_MS);
      steps = dc_test_proc_steps (procs[p], TRUE);
      for (guint s = 1; s <= last; s++)
        {
          JsonObject *step = dc_test_proc_step_at (steps, s);
          gboolean ahead = json_object_get_boolean_member (step, "computed_ahead");

          g_assert_cmpstr (dc_test_proc_hash_at (steps, s), ==,
                           dc_test_proc_hash_at (s <= 8 ? sim4_steps : sim3_steps, s));
          g_assert_cmpint (json_object_get_int_member (step, "roster"), ==, s <= 8 ? 4 : 3);
          g_test_message ("%s step %u: computed ahead %d, ahead_ms %.1f", procs[p]->label, s,
                          ahead, json_object_get_double_member (step, "ahead_ms"));
          if (s == 1 || s == 9)
            g_assert_false (ahead);
          else
            g_assert_true (ahead);
        }
    }
  g_unlink (checkpoint);
  g_rmdir (dir);
}

/* One streamed run (docs/ARCHITECTURE.md, "The streamed reduce") of three
 * devices at width 64 (shards of 33,696, 33,696 and 100,096 values: 3, 3
 * and 7 chunks in f32, 2, 2 and 4 in bf16), 8 steps, with
 * DC_TRAIN_GROUP_STREAM=@mode (NULL: unset): the same hash and loss as
 * `--simulate-peers 3` at every step; each reducer made its summed shard
 * chunk by chunk (stream_chunks: its chunk count, deterministic), or, with
 * "0", summed it whole (0); "hold" holds chunks back from a peer until the
 * contribution to it is queued. How many chunks
 * went out before the last contribution was whole depends on timing: it
 * is logged, not checked. */
static void
run_stream (const char *wire,
            const char *mode)
{
  gboolean streamed = g_strcmp0 (mode, "0") != 0;
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = NULL;
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL, sim = NULL;
  g_autoptr(GPtrArray) sim_steps = NULL;
  DcTrainShardLayout layout;
  DcGptConfig config;
  DcTrainWire element;
  guint expected = 0, chunks[3];

  g_assert_true (dc_train_wire_from_string (wire, &element));
  dc_gpt_config_init_derived (&config, 64, 16);
  dc_train_shard_layout_init_model (&layout, &config);
  for (guint r = 0; r < 3; r++)
    {
      gsize total = dc_train_shard_wire_size (DC_TRAIN_SHARD_SUMMED, element, &layout, 3, r);

      chunks[r] = (guint) ((total + DC_MESH_CHUNK_DATA_MAX - 1) / DC_MESH_CHUNK_DATA_MAX);
      g_assert_cmpuint (chunks[r], >=, 2);
      expected += chunks[r];
    }
  if (mode == NULL)
    g_unsetenv ("DC_TRAIN_GROUP_STREAM");
  else
    g_setenv ("DC_TRAIN_GROUP_STREAM", mode, TRUE);
  url = dc_test_proc_start_signal (&signal);
  alpha = dc_test_proc_start_host_with (url, "8", "3", &room, "--width", "64", "--seq", "16",
                                        "--batch", "2", "--steps", "100", "--threads", "1",
                                        "--gradient-wire", wire, NULL);
  beta = start_follower (url, room, "beta", "8");
  gamma = start_follower (url, room, "gamma", "8");
  sim = dc_test_proc_spawn_args ("sim", "train", "--json", "--seed", "11", "--stop-at", "8",
                                 "--simulate-peers", "3", "--width", "64", "--seq", "16",
                                 "--batch", "2", "--steps", "100", "--threads", "1",
                                 "--gradient-wire", wire, NULL);
  g_unsetenv ("DC_TRAIN_GROUP_STREAM");
  dc_test_proc_wait_done (sim, 8, RUN_BOUND_MS);
  sim_steps = dc_test_proc_steps (sim, TRUE);
  {
    DcTestProc *procs[] = { alpha, beta, gamma };
    GPtrArray *all[G_N_ELEMENTS (procs)] = { NULL };

    for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
      {
        dc_test_proc_wait_done (procs[p], 8, RUN_BOUND_MS);
        all[p] = dc_test_proc_steps (procs[p], TRUE);
        for (guint s = 1; s <= 8; s++)
          {
            g_assert_cmpstr (dc_test_proc_hash_at (all[p], s), ==,
                             dc_test_proc_hash_at (sim_steps, s));
            g_assert_cmpfloat (json_object_get_double_member (dc_test_proc_step_at (all[p], s),
                                                              "loss"), ==,
                               json_object_get_double_member (dc_test_proc_step_at (sim_steps,
                                                                                    s),
                                                              "loss"));
          }
      }
    for (guint s = 1; s <= 8; s++)
      {
        guint sum = 0;

        for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
          {
            JsonObject *step = dc_test_proc_step_at (all[p], s);
            guint made = json_object_get_int_member (step, "stream_chunks");

            g_test_message ("%s %s %s step %u: stream_chunks %u, stream_early %" G_GINT64_FORMAT
                            ", stream_pieces %" G_GINT64_FORMAT, wire, mode != NULL ? mode : "",
                            procs[p]->label, s, made,
                            json_object_get_int_member (step, "stream_early"),
                            json_object_get_int_member (step, "stream_pieces"));
            if (streamed)
              g_assert_true (made == chunks[0] || made == chunks[1] || made == chunks[2]);
            else
              g_assert_cmpuint (made, ==, 0);
            sum += made;
          }
        g_assert_cmpuint (sum, ==, streamed ? expected : 0);
      }
    for (guint p = 0; p < G_N_ELEMENTS (procs); p++)
      g_ptr_array_unref (all[p]);
  }
}

static void
test_stream (void)
{
  run_stream ("f32", NULL);
  run_stream ("bf16", NULL);
  run_stream ("bf16", "hold");
  run_stream ("f32", "0");
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/dc/train/group/sharded/exact4", test_exact4);
  g_test_add_func ("/dc/train/group/sharded/wrong-sum", test_wrong_sum);
  g_test_add_func ("/dc/train/group/sharded/repair4", test_repair4);
  g_test_add_func ("/dc/train/group/sharded/ahead", test_ahead);
  g_test_add_func ("/dc/train/group/sharded/stream", test_stream);
  return g_test_run ();
}
