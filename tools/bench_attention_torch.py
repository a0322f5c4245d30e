#!/usr/bin/env python3
"""PyTorch eager twin of `zt-bench attention`, for side-by-side timing of fused attention.

F.scaled_dot_product_attention on (B, H, T, D) tensors of normals in --dtype, causal or
not, pinned to one backend (--sdpa auto takes the first of flash, efficient, cudnn, math
that runs the shapes; the JSON says which). Per pass, as zt-bench attention prints them:
the forward's median time over --reps calls (after two warm-up calls), and the backward's
(forward + backward minus forward), with TFLOP/s counted as FlashAttention counts them:
forward 4 B H T^2 D, backward 2.5x that, half of each under the causal mask. Only torch
and the standard library are used; not used by the test suite.

    python3 tools/bench_attention_torch.py [--batch 8 --heads 12 --seq 1024 --dim 64]
        [--causal true|false] [--dtype bf16|f16] [--device cuda|cpu] [--reps 20]
        [--sdpa auto|flash|efficient|cudnn|math]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {name: getattr(SDPBackend, attr) for name, attr in
            [("flash", "FLASH_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION"),
             ("cudnn", "CUDNN_ATTENTION"), ("math", "MATH")] if hasattr(SDPBackend, attr)}


def median_seconds(fn, device, reps):
    """Median wall time of fn over reps calls after two warm-up calls, synchronized."""
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--causal", choices=["true", "false"], default="true")
    p.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sdpa", choices=["auto"] + list(BACKENDS), default="auto")
    a = p.parse_args()
    for name in ("batch", "heads", "seq", "dim", "reps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be positive")
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    causal = a.causal == "true"
    g = torch.Generator().manual_seed(1)
    shape = (a.batch, a.heads, a.seq, a.dim)
    q, k, v, up = (torch.randn(shape, generator=g).to(dtype).to(a.device) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def step():
        for t in (q, k, v):
            t.grad = None
        forward().backward(up)

    names = list(BACKENDS) if a.sdpa == "auto" else [a.sdpa]
    backend, error = None, None
    for name in names:
        try:
            with sdpa_kernel(BACKENDS[name]):
                step()
            backend = name
            break
        except RuntimeError as e:  # this backend does not take these shapes here
            error = str(e).splitlines()[0]
    if backend is None:
        raise SystemExit(f"bench_attention_torch: no SDPA backend runs these shapes ({error})")
    fwd_flops = 4.0 * a.batch * a.heads * a.seq * a.seq * a.dim * (0.5 if causal else 1.0)
    with sdpa_kernel(BACKENDS[backend]):
        with torch.no_grad():
            fwd = median_seconds(forward, a.device, a.reps)
        both = median_seconds(step, a.device, a.reps)
    bwd = max(both - fwd, 1e-12)
    for name, sec, flops in (("forward", fwd, fwd_flops), ("backward", bwd, 2.5 * fwd_flops)):
        print(json.dumps({"bench": "attention-torch", "device": a.device, "dtype": a.dtype,
                          "batch": a.batch, "heads": a.heads, "seq": a.seq, "dim": a.dim,
                          "causal": causal, "pass": name, "sdpa": backend,
                          "ms": round(sec * 1e3, 4), "tflops": round(flops / sec / 1e12, 3),
                          "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
