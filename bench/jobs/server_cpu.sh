#!/usr/bin/env bash
# bench/jobs/server_cpu.sh: the server's own CPU per job, this build against
# another, in alternating rounds (issue 22's goal: <= 1 ms per job).
# Each round starts a fresh `lote server` of each build (this one first, then
# PEER_BUILD, e.g. a build of main), runs the C++ load client against it
# (N jobs of `true` on idle capacity from CLIENTS connections, then PACED jobs
# one at a time 50 ms apart) and reads the server's utime + stime (its threads
# alone, not the node agent nor the commands) from /proc/<pid>/stat before and
# after the load. Alternating the builds in every round spreads what else the
# machine does over both; the medians and their ratio are printed.
# WORK_BASE (default /tmp) is where the homes go: on an ext4 without a journal,
# a file made within a minute of many deletions costs several times more (see
# docs/benchmarks.md), so put them on the filesystem you mean to measure.
# It also prints where the CPU went per thread role (the names the server
# gives its threads; a build before 2026-12-04 names none: all "lote").
# Usage: bench/jobs/server_cpu.sh BUILD_DIR PEER_BUILD [N] [ROUNDS]
#        (env: CLIENTS=8, PACED=100, WORK_BASE=/tmp)
set -euo pipefail
BUILD="$(cd "$1" && pwd)"
PEER="$(cd "$2" && pwd)"
N="${3:-2000}"
ROUNDS="${4:-3}"
CLIENTS="${CLIENTS:-8}"
PACED="${PACED:-100}"
for b in "$BUILD" "$PEER"; do
  cmake --build "$b" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null
done
WORK="$(mktemp -d "${WORK_BASE:-/tmp}/lote_bench_server_cpu.XXXXXX")"
PID=""
source "$(dirname "$0")/lib.sh"  # start_lote, agent_pid, threads
stop() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  PID=""
}
trap 'stop; rm -rf "$WORK"' EXIT
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

# measure NAME BUILD: one server of BUILD, the load; appends "NAME ms_per_job
# jobs_per_s paced_p99_ms" to $WORK/results.
measure() {
  local name="$1" build="$2" home="$WORK/home" t0 t1 res agent
  start_lote "$build/lote" "$home" "$WORK/$name.err"
  t0=$(ticks "$PID")
  threads "$PID" >"$WORK/threads.0"
  res=$("$build/bench/jobs/lote_jobs_load" --endpoint "$URL" --key "$KEY" --secret "$SECRET" \
    --jobs "$N" --clients "$CLIENTS" --setup --instance-type local --paced-jobs "$PACED")
  t1=$(ticks "$PID")
  threads "$PID" >"$WORK/threads.1"
  agent=$(agent_pid "$home")
  stop
  if [ -n "$agent" ]; then kill "$agent" 2>/dev/null || true; fi
  # Per role: ms per job of the threads alive at the end ("exited": the rest).
  python3 - "$name" "$WORK/threads.0" "$WORK/threads.1" "$t0" "$t1" "$N" "$PACED" \
    >>"$WORK/roles" <<'PY'
import collections, os, sys
name, a, b, t0, t1, n, paced = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])
jobs = n + 10 + paced
before = {l.split()[0]: int(l.split()[2]) for l in open(a)}
roles = collections.Counter()
for l in open(b):
    tid, comm, ns = l.split()
    roles[comm] += int(ns) - before.get(tid, 0)
total_ns = (t1 - t0) * 1e9 / os.sysconf("SC_CLK_TCK")
roles["exited"] = max(0, total_ns - sum(roles.values()))
print(name, " ".join("%s=%.3f" % (r, v / 1e6 / jobs) for r, v in roles.items()))
PY
  python3 - "$name" "$res" "$t0" "$t1" "$N" "$PACED" >>"$WORK/results" <<'PY'
import json, os, sys
name, res, t0, t1, n, paced = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
jobs = n + 10 + paced  # the client's 10 warm-up jobs, the burst, the paced ones
ms = (t1 - t0) * 1000.0 / os.sysconf("SC_CLK_TCK") / jobs
p99 = res["paced"]["submit_to_running"]["p99_ms"] if "paced" in res else float("nan")
print(name, "%.3f" % ms, "%.0f" % res["completed"]["jobs_per_s"], "%.0f" % p99)
PY
}

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); N=$N jobs of \`true\`, then $PACED paced; homes on $(findmnt -n -o FSTYPE -T "$WORK")"
for round in $(seq "$ROUNDS"); do
  measure this "$BUILD"
  measure peer "$PEER"
  tail -2 "$WORK/results" | sed "s/^/round $round: /"
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def col(name, i): return [float(r[i]) for r in rows if r[0] == name]
for name in ("this", "peer"):
    print("%s: server's own CPU per job median %.2f ms (%s); completed jobs/s median %.0f; paced submit -> RUNNING p99 median %.0f ms"
          % (name, statistics.median(col(name, 1)), ", ".join("%.2f" % v for v in col(name, 1)),
             statistics.median(col(name, 2)), statistics.median(col(name, 3))))
print("ratio this/peer: server CPU per job %.2fx, completed jobs/s %.2fx"
      % (statistics.median(col("this", 1)) / statistics.median(col("peer", 1)),
         statistics.median(col("this", 2)) / statistics.median(col("peer", 2))))
# The rounds as pairs (each round runs both builds back to back): how often
# this build used less, and the mean of the differences with its standard
# error. The machine's noise between rounds is large; a difference smaller
# than two standard errors is not one.
diffs = [t - p for t, p in zip(col("this", 1), col("peer", 1))]
if len(diffs) >= 2:
    mean = statistics.mean(diffs)
    se = statistics.stdev(diffs) / len(diffs) ** 0.5
    print("paired rounds: this used less CPU per job in %d of %d; mean difference %+.3f ms "
          "(standard error %.3f)" % (sum(d < 0 for d in diffs), len(diffs), mean, se))
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
# Where the server's CPU went, per thread role (medians over the rounds, ms per job).
python3 - "$WORK/roles" <<'PY'
import collections, statistics, sys
per = {"this": collections.defaultdict(list), "peer": collections.defaultdict(list)}
for l in open(sys.argv[1]):
    name, *kv = l.split()
    for item in kv:
        role, v = item.rsplit("=", 1)
        per[name][role].append(float(v))
for name in ("this", "peer"):
    roles = sorted(per[name].items(), key=lambda kv: -statistics.median(kv[1]))
    print("%s per thread role (ms per job): %s" % (name, ", ".join(
        "%s %.3f" % (r, statistics.median(v)) for r, v in roles if statistics.median(v) >= 0.005)))
PY
