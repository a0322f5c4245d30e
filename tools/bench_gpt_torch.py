#!/usr/bin/env python3
"""PyTorch eager twin of `zt-bench gpt`, for side-by-side timing.

The model is zt's GPT (apps/vqgpt/model/gpt.cpp) with its key names: token and learned
position embeddings, pre-LayerNorm blocks (x + attn(ln_1(x)), then x + mlp(ln_2(x))),
causal multi-head attention with one q/k/v projection (--qkv fused, the default, as
GPT-2's c_attn and zt-bench gpt's default) or three (--qkv separate), an out projection,
no biases, an MLP
E -> 4E -> E with tanh GELU, a final LayerNorm and a linear head without bias (untied, or
with --tie-embeddings the token table's matrix);
GPT-2 small's shape by default. The step is that of apps/bench/bench_gpt.cpp: random
tokens (B sequences of --seq + 1, inputs and shifted targets), cross-entropy on the logits
in fp32, backward, AdamW (lr 1e-4, betas 0.9/0.999, eps 1e-8, no weight decay: zt's
optimizer defaults; fused on CUDA, foreach otherwise). --dtype bf16 is PyTorch AMP: the
forward under torch.autocast(bfloat16) with fp32 weights, so the residual stream and
LayerNorm stay fp32, each GEMM casts its fp32 weight to bf16, and the loss takes an fp32
copy of the logits; zt instead keeps bf16 parameters with fp32 master shards. --dtype
bf16-pure is a bound on that difference: model.bfloat16() (bf16 weights, activations and
AdamW state, no fp32 masters), no autocast, the loss on the bf16 logits.
Attention is F.scaled_dot_product_attention pinned to one backend for the whole run (the
JSON says which): --sdpa auto takes the first of flash, efficient, cudnn, math that runs
these shapes. One warm-up step, then medians of --steps timed steps in wall time,
synchronizing at the phase boundaries: forward_ms (zero_grad, forward and loss),
backward_ms, optimizer_ms, step_ms (their sum), tokens_per_s, and zt's FLOP count
(6 N + 12 L E T) x tokens (N without the lookup tables: wpe, and wte unless tied), as
tflops and mfu against --peak-tflops (on CUDA by default
an H200's dense 989 for bf16 and 67 for f32). Only torch and the standard library are
used; not used by the test suite.

    python3 tools/bench_gpt_torch.py [--layers 12 --width 768 --heads 12 --seq 1024
        --vocab 50304] [--batch 4] [--steps 3] [--device cpu|cuda] [--dtype f32|bf16|bf16-pure]
        [--threads N] [--sdpa auto|flash|efficient|cudnn|math] [--tf32 none|all]
        [--tie-embeddings] [--qkv fused|separate]
"""
import argparse
import contextlib
import json
import math
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# The backends this PyTorch has (CUDNN_ATTENTION is newer than the others).
BACKENDS = {name: getattr(SDPBackend, attr) for name, attr in
            [("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
             ("cudnn", "CUDNN_ATTENTION"), ("math", "MATH")] if hasattr(SDPBackend, attr)}


def zt_count_parameters(v, t, layers, e, tied):
    """gpt::GptSpec::count_parameters, written out again."""
    ln = 2 * e
    attn = 4 * e * e
    mlp = (e * 4 * e + 4 * e) + (4 * e * e + e)
    return v * e + t * e + layers * (2 * ln + attn + mlp) + ln + (0 if tied else v * e)


class Attention(nn.Module):
    def __init__(self, e, heads, fused_qkv):
        super().__init__()
        self.heads = heads
        if fused_qkv:  # GPT-2's c_attn, as zt's qkv_proj
            self.qkv_proj = nn.Linear(e, 3 * e, bias=False)
        else:
            self.q_proj, self.k_proj, self.v_proj = (
                nn.Linear(e, e, bias=False) for _ in range(3))
        self.out_proj = nn.Linear(e, e, bias=False)

    def forward(self, x):  # (B, T, E)
        b, t, e = x.shape

        def split(y):  # (B, T, E) -> (B, H, T, E / H)
            return y.view(b, t, self.heads, e // self.heads).transpose(1, 2)

        if hasattr(self, "qkv_proj"):
            q, k, v = self.qkv_proj(x).split(e, dim=2)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        y = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, e))


class Mlp(nn.Module):
    def __init__(self, e):
        super().__init__()
        self.fc = nn.Linear(e, 4 * e)
        self.proj = nn.Linear(4 * e, e)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, e, heads, fused_qkv):
        super().__init__()
        self.ln_1 = nn.LayerNorm(e)
        self.attn = Attention(e, heads, fused_qkv)
        self.ln_2 = nn.LayerNorm(e)
        self.mlp = Mlp(e)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, seq, layers, e, heads, tied, fused_qkv):
        super().__init__()
        self.wte = nn.Embedding(vocab, e)
        self.wpe = nn.Embedding(seq, e)
        self.blocks = nn.ModuleList(Block(e, heads, fused_qkv) for _ in range(layers))
        self.ln_f = nn.LayerNorm(e)
        self.head = nn.Linear(e, vocab, bias=False)
        if tied:  # zt keeps the head's initialization for the shared matrix
            self.wte.weight = self.head.weight

    def forward(self, ids):  # (B, T) -> logits (B, T, V)
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def pick_sdpa(name, shape, dtype, device):
    """The backend to pin: the named one, or with auto the first that runs these shapes."""
    names = list(BACKENDS) if name == "auto" else [name]
    for n in names:
        q, k, v = (torch.randn(shape, dtype=dtype, device=device, requires_grad=True)
                   for _ in range(3))
        try:
            with warnings.catch_warnings(), sdpa_kernel(BACKENDS[n]):
                warnings.simplefilter("ignore")
                F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
            return n
        except (RuntimeError, NotImplementedError) as e:
            if name != "auto":
                sys.exit(f"bench_gpt_torch: --sdpa {name} cannot run {tuple(shape)} {dtype} on "
                         f"{device}: {str(e).splitlines()[0]} (try --sdpa auto)")
    sys.exit("bench_gpt_torch: no scaled_dot_product_attention backend runs these shapes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=1024, help="context length")
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--batch", type=int, default=4, help="sequences per step")
    ap.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up step)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", choices=["f32", "bf16", "bf16-pure"], default="f32",
                    help="bf16: autocast with fp32 weights (AMP); bf16-pure: bf16 weights, "
                    "no autocast, the loss on bf16 logits")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    ap.add_argument("--sdpa", choices=["auto"] + list(BACKENDS), default="auto")
    ap.add_argument("--tf32", choices=["none", "all"], default="none",
                    help="TF32 matmuls for f32 on CUDA (zt-bench gpt uses none)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--tie-embeddings", action="store_true",
                    help="one matrix for the token table and the output head")
    ap.add_argument("--qkv", choices=["fused", "separate"], default="fused",
                    help="one q/k/v projection per block (GPT-2's c_attn), or three (as zt-bench)")
    ap.add_argument("--peak-tflops", type=float, default=-1.0,
                    help="dense peak for --dtype, for MFU (default: an H200's on cuda)")
    a = ap.parse_args()
    if a.peak_tflops != -1.0 and not (math.isfinite(a.peak_tflops) and a.peak_tflops > 0):
        ap.error(f"--peak-tflops must be a finite number above 0, got {a.peak_tflops}")
    for name in ("layers", "width", "heads", "seq", "vocab", "batch", "steps"):
        if getattr(a, name) < 1:  # as zt-bench gpt's (a traceback, or a run of nothing)
            ap.error(f"--{name} must be at least 1, got {getattr(a, name)}")
    if a.width % a.heads:
        sys.exit(f"bench_gpt_torch: --width {a.width} is not a multiple of --heads {a.heads}")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_gpt_torch: --device cuda needs a PyTorch with CUDA and a GPU")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = a.tf32 == "all"
    torch.backends.cudnn.allow_tf32 = a.tf32 == "all"
    peak = a.peak_tflops
    if peak < 0:
        # f32 under --tf32 all multiplies on TF32 tensor cores: their peak (as zt-bench's).
        peak = ((494.7 if a.tf32 == "all" else 67.0) if a.dtype == "f32" else 989.0) \
            if a.device == "cuda" else 0.0
    dev = torch.device(a.device)
    torch.manual_seed(1)
    model = Gpt(a.vocab, a.seq, a.layers, a.width, a.heads, a.tie_embeddings,
                a.qkv == "fused").to(dev)
    pure = a.dtype == "bf16-pure"
    if pure:
        model = model.bfloat16()
    n = sum(p.numel() for p in model.parameters())
    zt_n = zt_count_parameters(a.vocab, a.seq, a.layers, a.width, a.tie_embeddings)
    if n != zt_n:
        sys.exit(f"bench_gpt_torch: {n} parameters, zt's model has {zt_n}: the model here no "
                 "longer matches apps/vqgpt/model/gpt.cpp")
    fused = a.device == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0, **({"fused": True} if fused else {"foreach": True}))
    autocast = a.dtype == "bf16"
    sdpa = pick_sdpa(a.sdpa, (a.batch, a.heads, a.seq, a.width // a.heads),
                     torch.bfloat16 if autocast or pure else torch.float32, dev)
    fwd_model = torch.compile(model) if a.compile else model
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g).to(dev)
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def now():
        if a.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def amp():
        if not autocast:
            return contextlib.nullcontext()
        return torch.autocast(device_type=a.device, dtype=torch.bfloat16)

    fwd, bwd, optim, total = [], [], [], []
    loss = 0.0
    with sdpa_kernel(BACKENDS[sdpa]):
        for i in range(a.steps + 1):
            t0 = now()
            opt.zero_grad(set_to_none=True)
            with amp():
                logits = fwd_model(inputs)
            l = F.cross_entropy((logits if pure else logits.float()).view(-1, a.vocab),
                                targets.view(-1))
            t1 = now()
            l.backward()
            t2 = now()
            opt.step()
            t3 = now()
            loss = l.item()
            if i == 0:
                continue  # warm-up
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            optim.append(t3 - t2)
            total.append(t3 - t0)

    def ms(v):
        return round(1e3 * statistics.median(v), 2)

    tokens = a.batch * a.seq
    n_matmul = n - (a.seq + (0 if a.tie_embeddings else a.vocab)) * a.width  # lookups
    flops = (6.0 * n_matmul + 12.0 * a.layers * a.width * a.seq) * tokens
    step_s = statistics.median(total)
    tflops = flops / step_s / 1e12
    out = {"bench": "gpt-torch", "device": a.device, "dtype": a.dtype, "layers": a.layers,
           "tied": a.tie_embeddings, "qkv": a.qkv, "width": a.width, "heads": a.heads, "seq": a.seq, "vocab": a.vocab,
           "batch": a.batch, "batch_per_rank": a.batch, "threads": torch.get_num_threads(), "params": n, "zt_params": zt_n,
           "tokens_per_step": tokens, "forward_ms": ms(fwd), "backward_ms": ms(bwd),
           "optimizer_ms": ms(optim), "step_ms": ms(total),
           "tokens_per_s": round(tokens / step_s, 1), "tflops": round(tflops, 4),
           "peak_tflops": peak, "mfu": round(tflops / peak, 4) if peak > 0 else None,
           "loss": round(loss, 4), "sdpa": sdpa, "adamw": "fused" if fused else "foreach",
           "tf32": a.tf32 if a.device == "cuda" else "none", "compile": a.compile,
           "torch": torch.__version__}
    if a.device == "cuda":
        out["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
