"""Job output through a real `lote server`: stored rate, exactness, GetLogEvents p99.

1. A job (lote_logs_server_bench write) prints log lines to stdout as fast as it
   can for SECONDS; the server stores them in its node's stream. Stored rate =
   bytes / (time the stream first holds every line - time the job began writing).
   At the end the server is stopped and its store is read back and compared
   byte for byte with what the job wrote (the bytes, not only the count).
2. `cat` of the same bytes (the node's raw output file) to /dev/null, same run.
3. A second job writes GET_BYTES (1 GB); GetLogEvents latency through the API.

Usage: python3 bench/logs/server_bench.py --lote build/lote \
         --bench build/bench/logs/lote_logs_server_bench [--seconds 10] [--get-bytes 1000000000]
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "control"))
from lote_server import LoteServer  # noqa: E402


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit("timed out waiting for " + what)


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lote", required=True)
    p.add_argument("--bench", required=True)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--max-bytes", type=int, default=8_000_000_000)
    p.add_argument("--get-bytes", type=int, default=1_000_000_000)
    p.add_argument("--requests", type=int, default=400)
    args = p.parse_args()
    bench = os.path.abspath(args.bench)
    server = LoteServer(os.path.abspath(args.lote)).start()
    try:
        batch = server.client()
        env = server.env()
        batch.create_compute_environment(
            computeEnvironmentName="ce", type="MANAGED",
            computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 16,
                              "instanceTypes": ["c5.large"], "subnets": ["s"]},
            tags={"lote:emulation": "true"})
        wait_for(lambda: batch.describe_compute_environments(computeEnvironments=["ce"])[
            "computeEnvironments"][0]["status"] == "VALID", 30, "compute environment")
        batch.create_job_queue(jobQueueName="q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        batch.register_job_definition(
            jobDefinitionName="flood", type="container",
            containerProperties={"image": "host", "command": ["true"],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "512"}]})

        def run_writer(name, seconds, max_bytes):
            side = os.path.join(server.home, name + ".side.json")
            job_id = batch.submit_job(
                jobName=name, jobQueue="q", jobDefinition="flood",
                containerOverrides={"command": [bench, "write", str(seconds), str(max_bytes),
                                                side]})["jobId"]
            wait_for(lambda: os.path.exists(side), seconds + 600, name + " to finish writing")
            with open(side) as f:
                written = json.load(f)
            job = wait_for(lambda: (lambda j: j if j["status"] in ("SUCCEEDED", "FAILED") else None)(
                batch.describe_jobs(jobs=[job_id])["jobs"][0]), 600, name + " to end")
            stream = job["container"]["logStreamName"]
            stored = run_json([bench, "wait-stored", stream, str(written["lines"]), "600"], env)
            return job_id, job, stream, written, stored

        print("--- a job writes to stdout as fast as it can for %g s (through lote server)"
              % args.seconds, flush=True)
        job_id, job, stream, written, stored = run_writer("flood", args.seconds, args.max_bytes)
        mb = written["bytes"] / 1e6
        write_s = (written["end_ms"] - written["start_ms"]) / 1000
        stored_s = (stored["stored_ms"] - written["start_ms"]) / 1000
        print("job %s: %s" % (job_id, job["status"]))
        print("writer (the job): %.1f MB, %d lines in %.2f s: %.0f MB/s"
              % (mb, written["lines"], write_s, mb / write_s))
        print("lote stored: every line in the stream %.2f s after the job began writing "
              "(%.2f s after it finished): %.0f MB/s"
              % (stored_s, stored_s - write_s, mb / stored_s), flush=True)
        raw = os.path.join(server.home, "jobs", job_id, "1", "0", "output.log")
        if os.path.exists(raw) and os.path.getsize(raw) >= written["bytes"]:
            source = raw
        else:  # the server removed its raw copy: write the same bytes again
            source = os.path.join(server.home, "same-bytes.out")
            with open(source, "wb") as out:
                subprocess.run([bench, "write", "1e9", str(written["bytes"]),
                                source + ".side"], stdout=out, check=True)
        t = time.time()
        subprocess.run("cat '%s' > /dev/null" % source, shell=True, check=True)
        cat_s = time.time() - t
        print("cat %s to /dev/null (same %.1f MB, same run): %.2f s: %.0f MB/s"
              % ("the node's raw output file" if source == raw else "a copy of the bytes",
                 os.path.getsize(source) / 1e6, cat_s, os.path.getsize(source) / 1e6 / cat_s))
        print("ratio lote stored / cat: %.3f" % ((mb / stored_s) / (mb / cat_s)), flush=True)

        print("--- GetLogEvents through the API on a %.1f GB stream" % (args.get_bytes / 1e9),
              flush=True)
        _, job, big_stream, big_written, _ = run_writer("big", 100000, args.get_bytes)
        print("built: %.2f GB, %d events (%s)" % (big_written["bytes"] / 1e9,
                                                 big_written["lines"], job["status"]))
        lat = run_json([bench, "get", big_stream, str(args.requests)], env)
        print("GetLogEvents x%d (head/tail/random f/ and b/ tokens, default limit, ~%d events "
              "~%d KB per page): p50 %.2f ms  p99 %.2f ms  max %.2f ms"
              % (lat["requests"], lat["events_per_page"], lat["kb_per_page"], lat["p50_ms"],
                 lat["p99_ms"], lat["max_ms"]))

        print("--- stored bytes vs written (the stopped server's log store, read back)", flush=True)
        server.stop()
        ok = True
        for name, st, wr in (("flood", stream, written),
                             ("%.1f GB" % (args.get_bytes / 1e9), big_stream, big_written)):
            check = run_json([bench, "verify-store", os.path.join(server.home, "logs"), st,
                              str(wr["bytes"])], env)
            same = check["stored_bytes"] == wr["bytes"]
            ok = ok and same and check["content"] == "EQUAL"
            print("%s stream: stored %d bytes (messages + newlines), written %d -> %s; content %s"
                  " (%d executor notice line(s) before the job's output not counted)"
                  % (name, check["stored_bytes"], wr["bytes"], "EQUAL" if same else "DIFFERENT",
                     check["content"], check["executor_notices"]))
        return 0 if ok else 1
    finally:
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
