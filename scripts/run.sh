#!/bin/sh
# Installs what is missing, builds, and starts DaisyChain from the build tree
# on its embedded defaults (built-in corpus, CPU or lavapipe Vulkan).
set -eu
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh

# Uninstalled run: the compiled settings schema lives in the build tree.
export GSETTINGS_SCHEMA_DIR="$PWD/build/data"
exec build/src/daisychain "$@"
