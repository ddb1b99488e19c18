"""bench/s3: PutObject / GetObject against lote's S3 endpoint and moto_server's,
and dd / cat of the same bytes on the disk that holds lote's home, in the same
run (started by bench/s3/run.sh, which owns the servers and the temp folders).

Measures, per round (the targets interleaved: every measure runs on each
target in turn, the order rotated each round):
  4 KiB:   500 PutObject, then 500 GetObject, sequential on one connection (ops/s)
  4 KiB:   the same with THREADS threads sharing the client's connection pool
  1 MiB:   50 PutObject, then 50 GetObject (MB/s, 10^6 bytes a second)
  256 MiB: 3 PutObject, then 3 GetObject of one random body (MB/s)
Both servers get one boto3 client each, with the same config: path-style, no
retries, and botocore's defaults otherwise (over http that means the client
SHA-256s every body for the signature and sends an x-amz-checksum-crc32; GET
asks for the checksum and checks it). PutObject sends a bytes body; GetObject
reads the StreamingBody to its end. Every PUT's ETag is checked against the
body's MD5, every GET's length against the size.
The disk peer: `dd if=<the same bytes in a file> of=<folder beside the lote
home> bs=1M conv=fsync` per object (lote fsyncs each object), and `cat <file> >
/dev/null` per object. Before every GET phase of every target the page cache is
dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`) when this user may, so all
three read cold; otherwise all read warm and the table says so.
The table holds the median over rounds and the ratios lote/moto and lote/disk
(higher is better for lote in both).

When a lote call fails, its last requests and answers are printed before the
error, to report as a server bug.

usage: s3_bench.py --lote-endpoint URL --lote-home DIR --moto-endpoint URL
                   --work DIR [--rounds 3] [--threads 8]
"""
import argparse
import base64
import collections
import concurrent.futures
import configparser
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import zlib

import boto3
import botocore
import botocore.awsrequest
import botocore.config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from host import drop_caches  # noqa: E402

KiB = 1 << 10
MiB = 1 << 20
BUCKET = "bench"
SMALL_N = 500
MID_N = 50
BIG_N = 3
MOTO_BIG_PUT_LIMIT_S = 60.0  # past this, moto's 256 MiB rows run in round 1 only
SMALL_GOAL = 20.0  # lote/moto, 4 KiB
LARGE_GOAL = 0.8  # lote/disk, 1 MiB and 256 MiB


# --- what a failed lote call prints ---------------------------------------------------
class Exchanges:
    """The last requests a client sent and the answers it got. Recording keeps
    references only (cheap enough to stay on while timing); text is made on
    failure."""

    def __init__(self, keep=6):
        self.items = collections.deque(maxlen=keep)
        self._mine = threading.local()

    def attach(self, client):
        client.meta.events.register("before-send.s3", self._before_send)
        client.meta.events.register("after-call.s3", self._after_call)

    def _before_send(self, request, **kwargs):
        self._mine.entry = [request, None, None]  # a call sends and hears on one thread
        self.items.append(self._mine.entry)

    def _after_call(self, http_response, model, **kwargs):
        entry = getattr(self._mine, "entry", None)
        if entry is not None:
            entry[1], entry[2] = http_response, model
            self._mine.entry = None

    @staticmethod
    def _body(body, streamed):
        if streamed:
            return "(streamed to the caller)"
        if body is None:
            return ""
        if isinstance(body, (bytes, bytearray)):
            return "%d bytes: %r" % (len(body), bytes(body[:400]))
        if isinstance(body, str):
            return "%d chars: %r" % (len(body), body[:400])
        return "(a %s)" % type(body).__name__

    def dump(self):
        out = []
        for request, response, model in self.items:
            text = "%s %s\n%s\nbody %s" % (
                request.method, request.url,
                "\n".join("  %s: %s" % (k, v) for k, v in request.headers.items()),
                self._body(request.body, False))
            if response is None:
                text += "\n-> (no answer)"
            else:
                streamed = response.status_code < 300 and model.has_streaming_output
                text += "\n-> %d [%s]\n%s\nbody %s" % (
                    response.status_code, model.name,
                    "\n".join("  %s: %s" % (k, v) for k, v in response.headers.items()),
                    self._body(None if streamed else response.content, streamed))
            out.append(text)
        return "\n-----\n".join(out) or "(none)"


class TargetFailed(RuntimeError):
    """A call a server answered wrongly; the message holds the exchange."""


# --- the bytes ---------------------------------------------------------------------
class Bodies:
    """The bodies every target stores: 500 distinct 4 KiB, 50 distinct 1 MiB, one
    256 MiB; their MD5s; and the same bytes as files for dd (under work/src)."""

    def __init__(self, work):
        self.data = {
            "4k": [os.urandom(4 * KiB) for _ in range(SMALL_N)],
            "1m": [os.urandom(MiB) for _ in range(MID_N)],
            "256m": [os.urandom(256 * MiB)],
        }
        self.md5 = {kind: [hashlib.md5(b).hexdigest() for b in bodies]
                    for kind, bodies in self.data.items()}
        self.src = os.path.join(work, "src")
        for kind, bodies in self.data.items():
            os.makedirs(os.path.join(self.src, kind), exist_ok=True)
            for i, body in enumerate(bodies):
                with open(self.file(kind, i), "wb") as f:
                    f.write(body)

    def file(self, kind, index):
        return os.path.join(self.src, kind, str(index))

    def warm_files(self, kind):
        """Reads the dd sources back into the page cache (lote's client sends from memory)."""
        for i in range(len(self.data[kind])):
            with open(self.file(kind, i), "rb") as f:
                while f.read(8 * MiB):
                    pass


# --- the targets -------------------------------------------------------------------
class S3Target:
    """One S3 server through one boto3 client (the shared config)."""

    def __init__(self, name, endpoint, key, secret, bodies, threads):
        self.name = name
        self.bodies = bodies
        self.exchanges = Exchanges()
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
            region_name="us-east-1",
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1, "mode": "standard"},
                max_pool_connections=threads, connect_timeout=10, read_timeout=900))
        self.exchanges.attach(self.client)
        self.keys = []

    def _failed(self, what, error):
        raise TargetFailed("%s: %s failed: %s\nlast requests and answers:\n%s"
                           % (self.name, what, error, self.exchanges.dump())) from error

    def setup(self):
        try:
            self.client.create_bucket(Bucket=BUCKET)
        except Exception as e:  # noqa: BLE001 (printed with the exchange)
            self._failed("CreateBucket", e)

    def put(self, key, kind, index):
        try:
            etag = self.client.put_object(Bucket=BUCKET, Key=key,
                                          Body=self.bodies.data[kind][index])["ETag"]
        except Exception as e:  # noqa: BLE001
            self._failed("PutObject %s" % key, e)
        if etag.strip('"') != self.bodies.md5[kind][index]:
            self._failed("PutObject %s" % key, "ETag %s, the body's MD5 is %s"
                         % (etag, self.bodies.md5[kind][index]))
        self.keys.append(key)

    def get(self, key, kind, index):
        try:
            body = self.client.get_object(Bucket=BUCKET, Key=key)["Body"]
            n = 0
            for chunk in body.iter_chunks(MiB):
                n += len(chunk)
        except Exception as e:  # noqa: BLE001
            self._failed("GetObject %s" % key, e)
        want = len(self.bodies.data[kind][index])
        if n != want:
            self._failed("GetObject %s" % key, "read %d bytes of %d" % (n, want))

    def before_put(self, kind):
        pass

    def clear(self):
        """Deletes what this round stored (untimed)."""
        try:
            for i in range(0, len(self.keys), 1000):
                self.client.delete_objects(
                    Bucket=BUCKET,
                    Delete={"Objects": [{"Key": k} for k in self.keys[i:i + 1000]], "Quiet": True})
        except Exception as e:  # noqa: BLE001
            self._failed("DeleteObjects", e)
        self.keys = []


class DiskTarget:
    """dd (write, conv=fsync) and cat (read) of the same bytes, one process per object."""

    name = "disk"

    def __init__(self, folder, bodies):
        self.folder = folder
        self.bodies = bodies

    def setup(self):
        os.makedirs(self.folder, exist_ok=True)

    def _path(self, key):
        return os.path.join(self.folder, key.replace("/", "_"))

    def put(self, key, kind, index):
        subprocess.run(["dd", "if=" + self.bodies.file(kind, index), "of=" + self._path(key),
                        "bs=1M", "conv=fsync", "status=none"], check=True)

    def get(self, key, kind, index):
        with open(os.devnull, "wb") as null:
            subprocess.run(["cat", self._path(key)], stdout=null, check=True)

    def before_put(self, kind):
        self.bodies.warm_files(kind)

    def clear(self):
        shutil.rmtree(self.folder)
        os.makedirs(self.folder)


# --- timing --------------------------------------------------------------------------
def timed(ops, call, threads):
    """Seconds to run call(*op) for every op, in order on this thread or on `threads`."""
    if threads <= 1:
        t0 = time.perf_counter()
        for op in ops:
            call(*op)
        return time.perf_counter() - t0
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        for _ in pool.map(lambda op: call(*op), ops):
            pass
        return time.perf_counter() - t0


class Measure:
    """A PUT row and a GET row over `count` objects of one size."""

    def __init__(self, label, kind, size, count, distinct, threads=1, unit="MB/s"):
        self.label, self.kind, self.size, self.count = label, kind, size, count
        self.distinct, self.threads, self.unit = distinct, threads, unit

    def rate(self, seconds):
        if self.unit == "ops/s":
            return self.count / seconds
        return self.count * self.size / seconds / 1e6

    def ops(self, round_no):
        """(key, kind, body index) of each object; keys new each round."""
        return [("r%d/%s/%s/%04d" % (round_no, self.kind, self.threads, i), self.kind,
                 i % self.distinct) for i in range(self.count)]


def run_round(round_no, measures, targets, results, cold, skip, failures):
    """One round: each measure's PUT phase on every target, then its GET phase.
    A target that fails a phase is reported once, marked FAIL and left out of that
    measure from then on (the other measures and targets go on)."""
    order = targets[round_no % len(targets):] + targets[:round_no % len(targets)]
    for m in measures:
        ops = m.ops(round_no)
        for verb in ("PUT", "GET"):
            for t in order:
                if (t.name, m.label) in skip:
                    continue
                if verb == "PUT":
                    t.before_put(m.kind)
                elif cold:
                    drop_caches()
                try:
                    s = timed(ops, t.put if verb == "PUT" else t.get, m.threads)
                except TargetFailed as e:
                    failures[(m.label, verb, t.name)] = str(e)
                    skip.add((t.name, m.label))
                    print("FAILED in round %d, %s %s on %s:\n%s" % (round_no + 1, m.label, verb,
                                                                     t.name, e), flush=True)
                    continue
                results[(m.label, verb, t.name)].append((m.rate(s), s))
    for t in targets:
        t.clear()


def fmt(x):
    if x is None:
        return "-"
    return "%.0f" % x if x >= 100 else "%.1f" % x if x >= 10 else "%.2f" % x


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def median_rate(results, key):
    values = results.get(key)
    return statistics.median(v for v, _ in values) if values else None


def print_table(measures, results, rounds, failures):
    rows = []
    for m in measures:
        for verb in ("PUT", "GET"):
            vals = {t: median_rate(results, (m.label, verb, t)) for t in ("lote", "moto", "disk")}
            rows.append(("%s %s %s" % (m.label, verb, m.unit), vals, m, verb))

    def cell(m, verb, t, v):
        return "FAIL" if (m.label, verb, t) in failures else fmt(v)
    head = ("measure", "lote", "moto", "disk", "lote/moto", "lote/disk")
    table = [head] + [(name, cell(m, verb, "lote", v["lote"]), cell(m, verb, "moto", v["moto"]),
                       cell(m, verb, "disk", v["disk"]),
                       fmt(ratio(v["lote"], v["moto"])), fmt(ratio(v["lote"], v["disk"])))
                      for name, v, m, verb in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    print()
    print("medians over %d round(s):" % rounds)
    for r in table:
        print("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
                        for i, c in enumerate(r)))
    print()
    print("per round (%s; seconds per phase in brackets):" % "lote, moto, disk")
    for m in measures:
        for verb in ("PUT", "GET"):
            cells = []
            for t in ("lote", "moto", "disk"):
                vals = results.get((m.label, verb, t), [])
                cells.append("%s: %s" % (t, " ".join("%s [%.2fs]" % (fmt(v), s) for v, s in vals)))
            print("  %s %s: %s" % (m.label, verb, "; ".join(cells)))
    print()
    print("goals:")
    for name, v, m, verb in rows:
        if m.kind == "4k":
            r, goal, peer = ratio(v["lote"], v["moto"]), SMALL_GOAL, "moto"
        else:
            r, goal, peer = ratio(v["lote"], v["disk"]), LARGE_GOAL, "disk"
        verdict = "n/a" if r is None else ("met" if r >= goal else "NOT met")
        if (m.label, verb, "lote") in failures:
            verdict = "NOT met (lote failed)"
        elif v["lote"] is None:
            verdict = "NOT met (not measured: lote failed an earlier phase)"
        print("  %-34s lote/%s %s (goal >= %g): %s" % (name, peer, fmt(r), goal, verdict))


def lote_credentials(home):
    parser = configparser.ConfigParser()
    parser.read(os.path.join(home, "credentials"))
    section = parser["lote"] if parser.has_section("lote") else parser[parser.sections()[0]]
    return section["aws_access_key_id"], section["aws_secret_access_key"]


def client_costs(bodies):
    """What the client itself spends per body, in every PUT to both servers."""
    big = bodies.data["256m"][0]
    t0 = time.perf_counter()
    hashlib.sha256(big).hexdigest()
    t1 = time.perf_counter()
    zlib.crc32(big)
    t2 = time.perf_counter()
    for _ in range(50):
        subprocess.run(["true"], check=True)
    t3 = time.perf_counter()
    print("client side, per 256 MiB body: SHA-256 %.2f s, CRC32 %.2f s (part of every lote and "
          "moto PUT); one fork+exec of `true`: %.1f ms (part of every dd and cat)"
          % (t1 - t0, t2 - t1, (t3 - t2) / 50 * 1e3))


class _CannedBody:
    """The raw stream of a canned answer (what urllib3 would hand botocore)."""

    def __init__(self, data):
        self._data = memoryview(data)
        self._at = 0

    def read(self, amt=None, **kwargs):
        end = len(self._data) if amt is None else min(len(self._data), self._at + amt)
        chunk = bytes(self._data[self._at:end])
        self._at = end
        return chunk

    def stream(self, amt=65536, **kwargs):
        while True:
            chunk = self.read(amt)
            if not chunk:
                return
            yield chunk


def client_ceiling(bodies, measures):
    """The same boto3 calls (same config, bodies and checks) with the network and the
    server taken away: before-send answers at once with what a server would say
    (ETag, Content-Length, x-amz-checksum-crc32). The most ops/s or MB/s this
    client can show for any server, one connection."""
    target = S3Target("boto3 alone", "http://127.0.0.1:9", "k", "s", bodies, 1)
    answers = {}
    for kind, datas in bodies.data.items():
        for i, data in enumerate(datas):
            crc = base64.b64encode((zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "big")).decode()
            answers[(kind, i)] = (data, {"ETag": '"%s"' % bodies.md5[kind][i],
                                         "Content-Length": str(len(data)),
                                         "x-amz-checksum-crc32": crc})
    stored = {}

    def answer(request, **kwargs):
        key = request.url.split("/" + BUCKET + "/", 1)[1]
        data, headers = answers[stored[key]]
        if request.method == "PUT":
            return botocore.awsrequest.AWSResponse(request.url, 200, {"ETag": headers["ETag"]},
                                                   _CannedBody(b""))
        return botocore.awsrequest.AWSResponse(request.url, 200, headers, _CannedBody(data))

    target.client.meta.events.register_first("before-send.s3", answer)
    cells = []
    for m in measures:
        if m.threads != 1:
            continue
        ops = m.ops(0)
        for key, kind, i in ops:
            stored[key] = (kind, i)
        put = timed(ops, target.put, 1)
        get = timed(ops, target.get, 1)
        cells.append("%s PUT %s, GET %s %s" % (m.label, fmt(m.rate(put)), fmt(m.rate(get)), m.unit))
    print("boto3 alone (send stubbed out, same config and checks, 1 thread): " + "; ".join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--lote-endpoint", required=True)
    ap.add_argument("--lote-home", required=True)
    ap.add_argument("--moto-endpoint", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    started = time.time()

    print("boto3 %s, botocore %s; %d round(s)" % (boto3.__version__, botocore.__version__,
                                                 args.rounds))
    bodies = Bodies(args.work)
    key, secret = lote_credentials(args.lote_home)
    lote = S3Target("lote", args.lote_endpoint, key, secret, bodies, args.threads)
    moto = S3Target("moto", args.moto_endpoint, "testing", "testing", bodies, args.threads)
    disk = DiskTarget(os.path.join(args.work, "disk"), bodies)
    targets = [lote, moto, disk]
    for t in targets:
        t.setup()
    for t in (lote, moto):  # connections up, code paths warm (untimed)
        for i in range(20):
            t.put("warmup/%d" % i, "4k", i)
            t.get("warmup/%d" % i, "4k", i)
        t.clear()

    cold = drop_caches()
    print("GETs read %s" % ("cold: the page cache is dropped before every GET phase of every "
                            "target" if cold else
                            "WARM: this user may not drop the page cache, so cat is page-cache "
                            "read speed (and so is lote)"))
    client_costs(bodies)

    measures = [
        Measure("4 KiB x%d 1 conn" % SMALL_N, "4k", 4 * KiB, SMALL_N, SMALL_N, 1, "ops/s"),
        Measure("4 KiB x%d %d threads" % (SMALL_N, args.threads), "4k", 4 * KiB, SMALL_N,
                SMALL_N, args.threads, "ops/s"),
        Measure("1 MiB x%d" % MID_N, "1m", MiB, MID_N, MID_N),
        Measure("256 MiB x%d" % BIG_N, "256m", 256 * MiB, BIG_N, 1),
    ]
    client_ceiling(bodies, measures)
    results = collections.defaultdict(list)
    skip = set()
    failures = {}
    notes = []
    for r in range(args.rounds):
        t0 = time.time()
        run_round(r, measures, targets, results, cold, skip, failures)
        print("round %d/%d: %.0f s" % (r + 1, args.rounds, time.time() - t0), flush=True)
        if r == 0 and args.rounds > 1:
            big = measures[-1].label
            moto_puts = results.get((big, "PUT", "moto"))
            per_put = moto_puts[0][1] / BIG_N if moto_puts else 0
            if per_put > MOTO_BIG_PUT_LIMIT_S:
                skip.add(("moto", big))
                notes.append("moto's 256 MiB PUT took %.0f s each (> %.0f s): its 256 MiB rows "
                             "ran in round 1 only" % (per_put, MOTO_BIG_PUT_LIMIT_S))

    print_table(measures, results, args.rounds, failures)
    notes.append("disk 4 KiB rows include one fork+exec of dd or cat per object (see the "
                 "client-side line above); dd conv=fsync fsyncs the file, not its folder")
    print()
    for n in notes:
        print("note: " + n)
    for label, verb, target in failures:
        print("note: %s %s FAILED on %s (its exchange is printed above); that target's rows "
              "of this measure are left out" % (label, verb, target))
    print("total %.0f s" % (time.time() - started))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
