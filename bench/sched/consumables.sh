#!/usr/bin/env bash
# bench/sched/consumables.sh: the cost of consumable resources (issue 42) to a
# scheduling pass, the plain pass as the peer in the same run (consumables_bench.cc).
# Usage: bench/sched/consumables.sh BUILD_DIR
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
cmake --build "$BUILD" -j2 --target consumables_bench >/dev/null
"$BUILD/bench/sched/consumables_bench" --repeat 15 --jobs 10000 --resources 20
