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

// v rounded to `dt` as a uniform draw is stored: through float for every dtype but f64.
double round_to(DType dt, double v) {
  if (dt == DType::f64) return v;
  const auto f = static_cast<float>(v);
  if (dt == DType::bf16) return static_cast<float>(bf16(f));
  if (dt == DType::f16) return static_cast<float>(f16(f));
  return f;
}

// The next value of `dt` below v, a value of dt (finite): one step down in the bits of a
// sign-magnitude encoding.
double next_below(DType dt, double v) {
  if (dt == DType::f64) return std::nextafter(v, -INFINITY);
  if (dt == DType::f32) return std::nextafter(static_cast<float>(v), -INFINITY);
  auto step = [v](auto h) {
    const bool negative = (h.bits & 0x8000u) != 0;
    h.bits = !negative && h.bits != 0 ? h.bits - 1 : (h.bits == 0 ? 0x8001u : h.bits + 1);
    return static_cast<double>(static_cast<float>(h));
  };
  const auto f = static_cast<float>(v);
  return dt == DType::bf16 ? step(bf16(f)) : step(f16(f));
}

// A uniform draw lo + (hi - lo) u, u < 1, may still round up to hi or past it in t's dtype
// (in bf16 every u within half an ulp of 1, when hi is 1; in any dtype the largest u, or
// an hi that rounds up). When the largest draw would, draws above the dtype's largest value
// below hi are set to it, keeping [lo, hi): one clamp, on t's device.
void cap_below(const Tensor& t, double lo, double hi) {
  if (!(lo < hi)) return;  // lo == hi: the point mass lo
  const DType dt = t.dtype();
  const double largest_u = dt == DType::f64 ? 1.0 - 0x1p-53 : 1.0 - 0x1p-24;
  double cap = round_to(dt, hi);
  if (cap >= hi) cap = next_below(dt, cap);
  if (round_to(dt, lo + (hi - lo) * largest_u) <= cap) return;
  ZT_DISPATCH(t.device(), unary, UnaryOp::kClamp, t, t, -INFINITY, cap);
}

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
  if (!normal) cap_below(c, a, b);
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
  // Unsigned: [INT64_MIN, INT64_MAX) is wider than int64 holds, and so is lo + a draw.
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<int64_t>(
        static_cast<uint64_t>(lo) +
        static_cast<uint64_t>(g.uniform64(off + i) * static_cast<double>(range)) % range);
  return t;
}

}  // namespace zt
