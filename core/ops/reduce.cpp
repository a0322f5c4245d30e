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
  for (int64_t d : dims_in) p.reduced[wrap_dim(d, a.dim(), op)] = true;
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
  int64_t rows = p.count == 0 ? 0 : x.numel() / std::max<int64_t>(p.count, 1);
  if (p.count == 0) rows = shape_numel(p.out);
  Tensor out = Tensor::empty(p.out, a.dtype(), a.device());
  if (p.count == 0) {
    out.zero_();
  } else {
    ZT_DISPATCH(a.device(), sum_rows, out, x, rows, p.count);
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
  ZT_CHECK(p.count > 0, "mean of an empty tensor");
  return mul(sum(a, dims, keepdim), 1.0 / static_cast<double>(p.count));
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  ReducePlan p = plan_reduce(a, dims, keepdim, "var");
  ZT_CHECK(p.count > (unbiased ? 1 : 0), "var: need at least ", unbiased ? 2 : 1,
           " elements per reduction, got ", p.count);
  Tensor d = sub(a, mean(a, dims, true));
  Tensor s = sum(mul(d, d), dims, keepdim);
  return mul(s, 1.0 / static_cast<double>(unbiased ? p.count - 1 : p.count));
}

namespace {
Tensor arg_extreme(const Tensor& a, int64_t dim, bool keepdim, bool want_max) {
  dim = wrap_dim(dim, a.dim(), want_max ? "argmax" : "argmin");
  ZT_CHECK(a.size(dim) > 0, "argmax/argmin over an empty dimension");
  ReducePlan p = plan_reduce(a, {dim}, keepdim, "argmax");
  Tensor x = reduced_last(a, p);
  const int64_t n = p.count, rows = x.numel() / n;
  Tensor out = Tensor::empty(p.out, DType::i64, a.device());
  ZT_DISPATCH(a.device(), arg_extreme, out, x, rows, n, want_max);
  return out;
}

Tensor extreme(const Tensor& a, int64_t dim, bool keepdim, bool want_max) {
  Tensor idx = arg_extreme(a, dim, true, want_max);
  Tensor v = gather(a, dim, idx);
  return keepdim ? v : v.squeeze(dim);
}
}  // namespace

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, true);
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, false);
}
Tensor max(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme(a, dim, keepdim, true);
}
Tensor min(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme(a, dim, keepdim, false);
}
Tensor max(const Tensor& a) {
  return max(a.reshape({-1}), 0);
}
Tensor min(const Tensor& a) {
  return min(a.reshape({-1}), 0);
}

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  ZT_CHECK(p > 0, "norm: p must be positive, got ", p);
  if (p == 2.0) return sqrt(sum(mul(a, a), dims, keepdim));
  if (p == 1.0) return sum(abs(a), dims, keepdim);
  return pow(sum(pow(abs(a), p), dims, keepdim), 1.0 / p);
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
