#!/bin/sh
# Installs what is missing, builds, runs every test suite, and ends with the
# plain summary line "meson: N passed, N failed, N skipped", failure or not.
set -u
cd "$(dirname "$0")/.."

if ! scripts/install-deps.sh; then
  echo "test.sh: installing the system packages failed"
  echo "meson: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
rm -f build/meson-logs/testlog.json
if ! scripts/build.sh; then
  echo "test.sh: the build failed"
  echo "meson: 0 passed, 1 failed, 0 skipped"
  exit 1
fi

# Each test has its own timeout in tests/meson.build; this bounds the whole run.
timeout --kill-after=30 1800 meson test -C build --print-errorlogs --num-processes 2 "$@"
status=$?

python3 scripts/test-summary.py build/meson-logs/testlog.json || status=1
exit $status
