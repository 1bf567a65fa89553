#!/bin/sh
# bench-kit-node.sh: the kit engine under Node next to `daisychain-cli
# generate`, on the same checkpoints (docs/BENCHMARKS.md, "Inference kit").
#
#   tests/kit/bench-kit-node.sh BUILD_DIR NAME...
#
# For each NAME, NAME.pt is a checkpoint and NAME.blob its kit blob
# (BUILD_DIR/tests/dc-kit-blob-tool NAME.pt NAME.blob). Runs the CLI and the
# engine (WebAssembly SIMD and --no-wasm) N times each, interleaved, T tokens
# from "The " at temperature 0.8, seed 2, and prints tokens per CPU second
# (user + system; the CLI's start-up, a --tokens 0 run, subtracted), best and
# median, and the engine's best wall-clock rate. CPU time, because on a
# loaded machine wall time counts other processes' turns.
#
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu
CLI=$1/src/cli/daisychain-cli
shift
RUNNER=$(dirname "$0")/kit-node.js
N=${N:-5}; T=${T:-600}
for f in "$@"; do
  out=""
  for rep in $(seq $N); do
    a=$( { /usr/bin/time -f "%U %S" $CLI generate --checkpoint $f.pt --prompt "The " --tokens $T --temperature 0.8 --seed 2 >/dev/null; } 2>&1 | tail -1)
    b=$( { /usr/bin/time -f "%U %S" $CLI generate --checkpoint $f.pt --prompt "The " --tokens 0 >/dev/null; } 2>&1 | tail -1)
    n=$(node $RUNNER $f.blob --prompt "The " --tokens $T --temperature 0.8 --seed 2 --bench)
    j=$(node $RUNNER $f.blob --prompt "The " --tokens $T --temperature 0.8 --seed 2 --bench --no-wasm)
    out="$out$a|$b|$n|$j
"
  done
  printf "%s" "$out" | python3 -c "
import sys, json
cli=[]; node=[]; js=[]; nw=[]
for line in sys.stdin:
    a,b,n,j=line.strip().split('|')
    ca=sum(map(float,a.split())); cb=sum(map(float,b.split()))
    cli.append($T/max(0.01,ca-cb)); n=json.loads(n); j=json.loads(j)
    node.append(n['tokens_per_cpu_s']); js.append(j['tokens_per_cpu_s']); nw.append(n['tokens_per_s'])
print('$f', 'cli tok/cpu-s best %.0f median %.0f' % (max(cli), sorted(cli)[len(cli)//2]),
      '| node-wasm best %.0f median %.0f' % (max(node), sorted(node)[len(node)//2]),
      '| node-js best %.0f' % max(js), '| node-wasm wall best %.0f' % max(nw))
"
done
