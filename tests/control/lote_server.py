"""Starts a real `lote server` for tests: temp home, free port, clean stop."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import json

import boto3
import botocore.config


def create_emulated_environment(batch, name="ce", max_vcpus=64):
    """A MANAGED compute environment of c5.large virtual instances (emulation), once
    it is VALID."""
    batch.create_compute_environment(
        computeEnvironmentName=name, type="MANAGED",
        computeResources={"type": "EC2", "minvCpus": 0, "maxvCpus": max_vcpus,
                          "instanceTypes": ["c5.large"], "subnets": ["s"]},
        tags={"lote:emulation": "true"})
    deadline = time.time() + 30
    while batch.describe_compute_environments(
            computeEnvironments=[name])["computeEnvironments"][0]["status"] != "VALID":
        if time.time() > deadline:
            raise AssertionError("compute environment %s never became VALID" % name)
        time.sleep(0.1)


def raw_body(batch, operation, call):
    """The JSON the server sent for Batch `operation` while `call()` ran: botocore
    drops the keys its model does not know, such as lote's extras."""
    raw = {}

    def keep(http_response, **kwargs):
        raw["body"] = http_response.content
    batch.meta.events.register("after-call.batch." + operation, keep)
    try:
        call()
    finally:
        batch.meta.events.unregister("after-call.batch." + operation, keep)
    return json.loads(raw["body"])


def describe_job_raw(batch, job_id):
    """DescribeJobs of one job as the server sent it (`loteTimeline`, `progress`)."""
    return raw_body(batch, "DescribeJobs", lambda: batch.describe_jobs(jobs=[job_id]))["jobs"][0]


def quarantined_nodes(batch, environments=()):
    """loteQuarantinedNodes of the named compute environments (all when none), as
    the server sent them."""
    names = {"computeEnvironments": list(environments)} if environments else {}
    body = raw_body(batch, "DescribeComputeEnvironments",
                    lambda: batch.describe_compute_environments(**names))
    return [q for ce in body["computeEnvironments"] for q in ce.get("loteQuarantinedNodes", [])]


def kill_node_runner(home, job_id, attempt=1, node=0):
    """kill -9 of what would record the node's outcome: its supervisor, or the
    node agent that runs its command together with the agent's keeper (killing
    the agent alone loses nothing: its keeper records the outcome)."""
    with open(os.path.join(home, "jobs", job_id, str(attempt), str(node), "shim.json")) as f:
        runner = json.load(f)
    if "keeper" in runner:
        os.kill(runner["keeper"]["pid"], signal.SIGKILL)
    os.kill(runner["process"]["pid"], signal.SIGKILL)


class LoteServer:
    """A `lote server` process on 127.0.0.1:<free port> with its own home.

    start() waits for the "lote server listening on http://HOST:PORT" line;
    stop() sends SIGTERM and waits; kill() sends SIGKILL (durability tests).
    The home survives restarts until cleanup().
    """

    def __init__(self, lote_binary, home=None, extra_args=()):
        self.binary = lote_binary
        self.home = home or tempfile.mkdtemp(prefix="lote_test_home_")
        self.extra_args = list(extra_args)
        self.proc = None
        self.endpoint = None
        self.stderr_path = os.path.join(self.home, "server.stderr")

    def start(self):
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "server", "--home", self.home, "--listen", "127.0.0.1:0"] + self.extra_args,
            stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("lote server listening on "):
            self.proc.kill()
            raise RuntimeError("server did not start: %r; stderr:\n%s" % (line, self.stderr()))
        self.endpoint = line.strip().split(" on ", 1)[1]
        return self

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._close()

    def _close(self):
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        if getattr(self, "_stderr", None):
            self._stderr.close()
            self._stderr = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    def credentials(self):
        creds = {}
        with open(os.path.join(self.home, "credentials")) as f:
            for line in f:
                if "=" in line:
                    k, v = line.split("=", 1)
                    creds[k.strip()] = v.strip()
        return creds["aws_access_key_id"], creds["aws_secret_access_key"]

    def env(self):
        """Environment for the aws CLI: `lote env` evaluated, as a user would."""
        out = subprocess.run([self.binary, "env", "--home", self.home], check=True,
                             capture_output=True, text=True).stdout
        env = dict(os.environ)
        for line in out.splitlines():
            if line.startswith("unset "):
                for name in line.split()[1:]:
                    env.pop(name, None)
            elif line.startswith("export "):
                k, v = line[len("export "):].split("=", 1)
                env[k] = v.strip("'")
        return env

    def client(self, service="batch", key=None, secret=None, region="us-east-1", retries=1):
        k, s = self.credentials()
        return boto3.client(
            service, endpoint_url=self.endpoint, region_name=region,
            aws_access_key_id=key or k, aws_secret_access_key=secret or s,
            config=botocore.config.Config(retries={"max_attempts": retries, "mode": "standard"},
                                          max_pool_connections=16))

    def job_output(self, logs, job, timeout=30):
        """The messages of `job`'s log stream (a DescribeJobs job or node), waiting
        up to `timeout` seconds for the first one; `logs` is a boto3 logs client."""
        def lines():
            events = logs.get_log_events(logGroupName="/aws/batch/job",
                                         logStreamName=job["container"]["logStreamName"],
                                         startFromHead=True)["events"]
            return [e["message"] for e in events] or None
        return self.wait_for(lines, timeout, "the output of %s" % job["jobId"])

    def wait_for(self, pred, timeout, what):
        """pred()'s first truthy value, polled every 0.2 s; AssertionError (with the
        server's stderr) after `timeout` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError("timed out waiting for %s; server stderr:\n%s" % (
            what, self.stderr()[-3000:]))
