"""CloudWatch Logs API of a real `lote server`, driven by boto3, the pip aws CLI
and Debian's aws CLI v2 (`aws logs tail --follow`).

Run: python3 test_logs_api.py --lote build/lote
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
import unittest

import botocore.exceptions

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
AWS_V2 = "/usr/bin/aws"


def now_ms():
    return int(time.time() * 1000)


class LogsApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoteServer(LOTE).start()
        cls.logs = cls.server.client("logs")

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def error_code(self, fn, **kwargs):
        with self.assertRaises(botocore.exceptions.ClientError) as ctx:
            fn(**kwargs)
        return ctx.exception.response["Error"]["Code"], ctx.exception.response["Error"]["Message"]

    def test_group_stream_events_round_trip(self):
        self.logs.create_log_group(logGroupName="/lote/test/roundtrip")
        self.logs.create_log_stream(logGroupName="/lote/test/roundtrip", logStreamName="node-0")
        t = now_ms()
        events = [{"timestamp": t + i, "message": "line %d" % i} for i in range(50)]
        self.logs.put_log_events(logGroupName="/lote/test/roundtrip", logStreamName="node-0",
                                 logEvents=events)
        got = self.logs.get_log_events(logGroupName="/lote/test/roundtrip",
                                       logStreamName="node-0", startFromHead=True, limit=20)
        self.assertEqual([e["message"] for e in got["events"]], ["line %d" % i for i in range(20)])
        # Page forward with the token until it comes back unchanged.
        messages = [e["message"] for e in got["events"]]
        token = got["nextForwardToken"]
        for _ in range(10):
            page = self.logs.get_log_events(logGroupName="/lote/test/roundtrip",
                                            logStreamName="node-0", nextToken=token, limit=20)
            messages += [e["message"] for e in page["events"]]
            if page["nextForwardToken"] == token:
                break
            token = page["nextForwardToken"]
        self.assertEqual(messages, ["line %d" % i for i in range(50)])
        self.assertEqual(page["events"], [])

        groups = self.logs.describe_log_groups(logGroupNamePrefix="/lote/test/round")["logGroups"]
        self.assertEqual([g["logGroupName"] for g in groups], ["/lote/test/roundtrip"])
        streams = self.logs.describe_log_streams(logGroupName="/lote/test/roundtrip")["logStreams"]
        self.assertEqual([s["logStreamName"] for s in streams], ["node-0"])

        found = self.logs.filter_log_events(logGroupName="/lote/test/roundtrip",
                                            filterPattern='"line 4"')["events"]
        self.assertEqual(sorted(e["message"] for e in found),
                         sorted(["line 4"] + ["line 4%d" % i for i in range(10)]))

        self.logs.put_retention_policy(logGroupName="/lote/test/roundtrip", retentionInDays=7)
        groups = self.logs.describe_log_groups(logGroupNamePrefix="/lote/test/round")["logGroups"]
        self.assertEqual(groups[0].get("retentionInDays"), 7)
        self.logs.delete_log_group(logGroupName="/lote/test/roundtrip")
        code, _ = self.error_code(self.logs.describe_log_streams, logGroupName="/lote/test/roundtrip")
        self.assertEqual(code, "ResourceNotFoundException")

    def test_errors_have_aws_codes(self):
        code, message = self.error_code(self.logs.get_log_events, logGroupName="/lote/none",
                                        logStreamName="s")
        self.assertEqual(code, "ResourceNotFoundException")
        self.assertIn("/lote/none", message)
        self.logs.create_log_group(logGroupName="/lote/test/dup")
        code, message = self.error_code(self.logs.create_log_group, logGroupName="/lote/test/dup")
        self.assertEqual(code, "ResourceAlreadyExistsException")
        code, message = self.error_code(self.logs.put_retention_policy,
                                        logGroupName="/lote/test/dup", retentionInDays=11)
        self.assertEqual(code, "InvalidParameterException")
        self.assertIn("11", message)

    def test_logs_requests_must_be_signed_for_logs(self):
        k, s = self.server.credentials()
        bad = self.server.client("logs", key=k, secret=s + "x")
        code, _ = self.error_code(bad.describe_log_groups)
        self.assertEqual(code, "InvalidSignatureException")

    def test_pip_aws_cli_reads_what_boto3_wrote(self):
        self.logs.create_log_group(logGroupName="/lote/test/cli")
        self.logs.create_log_stream(logGroupName="/lote/test/cli", logStreamName="a")
        self.logs.put_log_events(logGroupName="/lote/test/cli", logStreamName="a",
                                 logEvents=[{"timestamp": now_ms(), "message": "from boto3"}])
        out = subprocess.run(
            ["aws", "logs", "get-log-events", "--log-group-name", "/lote/test/cli",
             "--log-stream-name", "a", "--start-from-head", "--output", "json"],
            env=self.server.env(), check=True, capture_output=True, text=True, timeout=60).stdout
        self.assertEqual([e["message"] for e in json.loads(out)["events"]], ["from boto3"])

    def test_pagination_over_100000_events(self):
        group, stream, total = "/lote/test/pages", "big", 100000
        self.logs.create_log_group(logGroupName=group)
        self.logs.create_log_stream(logGroupName=group, logStreamName=stream)
        t = now_ms() - total
        for start in range(0, total, 10000):  # PutLogEvents takes at most 10,000 events
            self.logs.put_log_events(
                logGroupName=group, logStreamName=stream,
                logEvents=[{"timestamp": t + i, "message": "event %d" % i}
                           for i in range(start, start + 10000)])
        # Forward with nextForwardToken until it comes back unchanged (as the SDKs stop).
        messages, token, pages = [], None, 0
        while True:
            kwargs = {"nextToken": token} if token else {"startFromHead": True}
            page = self.logs.get_log_events(logGroupName=group, logStreamName=stream, **kwargs)
            pages += 1
            messages += [e["message"] for e in page["events"]]
            if page["nextForwardToken"] == token:
                break
            token = page["nextForwardToken"]
        self.assertEqual(messages, ["event %d" % i for i in range(total)])
        self.assertGreater(pages, 2)  # a page holds at most 10,000 events / 1 MB
        # Backward from the end with nextBackwardToken reads the same events in reverse pages.
        back, token = [], None
        while True:
            kwargs = {"nextToken": token} if token else {"startFromHead": False}
            page = self.logs.get_log_events(logGroupName=group, logStreamName=stream, **kwargs)
            back = [e["message"] for e in page["events"]] + back
            if page["nextBackwardToken"] == token:
                break
            token = page["nextBackwardToken"]
        self.assertEqual(back, messages)
        # The pip aws CLI pages FilterLogEvents itself (its paginator follows nextToken).
        out = subprocess.run(
            ["aws", "logs", "filter-log-events", "--log-group-name", group,
             "--filter-pattern", "\"event 9999\"", "--output", "json"],
            env=self.server.env(), check=True, capture_output=True, text=True, timeout=120).stdout
        found = sorted(e["message"] for e in json.loads(out)["events"])
        self.assertEqual(found, sorted(["event 9999"] + ["event 9999%d" % d for d in range(10)]))

    def test_aws_v2_logs_tail_follow_sees_new_events(self):
        group = "/lote/test/tail"
        self.logs.create_log_group(logGroupName=group)
        self.logs.create_log_stream(logGroupName=group, logStreamName="job/default/abc")
        env = self.server.env()
        proc = subprocess.Popen(
            [AWS_V2, "logs", "tail", group, "--follow", "--since", "1h", "--format", "short",
             "--endpoint-url", self.server.endpoint],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),
                                  daemon=True)
        reader.start()
        try:
            deadline = time.time() + 60
            sent = 0
            while time.time() < deadline and not any("tail-marker-2" in l for l in lines):
                self.logs.put_log_events(
                    logGroupName=group, logStreamName="job/default/abc",
                    logEvents=[{"timestamp": now_ms(), "message": "tail-marker-%d" % sent}])
                sent = min(sent + 1, 2)
                time.sleep(1)
            self.assertTrue(any("tail-marker-2" in l for l in lines),
                            "aws logs tail --follow printed: %r" % lines)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
