#!/usr/bin/env python3
"""bench/logs/streams.py: a server's start and PutLogEvents against many kept log streams (issue 22).

Every job leaves a log stream per node in /aws/batch/job, kept with the group. This fills
one home's log store with N streams of three lines each (`lote_logs_bench streams`, this
build's store code; the files are the same for the peer), then, for the peer build
(--peer, e.g. main before streams were read on first use) and for this build:
  - time to listen: from exec to the "lote server listening on" line, warm (the streams in
    the page cache) and, when run as root, cold (caches dropped first);
  - resident memory (VmRSS) right after listening;
  - PutLogEvents p50 and p99 into one new stream of the big group (--puts calls, one event
    each, through boto3), started right after listening;
  - for this build, the time until the background thread has read every stream (the
    group's storedBytes stops growing).
Usage: bench/logs/streams.py --build build [--streams 20000] [--puts 200] [--peer PEER_BUILD]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host import drop_caches, percentiles, rss_kib  # noqa: E402
from lote_server import LoteServer  # noqa: E402

GROUP = "/aws/batch/job"


def run(binary, home, cold, puts, stream, wait_loaded):
    dropped = drop_caches() if cold else False
    began = time.monotonic()
    server = LoteServer(binary, home=home).start()
    listen = time.monotonic() - began
    try:
        rss = rss_kib(server.proc.pid) / 1024
        logs = server.client("logs")
        try:
            logs.create_log_group(logGroupName=GROUP)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
        lat = []
        for i in range(puts):
            t = time.monotonic()
            logs.put_log_events(logGroupName=GROUP, logStreamName=stream,
                                logEvents=[{"timestamp": int(time.time() * 1000),
                                            "message": "put %d" % i}])
            lat.append(1000 * (time.monotonic() - t))
        loaded = None
        if wait_loaded:
            # storedBytes counts the streams read so far; it stops growing once all are.
            last, still = -1, 0
            while still < 3:
                got = logs.describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"][0]
                still = still + 1 if got["storedBytes"] == last else 0
                last = got["storedBytes"]
                time.sleep(0.2)
            loaded = time.monotonic() - began - 0.6
        return listen, dropped, rss, percentiles(lat) if lat else (0, 0), loaded
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--streams", type=int, default=20000)
    ap.add_argument("--puts", type=int, default=200)
    ap.add_argument("--peer", default="")
    a = ap.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    print("host: %d CPUs, load average %s; %d log streams"
          % (os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]), a.streams))
    this = os.path.abspath(os.path.join(a.build, "lote"))
    tool = os.path.abspath(os.path.join(a.build, "bench", "logs", "lote_logs_bench"))
    peer = os.path.abspath(os.path.join(a.peer, "lote")) if a.peer else ""
    home = tempfile.mkdtemp(prefix="lote_bench_streams_")
    try:
        # The home is made by the peer when there is one: an older build refuses a
        # newer job store.
        empty = run(peer or this, home, False, 0, "warm-up", False)[0]
        t = time.monotonic()
        subprocess.run([tool, "streams", os.path.join(home, "logs"), str(a.streams)], check=True,
                       stdout=subprocess.DEVNULL)
        print("empty home: %.2f s to listen; %d streams made in %.1f s"
              % (empty, a.streams, time.monotonic() - t), flush=True)
        results = {}
        builds = [("peer", peer)] if peer else []
        builds.append(("this", this))
        for name, binary in builds:
            for cold in (False, True):
                listen, dropped, rss, (p50, p99), loaded = run(
                    binary, home, cold, a.puts, "%s-%d" % (name, cold), name == "this")
                results[(name, cold)] = (listen, p50)
                print("%s: %.2f s to listen (%s), %.0f MiB resident; PutLogEvents p50 %.1f ms "
                      "p99 %.1f ms%s"
                      % (name, listen, "cold" if dropped else "warm", rss, p50, p99,
                         "; every stream read %.1f s after exec" % loaded if loaded else ""),
                      flush=True)
        for cold in (False, True):
            if ("peer", cold) in results:
                p, t = results[("peer", cold)], results[("this", cold)]
                print("ratio peer/this, %s: time to listen %.1fx, PutLogEvents p50 %.1fx"
                      % ("cold" if cold else "warm", p[0] / t[0], p[1] / t[1]))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
