#!/usr/bin/env bash
# `make demo`: the reference recipe (configure → tokenize → resources → a 4-node
# training job with checkpoints → logs → clean up) with lote's workflow
# commands, on this machine, in a few minutes:
#   1. start `lote server` (a fresh home under .cache/demo) and point the aws
#      CLI and lote at it with `eval "$(lote env)"`;
#   2. in a copy of examples/llama2: lote setup (render the templates with
#      config.txt), lote data prepare (the SOTU corpus, the real Llama 2
#      tokenizer), lote resources create;
#   3. lote submit --follow: the recipe's 4-node job, one tiny Llama trained by
#      all 4 nodes together (tensor parallel 2 x data parallel 2, ZeRO-1), with
#      checkpoints; then lote report (losses, tokens/s, MFU, the timeline of
#      every node, checkpoints) and a loss-curve PNG;
#   4. a second job resumes from the first one's last checkpoint for 10 more steps;
#   5. lote resources cleanup.
# Re-running starts from scratch (the server's home and the copy are replaced).
set -euo pipefail

LOTE="$(cd "$(dirname "${1:-build/lote}")" && pwd)/$(basename "${1:-build/lote}")"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export LOTE_DEMO_HOME="${LOTE_DEMO_HOME:-$ROOT/.cache/demo}"
export LOTE_TEST_DATA="${LOTE_TEST_DATA:-$ROOT/.cache/testdata}"
WORK="$LOTE_DEMO_HOME/llama2"
EXTRA_STEPS=10
lote() { "$LOTE" "$@"; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Stop a server left by an interrupted run before its home is replaced.
if [ -f "$LOTE_DEMO_HOME/server.pid" ]; then
  kill "$(cat "$LOTE_DEMO_HOME/server.pid")" 2>/dev/null || true
fi
rm -rf "$LOTE_DEMO_HOME"
mkdir -p "$LOTE_DEMO_HOME"
cp -r "$ROOT/examples/llama2" "$WORK"
rm -rf "$WORK/build"

# --- 1. server -------------------------------------------------------------
step "1. lote server (home $LOTE_DEMO_HOME/server)"
coproc SERVER { exec "$LOTE" server --home "$LOTE_DEMO_HOME/server" --listen 127.0.0.1:0 2>"$LOTE_DEMO_HOME/server.log"; }
SERVER_PID=$SERVER_PID
echo "$SERVER_PID" >"$LOTE_DEMO_HOME/server.pid"
cleanup_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  rm -f "$LOTE_DEMO_HOME/server.pid"
}
trap cleanup_server EXIT
read -r -t 30 line <&"${SERVER[0]}" || { echo "server did not start:"; cat "$LOTE_DEMO_HOME/server.log"; exit 1; }
echo "$line"
eval "$(lote env --home "$LOTE_DEMO_HOME/server")"
echo "lote and the aws CLI now talk to $LOTE_ENDPOINT"

# --- 2. the recipe's set-up, one command per script ---------------------------
cd "$WORK"
step "2. cd $WORK && lote setup && lote data prepare && lote resources create"
lote setup
lote data prepare
lote resources create

# --- 3. train ------------------------------------------------------------------
step "3. lote submit --follow: the 4-node job (TP 2 x DP 2, checkpoints every 20 steps)"
submitted=$(mktemp)
set +e
lote submit --follow 2>&1 | tee "$submitted" | grep -v '^\[node [0-9]*\] LOTE_PROGRESS'
status=${PIPESTATUS[0]}
set -e
JOB=$(sed -n 's/^submitted .*: \([0-9a-f-]*\)$/\1/p' "$submitted" | tail -1)
rm -f "$submitted"
[ -n "$JOB" ] || { echo "no job id in lote submit's output"; exit 1; }
[ "$status" = 0 ] || { echo "job $JOB did not succeed"; lote report "$JOB" || true; exit 1; }

step "lote report $JOB"
lote report "$JOB" --csv "$LOTE_DEMO_HOME/loss.csv" --plot "$LOTE_DEMO_HOME/loss.png"
echo "the same through the stock CLI: aws batch describe-jobs --jobs $JOB#0 ... and"
STREAM=$(aws batch describe-jobs --jobs "$JOB#0" --query 'jobs[0].container.logStreamName' --output text)
echo "aws logs get-log-events --log-group-name /aws/batch/job --log-stream-name $STREAM (last line):"
aws logs get-log-events --log-group-name /aws/batch/job --log-stream-name "$STREAM" \
  --no-start-from-head --limit 1 --query 'events[].message' --output text

# --- 4. resume -----------------------------------------------------------------
LAST=$(lote checkpoints list "$JOB" --json | python3 -c 'import json,sys; c=[x for x in json.load(sys.stdin)["checkpoints"] if x["complete"]]; print(c[-1]["step"])')
TARGET=$((LAST + EXTRA_STEPS))
step "4. resume from $JOB's step $LAST for $EXTRA_STEPS more steps (lote submit --resume-from $JOB --max-steps $TARGET)"
submitted=$(mktemp)
set +e
lote submit --resume-from "$JOB" --max-steps "$TARGET" --name llama2-resumed --follow \
  2>&1 | tee "$submitted" | grep -E 'resumed from|step +[0-9]+/|validation loss|done:|SUCCEEDED|FAILED|^submitted'
status=${PIPESTATUS[0]}
set -e
RESUMED=$(sed -n 's/^submitted .*: \([0-9a-f-]*\)$/\1/p' "$submitted" | tail -1)
rm -f "$submitted"
[ "$status" = 0 ] || { echo "the resumed job $RESUMED did not succeed"; exit 1; }
lote report "$RESUMED" | sed -n '1,4p'

# --- 5. cleanup ----------------------------------------------------------------
step "5. lote resources cleanup (disable, wait, delete; as the recipe's cleanup.sh)"
lote resources cleanup

step "demo finished"
echo "  loss curve:   $LOTE_DEMO_HOME/loss.png (data: loss.csv)"
echo "  checkpoints:  $WORK/build/checkpoints/$JOB (lote checkpoint export to get a Hugging Face model)"
echo "  final model:  $WORK/build/model/model.safetensors"
echo "  server log:   $LOTE_DEMO_HOME/server.log"
