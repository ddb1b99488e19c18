"""Container mode against real podman (runc) on this machine: a real `lote
server` runs jobs submitted with boto3 in images built here, in a compute
environment tagged lote:runtime=container. Where podman cannot run a container
here, every test fails with one line saying why (never a skip)."""
import argparse
import json
import os
import resource
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
import botocore.exceptions  # noqa: E402
from lote_server import LoteServer, describe_job_raw  # noqa: E402

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
        cls.work = tempfile.mkdtemp(prefix="lote_containers_")
        os.chmod(cls.work, 0o777)
        # Bind mounts under the work folder are open to every principal.
        cls.server = LoteServer(LOTE, extra_args=["--allowed-host-paths", cls.work]).start()
        cls.conf = os.path.join(cls.server.home, "containers", "containers.conf")
        cls.batch = cls.server.client()
        cls.logs = cls.server.client("logs")
        cls.images = {}
        for name, changes in {
                "cmd": ['CMD ["/bin/echo", "from-cmd"]'],
                "both": ['ENTRYPOINT ["/bin/echo", "ep"]', 'CMD ["from-cmd"]'],
                "entry": ['ENTRYPOINT ["/bin/echo", "ep"]'],
                "sh": ['CMD ["/bin/sh"]']}.items():
            cls.images[name] = make_base_image(cls.conf, "localhost/lote-test-%s:%s" % (name, TAG),
                                               changes)
        # An image whose /etc/passwd makes `nobody` root: only the name says nobody.
        context = os.path.join(cls.work, "evil-context")
        os.makedirs(context)
        with open(os.path.join(context, "passwd"), "w") as f:
            f.write("root:x:0:0:root:/root:/bin/sh\nnobody:x:0:0:root in disguise:/:/bin/sh\n")
        with open(os.path.join(context, "Containerfile"), "w") as f:
            f.write("FROM %s\nCOPY passwd /etc/passwd\n" % cls.images["sh"])
        cls.images["evil"] = "localhost/lote-test-evil:%s" % TAG
        podman(cls.conf, "build", "-q", "-t", cls.images["evil"], context)
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

    def principal(self, name, unix_users):
        """An IAM user allowed Batch everywhere, running jobs as `unix_users`: its
        batch client."""
        policy = os.path.join(self.work, "policy-%s.json" % name)
        with open(policy, "w") as f:
            json.dump({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["batch:*", "logs:*"], "Resource": "*"}]}, f)
        args = ["users", "create", name, "--policy-file", policy]
        for u in unix_users:
            args += ["--unix-user", u]
        self.lote(*args)
        key = json.loads(self.lote("keys", "create", name))["AccessKey"]
        return self.server.client("batch", key=key["AccessKeyId"],
                                  secret=key["SecretAccessKey"])

    def lote(self, *args):
        """The `lote` CLI as the server's admin: its stdout."""
        r = subprocess.run([LOTE] + list(args), env=self.server.env(), capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("lote %s exited %d: %s" % (" ".join(args), r.returncode,
                                                            r.stderr))
        return r.stdout

    def test_the_host_decides_who_the_user_is_not_the_image(self):
        # A folder only root may read (0700) with a file only root may read (0600).
        secret_dir = os.path.join(self.work, "root-only")
        os.makedirs(secret_dir)
        os.chmod(secret_dir, 0o700)
        with open(os.path.join(secret_dir, "key"), "w") as f:
            f.write("the-root-secret\n")
        os.chmod(os.path.join(secret_dir, "key"), 0o600)
        nob = self.principal("nob", ["nobody"])
        script = ("echo uid=$(id -u) gid=$(id -g); cat /secret/key 2>/dev/null || echo denied; "
                  "ls /secret >/dev/null 2>&1 || echo unlisted")
        nob.register_job_definition(
            jobDefinitionName="disguised", type="container",
            containerProperties={
                "image": self.images["evil"], "user": "nobody", "resourceRequirements": SMALL,
                "command": ["/bin/sh", "-c", script],
                "volumes": [{"name": "s", "host": {"sourcePath": secret_dir}}],
                "mountPoints": [{"sourceVolume": "s", "containerPath": "/secret",
                                 "readOnly": True}]})
        job_id = nob.submit_job(jobName="disguised", jobQueue="cq",
                                jobDefinition="disguised")["jobId"]
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        out = self.output(job)
        self.assertEqual(out, ["uid=65534 gid=65534", "denied", "unlisted"])
        self.assertNotIn("the-root-secret", "\n".join(out))

    def test_process_and_container_mode_run_as_the_same_numbers(self):
        script = "echo $(id -u) $(id -g) $(id -G)"
        runs = {}
        for queue in ("pq", "cq"):
            job = self.run_job(self.register("ids-" + queue, self.images["sh"],
                                             ["/bin/sh", "-c", script], user="nobody"),
                               queue=queue)
            self.assertEqual(job["status"], "SUCCEEDED", job)
            runs[queue] = self.output(job)
        self.assertEqual(runs["pq"], runs["cq"])
        self.assertEqual(runs["cq"][0].split()[:2], ["65534", "65534"])

    def test_a_user_the_host_lacks_is_the_jobs_own_error(self):
        job = self.run_job(self.register("ghost", self.images["sh"], ["true"],
                                         user="lote-no-such-user"))
        self.assertEqual(job["status"], "FAILED")
        self.assertIn("user 'lote-no-such-user' does not exist on host ", job["statusReason"])
        raw = describe_job_raw(self.batch, job["jobId"])
        self.assertEqual(raw["attempts"][-1]["failureCategory"], "USER_ERROR", raw)

    def test_root_equivalent_settings_are_roots(self):
        nob = self.principal("nob2", ["nobody"])
        hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        base = {"image": self.images["sh"], "user": "nobody", "resourceRequirements": SMALL,
                "command": ["/bin/sh", "-c", "echo ran as $(id -u)"]}
        cases = {
            "privileged": ({"privileged": True}, "containerProperties.privileged = true"),
            "device": ({"linuxParameters": {"devices": [{"hostPath": "/dev/null"}]}},
                       "containerProperties.linuxParameters.devices[0] = /dev/null"),
            "hostmount": ({"volumes": [{"name": "etc", "host": {"sourcePath": "/etc"}}],
                           "mountPoints": [{"sourceVolume": "etc", "containerPath": "/h",
                                            "readOnly": True}]},
                          "containerProperties.volumes[0].host.sourcePath = /etc, outside the "
                          "allowed host paths (%s, %s/jobs)" % (self.work, self.server.home)),
            "ulimit": ({"ulimits": [{"name": "nofile", "softLimit": 1024,
                                     "hardLimit": hard_nofile + 1}]},
                       "containerProperties.ulimits[0] nofile hardLimit = %d" % (hard_nofile + 1)),
        }
        for name, (extra, setting) in cases.items():
            with self.subTest(setting=name):
                props = dict(base, **extra)
                definition = "root-" + name
                with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                    nob.register_job_definition(jobDefinitionName=definition, type="container",
                                                containerProperties=props)
                err = ctx.exception.response
                self.assertEqual(err["Error"]["Code"], "AccessDeniedException", err)
                self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 403)
                self.assertIn("user/nob2 is not authorized to perform: "
                              "batch:RegisterJobDefinition", err["Error"]["Message"])
                self.assertIn("because the job definition sets " + setting,
                              err["Error"]["Message"])
                self.assertIn("lote users set-unix-users nob2 root", err["Error"]["Message"])
                self.assertEqual(self.batch.describe_job_definitions(
                    jobDefinitionName=definition)["jobDefinitions"], [])
                # The admin's same definition registers and runs...
                self.batch.register_job_definition(jobDefinitionName=definition,
                                                   type="container", containerProperties=props)
                if name != "ulimit":  # above the host's hard limit: refused at launch (no
                    # CAP_SYS_RESOURCE here) or raised; the refusal is what matters
                    job = self.run_job(definition)
                    self.assertEqual(job["status"], "SUCCEEDED", job)
                    self.assertEqual(self.output(job), ["ran as 65534"])
                # ...and the principal may not submit it either: no job.
                with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                    nob.submit_job(jobName="sneak-" + name, jobQueue="cq",
                                   jobDefinition=definition)
                err = ctx.exception.response
                self.assertEqual(err["Error"]["Code"], "AccessDeniedException", err)
                self.assertIn("batch:SubmitJob on resource: arn:aws:batch:", err["Error"]["Message"])
                self.assertIn(setting, err["Error"]["Message"])
                self.assertEqual(self.batch.list_jobs(jobQueue="cq", filters=[
                    {"name": "JOB_NAME", "values": ["sneak-" + name]}])["jobSummaryList"], [])
        # Every refusal is in the audit log.
        audit = json.loads(self.lote("audit", "--json", "--principal", "nob2"))
        refused = [(r["EventName"], r["Result"]) for r in audit if r["Result"] == "AccessDenied"]
        self.assertEqual(refused, [("batch:RegisterJobDefinition", "AccessDenied"),
                                   ("batch:SubmitJob", "AccessDenied")] * len(cases), audit)

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
