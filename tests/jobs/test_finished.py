"""Finished jobs out of memory, and retention (issue 22): a real `lote server` runs jobs to
their end; once they left memory (lote_job_loop_jobs_in_memory 0 on GET /metrics) they are
described, listed (paged with nextToken across a submission between two pages) and tagged
with the aws CLI and boto3, and read the same after a restart. A server with a retention of
seconds (--job-retention-days) deletes a job that ended longer ago and keeps a recent one."""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer  # noqa: E402
from test_jobs import JobHelpers, setup_resources  # noqa: E402

LOTE = None


def metric(endpoint, name):
    with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


class FinishedJobsTest(JobHelpers, unittest.TestCase):
    def start(self, *extra):
        self.server = LoteServer(LOTE, extra_args=extra).start()
        self.addCleanup(self.server.cleanup)
        self.batch = self.server.client()
        self.out = self.server.home

    def aws(self, *args):
        out = subprocess.run(["aws", "batch"] + list(args) + ["--output", "json"],
                             env=self.server.env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout) if out.stdout.strip() else {}

    def wait_out_of_memory(self, expected=0):
        self.server.wait_for(
            lambda: metric(self.server.endpoint, "lote_job_loop_jobs_in_memory") == expected,
            30, "%d job(s) in the job loop's memory" % expected)

    def test_finished_jobs_read_from_the_store_after_they_left_memory(self):
        self.start()
        setup_resources(self.batch)
        ids = [self.submit("done-%d" % i, "echo %d" % i) for i in range(5)]
        for job_id in ids:
            self.assertEqual(self.wait_status(job_id)["status"], "SUCCEEDED")
        self.wait_out_of_memory()
        # Described by the aws CLI as DescribeJobs described them before.
        described = self.aws("describe-jobs", "--jobs", *ids)["jobs"]
        self.assertEqual(sorted(j["jobId"] for j in described), sorted(ids))
        for job in described:
            self.assertEqual(job["status"], "SUCCEEDED")
            self.assertEqual(job["container"]["exitCode"], 0)
            self.assertEqual(len(job["attempts"]), 1)
        # Paged 2 at a time; a job submitted (and ended) between pages comes last.
        page = self.batch.list_jobs(jobQueue="q", jobStatus="SUCCEEDED", maxResults=2)
        listed = [j["jobId"] for j in page["jobSummaryList"]]
        late = self.submit("late", "true")
        self.assertEqual(self.wait_status(late)["status"], "SUCCEEDED")
        while "nextToken" in page:
            page = self.batch.list_jobs(jobQueue="q", jobStatus="SUCCEEDED", maxResults=2,
                                        nextToken=page["nextToken"])
            listed += [j["jobId"] for j in page["jobSummaryList"]]
        self.assertEqual(sorted(listed[:5]), sorted(ids))
        self.assertEqual(listed[5:], [late])
        with self.assertRaises(Exception) as bad:
            self.batch.list_jobs(jobQueue="q", jobStatus="SUCCEEDED", nextToken="3")
        self.assertIn("ClientException", str(bad.exception))
        # Tagged with the aws CLI after it left memory, then listed back.
        self.wait_out_of_memory()
        arn = described[0]["jobArn"]
        self.aws("tag-resource", "--resource-arn", arn, "--tags", "team=nlp")
        self.assertEqual(self.aws("list-tags-for-resource", "--resource-arn", arn)["tags"],
                         {"team": "nlp"})
        self.wait_out_of_memory()
        # After a restart: nothing finished is loaded, everything reads the same.
        self.server.stop()
        self.server.start()
        self.batch = self.server.client()
        self.wait_out_of_memory()
        again = {j["jobId"]: j for j in self.batch.describe_jobs(jobs=ids)["jobs"]}
        for job in described:
            expected = dict(job)
            if job["jobArn"] == arn:
                expected["tags"] = {"team": "nlp"}
            self.assertEqual(again[job["jobId"]], expected)
        listed = self.aws("list-jobs", "--job-queue", "q", "--job-status", "SUCCEEDED",
                          "--page-size", "2")["jobSummaryList"]
        self.assertEqual(len(listed), 6)

    def test_retention_deletes_jobs_that_ended_longer_ago(self):
        # Kept for ever while both end, 10 s apart; then a server with a retention of 6 s
        # (the option is in days) deletes the first at its first pass and keeps the second.
        self.start("--job-retention-days", "0")
        setup_resources(self.batch)
        old = self.submit("old", "true")
        self.assertEqual(self.wait_status(old)["status"], "SUCCEEDED")
        old_end = self.describe(old)["stoppedAt"] / 1000.0
        while time.time() < old_end + 10:
            time.sleep(0.2)
        recent = self.submit("recent", "true")
        self.assertEqual(self.wait_status(recent)["status"], "SUCCEEDED")
        self.server.stop()
        self.server.extra_args = ["--job-retention-days", "%.10f" % (6 / 86400)]
        self.server.start()
        self.batch = self.server.client()
        self.server.wait_for(lambda: not self.batch.describe_jobs(jobs=[old])["jobs"], 30,
                             "the old job deleted")
        self.assertEqual(self.describe(recent)["status"], "SUCCEEDED")
        self.assertIn("retention", self.server.stderr())

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
