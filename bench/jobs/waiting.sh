#!/usr/bin/env bash
# bench/jobs/waiting.sh: the submit path with jobs waiting (issue 22).
# A real `lote server` gets a compute environment that is DISABLED (so every
# job waits RUNNABLE: "no compute environment ... is ENABLED and VALID"), a
# queue and a job definition; the C++ load client submits N single jobs from
# CLIENTS keep-alive connections and reports SubmitJob/s for the first 2,000
# and for the 2,000 that end at 10,000 and at N waiting. Then the server sits
# idle with them waiting for IDLE_S seconds and its CPU over that time is read
# from /proc/<pid>/stat (utime + stime). With PEER_BUILD (e.g. a build of main)
# the same client measures that server in the same run, and ratios are printed.
# With FINISHED=M (e.g. 1000000) the same build is measured twice instead: on a
# store that already holds M finished jobs (restart.py's fill: 20 real jobs
# copied through SQL) and on an empty store, and the ratio is printed (issue
# 22's goal: >= 0.9x with 100,000 waiting and 1,000,000 finished).
# Usage: bench/jobs/waiting.sh BUILD_DIR [N] [PEER_BUILD]  (env: CLIENTS=8, IDLE_S=10, FINISHED=0)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-30000}"
PEER="${3:-}"
CLIENTS="${CLIENTS:-8}"
IDLE_S="${IDLE_S:-10}"
FINISHED="${FINISHED:-0}"
HERE="$(cd "$(dirname "$0")" && pwd)"
LOAD="$BUILD/bench/jobs/lote_jobs_load"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null

WORK="$(mktemp -d /tmp/lote_bench_waiting.XXXXXX)"
PID=""
stop() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi; PID=""; }
trap 'stop; rm -rf "$WORK"' EXIT
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

W="0-2000,8000-10000"
[ "$N" -gt 10000 ] && W="$W,$((N - 2000))-$N"

# measure NAME LOTE_BINARY [HOME_TEMPLATE]: prints one JSON line (the client's,
# plus idle CPU); the server's home starts as a copy of HOME_TEMPLATE if given.
measure() {
  rm -rf "$WORK/home" "$WORK/out"; mkfifo "$WORK/out"
  if [ -n "${3:-}" ]; then cp -a "$3" "$WORK/home"; fi
  "$2" server --home "$WORK/home" --listen 127.0.0.1:0 >"$WORK/out" 2>"$WORK/$1.err" &
  PID=$!
  read -r LINE <"$WORK/out"
  local url="${LINE##* on }"
  local key secret
  key=$(awk -F' = ' '/aws_access_key_id/{print $2}' "$WORK/home/credentials")
  secret=$(awk -F' = ' '/aws_secret_access_key/{print $2}' "$WORK/home/credentials")
  local res
  res=$("$LOAD" --endpoint "$url" --key "$key" --secret "$secret" --jobs "$N" --clients "$CLIENTS" \
    --prefix waiting --setup --instance-type local --max-vcpus 2 --ce-state DISABLED --windows "$W" \
    --wait-seconds 0 --sample-after 1 || true)
  local t0 t1
  t0=$(ticks "$PID")
  sleep "$IDLE_S"
  t1=$(ticks "$PID")
  stop
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["idle_cpu_pct"]=100.0*(int(sys.argv[3])-int(sys.argv[2]))/int(sys.argv[4])/float(sys.argv[5]); print(json.dumps(r))' \
    "$res" "$t0" "$t1" "$(getconf CLK_TCK)" "$IDLE_S"
}

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); N=$N single jobs waiting RUNNABLE, $CLIENTS clients, idle ${IDLE_S} s"
# Each side is printed as soon as it is measured (a long peer run may be cut short).
show() {
  python3 - "$@" <<'PY'
import json, sys
name, r = sys.argv[1], json.loads(sys.argv[2])
if "windows" not in r:
    print("%s ERROR: %s" % (name, json.dumps(r)[:400])); sys.exit(0)
s = r["submit"]
print("%s SubmitJob: %.0f req/s overall (p50 %.2f ms, p99 %.2f ms, errors %d); sample: %s"
      % (name, s["rps"], s["p50_ms"], s["p99_ms"], s["errors"], json.dumps(r["sample"]["statuses"])))
for w in r["windows"]:
    print("%s   submissions %d-%d: %.0f SubmitJob/s" % (name, w["from"], w["to"], w["rps"]))
print("%s idle with %d waiting: server CPU %.1f%% of a core" % (name, r["jobs"], r["idle_cpu_pct"]))
if len(sys.argv) > 3 and "windows" in json.loads(sys.argv[3]):
    this = {w["to"]: w["rps"] for w in json.loads(sys.argv[3])["windows"]}
    for w in r["windows"]:
        if w["to"] in this:
            print("ratio this/peer SubmitJob/s at %d: %.2fx" % (w["to"], this[w["to"]] / max(w["rps"], 1e-9)))
PY
}
if [ "$FINISHED" -gt 0 ]; then
  # A home whose store holds FINISHED finished jobs (its own resources are
  # bench-*; the waiting ones go to waiting-*, DISABLED).
  HERE="$HERE" python3 - "$BUILD" "$FINISHED" "$WORK/filled" <<'PY'
import os, shutil, sys
sys.path.insert(0, os.path.join(os.environ["HERE"], "..", "..", "tests", "control"))
sys.path.insert(0, os.environ["HERE"])
import restart
build, n, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
home, _, _ = restart.prepare("filled", os.path.join(build, "lote"),
                             os.path.join(build, "bench", "jobs", "lote_jobs_load"), 20, n)
shutil.move(home, dest)
PY
  FILLED=$(measure filled "$BUILD/lote" "$WORK/filled")
  show filled "$FILLED"
  EMPTY=$(measure empty "$BUILD/lote")
  echo "(below, this = the store with $FINISHED finished jobs, peer = the empty store)"
  show empty "$EMPTY" "$FILLED"
  exit 0
fi
THIS=$(measure this "$BUILD/lote")
show this "$THIS"
if [ -n "$PEER" ]; then
  PEER_RES=$(measure peer "$(cd "$PEER" && pwd)/lote")
  show peer "$PEER_RES" "$THIS"
fi
