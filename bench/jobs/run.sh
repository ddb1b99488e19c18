#!/usr/bin/env bash
# bench/jobs: jobs end to end through the AWS Batch API (issue 3, benchmark 2).
# A real `lote server` (this build) gets a MANAGED compute environment of
# instance type "local" with maxvCpus = 2 x N (idle capacity: no job waits), a
# queue and a job definition running `true` (1 vCPU, 64 MiB); the C++ load
# client submits N jobs from CLIENTS keep-alive SigV4 connections, waits until
# all are SUCCEEDED and reports SubmitJob req/s and latency, completed jobs/s
# (N / (last stoppedAt - first submit)) and submit -> RUNNING / SUCCEEDED
# latency from the server's createdAt/startedAt/stoppedAt. Then the same
# SubmitJob load, same client, against moto_server (API-side ratio); moto runs
# jobs in Docker, so the report says what its jobs then became. After the burst,
# 100 more jobs one at a time (50 ms apart) give the latencies on idle capacity;
# and N bare `true` processes from xargs show this host's process start rate.
# With AGENT_PEER=1 (the default) each run also measures the same lote with
# the node agent off (LOTE_NODE_AGENT=0: one supervisor program per node) and
# prints the ratio; CPU per job = the server's and the node agent's CPU, each
# with its reaped children (supervisors, commands), over the jobs run.
# WORK_BASE (default /tmp) is where the servers' homes go: the filesystem
# they are on weighs in the server's CPU per job (see docs/benchmarks.md).
# Usage: bench/jobs/run.sh BUILD_DIR [N]   (env: CLIENTS=8, RUNS=1, AGENT_PEER=1, WORK_BASE=/tmp)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-2000}"
CLIENTS="${CLIENTS:-8}"
RUNS="${RUNS:-1}"
AGENT_PEER="${AGENT_PEER:-1}"
# The main measurement runs with the node agent on (lote server's default);
# LOTE_NODE_AGENT=0 in the environment measures one supervisor per node instead.
export LOTE_NODE_AGENT="${LOTE_NODE_AGENT:-1}"
LOTE="$BUILD/lote"
LOAD="$BUILD/bench/jobs/lote_jobs_load"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null

WORK="$(mktemp -d "${WORK_BASE:-/tmp}/lote_bench_jobs.XXXXXX")"
LOTE_PID=""; MOTO_PID=""
stop_servers() {
  if [ -n "$LOTE_PID" ]; then kill "$LOTE_PID" 2>/dev/null || true; wait "$LOTE_PID" 2>/dev/null || true; fi
  if [ -n "$MOTO_PID" ]; then kill "$MOTO_PID" 2>/dev/null || true; wait "$MOTO_PID" 2>/dev/null || true; fi
  LOTE_PID=""; MOTO_PID=""
}
cleanup() { stop_servers; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# stat_ms SUM PID...: the awk sum SUM of /proc/PID/stat's CPU fields ($12
# utime, $13 stime, $14 cutime, $15 cstime: after the comm) of each, in ms.
stat_ms() {
  local sum="$1" total=0 pid ticks; shift
  for pid in "$@"; do
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || continue
    ticks=$(sed 's/.*) //' "/proc/$pid/stat" | awk "{print $sum}")
    total=$((total + ticks))
  done
  echo $((total * 1000 / $(getconf CLK_TCK)))
}
# cpu_ms PID...: each process with its reaped children (supervisors, commands).
cpu_ms() { stat_ms '$12 + $13 + $14 + $15' "$@"; }
# self_cpu_ms PID: its threads alone, no children: the server's own share.
self_cpu_ms() { stat_ms '$12 + $13' "$@"; }
source "$(dirname "$0")/lib.sh"  # start_lote, agent_pid
# measure_lote NAME: one lote server of this build (env as given), the load;
# sets RES_<NAME> (the client's JSON) and CPU_<NAME> (ms in all).
measure_lote() {
  local res agent
  start_lote "$LOTE" "$WORK/home" "$WORK/lote-$1.err"
  LOTE_PID=$PID
  res=$("$LOAD" --endpoint "$URL" --key "$KEY" --secret "$SECRET" --jobs "$N" \
    --clients "$CLIENTS" --setup --instance-type local || true)
  agent=$(agent_pid "$WORK/home")
  printf -v "RES_$1" '%s' "$res"
  printf -v "CPU_$1" '%s' "$(cpu_ms "$LOTE_PID" "$agent")"
  kill "$LOTE_PID" 2>/dev/null || true; wait "$LOTE_PID" 2>/dev/null || true; LOTE_PID=""
  if [ -n "$agent" ]; then kill "$agent" 2>/dev/null || true; fi
}

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); N=$N jobs running \`true\`, $CLIENTS clients"
echo "homes on: $(findmnt -n -o FSTYPE,OPTIONS -T "$WORK" | cut -c1-80)"
for run in $(seq "$RUNS"); do
  # lote (its supervisor: lote-exec-shim beside the lote binary)
  start_lote "$LOTE" "$WORK/home" "$WORK/lote.err"
  LOTE_PID=$PID
  LOTE_URL=$URL
  if [ -n "${PROFILE_CMD:-}" ]; then  # e.g. PROFILE_CMD='perf record -g -o /tmp/p.data -p'
    $PROFILE_CMD "$LOTE_PID" >"$WORK/profile.log" 2>&1 & PROF_PID=$!
  fi
  LOTE_RES=$("$LOAD" --endpoint "$LOTE_URL" --key "$KEY" --secret "$SECRET" --jobs "$N" \
    --clients "$CLIENTS" --setup --instance-type local || true)
  if [ -n "${PROFILE_CMD:-}" ]; then kill -INT "$PROF_PID" 2>/dev/null || true; wait "$PROF_PID" 2>/dev/null || true; fi

  LOTE_AGENT=$(agent_pid "$WORK/home")
  LOTE_CPU=$(cpu_ms "$LOTE_PID" "$LOTE_AGENT")
  LOTE_SELF_CPU=$(self_cpu_ms "$LOTE_PID")
  kill "$LOTE_PID" 2>/dev/null || true; wait "$LOTE_PID" 2>/dev/null || true; LOTE_PID=""
  if [ -n "$LOTE_AGENT" ]; then kill "$LOTE_AGENT" 2>/dev/null || true; fi
  RES_pernode='{}'; CPU_pernode=0
  if [ "$AGENT_PEER" = 1 ]; then LOTE_NODE_AGENT=0 measure_lote pernode; fi
  # Host reference, same run: N bare `true` processes started by xargs, CLIENTS
  # at a time (one process start per job, as lote's node agent makes; one
  # supervisor per node makes three: the supervisor, its fork, the command).
  T0=$(date +%s.%N)
  seq "$N" | xargs -P "$CLIENTS" -n 1 true
  BARE_S=$(python3 -c "import time; print(time.time() - $T0)")
  # moto_server: a MANAGED environment needs a service role (IAM) and a subnet
  # (moto's default VPC), made with boto3; then the same client.
  MOTO_PORT=$(free_port)
  moto_server -H 127.0.0.1 -p "$MOTO_PORT" >"$WORK/moto.log" 2>&1 &
  MOTO_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$MOTO_PORT/moto-api/" && break
    sleep 0.1
  done
  read -r ROLE SUBNET SG PROFILE < <(python3 - "$MOTO_PORT" <<'PY'
import sys, boto3
kw = dict(endpoint_url="http://127.0.0.1:%s" % sys.argv[1], region_name="us-east-1",
          aws_access_key_id="bench", aws_secret_access_key="bench")
iam, ec2 = boto3.client("iam", **kw), boto3.client("ec2", **kw)
role = iam.create_role(RoleName="bench", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
subnet = ec2.describe_subnets()["Subnets"][0]
sg = ec2.describe_security_groups()["SecurityGroups"][0]["GroupId"]
profile = iam.create_instance_profile(InstanceProfileName="bench")["InstanceProfile"]["Arn"]
print(role, subnet["SubnetId"], sg, profile)
PY
)
  MOTO_RES=$("$LOAD" --endpoint "http://127.0.0.1:$MOTO_PORT" --jobs "$N" --clients "$CLIENTS" \
    --setup --instance-type optimal --service-role "$ROLE" --subnet "$SUBNET" \
    --security-group "$SG" --instance-role "$PROFILE" --wait-seconds 0 --sample-after 5 || true)
  MOTO_FAILS=$(grep -c "Failed to run AWS Batch container" "$WORK/moto.log" || true)
  MOTO_WHY=$(grep -m1 -o "Failed to run AWS Batch container.*" "$WORK/moto.log" | sed 's/container MOTO-BATCH-[0-9a-f-]*/container/' | cut -c1-160 || true)
  stop_servers

  echo "--- run $run (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  python3 - "$LOTE_RES" "$MOTO_RES" "$MOTO_FAILS" "$MOTO_WHY" "$BARE_S" "$N" "$CLIENTS" \
    "$RES_pernode" "$LOTE_CPU" "$CPU_pernode" "$LOTE_SELF_CPU" <<'PY'
import json, os, sys
def load(s):
    try: return json.loads(s)
    except Exception: return {"error": "no result: %r" % s[:300]}
l, m = load(sys.argv[1]), load(sys.argv[2])
pn = load(sys.argv[8])
jobs_run = int(sys.argv[6]) + 110  # 10 warm-up + N + 100 paced
bare_rate = int(sys.argv[6]) / float(sys.argv[5])
main_name = "lote (node agent)" if os.environ.get("LOTE_NODE_AGENT", "1") != "0" else "lote (per-node shim)"
for name, r, cpu in ((main_name, l, sys.argv[9]), ("lote (per-node shim)", pn, sys.argv[10])):
    if "completed" in r:
        rate = r["completed"]["jobs_per_s"]
        print("%s: %.0f completed jobs/s = %.2fx xargs; CPU %.2f ms per job (server + agent, with their children)"
              % (name, rate, rate / bare_rate, int(cpu) / jobs_run))
print("%s: the server's own CPU (its threads, no children) %.2f ms per job"
      % (main_name, int(sys.argv[11]) / jobs_run))
if "completed" in l and "completed" in pn:
    print("ratio node agent / per-node shim, completed jobs/s: %.2fx; CPU per job: %.2fx"
          % (l["completed"]["jobs_per_s"] / pn["completed"]["jobs_per_s"], int(sys.argv[9]) / max(1, int(sys.argv[10]))))
for name, r in (("lote", l), ("moto", m)):
    if "submit" in r:
        s = r["submit"]
        print("%s SubmitJob: %.0f req/s (p50 %.2f ms, p99 %.2f ms, max %.1f ms, errors %d)"
              % (name, s["rps"], s["p50_ms"], s["p99_ms"], s["max_ms"], s["errors"]))
    if "error" in r:
        print("%s ERROR: %s %s" % (name, r["error"], json.dumps(r.get("failed_example", ""))[:400]))
if "completed" in l:
    c = l["completed"]
    print("lote completed: %d jobs SUCCEEDED, %.0f jobs/s (first submit -> last stoppedAt %.2f s)"
          % (c["succeeded"], c["jobs_per_s"], c["first_submit_to_last_stop_s"]))
    for k in ("submit_to_running", "submit_to_succeeded", "running_to_succeeded"):
        v = c[k]
        print("lote %s: p50 %.0f ms, p99 %.0f ms, max %.0f ms" % (k.replace("_", " "), v["p50_ms"], v["p99_ms"], v["max_ms"]))
if "paced" in l:
    p = l["paced"]
    print("lote idle capacity (%d jobs one at a time, %d ms apart): submit -> RUNNING p50 %.0f ms, p99 %.0f ms; -> SUCCEEDED p50 %.0f ms, p99 %.0f ms"
          % (p["jobs"], p["interval_ms"], p["submit_to_running"]["p50_ms"], p["submit_to_running"]["p99_ms"],
             p["submit_to_succeeded"]["p50_ms"], p["submit_to_succeeded"]["p99_ms"]))
print("host reference: %s bare 'true' processes, xargs -P %s: %.0f/s" % (sys.argv[6], sys.argv[7], int(sys.argv[6]) / float(sys.argv[5])))
if "sample" in m:
    smp = m["sample"]
    print("moto jobs %.0f s after submitting (%d described): %s; e.g. statusReason %r"
          % (smp["after_s"], smp["described"], json.dumps(smp["statuses"]), smp["status_reason"]))
if m.get("sample"):
    print("moto log: %s jobs could not run: %s" % (sys.argv[3], sys.argv[4]))
if "submit" in l and "submit" in m:
    print("ratio lote/moto SubmitJob req/s: %.1fx" % (l["submit"]["rps"] / max(m["submit"]["rps"], 1e-9)))
PY
done
