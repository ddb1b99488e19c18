#!/usr/bin/env bash
# Control-plane throughput: signed requests/s (RegisterJobDefinition +
# DescribeJobQueues, alternating) from 8 keep-alive clients, against lote
# (durable: WAL + synchronous=FULL) and moto_server, in the same run with the
# same C++ load client. Usage: bench/control/run.sh BUILD_DIR [SECONDS]
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
SECONDS_PER_RUN="${2:-10}"
CLIENTS="${CLIENTS:-8}"
LOTE="$BUILD/lote"
LOAD="$BUILD/bench/control/lote_control_load"
[ -x "$LOAD" ] || cmake --build "$BUILD" --target lote_control_load lote >/dev/null

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
mkfifo "$WORK/lote.out"
"$LOTE" server --home "$WORK/home" --listen 127.0.0.1:0 >"$WORK/lote.out" 2>"$WORK/lote.err" &
LOTE_PID=$!
read -r LINE <"$WORK/lote.out"
LOTE_URL="${LINE##* on }"
KEY=$(awk -F' = ' '/aws_access_key_id/{print $2}' "$WORK/home/credentials")
SECRET=$(awk -F' = ' '/aws_secret_access_key/{print $2}' "$WORK/home/credentials")

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
