#!/usr/bin/env bash
# Installs the AWS SDK for JavaScript v3 clients the API tests drive (pinned)
# into DIR (default .cache/js-sdk): @aws-sdk/client-batch and
# @aws-sdk/client-cloudwatch-logs. Idempotent: an install with the pinned
# versions is kept.
set -euo pipefail

DIR="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/js-sdk}"
BATCH_VERSION=3.1138.0
LOGS_VERSION=3.1138.0
S3_VERSION=3.1138.0
mkdir -p "$DIR"
stamp="$DIR/.lote-pinned"
want="client-batch@$BATCH_VERSION client-cloudwatch-logs@$LOGS_VERSION client-s3@$S3_VERSION"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$DIR/node_modules/@aws-sdk/client-batch" ]; then
  exit 0
fi
echo "fetch-js-sdk: installing @aws-sdk/client-batch@$BATCH_VERSION @aws-sdk/client-cloudwatch-logs@$LOGS_VERSION @aws-sdk/client-s3@$S3_VERSION"
[ -f "$DIR/package.json" ] || echo '{"name":"lote-js-sdk-tests","private":true}' >"$DIR/package.json"
(cd "$DIR" && npm install --silent --no-audit --no-fund --save-exact \
  "@aws-sdk/client-batch@$BATCH_VERSION" "@aws-sdk/client-cloudwatch-logs@$LOGS_VERSION" \
  "@aws-sdk/client-s3@$S3_VERSION" >/dev/null)
echo "$want" >"$stamp"
