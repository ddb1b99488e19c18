#!/usr/bin/env bash
# Training-step benchmark: lote's CPU engine vs the same Llama in PyTorch (the engine
# tests' reference model), same config, batch, threads and recipe, in the same run.
# Config: hidden 512, 8 layers, 8 heads, intermediate 1536, vocab 32000, seq 512,
# micro batch 8 (4096 tokens per step). Also reports lote's achieved model GFLOP/s
# (6N + attention FLOPs per token) as a fraction of OpenBLAS's sgemm peak measured now.
#
# usage: bench/train/run.sh BUILD_DIR   (env: BENCH_THREADS=nproc, BENCH_STEPS=3)
#   BENCH_BASELINE=/path/to/other/lote  also time another lote binary (e.g. the previous
#                                       commit's) on the same data in the same run
#   BENCH_TORCH=0                       skip the PyTorch peer (the sgemm peak is still measured)
#   BENCH_SEQ=512 BENCH_BATCH=8         another sequence length / micro batch
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
LOTE="$BUILD/lote"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
THREADS="${BENCH_THREADS:-$(nproc)}"
STEPS="${BENCH_STEPS:-3}"
BATCH="${BENCH_BATCH:-8}"
SEQ="${BENCH_SEQ:-512}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/config.json" <<JSON
{"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8,
 "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
 "max_position_embeddings": $SEQ, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
 "initializer_range": 0.02}
JSON

# A dataset of random tokens in lote's format: enough blocks for every step.
"$PY" -c "
import sys, numpy as np
sys.path.insert(0, '$HERE/../../tests/engine')
import llama_reference as ref
n, block = $((BATCH * STEPS + 8)), $((SEQ + 1))
rng = np.random.default_rng(0)
ref.write_dataset('$WORK/data', [list(rng.integers(2, 32000, block - 1))] * n, block, 32000)
"

BASELINE="${BENCH_BASELINE:-}"
TORCH="${BENCH_TORCH:-1}"
echo "config: hidden 512, 8 layers, 8 heads, seq $SEQ, micro batch $BATCH, vocab 32000; threads $THREADS, $STEPS steps (first is warm-up)"
run_lote() {  # binary, output dir
  OMP_NUM_THREADS="$THREADS" "$1" train --config "$WORK/config.json" --data "$WORK/data" \
    --batch-size $BATCH --seq-len $SEQ --max-steps "$STEPS" --logging-interval 1 \
    --val-fraction 0 --threads "$THREADS" --output "$2" | grep -v '^LOTE_PROGRESS'
}
run_lote "$LOTE" "$WORK/out"
if [[ -n "$BASELINE" ]]; then
  echo "baseline: $BASELINE"
  run_lote "$BASELINE" "$WORK/base"
fi
if [[ "$TORCH" != 0 ]]; then
  OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" \
    "$PY" "$HERE/torch_train.py" "$WORK/config.json" $BATCH $SEQ "$STEPS" "$THREADS" > "$WORK/torch.json"
else
  OPENBLAS_NUM_THREADS="$THREADS" "$PY" -c "
import json, sys
sys.path.insert(0, '$HERE')
import torch_train
peak, peak_cpu = torch_train.sgemm_peak()
print(json.dumps({'sgemm_peak_gflops': peak, 'sgemm_peak_gflops_per_cpu_s': peak_cpu}))
" > "$WORK/torch.json"
fi

"$PY" - "$WORK/out/metrics.json" "$WORK/torch.json" "$THREADS" "$WORK/base/metrics.json" <<'PY'
import json, os, statistics, sys
lote = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2]))
threads = int(sys.argv[3])
base = json.load(open(sys.argv[4])) if os.path.exists(sys.argv[4]) else None
med = lambda xs: statistics.median(xs[1:]) if len(xs) > 1 else xs[0]
tokens = lote["tokens_per_step"]
flops = lote["flops_per_token"] * tokens
peak, peak_cpu = torch["sgemm_peak_gflops"], torch["sgemm_peak_gflops_per_cpu_s"]
rows = [("lote", med(lote["step_times_s"]), med(lote["step_cpu_s"]))]
if base is not None:
    rows.append(("baseline", med(base["step_times_s"]), med(base["step_cpu_s"])))
if "step_s" in torch:
    rows.append(("pytorch", torch["step_s"], torch["step_cpu_s"]))
print("wall clock (median step after warm-up):")
print(f"  {'':10}{'step s':>10}{'tokens/s':>12}{'GFLOP/s':>10}{'of sgemm peak':>15}")
for name, step, _ in rows:
    g = flops / step / 1e9
    print(f"  {name:10}{step:>10.3f}{tokens / step:>12.0f}{g:>10.1f}{g / peak:>14.1%}")
print(f"  OpenBLAS sgemm peak (numpy float32 2048^3, {threads} threads): {peak:.1f} GFLOP/s")
for name, step, _ in rows[1:]:
    print(f"  ratio lote/{name} (tokens/s): {step / rows[0][1]:.2f}x")
print("CPU time (process CPU-seconds per step; robust when other work shares the machine):")
for name, _, cpu in rows:
    g = flops / cpu / 1e9
    print(f"  {name:10}{cpu:>10.2f} CPU-s/step  {g:>7.1f} GFLOP per CPU-s  {g / peak_cpu:>6.1%} of sgemm's {peak_cpu:.1f}")
for name, _, cpu in rows[1:]:
    print(f"  ratio lote/{name} (CPU time): {cpu / rows[0][2]:.2f}x")
PY

# The distributed benchmark (1, 2 and 4 ranks vs PyTorch DDP + ZeRO) runs after the step benchmark.
if [[ "${BENCH_DIST:-1}" != 0 ]]; then bash "$HERE/dist.sh" "$BUILD"; fi
