"""Distributed training through the server: a 4-node AWS Batch multi-node job in the
recipe's shape (numNodes 4, mainNode 0, one node range "0:", ulimits, user root)
whose command is `lote train --nproc-per-node 1 --tensor-parallel-size 2`, run by the
local executor. The four nodes meet through the AWS Batch variables alone (no
address or port on the command line), train one model TP=2 x DP=2, and the job
SUCCEEDS; only the main node prints LOTE_PROGRESS, so DescribeJobs shows one
progress series (the main node's) reaching the last step. The same job shape reads
its dataset from lote's own S3 and checkpoints there (the recipe's s3:// data flow),
and a second job resumes from one of those checkpoints bit-exactly.

usage: train_job_test.py LOTE_BINARY TEST_DATA_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, describe_job_raw  # noqa: E402

LOTE = None
DATA = None
STEPS = 12


class TrainJobTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lote_train_job_")
        cls.data = os.path.join(cls.dir, "sotu")
        subprocess.run([LOTE, "data", "prepare", "--input", os.path.join(DATA, "sotu.txt"),
                        "--tokenizer", os.path.join(DATA, "tokenizer.model"),
                        "--block-size", "65", "--output", "file://" + cls.data],
                       check=True, capture_output=True)
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def wait(self, pred, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError("timed out waiting for %s; server stderr:\n%s" % (
            what, self.server.stderr()[-3000:]))

    def test_four_node_tensor_and_data_parallel_job(self):
        b = self.batch
        self.ensure_queue()
        out = os.path.join(self.dir, "out")
        config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "examples", "llama2", "model", "tiny.json")
        command = [LOTE, "train", "--config", os.path.abspath(config), "--data", self.data,
                   "--nproc-per-node", "1", "--tensor-parallel-size", "2",
                   "--seq-len", "64", "--batch-size", "2", "--global-batch-size", "4",
                   "--max-steps", str(STEPS), "--logging-interval", "4", "--threads", "1",
                   "--peak-gflops", "10", "--output", out]
        b.register_job_definition(
            jobDefinitionName="llama-tiny", type="multinode",
            nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host", "command": command, "user": "root",
                    "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
                    "environment": self.node_environment(),
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "512"}]}}]})
        job_id = b.submit_job(jobName="tiny", jobQueue="train-q", jobDefinition="llama-tiny",
                              nodeOverrides={"numNodes": 4})["jobId"]

        def ended():
            j = b.describe_jobs(jobs=[job_id])["jobs"][0]
            return j if j["status"] in ("SUCCEEDED", "FAILED") else None
        job = self.wait(ended, 600, "the training job")
        logs = self.job_logs(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", (job.get("statusReason"), logs[-4000:]))

        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
        self.assertEqual(metrics["world_size"], 4)
        self.assertEqual(metrics["tensor_parallel"], 2)
        self.assertEqual(metrics["data_parallel"], 2)
        self.assertEqual(len(metrics["losses"]), STEPS)

        progress = self.wait(lambda: self.server_progress(job_id), 30, "the job's progress")
        print("progress:", json.dumps(progress))
        self.assertEqual(progress["step"], STEPS)
        self.assertEqual(progress["total_steps"], STEPS)
        # One series: only node 0 (rank 0) reported.
        self.assertEqual([n["node"] for n in progress["nodes"]], [0], progress)
        # The main node's stream holds the progress lines; a child node's holds none.
        self.assertIn("LOTE_PROGRESS", logs)
        child = self.job_logs(job_id, "--node", "1")
        self.assertNotIn("LOTE_PROGRESS", child)

    def test_four_node_job_reads_and_checkpoints_through_lotes_s3(self):
        """The recipe's data flow with s3:// URIs on lote's own S3: the dataset is read
        from it, the checkpoints written to it, and a second job resumes from one of
        them bit-exactly. The nodes reach it with the job definition's environment
        (endpoint and key id) and a job secret (the key's secret, an SSM SecureString)."""
        b = self.batch
        self.ensure_queue()
        s3 = self.server.client("s3")
        s3.create_bucket(Bucket="recipe")
        for name in ("manifest.json", "data.idx", "data.bin"):
            s3.upload_file(os.path.join(self.data, name), "recipe", "data/sotu/" + name)
        key, secret = self.server.credentials()
        ssm = self.server.client("ssm")
        ssm.put_parameter(Name="/recipe/s3-secret", Value=secret, Type="SecureString")
        env = self.node_environment() + [
            {"name": "AWS_ENDPOINT_URL_S3", "value": self.server.endpoint},
            {"name": "AWS_ACCESS_KEY_ID", "value": key},
            {"name": "AWS_REGION", "value": "us-east-1"},
            {"name": "LOTE_CACHE_DIR", "value": os.path.join(self.dir, "s3_cache")}]
        config = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "..", "examples", "llama2", "model", "tiny.json"))

        def run(name, *extra):
            out = os.path.join(self.dir, name)
            command = [LOTE, "train", "--config", config, "--data", "s3://recipe/data/sotu",
                       "--nproc-per-node", "1", "--tensor-parallel-size", "2",
                       "--seq-len", "64", "--batch-size", "2", "--global-batch-size", "4",
                       "--max-steps", str(STEPS), "--logging-interval", "4", "--threads", "1",
                       "--peak-gflops", "10", "--checkpoint-uri", "s3://recipe/ckpt",
                       "--checkpoint-freq", "6", "--output", out, *extra]
            b.register_job_definition(
                jobDefinitionName=name, type="multinode",
                nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                    "targetNodes": "0:", "container": {
                        "image": "host", "command": command, "user": "root",
                        "environment": env,
                        "secrets": [{"name": "AWS_SECRET_ACCESS_KEY",
                                     "valueFrom": "/recipe/s3-secret"}],
                        "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                 {"type": "MEMORY", "value": "512"}]}}]})
            job_id = b.submit_job(jobName=name, jobQueue="train-q", jobDefinition=name)["jobId"]
            job = self.wait_ended(job_id, name)
            self.assertEqual(job["status"], "SUCCEEDED",
                             (job.get("statusReason"), self.job_logs(job_id)[-4000:]))
            with open(os.path.join(out, "metrics.json")) as f:
                return job_id, json.load(f)["losses"]

        first_id, first = run("s3-first")
        keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket="recipe", Prefix="ckpt/") for o in page.get("Contents", [])]
        for step in (6, 12):
            self.assertIn("ckpt/%s/step_%d/manifest.json" % (first_id, step), keys)
        # `aws s3 ls --recursive` (the recipe's check) shows the same objects.
        listed = subprocess.run(["aws", "s3", "ls", "--recursive", "s3://recipe/ckpt/"],
                                capture_output=True, text=True, env=self.server.env())
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("%s/step_6/manifest.json" % first_id, listed.stdout)
        _, resumed = run("s3-resumed", "--resume", "s3://recipe/ckpt/%s/step_6" % first_id)
        self.assertEqual(resumed, first[6:])  # bit-exact

    def test_killed_node_retry_resumes_from_the_checkpoint(self):
        """One node's rank is SIGKILLed after a checkpoint completed: the attempt is torn
        down, the retry (AWS_BATCH_JOB_ATTEMPT=2) resumes from the newest complete
        checkpoint, and the final loss equals an uninterrupted run's exactly."""
        self.ensure_queue()
        ckpt = os.path.join(self.dir, "ckpt")
        out = os.path.join(self.dir, "resumed_out")
        common = self.tiny_train_args(logging=20)
        command = [LOTE, "train", *common, "--nproc-per-node", "1", "--checkpoint-uri",
                   "file://" + ckpt, "--checkpoint-freq", "4", "--keep-checkpoints", "2",
                   "--output", out]

        def checkpointed():  # a complete checkpoint of step 8 or later
            d = os.path.join(ckpt, job_id)
            return os.path.isdir(d) and any(
                n.startswith("step_") and int(n[5:]) >= 8 and
                os.path.exists(os.path.join(d, n, "manifest.json")) for n in os.listdir(d))
        job_id = self.submit_training("llama-ckpt", command, attempts=2)
        self.wait(checkpointed, 300, "a checkpoint of step 8 or later")
        victim = self.wait(lambda: self.find_rank(job_id, node=2), 30, "node 2's rank")
        os.kill(victim, signal.SIGKILL)
        job = self.wait_ended(job_id, "the retried job")
        logs = self.job_logs(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", (job.get("statusReason"), logs[-4000:]))
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])
        self.assertIn("resumed from file://%s/%s/step_" % (ckpt, job_id), logs)
        with open(os.path.join(out, "metrics.json")) as f:
            resumed = json.load(f)
        self.assertGreater(resumed["first_step"], 8)

        ref = self.uninterrupted(common, "uninterrupted")
        self.assertEqual(resumed["final_loss"], ref["final_loss"])
        self.assertEqual(resumed["losses"], ref["losses"][resumed["first_step"] - 1:])

    def test_sigterm_preempts_and_the_retry_resumes_without_consuming_an_attempt(self):
        """SIGTERM to one node's launcher (a spot-style reclaim): all ranks stop after the
        same step and checkpoint, the nodes exit 75, the attempt is PREEMPTED and run
        again although retryStrategy allows one attempt, and the retry ends with the
        uninterrupted run's losses."""
        self.ensure_queue()
        ckpt = os.path.join(self.dir, "ckpt_preempt")
        out = os.path.join(self.dir, "preempt_out")
        common = self.tiny_train_args(logging=1)
        command = [LOTE, "train", *common, "--nproc-per-node", "1", "--checkpoint-uri",
                   "file://" + ckpt, "--checkpoint-freq", "1000", "--output", out]
        job_id = self.submit_training("llama-preempt", command, attempts=1,
                                      parameters={"lote:terminationGraceSeconds": "120"})

        def progressed():
            p = self.raw_job(job_id).get("progress") or {}
            return p.get("step", 0) >= 3
        self.wait(progressed, 300, "step 3")
        launcher = self.wait(lambda: self.find_launcher(job_id, node=1), 30, "node 1's launcher")
        os.kill(launcher, signal.SIGTERM)
        job = self.wait_ended(job_id, "the preempted job")
        raw = self.raw_job(job_id)
        logs = self.job_logs(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", (raw["attempts"], logs[-3000:]))
        self.assertEqual(len(job["attempts"]), 2, job["attempts"])
        self.assertEqual(raw["attempts"][0].get("failureCategory"), "PREEMPTED", raw["attempts"][0])
        self.assertEqual(job["attempts"][0]["container"]["exitCode"], 75)
        self.assertIn("preempted: stopped after step", logs)
        self.assertIn("resumed from file://%s/%s/step_" % (ckpt, job_id), logs)
        with open(os.path.join(out, "metrics.json")) as f:
            resumed = json.load(f)
        ref = self.uninterrupted(common, "uninterrupted_preempt")
        self.assertEqual(resumed["losses"], ref["losses"][resumed["first_step"] - 1:])

    @staticmethod
    def find_launcher(job_id, node):
        return TrainJobTest.find_process(job_id, node, rank=False)

    @staticmethod
    def find_rank(job_id, node):
        return TrainJobTest.find_process(job_id, node, rank=True)

    @staticmethod
    def find_process(job_id, node, rank):
        """A rank process (LOTE_TRAIN_RANK set) or the launcher of a job's node."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if ("AWS_BATCH_JOB_ID=%s#%d" % (job_id, node)).encode() not in env:
                continue
            is_rank = any(e.startswith(b"LOTE_TRAIN_RANK=") for e in env)
            if is_rank == rank and b"train" in argv and b"--nproc-per-node" in argv:
                return int(pid)
        return None

    def raw_job(self, job_id):
        return describe_job_raw(self.batch, job_id)

    def job_logs(self, job_id, *extra):
        return subprocess.run([LOTE, "logs", job_id, *extra, "--endpoint", self.server.endpoint],
                              capture_output=True, text=True, env=self.server.env()).stdout

    def tiny_train_args(self, logging):
        # 160 steps: far more than run before a test's fault lands, on any machine.
        return ["--config", self.tiny_config(), "--data", self.data, "--tensor-parallel-size",
                "2", "--seq-len", "64", "--batch-size", "2", "--global-batch-size", "4",
                "--max-steps", "160", "--logging-interval", str(logging), "--threads", "1",
                "--peak-gflops", "10"]

    def submit_training(self, name, command, attempts, parameters=None):
        """A 4-node job definition running `command` on every node, and one job of it."""
        self.batch.register_job_definition(
            jobDefinitionName=name, type="multinode", retryStrategy={"attempts": attempts},
            parameters=parameters or {},
            nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host", "command": command,
                    "environment": self.node_environment(),
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "512"}]}}]})
        return self.batch.submit_job(jobName=name, jobQueue="train-q",
                                     jobDefinition=name)["jobId"]

    @staticmethod
    def node_environment():
        """A job's nodes get only their definition's environment; the uninterrupted
        reference run inherits this test's. OpenBLAS picks its kernels by
        OPENBLAS_CORETYPE (set on some hosts), and two kernels round differently, so
        the nodes get the same OPENBLAS_* values as the reference run."""
        env = [{"name": "OMP_NUM_THREADS", "value": "1"}]
        env += [{"name": k, "value": v} for k, v in sorted(os.environ.items())
                if k.startswith("OPENBLAS_")]
        return env

    def wait_ended(self, job_id, what):
        def ended():
            j = self.batch.describe_jobs(jobs=[job_id])["jobs"][0]
            return j if j["status"] in ("SUCCEEDED", "FAILED") else None
        return self.wait(ended, 600, what)

    def uninterrupted(self, common, name):
        """metrics.json of the same training on one node with 4 ranks (same layout)."""
        out = os.path.join(self.dir, name)
        subprocess.run([LOTE, "train", *common, "--nproc-per-node", "4", "--output", out],
                       check=True, capture_output=True, timeout=600,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
        with open(os.path.join(out, "metrics.json")) as f:
            return json.load(f)

    def ensure_queue(self):
        b = self.batch
        if not b.describe_job_queues(jobQueues=["train-q"])["jobQueues"]:
            b.create_compute_environment(
                computeEnvironmentName="train-ce", type="MANAGED",
                computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 64,
                                  "instanceTypes": ["c5.large"], "subnets": ["s"]},
                tags={"lote:emulation": "true"})
            self.wait(lambda: b.describe_compute_environments(computeEnvironments=["train-ce"])[
                "computeEnvironments"][0]["status"] == "VALID", 30, "the compute environment")
            b.create_job_queue(jobQueueName="train-q", priority=1,
                               computeEnvironmentOrder=[{"order": 1,
                                                         "computeEnvironment": "train-ce"}])
            self.wait(lambda: b.describe_job_queues(jobQueues=["train-q"])["jobQueues"][0][
                "status"] == "VALID", 30, "the job queue")

    @staticmethod
    def tiny_config():
        return os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                            "..", "examples", "llama2", "model", "tiny.json"))

    def server_progress(self, job_id):
        p = self.raw_job(job_id).get("progress")
        return p if p and p.get("step") == STEPS else None


if __name__ == "__main__":
    LOTE = sys.argv.pop(1)
    DATA = sys.argv.pop(1)
    unittest.main(verbosity=2)
