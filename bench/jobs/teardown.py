#!/usr/bin/env python3
"""bench/jobs/teardown.py: how fast a gang is torn down when one node fails (issue 22).

A real `lote server` (this build) runs ROUNDS jobs of a 4-node multinode
definition: node 2 exits 1 after half a second while the others sleep; the
gang rule ends the attempt and terminates the other nodes (SIGTERM, which
`sleep` obeys at once). Per round, from the nodes' records (status.json's
stopped_at_ms: the runner's own stamp of each command's exit; DescribeJobs
gives every node the attempt's end): teardown = the last other node's stop -
node 2's stop. Measured with the node agent
(lote server's default) and, same run, with one supervisor program per node
(--node-agent off); p50, p99 and max of each, and their ratio.
Usage: bench/jobs/teardown.py --build build [--rounds 20]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "control"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host import percentiles  # noqa: E402
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

NODES = 4
FAILING = 2


def stopped_at(status_path):
    try:
        with open(status_path) as f:
            return json.load(f)["stopped_at_ms"]
    except (OSError, ValueError, KeyError):
        return None


def measure(binary, agent, rounds):
    server = LoteServer(binary, extra_args=["--node-agent", "on" if agent else "off"]).start()
    try:
        batch = server.client()
        create_emulated_environment(batch, max_vcpus=64)
        batch.create_job_queue(jobQueueName="q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        server.wait_for(lambda: batch.describe_job_queues(jobQueues=["q"])
                        ["jobQueues"][0]["status"] == "VALID", 120, "the queue")
        script = ('if [ "$AWS_BATCH_JOB_NODE_INDEX" = %d ]; then sleep 0.5; exit 1; fi; '
                  'exec sleep 300' % FAILING)
        node = {"image": "img", "vcpus": 1, "memory": 64, "command": ["sh", "-c", script]}
        batch.register_job_definition(
            jobDefinitionName="gang", type="multinode",
            nodeProperties={"numNodes": NODES, "mainNode": 0,
                            "nodeRangeProperties": [{"targetNodes": "0:", "container": node}]})
        teardown = []
        for r in range(rounds):
            job = batch.submit_job(jobName="g%d" % r, jobQueue="q", jobDefinition="gang")["jobId"]
            server.wait_for(lambda: batch.describe_jobs(jobs=[job])["jobs"][0]["status"]
                            == "FAILED", 120, "job %s FAILED" % job)
            stopped = {n: server.wait_for(lambda n=n: stopped_at(
                os.path.join(server.home, "jobs", job, "1", str(n), "status.json")), 120,
                "node %d's outcome" % n) for n in range(NODES)}
            others = [stopped[n] for n in range(NODES) if n != FAILING]
            teardown.append(max(others) - stopped[FAILING])
        return teardown
    finally:
        server.cleanup()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    binary = os.path.abspath(os.path.join(args.build, "lote"))
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    print("host: %d CPUs, load average %s; %d-node gangs, node %d fails, %d rounds each" % (
        os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]), NODES, FAILING,
        args.rounds))
    results = {}
    for name, agent in (("node agent", True), ("supervisor per node", False)):
        ms = measure(binary, agent, args.rounds)
        p50, p99 = percentiles(ms)
        results[name] = p99
        print("%s: teardown p50 %.0f ms, p99 %.0f ms, max %.0f ms (goal: within 100 ms)" % (
            name, p50, p99, max(ms)))
    print("ratio p99 supervisor per node / node agent: %.2fx" % (
        results["supervisor per node"] / max(results["node agent"], 1e-9)))
    print("load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
