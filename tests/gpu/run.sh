#!/usr/bin/env bash
# tests/gpu/run.sh: lote's checks on a real NVIDIA GPU host (make test-gpu; not in CI,
# which has no GPU). Runs from a bundle (scripts/make-bundle.sh: the host needs none of
# lote's libraries) or a build folder, and needs nvidia-smi and python3 with PyTorch
# built for CUDA. It:
#   1. starts a lote server (its own home, no authentication, loopback only);
#   2. checks lote's inventory of this host against `nvidia-smi -L` (count and UUIDs);
#   3. runs a GPU=1 job that must see exactly one GPU (torch.cuda.device_count() == 1),
#      the one lote assigned (its UUID), and trains a small model on it for a few steps;
#   4. runs two GPU=1 jobs on a one-GPU host (a one-GPU compute environment): they
#      must not overlap (their own start and end stamps);
#   5. prints `lote report` of the training job (its timeline and devices).
# Exit 0: all passed; 1: a check failed (it says which); 77: no GPU or no PyTorch here.
# It must finish within 10 minutes.
#
# usage: tests/gpu/run.sh [LOTE]   (env: PYTHON, LOTE_GPU_SERVER_ARGS)   (LOTE: the bundle's ./lote wrapper or build/lote;
#        default: ./lote next to this script, else build/lote)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LOTE="${1:-}"
if [ -z "$LOTE" ]; then
  if [ -x "$HERE/lote" ]; then LOTE="$HERE/lote"; else LOTE="$HERE/../../build/lote"; fi
fi
LOTE="$(cd "$(dirname "$LOTE")" && pwd)/$(basename "$LOTE")"
PY="${PYTHON:-python3}"
say() { printf '[gpu] %s\n' "$*"; }
fail() { printf '[gpu] FAILED: %s\n' "$*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || { say "no nvidia-smi on this host: nothing to check"; exit 77; }
gpus=$(nvidia-smi -L | grep -c '^GPU ' || true)
[ "$gpus" -ge 1 ] || { say "nvidia-smi lists no GPU: nothing to check"; exit 77; }
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  { say "python3 has no PyTorch with CUDA: nothing to check"; exit 77; }
say "lote: $("$LOTE" --version); $gpus GPU(s): $(nvidia-smi -L | head -1)"

work="$(mktemp -d /tmp/lote-gpu.XXXXXX)"
chmod 755 "$work"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home"
# LOTE_GPU_SERVER_ARGS: more server options (e.g. --accelerators FILE where discovery fails).
# shellcheck disable=SC2086
"$LOTE" server --home "$work/home" --listen 127.0.0.1:0 --insecure-no-auth ${LOTE_GPU_SERVER_ARGS:-} \
  > "$work/server.out" 2> "$work/server.err" &
server_pid=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/server.out" 2>/dev/null && break
  sleep 0.1
done
endpoint="$(sed -n 's/^lote server listening on //p' "$work/server.out")"
[ -n "$endpoint" ] || fail "the server did not start: $(tail -5 "$work/server.err")"
say "server at $endpoint"

# The rest speaks the Batch API with plain JSON (the server takes unsigned requests).
export LOTE_GPU_ENDPOINT="$endpoint" LOTE_GPU_WORK="$work" LOTE_GPU_PY="$PY"
timeout 540 "$PY" - "$gpus" <<'PYTHON'
import json, os, subprocess, sys, time, urllib.request

endpoint, work, py = os.environ["LOTE_GPU_ENDPOINT"], os.environ["LOTE_GPU_WORK"], os.environ["LOTE_GPU_PY"]
gpus = int(sys.argv[1])


def call(op, body, method="POST"):
    req = urllib.request.Request(endpoint + "/v1/" + op.lower(), method=method,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise SystemExit("[gpu] FAILED: %s: %s" % (op, e.read().decode()))


def say(msg):
    print("[gpu] " + msg, flush=True)


def wait(pred, what, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.5)
    raise SystemExit("[gpu] FAILED: timed out waiting for " + what)


# 2. The inventory against nvidia-smi.
smi = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
                     capture_output=True, text=True, check=True).stdout
smi_uuids = [line.split(",")[1].strip() for line in smi.strip().splitlines()]
inventory = call("DescribeAccelerators", {})
devices = [d for h in inventory.get("hosts", []) for d in h.get("devices", [])
           if d.get("kind") == "gpu"]
say("lote sees %d GPU(s) (%s), nvidia-smi %d" % (
    len(devices), inventory["hosts"][0].get("source", "?") if inventory.get("hosts") else "-",
    len(smi_uuids)))
if len(devices) != len(smi_uuids):
    raise SystemExit("[gpu] FAILED: lote's inventory has %d GPUs, nvidia-smi %d: %s" % (
        len(devices), len(smi_uuids), json.dumps(inventory)))
lote_uuids = sorted(d.get("uuid", "") for d in devices)
if all(lote_uuids) and lote_uuids != sorted(smi_uuids):
    raise SystemExit("[gpu] FAILED: UUIDs differ: lote %s, nvidia-smi %s" % (lote_uuids, smi_uuids))

# A one-GPU compute environment (g5.xlarge: 4 vCPU, 16 GiB, 1 GPU) on this host's devices.
call("CreateComputeEnvironment", {
    "computeEnvironmentName": "gpu", "type": "MANAGED",
    "computeResources": {"type": "EC2", "minvCpus": 0, "maxvCpus": 4,
                         "instanceTypes": ["g5.xlarge"], "subnets": ["s"]}})
wait(lambda: call("DescribeComputeEnvironments", {"computeEnvironments": ["gpu"]})
     ["computeEnvironments"][0]["status"] == "VALID", "the compute environment")
call("CreateJobQueue", {"jobQueueName": "gpu", "priority": 1,
                        "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "gpu"}]})
wait(lambda: call("DescribeJobQueues", {"jobQueues": ["gpu"]})["jobQueues"][0]["status"] == "VALID",
     "the job queue")
train = r'''
import os, time, torch
t0 = time.time()
open(os.environ["STAMP"] + ".start", "w").write(str(time.time_ns()))
n = torch.cuda.device_count()
print("device_count", n, "CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"),
      "name", torch.cuda.get_device_name(0), "uuid", str(torch.cuda.get_device_properties(0).uuid), flush=True)
assert n == 1, n
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
for step in range(int(os.environ.get("STEPS", "200"))):
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 50 == 0:
        print("LOTE_PROGRESS " + '{"step": %d, "loss": %.5f}' % (step, loss.item()), flush=True)
torch.cuda.synchronize()
print("trained", step + 1, "steps, loss", loss.item(), "in", round(time.time() - t0, 2), "s", flush=True)
time.sleep(float(os.environ.get("HOLD", "0")))
open(os.environ["STAMP"] + ".end", "w").write(str(time.time_ns()))
'''
with open(os.path.join(work, "train.py"), "w") as f:
    f.write(train)
call("RegisterJobDefinition", {
    "jobDefinitionName": "gpu-train", "type": "container",
    "containerProperties": {"image": "host", "command": [py, os.path.join(work, "train.py")],
                            "resourceRequirements": [{"type": "VCPU", "value": "2"},
                                                     {"type": "MEMORY", "value": "4096"},
                                                     {"type": "GPU", "value": "1"}]}})


def job_log(job):
    """The job's output (CloudWatch Logs' GetLogEvents on lote's endpoint)."""
    stream = job.get("container", {}).get("logStreamName")
    if not stream:
        return ""
    req = urllib.request.Request(endpoint + "/", method="POST", data=json.dumps(
        {"logGroupName": "/aws/batch/job", "logStreamName": stream, "startFromHead": True}).encode(),
        headers={"Content-Type": "application/x-amz-json-1.1",
                 "X-Amz-Target": "Logs_20140328.GetLogEvents"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return "\n".join(e["message"] for e in json.loads(r.read())["events"])
    except Exception as e:  # diagnostics only
        return "(no log: %s)" % e


def submit(name, env):
    if os.environ.get("PYTHONPATH"):  # where this python3 finds PyTorch, for the job too
        env = dict(env, PYTHONPATH=os.environ["PYTHONPATH"])
    env = [{"name": k, "value": v} for k, v in env.items()]
    return call("SubmitJob", {"jobName": name, "jobQueue": "gpu", "jobDefinition": "gpu-train",
                              "containerOverrides": {"environment": env}})["jobId"]


def finished(job_id):
    job = call("DescribeJobs", {"jobs": [job_id]})["jobs"][0]
    return job if job["status"] in ("SUCCEEDED", "FAILED") else None


# 3. One GPU=1 job trains on its GPU.
first = submit("train", {"STAMP": os.path.join(work, "train"), "STEPS": "300"})
job = wait(lambda: finished(first), "the training job")
print(job_log(job), flush=True)
if job["status"] != "SUCCEEDED":
    raise SystemExit("[gpu] FAILED: the training job %s: %s" % (job["status"], job.get("statusReason")))
assigned = job["attempts"][-1]["container"].get("loteAccelerators", {}).get("devices")
say("the training job SUCCEEDED on device(s) %s" % assigned)
if not assigned or len(assigned) != 1:
    raise SystemExit("[gpu] FAILED: the job's attempt shows devices %s, not one" % assigned)
with open(os.path.join(work, "first.id"), "w") as f:
    f.write(first)

# 4. Two GPU=1 jobs on the one-GPU environment never overlap.
ids = [submit("pair-%d" % i, {"STAMP": os.path.join(work, "pair-%d" % i), "STEPS": "50",
                               "HOLD": "3"}) for i in range(2)]
for i in ids:
    j = wait(lambda: finished(i), "job " + i)
    if j["status"] != "SUCCEEDED":
        print(job_log(j), flush=True)
        raise SystemExit("[gpu] FAILED: pair job %s: %s" % (j["status"], j.get("statusReason")))
spans = []
for k in range(2):
    with open(os.path.join(work, "pair-%d.start" % k)) as a, open(os.path.join(work, "pair-%d.end" % k)) as b:
        spans.append((int(a.read()), int(b.read())))
spans.sort()
if spans[0][1] > spans[1][0]:
    raise SystemExit("[gpu] FAILED: the two GPU=1 jobs overlapped on one GPU: %s" % spans)
say("two GPU=1 jobs ran one after the other (gap %.2f s)" % ((spans[1][0] - spans[0][1]) / 1e9))
PYTHON
eval "$("$LOTE" env --home "$work/home")"
"$LOTE" report "$(cat "$work/first.id")" --endpoint "$endpoint" || say "(lote report failed)"
"$LOTE" nodes list --endpoint "$endpoint" || say "(lote nodes list failed)"
say "all GPU checks passed"
