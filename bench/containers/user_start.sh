#!/usr/bin/env bash
# bench/containers/user_start.sh: a container node's start with the host-side
# user resolution against main's, same run (user_start.py says what is timed).
# Usage: bench/containers/user_start.sh BUILD_DIR [ROUNDS]
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
ROUNDS="${2:-30}"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim user_resolution >/dev/null
date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 "$(dirname "$0")/user_start.py" --lote "$BUILD/lote" \
  --resolution "$BUILD/bench/containers/user_resolution" --rounds "$ROUNDS"
