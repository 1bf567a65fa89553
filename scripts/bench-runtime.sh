#!/bin/sh
# bench-runtime.sh: issue 14's runtime figures on a quiet machine, for the
# lead (the development VM was too loaded to measure them, load ~16 on 2 vCPUs).
#
#   scripts/bench-runtime.sh [BUILD_DIR] [THREADS...]
#
# For each thread count (default: 1, 2 and all cores) and each pool spin
# (DC_PARALLEL_SPIN_US = 0, 50, 200 µs), prints `bench train --json
# --no-vulkan` (PyTorch in the same invocation, once per thread count) and
# `bench decode --json` lines, each prefixed with the settings. Keep the spin
# whose figures are best at 2 threads AND at all cores, and check it does
# not lose when the machine is oversubscribed (run it again beside
# `stress -c $(nproc)` or another build).
set -eu
build=${1:-build}
shift 2>/dev/null || true
cli="$build/src/cli/daisychain-cli"
threads=${*:-"1 2 $(nproc)"}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(uname -n), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "# git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $threads; do
  torch=""
  for spin in 0 50 200; do
    export DC_PARALLEL_SPIN_US=$spin
    "$cli" bench train --json --no-vulkan --threads "$t" $torch | sed "s/^/spin=$spin threads=$t train /"
    "$cli" bench decode --json --no-torch --threads "$t" | sed "s/^/spin=$spin threads=$t decode /"
    torch="--no-torch"   # PyTorch's figure does not depend on our spin
  done
done
