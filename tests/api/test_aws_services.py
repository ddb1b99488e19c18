"""EC2 (Query protocol, XML), SSM (json) and STS against a real `lote server`,
driven by boto3 (botocore parses every answer and error by the service models)
and the stock aws CLIs (pip v1 and Debian's /usr/bin/aws v2).

What it checks, per service:
- EC2: placement groups and launch templates (versions, $Latest/$Default)
  round-trip through botocore's EC2 parser; EC2's error XML gives botocore
  the EC2 codes; DescribeInstanceTypes answers from lote's catalog; every
  resource survives a restart (SQLite).
- SSM: String/StringList/SecureString round trips; a SecureString's value is
  never in the SQLite file in plain text; the public ECS-optimized AMI name
  resolves; errors carry SSM's codes.
- A job secret (valueFrom an SSM SecureString, by name and by ARN) reaches the
  node's environment and is in no DescribeJobs answer and no log line; a
  Secrets Manager ARN is a ClientException.
- STS GetCallerIdentity with boto3 and both CLIs; error answers carry
  x-amzn-ErrorMessage.

usage: test_aws_services.py --lote BINARY
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import unittest
import urllib.request

import botocore.exceptions

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
AMI_NAME = "/aws/service/ecs/optimized-ami/amazon-linux-2/recommended/image_id"


class AwsServicesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def cli(self, binary, *args):
        env = self.server.env()
        cmd = [binary] + list(args)
        if binary == "/usr/bin/aws":  # v2.9 reads no AWS_ENDPOINT_URL* variable
            cmd += ["--endpoint-url", env["AWS_ENDPOINT_URL"]]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, "%s: %s" % (" ".join(cmd), out.stderr))
        return out.stdout

    def code_of(self, call, **kwargs):
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            call(**kwargs)
        return ctx.exception.response["Error"]["Code"]

    # --- EC2 ------------------------------------------------------------------
    def test_ec2_placement_groups(self):
        ec2 = self.server.client("ec2")
        made = ec2.create_placement_group(
            GroupName="pg-a", Strategy="cluster",
            TagSpecifications=[{"ResourceType": "placement-group",
                                "Tags": [{"Key": "team", "Value": "llm"}]}])["PlacementGroup"]
        self.assertEqual((made["GroupName"], made["Strategy"], made["State"]),
                         ("pg-a", "cluster", "available"))
        self.assertTrue(made["GroupId"].startswith("pg-"))
        self.assertEqual(made["Tags"], [{"Key": "team", "Value": "llm"}])
        listed = ec2.describe_placement_groups(GroupNames=["pg-a"])["PlacementGroups"]
        self.assertEqual([g["GroupId"] for g in listed], [made["GroupId"]])
        by_filter = ec2.describe_placement_groups(
            Filters=[{"Name": "strategy", "Values": ["spread"]}])["PlacementGroups"]
        self.assertNotIn("pg-a", [g["GroupName"] for g in by_filter])
        self.assertEqual(self.code_of(ec2.create_placement_group, GroupName="pg-a",
                                      Strategy="cluster"), "InvalidPlacementGroup.Duplicate")
        self.assertEqual(self.code_of(ec2.describe_placement_groups, GroupNames=["nope"]),
                         "InvalidPlacementGroup.Unknown")
        self.assertEqual(self.code_of(ec2.create_placement_group, GroupName="pg-b",
                                      Strategy="diagonal"), "InvalidParameterValue")
        ec2.delete_placement_group(GroupName="pg-a")
        self.assertEqual(self.code_of(ec2.delete_placement_group, GroupName="pg-a"),
                         "InvalidPlacementGroup.Unknown")

    def test_ec2_launch_templates_and_versions(self):
        ec2 = self.server.client("ec2")
        lt = ec2.create_launch_template(
            LaunchTemplateName="lt-versions",
            LaunchTemplateData={
                "ImageId": "ami-0123456789abcdef0", "InstanceType": "trn1.32xlarge",
                "BlockDeviceMappings": [{"DeviceName": "/dev/xvda",
                                         "Ebs": {"VolumeSize": 512, "VolumeType": "gp3"}}],
                "NetworkInterfaces": [{"DeviceIndex": 0, "InterfaceType": "efa"}]})["LaunchTemplate"]
        self.assertTrue(lt["LaunchTemplateId"].startswith("lt-"))
        self.assertEqual((lt["DefaultVersionNumber"], lt["LatestVersionNumber"]), (1, 1))
        v2 = ec2.create_launch_template_version(
            LaunchTemplateName="lt-versions", SourceVersion="1", VersionDescription="bigger",
            LaunchTemplateData={"InstanceType": "trn1n.32xlarge"})["LaunchTemplateVersion"]
        self.assertEqual(v2["VersionNumber"], 2)
        self.assertFalse(v2["DefaultVersion"])
        latest = ec2.describe_launch_template_versions(
            LaunchTemplateId=lt["LaunchTemplateId"], Versions=["$Latest"])["LaunchTemplateVersions"]
        self.assertEqual(len(latest), 1)
        data = latest[0]["LaunchTemplateData"]
        # The source version's data, with InstanceType replaced.
        self.assertEqual(data["InstanceType"], "trn1n.32xlarge")
        self.assertEqual(data["ImageId"], "ami-0123456789abcdef0")
        self.assertEqual(data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"], 512)
        self.assertEqual(data["NetworkInterfaces"][0]["InterfaceType"], "efa")
        default = ec2.describe_launch_template_versions(
            LaunchTemplateName="lt-versions", Versions=["$Default"])["LaunchTemplateVersions"]
        self.assertEqual([v["VersionNumber"] for v in default], [1])
        every = ec2.describe_launch_template_versions(LaunchTemplateName="lt-versions")
        self.assertEqual([v["VersionNumber"] for v in every["LaunchTemplateVersions"]], [1, 2])
        listed = ec2.describe_launch_templates(LaunchTemplateNames=["lt-versions"])["LaunchTemplates"]
        self.assertEqual(listed[0]["LatestVersionNumber"], 2)
        self.assertEqual(self.code_of(ec2.create_launch_template, LaunchTemplateName="lt-versions",
                                      LaunchTemplateData={"ImageId": "ami-1"}),
                         "InvalidLaunchTemplateName.AlreadyExistsException")
        self.assertEqual(self.code_of(ec2.describe_launch_template_versions,
                                      LaunchTemplateName="lt-versions", Versions=["9"]),
                         "InvalidLaunchTemplateId.VersionNotFound")
        # Durable: the same answers after a restart.
        self.server.stop()
        self.server.start()
        ec2 = self.server.client("ec2")
        again = ec2.describe_launch_template_versions(LaunchTemplateName="lt-versions")
        self.assertEqual(again["LaunchTemplateVersions"], every["LaunchTemplateVersions"])
        deleted = ec2.delete_launch_template(LaunchTemplateName="lt-versions")["LaunchTemplate"]
        self.assertEqual(deleted["LaunchTemplateId"], lt["LaunchTemplateId"])
        self.assertEqual(self.code_of(ec2.describe_launch_templates,
                                      LaunchTemplateNames=["lt-versions"]),
                         "InvalidLaunchTemplateName.NotFoundException")

    def test_compute_environment_needs_its_placement_group_and_launch_template(self):
        ec2, batch = self.server.client("ec2"), self.server.client("batch")

        def refused(**resources):
            cr = {"type": "EC2", "maxvCpus": 16, "instanceTypes": ["c5.xlarge"],
                  "subnets": ["subnet-1"]}
            cr.update(resources)
            with self.assertRaises(botocore.exceptions.ClientError) as ctx:
                batch.create_compute_environment(computeEnvironmentName="ce-refs", type="MANAGED",
                                                 computeResources=cr)
            err = ctx.exception.response["Error"]
            self.assertEqual(err["Code"], "ClientException", err)
            return err["Message"]

        self.assertIn("computeResources.placementGroup 'pg-none'",
                      refused(placementGroup="pg-none"))
        self.assertIn("launchTemplateName 'lt-none'",
                      refused(launchTemplate={"launchTemplateName": "lt-none"}))
        self.assertIn("launchTemplateId 'lt-0123456789abcdef0'",
                      refused(launchTemplate={"launchTemplateId": "lt-0123456789abcdef0"}))
        ec2.create_placement_group(GroupName="pg-refs", Strategy="cluster")
        lt = ec2.create_launch_template(LaunchTemplateName="lt-refs",
                                        LaunchTemplateData={"ImageId": "ami-1"})["LaunchTemplate"]
        self.assertIn("launchTemplate.version",
                      refused(launchTemplate={"launchTemplateName": "lt-refs", "version": "7"}))
        self.assertIn("exactly one",
                      refused(launchTemplate={"launchTemplateName": "lt-refs",
                                              "launchTemplateId": lt["LaunchTemplateId"]}))
        batch.create_compute_environment(
            computeEnvironmentName="ce-refs", type="MANAGED",
            computeResources={"type": "EC2", "maxvCpus": 16, "instanceTypes": ["c5.xlarge"],
                              "subnets": ["subnet-1"], "placementGroup": "pg-refs",
                              "launchTemplate": {"launchTemplateId": lt["LaunchTemplateId"],
                                                 "version": "$Latest"}})
        shown = batch.describe_compute_environments(
            computeEnvironments=["ce-refs"])["computeEnvironments"][0]["computeResources"]
        self.assertEqual(shown["placementGroup"], "pg-refs")
        self.assertEqual(shown["launchTemplate"]["launchTemplateId"], lt["LaunchTemplateId"])
        # The group stays while the compute environment names it.
        self.assertEqual(self.code_of(ec2.delete_placement_group, GroupName="pg-refs"),
                         "InvalidPlacementGroup.InUse")

    def test_ec2_instance_types_from_the_catalog(self):
        ec2 = self.server.client("ec2")
        types = ec2.describe_instance_types(InstanceTypes=["trn1.32xlarge"])["InstanceTypes"]
        self.assertEqual(types[0]["InstanceType"], "trn1.32xlarge")
        self.assertEqual(types[0]["VCpuInfo"]["DefaultVCpus"], 128)
        self.assertEqual(types[0]["MemoryInfo"]["SizeInMiB"], 512 * 1024)
        self.assertEqual(self.code_of(ec2.describe_instance_types, InstanceTypes=["zz9.huge"]),
                         "InvalidInstanceType")

    def test_ec2_cli_v1_and_v2_parse_the_xml(self):
        for binary in ("aws", "/usr/bin/aws"):
            name = "cli-pg-" + ("v1" if binary == "aws" else "v2")
            out = json.loads(self.cli(binary, "ec2", "create-placement-group", "--group-name", name,
                                      "--strategy", "cluster", "--output", "json"))
            self.assertEqual(out["PlacementGroup"]["GroupName"], name)
            out = json.loads(self.cli(binary, "ec2", "describe-placement-groups", "--group-names",
                                      name, "--output", "json"))
            self.assertEqual(out["PlacementGroups"][0]["Strategy"], "cluster")
            self.cli(binary, "ec2", "delete-placement-group", "--group-name", name)

    # --- SSM ------------------------------------------------------------------
    def test_ssm_round_trips_and_securestring_at_rest(self):
        ssm = self.server.client("ssm")
        secret = "s3cr3t-value-7f1c9e"
        self.assertEqual(ssm.put_parameter(Name="/app/plain", Value="hello", Type="String")["Version"], 1)
        ssm.put_parameter(Name="/app/list", Value="a,b,c", Type="StringList")
        ssm.put_parameter(Name="/app/deep/secret", Value=secret, Type="SecureString")
        self.assertEqual(ssm.get_parameter(Name="/app/plain")["Parameter"]["Value"], "hello")
        got = ssm.get_parameter(Name="/app/deep/secret", WithDecryption=True)["Parameter"]
        self.assertEqual((got["Type"], got["Value"]), ("SecureString", secret))
        sealed = ssm.get_parameter(Name="/app/deep/secret")["Parameter"]["Value"]
        self.assertNotEqual(sealed, secret)
        self.assertEqual(self.code_of(ssm.put_parameter, Name="/app/plain", Value="x", Type="String"),
                         "ParameterAlreadyExists")
        self.assertEqual(ssm.put_parameter(Name="/app/plain", Value="hello2", Overwrite=True)["Version"], 2)
        both = ssm.get_parameters(Names=["/app/plain", "/app/missing"])
        self.assertEqual([p["Value"] for p in both["Parameters"]], ["hello2"])
        self.assertEqual(both["InvalidParameters"], ["/app/missing"])
        shallow = ssm.get_parameters_by_path(Path="/app")["Parameters"]
        self.assertEqual(sorted(p["Name"] for p in shallow), ["/app/list", "/app/plain"])
        deep = ssm.get_parameters_by_path(Path="/app", Recursive=True, WithDecryption=True)
        self.assertIn(secret, [p["Value"] for p in deep["Parameters"]])
        described = ssm.describe_parameters()["Parameters"]
        self.assertIn("/app/deep/secret", [p["Name"] for p in described])
        self.assertEqual(self.code_of(ssm.get_parameter, Name="/app/missing"), "ParameterNotFound")
        self.assertEqual(self.code_of(ssm.put_parameter, Name="/aws/mine", Value="x", Type="String"),
                         "ValidationException")
        # Never in plain text on disk (the database and its WAL).
        for path in glob.glob(os.path.join(self.server.home, "lote.db*")):
            with open(path, "rb") as f:
                self.assertNotIn(secret.encode(), f.read(), path)
        ssm.delete_parameter(Name="/app/list")
        gone = ssm.delete_parameters(Names=["/app/plain", "/app/never"])
        self.assertEqual((gone["DeletedParameters"], gone["InvalidParameters"]),
                         (["/app/plain"], ["/app/never"]))
        self.assertEqual(self.code_of(ssm.delete_parameter, Name="/app/list"), "ParameterNotFound")
        # Still readable after a restart (the key lives in the server's home).
        self.server.stop()
        self.server.start()
        ssm = self.server.client("ssm")
        self.assertEqual(ssm.get_parameter(Name="/app/deep/secret", WithDecryption=True)
                         ["Parameter"]["Value"], secret)

    def test_ssm_public_ecs_ami_with_both_clis(self):
        for binary in ("aws", "/usr/bin/aws"):
            ami = self.cli(binary, "ssm", "get-parameter", "--name", AMI_NAME,
                           "--query", "Parameter.Value", "--output", "text").strip()
            self.assertRegex(ami, r"^ami-[0-9a-f]{17}$")
        whole = self.server.client("ssm").get_parameter(
            Name=AMI_NAME.rsplit("/", 1)[0])["Parameter"]["Value"]
        self.assertEqual(json.loads(whole)["image_id"], ami)

    # --- Job secrets ------------------------------------------------------------
    def test_job_secret_reaches_the_node_and_no_answer(self):
        ssm, batch, logs = (self.server.client(s) for s in ("ssm", "batch", "logs"))
        secret = "job-secret-94b2d1"
        ssm.put_parameter(Name="/jobs/db-pass", Value=secret, Type="SecureString")
        arn = "arn:aws:ssm:us-east-1:000000000000:parameter/jobs/db-pass"
        batch.create_compute_environment(
            computeEnvironmentName="sec-ce", type="MANAGED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 8,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true"})
        self.server.wait_for(lambda: batch.describe_compute_environments(
            computeEnvironments=["sec-ce"])["computeEnvironments"][0]["status"] == "VALID",
            30, "sec-ce VALID")
        batch.create_job_queue(jobQueueName="sec-q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "sec-ce"}])
        self.server.wait_for(lambda: batch.describe_job_queues(
            jobQueues=["sec-q"])["jobQueues"][0]["status"] == "VALID", 30, "sec-q VALID")
        # The node compares the values itself and prints only the verdict.
        batch.register_job_definition(
            jobDefinitionName="sec", type="container",
            containerProperties={
                "image": "host",
                "command": ["sh", "-c", '[ "$BY_NAME" = "$WANT" ] && [ "$BY_ARN" = "$WANT" ] '
                                        '&& echo secret-ok || echo secret-wrong'],
                "secrets": [{"name": "BY_NAME", "valueFrom": "/jobs/db-pass"},
                            {"name": "BY_ARN", "valueFrom": arn},
                            {"name": "WANT", "valueFrom": "/jobs/db-pass"}],
                "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                         {"type": "MEMORY", "value": "128"}]})
        job_id = batch.submit_job(jobName="sec", jobQueue="sec-q", jobDefinition="sec")["jobId"]
        job = self.server.wait_for(lambda: next(
            (j for j in batch.describe_jobs(jobs=[job_id])["jobs"]
             if j["status"] in ("SUCCEEDED", "FAILED")), None), 60, "the secret job to end")
        self.assertEqual(job["status"], "SUCCEEDED", job)
        stream = job["container"]["logStreamName"]
        lines = self.server.wait_for(lambda: [e["message"] for e in logs.get_log_events(
            logGroupName="/aws/batch/job", logStreamName=stream, startFromHead=True)["events"]],
            30, "the job's log line")
        self.assertEqual(lines, ["secret-ok"])
        self.assertEqual(job["container"]["secrets"][0],
                         {"name": "BY_NAME", "valueFrom": "/jobs/db-pass"})
        answers = json.dumps(batch.describe_jobs(jobs=[job_id])) + json.dumps(
            batch.list_jobs(jobQueue="sec-q", jobStatus="SUCCEEDED"))
        self.assertNotIn(secret, answers)
        self.assertNotIn(secret, self.server.stderr())
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            batch.register_job_definition(
                jobDefinitionName="sm", type="container",
                containerProperties={"image": "host", "command": ["true"], "vcpus": 1, "memory": 64,
                                     "secrets": [{"name": "X", "valueFrom":
                                                  "arn:aws:secretsmanager:us-east-1:000000000000:secret:x"}]})
        self.assertEqual(ctx.exception.response["Error"]["Code"], "ClientException")
        self.assertIn("Secrets Manager", ctx.exception.response["Error"]["Message"])

    # --- STS and error headers ------------------------------------------------
    def test_sts_get_caller_identity(self):
        # The server's key pair is the first start's administrator, user "admin";
        # UserId is the user's unique id (AIDA...), as AWS answers for IAM users.
        who = self.server.client("sts").get_caller_identity()
        self.assertEqual(who["Account"], "000000000000")
        self.assertTrue(who["UserId"].startswith("AIDA"), who)
        self.assertEqual(who["Arn"], "arn:aws:iam::000000000000:user/admin")
        for binary in ("aws", "/usr/bin/aws"):
            out = json.loads(self.cli(binary, "sts", "get-caller-identity", "--output", "json"))
            self.assertEqual(out["Account"], "000000000000")

    def test_errors_carry_x_amzn_error_message(self):
        # An unsigned request: refused, and the message is in the header too.
        req = urllib.request.Request(self.server.endpoint + "/v1/describejobqueues", data=b"{}",
                                     method="POST", headers={"Content-Type": "application/json"})
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            urllib.request.urlopen(req, timeout=10)
        message = ctx.exception.headers.get("x-amzn-ErrorMessage")
        self.assertTrue(message)
        self.assertEqual(json.loads(ctx.exception.read())["message"], message)


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
