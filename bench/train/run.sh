#!/usr/bin/env bash
# Training-step benchmark: lote's CPU engine vs the same Llama in PyTorch (the engine
# tests' reference model), same config, batch, threads and recipe, in the same run.
# Config: hidden 512, 8 layers, 8 heads, intermediate 1536, vocab 32000, seq 512,
# micro batch 8 (4096 tokens per step). Also reports lote's achieved model GFLOP/s
# (6N + attention FLOPs per token) as a fraction of OpenBLAS's sgemm peak measured now.
#
# usage: bench/train/run.sh BUILD_DIR   (env: BENCH_THREADS=nproc, BENCH_STEPS=3)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
LOTE="$BUILD/lote"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
THREADS="${BENCH_THREADS:-$(nproc)}"
STEPS="${BENCH_STEPS:-3}"
BATCH=8
SEQ=512
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/config.json" <<JSON
{"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8,
 "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
 "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
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

echo "config: hidden 512, 8 layers, 8 heads, seq $SEQ, micro batch $BATCH, vocab 32000; threads $THREADS, $STEPS steps (first is warm-up)"
OMP_NUM_THREADS="$THREADS" "$LOTE" train --config "$WORK/config.json" --data "$WORK/data" \
  --batch-size $BATCH --seq-len $SEQ --max-steps "$STEPS" --logging-interval 1 \
  --val-fraction 0 --threads "$THREADS" --output "$WORK/out" | grep -v '^LOTE_PROGRESS'
OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" \
  "$PY" "$HERE/torch_train.py" "$WORK/config.json" $BATCH $SEQ "$STEPS" "$THREADS" > "$WORK/torch.json"

"$PY" - "$WORK/out/metrics.json" "$WORK/torch.json" "$THREADS" <<'PY'
import json, statistics, sys
lote = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2]))
threads = int(sys.argv[3])
med = lambda xs: statistics.median(xs[1:]) if len(xs) > 1 else xs[0]
lote_step, lote_cpu = med(lote["step_times_s"]), med(lote["step_cpu_s"])
tokens = lote["tokens_per_step"]
flops = lote["flops_per_token"] * tokens
peak, peak_cpu = torch["sgemm_peak_gflops"], torch["sgemm_peak_gflops_per_cpu_s"]
print("wall clock (median step after warm-up):")
print(f"  {'':8}{'step s':>10}{'tokens/s':>12}{'GFLOP/s':>10}{'of sgemm peak':>15}")
for name, step in (("lote", lote_step), ("pytorch", torch["step_s"])):
    g = flops / step / 1e9
    print(f"  {name:8}{step:>10.3f}{tokens / step:>12.0f}{g:>10.1f}{g / peak:>14.1%}")
print(f"  OpenBLAS sgemm peak (numpy float32 2048^3, {threads} threads): {peak:.1f} GFLOP/s")
print(f"  ratio lote/pytorch (tokens/s): {torch['step_s'] / lote_step:.2f}x")
print("CPU time (process CPU-seconds per step; robust when other work shares the machine):")
for name, cpu in (("lote", lote_cpu), ("pytorch", torch["step_cpu_s"])):
    g = flops / cpu / 1e9
    print(f"  {name:8}{cpu:>10.2f} CPU-s/step  {g:>7.1f} GFLOP per CPU-s  {g / peak_cpu:>6.1%} of sgemm's {peak_cpu:.1f}")
print(f"  ratio lote/pytorch (CPU time): {torch['step_cpu_s'] / lote_cpu:.2f}x")
PY
