#!/usr/bin/env python3
"""census.py FILE [STEPS]: fpcensus.c's counts by function, inlined callers
included (addr2line -i on the unstripped binary), per step when STEPS is
given. DE: instructions that read a subnormal; UE: that made a tiny result."""
import collections
import subprocess
import sys

steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
agg = collections.defaultdict(lambda: [0, 0])
for line in open(sys.argv[1]):
    de, ue, where = line.split()
    obj, off = where.rsplit('+', 1)
    key = obj
    if not obj.startswith('?'):
        out = subprocess.run(['addr2line', '-f', '-i', '-e', obj, off],
                             capture_output=True, text=True).stdout.split('\n')
        fns = [out[i] for i in range(0, len(out) - 1, 2)]
        if fns and fns[0] != '??':
            key = ' < '.join(fns)
    agg[key][0] += int(de)
    agg[key][1] += int(ue)
for key, (de, ue) in sorted(agg.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
    print('DE %10.0f  UE %8.0f  %s' % (de / steps, ue / steps, key))
