#!/usr/bin/env bash
# Authorization cost: signed requests/s (RegisterJobDefinition + DescribeJobQueues,
# the mixes of run.sh) from 8 keep-alive clients against one lote server, signed
# by the administrator (one policy, one statement: "*") and by a principal of a
# server holding 100 users with 10 policy statements each (1,000 in all; the
# principal's one allowing statement is its last, after 9 that name other
# queues and definitions, one of them a conditional Deny). Same server, same
# run, alternating admin / principal twice per mix; prints principal/admin.
# Usage: bench/control/iam.sh BUILD_DIR [SECONDS]
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"
SECONDS_PER_RUN="${2:-8}"
CLIENTS="${CLIENTS:-8}"
LOTE="$BUILD/lote"
LOAD="$BUILD/bench/control/lote_control_load"
[ -x "$LOAD" ] || cmake --build "$BUILD" --target lote_control_load lote >/dev/null

WORK="$(mktemp -d /tmp/lote_bench_iam.XXXXXX)"
LOTE_PID=""
cleanup() {
  [ -n "$LOTE_PID" ] && kill "$LOTE_PID" 2>/dev/null && wait "$LOTE_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkfifo "$WORK/lote.out"
"$LOTE" server --home "$WORK/home" --listen 127.0.0.1:0 >"$WORK/lote.out" 2>"$WORK/lote.err" &
LOTE_PID=$!
read -r LINE <"$WORK/lote.out"
export LOTE_ENDPOINT="${LINE##* on }"
export AWS_SHARED_CREDENTIALS_FILE="$WORK/home/credentials" AWS_PROFILE=lote AWS_DEFAULT_REGION=us-east-1
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
ADMIN_KEY=$(awk -F' = ' '/aws_access_key_id/{print $2}' "$WORK/home/credentials")
ADMIN_SECRET=$(awk -F' = ' '/aws_secret_access_key/{print $2}' "$WORK/home/credentials")

# 100 users x 10 statements.
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
arn = "arn:aws:batch:*:*:"
for u in range(100):
    st = []
    for i in range(8):
        st.append({"Effect": "Allow", "Action": ["batch:SubmitJob", "batch:CancelJob"],
                   "Resource": [arn + "job-queue/team%d-q%d" % (u, i), arn + "job-definition/team%d-*" % u]})
    st.append({"Effect": "Deny", "Action": "batch:*", "Resource": "*",
               "Condition": {"StringEquals": {"aws:RequestTag/frozen": "true"}}})
    st.append({"Effect": "Allow", "Action": ["batch:RegisterJobDefinition", "batch:DescribeJobQueues"],
               "Resource": "*"})
    with open("%s/policy%03d.json" % (work, u), "w") as f:
        json.dump({"Version": "2012-10-17", "Statement": st}, f)
PY
T0=$(date +%s.%N)
for u in $(seq -w 0 99); do
  "$LOTE" users create "u0$u" --policy-file "$WORK/policy0$u.json" >/dev/null
done
"$LOTE" keys create u099 >"$WORK/key.json"
T1=$(date +%s.%N)
KEY=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["AccessKey"]["AccessKeyId"])' "$WORK/key.json")
SECRET=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["AccessKey"]["SecretAccessKey"])' "$WORK/key.json")
echo "set-up: 100 users with 1,000 statements in $(python3 -c "print('%.1f' % ($T1 - $T0))") s (lote users create, one CLI process each)"

# Warm up.
"$LOAD" --endpoint "$LOTE_ENDPOINT" --key "$ADMIN_KEY" --secret "$ADMIN_SECRET" --clients 2 --seconds 1 >/dev/null
"$LOAD" --endpoint "$LOTE_ENDPOINT" --key "$KEY" --secret "$SECRET" --clients 2 --seconds 1 >/dev/null

run_mix() {  # $1: write-every
  echo "--- clients=$CLIENTS seconds=$SECONDS_PER_RUN mix: 1 RegisterJobDefinition per $1 requests, rest DescribeJobQueues"
  local results=()
  for round in 1 2; do
    A=$("$LOAD" --endpoint "$LOTE_ENDPOINT" --key "$ADMIN_KEY" --secret "$ADMIN_SECRET" --clients "$CLIENTS" --seconds "$SECONDS_PER_RUN" --write-every "$1")
    P=$("$LOAD" --endpoint "$LOTE_ENDPOINT" --key "$KEY" --secret "$SECRET" --clients "$CLIENTS" --seconds "$SECONDS_PER_RUN" --write-every "$1")
    results+=("$A" "$P")
  done
  python3 - "${results[@]}" <<'PY'
import json, sys
r = [json.loads(x) for x in sys.argv[1:]]
admin, principal = r[0::2], r[1::2]
for i, (a, p) in enumerate(zip(admin, principal), 1):
    print("round %d: admin %.0f req/s (p50 %.2f ms, errors %d), principal %.0f req/s (p50 %.2f ms, errors %d), ratio %.3f"
          % (i, a["rps"], a["p50_ms"], a["errors"], p["rps"], p["p50_ms"], p["errors"], p["rps"] / max(a["rps"], 1e-9)))
sa, sp = sum(a["rps"] for a in admin), sum(p["rps"] for p in principal)
print("ratio principal/admin (both rounds): %.3f" % (sp / max(sa, 1e-9)))
PY
}
run_mix 2
run_mix 10
