#!/bin/sh
# Configures build/ once and compiles it. Used by run.sh and test.sh.
set -eu
cd "$(dirname "$0")/.."

if [ ! -f build/build.ninja ]; then
  meson setup build
fi
meson compile -C build
