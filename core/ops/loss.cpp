// Softmax family over any dim; cross-entropy with ignore_index (fused kernels in
// core/cpu/softmax.cpp and core/cuda/softmax.cu), and with class weights, label
// smoothing or another reduction (composed over log_softmax, sharing nll_loss's terms);
// inverted dropout. The pointwise losses live in loss_pointwise.cpp.
// Legend: N batch, C classes, * extra positions; (R, L, I) the view of a tensor as
// rows before the softmax dim, the dim itself, and the elements after it.
#include "core/ops/loss.h"

#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

using detail::widened;  // a loss's 16-bit operands (loss.h)

namespace {

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  ZT_CHECK(x.defined(), op, ": undefined input");
  ZT_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got ", dtype_name(x.dtype()));
  if (is_16bit_float(x.dtype())) return softmax_impl(x.to(DType::f32), dim, log).to(x.dtype());
  if (x.dim() == 0) {  // its one element, named by dim 0 or -1 (as PyTorch's)
    wrap_dim(dim, 1, op);
    return softmax_impl(x.reshape({1}), 0, log).reshape({});
  }
  dim = wrap_dim(dim, x.dim(), op);
  int64_t R = 1, L = x.size(dim), I = 1;
  for (int64_t d = 0; d < dim; ++d) R *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) I *= x.size(d);
  Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  ZT_DISPATCH(x.device(), softmax_forward, y, xc, R, L, I, log);
  if (autograd::needs_grad({x})) {
    Tensor ys = y.detach();
    autograd::record(op, {x}, {y},
                     [ys, R, L, I, log](const std::vector<Tensor>& g) {
                       Tensor dy = g[0].contiguous();
                       Tensor dx = Tensor::empty(ys.sizes(), ys.dtype(), ys.device());
                       ZT_DISPATCH(ys.device(), softmax_backward, dx, dy, ys, R, L, I, log);
                       return std::vector<Tensor>{dx};
                     },
                     {ys});
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl(x, dim, true);
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kMean:
      return "mean";
    case Reduction::kSum:
      return "sum";
    case Reduction::kNone:
      return "none";
    case Reduction::kBatchMean:
      return "batchmean";
  }
  return "?";
}

namespace {
// Target `target` at flat position `position` of the target tensor is not a class in
// [0, C) nor ignore_index.
[[noreturn]] void fail_target_out_of_range(const char* op, int64_t target, int64_t position,
                                           int64_t C, int64_t ignore_index) {
  ZT_FAIL(op, ": target ", target, " at position ", position, " is out of range [0, ", C,
          ") (and is not ignore_index = ", ignore_index, ")");
}

// `input` names the scores in errors: "logits" (cross_entropy) or "input" (nll_loss).
void check_class_loss_args(const char* op, const char* input, const Tensor& scores,
                           const Tensor& target) {
  ZT_CHECK(scores.defined() && target.defined(), op, ": undefined input");
  ZT_CHECK(scores.dim() >= 2, op, ": ", input, " must be (N, C) or (N, C, *), got ",
           shape_str(scores.sizes()));
  ZT_CHECK(is_floating(scores.dtype()), op, ": ", input, " must be floating, got ",
           dtype_name(scores.dtype()));
  ZT_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32, op,
           ": target must hold class indices (i64 or i32), got ", dtype_name(target.dtype()));
  Shape want = scores.sizes();
  want.erase(want.begin() + 1);
  ZT_CHECK(target.sizes() == want, op, ": target shape ", shape_str(target.sizes()),
           " does not match ", input, " ", shape_str(scores.sizes()), " (expected ",
           shape_str(want), ")");
}

// The negative log-likelihood of each position, shared by nll_loss and the composed
// cross_entropy. logp (N, C, *) in f32 or f64.
struct NllTerms {
  Tensor per;       // (N, *): -w[t] logp[t], 0 where ignored
  Tensor target_w;  // (N, *): w[t], 0 where ignored (kMean's divisor is its sum)
  Tensor kept;      // (N, *) bool: target != ignore_index
  Tensor w;         // (1, C, 1...) class weights shaped to broadcast, or undefined
};

NllTerms nll_terms(const char* op, const Tensor& logp, const Tensor& target, int64_t ignore_index,
                   const Tensor& weight) {
  const int64_t C = logp.size(1);
  ZT_CHECK(
      !weight.defined() ||
          (weight.dim() == 1 && weight.size(0) == C && is_floating(weight.dtype())),
      op, ": weight must be a floating tensor of one weight per class (", C, "), got ",
      weight.defined() ? dtype_name(weight.dtype()) + shape_str(weight.sizes()) : std::string());
  // Targets as f64 (class indices are exact there): which count, and each one's class,
  // 0 where ignored (gather needs an index in range).
  const Tensor t = target.to(logp.device()).to(DType::f64);
  NllTerms r;
  r.kept = ne(t, full({}, static_cast<double>(ignore_index), DType::f64, t.device()));
  // Checked on the host: one wait per call on a GPU (the fused cross_entropy checks in its
  // kernel instead).
  const Tensor out_of_range =
      mul(add(lt(t, 0.0).to(DType::f64), gt(t, C - 1.0).to(DType::f64)), r.kept.to(DType::f64));
  if (sum(out_of_range).item() != 0) {
    const Tensor bad = out_of_range.reshape({-1});
    const auto p = static_cast<int64_t>(argmax(bad, 0).item());
    fail_target_out_of_range(op, static_cast<int64_t>(t.reshape({-1}).narrow(0, p, 1).item()), p, C,
                             ignore_index);
  }
  const Tensor index = where(r.kept, t, zeros({}, DType::f64, t.device())).to(DType::i64);
  Shape per_class(static_cast<size_t>(logp.dim()), 1);
  per_class[1] = C;
  if (weight.defined()) r.w = weight.to(logp.device()).to(logp.dtype()).reshape(per_class);
  const Tensor kept_w = r.kept.to(logp.dtype());
  r.target_w = r.w.defined()
                   ? mul(gather(r.w.expand(logp.sizes()), 1, index.unsqueeze(1)).squeeze(1), kept_w)
                   : kept_w;
  // Ignored targets are cut out with where, not multiplied by 0: with every target ignored
  // the mean divides by 0, and 0 x inf would make the gradient NaN (PyTorch's is 0).
  const Tensor none = zeros({}, logp.dtype(), logp.device());
  r.per = where(r.kept, mul(neg(gather(logp, 1, index.unsqueeze(1)).squeeze(1)), r.target_w), none);
  return r;
}

Tensor reduce_nll(const Tensor& per, const Tensor& target_w, Reduction reduction) {
  if (reduction == Reduction::kNone) return per;
  if (reduction == Reduction::kSum) return sum(per);
  return div(sum(per), sum(target_w));  // all ignored: NaN, as PyTorch's
}

void check_not_batchmean(const char* op, Reduction r) {
  ZT_CHECK(r != Reduction::kBatchMean, op,
           ": reduction batchmean is kl_div's alone (use mean, sum or none)");
}
}  // namespace

Tensor nll_loss(const Tensor& logp, const Tensor& target, const NLLLossOptions& o) {
  check_class_loss_args("nll_loss", "input", logp, target);
  check_not_batchmean("nll_loss", o.reduction);
  const NllTerms t = nll_terms("nll_loss", widened(logp), target, o.ignore_index, o.weight);
  return reduce_nll(t.per, t.target_w, o.reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& o) {
  ZT_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
           "cross_entropy: label_smoothing must be in [0, 1], got ", o.label_smoothing);
  check_not_batchmean("cross_entropy", o.reduction);
  if (o.label_smoothing == 0 && o.reduction == Reduction::kMean && !o.weight.defined())
    return cross_entropy(logits, target, o.ignore_index);
  check_class_loss_args("cross_entropy", "logits", logits, target);
  const Tensor logp = log_softmax(widened(logits), 1);  // (N, C, *)
  NllTerms t = nll_terms("cross_entropy", logp, target, o.ignore_index, o.weight);
  if (o.label_smoothing > 0) {  // (1 - e) nll + e / C * sum_c w_c (-log p_c), as PyTorch's
    const auto C = static_cast<double>(logits.size(1));
    const Tensor none = zeros({}, logp.dtype(), logp.device());
    const Tensor smooth = neg(sum(t.w.defined() ? mul(logp, t.w) : logp, {1}));
    t.per = add(mul(t.per, 1.0 - o.label_smoothing),
                where(t.kept, mul(smooth, o.label_smoothing / C), none));
  }
  return reduce_nll(t.per, t.target_w, o.reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index) {
  check_class_loss_args("cross_entropy", "logits", logits, target);
  const int64_t C = logits.size(1);
  const Device dev = logits.device();
  // The kernels read (P, C) rows with the class dim last and contiguous: (N, C) logits
  // as they are (no copy when contiguous); (N, C, *) logits permuted to (N, *, C) and
  // copied once, in their own dtype.
  std::vector<int64_t> perm{0};
  for (int64_t d = 2; d < logits.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  const bool class_last = logits.dim() == 2;
  Tensor rows = (class_last ? logits.detach() : logits.detach().permute(perm)).contiguous();
  rows = rows.reshape({-1, C});
  Tensor tgt = target.to(dev).contiguous().reshape({-1});
  // The fused kernels (core/cpu/softmax.cpp, core/cuda/softmax.cu) keep one log-sum-exp
  // per row and write {loss sum, kept count, first bad position} on the device: the loss
  // is formed there, so a GPU does not synchronize.
  Tensor lse = Tensor::empty({rows.size(0)}, DType::f64, dev);
  Tensor stats = Tensor::empty({3}, DType::f64, dev);
  ZT_DISPATCH(dev, cross_entropy_forward, stats, lse, rows, tgt, ignore_index);
  if (dev.is_cpu() && stats.data<double>()[2] >= 0) {  // CUDA raises it at its next wait
    const auto p = static_cast<int64_t>(stats.data<double>()[2]);
    fail_target_out_of_range("cross_entropy", static_cast<int64_t>(tgt.narrow(0, p, 1).item()), p,
                             C, ignore_index);
  }
  // Mean over non-ignored targets; all ignored gives NaN (0 / 0), as in PyTorch.
  const DType out_dtype = is_16bit_float(logits.dtype()) ? DType::f32 : logits.dtype();
  Tensor out = div(stats.narrow(0, 0, 1), stats.narrow(0, 1, 1)).reshape({}).to(out_dtype);
  if (!autograd::needs_grad({logits})) return out;
  // d loss / d logits[p] = (softmax[p] - onehot(t_p)) * g / count for kept positions,
  // written in the logits' dtype and returned in their layout.
  Shape permuted;
  for (int64_t d : perm) permuted.push_back(logits.size(d));
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  autograd::record("cross_entropy", {logits}, {out},
                   [=](const std::vector<Tensor>& g) {
                     Tensor d = Tensor::empty(rows.sizes(), rows.dtype(), dev);
                     ZT_DISPATCH(dev, cross_entropy_backward, d, rows, lse, tgt,
                                 g[0].to(DType::f64).contiguous(), stats, ignore_index);
                     if (class_last) return std::vector<Tensor>{d};
                     return std::vector<Tensor>{d.reshape(permuted).permute(inv).contiguous()};
                   },
                   {rows, tgt});
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& g) {
  ZT_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  detail::check_floating("dropout", x);  // named here, not by the mul it is built of
  if (p == 1.0) return mul(x, 0.0);
  // Keep element i when its uniform draw (stream position offset + i, f32 whatever
  // x's dtype) is below 1 - p; kept values are scaled by 1 / (1 - p).
  Tensor u = rand(x.sizes(), g, DType::f32, x.device());
  Tensor mask = mul(lt(u, 1.0 - p).to(x.dtype()), 1.0 / (1.0 - p));
  return mul(x, mask);
}

}  // namespace zt
