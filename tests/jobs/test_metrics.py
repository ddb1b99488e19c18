"""GET /metrics: a real `lote server` scraped with a plain HTTP client (urllib,
unsigned, as Prometheus scrapes) before and after a job runs; the series that
follow the work move (docs/metrics.md)."""
import argparse
import os
import re
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer  # noqa: E402
from test_jobs import setup_resources  # noqa: E402

LOTE = None


def scrape(endpoint):
    with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as r:
        assert r.status == 200, r.status
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        return r.read().decode()


def value(text, series):
    """The value of one series line `name{labels}` (0 when absent)."""
    m = re.search(r"^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.server = LoteServer(LOTE).start()
        self.batch = self.server.client("batch")

    def tearDown(self):
        self.server.cleanup()

    def test_series_move_after_a_job_runs(self):
        setup_resources(self.batch)
        before = scrape(self.server.endpoint)
        for name in ("lote_job_loop_pass_seconds", "lote_scheduler_decide_seconds",
                     "lote_submit_job_seconds", "lote_store_commit_seconds"):
            self.assertIn("# TYPE %s histogram" % name, before)
        job = self.batch.submit_job(jobName="m", jobQueue="q", jobDefinition="sh")["jobId"]
        self.server.wait_for(
            lambda: self.batch.describe_jobs(jobs=[job])["jobs"][0]["status"] == "SUCCEEDED",
            60, "job %s to succeed" % job)
        after = self.server.wait_for(
            lambda: (lambda t: t if value(t, 'lote_jobs{queue="q",status="SUCCEEDED"}') == 1
                     else None)(scrape(self.server.endpoint)), 30, "lote_jobs to count the job")
        print("scraped after the job:\n" + "\n".join(
            l for l in after.splitlines() if not l.startswith("#") and "_bucket" not in l),
            file=sys.stderr)
        self.assertEqual(value(after, 'lote_jobs{queue="q",status="RUNNING"}'), 0)
        self.assertEqual(value(before, "lote_submit_job_seconds_count"), 0)
        self.assertEqual(value(after, "lote_submit_job_seconds_count"), 1)
        self.assertGreater(value(after, "lote_submit_job_seconds_sum"), 0)
        self.assertEqual(value(after, 'lote_backend_launches_total{backend="local"}'), 1)
        self.assertEqual(value(after, 'lote_backend_launch_failures_total{backend="local"}'), 0)
        for name in ("lote_job_loop_pass_seconds_count", "lote_scheduler_decide_seconds_count",
                     "lote_store_commit_seconds_count"):
            self.assertGreater(value(after, name), value(before, name), name)

    def test_other_methods_are_not_metrics(self):
        req = urllib.request.Request(self.server.endpoint + "/metrics", method="POST", data=b"{}")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        self.assertGreaterEqual(e.exception.code, 400)
        self.assertLess(e.exception.code, 500)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--lote", required=True)
    args, rest = ap.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest)
