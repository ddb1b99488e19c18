"""bf16 mixed precision (`lote train --precision bf16-mixed`, docs/engine.md):

- loss curves: 200 steps of a tiny Llama (hidden 64, 2 layers, GQA 4/2 heads, vocab
  256) from the same initial weights on the same data (16 sequences of a noisy
  token chain, the whole dataset every step), trained by lote in fp32 and in
  bf16-mixed and by an independent PyTorch Llama (llama_reference.py, the same AdamW,
  schedule and clipping) in fp32 and under torch.autocast(cpu, bfloat16). lote fp32
  against PyTorch fp32 checks the harness (the same training within 1e-3); every bf16
  curve stays within TOLERANCE nats of the fp32 curve, and lote's bf16 curve within
  TOLERANCE of PyTorch's; lote's bf16 losses are not fp32's (the flag does something);
  and the loss fell by more than 2 nats (the curves are not flat and trivially close);
  the bf16 curve with the GEMMs forced onto the fp32 fallback (LOTE_BF16_GEMM=fp32, what
  a CPU without avx512_bf16 runs) is within TOLERANCE of the fp32 and PyTorch curves too;
- TP=2 with sequence parallelism in bf16-mixed follows one process's bf16 curve within
  TOLERANCE (its partial sums are rounded in other places);
- resume: 12 bf16-mixed steps with a checkpoint every 4 (one process, and TP=2 x DP=2
  with ZeRO-1), resumed from step_8, give the same losses bit for bit;
- export: `lote checkpoint export --dtype bf16` writes BF16 tensors that are the fp32
  export rounded to nearest even (numpy's rounding here, not lote's), and config.json
  says torch_dtype bfloat16; `--dtype fp32` writes the master weights.

usage: bf16_mixed_test.py LOTE_BINARY
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402

LOTE = None
CONFIG = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
          "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
          "initializer_range": 0.02}
SEQ, DOCS, STEPS, WARMUP, LR, WD = 32, 16, 200, 10, 3e-3, 0.01
# The largest gap allowed between two curves, in nats per token (the loss starts at
# ln 256 = 5.5 and ends near 1.5 here).
TOLERANCE = 0.02


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_curve(blocks, precision):
    """The PyTorch peer: fp32 parameters and AdamW; forward under bf16 autocast or not."""
    torch.manual_seed(0)
    params = {k: torch.tensor(v).requires_grad_(True)
              for k, v in ref.load_safetensors(INIT).items()}
    opt = ref.make_adamw(params, LR, WD)
    tokens = torch.tensor(blocks.astype(np.int64))
    losses = []
    for step in range(1, STEPS + 1):
        for group in opt.param_groups:
            group["lr"] = ref.learning_rate(step, WARMUP, STEPS, LR)
        opt.zero_grad()
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = ref.forward(CONFIG, params, tokens[:, :-1])
        else:
            logits = ref.forward(CONFIG, params, tokens[:, :-1])
        loss = ref.loss_fn(logits.float(), tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


INIT = None


class Bf16MixedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        global INIT
        torch.set_num_threads(2)
        cls.dir = tempfile.mkdtemp(prefix="lote_bf16_")
        cls.config = os.path.join(cls.dir, "config.json")
        with open(cls.config, "w") as f:
            json.dump(CONFIG, f)
        rng = np.random.default_rng(7)
        docs = []
        for _ in range(DOCS):  # a token chain the model can learn, with 10% noise
            t, doc = int(rng.integers(2, 256)), []
            for _ in range(SEQ):
                doc.append(t)
                t = int(rng.integers(2, 256)) if rng.random() < 0.1 else (5 * t + 7) % 254 + 2
            docs.append(doc)
        cls.data = os.path.join(cls.dir, "data")
        cls.blocks = ref.write_dataset(cls.data, docs, SEQ + 1, 256)
        assert cls.blocks.shape == (DOCS, SEQ + 1)
        INIT = os.path.join(cls.dir, "init.safetensors")
        init = ref.init_params(CONFIG, seed=3)
        ref.save_safetensors(INIT, {k: v.numpy() for k, v in init.items()})

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def train(self, name, *extra, steps=STEPS, batch=DOCS, nproc=1, tp=1, env=None):
        out = self.path(name)
        args = [LOTE, "train", "--config", self.config, "--data", self.data, "--seq-len",
                str(SEQ), "--batch-size", str(batch), "--global-batch-size", str(DOCS),
                "--max-steps", str(steps), "--warmup-steps", str(WARMUP), "--lr", str(LR),
                "--weight-decay", str(WD), "--grad-clip", "1.0", "--val-fraction", "0",
                "--logging-interval", "50", "--threads", "1", "--peak-gflops", "10",
                "--init-weights", INIT, "--master-port", str(free_port()),
                "--nproc-per-node", str(nproc), "--tensor-parallel-size", str(tp),
                "--job-id", "job", "--output", out, *extra]
        res = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-3000:])
        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
        return res, np.array(metrics["losses"]), metrics

    def test_loss_curves_against_fp32_and_pytorch_autocast(self):
        _, lote32, m32 = self.train("fp32")
        res, lote16, m16 = self.train("bf16", "--precision", "bf16-mixed")
        self.assertEqual(m32["precision"], "fp32")
        self.assertEqual(m16["precision"], "bf16-mixed")
        self.assertIn("precision bf16-mixed", res.stdout)
        self.assertIn("bf16 weights in use", res.stdout)
        torch32 = torch_curve(self.blocks, "fp32")
        torch16 = torch_curve(self.blocks, "bf16")
        for c in (lote32, lote16, torch32, torch16):
            self.assertEqual(len(c), STEPS)
        gap = lambda a, b: float(np.max(np.abs(a - b)))  # noqa: E731
        print(f"\nloss at steps 1/50/100/200: lote fp32 {lote32[[0, 49, 99, 199]]}, "
              f"lote bf16 {lote16[[0, 49, 99, 199]]}, torch fp32 {torch32[[0, 49, 99, 199]]}, "
              f"torch bf16 {torch16[[0, 49, 99, 199]]}")
        print(f"largest gaps (nats): lote fp32 - torch fp32 {gap(lote32, torch32):.2e}, "
              f"lote bf16 - lote fp32 {gap(lote16, lote32):.2e}, "
              f"torch bf16 - torch fp32 {gap(torch16, torch32):.2e}, "
              f"lote bf16 - torch bf16 {gap(lote16, torch16):.2e}")
        self.assertGreater(lote32[0] - lote32[-1], 2.0)
        self.assertLess(gap(lote32, torch32), 1e-3)  # the same training, in fp32
        self.assertGreater(gap(lote16, lote32), 0.0)  # bf16-mixed changes the numbers
        self.assertLess(gap(lote16, lote32), TOLERANCE)
        self.assertLess(gap(torch16, torch32), TOLERANCE)
        self.assertLess(gap(lote16, torch16), TOLERANCE)
        # The GEMMs ran on the CPU's bf16 kernel where it has one; the fp32 fallback (what a
        # CPU without avx512_bf16 runs, forced here) trains within the same tolerance.
        kernel = m16["bf16_gemm"]
        self.assertIn(f"bf16 GEMMs on {kernel}", res.stdout)
        res_fb, fallback, m_fb = self.train("bf16_fp32_gemm", "--precision", "bf16-mixed",
                                            env=dict(os.environ, LOTE_BF16_GEMM="fp32"))
        self.assertEqual(m_fb["bf16_gemm"], "fp32 sgemm")
        print(f"bf16 GEMMs on {kernel}; with the fp32 fallback: fallback - lote bf16 "
              f"{gap(fallback, lote16):.2e}, fallback - lote fp32 {gap(fallback, lote32):.2e}, "
              f"fallback - torch bf16 {gap(fallback, torch16):.2e}")
        self.assertLess(gap(fallback, lote32), TOLERANCE)
        self.assertLess(gap(fallback, torch16), TOLERANCE)
        # The recipe's flag is the same run.
        _, alias, _ = self.train("alias", "--use_mix_precision", steps=20)
        _, named, _ = self.train("bf16_20", "--precision", "bf16-mixed", steps=20)
        np.testing.assert_array_equal(alias, named)

    def test_tensor_parallel_sequence_parallel_follows_one_process(self):
        _, one, _ = self.train("one", "--precision", "bf16-mixed", steps=60)
        _, tp2, _ = self.train("tp2sp", "--precision", "bf16-mixed", "--sequence-parallel",
                               steps=60, nproc=2, tp=2)
        self.assertLess(float(np.max(np.abs(one - tp2))), TOLERANCE)

    def test_resume_is_bit_exact_and_export_dtypes(self):
        for name, nproc, tp, batch in (("single", 1, 1, DOCS), ("tp2dp2", 4, 2, DOCS // 4)):
            with self.subTest(name):
                ck = "file://" + self.path("ck_" + name)
                _, full, _ = self.train(name, "--precision", "bf16-mixed", "--checkpoint-uri", ck,
                                        "--checkpoint-freq", "4", steps=12, nproc=nproc, tp=tp,
                                        batch=batch)
                res, resumed, _ = self.train(name + "_resumed", "--precision", "bf16-mixed",
                                             "--resume", ck + "/job/step_8", steps=12,
                                             nproc=nproc, tp=tp, batch=batch)
                self.assertIn("resumed from", res.stdout)
                self.assertEqual(list(resumed), list(full[8:]))  # bit-exact
        ck = self.path("ck_single", "job", "step_12")
        out = {}
        for dtype in ("fp32", "bf16"):
            out[dtype] = self.path("export_" + dtype)
            res = subprocess.run([LOTE, "checkpoint", "export", "file://" + ck, "--output",
                                  out[dtype], "--dtype", dtype], capture_output=True, text=True)
            self.assertEqual(res.returncode, 0, res.stderr)
        fp32 = ref.load_safetensors(os.path.join(out["fp32"], "model.safetensors"))
        with open(os.path.join(out["bf16"], "model.safetensors"), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            data = f.read()
        names = [k for k in header if k != "__metadata__"]
        self.assertEqual(sorted(names), sorted(fp32))
        for name in names:
            info = header[name]
            self.assertEqual(info["dtype"], "BF16")
            begin, end = info["data_offsets"]
            got = np.frombuffer(data[begin:end], dtype=np.uint16).reshape(info["shape"])
            want, _ = ref.to_bfloat16(fp32[name])
            np.testing.assert_array_equal(got, want.reshape(info["shape"]), err_msg=name)
        # The fp32 export holds the master weights, which bf16 cannot represent.
        some = fp32["model.layers.0.mlp.up_proj.weight"]
        self.assertFalse(np.array_equal(some, (ref.to_bfloat16(some)[0].astype(np.uint32) << 16)
                                        .view(np.float32)))
        for dtype, name in (("fp32", "float32"), ("bf16", "bfloat16")):
            with open(os.path.join(out[dtype], "config.json")) as f:
                self.assertEqual(json.load(f)["torch_dtype"], name)


if __name__ == "__main__":
    LOTE = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
