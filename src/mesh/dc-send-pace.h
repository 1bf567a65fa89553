/* dc-send-pace.h: notices a direction whose sent bytes are acknowledged
 * slowly for a while although plenty is in flight (docs/ARCHITECTURE.md,
 * "Slow sending").
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Below this rate (bytes a second) an interval between two credits counts
 * as slow: a 1 Gbit/s LAN moves 25-100 MB/s a direction here, the crawl
 * of docs/BENCHMARKS.md 2 MB/s. */
#define DC_SEND_PACE_SLOW_RATE   (5.0e6)
/* Slow intervals, summed, that make an episode worth a log line. */
#define DC_SEND_PACE_EPISODE_US  (300 * 1000)
/* An interval whose credit acknowledges less than a credit step counts
 * from this many bytes up (shorter ones are mostly the latency of the
 * credit itself). */
#define DC_SEND_PACE_SHORT_MIN   (32u * 1024u)
/* Slow time not added to for this long is forgotten (before a report). */
#define DC_SEND_PACE_STALE_US    (2 * 1000 * 1000)

typedef enum
{
  DC_SEND_PACE_NONE,
  DC_SEND_PACE_STARTED,   /* an episode reached DC_SEND_PACE_EPISODE_US */
  DC_SEND_PACE_ENDED,     /* a fast interval ended a reported episode */
} DcSendPaceEvent;

typedef struct
{
  /* The credit before: when it came, what it acknowledged, and the bytes
   * then sent and not acknowledged. */
  gint64  last_us;
  guint64 last_acked;
  guint64 last_outstanding;
  /* The slow intervals since the last fast one, and when one last came. */
  gint64  slow_us;
  gint64  slow_last_us;
  guint64 slow_bytes;
  gboolean reported;
  /* Episodes reported and ended, and their slow time. */
  guint   episodes;
  gint64  episodes_us;
  /* Slow time that makes an episode; 0: DC_SEND_PACE_EPISODE_US. */
  gint64  episode_us;
} DcSendPace;

DcSendPaceEvent dc_send_pace_credit   (DcSendPace *pace,
                                       gint64      now_us,
                                       guint64     acked,
                                       guint64     outstanding,
                                       guint64     busy_min,
                                       gint64      handed_us);
double          dc_send_pace_rate     (const DcSendPace *pace);
void            dc_send_pace_totals   (const DcSendPace *pace,
                                       guint            *episodes,
                                       gint64           *slow_us);

G_END_DECLS
