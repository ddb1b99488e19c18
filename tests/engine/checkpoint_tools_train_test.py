"""`lote checkpoints list` and `lote checkpoint export` on checkpoints that
`lote train --checkpoint-uri` itself wrote (TP=2 x DP=2, uneven MLP and vocabulary
splits): both checkpoints are listed complete with layout 2x2, and the export of the
last one is bit for bit the model.safetensors that training wrote with --output, and
scores the same; `lote checkpoint reshard` of it to 1x1 and 1x3 lists complete, exports
the same bytes, and the 1x1 one resumes in one process. Skipped (with a message) when `lote train` has no --checkpoint-uri.

usage: checkpoint_tools_train_test.py LOTE_BINARY
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402

LOTE = None
CONFIG = {"hidden_size": 32, "intermediate_size": 69, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1001,
          "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CheckpointToolsTrainTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lote_ckpt_tools_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def lote(self, *args):
        return subprocess.run([LOTE, *args], capture_output=True, text=True, timeout=300)

    def test_export_of_the_last_checkpoint_is_the_trained_model(self):
        config = os.path.join(self.dir, "config.json")
        with open(config, "w") as f:
            json.dump(CONFIG, f)
        rng = np.random.default_rng(5)
        data = os.path.join(self.dir, "data")
        ref.write_dataset(data, [list(rng.integers(2, 1000, 120)) for _ in range(30)], 33, 1000)
        ck = os.path.join(self.dir, "ck")
        out = os.path.join(self.dir, "trained")
        res = self.lote("train", "--config", config, "--data", data, "--seq-len", "32",
                        "--batch-size", "2", "--global-batch-size", "8", "--max-steps", "4",
                        "--warmup-steps", "1", "--lr", "3e-3", "--logging-interval", "2",
                        "--threads", "1", "--peak-gflops", "10", "--master-port",
                        str(free_port()), "--nproc-per-node", "4", "--tensor-parallel-size",
                        "2", "--job-id", "job-x", "--checkpoint-uri", "file://" + ck,
                        "--checkpoint-freq", "2", "--output", out)
        self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-3000:])

        res = self.lote("checkpoints", "list", "job-x", "--checkpoint-uri", ck, "--json")
        self.assertEqual(res.returncode, 0, res.stderr)
        listed = json.loads(res.stdout)["checkpoints"]
        self.assertEqual([(c["step"], c["complete"]) for c in listed], [(2, True), (4, True)],
                         res.stdout)
        for c in listed:
            self.assertEqual((c["tensor_parallel"], c["data_parallel"]), (2, 2))

        exported = os.path.join(self.dir, "export")
        res = self.lote("checkpoint", "export", os.path.join(ck, "job-x"), "--output", exported)
        self.assertEqual(res.returncode, 0, res.stderr)
        got = ref.load_safetensors(os.path.join(exported, "model.safetensors"))
        want = ref.load_safetensors(os.path.join(out, "model.safetensors"))
        self.assertEqual(set(got), set(want))
        for name in want:
            self.assertTrue(np.array_equal(got[name].view(np.uint32), want[name].view(np.uint32)),
                            name)
        tokens = "1 17 42 99 3 64 500 7 88 1000"
        scores = []
        for cfg, weights in ((os.path.join(exported, "config.json"),
                              os.path.join(exported, "model.safetensors")),
                             (config, os.path.join(out, "model.safetensors"))):
            res = self.lote("model", "score", "--config", cfg, "--weights", weights, "--tokens",
                            tokens, "--json")
            self.assertEqual(res.returncode, 0, res.stderr)
            scores.append(json.loads(res.stdout)["logprobs"])
        self.assertEqual(scores[0], scores[1])

        # Re-sharded offline to 1 x 1 and to 1 x 3: both are listed complete with their
        # layout, export byte for byte the same model, and the 1 x 1 one resumes.
        last = os.path.join(ck, "job-x", "step_4")
        with open(os.path.join(exported, "model.safetensors"), "rb") as f:
            exported_bytes = f.read()
        for tp_dp in ((1, 1), (1, 3)):
            name = "r%dx%d" % tp_dp
            res = self.lote("checkpoint", "reshard", last, "--output",
                            os.path.join(self.dir, name), "--tensor-parallel-size",
                            str(tp_dp[0]), "--data-parallel-size", str(tp_dp[1]))
            self.assertEqual(res.returncode, 0, res.stderr)
            res = self.lote("checkpoints", "list", os.path.join(self.dir, name), "--json")
            self.assertEqual(res.returncode, 0, res.stderr)
            (c,) = json.loads(res.stdout)["checkpoints"]
            self.assertEqual((c["step"], c["complete"], c["tensor_parallel"],
                              c["data_parallel"]), (4, True) + tp_dp, res.stdout)
            again = os.path.join(self.dir, "export-" + name)
            res = self.lote("checkpoint", "export", os.path.join(self.dir, name), "--output",
                            again)
            self.assertEqual(res.returncode, 0, res.stderr)
            with open(os.path.join(again, "model.safetensors"), "rb") as f:
                self.assertTrue(f.read() == exported_bytes, name)
        res = self.lote("train", "--config", config, "--data", data, "--seq-len", "32",
                        "--batch-size", "2", "--global-batch-size", "8", "--max-steps", "5",
                        "--warmup-steps", "1", "--lr", "3e-3", "--logging-interval", "1",
                        "--threads", "1", "--peak-gflops", "10", "--resume",
                        "file://" + os.path.join(self.dir, "r1x1", "step_4"))
        self.assertEqual(res.returncode, 0, res.stdout[-2000:] + res.stderr[-3000:])
        self.assertIn("resumed from", res.stdout, res.stdout[-2000:])
        self.assertIn("done: 1 steps", res.stdout, res.stdout[-2000:])


if __name__ == "__main__":
    LOTE = os.path.abspath(sys.argv.pop(1))
    unittest.main()
