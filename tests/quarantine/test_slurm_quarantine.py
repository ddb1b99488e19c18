"""Issue 24 on a real Slurm cluster (tests/slurm/cluster.sh, three nodes b1-b3):
three attempts of different jobs that end NODE_LOST on one Slurm node make lote
drain it (`scontrol update ... state=drain reason="lote quarantine: ..."`), and
`lote nodes release` resumes it; the retry of a 2-node gang whose node 1 was
killed (lote:injectKillNode) is kept off that node's Slurm node (sbatch --exclude).

How a node is lost here: a real slurmd cannot be made to fail a job quickly (Slurm
marks a silent node DOWN only after SlurmdTimeout), so the test kills the node's
runner (`lote exec-shim`, the batch step itself for a single-node job) with SIGKILL,
then the command's process group: the Slurm job ends FAILED with no outcome recorded
by the node, which lote reports as NODE_LOST, as for a node that died."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "slurm"))
from lote_server import LoteServer, quarantined_nodes  # noqa: E402
from test_slurm import SlurmCluster, create_slurm_queue  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")


def node_line(cluster, name):
    """`scontrol show node NAME -o` as one line (State=..., Reason=...)."""
    return cluster.run("scontrol", "show", "node", name, "-o").stdout


class SlurmQuarantineTest(unittest.TestCase):
    def setUp(self):
        self.cluster = SlurmCluster(nodes=3, cpus=2)
        self.server = LoteServer(LOTE).start()
        self.batch = self.server.client()
        create_slurm_queue(self.batch, self.cluster.conf)
        self.batch.register_job_definition(
            jobDefinitionName="sh", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "128"}]})
        self.batch.register_job_definition(
            jobDefinitionName="pair", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [
                {"targetNodes": "0:", "container": {
                    "image": "host", "command": ["true"],
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "128"}]}}]})
        self.work = tempfile.mkdtemp(prefix="lote_slurm_quarantine_")
        os.chmod(self.work, 0o777)

    def tearDown(self):
        self.server.cleanup()
        self.cluster.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def describe(self, job_id):
        return self.batch.describe_jobs(jobs=[job_id])["jobs"][0]

    def wait_status(self, job_id, statuses=FINAL, timeout=120):
        deadline = time.time() + timeout
        while True:
            job = self.describe(job_id)
            if job["status"] in statuses:
                return job
            if time.time() > deadline:
                self.fail("job %s stayed %s (wanted %s): %s\n%s" % (
                    job_id, job["status"], statuses, job.get("statusReason"),
                    self.server.stderr()[-3000:]))
            time.sleep(0.1)

    def wait_for(self, what, pred, timeout=60):
        deadline = time.time() + timeout
        while True:
            value = pred()
            if value:
                return value
            if time.time() > deadline:
                self.fail("never %s; server stderr:\n%s" % (what, self.server.stderr()[-3000:]))
            time.sleep(0.1)

    def lote(self, *args):
        env = dict(os.environ, **self.server.env())
        return subprocess.run([LOTE] + list(args) + ["--endpoint", self.server.endpoint],
                              env=env, capture_output=True, text=True, timeout=60)

    def lose_node(self, name):
        """A single-node job whose runner is killed (SIGKILL) while its command
        runs: NODE_LOST. Returns the Slurm node it ran on."""
        ready = os.path.join(self.work, name)
        job_id = self.batch.submit_job(
            jobName=name, jobQueue="sq", jobDefinition="sh",
            containerOverrides={"command": ["bash", "-c", "echo $LOTE_SLURM_NODE > %s; "
                                            "exec sleep 120" % ready]})["jobId"]
        self.wait_status(job_id, ("RUNNING",))
        self.wait_for("%s started" % name, lambda: os.path.exists(ready) and
                      os.path.getsize(ready) > 0)
        node_dir = os.path.join(self.server.home, "slurm", "slurm", job_id, "1", "node-0")
        with open(os.path.join(node_dir, "shim.json")) as f:
            os.kill(json.load(f)["process"]["pid"], signal.SIGKILL)
        with open(os.path.join(node_dir, "command.json")) as f:
            try:
                os.killpg(json.load(f)["process"]["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        reason = job["attempts"][0]["container"]["reason"]
        self.assertTrue(reason.startswith("NODE_LOST: "), reason)
        with open(ready) as f:
            return f.read().strip()

    def test_three_lost_jobs_drain_the_slurm_node_until_released(self):
        # Every job lands on b1: the test itself keeps b2 and b3 out meanwhile
        # (a drain reason of its own, which lote must leave alone).
        for other in ("b2", "b3"):
            self.cluster.run("scontrol", "update", "nodename=" + other, "state=drain",
                             "reason=test keeps jobs on b1")
        for i in range(3):
            self.assertNotIn("lote quarantine", node_line(self.cluster, "b1"),
                             "drained after %d" % i)
            self.assertEqual(self.lose_node("lost-%d" % i), "b1")
        line = self.wait_for("b1 drained", lambda: "DRAIN" in node_line(self.cluster, "b1") and
                             node_line(self.cluster, "b1"))
        self.assertIn("Reason=lote quarantine: attempts of 3 different jobs", line)
        nodes = quarantined_nodes(self.batch, ["slurm"])
        self.assertEqual([n["node"] for n in nodes], ["b1"], nodes)
        sinfo = self.cluster.run("sinfo", "-h", "-N", "-n", "b1", "-o", "%t").stdout.strip()
        self.assertIn(sinfo, ("drain", "drng"))
        # The others come back (the test's own drain, not lote's), and new work
        # goes there, not to b1.
        for other in ("b2", "b3"):
            self.cluster.run("scontrol", "update", "nodename=" + other, "state=resume")
        where = os.path.join(self.work, "after")
        job = self.wait_status(self.batch.submit_job(
            jobName="after", jobQueue="sq", jobDefinition="sh",
            containerOverrides={"command": ["bash", "-c", "echo $LOTE_SLURM_NODE > %s" % where]}
        )["jobId"])
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        with open(where) as f:
            self.assertIn(f.read().strip(), ("b2", "b3"))
        released = self.lote("nodes", "release", "b1")
        self.assertEqual(released.returncode, 0, released.stderr)
        self.assertEqual(quarantined_nodes(self.batch, ["slurm"]), [])
        # In service again: idle, not drained, lote's reason gone (Slurm may
        # flag it '*', not responding, until its next ping of the node).
        state = self.cluster.run("sinfo", "-h", "-N", "-n", "b1", "-o", "%t").stdout.strip()
        self.assertIn(state, ("idle", "idle*"))
        line = node_line(self.cluster, "b1")
        self.assertNotIn("DRAIN", line)
        self.assertNotIn("lote quarantine", line)
        # Kept across a restart: b1 is not drained again.
        self.server.stop()
        self.server.start()
        self.batch = self.server.client()
        self.assertEqual(quarantined_nodes(self.batch, ["slurm"]), [])
        self.assertNotIn("DRAIN", node_line(self.cluster, "b1"))

    def test_the_retry_of_a_gang_excludes_the_killed_nodes_slurm_node(self):
        where = os.path.join(self.work, "where")
        script = ('echo "$AWS_BATCH_JOB_ATTEMPT $AWS_BATCH_JOB_NODE_INDEX $LOTE_SLURM_NODE" '
                  '>> %s; if [ "$AWS_BATCH_JOB_ATTEMPT" = 1 ]; then exec sleep 60; fi' % where)
        job_id = self.batch.submit_job(
            jobName="pair", jobQueue="sq", jobDefinition="pair", retryStrategy={"attempts": 2},
            tags={"lote:injectKillNode": "1", "lote:injectKillAfterSeconds": "1",
                  "lote:terminationGraceSeconds": "1"},
            nodeOverrides={"nodePropertyOverrides": [
                {"targetNodes": "0:", "containerOverrides": {
                    "command": ["bash", "-c", script]}}]})["jobId"]
        job = self.wait_status(job_id, timeout=180)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])
        seen = {}
        with open(where) as f:
            for line in f:
                attempt, node, host = line.split()
                seen.setdefault(int(attempt), {})[int(node)] = host
        self.assertEqual(sorted(seen), [1, 2], seen)
        self.assertEqual(len(seen[2]), 2, seen)
        # Three nodes, two needed: the retry runs on the two others.
        self.assertNotIn(seen[1][1], seen[2].values(), seen)
        # Slurm was told so.
        with open(os.path.join(self.server.home, "slurm", "slurm", job_id, "2",
                               "slurm_job_id")) as f:
            slurm_id = f.read().strip()
        shown = self.cluster.run("scontrol", "show", "job", slurm_id, "-o").stdout
        self.assertIn("ExcNodeList=%s" % seen[1][1], shown)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
