"""The API front door of a real `lote server` under hostile and slow clients:
every failure at any layer is an AWS-shaped answer with Date and
x-amzn-RequestId, client mistakes are 4xx, slow connections cost no thread.

Run: python3 test_http.py --lote build/lote
"""
import argparse
import json
import os
import resource
import socket
import sys
import threading
import time
import unittest

import botocore.exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
sys.path.insert(0, HERE)
from lote_server import LoteServer  # noqa: E402
from raw_client import RawClient, parse_raw, raw_exchange  # noqa: E402

LOTE = None


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class HttpFrontDoorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        host_port = cls.server.endpoint.split("//")[1]
        cls.host, port = host_port.rsplit(":", 1)
        cls.port = int(port)
        key, secret = cls.server.credentials()
        cls.raw = RawClient(cls.server.endpoint, key, secret)
        cls.batch = cls.server.client("batch")
        cls.logs = cls.server.client("logs")

    @classmethod
    def tearDownClass(cls):
        cls.raw.close()
        cls.server.cleanup()

    def assertShaped(self, answer, status=None, code=None):
        self.assertEqual(answer.shape_problems(), [], answer)
        if status is not None:
            self.assertEqual(answer.status, status, answer)
        if code is not None:
            self.assertEqual(answer.code(), code, answer)

    def assertHealthy(self):
        self.assertIsNone(self.server.proc.poll(), "server died:\n" + self.server.stderr()[-3000:])
        self.assertIn("jobQueues", self.batch.describe_job_queues())

    def test_success_has_date_and_request_id(self):
        a = self.raw.batch("/v1/describejobqueues", {})
        self.assertShaped(a, 200)
        b = self.raw.logs("DescribeLogGroups", {})
        self.assertShaped(b, 200)
        self.assertNotEqual(a.header("x-amzn-requestid"), b.header("x-amzn-requestid"))

    def test_http_level_errors_are_aws_shaped(self):
        cases = [
            (b"BREW /v1/describejobqueues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 405,
             "UnknownOperationException"),
            (b"GET /v1/describejobqueues HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405, "UnknownOperationException"),
            (b"POST /nothing/here HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 404,
             "UnknownOperationException"),
            (b"NOT HTTP AT ALL\r\n\r\n", 400, "ClientException"),
            (b"POST /v1/x HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "ClientException"),
            (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\n", 413, "ClientException"),
            (b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: Logs_20140328.PutLogEvents\r\n"
             b"Content-Length: 20000000\r\n\r\n", 413, "InvalidParameterException"),
            (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "ClientException"),
            (b"GET / HTTP/1.1\r\nX-Big: " + b"b" * 70000 + b"\r\n\r\n", 431, "ClientException"),
        ]
        for request, status, code in cases:
            answer = parse_raw(raw_exchange(self.host, self.port, request))
            self.assertShaped(answer, status, code)
        self.assertHealthy()

    def test_unsigned_logs_and_batch_errors_name_the_protocol(self):
        a = self.raw.send("POST", "/v1/describejobqueues", b"{}", [("Content-Type", "application/json")],
                          sign=False)
        self.assertShaped(a, 403, "MissingAuthenticationTokenException")
        self.assertEqual(a.header("content-type"), "application/json")
        b = self.raw.send("POST", "/", b"{}", [("X-Amz-Target", "Logs_20140328.DescribeLogGroups")], sign=False)
        self.assertShaped(b, 403, "MissingAuthenticationTokenException")
        self.assertEqual(b.header("content-type"), "application/x-amz-json-1.1")

    def test_deep_nesting_is_a_client_error(self):
        deep = '{"jobQueueName": ' + "[" * 60000 + "]" * 60000 + "}"
        self.assertShaped(self.raw.batch("/v1/createjobqueue", deep), 400, "ClientException")
        deep_logs = '{"logGroupName": ' + "{\"a\":" * 60000 + "1" + "}" * 60000 + "}"
        self.assertShaped(self.raw.logs("CreateLogGroup", deep_logs), 400, "SerializationException")
        self.assertHealthy()

    def test_hostile_values_are_client_errors_naming_the_field(self):
        cases = [
            ('{"jobQueueName": "q1", "priority": 1e400, "computeEnvironmentOrder": []}', "priority"),
            ('{"jobQueueName": "q1", "priority": -1e400, "computeEnvironmentOrder": []}', "priority"),
            ('{"jobQueueName": "q1", "priority": 123456789012345678901234567890}', "priority"),
            ('{"jobQueueName": "caf\\u00e9", "priority": 1}', "jobQueueName"),
            ('{"jobQueueName": "q\\u0000", "priority": 1}', "jobQueueName"),
        ]
        for body, field in cases:
            a = self.raw.batch("/v1/createjobqueue", body)
            self.assertShaped(a, 400, "ClientException")
            self.assertIn(field, a.json()["message"], body)
        for body in (b'{"jobQueueName": "\xff"}', b'{"jobQueueName": "a\x00b"}', b"\x00\x00"):
            self.assertShaped(self.raw.batch("/v1/createjobqueue", body), 400, "ClientException")
        a = self.raw.logs("CreateLogGroup", '{"logGroupName": "caf\\u00e9"}')
        self.assertShaped(a, 400, "InvalidParameterException")
        self.assertIn("logGroupName", a.json()["message"])
        # The same through boto3: a ClientException naming the field.
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            self.batch.create_job_queue(jobQueueName="café", priority=1, computeEnvironmentOrder=[])
        self.assertEqual(ctx.exception.response["Error"]["Code"], "ClientException")
        self.assertIn("jobQueueName", ctx.exception.response["Error"]["Message"])
        self.assertHealthy()

    def test_submit_job_overrides_are_capped(self):
        body = {"jobName": "j", "jobQueue": "q", "jobDefinition": "d",
                "containerOverrides": {"environment": [{"name": "BIG", "value": "x" * (15 << 20)}]}}
        a = self.raw.batch("/v1/submitjob", body)
        self.assertShaped(a, 413, "ClientException")
        self.assertIn("30720", a.json()["message"])

    def test_operation_choosing_headers_must_be_signed(self):
        key, secret = self.server.credentials()
        signed = self.raw.sign("POST", "/", b"{}", [("Content-Type", "application/x-amz-json-1.1")], "logs")
        signed.append(("X-Amz-Target", "Logs_20140328.DescribeLogGroups"))
        a = self.raw.send("POST", "/", b"{}", signed, sign=False)
        self.assertShaped(a, 403, "IncompleteSignatureException")
        self.assertIn("x-amz-target", a.json()["message"])

    def test_clock_skew_names_the_server_time(self):
        for skew in (-20 * 60, 20 * 60):
            a = self.raw.batch("/v1/describejobqueues", {}, skew_seconds=skew)
            self.assertShaped(a, 403, "InvalidSignatureException")
            self.assertIn("server's time", a.json()["message"])
            self.assertTrue(a.header("date"))

    def test_keep_alive_and_pipelining(self):
        reqs = b""
        for _ in range(5):
            headers = self.raw.sign("POST", "/v1/describejobqueues", b"{}", [("Content-Type", "application/json")],
                                    "batch")
            reqs += b"POST /v1/describejobqueues HTTP/1.1\r\nHost: %s\r\n" % self.raw.host_header.encode()
            for k, v in headers:
                reqs += ("%s: %s\r\n" % (k, v)).encode()
            reqs += b"Content-Length: 2\r\n\r\n{}"
        reqs += b"POST /v1/describejobqueues HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
        data = raw_exchange(self.host, self.port, reqs)
        self.assertEqual(data.count(b"HTTP/1.1 200 OK"), 5, data[:500])
        self.assertEqual(data.count(b"HTTP/1.1 403"), 1)
        # The 403 (unsigned) is the last answer, as requests were sent.
        self.assertGreater(data.rfind(b"HTTP/1.1 403"), data.rfind(b"HTTP/1.1 200 OK"))

    def test_slow_clients_do_not_delay_a_normal_client(self):
        n = 1000
        limit = raise_fd_limit(n + 200)
        if limit < n + 100:
            self.skipTest("cannot open %d descriptors (limit %d)" % (n, limit))
        slow = []
        for _ in range(n):
            s = socket.create_connection((self.host, self.port))
            s.setblocking(False)
            slow.append(s)
        stop = threading.Event()
        sent = [0]

        def drip():  # one byte per connection per second, never finishing a request
            prefix = b"POST /v1/describejobqueues HTTP/1.1\r\nX-Slow: "
            pos = 0
            while not stop.is_set():
                byte = prefix[pos:pos + 1] if pos < len(prefix) else b"a"
                for s in slow:
                    try:
                        s.send(byte)
                        sent[0] += 1
                    except (BlockingIOError, OSError):
                        pass
                pos += 1
                stop.wait(1.0)

        t = threading.Thread(target=drip, daemon=True)
        t.start()
        try:
            while sent[0] < n:  # every slow connection has started its request
                time.sleep(0.05)
            for i in range(20):
                self.assertIn("jobQueues", self.batch.describe_job_queues())
                self.logs.describe_log_groups()
            fresh = self.server.client("batch")
            self.assertIn("jobQueues", fresh.describe_job_queues())
        finally:
            stop.set()
            t.join()
            for s in slow:
                s.close()
        self.assertHealthy()


class ServerLimitsTest(unittest.TestCase):
    """The --http-* flags of `lote server`, end to end."""

    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE, extra_args=[
            "--http-max-connections", "4", "--http-header-timeout-ms", "300"]).start()
        host_port = cls.server.endpoint.split("//")[1]
        cls.host, port = host_port.rsplit(":", 1)
        cls.port = int(port)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_slow_headers_get_408(self):
        data = raw_exchange(self.host, self.port, b"POST /v1/describejobqueues HTTP/1.1\r\nHost: x\r\n")
        answer = parse_raw(data)
        self.assertEqual(answer.status, 408)
        self.assertEqual(answer.shape_problems(), [])
        self.assertEqual(answer.code(), "ClientException")

    def test_connections_over_the_limit_get_503(self):
        held = []
        try:
            for _ in range(4):
                s = socket.create_connection((self.host, self.port))
                s.sendall(b"POST /v1/describejobqueues HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                self.assertIn(b"403", s.recv(65536))  # answered (unsigned): admitted and counted
                held.append(s)
            answer = parse_raw(raw_exchange(
                self.host, self.port,
                b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: Logs_20140328.DescribeLogGroups\r\n"
                b"Content-Length: 2\r\n\r\n{}"))
            self.assertEqual(answer.status, 503)
            self.assertEqual(answer.shape_problems(), [])
            self.assertEqual(answer.code(), "ServiceUnavailableException")
        finally:
            for s in held:
                s.close()


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
