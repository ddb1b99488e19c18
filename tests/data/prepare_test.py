"""Integration tests of `lote data prepare` / `lote data inspect`: the dataset as
an independent numpy reader sees it, against `spm_encode`; s3:// output and input
through moto_server, read back with the stock aws CLI; CLI errors.

usage: prepare_test.py LOTE_BIN TEST_DATA NUMPY_PYTHON
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

LOTE = TEST_DATA = NUMPY_PY = None
HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST_KEYS = ["format", "version", "prefix", "dtype", "tokenizer_sha256", "vocab_size", "bos_id", "eos_id",
                 "block_size", "num_sequences", "num_tokens", "num_documents", "num_source_tokens", "sources",
                 "files"]


def run(args, env=None, check=True):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (args, p.returncode, p.stdout, p.stderr))
    return p


def numpy_read(path, n=64):
    return json.loads(run([NUMPY_PY, os.path.join(HERE, "megatron_reader.py"), path, str(n)]).stdout)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class PrepareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lote-prepare-it-")
        # A small corpus: the first 400 lines of Moby-Dick.
        with open(os.path.join(TEST_DATA, "moby-dick.txt"), encoding="utf-8") as f:
            cls.lines = [next(f) for _ in range(400)]
        cls.corpus = os.path.join(cls.tmp, "moby400.txt")
        with open(cls.corpus, "w", encoding="utf-8") as f:
            f.writelines(cls.lines)
        cls.model = os.path.join(TEST_DATA, "tokenizer.model")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def prepare(self, out, *extra, inputs=None, env=None, check=True):
        return run([LOTE, "data", "prepare", "--input", *(inputs or [self.corpus]), "--tokenizer", self.model,
                    "--block-size", "256", "--output", out, *extra], env=env, check=check)

    def expected_stream(self):
        docs = [l.rstrip("\n") for l in self.lines if l.strip("\n")]
        p = subprocess.run(["spm_encode", "--model", self.model, "--output_format=id"], input="\n".join(docs) + "\n",
                           capture_output=True, text=True, check=True)
        stream = []
        for ids in p.stdout.splitlines():
            stream.append(1)
            stream.extend(int(t) for t in ids.split())
        return docs, stream

    def test_local_dataset_as_megatron_reads_it(self):
        out = os.path.join(self.tmp, "local")
        self.prepare(out, "--threads", "2")
        docs, stream = self.expected_stream()
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(list(manifest.keys()), MANIFEST_KEYS)
        self.assertEqual(manifest["num_documents"], len(docs))
        self.assertEqual(manifest["num_source_tokens"], len(stream))
        self.assertEqual(manifest["num_sequences"], len(stream) // 256)
        self.assertIsNone(manifest["eos_id"])
        # Size and sha256 of both data files, checked with Python's own hashlib.
        self.assertEqual(sorted(manifest["files"]), ["data.bin", "data.idx"])
        for name, want in manifest["files"].items():
            with open(os.path.join(out, name), "rb") as f:
                body = f.read()
            self.assertEqual(want, {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}, name)
        r = numpy_read(out, 600)
        self.assertEqual(r["dtype"], "uint16")
        self.assertEqual(r["sequence_count"], len(stream) // 256)
        self.assertEqual(r["document_count"], r["sequence_count"] + 1)
        self.assertEqual(r["sizes"], [256])
        self.assertTrue(r["pointers_contiguous"])
        self.assertTrue(r["doc_idx_is_range"])
        self.assertTrue(r["bin_bytes_match"])
        self.assertLess(r["max_token"], 32000)
        self.assertEqual(r["first_tokens"], stream[:600])
        inspect = run([LOTE, "data", "inspect", out]).stdout
        self.assertIn('"block_size": 256', inspect)
        self.assertIn("first tokens of sequence 0: 1 ", inspect)

    def test_s3_output_and_input_with_aws_cli(self):
        port = free_port()
        moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            endpoint = "http://127.0.0.1:%d" % port
            for _ in range(300):
                try:
                    urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
                    break
                except Exception:
                    time.sleep(0.1)
            env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                       AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL_S3=endpoint)
            env.pop("AWS_PROFILE", None)
            aws = ["aws", "--endpoint-url", endpoint]
            run(aws + ["s3", "mb", "s3://lote-data"], env=env)
            # Input from S3 too (uploaded with the CLI).
            run(aws + ["s3", "cp", self.corpus, "s3://lote-data/raw/moby400.txt"], env=env)
            p = self.prepare("s3://lote-data/datasets/moby", "--threads", "2", inputs=["s3://lote-data/raw/"], env=env)
            self.assertIn("upload", p.stderr)  # progress of the upload
            ls = run(aws + ["s3", "ls", "s3://lote-data/datasets/moby/"], env=env).stdout
            for name in ("data.bin", "data.idx", "manifest.json"):
                self.assertIn(name, ls)
            down = os.path.join(self.tmp, "from-s3")
            run(aws + ["s3", "cp", "--recursive", "s3://lote-data/datasets/moby/", down], env=env)
            local = os.path.join(self.tmp, "local-for-s3")
            self.prepare(local, "--threads", "1")
            for name in ("data.bin", "data.idx"):
                with open(os.path.join(down, name), "rb") as a, open(os.path.join(local, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)
            with open(os.path.join(down, "manifest.json")) as f:
                manifest = json.load(f)
            self.assertEqual(manifest["sources"][0]["path"], "s3://lote-data/raw/moby400.txt")
            self.assertEqual(numpy_read(down)["sizes"], [256])
            inspect = run([LOTE, "data", "inspect", "s3://lote-data/datasets/moby"], env=env).stdout
            self.assertIn('"format": "megatron-mmidx"', inspect)
            # Read with ranged GETs, it shows what the local copy shows.
            local_inspect = run([LOTE, "data", "inspect", local]).stdout
            first = [l for l in inspect.splitlines() if l.startswith(("first tokens", "sequences:"))]
            self.assertEqual(len(first), 2, inspect)
            self.assertEqual(first, [l for l in local_inspect.splitlines()
                                     if l.startswith(("first tokens", "sequences:"))])
            # A second run does not overwrite an existing dataset.
            again = self.prepare("s3://lote-data/datasets/moby", env=env, check=False)
            self.assertEqual(again.returncode, 1)
            self.assertIn("already holds a dataset", again.stderr)
        finally:
            os.killpg(moto.pid, signal.SIGTERM)
            moto.wait()

    def test_cli_errors_name_the_problem(self):
        out = os.path.join(self.tmp, "never")
        p = self.prepare(out, inputs=[os.path.join(self.tmp, "nope.txt")], check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("nope.txt does not exist", p.stderr)
        bad = os.path.join(self.tmp, "bad.txt")
        with open(bad, "wb") as f:
            f.write(b"good line\nbad \xff line\n")
        p = self.prepare(out, inputs=[bad], check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("bad.txt:2: not valid UTF-8", p.stderr)
        p = run([LOTE, "data", "prepare", "--input", self.corpus, "--tokenizer", self.corpus, "--output", out],
                check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a SentencePiece model", p.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    LOTE, TEST_DATA, NUMPY_PY = sys.argv[1:4]
    unittest.main(argv=[sys.argv[0]], verbosity=2)
