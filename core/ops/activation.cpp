// Composite activations. Each is a few elementwise ops whose composed gradient equals
// PyTorch's, kinks included: the branch a where() leaves out gets a zero gradient, so
// no branch may hold an inf that its own backward would multiply by that zero (ELU
// takes e^min(x, 0) - 1, not e^x - 1). log(1 + e^z) is the one piece with its own backward:
// composed from max(z, 0) and |z| its gradient at 0 would be 0, not sigmoid(0) = 1/2.
#include "core/ops/activation.h"

#include <limits>

#include "core/autograd.h"
#include "core/ops.h"

namespace zt {

namespace {

void check_floating(const char* op, const Tensor& x) {
  ZT_CHECK(x.defined(), op, ": undefined input");
  ZT_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got ", dtype_name(x.dtype()));
}

Tensor scalar_like(const Tensor& x, double v) {
  return full({}, v, x.dtype(), x.device());
}

// log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow for any z, no digits lost to
// 1 + e^z rounding for z far below 0. Gradient sigmoid(z).
Tensor log1p_exp(const char* op, const Tensor& z) {
  Tensor out;
  {
    autograd::NoGradGuard ng;
    const Tensor zd = z.detach();
    out = add(relu(zd), log1p(exp(neg(abs(zd)))));
  }
  if (autograd::needs_grad({z})) {
    autograd::record(
        op, {z}, {out},
        [z](const std::vector<Tensor>& g) { return std::vector<Tensor>{mul(g[0], sigmoid(z))}; },
        {z});
  }
  return out;
}

}  // namespace

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_floating("leaky_relu", x);
  if (is_16bit_float(x.dtype())) return leaky_relu(x.to(DType::f32), negative_slope).to(x.dtype());
  return where(gt(x, 0.0), x, mul(x, negative_slope));
}

Tensor elu(const Tensor& x, double alpha) {
  check_floating("elu", x);
  if (is_16bit_float(x.dtype())) return elu(x.to(DType::f32), alpha).to(x.dtype());
  const double inf = std::numeric_limits<double>::infinity();
  return where(gt(x, 0.0), x, mul(expm1(clamp(x, -inf, 0.0)), alpha));
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_floating("softplus", x);
  ZT_CHECK(beta != 0, "softplus: beta must be non-zero");
  if (is_16bit_float(x.dtype())) return softplus(x.to(DType::f32), beta, threshold).to(x.dtype());
  const Tensor z = mul(x, beta);
  return where(gt(z, threshold), x, mul(log1p_exp("softplus", z), 1.0 / beta));
}

Tensor log_sigmoid(const Tensor& x) {
  check_floating("log_sigmoid", x);
  if (is_16bit_float(x.dtype())) return log_sigmoid(x.to(DType::f32)).to(x.dtype());
  return neg(log1p_exp("log_sigmoid", neg(x)));
}

Tensor mish(const Tensor& x) {
  check_floating("mish", x);
  if (is_16bit_float(x.dtype())) return mish(x.to(DType::f32)).to(x.dtype());
  return mul(x, tanh(log1p_exp("mish", x)));
}

Tensor hardswish(const Tensor& x) {
  check_floating("hardswish", x);
  if (is_16bit_float(x.dtype())) return hardswish(x.to(DType::f32)).to(x.dtype());
  const Tensor inner = mul(mul(x, add(x, 3.0)), 1.0 / 6.0);
  return where(le(x, scalar_like(x, -3.0)), scalar_like(x, 0.0),
               where(ge(x, scalar_like(x, 3.0)), x, inner));
}

Tensor hardsigmoid(const Tensor& x) {
  check_floating("hardsigmoid", x);
  if (is_16bit_float(x.dtype())) return hardsigmoid(x.to(DType::f32)).to(x.dtype());
  const Tensor inner = add(mul(x, 1.0 / 6.0), 0.5);
  return where(le(x, scalar_like(x, -3.0)), scalar_like(x, 0.0),
               where(ge(x, scalar_like(x, 3.0)), scalar_like(x, 1.0), inner));
}

}  // namespace zt
