"""The web console in a real browser, against a real `lote server`.

The server runs a 4-node training job (`lote train`, TP=2 x DP=2, a progress
line every step) and a job that waits RUNNABLE on a queue whose only compute
environment is disabled. console_browser.cjs (puppeteer-core driving Debian's
chromium) then signs in (a wrong secret first), reads the overview and the jobs
list, watches the training job's loss chart gain points and its logs follow,
reads why the other job waits, and terminates the training job through the
confirmation dialog until it shows FAILED; it saves a screenshot of each page.
This script checks the outcome through boto3 and the refusals of requests
without a session cookie or a CSRF token.

usage: test_console.py --lote BIN --data TESTDATA --node-modules DIR --artifacts DIR
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import (LoteServer, describe_job_raw, kill_node_runner,  # noqa: E402
                         quarantined_nodes)

ARGS = None
HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = "/usr/bin/chromium"


def http(method, url, body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConsoleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for need, what in ((CHROMIUM, "Debian's chromium"),
                           (os.path.join(ARGS.node_modules, "puppeteer-core"), "puppeteer-core")):
            if not os.path.exists(need):
                raise RuntimeError("%s is missing (%s): run scripts/install-deps.sh" % (what, need))
        cls.dir = tempfile.mkdtemp(prefix="lote_console_test_")
        cls.data = os.path.join(cls.dir, "sotu")
        subprocess.run([ARGS.lote, "data", "prepare", "--input", os.path.join(ARGS.data, "sotu.txt"),
                        "--tokenizer", os.path.join(ARGS.data, "tokenizer.model"),
                        "--block-size", "65", "--output", "file://" + cls.data],
                       check=True, capture_output=True)
        # One lost node quarantines it (docs/quarantine.md), so the overview has a
        # quarantined node to show and release.
        # One supervisor program per node: quarantine_a_node loses one job's node
        # by killing its runner, where the node agent runs every node of the host
        # (killing it and its keeper would lose the training job's nodes too).
        cls.server = LoteServer(ARGS.lote, extra_args=[
            "--quarantine-failures", "1", "--node-agent", "off"]).start()
        cls.batch = cls.server.client()
        with open(os.path.join(cls.server.home, "console.json")) as f:
            cls.url = json.load(f)["url"]

    @classmethod
    def tearDownClass(cls):
        # Running nodes outlive a stopped server (they are adopted on restart):
        # end every job of this test first.
        try:
            for queue in ("train-q", "idle-q", "bad-q"):
                for status in ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"):
                    for j in cls.batch.list_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]:
                        cls.batch.terminate_job(jobId=j["jobId"], reason="test cleanup")
            deadline = time.time() + 60
            while time.time() < deadline and any(
                    cls.batch.list_jobs(jobQueue="train-q", jobStatus=s)["jobSummaryList"]
                    for s in ("STARTING", "RUNNING")):
                time.sleep(0.5)
        except Exception as e:  # the queues may not exist when setup failed
            print("cleanup:", e)
        cls.server.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def wait(self, pred, timeout, what):
        return self.server.wait_for(pred, timeout, what)

    def make_queue(self, queue, ce, state):
        b = self.batch
        b.create_compute_environment(
            computeEnvironmentName=ce, type="MANAGED", state=state,
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 64,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true"})
        self.wait(lambda: b.describe_compute_environments(computeEnvironments=[ce])[
            "computeEnvironments"][0]["status"] == "VALID", 30, "the compute environment")
        b.create_job_queue(jobQueueName=queue, priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce}])
        self.wait(lambda: b.describe_job_queues(jobQueues=[queue])["jobQueues"][0][
            "status"] == "VALID", 30, "the job queue")

    def quarantined_nodes(self):
        return quarantined_nodes(self.batch)

    def quarantine_a_node(self):
        """A job on bad-ce whose node's runner is killed (kill -9) while it runs ends
        NODE_LOST; with --quarantine-failures 1 its virtual instance is quarantined
        (as tests/quarantine does with three)."""
        b = self.batch
        self.make_queue("bad-q", "bad-ce", "ENABLED")
        ready = os.path.join(self.dir, "bad-ready")
        job_id = b.submit_job(jobName="console-lost", jobQueue="bad-q", jobDefinition="waiter",
                              containerOverrides={"command": [
                                  "sh", "-c", "touch %s; exec sleep 300" % ready]})["jobId"]
        self.wait(lambda: os.path.exists(ready), 60, "the job on bad-ce to run")
        kill_node_runner(self.server.home, job_id)
        job = self.wait(lambda: (lambda j: j if j["status"] in ("SUCCEEDED", "FAILED") else None)(
            b.describe_jobs(jobs=[job_id])["jobs"][0]), 60, "the lost job to end")
        self.assertIn("NODE_LOST", json.dumps(job["attempts"][0]))
        nodes = self.wait(self.quarantined_nodes, 30, "the node to be quarantined")
        self.assertEqual(len(nodes), 1, nodes)
        self.assertIn(job_id, nodes[0]["reason"])
        return nodes[0]

    def test_console_in_a_browser(self):
        b = self.batch
        self.make_queue("train-q", "train-ce", "ENABLED")
        self.make_queue("idle-q", "idle-ce", "DISABLED")
        config = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "llama2",
                                              "model", "tiny.json"))
        command = [ARGS.lote, "train", "--config", config, "--data", self.data,
                   "--nproc-per-node", "1", "--tensor-parallel-size", "2", "--seq-len", "64",
                   "--batch-size", "2", "--global-batch-size", "4", "--max-steps", "100000",
                   "--logging-interval", "1", "--threads", "1", "--peak-gflops", "10",
                   "--master-port", str(free_port())]
        b.register_job_definition(
            jobDefinitionName="llama-console", type="multinode",
            nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host", "command": command, "user": "root",
                    "environment": [{"name": "OMP_NUM_THREADS", "value": "1"},
                                    {"name": "WANDB_API_KEY", "value": "secret-value-1234"}],
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "512"}]}}]})
        train_id = b.submit_job(jobName="console-train", jobQueue="train-q",
                                jobDefinition="llama-console")["jobId"]
        b.register_job_definition(
            jobDefinitionName="waiter", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "64"}]})
        wait_id = b.submit_job(jobName="console-waits", jobQueue="idle-q",
                               jobDefinition="waiter")["jobId"]
        self.wait(lambda: b.describe_jobs(jobs=[wait_id])["jobs"][0]["status"] == "RUNNABLE", 60,
                  "the waiting job to be RUNNABLE")
        # A job that asks for an injected fault (docs/faults.md): its first attempt
        # is killed after a second, the retry succeeds; the timeline marks the fault.
        b.register_job_definition(
            jobDefinitionName="faulted", type="container",
            containerProperties={"image": "host", "command": ["sleep", "3"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "64"}]})
        fault_id = b.submit_job(jobName="console-faulted", jobQueue="train-q",
                                jobDefinition="faulted", retryStrategy={"attempts": 2},
                                parameters={"lote:injectKillNode": "0",
                                            "lote:injectKillAfterSeconds": "1"})["jobId"]
        faulted = self.wait(lambda: (lambda j: j if j["status"] in ("SUCCEEDED", "FAILED") else None)(
            b.describe_jobs(jobs=[fault_id])["jobs"][0]), 120, "the faulted job to end")
        self.assertEqual(faulted["status"], "SUCCEEDED", faulted)
        self.assertEqual(len(faulted["attempts"]), 2, faulted["attempts"])
        self.assertIn("Injected fault: node 0 killed", faulted["attempts"][0]["statusReason"])
        # The first attempt's category (a lote extra) stays with it; the job that then
        # succeeded has none.
        raw = describe_job_raw(b, fault_id)
        self.assertEqual(raw["attempts"][0]["failureCategory"], "USER_ERROR", raw)
        self.assertNotIn("failureCategory", raw)
        quarantined = self.quarantine_a_node()
        key_id, secret = self.server.credentials()

        # No session cookie: every data call is refused.
        status, body, _ = http("POST", self.url + "api/batch/DescribeJobs",
                               json.dumps({"jobs": [train_id]}).encode(),
                               {"Content-Type": "application/json"})
        self.assertEqual(status, 401, body)
        status, body, _ = http("GET", self.url + "api/progress?jobId=" + train_id)
        self.assertEqual(status, 401, body)
        # A session without the CSRF token cannot terminate.
        status, body, headers = http("POST", self.url + "api/signin", json.dumps(
            {"accessKeyId": key_id, "secretAccessKey": secret}).encode(),
            {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        cookie = headers["Set-Cookie"].split(";")[0]
        status, body, _ = http("POST", self.url + "api/batch/TerminateJob", json.dumps(
            {"jobId": train_id, "reason": "no csrf"}).encode(),
            {"Content-Type": "application/json", "Cookie": cookie})
        self.assertEqual(status, 403, body)
        self.assertEqual(b.describe_jobs(jobs=[train_id])["jobs"][0]["isTerminated"], False)
        # `lote console` prints a one-time link: it signs in once.
        link = subprocess.run([ARGS.lote, "console", "--home", self.server.home], check=True,
                              capture_output=True, text=True).stdout.strip()
        self.assertTrue(link.startswith(self.url + "signin?token="), link)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None
        opener = urllib.request.build_opener(NoRedirect)
        answers = []
        for _ in range(2):
            try:
                opener.open(link, timeout=30)
            except urllib.error.HTTPError as e:
                answers.append((e.code, e.headers.get("Location"), e.headers.get("Set-Cookie")))
        self.assertEqual(answers[0][:2], (303, "/console/"), answers)
        self.assertIn("HttpOnly", answers[0][2])
        self.assertEqual(answers[1], (303, "/console/#signin-refused", None), answers)
        link_cookie = answers[0][2].split(";")[0]
        self.assertEqual(http("GET", self.url + "api/session", None, {"Cookie": link_cookie})[0], 200)
        # The environment is masked unless revealed.
        csrf = json.loads(http("GET", self.url + "api/session", None, {"Cookie": cookie})[1])[
            "csrfToken"]
        status, body, _ = http("POST", self.url + "api/batch/DescribeJobs", json.dumps(
            {"jobs": [train_id]}).encode(),
            {"Content-Type": "application/json", "Cookie": cookie, "X-CSRF-Token": csrf})
        self.assertEqual(status, 200, body)
        self.assertNotIn(b"secret-value-1234", body)
        self.assertIn(b"WANDB_API_KEY", body)

        shutil.rmtree(ARGS.artifacts, ignore_errors=True)
        os.makedirs(ARGS.artifacts)
        spec = {"url": self.url, "keyId": key_id, "secret": secret, "trainJob": train_id,
                "waitJob": wait_id, "faultJob": fault_id, "quarantinedNode": quarantined["node"],
                "artifacts": ARGS.artifacts, "chromium": CHROMIUM}
        env = dict(os.environ, NODE_PATH=ARGS.node_modules)
        run = subprocess.run(["node", os.path.join(HERE, "console_browser.cjs"), json.dumps(spec)],
                             env=env, capture_output=True, text=True, timeout=480)
        print(run.stdout)
        self.assertEqual(run.returncode, 0, "browser script failed:\n%s\n%s\nserver:\n%s" % (
            run.stdout[-4000:], run.stderr[-4000:], self.server.stderr()[-3000:]))
        report = json.loads(run.stdout.strip().splitlines()[-1])

        # What the browser did happened on the server.
        job = self.wait(lambda: (lambda j: j if j["status"] == "FAILED" else None)(
            b.describe_jobs(jobs=[train_id])["jobs"][0]), 60, "the terminated job to FAIL")
        self.assertTrue(job["isTerminated"])
        self.assertIn("lote console", job.get("statusReason", "") + json.dumps(job))
        self.assertGreater(report["chartPointsLater"], report["chartPointsFirst"])
        self.assertGreater(report["logLinesLater"], report["logLinesFirst"])
        self.assertIn("revealed the environment", self.server.stderr())
        # The node released in the overview is released on the server.
        self.assertEqual(self.quarantined_nodes(), [])
        self.assertIn("calls ReleaseNode", self.server.stderr())
        self.assertIn("Release node " + quarantined["node"], report["releaseConfirm"])
        for shot in ("signin-refused", "overview", "jobs", "job", "training", "logs", "runnable",
                     "quarantined", "released", "terminated"):
            self.assertTrue(os.path.getsize(os.path.join(ARGS.artifacts, shot + ".png")) > 1000, shot)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--node-modules", required=True)
    parser.add_argument("--artifacts", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
