"""A real `lote server` driven by the AWS SDK for JavaScript v3
(@aws-sdk/client-batch, @aws-sdk/client-cloudwatch-logs, @aws-sdk/client-s3,
pinned and installed by scripts/fetch-js-sdk.sh): a 50-request parallel burst
from one client, real operations of each service (S3: checksummed put, get,
range, multipart, listing), modelled errors, and clients whose clocks are 20
minutes off (they succeed after the SDK's automatic retry).

Run: python3 test_js_sdk.py --lote build/lote [--sdk DIR]
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
SDK = None


class JsSdkTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not shutil.which("node"):
            raise AssertionError("node is not installed (scripts/install-deps.sh installs it)")
        if not os.path.isdir(os.path.join(SDK, "node_modules", "@aws-sdk", "client-batch")):
            # A test that skips would pass without testing: missing set-up is a failure.
            raise AssertionError("the JS SDK is not installed in %s: run scripts/fetch-js-sdk.sh %s"
                                 % (SDK, SDK))
        cls.server = LoteServer(LOTE).start()
        key, secret = cls.server.credentials()
        proc = subprocess.run(["node", os.path.join(HERE, "js_sdk_client.cjs"), SDK, cls.server.endpoint, key,
                               secret, "us-east-1"], capture_output=True, text=True, timeout=240)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        cls.out = json.loads(lines[-1]) if lines else {"fatal": proc.stdout + proc.stderr}
        cls.stderr = proc.stderr

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.assertNotIn("fatal", self.out, self.out.get("fatal"))

    def test_parallel_burst_of_50(self):
        self.assertEqual(self.out["batch_burst_ok"], 50, self.out["batch_burst_errors"])
        self.assertEqual(self.out["logs_burst_ok"], 50, self.out["logs_burst_errors"])
        print("js burst: batch %d ms, logs %d ms" % (self.out["batch_burst_ms"], self.out["logs_burst_ms"]),
              file=sys.stderr)

    def test_operations(self):
        self.assertEqual(self.out["ce_names"], ["js-ce"])
        self.assertEqual(self.out["log_messages"], ["héllo from js"])

    def test_modelled_errors(self):
        self.assertEqual(self.out["bad_name"]["name"], "ClientException")
        self.assertEqual(self.out["bad_name"]["status"], 400)
        self.assertIn("jobQueueName", self.out["bad_name"]["message"])
        self.assertEqual(self.out["missing_group"]["name"], "ResourceNotFoundException")

    def test_s3(self):
        o = self.out
        self.assertEqual(o["s3_put_etag"], '"%s"' % hashlib.md5(b"hello from js").hexdigest())
        # The SDK sent a CRC32 checksum (its default) and lote answered it back.
        self.assertEqual(o["s3_put_crc32"],
                         base64.b64encode(struct.pack(">I", zlib.crc32(b"hello from js"))).decode())
        self.assertEqual(o["s3_get"], {"body": "hello from js", "type": "text/plain", "meta": {"team": "ml"}})
        self.assertEqual(o["s3_range"], "from")
        part_md5s = hashlib.md5(b"\x07" * (5 * 1024 * 1024)).digest() + hashlib.md5(b"tail").digest()
        self.assertEqual(o["s3_multipart_etag"], '"%s-2"' % hashlib.md5(part_md5s).hexdigest())
        self.assertEqual(o["s3_multipart_size"], 5 * 1024 * 1024 + 4)
        self.assertEqual(o["s3_list"], {"keys": ["big"], "prefixes": ["dir/"]})
        self.assertEqual(o["s3_missing"]["name"], "NoSuchKey")
        self.assertEqual(o["s3_missing"]["status"], 404)
        self.assertEqual(o["s3_no_bucket"]["name"], "NoSuchBucket")

    def test_clock_20_minutes_off_succeeds_after_retry(self):
        for service in ("batch", "logs"):
            for way in ("behind", "ahead"):
                r = self.out["%s_skew_%s" % (service, way)]
                self.assertTrue(r["ok"], r)
                self.assertGreaterEqual(r["attempts"], 2, r)  # the first attempt was refused
                # Corrected from the server's Date: about minus the skew.
                want = 20 * 60 * 1000 * (1 if way == "behind" else -1)
                self.assertLess(abs(r["offset_ms"] - want), 60 * 1000, r)


def main():
    global LOTE, SDK
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    parser.add_argument("--sdk", default=os.environ.get("LOTE_JS_SDK", os.path.join(ROOT, ".cache", "js-sdk")))
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    SDK = os.path.abspath(args.sdk)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
