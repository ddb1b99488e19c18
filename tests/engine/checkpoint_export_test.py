"""`lote checkpoints list` and `lote checkpoint export` read by an independent reader.

A checkpoint is written here in Python, file by file, as docs/checkpoints.md specifies
(TP=2 model shards with uneven vocabulary and MLP splits, ZeRO-1 optimizer shards,
manifest.json last with sizes and sha256). `lote checkpoint export` must give back the
whole model bit for bit; the exported model.safetensors, read with numpy and run
through the torch reference Llama (llama_reference.py), must give the log-probs that
`lote model score --json` gives for the same export and tokens. Also: an incomplete
checkpoint is listed as such and skipped, a corrupt shard is refused by name, and a
Hugging Face sharded checkpoint (index + two shards) scores like the single file.

usage: checkpoint_export_test.py LOTE_BINARY
"""
import hashlib
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
# Vocabulary 101 = 51 + 50 and MLP width 67 = 34 + 33 split unevenly over 2 TP ranks.
CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
       "intermediate_size": 67, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "vocab_size": 101, "max_position_embeddings": 64,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False}
TOKENS = [1, 17, 42, 99, 3, 64, 64, 7, 88, 100, 0, 51, 50, 23]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def even_split(total, parts, index):
    base, extra = divmod(total, parts)
    begin = index * base + min(index, extra)
    return begin, begin + base + (1 if index < extra else 0)


def split_of(name, cfg):
    """(split_dim, split length) of a tensor under TP (Megatron), or (-1, None)."""
    c, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = c // nh
    if name.endswith(("q_proj.weight",)):
        return 0, nh * hd
    if name.endswith(("k_proj.weight", "v_proj.weight")):
        return 0, cfg["num_key_value_heads"] * hd
    if name.endswith("o_proj.weight"):
        return 1, nh * hd
    if name.endswith(("gate_proj.weight", "up_proj.weight")):
        return 0, cfg["intermediate_size"]
    if name.endswith("down_proj.weight"):
        return 1, cfg["intermediate_size"]
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return 0, cfg["vocab_size"]
    return -1, None


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_safetensors_meta(path, tensors, metadata):
    """ref.save_safetensors plus a __metadata__ entry (string values)."""
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, arr in tensors.items():
        blob = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def write_checkpoint(root, job, step, whole, tp=2, dp=2, manifest=True):
    folder = os.path.join(root, job, f"step_{step}")
    os.makedirs(folder)
    files = {}
    for r in range(tp):
        tensors, shards = {}, {}
        for name, arr in whole.items():
            dim, length = split_of(name, CFG)
            if dim < 0:
                tensors[name] = arr
                shards[name] = {"global_shape": list(arr.shape), "split_dim": -1,
                                "split_begin": 0}
                continue
            if name.endswith(("proj.weight",)) and "mlp" not in name:
                b, e = r * length // tp, (r + 1) * length // tp  # whole heads
            else:
                b, e = even_split(length, tp, r)
            tensors[name] = arr[b:e] if dim == 0 else arr[:, b:e]
            shards[name] = {"global_shape": list(arr.shape), "split_dim": dim, "split_begin": b}
        name = f"model-tp{r}.safetensors"
        write_safetensors_meta(os.path.join(folder, name), tensors,
                               {"format": "pt", "producer": "lote", "tp_rank": str(r),
                                "tp_size": str(tp), "lote_shards": json.dumps(shards)})
        total = sum(t.size for t in tensors.values())
        for d in range(dp):
            b, e = even_split(total, dp, d)
            oname = f"optim-tp{r}-dp{d}.safetensors"
            write_safetensors_meta(os.path.join(folder, oname),
                                   {"exp_avg": np.zeros(e - b, np.float32),
                                    "exp_avg_sq": np.ones(e - b, np.float32)},
                                   {"format": "pt", "producer": "lote", "tp_rank": str(r),
                                    "tp_size": str(tp), "dp_rank": str(d), "dp_size": str(dp),
                                    "begin": str(b), "end": str(e)})
    for f in sorted(os.listdir(folder)):
        p = os.path.join(folder, f)
        files[f] = {"bytes": os.path.getsize(p), "sha256": sha256_file(p)}
    if manifest:
        m = {"format": "lote-checkpoint-1", "step": step, "job_id": job,
             "created_at": "2026-12-01T10:00:00Z", "config": CFG,
             "layout": {"world": tp * dp, "tensor_parallel": tp, "data_parallel": dp},
             "optimizer": {"name": "adamw", "step": step, "beta1": 0.9, "beta2": 0.999,
                           "eps": 1e-6, "weight_decay": 0.01},
             "sampler": {"epoch": 0, "position": 8 * step},
             "train": {"seed": 1234, "lr": 3e-4, "max_steps": 100}, "files": files}
        with open(os.path.join(folder, "manifest.json"), "w") as f:
            json.dump(m, f, indent=2)
    return folder


def whole_model(seed):
    params = ref.init_params(CFG, seed, std=0.2, norm_jitter=0.1)
    return {k: v.numpy().astype(np.float32) for k, v in params.items()}


def reference_logprobs(cfg, weights, tokens):
    p = {k: torch.from_numpy(v.astype(np.float64)) for k, v in weights.items()}
    x = torch.tensor([tokens[:-1]])
    logits = ref.forward(cfg, p, x)[0]
    lp = torch.log_softmax(logits, dim=-1)
    return np.array([lp[t, tokens[t + 1]].item() for t in range(len(tokens) - 1)])


class CheckpointExportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lote_ckpt_export_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def lote(self, *args):
        return subprocess.run([LOTE, *args], capture_output=True, text=True)

    def score(self, config, weights):
        res = self.lote("model", "score", "--config", config, "--weights", weights, "--tokens",
                        " ".join(map(str, TOKENS)), "--json")
        self.assertEqual(res.returncode, 0, res.stderr)
        return json.loads(res.stdout)

    def test_export_matches_independent_reader(self):
        ckpts = os.path.join(self.dir, "ckpts")
        w10, w20 = whole_model(10), whole_model(20)
        write_checkpoint(ckpts, "job-7", 10, w10)
        write_checkpoint(ckpts, "job-7", 20, w20)
        write_checkpoint(ckpts, "job-7", 30, whole_model(30), manifest=False)

        res = self.lote("checkpoints", "list", "job-7#1", "--checkpoint-uri",
                        "file://" + ckpts, "--json")
        self.assertEqual(res.returncode, 0, res.stderr)
        listed = json.loads(res.stdout)["checkpoints"]
        self.assertEqual([c["step"] for c in listed], [10, 20, 30])
        self.assertEqual([c["complete"] for c in listed], [True, True, False])
        self.assertEqual({(c["tensor_parallel"], c["data_parallel"]) for c in listed}, {(2, 2)})
        table = self.lote("checkpoints", "list", os.path.join(ckpts, "job-7"))
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("incomplete", table.stdout)
        self.assertIn("2x2", table.stdout)

        out = os.path.join(self.dir, "export")
        res = self.lote("checkpoint", "export", "file://" + os.path.join(ckpts, "job-7"),
                        "--output", out)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("step 20", res.stdout)
        exported = ref.load_safetensors(os.path.join(out, "model.safetensors"))
        self.assertEqual(set(exported), set(w20))
        for name, arr in w20.items():
            self.assertEqual(exported[name].dtype, np.float32, name)
            self.assertTrue(np.array_equal(exported[name].view(np.uint32), arr.view(np.uint32)),
                            name + " is not bit-exact")
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg, CFG)

        got = self.score(os.path.join(out, "config.json"), os.path.join(out, "model.safetensors"))
        want = reference_logprobs(cfg, exported, TOKENS)
        np.testing.assert_allclose(np.array(got["logprobs"]), want, rtol=0, atol=2e-4)
        self.assertAlmostEqual(got["mean_loss"], -want.mean(), delta=2e-4)

    def test_corrupt_shard_is_refused_by_name(self):
        ckpts = os.path.join(self.dir, "ckpts")
        folder = write_checkpoint(ckpts, "job", 5, whole_model(5))
        with open(os.path.join(folder, "model-tp0.safetensors"), "r+b") as f:
            f.seek(-5, os.SEEK_END)
            b = f.read(1)
            f.seek(-5, os.SEEK_END)
            f.write(bytes([b[0] ^ 0x01]))
        out = os.path.join(self.dir, "export")
        res = self.lote("checkpoint", "export", folder, "--output", out)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("model-tp0.safetensors", res.stderr)
        self.assertIn("sha256", res.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "model.safetensors")))
        res = self.lote("checkpoint", "export", os.path.join(self.dir, "nothing"), "--output", out)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("does not exist", res.stderr)

    def test_hf_sharded_checkpoint_scores_like_one_file(self):
        w = whole_model(3)
        names = list(w)
        hf = os.path.join(self.dir, "hf")
        os.makedirs(hf)
        halves = {"model-00001-of-00002.safetensors": names[:len(names) // 2],
                  "model-00002-of-00002.safetensors": names[len(names) // 2:]}
        weight_map = {}
        for shard, part in halves.items():
            ref.save_safetensors(os.path.join(hf, shard), {n: w[n] for n in part})
            weight_map.update({n: shard for n in part})
        with open(os.path.join(hf, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(CFG, f)
        single = os.path.join(self.dir, "single.safetensors")
        ref.save_safetensors(single, w)
        config = os.path.join(hf, "config.json")
        a = self.score(config, hf)
        b = self.score(config, os.path.join(hf, "model.safetensors.index.json"))
        c = self.score(config, single)
        self.assertEqual(a["logprobs"], c["logprobs"])
        self.assertEqual(b["logprobs"], c["logprobs"])
        # --init-weights from the sharded checkpoint trains exactly as from one file, also
        # with tensor parallelism (each rank slices the whole tensors it reads).
        rng = np.random.default_rng(1)
        data = os.path.join(self.dir, "data")
        ref.write_dataset(data, [list(rng.integers(2, 100, 80)) for _ in range(20)], 17, 101)
        losses = []
        for weights in (hf, single):
            out = os.path.join(self.dir, "train_" + os.path.basename(weights))
            res = self.lote("train", "--config", config, "--data", data, "--seq-len", "16",
                            "--batch-size", "2", "--max-steps", "2", "--logging-interval", "1",
                            "--threads", "1", "--peak-gflops", "10", "--master-port",
                            str(free_port()), "--nproc-per-node", "2",
                            "--tensor-parallel-size", "2", "--init-weights", weights,
                            "--output", out)
            self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-2000:])
            with open(os.path.join(out, "metrics.json")) as f:
                losses.append(json.load(f)["losses"])
        self.assertEqual(losses[0], losses[1])
        self.assertEqual(len(losses[0]), 2)
        os.remove(os.path.join(hf, "model-00002-of-00002.safetensors"))
        res = self.lote("model", "score", "--config", config, "--weights", hf, "--tokens", "1 2")
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("model-00002-of-00002.safetensors", res.stderr)


if __name__ == "__main__":
    LOTE = os.path.abspath(sys.argv.pop(1))
    unittest.main()
