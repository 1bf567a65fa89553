#!/usr/bin/env python3
# seed-rates.py: how fast one device trains each seed's run, several lone
# `train` processes at once, each pinned to cores of its own.
#
#   seed-rates.py CLI RUNS THREADS STEPS ROUNDS [train flags...]
#
# RUNS is a comma-separated list of seeds (1,2,3,4), each optionally with
# one environment setting for its process (1:DC_X=1,3:DC_X=1,1:DC_X=0,3:DC_X=0:
# an A/B of two settings on two seeds at once); process k runs on cores
# k*THREADS ... (k+1)*THREADS-1. Each round turns the seeds one place round
# the core groups, so that every run meets every group. Prints, per round
# and process, ms a step over windows of 50 steps (from the step lines'
# arrival), then per run the mean ms a step over steps 51 on and its rate
# against the fastest run's.
#
# Why (docs/BENCHMARKS.md, s28): a run's cost depends on its weights and
# batches (subnormal attention probabilities take a slow path on x86), so a
# group that trains another run than its lone reference, or ranks that
# train other batches, run at other speeds for that reason alone.
#
# SPDX-License-Identifier: GPL-3.0-or-later
import json
import os
import subprocess
import sys
import threading
import time

WINDOW = 50


def run_one(argv, env, cores, times):
    proc = subprocess.Popen(['taskset', '-c', cores] + argv, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    for line in proc.stdout:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get('event') == 'step':
            times[event['step']] = time.monotonic()
    proc.wait()


def main():
    if len(sys.argv) < 6:
        sys.exit("usage: seed-rates.py CLI RUNS THREADS STEPS ROUNDS [train flags...]")
    cli, runs_spec, threads, steps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    extra = sys.argv[6:]
    seeds = runs_spec.split(',')
    if len(set(seeds)) != len(seeds):
        sys.exit(f'seed-rates.py: a run is listed twice in {runs_spec}')
    n = len(seeds)
    if n * threads > os.cpu_count():
        sys.exit(f'seed-rates.py: {n} processes of {threads} threads need {n * threads} cores')
    per_seed = {s: [] for s in seeds}
    for r in range(rounds):
        order = seeds[r % n:] + seeds[:r % n]
        runs = []
        for k, seed in enumerate(order):
            cores = f'{k * threads}-{(k + 1) * threads - 1}'
            number, _, setting = seed.partition(':')
            env = dict(os.environ)
            if setting:
                name, eq, value = setting.partition('=')
                if not eq:
                    sys.exit(f'seed-rates.py: {seed}: the setting is not NAME=VALUE')
                env[name] = value
            argv = [cli, 'train', '--json', '--threads', str(threads), '--steps',
                    str(max(steps, 100)), '--stop-at', str(steps), '--seed', str(int(number))] + extra
            times = {}
            thread = threading.Thread(target=run_one, args=(argv, env, cores, times))
            runs.append((seed, cores, times, thread))
            thread.start()
        for run in runs:
            run[3].join()
        for seed, cores, times, _ in runs:
            if not times or max(times) < WINDOW + 1:
                print(f'round {r + 1} run {seed} cores {cores}: too few steps', flush=True)
                continue
            last = max(times)
            windows = ' '.join(f'{a}:{(times[a + WINDOW] - times[a]) / WINDOW * 1e3:.1f}'
                               for a in range(1, last - WINDOW + 1, WINDOW) if a + WINDOW in times)
            print(f'round {r + 1} run {seed} cores {cores}: ms a step {windows}', flush=True)
            if last > WINDOW + 1:
                per_seed[seed].append((times[last] - times[WINDOW + 1]) / (last - WINDOW - 1) * 1e3)
    means = {s: sum(v) / len(v) for s, v in per_seed.items() if v}
    if means:
        fastest = min(means.values())
        for s in seeds:
            if s in means:
                print(f'run {s}: {means[s]:.1f} ms a step over steps {WINDOW + 1} on '
                      f'({len(per_seed[s])} rounds), {fastest / means[s]:.3f} of the fastest run\'s rate')


if __name__ == '__main__':
    main()
