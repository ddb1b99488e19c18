# Sourced by the benchmarks that start a lote server (bench/jobs's run.sh and
# server_cpu.sh, bench/faults, bench/quarantine, bench/console, bench/control).
# Needs WORK (a scratch folder); jobs_per_s also BUILD (its
# bench/jobs/lote_jobs_load is the client), N and CLIENTS. PID is the server's
# while it runs (the caller's EXIT trap stops it).

# start_lote LOTE_BINARY HOME ERR_FILE [SERVER_OPTION...]: a fresh server of
# LOTE_BINARY (its lote-exec-shim beside it) with its home at HOME (made anew)
# on a free port, its stderr to ERR_FILE; sets PID, URL, KEY and SECRET (the
# home's admin credentials) once it listens.
start_lote() {
  local binary="$1" home="$2" err="$3" line; shift 3
  rm -rf "$home"; rm -f "$WORK/out"; mkfifo "$WORK/out"
  "$binary" server --home "$home" --listen 127.0.0.1:0 "$@" >"$WORK/out" 2>"$err" &
  PID=$!
  read -r line <"$WORK/out"
  URL="${line##* on }"
  KEY=$(awk -F' = ' '/aws_access_key_id/{print $2}' "$home/credentials")
  SECRET=$(awk -F' = ' '/aws_secret_access_key/{print $2}' "$home/credentials")
}

# agent_pid HOME: the pid of the node agent the server of HOME started ("": none).
agent_pid() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["pid"])' \
    "$1/agent/agent.json" 2>/dev/null || true
}

# threads PID: "tid name ns" per live thread of PID, its CPU time from
# schedstat (exact, where the per-thread ticks of stat are rounded down): the
# server names its threads after their role (lote-store, lote-jobs, ...; the
# HTTP handlers lote-http).
threads() {
  for t in /proc/"$1"/task/*; do
    printf '%s %s %s\n' "${t##*/}" "$(cat "$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")"
  done 2>/dev/null
}

# jobs_per_s LOTE_BINARY [SERVER_OPTION...]: a fresh server of LOTE_BINARY
# (with its lote-exec-shim beside it) runs N `true` jobs from CLIENTS
# connections; prints completed jobs/s.
jobs_per_s() {
  local binary="$1" res; shift
  start_lote "$binary" "$WORK/home" "$WORK/err" "$@"
  res=$("$BUILD/bench/jobs/lote_jobs_load" --endpoint "$URL" --key "$KEY" \
    --secret "$SECRET" --jobs "$N" --clients "$CLIENTS" --setup --instance-type local || true)
  kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])["completed"]["jobs_per_s"])' "$res"
}
