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
# the Adam step and report hashes, a report's hop, and the next step's start;
# and each device's gradient: when it began (after the first device's), when
# it ended (against T0), how long it took, and which device's ended last;
# then the step's critical path: the slowest device's gradient, the exchange
# after it, the Adam step (with LOGS, the same run's DC_BENCH_GROUP_LOGS
# folder, also for the steps with and without an audit).
#
#   python3 tools/group-trace/group-trace.py DIR [LOGS]
import collections
import glob
import json
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


def audit_steps(logs):
    """Steps on whose line any device showed an audit's end (DC_BENCH_GROUP_LOGS)."""
    steps = set()
    for path in glob.glob(os.path.join(logs, 'device-*.json')):
        for line in open(path, encoding='utf-8', errors='replace'):
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if isinstance(o, dict) and o.get('event') == 'step' and o.get('audit_ms', 0) > 0:
                steps.add(o.get('step'))
    return steps


def critical_path(rows, ranks, audited):
    """The step's critical path, from the first device's gradient start to
    the next one's: the slowest device's gradient, the exchange after it
    (to each device's Adam step), the Adam step, the next gradient's start.
    Split by whether an audit ended on the step's line or the next's (the
    audit of S runs beside S + 2's gradient and ends on its line or S + 3's)."""
    out = collections.defaultdict(dict)
    for s in sorted(rows):
        row, nx = rows[s], rows.get(s + 1, {})
        if s < 3 or not all(('done', r) in row and ('began', r) in row and ('apply', r) in row
                            and ('began', r) in nx for r in ranks):
            continue
        first = min(row[('began', r)] for r in ranks)
        slowest = max(row[('done', r)] for r in ranks)
        mean_done = sum(row[('done', r)] for r in ranks) / len(ranks)
        cycle = (min(nx[('began', r)] for r in ranks) - first) / 1000.0
        kinds = ['all steps']
        if audited is not None:
            kinds.append('steps with an audit' if s in audited or s + 1 in audited
                         else 'steps without')
        for kind in kinds:
            o = out[kind]
            o.setdefault('cycle: first gradient began to the next first', []).append(cycle)
            o.setdefault('the slowest gradient ended (after the first began)', []).append(
                (slowest - first) / 1000.0)
            o.setdefault('  the slowest past the devices\' mean', []).append(
                (slowest - mean_done) / 1000.0)
            o.setdefault('  the slowest past the fastest', []).append(
                (slowest - min(row[('done', r)] for r in ranks)) / 1000.0)
            o.setdefault('the exchange: the slowest ended to a device\'s Adam step', []).append(
                st.mean(row[('apply', r)] - slowest for r in ranks) / 1000.0)
            if all(('stepped', r) in row for r in ranks):
                o.setdefault('the Adam step (apply to stepped)', []).append(
                    st.mean(row[('stepped', r)] - row[('apply', r)] for r in ranks) / 1000.0)
                o.setdefault('stepped to the next gradient\'s start', []).append(
                    st.mean(nx[('began', r)] - row[('stepped', r)] for r in ranks) / 1000.0)
    for kind, o in out.items():
        n = len(o['cycle: first gradient began to the next first'])
        print(f'  critical path, {kind} ({n}), ms:')
        for key, v in o.items():
            print(f'    {key:56s} median {st.median(v):7.2f}  mean {st.mean(v):7.2f}')


def main(folder, logs=None):
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
            elif name == 'computed' and step is not None:
                # Computed ahead: the gradient of the step after the one begun.
                which = step + 1 if kv.get('ahead') == '1' else step
                rows[which][('began', r)] = int(kv['began'])
                rows[which][('done', r)] = int(kv['done'])
            elif name == 'send_contrib' and step is not None:
                rows[step].setdefault(('send', r), []).append(t)
            elif name == 'object' and kv['summed'] == '1':
                rows[int(kv['step'])][('summed', r, names.get(kv['from']))] = t
            elif name == 'stepped' and step is not None:
                rows[step][('stepped', r)] = t
            elif name in ('reduce_begin', 'reduced_sent', 'apply', 'applied', 'report_sent',
                          'stream_start', 'stream_first_sent'):
                rows[int(kv['step'])][(name, r)] = t
            elif name == 'report_in':
                src = names.get(kv['from'])
                rows[int(kv['step'])][('report_recv', r, src)] = int(kv['recv'])
                rows[int(kv['step'])][('report_in', r, src)] = t
    out = collections.defaultdict(list)
    last_by = collections.Counter()
    last_by_compute = collections.Counter()
    for s in sorted(rows):
        row = rows[s]
        if s < 3 or s + 1 not in rows or any(('send', r) not in row for r in ranks):
            continue
        t0 = max(max(row[('send', r)]) for r in ranks)
        ms = lambda t: (t - t0) / 1000.0
        every = 0
        # Each device's gradient: when it began and ended against T0 and the
        # first device's start, and which device ended last.
        if all(('done', r) in row for r in ranks):
            first = min(row[('began', r)] for r in ranks)
            last_by_compute[max(ranks, key=lambda r: row[('done', r)])] += 1
            for r in ranks:
                out[f'r{r} gradient began (after the first device\'s)'].append(
                    (row[('began', r)] - first) / 1000.0)
                out[f'r{r} gradient done'].append(ms(row[('done', r)]))
                out[f'r{r} gradient took'].append((row[('done', r)] - row[('began', r)]) / 1000.0)
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
    print('  the last gradient to end was:',
          ', '.join(f'r{k} {v}' for k, v in sorted(last_by_compute.items())))
    for key in sorted(out):
        v = out[key]
        if not v:
            continue
        print(f'  {key:58s} median {st.median(v):7.2f}  mean {st.mean(v):7.2f}')
    critical_path(rows, ranks, audit_steps(logs) if logs else None)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
