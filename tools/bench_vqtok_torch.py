#!/usr/bin/env python3
"""PyTorch eager twin of `zt-bench vqtok-step`, for side-by-side timing.

The model is zt's default tokenizer (config::ModelConfig{}: codebook 1024, embed_dim and
z_channels 4, ch 32, ch_mult [1, 2, 2, 4], 2 res blocks, attention at level 3, temporal
factor 4, no dropout; docs/EMU3_TOKENIZER.md), written from apps/vqtok/model/*.cpp with
the same state-dict key names, layer for layer: GroupNorm(32, eps 1e-6) in the encoder,
zq-conditioned SpatialNorm in the decoder, single-head attention per frame, causal Conv3d
(2 frames padded in front), BatchNorm3d temporal res blocks, a codebook searched by
squared L2 distance with the straight-through estimator. As in zt, the decoder resizes its
conditioning map zq once per level (and once for norm_out), not in each SpatialNorm, so
both run the same interpolations. Zero pads that are not symmetric (Downsample's right /
bottom pad, CausalConv3d's 2 frames in front) stay separate F.pad calls: PyTorch's
convolutions take symmetric padding only, where zt folds them into the convolution (so
PyTorch runs a pad kernel more per such convolution). The step is that of
apps/bench/bench_vqtok_step.cpp: B clips x 4 frames x 3 x 32 x 32 uniform in [-1, 1),
loss = mse + l1 + vq loss (codebook + 0.25 commit), backward, AdamW (lr 1e-4, weight
decay 0.01; fused on CUDA, foreach otherwise). One warm-up step, then --steps timed steps;
the JSON line reports medians of the phases with zt-bench's field names: forward_ms
(zero_grad, forward and loss), backward_ms, step_ms (optimizer), total_ms, total_wall_ms.
On the CPU the phases are process CPU time (as zt-bench: the machine may be shared) and
total_wall_ms wall time; on CUDA all are wall times, synchronizing at each phase boundary.
The parameter count is checked against zt's (VqModel::count_parameters for the default
config); --check-keys compares the state-dict names and shapes with a safetensors file
that `vqtok export` wrote for the same config. Only torch and the standard library are
used; not used by the test suite.

    python3 tools/bench_vqtok_torch.py [--batch 8] [--steps 3] [--device cpu|cuda]
        [--threads 1] [--tf32 conv|all|none] [--compile] [--check-keys FILE.safetensors]
"""
import argparse
import json
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# zt's VqModel::count_parameters(config::ModelConfig{}) (also `vqtok plan`'s parameter
# shard at one rank for that config: 17,154,940 bytes / 4).
ZT_PARAMS = 4_288_735

CODEBOOK, EMBED, Z, CH, CH_MULT, BLOCKS, ATTN_LEVELS, TIME_FACTOR = (
    1024, 4, 4, 32, (1, 2, 2, 4), 2, (3,), 4)


def conv2d(i, o, k, **kw):
    """A Conv2d with the released model's init: kaiming normal (fan_out, relu) weight."""
    c = nn.Conv2d(i, o, k, **kw)
    nn.init.kaiming_normal_(c.weight, mode="fan_out", nonlinearity="relu")
    return c


def group_norm(c):
    return nn.GroupNorm(32, c, eps=1e-6)


def resized_like(zq, x):
    """zq resized (nearest) to x's H, W; zq itself where the sizes are already equal."""
    if zq is None or zq.shape[-2:] == x.shape[-2:]:
        return zq
    return F.interpolate(zq, size=x.shape[-2:], mode="nearest")


class SpatialNorm(nn.Module):
    """GN(x) * conv_y(zq') + conv_b(zq'), zq' = zq resized (nearest) to x's H, W. The decoder
    passes zq already resized (once per level, as zt's Level does), so none happens here."""

    def __init__(self, c, zq_c):
        super().__init__()
        self.norm_layer = group_norm(c)
        self.conv_y = conv2d(zq_c, c, 1)
        self.conv_b = conv2d(zq_c, c, 1)

    def forward(self, x, zq):
        zq = resized_like(zq, x)
        return self.norm_layer(x) * self.conv_y(zq) + self.conv_b(zq)


def make_norm(c, zq_c):
    return SpatialNorm(c, zq_c) if zq_c else group_norm(c)


def call_norm(norm, x, zq):
    return norm(x) if zq is None else norm(x, zq)


class ResnetBlock(nn.Module):
    def __init__(self, i, o, zq_c):
        super().__init__()
        self.norm1 = make_norm(i, zq_c)
        self.conv1 = conv2d(i, o, 3, padding=1)
        self.norm2 = make_norm(o, zq_c)
        self.conv2 = conv2d(o, o, 3, padding=1)
        self.nin_shortcut = conv2d(i, o, 1) if i != o else None

    def forward(self, x, zq=None):
        h = self.conv1(F.silu(call_norm(self.norm1, x, zq)))
        h = self.conv2(F.silu(call_norm(self.norm2, h, zq)))
        return (x if self.nin_shortcut is None else self.nin_shortcut(x)) + h


class AttnBlock(nn.Module):
    """Single-head self-attention over the H*W positions of each frame (scale 1/sqrt(C))."""

    def __init__(self, c, zq_c):
        super().__init__()
        self.norm = make_norm(c, zq_c)
        self.q, self.k, self.v, self.proj_out = (conv2d(c, c, 1) for _ in range(4))

    def forward(self, x, zq=None):
        n, c, hh, ww = x.shape
        h = call_norm(self.norm, x, zq)

        def tokens(y):
            return y.reshape(n, c, hh * ww).transpose(1, 2)  # (N, HW, C)

        a = F.scaled_dot_product_attention(tokens(self.q(h)), tokens(self.k(h)), tokens(self.v(h)))
        return x + self.proj_out(a.transpose(1, 2).reshape(n, c, hh, ww))


class Downsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = conv2d(c, c, 3, stride=2)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)))


class Upsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Level(nn.Module):
    """block.{j} (each followed by attn.{j} where the level has attention), then resample."""

    def __init__(self, i, o, blocks, attention, resample, zq_c):
        super().__init__()
        self.block = nn.ModuleList(ResnetBlock(i if j == 0 else o, o, zq_c) for j in range(blocks))
        self.attn = nn.ModuleList(AttnBlock(o, zq_c) for _ in range(blocks if attention else 0))
        if resample == "downsample":
            self.downsample = Downsample(o)
        elif resample == "upsample":
            self.upsample = Upsample(o)
        self.resample = resample

    def forward(self, x, zq=None):
        zq = resized_like(zq, x)  # once for the level's blocks (its resample comes last)
        for j, b in enumerate(self.block):
            x = b(x, zq)
            if len(self.attn):
                x = self.attn[j](x, zq)
        if self.resample:
            x = getattr(self, self.resample)(x)
        return x


class MidBlock(nn.Module):
    def __init__(self, c, zq_c):
        super().__init__()
        self.block_1 = ResnetBlock(c, c, zq_c)
        self.attn_1 = AttnBlock(c, zq_c)
        self.block_2 = ResnetBlock(c, c, zq_c)

    def forward(self, x, zq=None):
        return self.block_2(self.attn_1(self.block_1(x, zq), zq), zq)


class CausalConv3d(nn.Module):
    """Conv3d padded 2 frames in front (none behind) and p = k - s spatially (ceil, floor)."""

    def __init__(self, i, o, kernel, stride=(1, 1, 1)):
        super().__init__()
        ph, pw = (kernel[d] - stride[d] for d in (1, 2))
        self.pad = ((pw + 1) // 2, pw // 2, (ph + 1) // 2, ph // 2, 2, 0)
        self.conv = nn.Conv3d(i, o, kernel, stride=stride)
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        return self.conv(F.pad(x, self.pad))


class TemporalResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1 = nn.BatchNorm3d(c, eps=1e-5, momentum=0.1)
        self.conv1 = CausalConv3d(c, c, (3, 3, 3))
        self.norm2 = nn.BatchNorm3d(c, eps=1e-5, momentum=0.1)
        self.conv2 = CausalConv3d(c, c, (3, 3, 3))

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        return x + self.conv2(F.silu(self.norm2(h)))


class TemporalDownsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = CausalConv3d(c, c, (4, 3, 3), (2, 1, 1))

    def forward(self, x):
        return self.conv(x)


class TemporalUpsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = CausalConv3d(c, c, (3, 3, 3))

    def forward(self, x):
        return self.conv(x.repeat_interleave(2, dim=2))


TIME_LAYERS = int(math.log2(TIME_FACTOR))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = conv2d(3, CH, 3, padding=1)
        widths = [CH] + [CH * m for m in CH_MULT]
        last = len(CH_MULT) - 1
        self.down = nn.ModuleList(
            Level(widths[i], widths[i + 1], BLOCKS, i in ATTN_LEVELS,
                  "downsample" if i < last else "", 0) for i in range(len(CH_MULT)))
        self.mid = MidBlock(widths[-1], 0)
        self.norm_out = group_norm(widths[-1])
        self.conv_out = conv2d(widths[-1], Z, 3, padding=1)
        self.time_conv = nn.ModuleList(TemporalDownsample(Z) for _ in range(TIME_LAYERS))
        self.time_res_stack = nn.Sequential(*(TemporalResBlock(Z) for _ in range(BLOCKS)))

    def forward(self, x):  # (B, T, 3, H, W) -> (B, T', Z, h, w)
        b, t = x.shape[:2]
        h = self.conv_in(x.reshape(b * t, *x.shape[2:]))
        for level in self.down:
            h = level(h)
        h = self.conv_out(F.silu(self.norm_out(self.mid(h))))
        h = h.reshape(b, t, *h.shape[1:]).permute(0, 2, 1, 3, 4)  # (B, Z, T, h, w)
        for tc in self.time_conv:
            h = F.silu(tc(h))
        return self.time_res_stack(h).permute(0, 2, 1, 3, 4)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.time_res_stack = nn.Sequential(*(TemporalResBlock(Z) for _ in range(BLOCKS)))
        self.time_conv = nn.ModuleList(TemporalUpsample(Z) for _ in range(TIME_LAYERS))
        top = CH * CH_MULT[-1]
        self.conv_in = conv2d(Z, top, 3, padding=1)
        self.mid = MidBlock(top, EMBED)
        ins = [CH * m for m in CH_MULT[1:]] + [top]  # level i's input: level i+1's output
        self.up = nn.ModuleList(
            Level(ins[i], CH * m, BLOCKS + 1, i in ATTN_LEVELS, "upsample" if i else "", EMBED)
            for i, m in enumerate(CH_MULT))
        self.norm_out = SpatialNorm(CH * CH_MULT[0], EMBED)
        self.conv_out = conv2d(CH * CH_MULT[0], 3, 3, padding=1)

    def forward(self, z, quant):  # both (B, T', Z, h, w) -> (B, T, 3, H, W)
        b, _, c, hh, ww = z.shape
        zz = torch.cat([z, quant], 0).permute(0, 2, 1, 3, 4)  # (2B, Z, T', h, w)
        zz = self.time_res_stack(zz)
        for tc in self.time_conv:
            zz = F.silu(tc(zz))
        zz = zz.permute(0, 2, 1, 3, 4)  # (2B, T, Z, h, w)
        t = zz.shape[1]
        h = zz[:b].reshape(b * t, c, hh, ww)
        zq = zz[b:].reshape(b * t, c, hh, ww)
        h = self.mid(self.conv_in(h), zq)
        for level in reversed(self.up):
            h = level(h, zq)
        h = self.conv_out(F.silu(self.norm_out(h, resized_like(zq, h))))
        return h.reshape(b, t, *h.shape[1:])


class Codebook(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(CODEBOOK, EMBED).uniform_(-1 / CODEBOOK, 1 / CODEBOOK))


class Quantizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = Codebook()

    def forward(self, z):  # (B, T', E, h, w) -> zq (straight-through), codes, loss_vq
        b, t, e, h, w = z.shape
        z_last = z.permute(0, 1, 3, 4, 2).reshape(-1, e)
        weight = self.embedding.weight
        with torch.no_grad():
            zd, wd = z_last.detach(), weight.detach()
            d = (zd * zd).sum(1, keepdim=True) + (wd * wd).sum(1) - 2.0 * zd @ wd.t()
            codes = d.argmin(1)
        zq = F.embedding(codes, weight).reshape(b, t, h, w, e).permute(0, 1, 4, 2, 3)
        loss_vq = F.mse_loss(zq, z.detach()) + 0.25 * F.mse_loss(z, zq.detach())
        return z + (zq - z).detach(), codes.reshape(b, t, h, w), loss_vq


class VqModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.quantize = Quantizer()
        self.quant_conv = CausalConv3d(Z, EMBED, (3, 1, 1))
        self.post_quant_conv = CausalConv3d(EMBED, Z, (3, 1, 1))

    def forward(self, video):  # (B, T, 3, H, W) -> recon, codes, loss_vq
        def swap(x):  # (B, T', C, h, w) <-> (B, C, T', h, w)
            return x.permute(0, 2, 1, 3, 4)

        z = swap(self.quant_conv(swap(self.encoder(video))))
        zq, codes, loss_vq = self.quantize(z)
        recon = self.decoder(swap(self.post_quant_conv(swap(zq))), zq)
        return recon, codes, loss_vq


def safetensors_shapes(path):
    """{name: shape} from a .safetensors file's header (8-byte length, then JSON)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}


def check_keys(model, path):
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    theirs = safetensors_shapes(path)
    # An export may hold parameters only, or buffers too: compare what it holds.
    missing = sorted(k for k in theirs if k not in ours)
    extra = sorted(k for k in ours if k not in theirs and not _is_buffer(k))
    shape = sorted(k for k in theirs if k in ours and ours[k] != theirs[k])
    for what, keys in (("in the file, not here", missing), ("here, not in the file", extra),
                       ("shapes differ", shape)):
        for k in keys[:20]:
            print(f"check-keys: {what}: {k} {ours.get(k)} vs {theirs.get(k)}", file=sys.stderr)
    return {"file": path, "keys": len(theirs), "missing": len(missing), "extra": len(extra),
            "shape_mismatch": len(shape), "ok": not (missing or extra or shape)}


def _is_buffer(key):
    return key.rsplit(".", 1)[-1] in ("running_mean", "running_var", "num_batches_tracked")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8, help="clips per batch (4 frames of 32x32)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up step)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (CPU)")
    ap.add_argument("--tf32", choices=["conv", "all", "none"], default="conv",
                    help="TF32 on CUDA: convolutions (zt's train.tf32 default), all, none")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--check-keys", metavar="FILE",
                    help="compare state-dict names and shapes with a `vqtok export` file")
    a = ap.parse_args()
    if min(a.steps, a.batch, a.threads) < 1:
        ap.error("--steps, --batch and --threads must be at least 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_vqtok_torch: --device cuda needs a PyTorch with CUDA and a GPU")
    torch.set_num_threads(a.threads)
    torch.backends.cudnn.allow_tf32 = a.tf32 in ("conv", "all")
    torch.backends.cuda.matmul.allow_tf32 = a.tf32 == "all"
    torch.backends.cudnn.benchmark = a.device == "cuda"  # zt caches its algorithm choices
    dev = torch.device(a.device)
    torch.manual_seed(6)
    model = VqModel()
    params = sum(p.numel() for p in model.parameters())
    if params != ZT_PARAMS:
        sys.exit(f"bench_vqtok_torch: {params} parameters, but zt's default tokenizer has "
                 f"{ZT_PARAMS}: the model here no longer matches apps/vqtok/model")
    keys = check_keys(model, a.check_keys) if a.check_keys else None
    model.to(dev).train()
    fused = a.device == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01,
                            **({"fused": True} if fused else {"foreach": True}))
    fwd_model = torch.compile(model) if a.compile else model
    video = (torch.rand(a.batch, 4, 3, 32, 32) * 2 - 1).to(dev)

    def clock():
        if a.device == "cuda":
            torch.cuda.synchronize()
            return time.perf_counter()
        return time.process_time()

    fwd, bwd, step, total, wall = [], [], [], [], []
    loss = 0.0
    for i in range(a.steps + 1):
        w0 = time.perf_counter()
        c0 = clock()
        opt.zero_grad(set_to_none=True)
        recon, _, loss_vq = fwd_model(video)
        l = F.mse_loss(recon, video) + F.l1_loss(recon, video) + loss_vq
        c1 = clock()
        l.backward()
        c2 = clock()
        opt.step()
        c3 = clock()
        w1 = time.perf_counter()
        loss = l.item()
        if i == 0:
            continue
        fwd.append(c1 - c0)
        bwd.append(c2 - c1)
        step.append(c3 - c2)
        total.append(c3 - c0)
        wall.append(w1 - w0)

    def ms(v):
        return round(1e3 * statistics.median(v), 1)

    out = {"bench": "vqtok-step-torch", "device": a.device, "batch": a.batch, "frames": 4,
           "size": 32, "threads": a.threads, "steps": a.steps, "forward_ms": ms(fwd),
           "backward_ms": ms(bwd), "step_ms": ms(step), "total_ms": ms(total),
           "total_wall_ms": ms(wall), "loss": round(loss, 6), "params": params,
           "zt_params": ZT_PARAMS, "adamw": "fused" if fused else "foreach",
           "tf32": a.tf32 if a.device == "cuda" else "none",
           "cudnn_benchmark": torch.backends.cudnn.benchmark, "compile": a.compile,
           "torch": torch.__version__}
    if keys is not None:
        out["check_keys"] = keys
    print(json.dumps(out), flush=True)
    if keys is not None and not keys["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
