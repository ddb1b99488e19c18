#!/usr/bin/env bash
# One training step of a lote build against another lote binary (BEFORE), in the same
# run: NPROC data-parallel ranks x THREADS, the two binaries alternately ROUNDS times
# (so both see the same load on a shared machine; the one that runs first alternates),
# each run's median step time after the first step, its median CPU seconds per step
# (rank 0's process; OpenMP waits passive, so that is work, not spinning: the steadier
# number on a loaded machine), the whole job's CPU seconds (every rank, start-up
# included), rank 0's exposed communication, its peak RSS and the load average it
# started at; prints the medians over the rounds and the ratios. THIS_ARGS and
# BEFORE_ARGS are extra `lote train` flags of each side, so one binary can be compared
# with itself (e.g. BEFORE=build/lote BEFORE_ARGS="--comm gloo" NPROC=2 THREADS=1).
#
# usage: BEFORE=/path/to/lote bench/train/step_ab.sh BUILD_DIR
#        (env: ROUNDS=3, STEPS=3, NPROC=1, THREADS=2, THIS_ARGS, BEFORE_ARGS, BENCH_SEQ=256,
#         BENCH_MICRO=4, BENCH_HIDDEN=512, BENCH_LAYERS=8, BENCH_MLP=1536: the 60 M-class model)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
ROUNDS="${ROUNDS:-3}" STEPS="${STEPS:-3}" THREADS="${THREADS:-2}" NPROC="${NPROC:-1}"
SEQ="${BENCH_SEQ:-256}" MICRO="${BENCH_MICRO:-4}"
HIDDEN="${BENCH_HIDDEN:-512}" LAYERS="${BENCH_LAYERS:-8}" MLP="${BENCH_MLP:-1536}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/config.json" <<JSON
{"hidden_size": $HIDDEN, "intermediate_size": $MLP, "num_hidden_layers": $LAYERS,
 "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
 "max_position_embeddings": $SEQ, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
 "initializer_range": 0.02}
JSON
"$PY" -c "
import sys, numpy as np
sys.path.insert(0, '$HERE/../../tests/engine')
import llama_reference as ref
rng = np.random.default_rng(0)
ref.write_dataset('$WORK/data', [list(rng.integers(2, 32000, $SEQ)) for _ in range($((MICRO * NPROC * STEPS + 8)))], $((SEQ + 1)), 32000)
"
run() {  # NAME BINARY EXTRA_ARGS
  cut -d' ' -f1 /proc/loadavg > "$WORK/$1.load"
  # shellcheck disable=SC2086
  OMP_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=passive /usr/bin/time -f "%M %U %S" -o "$WORK/$1.rss" "$2" train \
    --config "$WORK/config.json" --data "$WORK/data" --batch-size "$MICRO" --seq-len "$SEQ" \
    --global-batch-size $((MICRO * NPROC)) --nproc-per-node "$NPROC" \
    --max-steps "$STEPS" --logging-interval "$STEPS" --val-fraction 0 --threads "$THREADS" \
    --peak-gflops 1 --output "$WORK/$1" $3 > "$WORK/$1.log" 2>&1 || { cat "$WORK/$1.log"; exit 1; }
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 == 1 )); then
    run "this$r" "$BUILD/lote" "${THIS_ARGS:-}"
    run "before$r" "$BEFORE" "${BEFORE_ARGS:-}"
  else
    run "before$r" "$BEFORE" "${BEFORE_ARGS:-}"
    run "this$r" "$BUILD/lote" "${THIS_ARGS:-}"
  fi
done
"$PY" - "$WORK" "$ROUNDS" <<'PY'
import json, os, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def one(name):
    m = json.load(open(os.path.join(work, name, "metrics.json")))
    rss, user, system = open(os.path.join(work, name + ".rss")).read().split()[-3:]
    load = float(open(os.path.join(work, name + ".load")).read())
    return (statistics.median(m["step_times_s"][1:]), statistics.median(m["step_cpu_s"][1:]),
            float(user) + float(system), m.get("exposed_comm_share", 0.0), int(rss) / 1024, load)
med = statistics.median
res = {k: [one(f"{k}{r}") for r in range(1, rounds + 1)] for k in ("this", "before")}
for k, v in res.items():
    print(f"{k:7} wall s/step " + " ".join(f"{x[0]:.3f}" for x in v) + f" (median {med(x[0] for x in v):.3f})"
          f" | CPU s/step " + " ".join(f"{x[1]:.3f}" for x in v) + f" (median {med(x[1] for x in v):.3f})"
          f" | job CPU s " + " ".join(f"{x[2]:.1f}" for x in v) + f" (median {med(x[2] for x in v):.1f})"
          f" | exposed " + " ".join(f"{x[3]:.1%}" for x in v) + f" (median {med(x[3] for x in v):.1%})"
          f" | peak RSS {max(x[4] for x in v):.0f} MiB | load at start " + " ".join(f"{x[5]:.2f}" for x in v))
for i, what in ((0, "wall per step"), (1, "CPU per step"), (2, "job CPU")):
    r = [b[i] / t[i] for t, b in zip(res["this"], res["before"])]
    print(f"before / this, {what}: " + " ".join(f"{x:.2f}x" for x in r) + f" | median {med(r):.2f}x")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
