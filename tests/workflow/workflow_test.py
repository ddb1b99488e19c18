"""The recipe's workflow with lote's own commands, in a copy of examples/llama2:
lote setup → lote data prepare → lote resources create → lote submit (with
DO_PRE_COMPILATION: a precompile job, then the 4-node TP2 x DP2 job depending on
it) → lote report / checkpoints list → a job resumed from the first one's last
checkpoint → lote resources cleanup; each step run twice where the recipe may be
re-run (idempotent), plus the generic `lote submit --queue Q -- COMMAND` form and
the errors a newcomer meets (undefined variables, no config.txt).

usage: workflow_test.py LOTE_BINARY TEST_DATA_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
DATA = None
EXAMPLE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                       "examples", "llama2"))
# Small and quick: the same layout as the recipe (4 nodes, TP 2 x DP 2).
OVERRIDES = """
# test overrides
SEQ_LEN=64
MICRO_BATCH=2
GLOBAL_BATCH=4
MAX_STEPS=6
WARMUP_STEPS=1
LOGGING_INTERVAL=2
EVAL_INTERVAL=6
CHECKPOINT_FREQ=3
"""


def copy_example(dest, extra="", prefix="wf"):
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("build"))
    path = os.path.join(dest, "config.txt")
    with open(path) as f:
        text = f.read()
    assert "\nNAME_PREFIX=lote-llama2\n" in text
    # Names are expanded where they are defined: change the prefix in place.
    with open(path, "w") as f:
        f.write(text.replace("\nNAME_PREFIX=lote-llama2\n", "\nNAME_PREFIX=%s\n" % prefix)
                + OVERRIDES + extra)


class WorkflowTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lote_workflow_")
        cls.server = LoteServer(LOTE).start()
        cls.env = dict(os.environ)
        cls.env.update({
            "LOTE_ENDPOINT": cls.server.endpoint,
            "LOTE_HOME": cls.server.home,
            "LOTE_TEST_DATA": DATA,
            "AWS_PROFILE": "lote",
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(cls.server.home, "credentials"),
            "OMP_NUM_THREADS": "1",
        })
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL_BATCH"):
            cls.env.pop(k, None)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def lote(self, cwd, *args, ok=True):
        p = subprocess.run([LOTE] + list(args), cwd=cwd, env=self.env, capture_output=True,
                           text=True, timeout=600)
        if ok and p.returncode != 0:
            self.fail("lote %s failed (%d):\n%s\n%s\nserver:\n%s" % (
                " ".join(args), p.returncode, p.stdout[-4000:], p.stderr[-4000:],
                self.server.stderr()[-2000:]))
        return p

    def test_undefined_variables_are_errors_naming_them(self):
        ex = os.path.join(self.dir, "undefined")
        copy_example(ex)
        path = os.path.join(ex, "templates", "job_queue.json")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace('"priority": 1', '"priority": ${QUEUE_PRIORITY_NOT_SET}'))
        p = self.lote(ex, "setup", ok=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("templates/job_queue.json:4: ${QUEUE_PRIORITY_NOT_SET} is not defined",
                      p.stderr)
        self.assertFalse(os.path.exists(os.path.join(ex, "build")), "nothing is written")
        # The same in config.txt names its line.
        with open(os.path.join(ex, "config.txt"), "a") as f:
            f.write("BROKEN=${ALSO_NOT_SET_ANYWHERE}/x\n")
        p = self.lote(ex, "setup", ok=False)
        self.assertRegex(p.stderr, r"config\.txt:\d+: \$\{ALSO_NOT_SET_ANYWHERE\} is not defined")
        # A bare $NAME (shell inside a command) is left alone, not blanked.
        ok = os.path.join(self.dir, "bare")
        copy_example(ok)
        self.lote(ok, "setup")
        with open(os.path.join(ok, "build", "compute_env.json")) as f:
            self.assertEqual(json.load(f)["computeResources"]["launchTemplate"]["version"],
                             "$Latest")

    def test_commands_outside_an_example_say_what_to_do(self):
        empty = tempfile.mkdtemp(dir=self.dir)
        for args in (["setup"], ["resources", "create"], ["submit"], ["data", "prepare"]):
            p = self.lote(empty, *args, ok=False)
            self.assertEqual(p.returncode, 1, args)
            self.assertIn("no config.txt in this folder", p.stderr, args)
        p = self.lote(empty, "submit", "--queue", "q", ok=False)
        self.assertIn("--queue needs a command", p.stderr)

    def test_recipe_workflow_end_to_end(self):
        ex = os.path.join(self.dir, "llama2")
        copy_example(ex, "DO_PRE_COMPILATION=true\n")
        out = self.lote(ex, "setup").stdout
        for name in ("compute_env", "job_queue", "job_def", "launch_template", "placement_group"):
            self.assertIn("build/%s.json" % name, out)
        with open(os.path.join(ex, "build", "job_def.json")) as f:
            jd = json.load(f)
        self.assertEqual(jd["nodeProperties"]["numNodes"], 4)
        self.assertEqual(jd["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"], "0:")

        first = self.lote(ex, "data", "prepare").stdout
        self.assertIn("wrote file://", first)
        again = self.lote(ex, "data", "prepare").stdout
        self.assertIn("already holds this dataset", again)

        created = self.lote(ex, "resources", "create").stdout
        # The EC2 resources the compute environment names come first.
        self.assertIn("created placement group wf-pg (build/placement_group.json)", created)
        self.assertIn("created launch template wf-lt (build/launch_template.json)", created)
        self.assertLess(created.index("created launch template wf-lt"),
                        created.index("created compute environment wf-ce"))
        ec2 = self.server.client("ec2")
        self.assertEqual([g["Strategy"] for g in ec2.describe_placement_groups(
            GroupNames=["wf-pg"])["PlacementGroups"]], ["cluster"])
        lt_data = ec2.describe_launch_template_versions(
            LaunchTemplateName="wf-lt")["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        self.assertEqual(lt_data["InstanceType"], "trn1.32xlarge")
        self.assertIn("created compute environment wf-ce", created)
        self.assertIn("registered job definition wf-job:1", created)
        self.assertIn("job queue wf-queue is VALID", created)
        kept = self.lote(ex, "resources", "create").stdout
        self.assertIn("placement group wf-pg: exists, kept", kept)
        self.assertIn("launch template wf-lt: exists, kept", kept)
        self.assertIn("compute environment wf-ce exists: kept", kept)
        self.assertIn("job definition wf-job:1 matches", kept)
        self.assertNotIn("registered", kept)

        # DO_PRE_COMPILATION=true: the precompile job, then the main job after it.
        sub = self.lote(ex, "submit", "--wait").stdout
        ids = re.findall(r": ([0-9a-f-]{36})", sub)
        self.assertEqual(len(ids), 2, sub)
        pre, job = ids
        self.assertIn("SUCCEEDED", sub)
        pre_log = self.lote(ex, "logs", pre).stdout
        self.assertIn("precompile: 2 steps", pre_log)
        self.assertIn("compile cache: recorded the plan", pre_log)
        self.assertNotRegex(pre_log, r"checkpoint \S+ is complete")
        main_log = self.lote(ex, "logs", job).stdout
        self.assertIn("compile cache: found the plan recorded by job %s" % pre, main_log)
        self.assertIn("tensor parallel 2 x data parallel 2", main_log)

        report = self.lote(ex, "report", job, "--csv", os.path.join(ex, "c.csv"), "--plot",
                           os.path.join(ex, "loss.png")).stdout
        self.assertIn("SUCCEEDED", report)
        self.assertRegex(report, r"training: 6 steps reported, final loss \d+\.\d+, "
                                 r"validation loss \d+\.\d+ \(step 6\)")
        self.assertIn("tokens/s", report)
        self.assertIn("MFU", report)
        for node in range(4):  # the timeline: attempt 1, every node
            self.assertRegex(report, re.compile(r"^ +1 +%d +\S+ m?s +" % node, re.M))
        self.assertIn("checkpoints: 2 in file://", report)
        self.assertIn("step_6", report)
        with open(os.path.join(ex, "c.csv")) as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[0], "step,attempt,loss,val_loss,lr,grad_norm,tokens_per_s,mfu")
        self.assertEqual([r.split(",")[0] for r in rows[1:] if r.split(",")[2]], ["2", "4", "6"])
        with open(os.path.join(ex, "loss.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

        listed = self.lote(ex, "checkpoints", "list", job).stdout
        self.assertIn("step_3", listed)
        self.assertIn("step_6", listed)

        # Resume from the first job's last checkpoint, without the precompile job.
        with open(os.path.join(ex, "config.txt"), "a") as f:
            f.write("DO_PRE_COMPILATION=false\n")
        resumed = self.lote(ex, "submit", "--resume-from", job, "--max-steps", "8", "--name",
                            "wf-resumed", "--wait").stdout
        rid = re.findall(r": ([0-9a-f-]{36})", resumed)
        self.assertEqual(len(rid), 1, resumed)
        rlog = self.lote(ex, "logs", rid[0]).stdout
        self.assertIn("resumed from file://", rlog)
        self.assertIn("/%s/step_6 (step 6" % job, rlog)
        self.assertRegex(rlog, r"step +8/8")

        gone = self.lote(ex, "resources", "cleanup").stdout
        self.assertIn("deleted job queue wf-queue", gone)
        self.assertIn("deleted compute environment wf-ce", gone)
        self.assertIn("deleted launch template wf-lt", gone)
        self.assertIn("deleted placement group wf-pg", gone)
        self.assertLess(gone.index("deleted compute environment wf-ce"),
                        gone.index("deleted placement group wf-pg"))
        self.assertEqual(ec2.describe_placement_groups(
            Filters=[{"Name": "group-name", "Values": ["wf-pg"]}])["PlacementGroups"], [])
        self.assertEqual(ec2.describe_launch_templates(
            Filters=[{"Name": "launch-template-name", "Values": ["wf-lt"]}])["LaunchTemplates"], [])
        self.assertIn("deregistered job definition wf-job:1", gone)
        again = self.lote(ex, "resources", "cleanup").stdout
        self.assertIn("job queue wf-queue: none", again)
        self.assertIn("compute environment wf-ce: none", again)
        self.assertIn("placement group wf-pg: not there", again)
        b = self.server.client()
        self.assertEqual(b.describe_job_queues(jobQueues=["wf-queue"])["jobQueues"], [])
        self.assertEqual(
            b.describe_job_definitions(jobDefinitionName="wf-job", status="ACTIVE")["jobDefinitions"],
            [])

    def test_recipe_workflow_with_s3_uris(self):
        """The recipe's config with s3:// URIs for the dataset, the compile cache and the
        checkpoints, on lote's own S3: the host's commands reach it by AWS_ENDPOINT_URL_S3
        (what `lote env` exports), the job's nodes by their job credentials alone."""
        self.server.client("s3").create_bucket(Bucket="wf-recipe")
        ex = os.path.join(self.dir, "llama2-s3")
        copy_example(ex, "TOKENIZED_DATASET_URI=s3://wf-recipe/data/sotu\n"
                         "NEURON_COMPILE_CACHE_URI=s3://wf-recipe/compile-cache\n"
                         "CHECKPOINT_SAVE_URI=s3://wf-recipe/checkpoints\n", prefix="s3wf")
        saved = dict(self.env)
        self.env["AWS_ENDPOINT_URL_S3"] = self.server.endpoint
        try:
            self.lote(ex, "setup")
            self.assertIn("wrote s3://wf-recipe/data/sotu", self.lote(ex, "data", "prepare").stdout)
            self.lote(ex, "resources", "create")
            sub = self.lote(ex, "submit", "--wait").stdout
            ids = re.findall(r": ([0-9a-f-]{36})", sub)
            self.assertEqual(len(ids), 1, sub)
            job = ids[0]
            self.assertIn("SUCCEEDED", sub)
            s3 = self.server.client("s3")
            keys = [o["Key"] for o in s3.list_objects_v2(
                Bucket="wf-recipe", Prefix="checkpoints/%s/" % job).get("Contents", [])]
            self.assertIn("checkpoints/%s/step_6/manifest.json" % job, keys)
            self.assertTrue(s3.list_objects_v2(Bucket="wf-recipe", Prefix="compile-cache/")
                            ["KeyCount"] > 0)
            self.assertIn("checkpoints: 2 in s3://wf-recipe/checkpoints", self.lote(
                ex, "report", job).stdout)
            resumed = self.lote(ex, "submit", "--resume-from", job, "--max-steps", "8", "--name",
                                "s3wf-resumed", "--wait").stdout
            rid = re.findall(r": ([0-9a-f-]{36})", resumed)
            self.assertEqual(len(rid), 1, resumed)
            rlog = self.lote(ex, "logs", rid[0]).stdout
            self.assertIn("resumed from s3://wf-recipe/checkpoints/%s/step_6" % job, rlog)
            self.assertRegex(rlog, r"step +8/8")
            self.lote(ex, "resources", "cleanup")
        finally:
            self.env = saved

    def test_config_txt_names_the_server(self):
        ex = os.path.join(self.dir, "endpoint")
        copy_example(ex, "LOTE_ENDPOINT=%s\n" % self.server.endpoint, prefix="ep")
        saved = self.env["LOTE_ENDPOINT"]
        self.env["LOTE_ENDPOINT"] = "http://127.0.0.1:1"  # not a server
        try:
            self.lote(ex, "setup")
            self.assertIn("job queue ep-queue is VALID", self.lote(ex, "resources", "create").stdout)
            self.assertIn("ep-queue", self.lote(ex, "status").stdout)
            away = self.lote(self.dir, "status", ok=False)
            self.assertNotEqual(away.returncode, 0)
            self.assertIn("cannot reach the lote server at http://127.0.0.1:1", away.stderr)
            self.lote(ex, "resources", "cleanup")
        finally:
            self.env["LOTE_ENDPOINT"] = saved

    def test_generic_submit_needs_no_json(self):
        ex = os.path.join(self.dir, "generic")
        copy_example(ex, prefix="gen")
        self.lote(ex, "setup")
        self.lote(ex, "resources", "create")
        one = self.lote(ex, "submit", "--queue", "gen-queue", "--vcpus", "1", "--memory", "256",
                        "--env", "GREETING=hello", "--wait", "--", "sh", "-c",
                        "echo $GREETING from $AWS_BATCH_JOB_ID").stdout
        self.assertIn("SUCCEEDED", one)
        jid = re.findall(r": ([0-9a-f-]{36})", one)[0]
        self.assertIn("hello from " + jid, self.lote(ex, "logs", jid).stdout)

        # A gang ends when its main node does (AWS semantics): every node leaves a
        # line in a shared folder, and the main node prints them once all 3 are there.
        marks = os.path.join(ex, "marks")
        os.makedirs(marks)
        script = ("echo node $AWS_BATCH_JOB_NODE_INDEX of $AWS_BATCH_JOB_NUM_NODES "
                  "> %s/$AWS_BATCH_JOB_NODE_INDEX; "
                  "if [ $AWS_BATCH_JOB_NODE_INDEX = 0 ]; then "
                  "for i in $(seq 600); do [ $(ls %s | wc -l) = 3 ] && break; sleep 0.1; done; "
                  "cat %s/*; fi") % (marks, marks, marks)
        gang = self.lote(ex, "submit", "--queue", "gen-queue", "--nodes", "3", "--attempts", "2",
                         "--timeout", "120", "--name", "gang", "--wait", "--", "sh", "-c",
                         script).stdout
        self.assertIn("SUCCEEDED", gang)
        gid = re.findall(r": ([0-9a-f-]{36})", gang)[0]
        logs = self.lote(ex, "logs", gid).stdout
        for n in range(3):
            self.assertIn("node %d of 3" % n, logs)
        d = self.server.client().describe_jobs(jobs=[gid])["jobs"][0]
        self.assertEqual(d["jobName"], "gang")
        self.assertEqual(d["nodeProperties"]["numNodes"], 3)
        self.assertEqual(d["retryStrategy"]["attempts"], 2)
        self.assertEqual(d["timeout"]["attemptDurationSeconds"], 120)

        failed = self.lote(ex, "submit", "--queue", "gen-queue", "--wait", "--", "sh", "-c",
                           "exit 3", ok=False)
        self.assertEqual(failed.returncode, 1)
        self.assertIn("FAILED", failed.stdout)
        bad = self.lote(ex, "submit", "--queue", "no-such-queue", "--", "true", ok=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("ClientException", bad.stderr)
        self.lote(ex, "resources", "cleanup")


if __name__ == "__main__":
    LOTE, DATA = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
