"""The Slurm backend against a real Slurm cluster on this machine (munged,
slurmctld and four slurmd started by cluster.sh): a real `lote server` whose
UNMANAGED compute environment is tagged lote:backend=slurm runs jobs submitted
with boto3 as Slurm jobs (single-node, arrays, 4-node gangs with TCP
rendezvous, teardown, terminate, restart, capacity, pending reasons)."""
import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "containers"))
from lote_server import LoteServer, describe_job_raw  # noqa: E402
from test_containers import make_base_image, podman  # noqa: E402

LOTE = None
DATA = None  # the test data folder (tokenizer.model, sotu.txt)
FINAL = ("SUCCEEDED", "FAILED")


class SlurmCluster:
    def __init__(self, nodes=4, cpus=2, gpus=2):
        """`gpus`: each node's GPU GRES over fake device nodes (cluster.sh)."""
        self.dir = tempfile.mkdtemp(prefix="lote_slurm_")
        subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "start", self.dir,
                        str(nodes), str(cpus)], check=True,
                       env=dict(os.environ, LOTE_SLURM_GPUS=str(gpus)))
        self.conf = os.path.join(self.dir, "slurm.conf")

    def run(self, *argv, check=True):
        env = dict(os.environ, SLURM_CONF=self.conf)
        return subprocess.run(list(argv), env=env, check=check, capture_output=True, text=True)

    def job_state(self, slurm_id):
        out = self.run("squeue", "-h", "--states=all", "-o", "%T", "-j", slurm_id, check=False)
        return out.stdout.strip()

    def stop(self):
        subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "stop", self.dir], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def create_slurm_queue(batch, conf, queue="sq", emulation=True):
    """UNMANAGED environment `slurm` served by the cluster's partition `train`, and
    job queue `queue` on it."""
    tags = {"lote:backend": "slurm", "lote:slurm-partition": "train", "lote:slurm-conf": conf}
    if emulation:
        # As for the engine's local training test: this machine may lack
        # CAP_SYS_RESOURCE for ulimits memlock -1 (then lowered, with a note).
        tags["lote:emulation"] = "true"
    batch.create_compute_environment(computeEnvironmentName="slurm", type="UNMANAGED", tags=tags)
    deadline = time.time() + 30
    while batch.describe_compute_environments(
            computeEnvironments=["slurm"])["computeEnvironments"][0]["status"] != "VALID":
        if time.time() > deadline:
            raise AssertionError("compute environment never became VALID")
        time.sleep(0.05)
    batch.create_job_queue(jobQueueName=queue, priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "slurm"}])


def setup_resources(batch, conf):
    create_slurm_queue(batch, conf)
    batch.register_job_definition(
        jobDefinitionName="sh", type="container",
        containerProperties={"image": "host", "command": ["true"],
                             "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                      {"type": "MEMORY", "value": "128"}]})
    batch.register_job_definition(
        jobDefinitionName="gang", type="multinode",
        nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [
            {"targetNodes": "0:", "container": {
                "image": "host", "command": ["true"],
                "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                         {"type": "MEMORY", "value": "128"}]}}]})


class SlurmBackendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = SlurmCluster()
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()
        cls.logs = cls.server.client("logs")
        setup_resources(cls.batch, cls.cluster.conf)
        cls.work = tempfile.mkdtemp(prefix="lote_slurm_work_")
        os.chmod(cls.work, 0o777)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        cls.cluster.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    # --- helpers -----------------------------------------------------------

    def submit(self, name, script, definition="sh", **kwargs):
        key = "nodeOverrides" if definition == "gang" else "containerOverrides"
        if definition == "gang":
            overrides = kwargs.pop("nodeOverrides", {})
            overrides.setdefault("nodePropertyOverrides", [
                {"targetNodes": "0:", "containerOverrides": {"command": ["bash", "-c", script]}}])
        else:
            overrides = kwargs.pop("containerOverrides", {})
            overrides["command"] = ["bash", "-c", script]
        r = self.batch.submit_job(jobName=name, jobQueue="sq", jobDefinition=definition,
                                  **{key: overrides}, **kwargs)
        return r["jobId"]

    def describe(self, job_id):
        jobs = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        self.assertEqual(len(jobs), 1, job_id)
        return jobs[0]

    def wait_status(self, job_id, statuses=FINAL, timeout=120):
        deadline = time.time() + timeout
        while True:
            job = self.describe(job_id)
            if job["status"] in statuses:
                return job
            if time.time() > deadline:
                self.fail("job %s stayed %s (wanted %s): %s\n%s" % (
                    job_id, job["status"], statuses, job, self.server.stderr()[-3000:]))
            time.sleep(0.1)

    def wait_logs(self, job, want, timeout=60):
        """The messages of a job's (or node's) stream once `want` is among them."""
        stream = job["container"]["logStreamName"]
        deadline = time.time() + timeout
        while True:
            try:
                events = self.logs.get_log_events(logGroupName="/aws/batch/job",
                                                  logStreamName=stream,
                                                  startFromHead=True)["events"]
            except self.logs.exceptions.ResourceNotFoundException:
                events = []
            lines = [e["message"] for e in events]
            if any(want in line for line in lines):
                return lines
            if time.time() > deadline:
                self.fail("%r never reached stream %s: %s" % (want, stream, lines))
            time.sleep(0.1)

    def slurm_id(self, job_id, attempt=1):
        path = os.path.join(self.server.home, "slurm", "slurm", job_id, str(attempt),
                            "slurm_job_id")
        with open(path) as f:
            return f.read().strip()

    def wait_slurm_ended(self, slurm_id, timeout=60):
        deadline = time.time() + timeout
        while True:
            state = self.cluster.job_state(slurm_id)
            if state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
                return state
            if time.time() > deadline:
                self.fail("Slurm job %s is still %s" % (slurm_id, state))
            time.sleep(0.1)

    # --- tests -------------------------------------------------------------

    def test_single_job_output_and_exit_codes(self):
        ok = self.submit("ok", "echo hello from $AWS_BATCH_JOB_ID on $LOTE_SLURM_NODE; "
                         "echo to stderr >&2")
        bad = self.submit("bad", "exit 3")
        job = self.wait_status(ok)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertEqual(job["container"]["exitCode"], 0)
        self.assertIn("startedAt", job)
        lines = self.wait_logs(job, "to stderr")
        self.assertTrue(any(line.startswith("hello from %s on b" % ok) for line in lines), lines)
        failed = self.wait_status(bad)
        self.assertEqual(failed["status"], "FAILED")
        self.assertEqual(failed["container"]["exitCode"], 3, failed)
        self.assertEqual(self.wait_slurm_ended(self.slurm_id(bad)), "FAILED")

    def test_gpus_are_slurms_gres(self):
        # GPU=2 on a node of 2 fake GPUs: sbatch --gres=gpu:2, and the node sees the
        # GPUs Slurm bound to it under the names the local backend uses.
        script = ("echo CVD=$CUDA_VISIBLE_DEVICES ORDER=$CUDA_DEVICE_ORDER "
                  "LOTE=$LOTE_ACCELERATORS")
        gpu = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "128"},
               {"type": "GPU", "value": "2"}]
        job_id = self.submit("gpus", script, containerOverrides={"resourceRequirements": gpu})
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        lines = self.wait_logs(job, "CVD=")
        self.assertIn("CVD=0,1 ORDER=PCI_BUS_ID LOTE=0,1", lines)
        shown = self.cluster.run("scontrol", "show", "job", self.slurm_id(job_id)).stdout
        self.assertRegex(shown, r"TresPerNode=\S*gres[:/]gpu[:=]2", shown)
        # The devices Slurm chose, as the node saw them (LOTE_ACCELERATORS), are read back
        # into the attempt (DescribeJobs' lote key; nothing there before the node records).
        seen = [l for l in lines if l.startswith("CVD=")][0].split("LOTE=")[1].strip()
        raw = describe_job_raw(self.batch, job_id)
        self.assertEqual(raw["attempts"][-1]["container"].get("loteAccelerators", {})
                         .get("devices"), [int(d) for d in seen.split(",")], raw["attempts"][-1])
        # One GPU: the one Slurm bound, read back the same way.
        one = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "128"},
               {"type": "GPU", "value": "1"}]
        single = self.wait_status(self.submit("one-gpu", script,
                                              containerOverrides={"resourceRequirements": one}))
        seen = [l for l in self.wait_logs(single, "CVD=") if l.startswith("CVD=")][0]
        seen = seen.split("LOTE=")[1].strip()
        self.assertEqual(len(seen.split(",")), 1, seen)
        raw = describe_job_raw(self.batch, single["jobId"])
        self.assertEqual(raw["attempts"][-1]["container"]["loteAccelerators"]["devices"],
                         [int(seen)], raw["attempts"][-1])
        # Without a GPU request, no GPU.
        plain = self.wait_status(self.submit("no-gpus", script))
        self.assertIn("CVD= ORDER= LOTE=", self.wait_logs(plain, "CVD="))

    def test_array_children_are_slurm_jobs(self):
        parent = self.submit("arr", "echo index $AWS_BATCH_JOB_ARRAY_INDEX of "
                             "$AWS_BATCH_JOB_ARRAY_SIZE", arrayProperties={"size": 3})
        job = self.wait_status(parent)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        ids = set()
        for i in range(3):
            child = self.describe("%s:%d" % (parent, i))
            self.assertEqual(child["status"], "SUCCEEDED")
            self.wait_logs(child, "index %d of 3" % i)
            ids.add(self.slurm_id("%s:%d" % (parent, i)))
        self.assertEqual(len(ids), 3)  # one Slurm job per child

    def test_four_nodes_environment_and_tcp_rendezvous(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        script = r"""
import os, socket, sys, time
idx = int(os.environ["AWS_BATCH_JOB_NODE_INDEX"])
n = int(os.environ["AWS_BATCH_JOB_NUM_NODES"])
main = int(os.environ["AWS_BATCH_JOB_MAIN_NODE_INDEX"])
port = %d
print("node", idx, "of", n, "id", os.environ["AWS_BATCH_JOB_ID"], "on",
      os.environ["LOTE_SLURM_NODE"], flush=True)
if idx == main:
    assert "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS" not in os.environ
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(8)
    for _ in range(n - 1):
        c, _ = s.accept()
        print("main heard:", c.recv(100).decode(), flush=True)
        c.sendall(b"ok")
        c.close()
else:
    addr = os.environ["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"]
    for _ in range(600):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("cannot reach the main node at %%s" %% addr)
    c.sendall(("node %%d" %% idx).encode())
    assert c.recv(10) == b"ok"
    print("reached main at", addr, flush=True)
""" % port
        job_id = self.batch.submit_job(
            jobName="gang", jobQueue="sq", jobDefinition="gang",
            nodeOverrides={"nodePropertyOverrides": [{"targetNodes": "0:", "containerOverrides": {
                "command": ["python3", "-c", script]}}]})["jobId"]
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        hosts = set()
        for node in range(4):
            view = self.describe("%s#%d" % (job_id, node))
            self.assertEqual(view["status"], "SUCCEEDED", view)
            lines = self.wait_logs(view, "node %d of 4 id %s#%d" % (node, job_id, node))
            head = [line for line in lines if line.startswith("node %d of 4" % node)][0]
            hosts.add(head.split(" on ")[1])
            if node == 0:
                for child in (1, 2, 3):
                    self.wait_logs(view, "main heard: node %d" % child)
            else:
                self.wait_logs(view, "reached main at 127.0.0.1")
        self.assertEqual(hosts, {"b1", "b2", "b3", "b4"})  # one Slurm node each

    def test_one_failed_node_tears_the_gang_down(self):
        job_id = self.submit("tear", 'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 2 ]; then '
                             'echo failing; exit 5; fi; exec sleep 300', definition="gang")
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED", job)
        self.assertEqual(self.describe("%s#2" % job_id)["container"]["exitCode"], 5)
        # The whole Slurm job is over: no node sleeps on.
        self.assertIn(self.wait_slurm_ended(self.slurm_id(job_id)), ("FAILED", "CANCELLED"))

    def test_dump_and_inject_a_running_gang_through_its_runners(self):
        """lote jobs dump / inject of a Slurm gang: the server cannot reach the nodes'
        processes, so each node's runner dumps its own (SIGUSR2, dump.json) and takes
        a fault (SIGUSR1, inject.json), signalled through scancel --signal."""
        job_id = self.submit("dumpme", "echo up; exec sleep 300", definition="gang")
        self.wait_status(job_id, ("RUNNING",))
        for k in range(4):
            self.wait_logs(self.describe("%s#%d" % (job_id, k)), "up")
        env = self.server.env()
        r = subprocess.run([LOTE, "jobs", "dump", job_id, "--endpoint", self.server.endpoint],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        for k in range(4):
            self.assertRegex(r.stdout, r"node %d: /aws/batch/job \S+/dump" % k)
        self.assertEqual(self.describe(job_id)["status"], "RUNNING")
        stream = self.describe("%s#1" % job_id)["container"]["logStreamName"] + "/dump"
        dump = "\n".join(e["message"] for e in self.logs.get_log_events(
            logGroupName="/aws/batch/job", logStreamName=stream, startFromHead=True)["events"])
        self.assertIn("=== process ", dump, dump[:2000])
        self.assertIn("sleep", dump, dump[:2000])
        self.assertRegex(dump, r"(?m)^#0 ", dump[:2000])  # gdb's frames, from the node's host
        # A fault for node 1 from now: only node 1's runner takes it.
        r = subprocess.run([LOTE, "jobs", "inject", job_id, "--kill-node", "1", "--after", "0",
                            "--endpoint", self.server.endpoint],
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED", job)
        self.assertEqual(job["attempts"][0]["statusReason"],
                         "Injected fault: node 1 killed (SIGKILL) after 0 s", job["attempts"][0])
        self.wait_slurm_ended(self.slurm_id(job_id))

    def test_terminate_signals_then_ends_the_slurm_job(self):
        job_id = self.submit("term", "trap 'echo got TERM; exit 7' TERM; echo started; "
                             "while :; do sleep 0.2; done")
        job = self.wait_status(job_id, ("RUNNING",))
        self.wait_logs(job, "started")
        self.batch.terminate_job(jobId=job_id, reason="test says stop")
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["statusReason"], "test says stop")
        self.wait_logs(job, "got TERM")  # SIGTERM first: the job could clean up
        self.wait_slurm_ended(self.slurm_id(job_id))

    def test_server_restart_reattaches_to_a_running_slurm_job(self):
        flag = os.path.join(self.work, "go-restart")
        job_id = self.submit("restart", "echo waiting; while [ ! -e %s ]; do sleep 0.1; done; "
                             "echo done" % flag)
        job = self.wait_status(job_id, ("RUNNING",))
        self.wait_logs(job, "waiting")
        slurm_id = self.slurm_id(job_id)
        self.server.stop()
        self.assertEqual(self.cluster.job_state(slurm_id), "RUNNING")
        self.server.start()
        type(self).batch = self.server.client()
        type(self).logs = self.server.client("logs")
        open(flag, "w").close()
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertEqual(len(job["attempts"]), 1, job)
        self.wait_logs(job, "done")
        self.assertEqual(self.slurm_id(job_id), slurm_id)

    def test_a_slurm_job_that_vanished_is_node_lost(self):
        job_id = self.submit("vanish", "echo up; while :; do sleep 0.2; done")
        job = self.wait_status(job_id, ("RUNNING",))
        self.wait_logs(job, "up")
        slurm_id = self.slurm_id(job_id)
        self.server.stop()
        # While no server watched, the Slurm job went away for good (here: the
        # stored reference now names a job Slurm never had). A RUNNING job's
        # row may lag behind its events (docs/architecture.md, "Jobs"), so the
        # reference is changed where it is stored: the Launched event (the
        # append-only trigger set aside for it) and the row, if it has it.
        self.cluster.run("scancel", slurm_id)
        self.wait_slurm_ended(slurm_id)
        old_ref, new_ref = '"backendRef":"%s"' % slurm_id, '"backendRef":"999999"'
        db = sqlite3.connect(os.path.join(self.server.home, "lote.db"))
        with db:
            trigger = db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND "
                                 "name = 'job_events_append_only'").fetchone()[0]
            db.execute("DROP TRIGGER job_events_append_only")
            changed = db.execute(
                "UPDATE job_events SET payload = replace(payload, ?, ?) "
                "WHERE job_id = ? AND type = 'Launched' AND instr(payload, ?) > 0",
                (old_ref, new_ref, job_id, old_ref)).rowcount
            db.execute(trigger)
            db.execute("UPDATE jobs SET doc = replace(doc, ?, ?) WHERE job_id = ?",
                       (old_ref, new_ref, job_id))
        db.close()
        self.assertEqual(changed, 1)
        status = os.path.join(self.server.home, "slurm", "slurm", job_id, "1", "node-0", "status.json")
        if os.path.exists(status):
            os.remove(status)  # nothing recorded by the node either
        self.server.start()
        type(self).batch = self.server.client()
        type(self).logs = self.server.client("logs")
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED", job)
        reason = job["attempts"][0]["container"]["reason"]
        self.assertTrue(reason.startswith("NODE_LOST: "), reason)
        self.assertIn("Slurm job 999999 vanished", reason)

    def test_a_job_that_cannot_fit_the_partition_fails_clearly(self):
        wide = self.submit("wide", "true", containerOverrides={
            "resourceRequirements": [{"type": "VCPU", "value": "4"}]})
        job = self.wait_status(wide)
        self.assertEqual(job["status"], "FAILED")
        reason = job["statusReason"]
        self.assertEqual(job["attempts"], [])
        # The partition's node size is named.
        self.assertIn("Slurm partition train", reason)
        self.assertIn("2 vCPU", reason)
        many = self.batch.submit_job(jobName="many", jobQueue="sq", jobDefinition="gang",
                                     nodeOverrides={"numNodes": 5})["jobId"]
        job = self.wait_status(many)
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("5", job["statusReason"])

    def test_a_job_pending_in_slurm_shows_runnable_with_slurms_reason(self):
        # Another Slurm user holds every CPU of the partition.
        blocker = self.cluster.run("sbatch", "--parsable", "-p", "train", "-N", "4", "-n", "8",
                                   "-o", "/dev/null", "--wrap", "sleep 300").stdout.strip().split(";")[0]
        try:
            deadline = time.time() + 60
            while self.cluster.job_state(blocker) != "RUNNING":
                self.assertLess(time.time(), deadline, "the blocker never ran")
                time.sleep(0.1)
            job_id = self.submit("waits", "echo finally ran")
            deadline = time.time() + 60
            while True:
                job = self.describe(job_id)
                if job["status"] == "RUNNABLE" and "Resources" in job.get("statusReason", ""):
                    break
                self.assertLess(time.time(), deadline, job)
                time.sleep(0.1)
            self.assertIn("PENDING in Slurm", job["statusReason"])
            listed = self.batch.list_jobs(jobQueue="sq", jobStatus="RUNNABLE")["jobSummaryList"]
            self.assertIn(job_id, [j["jobId"] for j in listed])
        finally:
            self.cluster.run("scancel", blocker, check=False)
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.wait_logs(job, "finally ran")

    def test_distributed_training_tp2_dp2_on_four_slurm_nodes(self):
        """The engine's 4-node training (tiny model, TP 2 x DP 2) as a Slurm job: the
        nodes meet through the AWS Batch variables the backend fills in."""
        self.assertTrue(DATA and os.path.exists(os.path.join(DATA, "tokenizer.model")),
                        "test data missing: run scripts/install-deps.sh (--data %s)" % DATA)
        data = os.path.join(self.work, "sotu")
        subprocess.run([LOTE, "data", "prepare", "--input", os.path.join(DATA, "sotu.txt"),
                        "--tokenizer", os.path.join(DATA, "tokenizer.model"),
                        "--block-size", "65", "--output", "file://" + data],
                       check=True, capture_output=True)
        out = os.path.join(self.work, "train-out")
        config = os.path.join(HERE, "..", "..", "examples", "llama2", "model", "tiny.json")
        steps = 12
        command = [LOTE, "train", "--config", os.path.abspath(config), "--data", data,
                   "--nproc-per-node", "1", "--tensor-parallel-size", "2",
                   "--seq-len", "64", "--batch-size", "2", "--global-batch-size", "4",
                   "--max-steps", str(steps), "--logging-interval", "4", "--threads", "1",
                   "--peak-gflops", "10", "--output", out]
        # Every node of this one-machine cluster is 127.0.0.1: a port of its own,
        # so that no other training on the machine (default port) is met instead.
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            command += ["--master-port", str(sock.getsockname()[1])]
        self.batch.register_job_definition(
            jobDefinitionName="llama-tiny", type="multinode",
            nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host", "command": command, "user": "root",
                    "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
                    "environment": [{"name": "OMP_NUM_THREADS", "value": "1"}],
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "512"}]}}]})
        job_id = self.batch.submit_job(jobName="tiny", jobQueue="sq",
                                       jobDefinition="llama-tiny")["jobId"]
        job = self.wait_status(job_id, timeout=600)
        outputs = ""
        for node in range(4):
            path = os.path.join(self.server.home, "slurm", "slurm", job_id, "1",
                                "node-%d.out" % node)
            with open(path, errors="replace") as f:
                outputs += "--- node %d\n%s" % (node, f.read()[-1500:])
        self.assertEqual(job["status"], "SUCCEEDED", outputs)
        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
        self.assertEqual(metrics["world_size"], 4)
        self.assertEqual(metrics["tensor_parallel"], 2)
        self.assertEqual(metrics["data_parallel"], 2)
        self.assertEqual(len(metrics["losses"]), steps)
        # The main node's stream holds the progress lines.
        self.wait_logs(self.describe("%s#0" % job_id), "LOTE_PROGRESS")

    def test_two_nodes_in_container_mode_meet_at_the_main_node(self):
        # The same runner runs each srun task's node in its image under podman.
        # podman's configuration as the server wrote it (same host, same storage).
        conf = os.path.join(self.server.home, "containers", "containers.conf")
        tags = {"lote:backend": "slurm", "lote:slurm-partition": "train",
                "lote:slurm-conf": self.cluster.conf, "lote:runtime": "container",
                "lote:emulation": "true"}
        self.batch.create_compute_environment(computeEnvironmentName="slurm-c",
                                              type="UNMANAGED", tags=tags)
        self.server.wait_for(lambda: self.batch.describe_compute_environments(
            computeEnvironments=["slurm-c"])["computeEnvironments"][0]["status"] == "VALID",
            30, "slurm-c VALID")
        self.batch.create_job_queue(jobQueueName="cq", priority=1, computeEnvironmentOrder=[
            {"order": 1, "computeEnvironment": "slurm-c"}])
        image = "localhost/lote-slurm-test:t%d" % os.getpid()
        small = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "128"}]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        main = "echo main on $LOTE_SLURM_NODE; nc -l -p %d" % port
        child = ("for i in $(seq 1 300); do echo hello-from-$AWS_BATCH_JOB_NODE_INDEX | "
                 "nc $AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS %d && exit 0; "
                 "sleep 0.1; done; exit 1" % port)
        self.batch.register_job_definition(
            jobDefinitionName="cpair", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [
                {"targetNodes": "0", "container": {"image": image,
                                                   "command": ["/bin/sh", "-c", main],
                                                   "resourceRequirements": small}},
                {"targetNodes": "1", "container": {"image": image,
                                                   "command": ["/bin/sh", "-c", child],
                                                   "resourceRequirements": small}}]})
        make_base_image(conf, image, ['CMD ["/bin/sh"]'])
        try:
            job_id = self.batch.submit_job(jobName="cpair", jobQueue="cq",
                                           jobDefinition="cpair")["jobId"]
            job = self.wait_status(job_id)
            self.assertEqual(job["status"], "SUCCEEDED", job)
            self.wait_logs(self.describe(job_id + "#0"), "hello-from-1")
            # The node's runner resolves the job's user on the node: the container
            # and a process are given the same numbers.
            ids = {}
            for queue, definition_image in (("cq", image), ("sq", "host")):
                self.batch.register_job_definition(
                    jobDefinitionName="ids-" + queue, type="container", containerProperties={
                        "image": definition_image, "user": "nobody", "resourceRequirements": small,
                        "command": ["/bin/sh", "-c", "echo ids $(id -u) $(id -g) $(id -G)"]})
                job = self.wait_status(self.batch.submit_job(
                    jobName="ids", jobQueue=queue, jobDefinition="ids-" + queue)["jobId"])
                self.assertEqual(job["status"], "SUCCEEDED", job)
                ids[queue] = [m for m in self.wait_logs(job, "ids ") if m.startswith("ids ")]
            self.assertEqual(ids["cq"], ids["sq"])
            self.assertEqual(ids["cq"][0].split()[1:3], ["65534", "65534"])
        finally:
            podman(conf, "rmi", "-f", image, check=False)

    def test_a_user_the_node_lacks_is_the_jobs_own_error(self):
        self.batch.register_job_definition(
            jobDefinitionName="ghost", type="container", containerProperties={
                "image": "host", "user": "lote-no-such-user", "command": ["true"],
                "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                         {"type": "MEMORY", "value": "128"}]})
        job = self.wait_status(self.batch.submit_job(jobName="ghost", jobQueue="sq",
                                                     jobDefinition="ghost")["jobId"])
        self.assertEqual(job["status"], "FAILED", job)
        self.assertIn("user 'lote-no-such-user' does not exist on host ",
                      job["attempts"][-1]["container"]["reason"])
        raw = describe_job_raw(self.batch, job["jobId"])
        self.assertEqual(raw["attempts"][-1]["failureCategory"], "USER_ERROR", raw)

    def test_capacity_comes_from_the_partition(self):
        # As the server sent it: botocore drops keys its model does not know.
        raw = {}

        def keep(http_response, **kwargs):
            raw["body"] = http_response.content
        event = "after-call.batch.DescribeComputeEnvironments"
        self.batch.meta.events.register(event, keep)
        try:
            self.batch.describe_compute_environments(computeEnvironments=["slurm"])
        finally:
            self.batch.meta.events.unregister(event, keep)
        ce = json.loads(raw["body"])["computeEnvironments"][0]
        self.assertEqual(ce["type"], "UNMANAGED")
        self.assertIn("loteCapacity", ce, ce)
        self.assertEqual(ce["loteCapacity"]["nodes"], 4)
        self.assertEqual(ce["loteCapacity"]["vcpusPerNode"], 2)


def main():
    global LOTE, DATA
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    parser.add_argument("--data", default=os.environ.get("LOTE_TEST_DATA", ""))
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    DATA = args.data
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
