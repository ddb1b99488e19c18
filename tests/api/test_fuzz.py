"""A bounded fuzzer for the API front door of a real `lote server`.

Thousands of requests, built from valid ones for every operation of both
services (AWS Batch from botocore's model, CloudWatch Logs), are mutated (JSON
values swapped for hostile ones, bytes flipped, bodies truncated, headers and
paths changed), signed like an SDK signs (most of them) and sent. Every answer
must be well formed (status, Date, x-amzn-RequestId, a JSON body; errors with
__type and message) and never a 5xx; the server must stay up. A failure prints
the request that caused it.

Run: python3 test_fuzz.py --lote build/lote [--count 3000] [--seed 1] [--seconds 240]
"""
import argparse
import json
import os
import random
import sys
import time
import unittest
import urllib.parse

import botocore.session

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, HERE)
from lote_server import LoteServer  # noqa: E402
from raw_client import RawClient  # noqa: E402

LOTE = None
ARGS = None
REGION = "us-east-1"
ACCOUNT = "000000000000"
LOGS_OPERATIONS = ["CreateLogGroup", "DeleteLogGroup", "DescribeLogGroups", "CreateLogStream",
                   "DeleteLogStream", "DescribeLogStreams", "PutLogEvents", "GetLogEvents",
                   "FilterLogEvents", "PutRetentionPolicy", "DeleteRetentionPolicy"]

# Values for members by name, so that generated requests reach real resources.
KNOWN = {
    "jobQueue": "fz-q", "jobQueueName": "fz-q2", "jobDefinition": "fz-d", "jobDefinitionName": "fz-d",
    "computeEnvironment": "fz-ce", "computeEnvironmentName": "fz-ce2", "jobName": "fz-job",
    "resourceArn": "arn:aws:batch:%s:%s:job-queue/fz-q" % (REGION, ACCOUNT),
    "logGroupName": "/fz/group", "logStreamName": "fz-stream", "type": None, "image": "busybox",
}

# Valid requests for the operations with the most logic; mutations of these
# reach deep into the handlers.
HAND_SEEDS = {
    "CreateComputeEnvironment": {"computeEnvironmentName": "fz-ce3", "type": "MANAGED", "state": "ENABLED",
                                 "computeResources": {"type": "EC2", "minvCpus": 0, "maxvCpus": 4,
                                                      "desiredvCpus": 0, "instanceTypes": ["local"],
                                                      "subnets": ["subnet-1"], "securityGroupIds": ["sg-1"]},
                                 "tags": {"a": "b"}},
    "CreateJobQueue": {"jobQueueName": "fz-q3", "priority": 5, "state": "ENABLED",
                       "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "fz-ce"}]},
    "UpdateJobQueue": {"jobQueue": "fz-q", "priority": 3},
    "RegisterJobDefinition": {"jobDefinitionName": "fz-d2", "type": "multinode", "nodeProperties": {
        "numNodes": 2, "mainNode": 0, "nodeRangeProperties": [{"targetNodes": "0:", "container": {
            "image": "busybox", "command": ["true"], "vcpus": 1, "memory": 64,
            "environment": [{"name": "A", "value": "b"}]}}]},
        "retryStrategy": {"attempts": 2, "evaluateOnExit": [{"onExitCode": "1", "action": "RETRY"}]},
        "parameters": {"p": "v"}, "timeout": {"attemptDurationSeconds": 60}},
    "SubmitJob": {"jobName": "fz-job", "jobQueue": "fz-q", "jobDefinition": "fz-d",
                  "containerOverrides": {"command": ["true"], "environment": [{"name": "X", "value": "1"}],
                                         "resourceRequirements": [{"type": "VCPU", "value": "1"}]},
                  "arrayProperties": {"size": 2}, "retryStrategy": {"attempts": 1},
                  "parameters": {"a": "b"}, "tags": {"t": "v"}, "timeout": {"attemptDurationSeconds": 60}},
    "CreateSchedulingPolicy": {"name": "fz-p", "fairsharePolicy": {
        "shareDecaySeconds": 60, "computeReservation": 1,
        "shareDistribution": [{"shareIdentifier": "a*", "weightFactor": 0.5}]}},
    "PutLogEvents": {"logGroupName": "/fz/group", "logStreamName": "fz-stream",
                     "logEvents": [{"timestamp": 0, "message": "hello"}]},
    "GetLogEvents": {"logGroupName": "/fz/group", "logStreamName": "fz-stream", "limit": 10,
                     "startFromHead": True},
    "FilterLogEvents": {"logGroupName": "/fz/group", "filterPattern": "hello", "limit": 5},
    "DescribeJobs": {"jobs": ["00000000-0000-0000-0000-000000000000"]},
    "ListJobs": {"jobQueue": "fz-q", "jobStatus": "SUCCEEDED", "maxResults": 5},
}

HOSTILE = [
    None, True, False, 0, -1, 1, 2 ** 31, 2 ** 63, 2 ** 64, -2 ** 63 - 1, 10 ** 30, 1e308, 1.5, -0.0,
    "", " ", "a" * 5000, "x" * 70000, "café", "日本語", "😀", "\u0000", "a\u0000b", "\ufffd", "../..",
    "arn:aws:batch:us-east-1:000000000000:job-queue/fz-q", "fz-q", "fz-d:1", "%00", "%ff",
    "Ref::x", "${x}", "0:", ":", "-1:", [], {}, [None], {"": None}, [[[[[]]]]], {"a": {"b": {"c": {}}}},
]
RAW_NUMBERS = ["1e400", "-1e400", "123456789012345678901234567890", "1e-400", "-0", "0.0e0",
               "18446744073709551616", "9223372036854775808", "NaN", "Infinity"]


def example(shape, depth, rng, name=None):
    """A plausible value for a botocore shape."""
    if name in KNOWN and KNOWN[name] is not None and shape.type_name == "string":
        return KNOWN[name]
    t = shape.type_name
    if t == "structure":
        out = {}
        if depth > 6:
            return out
        for member_name, member in shape.members.items():
            if member_name in shape.required_members or rng.random() < 0.4:
                out[member_name] = example(member, depth + 1, rng, member_name)
        return out
    if t == "list":
        return [] if depth > 6 else [example(shape.member, depth + 1, rng, name)
                                     for _ in range(rng.choice([1, 1, 2]))]
    if t == "map":
        return {} if depth > 6 else {"k%d" % i: example(shape.value, depth + 1, rng)
                                     for i in range(rng.choice([1, 2]))}
    if t == "string":
        enum = shape.enum
        return rng.choice(enum) if enum else "v%d" % rng.randrange(100)
    if t in ("integer", "long"):
        return rng.choice([0, 1, 2, 4, 10, 100])
    if t in ("float", "double"):
        return rng.choice([0.5, 1.0, 2.5])
    if t == "boolean":
        return rng.random() < 0.5
    if t == "timestamp":
        return int(time.time()) - rng.randrange(1000)
    if t == "blob":
        return "YWJj"
    return None


def paths(value, prefix=()):
    """Every (path, value) inside a JSON value, including the root."""
    yield prefix, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, prefix + (i,))


def set_path(root, path, new):
    if not path:
        return new
    node = root
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = new
    return root


class Case:
    def __init__(self, service, operation, method, path, body, headers):
        self.service, self.operation, self.method, self.path = service, operation, method, path
        self.body = body            # bytes
        self.headers = headers      # list of pairs (before signing)
        self.sign = True
        self.corrupt_signature = False
        self.mutations = []

    def __repr__(self):
        return "%s.%s %s %s headers=%r sign=%s corrupt=%s mutations=%r body=%r" % (
            self.service, self.operation, self.method, self.path[:300], self.headers, self.sign,
            self.corrupt_signature, self.mutations, self.body[:600])


def mutate_json(body, rng, case):
    """Swap, drop or add values in a JSON body; returns bytes."""
    nests = []  # depths of nested arrays, spliced into the text (json.dumps would recurse)
    for _ in range(rng.choice([1, 1, 2, 3])):
        all_paths = list(paths(body))
        path, _ = rng.choice(all_paths)
        kind = rng.random()
        if kind < 0.5:
            new = rng.choice(HOSTILE)
            case.mutations.append(("set", path, repr(new)[:40]))
            body = set_path(body, path, json.loads(json.dumps(new)))
        elif kind < 0.65 and path:
            parent = body
            for p in path[:-1]:
                parent = parent[p]
            case.mutations.append(("drop", path))
            del parent[path[-1]]
        elif kind < 0.8:
            depth = rng.choice([10, 65, 100, 5000])
            case.mutations.append(("nest", path, depth))
            nests.append(depth)
            body = set_path(body, path, "__NEST%d__" % (len(nests) - 1))
        else:
            case.mutations.append(("add", path))
            if isinstance(body, dict):
                body["fz%d" % rng.randrange(10)] = rng.choice(HOSTILE)
    text = json.dumps(body, ensure_ascii=rng.random() < 0.5)
    for i, depth in enumerate(nests):
        text = text.replace('"__NEST%d__"' % i, "[" * depth + "1" + "]" * depth)
    if rng.random() < 0.2:  # numbers Python cannot write
        raw = rng.choice(RAW_NUMBERS)
        case.mutations.append(("raw-number", raw))
        text = text.replace("1", raw, 1) if "1" in text else text
    return text.encode("utf-8")


def mutate_bytes(data, rng, case):
    data = bytearray(data)
    kind = rng.random()
    if kind < 0.3 and data:
        for _ in range(rng.choice([1, 2, 8])):
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
        case.mutations.append("flip")
    elif kind < 0.5 and data:
        case.mutations.append("truncate")
        data = data[:rng.randrange(len(data))]
    elif kind < 0.7:
        i = rng.randrange(len(data) + 1)
        junk = bytes(rng.choice([b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"{", b"[", b"\"", b"\\"]))
        case.mutations.append(("insert", junk))
        data[i:i] = junk * rng.choice([1, 3, 100])
    else:
        case.mutations.append("replace")
        data = bytearray(rng.choice([b"", b"null", b"[]", b"\"s\"", b"1", b"{}{}", b"{\"a\":1,}", b"\xef\xbb\xbf{}"]))
    return bytes(data)


def mutate_envelope(case, rng):
    kind = rng.random()
    if kind < 0.2:
        case.mutations.append("unsigned")
        case.sign = False
    elif kind < 0.35:
        case.mutations.append("bad-signature")
        case.corrupt_signature = True
    elif kind < 0.5:
        case.mutations.append("content-type")
        case.headers = [(k, v) for k, v in case.headers if k.lower() != "content-type"]
        case.headers.append(("Content-Type", rng.choice(["text/plain", "application/xml", "", "\x7f"])))
    elif kind < 0.6 and case.service == "logs":
        target = rng.choice(["Logs_20140328.", "Logs_20140328", ".PutLogEvents", "Logs_20140328.%s.x" % case.operation,
                             "logs_20140328." + case.operation, "AWSBatch." + case.operation, "Logs_20140328.café"])
        case.mutations.append(("target", target))
        case.headers = [(k, v) for k, v in case.headers if k.lower() != "x-amz-target"] + [("X-Amz-Target", target)]
    elif kind < 0.7:
        path = rng.choice([case.path + "/", case.path + "?a=%ff&b", case.path + "%00", "/v1/", "/v1/tags/",
                           "/v1/tags/%ff%fe", "/v1/tags/" + "a" * 3000, case.path.upper(), "//" + case.path,
                           case.path + "?tagKeys=%C3%28", "/v1/tags/arn%3Aaws%3Abatch%3Aus-east-1%3A0%3Ajob-queue%2Fcaf%C3%A9"])
        case.mutations.append(("path", path))
        case.path = path
    elif kind < 0.8:
        method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS"])
        case.mutations.append(("method", method))
        case.method = method
    else:
        case.mutations.append(("header", "dup"))
        case.headers.append(("X-Amz-Date", "garbage"))


class FuzzTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        key, secret = cls.server.credentials()
        cls.client = RawClient(cls.server.endpoint, key, secret)
        batch = cls.server.client("batch")
        batch.create_compute_environment(computeEnvironmentName="fz-ce", type="MANAGED", computeResources={
            "type": "EC2", "minvCpus": 0, "maxvCpus": 4, "instanceTypes": ["local"],
            "subnets": ["subnet-1"], "securityGroupIds": ["sg-1"]})
        for _ in range(100):
            if batch.describe_compute_environments(computeEnvironments=["fz-ce"])["computeEnvironments"][0]["status"] == "VALID":
                break
            time.sleep(0.1)
        batch.create_job_queue(jobQueueName="fz-q", priority=1,
                               computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "fz-ce"}])
        batch.register_job_definition(jobDefinitionName="fz-d", type="container", containerProperties={
            "image": "busybox", "command": ["true"], "resourceRequirements": [
                {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "64"}]})
        logs = cls.server.client("logs")
        logs.create_log_group(logGroupName="/fz/group")
        logs.create_log_stream(logGroupName="/fz/group", logStreamName="fz-stream")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.cleanup()

    def seeds(self, rng):
        session = botocore.session.get_session()
        batch = session.get_service_model("batch")
        logs = session.get_service_model("logs")
        out = []
        for name in batch.operation_names:
            op = batch.operation_model(name)
            out.append(("batch", name, op))
        # Every operation of the Logs model: the supported ones first, then the
        # rest (each must be a clean UnknownOperationException).
        names = LOGS_OPERATIONS + [n for n in logs.operation_names if n not in LOGS_OPERATIONS]
        for name in names:
            out.append(("logs", name, logs.operation_model(name)))
        return out

    def build(self, service, name, op, rng):
        if name in HAND_SEEDS and rng.random() < 0.6:
            body = json.loads(json.dumps(HAND_SEEDS[name]))
            if name == "PutLogEvents":
                body["logEvents"][0]["timestamp"] = int(time.time() * 1000)
        else:
            body = example(op.input_shape, 0, rng) if op.input_shape is not None else {}
        if service == "logs":
            if name == "PutLogEvents":
                body["logEvents"] = [{"timestamp": int(time.time() * 1000), "message": "m%d" % i} for i in range(3)]
            return body, "POST", "/", [("Content-Type", "application/x-amz-json-1.1"),
                                        ("X-Amz-Target", "Logs_20140328." + name)]
        uri = op.http["requestUri"]
        method = op.http["method"]
        query = []
        for member_name, member in list(op.input_shape.members.items()) if op.input_shape else []:
            location = member.serialization.get("location")
            if member_name not in body:
                continue
            if location == "uri":
                value = body.pop(member_name)
                uri = uri.replace("{%s}" % member.serialization.get("name", member_name),
                                  urllib.parse.quote(str(value), safe=""))
            elif location == "querystring":
                value = body.pop(member_name)
                for v in value if isinstance(value, list) else [value]:
                    query.append((member.serialization.get("name", member_name), str(v)))
        if "{" in uri:
            uri = uri.split("{")[0] + urllib.parse.quote(KNOWN["resourceArn"], safe="")
        if query:
            uri += "?" + urllib.parse.urlencode(query)
        return body, method, uri, [("Content-Type", "application/json")]

    def send(self, case):
        headers = list(case.headers)
        if case.sign:
            headers = self.client.sign(case.method, case.path, case.body, headers,
                                       "logs" if case.service == "logs" else "batch")
            if case.corrupt_signature:
                headers = [(k, v[:-4] + "0000") if k.lower() == "authorization" else (k, v) for k, v in headers]
        return self.client.send(case.method, case.path, case.body, headers, sign=False)

    def test_fuzz(self):
        rng = random.Random(ARGS.seed)
        seeds = self.seeds(rng)
        main_seeds = [x for x in seeds if x[0] == "batch" or x[1] in LOGS_OPERATIONS]
        deadline = time.time() + ARGS.seconds
        counts = {}
        sent = 0
        for i in range(ARGS.count):
            if time.time() > deadline:
                break
            if i < len(seeds):  # every operation at least once
                service, name, op = seeds[i]
            elif rng.random() < 0.85:  # then mostly the operations lote implements
                service, name, op = rng.choice(main_seeds)
            else:
                service, name, op = rng.choice(seeds)
            body, method, path, headers = self.build(service, name, op, rng)
            case = Case(service, name, method, path, b"", headers)
            r = rng.random()
            if r < 0.1:
                case.body = json.dumps(body).encode()  # unmutated (maybe valid)
            elif r < 0.7:
                case.body = mutate_json(body, rng, case)
            elif r < 0.85:
                case.body = mutate_bytes(json.dumps(body).encode(), rng, case)
            else:
                case.body = json.dumps(body).encode()
                mutate_envelope(case, rng)
            try:
                answer = self.send(case)
            except Exception as e:  # noqa: BLE001
                self.fail("request %d got no answer (%r); server alive: %s\n%r\nserver stderr:\n%s" % (
                    i, e, self.server.proc.poll() is None, case, self.server.stderr()[-3000:]))
            sent += 1
            counts[answer.status] = counts.get(answer.status, 0) + 1
            problems = answer.shape_problems()
            if answer.status >= 500:
                problems.append("5xx")
            if problems:
                self.fail("request %d: %s\nanswer: %r\nrequest: %r\nserver stderr:\n%s" % (
                    i, problems, answer, case, self.server.stderr()[-2000:]))
        print("fuzz: %d requests over %d operations, statuses %s" % (
            sent, len(seeds), dict(sorted(counts.items()))), file=sys.stderr)
        self.assertGreaterEqual(sent, min(ARGS.count, 500))
        self.assertIsNone(self.server.proc.poll())
        # Healthy afterwards: a normal client still works.
        self.assertIn("jobQueues", self.server.client("batch").describe_job_queues())


def main():
    global LOTE, ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    parser.add_argument("--count", type=int, default=int(os.environ.get("LOTE_FUZZ_COUNT", "3000")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("LOTE_FUZZ_SEED", "12")))
    parser.add_argument("--seconds", type=float, default=240)
    ARGS, rest = parser.parse_known_args()
    LOTE = os.path.abspath(ARGS.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
