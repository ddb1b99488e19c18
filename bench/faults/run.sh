#!/usr/bin/env bash
# bench/faults (issue 24): what fault injection and hang evidence cost.
#  1. Fault -> end of the attempt -> the retry RUNNING, for a fault the node's
#     runner injects (lote:injectKillNode=1, lote:injectKillAfterSeconds=2) and
#     for a real `kill -9` of the same node's command, same run, ROUNDS each,
#     alternating (faults.py).
#  2. Seconds to collect the stack dumps of a 4-rank TP2 x DP2 training job
#     (`lote jobs dump`, gdb on every process of every node) (faults.py).
#  3. Trivial jobs/s with no fault asked for: this build's server against a
#     base build's (BASE_BUILD_DIR, required: main's binary), same load
#     client (bench/jobs' lote_jobs_load), N jobs, interleaved RUNS times;
#     prints the ratio (goal >= 0.98x).
# Usage: bench/faults/run.sh BUILD_DIR BASE_BUILD_DIR [N]
#   (env: ROUNDS=5, RUNS=3, CLIENTS=8; ONLY_JOBS=1: part 3 alone)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:-build}" && pwd)"
BASE="${2:-}"  # a build of main: the binary before this change (the peer of part 3)
if [ ! -x "$BASE/lote" ]; then
  echo "bench/faults/run.sh: give BASE_BUILD_DIR, a build of the commit before the change (its lote and lote-exec-shim): part 3 compares against it" >&2
  exit 2
fi
N="${3:-1000}"
RUNS="${RUNS:-3}"
CLIENTS="${CLIENTS:-8}"
DATA="$HERE/../../.cache/testdata"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null
date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -z "${ONLY_JOBS:-}" ]; then
  OMP_NUM_THREADS=1 python3 "$HERE/faults.py" "$BUILD/lote" "$DATA" "${ROUNDS:-5}"
fi

WORK="$(mktemp -d /tmp/lote_bench_faults.XXXXXX)"
PID=""
cleanup() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT
source "$HERE/../jobs/lib.sh"  # jobs_per_s
THIS=(); MAIN=()
for run in $(seq "$RUNS"); do
  if [ $((run % 2)) = 1 ]; then  # alternating order: neither always goes first
    MAIN+=("$(jobs_per_s "$BASE/lote")"); THIS+=("$(jobs_per_s "$BUILD/lote")")
  else
    THIS+=("$(jobs_per_s "$BUILD/lote")"); MAIN+=("$(jobs_per_s "$BASE/lote")")
  fi
  echo "run $run: base $BASE/lote ${MAIN[-1]} jobs/s, this build ${THIS[-1]} jobs/s"
done
python3 - "${MAIN[*]}" "${THIS[*]}" "$N" <<'PY'
import statistics, sys
base = [float(x) for x in sys.argv[1].split()]
this = [float(x) for x in sys.argv[2].split()]
b, t = statistics.median(base), statistics.median(this)
print("trivial jobs (N=%s, no fault asked): base %.0f jobs/s, this build %.0f jobs/s (medians); ratio %.3fx"
      % (sys.argv[3], b, t, t / b))
PY
