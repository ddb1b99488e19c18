"""Issue 40 through a real `lote server` with an inventory file of fake devices
(`--accelerators`; CI has no GPU), driven by boto3 and the `lote` CLI:
- the inventory is listed (`lote nodes list`, DescribeComputeEnvironments'
  loteAccelerators) with who holds each device;
- GPU=1 jobs on a host with 2 GPUs: each job's environment names exactly its
  device, no two jobs ever hold one device at once (from the jobs' own start and
  stop stamps), a third waits naming the shortfall;
- a kill -9 of the server in the middle keeps both assignments, and the waiting
  job still waits for them;
- a drained device is not handed out (kept across the restart) and comes back
  with release-device;
- a request no instance can hold stays RUNNABLE as
  MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT;
- the recipe's form (/dev/neuron0..15 in linuxParameters.devices) on trn1.32xlarge
  against 64 fake Neuron devices: 4 nodes of 16 distinct devices each, with
  NEURON_RT_VISIBLE_CORES."""
import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, raw_body, describe_job_raw  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")


def wait_valid(batch, name):
    deadline = time.time() + 30
    while batch.describe_compute_environments(
            computeEnvironments=[name])["computeEnvironments"][0]["status"] != "VALID":
        if time.time() > deadline:
            raise AssertionError("compute environment %s never became VALID" % name)
        time.sleep(0.1)


def environment(batch, name, instance_type, max_vcpus=64):
    batch.create_compute_environment(
        computeEnvironmentName=name, type="MANAGED",
        computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": max_vcpus,
                          "instanceTypes": [instance_type], "subnets": ["s"]})
    wait_valid(batch, name)
    batch.create_job_queue(jobQueueName=name, priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": name}])


class Base(unittest.TestCase):
    INVENTORY = ""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lote_acc_")
        os.chmod(cls.tmp, 0o777)
        cls.inventory = os.path.join(cls.tmp, "inventory")
        with open(cls.inventory, "w") as f:
            f.write(cls.INVENTORY)
        cls.server = LoteServer(LOTE, extra_args=["--accelerators", cls.inventory]).start()
        cls.batch = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def lote(self, *args):
        env = dict(os.environ, **self.server.env())
        return subprocess.run([LOTE] + list(args) + ["--endpoint", self.server.endpoint],
                              env=env, capture_output=True, text=True, timeout=60)

    def restart(self, stop=True):
        if stop:
            self.server.stop()
        self.server.start()
        type(self).batch = self.server.client()

    def accelerators(self, ce):
        """DescribeComputeEnvironments' loteAccelerators of `ce`, once the job loop has
        set it (its first pass)."""
        def get():
            body = raw_body(self.batch, "DescribeComputeEnvironments",
                            lambda: self.batch.describe_compute_environments(
                                computeEnvironments=[ce]))
            return body["computeEnvironments"][0].get("loteAccelerators")
        return self.server.wait_for(get, 30, "loteAccelerators of " + ce)

    def describe(self, job_id):
        return self.batch.describe_jobs(jobs=[job_id])["jobs"][0]

    def wait_until(self, job_id, pred, what, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            job = self.describe(job_id)
            if pred(job):
                return job
            time.sleep(0.1)
        raise AssertionError("job %s: never %s (now %s, %s); server stderr:\n%s" % (
            job_id, what, job["status"], job.get("statusReason"),
            self.server.stderr()[-3000:]))

    def wait_status(self, job_id, statuses=FINAL, timeout=90):
        return self.wait_until(job_id, lambda j: j["status"] in statuses,
                               "in %s" % (statuses,), timeout)


GPU_SCRIPT = ("d=%s/$AWS_BATCH_JOB_ID; mkdir -p $d; date +%%s.%%N > $d/start; "
              "env | grep -E '^(CUDA_|NVIDIA_|LOTE_ACCELERATORS)' | sort > $d/env; "
              "sleep %s; date +%%s.%%N > $d/stop")


# What a fenced job does: open each device node given, and say what came of it.
OPEN_SCRIPT = r"""
import errno, json, os, sys
out = {}
for path in sys.argv[2:]:
    try:
        os.close(os.open(path, os.O_RDONLY))
        out[path] = "opened"
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
out["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


class FencedGpusTest(Base):
    """Process mode fences off the host's other accelerators with the cgroup v1 devices
    controller: two fake GPUs are character devices 195:0 and 195:1 made here with mknod
    (no driver behind them, so opening one's own gives ENXIO, not EPERM); a GPU=1 job may
    open its own and is refused (EPERM) the other."""

    @classmethod
    def setUpClass(cls):
        cls.dev = tempfile.mkdtemp(prefix="lote_acc_dev_")
        os.chmod(cls.dev, 0o755)
        for i in (0, 1):
            os.mknod(os.path.join(cls.dev, "nvidia%d" % i), 0o666 | stat.S_IFCHR,
                     os.makedev(195, i))
        cls.INVENTORY = "".join(
            "gpu %s/nvidia%d index=%d uuid=GPU-f%d name=Fake_GPU numa=0\n" % (cls.dev, i, i, i)
            for i in (0, 1))
        super().setUpClass()
        environment(cls.batch, "fenced", "local")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.dev, ignore_errors=True)

    def test_a_process_opens_its_own_gpu_and_not_the_other(self):
        script = os.path.join(self.tmp, "open.py")
        with open(script, "w") as f:
            f.write(OPEN_SCRIPT)
        report = os.path.join(self.tmp, "report.json")
        paths = [os.path.join(self.dev, "nvidia%d" % i) for i in (0, 1)]
        job_id = self.batch.submit_job(
            jobName="fenced", jobQueue="fenced", jobDefinition=self.definition(),
            containerOverrides={"command": [sys.executable, script, report] + paths})["jobId"]
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        with open(report) as f:
            got = json.load(f)
        own = int(got["CUDA_VISIBLE_DEVICES"])
        other = 1 - own
        self.assertNotEqual(got[paths[own]], "EPERM", got)  # ENXIO: allowed, no driver
        root = "/sys/fs/cgroup/devices"
        if os.path.exists(os.path.join(root, "devices.deny")) and os.access(root, os.W_OK):
            self.assertEqual(got[paths[other]], "EPERM", got)  # the cgroup refused it
            # The devices group is gone with the node.
            self.assertEqual([d for d in os.listdir(os.path.join(root, "lote"))
                              if job_id in d], [])
        else:
            # A host without a writable devices controller runs the node unfenced, as
            # docs/jobs.md says (this machine's case is printed, not hidden).
            print("this host has no writable cgroup v1 devices controller: checked that the "
                  "node ran unfenced", file=sys.stderr)
            self.assertNotEqual(got[paths[other]], "EPERM", got)

    def definition(self):
        self.batch.register_job_definition(
            jobDefinitionName="fenced1", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "0.25"},
                                                          {"type": "MEMORY", "value": "64"},
                                                          {"type": "GPU", "value": "1"}]})
        return "fenced1"


class HostGpusTest(Base):
    INVENTORY = ("# two fake GPUs (the device file is never opened by these jobs)\n"
                 "gpu /dev/null index=0 uuid=GPU-aaaa name=Fake_GPU numa=0\n"
                 "gpu /dev/null index=1 uuid=GPU-bbbb name=Fake_GPU numa=0\n")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        environment(cls.batch, "gpus", "local")
        cls.batch.register_job_definition(
            jobDefinitionName="gpu1", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "0.25"},
                                                          {"type": "MEMORY", "value": "64"},
                                                          {"type": "GPU", "value": "1"}]})

    def submit(self, name, seconds, gpus="1"):
        script = GPU_SCRIPT % (self.tmp, seconds)
        return self.batch.submit_job(
            jobName=name, jobQueue="gpus", jobDefinition="gpu1",
            containerOverrides={"command": ["sh", "-c", script],
                                "resourceRequirements": [{"type": "GPU", "value": gpus}]})["jobId"]

    def stamps(self, job_id):
        d = os.path.join(self.tmp, job_id)
        with open(os.path.join(d, "start")) as f:
            start = float(f.read())
        with open(os.path.join(d, "stop")) as f:
            stop = float(f.read())
        with open(os.path.join(d, "env")) as f:
            env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        return start, stop, env

    def metrics(self):
        """GET /metrics (unsigned while admin is the only user)."""
        with urllib.request.urlopen(self.server.endpoint + "/metrics", timeout=10) as r:
            return r.read().decode()

    def devices_of(self, job_id):
        return describe_job_raw(self.batch, job_id)["container"].get("loteAccelerators")

    def test_1_inventory_is_listed_with_its_source(self):
        out = self.lote("nodes", "list")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("(file %s): 2" % self.inventory, out.stdout)
        self.assertEqual(out.stdout.count("Fake GPU"), 2, out.stdout)
        acc = self.accelerators("gpus")
        self.assertEqual([d["uuid"] for d in acc["devices"]], ["GPU-aaaa", "GPU-bbbb"])
        self.assertEqual({d["state"] for d in acc["devices"]}, {"FREE"})

    def test_2_jobs_see_exactly_their_gpu_and_never_share_one(self):
        ids = [self.submit("g%d" % i, 2) for i in range(4)]
        # Two hold the two GPUs; the others wait, naming why.
        waiting = self.wait_until(
            ids[3], lambda j: "needs 1 GPU on one node" in (j.get("statusReason") or ""),
            "waiting for a GPU", timeout=60)
        self.assertIn("none free", waiting["statusReason"])
        for job_id in ids:
            self.assertEqual(self.wait_status(job_id)["status"], "SUCCEEDED",
                             self.describe(job_id).get("statusReason"))
        uuid = {"0": "GPU-aaaa", "1": "GPU-bbbb"}
        by_device = {}
        for job_id in ids:
            start, stop, env = self.stamps(job_id)
            dev = env["CUDA_VISIBLE_DEVICES"]
            self.assertIn(dev, uuid)
            self.assertEqual(env["NVIDIA_VISIBLE_DEVICES"], uuid[dev])
            self.assertEqual(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID")
            self.assertEqual(env["LOTE_ACCELERATORS"], dev)
            self.assertEqual(self.devices_of(job_id)["devices"], [int(dev)])
            by_device.setdefault(dev, []).append((start, stop, job_id))
        for dev, spans in by_device.items():
            spans.sort()
            for (s1, e1, a), (s2, e2, b) in zip(spans, spans[1:]):
                self.assertLessEqual(e1, s2, "%s and %s overlap on GPU %s" % (a, b, dev))
        # All four ran, two at a time at most: the two GPUs were both used.
        self.assertEqual(set(by_device), {"0", "1"})

    def test_3_a_restart_keeps_both_assignments(self):
        first = [self.submit("r%d" % i, 8) for i in range(2)]
        for job_id in first:
            self.wait_status(job_id, ("RUNNING",), timeout=60)
        before = {j: self.devices_of(j)["devices"] for j in first}
        self.assertEqual(sorted(sum(before.values(), [])), [0, 1])
        self.server.kill()
        self.restart(stop=False)
        after = {j: self.devices_of(j)["devices"] for j in first}
        self.assertEqual(after, before)
        third = self.submit("r-third", 0)
        self.wait_until(third, lambda j: "needs 1 GPU" in (j.get("statusReason") or ""),
                        "waiting for the held GPUs", timeout=30)
        out = self.lote("nodes", "list")
        held = [line for line in out.stdout.splitlines() if " HELD " in line and "HELD BY" not in line]
        self.assertEqual(len(held), 2, out.stdout)
        for job_id in first + [third]:
            self.assertEqual(self.wait_status(job_id)["status"], "SUCCEEDED")
        start3, _, _ = self.stamps(third)
        self.assertGreaterEqual(start3, min(self.stamps(j)[1] for j in first))

    def test_4_a_drained_gpu_is_not_handed_out_and_comes_back(self):
        host = self.accelerators("gpus")["host"]
        out = self.lote("nodes", "drain-device", host, "1", "--reason", "Xid 79 in test")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("DRAINED  Xid 79 in test", out.stdout)
        bad = self.lote("nodes", "drain-device", host, "7")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("no accelerator with index 7", bad.stderr)
        # Kept across a restart.
        self.restart()
        self.assertIn("DRAINED", self.lote("nodes", "list").stdout)
        ids = [self.submit("d%d" % i, 1) for i in range(2)]
        for job_id in ids:
            self.assertEqual(self.wait_status(job_id)["status"], "SUCCEEDED")
            self.assertEqual(self.stamps(job_id)[2]["CUDA_VISIBLE_DEVICES"], "0")
        (s1, e1, _), (s2, e2, _) = sorted(self.stamps(j) for j in ids)
        self.assertLessEqual(e1, s2, "the drained GPU was not used, so the jobs ran one by one")
        metrics = self.metrics()
        self.assertIn('lote_accelerators{kind="gpu",state="DRAINED"} 1', metrics)
        self.assertIn('lote_accelerators{kind="gpu",state="FREE"} 1', metrics)
        out = self.lote("nodes", "release-device", host, "1")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("DRAINED", out.stdout)
        self.assertIn('lote_accelerators{kind="gpu",state="FREE"} 2', self.metrics())

    def test_5_a_request_no_instance_can_hold_stays_runnable_as_misconfiguration(self):
        job_id = self.submit("too-many", 1, gpus="4")
        job = self.wait_until(job_id, lambda j: (j.get("statusReason") or "").startswith(
            "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - "), "MISCONFIGURATION", timeout=30)
        self.assertEqual(job["status"], "RUNNABLE")
        self.assertIn("2 accelerators", job["statusReason"])
        self.batch.terminate_job(jobId=job_id, reason="test done")
        self.wait_status(job_id, ("FAILED",), timeout=30)


# Each node writes what it sees; the main node then waits for the other three (AWS
# ends a multi-node job, and stops its other nodes, when the main node exits).
NEURON_SCRIPT = ("d=TMP/$AWS_BATCH_JOB_ID; mkdir -p $d; "
                 "env | grep -E '^(NEURON_RT_VISIBLE_CORES|AWS_NEURON_VISIBLE_DEVICES)=' "
                 "| sort > $d/env.part && mv $d/env.part $d/env; "
                 "if [ $AWS_BATCH_JOB_NODE_INDEX = $AWS_BATCH_JOB_MAIN_NODE_INDEX ]; then "
                 "i=0; while [ $(ls TMP/${AWS_BATCH_JOB_ID%#*}#*/env | wc -l) -lt 4 ] "
                 "&& [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi")


class RecipeNeuronTest(Base):
    INVENTORY = "".join("neuron /dev/null index=%d cores=2\n" % i for i in range(64))

    def test_the_recipes_devices_ask_for_sixteen_neuron_devices_per_node(self):
        environment(self.batch, "trn", "trn1.32xlarge", max_vcpus=512)
        devices = [{"hostPath": "/dev/neuron%d" % i, "containerPath": "/dev/neuron%d" % i,
                    "permissions": ["READ", "WRITE"]} for i in range(16)]
        self.batch.register_job_definition(
            jobDefinitionName="recipe", type="multinode",
            nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:3",
                "container": {"image": "host",
                              "command": ["sh", "-c", NEURON_SCRIPT.replace("TMP", self.tmp)],
                              "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                       {"type": "MEMORY", "value": "256"}],
                              "linuxParameters": {"devices": devices}}}]})
        job_id = self.batch.submit_job(jobName="llama", jobQueue="trn",
                                       jobDefinition="recipe")["jobId"]
        job = self.wait_status(job_id, timeout=120)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        seen = set()
        for node in range(4):
            with open(os.path.join(self.tmp, "%s#%d" % (job_id, node), "env")) as f:
                env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
            devs = [int(x) for x in env["AWS_NEURON_VISIBLE_DEVICES"].split(",")]
            self.assertEqual(len(devs), 16)
            self.assertFalse(seen & set(devs), "a Neuron device given to two nodes")
            seen |= set(devs)
            lo = min(devs)
            self.assertEqual(env["NEURON_RT_VISIBLE_CORES"], "%d-%d" % (2 * lo, 2 * lo + 31))
        self.assertEqual(seen, set(range(64)))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--lote", required=True)
    args, rest = p.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
