"""Job output in log streams, end to end: a real `lote server` runs jobs as local
processes; their output is read back with boto3, the pip `aws logs` CLI and
`lote logs` / `lote wait` / `lote status`.

- a 4-node job whose nodes print interleaved numbered lines: every line in its
  own node's stream, in order, none missing; `lote logs` merges them with
  `[node N] ` prefixes, `--node` picks one, exit code 0;
- a job killed by TerminateJob in the middle of its output: every line it had
  printed before the kill is stored;
- a node that reports progress and then stalls: the attempt fails with a
  `HANG: ` reason naming it (and `lote status` showed its progress meanwhile);
- `lote logs --follow` across a retry (a header per attempt, both attempts'
  lines, exit code of the job); `lote wait` exit codes.

Run: python3 test_job_logs.py --lote build/lote
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, describe_job_raw  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")
GROUP = "/aws/batch/job"

# Each node prints numbered lines, pausing now and then so that the nodes'
# lines interleave in time.
INTERLEAVED = r"""
import os, sys, time
node = int(os.environ.get("AWS_BATCH_JOB_NODE_INDEX", "0"))
nodes = int(os.environ.get("AWS_BATCH_JOB_NUM_NODES", "1"))
for k in range(int(sys.argv[1])):
    os.write(1, b"node %d line %d\n" % (node, k))
    if k % 25 == 0:
        time.sleep(0.005)
# The main node's exit ends the job and stops the others (gang rule): it
# waits until every other node has printed everything.
marks = os.path.join(sys.argv[2], "done-" + os.environ["AWS_BATCH_JOB_ID"].split("#")[0])
os.makedirs(marks, exist_ok=True)
open(os.path.join(marks, str(node)), "w").close()
deadline = time.time() + 60
while node == 0 and len(os.listdir(marks)) < nodes and time.time() < deadline:
    time.sleep(0.02)
"""

# Prints numbered lines as fast as it can; after each line is written, its
# number goes into a side file, so the test knows a line that was surely
# printed before the kill.
FLOOD = r"""
import os, sys
side = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
i = 0
while True:
    os.write(1, b"line %d\n" % i)
    os.pwrite(side, b"%012d\n" % i, 0)
    i += 1
"""

# Node 0 reports progress steadily; node 1 reports once and stalls.
STALL = r"""
import json, os, time
node = int(os.environ["AWS_BATCH_JOB_NODE_INDEX"])
if node == 1:
    print("node 1 warming up", flush=True)
    print("LOTE_PROGRESS " + json.dumps({"step": 1, "total_steps": 100, "loss": 7.5}), flush=True)
    print("about to stall", flush=True)
    time.sleep(300)
step = 0
while True:
    step += 1
    print("LOTE_PROGRESS " + json.dumps({"step": step, "total_steps": 100, "loss": 9.0 / step}),
          flush=True)
    time.sleep(0.2)
"""


def job_lines(lines):
    """Without the executor's own notices (e.g. "lote: warning: the limits of this
    node ... are NOT enforced" on hosts without cgroup v2), which go to the node's
    output before the command's; also behind a `[node N] ` prefix."""
    return [l for l in lines if not re.match(r"(\[node \d+\] )?lote: ", l)]


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class JobLogsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()
        cls.logs = cls.server.client("logs")
        cls.env = cls.server.env()
        cls.out = tempfile.mkdtemp(prefix="lote_job_logs_")
        cls.batch.create_compute_environment(
            computeEnvironmentName="ce", type="MANAGED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 64,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true"})
        wait_for(lambda: cls.batch.describe_compute_environments(
            computeEnvironments=["ce"])["computeEnvironments"][0]["status"] == "VALID",
            30, "compute environment VALID")
        cls.batch.create_job_queue(jobQueueName="q", priority=1,
                                   computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        cls.batch.register_job_definition(
            jobDefinitionName="sh", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": RESOURCES})
        for name, program in (("interleaved.py", INTERLEAVED), ("flood.py", FLOOD),
                              ("stall.py", STALL)):
            with open(os.path.join(cls.out, name), "w") as f:
                f.write(program)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.out, ignore_errors=True)

    # -- helpers -----------------------------------------------------------

    def path(self, name):
        return os.path.join(self.out, name)

    def submit(self, name, command, **kwargs):
        return self.batch.submit_job(jobName=name, jobQueue="q", jobDefinition="sh",
                                     containerOverrides={"command": command}, **kwargs)["jobId"]

    def submit_multinode(self, name, nodes, command, **kwargs):
        self.batch.register_job_definition(
            jobDefinitionName=name, type="multinode",
            nodeProperties={"numNodes": nodes, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {"image": "host", "command": command,
                                                   "resourceRequirements": RESOURCES}}]})
        return self.batch.submit_job(jobName=name, jobQueue="q", jobDefinition=name,
                                     **kwargs)["jobId"]

    def describe_raw(self, job_id):
        return describe_job_raw(self.batch, job_id)

    def describe(self, job_id):
        jobs = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        self.assertEqual(len(jobs), 1, job_id)
        return jobs[0]

    def wait_status(self, job_id, statuses=FINAL, timeout=60):
        job = wait_for(lambda: (lambda j: j if j["status"] in statuses else None)(
            self.describe(job_id)), timeout, "job %s to reach %s" % (job_id, statuses))
        if job["status"] in FINAL:
            # The streams lag the job's end by the time the last bytes take to
            # store; the server says when they are complete (extra key).
            wait_for(lambda: self.describe_raw(job_id).get("logsComplete") is True, 60,
                     "job %s's output to be stored (logsComplete)" % job_id)
        return job

    def stream_messages(self, stream):
        """Every message of a stream, paging with nextForwardToken until it stands still."""
        messages, token = [], None
        while True:
            kwargs = {"logGroupName": GROUP, "logStreamName": stream, "startFromHead": True}
            if token:
                kwargs["nextToken"] = token
            page = self.logs.get_log_events(**kwargs)
            messages += [e["message"] for e in page["events"]]
            if page["nextForwardToken"] == token:
                return messages
            token = page["nextForwardToken"]

    def lote(self, *args, timeout=60):
        return subprocess.run([LOTE] + list(args), env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    # -- tests -------------------------------------------------------------

    def test_four_nodes_interleaved_lines(self):
        lines = 400
        job_id = self.submit_multinode(
            "mn4", 4, [sys.executable, self.path("interleaved.py"), str(lines), self.out])
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        streams = set()
        for node in range(4):
            view = self.describe("%s#%d" % (job_id, node))
            stream = view["container"]["logStreamName"]
            self.assertTrue(stream.startswith("mn4/default/"), stream)
            streams.add(stream)
            self.assertEqual(view["attempts"][-1]["container"]["logStreamName"], stream)
            self.assertEqual(job_lines(self.stream_messages(stream)),
                             ["node %d line %d" % (node, k) for k in range(lines)])
        self.assertEqual(len(streams), 4)
        described = {s["logStreamName"] for s in self.logs.describe_log_streams(
            logGroupName=GROUP, logStreamNamePrefix="mn4/default/")["logStreams"]}
        self.assertEqual(described, streams)

        # The pip aws CLI reads the same stream.
        node2 = self.describe("%s#2" % job_id)["container"]["logStreamName"]
        out = subprocess.run(
            ["aws", "logs", "get-log-events", "--log-group-name", GROUP, "--log-stream-name",
             node2, "--start-from-head", "--limit", "50", "--output", "json"],
            env=self.env, check=True, capture_output=True, text=True, timeout=60).stdout
        self.assertEqual(job_lines([e["message"] for e in json.loads(out)["events"]])[:40],
                         ["node 2 line %d" % k for k in range(40)])

        # lote logs: all nodes merged, each line once with its node's prefix, in
        # each node's order.
        r = self.lote("logs", job_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = r.stdout.splitlines()
        for node in range(4):
            prefix = "[node %d] " % node
            mine = job_lines([l[len(prefix):] for l in got if l.startswith(prefix)])
            self.assertEqual(mine, ["node %d line %d" % (node, k) for k in range(lines)])
        self.assertEqual(len(job_lines(got)), 4 * lines)  # nothing else
        self.assertFalse(any(l.startswith("---") for l in got))  # one attempt, no retries
        merged = r.stdout
        r = self.lote("logs", job_id, "--follow")
        self.assertEqual((r.returncode, r.stdout), (0, merged), r.stderr)
        self.assertIn("job %s (mn4) SUCCEEDED" % job_id, r.stderr)
        r = self.lote("logs", job_id, "--node", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(job_lines(r.stdout.splitlines()),
                         ["[node 3] node 3 line %d" % k for k in range(lines)])
        r = self.lote("logs", job_id, "--node", "4")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--node 0 to 3", r.stderr)
        r = self.lote("logs", job_id, "--since", "10m")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.lote("logs", job_id).stdout)
        r = self.lote("logs", job_id, "--since", "10 minutes")
        self.assertEqual(r.returncode, 2)
        self.assertIn("30s, 10m, 2h, 1d", r.stderr)

    def test_terminated_mid_output_keeps_every_line(self):
        side = self.path("flood.last")
        job_id = self.submit("flood", [sys.executable, self.path("flood.py"), side])
        self.wait_status(job_id, ("RUNNING",))

        def printed():
            try:
                with open(side) as f:
                    text = f.read().strip()
                return int(text) if text else None
            except FileNotFoundError:
                return None
        wait_for(lambda: (printed() or 0) >= 5000, 30, "5000 lines printed")
        self.batch.terminate_job(jobId=job_id, reason="stop mid-output")
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["statusReason"], "stop mid-output")
        last = printed()
        stream = job["container"]["logStreamName"]
        messages = job_lines(self.stream_messages(stream))
        self.assertGreaterEqual(len(messages), last + 1)
        self.assertEqual(messages, ["line %d" % i for i in range(len(messages))])
        # lote logs prints the same lines and reports the failure.
        r = self.lote("logs", job_id)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(job_lines(r.stdout.splitlines()), messages)

    def test_stalled_node_fails_with_hang(self):
        job_id = self.submit_multinode(
            "stall", 2, [sys.executable, self.path("stall.py")],
            tags={"lote:progressTimeoutSeconds": "3"})
        # Progress shows in DescribeJobs and in lote status while it runs.
        job = wait_for(lambda: (lambda j: j if j["status"] == "RUNNING" and len(
            j.get("progress", {}).get("nodes", [])) == 2 else None)(self.describe_raw(job_id)),
            30, "progress of both nodes")
        progress = job["progress"]
        self.assertEqual(progress["total_steps"], 100)
        self.assertIn("lastProgressAt", progress)
        by_node = {n["node"]: n for n in progress["nodes"]}
        self.assertEqual(by_node[1]["step"], 1)
        self.assertEqual(by_node[1]["loss"], 7.5)
        r = self.lote("status", "--queue", "q")
        self.assertEqual(r.returncode, 0, r.stderr)
        row = [l for l in r.stdout.splitlines() if job_id in l]
        self.assertEqual(len(row), 1, r.stdout)
        self.assertIn("RUNNING", row[0])
        self.assertIn("2 nodes", row[0])
        self.assertIn("/100", row[0])
        self.assertIn("[", row[0])
        self.assertTrue(r.stdout.startswith("QUEUE"), r.stdout)

        self.wait_status(job_id, timeout=60)
        job = self.describe_raw(job_id)
        self.assertEqual(job["status"], "FAILED")
        # The attempt's reason carries the category (AWS puts the job's
        # statusReason without it); both name the stalled node and its last lines.
        self.assertEqual(job["failureCategory"], "HANG")
        attempt_reason = job["attempts"][-1]["container"]["reason"]
        self.assertTrue(attempt_reason.startswith("HANG: node 1 "), attempt_reason)
        reason = job["statusReason"]
        self.assertTrue(reason.startswith("node 1 reported no progress"), reason)
        self.assertIn("about to stall", reason)
        self.assertNotIn("node 0", reason)
        r = self.lote("wait", job_id)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED [HANG]: node 1 reported no progress", r.stdout)

    def test_follow_across_a_retry(self):
        go = self.path("follow.go")
        script = ('a=$AWS_BATCH_JOB_ATTEMPT; i=0; while [ $i -lt 20 ]; do '
                  'echo "attempt $a line $i"; i=$((i+1)); done; '
                  'while [ ! -e {go}.$a ]; do sleep 0.05; done; [ $a = 2 ]').format(go=go)
        job_id = self.submit("follow", ["sh", "-c", script], retryStrategy={"attempts": 2})
        proc = subprocess.Popen([LOTE, "logs", job_id, "--follow"], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),
                                  daemon=True)
        reader.start()
        try:
            for attempt in (1, 2):
                wait_for(lambda: "attempt %d line 19\n" % attempt in lines, 40,
                         "follow to print attempt %d (got %r)" % (attempt, lines[-5:]))
                self.assertEqual(proc.poll(), None)  # still following
                open("%s.%d" % (go, attempt), "w").close()
            proc.wait(timeout=40)
            reader.join(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = proc.stderr.read()
        proc.stderr.close()
        proc.stdout.close()
        self.assertEqual(proc.returncode, 0, stderr)
        self.assertIn("SUCCEEDED", stderr)
        text = job_lines("".join(lines).splitlines())
        self.assertEqual(len(text), 42, text)
        self.assertRegex(text[0], r"^--- attempt 1 \(started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\) ---$")
        self.assertEqual(text[1:21], ["attempt 1 line %d" % i for i in range(20)])
        self.assertRegex(text[21], r"^--- attempt 2 \((started .*Z|not started yet)\) ---$")
        self.assertEqual(text[22:], ["attempt 2 line %d" % i for i in range(20)])
        # Afterwards, one attempt at a time.
        r = self.lote("logs", job_id, "--attempt", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(job_lines(r.stdout.splitlines())[1:],
                         ["attempt 1 line %d" % i for i in range(20)])
        r = self.lote("logs", job_id, "--attempt", "3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--attempt 1 to 2", r.stderr)

    def test_wait_and_logs_exit_codes(self):
        ok = self.submit("ok", ["sh", "-c", "echo fine"])
        bad = self.submit("bad", ["sh", "-c", "echo broken; exit 3"])
        slow = self.submit("slow", ["sleep", "300"])
        r = self.lote("wait", ok)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("job %s (ok) SUCCEEDED" % ok, r.stdout)
        r = self.lote("wait", bad, "--timeout", "60")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("job %s (bad) FAILED" % bad, r.stdout)
        r = self.lote("logs", bad)
        self.assertEqual((r.returncode, job_lines(r.stdout.splitlines())), (1, ["broken"]), r.stderr)
        r = self.lote("logs", ok, "--follow")
        self.assertEqual((r.returncode, job_lines(r.stdout.splitlines())), (0, ["fine"]), r.stderr)
        self.wait_status(slow, ("RUNNING",))
        r = self.lote("wait", slow, "--timeout", "1")
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertIn("still RUNNING", r.stderr)
        self.batch.terminate_job(jobId=slow, reason="test cleanup")
        self.assertEqual(self.wait_status(slow)["status"], "FAILED")
        for command in ("wait", "logs"):
            r = self.lote(command, "no-such-job")
            self.assertEqual(r.returncode, 2, (command, r.stdout, r.stderr))
            self.assertIn("no job with id 'no-such-job'", r.stderr)
        r = self.lote("status", "--queue", "no-such-queue")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no job queue 'no-such-queue'", r.stderr)
        r = self.lote("wait", ok, "--endpoint", "http://127.0.0.1:1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot reach the lote server", r.stderr)


RESOURCES = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
