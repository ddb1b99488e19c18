#!/usr/bin/env bash
# Issue 43's techniques on the 60 M-class model (hidden 512, 8 layers, MLP 1536, vocab
# 32000, micro batch 4 x seq 256), in one run, each configuration ROUNDS times in turn
# so all see the same load:
#   - lote, 1 rank x THREADS: --activation-recompute none | selective | full;
#   - lote, TP=2 (2 ranks x THREADS/2): without and with --sequence-parallel, each with
#     recompute none and selective;
#   - PyTorch (the engine tests' reference Llama, torch_recompute_train.py), THREADS
#     threads: no checkpointing, the attention core checkpointed (selective), every
#     layer checkpointed (full).
# Per run: median step time after the first step, peak RSS (for lote the largest
# process: the launcher or a rank) and lote's planned activations and total per rank
# (the plan it prints). Prints the medians over the rounds and the ratios the issue
# asks for.
#
# usage: bench/train/techniques.sh BUILD_DIR   (env: ROUNDS=2, STEPS=4, THREADS=2,
#        BENCH_TORCH=1, BENCH_SEQ=256, BENCH_MICRO=4)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
ROUNDS="${ROUNDS:-2}" STEPS="${STEPS:-4}" THREADS="${THREADS:-2}" TORCH="${BENCH_TORCH:-1}"
SEQ="${BENCH_SEQ:-256}" MICRO="${BENCH_MICRO:-4}"
TP_THREADS=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/config.json" <<JSON
{"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8,
 "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
 "max_position_embeddings": $SEQ, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
 "initializer_range": 0.02}
JSON
"$PY" -c "
import sys, numpy as np
sys.path.insert(0, '$HERE/../../tests/engine')
import llama_reference as ref
rng = np.random.default_rng(0)
ref.write_dataset('$WORK/data', [list(rng.integers(2, 32000, $SEQ)) for _ in range($((MICRO * STEPS + 8)))], $((SEQ + 1)), 32000)
"
lote() {  # NAME NPROC THREADS FLAGS...
  local name=$1 nproc=$2 threads=$3
  shift 3
  OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=passive /usr/bin/time -f "%M" -o "$WORK/$name.rss" \
    "$BUILD/lote" train --config "$WORK/config.json" --data "$WORK/data" --batch-size "$MICRO" \
    --seq-len "$SEQ" --global-batch-size "$MICRO" --nproc-per-node "$nproc" \
    --tensor-parallel-size "$nproc" --max-steps "$STEPS" --logging-interval 1 \
    --val-fraction 0 --threads "$threads" --peak-gflops 1 "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; exit 1; }
  cp "$WORK/$name.log" "$WORK/$name.$r.log"
  mv "$WORK/$name.rss" "$WORK/$name.$r.rss"
}
torch() {  # MODE
  OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" "$PY" "$HERE/torch_recompute_train.py" \
    "$WORK/config.json" "$MICRO" "$SEQ" "$STEPS" "$THREADS" "$1" > "$WORK/torch_$1.$r.json"
}
echo "config: 60 M-class (hidden 512, 8 layers, MLP 1536, vocab 32000), micro batch $MICRO x seq $SEQ;" \
  "$ROUNDS rounds of $STEPS steps; lote 1 rank x $THREADS threads and TP=2 x $TP_THREADS threads;" \
  "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  for mode in none selective full; do
    lote "r1_$mode" 1 "$THREADS" --activation-recompute "$mode"
    if [[ "$TORCH" != 0 ]]; then torch "$mode"; fi
  done
  for sp in off on; do
    for mode in none selective; do
      lote "tp2_sp${sp}_$mode" 2 "$TP_THREADS" --activation-recompute "$mode" \
        $([[ $sp == on ]] && echo --sequence-parallel)
    done
  done
done
"$PY" - "$WORK" "$ROUNDS" "$TORCH" "$((MICRO * SEQ))" <<'PY'
import json, os, re, statistics, sys
work, rounds, torch, tokens = sys.argv[1], int(sys.argv[2]), sys.argv[3] != "0", int(sys.argv[4])
med = statistics.median
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
def planned(log, what):  # MiB of the first plan line `what`: the plan the run used
    m = re.search(r"^  %s\s+([0-9.]+) (\w+)$" % re.escape(what), log, re.M)
    return float(m.group(1)) * UNITS[m.group(2)] / 2**20
def lote(name):  # median step s (after the first step), peak RSS MiB, planned MiB
    step, rss = [], []
    for r in range(1, rounds + 1):
        log = open(os.path.join(work, f"{name}.{r}.log")).read()
        tps = [float(x) for x in re.findall(r"^step .*\| ([0-9.]+) tokens/s", log, re.M)]
        step.append(med([tokens / x for x in tps[1:]]))
        rss.append(int(open(os.path.join(work, f"{name}.{r}.rss")).read().split()[-1]) / 1024)
    return {"step": med(step), "steps": step, "rss": max(rss),
            "acts": planned(log, "activations"), "act_grads": planned(log, "activation gradients"),
            "total": planned(log, "total")}
def peer(mode):
    runs = [json.load(open(os.path.join(work, f"torch_{mode}.{r}.json"))) for r in range(1, rounds + 1)]
    return {"step": med(x["step_s"] for x in runs), "steps": [x["step_s"] for x in runs],
            "rss": max(x["peak_rss_mib"] for x in runs)}
L = {n: lote(n) for n in ("r1_none", "r1_selective", "r1_full", "tp2_spoff_none",
                          "tp2_spoff_selective", "tp2_spon_none", "tp2_spon_selective")}
print(f"{'run':25} {'s/step (rounds)':>28} {'peak RSS':>10} {'plan acts':>10} {'plan total':>11} {'RSS/plan':>9}")
for n, x in L.items():
    print(f"lote {n:20} {x['step']:7.3f} ({' '.join(f'{s:.3f}' for s in x['steps'])}) "
          f"{x['rss']:7.0f} MiB {x['acts']:6.0f} MiB {x['total']:7.0f} MiB {x['rss'] / x['total']:8.2f}x")
P = {m: peer(m) for m in ("none", "selective", "full")} if torch else {}
for m, x in P.items():
    print(f"torch {m:19} {x['step']:7.3f} ({' '.join(f'{s:.3f}' for s in x['steps'])}) {x['rss']:7.0f} MiB")
def ratio(what, a, b, goal):
    print(f"{what:70} {a / b:5.2f}x  (issue: {goal})")
print("ratios:")
ratio("TP=2 peak RSS per rank, sequence parallel / without", L["tp2_spon_none"]["rss"], L["tp2_spoff_none"]["rss"], "<= 0.75x")
ratio("TP=2 planned total per rank, sequence parallel / without", L["tp2_spon_none"]["total"], L["tp2_spoff_none"]["total"], "-")
ratio("planned activations, selective / none (1 rank)", L["r1_selective"]["acts"], L["r1_none"]["acts"], "<= 0.6x")
ratio("planned activations, full / none (1 rank)", L["r1_full"]["acts"], L["r1_none"]["acts"], "-")
ratio("peak RSS, selective / none (1 rank)", L["r1_selective"]["rss"], L["r1_none"]["rss"], "-")
ratio("peak RSS, full / none (1 rank)", L["r1_full"]["rss"], L["r1_none"]["rss"], "-")
ratio("step time, selective / none (1 rank)", L["r1_selective"]["step"], L["r1_none"]["step"], "<= 1.05x")
ratio("step time, full / none (1 rank)", L["r1_full"]["step"], L["r1_none"]["step"], "-")
ratio("step time, TP=2 sequence parallel / without", L["tp2_spon_none"]["step"], L["tp2_spoff_none"]["step"], "-")
for m, x in P.items():
    ratio(f"PyTorch / lote step time, recompute {m}", x["step"], L[f"r1_{m}"]["step"], ">= 3x")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
