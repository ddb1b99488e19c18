"""Reference Llama written with plain torch ops (the engine's numerical truth).

Independent of the engine: it follows the Hugging Face Llama definition (RMSNorm,
rotate-half rotary embeddings, grouped-query causal attention, SwiGLU MLP, LM head,
cross-entropy with label shift) and uses Hugging Face tensor names. Also holds the
small file helpers the engine tests share: a safetensors reader/writer and a writer of
the lote dataset format (data.bin / data.idx MMIDIDX / manifest.json).
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def save_safetensors(path, tensors):
    """tensors: dict name -> numpy array, or (uint16 array, "BF16") for bfloat16."""
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        if isinstance(arr, tuple):
            arr, code = np.ascontiguousarray(arr[0]), arr[1]
        else:
            arr = np.ascontiguousarray(arr)
            code = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                    np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}[arr.dtype]
        blob = arr.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def to_bfloat16(arr):
    """float32 array -> (uint16 bit patterns, "BF16"), rounding to nearest even."""
    bits = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16), "BF16"


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[base + b:base + e], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[base + b:base + e], dtype=_DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).copy()
    return out


def write_dataset(directory, docs, block_size, vocab_size, bos_id=1):
    """docs: list of token-id lists; BOS is prepended to each, then all are
    concatenated and cut into blocks of block_size (remainder dropped)."""
    os.makedirs(directory, exist_ok=True)
    stream = []
    for d in docs:
        stream.append(bos_id)
        stream.extend(d)
    n = len(stream) // block_size
    tokens = np.asarray(stream[:n * block_size], dtype=np.uint16 if vocab_size <= 65536 else np.int32)
    tokens.tofile(os.path.join(directory, "data.bin"))
    item = tokens.dtype.itemsize
    with open(os.path.join(directory, "data.idx"), "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", 8 if item == 2 else 4))
        f.write(struct.pack("<Q", n))
        f.write(struct.pack("<Q", n + 1))
        f.write(np.full(n, block_size, dtype=np.int32).tobytes())
        f.write((np.arange(n, dtype=np.int64) * block_size * item).tobytes())
        f.write(np.arange(n + 1, dtype=np.int64).tobytes())
    manifest = {"vocab_size": vocab_size, "block_size": block_size, "num_sequences": n,
                "num_tokens": n * block_size, "dtype": "uint16" if item == 2 else "int32",
                "tokenizer_sha256": "", "bos_id": bos_id}
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return tokens.reshape(n, block_size)


def param_shapes(cfg):
    c, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = c // nh
    shapes = {"model.embed_tokens.weight": (v, c)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes[p + "input_layernorm.weight"] = (c,)
        shapes[p + "self_attn.q_proj.weight"] = (nh * hd, c)
        shapes[p + "self_attn.k_proj.weight"] = (nkv * hd, c)
        shapes[p + "self_attn.v_proj.weight"] = (nkv * hd, c)
        shapes[p + "self_attn.o_proj.weight"] = (c, nh * hd)
        shapes[p + "post_attention_layernorm.weight"] = (c,)
        shapes[p + "mlp.gate_proj.weight"] = (i, c)
        shapes[p + "mlp.up_proj.weight"] = (i, c)
        shapes[p + "mlp.down_proj.weight"] = (c, i)
    shapes["model.norm.weight"] = (c,)
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (v, c)
    return shapes


def init_params(cfg, seed, std=0.02, norm_jitter=0.0):
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in param_shapes(cfg).items():
        if len(shape) == 1:
            params[name] = 1.0 + norm_jitter * torch.randn(shape, generator=g)
        else:
            params[name] = std * torch.randn(shape, generator=g)
    return params


def _rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def forward(cfg, p, tokens):
    """tokens: LongTensor [B, T] -> logits [B, T, V]."""
    B, T = tokens.shape
    c, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = c // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 10000.0)
    dtype = p["model.embed_tokens.weight"].dtype
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    x = p["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}."
        h = _rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = (h @ p[pre + "self_attn.q_proj.weight"].t()).view(B, T, nh, hd).transpose(1, 2)
        k = (h @ p[pre + "self_attn.k_proj.weight"].t()).view(B, T, nkv, hd).transpose(1, 2)
        v = (h @ p[pre + "self_attn.v_proj.weight"].t()).view(B, T, nkv, hd).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd) + mask
        y = torch.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).reshape(B, T, nh * hd)
        x = x + y @ p[pre + "self_attn.o_proj.weight"].t()
        h = _rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        a = F.silu(h @ p[pre + "mlp.gate_proj.weight"].t()) * (h @ p[pre + "mlp.up_proj.weight"].t())
        x = x + a @ p[pre + "mlp.down_proj.weight"].t()
    x = _rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else p["lm_head.weight"]
    return x @ head.t()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def make_adamw(params, lr, weight_decay):
    """AdamW as lote runs it: decay on matrices only, betas 0.9/0.999, eps 1e-6."""
    decay = [t for t in params.values() if t.dim() >= 2]
    no_decay = [t for t in params.values() if t.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-6)


def learning_rate(step, warmup, max_steps, peak):
    """1-based step: linear warmup then linear decay to 0 at max_steps."""
    if warmup > 0 and step <= warmup:
        return peak * step / warmup
    if max_steps <= warmup:
        return peak
    return peak * max(0.0, (max_steps - step) / (max_steps - warmup))
