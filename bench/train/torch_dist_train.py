"""Distributed PyTorch peer of bench/train: the engine tests' reference Llama
(tests/engine/llama_reference.py, plain torch ops) trained data parallel on N
processes of this machine with torch.distributed (gloo), DistributedDataParallel
and ZeroRedundancyOptimizer (ZeRO-1: AdamW state sharded over the ranks; betas
0.9/0.999, eps 1e-6, weight decay 0.01 on matrices and embeddings only, as lote),
gradient clipping at global norm 1.0, on random tokens of the config's vocabulary.

Each rank runs --micro-batch sequences of --seq-len tokens per step, so a step is
nproc x micro_batch x seq_len tokens. A step is timed on rank 0 from a barrier to
the end of the optimizer step (ZeRO's parameter broadcast included); the first step
is warm-up. The last line of stdout is one JSON object; "tokens_per_s" is the whole
job's (all ranks) at the median step time after warm-up.

usage: torch_dist_train.py --config CONFIG_JSON --nproc N --threads-per-proc T
                           --seq-len S --micro-batch B --steps K [--lr 3e-4] [--seed 0]
                           [--dump-params PATH]   (rank 0 saves the trained weights, for tests)
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "engine"))
import llama_reference as ref  # noqa: E402


class ReferenceLlama(torch.nn.Module):
    """The reference model's parameters as a Module (DDP needs one); forward is
    llama_reference.forward on the Hugging Face names."""

    def __init__(self, cfg, seed):
        super().__init__()
        self.cfg = cfg
        self.names = {}
        for name, tensor in ref.init_params(cfg, seed=seed).items():
            attr = name.replace(".", "__")  # Module attribute names cannot hold '.'
            self.register_parameter(attr, torch.nn.Parameter(tensor))
            self.names[name] = attr

    def forward(self, tokens):
        params = {name: getattr(self, attr) for name, attr in self.names.items()}
        return ref.forward(self.cfg, params, tokens)


def worker(rank, args, cfg, port, results):
    torch.set_num_threads(args.threads_per_proc)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.nproc)
    model = ReferenceLlama(cfg, seed=1)
    ddp = DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = ZeroRedundancyOptimizer([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  optimizer_class=torch.optim.AdamW, lr=args.lr,
                                  betas=(0.9, 0.999), eps=1e-6)
    # Each rank its own random tokens (as each data-parallel rank reads its own samples).
    g = torch.Generator().manual_seed(args.seed * 1000003 + rank)
    times, losses = [], []
    for _ in range(args.steps):
        tokens = torch.randint(0, cfg["vocab_size"], (args.micro_batch, args.seq_len + 1), generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ref.loss_fn(ddp(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()  # DDP all-reduces (averages) the gradients here
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        # The mean loss over the ranks (outside the timed region).
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / args.nproc)
    if rank == 0:
        if args.dump_params:
            torch.save({name: getattr(model, attr).detach().clone() for name, attr in model.names.items()},
                       args.dump_params)
        results.put({"step_times_s": times, "losses": losses})
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="Hugging Face Llama config.json")
    p.add_argument("--nproc", type=int, required=True)
    p.add_argument("--threads-per-proc", type=int, required=True)
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--micro-batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dump-params", help="rank 0 saves the trained parameters here (torch.save)")
    args = p.parse_args()
    for name in ("nproc", "threads_per_proc", "seq_len", "micro_batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    with open(args.config) as f:
        cfg = json.load(f)
    if args.seq_len > cfg.get("max_position_embeddings", args.seq_len):
        p.error(f"--seq-len {args.seq_len} exceeds max_position_embeddings {cfg['max_position_embeddings']}")
    # One node: gloo talks over loopback; every rank gets the thread count asked for.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["OMP_NUM_THREADS"] = str(args.threads_per_proc)
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    t0 = time.perf_counter()
    mp.spawn(worker, args=(args, cfg, free_port(), results), nprocs=args.nproc, join=True)
    wall = time.perf_counter() - t0
    r = results.get()
    times = r["step_times_s"]
    step = statistics.median(times[1:]) if len(times) > 1 else times[0]
    tokens_per_step = args.nproc * args.micro_batch * args.seq_len
    print(json.dumps({
        "tokens_per_s": tokens_per_step / step,
        "step_s": step,
        "tokens_per_step": tokens_per_step,
        "nproc": args.nproc, "threads_per_proc": args.threads_per_proc,
        "seq_len": args.seq_len, "micro_batch": args.micro_batch, "steps": args.steps,
        "step_times_s": times, "losses": r["losses"], "wall_s": wall,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
