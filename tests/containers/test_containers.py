"""Container mode against real podman (runc) on this machine: a real `lote
server` runs jobs submitted with boto3 in images built here, in a compute
environment tagged lote:runtime=container. Where podman cannot run a container
here, every test fails with one line saying why (never a skip)."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_BASE_IMAGE = os.path.join(HERE, "..", "..", "examples", "llama2", "make_base_image.sh")
sys.path.insert(0, os.path.join(HERE, "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")
SMALL = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]
TAG = "t%d" % os.getpid()  # image tags of this run, removed at the end


def podman(conf, *args, check=True, input=None):
    env = dict(os.environ, CONTAINERS_CONF=conf)
    r = subprocess.run(["podman"] + list(args), env=env, capture_output=True, text=True,
                       input=input)
    if check and r.returncode != 0:
        raise AssertionError("podman %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                           r.stderr.strip()[-500:]))
    return r


def make_base_image(conf, image, changes, lote=None):
    """examples/llama2/make_base_image.sh: the static busybox, passwd/group (root, nobody),
    and lote with its shared libraries when `lote` is given."""
    argv = [MAKE_BASE_IMAGE] + (["--lote", lote] if lote else ["--no-lote"])
    for c in changes:
        argv += ["--change", c]
    r = subprocess.run(argv + [image], env=dict(os.environ, CONTAINERS_CONF=conf),
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                                      r.stderr.strip()[-500:]))
    return image


class ContainerModeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.conf = os.path.join(cls.server.home, "containers", "containers.conf")
        cls.batch = cls.server.client()
        cls.logs = cls.server.client("logs")
        cls.work = tempfile.mkdtemp(prefix="lote_containers_")
        os.chmod(cls.work, 0o777)
        cls.images = {}
        for name, changes in {
                "cmd": ['CMD ["/bin/echo", "from-cmd"]'],
                "both": ['ENTRYPOINT ["/bin/echo", "ep"]', 'CMD ["from-cmd"]'],
                "entry": ['ENTRYPOINT ["/bin/echo", "ep"]'],
                "sh": ['CMD ["/bin/sh"]']}.items():
            cls.images[name] = make_base_image(cls.conf, "localhost/lote-test-%s:%s" % (name, TAG),
                                               changes)
        # podman itself must be able to run a container here.
        probe = podman(cls.conf, "run", "--rm", "--network=host", cls.images["cmd"], check=False)
        if probe.returncode != 0 or probe.stdout.strip() != "from-cmd":
            raise AssertionError("podman cannot run a container on this machine: "
                                 + (probe.stderr.strip().splitlines() or ["?"])[-1])
        cls.create_queue("cq", {"lote:runtime": "container", "lote:emulation": "true"})
        cls.create_queue("pq", {"lote:emulation": "true"})
        cls.create_queue("bq", {"lote:runtime": "vm", "lote:emulation": "true"})

    @classmethod
    def tearDownClass(cls):
        for ref in cls.images.values():  # while the server's podman configuration exists
            podman(cls.conf, "rmi", "-f", ref, check=False)
        cls.server.cleanup()
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def create_queue(cls, queue, tags):
        ce = queue + "-ce"
        cls.batch.create_compute_environment(
            computeEnvironmentName=ce, type="MANAGED", tags=tags,
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 16,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]})
        deadline = time.time() + 30
        while cls.batch.describe_compute_environments(
                computeEnvironments=[ce])["computeEnvironments"][0]["status"] != "VALID":
            if time.time() > deadline:
                raise AssertionError("compute environment never became VALID")
            time.sleep(0.05)
        cls.batch.create_job_queue(jobQueueName=queue, priority=1,
                                   computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce}])

    # --- helpers -----------------------------------------------------------

    def register(self, name, image, command=None, **props):
        props["image"] = image
        props.setdefault("resourceRequirements", SMALL)
        if command is not None:
            props["command"] = command
        self.batch.register_job_definition(jobDefinitionName=name, type="container",
                                           containerProperties=props)
        return name

    def run_job(self, definition, queue="cq", timeout=120, **kwargs):
        job_id = self.batch.submit_job(jobName=definition, jobQueue=queue,
                                       jobDefinition=definition, **kwargs)["jobId"]
        return self.wait_status(job_id, timeout=timeout)

    def wait_status(self, job_id, statuses=FINAL, timeout=120):
        def done():
            job = self.batch.describe_jobs(jobs=[job_id])["jobs"][0]
            return job if job["status"] in statuses else None
        return self.server.wait_for(done, timeout, "job %s to reach %s" % (job_id, statuses))

    def output(self, job):
        return self.server.job_output(self.logs, job)

    def wait_no_container(self, job_id, name):
        """Once the node's runner recorded its outcome: no container of that name."""
        status = os.path.join(self.server.home, "jobs", job_id, "1", "0", "status.json")
        self.server.wait_for(lambda: os.path.exists(status), 60, "the runner of %s" % job_id)
        left = podman(self.conf, "ps", "-a", "--format", "{{.Names}} {{.Status}}").stdout
        runner_log = os.path.join(os.path.dirname(status), "shim.log")
        self.assertNotIn(name, left, open(runner_log).read() if os.path.exists(runner_log) else "")

    # --- tests -------------------------------------------------------------

    def test_entrypoint_and_cmd_follow_ecs_precedence(self):
        # (image, job command) -> output: a command replaces CMD, keeps ENTRYPOINT.
        table = [
            ("cmd", None, "from-cmd"),
            ("cmd", ["/bin/echo", "job"], "job"),
            ("both", None, "ep from-cmd"),
            ("both", ["job"], "ep job"),
            ("entry", None, "ep"),
            ("entry", ["job"], "ep job"),
        ]
        for i, (image, command, want) in enumerate(table):
            with self.subTest(image=image, command=command):
                job = self.run_job(self.register("ecs%d" % i, self.images[image], command))
                self.assertEqual(job["status"], "SUCCEEDED", job)
                self.assertEqual(self.output(job), [want])

    def test_environment_user_ulimits_devices_and_mounts(self):
        data = os.path.join(self.work, "dataset")
        ckpt = os.path.join(self.work, "ckpt")
        os.makedirs(data, exist_ok=True)
        os.makedirs(ckpt, exist_ok=True)
        os.chmod(ckpt, 0o777)
        with open(os.path.join(data, "part-0"), "w") as f:
            f.write("tokens\n")
        script = ("echo env=$GREETING; echo id=$(id -u); echo nofile=$(ulimit -n); "
                  "echo batch=$AWS_BATCH_JOB_ATTEMPT; cat /data/part-0; "
                  "(echo x > /data/nope) 2>/dev/null && echo data-writable; "
                  "echo step-1 > /ckpt/model.ckpt; test -c /dev/lote0 && echo device")
        job = self.run_job(self.register(
            "features", self.images["sh"], ["/bin/sh", "-c", script], user="nobody",
            environment=[{"name": "GREETING", "value": "hi"}],
            ulimits=[{"name": "nofile", "softLimit": 1000, "hardLimit": 1000}],
            linuxParameters={"devices": [{"hostPath": "/dev/null", "containerPath": "/dev/lote0",
                                          "permissions": ["READ", "WRITE"]}]},
            volumes=[{"name": "data", "host": {"sourcePath": data}},
                     {"name": "ckpt", "host": {"sourcePath": ckpt}}],
            mountPoints=[{"sourceVolume": "data", "containerPath": "/data", "readOnly": True},
                         {"sourceVolume": "ckpt", "containerPath": "/ckpt"}]))
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertEqual(self.output(job), ["env=hi", "id=65534", "nofile=1000", "batch=1",
                                            "tokens", "device"])
        with open(os.path.join(ckpt, "model.ckpt")) as f:
            self.assertEqual(f.read(), "step-1\n")
        self.assertEqual(os.stat(os.path.join(ckpt, "model.ckpt")).st_uid, 65534)

    def test_two_nodes_meet_at_the_main_node(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        main = "nc -l -p %d" % port
        child = ("for i in $(seq 1 200); do echo hello-from-$AWS_BATCH_JOB_NODE_INDEX | "
                 "nc $AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS %d && exit 0; "
                 "sleep 0.1; done; exit 1" % port)
        self.batch.register_job_definition(
            jobDefinitionName="pair", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [
                {"targetNodes": "0", "container": {"image": self.images["sh"],
                                                   "command": ["/bin/sh", "-c", main],
                                                   "resourceRequirements": SMALL}},
                {"targetNodes": "1", "container": {"image": self.images["sh"],
                                                   "command": ["/bin/sh", "-c", child],
                                                   "resourceRequirements": SMALL}}]})
        job = self.run_job("pair")
        self.assertEqual(job["status"], "SUCCEEDED", job)
        main_node = self.batch.describe_jobs(jobs=[job["jobId"] + "#0"])["jobs"][0]
        self.assertEqual(self.output(main_node), ["hello-from-1"])

    def test_terminate_leaves_no_container(self):
        definition = self.register("sleeper", self.images["sh"],
                                   ["/bin/sh", "-c", "echo started; sleep 600"])
        job_id = self.batch.submit_job(jobName="sleeper", jobQueue="cq",
                                       jobDefinition=definition)["jobId"]
        job = self.wait_status(job_id, ("RUNNING",))
        self.output(job)  # it runs
        name = "lote-%s-1-0" % job_id
        self.assertIn(name, podman(self.conf, "ps", "--format", "{{.Names}}").stdout.split())
        self.batch.terminate_job(jobId=job_id, reason="test says stop")
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertEqual(job["statusReason"], "test says stop")
        # The job ends at TerminateJob; its node's runner ends after it.
        self.wait_no_container(job_id, name)

    def test_a_runner_killed_with_sigkill_leaves_no_container(self):
        definition = self.register("lost", self.images["sh"],
                                   ["/bin/sh", "-c", "echo started; sleep 600"])
        job_id = self.batch.submit_job(jobName="lost", jobQueue="cq",
                                       jobDefinition=definition)["jobId"]
        job = self.wait_status(job_id, ("RUNNING",))
        self.output(job)
        name = "lote-%s-1-0" % job_id
        with open(os.path.join(self.server.home, "jobs", job_id, "1", "0", "shim.json")) as f:
            runner = json.load(f)["process"]["pid"]
        os.kill(runner, signal.SIGKILL)
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("NODE_LOST", job["attempts"][-1]["container"]["reason"])
        self.wait_no_container(job_id, name)

    def test_a_missing_image_is_cannot_pull_container_error(self):
        job = self.run_job(self.register("missing", "localhost/lote-no-such-image:%s" % TAG,
                                         ["true"]))
        self.assertEqual(job["status"], "FAILED")
        reason = job["attempts"][-1]["container"]["reason"]
        self.assertIn("CannotPullContainerError: ", reason)

    def test_an_image_without_command_in_process_mode_says_how_to_run_it(self):
        job = self.run_job(self.register("noimagecmd", self.images["cmd"]), queue="pq")
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("lote:runtime=container", job["statusReason"])

    def test_an_unknown_runtime_tag_fails_the_job_naming_it(self):
        job = self.run_job(self.register("badruntime", self.images["cmd"], ["true"]), queue="bq")
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("lote:runtime is 'vm'; use container or process", job["statusReason"])

    def test_server_kill_9_while_a_container_runs_then_readopted(self):
        flag = os.path.join(self.work, "go")
        os.makedirs(flag, exist_ok=True)
        os.chmod(flag, 0o777)
        definition = self.register(
            "adopt", self.images["sh"],
            ["/bin/sh", "-c", "echo waiting; while [ ! -e /go/now ]; do sleep 0.1; done; echo done"],
            volumes=[{"name": "go", "host": {"sourcePath": flag}}],
            mountPoints=[{"sourceVolume": "go", "containerPath": "/go"}])
        job_id = self.batch.submit_job(jobName="adopt", jobQueue="cq",
                                       jobDefinition=definition)["jobId"]
        job = self.wait_status(job_id, ("RUNNING",))
        self.output(job)
        self.server.kill()
        self.server.start()
        type(self).batch = self.server.client()
        type(self).logs = self.server.client("logs")
        open(os.path.join(flag, "now"), "w").close()
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        self.assertEqual(self.output(job), ["waiting", "done"])


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
