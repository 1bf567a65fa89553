/* dc-cli-net-hub.c: `daisychain-cli net-hub`, hidden: the delay hub of the
 * benches' shaped network where the kernel has no sch_netem
 * (dc-cli-netns.c starts it; docs/CLI.md, "The shaped network").
 *
 * It runs in the namespace that would hold the bridge and holds an
 * AF_PACKET socket on each port (the switch's end of every device's veth).
 * Every frame a port receives is held for the delay, then sent out of the
 * port its destination address was last seen on, or out of every other
 * port while that is unknown (a learning switch, flooding broadcasts):
 * one delay per crossing, as netem's on the sender's egress, so a round
 * trip between two devices takes twice the delay. Frames leave in the
 * order they came (one delay for all: first in, first due). The rate stays
 * with tbf on the devices' own links.
 *
 * Timing: each frame is stamped with CLOCK_MONOTONIC when it is read and
 * is due that plus the delay; a timerfd armed (absolute, 1 µs of slack)
 * for the oldest frame wakes the loop, which sleeps in ppoll otherwise. A
 * frame is never sent before it is due; it may be sent late by the time
 * the loop takes to wake (the stats line says how late).
 *
 * Frames are read with their virtio-net header (PACKET_VNET_HDR) and sent
 * with it: a frame whose checksum the sender left to the device
 * (CHECKSUM_PARTIAL on a veth) or a TCP segment of 64 kB (a veth's GSO)
 * crosses as it came, as through a tap device, without this process
 * reading anything but the two Ethernet addresses.
 *
 * The queue is bounded (frames and bytes); a frame past either bound is
 * dropped (tail drop) and counted. The hub ends on SIGTERM or SIGINT, when
 * its parent dies (PR_SET_PDEATHSIG, and --parent checked after it), and
 * when its standard input is a pipe whose other end closes. SIGUSR1 prints
 * the counters without ending.
 *
 * --trace FILE (a measuring aid, bench --netns with DC_NETNS_HUB_TRACE)
 * keeps one record per frame released (read and sent, CLOCK_MONOTONIC µs,
 * the port it came in on and the one it left by, −1 when flooded, its
 * length) and writes them to FILE at the end, one line each:
 * tools/group-trace/hub-trace.py reads them.
 *
 * Output (always JSON lines): {"event":"hub", …} once every port is open,
 * {"event":"hub-stats", …} on SIGUSR1 and at the end, {"event":"error", …}
 * when a port cannot be opened (exit status 1).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "dc-cli"
#define _GNU_SOURCE

#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <glib/gi18n.h>

#include "dc-cli.h"
#include "dc-cli-netns.h"

#define HUB_PORTS_MAX     16
/* A veth's GSO frames are at most 64 kB; BIG TCP is off on veths. */
#define HUB_FRAME_MAX     (65536 + 256)
#define HUB_VNET_LEN      ((gsize) sizeof (struct virtio_net_hdr))
/* Addresses the switch remembers; past it, the oldest is forgotten. */
#define HUB_MACS_MAX      64
/* Frames read from one port before the others get their turn, and frames
 * a recvmmsg () or sendmmsg () takes. */
#define HUB_READ_BURST    256
#define HUB_BATCH         32
/* Socket buffers: a burst of every port at once while the loop sleeps. */
#define HUB_SOCKET_BUFFER (8 << 20)

typedef struct _Frame Frame;
struct _Frame
{
  Frame  *next;
  gint64  due_ns;
  gint64  read_ns;
  guint   port;
  gsize   len;      /* virtio-net header and frame */
  guint8  data[];
};

/* --trace: one frame released (hub-trace.py reads FILE's lines). */
typedef struct
{
  gint64  read_ns, sent_ns;
  gint8   in, out;   /* ports; out −1: flooded */
  guint16 len;       /* the Ethernet frame's, without the virtio-net header */
} TraceRecord;

/* Records kept at most (24 B each): about 4 minutes of 1 Gbit/s on 4 links. */
#define HUB_TRACE_MAX (16u << 20)

typedef struct
{
  guint8 mac[ETH_ALEN];
  guint  port;
  guint64 seen;     /* a counter: the smallest is forgotten first */
} Mac;

typedef struct
{
  guint   n_ports;
  int     fds[HUB_PORTS_MAX];
  char   *names[HUB_PORTS_MAX];
  gint64  delay_ns;
  guint   max_frames;
  gsize   max_bytes;

  /* Batched reads and sends. */
  guint8            *in_buffers;   /* HUB_BATCH × (HUB_FRAME_MAX + 1) */
  struct mmsghdr     in[HUB_BATCH];
  struct iovec       in_iov[HUB_BATCH];
  struct sockaddr_ll in_from[HUB_BATCH];
  struct mmsghdr     out[HUB_PORTS_MAX][HUB_BATCH];
  struct iovec       iov[HUB_PORTS_MAX][HUB_BATCH];

  Frame  *head, *tail;
  guint   n_frames;
  gsize   n_bytes;

  Mac     macs[HUB_MACS_MAX];
  guint   n_macs;
  guint64 mac_clock;

  /* Counters for the stats line. */
  guint64 received, sent, flooded, dropped_queue, dropped_send, truncated, unsent_own_port;
  guint64 socket_drops;
  guint   max_queued;
  gsize   max_queued_bytes;
  gint64  min_hold_ns, max_late_ns;
  double  late_sum_ns;
  guint64 released;

  GArray *trace;     /* TraceRecord, with --trace */
  const char *priority;  /* "fifo", "nice" or "normal": raise_priority () */
} Hub;

static gint64
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64) ts.tv_sec * G_GINT64_CONSTANT (1000000000) + ts.tv_nsec;
}

static int
open_port (const char  *name,
           GError     **error)
{
  struct sockaddr_ll address = { 0 };
  struct packet_mreq promisc = { 0 };
  int one = 1, size = HUB_SOCKET_BUFFER;
  unsigned int index = if_nametoindex (name);
  int fd;

  if (index == 0)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "net-hub: no link “%s” here: %s",
                   name, g_strerror (errno));
      return -1;
    }
  fd = socket (AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons (ETH_P_ALL));
  if (fd < 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
                   "net-hub: no AF_PACKET socket: %s", g_strerror (errno));
      return -1;
    }
  /* Before bind: the header on every frame both ways. */
  if (setsockopt (fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
                   "net-hub: PACKET_VNET_HDR on “%s”: %s", name, g_strerror (errno));
      close (fd);
      return -1;
    }
  /* Not an error where missing: the loop checks sll_pkttype too. */
  (void) setsockopt (fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  (void) setsockopt (fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
  if (setsockopt (fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
    (void) setsockopt (fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  if (setsockopt (fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0)
    (void) setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons (ETH_P_ALL);
  address.sll_ifindex = (int) index;
  if (bind (fd, (struct sockaddr *) &address, sizeof address) != 0)
    {
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno),
                   "net-hub: binding to “%s”: %s", name, g_strerror (errno));
      close (fd);
      return -1;
    }
  /* A veth hands a packet socket every frame, for it or not; promiscuous
   * all the same, as a bridge port is. */
  promisc.mr_ifindex = (int) index;
  promisc.mr_type = PACKET_MR_PROMISC;
  (void) setsockopt (fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof promisc);
  return fd;
}

static Mac *
mac_find (Hub          *hub,
          const guint8 *mac)
{
  for (guint i = 0; i < hub->n_macs; i++)
    if (memcmp (hub->macs[i].mac, mac, ETH_ALEN) == 0)
      return &hub->macs[i];
  return NULL;
}

static void
mac_learn (Hub          *hub,
           const guint8 *mac,
           guint         port)
{
  Mac *entry;

  if (mac[0] & 1)   /* a group address is nobody's */
    return;
  entry = mac_find (hub, mac);
  if (entry == NULL)
    {
      if (hub->n_macs < HUB_MACS_MAX)
        entry = &hub->macs[hub->n_macs++];
      else
        {
          entry = &hub->macs[0];
          for (guint i = 1; i < hub->n_macs; i++)
            if (hub->macs[i].seen < entry->seen)
              entry = &hub->macs[i];
        }
      memcpy (entry->mac, mac, ETH_ALEN);
    }
  entry->port = port;
  entry->seen = ++hub->mac_clock;
}

/* Sends every frame that is due by @now, oldest first: up to HUB_BATCH
 * frames at a time, one sendmmsg () per port for them, in their order. */
static void
release (Hub    *hub,
         gint64  now)
{
  while (hub->head != NULL && hub->head->due_ns <= now)
    {
      Frame *batch[HUB_BATCH];
      guint n = 0, n_out[HUB_PORTS_MAX] = { 0 };

      while (n < HUB_BATCH && hub->head != NULL && hub->head->due_ns <= now)
        {
          Frame *frame = hub->head;
          const guint8 *eth = frame->data + HUB_VNET_LEN;
          Mac *to = (eth[0] & 1) ? NULL : mac_find (hub, eth);
          gint64 hold = now - frame->read_ns, late = now - frame->due_ns;

          hub->head = frame->next;
          if (hub->head == NULL)
            hub->tail = NULL;
          hub->n_frames--;
          hub->n_bytes -= frame->len;
          batch[n++] = frame;

          for (guint p = 0; p < hub->n_ports; p++)
            {
              guint k = n_out[p];

              if (p == frame->port || (to != NULL && to->port != p))
                continue;
              hub->iov[p][k] = (struct iovec) { frame->data, frame->len };
              hub->out[p][k] = (struct mmsghdr) { .msg_hdr = { .msg_iov = &hub->iov[p][k],
                                                               .msg_iovlen = 1 } };
              n_out[p]++;
            }
          if (hub->trace != NULL && hub->trace->len < HUB_TRACE_MAX)
            {
              TraceRecord record = { frame->read_ns, now, (gint8) frame->port,
                                     (gint8) (to != NULL ? (int) to->port : -1),
                                     (guint16) MIN (frame->len - HUB_VNET_LEN, G_MAXUINT16) };

              g_array_append_val (hub->trace, record);
            }
          if (to != NULL && to->port == frame->port)
            hub->unsent_own_port++;
          else if (to == NULL)
            hub->flooded++;
          hub->released++;
          hub->min_hold_ns = hub->released == 1 ? hold : MIN (hub->min_hold_ns, hold);
          hub->max_late_ns = MAX (hub->max_late_ns, late);
          hub->late_sum_ns += (double) late;
        }
      for (guint p = 0; p < hub->n_ports; p++)
        {
          guint done = 0;

          /* A port whose buffer is full refuses the rest: counted. */
          while (done < n_out[p])
            {
              int sent = sendmmsg (hub->fds[p], hub->out[p] + done, n_out[p] - done,
                                   MSG_DONTWAIT);

              if (sent <= 0)
                break;
              done += (guint) sent;
            }
          hub->sent += done;
          hub->dropped_send += n_out[p] - done;
        }
      for (guint i = 0; i < n; i++)
        g_free (batch[i]);
    }
}

/* Reads what @port has, HUB_BATCH frames a call, at most HUB_READ_BURST
 * before the other ports get their turn, into the queue. */
static void
drain (Hub   *hub,
       guint  port)
{
  for (guint calls = 0; calls < HUB_READ_BURST / HUB_BATCH; calls++)
    {
      int n;

      for (guint i = 0; i < HUB_BATCH; i++)
        {
          hub->in_iov[i] = (struct iovec) { hub->in_buffers + (gsize) i * (HUB_FRAME_MAX + 1),
                                            HUB_FRAME_MAX + 1 };
          hub->in[i] = (struct mmsghdr) { .msg_hdr = { .msg_name = &hub->in_from[i],
                                                       .msg_namelen = sizeof hub->in_from[i],
                                                       .msg_iov = &hub->in_iov[i],
                                                       .msg_iovlen = 1 } };
        }
      n = recvmmsg (hub->fds[port], hub->in, HUB_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
      if (n <= 0)
        return;
      for (guint i = 0; i < (guint) n; i++)
        {
          const guint8 *buffer = hub->in_iov[i].iov_base;
          gsize len = hub->in[i].msg_len;
          Frame *frame;
          gint64 now;

          if (hub->in_from[i].sll_pkttype == PACKET_OUTGOING)
            continue;
          hub->received++;
          if ((hub->in[i].msg_hdr.msg_flags & MSG_TRUNC) || len > HUB_FRAME_MAX
              || len < HUB_VNET_LEN + ETH_HLEN)
            {
              hub->truncated++;
              continue;
            }
          mac_learn (hub, buffer + HUB_VNET_LEN + ETH_ALEN, port);
          if (hub->n_frames + 1 > hub->max_frames || hub->n_bytes + len > hub->max_bytes)
            {
              hub->dropped_queue++;
              continue;
            }
          now = now_ns ();
          frame = g_malloc (sizeof (Frame) + len);
          frame->next = NULL;
          frame->read_ns = now;
          frame->due_ns = now + hub->delay_ns;
          frame->port = port;
          frame->len = len;
          memcpy (frame->data, buffer, len);
          if (hub->tail != NULL)
            hub->tail->next = frame;
          else
            hub->head = frame;
          hub->tail = frame;
          hub->n_frames++;
          hub->n_bytes += frame->len;
          hub->max_queued = MAX (hub->max_queued, hub->n_frames);
          hub->max_queued_bytes = MAX (hub->max_queued_bytes, hub->n_bytes);
        }
      if (n < HUB_BATCH)
        return;
    }
}

static void
add_uint (JsonBuilder *builder,
          const char  *name,
          guint64      value)
{
  json_builder_set_member_name (builder, name);
  json_builder_add_int_value (builder, (gint64) value);
}

static void
print_stats (Hub *hub)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  for (guint p = 0; p < hub->n_ports; p++)
    {
      struct tpacket_stats stats = { 0 };
      socklen_t len = sizeof stats;

      /* Frames the kernel dropped because this socket's buffer was full
       * (reading the counters resets them, hence the running sum). */
      if (getsockopt (hub->fds[p], SOL_PACKET, PACKET_STATISTICS, &stats, &len) == 0)
        hub->socket_drops += stats.tp_drops;
    }
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "event");
  json_builder_add_string_value (builder, "hub-stats");
  add_uint (builder, "received", hub->received);
  add_uint (builder, "released", hub->released);
  add_uint (builder, "sent", hub->sent);
  add_uint (builder, "flooded", hub->flooded);
  add_uint (builder, "dropped_queue", hub->dropped_queue);
  add_uint (builder, "dropped_send", hub->dropped_send);
  add_uint (builder, "truncated", hub->truncated);
  add_uint (builder, "socket_drops", hub->socket_drops);
  add_uint (builder, "queued", hub->n_frames);
  add_uint (builder, "max_queued", hub->max_queued);
  add_uint (builder, "max_queued_bytes", hub->max_queued_bytes);
  json_builder_set_member_name (builder, "min_hold_us");
  json_builder_add_double_value (builder, hub->released > 0 ? hub->min_hold_ns / 1e3 : 0);
  json_builder_set_member_name (builder, "mean_late_us");
  json_builder_add_double_value (builder, hub->released > 0
                                 ? hub->late_sum_ns / hub->released / 1e3 : 0);
  json_builder_set_member_name (builder, "max_late_us");
  json_builder_add_double_value (builder, hub->max_late_ns / 1e3);
  json_builder_set_member_name (builder, "priority");
  json_builder_add_string_value (builder, hub->priority != NULL ? hub->priority : "normal");
  json_builder_end_object (builder);
  dc_cli_print_json (builder);
}

/* A measuring aid (DC_NETNS_HUB_PRIORITY=fifo, inherited from the bench):
 * the hub stands for a switch, which has hardware of its own, and on a host
 * whose cores all compute a hub thread of normal priority waits for a core
 * and sends frames late (max_late_us). This asks for SCHED_FIFO (priority
 * 10: the hub sleeps in ppoll between frames), else nice −10, else runs as
 * it is; the ready and stats lines say which ("priority"). Not the default:
 * on the 2-vCPU VM it cut the mean lateness from 260–310 to 38–42 µs but
 * lengthened the bench's step by 30–45 % (it then wakes for nearly every
 * frame and preempts the devices' threads; docs/BENCHMARKS.md, branch
 * group-shaped). */
static const char *
raise_priority (void)
{
  struct sched_param param = { .sched_priority = 10 };

  if (sched_setscheduler (0, SCHED_FIFO | SCHED_RESET_ON_FORK, &param) == 0)
    return "fifo";
  if (setpriority (PRIO_PROCESS, 0, -10) == 0)
    return "nice";
  return "normal";
}

static void
print_ready (Hub *hub)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "event");
  json_builder_add_string_value (builder, "hub");
  json_builder_set_member_name (builder, "ports");
  json_builder_begin_array (builder);
  for (guint p = 0; p < hub->n_ports; p++)
    json_builder_add_string_value (builder, hub->names[p]);
  json_builder_end_array (builder);
  add_uint (builder, "delay_us", (guint64) (hub->delay_ns / 1000));
  add_uint (builder, "queue_frames", hub->max_frames);
  add_uint (builder, "queue_bytes", hub->max_bytes);
  json_builder_set_member_name (builder, "priority");
  json_builder_add_string_value (builder, hub->priority);
  json_builder_end_object (builder);
  dc_cli_print_json (builder);
}

/* --trace: the records to @path, one line each: read µs, sent µs, in port,
 * out port (−1 flooded), length. */
static void
write_trace (Hub        *hub,
             const char *path)
{
  FILE *file = fopen (path, "w");

  if (file == NULL)
    {
      g_printerr ("net-hub: cannot write the trace to %s: %s\n", path, g_strerror (errno));
      return;
    }
  fprintf (file, "# net-hub trace: read_us sent_us in out len (ports:");
  for (guint p = 0; p < hub->n_ports; p++)
    fprintf (file, " %s", hub->names[p]);
  fprintf (file, "; delay_us %" G_GINT64_FORMAT ")\n", hub->delay_ns / 1000);
  for (guint i = 0; i < hub->trace->len; i++)
    {
      const TraceRecord *r = &g_array_index (hub->trace, TraceRecord, i);

      fprintf (file, "%" G_GINT64_FORMAT " %" G_GINT64_FORMAT " %d %d %u\n", r->read_ns / 1000,
               r->sent_ns / 1000, r->in, r->out, r->len);
    }
  fclose (file);
}

static void
arm (int     timer,
     Frame  *head)
{
  struct itimerspec when = { 0 };

  if (head != NULL)
    {
      when.it_value.tv_sec = head->due_ns / 1000000000;
      when.it_value.tv_nsec = head->due_ns % 1000000000;
    }
  /* Zero disarms; an absolute time already past fires at once. */
  (void) timerfd_settime (timer, TFD_TIMER_ABSTIME, &when, NULL);
}

int
dc_cli_net_hub_run (const DcCliCommand  *command,
                    DcCliOptions        *options,
                    int                  argc,
                    char               **argv)
{
  g_auto(GStrv) ports = NULL;
  int delay_us = DC_CLI_NETNS_DELAY_US, queue_frames = 4096, queue_bytes = 16 << 20;
  int parent_pid = 0;
  g_autofree char *trace = NULL;
  const GOptionEntry entries[] = {
    { "port", 0, 0, G_OPTION_ARG_STRING_ARRAY, &ports,
      N_("A link to switch between (2–16, repeated)"), N_("LINK") },
    { "delay-us", 0, 0, G_OPTION_ARG_INT, &delay_us,
      N_("How long every frame is held, 0–10 s in µs (default: 1000)"), "US" },
    { "queue-frames", 0, 0, G_OPTION_ARG_INT, &queue_frames,
      N_("Frames held at most; more are dropped (default: 4096)"), "N" },
    { "queue-bytes", 0, 0, G_OPTION_ARG_INT, &queue_bytes,
      N_("Bytes held at most; more are dropped (default: 16 MiB)"), "N" },
    { "parent", 0, 0, G_OPTION_ARG_INT, &parent_pid,
      N_("End at once if this is not the parent process (it died already)"), "PID" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &trace,
      N_("Write every frame's times, ports and length to FILE at the end"), N_("FILE") },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  struct pollfd fds[HUB_PORTS_MAX + 3];
  struct stat st;
  sigset_t signals;
  g_autofree Hub *hub_alloc = g_new0 (Hub, 1);
  Hub *hub = hub_alloc;
  int timer = -1, signals_fd = -1, status = DC_CLI_EXIT_OK;
  gboolean watch_stdin;
  guint n_fds;

  /* The parent's death ends this process (SIGTERM: the default action
   * until the mask below, then the loop's signalfd); --parent, checked
   * after asking, catches a parent that died before. */
  (void) prctl (PR_SET_PDEATHSIG, SIGTERM);
  options->json = TRUE;
  if (!dc_cli_parse_options (command, options, entries, &argc, &argv))
    return DC_CLI_EXIT_USAGE;
  if (argc > 1)
    return dc_cli_usage_error (command, _("unexpected argument “%s”"), argv[1]);
  if (parent_pid > 0 && getppid () != (pid_t) parent_pid)
    return DC_CLI_EXIT_FAILED;
  if (ports == NULL || g_strv_length (ports) < 2 || g_strv_length (ports) > HUB_PORTS_MAX)
    return dc_cli_usage_error (command, _("--port takes 2 to %u links"), HUB_PORTS_MAX);
  if (delay_us < 0 || delay_us > 10000000)
    return dc_cli_usage_error (command, _("--delay-us takes 0 to 10000000"));
  if (queue_frames < 1 || queue_bytes < HUB_FRAME_MAX)
    return dc_cli_usage_error (command, _("--queue-frames takes 1 or more, --queue-bytes %u or "
                                          "more"), HUB_FRAME_MAX);

  hub->delay_ns = (gint64) delay_us * 1000;
  hub->max_frames = (guint) queue_frames;
  hub->max_bytes = (gsize) queue_bytes;
  for (guint p = 0; ports[p] != NULL; p++)
    hub->fds[p] = -1;
  for (guint p = 0; ports[p] != NULL; p++)
    {
      hub->names[p] = ports[p];
      hub->fds[p] = open_port (ports[p], &error);
      if (hub->fds[p] < 0)
        goto out;
      hub->n_ports = p + 1;
    }
  /* The timer's wake-up within a microsecond of the frame's time, not the
   * default 50 µs of slack. */
  (void) prctl (PR_SET_TIMERSLACK, 1000UL);
  timer = timerfd_create (CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  sigemptyset (&signals);
  sigaddset (&signals, SIGTERM);
  sigaddset (&signals, SIGINT);
  sigaddset (&signals, SIGUSR1);
  sigaddset (&signals, SIGHUP);
  if (timer < 0 || sigprocmask (SIG_BLOCK, &signals, NULL) != 0
      || (signals_fd = signalfd (-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
    {
      g_set_error (&error, G_IO_ERROR, g_io_error_from_errno (errno), "net-hub: %s",
                   g_strerror (errno));
      goto out;
    }
  /* A SIGTERM from the parent's death before the mask was set has ended
   * this process already; one after waits in the signalfd. */
  if (parent_pid > 0 && getppid () != (pid_t) parent_pid)
    goto out;
  watch_stdin = fstat (STDIN_FILENO, &st) == 0 && S_ISFIFO (st.st_mode);
  hub->in_buffers = g_malloc ((gsize) HUB_BATCH * (HUB_FRAME_MAX + 1));
  if (trace != NULL)
    hub->trace = g_array_sized_new (FALSE, FALSE, sizeof (TraceRecord), 1u << 18);
  hub->priority = g_strcmp0 (g_getenv ("DC_NETNS_HUB_PRIORITY"), "fifo") == 0 ? raise_priority ()
                  : "normal";
  print_ready (hub);

  for (;;)
    {
      gboolean stop = FALSE;

      n_fds = 0;
      for (guint p = 0; p < hub->n_ports; p++)
        fds[n_fds++] = (struct pollfd) { hub->fds[p], POLLIN, 0 };
      fds[n_fds++] = (struct pollfd) { timer, POLLIN, 0 };
      fds[n_fds++] = (struct pollfd) { signals_fd, POLLIN, 0 };
      if (watch_stdin)
        fds[n_fds++] = (struct pollfd) { STDIN_FILENO, POLLIN, 0 };
      if (ppoll (fds, n_fds, NULL, NULL) < 0)
        {
          if (errno == EINTR)
            continue;
          g_set_error (&error, G_IO_ERROR, g_io_error_from_errno (errno), "net-hub: ppoll: %s",
                       g_strerror (errno));
          goto out;
        }
      if (fds[hub->n_ports].revents & POLLIN)
        {
          guint64 expirations;

          (void) !read (timer, &expirations, sizeof expirations);
        }
      release (hub, now_ns ());
      for (guint p = 0; p < hub->n_ports; p++)
        if (fds[p].revents & POLLIN)
          drain (hub, p);
        else if (fds[p].revents & (POLLERR | POLLHUP | POLLNVAL))
          {
            g_set_error (&error, G_IO_ERROR, G_IO_ERROR_FAILED, "net-hub: link “%s” went away",
                         hub->names[p]);
            goto out;
          }
      if (fds[hub->n_ports + 1].revents & POLLIN)
        {
          struct signalfd_siginfo info;

          while (read (signals_fd, &info, sizeof info) == sizeof info)
            {
              if (info.ssi_signo == SIGUSR1)
                print_stats (hub);
              else
                stop = TRUE;
            }
        }
      if (watch_stdin && (fds[hub->n_ports + 2].revents & (POLLIN | POLLHUP)))
        {
          char byte[64];

          /* The parent's end closed (it died or is done); anything it
           * writes is ignored. */
          if (read (STDIN_FILENO, byte, sizeof byte) <= 0)
            stop = TRUE;
        }
      if (stop)
        break;
      arm (timer, hub->head);
    }

out:
  if (error != NULL)
    status = dc_cli_fail (options, error);
  else
    print_stats (hub);
  if (hub->trace != NULL)
    {
      write_trace (hub, trace);
      g_array_unref (hub->trace);
    }
  while (hub->head != NULL)
    {
      Frame *next = hub->head->next;

      g_free (hub->head);
      hub->head = next;
    }
  for (guint p = 0; p < hub->n_ports; p++)
    close (hub->fds[p]);
  if (timer >= 0)
    close (timer);
  if (signals_fd >= 0)
    close (signals_fd);
  g_free (hub->in_buffers);
  return status;
}
