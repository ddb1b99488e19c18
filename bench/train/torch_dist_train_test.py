"""torch_dist_train.py on 2 processes x 1 thread with the tiny config: it runs,
prints its JSON last, and DDP + ZeroRedundancyOptimizer train exactly as one
process would on both ranks' micro-batches together (same losses and weights).

usage: torch_dist_train_test.py   (with /usr/bin/python3, Debian's python3-torch)
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "engine"))
import llama_reference as ref  # noqa: E402

CONFIG = os.path.join(ROOT, "examples", "llama2", "model", "tiny.json")
NPROC, SEQ, MICRO, STEPS, SEED = 2, 32, 2, 3, 7


class TorchDistTrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dump = os.path.join(cls.tmp.name, "params.pt")
        p = subprocess.run([sys.executable, os.path.join(HERE, "torch_dist_train.py"), "--config", CONFIG,
                            "--nproc", str(NPROC), "--threads-per-proc", "1", "--seq-len", str(SEQ),
                            "--micro-batch", str(MICRO), "--steps", str(STEPS), "--seed", str(SEED),
                            "--dump-params", cls.dump],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise AssertionError(f"torch_dist_train.py failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        cls.result = json.loads(p.stdout.strip().splitlines()[-1])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_reports_job_throughput(self):
        r = self.result
        self.assertEqual(r["nproc"], NPROC)
        self.assertEqual(r["tokens_per_step"], NPROC * MICRO * SEQ)
        self.assertEqual(len(r["step_times_s"]), STEPS)
        self.assertTrue(math.isfinite(r["tokens_per_s"]) and r["tokens_per_s"] > 0)
        self.assertAlmostEqual(r["tokens_per_s"], r["tokens_per_step"] / r["step_s"], places=6)
        # Random tokens: the first loss is near ln(vocab).
        self.assertLess(abs(r["losses"][0] - math.log(32000)), 0.5)

    def test_matches_one_process_on_the_whole_batch(self):
        with open(CONFIG) as f:
            cfg = json.load(f)
        params = {k: v.requires_grad_(True) for k, v in ref.init_params(cfg, seed=1).items()}
        opt = ref.make_adamw(params, 3e-4, 0.01)
        gens = [torch.Generator().manual_seed(SEED * 1000003 + r) for r in range(NPROC)]
        losses = []
        for _ in range(STEPS):
            tokens = torch.cat([torch.randint(0, cfg["vocab_size"], (MICRO, SEQ + 1), generator=g) for g in gens])
            opt.zero_grad()
            loss = ref.loss_fn(ref.forward(cfg, params, tokens[:, :-1]), tokens[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
            opt.step()
            losses.append(loss.item())
        for got, want in zip(self.result["losses"], losses):
            self.assertAlmostEqual(got, want, places=4)
        trained = torch.load(self.dump)
        self.assertEqual(sorted(trained), sorted(params))
        for name, want in params.items():
            diff = (trained[name] - want.detach()).abs().max().item()
            self.assertLess(diff, 1e-5, name)
        # The weights did move (the comparison is not of two untouched inits).
        init = ref.init_params(cfg, seed=1)
        self.assertGreater((trained["lm_head.weight"] - init["lm_head.weight"]).abs().max().item(), 1e-5)


if __name__ == "__main__":
    unittest.main()
