"""bench/console setup: queues and jobs through boto3.

setup.py ENDPOINT CREDENTIALS STEPS          -> prints {"queue", "trainJob", "liveJob"}
setup.py --wait-jobs ENDPOINT CREDENTIALS 0 J -> waits until trainJob SUCCEEDED, liveJob RUNNING
setup.py --fill ENDPOINT CREDENTIALS N J      -> submits N / 1000 array jobs of 1000 to cb-q
                                                 (they stay RUNNABLE)
setup.py --stop ENDPOINT CREDENTIALS 0 J     -> terminates liveJob
"""
import json
import sys
import time

import boto3


def client(endpoint, credentials):
    creds = {}
    for line in open(credentials):
        if "=" in line:
            k, v = line.split("=", 1)
            creds[k.strip()] = v.strip()
    return boto3.client("batch", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=creds["aws_access_key_id"],
                        aws_secret_access_key=creds["aws_secret_access_key"])


def wait(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.5)
    raise SystemExit("timed out waiting for " + what)


def queue(b, name, state):
    b.create_compute_environment(
        computeEnvironmentName=name + "-ce", type="MANAGED", state=state,
        computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": 16,
                          "instanceTypes": ["c5.large"], "subnets": ["s"]},
        tags={"lote:emulation": "true"})
    wait(lambda: b.describe_compute_environments(computeEnvironments=[name + "-ce"])[
        "computeEnvironments"][0]["status"] == "VALID", 60, "the environment")
    b.create_job_queue(jobQueueName=name + "-q", priority=1,
                       computeEnvironmentOrder=[{"order": 1, "computeEnvironment": name + "-ce"}])
    wait(lambda: b.describe_job_queues(jobQueues=[name + "-q"])["jobQueues"][0]["status"] ==
         "VALID", 60, "the queue")


def main():
    if sys.argv[1] == "--stop":
        b = client(sys.argv[2], sys.argv[3])
        b.terminate_job(jobId=json.loads(sys.argv[5])["liveJob"], reason="bench done")
        return
    if sys.argv[1] == "--fill":
        b = client(sys.argv[2], sys.argv[3])
        n = int(sys.argv[4])
        t0 = time.time()
        parents = [b.submit_job(jobName="cb-%03d" % i, jobQueue="cb-q", jobDefinition="cb-true",
                                arrayProperties={"size": 1000})["jobId"]
                   for i in range(max(1, n // 1000))]
        def placed():
            js = b.describe_jobs(jobs=parents[-100:])["jobs"]
            return all(j["status"] not in ("SUBMITTED",) for j in js)
        wait(placed, 600, "the array jobs")
        print("%d jobs in the store (%d array jobs of 1000) in %.0f s" % (len(parents) * 1001, len(parents),
                                                                           time.time() - t0))
        return
    if sys.argv[1] == "--wait-jobs":
        b = client(sys.argv[2], sys.argv[3])
        spec = json.loads(sys.argv[5])
        wait(lambda: b.describe_jobs(jobs=[spec["trainJob"]])["jobs"][0]["status"] == "SUCCEEDED",
             600, "the many-step job")
        wait(lambda: b.describe_jobs(jobs=[spec["liveJob"]])["jobs"][0]["status"] == "RUNNING",
             120, "the live job")
        return
    b = client(sys.argv[1], sys.argv[2])
    steps = int(sys.argv[3])
    queue(b, "cb", "DISABLED")  # the load client's PREFIX-q: its jobs stay RUNNABLE
    queue(b, "run", "ENABLED")
    b.register_job_definition(
        jobDefinitionName="cb-true", type="container",
        containerProperties={"image": "host", "command": ["true"],
                             "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                      {"type": "MEMORY", "value": "64"}]})
    prog = ("import json,math,sys,time\n"
            "n=int(sys.argv[1]); d=float(sys.argv[2])\n"
            "for s in range(1, n + 1):\n"
            "    print('step %d' % s)\n"
            "    print('LOTE_PROGRESS ' + json.dumps({'step': s, 'total_steps': n, 'loss': 10 * math.exp(-s / n) + 0.1 * math.sin(s),"
            " 'lr': 3e-4 * (1 - s / n), 'grad_norm': 1 + 0.5 * math.cos(s / 7), 'tokens_per_s': 1000 + s % 97, 'mfu': 0.4}), flush=(d > 0))\n"
            "    if d: time.sleep(d)\n")
    def submit(name, n, delay):
        b.register_job_definition(
            jobDefinitionName=name, type="container",
            containerProperties={"image": "host", "command": ["python3", "-c", prog, str(n), str(delay)],
                                 "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                          {"type": "MEMORY", "value": "256"}]})
        return b.submit_job(jobName=name, jobQueue="run-q", jobDefinition=name)["jobId"]
    train = submit("steps", steps, 0)
    live = submit("live", 100000, 0.1)
    print(json.dumps({"queue": "cb-q", "trainJob": train, "liveJob": live}))


main()
