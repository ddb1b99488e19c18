#!/usr/bin/env bash
# make-bundle.sh: a self-contained lote for a host that has none of lote's
# libraries (a GPU machine lent for tests/gpu/run.sh, a cluster node): the
# `lote` binary and its node runner, every shared library `ldd` lists except
# the C library's own (the host's glibc is used: it must be 2.36 or newer,
# as on Debian 12 and Ubuntu 23.04+), and a `lote` wrapper that points the
# loader at the bundle's libraries. Binaries are stripped; the result is a
# folder and a .tar.gz of it, which must stay under 60 MiB.
#
# usage: scripts/make-bundle.sh BUILD_DIR [OUT_DIR]   (make bundle)
# then:  tar xzf lote-bundle-*.tar.gz && lote-bundle/lote --help
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
OUT="${2:-$BUILD}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
LIMIT_MIB=60

for f in "$BUILD/lote" "$BUILD/lote-exec-shim"; do
  [ -x "$f" ] || { echo "make-bundle: $f is missing; build it first (make build-binaries)" >&2; exit 1; }
done
version="$("$BUILD/lote" --version | awk '{print $2}')"
name="lote-bundle"
dir="$OUT/$name"
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"

# The C library stays the host's (its loader and these parts must match).
is_glibc() {
  case "$(basename "$1")" in
    ld-linux*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|\
    libutil.so.*|libanl.so.*|libnss_*|libmvec.so.*) return 0 ;;
  esac
  return 1
}

echo "bundling lote $version from $BUILD"
cp "$BUILD/lote" "$dir/bin/lote"
cp "$BUILD/lote-exec-shim" "$dir/bin/lote-exec-shim"
strip --strip-unneeded "$dir/bin/lote" "$dir/bin/lote-exec-shim"
# Every library the binary needs (ldd lists the whole closure), resolved paths.
while read -r lib; do
  [ -n "$lib" ] || continue
  is_glibc "$lib" && continue
  cp -L "$lib" "$dir/lib/$(basename "$lib")"
done < <(ldd "$BUILD/lote" | awk '/=> \// {print $3}')
strip --strip-unneeded "$dir"/lib/*.so* 2>/dev/null || true

cat > "$dir/lote" <<'WRAPPER'
#!/bin/sh
# lote from a bundle (scripts/make-bundle.sh): the bundle's libraries first.
# lote runs itself again (node runners, launchers) by /proc/self/exe, which is
# bin/lote, with this environment: they find the same libraries.
here="$(cd "$(dirname "$0")" && pwd)"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
exec "$here/bin/lote" "$@"
WRAPPER
chmod +x "$dir/lote"
cp "$HERE/tests/gpu/run.sh" "$dir/test-gpu.sh"
cat > "$dir/README" <<EOF
lote $version, bundled by scripts/make-bundle.sh.

  ./lote --help                     every command
  ./lote server --home /tmp/lote    a server on this host
  ./test-gpu.sh                     the GPU checks (tests/gpu/run.sh)

The host's C library is used (glibc 2.36 or newer); everything else lote links is in lib/.
EOF

# What the bundle's binary resolves: nothing outside lib/ but the C library.
missing="$(LD_LIBRARY_PATH="$dir/lib" ldd "$dir/bin/lote" | awk '/not found/ {print $1}')"
if [ -n "$missing" ]; then
  echo "make-bundle: libraries not found in the bundle: $missing" >&2
  exit 1
fi
tarball="$OUT/$name-$version-$(uname -m).tar.gz"
tar -C "$OUT" -czf "$tarball" "$name"
size_mib=$(( $(stat -c %s "$tarball") / 1048576 ))
unpacked_mib=$(( $(du -sb "$dir" | cut -f1) / 1048576 ))
echo "bundle: $tarball (${size_mib} MiB; ${unpacked_mib} MiB unpacked in $dir)"
if [ "$size_mib" -ge "$LIMIT_MIB" ]; then
  echo "make-bundle: the bundle is ${size_mib} MiB; the limit is ${LIMIT_MIB} MiB" >&2
  exit 1
fi
