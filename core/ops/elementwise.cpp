// Elementwise ops: broadcasting, kernels and gradients.
#include "core/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

using detail::widened;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ZT_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  // The inverse of expand: shape must broadcast to t's (another of t's element count would
  // otherwise come out as a reshape of t).
  bool fits = static_cast<int64_t>(shape.size()) <= t.dim();
  for (size_t i = 0; fits && i < shape.size(); ++i)
    fits = shape[i] == 1 || shape[i] == t.sizes()[t.dim() - shape.size() + i];
  ZT_CHECK(fits, "sum_to: shape ", shape_str(shape), " does not broadcast to the tensor's ",
           shape_str(t.sizes()));
  std::vector<int64_t> dims;
  size_t lead = t.dim() - shape.size();
  for (size_t i = 0; i < static_cast<size_t>(t.dim()); ++i) {
    if (i < lead || (shape[i - lead] == 1 && t.sizes()[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  }
  Tensor s = dims.empty() ? t : sum(t, dims, true);
  return s.reshape(shape);
}

namespace {

Tensor unary_op(const char* name, UnaryOp op, const Tensor& a, double p0 = 0, double p1 = 0) {
  ZT_CHECK(a.defined(), name, ": undefined input");
  detail::check_floating(name, a);
  Tensor out = Tensor::empty(a.sizes(), a.dtype(), a.device());
  ZT_DISPATCH(a.device(), unary, op, out, a, p0, p1);
  return out;
}

// With `floating`, integer operands are an error naming `name` (arithmetic has no integer
// kernels; comparisons do).
Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype,
                 bool floating = false) {
  detail::check_same(name, {a, b});
  if (floating) detail::check_floating(name, a);
  Shape s = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor out = Tensor::empty(s, out_dtype, a.device());
  Tensor ea = a.sizes() == s ? a : a.detach().expand(s);
  Tensor eb = b.sizes() == s ? b : b.detach().expand(s);
  ZT_DISPATCH(a.device(), binary, op, out, ea, eb);
  return out;
}

Tensor binary_float(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  return binary_op(name, op, a, b, a.dtype(), /*floating=*/true);
}

// Unary op whose gradient is grad_op(g, saved) with saved = input or output.
Tensor unary_with_grad(const char* name, UnaryOp op, BinaryOp grad_op, const Tensor& a,
                       bool save_output) {
  Tensor out = unary_op(name, op, a);
  if (autograd::needs_grad({a})) {
    Tensor saved = save_output ? out.detach() : a;
    autograd::record(name, {a}, {out},
                     [grad_op, saved, name](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{binary_float(name, grad_op, g[0], saved)};
                     },
                     {saved});
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float("add", BinaryOp::kAdd, a, b);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.sizes(), sb = b.sizes();
    autograd::record("add", {a, b}, {out}, [sa, sb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), sum_to(g[0], sb)};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float("sub", BinaryOp::kSub, a, b);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.sizes(), sb = b.sizes();
    autograd::record("sub", {a, b}, {out}, [sa, sb](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), sum_to(neg(g[0]), sb)};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float("mul", BinaryOp::kMul, a, b);
  if (autograd::needs_grad({a, b})) {
    // Each operand is kept only for the other's gradient: dropout's mul(x, mask) keeps
    // the mask, not x.
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    const Tensor ka = gb ? a : Tensor(), kb = ga ? b : Tensor();
    autograd::record("mul", {a, b}, {out},
                     [ka, kb, sa = a.sizes(), sb = b.sizes()](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{
                           kb.defined() ? sum_to(mul(g[0], kb), sa) : Tensor(),
                           ka.defined() ? sum_to(mul(g[0], ka), sb) : Tensor()};
                     },
                     {kb, ka});
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float("div", BinaryOp::kDiv, a, b);
  if (autograd::needs_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    const Tensor o = gb ? out.detach() : Tensor();
    autograd::record(
        "div", {a, b}, {out},
        [b, o, ga, sa = a.sizes()](const std::vector<Tensor>& g) {
          Tensor gav = ga ? sum_to(div(g[0], b), sa) : Tensor();
          // -g o / b, with g o in f32 for 16-bit operands (it overflows f16
          // where the gradient is finite)
          Tensor gbv = o.defined()
                           ? sum_to(neg(div(mul(widened(g[0]), widened(o)), widened(b))), b.sizes())
                                 .to(b.dtype())
                           : Tensor();
          return std::vector<Tensor>{gav, gbv};
        },
        {b, o});
  }
  return out;
}

Tensor add(const Tensor& a, double b) {
  Tensor out = unary_op("add", UnaryOp::kAffine, a, 1.0, b);
  if (autograd::needs_grad_of(a))
    autograd::record("add_scalar", {a}, {out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  // x * b + (-0.0) is x * b exactly, the sign of a zero product included (+0.0 would turn
  // -0.0 into +0.0: neg(0.0) would not be -0.0).
  Tensor out = unary_op("mul", UnaryOp::kAffine, a, b, -0.0);
  if (autograd::needs_grad_of(a))
    autograd::record("mul_scalar", {a}, {out}, [b](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], b)};
    });
  return out;
}

Tensor add_scaled(const Tensor& a, const Tensor& b, double alpha) {
  detail::check_same("add_scaled", {a, b});
  detail::check_floating("add_scaled", a);
  Shape s = broadcast_shapes(a.sizes(), b.sizes(), "add_scaled");
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  ZT_DISPATCH(a.device(), axpy, out, a.detach().expand(s), b.detach().expand(s), alpha);
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.sizes(), sb = b.sizes();
    autograd::record("add_scaled", {a, b}, {out}, [sa, sb, alpha](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], sa), sum_to(mul(g[0], alpha), sb)};
    });
  }
  return out;
}

Tensor neg(const Tensor& a) {
  // Checked here so that errors name neg (or -x), not the mul it is built on.
  ZT_CHECK(a.defined(), "neg: undefined input");
  detail::check_floating("neg", a);
  return mul(a, -1.0);
}

Tensor pow(const Tensor& a, double e) {
  Tensor out = unary_op("pow", UnaryOp::kPow, a, e);
  if (autograd::needs_grad_of(a))
    autograd::record("pow", {a}, {out},
                     [a, e](const std::vector<Tensor>& g) {
                       // x^0 is 1 everywhere: its gradient is 0, also at x = 0 (where 0 * x^-1 is
                       // NaN).
                       if (e == 0.0) return std::vector<Tensor>{zeros_like(a)};
                       return std::vector<Tensor>{
                           mul(widened(g[0]), mul(pow(widened(a), e - 1.0), e)).to(g[0].dtype())};
                     },
                     {a});
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = unary_op("exp", UnaryOp::kExp, a);
  Tensor o = out.detach();
  if (autograd::needs_grad_of(a))
    autograd::record(
        "exp", {a}, {out},
        [o](const std::vector<Tensor>& g) { return std::vector<Tensor>{mul(g[0], o)}; }, {o});
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = unary_op("log", UnaryOp::kLog, a);
  if (autograd::needs_grad_of(a))
    autograd::record(
        "log", {a}, {out},
        [a](const std::vector<Tensor>& g) { return std::vector<Tensor>{div(g[0], a)}; }, {a});
  return out;
}

Tensor log1p(const Tensor& a) {
  ZT_CHECK(a.defined(), "log1p: undefined input");
  ZT_CHECK(is_floating(a.dtype()), "log1p: expected a floating tensor, got ",
           dtype_name(a.dtype()));
  if (is_16bit_float(a.dtype())) return log1p(a.to(DType::f32)).to(a.dtype());
  Tensor out;
  {
    // Kahan's form: w = 1 + a rounded, then log(w) * (a / (w - 1)), w - 1 being exact, is
    // log(1 + a) to a few ulps; where w is 1 (|a| below half an ulp of 1) it is a itself,
    // and where w is inf, inf. The quotient (about 1) is taken first: log(w) * a would
    // overflow for finite a above about MAX / log(MAX) (3.8e36 in f32).
    autograd::NoGradGuard ng;
    const Tensor x = a.detach();
    const Tensor w = add(x, 1.0);
    const Tensor one = full({}, 1.0, x.dtype(), x.device());
    const Tensor inf = full({}, std::numeric_limits<double>::infinity(), x.dtype(), x.device());
    out = where(eq(w, one), x, where(eq(w, inf), x, mul(log(w), div(x, sub(w, one)))));
  }
  autograd::record(
      "log1p", {a}, {out},
      [a](const std::vector<Tensor>& g) { return std::vector<Tensor>{div(g[0], add(a, 1.0))}; },
      {a});
  return out;
}

Tensor expm1(const Tensor& a) {
  ZT_CHECK(a.defined(), "expm1: undefined input");
  ZT_CHECK(is_floating(a.dtype()), "expm1: expected a floating tensor, got ",
           dtype_name(a.dtype()));
  if (is_16bit_float(a.dtype())) return expm1(a.to(DType::f32)).to(a.dtype());
  Tensor out;
  {
    // Kahan's form for |a| <= 1/2: u = e^a rounded, then (u - 1) a / log(u), u - 1 being
    // exact there, is e^a - 1 to a few ulps (a itself where u is 1). Farther out u - 1
    // loses nothing.
    autograd::NoGradGuard ng;
    const Tensor x = a.detach();
    const Tensor u = exp(x);
    const Tensor one = full({}, 1.0, x.dtype(), x.device());
    const Tensor um1 = sub(u, one);
    const Tensor near = where(eq(u, one), x, div(mul(um1, x), log(u)));
    out = where(gt(abs(x), 0.5), um1, near);
  }
  autograd::record(
      "expm1", {a}, {out},
      [a](const std::vector<Tensor>& g) { return std::vector<Tensor>{mul(g[0], exp(a))}; }, {a});
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary_op("sqrt", UnaryOp::kSqrt, a);
  Tensor o = out.detach();
  if (autograd::needs_grad_of(a))
    autograd::record(
        "sqrt", {a}, {out},
        [o](const std::vector<Tensor>& g) { return std::vector<Tensor>{div(mul(g[0], 0.5), o)}; },
        {o});
  return out;
}

Tensor rsqrt(const Tensor& a) {
  Tensor out = unary_op("rsqrt", UnaryOp::kRsqrt, a);
  Tensor o = out.detach();
  if (autograd::needs_grad_of(a))
    autograd::record("rsqrt", {a}, {out},
                     [o](const std::vector<Tensor>& g) {
                       // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 o^3 (in f16, o^3 overflows from
                       // x < 6e-4)
                       return std::vector<Tensor>{
                           mul(mul(widened(g[0]), pow(widened(o), 3.0)), -0.5).to(g[0].dtype())};
                     },
                     {o});
  return out;
}

Tensor abs(const Tensor& a) {
  Tensor out = unary_op("abs", UnaryOp::kAbs, a);
  if (autograd::needs_grad_of(a))
    autograd::record("abs", {a}, {out},
                     [a](const std::vector<Tensor>& g) {
                       return std::vector<Tensor>{mul(g[0], unary_op("sign", UnaryOp::kSign, a))};
                     },
                     {a});
  return out;
}

Tensor clamp(const Tensor& a, double lo, double hi) {
  ZT_CHECK(!std::isnan(lo) && !std::isnan(hi), "clamp: a bound is NaN (lo ", lo, ", hi ", hi,
           "); pass -inf or inf for a side without a bound");
  ZT_CHECK(lo <= hi, "clamp: lo (", lo, ") > hi (", hi, ")");
  Tensor out = unary_op("clamp", UnaryOp::kClamp, a, lo, hi);
  if (autograd::needs_grad_of(a))
    autograd::record("clamp", {a}, {out},
                     [a, lo, hi](const std::vector<Tensor>& g) {
                       Tensor inside =
                           mul(ge(a, full({}, lo, a.dtype(), a.device())).to(a.dtype()),
                               le(a, full({}, hi, a.dtype(), a.device())).to(a.dtype()));
                       return std::vector<Tensor>{mul(g[0], inside)};
                     },
                     {a});
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ZT_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got ",
           dtype_name(cond.dtype()));
  detail::check_same("where", {a, b});
  detail::check_same("where", {cond, a}, false);  // the condition on their device too
  Shape s =
      broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  ZT_DISPATCH(a.device(), where, out, cond.expand(s), a.detach().expand(s), b.detach().expand(s));
  if (autograd::needs_grad({a, b})) {
    Shape sa = a.sizes(), sb = b.sizes();
    autograd::record("where", {a, b}, {out},
                     [cond, sa, sb](const std::vector<Tensor>& g) {
                       Tensor z = zeros({}, g[0].dtype(), g[0].device());
                       return std::vector<Tensor>{sum_to(where(cond, g[0], z), sa),
                                                  sum_to(where(cond, z, g[0]), sb)};
                     },
                     {cond});
  }
  return out;
}

Tensor addcmul(const Tensor& a, const Tensor& b, const Tensor& c, double value) {
  detail::check_same("addcmul", {a, b, c});
  ZT_CHECK(is_floating(a.dtype()), "addcmul: expected floating tensors, got ",
           dtype_name(a.dtype()));
  const Shape s =
      broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), "addcmul"), c.sizes(), "addcmul");
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  ZT_DISPATCH(a.device(), addcmul, out, a.detach().expand(s), b.detach().expand(s),
              c.detach().expand(s), value);
  if (autograd::needs_grad({a, b, c})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad(), gc = c.requires_grad();
    const Shape sa = a.sizes(), sb = b.sizes(), sc = c.sizes();
    // Each factor is kept only for the other's gradient.
    const Tensor keep_b = gc ? b : Tensor(), keep_c = gb ? c : Tensor();
    autograd::record("addcmul", {a, b, c}, {out},
                     [=](const std::vector<Tensor>& g) {
                       const Tensor gv = value == 1.0 ? g[0] : mul(g[0], value);
                       return std::vector<Tensor>{ga ? sum_to(g[0], sa) : Tensor(),
                                                  gb ? sum_to(mul(gv, keep_c), sb) : Tensor(),
                                                  gc ? sum_to(mul(gv, keep_b), sc) : Tensor()};
                     },
                     {keep_c, keep_b});
  }
  return out;
}

Tensor relu(const Tensor& a) {
  return unary_with_grad("relu", UnaryOp::kRelu, BinaryOp::kReluGrad, a, false);
}
Tensor silu(const Tensor& a) {
  return unary_with_grad("silu", UnaryOp::kSilu, BinaryOp::kSiluGrad, a, false);
}
Tensor sigmoid(const Tensor& a) {
  return unary_with_grad("sigmoid", UnaryOp::kSigmoid, BinaryOp::kSigmoidGrad, a, true);
}
Tensor tanh(const Tensor& a) {
  return unary_with_grad("tanh", UnaryOp::kTanh, BinaryOp::kTanhGrad, a, true);
}
Tensor gelu(const Tensor& a, bool tanh_approx) {
  return tanh_approx
             ? unary_with_grad("gelu", UnaryOp::kGeluTanh, BinaryOp::kGeluTanhGrad, a, false)
             : unary_with_grad("gelu", UnaryOp::kGelu, BinaryOp::kGeluGrad, a, false);
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return binary_op("eq", BinaryOp::kEq, a, b, DType::b8);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary_op("ne", BinaryOp::kNe, a, b, DType::b8);
}
Tensor isfinite(const Tensor& a) {
  if (!is_floating(a.dtype())) return ones(a.sizes(), DType::b8, a.device());
  const Tensor d = a.detach();
  return eq(sub(d, d), zeros({}, a.dtype(), a.device()));
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary_op("lt", BinaryOp::kLt, a, b, DType::b8);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary_op("le", BinaryOp::kLe, a, b, DType::b8);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary_op("gt", BinaryOp::kGt, a, b, DType::b8);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary_op("ge", BinaryOp::kGe, a, b, DType::b8);
}
// An integer tensor against a scalar compares with the scalar as given (0 < 0.5), not
// truncated to the tensor's dtype: in f64.
Tensor gt(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return gt(a.to(DType::f64), b);
  return gt(a, full({}, b, a.dtype(), a.device()));
}
Tensor lt(const Tensor& a, double b) {
  if (!is_floating(a.dtype())) return lt(a.to(DType::f64), b);
  return lt(a, full({}, b, a.dtype(), a.device()));
}

void add_(const Tensor& a, const Tensor& b, double alpha) {
  detail::check_same("add_", {a, b});
  detail::check_write("add_", a, b);
  detail::check_floating("add_", a);
  Tensor eb = detail::unaliased_source(a, detail::broadcast_source("add_", a, b));
  detail::count_writes({a});
  ZT_DISPATCH(a.device(), axpy, a, a, eb, alpha);
}

namespace {

// Refuses pairs laid over one another: a destination that another pair's destination or
// source overlaps (the kernels copy the pairs' chunks in parallel, in no set order). Sorted
// spans of storage, so a call over thousands of pairs costs little; a pair onto itself was
// checked by check_write, and sources may overlap each other.
void check_pairs_apart(const char* op, const std::vector<Tensor>& dst,
                       const std::vector<Tensor>& src) {
  struct Span {
    uintptr_t storage;   // its address: a total order
    int64_t begin, end;  // bytes
    size_t pair;
  };
  auto spans_of = [](const std::vector<Tensor>& ts) {
    std::vector<Span> spans;
    for (size_t i = 0; i < ts.size(); ++i) {
      const Tensor& t = ts[i];
      // Others are refused by the kernel's own checks.
      if (t.numel() == 0 || !t.has_storage() || !t.is_contiguous()) continue;
      const auto es = static_cast<int64_t>(dtype_size(t.dtype()));
      spans.push_back({reinterpret_cast<uintptr_t>(t.storage().get()), t.offset() * es,
                       (t.offset() + t.numel()) * es, i});
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return std::tie(a.storage, a.begin) < std::tie(b.storage, b.begin);
    });
    return spans;
  };
  auto fail = [op](size_t i, size_t j, const char* what) {
    ZT_FAIL(op, ": pair ", i, "'s destination overlaps pair ", j, "'s ", what,
            "; the pairs are copied in no set order, so pass pairs apart (or copy in two calls)");
  };
  const std::vector<Span> d = spans_of(dst);
  for (size_t k = 1; k < d.size(); ++k)
    if (d[k].storage == d[k - 1].storage && d[k].begin < d[k - 1].end)
      fail(std::min(d[k].pair, d[k - 1].pair), std::max(d[k].pair, d[k - 1].pair), "destination");
  // The destinations are apart, so those a source meets are a run of d.
  for (const Span& s : spans_of(src)) {
    auto it = std::lower_bound(d.begin(), d.end(), s, [](const Span& a, const Span& b) {
      return std::tie(a.storage, a.end) <= std::tie(b.storage, b.begin);
    });
    for (; it != d.end() && it->storage == s.storage && it->begin < s.end; ++it)
      if (it->pair != s.pair) fail(it->pair, s.pair, "source");
  }
}

// multi_copy over the pairs grouped by (device, dst dtype, src dtype), groups in order of
// first appearance; one group (the usual case) is passed through as is.
void multi_copy_grouped(const std::vector<Tensor>& dst, const std::vector<Tensor>& src,
                        bool accumulate) {
  ZT_CHECK(dst.size() == src.size(), accumulate ? "multi_add_" : "multi_copy_", ": ", dst.size(),
           " destinations for ", src.size(), " sources");
  auto key = [&](size_t i) {
    ZT_CHECK(dst[i].defined() && src[i].defined(), accumulate ? "multi_add_" : "multi_copy_",
             ": pair ", i, " has an undefined tensor");
    detail::check_write(accumulate ? "multi_add_" : "multi_copy_", dst[i], src[i]);
    return std::make_tuple(dst[i].device(), dst[i].dtype(), src[i].dtype());
  };
  std::vector<std::vector<size_t>> groups;
  std::vector<decltype(key(0))> keys;
  for (size_t i = 0; i < dst.size(); ++i) {
    const auto k = key(i);
    const size_t at = std::find(keys.begin(), keys.end(), k) - keys.begin();
    if (at == keys.size()) {
      keys.push_back(k);
      groups.emplace_back();
    }
    groups[at].push_back(i);
  }
  check_pairs_apart(accumulate ? "multi_add_" : "multi_copy_", dst, src);
  detail::count_writes(dst);
  if (groups.size() == 1) {
    ZT_DISPATCH(dst[0].device(), multi_copy, dst, src, accumulate);
    return;
  }
  for (const std::vector<size_t>& g : groups) {
    std::vector<Tensor> d, s;
    for (size_t i : g) {
      d.push_back(dst[i]);
      s.push_back(src[i]);
    }
    ZT_DISPATCH(d[0].device(), multi_copy, d, s, accumulate);
  }
}

}  // namespace

void multi_copy_(const std::vector<Tensor>& dst, const std::vector<Tensor>& src) {
  multi_copy_grouped(dst, src, false);
}

void multi_add_(const std::vector<Tensor>& dst, const std::vector<Tensor>& src) {
  multi_copy_grouped(dst, src, true);
}

void mul_(const Tensor& a, double s) {
  detail::check_write("mul_", a, Tensor());
  detail::check_floating("mul_", a);
  detail::count_writes({a});
  ZT_DISPATCH(a.device(), unary, UnaryOp::kAffine, a, a, s, -0.0);  // -0.0: as in mul()
}

void mul_(const Tensor& a, const Tensor& b) {
  detail::check_same("mul_", {a, b});
  detail::check_write("mul_", a, b);
  detail::check_floating("mul_", a);
  Tensor eb = detail::unaliased_source(a, detail::broadcast_source("mul_", a, b));
  detail::count_writes({a});
  ZT_DISPATCH(a.device(), binary, BinaryOp::kMul, a, a, eb);
}

}  // namespace zt
