"""bench/jobs driver (see run.sh)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "control"))
from lote_server import LoteServer  # noqa: E402


def wait_final(batch, job_id):
    while True:
        job = batch.describe_jobs(jobs=[job_id])["jobs"][0]
        if job["status"] in ("SUCCEEDED", "FAILED"):
            return job
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lote", required=True)
    ap.add_argument("--jobs", type=int, default=1000)
    args = ap.parse_args()
    cpus = os.cpu_count()
    server = LoteServer(os.path.abspath(args.lote)).start()
    try:
        batch = server.client()
        batch.create_compute_environment(
            computeEnvironmentName="ce", type="MANAGED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": cpus,
                              "instanceTypes": ["local"], "subnets": ["s"]})
        while batch.describe_compute_environments(
                computeEnvironments=["ce"])["computeEnvironments"][0]["status"] != "VALID":
            time.sleep(0.05)
        batch.create_job_queue(jobQueueName="q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        batch.register_job_definition(
            jobDefinitionName="t", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "64"}]})
        latencies = []
        for _ in range(5):
            t0 = time.time()
            job_id = batch.submit_job(jobName="one", jobQueue="q", jobDefinition="t")["jobId"]
            assert wait_final(batch, job_id)["status"] == "SUCCEEDED"
            latencies.append(time.time() - t0)
        t0 = time.time()
        parent = batch.submit_job(jobName="arr", jobQueue="q", jobDefinition="t",
                                  arrayProperties={"size": args.jobs})["jobId"]
        job = wait_final(batch, parent)
        lote_s = time.time() - t0
        assert job["status"] == "SUCCEEDED", job.get("statusReason")
    finally:
        server.cleanup()
    t0 = time.time()
    subprocess.run("seq %d | xargs -P %d -n 1 sh -c true" % (args.jobs, cpus), shell=True,
                   check=True)
    peer_s = time.time() - t0
    print("host: %d CPUs; array of %d children (`true`, 1 vCPU each)" % (cpus, args.jobs))
    print("lote single job submit->SUCCEEDED: median %.3f s (5 runs)" % statistics.median(latencies))
    print("lote array: %.2f s (%.0f jobs/s)" % (lote_s, args.jobs / lote_s))
    print("peer xargs -P %d: %.2f s (%.0f commands/s)" % (cpus, peer_s, args.jobs / peer_s))
    print("ratio lote/peer wall: %.1fx" % (lote_s / peer_s))


if __name__ == "__main__":
    main()
