"""Who submitted a job, on a real `lote server`: the owner is part of the job
(stored with it: a kill -9 right after SubmitJob keeps it, and another principal
still cannot stop the job), DescribeJobs and ListJobs show each principal only
the jobs it may read, a job whose definition's secrets name SSM parameters is
submitted only by a principal that may ssm:GetParameters them, a job's nodes
get a key of their own with their owner's permissions while the attempt runs
(docs/api.md, "Job credentials"), and GET /metrics is unsigned only while the
server has no user besides admin.

Run: python3 test_job_owners.py --lote build/lote
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, HERE)
from lote_server import LoteServer, create_emulated_environment, describe_job_raw  # noqa: E402
import test_iam  # noqa: E402
from test_iam import ACCOUNT, JD, Q, Lote, denied_message  # noqa: E402

LOTE = None
PARAM = "arn:aws:ssm:us-east-1:%s:parameter/" % ACCOUNT


def team_policy(queue, parameters=None):
    statements = [
        {"Effect": "Allow", "Action": "batch:SubmitJob", "Resource": [Q + queue, JD + "*"]},
        {"Effect": "Allow", "Action": ["batch:DescribeJobs", "batch:ListJobs", "batch:CancelJob",
                                       "batch:TerminateJob"], "Resource": Q + queue},
    ]
    if parameters:
        statements.append({"Effect": "Allow", "Action": "ssm:GetParameters",
                           "Resource": PARAM + parameters})
    # Each team's bucket, for the job credentials test.
    statements.append({"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
                       "Resource": "arn:aws:s3:::%s-data/*" % queue})
    return {"Version": "2012-10-17", "Statement": statements}


# What a job of the credentials test runs: with only the environment lote gives
# its nodes, it reads its team's object, writes one, tries the other team's and
# reports (through a local file) what it saw, its key id and secret included.
JOB_S3 = r"""
import json, os, sys
import boto3, botocore.exceptions
report = {"key": os.environ.get("AWS_ACCESS_KEY_ID", ""),
          "secret": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
          "endpoint": os.environ.get("AWS_ENDPOINT_URL_S3", "")}
if report["key"]:
    s3 = boto3.client("s3")
    report["read"] = s3.get_object(Bucket="qa-data", Key="in.txt")["Body"].read().decode()
    s3.put_object(Bucket="qa-data", Key="out.txt", Body=b"written by the job")
    try:
        s3.get_object(Bucket="qb-data", Key="in.txt")
        report["other"] = "read"
    except botocore.exceptions.ClientError as e:
        report["other"] = e.response["Error"]["Code"]
with open(sys.argv[1], "w") as f:
    json.dump(report, f)
"""


class JobOwnersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        lote = Lote(cls.server)
        admin = cls.server.client("batch")
        create_emulated_environment(admin)
        for queue in ("qa", "qb"):
            admin.create_job_queue(jobQueueName=queue, priority=1,
                                   computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        props = {"image": "host", "command": ["true"],
                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                          {"type": "MEMORY", "value": "256"}]}
        admin.register_job_definition(jobDefinitionName="plain", type="container",
                                      containerProperties=props)
        for name, parameter in (("own-secret", "/erin/token"), ("other-secret", "other/token")):
            admin.register_job_definition(
                jobDefinitionName=name, type="container",
                containerProperties=dict(props, secrets=[{"name": "TOKEN", "valueFrom": parameter}]))
        cls.keys = {"erin": lote.user("erin", team_policy("qa", "erin/*"), unix_users=["*"]),
                    "frank": lote.user("frank", team_policy("qb"), unix_users=["*"])}

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def client(self, who):
        if who == "admin":
            return self.server.client("batch")
        key, secret = self.keys[who]
        return self.server.client("batch", key=key, secret=secret)

    def assertDenied(self, call, message):
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            call()
        err = ctx.exception.response
        self.assertEqual(err["Error"]["Code"], "AccessDeniedException", err)
        self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 403, err)
        self.assertEqual(err["Error"]["Message"], message)

    def submit(self, who, queue, definition, name, command=("true",)):
        return self.client(who).submit_job(jobName=name, jobQueue=queue, jobDefinition=definition,
                                           containerOverrides={"command": list(command)})["jobId"]

    def wait_final(self, job_id):
        def final():
            s = self.client("admin").describe_jobs(jobs=[job_id])["jobs"][0]["status"]
            return s if s in ("SUCCEEDED", "FAILED") else None
        return self.server.wait_for(final, 90, "job %s to end" % job_id)

    def test_owner_survives_kill_9_and_guards_the_job(self):
        job = self.submit("erin", "qa", "plain", "erin-long", command=["sleep", "300"])
        self.server.kill()  # right after SubmitJob answered
        self.server.start()
        self.assertEqual(describe_job_raw(self.client("admin"), job)["loteOwner"], "erin")
        job_arn = "arn:aws:batch:us-east-1:%s:job/%s" % (ACCOUNT, job)
        self.assertDenied(lambda: self.client("frank").terminate_job(jobId=job, reason="not mine"),
                          denied_message("frank", "batch:TerminateJob", job_arn))
        self.assertDenied(lambda: self.client("frank").cancel_job(jobId=job, reason="not mine"),
                          denied_message("frank", "batch:CancelJob", job_arn))
        self.assertNotEqual(self.client("admin").describe_jobs(jobs=[job])["jobs"][0]["status"],
                            "FAILED")
        # Its owner may stop it: the policy lets erin work in qa.
        self.client("erin").terminate_job(jobId=job, reason="mine")
        self.assertEqual(self.wait_final(job), "FAILED")
        self.assertEqual(self.client("admin").describe_jobs(jobs=[job])["jobs"][0]["statusReason"],
                         "mine")

    def test_each_principal_sees_only_the_jobs_it_may_read(self):
        mine = self.submit("erin", "qa", "plain", "erin-visible")
        theirs = self.submit("frank", "qb", "plain", "frank-visible")
        erin, frank = self.client("erin"), self.client("frank")
        self.assertEqual([j["jobId"] for j in erin.describe_jobs(jobs=[mine, theirs])["jobs"]], [mine])
        self.assertEqual([j["jobId"] for j in frank.describe_jobs(jobs=[mine, theirs])["jobs"]],
                         [theirs])
        self.assertEqual(len(self.client("admin").describe_jobs(jobs=[mine, theirs])["jobs"]), 2)

        def listed(client, queue, name):
            out = client.list_jobs(jobQueue=queue, filters=[{"name": "JOB_NAME", "values": [name]}])
            return [j["jobId"] for j in out["jobSummaryList"]]
        self.assertEqual(listed(erin, "qa", "erin-visible"), [mine])
        self.assertEqual(listed(frank, "qa", "erin-visible"), [])
        self.assertEqual(listed(self.client("admin"), "qa", "erin-visible"), [mine])
        self.wait_final(mine)
        self.wait_final(theirs)

    def test_secrets_need_ssm_get_parameters(self):
        allowed = self.submit("erin", "qa", "own-secret", "erin-own-secret")
        self.assertEqual(len(self.client("admin").describe_jobs(jobs=[allowed])["jobs"]), 1)
        self.assertDenied(
            lambda: self.submit("erin", "qa", "other-secret", "erin-other-secret"),
            denied_message("erin", "ssm:GetParameters", PARAM + "other/token") +
            " (the job definition's secrets name this parameter)")
        listed = self.client("admin").list_jobs(
            jobQueue="qa", filters=[{"name": "JOB_NAME", "values": ["erin-other-secret"]}])
        self.assertEqual(listed["jobSummaryList"], [])
        self.wait_final(allowed)

    def test_a_job_gets_its_owners_permissions_while_it_runs(self):
        s3 = self.server.client("s3")
        for bucket in ("qa-data", "qb-data"):
            s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key="in.txt", Body=("hello from " + bucket).encode())
        work = tempfile.mkdtemp(prefix="lote_job_creds_")
        self.addCleanup(shutil.rmtree, work, True)
        script = os.path.join(work, "job.py")
        with open(script, "w") as f:
            f.write(JOB_S3)
        report_path = os.path.join(work, "report.json")
        job = self.submit("erin", "qa", "plain", "erin-s3",
                          command=[sys.executable, script, report_path])
        self.assertEqual(self.wait_final(job), "SUCCEEDED",
                         describe_job_raw(self.client("admin"), job).get("statusReason"))
        with open(report_path) as f:
            report = json.load(f)
        self.assertTrue(report["key"].startswith("LOTEJOB"), report)
        self.assertEqual(report["endpoint"], self.server.endpoint)
        self.assertEqual(report["read"], "hello from qa-data")
        # Erin may not read team b's bucket, and neither may her job.
        self.assertEqual(report["other"], "AccessDenied")
        self.assertEqual(s3.get_object(Bucket="qa-data", Key="out.txt")["Body"].read(),
                         b"written by the job")
        # The attempt has ended: its key is no longer honoured.
        ended = self.server.client("s3", key=report["key"], secret=report["secret"])
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            ended.get_object(Bucket="qa-data", Key="in.txt")
        self.assertEqual(ctx.exception.response["Error"]["Code"], "InvalidAccessKeyId")

        # A job that brings its own AWS settings gets none of lote's.
        own = self.client("admin").register_job_definition(
            jobDefinitionName="own-aws", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "environment": [{"name": "AWS_PROFILE", "value": "mine"}],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "256"}]})
        self.assertTrue(own["jobDefinitionArn"])
        own_report = os.path.join(work, "own.json")
        job = self.submit("admin", "qa", "own-aws", "own-aws",
                          command=[sys.executable, script, own_report])
        self.assertEqual(self.wait_final(job), "SUCCEEDED")
        with open(own_report) as f:
            self.assertEqual(json.load(f), {"key": "", "secret": "", "endpoint": ""})


class MetricsTest(unittest.TestCase):
    def test_metrics_are_unsigned_only_without_other_users(self):
        server = LoteServer(LOTE).start()
        try:
            with urllib.request.urlopen(server.endpoint + "/metrics", timeout=10) as r:
                self.assertEqual(r.status, 200)
                self.assertIn("lote_", r.read().decode())
            Lote(server).user("gina")
            with self.assertRaises(urllib.error.HTTPError) as ctx:
                urllib.request.urlopen(server.endpoint + "/metrics", timeout=10)
            self.assertEqual(ctx.exception.code, 403)
            self.assertIn("no IAM user besides admin", ctx.exception.read().decode())
        finally:
            server.cleanup()


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = test_iam.LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
