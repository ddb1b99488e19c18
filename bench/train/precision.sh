#!/usr/bin/env bash
# bf16 mixed precision (issue 43) on the 60 M-class model (hidden 512, 8 layers, MLP 1536,
# vocab 32000, micro batch 4 x seq 256), in one run, each configuration ROUNDS times in
# turn so all see the same load:
#   - lote, 1 rank x THREADS and TP=2 (2 ranks x THREADS/2): --precision fp32 | bf16-mixed;
#   - PyTorch (the engine tests' reference Llama, torch_recompute_train.py), THREADS
#     threads: fp32, and forward under torch.autocast(cpu, bfloat16).
# Per run: median step time after the first step, peak RSS (for lote the largest process:
# the launcher or a rank) and lote's planned total per rank. Prints the medians over the
# rounds and the ratios the issue asks for.
#
# usage: bench/train/precision.sh BUILD_DIR   (env: ROUNDS=2, STEPS=4, THREADS=2,
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
  mv "$WORK/$name.log" "$WORK/$name.$r.log"
  mv "$WORK/$name.rss" "$WORK/$name.$r.rss"
}
torch() {  # PRECISION
  OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" "$PY" "$HERE/torch_recompute_train.py" \
    "$WORK/config.json" "$MICRO" "$SEQ" "$STEPS" "$THREADS" none "$1" > "$WORK/torch_$1.$r.json"
}
echo "config: 60 M-class (hidden 512, 8 layers, MLP 1536, vocab 32000), micro batch $MICRO x seq $SEQ;" \
  "$ROUNDS rounds of $STEPS steps; lote 1 rank x $THREADS threads and TP=2 x $TP_THREADS threads;" \
  "CPU flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ');" \
  "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  for p in fp32 bf16-mixed; do
    lote "r1_$p" 1 "$THREADS" --precision "$p"
    lote "tp2_$p" 2 "$TP_THREADS" --precision "$p"
  done
  if [[ "$TORCH" != 0 ]]; then
    torch fp32
    torch bf16-autocast
  fi
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
            "acts": planned(log, "activations"), "total": planned(log, "total")}
def peer(p):
    runs = [json.load(open(os.path.join(work, f"torch_{p}.{r}.json"))) for r in range(1, rounds + 1)]
    return {"step": med(x["step_s"] for x in runs), "steps": [x["step_s"] for x in runs],
            "rss": max(x["peak_rss_mib"] for x in runs)}
L = {n: lote(n) for n in ("r1_fp32", "r1_bf16-mixed", "tp2_fp32", "tp2_bf16-mixed")}
print(f"{'run':25} {'s/step (rounds)':>28} {'peak RSS':>10} {'plan acts':>10} {'plan total':>11} {'RSS/plan':>9}")
for n, x in L.items():
    print(f"lote {n:20} {x['step']:7.3f} ({' '.join(f'{s:.3f}' for s in x['steps'])}) "
          f"{x['rss']:7.0f} MiB {x['acts']:6.0f} MiB {x['total']:7.0f} MiB {x['rss'] / x['total']:8.2f}x")
P = {p: peer(p) for p in ("fp32", "bf16-autocast")} if torch else {}
for p, x in P.items():
    print(f"torch {p:19} {x['step']:7.3f} ({' '.join(f'{s:.3f}' for s in x['steps'])}) {x['rss']:7.0f} MiB")
def ratio(what, a, b, goal):
    print(f"{what:70} {a / b:5.2f}x  (issue: {goal})")
print("ratios:")
ratio("TP=2 peak RSS per rank, bf16-mixed / fp32", L["tp2_bf16-mixed"]["rss"], L["tp2_fp32"]["rss"], "<= 0.7x")
ratio("TP=2 planned total per rank, bf16-mixed / fp32", L["tp2_bf16-mixed"]["total"], L["tp2_fp32"]["total"], "-")
ratio("1 rank peak RSS, bf16-mixed / fp32", L["r1_bf16-mixed"]["rss"], L["r1_fp32"]["rss"], "-")
ratio("speed (fp32 step time / bf16-mixed step time), 1 rank", L["r1_fp32"]["step"], L["r1_bf16-mixed"]["step"], ">= 0.9x")
ratio("speed (fp32 step time / bf16-mixed step time), TP=2", L["tp2_fp32"]["step"], L["tp2_bf16-mixed"]["step"], ">= 0.9x")
if P:
    ratio("PyTorch bf16 autocast / lote bf16-mixed step time (1 rank)", P["bf16-autocast"]["step"], L["r1_bf16-mixed"]["step"], ">= 3x")
    ratio("PyTorch fp32 / lote fp32 step time (1 rank)", P["fp32"]["step"], L["r1_fp32"]["step"], "-")
    ratio("PyTorch bf16 autocast / PyTorch fp32 step time", P["bf16-autocast"]["step"], P["fp32"]["step"], "-")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
