"""What the PyTorch peers of bench/train share: the engine tests' reference Llama
(tests/engine/llama_reference.py) set up the way `lote train` starts (its parameters,
AdamW as lote runs it, a seeded token stream), and the timed training loop (zero_grad,
loss, backward, clipping to global norm 1, step), optionally under bf16 autocast.
"""
import contextlib
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "engine"))
import llama_reference as ref  # noqa: E402,F401  (re-exported for the peers)


def setup(cfg_path, threads, lr=3e-4, weight_decay=0.01):
    """-> (cfg, params, optimizer, token generator), as every peer starts."""
    torch.set_num_threads(threads)
    with open(cfg_path) as f:
        cfg = json.load(f)
    params = {k: v.requires_grad_(True) for k, v in ref.init_params(cfg, seed=1).items()}
    return cfg, params, ref.make_adamw(params, lr, weight_decay), torch.Generator().manual_seed(0)


def precision_context(precision):
    """fp32: nothing; bf16-autocast: torch.autocast on the CPU in bfloat16 (matmuls in
    bf16, fp32 parameters and optimizer)."""
    if precision == "bf16-autocast":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if precision != "fp32":
        raise ValueError(f"precision {precision}: fp32 or bf16-autocast")
    return contextlib.nullcontext()


def train(cfg, params, opt, gen, batch, seq, steps, forward, precision="fp32"):
    """Trains `steps` steps on random tokens from gen; forward(tokens) -> logits.
    Returns (wall times, CPU times, losses) per step."""
    times, cpu, losses = [], [], []
    for _ in range(steps):
        tokens = torch.randint(0, cfg["vocab_size"], (batch, seq + 1), generator=gen)
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        with precision_context(precision):
            logits = forward(tokens[:, :-1])
        loss = ref.loss_fn(logits.float(), tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        losses.append(loss.item())
    return times, cpu, losses


def median_after_first(xs):
    return statistics.median(xs[1:]) if len(xs) > 1 else xs[0]
