#!/bin/sh
# device-figures.sh: the H200 host's figures for docs/BENCHMARKS.md in one
# `device` call (the session's device time is short: one cold start, every
# benchmark after it).
#
# Here:   scripts/device-figures.sh pack      (device-bundle.sh into build-devpack/,
#                                               and the loader's .debs into build-devpack/gl)
# There:  scripts/device-figures.sh run       (carry ["build-devpack"]: about 23 MB)
#   GL_DEBS: a folder of the Vulkan loader's and GLVND's .deb files (libvulkan1
#   libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2), unpacked into /
#   first: the image has the NVIDIA ICD but no loader. Default: build-devpack/gl,
#   which `pack` fills with `apt-get download` (the device has no network).
#   ONLY: a space-separated subset of
#   "warmup train cpu clitrain decode group groupcpu groupnet grouplong ring ringnet gemm vktests"
#   (all: about 11 minutes after the start), or groupcrawl, only when named (about 5 minutes:
#   the crawl with idle credits on and off, s21), or grouprenew, only when named (about 6
#   minutes: s22's shaped runs with the devices' debug lines, each run's largest wait and the
#   closes; CRAWL_ROUNDS runs, 11 by default), or direct, only when named (about 7 minutes
#   at DIRECT_ROUNDS=2: s23's receiving without webrtcbin's thread against
#   DC_PEER_DIRECT_RECEIVE=0, alternating, on bench channel, ring and group;
#   DIRECT_VAR=DC_PEER_DIRECT_SEND for the sending side, DIRECT_ITEMS for a subset), or
#   groupscale, only when named (about 8 minutes at SCALE_ROUNDS=2: issue 11's loopback
#   0.8 x N over 128 steps beside four lone processes, the direct send on and off);
#   groupab, only when named (about 100 s a variant: GROUPAB="default pin renice:N VAR=VALUE…",
#   the same figure under each; renice:N: the group's transport threads at nice N;
#   GROUPAB_DEVICES, default 1,4, and GROUPAB_THREADS, default 4: the group sizes and a
#   device's threads; one device alone before and after the groups, --solo-after); grouptrace, only when named (about 40 s a round: the
#   loopback step's exchange traced, TRACE_ROUNDS, TRACE_STEPS, TRACE_ENV); seeds, only when
#   named (about 40 s a round at the issue's size: one device's rate on each seed's run, four
#   lone processes of 4 threads at once on cores of their own, the seeds turned round the core
#   groups each round; SEEDS, default 1,2,3,4, SEED_STEPS 201, SEED_ROUNDS 2; s28); tiny, only
#   when named (seeds' job twice, as is and with DC_MATH_TINY_PRODUCTS=plain; s29). Each issue's goal figure is one item. warmup: the GPU's
#   first work of a call runs slow while its clocks rise; vktests: the resident
#   kernels' exactness cases of test-model-gpt-vk-step on the NVIDIA driver
#   (pack strips and packs the test binary into build-devpack).
# Everything goes to $OUT/figures.txt and to standard output.
set -u
cd "$(dirname "$0")/.."

case "${1:-}" in
pack)
  set -e
  ./scripts/device-bundle.sh
  meson compile -C build tests/test-model-gpt-vk-step >/dev/null
  strip --strip-unneeded -o build-devpack/test-model-gpt-vk-step build/tests/test-model-gpt-vk-step
  xz -9 -f build-devpack/test-model-gpt-vk-step
  rm -rf build-devpack/gl
  mkdir -p build-devpack/gl
  # apt-get download writes into the current folder.
  if ! (cd build-devpack/gl && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 \
          libglx0 libgles2 >/dev/null); then
    echo "device-figures.sh: could not download the Vulkan loader's packages (apt-get update" \
         "first?): the device run will find no Vulkan" >&2
    exit 1
  fi
  du -sh build-devpack
  ;;
run)
  out="${OUT:-/tmp}"
  log="$out/figures.txt"
  only="${ONLY:-warmup train cpu clitrain decode group groupcpu groupnet grouplong ring ringnet gemm vktests}"
  if [ -z "${GL_DEBS:-}" ] && [ -d build-devpack/gl ]; then
    GL_DEBS=build-devpack/gl
  fi
  if [ -n "${GL_DEBS:-}" ]; then
    for f in "$GL_DEBS"/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  tar -xJf build-devpack/bundle.tar.xz || exit 1
  export DC_BENCH_PYTHON=python3
  if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1 &&
     [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  cli=build-device/run.sh
  {
    date -u
    nproc
    lscpu 2>&1 | grep -E '^(Model name|Thread|Core|Socket|NUMA node\(s\)|L3)'
    nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1
    $cli info 2>&1 | head -30
    for what in $only; do
      echo "== $what $(date -u +%H:%M:%S)"
      case "$what" in
      warmup)
        timeout 40 $cli bench train --json --threads 16 --min-time 0.5 --backends vulkan \
          --no-torch --sizes w128 >/dev/null 2>&1 ;;
      train)
        # Issue 15: the resident Vulkan step against PyTorch CUDA, both sizes.
        timeout 90 $cli bench train --json --threads 16 --min-time 1.5 --backends vulkan \
          --sizes w128,gpt2-small 2>&1 | grep -v DEBUG ;;
      cpu)
        # Issue 14: 16 threads against PyTorch CPU at width 128.
        timeout 90 $cli bench train --json --no-vulkan --threads 16 --min-time 1.5 --rounds 3 \
          --sizes w128 2>&1 | grep -v DEBUG ;;
      clitrain)
        # Issue 15 item 1: the CLI's own train at GPT-2-small on the GPU (state and
        # hashes on the device: its `done` line's `resident` counters), against the
        # train item's Vulkan figure. Batch 2: at batch 8 the pass's activations
        # (8 GB) exceed one 4 GiB storage binding, so only the Adam step is resident
        # ("Resident forward and backward passes not used: …", 2,400 tokens/s).
        timeout 120 $cli train --json --backend vulkan --advanced --width 768 --layers 12 \
          --heads 12 --seq 1024 --batch 2 --steps 100 --stop-at 6 --threads 16 2>&1 |
          grep -v DEBUG ;;
      decode)
        # Issue 16's lever: the one-row products' share a thread (256 was the old one).
        for k in 256 64; do
          for t in 16 5; do
            DC_GEMM_SKINNY_KIB=$k timeout 60 $cli bench decode --json --threads "$t" --runs 3 \
              --no-torch 2>&1 | grep -v DEBUG
          done
        done ;;
      group)
        # Issue 11: four devices of 4 threads, then the A/B of the streamed reduce
        # without audits (their seeded draw out of it): summed whole
        # (DC_TRAIN_GROUP_STREAM=0), streamed, and streamed holding a reducer's chunks
        # back from a peer until its contribution to that peer is queued (hold).
        timeout 150 $cli bench group --json --devices 1,4 --threads 4 --width 128 --seq 128 \
          --batch 32 --steps 32 --gradient-wire bf16 --concurrent-solo 2>&1 | grep -v DEBUG
        for s in 0 1 hold; do
          pkill -f daisychain-cli 2>/dev/null; sleep 1
          DC_TRAIN_GROUP_STREAM=$s DC_TRAIN_GROUP_AUDIT_PERIOD=0 timeout 90 $cli bench group \
            --json --devices 4 --threads 4 --width 128 --seq 128 --batch 32 --steps 24 \
            --gradient-wire bf16 2>&1 | grep -v DEBUG
        done ;;
      groupscale)
        # Issue 11's 0.8 x N on loopback over 128 steps (one step in 32 audited: a 32-step
        # run met 0-5 audits, s23), beside four lone processes at once (the host's own
        # ceiling), with the direct send on and off (DC_PEER_DIRECT_SEND), alternating.
        for i in $(seq 1 "${SCALE_ROUNDS:-2}"); do
          for d in 1 0; do
            echo "-- DC_PEER_DIRECT_SEND=$d, round $i"
            pkill -f daisychain-cli 2>/dev/null; sleep 1
            DC_PEER_DIRECT_SEND=$d timeout 240 $cli bench group --json --devices 1,4 \
              --threads 4 --width 128 --seq 128 --batch 32 --steps 128 --gradient-wire int8 \
              --concurrent-solo 2>&1 | grep -v DEBUG
          done
        done ;;
      groupab)
        # Issue 11's loopback 0.8 x N under variants, one 128-step run each, in the
        # order given: GROUPAB="default pin DC_PARALLEL_SPIN_US=0 ..." (default: as is;
        # pin: --pin-cores, every device and the solos on cores of their own; else
        # VAR=VALUE[,VAR=VALUE] in the environment of the whole run, solos included).
        for v in ${GROUPAB:-default pin}; do
          echo "-- variant $v"
          pkill -f daisychain-cli 2>/dev/null; sleep 1
          flags=""; envs=""
          case "$v" in
          default) ;;
          pin) flags="--pin-cores" ;;
          renice:*)
            # The group's transport threads at a weaker priority than its gradient's
            # (tools/group-trace/renice-transport.py; the lone processes untouched).
            rm -f /tmp/dc-renice-stop
            python3 tools/group-trace/renice-transport.py /tmp/dc-renice-stop "${v#renice:}" &
            ;;
          *) envs=$(echo "$v" | tr ',' ' ') ;;
          esac
          env $envs timeout "${GROUPAB_TIMEOUT:-240}" $cli bench group --json \
            --devices "${GROUPAB_DEVICES:-1,4}" --threads "${GROUPAB_THREADS:-4}" --width 128 \
            --seq 128 --batch 32 --steps 128 --gradient-wire int8 --concurrent-solo --solo-after \
            $flags 2>&1 |
            grep -v DEBUG
          touch /tmp/dc-renice-stop; wait
        done 2>&1 | tee /tmp/dc-groupab.txt
        # One line a run: the scalings, the critical path, the CPU a step.
        python3 tools/group-trace/group-summary.py /tmp/dc-groupab.txt ;;
      seeds)
        # How much a run's own weights and batches move one device's rate at
        # the issue's size (s28: up to 6-8 % between seeds on the VM, from
        # subnormal attention probabilities): a group trains other batches on
        # every rank, and before 24b6b5f another run than its lone reference.
        pkill -f daisychain-cli 2>/dev/null; sleep 1
        python3 tools/group-trace/seed-rates.py "$cli" "${SEEDS:-1,2,3,4}" 4 \
          "${SEED_STEPS:-201}" "${SEED_ROUNDS:-2}" --width 128 --seq 128 --batch 32 ;;
      tiny)
        # The tiny attention values' exact products against the plain
        # multiplies (s29: equally fast on the AMD VM; Intel takes an assist
        # for a multiply that reads or makes a subnormal): seeds' job as is,
        # then with DC_MATH_TINY_PRODUCTS=plain (the same bits).
        for mode in exact plain; do
          echo "-- DC_MATH_TINY_PRODUCTS=$mode"
          pkill -f daisychain-cli 2>/dev/null; sleep 1
          DC_MATH_TINY_PRODUCTS=$mode python3 tools/group-trace/seed-rates.py "$cli" \
            "${SEEDS:-1,2,3,4}" 4 "${SEED_STEPS:-201}" "${SEED_ROUNDS:-2}" \
            --width 128 --seq 128 --batch 32
        done ;;
      grouptrace)
        # Issue 11's loopback step taken apart: four devices as in groupab, the
        # exchange traced (DC_TRAIN_GROUP_TRACE) and read by group-trace.py: each
        # device's gradient against the others', the hops after the slowest one,
        # the step's critical path (with and without an audit). TRACE_ROUNDS runs
        # (2), TRACE_ENV (default: audits off) for all of them; the traces and the
        # devices' logs come back as $OUT/grouptrace.tar.gz.
        for i in $(seq 1 "${TRACE_ROUNDS:-2}"); do
          echo "-- trace round $i (${TRACE_ENV:-DC_TRAIN_GROUP_AUDIT_PERIOD=0})"
          pkill -f daisychain-cli 2>/dev/null; sleep 1
          mkdir -p "$out/logs/$i"
          env ${TRACE_ENV:-DC_TRAIN_GROUP_AUDIT_PERIOD=0} DC_TRAIN_GROUP_TRACE="$out/trace/$i" \
            DC_BENCH_GROUP_LOGS="$out/logs/$i" timeout 150 $cli bench group --json --devices 4 \
            --threads 4 --width 128 --seq 128 --batch 32 --steps "${TRACE_STEPS:-64}" \
            --gradient-wire int8 2>&1 | grep -v DEBUG
          python3 tools/group-trace/group-trace.py "$out/trace/$i" "$out/logs/$i"
        done
        # One file back (a call returns a limited count of files).
        tar -czf "$out/grouptrace.tar.gz" -C "$out" trace logs && rm -rf "$out/trace" "$out/logs" ;;
      groupcpu)
        # Issue 11: where four devices' CPU goes, by thread class (the group's
        # compute runs slower than four lone processes'): the GEMM's helpers,
        # GLib's task threads, webrtcbin's threads, the main thread.
        pkill -f daisychain-cli 2>/dev/null; sleep 1
        stop=/tmp/dc-thread-cpu-stop; rm -f "$stop"
        tools/group-trace/thread-cpu.sh "$stop" > /tmp/dc-thread-cpu.txt &
        # CPU_WIRE=int8 CPU_STEPS=64 for the default wire of s20 on (bf16 and 24 before).
        DC_TRAIN_GROUP_AUDIT_PERIOD=0 timeout 150 $cli bench group --json --devices 4 \
          --threads 4 --width 128 --seq 128 --batch 32 --steps "${CPU_STEPS:-24}" \
          --gradient-wire "${CPU_WIRE:-bf16}" 2>&1 | grep -v DEBUG
        touch "$stop"; wait; cat /tmp/dc-thread-cpu.txt ;;
      ring)
        # Issue 16: one device against three stages on loopback.
        XDG_CACHE_HOME=/dev/shm/cache timeout 120 $cli bench ring --json --stages 1,3 \
          --rounds 5 --tokens 24 2>&1 | grep -v DEBUG ;;
      vktests)
        # The resident kernels' exactness on this driver: the CPU's hashes and
        # gradients, every gate's broken twin refused (docs/TEST_RESULTS.md).
        if [ -e build-devpack/test-model-gpt-vk-step.xz ]; then
          python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
            build-devpack/test-model-gpt-vk-step.xz /tmp/test-model-gpt-vk-step &&
          chmod +x /tmp/test-model-gpt-vk-step
          t=/dc/model/gpt-vk-step
          DC_SOURCE_ROOT=$PWD LD_LIBRARY_PATH=build-device/lib timeout 150 \
            /tmp/test-model-gpt-vk-step -p $t/f32-ops -p $t/native/f32-ops -p $t/gates-refuse-broken \
            -p $t/hashes/w128 -p $t/gradients/w128 -p $t/hashes/advanced-w768 \
            -p $t/coop/selection -p $t/coop/twin-refused -p $t/rows/twins-refused \
            -p $t/fuse/twin-refused -p $t/chains/twin-refused -p $t/softmax 2>&1 |
            grep -E '^(ok|not ok|# Skip|Bail)'
        fi ;;
      groupnet)
        # Issue 11 on the shaped network (1 Gbit/s, 1 ms: netem, or the delay hub),
        # with the int8 wire (its goal figure since s20) and bf16 beside it.
        # slow_send_ms above 0 says the run met usrsctp's crawl (a third of
        # 16-step runs do: docs/BENCHMARKS.md, s18).
        for wire in int8 bf16; do
          timeout 120 $cli bench group --json --netns --devices 4 --threads 4 --width 128 \
            --seq 128 --batch 32 --steps 16 --gradient-wire $wire 2>&1 | grep -v DEBUG
        done ;;
      grouplong)
        # The same over 64 steps: what a user's longer run meets (every one
        # of s18's crawled).
        timeout 240 $cli bench group --json --netns --devices 4 --threads 4 --width 128 \
          --seq 128 --batch 32 --steps 64 --gradient-wire int8 2>&1 | grep -v DEBUG ;;
      groupcrawl)
        # The crawl and idle credits (s21): 64-step shaped int8 runs,
        # alternating idle credits on (the default) and off, the devices'
        # step lines kept in $OUT/groupcrawl/NAME; then the steps that waited
        # over 90 ms with no slow sending near them (a crawl nobody saw).
        for i in $(seq 1 "${CRAWL_ROUNDS:-4}"); do
          for idle in 1 0; do
            mkdir -p "$out/groupcrawl/idle$idle-$i"
            DC_PEER_IDLE_CREDIT=$idle DC_BENCH_GROUP_LOGS="$out/groupcrawl/idle$idle-$i" \
              timeout 120 $cli bench group --json --netns --devices 4 --threads 4 --width 128 \
              --seq 128 --batch 32 --steps 64 --gradient-wire int8 2>&1 | grep -v DEBUG
          done
        done
        python3 tools/group-trace/group-steps.py "$out/groupcrawl" ;;
      grouprenew)
        # Renewals without one-second steps (s22): 64-step shaped int8 runs
        # with the devices' main-loop stalls and closes in their logs
        # ($OUT/grouprenew/runN/device-N.txt); each run's largest device wait,
        # and how many closes went unanswered for a second (the mesh retires
        # connections in the background: none should hold a step).
        for i in $(seq 1 "${CRAWL_ROUNDS:-11}"); do
          mkdir -p "$out/grouprenew/run$i"
          G_MESSAGES_DEBUG=dc-train,dc-mesh DC_BENCH_GROUP_LOGS="$out/grouprenew/run$i" \
            timeout 120 $cli bench group --json --netns --devices 4 --threads 4 --width 128 \
            --seq 128 --batch 32 --steps 64 --gradient-wire int8 2>&1 | grep -v DEBUG
        done
        python3 tools/group-trace/group-steps.py "$out/grouprenew" | grep "largest"
        echo "closes unanswered for a second: $(cat "$out"/grouprenew/*/device-*.txt | grep -c 'did not close')"
        echo "main-loop stalls (ms): $(cat "$out"/grouprenew/*/device-*.txt | grep -o 'stalled for [0-9]*' | awk '{print $3}' | sort -n | tail -5 | tr '\n' ' ')" ;;
      direct)
        # Taking messages without GStreamer's hand-off threads (s23), on against off,
        # alternating: DIRECT_VAR names the switch (DC_PEER_DIRECT_RECEIVE by default,
        # or DC_PEER_DIRECT_SEND); DIRECT_ITEMS a subset of "channel ring group": a data
        # channel's round trips, issue 16's ring on loopback, issue 11's four devices on
        # loopback (int8, audits as by default).
        var="${DIRECT_VAR:-DC_PEER_DIRECT_RECEIVE}"
        items="${DIRECT_ITEMS:-channel ring group}"
        for i in $(seq 1 "${DIRECT_ROUNDS:-2}"); do
          for d in 1 0; do
            echo "-- $var=$d, round $i"
            case " $items " in *" channel "*)
              env "$var=$d" timeout 60 $cli bench channel --json --total-mib 16 \
                --pings 3000 2>&1 | grep -v DEBUG ;; esac
            case " $items " in *" ring "*)
              env "$var=$d" XDG_CACHE_HOME=/dev/shm/cache timeout 120 $cli bench ring \
                --json --stages 1,3 --rounds 5 --tokens 24 2>&1 | grep -v DEBUG ;; esac
            case " $items " in *" group "*)
              pkill -f daisychain-cli 2>/dev/null; sleep 1
              env "$var=$d" timeout 120 $cli bench group --json --devices 1,4 \
                --threads 4 --width 128 --seq 128 --batch 32 --steps 32 --gradient-wire int8 \
                2>&1 | grep -v DEBUG ;; esac
          done
        done ;;
      ringnet)
        # Issue 16 on the shaped network: decode within 2 ms of the hops' round trips.
        XDG_CACHE_HOME=/dev/shm/cache timeout 120 $cli bench ring --json --netns \
          --stages 1,3 --rounds 3 --tokens 24 2>&1 | grep -v DEBUG ;;
      gemm)
        timeout 60 $cli bench gemm --json --paths vulkan --sizes 1024,4096 --min-time 0.5 \
          --no-model-shapes 2>&1 | grep -v DEBUG ;;
      esac
    done
    date -u
  } 2>&1 | tee "$log"
  ;;
*)
  echo "usage: $0 pack | run" >&2
  exit 2
  ;;
esac
