// Elementwise ops with NumPy broadcasting. Differentiable unless noted; gradients of
// broadcast inputs are summed back to the input's shape.
#pragma once

#include "core/tensor.h"

namespace zt {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
/// a + alpha * b.
Tensor add_scaled(const Tensor& a, const Tensor& b, double alpha);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor clamp(const Tensor& a, double lo, double hi);
/// cond ? a : b (cond is bool, broadcast); differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor relu(const Tensor& a);
Tensor silu(const Tensor& a);  // x * sigmoid(x), a.k.a. swish
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor gelu(const Tensor& a, bool tanh_approx = false);

// Comparisons: bool results, no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double b);
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
/// one per piece. Each pair contiguous, of one numel, on one device, floating or both of
/// one dtype; destinations must not overlap each other or any source.
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
