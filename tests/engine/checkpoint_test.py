"""Checkpoints of `lote train` (docs/checkpoints.md): written while training runs,
complete only with their manifest, resumed bit-exactly, re-sharded across layouts,
pruned to --keep-checkpoints, and written on SIGTERM (cooperative preemption) before
the run exits with code 75.

- resume: 12 steps with a checkpoint every 4; resuming from step_8 gives exactly the
  losses of steps 9-12 of the uninterrupted run (==, not a tolerance), for one
  process and for TP=2 x DP=2;
- re-shard: the TP=2 x DP=2 checkpoint resumed by TP=1 x DP=4 and by one process:
  the same losses within 1e-5 relative;
- a checkpoint whose manifest never got written (a writer killed mid-upload) is
  ignored by --resume latest and removed once a newer one completes;
- keep-K: only the newest K complete checkpoints remain;
- SIGTERM mid-run: exit 75, the checkpoint of the agreed step is complete, and a retry
  (AWS_BATCH_JOB_ATTEMPT=2, no --resume flag) continues to the same final loss;
- s3:// against moto_server and against lote's own S3 endpoint (`lote env`'s
  environment): the same resume, bit-exact; the checkpoint's objects are plain files
  under the server's home.

usage: checkpoint_test.py LOTE_BINARY TEST_DATA_DIR
"""
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

LOTE = None
DATA = None
CONFIG = {"hidden_size": 32, "intermediate_size": 69, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
          "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CheckpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lote_ckpt_")
        cls.config = os.path.join(cls.dir, "config.json")
        with open(cls.config, "w") as f:
            json.dump(CONFIG, f)
        cls.data = os.path.join(cls.dir, "data")
        subprocess.run([LOTE, "data", "prepare", "--input", os.path.join(DATA, "moby-dick.txt"),
                        "--tokenizer", os.path.join(DATA, "tokenizer.model"),
                        "--block-size", "65", "--output", "file://" + cls.data],
                       check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def train(self, name, *extra, steps=12, nproc=1, tp=1, env=None, check=True):
        out = self.path(name)
        data = self.data
        if "--data" in extra:
            i = extra.index("--data")
            data, extra = extra[i + 1], extra[:i] + extra[i + 2:]
        args = [LOTE, "train", "--config", self.config, "--data", data, "--seq-len", "32",
                "--batch-size", "2", "--global-batch-size", "8", "--max-steps", str(steps),
                "--warmup-steps", "2", "--lr", "3e-3", "--logging-interval", "1",
                "--threads", "1", "--peak-gflops", "10", "--master-port", str(free_port()),
                "--nproc-per-node", str(nproc), "--tensor-parallel-size", str(tp),
                "--job-id", "job", "--output", out, *extra]
        res = subprocess.run(args, capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, **(env or {})))
        if check:
            self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-3000:])
        return res, out

    def losses(self, out):
        with open(os.path.join(out, "metrics.json")) as f:
            return json.load(f)["losses"]

    def steps(self, root):
        """Steps with objects (file:// keeps the emptied folders of deleted ones)."""
        job = os.path.join(root, "job")
        return sorted(int(d[5:]) for d in os.listdir(job)
                      if d.startswith("step_") and os.listdir(os.path.join(job, d)))

    def test_resume_is_bit_exact_and_reshards(self):
        base_ck = "file://" + self.path("ck_single")
        _, full = self.train("single", "--checkpoint-uri", base_ck, "--checkpoint-freq", "4")
        want = self.losses(full)
        self.assertEqual(len(want), 12)
        self.assertEqual(self.steps(self.path("ck_single")), [4, 8, 12])
        manifest = json.load(open(self.path("ck_single", "job", "step_8", "manifest.json")))
        self.assertEqual(manifest["step"], 8)
        self.assertEqual(manifest["layout"], {"world": 1, "tensor_parallel": 1, "data_parallel": 1})
        self.assertEqual(sorted(manifest["files"]),
                         ["model-tp0.safetensors", "optim-tp0-dp0.safetensors"])

        res, out = self.train("single_resumed", "--resume", base_ck + "/job/step_8",
                              "--checkpoint-uri", "file://" + self.path("ck_unused"))
        self.assertIn("resumed from", res.stdout)
        self.assertEqual(self.losses(out), want[8:])  # bit-exact

        dist_ck = "file://" + self.path("ck_tp2dp2")
        _, d_full = self.train("tp2dp2", "--checkpoint-uri", dist_ck, "--checkpoint-freq", "4",
                               nproc=4, tp=2)
        d_want = self.losses(d_full)
        files = sorted(json.load(open(self.path("ck_tp2dp2", "job", "step_8", "manifest.json")))["files"])
        self.assertEqual(files, ["model-tp0.safetensors", "model-tp1.safetensors",
                                 "optim-tp0-dp0.safetensors", "optim-tp0-dp1.safetensors",
                                 "optim-tp1-dp0.safetensors", "optim-tp1-dp1.safetensors"])
        _, d_out = self.train("tp2dp2_resumed", "--resume", dist_ck + "/job/step_8",
                              nproc=4, tp=2)
        self.assertEqual(self.losses(d_out), d_want[8:])  # bit-exact on its own layout

        for name, nproc, tp in (("dp4_from_tp2dp2", 4, 1), ("single_from_tp2dp2", 1, 1)):
            with self.subTest(layout=name):
                _, o = self.train(name, "--resume", dist_ck + "/job/step_8", nproc=nproc, tp=tp)
                got = self.losses(o)
                worst = max(abs(a - b) / abs(b) for a, b in zip(got, d_want[8:]))
                print("%s: worst relative loss difference %.2e" % (name, worst))
                self.assertLessEqual(worst, 1e-5, (got, d_want[8:]))

    def test_incomplete_checkpoint_is_ignored_and_keep_k(self):
        root = self.path("ck_keep")
        self.train("keep1", "--checkpoint-uri", "file://" + root, "--checkpoint-freq", "2",
                   "--keep-checkpoints", "2", steps=6)
        self.assertEqual(self.steps(root), [4, 6])
        # A writer killed mid-upload leaves shards without a manifest.
        partial = os.path.join(root, "job", "step_9")
        os.makedirs(partial)
        with open(os.path.join(partial, "model-tp0.safetensors"), "wb") as f:
            f.write(b"\0" * 100)
        res, out = self.train("keep2", "--checkpoint-uri", "file://" + root, "--resume", "latest",
                              "--checkpoint-freq", "2", "--keep-checkpoints", "2", steps=10)
        self.assertIn("resumed from file://%s/job/step_6" % root, res.stdout)
        self.assertEqual(len(self.losses(out)), 4)  # steps 7-10
        self.assertEqual(self.steps(root), [8, 10])  # step_9 (incomplete) and old ones pruned

    def test_sigterm_checkpoints_and_retry_resumes(self):
        root = self.path("ck_preempt")
        # 80 steps: far more than run before the signal lands, on any machine.
        _, ref = self.train("uninterrupted", steps=80)
        want = self.losses(ref)
        args = [LOTE, "train", "--config", self.config, "--data", self.data, "--seq-len", "32",
                "--batch-size", "2", "--global-batch-size", "8", "--max-steps", "80",
                "--warmup-steps", "2", "--lr", "3e-3", "--logging-interval", "1",
                "--threads", "1", "--peak-gflops", "10", "--master-port", str(free_port()),
                "--nproc-per-node", "4", "--tensor-parallel-size", "2", "--job-id", "job",
                "--checkpoint-uri", "file://" + root, "--checkpoint-freq", "100",
                "--output", self.path("preempted")]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            while True:
                line = proc.stdout.readline()
                self.assertTrue(line, "training ended before step 5")
                if line.startswith("LOTE_PROGRESS") and '"step":5,' in line:
                    break
            os.kill(proc.pid, signal.SIGTERM)  # the launcher, as a job's termination does
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(proc.returncode, 75, err[-3000:])
        stopped = self.steps(root)
        self.assertEqual(len(stopped), 1, stopped)
        self.assertTrue(os.path.exists(os.path.join(root, "job", "step_%d" % stopped[0],
                                                    "manifest.json")))
        self.assertIn("preempted: stopped after step %d" % stopped[0], out)
        self.assertLess(stopped[0], 80)
        # The retry: AWS Batch sets AWS_BATCH_JOB_ATTEMPT=2; no --resume flag needed.
        res, out_dir = self.train("retry", "--checkpoint-uri", "file://" + root, steps=80,
                                  nproc=4, tp=2, env={"AWS_BATCH_JOB_ATTEMPT": "2"})
        self.assertIn("resumed from", res.stdout)
        got = self.losses(out_dir)
        _, d_ref = self.train("uninterrupted_tp2dp2", steps=80, nproc=4, tp=2)
        self.assertEqual(got, self.losses(d_ref)[stopped[0]:])
        self.assertEqual(len(want), 80)

    def s3_resume(self, env, s3, tag):
        """Trains with the dataset and the checkpoints in s3://ckpt (an empty bucket
        `s3` reaches), resumes from step 3, and checks the losses are the same bits."""
        s3.create_bucket(Bucket="ckpt")
        # The dataset comes from s3:// too: each node downloads it once into its cache.
        for name in ("manifest.json", "data.idx", "data.bin"):
            s3.upload_file(os.path.join(self.data, name), "ckpt", "data/" + name)
        env = dict(env, LOTE_CACHE_DIR=self.path("dataset_cache_" + tag))
        _, full = self.train(tag + "_full", "--checkpoint-uri", "s3://ckpt/runs",
                             "--checkpoint-freq", "3", "--data", "s3://ckpt/data",
                             steps=6, nproc=2, tp=2, env=env)
        self.assertTrue(os.listdir(env["LOTE_CACHE_DIR"]))
        res, out = self.train(tag + "_resumed", "--checkpoint-uri", "s3://ckpt/runs",
                              "--resume", "s3://ckpt/runs/job/step_3", steps=6, nproc=2,
                              tp=2, env=env)
        self.assertIn("resumed from s3://ckpt/runs/job/step_3", res.stdout)
        self.assertEqual(self.losses(out), self.losses(full)[3:])
        keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket="ckpt", Prefix="runs/job/") for o in page.get("Contents", [])]
        self.assertIn("runs/job/step_3/manifest.json", keys)
        self.assertIn("runs/job/step_6/manifest.json", keys)
        return keys

    def test_s3_resume_against_moto(self):
        port = free_port()
        moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            env = {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:%d" % port,
                   "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                   "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
            deadline = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    self.assertLess(time.time(), deadline, "moto_server did not start")
                    time.sleep(0.1)
            import boto3
            s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"],
                              region_name="us-east-1", aws_access_key_id="test",
                              aws_secret_access_key="test")
            self.s3_resume(env, s3, "moto")
        finally:
            os.killpg(moto.pid, signal.SIGKILL)
            moto.wait()

    def test_s3_resume_against_lotes_own_s3(self):
        # lote's S3 endpoint (docs/api.md, "S3"): the environment is `lote env`'s,
        # exactly what a user has after eval "$(lote env)".
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "control"))
        from lote_server import LoteServer
        os.makedirs(self.path("lote_home"))
        server = LoteServer(LOTE, home=self.path("lote_home")).start()
        try:
            env = {k: v for k, v in server.env().items()
                   if k.startswith("AWS_") or k == "LOTE_ENDPOINT"}
            self.assertEqual(env["AWS_ENDPOINT_URL_S3"], server.endpoint)
            s3 = server.client("s3")
            keys = self.s3_resume(env, s3, "lote")
            # The same bytes are plain files under the server's home (file:// and s3://).
            manifest = os.path.join(server.home, "s3", "ckpt", "runs", "job", "step_3",
                                    "manifest.json")
            body = s3.get_object(Bucket="ckpt", Key="runs/job/step_3/manifest.json")["Body"].read()
            with open(manifest, "rb") as f:
                self.assertEqual(f.read(), body)
            self.assertGreater(len(keys), 4)
        finally:
            server.stop()


if __name__ == "__main__":
    LOTE = sys.argv.pop(1)
    DATA = sys.argv.pop(1)
    unittest.main(verbosity=2)
