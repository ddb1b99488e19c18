#!/usr/bin/env bash
# Control-plane throughput: signed requests/s (RegisterJobDefinition +
# DescribeJobQueues, alternating) from 8 keep-alive clients, against lote
# (durable: WAL + synchronous=FULL) and moto_server, in the same run with the
# same C++ load client. Then connection scale (lote_control_conn_load, one
# event-driven client thread): 1,000 keep-alive connections each sending one
# DescribeJobQueues per second (p50/p99/max), 50-connection cold bursts, and
# the 1,000 connections again with 1,000 slow-loris connections open.
# Usage: bench/control/run.sh BUILD_DIR [SECONDS]   (CONN=0 skips connection scale)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
SECONDS_PER_RUN="${2:-10}"
CLIENTS="${CLIENTS:-8}"
LOTE="$BUILD/lote"
LOAD="$BUILD/bench/control/lote_control_load"
CONN_LOAD="$BUILD/bench/control/lote_control_conn_load"
[ -x "$LOAD" ] && [ -x "$CONN_LOAD" ] || cmake --build "$BUILD" --target lote_control_load lote_control_conn_load lote >/dev/null
# 1,000 + 1,000 connections from one client process, and the servers' ends.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

WORK="$(mktemp -d /tmp/lote_bench_control.XXXXXX)"
LOTE_PID=""; MOTO_PID=""
cleanup() {
  [ -n "$LOTE_PID" ] && kill "$LOTE_PID" 2>/dev/null && wait "$LOTE_PID" 2>/dev/null || true
  [ -n "$MOTO_PID" ] && kill "$MOTO_PID" 2>/dev/null && wait "$MOTO_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# lote
source "$(dirname "$0")/../jobs/lib.sh"  # start_lote
start_lote "$LOTE" "$WORK/home" "$WORK/lote.err"
LOTE_PID=$PID LOTE_URL=$URL

# moto
MOTO_PORT=$(free_port)
moto_server -H 127.0.0.1 -p "$MOTO_PORT" >"$WORK/moto.log" 2>&1 &
MOTO_PID=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$MOTO_PORT/moto-api/" && break
  sleep 0.1
done

# Warm up both (moto loads its Batch backend on the first call, which takes seconds).
"$LOAD" --endpoint "$LOTE_URL" --key "$KEY" --secret "$SECRET" --clients 2 --seconds 1 >/dev/null
"$LOAD" --endpoint "http://127.0.0.1:$MOTO_PORT" --clients 2 --seconds 10 >/dev/null

run_pair() {  # $1: write-every
  echo "--- clients=$CLIENTS seconds=$SECONDS_PER_RUN mix: 1 RegisterJobDefinition per $1 requests, rest DescribeJobQueues"
  LOTE_RES=$("$LOAD" --endpoint "$LOTE_URL" --key "$KEY" --secret "$SECRET" --clients "$CLIENTS" --seconds "$SECONDS_PER_RUN" --write-every "$1")
  echo "lote: $LOTE_RES"
  MOTO_RES=$("$LOAD" --endpoint "http://127.0.0.1:$MOTO_PORT" --clients "$CLIENTS" --seconds "$SECONDS_PER_RUN" --write-every "$1")
  echo "moto: $MOTO_RES"
  python3 - "$LOTE_RES" "$MOTO_RES" <<'PY'
import json, sys
l, m = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("lote %.0f req/s (p50 %.2f ms, p99 %.2f ms, errors %d)" % (l["rps"], l["p50_ms"], l["p99_ms"], l["errors"]))
print("moto %.0f req/s (p50 %.2f ms, p99 %.2f ms, errors %d)" % (m["rps"], m["p50_ms"], m["p99_ms"], m["errors"]))
print("ratio lote/moto: %.1fx" % (l["rps"] / max(m["rps"], 1e-9)))
PY
}
# 1:1 mix (the headline), then a read-heavy mix (1 write in 10).
run_pair 2
run_pair 10
if [ "${CONN:-1}" != 0 ]; then
  CONNS="${CONNS:-1000}"
  conn_pair() {  # $1: label, rest: conn_load arguments
    local label="$1"; shift
    echo "--- $label"
    L=$("$CONN_LOAD" --endpoint "$LOTE_URL" --key "$KEY" --secret "$SECRET" "$@" || true)
    echo "lote: $L"
    M=$("$CONN_LOAD" --endpoint "http://127.0.0.1:$MOTO_PORT" "$@" || true)
    echo "moto: $M"
    python3 - "$L" "$M" <<'PY'
import json, sys
def load(s):
    try:
        return json.loads(s)
    except ValueError:
        return None
l, m = load(sys.argv[1]), load(sys.argv[2])
for name, r in (("lote", l), ("moto", m)):
    if r:
        print("%s %d ok, %d errors, p50 %.2f ms, p99 %.2f ms, max %.1f ms" % (
            name, r["requests"], r["errors"], r["p50_ms"], r["p99_ms"], r["max_ms"]))
    else:
        print("%s: no result" % name)
if l and m and l["p99_ms"] > 0:
    print("ratio moto/lote p99: %.1fx, max: %.1fx" % (m["p99_ms"] / l["p99_ms"], m["max_ms"] / max(l["max_ms"], 1e-9)))
PY
  }
  conn_pair "$CONNS keep-alive connections, 1 DescribeJobQueues/s each, ${SECONDS_PER_RUN}s" \
    --mode keepalive --connections "$CONNS" --interval-ms 1000 --seconds "$SECONDS_PER_RUN"
  conn_pair "cold bursts: 50 new connections at once, one request each, 20 bursts" \
    --mode burst --burst 50 --bursts 20
  conn_pair "$CONNS keep-alive connections as above, plus $CONNS slow-loris connections (1 header byte/s)" \
    --mode keepalive --connections "$CONNS" --interval-ms 1000 --seconds "$SECONDS_PER_RUN" --slowloris "$CONNS"
fi
python3 - <<'PY'
import os, time
fd = os.open("/tmp/lote_fsync_probe", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
ts = []
for _ in range(100):
    os.write(fd, b"x" * 4096)
    t = time.perf_counter(); os.fdatasync(fd); ts.append(time.perf_counter() - t)
os.close(fd); os.unlink("/tmp/lote_fsync_probe")
ts.sort()
print("disk fdatasync p50 %.2f ms (each durable commit costs at least this)" % (ts[50] * 1e3))
PY
