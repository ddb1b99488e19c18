#!/usr/bin/env bash
# bf16 mixed precision (issue 43) on the 60 M-class model (hidden 512, 8 layers, MLP 1536,
# vocab 32000), in one run, in up to two shapes (BENCH_SHAPES, default "base acts"):
#   base: micro batch BENCH_MICRO x seq BENCH_SEQ (4 x 256), ROUNDS rounds of STEPS steps,
#     each configuration in turn per round so all see the same load:
#     - lote, 1 rank x THREADS and TP=2 (2 ranks x THREADS/2): --precision fp32 | bf16-mixed;
#     - PyTorch (the engine tests' reference Llama, torch_recompute_train.py), THREADS
#       threads: fp32, and forward under torch.autocast(cpu, bfloat16).
#     Parameters, gradients and optimizer state dominate a rank's memory here.
#   acts: activations dominate: micro batch BENCH_ACTS_MICRO x seq BENCH_ACTS_SEQ (8 x 1024,
#     32x the tokens of base), one round of ACTS_STEPS (2) steps, lote at TP=2 only, and
#     PyTorch with its attention core checkpointed (torch_recompute_train.py `selective`):
#     lote never keeps the [T, T] scores or probabilities in any mode, and PyTorch's
#     plain attention keeps [B, nh, T, T] tensors per layer (256 MiB each here), which is
#     not the precision's memory.
# Per run: median step time after the first step, peak RSS (for lote the largest process:
# the launcher or a rank) and lote's planned activations and total per rank. Prints the
# medians over the rounds and the ratios the issue asks for.
#
# usage: bench/train/precision.sh BUILD_DIR   (env: BENCH_SHAPES="base acts", ROUNDS=2,
#        STEPS=4, THREADS=2, BENCH_TORCH=1, BENCH_SEQ=256, BENCH_MICRO=4,
#        BENCH_ACTS_SEQ=1024, BENCH_ACTS_MICRO=8, ACTS_STEPS=2)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
SHAPES="${BENCH_SHAPES:-base acts}"
ROUNDS="${ROUNDS:-2}" STEPS="${STEPS:-4}" THREADS="${THREADS:-2}" TORCH="${BENCH_TORCH:-1}"
SEQ="${BENCH_SEQ:-256}" MICRO="${BENCH_MICRO:-4}"
ACTS_SEQ="${BENCH_ACTS_SEQ:-1024}" ACTS_MICRO="${BENCH_ACTS_MICRO:-8}" ACTS_STEPS="${ACTS_STEPS:-2}"
TP_THREADS=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
MAX_SEQ=$(( SEQ > ACTS_SEQ ? SEQ : ACTS_SEQ ))
cat > "$WORK/config.json" <<JSON
{"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8,
 "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
 "max_position_embeddings": $MAX_SEQ, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
 "initializer_range": 0.02}
JSON
dataset() {  # DIR SEQ SEQUENCES
  "$PY" -c "
import sys, numpy as np
sys.path.insert(0, '$HERE/../../tests/engine')
import llama_reference as ref
rng = np.random.default_rng(0)
ref.write_dataset('$1', [list(rng.integers(2, 32000, $2)) for _ in range($3)], $(($2 + 1)), 32000)
"
}
# The shape being run: micro batch, sequence, steps, data (set by each shape's loop).
micro=0 seq=0 steps=0 data=""
lote() {  # NAME NPROC THREADS FLAGS...
  local name=$1 nproc=$2 threads=$3
  shift 3
  OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=passive /usr/bin/time -f "%M" -o "$WORK/$name.rss" \
    "$BUILD/lote" train --config "$WORK/config.json" --data "$data" --batch-size "$micro" \
    --seq-len "$seq" --global-batch-size "$micro" --nproc-per-node "$nproc" \
    --tensor-parallel-size "$nproc" --max-steps "$steps" --logging-interval 1 \
    --val-fraction 0 --threads "$threads" --peak-gflops 1 "$@" > "$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; exit 1; }
  mv "$WORK/$name.log" "$WORK/$name.$r.log"
  mv "$WORK/$name.rss" "$WORK/$name.$r.rss"
}
torch() {  # NAME RECOMPUTE PRECISION
  OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" "$PY" "$HERE/torch_recompute_train.py" \
    "$WORK/config.json" "$micro" "$seq" "$steps" "$THREADS" "$2" "$3" > "$WORK/$1.$r.json"
}
echo "config: 60 M-class (hidden 512, 8 layers, MLP 1536, vocab 32000); shapes: $SHAPES;" \
  "base: micro batch $MICRO x seq $SEQ, $ROUNDS rounds of $STEPS steps, lote 1 rank x $THREADS" \
  "threads and TP=2 x $TP_THREADS threads; acts: micro batch $ACTS_MICRO x seq $ACTS_SEQ," \
  "1 round of $ACTS_STEPS steps, lote TP=2 x $TP_THREADS threads;" \
  "CPU flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ');" \
  "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
for shape in $SHAPES; do
  case "$shape" in
    base)
      micro=$MICRO seq=$SEQ steps=$STEPS rounds=$ROUNDS
      data="$WORK/data_base"
      dataset "$data" "$seq" $((micro * steps + 8))
      for r in $(seq 1 "$rounds"); do
        for p in fp32 bf16-mixed; do
          lote "base_r1_$p" 1 "$THREADS" --precision "$p"
          lote "base_tp2_$p" 2 "$TP_THREADS" --precision "$p"
        done
        if [[ "$TORCH" != 0 ]]; then
          torch base_torch_fp32 none fp32
          torch base_torch_bf16-autocast none bf16-autocast
        fi
      done
      ;;
    acts)
      micro=$ACTS_MICRO seq=$ACTS_SEQ steps=$ACTS_STEPS r=1
      data="$WORK/data_acts"
      dataset "$data" "$seq" $((micro * steps + 8))
      for p in fp32 bf16-mixed; do
        lote "acts_tp2_$p" 2 "$TP_THREADS" --precision "$p"
      done
      if [[ "$TORCH" != 0 ]]; then
        torch acts_torch_fp32 selective fp32
        torch acts_torch_bf16-autocast selective bf16-autocast
      fi
      ;;
    *) echo "BENCH_SHAPES: $shape is not base or acts" >&2; exit 2 ;;
  esac
done
"$PY" - "$WORK" "$SHAPES" "$ROUNDS" "$TORCH" "$((MICRO * SEQ))" "$((ACTS_MICRO * ACTS_SEQ))" <<'PY'
import json, os, re, statistics, sys
work, shapes, torch = sys.argv[1], sys.argv[2].split(), sys.argv[4] != "0"
rounds = {"base": int(sys.argv[3]), "acts": 1}
tokens = {"base": int(sys.argv[5]), "acts": int(sys.argv[6])}
med = statistics.median
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
def planned(log, what):  # MiB of the first plan line `what`: the plan the run used
    m = re.search(r"^  %s\s+([0-9.]+) (\w+)$" % re.escape(what), log, re.M)
    return float(m.group(1)) * UNITS[m.group(2)] / 2**20
def lote(shape, name):  # median step s (after the first step), peak RSS MiB, planned MiB
    step, rss = [], []
    for r in range(1, rounds[shape] + 1):
        log = open(os.path.join(work, f"{shape}_{name}.{r}.log")).read()
        tps = [float(x) for x in re.findall(r"^step .*\| ([0-9.]+) tokens/s", log, re.M)]
        step.append(med([tokens[shape] / x for x in (tps[1:] or tps)]))
        rss.append(int(open(os.path.join(work, f"{shape}_{name}.{r}.rss")).read().split()[-1]) / 1024)
    return {"step": med(step), "steps": step, "rss": max(rss),
            "acts": planned(log, "activations"), "total": planned(log, "total")}
def peer(shape, p):
    runs = [json.load(open(os.path.join(work, f"{shape}_torch_{p}.{r}.json")))
            for r in range(1, rounds[shape] + 1)]
    return {"step": med(x["step_s"] for x in runs), "steps": [x["step_s"] for x in runs],
            "rss": max(x["peak_rss_mib"] for x in runs)}
def ratio(what, a, b, goal):
    print(f"{what:70} {a / b:5.2f}x  (issue: {goal})")
for shape in shapes:
    ranks = ("r1", "tp2") if shape == "base" else ("tp2",)
    L = {f"{k}_{p}": lote(shape, f"{k}_{p}") for k in ranks for p in ("fp32", "bf16-mixed")}
    P = {p: peer(shape, p) for p in ("fp32", "bf16-autocast")} if torch else {}
    print(f"{shape}: micro batch x seq = {tokens[shape]} tokens a step")
    print(f"{'run':25} {'s/step (rounds)':>28} {'peak RSS':>10} {'plan acts':>10} {'plan total':>11} {'RSS/plan':>9}")
    for n, x in L.items():
        print(f"lote {n:20} {x['step']:7.3f} ({' '.join(f'{s:.3f}' for s in x['steps'])}) "
              f"{x['rss']:7.0f} MiB {x['acts']:6.0f} MiB {x['total']:7.0f} MiB {x['rss'] / x['total']:8.2f}x")
    for p, x in P.items():
        print(f"torch {p:19} {x['step']:7.3f} ({' '.join(f'{s:.3f}' for s in x['steps'])}) {x['rss']:7.0f} MiB")
    print(f"ratios ({shape}):")
    ratio("TP=2 peak RSS per rank, bf16-mixed / fp32", L["tp2_bf16-mixed"]["rss"], L["tp2_fp32"]["rss"], "<= 0.7x")
    ratio("TP=2 planned total per rank, bf16-mixed / fp32", L["tp2_bf16-mixed"]["total"], L["tp2_fp32"]["total"], "-")
    ratio("TP=2 planned activations per rank, bf16-mixed / fp32", L["tp2_bf16-mixed"]["acts"], L["tp2_fp32"]["acts"], "-")
    if "r1_fp32" in L:
        ratio("1 rank peak RSS, bf16-mixed / fp32", L["r1_bf16-mixed"]["rss"], L["r1_fp32"]["rss"], "-")
        ratio("speed (fp32 step time / bf16-mixed step time), 1 rank", L["r1_fp32"]["step"], L["r1_bf16-mixed"]["step"], ">= 0.9x")
    ratio("speed (fp32 step time / bf16-mixed step time), TP=2", L["tp2_fp32"]["step"], L["tp2_bf16-mixed"]["step"], ">= 0.9x")
    if P:
        ratio("PyTorch peak RSS, bf16 autocast / fp32", P["bf16-autocast"]["rss"], P["fp32"]["rss"], "-")
        if "r1_fp32" in L:
            ratio("PyTorch bf16 autocast / lote bf16-mixed step time (1 rank)", P["bf16-autocast"]["step"], L["r1_bf16-mixed"]["step"], ">= 3x")
            ratio("PyTorch fp32 / lote fp32 step time (1 rank)", P["fp32"]["step"], L["r1_fp32"]["step"], "-")
        else:
            ratio("PyTorch bf16 autocast (2 threads) / lote bf16-mixed TP=2 step time", P["bf16-autocast"]["step"], L["tp2_bf16-mixed"]["step"], "-")
        ratio("PyTorch bf16 autocast / PyTorch fp32 step time", P["bf16-autocast"]["step"], P["fp32"]["step"], "-")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
