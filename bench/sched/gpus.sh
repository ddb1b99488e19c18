#!/usr/bin/env bash
# bench/sched/gpus.sh: the scheduler with accelerators (issue 40), the peer in the
# same run: placements/s with 1,000 hosts x 8 GPUs against the same without
# devices, and a stream of mixed 1/2/4/8-GPU jobs over 16 hosts placed by lote
# against first fit (gpu_bench.cc says how).
# Usage: bench/sched/gpus.sh BUILD_DIR [SEED...]
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
shift || true
cmake --build "$BUILD" -j2 --target gpu_bench >/dev/null
seeds=("$@")
[ ${#seeds[@]} -eq 0 ] && seeds=(7 11 23)
for seed in "${seeds[@]}"; do
  "$BUILD/bench/sched/gpu_bench" --repeat 5 --stream-jobs 2000 --seed "$seed"
done
