"""Batch behaviours that moto's own Batch tests exercise, written here as lote's
tests of the same behaviour (boto3 against a real `lote server`):

- bidPercentage: range-checked (0-100) for SPOT, where AWS applies it; an EC2
  (On-Demand) environment stores any value, as AWS ignores it there;
- an EKS job definition without resources runs when submitted without overrides;
- an EKS job is shown with eksProperties (its pod) and eksAttempts;
- evaluateOnExit actions are returned as given ("retry", "EXIT");
- FARGATE with the legacy vcpus field is a ClientException: the model says vcpus
  "is not supported for jobs running on Fargate resources" (ContainerProperties.vcpus).

usage: test_moto_behaviours.py --lote BINARY
"""
import argparse
import os
import sys
import unittest

import botocore.exceptions

sys.path.insert(0, os.path.dirname(__file__))
from lote_server import LoteServer  # noqa: E402

LOTE = None


class MotoBehavioursTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.batch = cls.server.client()
        cls.batch.create_compute_environment(
            computeEnvironmentName="m-ce", type="MANAGED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 16,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true"})
        cls.server.wait_for(lambda: cls.batch.describe_compute_environments(
            computeEnvironments=["m-ce"])["computeEnvironments"][0]["status"] == "VALID",
            30, "m-ce VALID")
        cls.batch.create_job_queue(jobQueueName="m-q", priority=1,
                                   computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "m-ce"}])
        cls.server.wait_for(lambda: cls.batch.describe_job_queues(
            jobQueues=["m-q"])["jobQueues"][0]["status"] == "VALID", 30, "m-q VALID")

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def wait_final(self, job_id):
        return self.server.wait_for(lambda: next(
            (j for j in self.batch.describe_jobs(jobs=[job_id])["jobs"]
             if j["status"] in ("SUCCEEDED", "FAILED")), None), 60, "job %s to end" % job_id)

    def client_error(self, call, **kwargs):
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            call(**kwargs)
        self.assertEqual(ctx.exception.response["Error"]["Code"], "ClientException")
        return ctx.exception.response["Error"]["Message"]

    def test_bid_percentage_is_checked_for_spot_only(self):
        base = {"minvCpus": 0, "maxvCpus": 4, "instanceTypes": ["c5.large"], "subnets": ["s"]}
        self.batch.create_compute_environment(
            computeEnvironmentName="bid-ec2", type="MANAGED",
            computeResources=dict(base, type="EC2", bidPercentage=123))
        shown = self.batch.describe_compute_environments(
            computeEnvironments=["bid-ec2"])["computeEnvironments"][0]["computeResources"]
        self.assertEqual(shown["bidPercentage"], 123)
        message = self.client_error(
            self.batch.create_compute_environment, computeEnvironmentName="bid-spot",
            type="MANAGED", computeResources=dict(base, type="SPOT", bidPercentage=123))
        self.assertIn("bidPercentage", message)

    def test_eks_job_without_resources_runs_and_shows_its_pod(self):
        self.batch.register_job_definition(
            jobDefinitionName="eks-plain", type="container",
            eksProperties={"podProperties": {"containers": [
                {"name": "main", "image": "busybox", "command": ["sh", "-c", "exit 0"]}]}})
        job_id = self.batch.submit_job(jobName="eks", jobQueue="m-q",
                                       jobDefinition="eks-plain")["jobId"]
        job = self.wait_final(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job)
        pod = job["eksProperties"]["podProperties"]
        self.assertEqual(pod["containers"][0]["image"], "busybox")
        self.assertEqual(pod["containers"][0]["exitCode"], 0)
        self.assertTrue(pod["podName"])
        self.assertEqual(len(job["eksAttempts"]), 1)
        self.assertEqual(job["eksAttempts"][0]["containers"][0]["exitCode"], 0)
        self.assertGreaterEqual(job["eksAttempts"][0]["stoppedAt"],
                                job["eksAttempts"][0]["startedAt"])

    def test_evaluate_on_exit_actions_are_returned_as_given(self):
        rules = [{"onExitCode": "1", "action": "retry"}, {"onReason": "*", "action": "EXIT"}]
        self.batch.register_job_definition(
            jobDefinitionName="eoe", type="container",
            containerProperties={"image": "host", "command": ["true"], "vcpus": 1, "memory": 64},
            retryStrategy={"attempts": 2, "evaluateOnExit": rules})
        d = self.batch.describe_job_definitions(jobDefinitionName="eoe")["jobDefinitions"][0]
        self.assertEqual([r["action"] for r in d["retryStrategy"]["evaluateOnExit"]],
                         ["retry", "EXIT"])
        job_id = self.batch.submit_job(jobName="eoe", jobQueue="m-q", jobDefinition="eoe")["jobId"]
        job = self.batch.describe_jobs(jobs=[job_id])["jobs"][0]
        self.assertEqual([r["action"] for r in job["retryStrategy"]["evaluateOnExit"]],
                         ["retry", "EXIT"])

    def test_fargate_with_legacy_vcpus_is_a_client_error(self):
        message = self.client_error(
            self.batch.register_job_definition, jobDefinitionName="fg", type="container",
            platformCapabilities=["FARGATE"],
            containerProperties={"image": "host", "command": ["true"], "vcpus": 1, "memory": 2048})
        self.assertIn("resourceRequirements", message)


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
