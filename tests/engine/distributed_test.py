"""Distributed `lote train`: one model trained together by several rank processes.

- Equivalence: the same seed, data and global batch trained 20 steps by one process
  and by TP=2, DP=2 (ZeRO-1), TP=2 x DP=2 and DP=4 give the same loss at every step
  (relative difference <= 1e-5) and the same final weights (max |difference| <= 1e-4
  x the tensor's largest |value|: AdamW's normalised update turns summation-order
  differences of tiny gradients into weight differences of ~1e-5 of the scale). The config has an odd MLP width and vocabulary, so
  tensor-parallel shards are uneven.
- Sequence parallelism at TP=2 and TP=2 x DP=2 (also with full and selective
  recomputation) reproduces one process within the same tolerances; selective and full
  recomputation give the same losses and byte-identical weights as none (one process
  and TP=2 x DP=2).
- Transports: shared memory (`--comm shm`, the default on one host) and Gloo
  (`--comm gloo`) give the same losses and byte-identical weights at DP=4 and
  TP=2 x DP=2.
- Faults: a rank killed mid-step stops every rank and the launcher exits non-zero
  within 10 s naming the dead rank; two nodes started in reverse order 3 s apart
  still meet; a child node whose main node never starts times out with a message
  naming the address; invalid layouts are refused before any rank starts.

usage: distributed_test.py LOTE_BINARY
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

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402

LOTE = None
# Heads 4 / kv 2 split over TP 2; MLP 69 and vocab 1001 split unevenly.
CONFIG = {"hidden_size": 32, "intermediate_size": 69, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1001,
          "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
STEPS = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DistributedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lote_dist_")
        cls.config = os.path.join(cls.dir, "config.json")
        with open(cls.config, "w") as f:
            json.dump(CONFIG, f)
        rng = np.random.default_rng(3)
        docs = [list(rng.integers(2, 1000, 120)) for _ in range(40)]
        cls.data = os.path.join(cls.dir, "data")
        ref.write_dataset(cls.data, docs, 33, 1000)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def train_args(self, out, *extra, steps=STEPS, global_batch=8, logging=5):
        return [LOTE, "train", "--config", self.config, "--data", self.data, "--seq-len", "32",
                "--batch-size", "2", "--global-batch-size", str(global_batch),
                "--max-steps", str(steps),
                "--warmup-steps", "2", "--lr", "3e-3", "--logging-interval", str(logging),
                "--threads", "1", "--peak-gflops", "10", "--master-port", str(free_port()),
                "--output", out, *extra]

    def run_layout(self, name, nproc, tp, *extra):
        out = os.path.join(self.dir, name)
        res = subprocess.run(self.train_args(out, "--nproc-per-node", str(nproc),
                                             "--tensor-parallel-size", str(tp), *extra),
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-3000:])
        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
        return res, metrics, ref.load_safetensors(os.path.join(out, "model.safetensors"))

    def test_layouts_reproduce_one_process(self):
        _, base, base_w = self.run_layout("single", 1, 1)
        self.assertEqual(len(base["losses"]), STEPS)
        self.assertLess(base["losses"][-1], base["losses"][0] - 0.1)  # it learns
        for name, nproc, tp in (("tp2", 2, 2), ("dp2", 2, 1), ("tp2dp2", 4, 2), ("dp4", 4, 1)):
            with self.subTest(layout=name):
                self.assertReproduces(base, base_w, name, nproc, tp)

    def test_sequence_parallel_reproduces_one_process(self):
        # Megatron's sequence parallelism (reduce-scatter / all-gather in place of the
        # all-reduces, norms and residuals on a part of the rows), alone and with each
        # recomputation: every step's loss as one process's within 1e-5.
        _, base, base_w = self.run_layout("single_sp_base", 1, 1)
        for name, nproc, tp, extra in (
                ("tp2_sp", 2, 2, ()), ("tp2dp2_sp", 4, 2, ()),
                ("tp2dp2_sp_full", 4, 2, ("--activation-recompute", "full")),
                ("tp2_sp_selective", 2, 2, ("--selective_checkpoint_enabled",))):
            with self.subTest(layout=name):
                _, m = self.assertReproduces(base, base_w, name, nproc, tp,
                                             "--sequence-parallel", *extra)
                self.assertTrue(m["sequence_parallel"])

    def test_recomputation_gives_the_same_bits(self):
        # Selective (the attention core) and full (the whole layer) recomputation run the
        # same kernels on the same inputs again: the same losses and the same bytes of
        # weights as keeping everything, in one process and at TP=2 x DP=2.
        for name, nproc, tp in (("single", 1, 1), ("tp2dp2", 4, 2)):
            runs = {}
            for mode in ("none", "selective", "full"):
                out = "%s_recompute_%s" % (name, mode)
                _, m, _ = self.run_layout(out, nproc, tp, "--activation-recompute", mode)
                self.assertEqual(m["activation_recompute"], mode)
                with open(os.path.join(self.dir, out, "model.safetensors"), "rb") as f:
                    runs[mode] = (m["losses"], f.read())
            for mode in ("selective", "full"):
                with self.subTest(layout=name, recompute=mode):
                    self.assertEqual(runs[mode][0], runs["none"][0])
                    self.assertTrue(runs[mode][1] == runs["none"][1], "weights differ")

    def assertReproduces(self, base, base_w, name, nproc, tp, *extra):
        res, m, w = self.run_layout(name, nproc, tp, *extra)
        self.assertEqual(m["world_size"], nproc)
        self.assertEqual(m["tensor_parallel"], tp)
        self.assertEqual(m["data_parallel"], nproc // tp)
        worst = max(abs(a - b) / abs(b) for a, b in zip(m["losses"], base["losses"]))
        print("%-16s worst relative loss difference over %d steps: %.2e" % (
            name, STEPS, worst))
        self.assertLessEqual(worst, 1e-5, (m["losses"], base["losses"]))
        self.assertEqual(sorted(w), sorted(base_w))
        worst_w = 0.0
        for k, ref_t in base_w.items():
            self.assertEqual(w[k].shape, ref_t.shape, k)
            scale = float(np.abs(ref_t).max())
            diff = float(np.abs(w[k] - ref_t).max())
            worst_w = max(worst_w, diff / scale)
            self.assertLessEqual(diff, 1e-4 * scale, (name, k, diff, scale))
        print("%-16s worst weight difference / tensor max: %.2e" % (name, worst_w))
        # One process speaks for the job: one progress series.
        progress = [l for l in res.stdout.splitlines() if l.startswith("LOTE_PROGRESS")]
        steps = [json.loads(l.split(" ", 1)[1])["step"] for l in progress
                 if "loss" in json.loads(l.split(" ", 1)[1])]
        self.assertEqual(steps, [5, 10, 15, 20])
        return res, m

    def test_transports_give_the_same_bits(self):
        # Shared memory sums every element in Gloo's order: the same losses and the same
        # bytes of weights, with 4 ranks (where the order of a sum changes its bits).
        for name, nproc, tp in (("dp4", 4, 1), ("tp2dp2", 4, 2)):
            with self.subTest(layout=name):
                runs = {}
                for comm, says in (("shm", "world shared memory"), ("gloo", "world Gloo")):
                    res, m, _ = self.run_layout("%s_%s" % (name, comm), nproc, tp, "--comm", comm)
                    self.assertIn("rank 0's groups: " + says, res.stderr)
                    with open(os.path.join(self.dir, "%s_%s" % (name, comm),
                                           "model.safetensors"), "rb") as f:
                        runs[comm] = (m["losses"], f.read())
                self.assertEqual(runs["shm"][0], runs["gloo"][0])
                self.assertTrue(runs["shm"][1] == runs["gloo"][1], "weights differ")

    def test_killed_rank_stops_every_rank(self):
        out = os.path.join(self.dir, "killed")
        proc = subprocess.Popen(
            self.train_args(out, "--nproc-per-node", "4", "--tensor-parallel-size", "2",
                            steps=100000, logging=1),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            victim = None
            deadline = time.time() + 120
            while victim is None and time.time() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                if line.startswith("LOTE_PROGRESS") and '"step":3,' in line:
                    victim = self.rank_pid(proc.pid, 2)
            self.assertIsNotNone(victim, "training never reached step 3")
            os.kill(victim, signal.SIGKILL)
            killed_at = time.time()
            _, err = proc.communicate(timeout=30)
            elapsed = time.time() - killed_at
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(elapsed, 10.0, err)
        self.assertIn("rank 2 (node 0, local rank 2, pid %d) was killed by signal 9" % victim, err)
        self.assertEqual(self.children(proc.pid), [], "ranks outlived their launcher")

    def rank_pid(self, launcher, rank):
        for pid in self.children(launcher):
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if ("LOTE_TRAIN_RANK=%d" % rank).encode() in env:
                return pid
        return None

    @staticmethod
    def children(pid):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def test_nodes_started_in_reverse_order_meet(self):
        port = str(free_port())
        outs, procs = [], []
        for node in (1, 0):  # the child node first, the main node 3 s later
            out = os.path.join(self.dir, "nodes%d" % node)
            args = self.train_args(out, "--nnodes", "2", "--node-rank", str(node),
                                   "--master-addr", "127.0.0.1", "--tensor-parallel-size", "2",
                                   steps=4)
            args[args.index("--master-port") + 1] = port
            procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
            outs.append(out)
            if node == 1:
                time.sleep(3)
        results = [p.communicate(timeout=120) for p in procs]
        for p, (o, e) in zip(procs, results):
            self.assertEqual(p.returncode, 0, o[-2000:] + e[-2000:])
        self.assertIn("waiting for the rendezvous store at 127.0.0.1:%s" % port, results[0][1])
        self.assertTrue(os.path.exists(os.path.join(outs[1], "metrics.json")))
        with open(os.path.join(outs[1], "metrics.json")) as f:
            self.assertEqual(json.load(f)["world_size"], 2)

    def test_missing_main_node_times_out_clearly(self):
        port = free_port()
        args = self.train_args(os.path.join(self.dir, "orphan"), "--nnodes", "2",
                               "--node-rank", "1", "--master-addr", "127.0.0.1",
                               "--rdzv-timeout", "3")
        args[args.index("--master-port") + 1] = str(port)
        start = time.time()
        res = subprocess.run(args, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(res.returncode, 0)
        self.assertLess(time.time() - start, 30)
        self.assertIn("timed out after 3 s waiting for the rendezvous store of the main node "
                      "at 127.0.0.1:%d" % port, res.stderr)

    def test_invalid_layouts_are_refused_before_ranks_start(self):
        cases = [
            (["--nproc-per-node", "4", "--tensor-parallel-size", "3"], 8,
             "--tensor-parallel-size 3 does not divide the 4 ranks"),
            (["--nproc-per-node", "4", "--tensor-parallel-size", "4"], 8,
             "does not divide the model's attention heads (4 heads, 2 key/value heads)"),
            (["--nproc-per-node", "2"], 6,
             "--global-batch-size 6 is not a multiple of micro batch 2 x data parallel 2"),
        ]
        for extra, global_batch, message in cases:
            with self.subTest(extra=extra):
                args = self.train_args(os.path.join(self.dir, "bad"), *extra,
                                       global_batch=global_batch)
                res = subprocess.run(args, capture_output=True, text=True, timeout=60)
                self.assertNotEqual(res.returncode, 0)
                self.assertIn(message, res.stderr)
                self.assertNotIn("started ranks", res.stderr)


if __name__ == "__main__":
    LOTE = sys.argv.pop(1)
    unittest.main(verbosity=2)
