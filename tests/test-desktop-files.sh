#!/bin/sh
# Validates the desktop integration files as distributions and software
# centres will: desktop-file-validate, appstreamcli and the compiled schema.
# Arguments: DESKTOP_FILE METAINFO_FILE SCHEMA_FILE. Prints TAP. A check whose
# tool is not installed is skipped, saying so (a minimal
# SDK, such as a Flatpak build sandbox, may lack desktop-file-utils).
set -u
desktop=$1 metainfo=$2 schema=$3
n=0 failed=0
check () {
  name=$1; shift
  n=$((n + 1))
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "ok $n - $name # SKIP $1 is not installed (scripts/install-deps.sh)"
  elif out=$("$@" 2>&1); then
    echo "ok $n - $name"
  else
    failed=1
    echo "not ok $n - $name"
    printf '%s\n' "$out" | sed 's/^/# /'
  fi
}
echo "1..3"
check "desktop-file-validate" desktop-file-validate "$desktop"
check "appstreamcli validate --no-net" appstreamcli validate --no-net --pedantic "$metainfo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$schema" "$tmp/"
check "glib-compile-schemas --strict" glib-compile-schemas --strict --targetdir "$tmp" "$tmp"
exit $failed
