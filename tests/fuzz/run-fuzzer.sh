#!/bin/bash
# run-fuzzer.sh FUZZER ARTIFACT_PREFIX SECONDS SEED...
#
# Runs one libFuzzer target of the `fuzz` suite for a bounded time over a fresh
# copy of its seeds (files, or folders of files), so that the inputs it finds
# never land in the source tree. Fails when the target crashes, leaks, trips
# ASan/UBSan, hangs on one input or reports no run count; a crashing input is
# kept at ARTIFACT_PREFIX* and printed in base64 so that a CI log is enough to
# reproduce it. DC_FUZZ_SECONDS overrides SECONDS.
set -u -o pipefail

fuzzer=$1
artifact_prefix=$2
seconds=${DC_FUZZ_SECONDS:-$3}
shift 3

work=$(mktemp -d "${TMPDIR:-/tmp}/dc-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$(dirname "$artifact_prefix")"

n=0
for seed in "$@"; do
  if [ -d "$seed" ]; then
    files=$(find "$seed" -type f | sort)
  elif [ -f "$seed" ]; then
    files=$seed
  else
    echo "run-fuzzer: seed $seed is missing" >&2
    exit 1
  fi
  for f in $files; do
    n=$((n + 1))
    cp "$f" "$work/corpus/$n-$(basename "$f")"
  done
done
echo "run-fuzzer: $(basename "$fuzzer"), $seconds s over $n seed inputs"

# -timeout: one input may take 10 s (ASan, a loaded 2-core machine) before it
# counts as a hang; -rss_limit_mb: 2 GiB before it counts as a memory blow-up.
ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifact_prefix" \
  "$work/corpus" 2>&1 | tee "$work/log"
status=$?

runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$work/log" | tail -n 1)
if [ "$status" -ne 0 ]; then
  for a in $(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/log"); do
    if [ -f "$a" ] && [ "$(stat -c %s "$a")" -le 65536 ]; then
      echo "run-fuzzer: input $a in base64:"
      base64 "$a"
    fi
  done
  echo "run-fuzzer: $(basename "$fuzzer") failed (exit $status)"
  exit 1
fi
if [ -z "$runs" ]; then
  echo "run-fuzzer: $(basename "$fuzzer") reported no run count"
  exit 1
fi
echo "run-fuzzer: $(basename "$fuzzer"): $runs runs in $seconds s," \
  "corpus $n -> $(find "$work/corpus" -type f | wc -l) inputs"
