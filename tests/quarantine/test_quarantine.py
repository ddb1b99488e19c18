"""Issue 24 through a real `lote server` driven by boto3 and the `lote` CLI: a job
with lote:injectCapacityShortageSeconds waits RUNNABLE with a CAPACITY reason, then
runs; three NODE_LOST of different jobs on one virtual instance quarantine it (no new
work, shown by DescribeComputeEnvironments, kept across a restart) until
`lote nodes release`, and the release is kept across a restart; the retry of a
gang whose node was killed avoids that node's instance when there is room."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import botocore.exceptions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import (LoteServer, create_emulated_environment,  # noqa: E402
                         kill_node_runner, quarantined_nodes)

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")
SHORTAGE_KEY = "lote:injectCapacityShortageSeconds"


def setup(batch, max_vcpus):
    create_emulated_environment(batch, max_vcpus=max_vcpus)
    batch.create_job_queue(jobQueueName="q", priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
    batch.register_job_definition(
        jobDefinitionName="sh", type="container",
        containerProperties={"image": "host", "command": ["true"],
                             "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                      {"type": "MEMORY", "value": "256"}]})


class Helpers:
    def submit(self, name, script, **kwargs):
        r = self.batch.submit_job(jobName=name, jobQueue="q", jobDefinition="sh",
                                  containerOverrides={"command": ["sh", "-c", script]}, **kwargs)
        return r["jobId"]

    def describe(self, job_id):
        return self.batch.describe_jobs(jobs=[job_id])["jobs"][0]

    def wait_until(self, job_id, pred, what, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            job = self.describe(job_id)
            if pred(job):
                return job
            time.sleep(0.1)
        raise AssertionError("job %s: never %s (now %s, %s); server stderr:\n%s" % (
            job_id, what, job["status"], job.get("statusReason"),
            self.server.stderr()[-3000:]))

    def wait_status(self, job_id, statuses=FINAL, timeout=60):
        return self.wait_until(job_id, lambda j: j["status"] in statuses,
                               "in %s" % (statuses,), timeout)

    def lote(self, *args):
        env = dict(os.environ, **self.server.env())
        return subprocess.run([LOTE] + list(args) + ["--endpoint", self.server.endpoint],
                              env=env, capture_output=True, text=True, timeout=60)


class CapacityShortageTest(Helpers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()
        setup(cls.batch, max_vcpus=64)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_an_injected_shortage_holds_the_job_runnable_then_it_runs(self):
        held = self.submit("held", "true", tags={SHORTAGE_KEY: "3"})
        plain = self.submit("plain", "true")
        job = self.wait_until(held, lambda j: j.get("statusReason", "").startswith("CAPACITY"),
                              "held with a CAPACITY reason")
        self.assertEqual(job["status"], "RUNNABLE")
        self.assertEqual(job["statusReason"], "CAPACITY: injected capacity shortage (3 s)")
        # The job without the key is unaffected: it runs while the other is held.
        self.assertEqual(self.wait_status(plain)["status"], "SUCCEEDED")
        job = self.wait_status(held)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        # It waited at least its seconds from when it became RUNNABLE (the
        # attempt is placed after the hold ends).
        self.assertGreaterEqual(job["attempts"][0]["startedAt"] - job["createdAt"], 3000)

    def test_a_parameter_works_too_and_bad_values_are_refused(self):
        held = self.submit("held-param", "true", parameters={SHORTAGE_KEY: "1"})
        self.wait_until(held, lambda j: j.get("statusReason", "") ==
                        "CAPACITY: injected capacity shortage (1 s)", "held")
        self.assertEqual(self.wait_status(held)["status"], "SUCCEEDED")
        for bad in ("0", "86401", "soon"):
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                self.submit("bad", "true", tags={SHORTAGE_KEY: bad})
            self.assertEqual(e.exception.response["Error"]["Code"], "ClientException")
            self.assertIn(SHORTAGE_KEY, e.exception.response["Error"]["Message"])


class QuarantineTest(Helpers, unittest.TestCase):
    def setUp(self):
        self.server = LoteServer(LOTE).start()
        self.batch = self.server.client()
        # One c5.large (2 vCPUs): every job lands on the same virtual instance.
        setup(self.batch, max_vcpus=2)
        self.out = tempfile.mkdtemp(prefix="lote_quarantine_")

    def tearDown(self):
        self.server.cleanup()

    def lose_node(self, name):
        """A job whose node's runner is killed (kill -9) while it runs: NODE_LOST."""
        ready = os.path.join(self.out, name)
        job_id = self.submit(name, "touch %s; exec sleep 300" % ready)
        self.wait_status(job_id, ("RUNNING",))
        deadline = time.time() + 30
        while not os.path.exists(ready):
            self.assertLess(time.time(), deadline)
            time.sleep(0.05)
        kill_node_runner(self.server.home, job_id)
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("NODE_LOST", json.dumps(job["attempts"][0]))

    def test_three_lost_nodes_quarantine_the_instance_until_released(self):
        for i in range(3):
            self.assertEqual(quarantined_nodes(self.batch, ["ce"]), [], "quarantined after %d" % i)
            self.lose_node("lost-%d" % i)
        nodes = quarantined_nodes(self.batch, ["ce"])
        self.assertEqual(len(nodes), 1, nodes)
        node = nodes[0]["node"]
        self.assertTrue(node.startswith("i-"), node)
        self.assertIn("3 different jobs", nodes[0]["reason"])
        self.assertGreater(nodes[0]["until"], nodes[0]["since"])
        # It takes no new work: a scheduling pass considered the job and left it waiting.
        waiting = self.submit("after", "true")
        job = self.wait_until(waiting, lambda j: j.get("statusReason"), "given a reason")
        self.assertEqual(job["status"], "RUNNABLE", job.get("statusReason"))
        # Kept across a restart (rebuilt from the stored attempts).
        self.server.stop()
        self.server.start()
        self.batch = self.server.client()
        self.assertEqual([n["node"] for n in quarantined_nodes(self.batch, ["ce"])], [node])
        self.assertEqual(self.describe(waiting)["status"], "RUNNABLE")
        listed = self.lote("nodes", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn(node, listed.stdout)
        released = self.lote("nodes", "release", node)
        self.assertEqual(released.returncode, 0, released.stderr)
        self.assertEqual(quarantined_nodes(self.batch, ["ce"]), [])
        job = self.wait_status(waiting)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        again = self.lote("nodes", "release", node)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("not quarantined", again.stderr)
        # The release is stored: after another restart the three failures
        # (still within the window) do not quarantine the node again, and it
        # takes work.
        self.server.stop()
        self.server.start()
        self.batch = self.server.client()
        self.assertEqual(quarantined_nodes(self.batch, ["ce"]), [])
        listed = self.lote("nodes", "list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertNotIn(node, listed.stdout)
        job = self.wait_status(self.submit("after-restart", "true"))
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))


class RetryAvoidanceTest(Helpers, unittest.TestCase):
    """A 2-node gang whose node 1 is killed (lote:injectKillNode) is retried on
    instances other than the one node 1 ran on, when the environment has room."""

    def setUp(self):
        self.server = LoteServer(LOTE).start()
        self.batch = self.server.client()
        self.out = tempfile.mkdtemp(prefix="lote_avoid_")
        os.chmod(self.out, 0o777)

    def tearDown(self):
        self.server.cleanup()

    def run_killed_gang(self, max_vcpus):
        """{attempt: {node index: the node's instance address}} of a 2-node job
        (each node a whole c5.large) whose first attempt's node 1 is killed."""
        setup(self.batch, max_vcpus=max_vcpus)
        self.batch.register_job_definition(
            jobDefinitionName="pair", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [
                {"targetNodes": "0:", "container": {
                    "image": "host", "command": ["true"],
                    "resourceRequirements": [{"type": "VCPU", "value": "2"},
                                             {"type": "MEMORY", "value": "1024"}]}}]})
        where = os.path.join(self.out, "where")
        # Each node says where it runs (its virtual instance's own address);
        # the first attempt's nodes wait to be killed / torn down. In the
        # retry the main node waits for node 1's line: the job ends when the
        # main node exits, and node 1 would be torn down before it wrote.
        script = ('echo "$AWS_BATCH_JOB_ATTEMPT $AWS_BATCH_JOB_NODE_INDEX '
                  '$LOTE_PRIVATE_IPV4_ADDRESS" >> {0}; '
                  'if [ "$AWS_BATCH_JOB_ATTEMPT" = 1 ]; then exec sleep 60; fi; '
                  'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then '
                  'while ! grep -q "^$AWS_BATCH_JOB_ATTEMPT 1 " {0}; do sleep 0.05; done; fi'
                  ).format(where)
        job_id = self.batch.submit_job(
            jobName="pair", jobQueue="q", jobDefinition="pair", retryStrategy={"attempts": 2},
            tags={"lote:injectKillNode": "1", "lote:injectKillAfterSeconds": "1",
                  "lote:terminationGraceSeconds": "1"},
            nodeOverrides={"nodePropertyOverrides": [
                {"targetNodes": "0:", "containerOverrides": {
                    "command": ["sh", "-c", script]}}]})["jobId"]
        job = self.wait_status(job_id, timeout=120)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])
        self.assertIn("Injected fault: node 1 killed",
                      job["attempts"][0].get("statusReason", ""), job["attempts"][0])
        seen = {}
        with open(where) as f:
            for line in f:
                attempt, node, ip = line.split()
                seen.setdefault(int(attempt), {})[int(node)] = ip
        self.assertEqual(sorted(seen), [1, 2], seen)
        self.assertEqual(sorted(seen[1]), [0, 1], seen)
        self.assertEqual(sorted(seen[2]), [0, 1], seen)
        return seen

    def test_the_retry_keeps_off_the_killed_nodes_instance_when_there_is_room(self):
        seen = self.run_killed_gang(max_vcpus=6)  # room for 3 instances
        self.assertNotIn(seen[1][1], seen[2].values(), seen)
        self.assertEqual(len(set(seen[2].values())), 2, seen)

    def test_without_room_elsewhere_the_retry_uses_it_rather_than_wait(self):
        seen = self.run_killed_gang(max_vcpus=4)  # exactly the two instances
        self.assertEqual(sorted(seen[2].values()), sorted(seen[1].values()), seen)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
