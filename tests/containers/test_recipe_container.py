"""The recipe in container mode, end to end, with the commands a user runs in a
copy of examples/llama2 set to RUNTIME=container: `lote setup`, `lote data
prepare`, ./build_image.sh (the base image made here, podman build of the
Containerfile, aws ecr create-repository, get-login-password | podman login,
podman push), `lote resources create`, `lote submit --wait`. The 4-node
TP 2 x DP 2 training of the tiny model runs in the image (pulled from lote's
registry by its ECR URI) and must SUCCEED, its checkpoints and model written
through the job definition's mounts. A real `lote server` with its registry,
real podman (runc). Where podman or docker-registry cannot work here the test
fails saying why (never a skip).

usage: test_recipe_container.py --lote LOTE_BINARY --data TEST_DATA_DIR
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "workflow"))
from lote_server import LoteServer  # noqa: E402
from workflow_test import copy_example  # noqa: E402

LOTE = None
DATA = None
RUN = os.getpid()
REPO = "lote-test/llama2-%d" % RUN
BASE = "localhost/lote-test-base:%d" % RUN
# Container mode, 4 steps, a checkpoint after 2 and at the end.
CONTAINER_MODE = """
RUNTIME=container
MAX_STEPS=4
CHECKPOINT_FREQ=2
EVAL_INTERVAL=4
"""


class RecipeInContainerModeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access("/usr/bin/docker-registry", os.X_OK):
            raise AssertionError("docker-registry is not installed (scripts/deps/containers.txt)")
        cls.server = LoteServer(LOTE, extra_args=["--registry", "on"]).start()
        cls.dir = tempfile.mkdtemp(prefix="lote_recipe_container_")
        cls.env = cls.server.env()  # eval "$(lote env)", as the user does
        cls.env.update({
            "LOTE_ENDPOINT": cls.server.endpoint,
            "LOTE_TEST_DATA": DATA,
            "LOTE": LOTE,  # the lote build_image.sh puts into the image
            "LOTE_BASE_IMAGE": BASE,
            "CONTAINERS_CONF": os.path.join(cls.server.home, "containers", "containers.conf"),
            "REGISTRY_AUTH_FILE": os.path.join(cls.dir, "auth.json"),
            "OMP_NUM_THREADS": "1",
        })
        if not cls.env.get("LOTE_REGISTRY"):
            raise AssertionError("lote env names no LOTE_REGISTRY")

    @classmethod
    def tearDownClass(cls):
        for ref in ("localhost/%s:latest" % REPO, "%s/%s:latest" % (cls.env["LOTE_REGISTRY"], REPO),
                    BASE):
            subprocess.run(["podman", "rmi", "-f", ref], env=cls.env, capture_output=True)
        cls.server.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_in(self, cwd, *argv, timeout=600):
        p = subprocess.run(list(argv), cwd=cwd, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            self.fail("%s failed (%d):\n%s\n%s\nserver:\n%s" % (
                " ".join(argv), p.returncode, p.stdout[-4000:], p.stderr[-4000:],
                self.server.stderr()[-2000:]))
        return p.stdout

    def test_the_recipe_trains_in_its_image(self):
        ex = os.path.join(self.dir, "llama2")
        copy_example(ex, CONTAINER_MODE, prefix="ct")
        config = os.path.join(ex, "config.txt")
        with open(config) as f:
            text = f.read()
        # Keys are expanded where they are defined (IMAGE_URI): the repository in place.
        self.assertIn("\nECR_REPO=lote/llama2-train\n", text)
        with open(config, "w") as f:
            f.write(text.replace("\nECR_REPO=lote/llama2-train\n", "\nECR_REPO=%s\n" % REPO))
        self.assertIn("./build_image.sh", self.run_in(ex, LOTE, "setup"))
        with open(os.path.join(ex, "build", "job_def.json")) as f:
            container = json.load(f)["nodeProperties"]["nodeRangeProperties"][0]["container"]
        uri = "000000000000.dkr.ecr.us-east-1.amazonaws.com/%s:latest" % REPO
        self.assertEqual(container["image"], uri)
        with open(os.path.join(ex, "build", "compute_env.json")) as f:
            self.assertEqual(json.load(f)["tags"]["lote:runtime"], "container")
        self.run_in(ex, LOTE, "data", "prepare")

        built = self.run_in(ex, "./build_image.sh")
        self.assertIn("aws ecr create-repository --repository-name " + REPO, built)
        pushed = "%s/%s:latest" % (self.env["LOTE_REGISTRY"], REPO)
        self.assertIn("podman push " + pushed, built)
        again = self.run_in(ex, "./build_image.sh")  # idempotent: the repository is kept
        self.assertIn("ECR repository %s exists" % REPO, again)
        described = json.loads(self.run_in(ex, "aws", "ecr", "describe-images",
                                           "--repository-name", REPO, "--output", "json"))
        self.assertEqual(described["imageDetails"][0]["imageTags"], ["latest"])
        # The image's CMD is usable without a command.
        usage = self.run_in(ex, "podman", "run", "--rm", "--network=host",
                            "localhost/%s:latest" % REPO)
        self.assertIn("lote", usage)
        # The nodes pull it from the registry by its ECR URI.
        self.run_in(ex, "podman", "rmi", pushed)

        self.run_in(ex, LOTE, "resources", "create")
        sub = subprocess.run([LOTE, "submit", "--wait"], cwd=ex, env=self.env,
                             capture_output=True, text=True, timeout=900)
        ids = re.findall(r": ([0-9a-f-]{36})", sub.stdout)
        self.assertEqual(len(ids), 1, sub.stdout + sub.stderr)
        job_id = ids[0]
        log = subprocess.run([LOTE, "logs", job_id], cwd=ex, env=self.env, capture_output=True,
                             text=True).stdout
        self.assertEqual(sub.returncode, 0, "%s\n%s\nthe job's output:\n%s" % (
            sub.stdout, sub.stderr, log[-6000:]))
        self.assertIn("SUCCEEDED", sub.stdout)
        self.assertIn("Trying to pull %s..." % pushed, log)
        self.assertIn("tensor parallel 2 x data parallel 2", log)

        batch = self.server.client()
        node = batch.describe_jobs(jobs=[job_id + "#0"])["jobs"][0]
        # lote's notices are in the reason too (boto3 drops the extra key loteNotices).
        notices = node["attempts"][-1]["container"].get("reason", "")
        self.assertIn("emulation: skipped linuxParameters.devices /dev/neuron0 (not on this host)",
                      notices)
        self.assertNotIn("volumes", notices)  # mounted, not skipped as in process mode
        # The image was removed before the job: the nodes that pulled it recorded the pull
        # (a node that found it pulled by another, after waiting on podman's lock, did not).
        pulls = []
        for k in range(4):
            with open(os.path.join(self.server.home, "jobs", job_id, "1", str(k),
                                   "status.json")) as f:
                status = json.load(f)
            if status["pull_started_at_ms"]:
                self.assertLessEqual(status["started_at_ms"], status["pull_started_at_ms"])
                self.assertLessEqual(status["pull_started_at_ms"], status["pull_stopped_at_ms"])
                self.assertLessEqual(status["pull_stopped_at_ms"], status["stopped_at_ms"])
                pulls.append(status["pull_stopped_at_ms"] - status["pull_started_at_ms"])
            else:
                self.assertEqual(status["pull_stopped_at_ms"], 0, status)
        self.assertTrue(pulls, "no node recorded a pull")
        print("pulls of the nodes that pulled: %s ms" % pulls)
        # DescribeJobs' timeline carries them, and `lote report` shows them per node.
        report = self.run_in(ex, LOTE, "report", job_id)
        self.assertRegex(report, r"attempt\s+node\s+queued\s+starting\s+running\s+pull\s+exit")
        rows = [re.split(r"\s{2,}", line.strip()) for line in report.splitlines()
                if re.match(r"\s+1\s+[0-3]\s", line)]  # attempt, node, queued, ..., pull, exit
        self.assertEqual(len(rows), 4, report)
        self.assertEqual(len([r for r in rows if r[5] != "-"]), len(pulls), report)
        # Checkpoints and the model, written in the containers through the mounts.
        ckpt = os.path.join(ex, "build", "checkpoints", job_id)
        steps = sorted(os.path.basename(os.path.dirname(m))
                       for m in glob.glob(os.path.join(ckpt, "step_*", "manifest.json")))
        self.assertEqual(steps, ["step_2", "step_4"])
        with open(os.path.join(ex, "build", "model", "metrics.json")) as f:
            metrics = json.load(f)
        self.assertEqual((metrics["world_size"], metrics["tensor_parallel"],
                          metrics["data_parallel"]), (4, 2, 2))
        self.assertEqual(len(metrics["losses"]), 4)
        self.run_in(ex, LOTE, "resources", "cleanup")


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
