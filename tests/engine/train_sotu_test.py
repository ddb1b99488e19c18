"""End-to-end training test: `lote train` on State of the Union speeches tokenized
with the real Llama 2 tokenizer (spm_encode, BOS=1 per speech) must reach a validation
loss well below the unigram entropy of the data, write its outputs, and those weights
must score through `lote model score` and restart through `lote train --init-weights`.

usage: train_sotu_test.py LOTE_BINARY TEST_DATA_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402

LOTE = DATA = None
SPEECHES = 40
BLOCK = 65  # seq_len 64 + 1: one training sample per block


class TrainSotuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lote_sotu_")
        with open(os.path.join(DATA, "sotu.txt"), encoding="utf-8") as f:
            lines = [next(f) for _ in range(SPEECHES)]
        enc = subprocess.run(["spm_encode", "--model", os.path.join(DATA, "tokenizer.model"),
                              "--output_format=id"], input="".join(lines), text=True,
                             capture_output=True, check=True).stdout
        docs = [[int(t) for t in line.split()] for line in enc.splitlines()]
        cls.data_dir = os.path.join(cls.dir, "data")
        cls.blocks = ref.write_dataset(cls.data_dir, docs, BLOCK, 32000)
        counts = np.bincount(cls.blocks.reshape(-1), minlength=32000).astype(np.float64)
        p = counts[counts > 0] / counts.sum()
        cls.unigram_entropy = float(-(p * np.log(p)).sum())
        cls.config = os.path.join(cls.dir, "config.json")
        with open(cls.config, "w") as f:
            json.dump({"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32000,
                       "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
                       "tie_word_embeddings": False, "initializer_range": 0.02}, f)
        cls.out = os.path.join(cls.dir, "out")
        cls.proc = subprocess.run(
            [LOTE, "train", "--config", cls.config, "--data", cls.data_dir, "--batch-size", "16",
             "--seq-len", "64", "--max-steps", "300", "--warmup-steps", "20", "--lr", "3e-3",
             "--logging-interval", "50", "--eval-interval", "150", "--eval-batches", "8",
             "--seed", "3", "--output", cls.out], capture_output=True, text=True)
        print(cls.proc.stdout)
        print(cls.proc.stderr, file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_validation_loss_well_below_unigram_entropy(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        with open(os.path.join(self.out, "metrics.json")) as f:
            metrics = json.load(f)
        val = metrics["final_val_loss"]
        print(f"unigram entropy {self.unigram_entropy:.3f} nats, validation loss {val:.3f}")
        self.assertLess(val, self.unigram_entropy - 0.5)
        self.assertEqual(len(metrics["losses"]), 300)
        self.assertEqual([v["step"] for v in metrics["val_losses"]], [150, 300])

    def test_progress_lines(self):
        progress = [json.loads(l[len("LOTE_PROGRESS "):]) for l in self.proc.stdout.splitlines()
                    if l.startswith("LOTE_PROGRESS ")]
        train = [p for p in progress if "loss" in p]
        self.assertEqual([p["step"] for p in train], [50, 100, 150, 200, 250, 300])
        for p in train:
            for key in ("step", "total_steps", "loss", "lr", "grad_norm", "tokens_per_s", "mfu"):
                self.assertIn(key, p)
            self.assertEqual(p["total_steps"], 300)
            self.assertGreater(p["tokens_per_s"], 0)
        self.assertAlmostEqual(train[-1]["lr"], 0.0)
        self.assertIn("memory plan", self.proc.stdout)
        self.assertRegex(self.proc.stdout, r"step +300/300 \| loss \d")

    def test_weights_score_and_restart(self):
        weights = os.path.join(self.out, "model.safetensors")
        tensors = ref.load_safetensors(weights)
        self.assertIn("model.layers.1.self_attn.k_proj.weight", tensors)
        self.assertEqual(tensors["model.layers.1.self_attn.k_proj.weight"].shape, (32, 64))
        self.assertIn("lm_head.weight", tensors)
        # Score a held-out block from outside: the mean loss must be the mean of the
        # printed log-probabilities, and near the validation loss.
        block = self.blocks[-1][:65]
        res = subprocess.run([LOTE, "model", "score", "--config", self.config, "--weights", weights,
                              "--tokens", " ".join(map(str, block)), "--json"],
                             capture_output=True, text=True, check=True)
        scored = json.loads(res.stdout)
        self.assertEqual(len(scored["logprobs"]), 64)
        self.assertAlmostEqual(scored["mean_loss"], -np.mean(scored["logprobs"]), places=4)
        with open(os.path.join(self.out, "metrics.json")) as f:
            val = json.load(f)["final_val_loss"]
        self.assertLess(abs(scored["mean_loss"] - val), 1.5)
        # Restart from the saved weights: the first loss is the trained level, not ln(32000).
        res = subprocess.run([LOTE, "train", "--config", self.config, "--data", self.data_dir,
                              "--batch-size", "8", "--seq-len", "64", "--max-steps", "2",
                              "--logging-interval", "1", "--init-weights", weights,
                              "--lr", "1e-4"], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        first = [json.loads(l[14:]) for l in res.stdout.splitlines() if l.startswith("LOTE_PROGRESS")][0]
        self.assertLess(first["loss"], 8.0)


if __name__ == "__main__":
    LOTE = sys.argv.pop(1)
    DATA = sys.argv.pop(1)
    unittest.main(verbosity=2)
