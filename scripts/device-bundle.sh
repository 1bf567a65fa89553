#!/bin/sh
# Packs daisychain-cli with every shared library it and its GStreamer plugins
# load (as ldd lists them) into build-device/, so that the GPU machine, whose
# image has neither GStreamer's webrtc plugins nor this build's libraries, can
# run the same binary. The folder is over the 64 MiB a device call carries,
# so it is also packed as build-devpack/bundle.tar.xz: carry build-devpack,
# unpack it there with `tar -xJf build-devpack/bundle.tar.xz`, then run
# build-device/run.sh ARGS.
# iproute2's ip and tc go in build-device/bin (run.sh puts it first in PATH)
# for `bench group --netns`: the GPU machine's image has neither.
# Used for the H200 host's figures in docs/BENCHMARKS.md.
set -eu
cd "$(dirname "$0")/.."

out=build-device
gst=/usr/lib/x86_64-linux-gnu/gstreamer-1.0
# webrtcbin makes appsrc/appsink (app) inside; DTLS needs GIO's TLS module.
plugins="coreelements app webrtc nice dtls srtp sctp rtpmanager rtp"

meson compile -C build src/cli/daisychain-cli >/dev/null
rm -rf "$out"
mkdir -p "$out/lib" "$out/gst" "$out/gio" "$out/bin"
cp /usr/lib/x86_64-linux-gnu/gio/modules/libgiognutls.so "$out/gio/"
cp build/src/cli/daisychain-cli "$out/"
for p in $plugins; do
  cp "$gst/libgst$p.so" "$out/gst/"
done
cp /usr/lib/x86_64-linux-gnu/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner "$out/"
for tool in ip tc; do
  path="$(PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" || true)"
  if [ -z "$path" ]; then
    echo "device-bundle.sh: $tool (iproute2) not found here:" \
         "bench group --netns will not run there" >&2
    continue
  fi
  cp -L "$path" "$out/bin/"
done

# Every library the binary, the plugins and the scanner need, except the C
# library's own (the machine's loader must match its libc).
for f in "$out/daisychain-cli" "$out"/gst/*.so "$out"/gio/*.so "$out/gst-plugin-scanner" \
         "$out"/bin/*; do
  [ -e "$f" ] || continue
  ldd "$f" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
strip --strip-unneeded "$out/daisychain-cli" "$out"/gst/*.so "$out"/gio/*.so "$out"/lib/*.so* \
  "$out"/bin/* 2>/dev/null || true

cat > "$out/run.sh" <<'RUN'
#!/bin/sh
# Runs the bundled daisychain-cli with its own libraries and plugins.
here="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# ip and tc for bench group --netns (the machine's own come after, if any).
export PATH="$here/bin:${PATH:-/usr/bin:/bin}"
export GST_PLUGIN_SYSTEM_PATH="$here/gst"
export GST_PLUGIN_PATH="$here/gst"
export GST_PLUGIN_SCANNER="$here/gst-plugin-scanner"
export GIO_MODULE_DIR="$here/gio"
export GST_REGISTRY="${TMPDIR:-/tmp}/dc-gst-registry.bin"
exec "$here/daisychain-cli" "$@"
RUN
chmod +x "$out/run.sh"
mkdir -p build-devpack
tar -cJf build-devpack/bundle.tar.xz "$out"
du -sh "$out" build-devpack/bundle.tar.xz
