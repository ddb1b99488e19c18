#!/usr/bin/env bash
# bench/jobs/array.sh: one array job of N children end to end (issue 22).
# A real `lote server` gets a MANAGED compute environment of instance type
# "local" with maxvCpus = 2 x N (idle capacity), a queue and a job definition
# running `true` (1 vCPU, 64 MiB); the C++ load client submits ONE array job of
# N children and polls DescribeJobs of the parent until it SUCCEEDED: completed
# children/s = N / (first submit -> the parent's stoppedAt). Same run: N bare
# `true` processes from `xargs -P CLIENTS` (this host's process start rate),
# and the ratio. With PEER_BUILD (a build of main, lote and lote-exec-shim) the
# same array against that server too.
# With AGENT_PEER=1 the same array also against this build with the node
# agent off (LOTE_NODE_AGENT=0: one supervisor program per node), and the ratio.
# WORK_BASE (default /tmp): where the servers' homes go (see run.sh).
# Usage: bench/jobs/array.sh BUILD_DIR [N] [PEER_BUILD]  (env: CLIENTS=8, WAIT_S=900, AGENT_PEER=0, WORK_BASE=/tmp)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-10000}"
PEER="${3:-}"
CLIENTS="${CLIENTS:-8}"
WAIT_S="${WAIT_S:-900}"
AGENT_PEER="${AGENT_PEER:-0}"
# The array runs with the node agent on (lote server's default);
# LOTE_NODE_AGENT=0 in the environment measures one supervisor per node instead.
export LOTE_NODE_AGENT="${LOTE_NODE_AGENT:-1}"
LOAD="$BUILD/bench/jobs/lote_jobs_load"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null

WORK="$(mktemp -d "${WORK_BASE:-/tmp}/lote_bench_array.XXXXXX")"
PID=""
stop() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi; PID=""; }
trap 'stop; rm -rf "$WORK"' EXIT

# measure NAME LOTE_BINARY: prints the client's JSON line.
measure() {
  rm -rf "$WORK/home" "$WORK/out"; mkfifo "$WORK/out"
  "$2" server --home "$WORK/home" --listen 127.0.0.1:0 >"$WORK/out" 2>"$WORK/$1.err" &
  PID=$!
  read -r LINE <"$WORK/out"
  local url="${LINE##* on }" key secret
  key=$(awk -F' = ' '/aws_access_key_id/{print $2}' "$WORK/home/credentials")
  secret=$(awk -F' = ' '/aws_secret_access_key/{print $2}' "$WORK/home/credentials")
  "$LOAD" --endpoint "$url" --key "$key" --secret "$secret" --jobs "$N" --setup \
    --instance-type local --array-size "$N" --wait-seconds "$WAIT_S" --poll-ms 200 || true
  stop
}

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); one array of N=$N children running \`true\`"
THIS=$(measure this "$BUILD/lote")
T0=$(date +%s.%N)
seq "$N" | xargs -P "$CLIENTS" -n 1 true
BARE=$(python3 -c "import time; print($N / (time.time() - $T0))")
PEER_RES='{}'
[ -n "$PEER" ] && PEER_RES=$(measure peer "$(cd "$PEER" && pwd)/lote")
PERNODE_RES='{}'
if [ "$AGENT_PEER" = 1 ]; then PERNODE_RES=$(LOTE_NODE_AGENT=0 measure pernode "$BUILD/lote"); fi
python3 - "$THIS" "$BARE" "$PEER_RES" "$CLIENTS" "$PERNODE_RES" <<'PY'
import json, sys
this, bare, peer, clients = json.loads(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
pernode = json.loads(sys.argv[5])
def show(name, r):
    if "completed" not in r:
        print("%s ERROR: %s" % (name, json.dumps(r)[:400])); return None
    c = r["completed"]
    print("%s: array of %d %s in %.1f s: %.0f children/s (SubmitJob %.0f ms; %s)"
          % (name, r["array_size"], c["status"], c["first_submit_to_last_stop_s"], c["jobs_per_s"],
             r.get("submit_ms", 0), json.dumps(c["status_summary"])))
    return c["jobs_per_s"]
t = show("this", this)
print("xargs -P %s: %.0f bare `true` processes/s" % (clients, bare))
if t: print("ratio this/xargs: %.2fx" % (t / bare))
if pernode:
    p = show("per-node shim (LOTE_NODE_AGENT=0)", pernode)
    if p: print("ratio per-node shim/xargs: %.2fx" % (p / bare))
    if t and p: print("ratio node agent/per-node shim: %.2fx" % (t / p))
if peer:
    p = show("peer", peer)
    if t and p: print("ratio this/peer: %.2fx" % (t / p))
PY
