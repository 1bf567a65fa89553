#!/bin/sh
# Installs what is missing, builds, runs every test suite, and ends with the
# plain summary line "meson: N passed, N failed, N skipped", failure or not.
# With arguments (a suite, a test name) they go to `meson test -C build` and
# the fuzz suite is left out; run it alone with
#   scripts/build.sh --fuzz && meson test -C build-fuzz --suite fuzz
set -u
cd "$(dirname "$0")/.." || exit 1

if ! scripts/install-deps.sh; then
  echo "test.sh: installing the system packages failed"
  echo "meson: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
rm -f build/meson-logs/testlog.json build-fuzz/meson-logs/testlog.json
if ! scripts/build.sh; then
  echo "test.sh: the build failed"
  echo "meson: 0 passed, 1 failed, 0 skipped"
  exit 1
fi

# Each test has its own timeout in tests/meson.build; this bounds the whole run.
timeout --kill-after=30 1800 meson test -C build --print-errorlogs --num-processes 2 "$@"
status=$?
logs=build/meson-logs/testlog.json

# The fuzz suite: each libFuzzer target for a bounded time (tests/fuzz). Its
# results join the summary; a failed fuzz build leaves no test log, which the
# summary counts as a failure.
if [ "$#" -eq 0 ]; then
  logs="$logs build-fuzz/meson-logs/testlog.json"
  if scripts/build.sh --fuzz; then
    timeout --kill-after=30 900 meson test -C build-fuzz --suite fuzz --no-rebuild \
      --print-errorlogs --num-processes 2 || status=1
  else
    echo "test.sh: the fuzz build failed"
    status=1
  fi
fi

# shellcheck disable=SC2086
python3 scripts/test-summary.py $logs || status=1
exit $status
