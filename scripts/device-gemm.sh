#!/bin/sh
# device-gemm.sh: every Vulkan INT8 GEMM variant at several sizes on the GPU
# machine, in one `device` call (docs/BENCHMARKS.md, "Tensor cores").
#
# Here:   scripts/device-gemm.sh pack
#         (device-bundle.sh, plus test-engine-gemm-vk and its libraries)
# There:  scripts/device-gemm.sh run [VARIANT…]   (carry ["build-devpack"])
#         unpacks the bundle, points the loader at the NVIDIA ICD when the
#         image has no manifest of its own, runs `info`, test-engine-gemm-vk,
#         then `bench gemm --json --paths vulkan --sizes $SIZES` once per
#         variant (DC_GEMM_VK_KERNEL), torch._int_mm with the first variant
#         only. Everything goes to $OUT/gemm-log.txt (one file: a call brings
#         back at most eight).
#         scripts/device-gemm.sh sweep   the tile sweep (docs/BENCHMARKS.md,
#         "Tile sweep"): `bench gemm --kernels` over coop and every `sc…`
#         variant (build-devpack/kernels.txt, written by pack), seven kernels
#         an invocation (each prints its rows: a timeout loses one chunk), at
#         SIZES (default here 2048,4096,8192) and MIN_TIME (default 0.08);
#         torch._int_mm with the first chunk; $OUT/sweep.json and sweep.txt.
# SIZES (default 1024,4096,8192) and MIN_TIME (default 0.5) override. Each
# Vulkan row carries queued_gops (the dispatches queued in one submission,
# one wait: the figure to hold against torch._int_mm), gpu_timestamp_gops,
# fence_wait_ms and fence_poll_ms beside the per-dispatch gops.
# BUNDLE names the bundle (default build-devpack/bundle.tar.xz); GL_DEBS a
# folder of the loader's .deb files (libvulkan1 libegl1 libglvnd0 libopengl0
# libgl1 libglx0 libgles2, fetched as /work/.library/device/README.md says),
# unpacked into / first: without them the NVIDIA ICD finds no loader there.
# A helper's worktree does not travel with a `device` call (the session's
# checkout does): copy the bundle, this script and the .debs into an ignored
# folder of that checkout and carry it, e.g. on 2026-12-01:
#   GL_DEBS=.dc-gpu-gemm/gl BUNDLE=.dc-gpu-gemm/bundle.tar.xz \
#     sh .dc-gpu-gemm/device-gemm.sh run          (carry [".dc-gpu-gemm"], 59 s)
# and on 2026-12-02 (gpu-coop, 60-65 s each): GL_DEBS=.dc-gpu-coop/gl
#   BUNDLE=.dc-gpu-coop/bundle.tar.xz MIN_TIME=0.3 sh .dc-gpu-coop/device-gemm.sh run
set -u
cd "$(dirname "$0")/.."

case "${1:-}" in
pack)
  set -e
  meson compile -C build src/cli/daisychain-cli tests/test-engine-gemm-vk >/dev/null
  ./scripts/device-bundle.sh
  mkdir -p build-device/tests
  cp build/tests/test-engine-gemm-vk build-device/tests/
  ldd build/tests/test-engine-gemm-vk | awk '/=> \// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
      *) [ -e "build-device/lib/$(basename "$lib")" ] || cp -L "$lib" build-device/lib/ ;;
    esac
  done
  strip --strip-unneeded build-device/tests/test-engine-gemm-vk 2>/dev/null || true
  tar -cf - build-device | xz -1 -T2 >build-devpack/bundle.tar.xz
  du -sh build-devpack/bundle.tar.xz
  sed -n 's/.*SC3\{0,1\}2\{0,1\} ("\([^"]*\)".*/\1/p' src/engine/dc-gemm-vk.c |
    paste -sd, >build-devpack/kernels.txt
  ;;
sweep)
  out="${OUT:-/tmp}"
  if [ -n "${GL_DEBS:-}" ]; then
    for f in "$GL_DEBS"/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  kernels_file="$(dirname "${BUNDLE:-build-devpack/bundle.tar.xz}")/kernels.txt"
  tar -xJf "${BUNDLE:-build-devpack/bundle.tar.xz}" || exit 1
  export DC_BENCH_PYTHON=python3
  if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1 &&
     [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  kernels="coop,$(cat "$kernels_file")"
  torch=
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv 2>&1
    n=$(echo "$kernels" | tr , '\n' | wc -l)
    i=1
    while [ "$i" -le "$n" ]; do
      chunk=$(echo "$kernels" | cut -d, -f"$i-$((i + 6))")
      echo "== $chunk"
      timeout 60 build-device/run.sh bench gemm --json --kernels "$chunk" $torch \
        --sizes "${SIZES:-2048,4096,8192}" --min-time "${MIN_TIME:-0.08}" --no-model-shapes \
        >>"$out/sweep.json" 2>"$out/sweep-err.txt"
      echo "rc=$?"
      grep -v DEBUG "$out/sweep-err.txt" | head -20
      torch=--no-torch
      i=$((i + 7))
    done
    date -u
  } >"$out/sweep.txt" 2>&1
  cat "$out/sweep.txt"
  ;;
run)
  shift
  out="${OUT:-/tmp}"
  log="$out/gemm-log.txt"
  sizes="${SIZES:-1024,4096,8192}"
  min_time="${MIN_TIME:-0.5}"
  variants="${*:-coop coop-khr coopk8 coopk8-k128 khr16 khr16-k128 khr16-128x256 khr8-128x256 coopk8-128x256}"
  # The Vulkan loader's and GLVND's packages, where the image lacks them
  # (GL_DEBS: a folder of .deb files; /work/.library/device/README.md).
  if [ -n "${GL_DEBS:-}" ]; then
    for f in "$GL_DEBS"/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  tar -xJf "${BUNDLE:-build-devpack/bundle.tar.xz}" || exit 1
  export DC_BENCH_PYTHON=python3
  if ! ls /usr/share/vulkan/icd.d/nvidia* /etc/vulkan/icd.d/nvidia* >/dev/null 2>&1 &&
     [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
    build-device/run.sh info 2>&1 | head -40
    # The device's features, VK_KHR_cooperative_matrix's shapes among them
    # (coopMatrixKHRShapes: MxNxK:A,B,C,Result component types/scope).
    G_MESSAGES_DEBUG=dc-engine DC_GEMM_VK_KERNEL=tiled timeout 60 build-device/run.sh bench gemm \
      --json --paths vulkan --sizes 128 --min-time 0.05 --no-model-shapes --no-torch 2>&1 |
      grep -m1 "Vulkan GEMM on"
    echo "== test-engine-gemm-vk (preferred variant, gate, broken twins)"
    LD_LIBRARY_PATH="$PWD/build-device/lib" timeout 60 build-device/tests/test-engine-gemm-vk 2>&1
    echo "rc=$?"
    first=1
    for v in $variants; do
      echo "== $v"
      torch=--no-torch
      [ "$first" = 1 ] && torch=
      first=0
      G_MESSAGES_DEBUG=dc-engine DC_GEMM_VK_KERNEL="$v" timeout 60 build-device/run.sh bench gemm \
        --json --paths vulkan --sizes "$sizes" --min-time "$min_time" --no-model-shapes $torch \
        2>&1 | awk '!/DEBUG/ || /GEMM kernel|Vulkan GEMM on/'
    done
    date -u
  } >"$log" 2>&1
  cat "$log"
  ;;
*)
  echo "usage: $0 pack | run [VARIANT…] | sweep" >&2
  exit 2
  ;;
esac
