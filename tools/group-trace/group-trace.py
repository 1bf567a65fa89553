#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Reads the exchange traces of one `bench group` run (DC_TRAIN_GROUP_TRACE=DIR:
# one DIR/trace-PID.txt per device, monotonic µs first on every line, one clock
# for every process of the host; docs/ARCHITECTURE.md, "The sharded exchange")
# and prints where a step's time goes after the slowest device queued its last
# contribution (T0 of each step), median and mean over the steps from 3 on:
# when each reducer began and sent its sum (the streamed reduce: when its stream
# began and sent its first chunk; "reduce began" is then when its last
# contribution was whole), when each summed shard reached the
# others (the step waits for the last), which reducer's came last how often,
# the Adam step and report hashes, a report's hop, and the next step's start.
#
#   python3 tools/group-trace/group-trace.py DIR
import collections
import glob
import os
import statistics as st
import sys


def load(folder):
    devs = {}
    for path in glob.glob(os.path.join(folder, 'trace-*.txt')):
        events = []
        for line in open(path):
            parts = line.split()
            if len(parts) < 2:
                continue
            kv = dict(x.split('=', 1) for x in parts[2:] if '=' in x)
            events.append((int(parts[0]), parts[1], kv))
        rank = next((int(kv['rank']) for _, name, kv in events if name == 'start'), None)
        if rank is not None:
            devs[rank] = events
    return devs


def main(folder):
    devs = load(folder)
    ranks = sorted(devs)
    # A reducer's name is the sender of its summed shard.
    names = {}
    for events in devs.values():
        for _, name, kv in events:
            if name == 'object' and kv['summed'] == '1':
                names[kv['from']] = int(kv['shard'])
    rows = collections.defaultdict(dict)
    for r, events in devs.items():
        step = None
        for t, name, kv in events:
            if name == 'start':
                step = int(kv['step'])
                rows[step][('start', r)] = t
            elif name == 'send_contrib' and step is not None:
                rows[step].setdefault(('send', r), []).append(t)
            elif name == 'object' and kv['summed'] == '1':
                rows[int(kv['step'])][('summed', r, names.get(kv['from']))] = t
            elif name in ('reduce_begin', 'reduced_sent', 'apply', 'applied', 'report_sent',
                          'stream_start', 'stream_first_sent'):
                rows[int(kv['step'])][(name, r)] = t
            elif name == 'report_in':
                src = names.get(kv['from'])
                rows[int(kv['step'])][('report_recv', r, src)] = int(kv['recv'])
                rows[int(kv['step'])][('report_in', r, src)] = t
    out = collections.defaultdict(list)
    last_by = collections.Counter()
    for s in sorted(rows):
        row = rows[s]
        if s < 3 or s + 1 not in rows or any(('send', r) not in row for r in ranks):
            continue
        t0 = max(max(row[('send', r)]) for r in ranks)
        ms = lambda t: (t - t0) / 1000.0
        every = 0
        for r in ranks:
            # The streamed reduce (since 2026-12-03): when it began and sent its first chunk.
            if ('stream_start', r) in row:
                out[f'r{r} stream began'].append(ms(row[('stream_start', r)]))
            if ('stream_first_sent', r) in row:
                out[f'r{r} first summed chunk sent'].append(ms(row[('stream_first_sent', r)]))
            if ('reduce_begin', r) in row:
                out[f'r{r} reduce began'].append(ms(row[('reduce_begin', r)]))
                out[f'r{r} summed shard sent'].append(ms(row[('reduced_sent', r)]))
        for d in ranks:
            arrivals = {src: row[('summed', d, src)] for src in ranks if ('summed', d, src) in row}
            if ('reduced_sent', d) in row:
                arrivals[d] = row[('reduced_sent', d)]
            for src, t in arrivals.items():
                if src != d:
                    out[f'r{src} summed shard in (at each other device)'].append(ms(t))
            last = max(arrivals, key=arrivals.get)
            last_by[last] += 1
            every = max(every, ms(arrivals[last]))
            if ('applied', d) in row:
                out['Adam and report hashes (apply to applied)'].append(
                    (row[('applied', d)] - row[('apply', d)]) / 1000.0)
            for src in ranks:
                if ('report_recv', d, src) in row and ('report_sent', src) in row:
                    out['a report\'s hop (sent to received on webrtcbin\'s thread)'].append(
                        (row[('report_recv', d, src)] - row[('report_sent', src)]) / 1000.0)
            if ('start', d) in rows[s + 1]:
                out['next step began'].append(ms(rows[s + 1][('start', d)]))
        out['every summed shard in, every device'].append(every)
    print(f'{folder}: {len(out["every summed shard in, every device"])} steps, {len(ranks)} devices;'
          ' ms after the slowest device queued its last contribution')
    print('  the last summed shard to reach a device came from:',
          ', '.join(f'r{k} {v}' for k, v in sorted(last_by.items())))
    for key in sorted(out):
        v = out[key]
        if not v:
            continue
        print(f'  {key:58s} median {st.median(v):7.2f}  mean {st.mean(v):7.2f}')


if __name__ == '__main__':
    main(sys.argv[1])
