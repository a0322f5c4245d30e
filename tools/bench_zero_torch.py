#!/usr/bin/env python3
"""PyTorch eager twin of `zt-bench zero`'s single-process step, for side-by-side timing.

The model, batch, loss and optimizer match apps/bench/bench_zero.cpp: `depth` blocks of
Linear(width, width) -> LayerNorm(width) -> GELU, batch 64, loss mean(y * y.detach()),
AdamW with zt's defaults (lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay), one
thread. Prints one JSON line with zt-bench's names for what both measure (its "single"
mode's step_ms; zt's inference forward, infer_ms, has no twin here). Not used by the
test suite.

    python3 tools/bench_zero_torch.py [--width 512] [--depth 8] [--batch 64] [--steps 30]
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.steps < 2 or min(a.width, a.depth, a.batch, a.threads) < 1:
        ap.error("--steps must be at least 2 (the first is a warm-up); the sizes at least 1")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    blocks = []
    for _ in range(a.depth):
        blocks += [torch.nn.Linear(a.width, a.width), torch.nn.LayerNorm(a.width), torch.nn.GELU()]
    model = torch.nn.Sequential(*blocks)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    x = torch.randn(a.batch, a.width)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        y = model(x)
        (y * y.detach()).mean().backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    step_ms = 1e3 * statistics.median(times[1:])
    print(json.dumps({"bench": "zero_torch", "mode": "single", "width": a.width, "depth": a.depth,
                      "batch": a.batch, "threads": a.threads, "torch": torch.__version__,
                      "step_ms": round(step_ms, 2)}))


if __name__ == "__main__":
    main()
