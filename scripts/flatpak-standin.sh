#!/bin/sh
# Builds and runs the Flatpak against a stand-in for the GNOME runtime, on a
# Debian 12 machine that cannot download org.gnome.Platform (docs/INSTALL.md,
# "The stand-in runtime"). An optional check, outside CI; needs root (chroot,
# debootstrap, network namespaces), about 4 GB of disk and the Debian mirror.
#
#   scripts/flatpak-standin.sh [STAGE…]
#
# Stages, in order (default: all; each can be run again on its own):
#   rootfs    debootstrap a minimal bookworm folder and install the SDK packages
#   runtime   export it as org.daisychain.Standin.{Platform,Sdk}//bookworm
#   manifest  generate the stand-in manifest from flatpak/ (runtime lines and
#             the sources that need the internet swapped, nothing else)
#   build     flatpak-builder: the module list, then the test suites named in
#             the manifest's test-commands, inside the build sandbox
#   suites    the other suites (DC_STANDIN_SUITES) in the same sandbox, on the
#             app module's kept build folder: a line per suite in
#             $WORK/suites.txt, the logs beside it
#   window    `flatpak run` under Xvfb, screenshot to $WORK/window.png
#   discovery two namespaces joined by a veth pair: the sandboxed app and one
#             outside find each other by multicast and connect, both ways
#   clean     remove $WORK (keeps nothing)
#
# The stages after runtime reuse the exported runtime: once built (rootfs
# 41 min, runtime 5 min on a loaded 2-core machine), `scripts/flatpak-standin.sh
# manifest build suites window discovery` takes minutes. The default $WORK,
# /var/tmp/dc-flatpak-standin, survives reboots; the next session on the
# same machine finds it there.
#
# Environment:
#   DC_STANDIN_WORK     work folder (default /var/tmp/dc-flatpak-standin)
#   DC_STANDIN_MANIFEST manifest in flatpak/ (default the .Devel one)
#   DC_STANDIN_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#   DC_STANDIN_GIT      space-separated URL=PATH pairs: a local git mirror for
#                       a git source's URL (the same pinned commit is built),
#                       or for the repository of a GitHub tag tarball
#                       (https://github.com/O/R.git=PATH: the tarball is made
#                       from it as GitHub makes it; the pinned sha256 is
#                       checked), as for snappy
#   DC_STANDIN_URLS     space-separated URL=URL pairs: where an archive can be
#                       fetched here (the pinned sha256 is still checked);
#                       default: MPFR's tarball from Debian's pool, the same file
#                       A source with neither is left as it is: flatpak-builder
#                       downloads it (where there is internet) or stops
#   DC_STANDIN_JOBS     flatpak-builder --jobs (default: the CPU count)
#   DC_STANDIN_BUILDER_ARGS  more flatpak-builder options (--disable-tests
#                       installs the app even when a test fails)
#   DC_STANDIN_SUITES   the suites of the suites stage (default: ui gpu net;
#                       core runs in the build stage; kit needs a browser
#                       that the runtime does not have)
#   DC_STANDIN_CLI      a daisychain-cli built outside the sandbox, for the
#                       discovery check (default build/src/cli/daisychain-cli;
#                       without one, two sandboxed instances are used)
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${DC_STANDIN_WORK:-/var/tmp/dc-flatpak-standin}
manifest=${DC_STANDIN_MANIFEST:-$repo/flatpak/io.github.daisychain.DaisyChain.Devel.json}
mirror=${DC_STANDIN_MIRROR:-http://deb.debian.org/debian}
# Debian's orig tarball of MPFR 4.2.0 is upstream's file (the sha256 in
# Debian's mpfr4_4.2.0-1.dsc is the one the manifest pins).
export DC_STANDIN_URLS="${DC_STANDIN_URLS:-https://ftp.gnu.org/gnu/mpfr/mpfr-4.2.0.tar.xz=$mirror/pool/main/m/mpfr4/mpfr4_4.2.0.orig.tar.xz}"
branch=bookworm
standin_platform=org.daisychain.Standin.Platform
standin_sdk=org.daisychain.Standin.Sdk
rootfs=$work/rootfs
# A private installation: nothing is added to the machine's own.
export FLATPAK_USER_DIR="$work/flatpak-user"

# What the stand-in runtime holds: the parts of the GNOME runtime and SDK the
# app uses (docs/INSTALL.md lists the evidence for each), taken from Debian 12.
# Left out on purpose, because the GNOME SDK lacks them and the manifest must
# provide or avoid them: snappy and MPFR's headers (modules) and glslc (the
# build falls back to glslangValidator, which the SDK has). librsvg2-common:
# appstream-compose loads the SVG icon through gdk-pixbuf, as in the GNOME
# SDK (without it: "Failed to load icon"). Xvfb, xauth and mesa-vulkan-drivers are
# extra, so that the ui and gpu suites can run in the build sandbox here.
sdk_packages="
meson ninja-build pkg-config cmake gcc g++ libc6-dev python3 git
libglib2.0-dev libgtk-4-dev libadwaita-1-dev libjson-glib-dev libsoup-3.0-dev
libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
gstreamer1.0-nice libnice-dev libssl-dev
libvulkan-dev mesa-vulkan-drivers glslang-tools
libzstd-dev nettle-dev zlib1g-dev libgmp-dev
gettext desktop-file-utils appstream appstream-util librsvg2-common
xvfb xauth dbus iproute2 ca-certificates
"

log () { printf '== %s: %s\n' "$(date +%H:%M:%S)" "$*"; }
die () { printf 'flatpak-standin: %s\n' "$*" >&2; exit 1; }

need () {
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "“$tool” is not installed (apt-get install debootstrap flatpak flatpak-builder elfutils xvfb xauth imagemagick iproute2)"
  done
}

stage_rootfs () {
  need debootstrap chroot
  [ "$(id -u)" -eq 0 ] || die "the rootfs stage needs root (debootstrap, chroot)"
  if [ -e "$rootfs/.dc-done" ]; then log "rootfs: already built"; return; fi
  if [ ! -e "$rootfs/.dc-debootstrap" ]; then
    rm -rf "$rootfs"
    mkdir -p "$work/debs"
    log "rootfs: debootstrap --variant=minbase $branch"
    debootstrap --variant=minbase --cache-dir="$work/debs" "$branch" "$rootfs" "$mirror"
    touch "$rootfs/.dc-debootstrap"
  fi
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  # The machine's package cache, when there is one, saves the downloads.
  if [ -d /var/cache/apt/archives ]; then
    cp -n /var/cache/apt/archives/*.deb "$rootfs/var/cache/apt/archives/" 2>/dev/null || true
  fi
  log "rootfs: installing the SDK packages"
  mount -t proc proc "$rootfs/proc"
  # shellcheck disable=SC2086
  if ! chroot "$rootfs" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends $(echo $sdk_packages)"; then
    umount "$rootfs/proc"
    die "installing the SDK packages in $rootfs failed"
  fi
  umount "$rootfs/proc"
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
  touch "$rootfs/.dc-done"
}

# A Flatpak runtime is `metadata` and a tree the sandbox mounts on /usr (its
# etc/ becomes /etc); `build-export --runtime` takes that tree from usr/.
# Debian 12 is merged-/usr, so /usr holds everything but /etc. Platform and Sdk are the same tree here
# (the Sdk's headers and tools are in the Platform too; ostree stores the
# files once).
stage_runtime () {
  need flatpak ostree
  [ -e "$rootfs/.dc-done" ] || die "no rootfs: run the rootfs stage first"
  rm -rf "$work/runtime"
  # An uncompressed repository: build-export's default (archive-z2) spent
  # 25 of its 26 minutes compressing 2.1 GB that is only ever read here.
  if [ ! -d "$work/repo/objects" ]; then
    rm -rf "$work/repo"
    ostree init --mode=bare-user-only --repo="$work/repo"
  fi
  # An empty files/ too: flatpak 1.14's build-export insists on it even with
  # --runtime ("not initialized, use flatpak build-init").
  mkdir -p "$work/runtime/usr" "$work/runtime/files"
  log "runtime: copying /usr and /etc"
  cp -al "$rootfs/usr/." "$work/runtime/usr/"
  cp -al "$rootfs/etc" "$work/runtime/usr/etc"
  # flatpak-builder sets LC_ALL=en_US.utf8 for builds and their tests (its
  # manifest documentation); the GNOME SDK has that locale, minbase only
  # C.utf8, which is what en_US.utf8 becomes here (as flatpak-builder's own
  # tests/make-test-runtime.sh does): without it the build's tests ran in
  # the C locale's ASCII.
  if [ -d "$work/runtime/usr/lib/locale/C.utf8" ] && [ ! -e "$work/runtime/usr/lib/locale/en_US.utf8" ]; then
    cp -r "$work/runtime/usr/lib/locale/C.utf8" "$work/runtime/usr/lib/locale/en_US.utf8"
  fi
  # flatpak provides these from the host or itself.
  rm -f "$work/runtime/usr/etc/resolv.conf" "$work/runtime/usr/etc/hostname" \
    "$work/runtime/usr/etc/machine-id"
  # What freedesktop-sdk's SDK gives flatpak-builder (its
  # integration/flatpak-builder-configuration.bst): -L/app/lib and no
  # -I/app/include, so the manifest must add that itself, as it must there.
  mkdir -p "$work/runtime/usr/etc/flatpak-builder"
  cat > "$work/runtime/usr/etc/flatpak-builder/defaults.json" <<EOF
{ "libdir": "/usr/lib/x86_64-linux-gnu", "cflags": "-O2 -g", "cxxflags": "-O2 -g",
  "cppflags": "", "ldflags": "-L/app/lib" }
EOF
  for id in $standin_platform $standin_sdk; do
    cat > "$work/runtime/metadata" <<EOF
[Runtime]
name=$id
runtime=$standin_platform/x86_64/$branch
sdk=$standin_sdk/x86_64/$branch
EOF
    log "runtime: exporting $id//$branch"
    flatpak build-export --runtime --subject="DaisyChain stand-in runtime (Debian 12)" \
      "$work/repo" "$work/runtime" "$branch"
  done
  rm -rf "$work/runtime"
  flatpak --user remote-add --if-not-exists --no-gpg-verify standin "$work/repo"
  flatpak --user install -y --noninteractive --or-update standin \
    "$standin_platform//$branch" "$standin_sdk//$branch"
}

# The stand-in manifest is generated from the real one, never kept by hand:
# only the runtime lines and the sources that need the internet change.
stage_manifest () {
  need python3
  mkdir -p "$work/sources"
  python3 - "$manifest" "$work/standin.json" "$repo" "$work/sources" \
    "$standin_platform" "$standin_sdk" "$branch" "$mirror" <<'EOF'
import json, os, re, subprocess, sys
src, dst, repo, sources, platform, sdk, branch, mirror = sys.argv[1:]
with open(src, encoding='utf-8') as f:
    m = json.load(f)
m['runtime'], m['sdk'], m['runtime-version'] = platform, sdk, branch
# A stand-in SDK exported before appstream-util was in its package list has
# no appstream-compose, which flatpak-builder runs at the end.
sdk_bin = os.path.join(os.environ['FLATPAK_USER_DIR'], 'runtime', sdk, 'x86_64', branch,
                       'active', 'files', 'bin')
# One exported before librsvg2-common was has no SVG loader for gdk-pixbuf,
# and appstream-compose stops at the icon ("Failed to load icon"), after
# the tests and before the app is installed.
svg_loader = os.path.join(os.path.dirname(sdk_bin), 'lib', 'x86_64-linux-gnu', 'gdk-pixbuf-2.0',
                          '2.10.0', 'loaders', 'libpixbufloader-svg.so')
if os.path.isdir(sdk_bin) and not os.path.exists(os.path.join(sdk_bin, 'appstream-compose')):
    m['appstream-compose'] = False
    print('flatpak-standin: the stand-in SDK has no appstream-compose: skipped', file=sys.stderr)
elif os.path.isdir(sdk_bin) and not os.path.exists(svg_loader):
    m['appstream-compose'] = False
    print('flatpak-standin: the stand-in SDK has no SVG loader for gdk-pixbuf (librsvg2-common:'
          ' run the rootfs and runtime stages again): appstream-compose skipped', file=sys.stderr)
git = dict(pair.split('=', 1) for pair in os.environ.get('DC_STANDIN_GIT', '').split())
urls = dict(pair.split('=', 1) for pair in os.environ.get('DC_STANDIN_URLS', '').split())
github_tag = re.compile(r'^(https://github\.com/[^/]+/([^/]+))/archive/refs/tags/([^/]+)\.tar\.gz$')

def github_tarball(module, url):
    """A GitHub tag tarball made here from a local mirror of its repository,
    as a file:// URL, or None. GitHub makes them as `git archive --format=tar
    --prefix=REPO-TAG/ TAG | gzip -n` does (same bytes: snappy 1.2.2's
    sha256 was checked so); flatpak-builder still checks the pinned sha256."""
    found = github_tag.match(url)
    if not found or found.group(1) + '.git' not in git:
        return None
    mirror_dir, name, tag = git[found.group(1) + '.git'], found.group(2), found.group(3)
    out = os.path.join(sources, '%s-%s.tar.gz' % (name, tag))
    with open(out + '.part', 'wb') as f:
        archive = subprocess.Popen(['git', '-C', mirror_dir, 'archive', '--format=tar',
                                    '--prefix=%s-%s/' % (name, tag), tag],
                                   stdout=subprocess.PIPE)
        subprocess.run(['gzip', '-n'], stdin=archive.stdout, stdout=f, check=True)
        if archive.wait() != 0:
            sys.exit('flatpak-standin: %s: git archive %s in %s failed' % (module, tag, mirror_dir))
    os.replace(out + '.part', out)
    print('flatpak-standin: %s: %s made from the local mirror %s' % (module, url, mirror_dir),
          file=sys.stderr)
    return 'file://' + out

for module in m['modules']:
    new = []
    for s in module.get('sources', []):
        if s.get('type') == 'dir':
            s = dict(s, path=os.path.normpath(os.path.join(repo, 'flatpak', s['path'])))
        elif s.get('type') == 'git' and s['url'] in git:
            s = dict(s, url='file://' + os.path.abspath(git[s['url']]))
        elif s.get('type') in ('archive', 'file') and s.get('url') in urls:
            s = dict(s, url=urls[s['url']])
        elif s.get('type') == 'archive' and (local := github_tarball(module['name'], s['url'])):
            s = dict(s, url=local)
        elif 'url' in s:
            # Left as it is: flatpak-builder fetches it, or says it cannot.
            print('flatpak-standin: %s: no local copy of %s (DC_STANDIN_GIT, DC_STANDIN_URLS):'
                  ' flatpak-builder will download it' % (module['name'], s['url']),
                  file=sys.stderr)
        new.append(s)
    module['sources'] = new
with open(dst, 'w', encoding='utf-8') as f:
    json.dump(m, f, indent=2)
EOF
  log "manifest: $work/standin.json"
}

app_id () {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$manifest"
}

stage_build () {
  need flatpak-builder eu-strip
  [ -e "$work/standin.json" ] || die "no stand-in manifest: run the manifest stage first"
  log "build: flatpak-builder (the modules, then the tests in the sandbox)"
  # --disable-rofiles-fuse: no FUSE in containers; the result is the same.
  # --jobs: flatpak-builder also passes make/ninja -l (twice the jobs), so on
  # a busy machine the default runs one compiler at a time.
  # The stand-in has no locale but C.UTF-8 (flatpak-builder warns about the
  # machine's own when it is another).
  # --keep-build-dirs: the suites stage runs more tests in the app's build folder.
  # shellcheck disable=SC2086
  (cd "$work" && LC_ALL=C.UTF-8 flatpak-builder --user --install --force-clean --disable-rofiles-fuse \
     --keep-build-dirs \
     ${DC_STANDIN_JOBS:+--jobs=$DC_STANDIN_JOBS} ${DC_STANDIN_BUILDER_ARGS:-} \
     --state-dir="$work/builder-state" "$work/app" "$work/standin.json")
  log "build: installed $(app_id)"
}

# The app module's build folder, mounted where flatpak-builder built it
# (/run/build/MODULE, meson's _flatpak_build), in `flatpak build`'s sandbox
# of the finished app on the stand-in SDK: the same paths, libraries and
# permissions as the build's own tests, plus the network.
stage_suites () {
  need flatpak
  module=daisychain
  # build/MODULE-N, N rising with each build; the newest.
  src=$(ls -dv "$work/builder-state/build/$module"-* 2>/dev/null | tail -n 1)
  [ -n "$src" ] && [ -d "$src/_flatpak_build" ] \
    || die "no kept build folder of $module: run the build stage (it keeps it) first"
  : > "$work/suites.txt"
  failed=0
  for suite in ${DC_STANDIN_SUITES:-ui gpu net}; do
    log "suites: meson test --suite $suite in the sandbox"
    rc=0
    LC_ALL=C.UTF-8 flatpak build --die-with-parent --share=network --share=ipc \
      --bind-mount="/run/build/$module=$src" --build-dir="/run/build/$module/_flatpak_build" \
      "$work/app" meson test --no-rebuild --print-errorlogs --suite "$suite" \
      >"$work/suite-$suite.log" 2>&1 || rc=$?
    cp "$src/_flatpak_build/meson-logs/testlog.json" "$work/suite-$suite.json" 2>/dev/null || true
    counts=$(python3 - "$work/suite-$suite.json" <<'PYEOF'
import json, sys
n = {}
try:
    for line in open(sys.argv[1], encoding='utf-8'):
        r = json.loads(line)['result']
        n[r] = n.get(r, 0) + 1
except OSError:
    pass
print(', '.join('%d %s' % (v, k.lower()) for k, v in sorted(n.items())) or 'no tests')
PYEOF
)
    [ $rc -eq 0 ] || failed=1
    log "suites: $suite: exit $rc: $counts"
    echo "$suite: exit $rc: $counts" >> "$work/suites.txt"
  done
  [ $failed -eq 0 ] || log "suites: some failed (logs: $work/suite-*.log)"
}

stage_window () {
  need flatpak xvfb-run import
  id=$(app_id)
  rm -f "$work/window.png"
  log "window: flatpak run $id under Xvfb"
  # Xvfb only: no Wayland socket, so fallback-x11 gives the app the X display.
  xvfb-run -a -s "-screen 0 1280x800x24" sh -c '
    dbus-run-session -- flatpak run --user "$1" >"$2/window.log" 2>&1 &
    app=$!
    i=0
    while [ $i -lt 60 ]; do
      sleep 1; i=$((i + 1))
      if xwininfo -root -tree 2>/dev/null | grep -q "DaisyChain"; then break; fi
    done
    sleep 3
    import -window root "$2/window.png"
    kill $app 2>/dev/null; wait $app 2>/dev/null || true
    [ $i -lt 60 ]' sh "$id" "$work" || die "no DaisyChain window within 60 s (see $work/window.log)"
  log "window: screenshot $work/window.png"
}

# Two namespaces, a veth pair between them (as tests/test-mesh-join.c does):
# discovery multicast stays inside them and never reaches the machine's network.
stage_discovery () {
  need ip flatpak
  id=$(app_id)
  cli=${DC_STANDIN_CLI:-$repo/build/src/cli/daisychain-cli}
  ns=dcfp$$
  cleanup_ns () { ip netns del ${ns}a 2>/dev/null || true; ip netns del ${ns}b 2>/dev/null || true; }
  trap cleanup_ns EXIT
  ip netns add ${ns}a && ip netns add ${ns}b
  ip link add ${ns}va type veth peer name ${ns}vb
  ip link set ${ns}va netns ${ns}a && ip link set ${ns}vb netns ${ns}b
  ip -n ${ns}a addr add 10.231.9.1/24 dev ${ns}va
  ip -n ${ns}b addr add 10.231.9.2/24 dev ${ns}vb
  for side in a b; do
    ip -n $ns$side link set lo up
    ip -n $ns$side link set $ns"v"$side up
    ip -n $ns$side route add default dev $ns"v"$side
  done
  sandboxed="flatpak run --user --command=daisychain-cli $id"
  if [ -x "$cli" ]; then outside=$cli; else outside=$sandboxed; fi
  failed=0
  for order in "sandbox outside" "outside sandbox"; do
    set -- $order
    first=$1 second=$2
    cmd_of () { if [ "$1" = sandbox ]; then echo "$sandboxed"; else echo "$outside"; fi; }
    log "discovery: $first announces in ${ns}a, $second discovers from ${ns}b"
    # shellcheck disable=SC2046
    ip netns exec ${ns}a timeout 40 $(cmd_of $first) join --json --name "$first" \
      --approve all --expect-peers 1 >"$work/disc-$first-a.log" 2>&1 &
    a=$!
    sleep 4
    # shellcheck disable=SC2046
    ip netns exec ${ns}b timeout 30 $(cmd_of $second) join --json --name "$second" \
      --approve all --expect-peers 1 >"$work/disc-$second-b.log" 2>&1 &
    b=$!
    i=0
    while [ $i -lt 30 ]; do
      sleep 1; i=$((i + 1))
      if grep -q '"mesh-complete"' "$work/disc-$first-a.log" \
         && grep -q '"mesh-complete"' "$work/disc-$second-b.log"; then break; fi
    done
    kill $a $b 2>/dev/null || true
    wait $a 2>/dev/null || true; wait $b 2>/dev/null || true
    if grep -q '"discovered"' "$work/disc-$second-b.log" \
       && grep -q '"mesh-complete"' "$work/disc-$first-a.log" \
       && grep -q '"mesh-complete"' "$work/disc-$second-b.log"; then
      log "discovery: ok ($second found $first's group and both connected)"
    else
      failed=1
      log "discovery: FAILED (logs: $work/disc-$first-a.log, $work/disc-$second-b.log)"
    fi
  done
  cleanup_ns
  trap - EXIT
  [ $failed -eq 0 ] || die "discovery from inside the sandbox failed"
}

stage_clean () {
  flatpak --user uninstall -y --noninteractive --all 2>/dev/null || true
  rm -rf "$work"
  log "clean: removed $work"
}

# Everything runs from main, on the script's last line with an exit: the shell
# has read the whole file before the first stage starts, so editing the script
# during a run cannot change that run.
main () {
  stages=${*:-rootfs runtime manifest build suites window discovery}
  mkdir -p "$work"
  for s in $stages; do
    case $s in
      rootfs|runtime|manifest|build|suites|window|discovery|clean)
        start=$(date +%s)
        "stage_$s"
        log "$s: $(( $(date +%s) - start )) s" ;;
      *) die "unknown stage “$s” (rootfs runtime manifest build suites window discovery clean)" ;;
    esac
  done
}

main "$@"; exit $?
