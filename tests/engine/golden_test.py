"""Golden test: lote's Llama engine against the torch reference (llama_reference.py).

For a tiny GQA config and a fixed batch, the engine's logits, loss and the gradient of
every parameter tensor must match torch in fp32 (max relative error <= 1e-4 per
tensor, relative to the tensor's largest magnitude), and 10 AdamW steps (warmup,
decay, clipping) on that batch must give the same losses. Data goes through files:
torch writes weights (safetensors) and tokens (raw int32); `lote model dump` writes
logits, loss, gradients, losses and final weights (safetensors).

usage: golden_test.py LOTE_BINARY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402

LOTE = None
TOL = 1e-4


def max_rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    scale = np.max(np.abs(want))
    return float(np.max(np.abs(got - want)) / scale) if scale > 0 else float(np.max(np.abs(got)))


class GoldenTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lote_golden_")
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_case(self, cfg, B, T, steps, lr, warmup):
        params = ref.init_params(cfg, seed=1, std=0.1, norm_jitter=0.1)
        cfg_path = os.path.join(self.dir, "config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        w_path = os.path.join(self.dir, "weights.safetensors")
        ref.save_safetensors(w_path, {k: v.numpy() for k, v in params.items()})
        g = torch.Generator().manual_seed(2)
        batch = torch.randint(0, cfg["vocab_size"], (B, T + 1), generator=g, dtype=torch.int64)
        tok_path = os.path.join(self.dir, "batch.bin")
        batch.to(torch.int32).numpy().tofile(tok_path)
        out_path = os.path.join(self.dir, "dump.safetensors")
        subprocess.run([LOTE, "model", "dump", "--config", cfg_path, "--weights", w_path,
                        "--tokens-file", tok_path, "--batch-size", str(B), "--output", out_path,
                        "--steps", str(steps), "--lr", str(lr), "--warmup-steps", str(warmup),
                        "--weight-decay", "0.01"], check=True)
        dump = ref.load_safetensors(out_path)

        inputs, targets = batch[:, :-1], batch[:, 1:]
        p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        logits = ref.forward(cfg, p, inputs)
        loss = ref.loss_fn(logits, targets)
        loss.backward()

        errors = {"logits": max_rel_err(dump["logits"], logits.detach().numpy())}
        loss_err = abs(float(dump["loss"][0]) - loss.item()) / abs(loss.item())
        errors["loss"] = loss_err
        for name, t in p.items():
            errors["grad " + name] = max_rel_err(dump["grad." + name], t.grad.numpy())
        print(f"\nconfig {json.dumps(cfg)} batch {B}x{T}: torch loss {loss.item():.7f}, "
              f"lote loss {float(dump['loss'][0]):.7f}")
        for name, err in errors.items():
            print(f"  max rel err {err:.2e}  {name}")
        for name, err in errors.items():
            self.assertLessEqual(err, TOL, name)

        # Optimizer steps on the same batch.
        p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        opt = ref.make_adamw(p, lr, 0.01)
        losses = []
        for step in range(1, steps + 1):
            for group in opt.param_groups:
                group["lr"] = ref.learning_rate(step, warmup, steps, lr)
            opt.zero_grad()
            l = ref.loss_fn(ref.forward(cfg, p, inputs), targets)
            l.backward()
            torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
            opt.step()
            losses.append(l.item())
        got = dump["train_losses"]
        print("  step  torch loss   lote loss   rel err")
        worst = 0.0
        for i, (a, b) in enumerate(zip(losses, got)):
            rel = abs(a - b) / abs(a)
            worst = max(worst, rel)
            print(f"  {i + 1:4d}  {a:.7f}  {b:.7f}  {rel:.1e}")
        self.assertLess(losses[-1], losses[0] - 0.05, "training on one batch should lower the loss")
        self.assertLessEqual(worst, TOL, "10-step losses differ")
        final = max(max_rel_err(dump["final." + k], t.detach().numpy()) for k, t in p.items())
        print(f"  final weights: max rel err over tensors {final:.2e}")
        self.assertLessEqual(final, 1e-3)

    def test_gqa_untied(self):
        # T > 128 and B*T > 512 exercise the engine's attention blocks and head chunks.
        cfg = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 101,
               "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
               "tie_word_embeddings": False, "initializer_range": 0.02}
        self.run_case(cfg, B=4, T=160, steps=10, lr=1e-3, warmup=3)

    def test_tied_multi_query(self):
        cfg = {"hidden_size": 32, "intermediate_size": 80, "num_hidden_layers": 3,
               "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 67,
               "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 500.0,
               "tie_word_embeddings": True}
        self.run_case(cfg, B=3, T=33, steps=10, lr=3e-3, warmup=2)


if __name__ == "__main__":
    LOTE = sys.argv.pop(1)
    unittest.main(verbosity=2)
