"""Principals and policies on a real `lote server`: users, policies and keys made
with the `lote` CLI (`lote users`, `lote keys`), calls made with boto3, the aws CLI
and the AWS SDK for JavaScript v3 as two principals with queue-scoped policies:
allowed calls succeed, refused ones are AccessDeniedException (403, AWS's message)
and change nothing, a Deny beats an Allow, tag conditions apply, one principal
cannot cancel another's job or read its log stream, a rotated or deleted key stops
working at once, and `lote audit` holds every mutation and refusal in order,
also after a restart.

Run: python3 test_iam.py --lote build/lote [--sdk DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

LOTE = None
SDK = None
ACCOUNT = "000000000000"
Q = "arn:aws:batch:us-east-1:%s:job-queue/" % ACCOUNT
JD = "arn:aws:batch:us-east-1:%s:job-definition/" % ACCOUNT
STREAMS = "arn:aws:logs:us-east-1:%s:log-group:/aws/batch/job:log-stream:" % ACCOUNT
READ = {"Effect": "Allow", "Action": ["batch:Describe*", "batch:List*"], "Resource": "*"}

ALICE_POLICY = {"Version": "2012-10-17", "Statement": [
    READ,
    {"Effect": "Allow", "Action": "batch:SubmitJob", "Resource": [Q + "qa", JD + "*"]},
    {"Sid": "NoDeniedDefinitions", "Effect": "Deny", "Action": "batch:SubmitJob",
     "Resource": JD + "denied*"},
    {"Effect": "Allow", "Action": ["batch:CancelJob", "batch:TerminateJob"], "Resource": Q + "qa"},
    {"Effect": "Allow", "Action": ["logs:GetLogEvents", "logs:FilterLogEvents"],
     "Resource": STREAMS + "defa/*"},
]}
BOB_POLICY = {"Version": "2012-10-17", "Statement": [
    READ,
    {"Effect": "Allow", "Action": "batch:SubmitJob", "Resource": [Q + "qb", JD + "defb*"]},
    {"Effect": "Allow", "Action": ["batch:CancelJob", "batch:TerminateJob"], "Resource": Q + "qb"},
    {"Effect": "Allow", "Action": "batch:UpdateJobQueue", "Resource": "*",
     "Condition": {"StringEquals": {"aws:ResourceTag/team": "b"}}},
    {"Effect": "Allow", "Action": "batch:CreateJobQueue", "Resource": "*",
     "Condition": {"StringEquals": {"aws:RequestTag/team": "b"}}},
    {"Effect": "Allow", "Action": ["logs:GetLogEvents", "logs:FilterLogEvents"],
     "Resource": STREAMS + "defb/*"},
]}


def denied_message(user, action, resource, explicit=False):
    head = "User: arn:aws:iam::%s:user/%s is not authorized to perform: %s on resource: %s" % (
        ACCOUNT, user, action, resource)
    if explicit:
        return head + " with an explicit deny in an identity-based policy"
    return head + " because no identity-based policy allows the %s action" % action


class Lote:
    """The `lote` CLI as the administrator of `server`."""

    def __init__(self, server):
        self.server = server

    def run(self, *args, check=True):
        env = self.server.env()
        proc = subprocess.run([LOTE] + list(args), env=env, capture_output=True, text=True,
                              timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError("lote %s exited %d: %s" % (" ".join(args), proc.returncode,
                                                            proc.stderr))
        return proc

    def json(self, *args):
        return json.loads(self.run(*args).stdout)

    def user(self, name, policy=None, unix_users=()):
        """Creates `name` (with `policy` and `unix_users`) and one access key:
        (key id, secret)."""
        args = ["users", "create", name]
        for u in unix_users:
            args += ["--unix-user", u]
        if policy is not None:
            path = os.path.join(self.server.home, "policy-%s.json" % name)
            with open(path, "w") as f:
                json.dump(policy, f)
            args += ["--policy-file", path]
        self.json(*args)
        key = self.json("keys", "create", name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]


def setup_resources(batch):
    """Compute environment `ce` (emulated), queues qa (team=a) and qb (team=b),
    job definitions defa, defb, denied."""
    create_emulated_environment(batch)
    for queue, team in (("qa", "a"), ("qb", "b")):
        batch.create_job_queue(jobQueueName=queue, priority=1, tags={"team": team},
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
    for name, user in (("defa", None), ("defb", None), ("denied", None), ("as-nobody", "nobody"),
                       ("as-root", "root")):
        props = {"image": "host", "command": ["true"],
                 "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "256"}]}
        if user:
            props["user"] = user
        batch.register_job_definition(jobDefinitionName=name, type="container",
                                      containerProperties=props)


class IamTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.lote = Lote(cls.server)
        cls.admin = cls.server.client("batch")
        cls.admin_logs = cls.server.client("logs")
        setup_resources(cls.admin)
        cls.keys = {"alice": cls.lote.user("alice", ALICE_POLICY, unix_users=["*"]),
                    "bob": cls.lote.user("bob", BOB_POLICY, unix_users=["*"])}

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def client(self, who, service="batch"):
        key, secret = self.keys[who]
        return self.server.client(service, key=key, secret=secret)

    def assertDenied(self, call, message, code="AccessDeniedException"):
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            call()
        err = ctx.exception.response
        self.assertEqual(err["Error"]["Code"], code, err)
        self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 403, err)
        self.assertEqual(err["Error"]["Message"], message)

    def submit(self, who, queue, definition, command=("true",), name="job"):
        return self.client(who).submit_job(jobName=name, jobQueue=queue, jobDefinition=definition,
                                           containerOverrides={"command": list(command)})

    def wait_status(self, job_id, statuses, timeout=60):
        def status():
            s = self.admin.describe_jobs(jobs=[job_id])["jobs"][0]["status"]
            return s if s in statuses else None
        return self.server.wait_for(status, timeout, "job %s to be %s" % (job_id, statuses))

    def jobs_named(self, queue, name):
        # One ListJobs with a JOB_NAME filter covers every status (as AWS): a call per
        # status could see a job that moved on between two calls twice, or not at all.
        listed = self.admin.list_jobs(jobQueue=queue,
                                      filters=[{"name": "JOB_NAME", "values": [name]}])
        return [j for j in listed["jobSummaryList"] if j["jobName"] == name]

    # --- queue-scoped policies -------------------------------------------------
    def test_allowed_calls_succeed(self):
        a = self.submit("alice", "qa", "defa", name="allowed-a")
        b = self.submit("bob", "qb", "defb", name="allowed-b")
        self.assertEqual(self.wait_status(a["jobId"], ("SUCCEEDED", "FAILED")), "SUCCEEDED")
        self.assertEqual(self.wait_status(b["jobId"], ("SUCCEEDED", "FAILED")), "SUCCEEDED")
        names = sorted(q["jobQueueName"] for q in self.client("bob").describe_job_queues()["jobQueues"])
        self.assertEqual(names, ["qa", "qb"])

    def test_denied_calls_change_nothing(self):
        self.assertDenied(lambda: self.submit("bob", "qa", "defa", name="bob-in-qa"),
                          denied_message("bob", "batch:SubmitJob", Q + "qa"))
        self.assertEqual(self.jobs_named("qa", "bob-in-qa"), [])
        self.assertDenied(lambda: self.client("alice").delete_job_queue(jobQueue="qb"),
                          denied_message("alice", "batch:DeleteJobQueue", Q + "qb"))
        self.assertDenied(lambda: self.client("alice").update_job_queue(jobQueue="qb", state="DISABLED"),
                          denied_message("alice", "batch:UpdateJobQueue", Q + "qb"))
        qb = self.admin.describe_job_queues(jobQueues=["qb"])["jobQueues"][0]
        self.assertEqual((qb["state"], qb["status"]), ("ENABLED", "VALID"))
        # Other services: Logs json, SSM json, EC2 Query (its own code, XML).
        self.assertDenied(lambda: self.client("alice", "logs").create_log_group(logGroupName="/alice-group"),
                          denied_message("alice", "logs:CreateLogGroup",
                                         "arn:aws:logs:us-east-1:%s:log-group:/alice-group" % ACCOUNT))
        self.assertEqual(self.admin_logs.describe_log_groups(logGroupNamePrefix="/alice-group")["logGroups"], [])
        self.assertDenied(lambda: self.client("alice", "ssm").put_parameter(Name="/p", Value="v",
                                                                            Type="String"),
                          denied_message("alice", "ssm:PutParameter",
                                         "arn:aws:ssm:us-east-1:%s:parameter/p" % ACCOUNT))
        self.assertDenied(lambda: self.client("alice", "ec2").create_placement_group(
            GroupName="pg", Strategy="cluster"),
            "You are not authorized to perform this operation. " +
            denied_message("alice", "ec2:CreatePlacementGroup", "*"), code="UnauthorizedOperation")
        self.assertEqual(self.server.client("ec2").describe_placement_groups()["PlacementGroups"], [])

    def test_explicit_deny_beats_allow(self):
        # alice may submit with any definition (job-definition/*) but not denied*.
        self.assertDenied(lambda: self.submit("alice", "qa", "denied", name="denied-job"),
                          denied_message("alice", "batch:SubmitJob", JD + "denied", explicit=True))
        self.assertEqual(self.jobs_named("qa", "denied-job"), [])

    def test_tag_conditions(self):
        bob = self.client("bob")
        bob.update_job_queue(jobQueue="qb", priority=7)  # qb has team=b
        self.assertEqual(self.admin.describe_job_queues(jobQueues=["qb"])["jobQueues"][0]["priority"], 7)
        self.assertDenied(lambda: bob.update_job_queue(jobQueue="qa", priority=9),
                          denied_message("bob", "batch:UpdateJobQueue", Q + "qa"))
        self.assertEqual(self.admin.describe_job_queues(jobQueues=["qa"])["jobQueues"][0]["priority"], 1)
        order = [{"order": 1, "computeEnvironment": "ce"}]
        bob.create_job_queue(jobQueueName="qb2", priority=1, tags={"team": "b"},
                             computeEnvironmentOrder=order)
        self.assertDenied(lambda: bob.create_job_queue(jobQueueName="qa2", priority=1,
                                                       tags={"team": "a"}, computeEnvironmentOrder=order),
                          denied_message("bob", "batch:CreateJobQueue", Q + "qa2"))
        names = [q["jobQueueName"] for q in self.admin.describe_job_queues()["jobQueues"]]
        self.assertIn("qb2", names)
        self.assertNotIn("qa2", names)

    def test_cancel_and_terminate_own_jobs_only(self):
        job = self.submit("alice", "qa", "defa", command=["sleep", "300"], name="long-a")["jobId"]
        self.assertDenied(lambda: self.client("bob").terminate_job(jobId=job, reason="not mine"),
                          denied_message("bob", "batch:TerminateJob",
                                         "arn:aws:batch:us-east-1:%s:job/%s" % (ACCOUNT, job)))
        self.assertDenied(lambda: self.client("bob").cancel_job(jobId=job, reason="not mine"),
                          denied_message("bob", "batch:CancelJob",
                                         "arn:aws:batch:us-east-1:%s:job/%s" % (ACCOUNT, job)))
        self.wait_status(job, ("RUNNING",))
        self.client("alice").terminate_job(jobId=job, reason="mine")
        self.assertEqual(self.wait_status(job, ("SUCCEEDED", "FAILED")), "FAILED")
        detail = self.admin.describe_jobs(jobs=[job])["jobs"][0]
        self.assertEqual(detail["statusReason"], "mine")

    def test_log_streams_of_another_principal(self):
        job = self.submit("alice", "qa", "defa", command=["echo", "alice-secret-output"],
                          name="logs-a")["jobId"]
        self.assertEqual(self.wait_status(job, ("SUCCEEDED", "FAILED")), "SUCCEEDED")
        detail = self.admin.describe_jobs(jobs=[job])["jobs"][0]
        stream = detail["container"]["logStreamName"]
        self.assertTrue(stream.startswith("defa/"), stream)
        self.assertEqual(self.server.job_output(self.admin_logs, detail), ["alice-secret-output"])
        alice, bob = self.client("alice", "logs"), self.client("bob", "logs")
        events = alice.get_log_events(logGroupName="/aws/batch/job", logStreamName=stream,
                                      startFromHead=True)["events"]
        self.assertEqual([e["message"] for e in events], ["alice-secret-output"])
        self.assertDenied(lambda: bob.get_log_events(logGroupName="/aws/batch/job",
                                                     logStreamName=stream, startFromHead=True),
                          denied_message("bob", "logs:GetLogEvents", STREAMS + stream))
        self.assertDenied(lambda: bob.filter_log_events(logGroupName="/aws/batch/job",
                                                        logStreamNames=[stream]),
                          denied_message("bob", "logs:FilterLogEvents", STREAMS + stream))
        self.assertDenied(lambda: bob.filter_log_events(logGroupName="/aws/batch/job"),
                          denied_message("bob", "logs:FilterLogEvents",
                                         "arn:aws:logs:us-east-1:%s:log-group:/aws/batch/job" % ACCOUNT))

    def test_js_sdk_two_principals(self):
        if not shutil.which("node"):
            raise AssertionError("node is not installed (scripts/install-deps.sh installs it)")
        if not os.path.isdir(os.path.join(SDK, "node_modules", "@aws-sdk", "client-batch")):
            raise AssertionError("the JS SDK is not installed in %s: run scripts/fetch-js-sdk.sh %s"
                                 % (SDK, SDK))
        job = self.submit("alice", "qa", "defa", command=["echo", "js-visible"], name="js-logs")["jobId"]
        self.wait_status(job, ("SUCCEEDED", "FAILED"))
        detail = self.admin.describe_jobs(jobs=[job])["jobs"][0]
        self.server.job_output(self.admin_logs, detail)
        spec = {"alice": list(self.keys["alice"]), "bob": list(self.keys["bob"]),
                "alice_stream": detail["container"]["logStreamName"]}
        proc = subprocess.run(["node", os.path.join(HERE, "js_iam_client.cjs"), SDK, self.server.endpoint,
                               "us-east-1", json.dumps(spec)], capture_output=True, text=True, timeout=120)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        out = json.loads(lines[-1]) if lines else {"fatal": proc.stdout + proc.stderr}
        self.assertNotIn("fatal", out, out.get("fatal"))
        self.assertTrue(out["alice_submit_qa"]["ok"], out["alice_submit_qa"])
        refused = out["bob_submit_qa"]
        self.assertEqual((refused["ok"], refused["name"], refused["status"]),
                         (False, "AccessDeniedException", 403), refused)
        self.assertEqual(refused["message"], denied_message("bob", "batch:SubmitJob", Q + "qa"))
        self.assertIn("qa", out["bob_describe_queues"])
        self.assertEqual(out["bob_reads_alice_stream"]["name"], "AccessDeniedException")
        self.assertEqual(out["alice_reads_own_stream"], ["js-visible"])

    def test_console_signs_in_per_principal(self):
        job = self.submit("alice", "qa", "defa", command=["echo", "console-a"], name="console-a")["jobId"]
        self.wait_status(job, ("SUCCEEDED", "FAILED"))
        detail = self.admin.describe_jobs(jobs=[job])["jobs"][0]
        self.server.job_output(self.admin_logs, detail)
        with open(os.path.join(self.server.home, "console.json")) as f:
            url = json.load(f)["url"]

        def call(method, path, body, headers):
            req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode(),
                                         headers=dict(headers, **{"Content-Type": "application/json"}))
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, json.loads(r.read() or b"{}"), dict(r.headers)
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"{}"), dict(e.headers)

        def sign_in(who):
            key, secret = self.keys[who]
            status, body, headers = call("POST", "api/signin",
                                         {"accessKeyId": key, "secretAccessKey": secret}, {})
            self.assertEqual(status, 200, body)
            cookie = headers["Set-Cookie"].split(";")[0]
            req = urllib.request.Request(url + "api/session", headers={"Cookie": cookie})
            with urllib.request.urlopen(req, timeout=30) as r:
                session = json.loads(r.read())
            self.assertEqual(session["principal"], key)
            return {"Cookie": cookie, "X-CSRF-Token": session["csrfToken"]}

        read = {"logGroupName": "/aws/batch/job", "logStreamName": detail["container"]["logStreamName"],
                "startFromHead": True}
        status, body, _ = call("POST", "api/logs/GetLogEvents", read, sign_in("bob"))
        self.assertEqual(status, 403, body)
        self.assertIn("logs:GetLogEvents", json.dumps(body))
        status, body, _ = call("POST", "api/logs/GetLogEvents", read, sign_in("alice"))
        self.assertEqual(status, 200, body)
        self.assertEqual([e["message"] for e in body["events"]], ["console-a"])
        status, body, _ = call("POST", "api/signin", {"accessKeyId": self.keys["bob"][0],
                                                      "secretAccessKey": "wrong"}, {})
        self.assertEqual(status, 401, body)

    # --- job users ------------------------------------------------------------
    def test_jobs_run_as_a_mapped_unix_user_only(self):
        self.keys["nina"] = self.lote.user("nina", ALICE_POLICY, unix_users=["nobody"])
        job = self.submit("nina", "qa", "as-nobody", command=["id", "-un"], name="nina-nobody")["jobId"]
        status = self.wait_status(job, ("SUCCEEDED", "FAILED"))
        if os.geteuid() == 0:
            self.assertEqual(status, "SUCCEEDED")
            detail = self.admin.describe_jobs(jobs=[job])["jobs"][0]
            self.assertEqual(self.server.job_output(self.admin_logs, detail), ["nobody"])
        else:  # only root can start a job as another user
            self.assertEqual(status, "FAILED")
        nina = "arn:aws:iam::%s:user/nina" % ACCOUNT
        self.assertDenied(lambda: self.submit("nina", "qa", "as-root", name="nina-root"),
                          "User: %s is not allowed to run jobs as the Unix user 'root' (the user of "
                          "job definition as-root); its Unix users are: nobody "
                          "(lote users set-unix-users)" % nina)
        self.assertEqual(self.jobs_named("qa", "nina-root"), [])
        # A definition without `user` runs as the server's own user: refused too
        # (unless the server runs as nobody).
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.submit("nina", "qa", "defa", name="nina-server-user")
        self.assertIn("names no user", ctx.exception.response["Error"]["Message"])
        # Granting root (via the CLI) lets it through.
        self.lote.run("users", "set-unix-users", "nina", "nobody", "root")
        self.submit("nina", "qa", "as-root", name="nina-root-granted")
        self.assertEqual(len(self.jobs_named("qa", "nina-root-granted")), 1)

    # --- identity and keys -----------------------------------------------------
    def test_caller_identity_is_the_principal(self):
        who = self.client("alice", "sts").get_caller_identity()
        self.assertEqual(who["Arn"], "arn:aws:iam::%s:user/alice" % ACCOUNT)
        env = dict(self.server.env(), AWS_ACCESS_KEY_ID=self.keys["bob"][0],
                   AWS_SECRET_ACCESS_KEY=self.keys["bob"][1])
        env.pop("AWS_PROFILE", None)
        out = subprocess.run(["aws", "sts", "get-caller-identity", "--output", "json"], env=env,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        self.assertEqual(json.loads(out)["Arn"], "arn:aws:iam::%s:user/bob" % ACCOUNT)

    def test_rotated_and_deleted_keys_stop_at_once(self):
        key, secret = self.lote.user("carol", {"Statement": [READ]})
        old = self.server.client("batch", key=key, secret=secret)
        old.describe_job_queues()
        rotated = self.lote.json("keys", "rotate", "carol", key)["AccessKey"]
        self.assertNotEqual(rotated["AccessKeyId"], key)
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            old.describe_job_queues()
        self.assertEqual(ctx.exception.response["Error"]["Code"], "UnrecognizedClientException")
        new = self.server.client("batch", key=rotated["AccessKeyId"], secret=rotated["SecretAccessKey"])
        new.describe_job_queues()
        self.lote.run("keys", "delete", "carol", rotated["AccessKeyId"])
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            new.describe_job_queues()
        self.assertEqual(ctx.exception.response["Error"]["Code"], "UnrecognizedClientException")
        shown = self.lote.json("users", "show", "carol")["User"]
        self.assertEqual(shown["AccessKeys"], [])

    def test_bad_policy_is_refused_and_creates_nothing(self):
        path = os.path.join(self.server.home, "bad.json")
        with open(path, "w") as f:
            f.write('{"Statement": [{"Effect": "Perhaps", "Action": "*", "Resource": "*"}]}')
        proc = self.lote.run("users", "create", "eve", "--policy-file", path, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Effect", proc.stderr)
        users = [u["UserName"] for u in self.lote.json("users", "list")["Users"]]
        self.assertNotIn("eve", users)


class AuditTest(unittest.TestCase):
    """Every mutation and every refused call, in order, durably."""

    def test_audit_holds_every_call_in_order(self):
        server = LoteServer(LOTE).start()
        try:
            lote = Lote(server)
            admin = server.client("batch")
            key, secret = lote.user("dave", {"Statement": [
                READ, {"Effect": "Allow", "Action": "batch:CreateComputeEnvironment", "Resource": "*"}]})
            dave = server.client("batch", key=key, secret=secret)
            ce = "arn:aws:batch:us-east-1:%s:compute-environment/" % ACCOUNT
            dave.create_compute_environment(computeEnvironmentName="dce", type="UNMANAGED")
            dave.describe_compute_environments()  # a read: not audited
            with self.assertRaises(botocore.exceptions.ClientError):
                dave.create_job_queue(jobQueueName="dq", priority=1, computeEnvironmentOrder=[
                    {"order": 1, "computeEnvironment": "dce"}])
            with self.assertRaises(botocore.exceptions.ClientError):
                dave.create_compute_environment(computeEnvironmentName="dce", type="UNMANAGED")
            with self.assertRaises(botocore.exceptions.ClientError):
                dave.delete_compute_environment(computeEnvironment="dce")
            admin.update_compute_environment(computeEnvironment="dce", state="DISABLED")
            expected_dave = [
                ("batch:CreateComputeEnvironment", ce + "dce", "Allowed"),
                ("batch:CreateJobQueue", Q + "dq", "AccessDenied"),
                ("batch:CreateComputeEnvironment", ce + "dce", "ClientException"),
                ("batch:DeleteComputeEnvironment", ce + "dce", "AccessDenied"),
            ]
            expected_admin = [
                ("iam:CreateUser", "arn:aws:iam::%s:user/dave" % ACCOUNT, "Allowed"),
                ("iam:CreateAccessKey", "arn:aws:iam::%s:user/dave" % ACCOUNT, "Allowed"),
                ("batch:UpdateComputeEnvironment", ce + "dce", "Allowed"),
            ]

            def check():
                rows = lote.json("audit", "--json")
                got = [(e["Username"], e["EventName"], e["Resources"], e["Result"]) for e in rows]
                want = ([("admin",) + expected_admin[0], ("admin",) + expected_admin[1]] +
                        [("dave",) + e for e in expected_dave] + [("admin",) + expected_admin[2]])
                self.assertEqual(got, want)
                times = [e["EventTime"] for e in rows]
                self.assertEqual(times, sorted(times))
                only_dave = lote.json("audit", "--json", "--principal", "dave")
                self.assertEqual([(e["EventName"], e["Resources"], e["Result"]) for e in only_dave],
                                 expected_dave)
                self.assertEqual(lote.json("audit", "--json", "--since", "1d"), rows)
                table = lote.run("audit").stdout
                self.assertIn("batch:DeleteComputeEnvironment", table)

            check()
            server.stop()
            server.start()  # the audit is durable
            check()
        finally:
            server.cleanup()


def main():
    global LOTE, SDK
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    parser.add_argument("--sdk", default=os.environ.get("LOTE_JS_SDK", os.path.join(ROOT, ".cache", "js-sdk")))
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    SDK = os.path.abspath(args.sdk)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
