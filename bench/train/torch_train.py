"""PyTorch side of bench/train: the engine tests' reference Llama (plain torch ops),
trained with the same recipe as `lote train` (AdamW, clipping) on random tokens.
Prints one JSON line: median step time, tokens/s, and the OpenBLAS sgemm peak
(numpy float32 matmul, the same OpenBLAS library) measured in this process.

usage: torch_train.py CONFIG_JSON BATCH SEQ STEPS THREADS
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "engine"))
import llama_reference as ref  # noqa: E402


def sgemm_peak(n=2048, repeats=5):
    """Best GFLOP/s of numpy float32 matmul (OpenBLAS sgemm), by wall time and per
    CPU-second of this process."""
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    a @ b
    best, best_cpu = 0.0, 0.0
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        a @ b
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        best = max(best, 2.0 * n ** 3 / wall / 1e9)
        best_cpu = max(best_cpu, 2.0 * n ** 3 / cpu / 1e9)
    return best, best_cpu


def main():
    cfg_path, batch, seq, steps, threads = sys.argv[1], *map(int, sys.argv[2:6])
    torch.set_num_threads(threads)
    with open(cfg_path) as f:
        cfg = json.load(f)
    params = {k: v.requires_grad_(True) for k, v in ref.init_params(cfg, seed=1).items()}
    opt = ref.make_adamw(params, 3e-4, 0.01)
    g = torch.Generator().manual_seed(0)
    peak, peak_cpu = sgemm_peak()
    times, cpu, losses = [], [], []
    for _ in range(steps):
        tokens = torch.randint(0, cfg["vocab_size"], (batch, seq + 1), generator=g)
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        loss = ref.loss_fn(ref.forward(cfg, params, tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        losses.append(loss.item())
    step = statistics.median(times[1:]) if len(times) > 1 else times[0]
    step_cpu = statistics.median(cpu[1:]) if len(cpu) > 1 else cpu[0]
    print(json.dumps({"step_s": step, "step_cpu_s": step_cpu, "tokens_per_s": batch * seq / step,
                      "step_times_s": times, "step_cpu_times_s": cpu, "losses": losses,
                      "sgemm_peak_gflops": peak, "sgemm_peak_gflops_per_cpu_s": peak_cpu}))


if __name__ == "__main__":
    main()
