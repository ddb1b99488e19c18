"""ECR's host name on this host (`lote server --ecr-host-names on`,
docs/containers.md): with a real `lote server` and its registry, the stock `aws`
CLI and `docker` (Debian's podman-docker), `aws ecr get-login-password | docker
login <account>.dkr.ecr.<region>.amazonaws.com`, `docker push` and `docker
pull` with that name work; the server's /etc/hosts line is there while it runs
and gone when it stops (or at the home's next start after kill -9), and a server
without the flag leaves /etc/hosts alone. /etc/hosts is restored byte for byte
after each test. Where podman, podman-docker or docker-registry cannot work
here, the test fails with one line saying why."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, HERE)
from lote_server import LoteServer  # noqa: E402
import test_containers  # noqa: E402  (make_base_image)

LOTE = None
HOSTS = "/etc/hosts"
HOST = "000000000000.dkr.ecr.us-east-1.amazonaws.com"  # the server's default account and region
# Debian's podman-docker: /usr/local/bin may hold another `docker`, so name it by path.
DOCKER = "/usr/bin/docker"
REPO = "hosttest"


def read_hosts():
    with open(HOSTS, "rb") as f:
        return f.read()


def registries_conf(server):
    with open(os.path.join(server.home, "containers", "registries.conf")) as f:
        return f.read()


class EcrHostNamesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access("/usr/bin/docker-registry", os.X_OK):
            raise AssertionError("docker-registry is not installed (scripts/deps/containers.txt)")
        try:
            with open(DOCKER) as f:
                wrapper = f.read()
        except OSError as e:
            raise AssertionError("podman-docker is not installed (scripts/deps/containers.txt): %s"
                                 % e)
        if "podman" not in wrapper:
            raise AssertionError("%s is not podman-docker's wrapper" % DOCKER)
        cls.work = tempfile.mkdtemp(prefix="lote_ecr_host_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        self.hosts_before = read_hosts()
        self.servers = []
        self.images = []

    def tearDown(self):
        for server in self.servers:
            server.cleanup()
        for ref in self.images:
            subprocess.run(["podman", "rmi", "-f", ref], capture_output=True)
        # /etc/hosts exactly as it was, whatever happened (in place: it may be a mount point).
        if read_hosts() != self.hosts_before:
            with open(HOSTS, "wb") as f:
                f.write(self.hosts_before)

    def start(self, *flags, home=None):
        server = LoteServer(LOTE, home=home, extra_args=["--registry", "on"] + list(flags))
        self.servers.append(server)
        return server.start()

    def marked_lines(self, server):
        marker = "# lote ecr-host-names " + server.home
        return [l for l in read_hosts().decode().splitlines() if l.rstrip().endswith(marker)]

    def run_cmd(self, argv, env, input=None, check=True):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, input=input)
        if check and r.returncode != 0:
            raise AssertionError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                                         r.stderr.strip()[-800:]))
        return r

    def aws(self, env, *args):
        return json.loads(self.run_cmd(["aws", "ecr"] + list(args) + ["--output", "json"],
                                       env).stdout or "{}")

    def test_login_push_and_pull_with_the_ecr_host_name(self):
        server = self.start("--ecr-host-names", "on")
        self.assertEqual(self.marked_lines(server),
                         ["127.0.0.1 %s  # lote ecr-host-names %s" % (HOST, server.home)])
        self.assertEqual(socket.gethostbyname(HOST), "127.0.0.1")
        regs = registries_conf(server)
        self.assertIn('location = "%s"\ninsecure = true' % HOST, regs)
        # Port 80 reaches the registry itself, which refuses anonymous requests.
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen("http://%s/v2/" % HOST, timeout=10)
        self.assertEqual(refused.exception.code, 401)
        self.assertIn("registry/2.0", refused.exception.headers.get(
            "Docker-Distribution-Api-Version", ""))

        conf = os.path.join(server.home, "containers", "containers.conf")
        env = dict(server.env(), CONTAINERS_CONF=conf,
                   REGISTRY_AUTH_FILE=os.path.join(self.work, "auth.json"))
        self.assertTrue(env.get("LOTE_REGISTRY"), "the registry keeps its own address")
        local = test_containers.make_base_image(
            conf, "localhost/lote-ecr-host-bb:%d" % os.getpid(), ['CMD ["/bin/echo", "hi"]'])
        remote = "%s/%s:1" % (HOST, REPO)
        self.images += [local, remote]

        repo = self.aws(env, "create-repository", "--repository-name", REPO)["repository"]
        self.assertEqual(repo["repositoryUri"], "%s/%s" % (HOST, REPO))
        wrong = self.run_cmd([DOCKER, "login", "--username", "AWS", "--password-stdin", HOST],
                             env, input="not-the-password\n", check=False)
        self.assertNotEqual(wrong.returncode, 0, wrong.stdout)
        password = self.run_cmd(["aws", "ecr", "get-login-password"], env).stdout
        login = self.run_cmd([DOCKER, "login", "--username", "AWS", "--password-stdin", HOST],
                             env, input=password)
        self.assertIn("Login Succeeded", login.stdout)
        self.run_cmd([DOCKER, "tag", local, remote], env)
        self.run_cmd([DOCKER, "push", remote], env)
        details = self.aws(env, "describe-images", "--repository-name", REPO)["imageDetails"]
        self.assertEqual([d.get("imageTags") for d in details], [["1"]], details)

        self.run_cmd([DOCKER, "rmi", remote], env)
        self.assertNotEqual(
            self.run_cmd([DOCKER, "image", "exists", remote], env, check=False).returncode, 0)
        pulled = self.run_cmd([DOCKER, "pull", remote], env)
        self.assertIn("Trying to pull %s..." % remote, pulled.stderr)
        self.assertEqual(
            self.run_cmd([DOCKER, "image", "exists", remote], env, check=False).returncode, 0)
        digests = self.run_cmd([DOCKER, "image", "inspect", "--format", "{{json .RepoDigests}}",
                                remote], env).stdout
        self.assertIn("%s/%s@%s" % (HOST, REPO, details[0]["imageDigest"]), json.loads(digests))

        # A job definition naming the image by that name runs it in container mode (the
        # node pulls it again: the local copy is removed first).
        self.run_cmd([DOCKER, "rmi", remote], env)
        batch = server.client()
        batch.create_compute_environment(
            computeEnvironmentName="host-ce", type="MANAGED",
            tags={"lote:runtime": "container", "lote:emulation": "true"},
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 4,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]})
        server.wait_for(lambda: batch.describe_compute_environments(
            computeEnvironments=["host-ce"])["computeEnvironments"][0]["status"] == "VALID", 30,
            "the compute environment to be VALID")
        batch.create_job_queue(jobQueueName="host-q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "host-ce"}])
        batch.register_job_definition(
            jobDefinitionName="from-host-name", type="container",
            containerProperties={"image": remote, "resourceRequirements": [
                {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]})
        job_id = batch.submit_job(jobName="from-host-name", jobQueue="host-q",
                                  jobDefinition="from-host-name")["jobId"]

        def ended():
            job = batch.describe_jobs(jobs=[job_id])["jobs"][0]
            return job if job["status"] in ("SUCCEEDED", "FAILED") else None
        job = server.wait_for(ended, 180, "the job from %s" % remote)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertIn("hi", server.job_output(server.client("logs"), job))

        server.stop()
        self.assertEqual(self.marked_lines(server), [])
        self.assertEqual(read_hosts(), self.hosts_before)

    def test_a_line_left_by_kill_9_is_removed_by_the_next_start(self):
        server = self.start("--ecr-host-names", "on")
        self.assertEqual(len(self.marked_lines(server)), 1)
        server.kill()
        self.assertEqual(len(self.marked_lines(server)), 1, "kill -9 cannot remove it")
        again = self.start(home=server.home)  # the flag off
        self.assertEqual(self.marked_lines(again), [])
        self.assertEqual(read_hosts(), self.hosts_before)
        self.assertNotIn("amazonaws.com", registries_conf(again))

    def test_a_server_without_the_flag_leaves_etc_hosts_alone(self):
        before = os.stat(HOSTS)
        server = self.start()
        self.assertEqual(read_hosts(), self.hosts_before)
        during = os.stat(HOSTS)
        self.assertEqual((during.st_ino, during.st_mtime_ns), (before.st_ino, before.st_mtime_ns))
        self.assertNotIn("amazonaws.com", registries_conf(server))
        server.stop()
        after = os.stat(HOSTS)
        self.assertEqual((after.st_ino, after.st_mtime_ns), (before.st_ino, before.st_mtime_ns))

    def test_port_80_taken_fails_the_start_naming_it(self):
        taken = socket.socket()
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", 80))
        except OSError as e:
            raise AssertionError("cannot bind 127.0.0.1:80 for the test: %s" % e)
        taken.listen(1)
        server = LoteServer(LOTE, extra_args=["--registry", "on", "--ecr-host-names", "on"])
        self.servers.append(server)
        try:
            with self.assertRaises(RuntimeError):
                server.start()
        finally:
            taken.close()
        err = server.stderr()
        self.assertIn("--ecr-host-names", err)
        self.assertIn("127.0.0.1:80", err)
        self.assertEqual(read_hosts(), self.hosts_before)


def main():
    global LOTE
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
