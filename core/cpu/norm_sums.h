// The row sums and row loops of the CPU normalization kernels, shared by cpu/norm.cpp
// (GroupNorm, BatchNorm, and the f32 loops compiled per ISA) and cpu/layer_norm.cpp, and
// the f32 softmax row of cpu/softmax.cpp and cpu/attention.cpp (softmax_row_f32), and the
// convolutions' bias gradient (row_sum, cpu/conv.cpp). Private to those files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cpu/lanes.h"

namespace zt::cpu {

// Sums are taken in kLanes independent double accumulators (a fixed order, so still
// deterministic) and combined at the end: a single running double sum is a chain of
// dependent adds, several times slower than the loads feeding it.
constexpr int64_t kLanes = 8;

// kLanes doubles in one vector: GCC lowers it to the widest registers of the target (one
// AVX-512 register, two AVX2 or four SSE2 ones), lane j adding elements i = j mod kLanes.
using f64xL = double __attribute__((vector_size(kLanes * sizeof(double))));
using f32xL = float __attribute__((vector_size(kLanes * sizeof(float))));

// p[0..kLanes) as doubles.
template <typename T>
__attribute__((always_inline)) inline void load_lanes(const T* p, f64xL& v) {
  if constexpr (std::is_same_v<T, float>) {
    f32xL f;
    std::memcpy(&f, p, sizeof f);
    v = __builtin_convertvector(f, f64xL);
  } else {
    for (int64_t j = 0; j < kLanes; ++j) v[j] = static_cast<double>(p[j]);
  }
}

// Adds sum(p - k) to s1 and sum((p - k)^2) to s2 over p[0..n).
template <typename T>
__attribute__((always_inline)) inline void shifted_moments_lanes(const T* p, int64_t n, double& s1,
                                                                 double& s2, double k) {
  f64xL a1 = {}, a2 = {}, d;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(p + i, d);
    d -= k;
    a1 += d;
    a2 += d * d;
  }
  for (; i < n; ++i) {
    const double e = static_cast<double>(p[i]) - k;
    a1[0] += e;
    a2[0] += e * e;
  }
  for (int64_t j = 0; j < kLanes; ++j) {
    s1 += a1[j];
    s2 += a2[j];
  }
}

// Adds sum(dy) to sdy and sum(dy * (x - mu)) to sdyx over [0, n).
template <typename T>
__attribute__((always_inline)) inline void grad_sums_lanes(const T* dy, const T* x, int64_t n,
                                                           double mu, double& sdy, double& sdyx) {
  f64xL a = {}, b = {}, d, e;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(dy + i, d);
    load_lanes(x + i, e);
    a += d;
    b += d * (e - mu);
  }
  for (; i < n; ++i) {
    const double g = static_cast<double>(dy[i]);
    a[0] += g;
    b[0] += g * (static_cast<double>(x[i]) - mu);
  }
  for (int64_t j = 0; j < kLanes; ++j) {
    sdy += a[j];
    sdyx += b[j];
  }
}

// sum(p[0..n)) in double.
template <typename T>
__attribute__((always_inline)) inline double sum_lanes(const T* p, int64_t n) {
  f64xL a = {}, d;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    load_lanes(p + i, d);
    a += d;
  }
  for (; i < n; ++i) a[0] += static_cast<double>(p[i]);
  double s = 0;
  for (int64_t j = 0; j < kLanes; ++j) s += a[j];
  return s;
}

// max(p[i] scale) over [0, n), NaNs passed over as std::max(m, v) does (-inf when n is
// 0 or every product is NaN or -inf), in kLanes running maxima.
__attribute__((always_inline)) inline float max_scaled_lanes(const float* p, int64_t n,
                                                             float scale) {
  f32xL m = f32xL{} - INFINITY, v;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    std::memcpy(&v, p + i, sizeof v);
    v *= scale;
    m = v > m ? v : m;
  }
  float mx = -INFINITY;
  for (int64_t j = 0; j < kLanes; ++j) mx = std::max(mx, m[j]);
  for (; i < n; ++i) mx = std::max(mx, p[i] * scale);
  return mx;
}

// y[i] = x[i] a + b over [0, n).
template <typename T>
__attribute__((always_inline)) inline void scale_shift_row(T* y, const T* x, int64_t n, T a, T b) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

// The input gradient of a row, dx[i] = c1 dy[i] + c2 (x[i] - mu) + c3, over [0, n).
template <typename T>
__attribute__((always_inline)) inline void input_grad_row(T* dx, const T* dy, const T* x, int64_t n,
                                                          T c1, T c2, T mu, T c3) {
  for (int64_t i = 0; i < n; ++i) dx[i] = c1 * dy[i] + c2 * (x[i] - mu) + c3;
}

// The loops above for f32, compiled in cpu/norm.cpp for each Isa of lanes.h (the
// library targets the baseline, where the double sums run two lanes per instruction);
// cpu_isa() picks one.
// Every variant keeps the same kLanes partial sums, so they differ only where AVX2 and
// AVX-512 contract a multiply and an add into one rounding (FMA).
struct F32Loops {
  void (*moments)(const float*, int64_t, double&, double&, double);
  void (*grad_sums)(const float*, const float*, int64_t, double, double&, double&);
  void (*scale_shift)(float*, const float*, int64_t, float, float);
  void (*input_grad)(float*, const float*, const float*, int64_t, float, float, float, float);
  double (*sum)(const float*, int64_t);
  float (*max_scaled)(const float*, int64_t, float);
  // GroupNorm's rows with their epilogue (cpu/norm_epilogue.h): gn_epilogue_lanes and
  // gn_epilogue_grad_lanes.
  void (*gn_epilogue)(float*, const float*, int64_t, float, float, const float*, const float*,
                      bool);
  void (*gn_epilogue_grad)(float*, float*, float*, const float*, const float*, int64_t, float,
                           float, const float*, const float*, bool);
};

/// The F32Loops compiled for this machine's ISA (cpu_isa()), picked on first use
/// (cpu/norm.cpp).
const F32Loops& f32_loops();

template <typename T>
void shifted_moments(const T* p, int64_t n, double& s1, double& s2, double k) {
  if constexpr (std::is_same_v<T, float>) {
    f32_loops().moments(p, n, s1, s2, k);
  } else {
    shifted_moments_lanes(p, n, s1, s2, k);
  }
}

template <typename T>
void grad_sums(const T* dy, const T* x, int64_t n, double mu, double& sdy, double& sdyx) {
  if constexpr (std::is_same_v<T, float>) {
    f32_loops().grad_sums(dy, x, n, mu, sdy, sdyx);
  } else {
    grad_sums_lanes(dy, x, n, mu, sdy, sdyx);
  }
}

template <typename T>
void scale_shift(T* y, const T* x, int64_t n, T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    f32_loops().scale_shift(y, x, n, a, b);
  } else {
    scale_shift_row(y, x, n, a, b);
  }
}

template <typename T>
void input_grad(T* dx, const T* dy, const T* x, int64_t n, T c1, T c2, T mu, T c3) {
  if constexpr (std::is_same_v<T, float>) {
    f32_loops().input_grad(dx, dy, x, n, c1, c2, mu, c3);
  } else {
    input_grad_row(dx, dy, x, n, c1, c2, mu, c3);
  }
}

// Mean and (biased) variance of M > 0 values from their shifted sums s1 = sum(x - k) and
// s2 = sum((x - k)^2); the variance is clamped at 0 against rounding.
inline void moments_from_shifted_sums(double k, double s1, double s2, int64_t M, double& mu,
                                      double& var) {
  const double m1 = s1 / static_cast<double>(M);
  mu = k + m1;
  var = std::max(0.0, s2 / static_cast<double>(M) - m1 * m1);
}

// Mean and (biased) variance of p[0..n), shifted by p[0] for accuracy; 0 and 0 when empty.
template <typename T>
void contiguous_moments(const T* p, int64_t n, double& mu, double& var) {
  mu = var = 0;
  if (n <= 0) return;
  double k = static_cast<double>(p[0]), s1 = 0, s2 = 0;
  shifted_moments(p, n, s1, s2, k);
  moments_from_shifted_sums(k, s1, s2, n, mu, var);
}

// Adds sum(g) to sg and sum(g * h) to sgh over [0, n).
template <typename A>
void pair_sums(const A* g, const A* h, int64_t n, double& sg, double& sgh) {
  double a[kLanes] = {}, b[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      a[j] += static_cast<double>(g[i + j]);
      b[j] += static_cast<double>(g[i + j]) * static_cast<double>(h[i + j]);
    }
  }
  for (; i < n; ++i) {
    a[0] += static_cast<double>(g[i]);
    b[0] += static_cast<double>(g[i]) * static_cast<double>(h[i]);
  }
  for (int64_t j = 0; j < kLanes; ++j) {
    sg += a[j];
    sgh += b[j];
  }
}
// sum(p[0..n)) in double, as sum_lanes.
template <typename T>
double row_sum(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return f32_loops().sum(p, n);
  } else {
    return sum_lanes(p, n);
  }
}

// The softmax of a contiguous f32 row times `scale`, y = exp(x scale - m) / sum: m the
// row's max (0 when it is -inf, so an all -inf row is NaN, not inf - inf), the sum of the
// exponentials in double, the exponentials by lanes.h's exp. Returns log(sum) + m, the
// row's log-sum-exp, and m in *max_out if given. y may be x.
inline double softmax_row_f32(float* y, const float* x, int64_t n, float scale,
                              float* max_out = nullptr) {
  float m = f32_loops().max_scaled(x, n, scale);
  if (std::isinf(m) && m < 0) m = 0;
  if (max_out) *max_out = m;
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale - m;
  lane_row(LaneOp::kExp, y, y, nullptr, n);
  const double sum = row_sum(y, n);
  const auto inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  return std::log(sum) + static_cast<double>(m);
}

}  // namespace zt::cpu
