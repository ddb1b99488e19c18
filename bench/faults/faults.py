"""bench/faults, parts 1 and 2 (see run.sh): fault -> attempt end -> retry RUNNING for
an injected kill and a real kill -9 of the same node, and the seconds `lote jobs dump`
takes for a 4-rank training job.

usage: faults.py LOTE_BINARY TEST_DATA_DIR ROUNDS
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

LOTE, DATA, ROUNDS = os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3])
# Node 0 reports progress; node 1 only waits: the node that is killed.
SCRIPT = ('if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then i=0; while true; do i=$((i+1)); '
          'echo "LOTE_PROGRESS {\\"step\\": $i}"; sleep 0.2; done; else sleep 100000; fi')


def wait(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise RuntimeError("timed out waiting for " + what)


def setup(server, batch):
    create_emulated_environment(batch, "bench-ce")
    batch.create_job_queue(jobQueueName="bench-q", priority=1, computeEnvironmentOrder=[
        {"order": 1, "computeEnvironment": "bench-ce"}])
    wait(lambda: batch.describe_job_queues(jobQueues=["bench-q"])["jobQueues"][0]["status"] ==
         "VALID", 30, "queue")
    batch.register_job_definition(
        jobDefinitionName="two", type="multinode", retryStrategy={"attempts": 2},
        nodeProperties={"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [{
            "targetNodes": "0:", "container": {"image": "host", "command": ["sh", "-c", SCRIPT],
                                               "vcpus": 1, "memory": 64}}]})


def one_round(server, batch, home, injected):
    params = {"lote:injectKillNode": "1", "lote:injectKillAfterSeconds": "2"} if injected else {}
    job_id = batch.submit_job(jobName="f", jobQueue="bench-q", jobDefinition="two",
                              parameters=params)["jobId"]
    node1 = os.path.join(home, "jobs", job_id, "1", "1")
    if injected:
        fault = wait(lambda: os.path.exists(node1 + "/fault.json") and json.load(
            open(node1 + "/fault.json")), 60, "the injected fault")
        fault_ms = fault["at_ms"]
    else:
        cmd = wait(lambda: os.path.exists(node1 + "/command.json") and json.load(
            open(node1 + "/command.json")), 60, "node 1's command")
        time.sleep(2)  # as the injected fault: 2 s after the command started
        fault_ms = int(time.time() * 1000)
        os.kill(cmd["process"]["pid"], signal.SIGKILL)

    def retried():
        j = batch.describe_jobs(jobs=[job_id])["jobs"][0]
        a = j.get("attempts", [])
        return j if j["status"] == "RUNNING" and len(a) == 1 and j.get("startedAt") else None
    # attempts[] holds the ended attempts: the first one ended, the retry RUNNING.
    job = wait(retried, 60, "the retry RUNNING")
    ended_ms = job["attempts"][0]["stoppedAt"]
    running_ms = job["startedAt"]
    batch.terminate_job(jobId=job_id, reason="bench done")
    wait(lambda: batch.describe_jobs(jobs=[job_id])["jobs"][0]["status"] == "FAILED", 60, "end")
    return ended_ms - fault_ms, running_ms - fault_ms


def fault_timing():
    server = LoteServer(LOTE).start()
    try:
        batch = server.client()
        setup(server, batch)
        rows = {True: [], False: []}
        for _ in range(ROUNDS):
            for injected in (True, False):
                rows[injected].append(one_round(server, batch, server.home, injected))
        for injected, name in ((True, "injected kill (lote:injectKillAfterSeconds)"),
                               (False, "real kill -9 of the node's command")):
            ends = [r[0] for r in rows[injected]]
            runs = [r[1] for r in rows[injected]]
            print("%s, %d rounds: fault -> attempt end median %.0f ms (max %.0f); "
                  "-> retry RUNNING median %.0f ms (max %.0f)"
                  % (name, ROUNDS, statistics.median(ends), max(ends), statistics.median(runs),
                     max(runs)))
        print("ratio injected/real: attempt end %.2fx, retry RUNNING %.2fx" % (
            statistics.median([r[0] for r in rows[True]]) /
            max(1, statistics.median([r[0] for r in rows[False]])),
            statistics.median([r[1] for r in rows[True]]) /
            max(1, statistics.median([r[1] for r in rows[False]]))))
    finally:
        server.cleanup()


def dump_cost():
    work = tempfile.mkdtemp(prefix="lote_bench_dump_")
    server = LoteServer(LOTE).start()
    try:
        data = os.path.join(work, "sotu")
        subprocess.run([LOTE, "data", "prepare", "--input", os.path.join(DATA, "sotu.txt"),
                        "--tokenizer", os.path.join(DATA, "tokenizer.model"), "--block-size",
                        "65", "--output", "file://" + data], check=True, capture_output=True)
        batch = server.client()
        setup(server, batch)
        config = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "..", "examples", "llama2", "model", "tiny.json"))
        command = [LOTE, "train", "--config", config, "--data", data, "--tensor-parallel-size",
                   "2", "--seq-len", "64", "--batch-size", "2", "--global-batch-size", "4",
                   "--max-steps", "100000", "--logging-interval", "1", "--threads", "1",
                   "--peak-gflops", "10", "--nproc-per-node", "1", "--output",
                   os.path.join(work, "out")]
        batch.register_job_definition(
            jobDefinitionName="train4", type="multinode",
            nodeProperties={"numNodes": 4, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "container": {
                    "image": "host", "command": command,
                    "environment": [{"name": "OMP_NUM_THREADS", "value": "1"}],
                    "vcpus": 1, "memory": 512}}]})
        job_id = batch.submit_job(jobName="t", jobQueue="bench-q",
                                  jobDefinition="train4")["jobId"]
        from lote_server import describe_job_raw
        wait(lambda: (describe_job_raw(batch, job_id).get("progress") or {}).get("step", 0) >= 3,
             300, "training progress")
        times = []
        for _ in range(3):
            t0 = time.time()
            r = subprocess.run([LOTE, "jobs", "dump", job_id, "--endpoint", server.endpoint],
                               capture_output=True, text=True, env=server.env(), timeout=600)
            times.append(time.time() - t0)
            if r.returncode != 0:
                raise RuntimeError(r.stderr)
        procs = sum(1 for line in r.stdout.splitlines() if line.startswith("node "))
        print("stack dumps of a 4-rank TP2 x DP2 training job (%d node dumps, gdb): "
              "median %.2f s, max %.2f s over %d calls of lote jobs dump"
              % (procs, statistics.median(times), max(times), len(times)))
        print("the last dump's summary (a healthy job): " + r.stdout.strip().splitlines()[-1])
        batch.terminate_job(jobId=job_id, reason="bench done")
    finally:
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


fault_timing()
dump_cost()
