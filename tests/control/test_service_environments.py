"""Service environments, SAGEMAKER_TRAINING job queues and their quota shares on a real
`lote server` (issue 42), through boto3 (its paginators and errors) and the stock aws
CLI: created, described, updated, tagged, attached to a queue, refused while in use,
deleted, and kept across a restart."""
import argparse
import json
import os
import subprocess
import sys
import time
import unittest

import botocore.exceptions

from lote_server import LoteServer

LOTE = None
SE_ARN = "arn:aws:batch:us-east-1:000000000000:service-environment/"


class ServiceEnvironmentsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.batch = self.server.client()  # a test before may have restarted the server

    def cli(self, *args):
        return subprocess.run(["aws", "batch"] + list(args) + ["--output", "json"],
                              env=self.server.env(), capture_output=True, text=True)

    def wait_valid(self, name):
        deadline = time.time() + 30
        while time.time() < deadline:
            se = self.batch.describe_service_environments(
                serviceEnvironments=[name])["serviceEnvironments"]
            if se and se[0]["status"] == "VALID":
                return se[0]
            time.sleep(0.1)
        raise AssertionError("service environment %s never became VALID" % name)

    def error_code(self, call):
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            call()
        return e.exception.response["Error"]["Code"], e.exception.response["Error"]["Message"]

    def test_lifecycle_with_boto3_and_the_cli(self):
        b = self.batch
        r = b.create_service_environment(
            serviceEnvironmentName="sm", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}],
            tags={"team": "research"})
        self.assertEqual(r["serviceEnvironmentArn"], SE_ARN + "sm")
        se = self.wait_valid("sm")
        self.assertEqual((se["state"], se["serviceEnvironmentType"], se["tags"]),
                         ("ENABLED", "SAGEMAKER_TRAINING", {"team": "research"}))
        self.assertEqual(se["capacityLimits"], [{"maxCapacity": 2, "capacityUnit": "NUM_INSTANCES"}])
        # The CLI creates one too; the paginator walks both in pages of one.
        cli = self.cli("create-service-environment", "--service-environment-name", "sm-cli",
                       "--service-environment-type", "SAGEMAKER_TRAINING",
                       "--capacity-limits", "maxCapacity=4,capacityUnit=NUM_INSTANCES")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertEqual(json.loads(cli.stdout)["serviceEnvironmentArn"], SE_ARN + "sm-cli")
        pages = list(b.get_paginator("describe_service_environments").paginate(
            PaginationConfig={"PageSize": 1}))
        self.assertEqual([p["serviceEnvironments"][0]["serviceEnvironmentName"] for p in pages],
                         ["sm", "sm-cli"])
        # A SAGEMAKER_TRAINING queue on it.
        q = b.create_job_queue(jobQueueName="smq", priority=1, jobQueueType="SAGEMAKER_TRAINING",
                               serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "sm"}])
        queue = b.describe_job_queues(jobQueues=[q["jobQueueArn"]])["jobQueues"][0]
        self.assertEqual(queue["jobQueueType"], "SAGEMAKER_TRAINING")
        self.assertEqual(queue["computeEnvironmentOrder"], [])
        self.assertEqual(queue["serviceEnvironmentOrder"],
                         [{"order": 1, "serviceEnvironment": SE_ARN + "sm"}])
        # Container jobs cannot be submitted to it.
        b.register_job_definition(jobDefinitionName="d", type="container",
                                  containerProperties={"image": "x", "vcpus": 1, "memory": 64})
        code, message = self.error_code(
            lambda: b.submit_job(jobName="j", jobQueue="smq", jobDefinition="d"))
        self.assertEqual(code, "ClientException")
        self.assertIn("SubmitServiceJob", message)
        # Update (CLI), tags, and the delete rules.
        cli = self.cli("update-service-environment", "--service-environment", "sm",
                       "--capacity-limits", "maxCapacity=3,capacityUnit=NUM_INSTANCES")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertEqual(self.wait_valid("sm")["capacityLimits"][0]["maxCapacity"], 3)
        b.tag_resource(resourceArn=SE_ARN + "sm", tags={"k": "v"})
        self.assertEqual(b.list_tags_for_resource(resourceArn=SE_ARN + "sm")["tags"],
                         {"team": "research", "k": "v"})
        code, message = self.error_code(
            lambda: b.delete_service_environment(serviceEnvironment="sm"))
        self.assertIn("disable it first", message)
        b.update_service_environment(serviceEnvironment="sm", state="DISABLED")
        code, message = self.error_code(
            lambda: b.delete_service_environment(serviceEnvironment=SE_ARN + "sm"))
        self.assertIn("used by job queue smq", message)
        # Kept across a restart.
        self.server.stop()
        self.server.start()
        b = self.batch = self.server.client()
        se = self.wait_valid("sm")
        self.assertEqual((se["state"], se["capacityLimits"][0]["maxCapacity"]), ("DISABLED", 3))
        b.update_job_queue(jobQueue="smq", state="DISABLED")
        b.delete_job_queue(jobQueue="smq")
        self.server.wait_for(lambda: not b.describe_job_queues(jobQueues=["smq"])["jobQueues"],
                             30, "queue smq deleted")
        cli = self.cli("delete-service-environment", "--service-environment", "sm")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.server.wait_for(
            lambda: not b.describe_service_environments(
                serviceEnvironments=["sm"])["serviceEnvironments"], 30, "sm deleted")

    def test_quota_shares(self):
        b = self.batch
        b.create_service_environment(
            serviceEnvironmentName="qm", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 8, "capacityUnit": "ml.g5.xlarge"},
                            {"maxCapacity": 4, "capacityUnit": "ml.p4d.24xlarge"}])
        self.wait_valid("qm")
        policy = b.create_scheduling_policy(
            name="quota", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"})["arn"]
        self.assertEqual(b.describe_scheduling_policies(arns=[policy])["schedulingPolicies"][0]
                         ["quotaSharePolicy"], {"idleResourceAssignmentStrategy": "FIFO"})
        code, message = self.error_code(lambda: b.update_scheduling_policy(
            arn=policy, fairsharePolicy={"shareDecaySeconds": 60}))
        self.assertIn("cannot become the other kind", message)
        code, message = self.error_code(lambda: b.create_scheduling_policy(
            name="both", fairsharePolicy={},
            quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}))
        self.assertIn("not both", message)
        # Quota management needs one service environment counted in instance types.
        b.create_service_environment(
            serviceEnvironmentName="counted", serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}])
        code, message = self.error_code(lambda: b.create_job_queue(
            jobQueueName="bad", priority=1, jobQueueType="SAGEMAKER_TRAINING",
            schedulingPolicyArn=policy,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "counted"}]))
        self.assertIn("NUM_INSTANCES", message)
        b.create_job_queue(jobQueueName="qmq", priority=1, jobQueueType="SAGEMAKER_TRAINING",
                           schedulingPolicyArn=policy,
                           serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "qm"}])
        code, message = self.error_code(lambda: b.create_job_queue(
            jobQueueName="second", priority=1, jobQueueType="SAGEMAKER_TRAINING",
            schedulingPolicyArn=policy,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "qm"}]))
        self.assertIn("used by job queue qmq", message)
        self.server.wait_for(lambda: b.describe_job_queues(jobQueues=["qmq"])["jobQueues"][0]
                             ["status"] == "VALID", 30, "qmq VALID")
        # A container queue may not take the quota-share policy.
        create_env = __import__("lote_server").create_emulated_environment
        create_env(b, name="ce-q")
        code, message = self.error_code(lambda: b.create_job_queue(
            jobQueueName="plain", priority=1, schedulingPolicyArn=policy,
            computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce-q"}]))
        self.assertIn("quota-share policy", message)
        # Shares: boto3 and the CLI.
        arns = []
        for name, strategy in (("team-a", {"strategy": "LEND_AND_BORROW", "borrowLimit": 100}),
                               ("team-b", {"strategy": "LEND"}), ("team-c", {"strategy": "RESERVE"})):
            r = b.create_quota_share(
                quotaShareName=name, jobQueue="qmq",
                capacityLimits=[{"maxCapacity": 2, "capacityUnit": "ml.g5.xlarge"}],
                resourceSharingConfiguration=strategy,
                preemptionConfiguration={"inSharePreemption": "ENABLED"}, tags={"t": name})
            arns.append(r["quotaShareArn"])
        self.assertEqual(arns[0], "arn:aws:batch:us-east-1:000000000000:job-queue/qmq/quota-share/team-a")
        d = b.describe_quota_share(quotaShareArn=arns[0])
        self.assertIn(d["status"], ("CREATING", "VALID"))  # VALID at the next reconcile
        self.assertEqual((d["state"], d["resourceSharingConfiguration"], d["tags"]),
                         ("ENABLED", {"strategy": "LEND_AND_BORROW", "borrowLimit": 100},
                          {"t": "team-a"}))
        self.assertEqual(b.describe_quota_share(quotaShareArn=arns[1])
                         ["resourceSharingConfiguration"], {"strategy": "LEND"})
        pages = list(b.get_paginator("list_quota_shares").paginate(
            jobQueue="qmq", PaginationConfig={"PageSize": 2}))
        self.assertEqual([s["quotaShareName"] for p in pages for s in p["quotaShares"]],
                         ["team-a", "team-b", "team-c"])
        self.assertEqual(len(pages), 2)
        cli = self.cli("update-quota-share", "--quota-share-arn", arns[2],
                       "--capacity-limits", "maxCapacity=3,capacityUnit=ml.p4d.24xlarge",
                       "--state", "DISABLED")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        code, message = self.error_code(lambda: b.update_quota_share(
            quotaShareArn=arns[2], capacityLimits=[{"maxCapacity": 1, "capacityUnit": "ml.m5.large"}]))
        self.assertIn("service environment limits", message)
        b.tag_resource(resourceArn=arns[1], tags={"k": "v"})
        self.assertEqual(b.list_tags_for_resource(resourceArn=arns[1])["tags"], {"t": "team-b", "k": "v"})
        b.untag_resource(resourceArn=arns[1], tagKeys=["t"])
        self.assertEqual(b.describe_quota_share(quotaShareArn=arns[1])["tags"], {"k": "v"})
        cli = self.cli("describe-quota-share", "--quota-share-arn", arns[2])
        described = json.loads(cli.stdout)
        self.assertEqual((described["state"], described["capacityLimits"]),
                         ("DISABLED", [{"maxCapacity": 3, "capacityUnit": "ml.p4d.24xlarge"}]))
        cli = self.cli("list-quota-shares", "--job-queue", "qmq")
        self.assertEqual(len(json.loads(cli.stdout)["quotaShares"]), 3, cli.stderr)
        # Errors: a unit the service environment lacks, a name taken, borrowLimit on LEND,
        # RESERVE's limit, delete while ENABLED, a queue with shares.
        for call, words in (
            (lambda: b.create_quota_share(
                quotaShareName="x", jobQueue="qmq",
                capacityLimits=[{"maxCapacity": 1, "capacityUnit": "ml.m5.large"}],
                resourceSharingConfiguration={"strategy": "RESERVE"},
                preemptionConfiguration={"inSharePreemption": "DISABLED"}),
             "service environment limits"),
            (lambda: b.create_quota_share(
                quotaShareName="team-a", jobQueue="qmq",
                capacityLimits=[{"maxCapacity": 1, "capacityUnit": "ml.g5.xlarge"}],
                resourceSharingConfiguration={"strategy": "RESERVE"},
                preemptionConfiguration={"inSharePreemption": "DISABLED"}),
             "already exists"),
            (lambda: b.create_quota_share(
                quotaShareName="y", jobQueue="qmq",
                capacityLimits=[{"maxCapacity": 1, "capacityUnit": "ml.g5.xlarge"}],
                resourceSharingConfiguration={"strategy": "LEND", "borrowLimit": 10},
                preemptionConfiguration={"inSharePreemption": "DISABLED"}),
             "LEND_AND_BORROW"),
            (lambda: b.delete_quota_share(quotaShareArn=arns[0]), "disable it first"),
            (lambda: b.describe_quota_share(quotaShareArn="arn:aws:batch:us-east-1:000000000000:job-queue/qmq"),
             "not a quota share ARN"),
        ):
            code, message = self.error_code(call)
            self.assertEqual(code, "ClientException")
            self.assertIn(words, message)
        b.update_job_queue(jobQueue="qmq", state="DISABLED")
        code, message = self.error_code(lambda: b.delete_job_queue(jobQueue="qmq"))
        self.assertIn("delete its quota shares first", message)
        # Kept across a restart; then deleted.
        self.server.stop()
        self.server.start()
        b = self.batch = self.server.client()
        self.server.wait_for(
            lambda: b.describe_quota_share(quotaShareArn=arns[0])["status"] == "VALID", 30,
            "team-a VALID after the restart")
        for arn in arns:
            b.update_quota_share(quotaShareArn=arn, state="DISABLED")
            b.delete_quota_share(quotaShareArn=arn)
        self.server.wait_for(lambda: not b.list_quota_shares(jobQueue="qmq")["quotaShares"], 30,
                             "quota shares deleted")
        b.delete_job_queue(jobQueue="qmq")

    def test_errors_in_the_clients_shape(self):
        b = self.batch
        for call in (
            lambda: b.create_service_environment(
                serviceEnvironmentName="bad", serviceEnvironmentType="SAGEMAKER_TRAINING",
                capacityLimits=[]),
            lambda: b.create_service_environment(
                serviceEnvironmentName="bad", serviceEnvironmentType="SAGEMAKER_TRAINING",
                capacityLimits=[{"maxCapacity": 0, "capacityUnit": "NUM_INSTANCES"}]),
            lambda: b.create_service_environment(
                serviceEnvironmentName="bad name", serviceEnvironmentType="SAGEMAKER_TRAINING",
                capacityLimits=[{"maxCapacity": 1, "capacityUnit": "NUM_INSTANCES"}]),
            lambda: b.update_service_environment(serviceEnvironment="missing", state="DISABLED"),
            lambda: b.create_job_queue(jobQueueName="q2", priority=1,
                                       jobQueueType="SAGEMAKER_TRAINING",
                                       serviceEnvironmentOrder=[{"order": 1,
                                                                 "serviceEnvironment": "missing"}]),
        ):
            code, _ = self.error_code(call)
            self.assertEqual(code, "ClientException")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
