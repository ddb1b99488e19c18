"""Faults asked by a whole compute environment, and a capacity hold kept across a
restart, through a real server driven by the `aws` CLI and boto3 (docs/faults.md,
docs/quarantine.md).

- An environment created with the aws CLI and tagged `lote:injectKillNode=1` +
  `lote:injectKillAtStep=3`: each 2-node job placed on it has node 1 killed in its
  first attempt there (the reason says the environment's tags asked), the retry
  runs undisturbed; a job with a fault of its own gets its own instead; a 1-node
  job (no node 1) is not disturbed.
- Bad lote:inject... tags on CreateComputeEnvironment and TagResource are
  ClientExceptions naming the key.
- An environment tagged `lote:injectCapacityShortageSeconds`: its queue's jobs wait
  RUNNABLE with a reason naming the environment; the server is stopped while the
  job is held and started again after the hold's end: the hold is not served
  again (the job runs at once, not N s after the restart), and the hold was
  recorded once.
- A job that survives an injected upload failure (`lote:injectUploadFailSeconds`)
  SUCCEEDS, and DescribeJobs shows that the fault was injected.

usage: environment_faults_test.py LOTE_BINARY
"""
import json
import os
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")
# The main node prints a progress line every 0.1 s for 5 s; every node runs it.
PROGRESS = ('i=0; while [ $i -lt 50 ]; do i=$((i+1)); '
            'echo "LOTE_PROGRESS {\\"step\\": $i}"; sleep 0.1; done')
SHORTAGE = 10  # seconds


class EnvironmentFaultsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    # --- helpers -------------------------------------------------------------------

    def aws(self, *args, check=True):
        env = self.server.env()
        cmd = ["aws", "batch", *args, "--output", "json"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        if check:
            self.assertEqual(r.returncode, 0, "%s: %s" % (" ".join(cmd), r.stderr))
        return r

    def wait_valid(self, kind, name):
        if kind == "ce":
            self.server.wait_for(lambda: self.batch.describe_compute_environments(
                computeEnvironments=[name])["computeEnvironments"][0]["status"] == "VALID",
                30, "compute environment %s" % name)
        else:
            self.server.wait_for(lambda: self.batch.describe_job_queues(
                jobQueues=[name])["jobQueues"][0]["status"] == "VALID", 30, "job queue %s" % name)

    def queue_on(self, queue, ce):
        self.batch.create_job_queue(jobQueueName=queue, priority=1, computeEnvironmentOrder=[
            {"order": 1, "computeEnvironment": ce}])
        self.wait_valid("queue", queue)

    def describe(self, job_id):
        return self.batch.describe_jobs(jobs=[job_id])["jobs"][0]

    def wait_ended(self, job_id, timeout=120):
        return self.server.wait_for(
            lambda: (lambda j: j if j["status"] in FINAL else None)(self.describe(job_id)),
            timeout, "job %s to end" % job_id)

    def register(self, name, nodes, script, attempts):
        container = {"image": "host", "command": ["sh", "-c", script],
                     "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                              {"type": "MEMORY", "value": "128"}]}
        if nodes == 1:
            self.batch.register_job_definition(jobDefinitionName=name, type="container",
                                               retryStrategy={"attempts": attempts},
                                               containerProperties=container)
        else:
            self.batch.register_job_definition(
                jobDefinitionName=name, type="multinode", retryStrategy={"attempts": attempts},
                nodeProperties={"numNodes": nodes, "mainNode": 0, "nodeRangeProperties": [
                    {"targetNodes": "0:", "container": container}]})

    def events_of(self, job_id):
        """The job's stored events (type, time, reason), read from the server's store."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.server.home, "lote.db"),
                             uri=True)
        try:
            rows = db.execute("SELECT type, time_ms, payload FROM job_events WHERE job_id = ? "
                              "ORDER BY seq", (job_id,)).fetchall()
        finally:
            db.close()
        return [(t, ms, json.loads(p).get("reason", "")) for t, ms, p in rows]

    # --- tests ---------------------------------------------------------------------

    def test_an_environments_kill_reaches_each_jobs_first_attempt_there(self):
        tags = "lote:emulation=true,lote:injectKillNode=1,lote:injectKillAtStep=3"
        self.aws("create-compute-environment", "--compute-environment-name", "kill-ce",
                 "--type", "MANAGED", "--compute-resources",
                 "type=EC2,minvCpus=0,maxvCpus=64,instanceTypes=c5.large,subnets=s",
                 "--tags", tags)
        self.wait_valid("ce", "kill-ce")
        self.queue_on("kill-q", "kill-ce")
        self.register("progress2", 2, PROGRESS, attempts=2)
        self.register("progress1", 1, PROGRESS, attempts=1)
        gang = self.batch.submit_job(jobName="gang", jobQueue="kill-q",
                                     jobDefinition="progress2")["jobId"]
        own = self.batch.submit_job(jobName="own", jobQueue="kill-q", jobDefinition="progress2",
                                    parameters={"lote:injectKillNode": "0",
                                                "lote:injectKillAtStep": "2"})["jobId"]
        single = self.batch.submit_job(jobName="single", jobQueue="kill-q",
                                       jobDefinition="progress1")["jobId"]

        job = self.wait_ended(gang)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])
        self.assertRegex(job["attempts"][0]["statusReason"],
                         r"^Injected fault: node 1 killed \(SIGKILL\) at step \d+ \(asked by the "
                         r"tags of compute environment kill-ce\)$")
        self.assertEqual(job["attempts"][1]["statusReason"], "Essential container in task exited")
        # Recorded as a job's own fault: the reason with its category, in the events.
        self.assertIn("USER_ERROR: Injected fault: node 1 killed",
                      json.dumps(job["attempts"][0]["container"]))
        self.assertIn("asked by the tags of compute environment kill-ce",
                      json.dumps(self.events_of(gang)))

        # The job's own fault wins: node 0 at step 2, said to be the job's own.
        job = self.wait_ended(own)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertRegex(job["attempts"][0]["statusReason"],
                         r"^Injected fault: node 0 killed \(SIGKILL\) at step \d+$")
        self.assertEqual(len(job["attempts"]), 2)

        # A job without node 1 runs undisturbed.
        job = self.wait_ended(single)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertEqual(len(job["attempts"]), 1)

    def test_bad_fault_tags_of_an_environment_are_client_exceptions(self):
        bad = self.aws("create-compute-environment", "--compute-environment-name", "bad-ce",
                       "--type", "MANAGED", "--compute-resources",
                       "type=EC2,minvCpus=0,maxvCpus=8,instanceTypes=c5.large,subnets=s",
                       "--tags", "lote:injectKillAtStep=soon", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("ClientException", bad.stderr)
        self.assertIn("lote:injectKillAtStep is 'soon'", bad.stderr)
        self.assertEqual(self.batch.describe_compute_environments(
            computeEnvironments=["bad-ce"])["computeEnvironments"], [])

        create_emulated_environment(self.batch, "tag-ce")
        arn = self.batch.describe_compute_environments(computeEnvironments=["tag-ce"])[
            "computeEnvironments"][0]["computeEnvironmentArn"]
        cases = [
            ({"lote:injectStopNode": "1"}, "give exactly one of lote:injectStopAtStep"),
            ({"lote:injectCapacityShortageSeconds": "0"},
             "lote:injectCapacityShortageSeconds is '0'"),
            ({"lote:injectKil": "1"}, "lote:injectKil is not a fault lote can inject"),
        ]
        for tags, message in cases:
            r = self.aws("tag-resource", "--resource-arn", arn, "--tags",
                         ",".join("%s=%s" % kv for kv in tags.items()), check=False)
            self.assertNotEqual(r.returncode, 0, tags)
            self.assertIn("ClientException", r.stderr)
            self.assertIn(message, r.stderr)
        # What was refused was not kept; a valid fault is.
        self.assertNotIn("lote:injectStopNode",
                         self.batch.list_tags_for_resource(resourceArn=arn)["tags"])
        self.aws("tag-resource", "--resource-arn", arn, "--tags",
                 "lote:injectPreemptNode=0,lote:injectPreemptAfterSeconds=30")
        # Two faults once merged with what it carries: refused.
        r = self.aws("tag-resource", "--resource-arn", arn, "--tags",
                     "lote:injectKillAtStep=4", check=False)
        self.assertIn("compute environment tag-ce may ask for one injected fault", r.stderr)

    def test_an_environments_capacity_hold_is_not_served_again_after_a_restart(self):
        self.batch.create_compute_environment(
            computeEnvironmentName="short-ce", type="MANAGED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 8,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true",
                  "lote:injectCapacityShortageSeconds": str(SHORTAGE)})
        self.wait_valid("ce", "short-ce")
        self.queue_on("short-q", "short-ce")
        self.register("quick", 1, "true", attempts=1)
        job_id = self.batch.submit_job(jobName="held", jobQueue="short-q",
                                       jobDefinition="quick")["jobId"]
        held_reason = ("CAPACITY: injected capacity shortage (%d s, from the tags of compute "
                       "environment short-ce)" % SHORTAGE)
        self.server.wait_for(lambda: self.describe(job_id).get("statusReason") == held_reason,
                             30, "the job held by short-ce's shortage")
        # Stopped while held, started again after the hold's end: the hold that ran
        # before the restart counts.
        holds = self.server.wait_for(
            lambda: [e for e in self.events_of(job_id) if e[2] == held_reason], 30,
            "the hold to be stored")
        self.assertEqual(len(holds), 1, self.events_of(job_id))
        self.server.stop()
        while time.time() * 1000 < holds[0][1] + SHORTAGE * 1000 + 1000:
            time.sleep(0.2)
        restarted_ms = int(time.time() * 1000)
        self.server.start()  # on another port: every test's client follows
        EnvironmentFaultsTest.batch = self.server.client()
        job = self.wait_ended(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        # Served again it would start SHORTAGE s after the restart; it ran at once.
        self.assertLess(job["attempts"][0]["startedAt"], restarted_ms + SHORTAGE * 1000 // 2,
                        self.events_of(job_id))
        self.assertGreaterEqual(job["attempts"][0]["startedAt"], holds[0][1] + SHORTAGE * 1000)
        events = self.events_of(job_id)
        self.assertEqual([e[2] for e in events if e[2] == held_reason], [held_reason], events)
        self.assertEqual(len([e for e in events if e[2] == "injected capacity shortage (%d s, from "
                              "the tags of compute environment short-ce) ended" % SHORTAGE]), 1,
                         events)
        self.assertIn("1 held on from before the restart", self.server.stderr())

    def test_a_survived_upload_failure_shows_in_describe_jobs(self):
        create_emulated_environment(self.batch, "upload-ce")
        self.queue_on("upload-q", "upload-ce")
        # A command that reads the variables the runner sets, as `lote train` does.
        # The main node waits for node 1 to have run (the job ends when the main
        # node exits, and node 1 would be torn down before its command started).
        ran = os.path.join(self.server.home, "node1-ran")
        self.register("reads-env", 2,
                      'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then '
                      'echo "window=$LOTE_INJECT_UPLOAD_FAIL_SECONDS from=$LOTE_INJECT_UPLOAD_FAIL_AT_STEP"; '
                      'while [ ! -e %s ]; do sleep 0.05; done; else touch %s; fi' % (ran, ran),
                      attempts=1)
        job_id = self.batch.submit_job(
            jobName="upload", jobQueue="upload-q", jobDefinition="reads-env",
            parameters={"lote:injectUploadFailSeconds": "20",
                        "lote:injectUploadFailAtStep": "4"})["jobId"]
        job = self.wait_ended(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        attempt = job["attempts"][0]
        self.assertEqual(attempt["statusReason"], "Essential container in task exited")
        reason = attempt["container"]["reason"]
        self.assertTrue(reason.startswith("Essential container in task exited (lote: "), reason)
        self.assertIn("Injected fault: checkpoint writes of node 0 fail for 20 s from step 4",
                      reason)
        node1 = self.describe(job_id + "#1")
        self.assertIn("Injected fault: checkpoint writes of node 1 fail for 20 s from step 4",
                      node1["attempts"][0]["container"]["reason"])
        self.assertEqual(self.server.job_output(self.server.client("logs"), self.describe(
            job_id + "#0")), ["window=20 from=4"])


if __name__ == "__main__":
    LOTE = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
