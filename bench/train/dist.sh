#!/usr/bin/env bash
# Distributed training benchmark: tokens/s of the whole job for lote with 1, 2 and 4
# ranks (DP and TP layouts) and for PyTorch (torch.distributed gloo, DDP +
# ZeroRedundancyOptimizer; bench/train/torch_dist_train.py) on the same model, the
# same micro batch per data-parallel rank and the same total threads, in the same run.
# On a 2-core machine 4 ranks x 1 thread oversubscribe the cores (stated in the output).
# Prints the ratios the issue asks for: lote DP=2 / PyTorch DP=2, and lote 2 ranks x
# 1 thread / lote 1 rank x 2 threads (the cost of communication), plus each lote run's
# share of rank 0's time spent in collectives, the share of its step time that is exposed
# communication (its training thread blocked; the overlapped gradient reduce-scatter
# excluded), and each rank's model FLOP/s against the GEMM peak that rank measured at
# start (MFU per rank).
#
# usage: bench/train/dist.sh BUILD_DIR   (env: BENCH_STEPS=6, BENCH_SEQ=256, BENCH_MICRO=4,
#        BENCH_HIDDEN=256, BENCH_LAYERS=4, BENCH_MLP=688; the default model has ~19 M parameters;
#        BENCH_FOUR=0 skips the two 4-rank layouts; BEFORE=/path/to/lote also runs that binary's
#        1x2 and DP=2 layouts, each right after this build's, as "before" rows of the same run)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
LOTE="$BUILD/lote"
PY="${LOTE_TORCH_PYTHON:-/usr/bin/python3}"
STEPS="${BENCH_STEPS:-6}"
SEQ="${BENCH_SEQ:-256}"
MICRO="${BENCH_MICRO:-4}"
CORES="$(nproc)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

HIDDEN="${BENCH_HIDDEN:-256}"
LAYERS="${BENCH_LAYERS:-4}"
MLP="${BENCH_MLP:-688}"
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
block = $((SEQ + 1))
rng = np.random.default_rng(0)
ref.write_dataset('$WORK/data', [list(rng.integers(2, 32000, block - 1)) for _ in range($((MICRO * 4 * STEPS + 8)))], block, 32000)
"
echo "model: hidden $HIDDEN, $LAYERS layers, 8 heads, MLP $MLP, vocab 32000; seq $SEQ,"
echo "micro batch $MICRO per data-parallel rank, $STEPS steps (first is warm-up); this machine has $CORES cores"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset: OpenBLAS picks its kernels for this CPU)} for lote and PyTorch alike; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# lote NAME NPROC TP THREADS [BINARY]
lote_run() {
  local name=$1 nproc=$2 tp=$3 threads=$4 dp=$(($2 / $3)) bin=${5:-$LOTE}
  OMP_NUM_THREADS="$threads" /usr/bin/time -f %M -o "$WORK/$name.rss" "$bin" train --config "$WORK/config.json" --data "$WORK/data" \
    --batch-size "$MICRO" --global-batch-size $((MICRO * dp)) --seq-len "$SEQ" \
    --max-steps "$STEPS" --logging-interval "$STEPS" --val-fraction 0 --threads "$threads" \
    --nproc-per-node "$nproc" --tensor-parallel-size "$tp" \
    --output "$WORK/$name" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log"; exit 1; }
}
lote_run l1x2 1 1 2
if [[ -n "${BEFORE:-}" ]]; then lote_run before_l1x2 1 1 2 "$BEFORE"; fi
lote_run dp2 2 1 1
if [[ -n "${BEFORE:-}" ]]; then lote_run before_dp2 2 1 1 "$BEFORE"; fi
lote_run tp2 2 2 1
if [[ "${BENCH_FOUR:-1}" != 0 ]]; then
  lote_run tp2dp2 4 2 1
  lote_run dp4 4 1 1
fi
OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 "$PY" "$HERE/torch_dist_train.py" --config "$WORK/config.json" \
  --nproc 1 --threads-per-proc 2 --seq-len "$SEQ" --micro-batch "$MICRO" --steps "$STEPS" | tail -1 > "$WORK/t1.json"
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$PY" "$HERE/torch_dist_train.py" --config "$WORK/config.json" \
  --nproc 2 --threads-per-proc 1 --seq-len "$SEQ" --micro-batch "$MICRO" --steps "$STEPS" | tail -1 > "$WORK/t2.json"

"$PY" - "$WORK" "$CORES" <<'PY'
import json, os, statistics, sys
work, cores = sys.argv[1], int(sys.argv[2])
def lote(name):
    m = json.load(open(os.path.join(work, name, "metrics.json")))
    step = statistics.median(m["step_times_s"][1:])
    tps = m["tokens_per_step"] / step
    mfu = tps * m["flops_per_token"] / m["world_size"] / (m["gemm_peak_gflops"] * 1e9)
    return tps, m["collective_share"], m.get("exposed_comm_share", m["collective_share"]), mfu, m["gemm_peak_gflops"]
rows = [("lote 1 rank x 2 threads", "l1x2"), ("lote DP=2, 2 ranks x 1 thread", "dp2"),
        ("lote TP=2, 2 ranks x 1 thread", "tp2"), ("lote TP=2 x DP=2, 4 ranks x 1 thread", "tp2dp2"),
        ("lote DP=4, 4 ranks x 1 thread", "dp4"),
        ("before: lote 1 rank x 2 threads", "before_l1x2"), ("before: lote DP=2", "before_dp2")]
res = {}
first = json.load(open(os.path.join(work, "l1x2", "metrics.json")))
print(f"lote's OpenBLAS kernels: {first.get('blas_core', 'not recorded')}")
print(f"{'':42}{'tokens/s':>10}{'collectives':>13}{'exposed':>9}{'MFU/rank':>10}{'GEMM peak':>11}")
for label, name in rows:
    if not os.path.exists(os.path.join(work, name, "metrics.json")):
        continue
    tps, share, exposed, mfu, peak = lote(name)
    res[name] = tps
    note = "  (oversubscribed: 4 ranks on %d cores)" % cores if name in ("tp2dp2", "dp4") and cores < 4 else ""
    rss = int(open(os.path.join(work, name + ".rss")).read().split()[-1]) / 1024
    rss_note = f"  peak RSS {rss:.0f} MiB" if name.endswith("l1x2") else ""
    print(f"{label:42}{tps:>10.0f}{share:>12.1%}{exposed:>9.1%}{mfu:>10.1%}{peak:>11.1f}{note}{rss_note}")
t1 = json.load(open(os.path.join(work, "t1.json")))["tokens_per_s"]
t2 = json.load(open(os.path.join(work, "t2.json")))["tokens_per_s"]
print(f"{'pytorch 1 rank x 2 threads':42}{t1:>10.0f}")
print(f"{'pytorch DDP+ZeRO DP=2, 2 ranks x 1 thread':42}{t2:>10.0f}")
print(f"ratio lote/pytorch, 1 rank x 2 threads: {res['l1x2'] / t1:.2f}x")
print(f"ratio lote/pytorch, DP=2: {res['dp2'] / t2:.2f}x   (goal >= 2.5x)")
if "before_l1x2" in res:
    print(f"before: ratio lote/pytorch, 1 rank x 2 threads: {res['before_l1x2'] / t1:.2f}x, DP=2: {res['before_dp2'] / t2:.2f}x")
    print(f"this build / before: 1 rank x 2 threads {res['l1x2'] / res['before_l1x2']:.2f}x, DP=2 {res['dp2'] / res['before_dp2']:.2f}x")
print(f"lote 2 ranks x 1 thread / 1 rank x 2 threads: {res['dp2'] / res['l1x2']:.0%}   (goal >= 85%)")
print(f"ratio lote/pytorch, 1 rank x 2 threads: goal >= 3x; exposed communication at DP=2: goal <= 3%;")
print("MFU per rank (model FLOP/s of a rank / the GEMM peak it measured at start, at its own thread count): goal >= 80%")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
