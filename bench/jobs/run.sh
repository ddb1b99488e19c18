#!/usr/bin/env bash
# bench/jobs: jobs that really run, end to end. A real `lote server` runs an array
# job of N trivial children (`true`, 1 vCPU each, one `local` virtual instance of
# this host's CPUs) submitted with boto3, timed from SubmitJob to the parent's
# SUCCEEDED; and the latency of one job. Peer: the same N commands started by
# `xargs -P <cpus>` (bare process spawning, no orchestration), so the ratio is
# lote's orchestration overhead per job.
# Usage: bench/jobs/run.sh BUILD_DIR [N]
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
N="${2:-1000}"
cmake --build "$BUILD" -j2 --target lote >/dev/null
python3 "$(dirname "$0")/bench_jobs.py" --lote "$BUILD/lote" --jobs "$N"
