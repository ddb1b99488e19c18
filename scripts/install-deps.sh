#!/usr/bin/env bash
# Installs every Debian package lote needs to build, test and benchmark, and the
# npm test data (tokenizer model and corpora) into a cache outside git.
# Idempotent: a second run changes nothing and takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA_DIR="${LOTE_TEST_DATA:-$ROOT/.cache/testdata}"

# One package per line in scripts/deps/*.txt ('#' starts a comment): each
# component lists what it needs in its own file.
mapfile -t PACKAGES < <(cat "$ROOT"/scripts/deps/*.txt | sed 's/#.*//' | tr -s ' \t' '\n' | grep -v '^$' | sort -u)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: Debian packages present"
fi

# Python peers for the tests (boto3, moto) are expected from the machine's pip
# environment; report clearly when they are absent.
for mod in boto3 moto; do
  if ! python3 -c "import $mod" 2>/dev/null; then
    echo "install-deps: warning: python module '$mod' not importable by $(command -v python3)" >&2
  fi
done

if ! command -v npm >/dev/null; then
  echo "install-deps: npm missing, installing Debian npm"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

"$ROOT/scripts/fetch-testdata.sh" "$DATA_DIR"
# The AWS SDK for JavaScript v3 clients the API tests drive (pinned).
"$ROOT/scripts/fetch-js-sdk.sh" "${LOTE_JS_SDK:-$ROOT/.cache/js-sdk}"
# The web console's front-end packages and its test driver (pinned).
"$ROOT/scripts/fetch-console-js.sh" "${LOTE_CONSOLE_JS:-$ROOT/.cache/console-js}"
