#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
#
# One line per `bench group --json` result in FILE (a
# device-figures.sh log, or bench group's own output; other lines and `--`
# headers pass through as labels): the step, tokens/s and the two scalings
# (issue 11's 0.8 x N, against one device alone and against N alone at once;
# a group of one has only the first: what the group's own duties cost
# without a network),
# the step's critical path (gradient, the wait for the slowest device, the
# exchange after it, Adam), the audits drawn, a device's CPU a step in the
# group against one alone, and the hypervisor's steal during each run
# (docs/CLI.md, bench group); then, for each label and group size of more
# than one run, the median and range of its scalings.
#
#   python3 tools/group-trace/group-summary.py FILE [FILE ...]
import json
import statistics
import sys

# The scalings of each label's runs, for the closing lines.
runs = {}


def fmt(value, spec='.1f'):
    return '-' if value is None else format(value, spec)


def pct(share):
    return None if share is None else 100 * share


def summarize(path):
    label = ''
    for line in open(path, encoding='utf-8', errors='replace'):
        if line.startswith('--') or line.startswith('=='):
            label = line.strip()
            continue
        if '"bench":"group"' not in line:
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get('devices', 0) < 1:
            continue
        path_ = d.get('critical_path', {})
        phases = d.get('phases', {})
        solo, at_once = d.get('solo_tokens_per_s'), d.get('concurrent_solo_tokens_per_s')
        step = path_.get('step_ms')
        runs.setdefault((label, d['devices'], d.get('threads')), []).append((
            d.get('scaling'), d.get('scaling_vs_concurrent'),
            at_once / solo if solo and at_once else None,
            path_.get('slowest_wait_ms') / step if step and 'slowest_wait_ms' in path_ else None,
            path_.get('exchange_ms') / step if step and 'exchange_ms' in path_ else None))
        # `seed` since s28: without it the group trained a run of its own
        # (another cost than the lone reference's, docs/BENCHMARKS.md s28).
        print(f"{label} | {d['devices']} dev x {d.get('threads')} threads {d.get('network')}"
              f" seed {d.get('seed', 'own')} step {fmt(d.get('step_ms'))} ms"
              f" {fmt(d.get('tokens_per_s'), ',.0f')} tok/s"
              f" | x N {fmt(d.get('scaling'), '.3f')}"
              f"{before_only(d)}"
              f" vs alone at once {fmt(d.get('scaling_vs_concurrent'), '.3f')}"
              f" | path {fmt(path_.get('step_ms'))} = gradient {fmt(path_.get('gradient_ms'))}"
              f" + slowest {fmt(path_.get('slowest_wait_ms'))}"
              f" + exchange {fmt(path_.get('exchange_ms'))} + adam {fmt(path_.get('adam_ms'))}"
              f" + {fmt(path_.get('next_start_ms'))}"
              f" | audits {fmt(phases.get('audits'))} ({fmt(phases.get('audit_ms'))} ms)"
              f" | cpu a step {fmt(d.get('cpu_ms_per_step'))}"
              f" alone {fmt(d.get('solo_cpu_ms_per_step'))}"
              f" alone at once {fmt(d.get('concurrent_solo_cpu_ms_per_step'))}"
              f" | steal {fmt(pct(d.get('host_steal')))}"
              f" alone {fmt(pct(d.get('solo_host_steal')))}"
              f" at once {fmt(pct(d.get('concurrent_solo_host_steal')))} %")


def before_only(d):
    """With --solo-after: the scaling against the run alone before the
    groups only, as bench group measured it before s27."""
    before = d.get('solo_before_tokens_per_s')
    if not before:
        return ''
    return (f" (alone before {before:,.0f}, after {d['solo_after_tokens_per_s']:,.0f} tok/s;"
            f" x N against the one before {d['tokens_per_s'] / (d['devices'] * before):.3f})")


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return '-'
    return (f"median {statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f},"
            f" mean {statistics.mean(values):.3f})")


def totals():
    """One line a label with more than one run: its runs' scalings, the
    median first (the host's speed moves between runs: docs/BENCHMARKS.md,
    s26); then what bounds them (s27): the share of one device's speed the
    host leaves each of N lone processes at once, and the step's shares
    spent waiting for the slowest device and in the exchange after it."""
    for (label, devices, threads), pairs in runs.items():
        if len(pairs) < 2:
            continue
        print(f"{label or '(no label)'}, {devices} devices, {threads} threads: {len(pairs)} runs"
              f" | x N {spread(p[0] for p in pairs)}"
              f" | vs alone at once {spread(p[1] for p in pairs)}")
        if devices > 1:
            print(f"    N alone at once / one alone {spread(p[2] for p in pairs)}"
                  f" | slowest wait / step {spread(p[3] for p in pairs)}"
                  f" | exchange / step {spread(p[4] for p in pairs)}")


if __name__ == '__main__':
    for p in sys.argv[1:]:
        summarize(p)
    totals()
