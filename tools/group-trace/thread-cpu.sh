#!/bin/bash
# thread-cpu.sh: where a training group's CPU goes, by thread, while
# `bench group` runs (a measuring aid for issue 11: the group's compute runs
# slower than the same work alone, docs/BENCHMARKS.md).
#
# Usage: tools/group-trace/thread-cpu.sh STOPFILE [PATTERN]
#   Samples every 0.3 s the threads of each process whose command line
#   matches PATTERN (default: bench group's devices, `train --json
#   --signal`), until STOPFILE exists, then prints per process and per
#   thread class the CPU seconds each thread had used when last seen
#   (utime + stime from /proc/PID/task/TID/stat). A thread that ends
#   between two samples loses its last 0.3 s at most.
# Classes, by the thread names GLib, GStreamer and the engine give:
#   engine   dc-parallel* (the engine's helpers: the GEMM, norms, hashes)
#   gtask    pool-* (GLib's GTask threads: the compute worker, the reduce,
#            the receipt checks, the Adam step and the report's hashes)
#   stream   dc-stream (the streamed reduce)
#   gst      webrtcbin's and its elements' threads (*:src, *:sink, SCTP*,
#            webrtcbin*, nice*, dtls*, rtpsession*, GstSystemClock)
#   main     the process's main thread (the mesh, the coordinator)
#   other    everything else
#   ended    threads that ended before the last sample (the process's own
#            utime + stime, which keeps theirs, less the live threads')
set -u
stop=${1:?usage: thread-cpu.sh STOPFILE [PATTERN]}
pattern=${2:-train --json --signal}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
tck=$(getconf CLK_TCK)

while [ ! -e "$stop" ]; do
  for p in $(pgrep -f -- "$pattern"); do
    stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    set -- ${stat##*) }
    echo "$p process - ${12} ${13}"
    for t in /proc/"$p"/task/*; do
      stat=$(cat "$t/stat" 2>/dev/null) || continue
      comm=$(cat "$t/comm" 2>/dev/null) || continue
      # The fields after "(comm) ": state is 1, utime 12, stime 13.
      set -- ${stat##*) }
      echo "$p ${t##*/} ${comm// /_} ${12} ${13}"
    done
  done >> "$raw"
  sleep 0.3
done

awk -v tck="$tck" -v me="$$" '
  $2 == "process" { process[$1] = $4 + $5; next }
  { key = $1 " " $2; name[key] = $3; ticks[key] = $4 + $5; pid[key] = $1 }
  function class(n, p, t) {
    if (n ~ /^dc-parallel/) return "engine"
    if (n ~ /^pool-/) return "gtask"
    if (n ~ /^dc-stream/) return "stream"
    if (n ~ /:src|:sink|^SCTP|^webrtcbin|^nice|^dtls|^rtpsession|^GstSystemClock/) return "gst"
    if (p == t) return "main"
    return "other"
  }
  END {
    for (k in ticks) {
      split(k, f, " ")
      c = class(name[k], f[1], f[2])
      sum[pid[k] " " c] += ticks[k]
      all[pid[k]] += ticks[k]
      total[c] += ticks[k]
    }
    for (p in process) {
      ended = process[p] - all[p]
      if (ended < 0) ended = 0
      sum[p " ended"] += ended
      total["ended"] += ended
      all[p] += ended
    }
    for (k in sum) {
      split(k, f, " ")
      printf "pid %s %-6s %8.2f s  %5.1f %%\n", f[1], f[2], sum[k] / tck, 100 * sum[k] / all[f[1]]
    }
    for (c in total)
      printf "all %-6s %8.2f s\n", c, total[c] / tck
  }' "$raw" | sort
