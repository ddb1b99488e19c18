"""The ECR flow against lote's own image registry (docs/containers.md): a real
`lote server` (which runs docker-registry), the stock `aws` CLI and podman.
An image built here is pushed after `aws ecr get-login-password | podman
login`, listed by describe-images/list-images, run by a job whose definition
names its ECR-form URI (pulled from the registry), then deleted. Where podman
or docker-registry cannot work here, the test fails with one line saying why."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, HERE)
from lote_server import LoteServer, describe_job_raw  # noqa: E402
import test_containers  # noqa: E402  (make_base_image)

LOTE = None
SMALL = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]
REPO = "lote-test/bb%d" % os.getpid()


class EcrFlowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access("/usr/bin/docker-registry", os.X_OK):
            raise AssertionError("docker-registry is not installed (scripts/deps/containers.txt)")
        cls.server = LoteServer(LOTE, extra_args=["--registry", "on"]).start()
        cls.env = cls.server.env()
        cls.registry = cls.env.get("LOTE_REGISTRY")
        if not cls.registry:
            raise AssertionError("lote env names no LOTE_REGISTRY: " + str(cls.env))
        cls.conf = os.path.join(cls.server.home, "containers", "containers.conf")
        cls.work = tempfile.mkdtemp(prefix="lote_ecr_")
        cls.authfile = os.path.join(cls.work, "auth.json")
        cls.local = test_containers.make_base_image(
            cls.conf, "localhost/lote-ecr-bb:%d" % os.getpid(), ['CMD ["/bin/echo", "from-ecr"]'])
        cls.batch = cls.server.client()
        cls.logs = cls.server.client("logs")
        ce = "ecr-ce"
        cls.batch.create_compute_environment(
            computeEnvironmentName=ce, type="MANAGED",
            tags={"lote:runtime": "container", "lote:emulation": "true"},
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 4,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]})
        cls.server.wait_for(lambda: cls.batch.describe_compute_environments(
            computeEnvironments=[ce])["computeEnvironments"][0]["status"] == "VALID", 30,
            "the compute environment to be VALID")
        cls.batch.create_job_queue(jobQueueName="ecrq", priority=1,
                                   computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce}])

    @classmethod
    def tearDownClass(cls):
        for ref in (cls.local, "%s/%s:1" % (cls.registry, REPO)):
            cls.podman("rmi", "-f", ref, check=False)
        cls.server.cleanup()
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def podman(cls, *args, check=True, input=None):
        env = dict(cls.env, CONTAINERS_CONF=cls.conf)
        r = subprocess.run(["podman"] + list(args), env=env, capture_output=True, text=True,
                           input=input)
        if check and r.returncode != 0:
            raise AssertionError("podman %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                               r.stderr.strip()[-500:]))
        return r

    def aws(self, *args, check=True):
        r = subprocess.run(["aws", "ecr"] + list(args) + ["--output", "json"], env=self.env,
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError("aws ecr %s failed: %s" % (" ".join(args), r.stderr.strip()))
        return json.loads(r.stdout) if check and r.stdout.strip() else r

    def login(self, password):
        return self.podman("login", "--authfile", self.authfile, "--username", "AWS",
                           "--password-stdin", self.registry, check=False, input=password)

    def run_job(self, image):
        self.batch.register_job_definition(
            jobDefinitionName="from-ecr", type="container",
            containerProperties={"image": image, "resourceRequirements": SMALL})
        job_id = self.batch.submit_job(jobName="from-ecr", jobQueue="ecrq",
                                       jobDefinition="from-ecr")["jobId"]

        def done():
            job = self.batch.describe_jobs(jobs=[job_id])["jobs"][0]
            return job if job["status"] in ("SUCCEEDED", "FAILED") else None
        return self.server.wait_for(done, 180, "job %s to finish" % job_id)

    def node_status(self, job):
        """The runner's status.json of the job's (only) node."""
        with open(os.path.join(self.server.home, "jobs", job["jobId"], "1", "0",
                               "status.json")) as f:
            return json.load(f)

    def output(self, job):
        return self.server.job_output(self.logs, job)

    def test_push_list_run_and_delete_through_the_ecr_flow(self):
        repo = self.aws("create-repository", "--repository-name", REPO)["repository"]
        uri = repo["repositoryUri"]
        self.assertRegex(uri, r"^000000000000\.dkr\.ecr\.us-east-1\.amazonaws\.com/" + REPO + "$")
        again = self.aws("create-repository", "--repository-name", REPO, check=False)
        self.assertIn("RepositoryAlreadyExistsException", again.stderr)
        # An empty repository lists.
        names = [r["repositoryName"] for r in self.aws("describe-repositories")["repositories"]]
        self.assertIn(REPO, names)

        # A wrong password is refused by the registry; ECR's is accepted.
        wrong = self.login("not-the-password\n")
        self.assertNotEqual(wrong.returncode, 0, wrong.stdout)
        self.assertIn("invalid username/password", wrong.stderr)
        password = subprocess.run(["aws", "ecr", "get-login-password"], env=self.env,
                                  capture_output=True, text=True, check=True).stdout
        ok = self.login(password)
        self.assertEqual(ok.returncode, 0, ok.stderr)

        pushed = "%s/%s:1" % (self.registry, REPO)
        self.podman("tag", self.local, pushed)
        self.podman("push", "--authfile", self.authfile, pushed)
        details = self.aws("describe-images", "--repository-name", REPO)["imageDetails"]
        self.assertEqual(len(details), 1, details)
        self.assertEqual(details[0]["imageTags"], ["1"])
        self.assertTrue(details[0]["imageDigest"].startswith("sha256:"), details)
        self.assertGreater(details[0]["imageSizeInBytes"], 0)
        ids = self.aws("list-images", "--repository-name", REPO)["imageIds"]
        self.assertEqual(ids, [{"imageDigest": details[0]["imageDigest"], "imageTag": "1"}])
        missing = self.aws("describe-images", "--repository-name", REPO, "--image-ids",
                           "imageTag=nope", check=False)
        self.assertIn("ImageNotFoundException", missing.stderr)

        # The job names the ECR-form URI; the node pulls it from the registry.
        self.podman("rmi", pushed)
        self.assertNotEqual(self.podman("image", "exists", pushed, check=False).returncode, 0)
        job = self.run_job(uri + ":1")
        self.assertEqual(job["status"], "SUCCEEDED", job)
        out = self.output(job)
        self.assertEqual(out[-1], "from-ecr", out)
        self.assertIn("Trying to pull %s/%s:1..." % (self.registry, REPO), out)
        self.assertEqual(self.podman("image", "exists", pushed, check=False).returncode, 0,
                         "the job's image was not pulled from the registry")
        # The runner recorded the pull as its own phase; a second job finds the image cached.
        pulled = self.node_status(job)
        self.assertGreater(pulled["pull_started_at_ms"], 0, pulled)
        self.assertLessEqual(pulled["started_at_ms"], pulled["pull_started_at_ms"])
        self.assertLessEqual(pulled["pull_started_at_ms"], pulled["pull_stopped_at_ms"])
        self.assertLessEqual(pulled["pull_stopped_at_ms"], pulled["stopped_at_ms"])
        # DescribeJobs shows it in the attempt's timeline (loteTimeline, lote's extra).
        node = describe_job_raw(self.batch, job["jobId"])["attempts"][0]["loteTimeline"]["nodes"][0]
        self.assertEqual((node.get("pullStartedAt"), node.get("pullStoppedAt")),
                         (pulled["pull_started_at_ms"], pulled["pull_stopped_at_ms"]), node)
        cached = self.run_job(uri + ":1")
        self.assertEqual(cached["status"], "SUCCEEDED", cached)
        self.assertEqual(self.output(cached), ["from-ecr"])
        status = self.node_status(cached)
        self.assertEqual((status["pull_started_at_ms"], status["pull_stopped_at_ms"]), (0, 0),
                         status)
        timeline = describe_job_raw(self.batch, cached["jobId"])["attempts"][0]["loteTimeline"]
        self.assertNotIn("pullStartedAt", timeline["nodes"][0], timeline)

        gone = self.aws("batch-delete-image", "--repository-name", REPO, "--image-ids",
                        "imageTag=1", "imageTag=nope")
        self.assertEqual([i["imageTag"] for i in gone["imageIds"]], ["1"])
        self.assertEqual([f["failureCode"] for f in gone["failures"]], ["ImageNotFound"])
        self.assertEqual(self.aws("list-images", "--repository-name", REPO)["imageIds"], [])
        self.aws("delete-repository", "--repository-name", REPO)
        after = self.aws("describe-repositories", "--repository-names", REPO, check=False)
        self.assertIn("RepositoryNotFoundException", after.stderr)

    def test_registry_is_restarted_when_it_dies(self):
        def registry_pid():
            r = subprocess.run(["pgrep", "-f", "docker-registry serve " + self.server.home],
                               capture_output=True, text=True)
            pids = r.stdout.split()
            return int(pids[0]) if len(pids) == 1 else None
        first = self.server.wait_for(registry_pid, 30, "the registry process")
        os.kill(first, 9)
        self.server.wait_for(lambda: (registry_pid() or first) != first, 60,
                             "the registry to be restarted")
        self.server.wait_for(
            lambda: self.aws("describe-repositories", check=False).returncode == 0, 60,
            "the ECR API to answer again")


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
