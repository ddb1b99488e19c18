#!/usr/bin/env bash
# Installs the web console's npm packages, pinned by src/console/package.json
# and package-lock.json, into DIR (default .cache/console-js): uPlot (embedded
# into the lote binary at build time) and puppeteer-core (drives Debian's
# chromium in the console tests; it downloads no browser). Idempotent: an
# install of the same lock file is kept.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/.cache/console-js}"
mkdir -p "$DIR"
want="$(sha256sum "$ROOT/src/console/package-lock.json" | cut -d' ' -f1)"
stamp="$DIR/.lote-pinned"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$DIR/node_modules/uplot/dist/uPlot.iife.min.js" ]; then
  exit 0
fi
echo "fetch-console-js: installing the console's npm packages (uplot, puppeteer-core) into $DIR"
cp "$ROOT/src/console/package.json" "$ROOT/src/console/package-lock.json" "$DIR/"
# puppeteer-core never downloads a browser; the tests use /usr/bin/chromium.
(cd "$DIR" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --silent --no-audit --no-fund >/dev/null)
echo "$want" >"$stamp"
