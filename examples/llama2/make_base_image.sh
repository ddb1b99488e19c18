#!/usr/bin/env bash
# lote's base container image, made on this machine from no registry: a minimal
# root holding the static busybox (/bin/sh and the usual commands), an
# /etc/passwd and /etc/group with root and nobody, and (unless --no-lote) a lote
# binary at /usr/local/bin/lote with the shared libraries it needs and the
# loader, copied from this host at their own paths (ldd). `podman import` makes
# it the image IMAGE. Images of jobs build FROM it (examples/llama2/Containerfile).
#
# usage: ./make_base_image.sh [--lote PATH | --no-lote] [--change INSTRUCTION]... IMAGE
#   --lote PATH    the lote to put in (default: `lote` on PATH)
#   --no-lote      busybox only
#   --change I     a Containerfile instruction for podman import (CMD, ENTRYPOINT, ENV, ...;
#                  default: CMD ["/bin/sh"]); repeatable
# Needs busybox-static and podman (scripts/deps/containers.txt). Prints the image's name.
set -euo pipefail

lote="$(command -v lote || true)"
changes=()
image=""
while [ $# -gt 0 ]; do
  case "$1" in
    --lote) lote="$2"; shift 2 ;;
    --no-lote) lote=""; shift ;;
    --change) changes+=(--change "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "make_base_image: unknown option $1 (--help)" >&2; exit 2 ;;
    *) image="$1"; shift ;;
  esac
done
if [ -z "$image" ]; then
  echo "make_base_image: name the image, e.g. localhost/lote-base:latest (--help)" >&2
  exit 2
fi
busybox="$(command -v busybox || true)"
if [ -z "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1; then
  echo "make_base_image: busybox is not installed (apt-get install busybox-static)" >&2
  exit 1
fi
if ldd "$busybox" >/dev/null 2>&1; then
  echo "make_base_image: $busybox is not static (apt-get install busybox-static)" >&2
  exit 1
fi
[ ${#changes[@]} -gt 0 ] || changes=(--change 'CMD ["/bin/sh"]')

root="$(mktemp -d "${TMPDIR:-/tmp}/lote-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,etc,proc,sys,dev,tmp,root,usr/local/bin}
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

if [ -n "$lote" ]; then
  if [ ! -x "$lote" ]; then
    echo "make_base_image: no lote binary at '$lote' (pass --lote PATH or --no-lote)" >&2
    exit 1
  fi
  cp "$lote" "$root/usr/local/bin/lote"
  # Each library at its host path: "name => /path (addr)" or "/path (addr)" (the loader).
  for lib in $(ldd "$lote" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
fi

tar -C "$root" --numeric-owner -cf "$root.tar" .
trap 'rm -rf "$root" "$root.tar"' EXIT
podman import -q "${changes[@]}" "$root.tar" "$image" >/dev/null
echo "$image"
