// Shape ops that copy (pad, interpolate_nearest, repeat_interleave, repeat, cat, stack)
// and the view-returning split/chunk. Most are a strided copy between views of the input
// and the output (Tensor::copy_, any device), recorded as one autograd node whose
// backward reads the matching view of the output gradient. Nearest interpolation has
// its own kernels (core/cpu/index.cpp, core/cuda/index.cu).
#include "core/ops/shape.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

// The part of one dim that survives a (before, after) pad: `len` elements starting at
// `src` in the input and at `dst` in the output (negative pads crop).
struct PadRegion {
  int64_t src, dst, len;
};

void check_split_size(const char* op, int64_t size) {
  ZT_CHECK(size >= 1, op, ": piece size must be >= 1, got ", size);
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  ZT_CHECK(x.defined(), "pad: undefined input");
  ZT_CHECK(pads.size() % 2 == 0, "pad: pads must come in (before, after) pairs, got ", pads.size(),
           " values");
  const int64_t pairs = static_cast<int64_t>(pads.size()) / 2;
  ZT_CHECK(pairs <= x.dim(), "pad: ", pairs, " (before, after) pairs for a ", x.dim(), "-D input ",
           shape_str(x.sizes()), "; at most one pair per dim, last dim first");
  Shape os = x.sizes();
  std::vector<PadRegion> regions(x.dim());
  bool grows = false;
  for (int64_t d = 0; d < x.dim(); ++d) regions[d] = {0, 0, x.size(d)};
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t d = x.dim() - 1 - i, before = pads[2 * i], after = pads[2 * i + 1];
    const int64_t n = x.size(d);
    ZT_CHECK(
        !__builtin_add_overflow(n, before, &os[d]) && !__builtin_add_overflow(os[d], after, &os[d]),
        "pad: pads (", before, ", ", after, ") on dim ", d, " of input ", shape_str(x.sizes()),
        " give a size past 64 bits");
    ZT_CHECK(os[d] >= 0, "pad: pads (", before, ", ", after, ") on dim ", d, " of input ",
             shape_str(x.sizes()), " give a negative size ", os[d]);
    const int64_t src = std::max<int64_t>(0, -before);
    const int64_t len = std::max<int64_t>(0, n - src - std::max<int64_t>(0, -after));
    // Nothing copied (len 0) where negative pads crop all of x: the starts then stay in
    // the input and the output, as narrow asks.
    regions[d] = {std::min(src, n), std::min(std::max<int64_t>(0, before), os[d]), len};
    grows = grows || before > 0 || after > 0;
  }
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  if (grows) out.fill_(value);
  auto view_of = [regions](Tensor t, bool in) {
    for (size_t d = 0; d < regions.size(); ++d)
      t = t.narrow(static_cast<int64_t>(d), in ? regions[d].src : regions[d].dst, regions[d].len);
    return t;
  };
  if (x.numel() > 0 && out.numel() > 0) view_of(out, false).copy_(view_of(x.detach(), true));
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    bool crops = false;
    for (size_t d = 0; d < regions.size(); ++d) crops = crops || regions[d].len != xs[d];
    autograd::record("pad", {x}, {out}, [xs, crops, view_of](const std::vector<Tensor>& g) {
      if (!g[0].defined()) return std::vector<Tensor>(1);
      if (!crops) return std::vector<Tensor>{view_of(g[0], false)};
      Tensor gx = zeros(xs, g[0].dtype(), g[0].device());
      if (g[0].numel() > 0) view_of(gx, true).copy_(view_of(g[0], false));
      return std::vector<Tensor>{gx};
    });
  }
  return out;
}

Tensor interpolate_nearest(const Tensor& x, const Shape& size) {
  ZT_CHECK(x.defined(), "interpolate_nearest: undefined input");
  const int64_t sd = static_cast<int64_t>(size.size());
  ZT_CHECK(sd >= 1 && sd <= 3, "interpolate_nearest: size must name 1, 2 or 3 spatial dims, got ",
           shape_str(size));
  ZT_CHECK(x.dim() == sd + 2, "interpolate_nearest: input ", shape_str(x.sizes()),
           " must be (N, C, *spatial) with ", sd, " spatial dims to match size ", shape_str(size));
  ZT_CHECK(x.device().is_cpu() || x.device().is_cuda(), "interpolate_nearest: no kernel for ",
           x.device().str(), " yet; move the tensor to the CPU");
  const int64_t planes = x.size(0) * x.size(1);
  Shape in{1, 1, 1}, out_dhw{1, 1, 1};  // (D, H, W): 1-D and 2-D resizes have D (and H) 1
  Shape os = {x.size(0), x.size(1)};
  for (int64_t i = 0; i < sd; ++i) {
    const int64_t n = x.size(2 + i);
    ZT_CHECK(size[i] >= 1, "interpolate_nearest: output sizes must be >= 1, got ", shape_str(size));
    ZT_CHECK(n >= 1, "interpolate_nearest: cannot resize an empty spatial dim of input ",
             shape_str(x.sizes()));
    in[3 - sd + i] = n;
    out_dhw[3 - sd + i] = size[i];
    os.push_back(size[i]);
  }
  Tensor xc = x.detach().contiguous();
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  ZT_DISPATCH(x.device(), nearest_forward, out, xc, planes, in, out_dhw);
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record(
        "interpolate_nearest", {x}, {out}, [planes, in, out_dhw, xs](const std::vector<Tensor>& g) {
          if (!g[0].defined()) return std::vector<Tensor>(1);
          Tensor gx = Tensor::empty(xs, g[0].dtype(), g[0].device());
          ZT_DISPATCH(gx.device(), nearest_backward, gx, g[0].contiguous(), planes, in, out_dhw);
          return std::vector<Tensor>{gx};
        });
  }
  return out;
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim) {
  ZT_CHECK(x.defined(), "repeat_interleave: undefined input");
  ZT_CHECK(repeats >= 0, "repeat_interleave: repeats must be >= 0, got ", repeats);
  dim = wrap_dim(dim, x.dim(), "repeat_interleave");
  // out viewed as (..., n, repeats, ...) is x broadcast along the new repeats dim.
  Shape expanded = x.sizes();
  expanded.insert(expanded.begin() + dim + 1, repeats);
  Shape os = x.sizes();
  ZT_CHECK(!__builtin_mul_overflow(os[dim], repeats, &os[dim]), "repeat_interleave: ", repeats,
           " repeats of dim ", dim, " of input ", shape_str(x.sizes()),
           " give a size past 64 bits");
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  if (out.numel() > 0) out.view(expanded).copy_(x.detach().unsqueeze(dim + 1).expand(expanded));
  if (autograd::needs_grad({x})) {
    autograd::record("repeat_interleave", {x}, {out},
                     [expanded, dim](const std::vector<Tensor>& g) {
                       if (!g[0].defined()) return std::vector<Tensor>(1);
                       return std::vector<Tensor>{sum(g[0].reshape(expanded), {dim + 1})};
                     });
  }
  return out;
}

Tensor repeat(const Tensor& x, const Shape& repeats) {
  ZT_CHECK(x.defined(), "repeat: undefined input");
  const int64_t r = static_cast<int64_t>(repeats.size());
  ZT_CHECK(r >= x.dim(), "repeat: ", r, " repeat counts for a ", x.dim(), "-D input ",
           shape_str(x.sizes()), "; give at least one per dim");
  // out viewed as (r0, s0, r1, s1, ...) is x viewed as (1, s0, 1, s1, ...) broadcast.
  Shape padded(r - x.dim(), 1);
  padded.insert(padded.end(), x.sizes().begin(), x.sizes().end());
  Shape interleaved, expanded, os;
  std::vector<int64_t> tile_dims;
  for (int64_t i = 0; i < r; ++i) {
    ZT_CHECK(repeats[i] >= 0, "repeat: repeat counts must be >= 0, got ", shape_str(repeats));
    interleaved.insert(interleaved.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    tile_dims.push_back(2 * i);
    int64_t size = 0;
    ZT_CHECK(!__builtin_mul_overflow(repeats[i], padded[i], &size), "repeat: repeat counts ",
             shape_str(repeats), " of input ", shape_str(x.sizes()), " give a size past 64 bits");
    os.push_back(size);
  }
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  if (out.numel() > 0) out.view(expanded).copy_(x.detach().reshape(interleaved).expand(expanded));
  if (autograd::needs_grad({x})) {
    Shape xs = x.sizes();
    autograd::record("repeat", {x}, {out}, [expanded, tile_dims, xs](const std::vector<Tensor>& g) {
      if (!g[0].defined()) return std::vector<Tensor>(1);
      return std::vector<Tensor>{sum(g[0].reshape(expanded), tile_dims).reshape(xs)};
    });
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  ZT_CHECK(!xs.empty(), "cat: needs at least one tensor");
  const Tensor& ref = xs[0];
  ZT_CHECK(ref.defined() && ref.dim() >= 1, "cat: tensors must be defined and at least 1-D");
  dim = wrap_dim(dim, ref.dim(), "cat");
  Shape os = ref.sizes();
  os[dim] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    ZT_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    detail::check_same("cat", {ref, t});
    bool ok = t.dim() == ref.dim();
    for (int64_t d = 0; ok && d < ref.dim(); ++d) ok = d == dim || t.size(d) == ref.size(d);
    ZT_CHECK(ok, "cat: sizes must match except in dimension ", dim, ", but tensor ", i,
             " has shape ", shape_str(t.sizes()), " and tensor 0 has shape ",
             shape_str(ref.sizes()));
    os[dim] += t.size(dim);
  }
  Tensor out = Tensor::empty(os, ref.dtype(), ref.device());
  std::vector<int64_t> offsets;
  int64_t off = 0;
  for (const Tensor& t : xs) {
    offsets.push_back(off);
    if (t.numel() > 0) out.narrow(dim, off, t.size(dim)).copy_(t.detach());
    off += t.size(dim);
  }
  if (autograd::needs_grad(xs)) {
    std::vector<int64_t> lens;
    for (const Tensor& t : xs) lens.push_back(t.size(dim));
    autograd::record("cat", xs, {out}, [offsets, lens, dim](const std::vector<Tensor>& g) {
      std::vector<Tensor> gx(lens.size());
      if (!g[0].defined()) return gx;
      for (size_t i = 0; i < lens.size(); ++i) gx[i] = g[0].narrow(dim, offsets[i], lens[i]);
      return gx;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  ZT_CHECK(!xs.empty(), "stack: needs at least one tensor");
  const Tensor& ref = xs[0];
  ZT_CHECK(ref.defined(), "stack: tensor 0 is undefined");
  dim = wrap_dim(dim, ref.dim() + 1, "stack");
  for (size_t i = 0; i < xs.size(); ++i) {
    ZT_CHECK(xs[i].defined(), "stack: tensor ", i, " is undefined");
    detail::check_same("stack", {ref, xs[i]});
    ZT_CHECK(xs[i].sizes() == ref.sizes(), "stack: all tensors must have one shape, but tensor ", i,
             " has shape ", shape_str(xs[i].sizes()), " and tensor 0 has shape ",
             shape_str(ref.sizes()));
  }
  Shape os = ref.sizes();
  os.insert(os.begin() + dim, static_cast<int64_t>(xs.size()));
  Tensor out = Tensor::empty(os, ref.dtype(), ref.device());
  if (ref.numel() > 0) {
    for (size_t i = 0; i < xs.size(); ++i)
      out.select(dim, static_cast<int64_t>(i)).copy_(xs[i].detach());
  }
  if (autograd::needs_grad(xs)) {
    const int64_t n = static_cast<int64_t>(xs.size());
    autograd::record("stack", xs, {out}, [n, dim](const std::vector<Tensor>& g) {
      std::vector<Tensor> gx(n);
      if (!g[0].defined()) return gx;
      for (int64_t i = 0; i < n; ++i) gx[i] = g[0].select(dim, i);
      return gx;
    });
  }
  return out;
}

namespace {

// The tensor the gradients `g` of split's pieces (starting at `starts` along `dim`) are
// narrows of, when they are: every one defined, in one storage with one dtype and one
// set of strides, each `starts[i]` strides along dim past the first. Then that tensor
// (`sizes`, the pieces' strides) is the input's gradient with no copy: an op that wrote
// its inputs' gradients into one buffer laid out as split's input (the fused attention's
// dq, dk and dv of a packed q/k/v projection) hands it on as it is.
Tensor joined_gradient(const std::vector<Tensor>& g, const std::vector<int64_t>& starts,
                       int64_t dim, const Shape& sizes) {
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined() || g[i].impl()->storage == nullptr ||
        g[i].impl()->storage != g[0].impl()->storage || g[i].dtype() != g[0].dtype() ||
        g[i].strides() != g[0].strides() ||
        g[i].offset() != g[0].offset() + starts[i] * g[0].stride(dim))
      return Tensor();
  }
  return g[0].as_strided(sizes, g[0].strides(), g[0].offset());
}

}  // namespace

namespace {

// Views of x along dim (wrapped) of `lens` elements each, laid end to end from 0, with
// one autograd node for them all: split and chunk.
std::vector<Tensor> split_lengths(const Tensor& x, const std::vector<int64_t>& lens, int64_t dim) {
  // Views with no history (one node records them all), but flagged as a view of x made
  // here would be: under a NoGradGuard, of an x that requires grad, a write to a piece in
  // grad mode is refused as it is for x.narrow().
  // Of an x that requires no grad they are views of x itself, which a later
  // set_requires_grad on x makes views without history (refused in grad mode).
  Tensor base = x;
  if (x.requires_grad()) {
    base = x.detach();
    base.impl()->no_grad_view = x.impl()->no_grad_view || !autograd::grad_mode_enabled();
  }
  std::vector<Tensor> out;
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (int64_t len : lens) {
    out.push_back(base.narrow(dim, start, len));
    starts.push_back(start);
    start += len;
  }
  if (autograd::needs_grad({x})) {
    const Shape in_sizes = x.sizes();
    const DType dt = x.dtype();
    const Device dev = x.device();
    // One gradient for x from every piece's: as it is when they are narrows of one
    // tensor laid out as x, else copied into place (zeros for a piece without one).
    autograd::record("split", {x}, out, [=](const std::vector<Tensor>& g) {
      if (Tensor whole = joined_gradient(g, starts, dim, in_sizes); whole.defined())
        return std::vector<Tensor>{whole};
      Tensor gx = Tensor::empty(in_sizes, dt, dev);
      for (size_t i = 0; i < g.size(); ++i) {
        Tensor piece = gx.narrow(dim, starts[i], lens[i]);
        if (g[i].defined())
          piece.copy_(g[i]);
        else
          piece.zero_();
      }
      return std::vector<Tensor>{gx};
    });
  }
  return out;
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  ZT_CHECK(x.defined() && x.dim() >= 1, "split: input must be defined and at least 1-D");
  check_split_size("split", size);
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.size(dim);
  std::vector<int64_t> lens;  // one empty piece of an empty dim, as torch.split
  for (int64_t start = 0; start < n || (n == 0 && lens.empty()); start += size)
    lens.push_back(std::min(size, n - start));
  return split_lengths(x, lens, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ZT_CHECK(x.defined() && x.dim() >= 1, "chunk: input must be defined and at least 1-D");
  ZT_CHECK(chunks >= 1, "chunk: number of chunks must be >= 1, got ", chunks);
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.size(dim);
  // As torch.chunk: an empty dim gives `chunks` empty pieces, others pieces of
  // ceil(n / chunks), so there may be fewer than `chunks`.
  if (n == 0) return split_lengths(x, std::vector<int64_t>(chunks, 0), dim);
  return split(x, (n + chunks - 1) / chunks, dim);
}

}  // namespace zt
