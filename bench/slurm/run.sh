#!/usr/bin/env bash
# bench/slurm: N trivial jobs through lote -> Slurm vs direct sbatch on the same
# local Slurm cluster, same run (bench.py). Usage: bench/slurm/run.sh BUILD_DIR [N]
# (env: RUNS=1, CPUS=8 per node, LOTE_SLURM_SCHED_PARAMS for slurm.conf)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-500}"
cmake --build "$BUILD" -j2 --target lote lote-exec-shim >/dev/null
date -u +"%F %T UTC"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 "$(dirname "$0")/bench.py" --lote "$BUILD/lote" --jobs "$N" --runs "${RUNS:-1}" \
  --cpus "${CPUS:-8}"
