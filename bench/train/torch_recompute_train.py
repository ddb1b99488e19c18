"""PyTorch peer of bench/train/techniques.sh: the engine tests' reference Llama
(tests/engine/llama_reference.py), written layer by layer so that torch.utils.checkpoint
can recompute what lote's --activation-recompute does: `selective` checkpoints the
attention core (scores, softmax, weighted sum: Megatron's selective recomputation),
`full` checkpoints each whole layer. Same set-up and loop as torch_train.py
(torch_bench_common.py: AdamW, clipping); PRECISION bf16-autocast runs forward under
torch.autocast(cpu, bfloat16), the peer of `lote train --precision bf16-mixed`.
Checks first that its loss equals the reference forward's on the same tokens, then
prints one JSON line: median step time and CPU time after the first step, the losses,
and the process's peak RSS.

usage: torch_recompute_train.py CONFIG_JSON BATCH SEQ STEPS THREADS none|selective|full
       [fp32|bf16-autocast]
"""
import json
import math
import resource
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import torch_bench_common as common

ref = common.ref


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def attention_core(q, k, v, mask, scale):
    """q, k, v: [B, nh, T, hd] after rotary -> [B, nh, T, hd]."""
    return torch.softmax((q @ k.transpose(-2, -1)) * scale + mask, dim=-1) @ v


def layer(cfg, p, pre, x, cos, sin, mask, mode):
    B, T, _ = x.shape
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg["hidden_size"] // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
    q = (h @ p[pre + "self_attn.q_proj.weight"].t()).view(B, T, nh, hd).transpose(1, 2)
    k = (h @ p[pre + "self_attn.k_proj.weight"].t()).view(B, T, nkv, hd).transpose(1, 2)
    v = (h @ p[pre + "self_attn.v_proj.weight"].t()).view(B, T, nkv, hd).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = (k * cos + rotate_half(k) * sin).repeat_interleave(nh // nkv, dim=1)
    v = v.repeat_interleave(nh // nkv, dim=1)
    scale = 1.0 / math.sqrt(hd)
    if mode == "selective":
        y = checkpoint(attention_core, q, k, v, mask, scale, use_reentrant=False)
    else:
        y = attention_core(q, k, v, mask, scale)
    x = x + y.transpose(1, 2).reshape(B, T, nh * hd) @ p[pre + "self_attn.o_proj.weight"].t()
    h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
    a = F.silu(h @ p[pre + "mlp.gate_proj.weight"].t()) * (h @ p[pre + "mlp.up_proj.weight"].t())
    return x + a @ p[pre + "mlp.down_proj.weight"].t()


def forward(cfg, p, tokens, mode):
    _, T = tokens.shape
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    theta = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
    emb = torch.cat([torch.outer(torch.arange(T).float(), inv_freq)] * 2, dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float("-inf")).triu(1)
    x = p["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        if mode == "full":
            x = checkpoint(layer, cfg, p, pre, x, cos, sin, mask, "none", use_reentrant=False)
        else:
            x = layer(cfg, p, pre, x, cos, sin, mask, mode)
    x = rms_norm(x, p["model.norm.weight"], cfg.get("rms_norm_eps", 1e-6))
    head = p["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else p["lm_head.weight"]
    return x @ head.t()


def main():
    cfg_path, batch, seq, steps, threads = sys.argv[1], *map(int, sys.argv[2:6])
    mode = sys.argv[6]
    precision = sys.argv[7] if len(sys.argv) > 7 else "fp32"
    cfg, params, opt, g = common.setup(cfg_path, threads)
    with torch.no_grad():  # the layered model is the reference model
        tokens = torch.randint(0, cfg["vocab_size"], (1, 17), generator=g)
        a = ref.loss_fn(ref.forward(cfg, params, tokens[:, :-1]), tokens[:, 1:]).item()
        b = ref.loss_fn(forward(cfg, params, tokens[:, :-1], "none"), tokens[:, 1:]).item()
        assert abs(a - b) <= 1e-5 * abs(a), (a, b)
    times, cpu, losses = common.train(cfg, params, opt, g, batch, seq, steps,
                                      lambda tokens: forward(cfg, params, tokens, mode), precision)
    print(json.dumps({"mode": mode, "precision": precision,
                      "step_s": common.median_after_first(times),
                      "step_cpu_s": common.median_after_first(cpu), "losses": losses,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
