#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
#
# A measuring aid for issue 11 (the group's gradient runs slower than a lone
# process's by about the CPU its transport takes): until STOPFILE exists,
# every 0.2 s sets the nice value of every thread of the group's devices
# (command lines matching PATTERN, default bench group's `train --json
# --signal`) except the main thread, the engine's helpers (dc-parallel*) and
# GLib's task threads (pool-*, the compute worker among them) to NICE, so
# that webrtcbin's, libnice's, usrsctp's and the stream's threads yield to
# the gradient's. NICE `idle` puts them in SCHED_IDLE instead (they run only
# on a core nothing else wants). A thread started between two passes runs
# at its creator's priority for up to 0.2 s.
#
#   python3 tools/group-trace/renice-transport.py STOPFILE NICE|idle [PATTERN]
import os
import sys
import time

stop, nice = sys.argv[1], sys.argv[2]
pattern = sys.argv[3] if len(sys.argv) > 3 else 'train --json --signal'
done = set()
while not os.path.exists(stop):
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode(errors='replace')
            if pattern not in cmd:
                continue
            for tid in os.listdir(f'/proc/{pid}/task'):
                if tid == pid or (pid, tid) in done:
                    continue
                with open(f'/proc/{pid}/task/{tid}/comm') as f:
                    comm = f.read().strip()
                if comm.startswith('dc-parallel') or comm.startswith('pool-'):
                    continue
                if nice == 'idle':
                    os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
                else:
                    os.setpriority(os.PRIO_PROCESS, int(tid), int(nice))
                done.add((pid, tid))
        except OSError:
            continue
    time.sleep(0.2)
print(f'renice-transport: {len(done)} threads set to {nice if nice == "idle" else "nice " + nice}')
