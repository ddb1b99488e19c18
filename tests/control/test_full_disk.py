"""A full disk: the server's home on a small tmpfs, filled to the last byte.

While space is short the server keeps answering reads and refuses writes with a
ServerException that says the disk is full; once space is back it writes again
by itself (no restart); after a restart everything acknowledged is there and
nothing refused is. Needs root (mount -t tmpfs); the mount is removed at the end.
Run: python3 test_full_disk.py --lote build/lote
"""
import argparse
import errno
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import botocore.exceptions

from lote_server import LoteServer

LOTE = None
SIZE = "24m"


def fill(path):
    """Writes `path` until the filesystem has no byte left; returns its size."""
    chunk = b"\0" * (1 << 20)
    written = 0
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    written += f.write(chunk[:size])
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return written


def refused(call):
    """The ClientError of a call the server refused, or None when it succeeded."""
    try:
        call()
        return None
    except botocore.exceptions.ClientError as e:
        return e


class FullDiskTest(unittest.TestCase):
    def setUp(self):
        self.mount = tempfile.mkdtemp(prefix="lote_full_disk_")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + SIZE, "tmpfs", self.mount],
                           capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(self.mount)
            self.fail("this test needs root to mount a %s tmpfs: %s" % (SIZE, r.stderr.strip()))
        self.server = LoteServer(LOTE, home=os.path.join(self.mount, "home"),
                                 extra_args=["--console-listen", "off", "--registry", "off"])
        self.server.stderr_path = os.path.join(tempfile.gettempdir(),
                                               os.path.basename(self.mount) + ".stderr")

    def tearDown(self):
        try:
            self.server.stop()
        finally:
            subprocess.run(["umount", "-l", self.mount], check=False)
            os.rmdir(self.mount)
            if os.path.exists(self.server.stderr_path):
                os.unlink(self.server.stderr_path)

    def definition(self, batch, name):
        return batch.register_job_definition(
            jobDefinitionName=name, type="container",
            containerProperties={"image": "host", "command": ["true"], "vcpus": 1, "memory": 64})

    def definitions(self, batch):
        names, token = set(), None
        while True:
            kw = {"nextToken": token} if token else {}
            r = batch.describe_job_definitions(status="ACTIVE", **kw)
            names |= {d["jobDefinitionName"] for d in r["jobDefinitions"]}
            token = r.get("nextToken")
            if not token:
                return names

    def jobs(self, batch):
        ids, token = set(), None
        while True:
            kw = {"nextToken": token} if token else {}
            r = batch.list_jobs(jobQueue="q", jobStatus="RUNNABLE", **kw)
            ids |= {j["jobId"] for j in r["jobSummaryList"]}
            token = r.get("nextToken")
            if not token:
                return ids

    def test_reads_go_on_writes_are_refused_and_resume(self):
        self.server.start()
        batch = self.server.client("batch")
        # A DISABLED environment: jobs stay RUNNABLE, nothing runs.
        batch.create_compute_environment(
            computeEnvironmentName="ce", type="MANAGED", state="DISABLED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 4,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]})
        batch.create_job_queue(jobQueueName="q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        self.definition(batch, "d")
        acked_defs, acked_jobs = {"d"}, set()
        for i in range(20):
            acked_jobs.add(batch.submit_job(jobName="j%d" % i, jobQueue="q", jobDefinition="d")["jobId"])
        filler = os.path.join(self.mount, "filler")
        print("filled %d bytes" % fill(filler), file=sys.stderr)

        # Writes until the store runs out (the WAL may hold a few pages still).
        refusal, i = None, 0
        while refusal is None and i < 2000:
            name = "full-%d" % i
            refusal = refused(lambda: self.definition(batch, name))
            if refusal is None:
                acked_defs.add(name)
            i += 1
        self.assertIsNotNone(refusal, "2000 writes succeeded on a full disk")
        print("first refusal after %d writes: %s" % (i - 1, refusal), file=sys.stderr)
        for e in [refusal,
                  refused(lambda: self.definition(batch, "refused-def")),
                  refused(lambda: batch.submit_job(jobName="r", jobQueue="q", jobDefinition="d")),
                  refused(lambda: batch.update_job_queue(jobQueue="q", priority=5))]:
            self.assertIsNotNone(e, "a write succeeded while the disk is full")
            self.assertEqual(e.response["Error"]["Code"], "ServerException")
            self.assertIn("no space left", e.response["Error"]["Message"])
        # Reads go on, and show exactly what was acknowledged.
        self.assertEqual(self.definitions(batch), acked_defs)
        self.assertEqual(self.jobs(batch), acked_jobs)
        self.assertEqual(batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["priority"], 1)
        described = batch.describe_jobs(jobs=sorted(acked_jobs)[:5])["jobs"]
        self.assertEqual(len(described), 5)
        with urllib.request.urlopen(self.server.endpoint + "/metrics", timeout=10) as r:
            self.assertIn("lote_store_write_failures_total", r.read().decode())

        # Space back: writes go on by themselves.
        os.unlink(filler)
        self.server.wait_for(lambda: refused(lambda: self.definition(batch, "after")) is None,
                             30, "a write to succeed once space is back")
        acked_defs.add("after")
        acked_jobs.add(batch.submit_job(jobName="a", jobQueue="q", jobDefinition="d")["jobId"])
        batch.update_job_queue(jobQueue="q", priority=7)

        # A restart loads what was acknowledged, and nothing else.
        self.server.stop()
        self.server.start()
        batch = self.server.client("batch")
        self.assertEqual(self.definitions(batch), acked_defs)
        self.assertEqual(self.jobs(batch), acked_jobs)
        self.assertEqual(batch.describe_job_queues(jobQueues=["q"])["jobQueues"][0]["priority"], 7)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--lote", required=True)
    args, rest = ap.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest)
