#!/usr/bin/env bash
# bench/console: the web console under load, in Debian's chromium (puppeteer-core).
#  1. N jobs (default 100,000) in the store: N/1000 array jobs of 1000 children each
#     in a queue whose compute environment is DISABLED (they stay RUNNABLE; N single
#     jobs take the job loop too long to accept, see docs/benchmarks.md): time from
#     navigation to the first render of the jobs list's first page (goal <= 300 ms).
#  2. A job that prints STEPS (default 100,000) LOTE_PROGRESS lines: time from
#     navigation to its training charts drawn (goal <= 1 s), the points drawn and
#     the progress answer's size.
#  3. A running job printing a progress line every 100 ms: the server's CPU and
#     the console's requests/s with 10 tabs open on it (5 on its logs, 5 on its
#     charts) against the same 30 s with no tab open (the peer: the server alone).
# Usage: bench/console/run.sh BUILD_DIR [N] [STEPS]   (env: SECONDS_=30)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-100000}"
STEPS="${3:-100000}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
LOTE="$BUILD/lote"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim >/dev/null
NODE_MODULES="${LOTE_CONSOLE_JS:-$ROOT/.cache/console-js}/node_modules"
[ -d "$NODE_MODULES/puppeteer-core" ] || NODE_MODULES="$BUILD/console-js/node_modules"

WORK="$(mktemp -d /tmp/lote_bench_console.XXXXXX)"
LOTE_PID=""
cleanup() {
  # Running jobs outlive a stopped server: end them first.
  if [ -n "${SETUP:-}" ]; then python3 "$HERE/setup.py" --stop "$LOTE_URL" "$WORK/home/credentials" 0 "$SETUP" || true; fi
  if [ -n "$LOTE_PID" ]; then kill "$LOTE_PID" 2>/dev/null || true; wait "$LOTE_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $N jobs, a $STEPS-step run"
source "$HERE/../jobs/lib.sh"  # start_lote
start_lote "$LOTE" "$WORK/home" "$WORK/lote.err"
LOTE_PID=$PID LOTE_URL=$URL
CONSOLE_URL=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['url'])" "$WORK/home/console.json")

# Queues, the waiting jobs, the 100,000-step job and the running job (boto3).
SETUP=$(python3 "$HERE/setup.py" "$LOTE_URL" "$WORK/home/credentials" "$STEPS")
python3 "$HERE/setup.py" --wait-jobs "$LOTE_URL" "$WORK/home/credentials" 0 "$SETUP"

spec() {
  python3 -c "import json,sys; s=json.loads(sys.argv[1]); s.update(url=sys.argv[2], keyId=sys.argv[3], secret=sys.argv[4], pid=int(sys.argv[5]), seconds=int(sys.argv[6]), jobs=int(sys.argv[7]), phase=sys.argv[8], steps=int(sys.argv[9])); print(json.dumps(s))" \
    "$SETUP" "$CONSOLE_URL" "$KEY" "$SECRET" "$LOTE_PID" "${SECONDS_:-30}" "$N" "$1" "$STEPS"
}
# Server load first, on a store without the waiting jobs (their scheduling
# passes would dominate the server's CPU), then the charts and the list.
NODE_PATH="$NODE_MODULES" node "$HERE/console_bench.cjs" "$(spec load)"
NODE_PATH="$NODE_MODULES" node "$HERE/console_bench.cjs" "$(spec chart)"
python3 "$HERE/setup.py" --fill "$LOTE_URL" "$WORK/home/credentials" "$N" "$SETUP"
NODE_PATH="$NODE_MODULES" node "$HERE/console_bench.cjs" "$(spec list)"
