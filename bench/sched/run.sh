#!/usr/bin/env bash
# bench/sched: the scheduling policy alone (sched::Decide), 100,000 RUNNABLE jobs
# over 1,000 virtual instances. No peer scheduler is installed here, so the
# ratios printed are against published figures (kube-scheduler, Slurm), labelled so.
# Usage: bench/sched/run.sh BUILD_DIR
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
cmake --build "$BUILD" -j2 --target sched_bench >/dev/null
"$BUILD/bench/sched/sched_bench" --jobs 100000 --instances 1000 --repeat 5
