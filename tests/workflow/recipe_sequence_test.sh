#!/usr/bin/env bash
# The sequence of AWS calls the reference recipe's scripts make, written here in
# this test's own words (the recipe's scripts are not in the repository), run
# with the stock pip `aws` CLI after `eval "$(lote env)"` and nothing else:
#
#  setup:            ssm get-parameter for the ECS-optimized AMI id
#  create_resources: ec2 create-placement-group and create-launch-template (with
#                    that AMI id), batch create-compute-environment naming both,
#                    register-job-definition (multinode, 4 nodes), polls until VALID,
#                    create-job-queue
#  submit:           submit-job --node-overrides numNodes=4
#  cleanup, while all 4 nodes still run: disable + delete the queue, disable +
#                    delete the compute environment, deregister the job definition
#                    by its bare name, delete the launch template and placement group.
#
# Afterwards: the job is FAILED (its queue was deleted), no process of any of its
# 4 nodes is alive, and no resource is left (describe-* answer empty lists).
# The templates below have the recipe's shape (trn1.32xlarge, vcpus 96,
# memory 500000, an EFA interface), emulated on this host (lote:emulation).
# Each node runs `sleep 3600` under a name unique to this run, so the test
# can count the job's processes (pgrep -f) before and after the cleanup.
#
# usage: recipe_sequence_test.sh LOTE_BINARY
set -euo pipefail
LOTE="$1"
WORK="$(mktemp -d /tmp/lote_recipe_sequence_XXXXXX)"
MARK="lote-recipe-sequence-$$-$RANDOM"
SERVER_PID=""
finish() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -f "$WORK/server.log" ]; then
    echo "--- server log (tail)"; tail -40 "$WORK/server.log"
  fi
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  # On failure, end what is left of this run's own nodes (by their pids).
  for pid in $(pgrep -f "$MARK" || true); do kill "$pid" 2>/dev/null || true; done
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
    [ "$got" = "$want" ] && { echo "ok: $what is $got"; return 0; }
    sleep 0.2
  done
  fail "$what is '$got', never '$want'"
}
alive() { { pgrep -x -f "$MARK 3600" || true; } | wc -l; }

coproc SERVER { exec "$LOTE" server --home "$WORK/home" --listen 127.0.0.1:0 2>"$WORK/server.log"; }
SERVER_PID=$SERVER_PID
read -r -t 30 line <&"${SERVER[0]}" || fail "server did not start"
echo "$line"
eval "$("$LOTE" env --home "$WORK/home")"
[ -n "${AWS_ENDPOINT_URL:-}" ] || fail "lote env exports no AWS_ENDPOINT_URL"
cd "$WORK"

# --- setup: the AMI id from SSM's public parameter ---------------------------------
AMI=$(aws ssm get-parameter --name /aws/service/ecs/optimized-ami/amazon-linux-2/recommended/image_id \
  --query Parameter.Value --output text)
[[ "$AMI" =~ ^ami-[0-9a-f]{17}$ ]] || fail "the ECS AMI parameter gave '$AMI'"
echo "ok: ssm get-parameter gave $AMI"

cat >pg.json <<'EOF'
{"GroupName": "seq-pg", "Strategy": "cluster"}
EOF
cat >lt.json <<EOF
{"LaunchTemplateName": "seq-lt",
 "LaunchTemplateData": {
   "ImageId": "$AMI",
   "InstanceType": "trn1.32xlarge",
   "NetworkInterfaces": [{"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "efa",
                          "Groups": ["sg-0123"], "SubnetId": "subnet-0123"}],
   "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 512, "VolumeType": "gp3"}}]}}
EOF
cat >ce.json <<'EOF'
{"computeEnvironmentName": "seq-ce", "type": "MANAGED", "state": "ENABLED",
 "computeResources": {"type": "EC2", "allocationStrategy": "BEST_FIT_PROGRESSIVE",
   "minvCpus": 0, "maxvCpus": 2088, "desiredvCpus": 0, "instanceTypes": ["trn1.32xlarge"],
   "subnets": ["subnet-0123"], "securityGroupIds": ["sg-0123"], "instanceRole": "ecsInstanceRole",
   "launchTemplate": {"launchTemplateName": "seq-lt", "version": "$Latest"},
   "placementGroup": "seq-pg"},
 "tags": {"lote:emulation": "true"}}
EOF
cat >jd.json <<EOF
{"jobDefinitionName": "seq-jd", "type": "multinode",
 "nodeProperties": {"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{"targetNodes": "0:",
   "container": {"image": "host", "vcpus": 96, "memory": 500000, "user": "root",
     "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
     "command": ["bash", "-c", "echo node \$AWS_BATCH_JOB_NODE_INDEX of \$AWS_BATCH_JOB_NUM_NODES; exec -a $MARK sleep 3600"]}}]}}
EOF
cat >jq.json <<'EOF'
{"jobQueueName": "seq-q", "state": "ENABLED", "priority": 1,
 "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "seq-ce"}]}
EOF

# --- create_resources ---------------------------------------------------------------
aws ec2 create-placement-group --cli-input-json file://pg.json >/dev/null
[ "$(aws ec2 describe-placement-groups --group-names seq-pg --query 'PlacementGroups[0].State' --output text)" = available ] ||
  fail "the placement group is not available"
LT_ID=$(aws ec2 create-launch-template --cli-input-json file://lt.json --query LaunchTemplate.LaunchTemplateId --output text)
[ "$(aws ec2 describe-launch-template-versions --launch-template-id "$LT_ID" --versions '$Latest' \
  --query 'LaunchTemplateVersions[0].LaunchTemplateData.ImageId' --output text)" = "$AMI" ] ||
  fail "the launch template does not hold the AMI id"
echo "ok: ec2 placement group seq-pg and launch template $LT_ID"
aws batch create-compute-environment --cli-input-json file://ce.json >/dev/null
aws batch register-job-definition --cli-input-json file://jd.json >/dev/null
poll "compute environment seq-ce" VALID aws batch describe-compute-environments \
  --compute-environments seq-ce --query 'computeEnvironments[0].status' --output text
[ "$(aws batch describe-compute-environments --compute-environments seq-ce \
  --query 'computeEnvironments[0].computeResources.[placementGroup,launchTemplate.launchTemplateName]' --output text)" = "seq-pg	seq-lt" ] ||
  fail "describe-compute-environments does not show the placement group and launch template"
aws batch create-job-queue --cli-input-json file://jq.json >/dev/null
poll "job queue seq-q" VALID aws batch describe-job-queues --job-queues seq-q \
  --query 'jobQueues[0].status' --output text

# --- submit ---------------------------------------------------------------------------
JOB_ID=$(aws batch submit-job --job-name seq --job-queue seq-q --job-definition seq-jd \
  --node-overrides numNodes=4 --query jobId --output text)
echo "submitted $JOB_ID"
poll "job $JOB_ID" RUNNING aws batch describe-jobs --jobs "$JOB_ID" --query 'jobs[0].status' --output text
poll "processes of the job's 4 nodes" 4 alive

# --- cleanup, while the 4 nodes run ----------------------------------------------------
aws batch update-job-queue --job-queue seq-q --state DISABLED >/dev/null
poll "job queue seq-q" "DISABLED	VALID" aws batch describe-job-queues --job-queues seq-q \
  --query 'jobQueues[0].[state,status]' --output text
aws batch delete-job-queue --job-queue seq-q
poll "job queues named seq-q" 0 aws batch describe-job-queues --job-queues seq-q \
  --query 'length(jobQueues)' --output text
aws batch update-compute-environment --compute-environment seq-ce --state DISABLED >/dev/null
poll "compute environment seq-ce" "DISABLED	VALID" aws batch describe-compute-environments \
  --compute-environments seq-ce --query 'computeEnvironments[0].[state,status]' --output text
aws batch delete-compute-environment --compute-environment seq-ce
poll "compute environments named seq-ce" 0 aws batch describe-compute-environments \
  --compute-environments seq-ce --query 'length(computeEnvironments)' --output text
aws batch deregister-job-definition --job-definition seq-jd
aws ec2 delete-launch-template --launch-template-name seq-lt >/dev/null
aws ec2 delete-placement-group --group-name seq-pg

# --- nothing left -------------------------------------------------------------------------
poll "job $JOB_ID" FAILED aws batch describe-jobs --jobs "$JOB_ID" --query 'jobs[0].status' --output text
REASON=$(aws batch describe-jobs --jobs "$JOB_ID" --query 'jobs[0].statusReason' --output text)
[[ "$REASON" == *"seq-q was deleted"* ]] || fail "the job's reason is '$REASON' ($(aws batch describe-jobs --jobs "$JOB_ID" --query "jobs[0].[statusReason,attempts[0].container.reason]" --output text))"
poll "processes of the job's nodes" 0 alive
[ "$(aws batch describe-job-definitions --job-definition-name seq-jd --status ACTIVE \
  --query 'length(jobDefinitions)' --output text)" = 0 ] || fail "the job definition is still ACTIVE"
[ "$(aws ec2 describe-placement-groups --query 'length(PlacementGroups)' --output text)" = 0 ] ||
  fail "a placement group is left"
[ "$(aws ec2 describe-launch-templates --query 'length(LaunchTemplates)' --output text)" = 0 ] ||
  fail "a launch template is left"
echo "PASS: the recipe's sequence of calls (setup, create_resources, submit, cleanup while 4 nodes ran), stock aws CLI; nothing left running or defined"
