#!/bin/sh
# Installs every system package DaisyChain needs to build, run and test on
# Debian 12 or Ubuntu, and nothing else. Safe to run again: apt skips what is
# already there. Uses sudo when not root.
set -eu

# One package per line, so that changes are easy to review. clang and
# libclang-rt-dev build the fuzz suite: the sanitizer and libFuzzer runtimes
# (libclang-rt-14-dev on Debian 12) are only recommended by clang, and
# recommends are not installed here. nodejs runs the inference kit's engine
# in the kit suite (Debian 12 ships Node 18; the engine is plain ES2020);
# chromium runs the kit's page headless in the kit suite and `bench kit`, and
# firefox-esr runs it in the kit suite's second browser (each case skips
# without its browser).
packages="
meson
ninja-build
pkg-config
gcc
libc6-dev
python3
nodejs
libgtk-4-dev
libadwaita-1-dev
libjson-glib-dev
libsoup-3.0-dev
libgstreamer1.0-dev
libgstreamer-plugins-base1.0-dev
libgstreamer-plugins-bad1.0-dev
gstreamer1.0-plugins-base
gstreamer1.0-plugins-good
gstreamer1.0-plugins-bad
gstreamer1.0-nice
libnice-dev
libvulkan-dev
mesa-vulkan-drivers
glslc
libsnappy-dev
libzstd-dev
nettle-dev
zlib1g-dev
libmpfr-dev
gettext
desktop-file-utils
appstream
xvfb
xauth
dbus
dbus-x11
iproute2
flatpak-builder
python3-torch
libopenblas0-pthread
clang
libclang-rt-dev
chromium
firefox-esr
"

if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1; then
  sudo="sudo"
else
  echo "install-deps: not root and no sudo: install these packages yourself:" >&2
  echo $packages >&2
  exit 1
fi

missing=""
for p in $packages; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "install-deps: every package is already installed"
  exit 0
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
# shellcheck disable=SC2086
$sudo apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 $missing
