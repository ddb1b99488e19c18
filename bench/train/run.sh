#!/usr/bin/env bash
# Training-step benchmark: lote's CPU engine vs the same Llama in PyTorch (the engine
# tests' reference model), same config, batch, threads and recipe, in the same run.
# Config: hidden 512, 8 layers, 8 heads, intermediate 1536, vocab 32000, seq 512,
# micro batch 8 (4096 tokens per step). Also reports lote's achieved model GFLOP/s
# (6N + attention FLOPs per token) as a fraction of OpenBLAS's sgemm peak measured now.
#
# usage: bench/train/run.sh BUILD_DIR   (env: BENCH_THREADS=nproc, BENCH_STEPS=4)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
LOTE="$BUILD/lote"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
THREADS="${BENCH_THREADS:-$(nproc)}"
STEPS="${BENCH_STEPS:-4}"
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

"$PY" - "$WORK/out/metrics.json" "$WORK/torch.json" <<'PY'
import json, statistics, sys
lote = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2]))
times = lote["step_times_s"]
lote_step = statistics.median(times[1:]) if len(times) > 1 else times[0]
tokens = lote["tokens_per_step"]
flops = lote["flops_per_token"] * tokens
peak = torch["sgemm_peak_gflops"]
lote_gflops = flops / lote_step / 1e9
torch_gflops = flops / torch["step_s"] / 1e9
print(f"{'':8}{'step s':>10}{'tokens/s':>12}{'GFLOP/s':>10}{'of sgemm peak':>15}")
print(f"{'lote':8}{lote_step:>10.3f}{tokens / lote_step:>12.0f}{lote_gflops:>10.1f}{lote_gflops / peak:>14.1%}")
print(f"{'pytorch':8}{torch['step_s']:>10.3f}{torch['tokens_per_s']:>12.0f}{torch_gflops:>10.1f}{torch_gflops / peak:>14.1%}")
print(f"OpenBLAS sgemm peak (2048^3, numpy float32): {peak:.1f} GFLOP/s")
print(f"ratio lote/pytorch (tokens/s): {torch['step_s'] / lote_step:.2f}x")
PY
