#!/usr/bin/env python3
"""PyTorch eager twin of `zt-bench ops`'s convolution and linear cases, for side-by-side timing.

The same shapes as apps/bench/bench_ops.cpp (the tiny tokenizer's encoder levels, batch 8
clips x 4 frames): conv2d k3x3 p1 C->C at (32, C, H, W), the causal conv3d k3x3x3 of the
temporal blocks, a depthwise 7x7 conv2d and a k4 s2 transposed conv2d at the 16x16 / 8x8
levels, and linear 1024x512 -> 512. fwd_ms is the forward alone, fwd_bwd_ms the
forward plus backward into the input, weight and bias (gradients reset each time), both
the median of --reps timed calls after two warm-up calls. One JSON line per case, shaped
like zt-bench's. Not used by the test suite.

    python3 tools/bench_ops_torch.py [--threads 1] [--reps 20] [--filter conv]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def timed(fn, reps):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cases():
    g = torch.Generator().manual_seed(1)

    def leaf(*s):
        return torch.randn(*s, generator=g).requires_grad_(True)

    for n, c, h, w in [(32, 32, 32, 32), (32, 64, 16, 16), (32, 64, 8, 8), (32, 128, 4, 4)]:
        x, wt, b = leaf(n, c, h, w), leaf(c, c, 3, 3), leaf(c)
        yield ("conv2d", f"{n}x{c}x{h}x{w} k3x3 p1 O{c}", [x, wt, b],
               lambda x=x, wt=wt, b=b: F.conv2d(x, wt, b, padding=1))
    x, wt, b = leaf(8, 4, 4, 4, 4), leaf(4, 4, 3, 3, 3), leaf(4)
    yield ("conv3d", "8x4x4x4x4 k3x3x3 causal O4", [x, wt, b],
           lambda: F.conv3d(F.pad(x, (1, 1, 1, 1, 2, 0)), wt, b))
    x, wt, b = leaf(32, 64, 16, 16), leaf(64, 1, 7, 7), leaf(64)
    yield ("conv2d", "32x64x16x16 k7x7 p3 depthwise", [x, wt, b],
           lambda: F.conv2d(x, wt, b, padding=3, groups=64))
    xt, wtt = leaf(32, 64, 8, 8), leaf(64, 64, 4, 4)
    yield ("conv_transpose2d", "32x64x8x8 k4x4 s2 p1 O64", [xt, wtt, b],
           lambda: F.conv_transpose2d(xt, wtt, b, stride=2, padding=1))
    x, wt, b = leaf(1024, 512), leaf(512, 512), leaf(512)
    yield ("linear", "1024x512 -> 512", [x, wt, b], lambda: F.linear(x, wt, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--filter", default="")
    a = ap.parse_args()
    if a.reps < 1 or a.threads < 1:
        ap.error("--reps and --threads must be at least 1")
    torch.set_num_threads(a.threads)
    matched = 0
    for op, shape, leaves, fwd in cases():  # in turn: each case's lambda reads its leaves
        if a.filter not in f"{op} {shape}":
            continue
        matched += 1
        with torch.no_grad():
            gy = torch.randn_like(fwd())

        def forward_only():
            with torch.no_grad():
                fwd()

        def forward_backward():
            for t in leaves:
                t.grad = None
            fwd().backward(gy)

        print(json.dumps({"bench": "ops_torch", "op": op, "shape": shape, "threads": a.threads,
                          "fwd_ms": round(timed(forward_only, a.reps) * 1e3, 4),
                          "fwd_bwd_ms": round(timed(forward_backward, a.reps) * 1e3, 4)}),
              flush=True)
    if not matched:  # as zt-bench ops, which says so (exit 1) rather than print nothing
        sys.exit(f"bench_ops_torch: no case matches --filter '{a.filter}' (a part of "
                 "\"op shape\", e.g. 'conv2d' or 'linear')")


if __name__ == "__main__":
    main()
