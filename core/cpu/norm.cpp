// CPU normalization kernels: GroupNorm, BatchNorm and LayerNorm (statistics,
// normalization and the analytic backward). The twin of core/cuda/norm.cu.
//
// Numerics: statistics use one pass with a shift (the block's first element), summing
// (x - k) and (x - k)^2 in double, so the variance does not suffer from cancellation
// when |mean| >> std. Backward sums are taken against (x - mean) for the same reason.
// Work is split over independent rows, each reduced serially, so results do not depend
// on the number of threads. LayerNorm's parameter gradients are summed over fixed blocks
// of rows, whose partial sums are then added in block order, for the same reason.
#include "core/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"

namespace zt::cpu {

namespace {

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

// The four loops above for f32, compiled for each Isa of lanes.h (the library targets the
// baseline, where the double sums run two lanes per instruction); cpu_isa() picks one.
// Every variant keeps the same kLanes partial sums, so they differ only where AVX2 and
// AVX-512 contract a multiply and an add into one rounding (FMA).
struct F32Loops {
  void (*moments)(const float*, int64_t, double&, double&, double);
  void (*grad_sums)(const float*, const float*, int64_t, double, double&, double&);
  void (*scale_shift)(float*, const float*, int64_t, float, float);
  void (*input_grad)(float*, const float*, const float*, int64_t, float, float, float, float);
};

#define ZT_NORM_F32_LOOPS(isa, attr)                                                            \
  attr void moments_##isa(const float* p, int64_t n, double& s1, double& s2, double k) {        \
    shifted_moments_lanes(p, n, s1, s2, k);                                                     \
  }                                                                                             \
  attr void grad_sums_##isa(const float* dy, const float* x, int64_t n, double mu, double& sdy, \
                            double& sdyx) {                                                     \
    grad_sums_lanes(dy, x, n, mu, sdy, sdyx);                                                   \
  }                                                                                             \
  attr void scale_shift_##isa(float* y, const float* x, int64_t n, float a, float b) {          \
    scale_shift_row(y, x, n, a, b);                                                             \
  }                                                                                             \
  attr void input_grad_##isa(float* dx, const float* dy, const float* x, int64_t n, float c1,   \
                             float c2, float mu, float c3) {                                    \
    input_grad_row(dx, dy, x, n, c1, c2, mu, c3);                                               \
  }                                                                                             \
  constexpr F32Loops kLoops_##isa{moments_##isa, grad_sums_##isa, scale_shift_##isa,            \
                                  input_grad_##isa};
ZT_NORM_F32_LOOPS(avx512, __attribute__((target(ZT_TARGET_AVX512))))
ZT_NORM_F32_LOOPS(avx2, __attribute__((target(ZT_TARGET_AVX2))))
ZT_NORM_F32_LOOPS(sse2, )
#undef ZT_NORM_F32_LOOPS

// The picked table, set on first use. Not a function-local static: its guard check on
// every row cost a few percent on rows of 16 (BatchNorm on 4x4 maps). The tables are
// constants, so a relaxed pointer is enough (threads racing to set it store the same).
std::atomic<const F32Loops*> g_f32_loops{nullptr};

const F32Loops& f32_loops() {
  const F32Loops* loops = g_f32_loops.load(std::memory_order_relaxed);
  if (!loops) {
    loops = cpu_isa() == Isa::kAvx512 ? &kLoops_avx512
            : cpu_isa() == Isa::kAvx2 ? &kLoops_avx2
                                      : &kLoops_sse2;
    g_f32_loops.store(loops, std::memory_order_relaxed);
  }
  return *loops;
}

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
void moments_from_shifted_sums(double k, double s1, double s2, int64_t M, double& mu, double& var) {
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

}  // namespace

// ---------------------------------------------------------------- GroupNorm

void group_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S,
                        int64_t G, double eps) {
  dispatch_f32_f64(x.dtype(), "group_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    T* py = y.data<T>();
    T* pm = mean.data<T>();
    T* pr = rstd.data<T>();
    const int64_t Cg = C / G, M = Cg * S;
    parallel_for(N * G, grain_for(M), [&](int64_t b0, int64_t b1) {
      for (int64_t ng = b0; ng < b1; ++ng) {
        int64_t n = ng / G, g = ng % G;
        const T* blk = px + (n * C + g * Cg) * S;
        double mu, var;
        contiguous_moments(blk, M, mu, var);
        double r = 1.0 / std::sqrt(var + eps);
        pm[ng] = static_cast<T>(mu);
        pr[ng] = static_cast<T>(r);
        for (int64_t cc = 0; cc < Cg; ++cc) {
          int64_t c = g * Cg + cc;
          double a = r * (pw ? static_cast<double>(pw[c]) : 1.0);
          double sh = (pb ? static_cast<double>(pb[c]) : 0.0) - mu * a;
          const T* xr = blk + cc * S;
          T* yr = py + (n * C + c) * S;
          scale_shift(yr, xr, S, static_cast<T>(a), static_cast<T>(sh));
        }
      }
    });
  });
}

void group_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, int64_t G) {
  dispatch_f32_f64(x.dtype(), "group_norm backward", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* pm = mean.data<T>();
    const T* pr = rstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    const int64_t Cg = C / G, M = Cg * S;
    T* pdx = data_or_null<T>(dx);
    const double inv_m = M > 0 ? 1.0 / static_cast<double>(M) : 0.0;
    // Per (n, g) block, whose rows then stay in cache: per channel, sum dy and sum
    // dy * (x - mean); then with xhat = (x - mean) r and dxhat = dy w,
    //   dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
    //      = r w dy + c2 (x - mean) + c3.
    std::vector<double> sdy(N * C), sdyx(N * C);
    parallel_for(N * G, grain_for(M), [&](int64_t b0, int64_t b1) {
      for (int64_t ng = b0; ng < b1; ++ng) {
        const int64_t n = ng / G, c0 = (ng % G) * Cg;
        const double r = static_cast<double>(pr[ng]), mu = static_cast<double>(pm[ng]);
        for (int64_t nc = n * C + c0; nc < n * C + c0 + Cg; ++nc) {
          double a = 0, b = 0;
          grad_sums(pdy + nc * S, px + nc * S, S, mu, a, b);
          sdy[nc] = a;
          sdyx[nc] = b;
        }
        if (!pdx) continue;
        double sum_dxhat = 0, sum_dxhat_xc = 0;  // xc = x - mean
        for (int64_t c = c0; c < c0 + Cg; ++c) {
          const double w = pw ? static_cast<double>(pw[c]) : 1.0;
          sum_dxhat += w * sdy[n * C + c];
          sum_dxhat_xc += w * sdyx[n * C + c];
        }
        const double c2 = -r * r * r * sum_dxhat_xc * inv_m;
        const double c3 = -r * sum_dxhat * inv_m;
        for (int64_t c = c0; c < c0 + Cg; ++c) {
          const double c1 = r * (pw ? static_cast<double>(pw[c]) : 1.0);
          const int64_t row = (n * C + c) * S;
          input_grad(pdx + row, pdy + row, px + row, S, static_cast<T>(c1), static_cast<T>(c2),
                     static_cast<T>(mu), static_cast<T>(c3));
        }
      }
    });
    // Parameter gradients: dweight[c] = sum_n rstd * sum dy (x - mean); dbias = sum dy.
    T* pdw = data_or_null<T>(dweight);
    T* pdb = data_or_null<T>(dbias);
    for (int64_t c = 0; c < C && (pdw || pdb); ++c) {
      double w = 0, b = 0;
      for (int64_t n = 0; n < N; ++n) {
        w += static_cast<double>(pr[n * G + c / Cg]) * sdyx[n * C + c];
        b += sdy[n * C + c];
      }
      if (pdw) pdw[c] = static_cast<T>(w);
      if (pdb) pdb[c] = static_cast<T>(b);
    }
  });
}

// ---------------------------------------------------------------- BatchNorm

void batch_norm_stats(const Tensor& mean, const Tensor& var, const Tensor& x, int64_t N, int64_t C,
                      int64_t S) {
  dispatch_f32_f64(x.dtype(), "batch_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    T* pm = mean.data<T>();
    T* pv = var.data<T>();
    const int64_t M = N * S;
    parallel_for(C, grain_for(M), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mu = 0, v = 0;
        if (M > 0) {
          double k = static_cast<double>(px[c * S]), s1 = 0, s2 = 0;
          for (int64_t n = 0; n < N; ++n) shifted_moments(px + (n * C + c) * S, S, s1, s2, k);
          moments_from_shifted_sums(k, s1, s2, M, mu, v);
        }
        pm[c] = static_cast<T>(mu);
        pv[c] = static_cast<T>(v);
      }
    });
  });
}

void batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S) {
  dispatch_f32_f64(x.dtype(), "batch_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pm = mean.data<T>();
    const T* pr = rstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    T* py = y.data<T>();
    parallel_for(N * C, grain_for(S), [&](int64_t r0, int64_t r1) {
      for (int64_t nc = r0; nc < r1; ++nc) {
        int64_t c = nc % C;
        double a = static_cast<double>(pr[c]) * (pw ? static_cast<double>(pw[c]) : 1.0);
        double sh = (pb ? static_cast<double>(pb[c]) : 0.0) - static_cast<double>(pm[c]) * a;
        scale_shift(py + nc * S, px + nc * S, S, static_cast<T>(a), static_cast<T>(sh));
      }
    });
  });
}

void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, bool training) {
  dispatch_f32_f64(x.dtype(), "batch_norm backward", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* pm = mean.data<T>();
    const T* pr = rstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    const int64_t M = N * S;
    // Phase 1, per channel: sum dy and sum dy * (x - mean).
    std::vector<double> sdy(C), sdyx(C);
    parallel_for(C, grain_for(M), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mu = static_cast<double>(pm[c]), a = 0, b = 0;
        for (int64_t n = 0; n < N; ++n)
          grad_sums(pdy + (n * C + c) * S, px + (n * C + c) * S, S, mu, a, b);
        sdy[c] = a;
        sdyx[c] = b;
      }
    });
    T* pdw = data_or_null<T>(dweight);
    T* pdb = data_or_null<T>(dbias);
    for (int64_t c = 0; c < C; ++c) {
      if (pdw) pdw[c] = static_cast<T>(sdyx[c] * static_cast<double>(pr[c]));
      if (pdb) pdb[c] = static_cast<T>(sdy[c]);
    }
    if (!dx.defined()) return;
    // Phase 2, per (n, c) row. training: dx = w r (dy - mean(dy) - xc r^2 mean(dy xc));
    // eval: the statistics are constants, dx = w r dy.
    T* pdx = dx.data<T>();
    const double inv_m = M > 0 ? 1.0 / static_cast<double>(M) : 0.0;
    parallel_for(N * C, grain_for(S), [&](int64_t r0, int64_t r1) {
      for (int64_t nc = r0; nc < r1; ++nc) {
        int64_t c = nc % C;
        double r = static_cast<double>(pr[c]);
        double c1 = r * (pw ? static_cast<double>(pw[c]) : 1.0);
        double c2 = training ? -c1 * r * r * sdyx[c] * inv_m : 0.0;
        double c3 = training ? -c1 * sdy[c] * inv_m : 0.0;
        input_grad(pdx + nc * S, pdy + nc * S, px + nc * S, S, static_cast<T>(c1),
                   static_cast<T>(c2), pm[c], static_cast<T>(c3));
      }
    });
  });
}

// ---------------------------------------------------------------- LayerNorm

namespace {

// Rows per block of the parameter-gradient sums: a split of the rows, not of the
// threads, so dweight and dbias do not depend on the thread count.
constexpr int64_t kLayerNormRowBlock = 32;

// y = ((x - m) rs) w + b in A, rounded once to T; w, b may be null.
template <typename T, typename A>
void layer_norm_row(T* __restrict y, const T* __restrict x, const T* __restrict w,
                    const T* __restrict b, int64_t D, A m, A rs) {
  if (w && b) {
    for (int64_t j = 0; j < D; ++j)
      y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs * static_cast<A>(w[j]) +
                            static_cast<A>(b[j]));
  } else if (w) {
    for (int64_t j = 0; j < D; ++j)
      y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs * static_cast<A>(w[j]));
  } else if (b) {
    for (int64_t j = 0; j < D; ++j)
      y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs + static_cast<A>(b[j]));
  } else {
    for (int64_t j = 0; j < D; ++j) y[j] = static_cast<T>((static_cast<A>(x[j]) - m) * rs);
  }
}

// One row of layer_norm_backward. xhat and g are scratch rows; sw, sb (the row block's
// sums of dy xhat and dy) and dx may be null (not wanted). With g = dy w:
//   dx = rs (g - mean(g) - xhat mean(g xhat)).
// The pointers are restrict so the loops vectorize when T is A (f32, f64).
template <typename T, typename A>
void layer_norm_row_backward(T* __restrict dx, double* __restrict sw, double* __restrict sb,
                             const T* __restrict dy, const T* __restrict x, const T* __restrict w,
                             A* __restrict xhat, A* __restrict g, int64_t D, A m, A rs, A inv_d) {
  for (int64_t j = 0; j < D; ++j) xhat[j] = (static_cast<A>(x[j]) - m) * rs;
  if (sw) {
    for (int64_t j = 0; j < D; ++j) {
      const double d = static_cast<double>(dy[j]);
      sw[j] += d * static_cast<double>(xhat[j]);
      sb[j] += d;
    }
  }
  if (!dx) return;
  if (w) {
    for (int64_t j = 0; j < D; ++j) g[j] = static_cast<A>(dy[j]) * static_cast<A>(w[j]);
  } else {
    for (int64_t j = 0; j < D; ++j) g[j] = static_cast<A>(dy[j]);
  }
  double sg = 0, sgx = 0;
  pair_sums(g, xhat, D, sg, sgx);
  const A c3 = -static_cast<A>(sg) * inv_d, c2 = -static_cast<A>(sgx) * inv_d;
  for (int64_t j = 0; j < D; ++j) dx[j] = static_cast<T>((g[j] + c3 + xhat[j] * c2) * rs);
}

}  // namespace

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t rows, int64_t D,
                        double eps) {
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const T* px = x.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    T* py = y.data<T>();
    A* pm = mean.data<A>();
    A* pr = rstd.data<A>();
    parallel_for(rows, grain_for(D), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = px + r * D;
        double mu, var;
        contiguous_moments(xr, D, mu, var);
        const A m = static_cast<A>(mu), rs = static_cast<A>(1.0 / std::sqrt(var + eps));
        pm[r] = m;
        pr[r] = rs;
        layer_norm_row(py + r * D, xr, pw, pb, D, m, rs);
      }
    });
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t rows, int64_t D) {
  dispatch_floating(x.dtype(), "layer_norm backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    const T* pw = data_or_null<T>(weight);
    const A* pm = mean.data<A>();
    const A* pr = rstd.data<A>();
    T* pdx = data_or_null<T>(dx);
    const bool params = dweight.defined() || dbias.defined();
    const int64_t blocks = (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
    // Per block of rows: sum dy * xhat and sum dy for every column.
    std::vector<double> part_w(params ? blocks * D : 0), part_b(params ? blocks * D : 0);
    const A inv_d = D > 0 ? static_cast<A>(1.0 / static_cast<double>(D)) : A(0);
    parallel_for(blocks, grain_for(kLayerNormRowBlock * D), [&](int64_t b0, int64_t b1) {
      std::vector<A> xhat(static_cast<size_t>(D)), g(static_cast<size_t>(D));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t r_end = std::min(rows, (blk + 1) * kLayerNormRowBlock);
        for (int64_t r = blk * kLayerNormRowBlock; r < r_end; ++r) {
          layer_norm_row_backward(pdx ? pdx + r * D : nullptr,
                                  params ? part_w.data() + blk * D : nullptr,
                                  params ? part_b.data() + blk * D : nullptr, pdy + r * D,
                                  px + r * D, pw, xhat.data(), g.data(), D, pm[r], pr[r], inv_d);
        }
      }
    });
    if (!params) return;
    T* pdw = data_or_null<T>(dweight);
    T* pdb = data_or_null<T>(dbias);
    // Each column's partial sums in block order (blocks outer so the reads are rows).
    parallel_for(D, grain_for(blocks), [&](int64_t j0, int64_t j1) {
      std::vector<double> w(static_cast<size_t>(j1 - j0)), b(static_cast<size_t>(j1 - j0));
      for (int64_t blk = 0; blk < blocks; ++blk) {
        for (int64_t j = j0; j < j1; ++j) {
          w[j - j0] += part_w[blk * D + j];
          b[j - j0] += part_b[blk * D + j];
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        if (pdw) pdw[j] = static_cast<T>(w[j - j0]);
        if (pdb) pdb[j] = static_cast<T>(b[j - j0]);
      }
    });
  });
}

}  // namespace zt::cpu
