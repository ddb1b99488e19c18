#!/usr/bin/env bash
# Runs every benchmark (bench/*/run.sh BUILD_DIR) in turn.
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
cd "$(dirname "$0")"
for run in */run.sh; do
  echo "=== bench/$run"
  bash "$run" "$BUILD"
done
