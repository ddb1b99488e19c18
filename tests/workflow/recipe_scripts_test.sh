#!/usr/bin/env bash
# The reference recipe's own sequence, with the stock aws CLI and jq, on the files
# `lote setup` wrote: create-compute-environment / register-job-definition from
# build/*.json, poll `describe-compute-environments | jq` until VALID,
# create-job-queue, poll, `submit-job --node-overrides numNodes=4`, then the
# recipe's cleanup (disable, poll, delete, poll until gone; deregister). The job
# must train distributed (TP 2 x DP 2 over 4 nodes), checkpoint and succeed.
#
# usage: recipe_scripts_test.sh LOTE_BINARY TEST_DATA_DIR
set -euo pipefail
LOTE="$1"
export LOTE_TEST_DATA="$2"
EXAMPLE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/llama2" && pwd)"
WORK="$(mktemp -d /tmp/lote_recipe_scripts_XXXXXX)"
SERVER_PID=""
finish() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -f "$WORK/server.log" ]; then
    echo "--- server log (tail)"; tail -40 "$WORK/server.log"
  fi
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  rm -rf "$WORK"
  exit "$rc"
}
trap finish EXIT
fail() { echo "FAIL: $*"; exit 1; }
poll() {  # poll WHAT EXPECTED COMMAND...: run COMMAND until it prints EXPECTED (120 s)
  local what="$1" want="$2" got=""
  shift 2
  for _ in $(seq 1 600); do
    got="$("$@")"
    [ "$got" = "$want" ] && { echo "$what: $got"; return 0; }
    sleep 0.2
  done
  fail "$what is '$got', never '$want'"
}

# The server, and the CLI pointed at it.
coproc SERVER { exec "$LOTE" server --home "$WORK/home" --listen 127.0.0.1:0 2>"$WORK/server.log"; }
SERVER_PID=$SERVER_PID
read -r -t 30 line <&"${SERVER[0]}" || fail "server did not start"
echo "$line"
eval "$("$LOTE" env --home "$WORK/home")"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY

# lote setup on a copy of the example, made small (same 4-node TP 2 x DP 2 layout).
cp -r "$EXAMPLE" "$WORK/llama2"
rm -rf "$WORK/llama2/build"
cd "$WORK/llama2"
sed -i 's/^NAME_PREFIX=.*/NAME_PREFIX=recipe/' config.txt
cat >>config.txt <<'EOF'
SEQ_LEN=64
MICRO_BATCH=2
GLOBAL_BATCH=4
MAX_STEPS=6
LOGGING_INTERVAL=2
EVAL_INTERVAL=6
CHECKPOINT_FREQ=3
EOF
"$LOTE" setup
"$LOTE" data prepare
# shellcheck disable=SC1091
source build/config.env

# --- the recipe's create_resources.sh -------------------------------------------
aws batch create-compute-environment --cli-input-json file://build/compute_env.json
aws batch register-job-definition --cli-input-json file://build/job_def.json
poll "compute environment $CE_NAME" VALID bash -c \
  "aws batch describe-compute-environments --compute-environments $CE_NAME | jq -r '.computeEnvironments[].status'"
aws batch create-job-queue --cli-input-json file://build/job_queue.json
poll "job queue $JQ_NAME" VALID bash -c \
  "aws batch describe-job-queues --job-queues $JQ_NAME | jq -r '.jobQueues[].status'"

# --- the recipe's submit_job.sh ---------------------------------------------------
JOB_ID=$(aws batch submit-job --job-name "$JOB_NAME" --job-queue "$JQ_NAME" \
  --job-definition "$JD_NAME" --node-overrides numNodes=4 | jq -r '.jobId')
echo "submitted $JOB_ID"
for _ in $(seq 1 1500); do
  STATUS=$(aws batch describe-jobs --jobs "$JOB_ID" | jq -r '.jobs[0].status')
  case "$STATUS" in SUCCEEDED | FAILED) break ;; esac
  sleep 0.2
done
echo "job $JOB_ID: $STATUS"
aws batch describe-jobs --jobs "$JOB_ID" | jq -r '.jobs[0].statusReason // ""'
[ "$STATUS" = SUCCEEDED ] || { "$LOTE" logs "$JOB_ID" | tail -30; fail "the job did not succeed"; }

# It trained one model over 4 nodes (the main node's stream says so) ...
[ "$(aws batch describe-jobs --jobs "$JOB_ID" | jq -r '.jobs[0].nodeProperties.numNodes')" = 4 ] ||
  fail "numNodes is not 4"
STREAM=$(aws batch describe-jobs --jobs "$JOB_ID#0" | jq -r '.jobs[0].container.logStreamName')
aws logs get-log-events --log-group-name /aws/batch/job --log-stream-name "$STREAM" \
  --start-from-head | jq -r '.events[].message' >"$WORK/node0.log"
grep -q "4 ranks (tensor parallel 2 x data parallel 2)" "$WORK/node0.log" ||
  fail "node 0's log does not show the TP 2 x DP 2 layout"
grep -q "step      6/6" "$WORK/node0.log" || fail "node 0 did not reach step 6"
# ... and checkpointed it where CHECKPOINT_SAVE_URI says.
CKPT="${CHECKPOINT_SAVE_URI#file://}/$JOB_ID"
for s in 3 6; do
  [ -f "$CKPT/step_$s/manifest.json" ] || fail "no checkpoint $CKPT/step_$s/manifest.json"
done
[ "$(jq -r '.layout.tensor_parallel' "$CKPT/step_6/manifest.json")" = 2 ] ||
  fail "the checkpoint's layout is not TP 2"
echo "checkpoints: $(ls "$CKPT")"

# --- the recipe's cleanup.sh --------------------------------------------------------
aws batch update-job-queue --job-queue "$JQ_NAME" --state DISABLED >/dev/null
poll "job queue $JQ_NAME" DISABLED,VALID bash -c \
  "aws batch describe-job-queues --job-queues $JQ_NAME | jq -r '.jobQueues[] | .state + \",\" + .status'"
aws batch delete-job-queue --job-queue "$JQ_NAME"
poll "job queues named $JQ_NAME" 0 bash -c \
  "aws batch describe-job-queues --job-queues $JQ_NAME | jq -r '.jobQueues | length'"
aws batch update-compute-environment --compute-environment "$CE_NAME" --state DISABLED >/dev/null
poll "compute environment $CE_NAME" DISABLED,VALID bash -c \
  "aws batch describe-compute-environments --compute-environments $CE_NAME | jq -r '.computeEnvironments[] | .state + \",\" + .status'"
aws batch delete-compute-environment --compute-environment "$CE_NAME"
poll "compute environments named $CE_NAME" 0 bash -c \
  "aws batch describe-compute-environments --compute-environments $CE_NAME | jq -r '.computeEnvironments | length'"
aws batch deregister-job-definition --job-definition "$JD_NAME:1"
[ "$(aws batch describe-job-definitions --job-definition-name "$JD_NAME" --status ACTIVE |
  jq -r '.jobDefinitions | length')" = 0 ] || fail "the job definition is still ACTIVE"
echo "PASS: the recipe's scripts ran unchanged against lote"
