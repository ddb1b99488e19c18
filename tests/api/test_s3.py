"""lote's S3 endpoint (REST-XML, on the API's own port) against a real `lote
server`, driven by boto3, the stock aws CLI and raw signed HTTP requests.

What it checks:
- Buckets: ListBuckets, CreateBucket (again in us-east-1: 200; a bad name:
  InvalidBucketName), HeadBucket (404), DeleteBucket (BucketNotEmpty 409,
  NoSuchBucket 404), GetBucketLocation (no constraint for us-east-1).
- Objects: PutObject (x-amz-meta-*, Content-Type, Content-MD5 checked:
  BadDigest; x-amz-checksum-crc32/crc32c/sha256 returned by GetObject with
  ChecksumMode=ENABLED; If-None-Match: * is PreconditionFailed when the key
  exists), GetObject (ranges: 206 and Content-Range, InvalidRange 416;
  If-Match/If-None-Match/If-(Un)Modified-Since: 412/304;
  response-content-type), HeadObject, DeleteObject (a missing key: 204),
  DeleteObjects (quiet and not), CopyObject (COPY and REPLACE metadata).
- Listings: ListObjectsV2 (prefix, delimiter and CommonPrefixes, paging with
  continuation tokens, StartAfter, url encoding) and ListObjects (Marker,
  NextMarker with a delimiter).
- Multipart: parts, ListParts, ListMultipartUploads, the ETag
  "MD5(part MD5s)-N" computed here, abort (NoSuchUpload after), EntityTooSmall
  for a small part that is not the last; boto3's upload_file/download_file.
- Addressing: path style and virtual hosts (Host "<bucket>.s3.localhost:PORT",
  raw signed requests).
- Files: an object is the plain file <home>/s3/<bucket>/<key>; a file written
  there directly is an object (ETag its MD5).
- Errors are S3's XML <Error> (NoSuchBucket, NoSuchKey, InvalidRange,
  PreconditionFailed, BucketNotEmpty, AccessDenied); an unimplemented
  sub-resource (?tagging) is NotImplemented 501.
- The aws CLI (mb, cp --recursive, ls, sync, cp to stdout, rm, rb) reaches
  lote through AWS_ENDPOINT_URL_S3 from `lote env` alone; `aws s3 presign`
  URLs work with urllib, both the CLI's default (signature version 2 in
  us-east-1) and s3v4, and a changed signature is SignatureDoesNotMatch.
- IAM: a user allowed s3:GetObject and s3:ListBucket on one bucket is
  AccessDenied (403) for PutObject there and for another bucket; a wrong
  secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId; an
  unsigned request is AccessDenied.
- Durability: an object survives SIGKILL and restart; a PUT whose client hangs
  up mid-body leaves no object and no stray file.

When a case fails, the last requests it sent and the answers it got (method,
URL, headers, status, body) are printed under its traceback.

usage: test_s3.py --lote BINARY [unittest args]
"""
import argparse
import base64
import collections
import datetime
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
import zlib

import boto3
import boto3.s3.transfer
import botocore.auth
import botocore.awsrequest
import botocore.config
import botocore.credentials
import botocore.exceptions
from botocore.compat import HAS_CRT

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "control"))
from lote_server import LoteServer  # noqa: E402

LOTE = None
MiB = 1 << 20
REGION = "us-east-1"


# --- digests ------------------------------------------------------------------
def md5_hex(data):
    return hashlib.md5(data).hexdigest()


def quoted(etag):
    return '"%s"' % etag


def multipart_etag(parts):
    """S3's ETag of an object made of `parts`: MD5 of the parts' binary MD5s, "-N"."""
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return quoted("%s-%d" % (md5_hex(joined), len(parts)))


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def checksum_b64(algorithm, data):
    """The value S3 sends in x-amz-checksum-<algorithm> for `data`."""
    if algorithm == "CRC32":
        raw = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "big")
    elif algorithm == "CRC32C":
        raw = crc32c(data).to_bytes(4, "big")
    elif algorithm == "SHA256":
        raw = hashlib.sha256(data).digest()
    else:
        raise ValueError(algorithm)
    return base64.b64encode(raw).decode()


def xml_fields(body):
    """{tag: text} of the root's children (namespaces dropped) and the root's tag."""
    root = ET.fromstring(body)
    strip = lambda tag: tag.split("}", 1)[-1]  # noqa: E731
    return strip(root.tag), {strip(c.tag): (c.text or "") for c in root}


def xml_all(body, tag):
    """The text of every element named `tag` anywhere in the document."""
    root = ET.fromstring(body)
    return [e.text or "" for e in root.iter() if e.tag.split("}", 1)[-1] == tag]


# --- what a failed case prints ----------------------------------------------------
class Exchanges:
    """The last requests a test sent (boto3, raw HTTP, aws CLI) and the answers
    it got; ExchangeResult prints them under a failed case's traceback."""

    def __init__(self, keep=12):
        self.items = collections.deque(maxlen=keep)
        self._pending = None

    def clear(self):
        self.items.clear()

    def add(self, text):
        self.items.append(text)

    def dump(self):
        return "\n-----\n".join(self.items) or "(none)"

    def attach(self, client):
        client.meta.events.register("before-send.s3", self._before_send)
        client.meta.events.register("after-call.s3", self._after_call)

    @staticmethod
    def _body_text(body):
        if body is None:
            return ""
        if isinstance(body, (bytes, bytearray)):
            return "%d bytes: %r" % (len(body), bytes(body[:400]))
        if isinstance(body, str):
            return "%d chars: %r" % (len(body), body[:400])
        return "(a %s)" % type(body).__name__

    def _before_send(self, request, **kwargs):
        self._pending = "%s %s\n%s\nbody %s" % (
            request.method, request.url,
            "\n".join("  %s: %s" % (k, v) for k, v in request.headers.items()),
            self._body_text(request.body))
        self.add(self._pending + "\n(no answer)")

    def _after_call(self, http_response, model, **kwargs):
        if http_response.status_code < 300 and model.has_streaming_output:
            body = "(streamed to the caller)"
        else:
            body = self._body_text(http_response.content)
        answer = "-> %d\n%s\nbody %s" % (
            http_response.status_code,
            "\n".join("  %s: %s" % (k, v) for k, v in http_response.headers.items()), body)
        if self.items and self._pending and self.items[-1].startswith(self._pending):
            self.items[-1] = "%s [%s]\n%s" % (self._pending, model.name, answer)
        else:
            self.add("[%s]\n%s" % (model.name, answer))


class ExchangeResult(unittest.TextTestResult):
    def _with_exchanges(self, bucket, test):
        exchanges = getattr(test, "exchanges", None)
        if exchanges is not None and bucket:
            t, text = bucket[-1]
            bucket[-1] = (t, text + "\nLast requests and answers of this case:\n" + exchanges.dump())

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._with_exchanges(self.failures, test)

    def addError(self, test, err):
        super().addError(test, err)
        self._with_exchanges(self.errors, test)


# --- the shared fixture ------------------------------------------------------------
class S3Case(unittest.TestCase):
    """One `lote server` per class; `s3` is a path-style boto3 client of the
    administrator."""

    @classmethod
    def setUpClass(cls):
        cls.exchanges = Exchanges()
        cls.server = LoteServer(LOTE).start()
        cls.s3 = cls.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.exchanges.clear()

    @classmethod
    def client(cls, key=None, secret=None):
        k, s = cls.server.credentials()
        c = boto3.client(
            "s3", endpoint_url=cls.server.endpoint, region_name=REGION,
            aws_access_key_id=key or k, aws_secret_access_key=secret or s,
            config=botocore.config.Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1, "mode": "standard"},
                                          max_pool_connections=16))
        cls.exchanges.attach(c)
        return c

    @classmethod
    def port(cls):
        return urllib.parse.urlsplit(cls.server.endpoint).port

    def object_path(self, bucket, key):
        return os.path.join(self.server.home, "s3", bucket, *key.split("/"))

    def error_of(self, call, **kwargs):
        """(Error.Code, HTTP status, response) of a call that must fail."""
        shown = {k: (v if len(repr(v)) < 200 else "<%d chars>" % len(repr(v)))
                 for k, v in kwargs.items()}
        with self.assertRaises(botocore.exceptions.ClientError,
                               msg="%s(%s) succeeded" % (call.__name__, shown)) as ctx:
            call(**kwargs)
        r = ctx.exception.response
        return r["Error"].get("Code"), r["ResponseMetadata"]["HTTPStatusCode"], r

    def assertS3Error(self, code, status, call, **kwargs):
        got_code, got_status, r = self.error_of(call, **kwargs)
        self.assertEqual((got_code, got_status), (code, status),
                         "%s(%s): %s" % (call.__name__, sorted(kwargs), r))
        return r

    def status_of(self, response):
        return response["ResponseMetadata"]["HTTPStatusCode"]

    def raw(self, method, url, body=b"", headers=None, sign=True, key=None, secret=None,
            payload_hash=None):
        """One HTTP/1.1 request to the server's port, whatever host `url` names
        (sent as Host), SigV4-signed for s3 unless `sign` is false:
        (status, {lowercase header: value}, body)."""
        parts = urllib.parse.urlsplit(url)
        path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        sent = {"Host": parts.netloc}
        sent.update(headers or {})
        if sign:
            sent = self.signed_headers(method, url, body, sent, key, secret, payload_hash)
        conn = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=60)
        try:
            conn.request(method, path, body=body or None, headers=sent)
            resp = conn.getresponse()
            data = resp.read()
            got = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()
        self.exchanges.add("%s %s (raw, to 127.0.0.1:%d)\n%s\nbody %s\n-> %d\n%s\nbody %s" % (
            method, path, self.port(), "\n".join("  %s: %s" % kv for kv in sent.items()),
            Exchanges._body_text(body), resp.status,
            "\n".join("  %s: %s" % kv for kv in got.items()), Exchanges._body_text(data)))
        return resp.status, got, data

    def signed_headers(self, method, url, body, headers, key=None, secret=None,
                       payload_hash=None):
        k, s = self.server.credentials()
        req = botocore.awsrequest.AWSRequest(method=method, url=url, data=body, headers=headers)
        if payload_hash:
            req.headers["X-Amz-Content-SHA256"] = payload_hash

            class Signer(botocore.auth.S3SigV4Auth):
                def payload(self, request):
                    return payload_hash
            signer = Signer
        else:
            signer = botocore.auth.S3SigV4Auth
        signer(botocore.credentials.Credentials(key or k, secret or s), "s3",
               REGION).add_auth(req)
        return dict(req.headers.items())

    def assertXmlError(self, status, headers, body, code, http_status):
        """An S3 error answer: the status, XML <Error> with Code and Message."""
        self.assertEqual(status, http_status, body)
        try:
            root, fields = xml_fields(body)
        except ET.ParseError as e:
            self.fail("error body is not XML (%s): %r" % (e, body[:300]))
        self.assertEqual(root, "Error", body)
        self.assertEqual(fields.get("Code"), code, body)
        self.assertTrue(fields.get("Message"), "no Message: %r" % body)
        self.assertIn("xml", headers.get("content-type", ""), headers)
        return fields


# --- buckets, objects, listings, multipart ------------------------------------------
class S3ApiTest(S3Case):
    LISTING = "listing"
    LISTING_SPECIAL = "odd/sp ace+\u00fc&<x>=%.txt"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.s3.create_bucket(Bucket="objects")
        cls.listing_made = False

    def listing(self):
        """Bucket LISTING: page/k00..k24 (k<i> holds i bytes), tree/a.txt,
        tree/d1/x, tree/d1/y, tree/d2/z and LISTING_SPECIAL; made once."""
        if not type(self).listing_made:
            self.s3.create_bucket(Bucket=self.LISTING)
            for i in range(25):
                self.s3.put_object(Bucket=self.LISTING, Key="page/k%02d" % i, Body=b"x" * i)
            for key in ("tree/a.txt", "tree/d1/x", "tree/d1/y", "tree/d2/z",
                        self.LISTING_SPECIAL):
                self.s3.put_object(Bucket=self.LISTING, Key=key, Body=key.encode())
            type(self).listing_made = True
            self.exchanges.clear()
        return self.LISTING

    # --- buckets ------------------------------------------------------------
    def test_bucket_lifecycle(self):
        s3 = self.s3
        made = s3.create_bucket(Bucket="alpha")
        self.assertEqual(self.status_of(made), 200)
        self.assertEqual(self.status_of(s3.create_bucket(Bucket="alpha")), 200,
                         "creating one's own bucket again in us-east-1 answers 200")
        listed = {b["Name"]: b for b in s3.list_buckets()["Buckets"]}
        self.assertIn("alpha", listed)
        self.assertIsInstance(listed["alpha"]["CreationDate"], datetime.datetime)
        self.assertEqual(self.status_of(s3.head_bucket(Bucket="alpha")), 200)
        self.assertS3Error("404", 404, s3.head_bucket, Bucket="no-such-bucket")
        location = s3.get_bucket_location(Bucket="alpha")
        self.assertIn(location.get("LocationConstraint"), (None, ""), location)
        s3.put_object(Bucket="alpha", Key="k", Body=b"v")
        r = self.assertS3Error("BucketNotEmpty", 409, s3.delete_bucket, Bucket="alpha")
        self.assertTrue(r["Error"].get("Message"), r)
        self.assertEqual(self.status_of(s3.head_bucket(Bucket="alpha")), 200)
        s3.delete_object(Bucket="alpha", Key="k")
        self.assertEqual(self.status_of(s3.delete_bucket(Bucket="alpha")), 204)
        self.assertS3Error("404", 404, s3.head_bucket, Bucket="alpha")
        self.assertS3Error("NoSuchBucket", 404, s3.delete_bucket, Bucket="alpha")
        self.assertNotIn("alpha", [b["Name"] for b in s3.list_buckets()["Buckets"]])

    def test_invalid_bucket_names(self):
        for bad in ("Bad_Name", "ab", "-dash-first", "two..dots", "192.168.5.4", "a" * 64):
            self.assertS3Error("InvalidBucketName", 400, self.s3.create_bucket, Bucket=bad)
            self.assertNotIn(bad, [b["Name"] for b in self.s3.list_buckets()["Buckets"]])

    # --- PutObject ------------------------------------------------------------
    def test_put_object_metadata_and_file(self):
        body = os.urandom(3000) + b"tail"
        key = "docs/report 1.bin"
        before = datetime.datetime.now(datetime.timezone.utc)
        put = self.s3.put_object(Bucket="objects", Key=key, Body=body,
                                 ContentType="application/x-report",
                                 Metadata={"color": "blue", "Owner-Team": "ml"})
        self.assertEqual(put["ETag"], quoted(md5_hex(body)))
        with open(self.object_path("objects", key), "rb") as f:
            self.assertEqual(f.read(), body, "the object's bytes are the plain file")
        head = self.s3.head_object(Bucket="objects", Key=key)
        self.assertEqual(head["ContentLength"], len(body))
        self.assertEqual(head["ContentType"], "application/x-report")
        self.assertEqual(head["Metadata"], {"color": "blue", "owner-team": "ml"})
        self.assertEqual(head["ETag"], put["ETag"])
        self.assertLess(abs((head["LastModified"] - before).total_seconds()), 60, head)
        got = self.s3.get_object(Bucket="objects", Key=key)
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["Metadata"], {"color": "blue", "owner-team": "ml"})
        self.assertEqual(got["ContentType"], "application/x-report")
        self.assertEqual(got["ETag"], put["ETag"])

    def test_single_put_larger_than_the_api_body_limit(self):
        # 40 MiB in one PutObject: over the 16 MiB the server buffers for other
        # services' requests; S3 bodies stream to the file instead.
        body = os.urandom(40 << 20)
        put = self.s3.put_object(Bucket="objects", Key="big/single", Body=body)
        self.assertEqual(put["ETag"], quoted(md5_hex(body)))
        with open(self.object_path("objects", "big/single"), "rb") as f:
            self.assertEqual(hashlib.md5(f.read()).hexdigest(), md5_hex(body))
        got = self.s3.get_object(Bucket="objects", Key="big/single", Range="bytes=%d-" % (39 << 20))
        self.assertEqual(got["Body"].read(), body[39 << 20:])

    def test_upload_part_copy(self):
        # What `aws s3 cp s3://a/k s3://b/k` does above its multipart threshold.
        body = os.urandom((5 << 20) + 1000)
        self.s3.put_object(Bucket="objects", Key="copy/src", Body=body)
        upload = self.s3.create_multipart_upload(Bucket="objects", Key="copy/dst")["UploadId"]
        first = self.s3.upload_part_copy(Bucket="objects", Key="copy/dst", UploadId=upload,
                                         PartNumber=1, CopySource="objects/copy/src",
                                         CopySourceRange="bytes=0-%d" % ((5 << 20) - 1))
        second = self.s3.upload_part_copy(Bucket="objects", Key="copy/dst", UploadId=upload,
                                          PartNumber=2, CopySource={"Bucket": "objects",
                                                                    "Key": "copy/src"},
                                          CopySourceRange="bytes=%d-%d" % (5 << 20, len(body) - 1))
        self.assertEqual(first["CopyPartResult"]["ETag"], quoted(md5_hex(body[:5 << 20])))
        self.s3.complete_multipart_upload(
            Bucket="objects", Key="copy/dst", UploadId=upload,
            MultipartUpload={"Parts": [
                {"PartNumber": 1, "ETag": first["CopyPartResult"]["ETag"]},
                {"PartNumber": 2, "ETag": second["CopyPartResult"]["ETag"]}]})
        self.assertEqual(self.s3.get_object(Bucket="objects", Key="copy/dst")["Body"].read(), body)
        with self.assertRaises(botocore.exceptions.ClientError) as bad:
            self.s3.upload_part_copy(Bucket="objects", Key="copy/dst2",
                                     UploadId=self.s3.create_multipart_upload(
                                         Bucket="objects", Key="copy/dst2")["UploadId"],
                                     PartNumber=1, CopySource="objects/copy/src",
                                     CopySourceRange="bytes=0-%d" % len(body))
        self.assertEqual(bad.exception.response["Error"]["Code"], "InvalidRange")

    def test_content_md5_is_checked(self):
        body = b"checked body"
        good = base64.b64encode(hashlib.md5(body).digest()).decode()
        self.s3.put_object(Bucket="objects", Key="md5/good", Body=body, ContentMD5=good)
        self.assertEqual(self.s3.get_object(Bucket="objects", Key="md5/good")["Body"].read(), body)
        bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        self.assertS3Error("BadDigest", 400, self.s3.put_object, Bucket="objects", Key="md5/bad",
                           Body=body, ContentMD5=bad)
        self.assertS3Error("404", 404, self.s3.head_object, Bucket="objects", Key="md5/bad")
        self.assertFalse(os.path.exists(self.object_path("objects", "md5/bad")))

    def test_additional_checksums(self):
        body = b"checksummed " * 100
        for algorithm in ("CRC32", "CRC32C", "SHA256"):
            key = "sum/" + algorithm
            expected = checksum_b64(algorithm, body)
            if algorithm == "CRC32C" and not HAS_CRT:
                # botocore computes CRC32C only with awscrt; the header is the same.
                self.s3.put_object(Bucket="objects", Key=key, Body=body, ChecksumCRC32C=expected)
            else:
                self.s3.put_object(Bucket="objects", Key=key, Body=body,
                                   ChecksumAlgorithm=algorithm)
            got = self.s3.get_object(Bucket="objects", Key=key, ChecksumMode="ENABLED")
            self.assertEqual(got["Body"].read(), body)
            self.assertEqual(got.get("Checksum" + algorithm), expected,
                             "GetObject with ChecksumMode=ENABLED: %s" % algorithm)

    def test_wrong_additional_checksum_is_refused(self):
        body = b"the real bytes"
        self.assertS3Error("BadDigest", 400, self.s3.put_object, Bucket="objects",
                           Key="sum/wrong", Body=body,
                           ChecksumCRC32=checksum_b64("CRC32", b"other bytes"))
        self.assertS3Error("404", 404, self.s3.head_object, Bucket="objects", Key="sum/wrong")

    def test_put_if_none_match(self):
        self.s3.put_object(Bucket="objects", Key="once", Body=b"first", IfNoneMatch="*")
        self.assertS3Error("PreconditionFailed", 412, self.s3.put_object, Bucket="objects",
                           Key="once", Body=b"second", IfNoneMatch="*")
        self.assertEqual(self.s3.get_object(Bucket="objects", Key="once")["Body"].read(), b"first")

    # --- GetObject ------------------------------------------------------------
    def test_get_ranges(self):
        body = bytes(range(256)) * 4
        self.s3.put_object(Bucket="objects", Key="ranged", Body=body)
        for spec, start, end in (("bytes=10-19", 10, 19), ("bytes=1000-", 1000, 1023),
                                 ("bytes=-24", 1000, 1023), ("bytes=1020-5000", 1020, 1023),
                                 ("bytes=0-0", 0, 0)):
            got = self.s3.get_object(Bucket="objects", Key="ranged", Range=spec)
            self.assertEqual(self.status_of(got), 206, spec)
            self.assertEqual(got["ContentRange"], "bytes %d-%d/1024" % (start, end), spec)
            self.assertEqual(got["ContentLength"], end - start + 1, spec)
            self.assertEqual(got["Body"].read(), body[start:end + 1], spec)
        self.assertS3Error("InvalidRange", 416, self.s3.get_object, Bucket="objects",
                           Key="ranged", Range="bytes=2000-3000")
        status, headers, data = self.raw(
            "GET", "%s/objects/ranged" % self.server.endpoint, headers={"Range": "bytes=2000-3000"})
        self.assertXmlError(status, headers, data, "InvalidRange", 416)

    def test_get_conditions(self):
        body = b"conditional"
        etag = self.s3.put_object(Bucket="objects", Key="cond", Body=body)["ETag"]
        modified = self.s3.head_object(Bucket="objects", Key="cond")["LastModified"]
        day = datetime.timedelta(days=1)
        get = self.s3.get_object
        self.assertEqual(get(Bucket="objects", Key="cond", IfMatch=etag)["Body"].read(), body)
        self.assertS3Error("PreconditionFailed", 412, get, Bucket="objects", Key="cond",
                           IfMatch='"0123456789abcdef0123456789abcdef"')
        self.assertS3Error("304", 304, get, Bucket="objects", Key="cond", IfNoneMatch=etag)
        self.assertEqual(get(Bucket="objects", Key="cond",
                             IfNoneMatch='"0123456789abcdef0123456789abcdef"')["Body"].read(), body)
        # Last-Modified has whole seconds; the object is not modified after it.
        self.assertS3Error("304", 304, get, Bucket="objects", Key="cond",
                           IfModifiedSince=modified)
        self.assertEqual(get(Bucket="objects", Key="cond",
                             IfModifiedSince=modified - day)["Body"].read(), body)
        self.assertS3Error("PreconditionFailed", 412, get, Bucket="objects", Key="cond",
                           IfUnmodifiedSince=modified - day)
        self.assertEqual(get(Bucket="objects", Key="cond",
                             IfUnmodifiedSince=modified)["Body"].read(), body)
        self.assertS3Error("412", 412, self.s3.head_object, Bucket="objects", Key="cond",
                           IfMatch='"0123456789abcdef0123456789abcdef"')
        self.assertS3Error("304", 304, self.s3.head_object, Bucket="objects", Key="cond",
                           IfNoneMatch=etag)
        overridden = get(Bucket="objects", Key="cond", ResponseContentType="application/x-override")
        self.assertEqual(overridden["ContentType"], "application/x-override")
        self.assertEqual(overridden["Body"].read(), body)

    def test_missing_keys_and_buckets_are_s3_errors(self):
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket="objects", Key="nope")
        self.assertS3Error("404", 404, self.s3.head_object, Bucket="objects", Key="nope")
        self.assertS3Error("NoSuchBucket", 404, self.s3.get_object, Bucket="no-bucket", Key="k")
        self.assertS3Error("NoSuchBucket", 404, self.s3.list_objects_v2, Bucket="no-bucket")
        self.assertS3Error("NoSuchBucket", 404, self.s3.put_object, Bucket="no-bucket", Key="k",
                           Body=b"x")
        status, headers, body = self.raw("GET", "%s/objects/nope" % self.server.endpoint)
        self.assertXmlError(status, headers, body, "NoSuchKey", 404)
        status, headers, body = self.raw("GET", "%s/no-bucket/k" % self.server.endpoint)
        self.assertXmlError(status, headers, body, "NoSuchBucket", 404)

    # --- deletes and copies ---------------------------------------------------
    def test_delete_object_and_objects(self):
        s3 = self.s3
        self.assertEqual(self.status_of(s3.delete_object(Bucket="objects", Key="del/missing")), 204)
        for i in (1, 2, 3):
            s3.put_object(Bucket="objects", Key="del/%d" % i, Body=b"%d" % i)
        self.assertEqual(self.status_of(s3.delete_object(Bucket="objects", Key="del/1")), 204)
        self.assertS3Error("404", 404, s3.head_object, Bucket="objects", Key="del/1")
        self.assertFalse(os.path.exists(self.object_path("objects", "del/1")))
        loud = s3.delete_objects(Bucket="objects", Delete={
            "Objects": [{"Key": "del/2"}, {"Key": "del/not-there"}]})
        self.assertEqual(sorted(d["Key"] for d in loud.get("Deleted", [])),
                         ["del/2", "del/not-there"], loud)
        self.assertEqual(loud.get("Errors", []), [], loud)
        quiet = s3.delete_objects(Bucket="objects", Delete={"Objects": [{"Key": "del/3"}],
                                                            "Quiet": True})
        self.assertEqual(quiet.get("Deleted", []), [], quiet)
        self.assertEqual(quiet.get("Errors", []), [], quiet)
        self.assertS3Error("404", 404, s3.head_object, Bucket="objects", Key="del/3")
        self.assertEqual(s3.list_objects_v2(Bucket="objects", Prefix="del/")["KeyCount"], 0)

    def test_copy_object(self):
        s3 = self.s3
        s3.create_bucket(Bucket="copies")
        src_key = "src dir/\u00fc+&=.txt"
        body = b"copy me " * 50
        etag = s3.put_object(Bucket="objects", Key=src_key, Body=body, ContentType="text/x-src",
                             Metadata={"a": "1"})["ETag"]
        copied = s3.copy_object(Bucket="copies", Key="same",
                                CopySource={"Bucket": "objects", "Key": src_key})
        self.assertEqual(copied["CopyObjectResult"]["ETag"], etag)
        head = s3.head_object(Bucket="copies", Key="same")
        self.assertEqual((head["Metadata"], head["ContentType"], head["ETag"]),
                         ({"a": "1"}, "text/x-src", etag))
        self.assertEqual(s3.get_object(Bucket="copies", Key="same")["Body"].read(), body)
        s3.copy_object(Bucket="copies", Key="replaced", MetadataDirective="REPLACE",
                       CopySource={"Bucket": "objects", "Key": src_key},
                       ContentType="text/x-new", Metadata={"b": "2"})
        head = s3.head_object(Bucket="copies", Key="replaced")
        self.assertEqual((head["Metadata"], head["ContentType"]), ({"b": "2"}, "text/x-new"))
        self.assertEqual(s3.get_object(Bucket="copies", Key="replaced")["Body"].read(), body)
        # A copy onto itself with REPLACE updates the metadata only.
        s3.copy_object(Bucket="copies", Key="same", MetadataDirective="REPLACE",
                       CopySource={"Bucket": "copies", "Key": "same"}, Metadata={"c": "3"})
        head = s3.head_object(Bucket="copies", Key="same")
        self.assertEqual(head["Metadata"], {"c": "3"})
        self.assertEqual(s3.get_object(Bucket="copies", Key="same")["Body"].read(), body)
        with open(self.object_path("copies", "replaced"), "rb") as f:
            self.assertEqual(f.read(), body)
        self.assertS3Error("NoSuchKey", 404, s3.copy_object, Bucket="copies", Key="x",
                           CopySource={"Bucket": "objects", "Key": "no-such-source"})

    # --- listings -------------------------------------------------------------
    def test_list_objects_v2_pages(self):
        self.listing()
        pages = list(self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.LISTING, Prefix="page/", PaginationConfig={"PageSize": 7}))
        self.assertEqual([len(p.get("Contents", [])) for p in pages], [7, 7, 7, 4])
        self.assertEqual([p["KeyCount"] for p in pages], [7, 7, 7, 4])
        self.assertEqual([p["IsTruncated"] for p in pages], [True, True, True, False])
        for p in pages[:-1]:
            self.assertTrue(p.get("NextContinuationToken"), p)
        self.assertNotIn("NextContinuationToken", pages[-1])
        contents = [c for p in pages for c in p["Contents"]]
        self.assertEqual([c["Key"] for c in contents], ["page/k%02d" % i for i in range(25)])
        for i, c in enumerate(contents):
            self.assertEqual(c["Size"], i)
            self.assertEqual(c["ETag"], quoted(md5_hex(b"x" * i)))
            self.assertIsInstance(c["LastModified"], datetime.datetime)
        after = self.s3.list_objects_v2(Bucket=self.LISTING, Prefix="page/", StartAfter="page/k20")
        self.assertEqual([c["Key"] for c in after["Contents"]],
                         ["page/k21", "page/k22", "page/k23", "page/k24"])
        tens = self.s3.list_objects_v2(Bucket=self.LISTING, Prefix="page/k1")
        self.assertEqual([c["Key"] for c in tens["Contents"]], ["page/k1%d" % i for i in range(10)])

    def test_list_objects_v2_delimiter_and_encoding(self):
        self.listing()
        tree = self.s3.list_objects_v2(Bucket=self.LISTING, Prefix="tree/", Delimiter="/")
        self.assertEqual([c["Key"] for c in tree.get("Contents", [])], ["tree/a.txt"])
        self.assertEqual([p["Prefix"] for p in tree.get("CommonPrefixes", [])],
                         ["tree/d1/", "tree/d2/"])
        self.assertEqual(tree["KeyCount"], 3)
        top = self.s3.list_objects_v2(Bucket=self.LISTING, Delimiter="/")
        self.assertEqual([p["Prefix"] for p in top.get("CommonPrefixes", [])],
                         ["odd/", "page/", "tree/"])
        self.assertEqual(top.get("Contents", []), [])
        # A delimiter and one entry a page: prefixes and keys interleave in order.
        pages = list(self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.LISTING, Prefix="tree/", Delimiter="/", PaginationConfig={"PageSize": 1}))
        seen = [c["Key"] for p in pages for c in p.get("Contents", [])] + \
            [x["Prefix"] for p in pages for x in p.get("CommonPrefixes", [])]
        self.assertEqual(sorted(seen), ["tree/a.txt", "tree/d1/", "tree/d2/"])
        self.assertEqual(len(pages), 3)
        # boto3 asks for EncodingType=url and decodes the answer.
        odd = self.s3.list_objects_v2(Bucket=self.LISTING, Prefix="odd/")
        self.assertEqual([c["Key"] for c in odd["Contents"]], [self.LISTING_SPECIAL])
        got = self.s3.get_object(Bucket=self.LISTING, Key=self.LISTING_SPECIAL)
        self.assertEqual(got["Body"].read(), self.LISTING_SPECIAL.encode())
        status, _, body = self.raw(
            "GET", "%s/%s?list-type=2&prefix=odd%%2F&encoding-type=url" % (
                self.server.endpoint, self.LISTING))
        self.assertEqual(status, 200, body)
        self.assertEqual([urllib.parse.unquote_plus(k) for k in xml_all(body, "Key")],
                         [self.LISTING_SPECIAL])
        self.assertEqual(xml_all(body, "EncodingType"), ["url"])

    def test_list_objects_v1_markers(self):
        self.listing()
        r = self.s3.list_objects(Bucket=self.LISTING, Prefix="page/", Marker="page/k10", MaxKeys=5)
        self.assertEqual([c["Key"] for c in r["Contents"]],
                         ["page/k11", "page/k12", "page/k13", "page/k14", "page/k15"])
        self.assertTrue(r["IsTruncated"])
        seen, marker, next_markers = [], "", []
        for _ in range(10):
            r = self.s3.list_objects(Bucket=self.LISTING, Prefix="tree/", Delimiter="/",
                                     MaxKeys=1, Marker=marker)
            seen += [c["Key"] for c in r.get("Contents", [])]
            seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
            if not r["IsTruncated"]:
                break
            self.assertTrue(r.get("NextMarker"), "a truncated v1 listing with a delimiter "
                            "has NextMarker: %s" % r)
            marker = r["NextMarker"]
            next_markers.append(marker)
        self.assertEqual(seen, ["tree/a.txt", "tree/d1/", "tree/d2/"])
        self.assertEqual(next_markers, ["tree/a.txt", "tree/d1/"])
        every = [c["Key"] for p in self.s3.get_paginator("list_objects").paginate(
            Bucket=self.LISTING, Prefix="page/", PaginationConfig={"PageSize": 7})
            for c in p.get("Contents", [])]
        self.assertEqual(every, ["page/k%02d" % i for i in range(25)])

    # --- multipart ------------------------------------------------------------
    def test_multipart_upload(self):
        s3, bucket, key = self.s3, "objects", "big/model.bin"
        parts = [os.urandom(5 * MiB), os.urandom(5 * MiB), b"!"]
        upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ContentType="application/x-model",
                                            Metadata={"step": "100"})
        uid = upload["UploadId"]
        self.assertTrue(uid)
        listed = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        self.assertIn((key, uid), [(u["Key"], u["UploadId"]) for u in listed])
        etags = []
        for n, data in enumerate(parts, 1):
            etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n,
                                  Body=data)["ETag"]
            self.assertEqual(etag, quoted(md5_hex(data)), "part %d" % n)
            etags.append(etag)
        listed = s3.list_parts(Bucket=bucket, Key=key, UploadId=uid)["Parts"]
        self.assertEqual([(p["PartNumber"], p["Size"], p["ETag"]) for p in listed],
                         [(n, len(d), e) for n, (d, e) in enumerate(zip(parts, etags), 1)])
        done = s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e}
                                       for n, e in enumerate(etags, 1)]})
        expected = multipart_etag(parts)
        self.assertEqual(done["ETag"], expected)
        self.assertEqual((done["Bucket"], done["Key"]), (bucket, key))
        head = s3.head_object(Bucket=bucket, Key=key)
        self.assertEqual((head["ETag"], head["ContentLength"], head["ContentType"],
                          head["Metadata"]),
                         (expected, 10 * MiB + 1, "application/x-model", {"step": "100"}))
        whole = b"".join(parts)
        self.assertEqual(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), whole)
        with open(self.object_path(bucket, key), "rb") as f:
            self.assertEqual(f.read(), whole)
        listed = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        self.assertNotIn(uid, [u["UploadId"] for u in listed])
        self.assertS3Error("NoSuchUpload", 404, s3.list_parts, Bucket=bucket, Key=key,
                           UploadId=uid)

    def test_multipart_abort(self):
        s3, bucket, key = self.s3, "objects", "big/aborted.bin"
        uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=1, Body=b"p" * 1024)
        self.assertEqual(self.status_of(s3.abort_multipart_upload(
            Bucket=bucket, Key=key, UploadId=uid)), 204)
        self.assertS3Error("NoSuchUpload", 404, s3.list_parts, Bucket=bucket, Key=key,
                           UploadId=uid)
        self.assertS3Error("NoSuchUpload", 404, s3.upload_part, Bucket=bucket, Key=key,
                           UploadId=uid, PartNumber=2, Body=b"late")
        self.assertS3Error("NoSuchUpload", 404, s3.complete_multipart_upload, Bucket=bucket,
                           Key=key, UploadId=uid,
                           MultipartUpload={"Parts": [{"PartNumber": 1,
                                                       "ETag": quoted(md5_hex(b"p" * 1024))}]})
        self.assertS3Error("404", 404, s3.head_object, Bucket=bucket, Key=key)
        listed = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        self.assertNotIn(uid, [u["UploadId"] for u in listed])

    def test_multipart_small_part_not_last(self):
        s3, bucket, key = self.s3, "objects", "big/small-parts.bin"
        uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        parts = [os.urandom(1 * MiB), b"end"]
        etags = [s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n,
                                Body=d)["ETag"] for n, d in enumerate(parts, 1)]
        self.assertS3Error("EntityTooSmall", 400, s3.complete_multipart_upload, Bucket=bucket,
                           Key=key, UploadId=uid,
                           MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e}
                                                      for n, e in enumerate(etags, 1)]})
        self.assertS3Error("404", 404, s3.head_object, Bucket=bucket, Key=key)
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=uid)

    def test_transfer_manager_upload_and_download(self):
        work = tempfile.mkdtemp(prefix="lote_s3_transfer_")
        self.addCleanup(shutil.rmtree, work, True)
        src, dst = os.path.join(work, "src.bin"), os.path.join(work, "dst.bin")
        data = os.urandom(17 * MiB)
        with open(src, "wb") as f:
            f.write(data)
        config = boto3.s3.transfer.TransferConfig(multipart_threshold=8 * MiB,
                                                  multipart_chunksize=5 * MiB)
        self.s3.upload_file(src, "objects", "transfer/17mib.bin", Config=config)
        chunks = [data[i:i + 5 * MiB] for i in range(0, len(data), 5 * MiB)]
        head = self.s3.head_object(Bucket="objects", Key="transfer/17mib.bin")
        self.assertEqual((head["ETag"], head["ContentLength"]), (multipart_etag(chunks), len(data)))
        self.s3.download_file("objects", "transfer/17mib.bin", dst, Config=config)
        with open(dst, "rb") as f:
            self.assertTrue(f.read() == data, "downloaded bytes differ")
        with open(self.object_path("objects", "transfer/17mib.bin"), "rb") as f:
            self.assertTrue(f.read() == data, "the file under <home>/s3 differs")

    # --- files and addressing ---------------------------------------------------
    def test_file_written_directly_is_an_object(self):
        self.s3.create_bucket(Bucket="direct")
        data = b"written through file://\n" * 10
        path = self.object_path("direct", "dir/x")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        listed = self.s3.list_objects_v2(Bucket="direct", Prefix="dir/").get("Contents", [])
        self.assertEqual([(c["Key"], c["Size"], c["ETag"]) for c in listed],
                         [("dir/x", len(data), quoted(md5_hex(data)))])
        got = self.s3.get_object(Bucket="direct", Key="dir/x")
        self.assertEqual((got["Body"].read(), got["ETag"]), (data, quoted(md5_hex(data))))
        self.assertEqual(self.s3.head_object(Bucket="direct", Key="dir/x")["ETag"],
                         quoted(md5_hex(data)))

    def test_file_replaced_on_disk_is_the_new_object(self):
        self.s3.put_object(Bucket="objects", Key="replaced/on-disk", Body=b"old bytes")
        new = b"new bytes, longer than the old ones"
        with open(self.object_path("objects", "replaced/on-disk") + ".new", "wb") as f:
            f.write(new)
        os.replace(self.object_path("objects", "replaced/on-disk") + ".new",
                   self.object_path("objects", "replaced/on-disk"))
        got = self.s3.get_object(Bucket="objects", Key="replaced/on-disk")
        self.assertEqual((got["Body"].read(), got["ETag"], got["ContentLength"]),
                         (new, quoted(md5_hex(new)), len(new)))

    def test_virtual_host_addressing(self):
        self.s3.create_bucket(Bucket="vhost")
        host = "http://vhost.s3.localhost:%d" % self.port()
        body = b"hello through a virtual host"
        status, headers, data = self.raw("PUT", host + "/greeting.txt", body=body,
                                         headers={"Content-Type": "text/plain"})
        self.assertEqual(status, 200, data)
        self.assertEqual(headers.get("etag"), quoted(md5_hex(body)))
        status, headers, data = self.raw("GET", host + "/greeting.txt")
        self.assertEqual((status, data), (200, body))
        self.assertEqual(headers.get("content-type"), "text/plain")
        self.assertEqual(self.s3.get_object(Bucket="vhost", Key="greeting.txt")["Body"].read(), body)
        status, _, data = self.raw("GET", host + "/?list-type=2")
        self.assertEqual(status, 200, data)
        root, fields = xml_fields(data)
        self.assertEqual((root, fields.get("Name")), ("ListBucketResult", "vhost"), data)
        self.assertEqual(xml_all(data, "Key"), ["greeting.txt"])
        status, headers, data = self.raw("GET", host + "/missing")
        self.assertXmlError(status, headers, data, "NoSuchKey", 404)
        status, headers, data = self.raw("GET", "http://novhost.s3.localhost:%d/k" % self.port())
        self.assertXmlError(status, headers, data, "NoSuchBucket", 404)

    def test_unimplemented_subresource_is_not_implemented(self):
        self.assertS3Error("NotImplemented", 501, self.s3.get_bucket_tagging, Bucket="objects")
        status, headers, data = self.raw("GET", "%s/objects?tagging" % self.server.endpoint)
        self.assertXmlError(status, headers, data, "NotImplemented", 501)
        self.assertIn("objects", [b["Name"] for b in self.s3.list_buckets()["Buckets"]])


# --- the aws CLI ------------------------------------------------------------------
class S3CliTest(S3Case):
    def aws(self, *args, **extra_env):
        """`aws ARGS` with `lote env`'s environment minus AWS_ENDPOINT_URL, so
        only AWS_ENDPOINT_URL_S3 can point the CLI at lote."""
        env = self.server.env()
        self.assertEqual(env.get("AWS_ENDPOINT_URL_S3"), self.server.endpoint,
                         "lote env exports AWS_ENDPOINT_URL_S3")
        env.pop("AWS_ENDPOINT_URL", None)
        env.update(extra_env)
        cmd = ["aws"] + list(args)
        p = subprocess.run(cmd, env=env, capture_output=True, timeout=240)
        self.exchanges.add("$ %s\nrc=%d\nstdout: %s\nstderr: %s" % (
            " ".join(cmd), p.returncode, p.stdout[-2000:], p.stderr[-3000:]))
        self.assertEqual(p.returncode, 0, "%s: %s" % (" ".join(cmd), p.stderr.decode()[-3000:]))
        return p.stdout

    def test_cli_round_trip(self):
        work = tempfile.mkdtemp(prefix="lote_s3_cli_")
        self.addCleanup(shutil.rmtree, work, True)
        src, back = os.path.join(work, "src"), os.path.join(work, "back")
        files = {"a.txt": b"hello from a\n", "sub/b.bin": os.urandom(1000),
                 "sub/deeper/c.txt": b"c" * 77, "big.bin": os.urandom(12 * MiB)}
        for rel, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            with open(os.path.join(src, rel), "wb") as f:
                f.write(data)

        self.assertIn(b"make_bucket: cli-bucket", self.aws("s3", "mb", "s3://cli-bucket"))
        self.assertEqual(self.status_of(self.s3.head_bucket(Bucket="cli-bucket")), 200)
        self.aws("s3", "cp", "--recursive", src, "s3://cli-bucket/data/")
        listed = {}
        for line in self.aws("s3", "ls", "s3://cli-bucket/data/", "--recursive").decode().splitlines():
            _, _, size, key = line.split(None, 3)
            listed[key] = int(size)
        self.assertEqual(listed, {"data/" + rel: len(d) for rel, d in files.items()})
        for rel, data in files.items():
            with open(self.object_path("cli-bucket", "data/" + rel), "rb") as f:
                self.assertTrue(f.read() == data, "file of data/%s differs" % rel)

        self.aws("s3", "sync", "s3://cli-bucket/data/", back)
        synced = {}
        for root, _, names in os.walk(back):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    synced[os.path.relpath(os.path.join(root, name), back)] = f.read()
        self.assertEqual(sorted(synced), sorted(files))
        for rel in files:
            self.assertTrue(synced[rel] == files[rel], "synced %s differs" % rel)

        self.assertEqual(self.aws("s3", "cp", "s3://cli-bucket/data/a.txt", "-"), files["a.txt"])
        # S3 to S3: the CLI copies big.bin (over its 8 MiB threshold) with UploadPartCopy.
        self.aws("s3", "cp", "s3://cli-bucket/data/big.bin", "s3://cli-bucket/copies/big.bin")
        with open(self.object_path("cli-bucket", "copies/big.bin"), "rb") as f:
            self.assertTrue(f.read() == files["big.bin"], "the S3-to-S3 copy differs")
        self.assertTrue(self.s3.head_object(Bucket="cli-bucket", Key="copies/big.bin")["ETag"]
                        .endswith('-2"'), "a multipart copy of 12 MiB in 8 MiB parts")
        self.aws("s3", "rm", "s3://cli-bucket/copies/big.bin")

        self.aws("s3", "rm", "--recursive", "s3://cli-bucket/data/")
        self.assertEqual(self.s3.list_objects_v2(Bucket="cli-bucket")["KeyCount"], 0)
        self.aws("s3", "rb", "s3://cli-bucket")
        self.assertS3Error("404", 404, self.s3.head_bucket, Bucket="cli-bucket")


    def assertPresignedUrlWorks(self, url, body, signature_param):
        """A GET of `url` answers `body`; with its signature changed, 403
        SignatureDoesNotMatch."""
        self.assertTrue(url.startswith(self.server.endpoint + "/presign-bucket/a.txt?"), url)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                got = r.read()
        except urllib.error.HTTPError as e:
            answer = e.read()
            self.exchanges.add("GET %s\n-> %d\nbody %r" % (url, e.code, answer[:500]))
            self.fail("GET of the presigned URL %s: %d %r" % (url, e.code, answer[:500]))
        self.assertEqual(got, body)
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        self.assertIn(signature_param, dict(query), url)
        # One character changed, still a hex (v4) or base64 (v2) digit.
        forge = lambda v: ("0" if v[0] != "0" else "1") + v[1:]  # noqa: E731
        query = [(k, forge(v) if k == signature_param else v) for k, v in query]
        tampered = urllib.parse.urlunsplit(parts._replace(
            query=urllib.parse.urlencode(query, quote_via=urllib.parse.quote)))
        with self.assertRaises(urllib.error.HTTPError, msg="tampered presigned URL") as ctx:
            urllib.request.urlopen(tampered, timeout=30)
        answer = ctx.exception.read()
        self.exchanges.add("GET %s\n-> %d\nbody %r" % (tampered, ctx.exception.code, answer[:500]))
        self.assertEqual(ctx.exception.code, 403, answer)
        self.assertEqual(xml_fields(answer)[1].get("Code"), "SignatureDoesNotMatch", answer)

    def test_cli_presign_default(self):
        # The aws CLI v1 (and boto3) presign S3 URLs in us-east-1 with
        # signature version 2 unless configured otherwise: AWSAccessKeyId,
        # Signature and Expires in the query.
        body = b"presigned bytes\n"
        self.s3.create_bucket(Bucket="presign-bucket")
        self.s3.put_object(Bucket="presign-bucket", Key="a.txt", Body=body)
        url = self.aws("s3", "presign", "s3://presign-bucket/a.txt", "--expires-in", "60")
        url = url.decode().strip()
        self.assertPresignedUrlWorks(url, body, "X-Amz-Signature" if "X-Amz-Signature=" in url
                                     else "Signature")

    def test_cli_presign_sigv4(self):
        body = b"presigned bytes, v4\n"
        self.s3.create_bucket(Bucket="presign-bucket")
        self.s3.put_object(Bucket="presign-bucket", Key="a.txt", Body=body)
        work = tempfile.mkdtemp(prefix="lote_s3_cli_config_")
        self.addCleanup(shutil.rmtree, work, True)
        config = os.path.join(work, "config")
        with open(config, "w") as f:
            for section in ("default", "profile lote"):  # lote env sets AWS_PROFILE=lote
                f.write("[%s]\ns3 =\n    signature_version = s3v4\n" % section)
        url = self.aws("s3", "presign", "s3://presign-bucket/a.txt", "--expires-in", "60",
                       AWS_CONFIG_FILE=config).decode().strip()
        self.assertIn("X-Amz-Credential=", url)
        self.assertPresignedUrlWorks(url, body, "X-Amz-Signature")


# --- IAM --------------------------------------------------------------------------
READER_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
     "Resource": ["arn:aws:s3:::readable", "arn:aws:s3:::readable/*"]}]}


class S3IamTest(S3Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for bucket in ("readable", "private"):
            cls.s3.create_bucket(Bucket=bucket)
            cls.s3.put_object(Bucket=bucket, Key="r/one.txt", Body=b"one in " + bucket.encode())
        cls.reader_key = cls.lote_user("reader", READER_POLICY)
        cls.reader = cls.client(*cls.reader_key)

    @classmethod
    def lote_user(cls, name, policy):
        """Creates `name` with `policy` and one access key with the `lote` CLI
        (as tests/iam/test_iam.py): (key id, secret)."""
        path = os.path.join(cls.server.home, "policy-%s.json" % name)
        with open(path, "w") as f:
            json.dump(policy, f)
        env = cls.server.env()

        def lote(*args):
            p = subprocess.run([LOTE] + list(args), env=env, capture_output=True, text=True,
                               timeout=60)
            if p.returncode != 0:
                raise AssertionError("lote %s exited %d: %s" % (" ".join(args), p.returncode,
                                                                p.stderr))
            return json.loads(p.stdout)
        lote("users", "create", name, "--policy-file", path)
        key = lote("keys", "create", name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def test_reader_gets_and_lists_its_bucket(self):
        got = self.reader.get_object(Bucket="readable", Key="r/one.txt")
        self.assertEqual(got["Body"].read(), b"one in readable")
        self.assertEqual(self.reader.head_object(Bucket="readable", Key="r/one.txt")["ContentLength"],
                         len(b"one in readable"))
        listed = self.reader.list_objects_v2(Bucket="readable")
        self.assertEqual([c["Key"] for c in listed.get("Contents", [])], ["r/one.txt"])

    def test_reader_cannot_put(self):
        r = self.assertS3Error("AccessDenied", 403, self.reader.put_object, Bucket="readable",
                               Key="r/new.txt", Body=b"nope")
        self.assertTrue(r["Error"].get("Message"), r)
        self.assertS3Error("404", 404, self.s3.head_object, Bucket="readable", Key="r/new.txt")
        self.assertFalse(os.path.exists(self.object_path("readable", "r/new.txt")))
        self.assertS3Error("AccessDenied", 403, self.reader.delete_object, Bucket="readable",
                           Key="r/one.txt")
        self.assertEqual(self.s3.get_object(Bucket="readable", Key="r/one.txt")["Body"].read(),
                         b"one in readable")

    def test_reader_cannot_reach_another_bucket(self):
        self.assertS3Error("AccessDenied", 403, self.reader.list_objects_v2, Bucket="private")
        self.assertS3Error("AccessDenied", 403, self.reader.get_object, Bucket="private",
                           Key="r/one.txt")
        status, headers, body = self.raw("GET", "%s/private?list-type=2" % self.server.endpoint,
                                         key=self.reader_key[0], secret=self.reader_key[1])
        self.assertXmlError(status, headers, body, "AccessDenied", 403)

    def test_wrong_secret_is_signature_does_not_match(self):
        wrong = self.client(self.reader_key[0], "not-the-secret-" + "x" * 25)
        self.assertS3Error("SignatureDoesNotMatch", 403, wrong.get_object, Bucket="readable",
                           Key="r/one.txt")
        admin_key = self.server.credentials()[0]
        wrong_admin = self.client(admin_key, "not-the-secret-" + "y" * 25)
        self.assertS3Error("SignatureDoesNotMatch", 403, wrong_admin.list_buckets)

    def test_unknown_access_key_is_invalid_access_key_id(self):
        unknown = self.client("AKIAUNKNOWNKEY000000", "s" * 40)
        self.assertS3Error("InvalidAccessKeyId", 403, unknown.get_object, Bucket="readable",
                           Key="r/one.txt")

    def test_unsigned_request_is_access_denied(self):
        port = self.port()
        for url in ("http://readable.s3.localhost:%d/r/one.txt" % port,
                    "http://s3.localhost:%d/readable/r/one.txt" % port):
            status, headers, body = self.raw("GET", url, sign=False)
            self.assertXmlError(status, headers, body, "AccessDenied", 403)
        status, headers, body = self.raw("PUT", "http://readable.s3.localhost:%d/r/anon" % port,
                                         body=b"anonymous", sign=False)
        self.assertXmlError(status, headers, body, "AccessDenied", 403)
        self.assertS3Error("404", 404, self.s3.head_object, Bucket="readable", Key="r/anon")


# --- durability -------------------------------------------------------------------
class S3DurabilityTest(S3Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.s3.create_bucket(Bucket="durable")

    def test_object_survives_sigkill(self):
        body = os.urandom(2 * MiB + 17)
        put = self.s3.put_object(Bucket="durable", Key="ckpt/step-1.bin", Body=body,
                                 Metadata={"step": "1"})
        self.server.kill()
        self.server.start()
        type(self).s3 = self.client()
        got = self.s3.get_object(Bucket="durable", Key="ckpt/step-1.bin")
        self.assertTrue(got["Body"].read() == body, "bytes differ after SIGKILL and restart")
        self.assertEqual((got["ETag"], got["Metadata"]), (put["ETag"], {"step": "1"}))

    def test_truncated_put_leaves_nothing(self):
        key = "partial/obj.bin"
        full = os.urandom(1000000)
        url = "http://127.0.0.1:%d/durable/%s" % (self.port(), key)
        headers = self.signed_headers("PUT", url, full, {"Host": "127.0.0.1:%d" % self.port()})
        headers["Content-Length"] = str(len(full))
        head = "PUT /durable/%s HTTP/1.1\r\n%s\r\n" % (
            key, "".join("%s: %s\r\n" % kv for kv in headers.items()))
        self.exchanges.add(head + "(then 1000 of the 1000000 body bytes, then close)")
        sock = socket.create_connection(("127.0.0.1", self.port()), timeout=10)
        sock.sendall(head.encode() + full[:1000])
        sock.close()
        time.sleep(0.5)
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket="durable", Key=key)
        listed = self.s3.list_objects_v2(Bucket="durable").get("Contents", [])
        self.assertNotIn(key, [c["Key"] for c in listed])
        self.assertEqual([c["Key"] for c in listed if not c["Key"].startswith("ckpt/")], [])

        def strays():
            found = []
            for root, dirs, names in os.walk(os.path.join(self.server.home, "s3", "durable")):
                dirs[:] = [d for d in dirs if d != ".lote-s3"]
                found += [os.path.join(root, n) for n in names
                          if not os.path.join(root, n).endswith("ckpt/step-1.bin")]
            return found
        deadline = time.time() + 10
        while strays() and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(strays(), [], "files left in the bucket's folder by the broken PUT")
        # The key is still writable afterwards.
        self.s3.put_object(Bucket="durable", Key=key, Body=full)
        self.assertTrue(self.s3.get_object(Bucket="durable", Key=key)["Body"].read() == full)


def main():
    global LOTE
    parser = argparse.ArgumentParser()
    parser.add_argument("--lote", required=True)
    args, rest = parser.parse_known_args()
    LOTE = os.path.abspath(args.lote)
    runner = unittest.TextTestRunner(resultclass=ExchangeResult, verbosity=2)
    unittest.main(argv=[sys.argv[0]] + rest, testRunner=runner)


if __name__ == "__main__":
    main()
