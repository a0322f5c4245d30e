// Factories and random fills. Random element i of a draw at generator offset o uses
// stream position o + i, on the CPU and the GPU alike.
#include "core/ops/factory.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/ops/dispatch.h"

namespace zt {

Tensor empty(const Shape& sizes, DType dtype, Device device) {
  return Tensor::empty(sizes, dtype, device);
}

Tensor full(const Shape& sizes, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(sizes, dtype, device);
  t.fill_(value);
  return t;
}

Tensor zeros(const Shape& sizes, DType dtype, Device device) {
  return full(sizes, 0.0, dtype, device);
}
Tensor ones(const Shape& sizes, DType dtype, Device device) {
  return full(sizes, 1.0, dtype, device);
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.sizes(), t.dtype(), t.device());
}
Tensor ones_like(const Tensor& t) {
  return ones(t.sizes(), t.dtype(), t.device());
}

Tensor scalar_tensor(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

Tensor from_vector(const std::vector<double>& values, const Shape& sizes, DType dtype,
                   Device device) {
  ZT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(sizes),
           "from_vector: ", values.size(), " values for shape ", shape_str(sizes));
  Tensor host = Tensor::empty(sizes, DType::f64, Device::cpu());
  std::copy(values.begin(), values.end(), host.data<double>());
  Tensor out = Tensor::empty(sizes, dtype, device);
  out.copy_(host);
  return out;
}

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  ZT_CHECK(step != 0, "arange: step must be non-zero");
  const double count = std::ceil((end - start) / step);
  ZT_CHECK(std::isfinite(count) && count < 0x1p48, "arange: the range [", start, ", ", end,
           ") in steps of ", step, " is not a finite number of elements that fits in memory");
  int64_t n = static_cast<int64_t>(count);
  n = std::max<int64_t>(n, 0);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return from_vector(v, {n}, dtype, device);
}

namespace {
void random_fill(const Tensor& t, Generator& g, bool normal, double a, double b) {
  ZT_CHECK(is_floating(t.dtype()), "random fill needs a floating tensor, got ",
           dtype_name(t.dtype()));
  autograd::NoGradGuard ng;  // an initializer, as nn.init's: not recorded, allowed on parameters
  uint64_t off = g.advance(static_cast<uint64_t>(t.numel()));
  detail::count_writes({t});
  // Kernels fill contiguous tensors: in place when t is one (no temporary: a parameter
  // being initialized is often the largest tensor alive), else through a copy.
  Tensor c = t.is_contiguous() ? t : Tensor::empty(t.sizes(), t.dtype(), t.device());
  ZT_DISPATCH(t.device(), random_fill, c, g.seed(), off, normal, a, b);
  if (!c.same(t)) t.copy_(c);
}
}  // namespace

// The bounds are checked as PyTorch's: a range that is reversed or infinite (inf - -inf
// fills NaN), a NaN, or a negative spread describes no distribution to draw from.
void uniform_(const Tensor& t, double lo, double hi, Generator& g) {
  ZT_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "uniform_: lo (", lo, ") and hi (",
           hi, ") must be finite with lo <= hi");
  random_fill(t, g, false, lo, hi);
}
void normal_(const Tensor& t, double mean, double std, Generator& g) {
  ZT_CHECK(std::isfinite(mean), "normal_: mean must be finite, got ", mean);
  ZT_CHECK(std::isfinite(std) && std >= 0, "normal_: std must be finite and >= 0, got ", std);
  random_fill(t, g, true, mean, std);
}

Tensor rand(const Shape& sizes, Generator& g, DType dtype, Device device) {
  Tensor t = Tensor::empty(sizes, dtype, device);
  uniform_(t, 0.0, 1.0, g);
  return t;
}
Tensor randn(const Shape& sizes, Generator& g, DType dtype, Device device) {
  Tensor t = Tensor::empty(sizes, dtype, device);
  normal_(t, 0.0, 1.0, g);
  return t;
}
Tensor rand(const Shape& sizes, DType dtype, Device device) {
  return rand(sizes, default_generator(), dtype, device);
}
Tensor randn(const Shape& sizes, DType dtype, Device device) {
  return randn(sizes, default_generator(), dtype, device);
}

Tensor randint(int64_t lo, int64_t hi, const Shape& sizes, Generator& g) {
  ZT_CHECK(hi > lo, "randint: empty range [", lo, ", ", hi, ")");
  Tensor t = Tensor::empty(sizes, DType::i64, Device::cpu());
  int64_t n = t.numel();
  uint64_t off = g.advance(static_cast<uint64_t>(n));
  int64_t* p = t.data<int64_t>();
  uint64_t range = static_cast<uint64_t>(hi - lo);
  for (int64_t i = 0; i < n; ++i)
    p[i] =
        lo + static_cast<int64_t>(
                 static_cast<uint64_t>(g.uniform64(off + i) * static_cast<double>(range)) % range);
  return t;
}

}  // namespace zt
