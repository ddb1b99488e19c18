"""A 5 GiB object through lote's S3 in bounded server memory: boto3 uploads it in
80 parts of 64 MiB (generated on the fly, never on the client's disk), completes
it, reads it back in ranges and whole, and the server's peak resident memory
(VmHWM of its process) stays under 512 MiB throughout: bodies stream to disk,
the multipart completion concatenates files, GetObject streams from the file.

Run: python3 test_s3_large.py --lote build/lote
"""
import argparse
import hashlib
import os
import sys
import unittest

import boto3
import botocore.config

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
MiB = 1 << 20
PART = 64 * MiB
PARTS = 80  # 5 GiB
MEMORY_LIMIT = 512 * MiB


def part_bytes(n):
    """Part n's bytes: a 1 MiB pseudo-random block (seeded by n) repeated."""
    block = hashlib.shake_256(b"lote part %d" % n).digest(MiB)
    return block * (PART // MiB)


def peak_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM for pid %d" % pid)


class LargeObjectTest(unittest.TestCase):
    def test_five_gib_multipart_in_bounded_memory(self):
        server = LoteServer(LOTE).start()
        self.addCleanup(server.cleanup)
        key, secret = server.credentials()
        s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                          aws_access_key_id=key, aws_secret_access_key=secret,
                          config=botocore.config.Config(read_timeout=300,
                                                        retries={"max_attempts": 1}))
        s3.create_bucket(Bucket="large")
        upload = s3.create_multipart_upload(Bucket="large", Key="five-gib")["UploadId"]
        whole = hashlib.md5()
        part_md5s = b""
        parts = []
        for n in range(1, PARTS + 1):
            body = part_bytes(n)
            whole.update(body)
            part_md5s += hashlib.md5(body).digest()
            etag = s3.upload_part(Bucket="large", Key="five-gib", UploadId=upload, PartNumber=n,
                                  Body=body)["ETag"]
            parts.append({"PartNumber": n, "ETag": etag})
            del body
        self.assertLess(peak_rss(server.proc.pid), MEMORY_LIMIT, "after the parts")
        done = s3.complete_multipart_upload(Bucket="large", Key="five-gib", UploadId=upload,
                                            MultipartUpload={"Parts": parts})
        self.assertEqual(done["ETag"], '"%s-%d"' % (hashlib.md5(part_md5s).hexdigest(), PARTS))
        head = s3.head_object(Bucket="large", Key="five-gib")
        self.assertEqual(head["ContentLength"], PART * PARTS)
        # A range across the boundary of parts 40 and 41.
        start = 40 * PART - 10
        ranged = s3.get_object(Bucket="large", Key="five-gib",
                               Range="bytes=%d-%d" % (start, start + 19))["Body"].read()
        self.assertEqual(ranged, part_bytes(40)[-10:] + part_bytes(41)[:10])
        # The whole object back, streamed.
        got = hashlib.md5()
        body = s3.get_object(Bucket="large", Key="five-gib")["Body"]
        read = 0
        for chunk in iter(lambda: body.read(8 * MiB), b""):
            got.update(chunk)
            read += len(chunk)
        self.assertEqual(read, PART * PARTS)
        self.assertEqual(got.hexdigest(), whole.hexdigest())
        rss = peak_rss(server.proc.pid)
        print("server peak RSS over a 5 GiB upload and download: %.0f MiB" % (rss / MiB),
              file=sys.stderr)
        self.assertLess(rss, MEMORY_LIMIT)
        with open(os.path.join(server.home, "s3", "large", "five-gib"), "rb") as f:
            f.seek(0, os.SEEK_END)
            self.assertEqual(f.tell(), PART * PARTS)


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
