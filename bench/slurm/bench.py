"""bench/slurm: N trivial jobs (`true`, 1 CPU) end to end through lote -> Slurm
versus `sbatch` of the same N jobs directly, on the same local Slurm cluster
(tests/slurm/cluster.sh: 4 nodes x CPUS CPUs), in the same run. Prints the
seconds from the first submit until every job has ended, for each peer, and
the ratio (lote's overhead). usage: bench.py --lote BIN [--jobs N] [--runs R]"""
import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "slurm"))
from lote_server import LoteServer  # noqa: E402
from test_slurm import SlurmCluster, create_slurm_queue  # noqa: E402


CLIENTS = 8  # both peers submit from this many threads


def parallel(n, submit):
    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(submit, range(n)))


def direct(cluster, n):
    t0 = time.time()
    parallel(n, lambda i: cluster.run("sbatch", "--parsable", "-p", "train", "-c", "1", "-o",
                                      "/dev/null", "--wrap", "true"))
    submitted = time.time() - t0
    while cluster.run("squeue", "-h", "-o", "%i").stdout.strip():
        time.sleep(0.1)
    return time.time() - t0, submitted


def through_lote(lote, cluster, n):
    server = LoteServer(lote).start()
    try:
        b = server.client()
        create_slurm_queue(b, cluster.conf, queue="q", emulation=False)
        b.register_job_definition(
            jobDefinitionName="true", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "64"}]})
        time.sleep(1.0)  # the partition's capacity is known (first pass)
        t0 = time.time()
        ids = parallel(n, lambda i: b.submit_job(jobName="t%d" % i, jobQueue="q",
                                                 jobDefinition="true")["jobId"])
        submitted = time.time() - t0
        pending = set(ids)
        failed = 0
        while pending:
            # 100 at a time; the next 100 only once these have all ended.
            batch = sorted(pending)[:100]
            for j in b.describe_jobs(jobs=batch)["jobs"]:
                if j["status"] in ("SUCCEEDED", "FAILED"):
                    pending.discard(j["jobId"])
                    failed += j["status"] == "FAILED"
            if pending and pending.intersection(batch):
                time.sleep(0.1)
        return time.time() - t0, submitted, failed
    finally:
        server.cleanup()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lote", required=True)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--cpus", type=int, default=8)
    a = p.parse_args()
    cluster = SlurmCluster(nodes=4, cpus=a.cpus)
    try:
        sched = os.environ.get("LOTE_SLURM_SCHED_PARAMS", "batch_sched_delay=0")
        print("cluster: 4 nodes x %d CPUs = %d slots, SchedulerParameters=%s; %d jobs `true`, "
              "submitted from %d threads by each peer" % (a.cpus, 4 * a.cpus, sched, a.jobs,
                                                          CLIENTS))
        for run in range(a.runs):
            d, d_sub = direct(cluster, a.jobs)
            l, l_sub, failed = through_lote(os.path.abspath(a.lote), cluster, a.jobs)
            print("run %d: sbatch direct %.1f s (%.1f jobs/s; submits %.1f s) | lote->Slurm "
                  "%.1f s (%.1f jobs/s; submits %.1f s; %d failed) | lote / direct = %.2fx"
                  % (run + 1, d, a.jobs / d, d_sub, l, a.jobs / l, l_sub, failed, l / d))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
