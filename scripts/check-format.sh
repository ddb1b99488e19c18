#!/usr/bin/env bash
# Fails if any C++ source differs from the project's .clang-format style.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done < <(git ls-files 'src/*.cc' 'src/*.h' 'bench/*.cc' 2>/dev/null || find src bench -name '*.cc' -o -name '*.h')
if [ "$bad" = 0 ]; then echo "every C++ source follows .clang-format"; fi
exit "$bad"
