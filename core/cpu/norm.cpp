// CPU normalization kernels: GroupNorm with its epilogue and BatchNorm (statistics,
// normalization and the analytic backward); LayerNorm is in cpu/layer_norm.cpp. The twin of
// core/cuda/norm.cu.
//
// Numerics: statistics use one pass with a shift (the block's first element), summing
// (x - k) and (x - k)^2 in double, so the variance does not suffer from cancellation
// when |mean| >> std. Backward sums are taken against (x - mean) for the same reason.
// Work is split over independent rows, each reduced serially, so results do not depend
// on the number of threads. The row sums and loops are in cpu/norm_sums.h, GroupNorm's f32
// rows with the epilogue in cpu/norm_epilogue.h.
// The wide-vector helpers of those headers are always inlined into functions built for
// their ISA, so GCC's warning that passing such vectors by value changes the ABI does not
// apply (as in cpu/lanes.cpp).
#pragma GCC diagnostic ignored "-Wpsabi"

#include "core/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/cpu/norm_epilogue.h"
#include "core/cpu/norm_sums.h"

namespace zt::cpu {

namespace {

#define ZT_NORM_F32_LOOPS(isa, attr, V)                                                         \
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
  attr double sum_##isa(const float* p, int64_t n) {                                            \
    return sum_lanes(p, n);                                                                     \
  }                                                                                             \
  attr float max_scaled_##isa(const float* p, int64_t n, float scale) {                         \
    return max_scaled_lanes(p, n, scale);                                                       \
  }                                                                                             \
  attr void gn_epilogue_##isa(float* y, const float* x, int64_t n, float a, float sh,           \
                              const float* scale, const float* shift, bool silu) {              \
    gn_epilogue_lanes<V>(y, x, n, a, sh, scale, shift, silu);                                   \
  }                                                                                             \
  attr void gn_epilogue_grad_##isa(float* dn, float* dscale, float* dshift, const float* dy,    \
                                   const float* x, int64_t n, float a, float sh,                \
                                   const float* scale, const float* shift, bool silu) {         \
    gn_epilogue_grad_lanes<V>(dn, dscale, dshift, dy, x, n, a, sh, scale, shift, silu);         \
  }                                                                                             \
  constexpr F32Loops kLoops_##isa{                                                              \
      moments_##isa, grad_sums_##isa,  scale_shift_##isa, input_grad_##isa,                     \
      sum_##isa,     max_scaled_##isa, gn_epilogue_##isa, gn_epilogue_grad_##isa};
ZT_NORM_F32_LOOPS(avx512, __attribute__((target(ZT_TARGET_AVX512))), f32x16)
ZT_NORM_F32_LOOPS(avx2, __attribute__((target(ZT_TARGET_AVX2))), f32x8)
ZT_NORM_F32_LOOPS(sse2, , f32x4)
#undef ZT_NORM_F32_LOOPS

// The picked table, set on first use. Not a function-local static: its guard check on
// every row cost a few percent on rows of 16 (BatchNorm on 4x4 maps). The tables are
// constants, so a relaxed pointer is enough (threads racing to set it store the same).
std::atomic<const F32Loops*> g_f32_loops{nullptr};

}  // namespace

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

// ---------------------------------------------------------------- GroupNorm

namespace {

// One row of y = x a + sh, then the epilogue: y = y scale + shift when scale is not null,
// then silu. f32 runs in one pass of the F32Loops (cpu/norm_epilogue.h); f64 here,
// element by element.
template <typename T>
void epilogue_row(T* y, const T* x, int64_t n, T a, T sh, const T* scale, const T* shift,
                  bool silu) {
  if constexpr (std::is_same_v<T, float>) {
    f32_loops().gn_epilogue(y, x, n, a, sh, scale, shift, silu);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      T v = x[i] * a + sh;
      if (scale) v = v * scale[i] + shift[i];
      y[i] = silu ? v / (T(1) + std::exp(-v)) : v;
    }
  }
}

// The backward of epilogue_row for upstream dy, with n = x a + sh recomputed as the
// forward rounded it and z = n scale + shift (or n): dz = silu'(z) dy (or dy); when
// modulated, dshift = dz and dscale = dz n (where not null), dn = dz scale; else dn = dz.
template <typename T>
void epilogue_grad_row(T* dn, T* dscale, T* dshift, const T* dy, const T* x, int64_t n, T a, T sh,
                       const T* scale, const T* shift, bool silu) {
  if constexpr (std::is_same_v<T, float>) {
    f32_loops().gn_epilogue_grad(dn, dscale, dshift, dy, x, n, a, sh, scale, shift, silu);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i] * a + sh;
      T dz = dy[i];
      if (silu) {
        const T z = scale ? v * scale[i] + shift[i] : v;
        const T sg = T(1) / (T(1) + std::exp(-z));
        dz = dz * sg * (T(1) + z * (T(1) - sg));
      }
      if (scale) {
        if (dshift) dshift[i] = dz;
        if (dscale) dscale[i] = dz * v;
        dz = dz * scale[i];
      }
      dn[i] = dz;
    }
  }
}

// The per-channel coefficients of n = x a + sh, from the statistics as stored (mean,
// rstd in T): the backward recomputes the forward's n bit for bit.
template <typename T>
void affine_coefs(const T* w, const T* b, int64_t c, T mean, T rstd, T& a, T& sh) {
  const double mu = static_cast<double>(mean);
  const double ad = static_cast<double>(rstd) * (w ? static_cast<double>(w[c]) : 1.0);
  a = static_cast<T>(ad);
  sh = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) - mu * ad);
}

}  // namespace

void group_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const GroupNormEpilogue& epi,
                        int64_t N, int64_t C, int64_t S, int64_t G, double eps) {
  dispatch_f32_f64(x.dtype(), "group_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    const T* ps = data_or_null<T>(epi.scale);
    const T* pt = data_or_null<T>(epi.shift);
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
        pm[ng] = static_cast<T>(mu);
        pr[ng] = static_cast<T>(1.0 / std::sqrt(var + eps));
        for (int64_t cc = 0; cc < Cg; ++cc) {
          const int64_t c = g * Cg + cc, row = (n * C + c) * S;
          T a, sh;
          affine_coefs(pw, pb, c, pm[ng], pr[ng], a, sh);
          epilogue_row(py + row, blk + cc * S, S, a, sh, ps ? ps + row : nullptr,
                       pt ? pt + row : nullptr, epi.silu);
        }
      }
    });
  });
}

void group_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dscale, const Tensor& dshift, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& bias, const GroupNormEpilogue& epi,
                         int64_t N, int64_t C, int64_t S, int64_t G) {
  dispatch_f32_f64(x.dtype(), "group_norm backward", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pm = mean.data<T>();
    const T* pr = rstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    const T* ps = data_or_null<T>(epi.scale);
    const T* pt = data_or_null<T>(epi.shift);
    T* pds = data_or_null<T>(dscale);
    T* pdt = data_or_null<T>(dshift);
    const int64_t Cg = C / G, M = Cg * S;
    T* pdx = data_or_null<T>(dx);
    const T* pdy = dy.data<T>();
    T* pdw = data_or_null<T>(dweight);
    T* pdb = data_or_null<T>(dbias);
    const bool norm_grads = pdx || pdw || pdb;  // else only the epilogue's (scale, shift)
    const double inv_m = M > 0 ? 1.0 / static_cast<double>(M) : 0.0;
    // Per (n, g) block, whose rows then stay in cache: per channel, sum dy and sum
    // dy * (x - mean); then with xhat = (x - mean) r and dxhat = dy w,
    //   dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
    //      = r w dy + c2 (x - mean) + c3.
    std::vector<double> sdy(N * C), sdyx(N * C);
    parallel_for(N * G, grain_for(M), [&](int64_t b0, int64_t b1) {
      // With an epilogue, the block's gradient of n (gn) is what the norm's backward
      // below reads as its dy.
      std::vector<T> gn(epi.active() ? M : 0);
      for (int64_t ng = b0; ng < b1; ++ng) {
        const int64_t n = ng / G, c0 = (ng % G) * Cg;
        const double r = static_cast<double>(pr[ng]), mu = static_cast<double>(pm[ng]);
        // The block's dy, rows of S from channel c0 on.
        const T* bdy = epi.active() ? gn.data() : pdy + (n * C + c0) * S;
        for (int64_t c = c0; epi.active() && c < c0 + Cg; ++c) {
          const int64_t row = (n * C + c) * S;
          T a, sh;
          affine_coefs(pw, pb, c, pm[ng], pr[ng], a, sh);
          epilogue_grad_row(gn.data() + (c - c0) * S, pds ? pds + row : nullptr,
                            pdt ? pdt + row : nullptr, pdy + row, px + row, S, a, sh,
                            ps ? ps + row : nullptr, pt ? pt + row : nullptr, epi.silu);
        }
        if (!norm_grads) continue;
        for (int64_t cc = 0; cc < Cg; ++cc) {
          const int64_t nc = n * C + c0 + cc;
          double a = 0, b = 0;
          grad_sums(bdy + cc * S, px + nc * S, S, mu, a, b);
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
          input_grad(pdx + row, bdy + (c - c0) * S, px + row, S, static_cast<T>(c1),
                     static_cast<T>(c2), static_cast<T>(mu), static_cast<T>(c3));
        }
      }
    });
    // Parameter gradients: dweight[c] = sum_n rstd * sum dy (x - mean); dbias = sum dy.
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

void batch_norm_stats(const Tensor& mean, const Tensor& rstd, const Tensor& running_mean,
                      const Tensor& running_var, const Tensor& counter, const Tensor& x, int64_t N,
                      int64_t C, int64_t S, double eps, double momentum) {
  const int64_t M = N * S;
  const bool running = running_mean.defined();
  std::vector<double> mus(running ? C : 0), vars(running ? C : 0);  // for the running update
  dispatch_f32_f64(x.dtype(), "batch_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    T* pm = mean.data<T>();
    T* pr = rstd.data<T>();
    parallel_for(C, grain_for(M), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mu = 0, v = 0;
        if (M > 0) {
          double k = static_cast<double>(px[c * S]), s1 = 0, s2 = 0;
          for (int64_t n = 0; n < N; ++n) shifted_moments(px + (n * C + c) * S, S, s1, s2, k);
          moments_from_shifted_sums(k, s1, s2, M, mu, v);
        }
        pm[c] = static_cast<T>(mu);
        pr[c] = static_cast<T>(1.0 / std::sqrt(v + eps));
        if (running) {
          mus[c] = mu;
          vars[c] = v;
        }
      }
    });
  });
  if (counter.defined() && C > 0) ++*counter.data<int64_t>();  // after the dtype check
  if (!running) return;
  const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
  dispatch_floating(running_mean.dtype(), "batch_norm running statistics", [&]<typename R>() {
    R* rm = running_mean.data<R>();
    R* rv = running_var.data<R>();
    // In double; bf16/f16 are made from a float (two roundings, as the GPU's convert<R>).
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = static_cast<R>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mus[c]);
      rv[c] = static_cast<R>((1.0 - momentum) * static_cast<double>(rv[c]) +
                             momentum * unbias * vars[c]);
    }
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

}  // namespace zt::cpu
