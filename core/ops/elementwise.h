// Elementwise ops with NumPy broadcasting. Differentiable unless noted; gradients of
// broadcast inputs are summed back to the input's shape. Two-tensor ops take one dtype
// and one device for both operands (errors name the op and both); arithmetic is on
// floating dtypes, and the output has the broadcast shape and the operands' dtype.
#pragma once

#include "core/tensor.h"

namespace zt {

/// a + b.
Tensor add(const Tensor& a, const Tensor& b);
/// a - b.
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b.
Tensor div(const Tensor& a, const Tensor& b);
/// a + b for a scalar b, computed in a's accumulation type (float for 16-bit dtypes).
Tensor add(const Tensor& a, double b);
/// a * b for a scalar b, computed in a's accumulation type (float for 16-bit dtypes).
Tensor mul(const Tensor& a, double b);
/// a + alpha * b.
Tensor add_scaled(const Tensor& a, const Tensor& b, double alpha);
/// -a (as mul(a, -1)).
Tensor neg(const Tensor& a);
/// a^exponent; the gradient of a^0 is 0 everywhere, also at a = 0.
Tensor pow(const Tensor& a, double exponent);
/// e^a.
Tensor exp(const Tensor& a);
/// Natural log of a (NaN below 0, -inf at 0).
Tensor log(const Tensor& a);
/// log(1 + a), accurate for small |a| (composed from add, log and div; 16-bit inputs in f32).
Tensor log1p(const Tensor& a);
/// e^a - 1, accurate for small |a| (composed from exp, log and div; 16-bit inputs in f32).
Tensor expm1(const Tensor& a);
/// Square root of a.
Tensor sqrt(const Tensor& a);
/// 1 / sqrt(a).
Tensor rsqrt(const Tensor& a);
/// |a|; gradient sign(a) (0 at 0).
Tensor abs(const Tensor& a);
/// a limited to [lo, hi]; gradient 1 inside the closed interval, 0 outside. Errors when
/// a bound is NaN (pass -inf or inf for a side without one) or lo > hi.
Tensor clamp(const Tensor& a, double lo, double hi);
/// cond ? a : b (cond is bool, broadcast); differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// a + value * b * c, broadcast, in one pass (PyTorch's addcmul); differentiable in a, b
/// and c.
Tensor addcmul(const Tensor& a, const Tensor& b, const Tensor& c, double value = 1.0);
/// max(a, 0); gradient 0 at a = 0.
Tensor relu(const Tensor& a);
/// a * sigmoid(a), a.k.a. swish.
Tensor silu(const Tensor& a);
/// 1 / (1 + e^-a).
Tensor sigmoid(const Tensor& a);
/// tanh(a).
Tensor tanh(const Tensor& a);
/// GELU: a * Phi(a) with the exact erf form, or with tanh_approx PyTorch's
/// approximate='tanh' form 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))).
Tensor gelu(const Tensor& a, bool tanh_approx = false);

// Comparisons: operands of any one dtype, a bool result of the broadcast shape, no
// gradient.
/// a == b.
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b.
Tensor ne(const Tensor& a, const Tensor& b);
/// Bool: true where a is neither infinite nor NaN (always, for integer dtypes). Computed on
/// a's device (a - a is exactly 0 for a finite value), so a GPU result need not be read.
Tensor isfinite(const Tensor& a);
/// a < b.
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b.
Tensor le(const Tensor& a, const Tensor& b);
/// a > b.
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b.
Tensor ge(const Tensor& a, const Tensor& b);
/// a > b for a scalar b: compared in a's dtype when floating, else in f64 (so an integer
/// tensor is compared with b as given: 0 > -0.5 is true).
Tensor gt(const Tensor& a, double b);
/// a < b for a scalar b: compared in a's dtype when floating, else in f64 (0 < 0.5 is true).
Tensor lt(const Tensor& a, double b);

/// Sums a broadcast gradient back to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& t, const Shape& shape);
/// The broadcast shape of a and b; error naming both shapes if incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

// In-place updates used by optimizers and engines (not recorded by autograd).
/// a += alpha * b (b broadcast to a).
void add_(const Tensor& a, const Tensor& b, double alpha = 1.0);
/// dst[i] = src[i] (converted to dst[i]'s dtype as copy_ converts) for every i, in one
/// kernel call per (device, dst dtype, src dtype) group (multi_copy in core/kernels.h):
/// the ZeRO engine's packing of buckets and gathered parameters, one launch instead of
/// one per piece. Each pair contiguous, with storage (not a released parameter), of one
/// numel, on one device, floating or both of one dtype; destinations must not overlap
/// each other or any source.
void multi_copy_(const std::vector<Tensor>& dst, const std::vector<Tensor>& src);
/// multi_copy_, adding: dst[i] += src[i], with the bits of add_(dst[i], src[i].to(dst[i]'s
/// dtype)).
void multi_add_(const std::vector<Tensor>& dst, const std::vector<Tensor>& src);
/// a *= s.
void mul_(const Tensor& a, double s);
/// a *= b (b broadcast to a, same dtype and device: e.g. a one-element scale that stays
/// on the GPU).
void mul_(const Tensor& a, const Tensor& b);

inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator-(const Tensor& a) {
  return neg(a);
}
inline Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, double b) {
  return add(a, -b);
}
inline Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, double b) {
  return mul(a, 1.0 / b);
}
inline Tensor operator*(double b, const Tensor& a) {
  return mul(a, b);
}
inline Tensor operator+(double b, const Tensor& a) {
  return add(a, b);
}

}  // namespace zt
