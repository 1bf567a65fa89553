#!/bin/sh
# device-figures.sh: the H200 host's figures for docs/BENCHMARKS.md in one
# `device` call (the session's device time is short: one cold start, every
# benchmark after it).
#
# Here:   scripts/device-figures.sh pack      (device-bundle.sh into build-devpack/)
# There:  scripts/device-figures.sh run       (carry ["build-devpack"])
#   GL_DEBS: a folder of the Vulkan loader's and GLVND's .deb files (libvulkan1
#   libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2, fetched with
#   `apt-get download` as /work/.library/device/README.md says), unpacked into
#   / first: the image has the NVIDIA ICD but no loader. Carry that folder too.
#   ONLY: a space-separated subset of "train decode group ring gemm" (all).
# Everything goes to $OUT/figures.txt and to standard output.
set -u
cd "$(dirname "$0")/.."

case "${1:-}" in
pack)
  set -e
  ./scripts/device-bundle.sh
  ;;
run)
  out="${OUT:-/tmp}"
  log="$out/figures.txt"
  only="${ONLY:-train decode group ring gemm}"
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
    nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1
    $cli info 2>&1 | head -30
    for what in $only; do
      echo "== $what $(date -u +%H:%M:%S)"
      case "$what" in
      train)
        timeout 150 $cli bench train --json --threads 16 --min-time 2 2>&1 | grep -v DEBUG ;;
      decode)
        for t in 2 16; do
          timeout 60 $cli bench decode --json --threads "$t" --runs 3 2>&1 | grep -v DEBUG
        done ;;
      group)
        timeout 120 $cli bench group --json --devices 1,4 --threads 4 --width 128 --seq 128 \
          --batch 32 --steps 12 2>&1 | grep -v DEBUG ;;
      ring)
        timeout 90 $cli bench ring --json --stages 1,3 --tokens 32 2>&1 | grep -v DEBUG ;;
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
