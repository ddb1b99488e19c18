#!/usr/bin/env bash
# A/B of two lote binaries under the bench/control request mixes (8 keep-alive
# clients; 1:1 and 1:9 RegisterJobDefinition:DescribeJobQueues), alternating
# runs in the same session, e.g. the HTTP server of a branch against main's:
#   bench/control/ab.sh /work/main/build/lote build/lote [SECONDS] [ROUNDS]
set -euo pipefail
A_BIN="$1"; B_BIN="$2"; SECS="${3:-6}"; ROUNDS="${4:-2}"
LOAD="$(dirname "$B_BIN")/bench/control/lote_control_load"
W="$(mktemp -d /tmp/lote_ab.XXXXXX)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
start() {  # binary home -> URL on stdout
  mkfifo "$2.out"
  "$1" server --home "$2" --listen 127.0.0.1:0 >"$2.out" 2>"$2.err" &
  PIDS+=($!)
  read -r LINE <"$2.out"; echo "${LINE##* on }"
}
A_URL=$(start "$A_BIN" "$W/a"); B_URL=$(start "$B_BIN" "$W/b")
cred() { awk -F' = ' "/$2/{print \$2}" "$1/credentials"; }
for round in $(seq "$ROUNDS"); do
  for mix in 2 10; do
    for who in a b; do
      url=$A_URL; [ "$who" = b ] && url=$B_URL
      r=$("$LOAD" --endpoint "$url" --key "$(cred "$W/$who" aws_access_key_id)" \
          --secret "$(cred "$W/$who" aws_secret_access_key)" --clients 8 --seconds "$SECS" --write-every "$mix")
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("round %s mix 1:%d %s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, errors %d" % (sys.argv[2], int(sys.argv[3]) - 1, sys.argv[4], r["rps"], r["p50_ms"], r["p99_ms"], r["errors"]))' \
        "$r" "$round" "$mix" "$([ "$who" = a ] && echo "A $A_BIN" || echo "B $B_BIN")"
    done
  done
done
