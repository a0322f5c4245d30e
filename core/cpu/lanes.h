// Lane-parallel f32 math for the CPU kernels: e^x, sigmoid, SiLU, erf and GELU (erf and
// tanh forms) written once for a scalar float and for GCC vector types. std::exp is an
// opaque libm call that keeps loops scalar; these are plain arithmetic and bit
// operations. The row kernels (lane_row) pick AVX-512, AVX2 or the SSE2 baseline at run
// time (the library is built for the baseline ISA); the wider ones fuse multiply-adds,
// so f32 tensors always go through them (strided elements gathered into rows), and the
// scalar form serves 16-bit types, which round the result anyway.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace zt::cpu {

using f32x4 = float __attribute__((vector_size(16)));
using i32x4 = int32_t __attribute__((vector_size(16)));
using f32x8 = float __attribute__((vector_size(32)));
using i32x8 = int32_t __attribute__((vector_size(32)));
using f32x16 = float __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64)));

template <typename V>
struct LaneInt {
  using type = int32_t;
};
template <>
struct LaneInt<f32x4> {
  using type = i32x4;
};
template <>
struct LaneInt<f32x8> {
  using type = i32x8;
};
template <>
struct LaneInt<f32x16> {
  using type = i32x16;
};

/// p[0..m) into a vector, zeros past m (m <= the lane count).
template <typename V>
__attribute__((always_inline)) inline V load_part(const float* p, int64_t m) {
  V v{};
  std::memcpy(&v, p, static_cast<size_t>(m) * sizeof(float));
  return v;
}

/// The first m lanes of v into p[0..m).
template <typename V>
__attribute__((always_inline)) inline void store_part(float* p, V v, int64_t m) {
  std::memcpy(p, &v, static_cast<size_t>(m) * sizeof(float));
}

/// e^x per lane. x = n ln2 + r (|r| <= ln2/2, ln2 in two parts), e^r by the Cephes
/// degree-6 polynomial, 2^n through the exponent bits in two halves so results down in
/// the subnormal range stay right. At most about 1 ulp from the correctly rounded value;
/// NaN gives NaN, overflow +inf, underflow +0, as std::exp.
template <typename V>
__attribute__((always_inline)) inline V exp_lanes(V x) {
  using I = typename LaneInt<V>::type;
  // Compares written so NaN clamps to the low end (NaN is passed through at the end).
  V xc = x > -104.0f ? x : V{} - 104.0f;
  xc = xc < 89.0f ? xc : V{} + 89.0f;
  // Round to nearest with the 1.5 * 2^23 trick (floor() is a libm call on SSE2).
  const V n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  V r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  I ni;
  if constexpr (std::is_same_v<V, float>) {
    ni = static_cast<int32_t>(n);
  } else {
    ni = __builtin_convertvector(n, I);
  }
  const I h = ni >> 1;
  const I b1 = (h + 127) << 23, b2 = (ni - h + 127) << 23;
  V s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const V y = p * s1 * s2;
  const V big = x > 88.72283935546875f ? V{} + __builtin_inff() : y;
  return x != x ? x : big;
}

/// 1 / (1 + e^-x).
template <typename V>
__attribute__((always_inline)) inline V sigmoid_lanes(V x) {
  return 1.0f / (1.0f + exp_lanes(-x));
}

/// x * sigmoid(x).
template <typename V>
__attribute__((always_inline)) inline V silu_lanes(V x) {
  return x * sigmoid_lanes(x);
}

/// Gradient of SiLU at x for upstream g: g * s * (1 + x * (1 - s)), s = sigmoid(x).
template <typename V>
__attribute__((always_inline)) inline V silu_grad_lanes(V g, V x) {
  const V s = sigmoid_lanes(x);
  return g * s * (1.0f + x * (1.0f - s));
}

/// erf(x) per lane: Abramowitz & Stegun 7.1.26 on |x| (absolute error <= 1.5e-7, about
/// 2 ulp near 1), sign restored; erf(+-inf) = +-1, NaN gives NaN. std::erf is an opaque
/// libm call that keeps GELU loops scalar.
template <typename V>
__attribute__((always_inline)) inline V erf_lanes(V x) {
  const V ax = x < 0.0f ? -x : x;
  const V t = 1.0f / (1.0f + 0.3275911f * ax);
  V y = t * 1.061405429f - 1.453152027f;
  y = y * t + 1.421413741f;
  y = y * t - 0.284496736f;
  y = y * t + 0.254829592f;
  const V e = 1.0f - y * t * exp_lanes(-ax * ax);
  return x < 0.0f ? -e : e;
}

/// GELU (erf form): x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
template <typename V>
__attribute__((always_inline)) inline V gelu_lanes(V x) {
  return 0.5f * x * (1.0f + erf_lanes(x * 0.70710678118654752440f));
}

/// Gradient of GELU at x for upstream g: g * (Phi(x) + x phi(x)).
template <typename V>
__attribute__((always_inline)) inline V gelu_grad_lanes(V g, V x) {
  const V cdf = 0.5f * (1.0f + erf_lanes(x * 0.70710678118654752440f));
  const V pdf = exp_lanes(-0.5f * x * x) * 0.39894228040143267794f;
  return g * (cdf + x * pdf);
}

/// GELU, tanh form (GPT-2's): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
/// computed as x * sigmoid(2u), the same value without tanh's libm call.
template <typename V>
__attribute__((always_inline)) inline V gelu_tanh_lanes(V x) {
  return x * sigmoid_lanes(x * (1.5957691216057308f + 0.0713548162726f * x * x));
}

/// Gradient of the tanh-form GELU at x for upstream g: with s = sigmoid(2u),
/// g * (s + 2 x s (1 - s) u'), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2). Where 2u > 0,
/// 1 - s is taken as s e^-2u, without the cancellation of 1 - s near 1.
template <typename V>
__attribute__((always_inline)) inline V gelu_tanh_grad_lanes(V g, V x) {
  const V x2 = x * x;
  const V u2 = x * (1.5957691216057308f + 0.0713548162726f * x2);
  const V e = exp_lanes(-u2);
  const V s = 1.0f / (1.0f + e);
  const V rest = u2 > 0.0f ? s * e : 1.0f - s;                // 1 - s
  const V du2 = 1.5957691216057308f + 0.2140644488178f * x2;  // 2u'
  return g * (s + x * s * rest * du2);
}

/// The tanh-form GELU and its gradient for one element: f32 through the lane arithmetic
/// above, f64 through std::tanh (the reference).
inline float gelu_tanh_of(float x) {
  return gelu_tanh_lanes(x);
}
inline double gelu_tanh_of(double x) {
  const double k = 0.79788456080286535588;  // sqrt(2/pi)
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline float gelu_tanh_grad_of(float g, float x) {
  return gelu_tanh_grad_lanes(g, x);
}
inline double gelu_tanh_grad_of(double g, double x) {
  const double k = 0.79788456080286535588;
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  const double du = k * (1.0 + 3.0 * 0.044715 * x * x);
  return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
}

/// The vector ISAs the CPU kernels are built for besides the baseline, widest last.
enum class Isa : uint8_t { kSse2, kAvx2, kAvx512 };

/// The widest Isa this CPU runs (AVX2 counts only with FMA; AVX-512 needs F, DQ, VL, BW).
Isa widest_isa();
/// `widest` capped by `cap` ("avx512", "avx2" or "sse2"; null or "" caps nothing); another
/// value is an error naming ZT_CPU_ISA.
Isa capped_isa(Isa widest, const char* cap);
/// The Isa the kernels run: widest_isa() capped by $ZT_CPU_ISA where set, so that a machine
/// can run, and test, the narrower variants too. Read once, at the first call.
Isa cpu_isa();

/// Target attribute strings of the Isa variants (use as __attribute__((target(...)))).
#define ZT_TARGET_AVX512 "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma"
#define ZT_TARGET_AVX2 "avx2,fma"

/// The f32 functions with a contiguous row kernel.
enum class LaneOp : uint8_t {
  kExp,
  kSigmoid,
  kSilu,
  kSiluGrad,
  kGelu,
  kGeluGrad,
  kGeluTanh,
  kGeluTanhGrad
};

/// out[i] = op(a[i]) (kExp, kSigmoid, kSilu, kGelu, kGeluTanh) or op(a[i], b[i])
/// (kSiluGrad, kGeluGrad, kGeluTanhGrad: a = upstream gradient, b = x), i < n. out may
/// alias a or b.
void lane_row(LaneOp op, float* out, const float* a, const float* b, int64_t n);

}  // namespace zt::cpu
