#!/bin/bash
# device-prof.sh: CPU figures of one device's training step on the H200 host's
# Xeon that need a profiler or two builds' worth of settings at once (s30).
#
# Here:   scripts/device-prof.sh pack
#   builds build-devprof/: the CLI's libraries only (no GStreamer plugins: the
#   `device` carry limit is 64 MiB with the tree), perf with the libraries it
#   needs beyond those, the CLI with its symbols (debug info stripped), the
#   window timer and dn.c (what a subnormal costs each operation).
# There:  scripts/device-prof.sh run JOB      (carry ["build-devprof"])
#   JOB perf: perf record of `train --batch 32 --threads 4` (width 128, seed 1)
#     twice at once on cores 0-3 and 4-7, DC_MATH_TINY_PRODUCTS exact and
#     plain; symbols by window, steps 10-50 and 200-250, to $OUT/*-e.txt and
#     *-l.txt (ms a step = samples / steps at 1,000 Hz).
#   JOB ab VAR A B: four lone train processes at once (seeds 1 and 3, VAR=A and
#     VAR=B, 4 threads each), turned one core group round each round
#     (AB_ROUNDS, 2), by tools/group-trace/seed-rates.py: ms a step by windows
#     of 50 steps and each run's mean over steps 51-251. For
#     example `ab DC_QUANT_SUBNORMAL_STEPS 1 0` or `ab DC_MATH_TINY_PRODUCTS
#     exact plain`.
set -u
cd "$(dirname "$0")/.."
out=build-devprof

case "${1:-}" in
pack)
  set -e
  ./scripts/device-bundle.sh >/dev/null
  rm -rf "$out" /tmp/dc-prof && mkdir -p "$out" /tmp/dc-prof/slim /tmp/dc-prof/perfpack/lib
  # The bundle without the plugins and without the libraries the CLI does not load.
  cp -r build-device /tmp/dc-prof/slim/
  rm -rf /tmp/dc-prof/slim/build-device/{gst,gst-plugin-scanner,bin,daisychain-cli}
  needed=$(LD_LIBRARY_PATH=build-device/lib ldd build/src/cli/daisychain-cli | awk '{ print $1 }')
  for lib in /tmp/dc-prof/slim/build-device/lib/*; do
    echo "$needed" | grep -qx "$(basename "$lib")" || rm -f "$lib"
  done
  tar -C /tmp/dc-prof/slim -cJf "$out/bundle.tar.xz" build-device
  # perf and what it loads beyond the bundle's libraries and the C library.
  p=/tmp/dc-prof/perfpack
  cp "$(command -v perf)" "$p/"
  ldd "$p/perf" | awk '/=> \// { print $3 }' | while read -r lib; do
    name="$(basename "$lib")"
    case "$name" in libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) continue ;; esac
    [ -e "/tmp/dc-prof/slim/build-device/lib/$name" ] || cp -L "$lib" "$p/lib/"
  done
  strip --strip-unneeded "$p"/lib/* 2>/dev/null || true
  cp build/src/cli/daisychain-cli "$p/daisychain-cli.full"
  strip --strip-debug "$p/daisychain-cli.full"
  cat > "$p/windows.py" <<'PY'
import json, subprocess, sys, time
# windows.py STEPFILE CMD...: CMD's step events' times to STEPFILE ("step monotonic"), and
# ms a step by windows of 50 on standard output.
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
t = {}
with open(sys.argv[1], 'w') as f:
    for line in p.stdout:
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get('event') == 'step':
            t[o['step']] = time.monotonic()
            f.write('%d %.6f\n' % (o['step'], t[o['step']]))
p.wait()
W = 50
print(' '.join('%d:%.1f' % (a, (t[a + W] - t[a]) / W * 1e3) for a in range(1, max(t) - W + 1, W)))
PY
  tar -C /tmp/dc-prof -cJf "$out/perfpack.tar.xz" perfpack
  cc -O2 -o "$out/dn" tools/fp-census/dn.c
  du -sh "$out"
  ;;
run)
  root=$(pwd)
  o="${OUT:-/tmp}"
  tar -xJf "$out/bundle.tar.xz" || exit 1
  tar -xJf "$out/perfpack.tar.xz" -C /tmp || exit 1
  cp /tmp/perfpack/daisychain-cli.full build-device/daisychain-cli
  perf="env LD_LIBRARY_PATH=/tmp/perfpack/lib:$root/build-device/lib /tmp/perfpack/perf"
  train="$root/build-device/run.sh train --json --width 128 --seq 128 --batch 32 --threads 4 --steps 300"
  echo "== dn (ns a value)"
  "$out/dn"
  case "${2:-}" in
  perf)
    for m in exact plain; do
      c=0-3; [ $m = plain ] && c=4-7
      ( DC_MATH_TINY_PRODUCTS=$m taskset -c $c $perf record -q -k CLOCK_MONOTONIC -F 1000 \
          -o /tmp/$m.data -- python3 /tmp/perfpack/windows.py /tmp/st-$m.txt $train \
          --stop-at 250 --seed 1 >/dev/null 2>&1 ) &
    done
    wait
    for m in exact plain; do
      a=$(awk '$1==10{print $2}' /tmp/st-$m.txt); b=$(awk '$1==50{print $2}' /tmp/st-$m.txt)
      c=$(awk '$1==200{print $2}' /tmp/st-$m.txt); d=$(awk '$1==250{print $2}' /tmp/st-$m.txt)
      python3 -c "print('$m ms a step 10-50: %.1f  200-250: %.1f' % (($b - $a) / 40e-3, ($d - $c) / 50e-3))"
      for w in "e $a,$b" "l $c,$d"; do
        set -- $w
        $perf report -i /tmp/$m.data --no-children --sort symbol --time "$2" \
          -F overhead,sample,symbol > "$o/$m-$1.txt" 2>/dev/null
      done
    done ;;
  ab)
    var="$3"; va="$4"; vb="$5"
    python3 tools/group-trace/seed-rates.py "$root/build-device/run.sh" \
      "1:$var=$va,3:$var=$va,1:$var=$vb,3:$var=$vb" 4 251 "${AB_ROUNDS:-2}" \
      --width 128 --seq 128 --batch 32 ;;
  *)
    echo "device-prof.sh run: JOB is perf or ab VAR A B" >&2
    exit 2 ;;
  esac ;;
*)
  echo "usage: $0 pack | run perf | run ab VAR A B" >&2
  exit 2 ;;
esac
