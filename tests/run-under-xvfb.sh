#!/bin/sh
# Runs a ui test in a private X server and D-Bus session. Without xvfb-run the
# test is reported as skipped (TAP), never silently passed.
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "1..0 # SKIP xvfb-run is not installed (apt-get install xvfb xauth)"
  exit 0
fi
if command -v dbus-run-session >/dev/null 2>&1; then
  exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- "$@"
fi
exec xvfb-run -a -s "-screen 0 1280x800x24" "$@"
