// CPU softmax / log-softmax over one dim and the negative log-likelihood pieces of
// cross_entropy; the twin of core/cuda/softmax.cu. Softmax takes the max in the
// tensor's dtype, the sum of exp(x - max) in double, and writes the log-sum-exp and the
// outputs in the tensor's dtype. Rows are independent and each is reduced serially, so
// results do not depend on the number of threads.
// Legend: (R, L, I) the tensor viewed as rows before the softmax dim, the dim, and the
// elements after it; P positions and C classes for the loss.
#include <algorithm>
#include <cmath>

#include "core/cpu/loops.h"
#include "core/kernels.h"

namespace zt::cpu {

void softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, int64_t I, bool log) {
  dispatch_f32_f64(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(R * I, grain_for(L), [&](int64_t b0, int64_t b1) {
      for (int64_t ri = b0; ri < b1; ++ri) {
        int64_t r = ri / I, i = ri % I;
        const T* xr = px + r * L * I + i;
        T* yr = py + r * L * I + i;
        T mx = -INFINITY;
        for (int64_t l = 0; l < L; ++l) mx = std::max(mx, xr[l * I]);
        if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
        double sum = 0;
        for (int64_t l = 0; l < L; ++l) sum += static_cast<double>(std::exp(xr[l * I] - mx));
        if (log) {
          const T lse = static_cast<T>(std::log(sum)) + mx;
          for (int64_t l = 0; l < L; ++l) yr[l * I] = xr[l * I] - lse;
        } else {
          const T inv = static_cast<T>(1.0 / sum);
          for (int64_t l = 0; l < L; ++l) yr[l * I] = std::exp(xr[l * I] - mx) * inv;
        }
      }
    });
  });
}

void softmax_backward(const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t R, int64_t L,
                      int64_t I, bool log) {
  dispatch_f32_f64(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&]<typename T>() {
    const T* pdy = dy.data<T>();
    const T* py = y.data<T>();
    T* pdx = dx.data<T>();
    parallel_for(R * I, grain_for(L), [&](int64_t b0, int64_t b1) {
      for (int64_t ri = b0; ri < b1; ++ri) {
        int64_t off = (ri / I) * L * I + ri % I;
        const T* g = pdy + off;
        const T* yr = py + off;
        T* o = pdx + off;
        double s = 0;
        if (log) {
          // dx = dy - softmax * sum(dy)
          for (int64_t l = 0; l < L; ++l) s += static_cast<double>(g[l * I]);
          const T ts = static_cast<T>(s);
          for (int64_t l = 0; l < L; ++l) o[l * I] = g[l * I] - std::exp(yr[l * I]) * ts;
        } else {
          // dx = y (dy - sum(dy y))
          for (int64_t l = 0; l < L; ++l)
            s += static_cast<double>(g[l * I]) * static_cast<double>(yr[l * I]);
          const T ts = static_cast<T>(s);
          for (int64_t l = 0; l < L; ++l) o[l * I] = yr[l * I] * (g[l * I] - ts);
        }
      }
    });
  });
}

// ---------------------------------------------------------------- NLL

std::array<double, 3> nll_sums(const Tensor& lsm, const Tensor& target, int64_t ignore_index) {
  ZT_CHECK(lsm.dtype() == DType::f64 && lsm.dim() == 2 && lsm.is_contiguous() &&
               target.is_contiguous() && target.numel() == lsm.size(0),
           "nll_sums: expects lsm (P, C) f64 and target (P), contiguous");
  const int64_t P = lsm.size(0), C = lsm.size(1);
  const double* pl = lsm.data<double>();
  double total = 0, count = 0;
  int64_t first_bad = -1;
  dispatch_index(target.dtype(), "cross_entropy", [&]<typename I>() {
    const I* pt = target.data<I>();
    for (int64_t p = 0; p < P; ++p) {
      const auto t = static_cast<int64_t>(pt[p]);
      if (t == ignore_index) continue;
      if (t < 0 || t >= C) {
        if (first_bad < 0) first_bad = p;
        continue;
      }
      total -= pl[p * C + t];
      count += 1;
    }
  });
  return {total, count, static_cast<double>(first_bad)};
}

void nll_backward(const Tensor& d, const Tensor& lsm, const Tensor& target, const Tensor& grad,
                  double count, int64_t ignore_index) {
  ZT_CHECK(grad.dtype() == DType::f64 && grad.numel() == 1 && d.dtype() == DType::f64,
           "nll_backward: expects an f64 scalar gradient and an f64 output");
  const int64_t P = lsm.size(0), C = lsm.size(1);
  const double* pl = lsm.data<double>();
  double* pd = d.data<double>();
  const double scale = count > 0 ? grad.data<double>()[0] / count : 0.0;
  dispatch_index(target.dtype(), "cross_entropy backward", [&]<typename I>() {
    const I* pt = target.data<I>();
    parallel_for(P, grain_for(C), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const auto t = static_cast<int64_t>(pt[p]);
        double* row = pd + p * C;
        if (t == ignore_index) {
          std::fill(row, row + C, 0.0);
          continue;
        }
        for (int64_t c = 0; c < C; ++c) row[c] = std::exp(pl[p * C + c]) * scale;
        row[t] -= scale;
      }
    });
  });
}

}  // namespace zt::cpu
