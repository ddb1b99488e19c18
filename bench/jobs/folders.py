#!/usr/bin/env python3
"""bench/jobs/folders.py: time to listen against the job folders a home keeps (issue 22).

Every node the local executor runs leaves a folder, $LOTE_HOME/jobs/<job>/<attempt>/<node>,
with its records (status.json once it ended), kept until retention deletes the job. At
start the server must find any node that may still run unknown to it. This makes N folders
of finished single-node jobs (the three directories and a status.json, as a real node's
end leaves them) in one home, then times `lote server` from exec to its "listening" line:
  - the peer build (--peer, e.g. main before the live-node list), which reads every folder;
  - this build's first start on that home (a home from before nodes-live/: every folder is
    read once), then its next starts (only the nodes listed live);
each warm (folders in the page cache) and, when run as root, cold (caches dropped first).
Usage: bench/jobs/folders.py --build build [--folders 20000] [--peer PEER_BUILD]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host import drop_caches  # noqa: E402


def make_folders(home, n):
    status = '{"outcome": "exited", "exitCode": 0, "startedAt": 1, "stoppedAt": 2}\n'
    for _ in range(n):
        node = os.path.join(home, "jobs", str(uuid.uuid4()), "1", "0")
        os.makedirs(node)
        with open(os.path.join(node, "status.json"), "w") as f:
            f.write(status)


def time_to_listen(binary, home, cold):
    dropped = drop_caches() if cold else False
    began = time.monotonic()
    proc = subprocess.Popen([binary, "server", "--home", home, "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    took = time.monotonic() - began
    proc.terminate()
    proc.wait()
    if "listening" not in line:
        raise SystemExit("%s did not start: %r" % (binary, line))
    return took, dropped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--folders", type=int, default=20000)
    ap.add_argument("--peer", default="")
    a = ap.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    print("host: %d CPUs, load average %s; %d job folders"
          % (os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]), a.folders))
    this = os.path.abspath(os.path.join(a.build, "lote"))
    peer = os.path.abspath(os.path.join(a.peer, "lote")) if a.peer else ""
    home = tempfile.mkdtemp(prefix="lote_bench_folders_")
    try:
        # The home is made by the peer when there is one: an older build refuses a
        # newer store, and this build migrates the older one.
        empty_s, _ = time_to_listen(peer or this, home, cold=False)
        shutil.rmtree(os.path.join(home, "nodes-live"), ignore_errors=True)  # an older home
        t = time.monotonic()
        make_folders(home, a.folders)
        print("empty home: %.2f s to listen; %d folders made in %.1f s"
              % (empty_s, a.folders, time.monotonic() - t), flush=True)
        results = {}
        if peer:
            for cold in (False, True):
                took, dropped = time_to_listen(peer, home, cold)
                results[("peer", cold)] = took
                print("peer: %.2f s to listen (%s)" % (took, "cold" if dropped else "warm"),
                      flush=True)
        took, dropped = time_to_listen(this, home, cold=True)
        print("this, first start on the older home (every folder read once): %.2f s (%s)"
              % (took, "cold" if dropped else "warm"), flush=True)
        for cold in (False, True):
            took, dropped = time_to_listen(this, home, cold)
            results[("this", cold)] = took
            print("this: %.2f s to listen (%s)" % (took, "cold" if dropped else "warm"),
                  flush=True)
        for cold in (False, True):
            if ("peer", cold) in results:
                print("ratio peer/this time to listen, %s: %.1fx"
                      % ("cold" if cold else "warm",
                         results[("peer", cold)] / results[("this", cold)]))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
