#!/bin/sh
# test-engine-vzeroupper.sh: no AVX code calls SSE code with dirty upper halves.
#
# The engine's scalar code is compiled for the baseline x86-64 (SSE); its
# vector paths are AVX2 and AVX-512 functions. When an AVX function calls an
# SSE function while a ymm or zmm register's upper half is dirty (no
# vzeroupper since the last 256- or 512-bit instruction), every SSE
# instruction pays for it on Intel cores, and the AVX function may even
# return with the state still dirty (GCC assumes a callee returns it clean).
# GCC 12 did that in exp_shifted_avx2 (): the ragged ends of the softmax's
# rows cost the H200 host's Xeon about 16 % of a training step (s31,
# docs/BENCHMARKS.md). This disassembles the program and lists such calls,
# in address order within each function (a ymm/zmm instruction makes the
# state dirty, vzeroupper clean). An assembly canary with exactly that
# pattern must be caught first, so the check itself is known to work.
#
# Usage: test-engine-vzeroupper.sh OBJDUMP PROGRAM CANARY_LIBRARY
#
# SPDX-License-Identifier: GPL-3.0-or-later

objdump_tool=$1
program=$2
canary_lib=$3

# Prints "caller -> callee" for each call made with dirty upper halves to a
# function of the same file that has legacy-SSE instructions.
offenders () {
  dis=$(mktemp) || exit 1
  "$objdump_tool" -d --no-show-raw-insn "$1" > "$dis" 2>/dev/null
  awk -F '\t' '
    function mnemonic (text) { sub (/^ +/, "", text); split (text, w, " "); return w[1] }
    FNR == 1 { pass++ }
    /^[0-9a-f]+ <.*>:$/ {
      name = $0; sub (/^[0-9a-f]+ </, "", name); sub (/>:$/, "", name)
      dirty = 0
      next
    }
    NF < 2 { next }
    pass == 1 {
      if (mnemonic($2) ~ /^(movaps|movups|movss|movsd|movapd|movdqa|movdqu|add[sp][sd]|sub[sp][sd]|mul[sp][sd]|div[sp][sd]|sqrt[sp][sd]|u?comis[sd]|cvt[a-z0-9]+|pxor|xorp[sd]|andp[sd]|orp[sd]|padd[bwdq]|pshufd|unpck[lh]p[sd])$/)
        sse[name] = 1
      next
    }
    {
      op = mnemonic($2)
      if (op == "vzeroupper" || op == "vzeroall") { dirty = 0; next }
      if ($2 ~ /%[yz]mm/) dirty = 1
      if (op == "call" && dirty && $2 !~ /@plt>/) {
        callee = $2; sub (/^.*</, "", callee); sub (/>.*$/, "", callee)
        if (callee in sse) print name " -> " callee
      }
    }' "$dis" "$dis" | sort -u
  rm -f "$dis"
}

echo "1..2"

found=$(offenders "$canary_lib")
if [ -n "$found" ]; then
  echo "ok 1 - the check catches the canary's call ($found)"
else
  echo "not ok 1 - the check missed the canary's call with dirty upper halves"
fi

found=$(offenders "$program")
if [ ! -s "$program" ]; then
  echo "not ok 2 - no program at $program"
elif [ -z "$found" ]; then
  echo "ok 2 - no AVX code calls SSE code with dirty upper halves"
else
  echo "not ok 2 - calls into SSE code with dirty upper halves:"
  echo "$found" | sed 's/^/# /'
fi
