"""`lote train`, `lote model plan` and `lote model score`: plan-only for Llama 2 7B,
Hugging Face weights in fp32/bf16/fp16, and a clear error (naming the problem and the
fix) for each kind of bad input.

usage: train_errors_test.py LOTE_BINARY
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

LOTE = None
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
LLAMA2_7B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
             "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
             "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "initializer_range": 0.02,
             "hidden_act": "silu", "model_type": "llama", "torch_dtype": "float16"}


class TrainErrorsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lote_train_err_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_config(self, cfg, name="config.json"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path

    def dataset(self, vocab=1000, block=33, n=12):
        rng = np.random.default_rng(0)
        docs = [list(rng.integers(2, min(vocab, 1000), 100)) for _ in range(n)]
        path = os.path.join(self.dir, f"data_{vocab}_{block}")
        ref.write_dataset(path, docs, block, vocab)
        return path

    def lote(self, *args):
        return subprocess.run([LOTE, *args], capture_output=True, text=True)

    def train(self, *extra, config=None, data=None):
        return self.lote("train", "--config", config or self.write_config(TINY),
                         "--data", data or self.dataset(), "--batch-size", "2", "--seq-len", "32",
                         "--max-steps", "2", "--logging-interval", "1", *extra)

    def assertFailsWith(self, res, *needles):
        self.assertNotEqual(res.returncode, 0, res.stdout)
        for n in needles:
            self.assertIn(n, res.stderr)

    def test_llama2_7b_plan_without_allocating(self):
        cfg = self.write_config(LLAMA2_7B)
        res = self.lote("train", "--config", cfg, "--plan-only", "--seq-len", "4096")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("6.74 B", res.stdout)
        self.assertIn("parameters: 6738415616", res.stdout)
        self.assertIn("AdamW m + v", res.stdout)
        self.assertIn("50.21 GiB", res.stdout)  # 2 x 4 bytes x 6.74e9
        res = self.lote("model", "plan", "--config", cfg)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("6.74 B", res.stdout)
        print(res.stdout)

    def test_trains_and_accepts_recipe_flags(self):
        res = self.train("--grad-accum-steps", "2", "--warmup-steps", "1", "--lr", "1e-3",
                         "--weight-decay", "0.1", "--seed", "7", "--eval-interval", "1",
                         "--tensor-parallel-size", "1")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("validation loss", res.stdout)

    def test_tensor_parallel_larger_than_the_job(self):
        # One process cannot hold 8 tensor-parallel ranks; refused before training.
        self.assertFailsWith(self.train("--tensor-parallel-size", "8"),
                             "--tensor-parallel-size 8 does not divide the 1 ranks")

    def test_sequence_parallel_needs_tensor_parallelism(self):
        self.assertFailsWith(self.train("--sequence-parallel"),
                             "--sequence-parallel", "--tensor-parallel-size > 1")
        self.assertFailsWith(self.train("--activation-recompute", "some"),
                             "--activation-recompute")

    def test_plan_compares_each_way_of_keeping_activations(self):
        cfg = self.write_config(LLAMA2_7B)
        res = self.lote("model", "plan", "--config", cfg, "--seq-len", "4096",
                        "--tensor-parallel-size", "8", "--nnodes", "4", "--nproc-per-node", "32",
                        "--activation-recompute", "selective", "--sequence-parallel")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("(activation recompute selective, sequence parallel on, precision fp32)",
                      res.stdout)
        header = [l for l in res.stdout.splitlines() if "selective" in l and "SP+full" in l]
        self.assertEqual(len(header), 1, res.stdout)
        acts = [l for l in res.stdout.splitlines() if l.strip().startswith("activations ")]
        # The chosen plan, the table per technique, the table per precision.
        self.assertEqual(len(acts), 3, res.stdout)
        gib = [float(v) * (1 if u == "GiB" else 1 / 1024.0)
               for v, u in zip(acts[1].split()[1::2], acts[1].split()[2::2])]
        self.assertEqual(len(gib), 6)
        none, selective, full, sp, sp_selective, sp_full = gib
        self.assertTrue(none > selective > full and none > sp > sp_selective > sp_full, gib)
        # fp32 against bf16-mixed for the chosen technique: bf16 keeps fewer bytes.
        totals = [l.split() for l in res.stdout.splitlines() if l.strip().startswith("total ")]
        fp32, bf16 = [float(v) for v in totals[-1][1::2]]
        self.assertLess(bf16, fp32, res.stdout)
        self.assertIn("bf16-mixed / fp32", res.stdout)
        print(res.stdout)
        res = self.lote("model", "plan", "--config", cfg, "--seq-len", "4096",
                        "--use_mix_precision")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("precision bf16-mixed", res.stdout)
        self.assertIn("parameters (fp32 master)", res.stdout)
        self.assertIn("bf16 weights in use", res.stdout)
        bad = self.lote("model", "plan", "--config", cfg, "--precision", "fp16")
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("--precision", bad.stderr)

    def test_dataset_vocab_larger_than_model(self):
        self.assertFailsWith(self.train(data=self.dataset(vocab=32000)),
                             "vocab_size 32000", "model config has 1000")

    def test_seq_len_above_max_positions(self):
        cfg = dict(TINY, max_position_embeddings=16)
        self.assertFailsWith(self.train(config=self.write_config(cfg)),
                             "exceeds the model's max_position_embeddings 16")

    def test_inconsistent_config(self):
        cfg = dict(TINY, num_attention_heads=5)
        self.assertFailsWith(self.train(config=self.write_config(cfg)), "not divisible")
        cfg = dict(TINY, num_key_value_heads=3)
        self.assertFailsWith(self.train(config=self.write_config(cfg)), "num_key_value_heads 3")

    def test_nan_names_step_and_tensor(self):
        params = {k: v.numpy() for k, v in ref.init_params(TINY, seed=0).items()}
        params["model.layers.1.mlp.up_proj.weight"][3, 4] = np.nan
        w = os.path.join(self.dir, "nan.safetensors")
        ref.save_safetensors(w, params)
        self.assertFailsWith(self.train("--init-weights", w), "step 1:", "loss is nan",
                             "parameter model.layers.1.mlp.up_proj.weight")

    def test_weights_that_do_not_fit_the_config(self):
        params = {k: v.numpy() for k, v in ref.init_params(dict(TINY, hidden_size=64), seed=0).items()}
        w = os.path.join(self.dir, "big.safetensors")
        ref.save_safetensors(w, params)
        self.assertFailsWith(self.train("--init-weights", w), "model.embed_tokens.weight",
                             "[1000, 64]", "[1000, 32]")

    def test_score_reads_hf_bf16_and_fp16(self):
        cfg = self.write_config(TINY)
        params = {k: v.numpy() for k, v in ref.init_params(TINY, seed=0, std=0.2).items()}
        bf16 = {k: ref.to_bfloat16(v) for k, v in params.items()}
        exact = {k: (v[0].astype(np.uint32) << 16).view(np.float32) for k, v in bf16.items()}
        paths = {}
        for name, tensors in (("bf16", bf16), ("bf16_as_f32", exact),
                              ("f16", {k: v.astype(np.float16) for k, v in params.items()}),
                              ("f16_as_f32", {k: v.astype(np.float16).astype(np.float32)
                                              for k, v in params.items()})):
            paths[name] = os.path.join(self.dir, name + ".safetensors")
            ref.save_safetensors(paths[name], tensors)
        tokens = "1 15043 3186 29892 445 338 263 1243 29889"
        tokens = " ".join(str(int(t) % 1000) for t in tokens.split())
        out = {}
        for name, path in paths.items():
            res = self.lote("model", "score", "--config", cfg, "--weights", path, "--tokens", tokens, "--json")
            self.assertEqual(res.returncode, 0, res.stderr)
            out[name] = json.loads(res.stdout)
        self.assertEqual(out["bf16"]["logprobs"], out["bf16_as_f32"]["logprobs"])
        self.assertEqual(out["f16"]["logprobs"], out["f16_as_f32"]["logprobs"])
        self.assertEqual(len(out["bf16"]["logprobs"]), 8)
        res = self.lote("model", "score", "--config", cfg, "--weights", paths["bf16"], "--tokens", "1 5000")
        self.assertFailsWith(res, "token 5000 is outside the model's vocab_size 1000")
        # The table form prints one line per position and the mean loss.
        res = self.lote("model", "score", "--config", cfg, "--weights", paths["f16"], "--tokens", tokens)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(len([l for l in res.stdout.splitlines() if l[:1].isdigit()]), 8)
        self.assertIn("mean_loss", res.stdout)


if __name__ == "__main__":
    LOTE = sys.argv.pop(1)
    unittest.main(verbosity=2)
