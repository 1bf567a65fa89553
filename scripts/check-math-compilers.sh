#!/bin/sh
# check-math-compilers.sh: the math library gives the same bits whatever the
# compiler, optimization level or instruction set, as long as the numeric
# contract's flags hold; and the hash tests notice when they do not.
#
# Builds src/engine/dc-math*.c with tests/test-engine-math.c under several
# compilers and flag sets and runs the tests that pin exact bits (the scalar
# and vector hashes, the run-time probe hash and the special values). The
# conforming builds must pass; builds that allow FMA contraction or fast math
# must fail them (negative controls). Takes about a minute.
#
# Usage: scripts/check-math-compilers.sh [BUILD_DIR]   (BUILD_DIR has config.h; default build)
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cflags="$(pkg-config --cflags glib-2.0 gio-2.0) -I$build -I$root/src -I$root/src/engine -std=gnu17"
libs="$(pkg-config --libs glib-2.0 gio-2.0) -lmpfr -lgmp -lm"
sources="$root/src/engine/dc-math.c $root/src/engine/dc-math-vector.c $root/src/engine/dc-math-probe.c $root/tests/test-engine-math.c"
tests="-p /dc/engine/math/probe-hash -p /dc/engine/math/hashes -p /dc/engine/math/vector-hash -p /dc/engine/math/special-values"
status=0

# $1: pass or fail (expected), $2: compiler, rest: flags
check () {
  expect=$1; cc=$2; shift 2
  if ! command -v "$cc" >/dev/null 2>&1; then
    echo "skip  $cc $* (not installed)"
    return
  fi
  # shellcheck disable=SC2086
  if ! $cc $cflags "$@" -o "$work/t" $sources $libs 2>"$work/log"; then
    echo "FAIL  $cc $*: does not build"; sed 's/^/      /' "$work/log" | head -5
    status=1
    return
  fi
  # shellcheck disable=SC2086
  if "$work/t" $tests >"$work/out" 2>&1; then got=pass; else got=fail; fi
  if [ "$got" = "$expect" ]; then
    echo "ok    $cc $*: $got, as expected"
  else
    echo "FAIL  $cc $*: $got, expected $expect"
    grep -E 'ERROR|not ok' "$work/out" | head -3 | sed 's/^/      /'
    status=1
  fi
}

contract="-ffp-contract=off -fno-fast-math"
check pass gcc -O0 $contract
check pass gcc -O2 $contract
check pass gcc -O3 -march=native $contract
check pass gcc -O2 -mfma -mavx2 $contract
check pass clang -O2 $contract
check pass clang -O3 -march=native $contract
# Negative controls: the hashes must catch a broken contract.
check fail gcc -O2 -mfma -ffp-contract=fast
check fail clang -O2 -mfma -ffp-contract=on
check fail gcc -O2 -ffast-math
exit $status
