"""Fault injection and hang evidence through the server (docs/faults.md).

A 4-node job (TP 2 x DP 2, `lote train --nproc-per-node 1`) asks, with
lote:inject... parameters, its own node runner to kill, preempt or stop node 1 at
step 8 (from the main node's LOTE_PROGRESS lines), and the outcome is the one a
user relies on: a killed node's retry resumes from the checkpoint and ends with the
uninterrupted run's losses; a preempted attempt is PREEMPTED and retried without
consuming an attempt; a stopped node makes the job HANG, with the stack dumps of
all four nodes stored as "<stream>/dump" and the reason naming the stopped node;
checkpoint writes refused for a window make the covered checkpoint fail with a
warning while the job goes on, and the next checkpoint lands and loads.
`lote jobs inject` / `lote jobs dump` act on a running job; bad keys are refused.

usage: faults_test.py LOTE_BINARY TEST_DATA_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import botocore.exceptions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, create_emulated_environment, describe_job_raw  # noqa: E402

LOTE = None
DATA = None
STEPS = 16


class FaultsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lote_faults_")
        cls.data = os.path.join(cls.dir, "sotu")
        subprocess.run([LOTE, "data", "prepare", "--input", os.path.join(DATA, "sotu.txt"),
                        "--tokenizer", os.path.join(DATA, "tokenizer.model"),
                        "--block-size", "65", "--output", "file://" + cls.data],
                       check=True, capture_output=True)
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()
        cls.logs = cls.server.client("logs")
        create_emulated_environment(cls.batch, "faults-ce")
        cls.batch.create_job_queue(jobQueueName="faults-q", priority=1, computeEnvironmentOrder=[
            {"order": 1, "computeEnvironment": "faults-ce"}])
        cls.server.wait_for(lambda: cls.batch.describe_job_queues(jobQueues=["faults-q"])[
            "jobQueues"][0]["status"] == "VALID", 30, "the job queue")

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    # --- helpers -------------------------------------------------------------------

    def wait(self, pred, timeout, what):
        return self.server.wait_for(pred, timeout, what)

    def wait_ended(self, job_id):
        def ended():
            j = self.batch.describe_jobs(jobs=[job_id])["jobs"][0]
            return j if j["status"] in ("SUCCEEDED", "FAILED") else None
        return self.wait(ended, 600, "job %s to end" % job_id)

    def wait_running(self, job_id):
        return self.wait(lambda: self.batch.describe_jobs(jobs=[job_id])["jobs"][0]["status"]
                         == "RUNNING", 120, "job %s RUNNING" % job_id)

    def train_args(self):
        config = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "..", "examples", "llama2", "model", "tiny.json"))
        return ["--config", config, "--data", self.data, "--tensor-parallel-size", "2",
                "--seq-len", "64", "--batch-size", "2", "--global-batch-size", "4",
                "--max-steps", str(STEPS), "--logging-interval", "1", "--threads", "1",
                "--peak-gflops", "10"]

    def submit(self, name, command, parameters, attempts=1, nodes=4):
        env = [{"name": "OMP_NUM_THREADS", "value": "1"}]
        env += [{"name": k, "value": v} for k, v in sorted(os.environ.items())
                if k.startswith("OPENBLAS_")]
        self.batch.register_job_definition(
            jobDefinitionName=name, type="multinode", retryStrategy={"attempts": attempts},
            nodeProperties={"numNodes": nodes, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host", "command": command, "environment": env,
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "512"}]}}]})
        return self.batch.submit_job(jobName=name, jobQueue="faults-q", jobDefinition=name,
                                     parameters=parameters)["jobId"]

    def training(self, name, parameters, attempts, checkpoint_freq):
        ckpt = os.path.join(self.dir, name + "_ckpt")
        out = os.path.join(self.dir, name + "_out")
        command = [LOTE, "train", *self.train_args(), "--nproc-per-node", "1",
                   "--checkpoint-uri", "file://" + ckpt, "--checkpoint-freq",
                   str(checkpoint_freq), "--output", out]
        return self.submit(name, command, parameters, attempts), ckpt, out

    def uninterrupted(self):
        if not hasattr(FaultsTest, "_reference"):
            out = os.path.join(self.dir, "reference")
            subprocess.run([LOTE, "train", *self.train_args(), "--nproc-per-node", "4",
                            "--output", out], check=True, capture_output=True, timeout=600,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
            with open(os.path.join(out, "metrics.json")) as f:
                FaultsTest._reference = json.load(f)
        return FaultsTest._reference

    def job_logs(self, job_id):
        return subprocess.run([LOTE, "logs", job_id, "--endpoint", self.server.endpoint],
                              capture_output=True, text=True, env=self.server.env()).stdout

    def lote(self, *args):
        return subprocess.run([LOTE, *args, "--endpoint", self.server.endpoint],
                              capture_output=True, text=True, env=self.server.env(), timeout=300)

    def stream_text(self, stream):
        r = self.logs.get_log_events(logGroupName="/aws/batch/job", logStreamName=stream,
                                     startFromHead=True, limit=10000)
        return "\n".join(e["message"] for e in r["events"])

    def assert_resumed_like_uninterrupted(self, job_id, ckpt, out):
        logs = self.job_logs(job_id)
        self.assertIn("resumed from file://%s/%s/step_" % (ckpt, job_id), logs)
        with open(os.path.join(out, "metrics.json")) as f:
            resumed = json.load(f)
        ref = self.uninterrupted()
        self.assertEqual(resumed["final_loss"], ref["final_loss"])
        self.assertEqual(resumed["losses"], ref["losses"][resumed["first_step"] - 1:])

    # --- tests ---------------------------------------------------------------------

    def test_killed_at_step_8_resumes_from_its_checkpoint(self):
        job_id, ckpt, out = self.training(
            "kill8", {"lote:injectKillNode": "1", "lote:injectKillAtStep": "8"}, attempts=2,
            checkpoint_freq=4)
        job = self.wait_ended(job_id)
        raw = describe_job_raw(self.batch, job_id)
        self.assertEqual(job["status"], "SUCCEEDED", (raw["attempts"], self.job_logs(job_id)[-3000:]))
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])
        first = job["attempts"][0]
        self.assertRegex(first["statusReason"],
                         r"^Injected fault: node 1 killed \(SIGKILL\) at step (\d+)$")
        self.assertGreaterEqual(int(re.search(r"step (\d+)", first["statusReason"]).group(1)), 8)
        # lote's notices about the node may follow in the container's reason.
        self.assertTrue(raw["attempts"][0]["container"]["reason"].startswith(
            "USER_ERROR: " + first["statusReason"]), raw["attempts"][0])
        self.assertEqual(job["attempts"][1]["statusReason"], "Essential container in task exited")
        self.assert_resumed_like_uninterrupted(job_id, ckpt, out)

    def test_preempted_at_step_8_is_retried_without_consuming_an_attempt(self):
        job_id, ckpt, out = self.training(
            "preempt8", {"lote:injectPreemptNode": "1", "lote:injectPreemptAtStep": "8",
                         "lote:terminationGraceSeconds": "120"}, attempts=1, checkpoint_freq=1000)
        job = self.wait_ended(job_id)
        raw = describe_job_raw(self.batch, job_id)
        self.assertEqual(job["status"], "SUCCEEDED", (raw["attempts"], self.job_logs(job_id)[-3000:]))
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])  # attempts: 1, yet retried
        self.assertEqual(raw["attempts"][0]["failureCategory"], "PREEMPTED", raw["attempts"][0])
        self.assertRegex(job["attempts"][0]["statusReason"],
                         r"^Injected fault: node 1 preempted \(SIGTERM, 120 s grace\) at step \d+$")
        self.assertEqual(job["attempts"][0]["container"]["exitCode"], 75)
        self.assertIn("preempted: stopped after step", self.job_logs(job_id))
        self.assert_resumed_like_uninterrupted(job_id, ckpt, out)

    def test_stopped_node_hangs_with_stack_dumps_of_every_node(self):
        job_id, _, _ = self.training(
            "stop4", {"lote:injectStopNode": "1", "lote:injectStopAtStep": "4",
                      "lote:progressTimeoutSeconds": "10", "lote:terminationGraceSeconds": "5"},
            attempts=1, checkpoint_freq=1000)
        job = self.wait_ended(job_id)
        raw = describe_job_raw(self.batch, job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(raw["failureCategory"], "HANG", raw)
        reason = raw["attempts"][0]["container"]["reason"]
        print("HANG reason:", reason)
        self.assertTrue(reason.startswith("HANG: Injected fault: node 1 stopped (SIGSTOP) at step"),
                        reason)
        self.assertIn("; then node 0 reported no progress", reason)
        self.assertIn("straggler: node 1 (its processes are stopped, state T)", reason)
        self.assertIn("stack dumps of nodes 0, 1, 2, 3 are in", reason)
        streams = [a["logStreamName"] for a in self.node_streams(job_id)]
        self.assertEqual(len(streams), 4, streams)
        for node, stream in enumerate(streams):
            dump = self.stream_text(stream + "/dump")
            self.assertIn("=== process ", dump, (node, dump[:2000]))
            self.assertIn("=== last progress: ", dump)
            self.assertEqual("(T (stopped))" in dump, node == 1, (node, dump[:2000]))
            # Threads' stacks, as gdb prints them (ptrace is allowed on this host).
            self.assertRegex(dump, r"(?m)^#0 ", (node, dump[:2000]))
        self.assertRegex(self.stream_text(streams[0] + "/dump"),
                         r"=== last progress: LOTE_PROGRESS \{.*\"step\":")

    def node_streams(self, job_id):
        """Each node's log stream, node index order (the child jobs id#N)."""
        out = []
        for n in range(4):
            j = self.batch.describe_jobs(jobs=["%s#%d" % (job_id, n)])["jobs"][0]
            out.append({"logStreamName": j["container"]["logStreamName"]})
        return out

    def test_inject_and_dump_a_running_job_from_the_cli(self):
        script = ('if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then i=0; while [ $i -lt 100000 ]; '
                  'do i=$((i+1)); echo "LOTE_PROGRESS {\\"step\\": $i}"; sleep 0.05; done; '
                  'else sleep 100000; fi')
        job_id = self.submit("cli-inject", ["sh", "-c", script], {}, attempts=1, nodes=2)
        self.wait_running(job_id)
        self.wait(lambda: (describe_job_raw(self.batch, job_id).get("progress") or {}).get(
            "step", 0) >= 2, 60, "progress")
        # Bad requests are refused with the option or member named.
        r = self.lote("jobs", "inject", job_id, "--kill-node", "5", "--at-step", "3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("nodeIndex must be a whole number from 0 to 1", r.stderr)
        r = self.lote("jobs", "inject", job_id, "--kill-node", "1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("give exactly one of --at-step and --after", r.stderr)
        # Evidence of a running job: every node dumped, the job goes on.
        r = self.lote("jobs", "dump", job_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"node 0: /aws/batch/job \S+/dump")
        self.assertRegex(r.stdout, r"node 1: /aws/batch/job \S+/dump")
        self.assertIn("stack dumps of nodes 0, 1 are in", r.stdout)
        self.assertEqual(self.batch.describe_jobs(jobs=[job_id])["jobs"][0]["status"], "RUNNING")
        # The fault, at a step still to come.
        step = (describe_job_raw(self.batch, job_id).get("progress") or {}).get("step", 0)
        r = self.lote("jobs", "inject", job_id, "--kill-node", "1", "--at-step", str(step + 20))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kill node 1 at step %d (requested)" % (step + 20), r.stdout)
        job = self.wait_ended(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertRegex(job["attempts"][0]["statusReason"],
                         r"^Injected fault: node 1 killed \(SIGKILL\) at step \d+$")
        at = int(re.search(r"step (\d+)", job["attempts"][0]["statusReason"]).group(1))
        self.assertGreaterEqual(at, step + 20)

    def test_failed_checkpoint_upload_is_survived_and_the_next_lands(self):
        # Every node's checkpoint writes fail for 20 s from step 4: the checkpoint of
        # step 4 fails on every rank (its upload is refused until the window closes,
        # so the next checkpoint, which waits for it, starts after the window).
        job_id, ckpt, out = self.training(
            "upload4", {"lote:injectUploadFailSeconds": "20", "lote:injectUploadFailAtStep": "4"},
            attempts=1, checkpoint_freq=4)
        job = self.wait_ended(job_id)
        logs = self.job_logs(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", logs[-3000:])
        self.assertEqual(len(job["attempts"]), 1, job["attempts"])
        # DescribeJobs shows that the fault was injected, though the job succeeded.
        self.assertEqual(job["attempts"][0]["statusReason"], "Essential container in task exited")
        self.assertIn("Injected fault: checkpoint writes of node 0 fail for 20 s from step 4",
                      job["attempts"][0]["container"]["reason"])
        self.assertIn("fault injection: checkpoint writes fail for 20 s from step 4", logs)
        self.assertRegex(logs, r"warning: checkpoint at step 4 failed \(file://%s/%s/step_4\): "
                         r".*injected fault.*the latest checkpoint stays none" % (ckpt, job_id))
        self.assertNotIn("checkpoint at step 8 failed", logs)
        root = os.path.join(ckpt, job_id)
        self.assertFalse(os.path.exists(os.path.join(root, "step_4", "manifest.json")))
        for step in (8, 12, STEPS):
            self.assertTrue(os.path.exists(os.path.join(root, "step_%d" % step, "manifest.json")),
                            step)
        # Step 8 loads (every shard checked against its manifest) and the run's
        # training is the uninterrupted one's.
        exported = os.path.join(self.dir, "upload4_step8")
        r = subprocess.run([LOTE, "checkpoint", "export", "file://%s/step_8" % root,
                            "--output", exported], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("exported step 8", r.stdout)
        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
        self.assertEqual(metrics["checkpoint_failures"], 1)
        self.assertEqual(metrics["losses"], self.uninterrupted()["losses"])

    def test_slow_node_runs_in_turns_and_the_job_succeeds(self):
        # Node 1 (busy, never sleeping) writes its pid; node 0 watches its state in
        # /proc and ends both once it has seen it stopped ('T') and running again:
        # the turns of the slow node, seen from outside its process group.
        shared = tempfile.mkdtemp(prefix="slow_", dir=self.dir)
        watch = ("import os, sys, time\n"
                 "pid_file, done = sys.argv[1] + '/pid', sys.argv[1] + '/done'\n"
                 "seen = []\n"
                 "deadline = time.time() + 300\n"
                 "while time.time() < deadline and seen[-2:] != ['T', 'R']:\n"
                 "    try:\n"
                 "        pid = open(pid_file).read().strip()\n"
                 "        stat = open('/proc/%s/stat' % pid).read()\n"
                 "    except (OSError, ValueError):\n"
                 "        time.sleep(0.01); continue\n"
                 "    s = stat[stat.rindex(')') + 2]\n"
                 "    s = 'R' if s in 'RS' else s\n"
                 "    if s in 'TR' and (not seen or seen[-1] != s): seen.append(s)\n"
                 "    time.sleep(0.005)\n"
                 "print('states seen: ' + ' '.join(seen))\n"
                 "open(done, 'w').close()\n"
                 "sys.exit(0 if seen[-2:] == ['T', 'R'] else 1)\n")
        script = ('if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then exec python3 -c "$0" "$1"; '
                  'else echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"; '
                  'while [ ! -e "$1/done" ]; do :; done; fi')
        job_id = self.submit("slow", ["sh", "-c", script, watch, shared],
                             {"lote:injectSlowNode": "1", "lote:injectSlowAfterSeconds": "0",
                              "lote:injectSlowPercent": "25"}, attempts=1, nodes=2)
        job = self.wait_ended(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        node1 = self.batch.describe_jobs(jobs=[job_id + "#1"])["jobs"][0]
        self.assertIn("Injected fault: node 1 slowed to 25% of its CPU time (SIGSTOP and SIGCONT "
                      "in turns, every 100 ms) after 0 s", node1["attempts"][0]["container"]["reason"])
        node0 = self.batch.describe_jobs(jobs=[job_id + "#0"])["jobs"][0]
        stream = node0["attempts"][0]["container"]["logStreamName"]
        self.wait(lambda: "states seen: " in self.stream_text(stream), 60,
                  "node 0's line in its log stream")
        self.assertRegex(self.stream_text(stream), r"states seen: .*T R")

    def test_bad_inject_keys_are_client_exceptions(self):
        self.batch.register_job_definition(jobDefinitionName="plain", type="container",
                                           containerProperties={"image": "host",
                                                                "command": ["true"],
                                                                "vcpus": 1, "memory": 64})
        cases = [
            ({"lote:injectKillNode": "1", "lote:injectKillAtStep": "8"},
             "lote:injectKillNode is '1': give a whole number from 0 to 0"),
            ({"lote:injectKillAtStep": "8", "lote:injectStopAtStep": "9"}, "one injected fault"),
            ({"lote:injectSlowNode": "1"}, "give exactly one of lote:injectSlowAtStep"),
            ({"lote:injectSlowAtStep": "2", "lote:injectSlowPercent": "0"},
             "lote:injectSlowPercent is '0': give a whole number from 1 to 99"),
            ({"lote:injectUploadFailAtStep": "4"},
             "lote:injectUploadFailAtStep needs lote:injectUploadFailSeconds"),
            ({"lote:injectUploadFailSeconds": "0"},
             "lote:injectUploadFailSeconds is '0': give a whole number from 1"),
            ({"lote:injectKil": "1"}, "lote:injectKil is not a fault lote can inject"),
        ]
        for parameters, message in cases:
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                self.batch.submit_job(jobName="bad", jobQueue="faults-q", jobDefinition="plain",
                                      parameters=parameters)
            self.assertEqual(e.exception.response["Error"]["Code"], "ClientException")
            self.assertIn(message, e.exception.response["Error"]["Message"])
        # Tags are read too; a job without keys runs untouched.
        with self.assertRaises(botocore.exceptions.ClientError):
            self.batch.submit_job(jobName="bad", jobQueue="faults-q", jobDefinition="plain",
                                  tags={"lote:injectStopAfterSeconds": "soon"})
        ok = self.batch.submit_job(jobName="fine", jobQueue="faults-q", jobDefinition="plain")
        self.assertEqual(self.wait_ended(ok["jobId"])["status"], "SUCCEEDED")


if __name__ == "__main__":
    LOTE = os.path.abspath(sys.argv.pop(1))
    DATA = sys.argv.pop(1)
    unittest.main(verbosity=2)
