// Pointwise losses, composed from elementwise ops: MSE, L1, smooth L1, Huber, binary
// cross-entropy (on probabilities and on logits) and KL divergence, each with PyTorch's
// reductions. Binary cross-entropy on probabilities has its own backward: composed, the
// clamped log at p = 0 would multiply a zero gradient by 1/0.
#include <limits>
#include <utility>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

// The operands of a pointwise loss, checked (one shape, floating, one device) and widened
// from 16 bits to f32 (loss.h); after widening both must share a dtype.
std::pair<Tensor, Tensor> operands(const char* op, const Tensor& x, const Tensor& y) {
  ZT_CHECK(x.defined() && y.defined(), op, ": undefined input");
  ZT_CHECK(x.sizes() == y.sizes(), op, ": input ", shape_str(x.sizes()), " and target ",
           shape_str(y.sizes()), " must have the same shape");
  ZT_CHECK(is_floating(x.dtype()) && is_floating(y.dtype()), op,
           ": input and target must be floating, got ", dtype_name(x.dtype()), " and ",
           dtype_name(y.dtype()));
  ZT_CHECK(x.device() == y.device(), op, ": input on ", x.device().str(), " and target on ",
           y.device().str(), " must be on one device");
  const Tensor a = detail::widened(x), b = detail::widened(y);
  ZT_CHECK(a.dtype() == b.dtype(), op, ": input ", dtype_name(x.dtype()), " and target ",
           dtype_name(y.dtype()), " must have one dtype");
  return {a, b};
}

Tensor reduce(const char* op, const Tensor& per, Reduction r) {
  switch (r) {
    case Reduction::kNone:
      return per;
    case Reduction::kSum:
      return sum(per);
    case Reduction::kMean:
      ZT_CHECK(per.numel() > 0, op, ": mean over an empty input ", shape_str(per.sizes()),
               " (use reduction sum or none)");
      return mean(per);
    case Reduction::kBatchMean:
      break;
  }
  ZT_FAIL(op, ": reduction batchmean is kl_div's alone (use mean, sum or none)");
}

// An optional weight tensor multiplied into per-element losses: broadcast to their shape.
Tensor weighted(const char* op, const char* name, const Tensor& per, const Tensor& w) {
  if (!w.defined()) return per;
  ZT_CHECK(is_floating(w.dtype()), op, ": ", name, " must be floating, got ",
           dtype_name(w.dtype()));
  ZT_CHECK(w.device() == per.device(), op, ": ", name, " on ", w.device().str(),
           " must be on the input's device ", per.device().str());
  bool fits = w.dim() <= per.dim();
  for (int64_t i = 1; fits && i <= w.dim(); ++i) {
    const int64_t wd = w.size(w.dim() - i);
    fits = wd == 1 || wd == per.size(per.dim() - i);
  }
  ZT_CHECK(fits, op, ": ", name, " ", shape_str(w.sizes()), " must broadcast to the input's shape ",
           shape_str(per.sizes()));
  return mul(per, w.to(per.dtype()));
}

}  // namespace

Tensor mse_loss(const Tensor& x, const Tensor& y, Reduction reduction) {
  const auto [a, b] = operands("mse_loss", x, y);
  const Tensor d = sub(a, b);
  return reduce("mse_loss", mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& x, const Tensor& y, Reduction reduction) {
  const auto [a, b] = operands("l1_loss", x, y);
  return reduce("l1_loss", abs(sub(a, b)), reduction);
}

Tensor smooth_l1_loss(const Tensor& x, const Tensor& y, Reduction reduction, double beta) {
  ZT_CHECK(beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  const auto [a, b] = operands("smooth_l1_loss", x, y);
  const Tensor d = sub(a, b);
  const Tensor ad = abs(d);
  // beta = 0 is l1: the quadratic branch would divide by 0 (and where() would pass its
  // zero gradient through 1/0).
  if (beta == 0) return reduce("smooth_l1_loss", ad, reduction);
  const Tensor per = where(lt(ad, beta), mul(mul(d, d), 0.5 / beta), add(ad, -0.5 * beta));
  return reduce("smooth_l1_loss", per, reduction);
}

Tensor huber_loss(const Tensor& x, const Tensor& y, Reduction reduction, double delta) {
  ZT_CHECK(delta > 0, "huber_loss: delta must be positive, got ", delta);
  const auto [a, b] = operands("huber_loss", x, y);
  const Tensor d = sub(a, b);
  const Tensor ad = abs(d);
  const Tensor per = where(lt(ad, delta), mul(mul(d, d), 0.5), mul(add(ad, -0.5 * delta), delta));
  return reduce("huber_loss", per, reduction);
}

Tensor binary_cross_entropy(const Tensor& p, const Tensor& y, const BCELossOptions& o) {
  const char* op = "binary_cross_entropy";
  const auto [x, t] = operands(op, p, y);
  {
    // Checked on the host (one wait per call on a GPU); a NaN fails too, as PyTorch's.
    autograd::NoGradGuard ng;
    const Tensor inside = mul(ge(x, zeros({}, x.dtype(), x.device())).to(DType::f64),
                              le(x, ones({}, x.dtype(), x.device())).to(DType::f64));
    ZT_CHECK(sum(inside).item() == static_cast<double>(x.numel()), op,
             ": every element of the input must be a probability in [0, 1]");
  }
  // The logs are clamped at -100 so that p = 0 or 1 gives a finite loss, as PyTorch's.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor per;
  Tensor log_p, log_q;  // log p, log(1 - p), clamped
  {
    autograd::NoGradGuard ng;
    const Tensor xd = x.detach(), td = t.detach();
    log_p = clamp(log(xd), -100.0, inf);
    log_q = clamp(log1p(neg(xd)), -100.0, inf);
    per = neg(add(mul(td, log_p), mul(add(neg(td), 1.0), log_q)));
  }
  if (autograd::needs_grad({x, t})) {
    // d/dp = (p - y) / max(p (1 - p), eps), with PyTorch's eps: the float 1e-12.
    const double eps = static_cast<double>(1e-12f);
    const Tensor xs = x.detach(), ts = t.detach();
    const bool gx = x.requires_grad(), gt = t.requires_grad();
    autograd::record(op, {x, t}, {per},
                     [xs, ts, log_p, log_q, eps, inf, gx, gt](const std::vector<Tensor>& g) {
                       Tensor dx, dt;
                       if (gx)
                         dx = div(mul(g[0], sub(xs, ts)),
                                  clamp(mul(xs, add(neg(xs), 1.0)), eps, inf));
                       if (gt) dt = mul(g[0], sub(log_q, log_p));
                       return std::vector<Tensor>{dx, dt};
                     },
                     {xs, ts});
  }
  return reduce(op, weighted(op, "weight", per, o.weight), o.reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y,
                                        const BCEWithLogitsLossOptions& o) {
  const char* op = "binary_cross_entropy_with_logits";
  const auto [a, t] = operands(op, x, y);
  // -(y log s + (1 - y) log(1 - s)) with s = sigmoid(x) and log(1 - s) = log s - x.
  const Tensor ls = log_sigmoid(a);
  Tensor pos = ls;
  if (o.pos_weight.defined()) {  // the positive term y log s scaled by pos_weight
    const Tensor lw =
        add(mul(add(weighted(op, "pos_weight", ones_like(t), o.pos_weight), -1.0), t), 1.0);
    pos = mul(lw, ls);
  }
  const Tensor per = sub(mul(add(neg(t), 1.0), a), pos);
  return reduce(op, weighted(op, "weight", per, o.weight), o.reduction);
}

Tensor kl_div(const Tensor& logp, const Tensor& target, const KLDivLossOptions& o) {
  const auto [x, t] = operands("kl_div", logp, target);
  Tensor per;
  if (o.log_target) {
    per = mul(exp(t), sub(t, x));
  } else {
    // t (log t - x) is 0 at t = 0, whatever x (-inf where a mask left the class out), with
    // no gradient to either: there the log reads 1 and x reads 0, so no -inf or 0 * inf
    // enters the graph, forward or backward.
    const Tensor zero = zeros({}, t.dtype(), t.device());
    const Tensor is0 = eq(t, zero);
    const Tensor log_t = log(where(is0, ones({}, t.dtype(), t.device()), t));
    per = where(is0, zero, mul(t, sub(log_t, where(is0, zero, x))));
  }
  if (o.reduction != Reduction::kBatchMean) return reduce("kl_div", per, o.reduction);
  ZT_CHECK(per.dim() >= 1 && per.size(0) > 0,
           "kl_div: batchmean needs a batch (dim 0) of at least one, got ", shape_str(per.sizes()));
  return div(sum(per), full({}, static_cast<double>(per.size(0)), per.dtype(), per.device()));
}

}  // namespace zt
