"""DescribeJobs per principal (issue 25): each job of the answer is checked
against the caller's policies (iam::MayReadJob), so a principal's DescribeJobs
costs 100 policy decisions per call of 100 ids. Requests/s of DescribeJobs (100
job ids a call, THREADS boto3 clients) signed by the administrator (one
statement: "*") and by a principal of a server holding 100 users with 10
statements each (its DescribeJobs allowed by the last, on the queue), same
server, same run, alternating twice; prints principal/admin.

Usage: python3 bench/control/describe_filter.py --lote build/lote [--seconds 5] [--threads 4]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "control"))
from lote_server import LoteServer, create_emulated_environment  # noqa: E402

ARN = "arn:aws:batch:*:*:"


def policy(u):
    st = [{"Effect": "Allow", "Action": ["batch:SubmitJob", "batch:CancelJob"],
           "Resource": [ARN + "job-queue/team%d-q%d" % (u, i), ARN + "job-definition/team%d-*" % u]}
          for i in range(8)]
    st.append({"Effect": "Deny", "Action": "batch:*", "Resource": "*",
               "Condition": {"StringEquals": {"aws:RequestTag/frozen": "true"}}})
    st.append({"Effect": "Allow", "Action": "batch:DescribeJobs", "Resource": ARN + "job-queue/qa"})
    return {"Version": "2012-10-17", "Statement": st}


def rate(server, key, secret, ids, threads, seconds):
    clients = [server.client("batch", key=key, secret=secret) for _ in range(threads)]
    counts = [0] * threads
    stop = time.time() + seconds

    def work(i):
        while time.time() < stop:
            got = clients[i].describe_jobs(jobs=ids)["jobs"]
            assert len(got) == len(ids), len(got)
            counts[i] += 1
    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    lote = os.path.abspath(args.lote)
    server = LoteServer(lote).start()
    try:
        admin = server.client("batch")
        create_emulated_environment(admin)
        admin.create_job_queue(jobQueueName="qa", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "ce"}])
        admin.register_job_definition(jobDefinitionName="d", type="container", containerProperties={
            "image": "host", "command": ["true"], "resourceRequirements": [
                {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "64"}]})
        ids = [admin.submit_job(jobName="j%d" % i, jobQueue="qa", jobDefinition="d")["jobId"]
               for i in range(100)]
        env = server.env()
        work = tempfile.mkdtemp(prefix="lote_bench_describe_")
        for u in range(100):
            path = os.path.join(work, "p%03d.json" % u)
            with open(path, "w") as f:
                json.dump(policy(u), f)
            subprocess.run([lote, "users", "create", "u%03d" % u, "--policy-file", path],
                           env=env, check=True, capture_output=True)
        key = json.loads(subprocess.run([lote, "keys", "create", "u099"], env=env, check=True,
                                        capture_output=True, text=True).stdout)["AccessKey"]
        ak, sk = server.credentials()
        pk, ps = key["AccessKeyId"], key["SecretAccessKey"]
        rate(server, ak, sk, ids, 1, 1)  # warm up
        rate(server, pk, ps, ids, 1, 1)
        print("--- DescribeJobs of 100 jobs, threads=%d seconds=%g" % (args.threads, args.seconds))
        sa = sp = 0.0
        for r in (1, 2):
            a = rate(server, ak, sk, ids, args.threads, args.seconds)
            p = rate(server, pk, ps, ids, args.threads, args.seconds)
            sa, sp = sa + a, sp + p
            print("round %d: admin %.0f calls/s, principal %.0f calls/s, ratio %.3f" % (r, a, p, p / a))
        print("ratio principal/admin (both rounds): %.3f" % (sp / sa))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
