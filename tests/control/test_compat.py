"""Compatibility tests: a real `lote server` driven by the aws CLI and boto3.

Run: python3 test_compat.py --lote build/lote
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from unittest import mock

import botocore.auth
import botocore.exceptions

from lote_server import LoteServer

LOTE = None
ACCOUNT = "000000000000"
REGION = "us-east-1"


def arn(resource):
    return "arn:aws:batch:%s:%s:%s" % (REGION, ACCOUNT, resource)


# Shaped like the reference recipe's templates.
CE_TEMPLATE = {
    "computeEnvironmentName": "llama2-ce",
    "type": "MANAGED",
    "state": "ENABLED",
    "computeResources": {
        "type": "EC2",
        "allocationStrategy": "BEST_FIT",
        "minvCpus": 0,
        "maxvCpus": 2088,
        "desiredvCpus": 0,
        "instanceTypes": ["trn1.32xlarge"],
        "subnets": ["subnet-0123456789abcdef0"],
        "securityGroupIds": ["sg-0123456789abcdef0"],
        "instanceRole": "arn:aws:iam::000000000000:instance-profile/ecsInstanceRole",
        "placementGroup": "cluster",
        "launchTemplate": {"launchTemplateName": "llama2-lt", "version": "$Latest"},
    },
    "tags": {"project": "llama2"},
}
QUEUE_TEMPLATE = {
    "jobQueueName": "llama2-queue",
    "state": "ENABLED",
    "priority": 1,
    "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "llama2-ce"}],
}
JOBDEF_TEMPLATE = {
    "jobDefinitionName": "llama2-train",
    "type": "multinode",
    "nodeProperties": {
        "numNodes": 4,
        "mainNode": 0,
        "nodeRangeProperties": [{
            "targetNodes": "0:",
            "container": {
                "image": "000000000000.dkr.ecr.us-east-1.amazonaws.com/llama2:latest",
                "command": ["/workspace/train.sh"],
                "vcpus": 96,
                "memory": 500000,
                "user": "root",
                "ulimits": [{"name": "memlock", "softLimit": -1, "hardLimit": -1}],
                "linuxParameters": {"devices": [
                    {"hostPath": "/dev/neuron%d" % i, "containerPath": "/dev/neuron%d" % i,
                     "permissions": ["READ", "WRITE"]} for i in range(16)] + [
                    {"hostPath": "/dev/infiniband/uverbs0",
                     "containerPath": "/dev/infiniband/uverbs0",
                     "permissions": ["READ", "WRITE", "MKNOD"]}]},
                "environment": [{"name": "DO_PRE_COMPILATION", "value": "true"}],
            },
        }],
    },
    "retryStrategy": {"attempts": 1},
}


class ServerCase(unittest.TestCase):
    """One server per test class."""

    extra_args = ()

    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE, extra_args=cls.extra_args).start()
        cls.batch = cls.server.client()
        # CE_TEMPLATE names these; CreateComputeEnvironment checks they exist.
        ec2 = cls.server.client("ec2")
        ec2.create_placement_group(GroupName="cluster", Strategy="cluster")
        ec2.create_launch_template(LaunchTemplateName="llama2-lt",
                                   LaunchTemplateData={"InstanceType": "trn1.32xlarge"})
        ec2.close()

    @classmethod
    def tearDownClass(cls):
        cls.batch.close()
        cls.server.cleanup()

    def assertClientError(self, fn, code, *fragments, **kwargs):
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            fn(**kwargs)
        err = ctx.exception.response["Error"]
        self.assertEqual(err["Code"], code, err)
        for f in fragments:
            self.assertIn(f, err["Message"])
        return err["Message"]

    def wait_status(self, kind, name, status="VALID"):
        for _ in range(100):
            if kind == "ce":
                items = self.batch.describe_compute_environments(
                    computeEnvironments=[name])["computeEnvironments"]
            else:
                items = self.batch.describe_job_queues(jobQueues=[name])["jobQueues"]
            if status is None and not items:
                return None
            if items and items[0]["status"] == status:
                return items[0]
            time.sleep(0.05)
        self.fail("%s %s never reached %s" % (kind, name, status))


class AwsCliTest(ServerCase):
    """The stock aws CLI with --cli-input-json, as the recipe's scripts do."""

    def aws(self, *args, cli="aws", check=True):
        env = self.server.env()
        cmd = [cli] + list(args)
        if cli != "aws":
            cmd = [cli, "--endpoint-url", self.server.endpoint] + list(args)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            self.fail("%s failed: %s" % (" ".join(cmd), proc.stderr))
        return proc

    def test_recipe_flow_with_cli_input_json(self):
        tmp = tempfile.mkdtemp(prefix="lote_cli_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        files = {}
        for name, doc in (("ce", CE_TEMPLATE), ("queue", QUEUE_TEMPLATE), ("jd", JOBDEF_TEMPLATE)):
            files[name] = os.path.join(tmp, name + ".json")
            with open(files[name], "w") as f:
                json.dump(doc, f)
        out = json.loads(self.aws("batch", "create-compute-environment", "--cli-input-json",
                                  "file://" + files["ce"]).stdout)
        self.assertEqual(out["computeEnvironmentArn"], arn("compute-environment/llama2-ce"))
        jd = json.loads(self.aws("batch", "register-job-definition", "--cli-input-json",
                                 "file://" + files["jd"]).stdout)
        self.assertEqual(jd["revision"], 1)
        self.wait_status("ce", "llama2-ce")
        self.aws("batch", "create-job-queue", "--cli-input-json", "file://" + files["queue"])
        queue = self.wait_status("queue", "llama2-queue")
        self.assertEqual(queue["priority"], 1)
        self.assertEqual(queue["computeEnvironmentOrder"][0]["computeEnvironment"],
                         arn("compute-environment/llama2-ce"))
        # `eval "$(lote env)"; aws batch describe-job-queues` (CLI v1 honours
        # AWS_ENDPOINT_URL_BATCH).
        listed = json.loads(self.aws("batch", "describe-job-queues").stdout)
        self.assertEqual([q["jobQueueName"] for q in listed["jobQueues"]], ["llama2-queue"])
        described = json.loads(self.aws("batch", "describe-job-definitions", "--job-definitions",
                                        "llama2-train:1").stdout)["jobDefinitions"][0]
        node = described["nodeProperties"]["nodeRangeProperties"][0]["container"]
        self.assertEqual(node["vcpus"], 96)
        self.assertEqual(node["ulimits"][0]["softLimit"], -1)
        # An error path through the CLI: message names the problem.
        bad = self.aws("batch", "delete-job-queue", "--job-queue", "llama2-queue", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("ClientException", bad.stderr)
        self.assertIn("disable it first", bad.stderr)
        # Cleanup as the recipe does (boto3 here: each CLI start costs seconds).
        self.batch.update_job_queue(jobQueue="llama2-queue", state="DISABLED")
        self.batch.delete_job_queue(jobQueue="llama2-queue")
        self.wait_status("queue", "llama2-queue", None)
        self.batch.update_compute_environment(computeEnvironment="llama2-ce", state="DISABLED")
        self.batch.delete_compute_environment(computeEnvironment="llama2-ce")
        self.wait_status("ce", "llama2-ce", None)
        self.batch.deregister_job_definition(jobDefinition="llama2-train:1")

    def test_cli_v2_needs_endpoint_url(self):
        # Debian's aws CLI v2 (2.9) predates AWS_ENDPOINT_URL_<SERVICE>; with
        # --endpoint-url it works against lote unchanged.
        if not os.path.exists("/usr/bin/aws"):
            self.skipTest("Debian awscli v2 not installed")
        out = self.aws("batch", "describe-job-queues", cli="/usr/bin/aws")
        self.assertIn("jobQueues", json.loads(out.stdout))


class ComputeEnvironmentTest(ServerCase):
    def ce(self, name, **overrides):
        doc = json.loads(json.dumps(CE_TEMPLATE))
        doc["computeEnvironmentName"] = name
        doc["computeResources"].update(overrides)
        return doc

    def test_lifecycle_and_update(self):
        out = self.batch.create_compute_environment(**self.ce("ce-life"))
        self.assertEqual(out["computeEnvironmentName"], "ce-life")
        first = self.batch.describe_compute_environments(computeEnvironments=["ce-life"])
        self.assertIn(first["computeEnvironments"][0]["status"], ("CREATING", "VALID"))
        ce = self.wait_status("ce", "ce-life")
        self.assertEqual(ce["state"], "ENABLED")
        self.assertEqual(ce["computeResources"]["maxvCpus"], 2088)
        self.assertEqual(ce["tags"], {"project": "llama2"})
        self.batch.update_compute_environment(
            computeEnvironment=out["computeEnvironmentArn"],
            computeResources={"maxvCpus": 256, "desiredvCpus": 128})
        ce = self.wait_status("ce", "ce-life")
        self.assertEqual(ce["computeResources"]["maxvCpus"], 256)
        self.assertEqual(ce["computeResources"]["desiredvCpus"], 128)
        self.assertClientError(self.batch.delete_compute_environment, "ClientException",
                               "ENABLED", "disable it first", computeEnvironment="ce-life")
        self.batch.update_compute_environment(computeEnvironment="ce-life", state="DISABLED")
        self.batch.delete_compute_environment(computeEnvironment="ce-life")
        self.wait_status("ce", "ce-life", None)

    def test_errors(self):
        self.batch.create_compute_environment(**self.ce("ce-dup", instanceTypes=["local"]))
        self.assertClientError(self.batch.create_compute_environment, "ClientException",
                               "ce-dup already exists", **self.ce("ce-dup"))
        self.assertClientError(self.batch.create_compute_environment, "ClientException",
                               "z9.huge", "instance catalog", **self.ce("ce-x", instanceTypes=["z9.huge"]))
        self.assertClientError(self.batch.create_compute_environment, "ClientException",
                               "minvCpus", **self.ce("ce-x", minvCpus=10, maxvCpus=4, desiredvCpus=4))
        self.assertClientError(self.batch.create_compute_environment, "ClientException",
                               "contains the character", **self.ce("bad/name"))
        self.assertClientError(self.batch.create_compute_environment, "ClientException",
                               "128", **self.ce("n" * 129))
        self.assertClientError(self.batch.create_compute_environment, "ClientException",
                               "FARGATE", **self.ce("ce-f", type="FARGATE"))
        self.assertClientError(self.batch.update_compute_environment, "ClientException",
                               "does not exist", computeEnvironment="nope")
        self.assertClientError(self.batch.delete_compute_environment, "ClientException",
                               "does not exist", computeEnvironment="nope")

    def test_limit_of_50(self):
        existing = len(self.batch.describe_compute_environments()["computeEnvironments"])
        for i in range(50 - existing):
            self.batch.create_compute_environment(computeEnvironmentName="lim%d" % i, type="UNMANAGED")
        self.assertClientError(self.batch.create_compute_environment, "ClientException", "50",
                               computeEnvironmentName="lim-over", type="UNMANAGED")
        pages = list(self.batch.get_paginator("describe_compute_environments").paginate(
            PaginationConfig={"PageSize": 7}))
        self.assertEqual(len(pages), 8)
        self.assertEqual(sum(len(p["computeEnvironments"]) for p in pages), 50)
        for i in range(50 - existing):
            self.batch.update_compute_environment(computeEnvironment="lim%d" % i, state="DISABLED")
            self.batch.delete_compute_environment(computeEnvironment="lim%d" % i)


class JobQueueTest(ServerCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for i in range(4):
            cls.batch.create_compute_environment(
                computeEnvironmentName="qce%d" % i, type="MANAGED",
                computeResources={"type": "EC2", "maxvCpus": 16, "instanceTypes": ["c5.xlarge"],
                                  "subnets": ["s"]})

    def order(self, *names):
        return [{"order": i + 1, "computeEnvironment": n} for i, n in enumerate(names)]

    def test_lifecycle(self):
        q = self.batch.create_job_queue(jobQueueName="q-life", priority=5,
                                        computeEnvironmentOrder=self.order("qce0", "qce1"),
                                        tags={"team": "ml"})
        self.assertEqual(q["jobQueueArn"], arn("job-queue/q-life"))
        got = self.wait_status("queue", "q-life")
        self.assertEqual(got["tags"], {"team": "ml"})
        self.batch.update_job_queue(jobQueue=q["jobQueueArn"], priority=9,
                                    computeEnvironmentOrder=self.order("qce2"))
        got = self.wait_status("queue", "q-life")
        self.assertEqual(got["priority"], 9)
        self.assertEqual(len(got["computeEnvironmentOrder"]), 1)
        self.assertClientError(self.batch.delete_job_queue, "ClientException", "disable it first",
                               jobQueue="q-life")
        self.batch.update_job_queue(jobQueue="q-life", state="DISABLED")
        self.batch.delete_job_queue(jobQueue="q-life")
        self.assertEqual(self.batch.describe_job_queues(jobQueues=["q-life"])["jobQueues"][0]["status"]
                         if self.batch.describe_job_queues(jobQueues=["q-life"])["jobQueues"] else "DELETING",
                         "DELETING")
        self.wait_status("queue", "q-life", None)

    def test_errors(self):
        self.assertClientError(self.batch.create_job_queue, "ClientException", "at most 3",
                               jobQueueName="q4", priority=1,
                               computeEnvironmentOrder=self.order("qce0", "qce1", "qce2", "qce3"))
        self.assertClientError(self.batch.create_job_queue, "ClientException", "does not exist",
                               jobQueueName="qx", priority=1,
                               computeEnvironmentOrder=self.order("missing-ce"))
        self.assertClientError(self.batch.create_job_queue, "ClientException", "jobQueueName",
                               jobQueueName="bad name", priority=1,
                               computeEnvironmentOrder=self.order("qce0"))
        self.batch.create_job_queue(jobQueueName="q-uses", priority=1,
                                    computeEnvironmentOrder=self.order("qce3"))
        self.batch.update_compute_environment(computeEnvironment="qce3", state="DISABLED")
        self.assertClientError(self.batch.delete_compute_environment, "ClientException",
                               "used by job queue q-uses", computeEnvironment="qce3")
        self.assertClientError(self.batch.create_job_queue, "ClientException", "already exists",
                               jobQueueName="q-uses", priority=1,
                               computeEnvironmentOrder=self.order("qce0"))
        self.assertClientError(self.batch.update_job_queue, "ClientException", "does not exist",
                               jobQueue="nope", priority=1)

    def test_limit_of_50_queues(self):
        existing = len(self.batch.describe_job_queues()["jobQueues"])
        for i in range(50 - existing):
            self.batch.create_job_queue(jobQueueName="lq%d" % i, priority=1,
                                        computeEnvironmentOrder=self.order("qce0"))
        self.assertClientError(self.batch.create_job_queue, "ClientException", "50 job queues",
                               jobQueueName="lq-over", priority=1,
                               computeEnvironmentOrder=self.order("qce0"))
        for i in range(50 - existing):
            self.batch.update_job_queue(jobQueue="lq%d" % i, state="DISABLED")
            self.batch.delete_job_queue(jobQueue="lq%d" % i)


class JobDefinitionTest(ServerCase):
    def test_revisions_references_and_deregister(self):
        r1 = self.batch.register_job_definition(**JOBDEF_TEMPLATE)
        r2 = self.batch.register_job_definition(**JOBDEF_TEMPLATE)
        self.assertEqual((r1["revision"], r2["revision"]), (1, 2))
        self.assertEqual(r2["jobDefinitionArn"], arn("job-definition/llama2-train:2"))
        by_name = self.batch.describe_job_definitions(jobDefinitionName="llama2-train")
        self.assertEqual([d["revision"] for d in by_name["jobDefinitions"]], [1, 2])
        by_ref = self.batch.describe_job_definitions(
            jobDefinitions=["llama2-train:1", r2["jobDefinitionArn"]])
        self.assertEqual(len(by_ref["jobDefinitions"]), 2)
        self.batch.deregister_job_definition(jobDefinition=r1["jobDefinitionArn"])
        active = self.batch.describe_job_definitions(jobDefinitionName="llama2-train", status="ACTIVE")
        self.assertEqual([d["revision"] for d in active["jobDefinitions"]], [2])
        inactive = self.batch.describe_job_definitions(status="INACTIVE")["jobDefinitions"]
        self.assertEqual(inactive[0]["status"], "INACTIVE")
        container = self.batch.register_job_definition(
            jobDefinitionName="hello", type="container",
            containerProperties={"image": "busybox", "command": ["echo", "Ref::msg"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "512"}]},
            parameters={"msg": "hi"}, timeout={"attemptDurationSeconds": 60},
            tags={"k": "v"})
        got = self.batch.describe_job_definitions(jobDefinitions=[container["jobDefinitionArn"]])
        self.assertEqual(got["jobDefinitions"][0]["parameters"], {"msg": "hi"})
        self.assertEqual(got["jobDefinitions"][0]["tags"], {"k": "v"})

    def test_errors(self):
        big = json.loads(json.dumps(JOBDEF_TEMPLATE))
        big["jobDefinitionName"] = "big"
        big["nodeProperties"]["nodeRangeProperties"][0]["container"]["command"] = ["x" * 25000]
        self.assertClientError(self.batch.register_job_definition, "ClientException", "24 KiB", **big)
        gap = json.loads(json.dumps(JOBDEF_TEMPLATE))
        gap["nodeProperties"]["nodeRangeProperties"][0]["targetNodes"] = "1:"
        self.assertClientError(self.batch.register_job_definition, "ClientException",
                               "node 0 is in no", **gap)
        main = json.loads(json.dumps(JOBDEF_TEMPLATE))
        main["nodeProperties"]["mainNode"] = 7
        self.assertClientError(self.batch.register_job_definition, "ClientException",
                               "mainNode", **main)
        self.assertClientError(self.batch.register_job_definition, "ClientException",
                               "containerProperties is required", jobDefinitionName="c",
                               type="container")
        self.assertClientError(self.batch.deregister_job_definition, "ClientException",
                               "does not exist", jobDefinition="nope:1")
        self.assertClientError(self.batch.describe_job_definitions, "ClientException",
                               "nextToken is not valid", nextToken="garbage")

    def test_pagination_over_250(self):
        for i in range(250):
            self.batch.register_job_definition(
                jobDefinitionName="page-%03d" % (i % 60), type="container",
                containerProperties={"image": "x", "command": [str(i)]})
        seen = []
        pages = 0
        for page in self.batch.get_paginator("describe_job_definitions").paginate(
                status="ACTIVE", PaginationConfig={"PageSize": 30}):
            pages += 1
            seen += [d["jobDefinitionArn"] for d in page["jobDefinitions"]
                     if d["jobDefinitionName"].startswith("page-")]
        self.assertEqual(len(seen), 250)
        self.assertEqual(len(set(seen)), 250)
        self.assertGreaterEqual(pages, 9)
        # Default page size is 100 with a nextToken.
        first = self.batch.describe_job_definitions()
        self.assertEqual(len(first["jobDefinitions"]), 100)
        self.assertIn("nextToken", first)


class SchedulingPolicyAndTagsTest(ServerCase):
    def test_policies(self):
        p = self.batch.create_scheduling_policy(
            name="fair", fairsharePolicy={"shareDecaySeconds": 3600, "computeReservation": 5,
                                          "shareDistribution": [{"shareIdentifier": "teamA",
                                                                 "weightFactor": 0.5}]},
            tags={"a": "b"})
        self.assertEqual(p["arn"], arn("scheduling-policy/fair"))
        listed = self.batch.list_scheduling_policies()["schedulingPolicies"]
        self.assertEqual([x["arn"] for x in listed], [p["arn"]])
        self.batch.update_scheduling_policy(arn=p["arn"], fairsharePolicy={"shareDecaySeconds": 60})
        got = self.batch.describe_scheduling_policies(arns=[p["arn"]])["schedulingPolicies"][0]
        self.assertEqual(got["fairsharePolicy"]["shareDecaySeconds"], 60)
        self.assertEqual(got["tags"], {"a": "b"})
        self.batch.create_compute_environment(computeEnvironmentName="fce", type="UNMANAGED")
        self.batch.create_job_queue(jobQueueName="fq", priority=1, schedulingPolicyArn=p["arn"],
                                    computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "fce"}])
        self.assertClientError(self.batch.delete_scheduling_policy, "ClientException",
                               "used by job queue fq", arn=p["arn"])
        self.assertClientError(self.batch.create_scheduling_policy, "ClientException",
                               "weightFactor", name="bad",
                               fairsharePolicy={"shareDistribution": [{"shareIdentifier": "x",
                                                                       "weightFactor": 5000.0}]})
        self.assertClientError(self.batch.create_scheduling_policy, "ClientException",
                               "already exists", name="fair")
        self.batch.create_scheduling_policy(name="gone")
        self.batch.delete_scheduling_policy(arn=arn("scheduling-policy/gone"))
        self.assertEqual(self.batch.describe_scheduling_policies(
            arns=[arn("scheduling-policy/gone")])["schedulingPolicies"], [])

    def test_tags(self):
        self.batch.create_compute_environment(computeEnvironmentName="tce", type="UNMANAGED")
        r = arn("compute-environment/tce")
        self.batch.tag_resource(resourceArn=r, tags={"team": "ml", "env": "dev"})
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=r)["tags"],
                         {"team": "ml", "env": "dev"})
        self.batch.untag_resource(resourceArn=r, tagKeys=["env"])
        self.assertEqual(self.batch.list_tags_for_resource(resourceArn=r)["tags"], {"team": "ml"})
        jd = self.batch.register_job_definition(jobDefinitionName="tjd", type="container",
                                                containerProperties={"image": "x"})
        self.batch.tag_resource(resourceArn=jd["jobDefinitionArn"], tags={"x": "y"})
        self.assertEqual(self.batch.list_tags_for_resource(
            resourceArn=jd["jobDefinitionArn"])["tags"], {"x": "y"})
        self.assertClientError(self.batch.tag_resource, "ClientException", "does not exist",
                               resourceArn=arn("job-queue/none"), tags={"a": "b"})
        self.assertClientError(self.batch.tag_resource, "ClientException", "reserved prefix",
                               resourceArn=r, tags={"aws:x": "b"})
        self.assertClientError(self.batch.list_tags_for_resource, "ClientException",
                               "does not exist", resourceArn=arn("compute-environment/none"))


class AuthTest(ServerCase):
    def test_unsigned_request_is_rejected(self):
        req = urllib.request.Request(self.server.endpoint + "/v1/describejobqueues", data=b"{}",
                                     method="POST", headers={"Content-Type": "application/json"})
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(ctx.exception.code, 403)
        self.assertEqual(ctx.exception.headers["x-amzn-ErrorType"],
                         "MissingAuthenticationTokenException")
        self.assertEqual(json.loads(ctx.exception.read())["__type"],
                         "MissingAuthenticationTokenException")

    def test_unknown_key(self):
        c = self.server.client(key="AKIDNOTKNOWN00000000", secret="x")
        self.assertClientError(c.describe_job_queues, "UnrecognizedClientException", "AKIDNOTKNOWN")

    def test_wrong_secret(self):
        c = self.server.client(secret="definitely-not-the-secret")
        self.assertClientError(c.describe_job_queues, "InvalidSignatureException", "does not match")

    def test_wrong_region(self):
        c = self.server.client(region="eu-west-1")
        self.assertClientError(c.describe_job_queues, "InvalidSignatureException", "eu-west-1")

    def test_stale_signature(self):
        stale = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - \
            datetime.timedelta(minutes=20)
        with mock.patch.object(botocore.auth, "get_current_datetime", return_value=stale):
            self.assertClientError(self.batch.describe_job_queues, "InvalidSignatureException",
                                   "Signature expired")

    def test_malformed_authorization(self):
        req = urllib.request.Request(
            self.server.endpoint + "/v1/describejobqueues", data=b"{}", method="POST",
            headers={"Authorization": "AWS4-HMAC-SHA256 Credential=nonsense",
                     "X-Amz-Date": "20250101T000000Z"})
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            urllib.request.urlopen(req, timeout=10)
        self.assertEqual(json.loads(ctx.exception.read())["__type"], "IncompleteSignatureException")


class InsecureNoAuthTest(ServerCase):
    extra_args = ("--insecure-no-auth",)

    def test_unsigned_accepted_and_logged_loudly(self):
        req = urllib.request.Request(self.server.endpoint + "/v1/describejobqueues", data=b"{}",
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            self.assertEqual(json.loads(resp.read()), {"jobQueues": []})
        self.assertIn("--insecure-no-auth", self.server.stderr())
        self.assertIn("NOT authenticated", self.server.stderr())


class RestartTest(unittest.TestCase):
    def test_state_and_credentials_survive_restart(self):
        server = LoteServer(LOTE).start()
        try:
            c = server.client()
            c.create_compute_environment(computeEnvironmentName="keep", type="UNMANAGED",
                                         tags={"k": "v"})
            c.register_job_definition(jobDefinitionName="keep", type="container",
                                      containerProperties={"image": "x"})
            key = server.credentials()
            server.stop()
            server.start()
            self.assertEqual(server.credentials(), key)
            c = server.client()
            ce = c.describe_compute_environments()["computeEnvironments"]
            self.assertEqual([x["computeEnvironmentName"] for x in ce], ["keep"])
            self.assertEqual(ce[0]["tags"], {"k": "v"})
            r = c.register_job_definition(jobDefinitionName="keep", type="container",
                                          containerProperties={"image": "x"})
            self.assertEqual(r["revision"], 2)
            mode = os.stat(os.path.join(server.home, "credentials")).st_mode & 0o777
            self.assertEqual(mode, 0o600)
        finally:
            server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
