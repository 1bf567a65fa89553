#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Reads the devices' step lines that `bench group` keeps with
# DC_BENCH_GROUP_LOGS=DIR (DIR/device-N.json, one JSON event a line) and
# prints, per run folder, each step's wait (the mean of the devices'
# `wait_ms`; the largest device wait of the run on the first line, where
# s22 found renewals' one-second steps), a "*" where slow sending grew at that step (a device reported
# or was inside an episode: docs/ARCHITECTURE.md, "Slow sending"), and the
# steps whose wait was over --slow-ms with no slow sending near them (a crawl
# nobody reported; s21 found those before idle credits).
#
#   python3 tools/group-trace/group-steps.py DIR [DIR …] [--slow-ms 90]
#
# A DIR holding device-N.json files is one run; a DIR of such folders is
# read folder by folder (DC_BENCH_GROUP_LOGS=$OUT/runs/NAME, then
# group-steps.py $OUT/runs).
import argparse
import glob
import json
import os
import statistics


def read_run(folder):
    devices = []
    for path in sorted(glob.glob(os.path.join(folder, "device-*.json"))):
        steps = {}
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                if isinstance(o, dict) and o.get("event") == "step" and o.get("roster", 0) >= 2:
                    steps[o.get("step")] = o
        if steps:
            devices.append(steps)
    return devices


def summarize(name, devices, slow_ms):
    steps = sorted(set().union(*[set(d) for d in devices]))
    last_slow = [None] * len(devices)
    rows = []
    for step in steps:
        waits = [d[step].get("wait_ms", 0.0) for d in devices if step in d]
        grew = False
        for k, d in enumerate(devices):
            if step not in d:
                continue
            value = d[step].get("slow_send_ms", 0.0)
            if last_slow[k] is not None and value > last_slow[k]:
                grew = True
            last_slow[k] = value
        rows.append((step, statistics.mean(waits), grew, max(waits)))
    if len(rows) < 2:
        print(f"{name}: fewer than two group steps")
        return
    waits = [w for _, w, _, _ in rows[1:]]
    slowest = max(rows[1:], key=lambda row: row[3])
    print(f"{name}: {len(devices)} devices, {len(rows)} steps, wait median "
          f"{statistics.median(waits):.1f} ms, mean {statistics.mean(waits):.1f} ms; "
          f"largest device wait {slowest[3]:.0f} ms (step {slowest[0]})")
    print("  " + " ".join(f"{s}:{w:.0f}{'*' if g else ''}" for s, w, g, _ in rows))
    marked = {s for s, _, g, _ in rows if g}
    unseen = [s for s, w, _, _ in rows[1:]
              if w > slow_ms and not any(abs(s - m) <= 3 for m in marked)]
    if unseen:
        print(f"  slow steps with no slow sending within 3 steps: {unseen}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--slow-ms", type=float, default=90.0)
    args = parser.parse_args()
    for top in args.dirs:
        if glob.glob(os.path.join(top, "device-*.json")):
            folders = [top]
        else:
            folders = sorted(p for p in glob.glob(os.path.join(top, "*")) if os.path.isdir(p))
        for folder in folders:
            devices = read_run(folder)
            if devices:
                summarize(os.path.basename(os.path.normpath(folder)), devices, args.slow_ms)


if __name__ == "__main__":
    main()
