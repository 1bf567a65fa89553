/* test-mesh-send-pace.c: slow sending told from a peer's credits
 * (src/mesh/dc-send-pace.c; suite core).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "mesh/dc-send-pace.h"

#define STEP   (256u * 1024u)   /* dc-peer.c's CREDIT_STEP */
#define WINDOW (768u * 1024u)   /* dc-peer.c's SEND_WINDOW */

/* A sender that keeps WINDOW in flight and gets a credit every STEP bytes,
 * @rate bytes a second, for @credits credits from @pace's last; returns
 * the events seen, in order, as a string ("S" started, "E" ended). */
static GString *
feed (DcSendPace *pace,
      gint64     *now_us,
      guint64    *acked,
      double      rate,
      guint       credits,
      guint64     outstanding)
{
  GString *events = g_string_new (NULL);

  for (guint i = 0; i < credits; i++)
    {
      DcSendPaceEvent event;

      *now_us += (gint64) (STEP * 1e6 / rate);
      *acked += STEP;
      event = dc_send_pace_credit (pace, *now_us, *acked, outstanding, STEP, 0);
      if (event == DC_SEND_PACE_STARTED)
        g_string_append_c (events, 'S');
      else if (event == DC_SEND_PACE_ENDED)
        g_string_append_c (events, 'E');
    }
  return events;
}

/* At 50 MB/s nothing is reported, however long. */
static void
test_fast (void)
{
  DcSendPace pace = { 0 };
  gint64 now = 1000000;
  guint64 acked = 0;
  g_autoptr(GString) events = feed (&pace, &now, &acked, 50e6, 400, WINDOW - STEP);
  guint episodes;
  gint64 slow_us;

  g_assert_cmpstr (events->str, ==, "");
  dc_send_pace_totals (&pace, &episodes, &slow_us);
  g_assert_cmpuint (episodes, ==, 0);
  g_assert_cmpint (slow_us, ==, 0);
}

/* The crawl: 2 MB/s with the window full. A credit every 131 ms, so the
 * third slow interval (393 ms) reports the episode, once; the first fast
 * interval ends it, with the slow time of all its intervals. */
static void
test_crawl (void)
{
  DcSendPace pace = { 0 };
  gint64 now = 1000000;
  guint64 acked = 0;
  g_autoptr(GString) before = feed (&pace, &now, &acked, 50e6, 10, WINDOW - STEP);
  g_autoptr(GString) slow = feed (&pace, &now, &acked, 2e6, 10, WINDOW - STEP);
  g_autoptr(GString) after = feed (&pace, &now, &acked, 50e6, 10, WINDOW - STEP);
  guint episodes;
  gint64 slow_us;

  g_assert_cmpstr (before->str, ==, "");
  g_assert_cmpstr (slow->str, ==, "S");
  g_assert_cmpstr (after->str, ==, "E");
  dc_send_pace_totals (&pace, &episodes, &slow_us);
  g_assert_cmpuint (episodes, ==, 1);
  /* 10 intervals of 131,072 µs. */
  g_assert_cmpint (slow_us, ==, 10 * (gint64) (STEP * 1e6 / 2e6));
}

/* A state's own episode_us (DC_PEER_PACE_EPISODE_MS) reports sooner: at
 * 100 ms the first slow interval (131 ms) does, where the default needs
 * the third. */
static void
test_episode_threshold (void)
{
  DcSendPace pace = { 0 }, plain = { 0 };
  gint64 now = 1000000, now_plain = 1000000;
  guint64 acked = 0, acked_plain = 0;
  g_autoptr(GString) first = NULL, plain_first = NULL, plain_rest = NULL;

  pace.episode_us = 100 * 1000;
  g_string_free (feed (&pace, &now, &acked, 50e6, 4, WINDOW - STEP), TRUE);
  g_string_free (feed (&plain, &now_plain, &acked_plain, 50e6, 4, WINDOW - STEP), TRUE);
  first = feed (&pace, &now, &acked, 2e6, 1, WINDOW - STEP);
  plain_first = feed (&plain, &now_plain, &acked_plain, 2e6, 1, WINDOW - STEP);
  plain_rest = feed (&plain, &now_plain, &acked_plain, 2e6, 2, WINDOW - STEP);
  g_assert_cmpstr (first->str, ==, "S");
  g_assert_cmpstr (plain_first->str, ==, "");
  g_assert_cmpstr (plain_rest->str, ==, "S");
}

/* While it goes on, the totals count it and the rate is its own. */
static void
test_ongoing (void)
{
  DcSendPace pace = { 0 };
  gint64 now = 1000000;
  guint64 acked = 0;
  g_autoptr(GString) events = feed (&pace, &now, &acked, 2e6, 6, WINDOW - STEP);
  guint episodes;
  gint64 slow_us;

  /* The first credit has no interval before it: 5 slow ones. */
  g_assert_cmpstr (events->str, ==, "S");
  dc_send_pace_totals (&pace, &episodes, &slow_us);
  g_assert_cmpuint (episodes, ==, 1);
  g_assert_cmpint (slow_us, ==, 5 * (gint64) (STEP * 1e6 / 2e6));
  g_assert_cmpfloat_with_epsilon (dc_send_pace_rate (&pace), 2e6, 1.0);
}

/* A sender with little in flight (a step's last bytes, a pause) is not
 * slow, whatever the credits' spacing: those intervals are skipped and
 * neither start nor end an episode. */
static void
test_not_busy (void)
{
  DcSendPace pace = { 0 };
  gint64 now = 1000000;
  guint64 acked = 0;
  g_autoptr(GString) idle = feed (&pace, &now, &acked, 0.5e6, 20, STEP / 2);
  g_autoptr(GString) exactly = feed (&pace, &now, &acked, 0.5e6, 20, STEP);
  g_autoptr(GString) slow = feed (&pace, &now, &acked, 2e6, 4, WINDOW - STEP);
  g_autoptr(GString) last = feed (&pace, &now, &acked, 2e6, 1, 0);
  g_autoptr(GString) idle_again = feed (&pace, &now, &acked, 50e6, 5, 0);
  g_autoptr(GString) fast = feed (&pace, &now, &acked, 50e6, 3, WINDOW - STEP);
  guint episodes;
  gint64 slow_us;

  g_assert_cmpstr (idle->str, ==, "");
  g_assert_cmpstr (exactly->str, ==, "");
  /* 3 slow intervals counted (the first follows a credit with only STEP
   * in flight). */
  g_assert_cmpstr (slow->str, ==, "S");
  /* The step's last bytes: an interval that began busy, slow, counted;
   * nothing is left in flight after it. */
  g_assert_cmpstr (last->str, ==, "");
  /* Fast but not busy: the episode goes on. */
  g_assert_cmpstr (idle_again->str, ==, "");
  /* The first interval here starts from a credit with nothing in flight;
   * the second is busy and fast. */
  g_assert_cmpstr (fast->str, ==, "E");
  dc_send_pace_totals (&pace, &episodes, &slow_us);
  g_assert_cmpuint (episodes, ==, 1);
  g_assert_cmpint (slow_us, ==, 4 * (gint64) (STEP * 1e6 / 2e6));
}

/* Slow intervals shorter than an episode, split by a fast one, are
 * forgotten: isolated stalls are not reported. */
static void
test_short_stalls (void)
{
  DcSendPace pace = { 0 };
  gint64 now = 1000000;
  guint64 acked = 0;
  g_autoptr(GString) events = g_string_new (NULL);

  for (guint i = 0; i < 20; i++)
    {
      g_autoptr(GString) slow = feed (&pace, &now, &acked, 2e6, 2, WINDOW - STEP);
      g_autoptr(GString) fast = feed (&pace, &now, &acked, 50e6, 1, WINDOW - STEP);

      g_string_append (events, slow->str);
      g_string_append (events, fast->str);
    }
  g_assert_cmpstr (events->str, ==, "");
}

/* A stale credit (less than one before) and a clock that did not move
 * change nothing and divide by nothing. */
static void
test_odd_credits (void)
{
  DcSendPace pace = { 0 };

  g_assert_cmpint (dc_send_pace_credit (&pace, 1000, STEP * 4, WINDOW, STEP, 0), ==,
                   DC_SEND_PACE_NONE);
  g_assert_cmpint (dc_send_pace_credit (&pace, 1000, STEP * 5, WINDOW, STEP, 0), ==,
                   DC_SEND_PACE_NONE);
  g_assert_cmpint (dc_send_pace_credit (&pace, 2000, STEP * 3, WINDOW, STEP, 500), ==,
                   DC_SEND_PACE_NONE);
  g_assert_cmpuint (pace.last_acked, ==, STEP * 5);
  g_assert_cmpint (pace.slow_us, ==, 0);
  g_assert_cmpfloat (dc_send_pace_rate (&pace), ==, 0.0);
}

/* A group's steps on one link: every 250 ms the sender hands @burst bytes
 * to the channel at once (an int8 run sends about 430 kB a link a step),
 * the link delivers them at @rate from when it is free, and each credit
 * (every STEP bytes received) comes @delay_s after the byte that completes
 * it. @with_handed passes the hand-off time of the last acknowledged byte,
 * as DcPeer does; FALSE is the rule before it. Returns the step (from 1)
 * at whose credits the episode was first reported, 0 if never. */
static guint
bursts (DcSendPace *pace,
        guint64     burst,
        double      rate,
        double      delay_s,
        guint       steps,
        gboolean    with_handed)
{
  double link_free = 0.0;
  guint64 sent = 0, next_credit = STEP;
  guint reported = 0;

  for (guint k = 0; k < steps; k++)
    {
      double t0 = 1.0 + k * 0.25;
      guint64 start = sent;
      double begin = MAX (t0, link_free);

      sent += burst;
      for (; next_credit <= sent; next_credit += STEP)
        {
          double at = begin + (double) (next_credit - start) / rate + delay_s;
          gint64 handed = with_handed ? (gint64) (t0 * 1e6) : 0;

          if (dc_send_pace_credit (pace, (gint64) (at * 1e6), next_credit, sent - next_credit,
                                   STEP, handed) == DC_SEND_PACE_STARTED && reported == 0)
            reported = k + 1;
        }
      link_free = begin + (double) burst / rate;
    }
  return reported;
}

/* The crawl under a group's short bursts (2 MB/s, 430 kB a step, so each
 * burst ends before the next): with the hand-off times it is reported at
 * step 4; by the in-flight rule alone (most intervals begin with less
 * than a credit step in flight) only at step 5. */
static void
test_bursts_crawl (void)
{
  DcSendPace with = { 0 }, without = { 0 };
  guint step_with = bursts (&with, 430000, 2e6, 0.001, 20, TRUE);
  guint step_without = bursts (&without, 430000, 2e6, 0.001, 20, FALSE);

  g_test_message ("reported at step %u with the hand-off times, %u without", step_with,
                  step_without);
  g_assert_cmpuint (step_with, ==, 4);
  g_assert_cmpuint (step_without, ==, 5);
}

/* The same bursts on a healthy link (60 MB/s), each credit 20 ms late (a
 * receiver sending its own burst on the way back), or on a link at
 * 6 MB/s: never reported. A bound from above never makes a fast link
 * slow. */
static void
test_bursts_fast (void)
{
  DcSendPace late = { 0 }, moderate = { 0 };

  g_assert_cmpuint (bursts (&late, 430000, 60e6, 0.020, 400, TRUE), ==, 0);
  g_assert_cmpint (late.slow_us, ==, 0);
  g_assert_cmpuint (bursts (&moderate, 430000, 6e6, 0.001, 400, TRUE), ==, 0);
}

/* A group's steps on one link as DcPeer credits them with idle credits
 * (DC_PEER_IDLE_CREDIT=1): every @period_s the sender hands @burst bytes
 * at once, in pieces of 64 KiB that the link completes at @rate from when
 * it is free; the receiver credits at every STEP received and, with
 * @idle, also 3 ms after a piece followed by no other for 3 ms when 32 KiB
 * or more are uncredited; each credit reaches the sender @delay_s after it
 * is sent, plus @jitter_s × a seeded uniform draw. Returns the step (from
 * 1) whose credits first reported an episode, 0 if none did. */
static guint
bursts_pieces (DcSendPace *pace,
               guint64     burst,
               double      rate,
               double      period_s,
               double      delay_s,
               double      jitter_s,
               guint       steps,
               gboolean    idle)
{
  const guint64 piece = 65536;
  g_autoptr(GRand) rand = g_rand_new_with_seed (7);
  double link_free = 0.0;
  guint64 sent = 0, received = 0, credited = 0;
  guint reported = 0;

  for (guint k = 0; k < steps; k++)
    {
      double t0 = 1.0 + k * period_s;
      double begin = MAX (t0, link_free);
      guint64 start = sent;

      sent += burst;
      while (received < sent)
        {
          guint64 size = MIN (piece, sent - received);
          double done = begin + (double) (received + size - start) / rate;
          double next = received + size < sent
                        ? begin + (double) (MIN (received + size + piece, sent) - start) / rate
                        : G_MAXDOUBLE;
          double credit_at = -1.0;

          received += size;
          if (received - credited >= STEP)
            credit_at = done;
          else if (idle && received - credited >= 32 * 1024 && next - done > 0.003)
            credit_at = done + 0.003;
          if (credit_at >= 0.0)
            {
              double at = credit_at + delay_s + jitter_s * g_rand_double (rand);

              credited = received;
              if (dc_send_pace_credit (pace, (gint64) (at * 1e6), credited, sent - credited, STEP,
                                       0) == DC_SEND_PACE_STARTED && reported == 0)
                reported = k + 1;
            }
        }
      link_free = begin + (double) burst / rate;
    }
  return reported;
}

/* The crawl that slow sending missed (docs/BENCHMARKS.md, s21): a direction
 * that carries a burst smaller than a credit step each step (an int8 run's
 * summed shard, about 210 kB) at 2 MB/s. With credits every STEP only, no
 * interval ever begins with more than a step in flight: never reported.
 * With idle credits every piece is credited as it comes (32 ms apart) and
 * the episode is reported within a few steps. On a healthy link (60 MB/s,
 * credits up to 20 ms late at random) or a moderate one (6 MB/s), with
 * the same bursts and bigger ones, nothing is reported. */
static void
test_idle_credits (void)
{
  DcSendPace step_only = { 0 }, idle = { 0 };
  guint reported;

  g_assert_cmpuint (bursts_pieces (&step_only, 210000, 2e6, 0.3, 0.001, 0.0, 40, FALSE), ==,
                    0);
  reported = bursts_pieces (&idle, 210000, 2e6, 0.3, 0.001, 0.0, 40, TRUE);
  g_test_message ("a 210 kB crawl reported at step %u with idle credits", reported);
  g_assert_cmpuint (reported, >=, 1);
  g_assert_cmpuint (reported, <=, 6);

  for (guint b = 0; b < 3; b++)
    {
      static const guint64 sizes[] = { 100000, 210000, 430000 };
      DcSendPace fast = { 0 }, moderate = { 0 };

      g_assert_cmpuint (bursts_pieces (&fast, sizes[b], 60e6, 0.3, 0.001, 0.020, 400, TRUE), ==,
                        0);
      g_assert_cmpuint (bursts_pieces (&moderate, sizes[b], 6e6, 0.3, 0.001, 0.0, 400, TRUE),
                        ==, 0);
    }
}

/* Slow patches far apart (one slow interval of 200 ms every 3 s, fast
 * intervals that would end them never counted in between) are not one
 * episode: each is forgotten after DC_SEND_PACE_STALE_US. */
static void
test_stale (void)
{
  DcSendPace pace = { 0 };
  gint64 now = 1000000;
  guint64 acked = 0;
  g_autoptr(GString) events = g_string_new (NULL);

  for (guint i = 0; i < 10; i++)
    {
      g_autoptr(GString) slow = NULL;

      /* A credit with a window in flight, then one 200 ms later. */
      g_assert_cmpint (dc_send_pace_credit (&pace, now, acked, WINDOW, STEP, 0), ==,
                       DC_SEND_PACE_NONE);
      slow = feed (&pace, &now, &acked, STEP / 0.2, 1, 0);
      g_string_append (events, slow->str);
      now += 3 * 1000 * 1000;
    }
  g_assert_cmpstr (events->str, ==, "");
  g_assert_cmpint (pace.slow_us, <=, 200 * 1000 + 1);
}

int
main (int   argc,
      char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/mesh/send-pace/fast", test_fast);
  g_test_add_func ("/mesh/send-pace/crawl", test_crawl);
  g_test_add_func ("/mesh/send-pace/episode-threshold", test_episode_threshold);
  g_test_add_func ("/mesh/send-pace/ongoing", test_ongoing);
  g_test_add_func ("/mesh/send-pace/not-busy", test_not_busy);
  g_test_add_func ("/mesh/send-pace/short-stalls", test_short_stalls);
  g_test_add_func ("/mesh/send-pace/odd-credits", test_odd_credits);
  g_test_add_func ("/mesh/send-pace/bursts-crawl", test_bursts_crawl);
  g_test_add_func ("/mesh/send-pace/bursts-fast", test_bursts_fast);
  g_test_add_func ("/mesh/send-pace/stale", test_stale);
  g_test_add_func ("/mesh/send-pace/idle-credits", test_idle_credits);

  return g_test_run ();
}
