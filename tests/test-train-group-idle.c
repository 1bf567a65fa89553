/* test-train-group-idle.c: audits at the lowest CPU priority (suite net).
 *
 * The engine's idle pool first, in this process: a thread in idle mode
 * (dc_parallel_set_idle ()) has its chunks run by helpers that read back
 * SCHED_IDLE (nice 19 where that is refused) and runs none itself, while
 * the step's pool and the callers keep their priority; once its urgent flag
 * is set, its calls run on the step's pool. Then a group as in
 * test-train-group.c (a signaling service, `daisychain-cli train --room …`
 * processes, ICE limited to 127.0.0.1, the smallest model) at the default
 * audit rate. What is checked is priorities read back from the kernel, who
 * is removed and the hashes, never timing.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <string.h>
#include <json-glib/json-glib.h>

#include "dc-test-proc.h"
#include "dc-test-utils.h"
#include "engine/dc-parallel.h"

/* Far above what an event takes on an idle machine; on a loaded 2-core
 * machine processes stall for seconds. */
#define EVENT_BOUND_MS 60000
/* 400 steps of the smallest model by three processes sharing two cores. */
#define RUN_BOUND_MS   600000

#define N_CHUNKS 64

typedef struct
{
  gint        priority[N_CHUNKS];
  guint       worker[N_CHUNKS];
  gboolean    on_caller[N_CHUNKS];
  GThread    *caller;
  guint       n_threads;
  gint        urgent;
  gint        caller_priority;
} Seen;

static void
record_cb (gsize    begin,
           gsize    end,
           guint    worker,
           gpointer data)
{
  Seen *seen = data;

  for (gsize i = begin; i < end; i++)
    {
      seen->priority[i] = dc_parallel_get_thread_priority ();
      seen->worker[i] = worker;
      seen->on_caller[i] = g_thread_self () == seen->caller;
    }
}

static gpointer
idle_caller_worker (gpointer data)
{
  Seen *seen = data;

  seen->caller = g_thread_self ();
  dc_parallel_set_idle (&seen->urgent);
  dc_parallel_for (seen->n_threads, N_CHUNKS, 1, record_cb, seen);
  dc_parallel_set_idle (NULL);
  seen->caller_priority = dc_parallel_get_thread_priority ();
  return NULL;
}

static void
run_idle_caller (Seen *seen)
{
  g_thread_join (g_thread_new ("idle-caller", idle_caller_worker, seen));
}

/* A thread in idle mode: all 64 chunks ran on the idle pool's helpers
 * (never on the calling thread), each reading back SCHED_IDLE from the
 * kernel (sched_getscheduler) or, where that was refused, nice 19, with
 * worker indices below the call's 4 threads; a call of one thread too (on
 * one helper, index 0). The caller itself, the test's main thread and the
 * step's pool (a call from the main thread) stay at normal priority; with
 * the urgent flag set, the same call runs on the step's pool at normal
 * priority. Before the idle pool every chunk ran at normal priority, and
 * some on the caller. */
static void
test_idle_pool (void)
{
  Seen idle = { .n_threads = 4 }, one = { .n_threads = 1 }, step = { 0 };
  Seen urgent = { .n_threads = 4, .urgent = 1 };
  DcParallelPriority pool;

  run_idle_caller (&idle);
  run_idle_caller (&one);
  pool = dc_parallel_get_idle_pool_priority ();
  g_test_message ("idle pool helpers: %s", dc_parallel_priority_to_string (pool));
  g_assert_cmpint (pool, !=, DC_PARALLEL_PRIORITY_NORMAL);
  for (guint i = 0; i < N_CHUNKS; i++)
    {
      g_assert_false (idle.on_caller[i]);
      g_assert_cmpuint (idle.worker[i], <, 4);
      g_assert_cmpint (idle.priority[i], ==, pool);
      g_assert_false (one.on_caller[i]);
      g_assert_cmpuint (one.worker[i], ==, 0);
      g_assert_cmpint (one.priority[i], ==, pool);
    }
  g_assert_cmpint (idle.caller_priority, ==, DC_PARALLEL_PRIORITY_NORMAL);
  g_assert_cmpint (dc_parallel_get_thread_priority (), ==, DC_PARALLEL_PRIORITY_NORMAL);

  dc_parallel_for (4, N_CHUNKS, 1, record_cb, &step);
  for (guint i = 0; i < N_CHUNKS; i++)
    g_assert_cmpint (step.priority[i], ==, DC_PARALLEL_PRIORITY_NORMAL);

  run_idle_caller (&urgent);
  for (guint i = 0; i < N_CHUNKS; i++)
    g_assert_cmpint (urgent.priority[i], ==, DC_PARALLEL_PRIORITY_NORMAL);
}

/* Audits at the default rate (1 in 32, DC_TRAIN_GROUP_AUDIT_PERIOD unset)
 * on the idle pool (DC_TRAIN_GROUP_AUDIT_IDLE=1, off by default since
 * 2026-12-02): three devices of two threads (two idle helpers each),
 * the third flipping a bit of every gradient it sends from step 5
 * (DC_TEST_FAULT=corrupt-gradient@5). The third is still caught and
 * removed ("AUDIT: removed from the run", exit 1); the two others finish
 * IDLE_STEPS steps with equal hashes, three devices to the step it was
 * caught at, two after. On an audited step (1 in 32) every device audits
 * and the third is audited by one of the two others (the rotation): caught
 * by step 400 but with (31/32)^393 ≈ 4 · 10⁻⁶ (the member ids, hence the
 * ranks, batches and draws, are new each run).
 * Their step lines name the priority the audits' kernels read back
 * (`audit_priority`): idle (or nice) on at least one audit; without the
 * idle pool no line says so. */
#define IDLE_STEPS 400

static void
test_idle_audits (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  g_autoptr(GPtrArray) a = NULL, b = NULL;
  JsonObject *error;
  guint caught = 0, idle = 0, audits = 0;

  g_unsetenv ("DC_TRAIN_GROUP_AUDIT_PERIOD");
  g_setenv ("DC_TRAIN_GROUP_AUDIT_IDLE", "1", TRUE);
  alpha = dc_test_proc_start_host_with (url, G_STRINGIFY (IDLE_STEPS), "3", &room, "--width",
                                        "16", "--seq", "16", "--batch", "2", "--steps",
                                        G_STRINGIFY (IDLE_STEPS), "--threads", "2", NULL);
  beta = dc_test_proc_start_follower (url, room, "beta", G_STRINGIFY (IDLE_STEPS), "--threads",
                                      "2", NULL);
  g_setenv ("DC_TEST_FAULT", "corrupt-gradient@5", TRUE);
  gamma = dc_test_proc_start_follower (url, room, "gamma", G_STRINGIFY (IDLE_STEPS),
                                       "--threads", "2", NULL);
  g_unsetenv ("DC_TEST_FAULT");
  g_unsetenv ("DC_TRAIN_GROUP_AUDIT_IDLE");

  error = dc_test_proc_expect (gamma, "error", NULL, RUN_BOUND_MS);
  g_test_message ("gamma: %s", json_object_get_string_member (error, "message"));
  g_assert_true (dc_test_proc_message_has (error, "AUDIT: removed from the run"));
  g_assert_cmpint (dc_test_proc_expect_exit (gamma, EVENT_BOUND_MS), ==, 1);
  dc_test_proc_wait_done (alpha, IDLE_STEPS, RUN_BOUND_MS);
  dc_test_proc_wait_done (beta, IDLE_STEPS, RUN_BOUND_MS);
  g_assert_cmpint (dc_test_proc_find (alpha, 0, "audit", "beta"), ==, -1);
  g_assert_cmpint (dc_test_proc_find (beta, 0, "audit", "alpha"), ==, -1);
  a = dc_test_proc_steps (alpha, TRUE);
  b = dc_test_proc_steps (beta, TRUE);
  for (guint s = 1; s <= IDLE_STEPS; s++)
    {
      JsonObject *oa = g_ptr_array_index (a, s), *ob = g_ptr_array_index (b, s);
      gint64 roster = json_object_get_int_member (oa, "roster");

      g_assert_cmpstr (dc_test_proc_hash_at (a, s), ==, dc_test_proc_hash_at (b, s));
      g_assert_cmpint (roster, ==, json_object_get_int_member (ob, "roster"));
      if (roster == 3)
        {
          g_assert_cmpuint (caught, ==, s - 1);
          caught = s;
        }
      else
        g_assert_cmpint (roster, ==, 2);
      for (guint p = 0; p < 2; p++)
        {
          JsonObject *o = p == 0 ? oa : ob;
          const char *priority = json_object_get_string_member_with_default (o, "audit_priority",
                                                                             NULL);

          if (priority == NULL)
            continue;
          audits++;
          if (g_str_equal (priority, "idle") || g_str_equal (priority, "nice"))
            idle++;
          else
            g_assert_cmpstr (priority, ==, "normal");
        }
    }
  g_test_message ("caught at step %u; %u audits, %u of them on the idle pool", caught, audits,
                  idle);
  g_assert_cmpuint (caught, >=, 4);
  g_assert_cmpuint (caught, <, IDLE_STEPS);
  g_assert_cmpuint (idle, >=, 1);
}

/* By default (DC_TRAIN_GROUP_AUDIT_IDLE unset, since 2026-12-02) audits
 * run beside the step on its own pool at normal priority, not on the idle
 * pool: on the H200 host the idle pool's starved helpers made an audit
 * cost the group 300–570 ms of step time against 190–245 beside
 * (docs/BENCHMARKS.md). Three devices of two threads (so that the idle
 * pool would have helpers) audit every step (DC_TEST_FAULT=audit-all) for
 * 12 steps with equal hashes; every step line that shows an audit says
 * `audit_priority` `normal`, and there are some. With the idle pool the
 * default, they said `idle` (or `nice`). */
static void
test_default_beside (void)
{
  g_autoptr(DcTestProc) signal = NULL;
  g_autofree char *url = dc_test_proc_start_signal (&signal);
  g_autofree char *room = NULL;
  g_autoptr(DcTestProc) alpha = NULL, beta = NULL, gamma = NULL;
  g_autoptr(GPtrArray) a = NULL, b = NULL, c = NULL;
  guint audits = 0;

  g_unsetenv ("DC_TRAIN_GROUP_AUDIT_PERIOD");
  g_unsetenv ("DC_TRAIN_GROUP_AUDIT_IDLE");
  g_setenv ("DC_TEST_FAULT", "audit-all", TRUE);
  alpha = dc_test_proc_start_host_with (url, "12", "3", &room, "--width", "16", "--seq", "16",
                                        "--batch", "2", "--steps", "100", "--threads", "2",
                                        NULL);
  beta = dc_test_proc_start_follower (url, room, "beta", "12", "--threads", "2", NULL);
  gamma = dc_test_proc_start_follower (url, room, "gamma", "12", "--threads", "2", NULL);
  g_unsetenv ("DC_TEST_FAULT");

  dc_test_proc_wait_done (alpha, 12, RUN_BOUND_MS);
  dc_test_proc_wait_done (beta, 12, RUN_BOUND_MS);
  dc_test_proc_wait_done (gamma, 12, RUN_BOUND_MS);
  a = dc_test_proc_steps (alpha, TRUE);
  b = dc_test_proc_steps (beta, TRUE);
  c = dc_test_proc_steps (gamma, TRUE);
  for (guint s = 1; s <= 12; s++)
    {
      g_assert_cmpstr (dc_test_proc_hash_at (a, s), ==, dc_test_proc_hash_at (b, s));
      g_assert_cmpstr (dc_test_proc_hash_at (a, s), ==, dc_test_proc_hash_at (c, s));
      for (guint p = 0; p < 3; p++)
        {
          JsonObject *o = g_ptr_array_index (p == 0 ? a : p == 1 ? b : c, s);
          const char *priority = json_object_get_string_member_with_default (o, "audit_priority",
                                                                             NULL);

          if (priority == NULL)
            continue;
          audits++;
          g_assert_cmpstr (priority, ==, "normal");
        }
    }
  g_test_message ("%u audits, all at normal priority", audits);
  g_assert_cmpuint (audits, >=, 3);
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dc/train/group/idle/pool", test_idle_pool);
  g_test_add_func ("/dc/train/group/idle/audits", test_idle_audits);
  g_test_add_func ("/dc/train/group/idle/default-beside", test_default_beside);
  return g_test_run ();
}
