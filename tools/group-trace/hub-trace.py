#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Reads the delay hub's frame trace of one `bench … --netns` run
# (DC_NETNS_HUB_TRACE=FILE: one line per frame released, "read_us sent_us in
# out len", CLOCK_MONOTONIC µs; src/cli/dc-cli-net-hub.c) and prints how the
# links were used:
#
# - the hub's own lateness (sent − read − delay), percentiles;
# - bursts: a flow (one port to another) whose frames come less than GAP ms
#   apart is one burst; for bursts of 64 kB or more, by size, the median
#   time they took against their bytes at 1 Gbit/s, and how many bytes the
#   flow moved in each round trip (2 × delay) from the burst's start: a
#   window that grows round trip by round trip is a congestion window in
#   slow start (or a receive/credit window), a flat one at ≈ 250 kB the line;
# - each port's ingress (what its endpoint sent) while busy, in 1 ms bins.
#
# - with --group DIR (the same run's DC_TRAIN_GROUP_TRACE folder), per step
#   from T0 (the slowest device queued its last contribution, as
#   group-trace.py): the bytes each flow still moved after T0 and when its
#   last frame left the hub, and what each port's endpoint sent per 2 ms
#   from 10 ms before T0 (1 Gbit/s is 250 kB), medians over the steps from
#   3 on.
# - crawls: bursts of 256 kB or more that took over 50 ms at a few frames a
#   round trip (one association held at cwnd = 4 × MTU, docs/BENCHMARKS.md);
#   --gap-ms 20 joins a crawl's pieces.
#
#   python3 tools/group-trace/hub-trace.py FILE [--gap-ms 4] [--since-us T] [--group DIR]
import argparse
import collections
import os
import statistics as st
import sys


def load(path):
    frames, delay_us, ports = [], 1000, []
    for line in open(path):
        if line.startswith('#'):
            if 'delay_us' in line:
                delay_us = int(line.rsplit('delay_us', 1)[1].strip(' )\n'))
            if 'ports:' in line:
                ports = line.split('ports:', 1)[1].split(';')[0].split()
            continue
        r, s, i, o, n = line.split()
        frames.append((int(r), int(s), int(i), int(o), int(n)))
    return frames, delay_us, ports


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


def split_bursts(fl, gap_us, rtt):
    """A flow's (time, bytes) frames cut where they are more than gap_us
    apart: (start, duration, bytes, bytes per round trip from the start)."""
    out = []
    start = 0
    for k in range(1, len(fl) + 1):
        if k == len(fl) or fl[k][0] - fl[k - 1][0] > gap_us:
            b = fl[start:k]
            t0 = b[0][0]
            per = [0] * ((b[-1][0] - t0) // rtt + 1)
            for t, n in b:
                per[(t - t0) // rtt] += n
            out.append((t0, b[-1][0] - t0, sum(n for _, n in b), per))
            start = k
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('file')
    ap.add_argument('--gap-ms', type=float, default=4.0)
    ap.add_argument('--group', help='the run\'s DC_TRAIN_GROUP_TRACE folder')
    ap.add_argument('--since-us', type=int, default=0,
                    help='ignore frames read before this monotonic µs (e.g. the set-up)')
    a = ap.parse_args()
    frames, delay_us, ports = load(a.file)
    frames = [f for f in frames if f[0] >= a.since_us]
    if not frames:
        print('no frames')
        return
    late = [s - r - delay_us for r, s, _, _, _ in frames]
    span = (frames[-1][0] - frames[0][0]) / 1e6
    total = sum(f[4] for f in frames)
    print(f'{a.file}: {len(frames)} frames, {total / 1e6:.1f} MB in {span:.1f} s, delay {delay_us} µs,'
          f' ports {" ".join(ports)}')
    print('  hub lateness µs: p50 %d  p90 %d  p99 %d  p99.9 %d  max %d' % (
        pct(late, 50), pct(late, 90), pct(late, 99), pct(late, 99.9), max(late)))

    flows = collections.defaultdict(list)
    for r, s, i, o, n in frames:
        if o >= 0:
            flows[(i, o)].append((r, n))
    rtt = 2 * max(delay_us, 50)
    bursts = [(key, t0, dur, nbytes, per)
              for key, fl in flows.items()
              for t0, dur, nbytes, per in split_bursts(fl, a.gap_ms * 1000, rtt)
              if nbytes >= 64000]
    print(f'  bursts of 64 kB or more (a flow\'s frames < {a.gap_ms} ms apart): {len(bursts)}')
    classes = [(64e3, 200e3), (200e3, 400e3), (400e3, 800e3), (800e3, 1.6e6), (1.6e6, 1e12)]
    for lo, hi in classes:
        sel = [b for b in bursts if lo <= b[3] < hi]
        if not sel:
            continue
        dur = [b[2] / 1000 for b in sel]
        size = [b[3] for b in sel]
        line_ms = st.median(size) / 125e3
        prof = []
        for x in range(8):
            v = [b[4][x] if x < len(b[4]) else 0 for b in sel]
            prof.append(st.median(v) / 1e3)
        print(f'  {lo / 1e3:6.0f}-{hi / 1e3:<6.0f} kB: {len(sel):4d} bursts, median {st.median(size) / 1e3:7.1f} kB'
              f' in {st.median(dur):6.2f} ms (p90 {pct(dur, 90):6.2f}; at 1 Gbit/s {line_ms:5.2f} ms);'
              f' kB per {rtt / 1000:g} ms from the start: ' + ' '.join(f'{p:.0f}' for p in prof))

    # Crawls (docs/BENCHMARKS.md, "The shaped network's crawl"): bursts of
    # 256 kB or more that took over 50 ms and in which 9 round trips in 10
    # moved at most 8 full frames (an association held at a few packets a
    # round trip, where a ramped one moves ~250 kB at 1 Gbit/s and 1 ms).
    big = max((f[4] for f in frames), default=1)
    crawls = [(key, t0, dur, nbytes, per)
              for key, fl in flows.items()
              # DATA packets only, not SACKs
              for t0, dur, nbytes, per in split_bursts([(t, n) for t, n in fl if n > 300],
                                                       a.gap_ms * 1000, rtt)
              if nbytes >= 256e3 and dur > 50e3 and pct(per, 90) <= 8 * big]
    print(f'  crawls (bursts >= 256 kB over 50 ms, 90 % of round trips <= {8 * big / 1e3:.0f} kB):'
          f' {len(crawls)}')
    for (i, o), t0, dur, nbytes, rounds in crawls[:20]:
        print(f'    {i}>{o} at {(t0 - frames[0][0]) / 1e3:9.1f} ms: {nbytes / 1e3:7.1f} kB in'
              f' {dur / 1e3:6.1f} ms ({nbytes / dur:.1f} MB/s)')

    # Each port's ingress (its endpoint's egress) in 1 ms bins, bins with traffic only.
    bins = collections.defaultdict(collections.Counter)
    for r, s, i, o, n in frames:
        bins[i][r // 1000] += n
    for p in sorted(bins):
        v = list(bins[p].values())
        busy = [x for x in v if x > 0]
        print(f'  port {ports[p] if p < len(ports) else p}: {sum(v) / 1e6:7.1f} MB sent by its endpoint;'
              f' busy 1 ms bins {len(busy)}, kB per busy ms p50 {pct(busy, 50) / 1e3:.0f}'
              f' p90 {pct(busy, 90) / 1e3:.0f} max {max(busy) / 1e3:.0f} (1 Gbit/s: 125)')

    if a.group:
        after_t0(a.group, frames, delay_us)


def after_t0(folder, frames, delay_us):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import importlib
    gt = importlib.import_module('group-trace')
    devs = gt.load(folder)
    ranks = sorted(devs)
    sends = collections.defaultdict(dict)
    starts = collections.defaultdict(dict)
    for r, events in devs.items():
        step = None
        for t, name, kv in events:
            if name == 'start':
                step = int(kv['step'])
                starts[step][r] = t
            elif name == 'send_contrib' and step is not None:
                sends[step][r] = max(sends[step].get(r, 0), t)
    steps = [s for s in sorted(sends) if s >= 3 and len(sends[s]) == len(ranks)
             and s + 1 in starts and len(starts[s + 1]) == len(ranks)]
    if not steps:
        print('  --group: no step with every device\'s contributions')
        return
    per = collections.defaultdict(list)
    import bisect
    reads = [f[0] for f in frames]
    for s in steps:
        t0 = max(sends[s].values())
        t1 = min(starts[s + 1].values())
        lo, hi = bisect.bisect_left(reads, t0), bisect.bisect_left(reads, t1)
        flows = collections.defaultdict(lambda: [0, 0])
        for r, sent, i, o, n in frames[lo:hi]:
            if o < 0:
                continue
            f = flows[(i, o)]
            f[0] += n
            f[1] = max(f[1], sent)
        big = {k: v for k, v in flows.items() if v[0] >= 20000}
        per['flows of 20 kB or more after T0'].append(len(big))
        per['bytes after T0, all flows (kB)'].append(sum(v[0] for v in flows.values()) / 1e3)
        if big:
            per['largest flow after T0 (kB)'].append(max(v[0] for v in big.values()) / 1e3)
            per['last frame of those flows out of the hub (ms after T0)'].append(
                (max(v[1] for v in big.values()) - t0) / 1e3)
        per['next step began (ms after T0, first device)'].append((t1 - t0) / 1e3)
    print(f'  after T0 ({len(steps)} steps, medians):')
    for k, v in per.items():
        print(f'    {k:58s} {st.median(v):8.1f}')
    # Each port's egress in 2 ms bins from T0 − 10 ms to T0 + 70 ms.
    acc = collections.defaultdict(list)
    ports = sorted({f[2] for f in frames})
    for s in steps:
        t0 = max(sends[s].values())
        lo, hi = bisect.bisect_left(reads, t0 - 10000), bisect.bisect_left(reads, t0 + 70000)
        bins = collections.defaultdict(collections.Counter)
        for r, sent, i, o, n in frames[lo:hi]:
            bins[i][(r - t0) // 2000] += n
        for p in ports:
            for b in range(-5, 35):
                acc[(p, b)].append(bins[p][b])
    print('  kB each port\'s endpoint sent per 2 ms, from T0 − 10 ms (median over the steps;'
          ' 1 Gbit/s: 250; T0 is the 6th column):')
    for p in ports:
        row = [st.median(acc[(p, b)]) / 1e3 for b in range(-5, 35)]
        if max(row) >= 1:
            print(f'    port {p}:', ' '.join(f'{x:3.0f}' for x in row))


if __name__ == '__main__':
    main()
