// Normalization ops: argument checks, fused kernels (core/kernels.h: core/cpu/norm.cpp,
// core/cpu/layer_norm.cpp and their core/cuda twins, chosen by the input's device) and
// their autograd records.
// GroupNorm, BatchNorm and LayerNorm have fused forward and backward kernels (LayerNorm's
// include the elementwise affine and read bf16/f16 directly); RMSNorm is composed.
// Legend: N batch, C channels, S spatial elements (product of *), G groups.
// GroupNorm and BatchNorm normalize bf16/f16 inputs in f32 and cast back.
#include "core/ops/norm.h"

#include "core/autograd.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

namespace {

// An optional weight or bias as a kernel takes it: detached and contiguous, or undefined.
Tensor kernel_arg(const Tensor& t) {
  return t.defined() ? t.detach().contiguous() : Tensor();
}

Tensor to_f32(const Tensor& t) {
  return t.defined() ? t.to(DType::f32) : t;
}

// x (N, C, *) -> N, C, S; checks the per-channel parameters.
void channel_dims(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                  int64_t& N, int64_t& C, int64_t& S) {
  ZT_CHECK(x.defined(), op, ": undefined input");
  ZT_CHECK(x.dim() >= 2, op, ": expected input (N, C, *), got ", shape_str(x.sizes()));
  detail::check_same(op, {x, weight, bias});
  N = x.size(0);
  C = x.size(1);
  S = x.numel() / std::max<int64_t>(N * C, 1);
  for (const Tensor* p : {&weight, &bias}) {
    ZT_CHECK(!p->defined() || (p->dim() == 1 && p->size(0) == C), op, ": ",
             p == &weight ? "weight" : "bias", " must have shape [", C,
             "] (one per channel of input ", shape_str(x.sizes()), "), got ",
             shape_str(p->sizes()));
  }
}

bool wants_grad(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

// What a norm's backward kernel writes: dx like x, dw and db of the parameters' shape,
// each only where wanted (undefined otherwise); and the weight as the kernel reads it.
struct NormGrads {
  Tensor dx, dw, db, wc;
};
NormGrads norm_grads(const Tensor& xc, const Tensor& weight, const Shape& param, bool gx, bool gw,
                     bool gb) {
  auto like = [&](bool wanted, const Shape& s) {
    return wanted ? Tensor::empty(s, xc.dtype(), xc.device()) : Tensor();
  };
  return {like(gx, xc.sizes()), like(gw, param), like(gb, param), kernel_arg(weight)};
}

// The epilogue's tensors: both or neither, each like x.
void check_epilogue(const Tensor& x, const GroupNormEpilogue& e) {
  ZT_CHECK(e.scale.defined() == e.shift.defined(),
           "group_norm: pass both the epilogue's scale and shift, or neither");
  for (const Tensor* p : {&e.scale, &e.shift}) {
    ZT_CHECK(!p->defined() || p->sizes() == x.sizes(), "group_norm: the epilogue's ",
             p == &e.scale ? "scale" : "shift", " must have the input's shape ",
             shape_str(x.sizes()), ", got ", shape_str(p->sizes()));
  }
  detail::check_same("group_norm", {x, e.scale, e.shift});
}

}  // namespace

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                  double eps, const GroupNormEpilogue& epilogue) {
  int64_t N, C, S;
  channel_dims("group_norm", x, weight, bias, N, C, S);
  ZT_CHECK(groups > 0 && C % groups == 0, "group_norm: ", C, " channels cannot be split into ",
           groups, " groups (groups must divide C)");
  check_epilogue(x, epilogue);
  if (is_16bit_float(x.dtype())) {
    const GroupNormEpilogue e32{to_f32(epilogue.scale), to_f32(epilogue.shift), epilogue.silu};
    return group_norm(x.to(DType::f32), groups, to_f32(weight), to_f32(bias), eps, e32)
        .to(x.dtype());
  }
  const int64_t G = groups;
  Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({N, G}, x.dtype(), x.device());
  Tensor rstd = Tensor::empty({N, G}, x.dtype(), x.device());
  const GroupNormEpilogue epi{kernel_arg(epilogue.scale), kernel_arg(epilogue.shift),
                              epilogue.silu};
  ZT_DISPATCH(x.device(), group_norm_forward, y, mean, rstd, xc, kernel_arg(weight),
              kernel_arg(bias), epi, N, C, S, G, eps);
  if (autograd::needs_grad({x, weight, bias, epilogue.scale, epilogue.shift})) {
    const bool gx = x.requires_grad(), gw = wants_grad(weight), gb = wants_grad(bias);
    const bool gs = wants_grad(epilogue.scale), gt = wants_grad(epilogue.shift);
    // The weight and bias themselves are saved (not views of them): a ZeRO engine may
    // re-gather them into new storage before backward. Only an epilogue's kernel reads
    // the bias (it recomputes n = xhat * weight + bias).
    const Tensor saved_bias = epi.active() ? bias : Tensor();
    autograd::record(
        "group_norm", {x, weight, bias, epilogue.scale, epilogue.shift}, {y},
        [=](const std::vector<Tensor>& g) {
          const NormGrads d = norm_grads(xc, weight, {C}, gx, gw, gb);
          auto like_x = [&](bool wanted) {
            return wanted ? Tensor::empty(xc.sizes(), xc.dtype(), xc.device()) : Tensor();
          };
          const Tensor ds = like_x(gs), dt = like_x(gt);
          ZT_DISPATCH(xc.device(), group_norm_backward, d.dx, d.dw, d.db, ds, dt, g[0].contiguous(),
                      xc, mean, rstd, d.wc, kernel_arg(saved_bias), epi, N, C, S, G);
          return std::vector<Tensor>{d.dx, d.dw, d.db, ds, dt};
        },
        {xc, weight, saved_bias, epi.scale, epi.shift});
  }
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, const Tensor& num_batches_tracked) {
  int64_t N, C, S;
  channel_dims("batch_norm", x, weight, bias, N, C, S);
  const Tensor& counter = num_batches_tracked;
  ZT_CHECK(!counter.defined() || (training && running_mean.defined() && C > 0),
           "batch_norm: num_batches_tracked counts training steps that update running "
           "statistics (of at least one channel); pass it only with training = true and both");
  ZT_CHECK(!counter.defined() || (counter.dtype() == DType::i64 && counter.numel() == 1 &&
                                  counter.device() == x.device() && counter.is_contiguous()),
           "batch_norm: num_batches_tracked must be an i64 scalar on ", x.device().str(), ", got ",
           counter.str());
  ZT_CHECK(running_mean.defined() == running_var.defined(),
           "batch_norm: pass both running_mean and running_var, or neither");
  ZT_CHECK(!running_mean.defined() || running_mean.dtype() == running_var.dtype(),
           "batch_norm: running_mean is ", dtype_name(running_mean.dtype()), " and running_var ",
           running_var.defined() ? dtype_name(running_var.dtype()) : "",
           "; keep the running statistics in one dtype");
  for (const Tensor* p : {&running_mean, &running_var}) {
    ZT_CHECK(!p->defined() || (p->numel() == C && is_floating(p->dtype()) &&
                               p->device() == x.device() && p->is_contiguous()),
             "batch_norm: running statistics must be contiguous floating tensors of shape [", C,
             "] on ", x.device().str(), ", got ", p->str());
  }
  ZT_CHECK(training || running_mean.defined(),
           "batch_norm: evaluation mode needs running_mean and running_var "
           "(or call it with training = true to use batch statistics)");
  if (is_16bit_float(x.dtype())) {
    return batch_norm(x.to(DType::f32), running_mean, running_var, to_f32(weight), to_f32(bias),
                      training, momentum, eps, counter)
        .to(x.dtype());
  }
  const int64_t M = N * S;
  if (training && M == 0) {
    // An empty batch, as PyTorch's: no statistics, so the running ones stay where they
    // were; the counter still counts the step (PyTorch's module counts it before the op).
    // The output is x * weight + bias over no elements: empty, with zero gradients for
    // the weight and the bias.
    if (counter.defined()) {
      autograd::NoGradGuard ng;
      counter.copy_(add(counter.to(DType::f64), 1.0));
      detail::count_writes({counter});
    }
    Shape per_channel(x.dim(), 1);
    per_channel[1] = C;
    Tensor y = x.clone();
    if (weight.defined()) y = mul(y, weight.reshape(per_channel));
    return bias.defined() ? add(y, bias.reshape(per_channel)) : y;
  }
  Tensor xc = x.detach().contiguous();
  Tensor mean, rstd;
  {
    autograd::NoGradGuard ng;  // statistics and running-stat updates are not recorded
    if (training) {
      ZT_CHECK(M > 1,
               "batch_norm: expected more than 1 value per channel when training, got "
               "input ",
               shape_str(x.sizes()));
      mean = Tensor::empty({C}, x.dtype(), x.device());
      rstd = Tensor::empty({C}, x.dtype(), x.device());
      // One kernel: the statistics, r = (1 - momentum) r + momentum * stat for each
      // running statistic (the variance unbiased), updated in place, and the counter.
      auto updated = [](const Tensor& r) { return r.defined() ? r.detach() : Tensor(); };
      ZT_DISPATCH(x.device(), batch_norm_stats, mean, rstd, updated(running_mean),
                  updated(running_var), updated(counter), xc, N, C, S, eps, momentum);
      // Written in place: a graph that saved them (an eval forward's) sees the change.
      if (running_mean.defined()) detail::count_writes({running_mean, running_var});
      if (counter.defined()) detail::count_writes({counter});
    } else {
      mean = running_mean.detach().reshape({C}).to(x.dtype()).contiguous();
      rstd = rsqrt(add(running_var.detach().reshape({C}).to(x.dtype()), eps)).contiguous();
    }
  }
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  Tensor w = kernel_arg(weight);
  Tensor b = kernel_arg(bias);
  ZT_DISPATCH(x.device(), batch_norm_forward, y, xc, mean, rstd, w, b, N, C, S);
  if (autograd::needs_grad({x, weight, bias})) {
    bool gx = x.requires_grad(), gw = wants_grad(weight), gb = wants_grad(bias);
    autograd::record("batch_norm", {x, weight, bias}, {y},
                     [=](const std::vector<Tensor>& g) {
                       const NormGrads d = norm_grads(xc, weight, {C}, gx, gw, gb);
                       ZT_DISPATCH(xc.device(), batch_norm_backward, d.dx, d.dw, d.db,
                                   g[0].contiguous(), xc, mean, rstd, d.wc, N, C, S, training);
                       return std::vector<Tensor>{d.dx, d.dw, d.db};
                     },
                     {xc, weight, mean});
  }
  return y;
}

namespace {
// Number of leading rows when the trailing dims of x are `normalized_shape`.
int64_t norm_rows(const char* op, const Tensor& x, const Shape& normalized_shape,
                  const Tensor& weight, const Tensor& bias) {
  ZT_CHECK(x.defined(), op, ": undefined input");
  int64_t k = static_cast<int64_t>(normalized_shape.size());
  ZT_CHECK(
      k >= 1 && x.dim() >= k && Shape(x.sizes().end() - k, x.sizes().end()) == normalized_shape, op,
      ": normalized_shape ", shape_str(normalized_shape), " must match the trailing dims of input ",
      shape_str(x.sizes()));
  for (const Tensor* p : {&weight, &bias}) {
    ZT_CHECK(!p->defined() || p->sizes() == normalized_shape, op, ": ",
             p == &weight ? "weight" : "bias", " must have shape ", shape_str(normalized_shape),
             ", got ", shape_str(p->sizes()));
  }
  detail::check_same(op, {x, weight, bias});
  return x.numel() / std::max<int64_t>(shape_numel(normalized_shape), 1);
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const int64_t rows = norm_rows("layer_norm", x, normalized_shape, weight, bias);
  const int64_t d = shape_numel(normalized_shape);
  ZT_CHECK(is_floating(x.dtype()), "layer_norm: expected a floating input, got ",
           dtype_name(x.dtype()));
  // Statistics in f32 (f64 for f64 inputs), whatever the input's precision.
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({rows}, stat, x.device());
  Tensor rstd = Tensor::empty({rows}, stat, x.device());
  Tensor w = kernel_arg(weight);
  Tensor b = kernel_arg(bias);
  ZT_DISPATCH(x.device(), layer_norm_forward, y, mean, rstd, xc, w, b, rows, d, eps);
  if (autograd::needs_grad({x, weight, bias})) {
    bool gx = x.requires_grad(), gw = wants_grad(weight), gb = wants_grad(bias);
    // As in group_norm, the weight itself is saved (a ZeRO engine may re-gather it).
    autograd::record("layer_norm", {x, weight, bias}, {y},
                     [=](const std::vector<Tensor>& g) {
                       const NormGrads n = norm_grads(xc, weight, normalized_shape, gx, gw, gb);
                       ZT_DISPATCH(xc.device(), layer_norm_backward, n.dx, n.dw, n.db,
                                   g[0].to(xc.dtype()).contiguous(), xc, mean, rstd, n.wc, rows, d);
                       return std::vector<Tensor>{n.dx, n.dw, n.db};
                     },
                     {xc, weight});
  }
  return y;
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
  norm_rows("rms_norm", x, normalized_shape, weight, Tensor());
  detail::check_floating("rms_norm", x);  // named here, not by the ops it is built of
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < static_cast<int64_t>(normalized_shape.size()); ++i)
    dims.push_back(x.dim() - 1 - i);
  // 16-bit inputs are normalized in f32 and rounded once, then scaled (as PyTorch's since
  // January 2025; 2.5 normalized them in their own dtype).
  const Tensor xf = detail::widened(x);
  const Tensor y = mul(xf, rsqrt(add(mean(mul(xf, xf), dims, true), eps))).to(x.dtype());
  return weight.defined() ? mul(y, weight) : y;
}

}  // namespace zt
