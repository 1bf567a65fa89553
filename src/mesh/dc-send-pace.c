/* dc-send-pace.c: slow sending, told from the peer's credits.
 *
 * A DcPeer's receiver acknowledges every CREDIT_STEP bytes it receives
 * (dc-peer.c). Between two credits, when more than one credit's worth was
 * in flight at the first, the receiver was receiving the whole time, so
 * the bytes the second acknowledges over the time between them is the
 * rate this direction moves at. Intervals that start with less in flight
 * (a step's first bytes, a pause of the sender) say nothing and are
 * skipped. Slow intervals add up until a fast one; once they reach
 * DC_SEND_PACE_EPISODE_US the episode is reported, and the fast interval
 * that ends it is reported too.
 *
 * What it catches on the benches' shaped network is usrsctp's crawl
 * (docs/BENCHMARKS.md, "The shaped network's crawl"): one association held
 * at 4 packets a round trip for seconds. A link slower than
 * DC_SEND_PACE_SLOW_RATE is reported the same way, which is what it is.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include "dc-send-pace.h"

/**
 * dc_send_pace_credit:
 * @pace: the direction's state, zeroed at first
 * @now_us: when the credit came (monotonic µs)
 * @acked: the bytes it acknowledges, in all
 * @outstanding: the bytes sent and not acknowledged once it is counted
 * @busy_min: more than this in flight at an interval's start makes it
 *   count (the credit step)
 *
 * Returns: whether this credit started or ended a reported episode.
 */
DcSendPaceEvent
dc_send_pace_credit (DcSendPace *pace,
                     gint64      now_us,
                     guint64     acked,
                     guint64     outstanding,
                     guint64     busy_min)
{
  DcSendPaceEvent event = DC_SEND_PACE_NONE;

  if (pace->last_us > 0 && pace->last_outstanding > busy_min
      && acked > pace->last_acked && now_us > pace->last_us)
    {
      gint64 interval_us = now_us - pace->last_us;
      guint64 bytes = acked - pace->last_acked;
      double rate = (double) bytes * 1e6 / (double) interval_us;

      if (rate < DC_SEND_PACE_SLOW_RATE)
        {
          pace->slow_us += interval_us;
          pace->slow_bytes += bytes;
          if (!pace->reported && pace->slow_us >= DC_SEND_PACE_EPISODE_US)
            {
              pace->reported = TRUE;
              event = DC_SEND_PACE_STARTED;
            }
        }
      else
        {
          if (pace->reported)
            {
              pace->episodes++;
              pace->episodes_us += pace->slow_us;
              event = DC_SEND_PACE_ENDED;
            }
          pace->slow_us = 0;
          pace->slow_bytes = 0;
          pace->reported = FALSE;
        }
    }
  if (acked >= pace->last_acked)
    {
      pace->last_us = now_us;
      pace->last_acked = acked;
      pace->last_outstanding = outstanding;
    }
  return event;
}

/* The slow intervals' rate since the last fast one, bytes a second (0
 * without any). */
double
dc_send_pace_rate (const DcSendPace *pace)
{
  return pace->slow_us > 0 ? (double) pace->slow_bytes * 1e6 / (double) pace->slow_us : 0.0;
}

/* Episodes reported, the one going on included, and their slow time. */
void
dc_send_pace_totals (const DcSendPace *pace,
                     guint            *episodes,
                     gint64           *slow_us)
{
  *episodes = pace->episodes + (pace->reported ? 1 : 0);
  *slow_us = pace->episodes_us + (pace->reported ? pace->slow_us : 0);
}
