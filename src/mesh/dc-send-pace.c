/* dc-send-pace.c: slow sending, told from the peer's credits.
 *
 * A DcPeer's receiver acknowledges every CREDIT_STEP bytes it receives
 * (dc-peer.c). Between two credits, when more than one credit's worth was
 * in flight at the first, the receiver was receiving the whole time, so
 * the bytes the second acknowledges over the time between them is the
 * rate this direction moves at. Intervals that start with less in flight
 * (a step's first bytes, a pause of the sender) say nothing and are
 * skipped, unless the sender knows when it handed the last byte the credit
 * acknowledges to the channel (@handed_us): that byte waited from then
 * until the credit, so over that part of the interval, with all the bytes
 * the credit acknowledges (some came before it), the rate is at most
 * theirs. Such a part counts when even that rate is slow, and is passed
 * over when it is not (a bound from above says nothing about a fast link).
 * A step of the group sends a few hundred kilobytes a link (an int8 run's,
 * about 430 kB), so with a 256 KiB credit step most intervals start with
 * less than a credit step in flight: before, a crawling link showed about
 * one counted interval a step and took three steps to be reported, and a
 * direction whose bursts are each under a credit step (an int8 run's
 * summed shard, about 210 kB) none at all. A receiver's idle credits
 * (dc-peer.c: 3 ms after a gap in the pieces) credit such a burst piece by
 * piece when it crawls; an interval whose credit acknowledges less than a
 * step then counts when more than that was in flight at its start. Slow
 * time not added to for DC_SEND_PACE_STALE_US is forgotten (patches far
 * apart are not one episode). Slow intervals add up until a fast one (of
 * the first kind); once they reach DC_SEND_PACE_EPISODE_US (or the
 * state's episode_us) the episode is reported, and the fast interval that
 * ends it is reported too.
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
 * @handed_us: when the last byte this credit acknowledges was handed to the
 *   channel (monotonic µs), or 0 when not known
 *
 * Returns: whether this credit started or ended a reported episode.
 */
DcSendPaceEvent
dc_send_pace_credit (DcSendPace *pace,
                     gint64      now_us,
                     guint64     acked,
                     guint64     outstanding,
                     guint64     busy_min,
                     gint64      handed_us)
{
  DcSendPaceEvent event = DC_SEND_PACE_NONE;
  gint64 start_us = 0;
  gboolean bound = FALSE;
  /* What this credit acknowledges beyond the last one. */
  guint64 bytes = acked > pace->last_acked ? acked - pace->last_acked : 0;

  if (pace->last_us > 0 && bytes > 0 && now_us > pace->last_us)
    {
      /* A credit before a step's worth (an idle credit, dc-peer.c) counts
       * when all it acknowledges, and more, was in flight at the
       * interval's start: the receiver was still receiving when it sent it. */
      if (pace->last_outstanding > busy_min
          || (bytes >= DC_SEND_PACE_SHORT_MIN && pace->last_outstanding > bytes))
        start_us = pace->last_us;
      else if (handed_us > 0 && handed_us < now_us)
        {
          start_us = MAX (pace->last_us, handed_us);
          bound = TRUE;
        }
    }
  if (!pace->reported && pace->slow_us > 0 && now_us - pace->slow_last_us > DC_SEND_PACE_STALE_US)
    {
      pace->slow_us = 0;
      pace->slow_bytes = 0;
    }
  if (start_us > 0)
    {
      gint64 interval_us = now_us - start_us;
      double rate = (double) bytes * 1e6 / (double) interval_us;

      if (rate < DC_SEND_PACE_SLOW_RATE)
        {
          pace->slow_last_us = now_us;
          pace->slow_us += interval_us;
          pace->slow_bytes += bytes;
          if (!pace->reported
              && pace->slow_us >= (pace->episode_us > 0 ? pace->episode_us
                                                        : DC_SEND_PACE_EPISODE_US))
            {
              pace->reported = TRUE;
              event = DC_SEND_PACE_STARTED;
            }
        }
      else if (!bound)
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
