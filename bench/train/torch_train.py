"""PyTorch side of bench/train: the engine tests' reference Llama (plain torch ops),
trained with the same recipe as `lote train` (AdamW, clipping) on random tokens.
Prints one JSON line: median step time, tokens/s, and the OpenBLAS sgemm peak
(numpy float32 matmul, the same OpenBLAS library) measured in this process.

usage: torch_train.py CONFIG_JSON BATCH SEQ STEPS THREADS
"""
import json
import sys
import time

import numpy as np

import torch_bench_common as common


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
    cfg, params, opt, g = common.setup(cfg_path, threads)
    peak, peak_cpu = sgemm_peak()
    times, cpu, losses = common.train(cfg, params, opt, g, batch, seq, steps,
                                      lambda tokens: common.ref.forward(cfg, params, tokens))
    step, step_cpu = common.median_after_first(times), common.median_after_first(cpu)
    print(json.dumps({"step_s": step, "step_cpu_s": step_cpu, "tokens_per_s": batch * seq / step,
                      "step_times_s": times, "step_cpu_times_s": cpu, "losses": losses,
                      "sgemm_peak_gflops": peak, "sgemm_peak_gflops_per_cpu_s": peak_cpu}))


if __name__ == "__main__":
    main()
