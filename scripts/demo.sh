#!/usr/bin/env bash
# `make demo`: the reference recipe's workflow on lote's embedded default, on
# this machine, in a minute or two:
#   1. start `lote server` (fresh home under .cache/demo) and point the stock
#      aws CLI at it with `eval "$(lote env)"`;
#   2. render the recipe's templates (examples/llama2) from config.txt and
#      create the compute environment, job definition and job queue, polling
#      each until VALID, with the real `aws batch` commands;
#   3. tokenize the SOTU corpus with the Llama 2 tokenizer into a Megatron
#      dataset at TOKENIZED_DATASET_URI (`lote data prepare`);
#   4. submit the recipe's 4-node job (a tiny Llama trained by `lote train` on
#      every node) through the queue, wait for it, and score a sentence with
#      node 0's weights (`lote model score`);
#   5. clean up exactly as the recipe does (disable, wait, delete).
set -euo pipefail

LOTE="$(cd "$(dirname "${1:-build/lote}")" && pwd)/$(basename "${1:-build/lote}")"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export LOTE_DEMO_HOME="${LOTE_DEMO_HOME:-$ROOT/.cache/demo}"
DATA="${LOTE_TEST_DATA:-$ROOT/.cache/testdata}"
EXAMPLE="$ROOT/examples/llama2"
rm -rf "$LOTE_DEMO_HOME"
mkdir -p "$LOTE_DEMO_HOME/rendered"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# --- 1. server -------------------------------------------------------------
step "1. lote server (home $LOTE_DEMO_HOME)"
coproc SERVER { exec "$LOTE" server --home "$LOTE_DEMO_HOME" --listen 127.0.0.1:0 2>"$LOTE_DEMO_HOME/server.log"; }
SERVER_PID=$SERVER_PID
cleanup_server() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
trap cleanup_server EXIT
read -r -t 30 line <&"${SERVER[0]}" || { echo "server did not start:"; cat "$LOTE_DEMO_HOME/server.log"; exit 1; }
echo "$line"
eval "$("$LOTE" env --home "$LOTE_DEMO_HOME")"
echo "aws CLI now talks to $AWS_ENDPOINT_URL_BATCH (profile $AWS_PROFILE)"

# --- 2. resources ------------------------------------------------------------
step "2. render templates from config.txt and create resources"
set -a
# shellcheck disable=SC1090
source <(grep -v "^#" "$EXAMPLE/config.txt" | sed "s/\r$//")
set +a
render() {  # render TEMPLATE OUT: substitute ${VAR} from the environment
  python3 - "$1" "$2" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
out = re.sub(r"\$\{([A-Z_][A-Z0-9_]*)\}", lambda m: os.environ.get(m.group(1), m.group(0)), text)
open(sys.argv[2], "w").write(out)
PY
}
export LOTE_BIN="$LOTE" EXAMPLE_DIR="$EXAMPLE" DATASET_DIR="${TOKENIZED_DATASET_URI#file://}"
for t in compute_env job_queue job_def; do render "$EXAMPLE/$t.json" "$LOTE_DEMO_HOME/rendered/$t.json"; done

wait_for() {  # wait_for KIND NAME: poll until status VALID
  local kind="$1" name="$2" status=""
  for _ in $(seq 1 50); do
    if [ "$kind" = ce ]; then
      status=$(aws batch describe-compute-environments --compute-environments "$name" \
        --query 'computeEnvironments[0].status' --output text)
    else
      status=$(aws batch describe-job-queues --job-queues "$name" --query 'jobQueues[0].status' --output text)
    fi
    [ "$status" = VALID ] && { echo "$name is VALID"; return 0; }
    sleep 0.2
  done
  echo "$name did not become VALID (status $status)"; return 1
}
wait_gone() {  # wait_gone KIND NAME: poll until the resource disappears
  local kind="$1" name="$2" n=""
  for _ in $(seq 1 50); do
    if [ "$kind" = ce ]; then
      n=$(aws batch describe-compute-environments --compute-environments "$name" --query 'length(computeEnvironments)')
    else
      n=$(aws batch describe-job-queues --job-queues "$name" --query 'length(jobQueues)')
    fi
    [ "$n" = 0 ] && { echo "$name deleted"; return 0; }
    sleep 0.2
  done
  echo "$name was not deleted"; return 1
}
wait_state() {  # wait_state KIND NAME STATE
  local kind="$1" name="$2" want="$3" s=""
  for _ in $(seq 1 50); do
    if [ "$kind" = ce ]; then
      s=$(aws batch describe-compute-environments --compute-environments "$name" \
        --query 'join(`,`, [computeEnvironments[0].state, computeEnvironments[0].status])' --output text)
    else
      s=$(aws batch describe-job-queues --job-queues "$name" \
        --query 'join(`,`, [jobQueues[0].state, jobQueues[0].status])' --output text)
    fi
    [ "$s" = "$want,VALID" ] && return 0
    sleep 0.2
  done
  echo "$name did not reach $want (now $s)"; return 1
}

aws batch create-compute-environment --cli-input-json "file://$LOTE_DEMO_HOME/rendered/compute_env.json" \
  --query computeEnvironmentArn --output text
aws batch register-job-definition --cli-input-json "file://$LOTE_DEMO_HOME/rendered/job_def.json" \
  --query jobDefinitionArn --output text
wait_for ce "$CE_NAME"
aws batch create-job-queue --cli-input-json "file://$LOTE_DEMO_HOME/rendered/job_queue.json" \
  --query jobQueueArn --output text
wait_for jq "$JQ_NAME"

# --- 3. data -----------------------------------------------------------------
step "3. tokenize SOTU with the Llama 2 tokenizer -> $TOKENIZED_DATASET_URI"
"$LOTE" data prepare --input "$DATA/sotu.txt" --tokenizer "$DATA/tokenizer.model" \
  --block-size 257 --output "$TOKENIZED_DATASET_URI"

# --- 4. train ----------------------------------------------------------------
step "4. submit the 4-node training job (--node-overrides numNodes=4) and wait for it"
echo "(the 4 nodes train one tiny Llama together: tensor parallel 2 x data parallel 2 with"
echo " ZeRO-1; they meet through the AWS Batch variables, rank 0 on node 0 reports progress)"
JOB_ID=$(aws batch submit-job --job-name llama2-demo --job-queue "$JQ_NAME" \
  --job-definition "$JD_NAME" --node-overrides numNodes=4 --query jobId --output text)
echo "submitted job $JOB_ID; following node 0's log stream until the job ends"
echo "(lote logs --follow; drop --node 0 to see every node, merged with [node N] prefixes)"
"$LOTE" logs "$JOB_ID" --follow --node 0 || true
status=$(aws batch describe-jobs --jobs "$JOB_ID" --query 'jobs[0].status' --output text)
aws batch describe-jobs --jobs "$JOB_ID" "$JOB_ID#0" "$JOB_ID#3" \
  --query 'jobs[].[jobId, status, statusReason]' --output table
STREAM=$(aws batch describe-jobs --jobs "$JOB_ID#3" --query 'jobs[0].container.logStreamName' \
  --output text)
echo "node 3's stream through the CloudWatch Logs API (/aws/batch/job $STREAM), last 2 events:"
aws logs get-log-events --log-group-name /aws/batch/job --log-stream-name "$STREAM" \
  --no-start-from-head --limit 2 --query 'events[].message' --output text
[ "$status" = SUCCEEDED ] || { echo "job $JOB_ID ended $status"; exit 1; }
"$LOTE" model score --config "$EXAMPLE/tiny_config.json" \
  --weights "$LOTE_DEMO_HOME/model/model.safetensors" \
  --tokens "1 15043 3186 29892 445 338 263 1243 29889" | tail -2

# --- 5. cleanup --------------------------------------------------------------
step "5. clean up (disable, wait, delete), as the recipe does"
aws batch update-job-queue --job-queue "$JQ_NAME" --state DISABLED >/dev/null
wait_state jq "$JQ_NAME" DISABLED
aws batch delete-job-queue --job-queue "$JQ_NAME"
wait_gone jq "$JQ_NAME"
aws batch update-compute-environment --compute-environment "$CE_NAME" --state DISABLED >/dev/null
wait_state ce "$CE_NAME" DISABLED
aws batch delete-compute-environment --compute-environment "$CE_NAME"
wait_gone ce "$CE_NAME"
aws batch deregister-job-definition --job-definition "$JD_NAME:1"
echo "job definition $JD_NAME:1 deregistered"
step "demo finished: logs of the server in $LOTE_DEMO_HOME/server.log"
