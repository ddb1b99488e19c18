#!/usr/bin/env python3
"""bench/jobs/restart.py: restart and reads with many finished jobs in the store (issue 22).

A real `lote server` gets a compute environment, queue and job definition and
runs TEMPLATES trivial jobs to SUCCEEDED (lote_jobs_load --setup); it is
stopped, and the store is filled directly through SQL with N more finished
jobs: copies of those rows under new job ids (the id replaced in the document),
each with one job event (real jobs have about eight). For this build and
(with --peer) another build, each on a store of its own generated the same way:
  - time to listen: from exec to the "lote server listening on" line;
  - resident memory (VmRSS) after start, and per job over the empty store's;
  - DescribeJobs p50/p99 (one random id per call) and ListJobs p50/p99
    (jobQueue + jobStatus SUCCEEDED, maxResults 100, following nextToken);
  - ListJobs with a filter that no stored job matches (JOB_NAME, then
    JOB_DEFINITION by name): the worst case of a filter, every finished job of
    the queue is a candidate; p50 and max of --filter-calls calls.
Usage: bench/jobs/restart.py --build build [--jobs 1000000] [--peer PEER_BUILD]
"""
import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host import rss_kib, percentiles  # noqa: E402
from lote_server import LoteServer  # noqa: E402


def start(binary, home):
    began = time.monotonic()
    server = LoteServer(binary, home=home).start()
    return server, time.monotonic() - began


def reads(server, ids, calls, list_calls):
    batch = server.client()
    queue = "jobs-bench-q"
    describe, listing = [], []
    rng = random.Random(1)
    for _ in range(calls):
        job = rng.choice(ids)
        t = time.monotonic()
        got = batch.describe_jobs(jobs=[job])["jobs"]
        describe.append(1000 * (time.monotonic() - t))
        assert len(got) == 1 and got[0]["status"] == "SUCCEEDED", (job, got)
    token = None
    for _ in range(list_calls):
        args = {"jobQueue": queue, "jobStatus": "SUCCEEDED", "maxResults": 100}
        if token:
            args["nextToken"] = token
        t = time.monotonic()
        page = batch.list_jobs(**args)
        listing.append(1000 * (time.monotonic() - t))
        assert len(page["jobSummaryList"]) == 100
        token = page.get("nextToken")
    return percentiles(describe), percentiles(listing)


def filtered_reads(server, calls):
    """ms per ListJobs call with a JOB_NAME and a JOB_DEFINITION that match nothing."""
    import boto3
    import botocore.config
    key, secret = server.credentials()
    batch = boto3.client("batch", endpoint_url=server.endpoint, region_name="us-east-1",
                         aws_access_key_id=key, aws_secret_access_key=secret,
                         config=botocore.config.Config(retries={"max_attempts": 1},
                                                       read_timeout=600))
    out = {}
    for name, value in (("JOB_NAME", "no-such-job"), ("JOB_DEFINITION", "no-such-definition")):
        ms = []
        for _ in range(calls):
            t = time.monotonic()
            page = batch.list_jobs(jobQueue="jobs-bench-q",
                                   filters=[{"name": name, "values": [value]}])
            ms.append(1000 * (time.monotonic() - t))
            assert page["jobSummaryList"] == [], page["jobSummaryList"][:1]
        out[name] = (sorted(ms)[len(ms) // 2], max(ms))
    return out


def fill(db_path, n):
    """N finished jobs copied from the template rows, in the columns this store has (schema
    version 5 added parent_id, array_index, stopped_ms, node_failed_ms: copied too)."""
    db = sqlite3.connect(db_path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(jobs)")]
    templates = db.execute(
        "SELECT %s FROM jobs WHERE status = 'SUCCEEDED'" % ", ".join(columns)).fetchall()
    id_col, doc_col = columns.index("job_id"), columns.index("doc")
    last_event = {row[id_col]: db.execute(
        "SELECT time_ms, type, payload FROM job_events WHERE job_id = ? ORDER BY seq DESC LIMIT 1",
        (row[id_col],)).fetchone() for row in templates}
    rng = random.Random(7)
    insert_job = "INSERT INTO jobs (%s) VALUES (%s)" % (
        ", ".join(columns), ", ".join("?" * len(columns)))
    insert_event = "INSERT INTO job_events (job_id, seq, time_ms, type, payload) VALUES (?,?,?,?,?)"

    def rows():
        for i in range(n):
            t = templates[i % len(templates)]
            new_id = "%08x-%04x-4%03x-8%03x-%012x" % (
                rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(12),
                rng.getrandbits(12), i)
            job = list(t)
            job[id_col] = new_id
            job[doc_col] = t[doc_col].replace(t[id_col], new_id)
            yield tuple(job), (new_id, 1) + tuple(last_event[t[id_col]])

    ids = []
    batch_jobs, batch_events = [], []
    with db:
        for job, event in rows():
            ids.append(job[id_col])
            batch_jobs.append(job)
            batch_events.append(event)
            if len(batch_jobs) >= 20000:
                db.executemany(insert_job, batch_jobs)
                db.executemany(insert_event, batch_events)
                batch_jobs, batch_events = [], []
        db.executemany(insert_job, batch_jobs)
        db.executemany(insert_event, batch_events)
    db.close()
    return ids


def prepare(name, binary, load, templates, jobs):
    """A home whose store holds `templates` real finished jobs and `jobs` copies; the empty
    store's time to listen and VmRSS."""
    home = tempfile.mkdtemp(prefix="lote_bench_restart_")
    server, _ = start(binary, home)
    key, secret = server.credentials()
    subprocess.run([load, "--endpoint", server.endpoint, "--key", key, "--secret", secret,
                    "--jobs", str(templates), "--clients", "2", "--setup",
                    "--instance-type", "local", "--wait-seconds", "120", "--paced-jobs", "0",
                    "--warmup", "0"], check=True, stdout=subprocess.DEVNULL)
    server.stop()
    server, base_listen = start(binary, home)
    base_rss = rss_kib(server.proc.pid)
    server.stop()
    print("%s: empty store (%d jobs): time to listen %.2f s, VmRSS %.0f MiB"
          % (name, templates, base_listen, base_rss / 1024.0), flush=True)
    t = time.monotonic()
    ids = fill(os.path.join(home, "lote.db"), jobs)
    print("%s: filled %d jobs through SQL in %.1f s" % (name, jobs, time.monotonic() - t),
          flush=True)
    return home, ids, base_rss


def measure(name, binary, home, ids, base_rss, calls, list_calls, filter_calls):
    server, listen_s = start(binary, home)
    try:
        rss = rss_kib(server.proc.pid)
        (d50, d99), (l50, l99) = reads(server, ids, calls, list_calls)
        per_job = (rss - base_rss) * 1024.0 / len(ids) if base_rss else float("nan")
        print("%s: time to listen %.2f s; VmRSS %.0f MiB (%.0f bytes per finished job over the "
              "empty store); DescribeJobs p50 %.1f ms p99 %.1f ms; ListJobs p50 %.1f ms p99 %.1f ms"
              % (name, listen_s, rss / 1024.0, per_job, d50, d99, l50, l99), flush=True)
        filtered = {}
        if filter_calls > 0:
            filtered = filtered_reads(server, filter_calls)
            print("%s: ListJobs filtered, no job matches: JOB_NAME p50 %.1f ms max %.1f ms; "
                  "JOB_DEFINITION p50 %.1f ms max %.1f ms"
                  % ((name,) + filtered["JOB_NAME"] + filtered["JOB_DEFINITION"]), flush=True)
        return listen_s, filtered
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--templates", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--list-calls", type=int, default=20)
    ap.add_argument("--filter-calls", type=int, default=5)
    ap.add_argument("--peer", default="")
    a = ap.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    print("host: %d CPUs, load average %s; %d finished jobs filled into the store"
          % (os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]), a.jobs))
    # The peer gets a store of its own (an older build may not open this one's schema),
    # generated with its own binary; its load client is this build's.
    load = os.path.abspath(os.path.join(a.build, "bench", "jobs", "lote_jobs_load"))
    runs = [("this", a.build)] + ([("peer", a.peer)] if a.peer else [])
    listen, filtered = {}, {}
    for name, build in runs:
        binary = os.path.abspath(os.path.join(build, "lote"))
        home, ids, base_rss = prepare(name, binary, load, a.templates, a.jobs)
        try:
            listen[name], filtered[name] = measure(name, binary, home, ids, base_rss, a.calls,
                                                   a.list_calls, a.filter_calls)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    if "peer" in listen:
        print("ratio peer/this time to listen: %.2fx" % (listen["peer"] / listen["this"]))
        for f in filtered.get("this", {}):
            print("ratio peer/this ListJobs %s (no match) p50: %.0fx"
                  % (f, filtered["peer"][f][0] / max(filtered["this"][f][0], 1e-9)))


if __name__ == "__main__":
    main()
