"""bench/quarantine part 1: a bad node among NODES virtual instances.

JOBS single-node jobs (2 vCPUs each: one per c5.large instance, so NODES run at
a time; retryStrategy 5 attempts) are submitted at once to a server with
quarantine on (default options) and one with it off (--quarantine-failures 0),
same run. The instance of the first attempt seen is the bad node: every attempt
that lands on it has its runner killed (SIGKILL, as a node that dies: NODE_LOST).
Printed per mode: attempts lost on the bad node, the last job index that landed
there, and the seconds until every job ended.
Usage: bad_node.py LOTE NODES JOBS"""
import json
import os
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402


def run(lote, nodes, jobs, extra):
    server = LoteServer(lote, extra_args=extra).start()
    try:
        batch = server.client()
        create_emulated_environment(batch, max_vcpus=2 * nodes)
        batch.create_job_queue(jobQueueName="q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        batch.register_job_definition(
            jobDefinitionName="w", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "2"},
                                                          {"type": "MEMORY", "value": "1024"}]})
        ready = tempfile.mkdtemp(prefix="lote_bench_bad_node_")
        os.chmod(ready, 0o777)
        script = ('echo "$LOTE_PRIVATE_IPV4_ADDRESS" > %s/"$AWS_BATCH_JOB_ID.$AWS_BATCH_JOB_ATTEMPT"'
                  '.tmp && mv %s/"$AWS_BATCH_JOB_ID.$AWS_BATCH_JOB_ATTEMPT".tmp '
                  '%s/"$AWS_BATCH_JOB_ID.$AWS_BATCH_JOB_ATTEMPT"; sleep 1' % (ready, ready, ready))
        t0 = time.time()
        ids = []
        for i in range(jobs):
            ids.append(batch.submit_job(jobName="w%d" % i, jobQueue="q", jobDefinition="w",
                                        retryStrategy={"attempts": 5},
                                        containerOverrides={"command": ["sh", "-c", script]}
                                        )["jobId"])
        order = {job_id: i for i, job_id in enumerate(ids)}
        bad, seen, lost, last_on_bad = None, set(), 0, -1
        pending = set(ids)
        next_check = 0
        while pending:
            for name in sorted(os.listdir(ready)):
                if name.endswith(".tmp") or name in seen:
                    continue
                seen.add(name)
                with open(os.path.join(ready, name)) as f:
                    ip = f.read().strip()
                if bad is None:
                    bad = ip
                if ip != bad:
                    continue
                job_id, attempt = name.rsplit(".", 1)
                shim = os.path.join(server.home, "jobs", job_id, attempt, "0", "shim.json")
                try:
                    with open(shim) as f:
                        os.kill(json.load(f)["process"]["pid"], signal.SIGKILL)
                    lost += 1
                    last_on_bad = max(last_on_bad, order[job_id])
                except (OSError, ValueError, KeyError):
                    pass
            if time.time() >= next_check:
                next_check = time.time() + 0.5
                for k in range(0, len(ids), 100):
                    for j in batch.describe_jobs(jobs=ids[k:k + 100])["jobs"]:
                        if j["status"] in ("SUCCEEDED", "FAILED"):
                            pending.discard(j["jobId"])
            time.sleep(0.02)
        seconds = time.time() - t0
        statuses = {}
        for k in range(0, len(ids), 100):
            for j in batch.describe_jobs(jobs=ids[k:k + 100])["jobs"]:
                statuses[j["status"]] = statuses.get(j["status"], 0) + 1
        return lost, last_on_bad, seconds, statuses
    finally:
        server.cleanup()


def main():
    lote, nodes, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print("bad node among %d instances, %d jobs (1 s each, one per instance), "
          "every attempt on the bad node killed" % (nodes, jobs))
    results = {}
    for mode, extra in (("quarantine on (3 failures)", []),
                        ("quarantine off (--quarantine-failures 0)",
                         ["--quarantine-failures", "0"])):
        lost, last, seconds, statuses = run(lote, nodes, jobs, extra)
        results[mode] = lost
        print("  %s: %d attempts lost on the bad node (last on it: job %d of %d), "
              "all jobs ended in %.1f s %s" % (mode, lost, last + 1, jobs, seconds, statuses))
    on, off = list(results.values())
    print("attempts lost: on %d, off %d; ratio on/off %.2fx" % (on, off, on / off if off else 0))


if __name__ == "__main__":
    main()
