"""Jobs that really run: a real `lote server` runs jobs submitted with boto3 and the
aws CLI as local processes (single-node, arrays, multi-node gangs, dependencies,
termination, retries)."""
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, create_emulated_environment, kill_node_runner  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_resources(batch):
    """Compute environment `ce` (c5.large virtual instances, emulated), queue `q`,
    job definition `sh` (1 vCPU, 256 MiB)."""
    create_emulated_environment(batch)
    batch.create_job_queue(jobQueueName="q", priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
    batch.register_job_definition(
        jobDefinitionName="sh", type="container",
        containerProperties={"image": "host", "command": ["true"],
                             "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                      {"type": "MEMORY", "value": "256"}]})


class JobHelpers:
    """Needs self.server, self.batch and self.out."""

    def submit(self, name, script, **kwargs):
        overrides = kwargs.pop("containerOverrides", {})
        overrides["command"] = ["sh", "-c", script]
        r = self.batch.submit_job(jobName=name, jobQueue="q", jobDefinition="sh",
                                  containerOverrides=overrides, **kwargs)
        return r["jobId"]

    def describe(self, job_id):
        jobs = self.batch.describe_jobs(jobs=[job_id])["jobs"]
        self.assertEqual(len(jobs), 1, job_id)
        return jobs[0]

    def wait_status(self, job_id, statuses=FINAL, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            job = self.describe(job_id)
            if job["status"] in statuses:
                return job
            time.sleep(0.1)
        raise AssertionError("job %s still %s (%s); server stderr:\n%s" % (
            job_id, job["status"], job.get("statusReason"), self.server.stderr()[-3000:]))

    def path(self, *parts):
        return os.path.join(self.out, *parts)


class JobsTest(JobHelpers, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()
        cls.out = tempfile.mkdtemp(prefix="lote_jobs_out_")
        setup_resources(cls.batch)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.out, ignore_errors=True)

    def test_exit_codes(self):
        ok = self.submit("ok", "echo hello")
        bad = self.submit("bad", "exit 3")
        job = self.wait_status(ok)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(job["container"]["exitCode"], 0)
        self.assertGreater(job["startedAt"], 0)
        self.assertGreaterEqual(job["stoppedAt"], job["startedAt"])
        job = self.wait_status(bad)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["container"]["exitCode"], 3)
        self.assertEqual(job["attempts"][-1]["container"]["exitCode"], 3)
        listed = self.batch.list_jobs(jobQueue="q", jobStatus="SUCCEEDED")["jobSummaryList"]
        self.assertIn(ok, [j["jobId"] for j in listed])
        listed = self.batch.list_jobs(jobQueue="q", jobStatus="FAILED")["jobSummaryList"]
        self.assertIn(bad, [j["jobId"] for j in listed])
        named = self.batch.list_jobs(jobQueue="q", filters=[{"name": "JOB_NAME", "values": ["bad"]}])
        self.assertEqual([j["jobId"] for j in named["jobSummaryList"]], [bad])

    def test_array_with_cli(self):
        d = self.path("array")
        os.makedirs(d)
        env = self.server.env()
        overrides = json.dumps({"command": [
            "sh", "-c", "echo $AWS_BATCH_JOB_ARRAY_INDEX > %s/$AWS_BATCH_JOB_ARRAY_INDEX" % d]})
        out = subprocess.run(
            ["aws", "batch", "submit-job", "--job-name", "arr", "--job-queue", "q",
             "--job-definition", "sh", "--array-properties", "size=10",
             "--container-overrides", overrides, "--output", "json"],
            env=env, check=True, capture_output=True, text=True).stdout
        parent = json.loads(out)["jobId"]
        job = self.wait_status(parent)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(job["arrayProperties"]["statusSummary"]["SUCCEEDED"], 10)
        for i in range(10):
            with open(os.path.join(d, str(i))) as f:
                self.assertEqual(f.read().strip(), str(i))
        child = self.describe("%s:7" % parent)
        self.assertEqual(child["arrayProperties"]["index"], 7)
        children = self.batch.list_jobs(arrayJobId=parent, jobStatus="SUCCEEDED")["jobSummaryList"]
        self.assertEqual(len(children), 10)
        out = subprocess.run(["aws", "batch", "describe-jobs", "--jobs", parent, "--output", "json"],
                             env=env, check=True, capture_output=True, text=True).stdout
        self.assertEqual(json.loads(out)["jobs"][0]["status"], "SUCCEEDED")

    def test_multi_node_gang(self):
        d = self.path("mnp")
        os.makedirs(d)
        port = free_port()
        nodes = 3
        program = r"""
import os, socket, sys, time
d, port, nodes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
idx = int(os.environ["AWS_BATCH_JOB_NODE_INDEX"])
with open(os.path.join(d, "env%d" % idx), "w") as f:
    for k in sorted(os.environ):
        if k.startswith("AWS_BATCH") or k.startswith("LOTE_"):
            f.write("%s=%s\n" % (k, os.environ[k]))
if idx == int(os.environ["AWS_BATCH_JOB_MAIN_NODE_INDEX"]):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((os.environ["LOTE_PRIVATE_IPV4_ADDRESS"], port))
    s.listen(16)
    got = []
    for _ in range(nodes - 1):
        c, _ = s.accept()
        got.append(c.recv(100).decode())
        c.close()
    with open(os.path.join(d, "main"), "w") as f:
        f.write(",".join(sorted(got)))
else:
    addr = os.environ["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"]
    for _ in range(600):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.05)
    c.sendall(str(idx).encode())
    c.close()
"""
        script = self.path("mnp.py")
        with open(script, "w") as f:
            f.write(program)
        self.batch.register_job_definition(
            jobDefinitionName="gang", type="multinode",
            nodeProperties={"numNodes": nodes, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host",
                    "command": [sys.executable, script, d, str(port), str(nodes)],
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "256"}]}}]})
        job_id = self.batch.submit_job(jobName="gang", jobQueue="q", jobDefinition="gang")["jobId"]
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", (job.get("statusReason"), job))
        with open(os.path.join(d, "main")) as f:
            self.assertEqual(f.read(), ",".join(str(i) for i in range(1, nodes)))
        envs = []
        for i in range(nodes):
            with open(os.path.join(d, "env%d" % i)) as f:
                envs.append(dict(l.rstrip("\n").split("=", 1) for l in f))
        main_ip = envs[0]["LOTE_PRIVATE_IPV4_ADDRESS"]
        self.assertTrue(main_ip.startswith("127.0."), main_ip)
        for i, env in enumerate(envs):
            self.assertEqual(env["AWS_BATCH_JOB_ID"], "%s#%d" % (job_id, i))
            self.assertEqual(env["AWS_BATCH_JOB_NUM_NODES"], str(nodes))
            self.assertEqual(env["AWS_BATCH_JOB_NODE_INDEX"], str(i))
            if i > 0:
                self.assertEqual(env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"], main_ip)
                self.assertNotEqual(env["LOTE_PRIVATE_IPV4_ADDRESS"], main_ip)
        node = self.describe("%s#1" % job_id)
        self.assertEqual(node["nodeDetails"]["nodeIndex"], 1)
        listed = self.batch.list_jobs(multiNodeJobId=job_id, jobStatus="SUCCEEDED")["jobSummaryList"]
        self.assertEqual(len(listed), nodes)

    def test_gang_teardown(self):
        # Node 1 fails at once; the main node would sleep for minutes: it must be torn down.
        self.batch.register_job_definition(
            jobDefinitionName="gang-fail", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host",
                    "command": ["sh", "-c",
                                "if [ \"$AWS_BATCH_JOB_NODE_INDEX\" = 1 ]; then "
                                "while [ ! -s {p} ]; do sleep 0.05; done; exit 5; fi; "
                                "echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 300"
                                .format(p=self.path("gang-main.pid"))],
                    "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                             {"type": "MEMORY", "value": "256"}]}}]})
        job_id = self.batch.submit_job(jobName="gf", jobQueue="q", jobDefinition="gang-fail")["jobId"]
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["attempts"][-1]["container"]["exitCode"], 5)
        self.wait_gone(self.path("gang-main.pid"))

    def wait_gone(self, pid_file):
        deadline = time.time() + 30
        pid = None
        while time.time() < deadline:
            if pid is None and os.path.exists(pid_file):
                with open(pid_file) as f:
                    text = f.read().strip()
                pid = int(text) if text else None
            if pid is not None:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.1)
        self.fail("process of %s still running" % pid_file)

    def test_dependencies(self):
        log = self.path("deps.log")
        a = self.submit("a", "sleep 0.3; echo a >> %s" % log)
        b = self.submit("b", "echo b >> %s" % log, dependsOn=[{"jobId": a}])
        job = self.wait_status(b)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        with open(log) as f:
            self.assertEqual(f.read().split(), ["a", "b"])
        # SEQUENTIAL: children run one after the other.
        seq_log = self.path("seq.log")
        s = self.submit("seq", "sleep 0.1; echo $AWS_BATCH_JOB_ARRAY_INDEX >> %s" % seq_log,
                        arrayProperties={"size": 4}, dependsOn=[{"type": "SEQUENTIAL"}])
        # N_TO_N: child i waits for seq:i.
        n2n_dir = self.path("n2n")
        os.makedirs(n2n_dir)
        n = self.submit("n2n", "cp %s %s/$AWS_BATCH_JOB_ARRAY_INDEX" % (seq_log, n2n_dir),
                        arrayProperties={"size": 4}, dependsOn=[{"jobId": s, "type": "N_TO_N"}])
        self.assertEqual(self.wait_status(s)["status"], "SUCCEEDED")
        self.assertEqual(self.wait_status(n)["status"], "SUCCEEDED")
        with open(seq_log) as f:
            self.assertEqual(f.read().split(), ["0", "1", "2", "3"])
        for i in range(4):
            with open(os.path.join(n2n_dir, str(i))) as f:
                self.assertGreaterEqual(len(f.read().split()), i + 1)
        # A failed dependency fails the dependent job.
        bad = self.submit("dep-bad", "exit 1")
        dep = self.submit("dep-after-bad", "true", dependsOn=[{"jobId": bad}])
        job = self.wait_status(dep)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["statusReason"], "Dependent Job failed")

    def test_terminate_running(self):
        pid_file = self.path("term.pid")
        job_id = self.submit("term", "echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 300"
                             % (pid_file, pid_file, pid_file))
        self.wait_status(job_id, ("RUNNING",))
        deadline = time.time() + 30
        while not os.path.exists(pid_file) and time.time() < deadline:
            time.sleep(0.05)
        self.batch.terminate_job(jobId=job_id, reason="test says stop")
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["statusReason"], "test says stop")
        self.wait_gone(pid_file)

    def test_cancel_pending(self):
        blocker = self.submit("blocker", "sleep 300")
        waiting = self.submit("waiting", "true", dependsOn=[{"jobId": blocker}])
        self.wait_status(waiting, ("PENDING",))
        self.batch.cancel_job(jobId=waiting, reason="not needed")
        job = self.wait_status(waiting)
        self.assertEqual(job["status"], "FAILED")
        self.assertTrue(job["isCancelled"])
        self.batch.terminate_job(jobId=blocker, reason="cleanup")
        self.assertEqual(self.wait_status(blocker)["status"], "FAILED")

    def test_retry_succeeds_on_second_attempt(self):
        marker = self.path("retry.marker")
        attempt_log = self.path("retry.attempts")
        job_id = self.submit(
            "retry", "echo $AWS_BATCH_JOB_ATTEMPT >> %s; [ -e %s ] && exit 0; touch %s; exit 1"
            % (attempt_log, marker, marker), retryStrategy={"attempts": 3})
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(len(job["attempts"]), 2)
        self.assertEqual(job["attempts"][0]["container"]["exitCode"], 1)
        with open(attempt_log) as f:
            self.assertEqual(f.read().split(), ["1", "2"])

    def test_never_fits_fails_with_capacity(self):
        job_id = self.submit("huge", "true", containerOverrides={
            "resourceRequirements": [{"type": "VCPU", "value": "64"}, {"type": "MEMORY", "value": "256"}]})
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("CAPACITY", job["statusReason"])

    def test_array_of_100(self):
        d = self.path("array100")
        os.makedirs(d)
        parent = self.submit("arr100", "echo $AWS_BATCH_JOB_ARRAY_INDEX > %s/$AWS_BATCH_JOB_ARRAY_INDEX" % d,
                             arrayProperties={"size": 100})
        job = self.wait_status(parent, timeout=120)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(sorted(int(x) for x in os.listdir(d)), list(range(100)))
        pages = list(self.batch.get_paginator("list_jobs").paginate(
            arrayJobId=parent, jobStatus="SUCCEEDED", PaginationConfig={"PageSize": 30}))
        self.assertEqual(len(pages), 4)
        self.assertEqual(sum(len(p["jobSummaryList"]) for p in pages), 100)

    def test_accelerators_need_emulation(self):
        # A GPU node: the local backend cannot hand out real devices, so it runs only
        # on a compute environment tagged lote:emulation=true.
        for name, tags in (("gce", {}), ("gce-emu", {"lote:emulation": "true"})):
            self.batch.create_compute_environment(
                computeEnvironmentName=name, type="MANAGED", tags=tags,
                computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 8,
                                  "instanceTypes": ["g5.xlarge"], "subnets": ["s"]})
        deadline = time.time() + 30
        while any(c["status"] != "VALID" for c in self.batch.describe_compute_environments(
                computeEnvironments=["gce", "gce-emu"])["computeEnvironments"]):
            self.assertLess(time.time(), deadline)
            time.sleep(0.1)
        results = {}
        for name in ("gce", "gce-emu"):
            self.batch.create_job_queue(jobQueueName="q-" + name, priority=1,
                                        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": name}])
            results[name] = self.batch.submit_job(
                jobName="gpu", jobQueue="q-" + name, jobDefinition="sh",
                containerOverrides={"command": ["true"], "resourceRequirements": [
                    {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"},
                    {"type": "GPU", "value": "1"}]})["jobId"]
        # This host has no GPUs, so no instance of the real environment can ever hold
        # one: AWS leaves such a job RUNNABLE as MISCONFIGURATION, it does not fail it.
        deadline = time.time() + 30
        while True:
            job = self.describe(results["gce"])
            if job.get("statusReason", "").startswith("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - "):
                break
            self.assertLess(time.time(), deadline, job)
            time.sleep(0.1)
        self.assertEqual(job["status"], "RUNNABLE")
        self.batch.terminate_job(jobId=results["gce"], reason="test done")
        self.assertEqual(self.wait_status(results["gce"])["status"], "FAILED")
        job = self.wait_status(results["gce-emu"])
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))

    def test_job_tags(self):
        job_id = self.batch.submit_job(jobName="tagged", jobQueue="q", jobDefinition="sh",
                                       tags={"team": "nlp"})["jobId"]
        arn = self.describe(job_id)["jobArn"]
        self.batch.tag_resource(resourceArn=arn, tags={"stage": "pretrain"})
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=arn)["tags"],
                         {"team": "nlp", "stage": "pretrain"})
        self.batch.untag_resource(resourceArn=arn, tagKeys=["team"])
        self.assertEqual(self.describe(job_id)["tags"], {"stage": "pretrain"})
        # The stock CLI, and the error for a job that does not exist.
        out = subprocess.run(["aws", "batch", "list-tags-for-resource", "--resource-arn", arn,
                              "--output", "json"], env=self.server.env(), check=True,
                             capture_output=True, text=True).stdout
        self.assertEqual(json.loads(out)["tags"], {"stage": "pretrain"})
        with self.assertRaises(self.batch.exceptions.ClientException):
            self.batch.tag_resource(resourceArn=arn.rsplit("/", 1)[0] + "/nope",
                                    tags={"a": "b"})
        # Other resources still go to the control plane.
        ce_arn = self.batch.describe_compute_environments(
            computeEnvironments=["ce"])["computeEnvironments"][0]["computeEnvironmentArn"]
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=ce_arn)["tags"],
                         {"lote:emulation": "true"})

    def test_job_queue_snapshot_and_desired_vcpus(self):
        # A queue whose only environment is DISABLED: its jobs stay RUNNABLE.
        self.batch.create_compute_environment(
            computeEnvironmentName="off", type="MANAGED", state="DISABLED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 4,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true"})
        deadline = time.time() + 30
        while self.batch.describe_compute_environments(
                computeEnvironments=["off"])["computeEnvironments"][0]["status"] != "VALID":
            self.assertLess(time.time(), deadline)
            time.sleep(0.1)
        self.batch.create_job_queue(jobQueueName="held", priority=1,
                                    computeEnvironmentOrder=[{"order": 1,
                                                              "computeEnvironment": "off"}])
        ids = [self.batch.submit_job(jobName="w%d" % i, jobQueue="held",
                                     jobDefinition="sh")["jobId"] for i in range(3)]
        for job_id in ids:
            self.wait_status(job_id, ("RUNNABLE",))
        arns = [self.describe(job_id)["jobArn"] for job_id in ids]

        # The snapshot is the scheduler's last pass (AWS's lags too): wait for a pass
        # that has seen the change.
        def snapshot_of(want):
            deadline = time.time() + 30
            while True:
                snap = self.batch.get_job_queue_snapshot(jobQueue="held")["frontOfQueue"]
                if [j["jobArn"] for j in snap["jobs"]] == want or time.time() > deadline:
                    return snap
                time.sleep(0.1)
        snap = snapshot_of(arns)
        self.assertEqual([j["jobArn"] for j in snap["jobs"]], arns)  # FIFO
        self.assertGreater(snap["lastUpdatedAt"], 0)
        self.assertTrue(all(j["earliestTimeAtPosition"] > 0 for j in snap["jobs"]))
        self.batch.cancel_job(jobId=ids[0], reason="test")
        self.wait_status(ids[0], ("FAILED",))
        snap = snapshot_of(arns[1:])
        self.assertEqual([j["jobArn"] for j in snap["jobs"]], arns[1:])
        for job_id in ids[1:]:
            self.batch.cancel_job(jobId=job_id, reason="test")
        with self.assertRaises(self.batch.exceptions.ClientException):
            self.batch.get_job_queue_snapshot(jobQueue="nope")

        # desiredvCpus follows the virtual instances the scheduler keeps.
        running = self.submit("hold", "sleep 60")
        self.wait_status(running, ("RUNNING",))
        ce = self.batch.describe_compute_environments(
            computeEnvironments=["ce"])["computeEnvironments"][0]
        self.assertGreaterEqual(ce["computeResources"]["desiredvCpus"], 2)  # one c5.large
        self.batch.terminate_job(jobId=running, reason="test")
        self.wait_status(running)

    def test_one_bad_job_cannot_stop_the_others(self):
        # Random resource values through containerOverrides: each is a ClientException at
        # submit or a job that fails on its own (CAPACITY); a well-formed job still runs.
        import random
        rng = random.Random(13)
        values = ["2147483648", "4294967296", "9223372036854775808", "1e30", "2147483647",
                  "-1", "0", "0.5", "1.5", "nan", "", "0x10", "64", "1"]
        accepted, refused = [], 0
        for i in range(300):
            reqs = [{"type": rng.choice(["VCPU", "MEMORY", "GPU"]), "value": rng.choice(values)}
                    for _ in range(rng.randint(1, 3))]
            try:
                accepted.append(self.batch.submit_job(
                    jobName="r%d" % i, jobQueue="q", jobDefinition="sh",
                    containerOverrides={"resourceRequirements": reqs})["jobId"])
            except self.batch.exceptions.ClientException:
                refused += 1
        self.assertGreater(refused, 100)
        good = self.submit("good", "echo fine")
        self.assertEqual(self.wait_status(good)["status"], "SUCCEEDED")
        # Each accepted job ran, failed on its own (CAPACITY: vCPUs or memory no instance
        # holds), or waits RUNNABLE as AWS's MISCONFIGURATION (GPUs no instance holds).
        misconfigured = "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - "
        for job_id in accepted:
            deadline = time.time() + 60
            while True:
                job = self.describe(job_id)
                if job["status"] in ("SUCCEEDED", "FAILED") or (
                        job["status"] == "RUNNABLE"
                        and job.get("statusReason", "").startswith(misconfigured)):
                    break
                self.assertLess(time.time(), deadline, job)
                time.sleep(0.1)
            if job["status"] == "FAILED":  # boto3 drops lote's extra keys: read the reason
                self.assertTrue(job["statusReason"].startswith("CAPACITY: "), job)
            if job["status"] == "RUNNABLE":
                self.batch.terminate_job(jobId=job_id, reason="test done")

    def test_aws_fidelity(self):
        # Stopping an unknown job is 200 {} (AWS).
        self.assertNotIn("jobId", self.batch.cancel_job(jobId="no-such-job", reason="x"))
        self.batch.terminate_job(jobId="no-such-job", reason="x")
        # A typed dependency of a plain job waits for the whole job.
        first = self.submit("first", "true")
        after = self.submit("after", "true", dependsOn=[{"jobId": first, "type": "N_TO_N"}])
        self.assertEqual(self.wait_status(after)["status"], "SUCCEEDED")
        job = self.describe(after)
        self.assertEqual(job["dependsOn"], [{"jobId": first, "type": "N_TO_N"}])
        # Unset optional fields are empty, not absent; lote's notices are not in the stream.
        self.assertEqual(job["tags"], {})
        self.assertEqual(job["container"]["volumes"], [])
        self.assertEqual(job["container"]["mountPoints"], [])
        out = self.submit("lines", "echo one; echo two")
        job = self.wait_status(out)
        logs = self.server.client("logs")
        deadline = time.time() + 30
        while True:
            events = logs.get_log_events(logGroupName="/aws/batch/job",
                                         logStreamName=job["container"]["logStreamName"],
                                         startFromHead=True)["events"]
            if len(events) >= 2 or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual([e["message"] for e in events], ["one", "two"])
        # A queue whose only environment is UNMANAGED keeps its job RUNNABLE, with a reason.
        self.batch.create_compute_environment(computeEnvironmentName="um", type="UNMANAGED")
        deadline = time.time() + 30
        while self.batch.describe_compute_environments(
                computeEnvironments=["um"])["computeEnvironments"][0]["status"] != "VALID":
            self.assertLess(time.time(), deadline)
            time.sleep(0.1)
        self.batch.create_job_queue(jobQueueName="q-um", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "um"}])
        held = self.batch.submit_job(jobName="held", jobQueue="q-um", jobDefinition="sh")["jobId"]
        deadline = time.time() + 30
        while not self.describe(held).get("statusReason"):
            self.assertLess(time.time(), deadline)
            time.sleep(0.1)
        job = self.describe(held)
        self.assertEqual(job["status"], "RUNNABLE", job)
        self.assertIn("UNMANAGED", job["statusReason"])
        self.batch.cancel_job(jobId=held, reason="done")
        # Fargate: the environment, a FARGATE definition with a Fargate pair, a job that runs.
        self.batch.create_compute_environment(
            computeEnvironmentName="fg", type="MANAGED", tags={"lote:emulation": "true"},
            computeResources={"type": "FARGATE", "maxvCpus": 16, "subnets": ["s"],
                              "securityGroupIds": ["sg"]})
        deadline = time.time() + 30
        while self.batch.describe_compute_environments(
                computeEnvironments=["fg"])["computeEnvironments"][0]["status"] != "VALID":
            self.assertLess(time.time(), deadline)
            time.sleep(0.1)
        self.batch.create_job_queue(jobQueueName="q-fg", priority=1,
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "fg"}])
        self.batch.register_job_definition(
            jobDefinitionName="fgd", type="container", platformCapabilities=["FARGATE"],
            containerProperties={
                "image": "host", "command": ["true"],
                "networkConfiguration": {"assignPublicIp": "ENABLED"},
                "fargatePlatformConfiguration": {"platformVersion": "LATEST"},
                "resourceRequirements": [{"type": "VCPU", "value": "0.25"},
                                         {"type": "MEMORY", "value": "512"}]})
        fj = self.batch.submit_job(jobName="fj", jobQueue="q-fg", jobDefinition="fgd")["jobId"]
        job = self.wait_status(fj)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(job["platformCapabilities"], ["FARGATE"])
        with self.assertRaises(self.batch.exceptions.ClientException):
            self.batch.submit_job(jobName="fbad", jobQueue="q-fg", jobDefinition="fgd",
                                  containerOverrides={"resourceRequirements": [
                                      {"type": "MEMORY", "value": "4096"}]})
        # EKS: a single-container pod runs as its container.
        self.batch.register_job_definition(
            jobDefinitionName="pod", type="container",
            eksProperties={"podProperties": {"containers": [{
                "name": "main", "image": "host", "command": ["sh", "-c"],
                "args": ["echo pod $P"], "env": [{"name": "P", "value": "ok"}],
                "resources": {"limits": {"cpu": "1", "memory": "256Mi"}}}]}})
        pj = self.batch.submit_job(jobName="pj", jobQueue="q", jobDefinition="pod")["jobId"]
        job = self.wait_status(pj)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        with self.assertRaises(self.batch.exceptions.ClientException) as ctx:
            self.batch.register_job_definition(
                jobDefinitionName="pod2", type="container",
                eksProperties={"podProperties": {"containers": [
                    {"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}})
        self.assertIn("single-container", str(ctx.exception))
        # evaluateOnExit action in any case, returned as given.
        rj = self.submit("rule", "exit 3", retryStrategy={
            "attempts": 2, "evaluateOnExit": [{"onExitCode": "3", "action": "exit"}]})
        job = self.wait_status(rj)
        self.assertEqual(len(job["attempts"]), 1)
        self.assertEqual(job["retryStrategy"]["evaluateOnExit"][0]["action"], "exit")

    def test_describe_limits(self):
        with self.assertRaises(Exception) as ctx:
            self.batch.describe_jobs(jobs=["x%d" % i for i in range(101)])
        self.assertIn("100", str(ctx.exception))
        self.assertEqual(self.batch.describe_jobs(jobs=["no-such-job"])["jobs"], [])


class RestartTest(JobHelpers, unittest.TestCase):
    """A running job survives a server crash (SIGKILL): the restarted server adopts it."""

    def test_running_job_adopted_after_kill(self):
        server = self.server = LoteServer(LOTE).start()
        out = self.out = tempfile.mkdtemp(prefix="lote_jobs_restart_")
        t = self
        try:
            self.batch = server.client()
            setup_resources(self.batch)
            done = os.path.join(out, "done")
            job_id = t.submit("survivor", "echo $AWS_BATCH_JOB_ATTEMPT >> %s.attempts; "
                                          "while [ ! -e %s.go ]; do sleep 0.05; done; echo ok > %s"
                                          % (done, done, done))
            t.wait_status(job_id, ("RUNNING",))
            server.kill()
            open(done + ".go", "w").close()  # the job may finish while no server watches
            server.start()
            self.batch = server.client()
            job = t.wait_status(job_id)
            self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
            with open(done) as f:
                self.assertEqual(f.read().strip(), "ok")
            with open(done + ".attempts") as f:
                self.assertEqual(f.read().split(), ["1"])  # never started twice
            # A job running across a restart is adopted and still runs to its end.
            job_id = t.submit("adopted", "while [ ! -e %s.go2 ]; do sleep 0.05; done" % done)
            t.wait_status(job_id, ("RUNNING",))
            server.kill()
            server.start()
            self.batch = server.client()
            self.assertEqual(t.describe(job_id)["status"], "RUNNING")
            open(done + ".go2", "w").close()
            self.assertEqual(t.wait_status(job_id)["status"], "SUCCEEDED")
        finally:
            server.cleanup()
            shutil.rmtree(out, ignore_errors=True)

    def test_node_lost_while_server_down_is_retried(self):
        # The node's runner dies while no server runs (its supervisor, or the node
        # agent together with its keeper, which would have recorded the outcome):
        # the restarted server finds no outcome, kills the orphaned command and
        # reports NODE_LOST; the retry runs.
        server = self.server = LoteServer(LOTE).start()
        out = self.out = tempfile.mkdtemp(prefix="lote_jobs_lost_")
        try:
            self.batch = server.client()
            setup_resources(self.batch)
            marker = self.path("marker")
            pid_file = self.path("pid")
            job_id = self.submit(
                "lost", "if [ -e {m} ]; then exit 0; fi; touch {m}; echo $$ > {p}.tmp; "
                        "mv {p}.tmp {p}; exec sleep 300".format(m=marker, p=pid_file),
                retryStrategy={"attempts": 2})
            self.wait_status(job_id, ("RUNNING",))
            deadline = time.time() + 30
            while not os.path.exists(pid_file):
                self.assertLess(time.time(), deadline)
                time.sleep(0.05)
            with open(pid_file) as f:
                command_pid = int(f.read())
            server.kill()
            kill_node_runner(server.home, job_id)
            server.start()
            self.batch = server.client()
            job = self.wait_status(job_id)
            self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
            self.assertEqual(len(job["attempts"]), 2)
            self.assertIn("NODE_LOST", json.dumps(job["attempts"][0]))
            deadline = time.time() + 30
            while True:
                try:
                    os.kill(command_pid, 0)
                except ProcessLookupError:
                    break
                self.assertLess(time.time(), deadline, "orphaned command still runs")
                time.sleep(0.05)
        finally:
            server.cleanup()
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
