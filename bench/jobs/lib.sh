# Sourced by the benchmarks that time trivial jobs through one lote server
# (bench/faults, bench/quarantine). Needs WORK (a scratch folder), BUILD (its
# bench/jobs/lote_jobs_load is the client), N and CLIENTS; PID is the server's
# while it runs (the caller's EXIT trap stops it).

# jobs_per_s LOTE_BINARY [SERVER_OPTION...]: a fresh server of LOTE_BINARY
# (with its lote-exec-shim beside it) runs N `true` jobs from CLIENTS
# connections; prints completed jobs/s.
jobs_per_s() {
  local binary="$1"; shift
  rm -rf "$WORK/home"; rm -f "$WORK/out"; mkfifo "$WORK/out"
  "$binary" server --home "$WORK/home" --listen 127.0.0.1:0 "$@" >"$WORK/out" 2>"$WORK/err" &
  PID=$!
  read -r LINE <"$WORK/out"
  local key secret res
  key=$(awk -F' = ' '/aws_access_key_id/{print $2}' "$WORK/home/credentials")
  secret=$(awk -F' = ' '/aws_secret_access_key/{print $2}' "$WORK/home/credentials")
  res=$("$BUILD/bench/jobs/lote_jobs_load" --endpoint "${LINE##* on }" --key "$key" \
    --secret "$secret" --jobs "$N" --clients "$CLIENTS" --setup --instance-type local || true)
  kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])["completed"]["jobs_per_s"])' "$res"
}
