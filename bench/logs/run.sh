#!/usr/bin/env bash
# Log store benchmarks: ingest rate of a job printing flat out (vs cat of the
# same file to /dev/null, same run) and GetLogEvents latency on a 1 GB stream.
# Then the same through a real `lote server` (bench/logs/server_bench.py): a job
# printing flat out, stored rate and exactness, cat of the same bytes, and
# GetLogEvents p99 over HTTP on a 1 GB stream.
# Usage: bench/logs/run.sh BUILD_DIR   (env: SECONDS_=10, MAX_GB=8, TMP dir)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
BIN="$BUILD/bench/logs/lote_logs_bench"
[ -x "$BIN" ] || { echo "build it first: cmake --build $BUILD --target lote_logs_bench" >&2; exit 1; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lote-logs-bench-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "--- ingest: a job writes as fast as it can for ${SECONDS_:-10} s"
"$BIN" ingest "$WORK/ingest" "${SECONDS_:-10}" "$(( ${MAX_GB:-8} * 1000000000 ))"
echo "--- GetLogEvents on a 1 GB stream"
"$BIN" get "$WORK/get" 1000000000 400
echo "--- through a real lote server (job stdout -> stream; GetLogEvents over HTTP)"
python3 "$(dirname "$0")/server_bench.py" --lote "$BUILD/lote" \
  --bench "$BUILD/bench/logs/lote_logs_server_bench" --seconds "${SECONDS_:-10}"
