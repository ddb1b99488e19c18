#!/usr/bin/env bash
# bench/jobs/array_cpu.sh: where the CPU of one array job goes, per child, this
# build against another, in alternating rounds (issue 22).
# Each round starts a fresh `lote server` of each build (this one first, then
# PEER_BUILD), runs 10 warm-up jobs (which also start the node agent), then
# one array of N children of `true` on idle capacity, and reads, before and
# after the array: the server's utime + stime (its threads alone) and each of
# its threads' CPU by role (schedstat), the node agent's own utime + stime and
# its reaped children's cutime + cstime (the commands). Printed per child, with
# children/s (first submit -> the parent's stoppedAt), medians and ratios.
# WORK_BASE (default /tmp) is where the homes go (see server_cpu.sh).
# Usage: bench/jobs/array_cpu.sh BUILD_DIR PEER_BUILD [N] [ROUNDS]
#        (env: WORK_BASE=/tmp)
set -euo pipefail
BUILD="$(cd "$1" && pwd)"
PEER="$(cd "$2" && pwd)"
N="${3:-10000}"
ROUNDS="${4:-3}"
for b in "$BUILD" "$PEER"; do
  cmake --build "$b" -j2 --target lote lote-exec-shim lote_jobs_load >/dev/null
done
WORK="$(mktemp -d "${WORK_BASE:-/tmp}/lote_bench_array_cpu.XXXXXX")"
PID=""
AGENT=""
source "$(dirname "$0")/lib.sh"  # start_lote, agent_pid, threads
stop() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  if [ -n "$AGENT" ]; then kill "$AGENT" 2>/dev/null || true; fi
  PID=""
  AGENT=""
}
trap 'stop; rm -rf "$WORK"' EXIT
# "own children" CPU ticks of a process: utime + stime, cutime + cstime.
ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13, $14 + $15}'; }

# measure NAME BUILD: appends "NAME server_ms agent_ms commands_ms children_per_s
# role=ms..." (per child) to $WORK/results.
measure() {
  local name="$1" build="$2" home="$WORK/home" s0 s1 a0 a1 res
  start_lote "$build/lote" "$home" "$WORK/$name.err"
  "$build/bench/jobs/lote_jobs_load" --endpoint "$URL" --key "$KEY" --secret "$SECRET" \
    --jobs 10 --clients 2 --setup --instance-type local --paced-jobs 0 >/dev/null
  AGENT=$(agent_pid "$home")
  if [ -z "$AGENT" ]; then
    echo "no node agent in $home (LOTE_NODE_AGENT=0?): the agent's share cannot be read" >&2
    exit 1
  fi
  s0=$(ticks "$PID") a0=$(ticks "$AGENT")
  threads "$PID" >"$WORK/threads.0"
  res=$("$build/bench/jobs/lote_jobs_load" --endpoint "$URL" --key "$KEY" --secret "$SECRET" \
    --jobs "$N" --instance-type local --array-size "$N" --wait-seconds 900 --poll-ms 200)
  s1=$(ticks "$PID") a1=$(ticks "$AGENT")
  threads "$PID" >"$WORK/threads.1"
  stop
  python3 - "$name" "$res" "$s0" "$s1" "$a0" "$a1" "$N" "$WORK/threads.0" "$WORK/threads.1" \
    >>"$WORK/results" <<'PY'
import collections, json, os, sys
name, res = sys.argv[1], json.loads(sys.argv[2])
s0, s1, a0, a1 = ([int(x) for x in v.split()] for v in sys.argv[3:7])
n = int(sys.argv[7])
tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
server, agent, commands = ((s1[0] - s0[0]) * tick_ms / n, (a1[0] - a0[0]) * tick_ms / n,
                           (a1[1] - a0[1]) * tick_ms / n)
before = {l.split()[0]: int(l.split()[2]) for l in open(sys.argv[8])}
roles = collections.Counter()
for l in open(sys.argv[9]):
    tid, comm, ns = l.split()
    roles[comm] += int(ns) - before.get(tid, 0)
roles["exited"] = max(0, server * n * 1e6 - sum(roles.values()))  # the hand-over helpers
c = res["completed"]
if c["status"] != "SUCCEEDED":
    sys.exit("%s: the array ended %s: %s" % (name, c["status"], json.dumps(c)[:300]))
print(name, "%.3f %.3f %.3f %.0f" % (server, agent, commands, c["jobs_per_s"]),
      " ".join("%s=%.3f" % (r, v / 1e6 / n) for r, v in roles.items()))
PY
}

date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); one array of N=$N children of \`true\`; homes on $(findmnt -n -o FSTYPE -T "$WORK")"
for round in $(seq "$ROUNDS"); do
  measure this "$BUILD"
  measure peer "$PEER"
  tail -2 "$WORK/results" | cut -d' ' -f1-5 | sed "s/^/round $round: (server agent commands ms per child, children\/s) /"
done
python3 - "$WORK/results" <<'PY'
import collections, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def col(name, i): return [float(r[i]) for r in rows if r[0] == name]
med = lambda name, i: statistics.median(col(name, i))
for name in ("this", "peer"):
    print("%s: per child, server's own CPU %.3f ms (%s), node agent %.3f, the commands %.3f; "
          "children/s %.0f (medians)" % (name, med(name, 1), ", ".join("%.3f" % v for v in col(name, 1)),
                                         med(name, 2), med(name, 3), med(name, 4)))
print("ratio this/peer: server CPU per child %.2fx, agent %.2fx, children/s %.2fx"
      % (med("this", 1) / med("peer", 1), med("this", 2) / med("peer", 2), med("this", 4) / med("peer", 4)))
diffs = [t - p for t, p in zip(col("this", 1), col("peer", 1))]
if len(diffs) >= 2:
    print("paired rounds: this used less server CPU per child in %d of %d; mean difference "
          "%+.3f ms (standard error %.3f)" % (sum(d < 0 for d in diffs), len(diffs),
                                              statistics.mean(diffs),
                                              statistics.stdev(diffs) / len(diffs) ** 0.5))
for name in ("this", "peer"):
    per = collections.defaultdict(list)
    for r in rows:
        if r[0] != name: continue
        for item in r[5:]:
            role, v = item.rsplit("=", 1)
            per[role].append(float(v))
    roles = sorted(per.items(), key=lambda kv: -statistics.median(kv[1]))
    print("%s per thread role (ms per child): %s" % (name, ", ".join(
        "%s %.3f" % (r, statistics.median(v)) for r, v in roles if statistics.median(v) >= 0.005)))
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
