#!/usr/bin/env bash
# bench/quarantine (issue 24): what bad-node quarantine buys and what it costs.
#  1. A bad node among NODES virtual instances: JOBS single-node jobs (each a
#     whole c5.large, 2 at a time, retried up to 5 attempts) run while the
#     benchmark kills (SIGKILL to the node's runner: NODE_LOST) every attempt
#     that lands on the bad instance (the first job's). Counted: attempts lost
#     on it before jobs stop landing there, with quarantine (default: 3
#     failures of different jobs) and with it off (--quarantine-failures 0),
#     same run (bad_node.py).
#  2. The cost of quarantine's bookkeeping on trivial jobs/s: this build's
#     server with quarantine on (the default) against the same binary with
#     --quarantine-failures 0, same load client (bench/jobs' lote_jobs_load),
#     N jobs, RUNS times alternating which goes first; prints the ratio (goal
#     >= 0.98x).
# Usage: bench/quarantine/run.sh BUILD_DIR [N]   (env: RUNS=3, CLIENTS=8,
#   NODES=4, JOBS=24; ONLY_JOBS=1: part 2 alone)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-1000}"
RUNS="${RUNS:-3}"
CLIENTS="${CLIENTS:-8}"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null
date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "${ONLY_JOBS:-}" ]; then
  python3 "$HERE/bad_node.py" "$BUILD/lote" "${NODES:-4}" "${JOBS:-24}"
fi

WORK="$(mktemp -d /tmp/lote_bench_quarantine.XXXXXX)"
PID=""
cleanup() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT
source "$HERE/../jobs/lib.sh"  # jobs_per_s
ON=(); OFF=()
for run in $(seq "$RUNS"); do
  if [ $((run % 2)) = 1 ]; then  # alternating order: neither always goes first
    OFF+=("$(jobs_per_s "$BUILD/lote" --quarantine-failures 0)"); ON+=("$(jobs_per_s "$BUILD/lote")")
  else
    ON+=("$(jobs_per_s "$BUILD/lote")"); OFF+=("$(jobs_per_s "$BUILD/lote" --quarantine-failures 0)")
  fi
  echo "run $run: quarantine off ${OFF[-1]} jobs/s, on ${ON[-1]} jobs/s"
done
python3 - "${OFF[*]}" "${ON[*]}" "$N" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
b, t = statistics.median(off), statistics.median(on)
print("trivial jobs (N=%s): quarantine off %.0f jobs/s, on %.0f jobs/s (medians); ratio on/off %.3fx"
      % (sys.argv[3], b, t, t / b))
PY
