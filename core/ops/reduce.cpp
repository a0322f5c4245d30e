// Reductions: permute reduced dims innermost, make contiguous, sum rows (double
// accumulation, fixed order: results do not depend on thread count). sum_squares is
// one fused kernel over the whole tensor.
#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

struct ReducePlan {
  std::vector<int64_t> dims;  // sorted, unique, wrapped
  std::vector<bool> reduced;
  Shape out_keep;  // keepdim shape
  Shape out;       // final shape
  int64_t count = 1;
};

ReducePlan plan_reduce(const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim,
                       const char* op) {
  ReducePlan p;
  p.reduced.assign(a.dim(), dims_in.empty());
  std::vector<bool> named(std::max<int64_t>(a.dim(), 1), false);
  for (int64_t d : dims_in) {
    // A 0-d tensor reduces over its one element (dim 0 or -1), as PyTorch's.
    const int64_t w = wrap_dim(d, std::max<int64_t>(a.dim(), 1), op);
    ZT_CHECK(!named[w], op, ": dimension ", w, " appears more than once in the dims");
    named[w] = true;
    if (a.dim() > 0) p.reduced[w] = true;
  }
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (p.reduced[d]) {
      p.dims.push_back(d);
      p.count *= a.sizes()[d];
      p.out_keep.push_back(1);
      if (keepdim) p.out.push_back(1);
    } else {
      p.out_keep.push_back(a.sizes()[d]);
      p.out.push_back(a.sizes()[d]);
    }
  }
  return p;
}

// Input permuted so that kept dims come first and reduced dims last, contiguous.
Tensor reduced_last(const Tensor& a, const ReducePlan& p) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!p.reduced[d]) perm.push_back(d);
  for (int64_t d : p.dims) perm.push_back(d);
  return a.detach().permute(perm).contiguous();
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  ReducePlan p = plan_reduce(a, dims, keepdim, "sum");
  Tensor x = reduced_last(a, p);
  Tensor out = Tensor::empty(p.out, a.dtype(), a.device());
  if (p.count == 0) {
    out.zero_();
  } else {
    ZT_DISPATCH(a.device(), sum_rows, out, x, x.numel() / p.count, p.count);
  }
  if (autograd::needs_grad({a})) {
    Shape in = a.sizes(), keep = p.out_keep;
    autograd::record("sum", {a}, {out}, [in, keep](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].reshape(keep).expand(in).contiguous()};
    });
  }
  return out;
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  ReducePlan p = plan_reduce(a, dims, keepdim, "mean");
  ZT_CHECK(is_floating(a.dtype()), "mean: expected a floating dtype, got ", dtype_name(a.dtype()),
           " (convert with .to(DType::f32))");
  ZT_CHECK(p.count > 0, "mean over ", dims.empty() ? "all dims" : "dims " + shape_str(dims), " of ",
           dtype_name(a.dtype()), shape_str(a.sizes()), ": no elements to average");
  // 16-bit inputs are averaged in f32 and rounded once (PyTorch's accumulate type).
  if (is_16bit_float(a.dtype())) return mean(a.to(DType::f32), dims, keepdim).to(a.dtype());
  return mul(sum(a, dims, keepdim), 1.0 / static_cast<double>(p.count));
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  ReducePlan p = plan_reduce(a, dims, keepdim, "var");
  ZT_CHECK(is_floating(a.dtype()), "var: expected a floating dtype, got ", dtype_name(a.dtype()),
           " (convert with .to(DType::f32))");
  ZT_CHECK(p.count > (unbiased ? 1 : 0), "var: need at least ", unbiased ? 2 : 1,
           " elements per reduction, got ", p.count);
  // In f32 for 16-bit inputs: a mean rounded to 8 bits before the subtraction would be
  // most of a small spread around a large mean.
  if (is_16bit_float(a.dtype()))
    return var(a.to(DType::f32), dims, unbiased, keepdim).to(a.dtype());
  // In f64 for f32 inputs, as PyTorch's CPU var accumulates: a deviation past 1.8e19
  // squares past the f32 range though the variance, a mean of squares, may be within it.
  if (a.dtype() == DType::f32) return var(a.to(DType::f64), dims, unbiased, keepdim).to(a.dtype());
  Tensor d = sub(a, mean(a, dims, true));
  Tensor s = sum(mul(d, d), dims, keepdim);
  return mul(s, 1.0 / static_cast<double>(unbiased ? p.count - 1 : p.count));
}

namespace {
// `op` names the caller in errors: argmax, argmin, max or min.
Tensor arg_extreme(const Tensor& a, int64_t dim, bool keepdim, bool want_max, const char* op) {
  if (a.dim() == 0) {  // its one element: index 0, a 0-d result
    wrap_dim(dim, 1, op);
    return arg_extreme(a.reshape({1}), 0, false, want_max, op);
  }
  dim = wrap_dim(dim, a.dim(), op);
  ZT_CHECK(a.size(dim) > 0, op, ": dimension ", dim, " of ", shape_str(a.sizes()),
           " is empty, so it has no ", want_max ? "maximum" : "minimum");
  ReducePlan p = plan_reduce(a, {dim}, keepdim, op);
  Tensor x = reduced_last(a, p);
  const int64_t n = p.count, rows = x.numel() / n;
  Tensor out = Tensor::empty(p.out, DType::i64, a.device());
  ZT_DISPATCH(a.device(), arg_extreme, out, x, rows, n, want_max);
  return out;
}

Tensor extreme(const Tensor& a, int64_t dim, bool keepdim, bool want_max) {
  const char* op = want_max ? "max" : "min";
  if (a.dim() == 0) {
    wrap_dim(dim, 1, op);
    return extreme(a.reshape({1}), 0, false, want_max);
  }
  Tensor idx = arg_extreme(a, dim, true, want_max, op);
  Tensor v = gather(a, dim, idx);
  return keepdim ? v : v.squeeze(dim);
}
}  // namespace

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, false, "argmin");
}
Tensor max(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme(a, dim, keepdim, true);
}
Tensor min(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme(a, dim, keepdim, false);
}
namespace {
// Over all elements, as PyTorch's: the value of the first extremum, and a gradient spread
// evenly over every element equal to it (every NaN, when the value is one).
Tensor extreme_all(const Tensor& a, bool want_max) {
  Tensor out;
  {
    autograd::NoGradGuard ng;
    out = extreme(a.reshape({-1}), 0, false, want_max);
  }
  if (autograd::needs_grad({a})) {
    const Tensor v = out.detach();
    autograd::record(want_max ? "max" : "min", {a}, {out},
                     [a, v](const std::vector<Tensor>& g) {
                       // The count in f32 for 16-bit a: f16 ends at 65504.
                       const bool nan = std::isnan(v.item());
                       const Tensor g32 = detail::widened(g[0]);
                       const Tensor hit = (nan ? ne(a, a) : eq(a, v)).to(g32.dtype());
                       return std::vector<Tensor>{mul(hit, div(g32, sum(hit))).to(a.dtype())};
                     },
                     {a, v});
  }
  return out;
}
}  // namespace

Tensor max(const Tensor& a) {
  return extreme_all(a, true);
}
Tensor min(const Tensor& a) {
  return extreme_all(a, false);
}

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  ZT_CHECK(p > 0 && std::isfinite(p), "norm: p must be positive and finite, got ", p,
           " (the max norm is max(abs(x)))");
  ZT_CHECK(is_floating(a.dtype()), "norm: expects a floating tensor, got ", a.str(),
           "; convert it first, e.g. x.to(DType::f32)");
  plan_reduce(a, dims, keepdim, "norm");  // errors name norm, not the ops it is built of
  if (p == 1.0) return sum(abs(a), dims, keepdim);
  // Powers overflow or underflow long before the norm does (the square of f32's 1e20, of
  // f16's 300, of bf16's 1e20 even in f32): summed in f64 and rounded once, as PyTorch's
  // CPU norms accumulate.
  if (a.dtype() != DType::f64) return norm(a.to(DType::f64), p, dims, keepdim).to(a.dtype());
  Tensor out;
  {
    autograd::NoGradGuard ng;
    out = p == 2.0 ? sqrt(sum(mul(a, a), dims, keepdim))
                   : pow(sum(pow(abs(a), p), dims, keepdim), 1.0 / p);
  }
  if (autograd::needs_grad({a})) {
    // d|x|_p / dx = x |x|^(p-2) / |x|_p^(p-1), and 0 where the norm or x is 0 (as
    // PyTorch's; the composed formula would give 0 * inf = NaN there).
    const Shape keep = plan_reduce(a, dims, true, "norm").out_keep;
    const Tensor o = out.detach();  // not out: its node would hold itself
    autograd::record(
        "norm", {a}, {out},
        [a, o, p, keep](const std::vector<Tensor>& g) {
          const Tensor n = o.reshape(keep), zero = zeros({}, a.dtype(), a.device());
          const Tensor scale =
              where(eq(n, zero), zero, div(g[0].reshape(keep), p == 2.0 ? n : pow(n, p - 1.0)));
          const Tensor dir = p == 2.0 ? a : where(eq(a, zero), zero, mul(a, pow(abs(a), p - 2.0)));
          return std::vector<Tensor>{mul(dir, scale)};
        },
        {a, o});
  }
  return out;
}

Tensor sum_squares(const Tensor& a) {
  ZT_CHECK(a.defined(), "sum_squares: the input tensor is undefined");
  ZT_CHECK(is_floating(a.dtype()), "sum_squares: expects a floating tensor (f32, f64, bf16 or ",
           "f16), got ", a.str(), "; convert it first, e.g. x.to(DType::f32)");
  const Tensor x = a.is_contiguous() ? a : a.detach().contiguous();  // no graph either way
  Tensor out = Tensor::empty({1}, DType::f64, a.device());
  ZT_DISPATCH(a.device(), sum_squares, out, x);
  return out;
}

}  // namespace zt
