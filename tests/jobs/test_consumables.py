"""Consumable resources (AWS Batch resource-aware scheduling) on a real `lote server`:
every operation through boto3 (its paginators and errors) and the stock aws CLI, and
jobs that really run holding units: never more running than there are units (read
from the jobs' own start and end stamps), across a SIGKILL of the server; units used
up for NON_REPLENISHABLE resources; arrays and multi-node jobs."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import botocore.exceptions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

LOTE = None
FINAL = ("SUCCEEDED", "FAILED")
ARN_PREFIX = "arn:aws:batch:us-east-1:000000000000:consumable-resource/"


def setup_resources(batch):
    create_emulated_environment(batch, max_vcpus=64)
    batch.create_job_queue(jobQueueName="q", priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])


def stamped(out, name, seconds=1):
    """A command writing <out>/<job id>.<name>.{start,end} (wall clock, ns) around a
    sleep."""
    return ["sh", "-c",
            "p=%s/$AWS_BATCH_JOB_ID.%s; date +%%s%%N > $p.start; sleep %d; date +%%s%%N > $p.end"
            % (out, name, seconds)]


def intervals(out, suffix):
    spans = []
    for f in sorted(os.listdir(out)):
        if f.endswith(suffix + ".start"):
            base = os.path.join(out, f[:-len(".start")])
            with open(base + ".start") as a, open(base + ".end") as b:
                spans.append((int(a.read()), int(b.read())))
    return spans


def metric(endpoint, name, labels):
    """The value of one series of GET /metrics (None when absent)."""
    with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    want = name + "{" + ",".join('%s="%s"' % kv for kv in sorted(labels.items())) + "}"
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


def most_at_once(spans):
    """The largest number of [start, end] intervals that overlap."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                    key=lambda x: (x[0], x[1]))
    now = best = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


class ConsumablesTest(unittest.TestCase):
    def setUp(self):
        self.server = LoteServer(LOTE).start()
        self.batch = self.server.client()
        self.out = tempfile.mkdtemp(prefix="lote_consumables_")
        os.chmod(self.out, 0o777)
        setup_resources(self.batch)

    def tearDown(self):
        self.server.cleanup()
        shutil.rmtree(self.out, ignore_errors=True)

    def describe(self, job_id):
        return self.batch.describe_jobs(jobs=[job_id])["jobs"][0]

    def wait_status(self, job_id, statuses=FINAL, timeout=90):
        return self.server.wait_for(
            lambda: (lambda j: j if j["status"] in statuses else None)(self.describe(job_id)),
            timeout, "job %s in %s" % (job_id, statuses))

    def cli(self, *args):
        out = subprocess.run(["aws", "batch"] + list(args) + ["--output", "json"],
                             env=self.server.env(), capture_output=True, text=True)
        return out

    def register(self, name, resource, units, command):
        self.batch.register_job_definition(
            jobDefinitionName=name, type="container",
            containerProperties={"image": "host", "command": command,
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "128"}]},
            consumableResourceProperties={"consumableResourceList": [
                {"consumableResource": resource, "quantity": units}]})

    def test_operations_with_boto3_and_the_cli(self):
        b = self.batch
        created = b.create_consumable_resource(consumableResourceName="lic", totalQuantity=4,
                                               tags={"team": "a"})
        self.assertEqual(created["consumableResourceArn"], ARN_PREFIX + "lic")
        d = b.describe_consumable_resource(consumableResource="lic")
        self.assertEqual((d["totalQuantity"], d["inUseQuantity"], d["availableQuantity"],
                          d["resourceType"], d["tags"]), (4, 0, 4, "REPLENISHABLE", {"team": "a"}))
        self.assertGreater(d["createdAt"], 0)
        # SET / ADD / REMOVE; a repeated clientToken applies once.
        self.assertEqual(b.update_consumable_resource(
            consumableResource=ARN_PREFIX + "lic", operation="ADD", quantity=3)["totalQuantity"], 7)
        for _ in range(2):
            r = b.update_consumable_resource(consumableResource="lic", operation="REMOVE",
                                             quantity=2, clientToken="once-1")
            self.assertEqual(r["totalQuantity"], 5)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            b.update_consumable_resource(consumableResource="lic", operation="ADD", quantity=9,
                                         clientToken="once-1")
        self.assertEqual(e.exception.response["Error"]["Code"], "ClientException")
        self.assertEqual(b.update_consumable_resource(
            consumableResource="lic", operation="SET", quantity=2)["totalQuantity"], 2)
        # Errors in the client's shape.
        for call in (lambda: b.create_consumable_resource(consumableResourceName="lic"),
                     lambda: b.create_consumable_resource(consumableResourceName="x",
                                                          resourceType="SOMETIMES"),
                     lambda: b.create_consumable_resource(consumableResourceName="bad name"),
                     lambda: b.describe_consumable_resource(consumableResource="missing"),
                     lambda: b.update_consumable_resource(consumableResource="lic",
                                                          operation="DOUBLE", quantity=1)):
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                call()
            self.assertEqual(e.exception.response["Error"]["Code"], "ClientException")
            self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        # List: filters (case-insensitive, '*' prefix) and the paginator over pages of 2.
        for n in ("Alpha-1", "alpha-2", "beta", "gamma"):
            b.create_consumable_resource(consumableResourceName=n, totalQuantity=1,
                                         resourceType="NON_REPLENISHABLE")
        names = [r["consumableResourceName"] for r in b.list_consumable_resources(
            filters=[{"name": "CONSUMABLE_RESOURCE_NAME", "values": ["ALPHA*"]}])
            ["consumableResources"]]
        self.assertEqual(names, ["Alpha-1", "alpha-2"])
        pages = list(b.get_paginator("list_consumable_resources").paginate(
            PaginationConfig={"PageSize": 2}))
        self.assertEqual(len(pages), 3)
        listed = [r["consumableResourceName"] for p in pages for r in p["consumableResources"]]
        self.assertEqual(listed, ["Alpha-1", "alpha-2", "beta", "gamma", "lic"])
        self.assertEqual(pages[0]["consumableResources"][0]["resourceType"], "NON_REPLENISHABLE")
        # Tags through the shared tag operations.
        b.tag_resource(resourceArn=ARN_PREFIX + "beta", tags={"k": "v"})
        self.assertEqual(b.list_tags_for_resource(resourceArn=ARN_PREFIX + "beta")["tags"],
                         {"k": "v"})
        b.untag_resource(resourceArn=ARN_PREFIX + "beta", tagKeys=["k"])
        self.assertEqual(b.list_tags_for_resource(resourceArn=ARN_PREFIX + "beta")["tags"], {})
        # The stock CLI, every operation.
        cli = self.cli("create-consumable-resource", "--consumable-resource-name", "cli-res",
                       "--total-quantity", "3")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        cli = self.cli("update-consumable-resource", "--consumable-resource", "cli-res",
                       "--operation", "ADD", "--quantity", "2")
        self.assertEqual(json.loads(cli.stdout)["totalQuantity"], 5, cli.stderr)
        cli = self.cli("describe-consumable-resource", "--consumable-resource", "cli-res")
        self.assertEqual(json.loads(cli.stdout)["availableQuantity"], 5, cli.stderr)
        cli = self.cli("list-consumable-resources", "--max-items", "2")
        self.assertEqual(len(json.loads(cli.stdout)["consumableResources"]), 2, cli.stderr)
        cli = self.cli("list-jobs-by-consumable-resource", "--consumable-resource", "cli-res")
        self.assertEqual(json.loads(cli.stdout)["jobs"], [], cli.stderr)
        cli = self.cli("delete-consumable-resource", "--consumable-resource", "cli-res")
        self.assertEqual(cli.returncode, 0, cli.stderr)
        cli = self.cli("describe-consumable-resource", "--consumable-resource", "cli-res")
        self.assertNotEqual(cli.returncode, 0)
        self.assertIn("ClientException", cli.stderr)
        # A job naming a resource that does not exist is refused at SubmitJob.
        self.register("needs-missing", "nope", 1, ["true"])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            b.submit_job(jobName="j", jobQueue="q", jobDefinition="needs-missing")
        self.assertIn("consumable resource nope does not exist",
                      e.exception.response["Error"]["Message"])

    def test_two_units_never_run_three_jobs_across_a_sigkill(self):
        b = self.batch
        b.create_consumable_resource(consumableResourceName="lic", totalQuantity=2)
        self.register("licensed", "lic", 1, stamped(self.out, "lic", seconds=2))
        ids = [b.submit_job(jobName="l%d" % i, jobQueue="q", jobDefinition="licensed")["jobId"]
               for i in range(5)]
        # While two run, the others wait with lote's reason; the resource shows them.
        self.server.wait_for(
            lambda: b.describe_consumable_resource(consumableResource="lic")["inUseQuantity"] == 2,
            60, "two units in use")
        waiting = self.server.wait_for(
            lambda: [j for j in b.describe_jobs(jobs=ids)["jobs"]
                     if j["status"] == "RUNNABLE" and "consumable resource lic" in
                     j.get("statusReason", "")], 60, "a job waiting for lic")
        self.assertIn("consumable resource lic has 0 of 2 units available and the job needs 1",
                      waiting[0]["statusReason"])
        listed = b.list_jobs_by_consumable_resource(consumableResource="lic")["jobs"]
        self.assertEqual(sorted(j["jobName"] for j in listed), ["l%d" % i for i in range(5)])
        self.assertTrue(all(j["quantity"] == 1 for j in listed))
        running = b.list_jobs_by_consumable_resource(
            consumableResource="lic",
            filters=[{"name": "JOB_STATUS", "values": ["STARTING", "RUNNING"]}])["jobs"]
        self.assertLessEqual(len(running), 2)
        # /metrics counts the units (the total is fixed; in use is never above it).
        series = "lote_consumable_resource_units"
        self.assertEqual(metric(self.server.endpoint, series, {"resource": "lic", "state": "total"}),
                         2)
        self.assertLessEqual(
            metric(self.server.endpoint, series, {"resource": "lic", "state": "in_use"}), 2)
        # SIGKILL mid-way: the restarted server knows which units are held.
        self.server.kill()
        self.server.start()
        b = self.batch = self.server.client()
        for job_id in ids:
            job = self.wait_status(job_id)
            self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        spans = intervals(self.out, "lic")
        self.assertEqual(len(spans), 5)
        self.assertEqual(most_at_once(spans), 2, spans)
        d = b.describe_consumable_resource(consumableResource="lic")
        self.assertEqual((d["totalQuantity"], d["inUseQuantity"], d["availableQuantity"]),
                         (2, 0, 2))

    def test_non_replenishable_units_are_used_up(self):
        b = self.batch
        b.create_consumable_resource(consumableResourceName="once", totalQuantity=2,
                                     resourceType="NON_REPLENISHABLE")
        self.register("one-off", ARN_PREFIX + "once", 1, ["true"])
        first = [b.submit_job(jobName="o%d" % i, jobQueue="q", jobDefinition="one-off")["jobId"]
                 for i in range(2)]
        for job_id in first:
            self.assertEqual(self.wait_status(job_id)["status"], "SUCCEEDED")
        d = b.describe_consumable_resource(consumableResource="once")
        self.assertEqual((d["totalQuantity"], d["inUseQuantity"]), (0, 0))
        third = b.submit_job(jobName="o2", jobQueue="q", jobDefinition="one-off")["jobId"]
        job = self.server.wait_for(
            lambda: (lambda j: j if "consumable resource once" in j.get("statusReason", "")
                     else None)(self.describe(third)), 60, "o2 waiting for once")
        self.assertEqual(job["status"], "RUNNABLE")
        self.assertIn("has 0 units in all and the job needs 1", job["statusReason"])
        b.update_consumable_resource(consumableResource="once", operation="ADD", quantity=1)
        self.assertEqual(self.wait_status(third)["status"], "SUCCEEDED")
        self.assertEqual(b.describe_consumable_resource(consumableResource="once")["totalQuantity"],
                         0)

    def test_arrays_overrides_and_multi_node_jobs(self):
        b = self.batch
        b.create_consumable_resource(consumableResourceName="seat", totalQuantity=1)
        b.create_consumable_resource(consumableResourceName="wide", totalQuantity=3)
        self.register("seated", "seat", 1, stamped(self.out, "seat"))
        # An array's children each hold their own unit: one at a time.
        parent = b.submit_job(jobName="arr", jobQueue="q", jobDefinition="seated",
                              arrayProperties={"size": 3})["jobId"]
        self.assertEqual(self.wait_status(parent)["status"], "SUCCEEDED")
        spans = intervals(self.out, "seat")
        self.assertEqual(len(spans), 3)
        self.assertEqual(most_at_once(spans), 1, spans)
        # SubmitJob's override replaces the definition's list.
        job_id = b.submit_job(jobName="over", jobQueue="q", jobDefinition="seated",
                              consumableResourcePropertiesOverride={"consumableResourceList": [
                                  {"consumableResource": "wide", "quantity": 3}]})["jobId"]
        job = self.wait_status(job_id)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(job["consumableResourceProperties"]["consumableResourceList"],
                         [{"consumableResource": "wide", "quantity": 3}])
        # A multi-node job: each node of a range holds the range's units.
        b.register_job_definition(
            jobDefinitionName="mnp", type="multinode",
            nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:",
                "container": {"image": "host", "command": ["true"], "vcpus": 1, "memory": 128},
                "consumableResourceProperties": {"consumableResourceList": [
                    {"consumableResource": "wide", "quantity": 1}]}}]})
        mnp = b.submit_job(jobName="mnp", jobQueue="q", jobDefinition="mnp")["jobId"]
        listed = self.server.wait_for(
            lambda: b.list_jobs_by_consumable_resource(
                consumableResource="wide",
                filters=[{"name": "JOB_NAME", "values": ["MN*"]}])["jobs"], 30, "mnp listed")
        self.assertEqual(listed[0]["jobArn"], self.describe(mnp)["jobArn"])
        self.assertEqual(listed[0]["quantity"], 2)
        job = self.wait_status(mnp)
        self.assertEqual(job["status"], "SUCCEEDED", job.get("statusReason"))
        self.assertEqual(job["nodeProperties"]["nodeRangeProperties"][0]
                         ["consumableResourceProperties"]["consumableResourceList"][0]["quantity"],
                         1)

    def test_deleting_a_resource_under_waiting_and_running_jobs(self):
        b = self.batch
        b.create_consumable_resource(consumableResourceName="lic", totalQuantity=1)
        gate = os.path.join(self.out, "gate")
        # The first job holds the unit until the test opens the gate.
        self.register("licensed", "lic", 1,
                      ["sh", "-c", "while [ ! -e %s ]; do sleep 0.1; done" % gate])
        first = b.submit_job(jobName="first", jobQueue="q", jobDefinition="licensed")["jobId"]
        self.wait_status(first, ("RUNNING",))
        second = b.submit_job(jobName="second", jobQueue="q", jobDefinition="licensed")["jobId"]
        self.server.wait_for(
            lambda: "consumable resource lic has 0 of 1" in self.describe(second).get(
                "statusReason", ""), 60, "second waiting for the unit first holds")
        b.delete_consumable_resource(consumableResource="lic")
        job = self.server.wait_for(
            lambda: (lambda j: j if "does not exist" in j.get("statusReason", "") else None)(
                self.describe(second)), 60, "second waiting for a deleted resource")
        self.assertEqual(job["status"], "RUNNABLE")
        # The running job is not harmed by the delete; the waiting one still waits.
        with open(gate, "w"):
            pass
        self.assertEqual(self.wait_status(first)["status"], "SUCCEEDED")
        self.assertEqual(self.describe(second)["status"], "RUNNABLE")
        b.create_consumable_resource(consumableResourceName="lic", totalQuantity=1)
        self.assertEqual(self.wait_status(second)["status"], "SUCCEEDED")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
