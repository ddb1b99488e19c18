#!/usr/bin/env bash
# bench/containers: container mode against process mode in the same run
# (bench.py): trivial jobs/s, each node's start-to-end time, lote's container
# node against a bare `podman run` of the same image, and image pulls from a
# local docker-registry, cold and cached, anonymous and through lote's registry
# with the ECR login flow; the runner alone (lote-exec-shim) against a bare
# podman run in P alternating pairs. Usage: bench/containers/run.sh BUILD_DIR [N] [P]
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-100}"
PAIRS="${3:-30}"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim >/dev/null
date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 "$(dirname "$0")/bench.py" --lote "$BUILD/lote" --jobs "$N" --pairs "$PAIRS"
