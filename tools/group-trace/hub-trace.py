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
#   python3 tools/group-trace/hub-trace.py FILE [--gap-ms 4] [--since-us T]
import argparse
import collections
import statistics as st


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('file')
    ap.add_argument('--gap-ms', type=float, default=4.0)
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
    bursts = []
    for key, fl in flows.items():
        start = 0
        for k in range(1, len(fl) + 1):
            if k == len(fl) or fl[k][0] - fl[k - 1][0] > a.gap_ms * 1000:
                b = fl[start:k]
                nbytes = sum(n for _, n in b)
                if nbytes >= 64000:
                    t0 = b[0][0]
                    rounds = collections.Counter()
                    for t, n in b:
                        rounds[(t - t0) // rtt] += n
                    bursts.append((key, t0, b[-1][0] - t0, nbytes,
                                   [rounds[x] for x in range(max(rounds) + 1)]))
                start = k
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


if __name__ == '__main__':
    main()
