#!/bin/sh
# Configures a build directory once and compiles it. Used by run.sh and test.sh.
#   scripts/build.sh          build/: the program and the test suites
#   scripts/build.sh --fuzz   build-fuzz/: clang with libFuzzer, ASan and UBSan,
#                             the fuzz targets and libdc-core only (tests/fuzz)
set -eu
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--fuzz" ]; then
  if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzzers=true -Dtests=false
  fi
  meson compile -C build-fuzz fuzzers
  exit 0
fi

if [ ! -f build/build.ninja ]; then
  meson setup build
fi
meson compile -C build
