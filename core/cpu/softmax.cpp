// CPU softmax / log-softmax over one dim and the fused cross-entropy kernels (the loss
// and its gradient straight from the logits, no log-probabilities stored); the twin of
// core/cuda/softmax.cu. Softmax takes the max in the tensor's dtype, the sum of
// exp(x - max) in double, and writes the log-sum-exp and the outputs in the tensor's
// dtype; cross-entropy does the same in f32 (f64 for f64 logits) over logits of any
// floating dtype. Rows are independent and each is reduced in a fixed order, so results
// do not depend on the number of threads. Log-softmax is (x - max) - log(sum), as
// PyTorch's: x - (max + log(sum)) would round the log-sum-exp, as large as the max, to the
// dtype first and lose the low bits of every output (3e-5 in f32 at logits of 1000). A
// contiguous f32 row (I = 1) goes through
// softmax_row_f32 (cpu/norm_sums.h): the SIMD exp of lanes.h, and the max and the double
// sum in independent lanes.
// Legend: (R, L, I) the tensor viewed as rows before the softmax dim, the dim, and the
// elements after it; P positions and C classes for the loss.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/cpu/norm_sums.h"
#include "core/kernel_checks.h"
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
        if constexpr (std::is_same_v<T, float>) {
          if (I == 1 && (!log || py != px)) {  // log: y is scratch, so not x itself
            float mx = 0;
            const double lse = softmax_row_f32(yr, xr, L, 1.0f, &mx);
            if (log) {
              const auto log_sum = static_cast<float>(lse - static_cast<double>(mx));
              for (int64_t l = 0; l < L; ++l) yr[l] = (xr[l] - mx) - log_sum;
            }
            continue;
          }
        }
        T mx = -INFINITY;
        for (int64_t l = 0; l < L; ++l) mx = std::max(mx, xr[l * I]);
        if (std::isinf(mx) && mx < 0) mx = 0;  // all -inf: avoid inf - inf
        double sum = 0;
        for (int64_t l = 0; l < L; ++l) sum += static_cast<double>(std::exp(xr[l * I] - mx));
        if (log) {  // (x - max) - log(sum), as PyTorch (see the top of the file)
          const T log_sum = static_cast<T>(std::log(sum));
          for (int64_t l = 0; l < L; ++l) yr[l * I] = (xr[l * I] - mx) - log_sum;
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
        // log: s = sum(dy); softmax: s = sum(dy y). A contiguous row sums in independent
        // lanes (grad_sums: both sums in one pass).
        double s = 0;
        if (I == 1) {
          double sg = 0, sgy = 0;
          grad_sums(g, yr, L, 0.0, sg, sgy);
          s = log ? sg : sgy;
        } else {
          for (int64_t l = 0; l < L; ++l)
            s += log ? static_cast<double>(g[l * I])
                     : static_cast<double>(g[l * I]) * static_cast<double>(yr[l * I]);
        }
        const T ts = static_cast<T>(s);
        if (log)  // dx = dy - softmax * sum(dy)
          for (int64_t l = 0; l < L; ++l) o[l * I] = g[l * I] - std::exp(yr[l * I]) * ts;
        else  // dx = y (dy - sum(dy y))
          for (int64_t l = 0; l < L; ++l) o[l * I] = yr[l * I] * (g[l * I] - ts);
      }
    });
  });
}

// ---------------------------------------------------------------- cross-entropy

namespace {

bool kept(int64_t t, int64_t C, int64_t ignore_index) {
  return t != ignore_index && t >= 0 && t < C;
}

// The max of one row in the accumulation type; NaNs are skipped here and surface in
// the sum of exponentials. All -inf gives 0 (so x - max is -inf, not NaN).
template <typename T>
acc_t<T> row_max(const T* x, int64_t C) {
  using A = acc_t<T>;
  A mx = -INFINITY;
  if constexpr (std::is_same_v<T, float>) {
    mx = f32_loops().max_scaled(x, C, 1.0f);
  } else {
    for (int64_t c = 0; c < C; ++c) {
      const auto v = static_cast<A>(x[c]);
      mx = v > mx ? v : mx;
    }
  }
  return std::isinf(mx) && mx < 0 ? A(0) : mx;
}

// e[c] = exp(x[c] - shift) for one row, c < C. f32 and 16-bit logits: in f32 through
// the SIMD exp of lanes.h (e is a row of floats, for f32 possibly the output itself);
// f64: std::exp.
template <typename T>
void row_exp(acc_t<T>* e, const T* x, acc_t<T> shift, int64_t C) {
  using A = acc_t<T>;
  for (int64_t c = 0; c < C; ++c) e[c] = static_cast<A>(x[c]) - shift;
  if constexpr (std::is_same_v<A, float>) {
    lane_row(LaneOp::kExp, e, e, nullptr, C);
  } else {
    for (int64_t c = 0; c < C; ++c) e[c] = std::exp(e[c]);
  }
}

// log(sum_c exp(x[c])) of one row in two passes (the row stays in cache): the max, then
// the sum of exp(x - max) in double. `e` is scratch for C values.
template <typename T>
double row_log_sum_exp(const T* x, int64_t C, acc_t<T>* e) {
  const acc_t<T> mx = row_max(x, C);
  row_exp(e, x, mx, C);
  return std::log(row_sum(e, C)) + static_cast<double>(mx);
}

}  // namespace

void cross_entropy_forward(const Tensor& stats, const Tensor& lse, const Tensor& logits,
                           const Tensor& target, int64_t ignore_index) {
  detail::check_cross_entropy("cross_entropy", lse, logits, target);
  detail::check_cross_entropy_stats("cross_entropy", stats);
  const int64_t P = logits.size(0), C = logits.size(1);
  double* pl = lse.data<double>();
  double total = 0, count = 0;
  int64_t first_bad = -1;
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    const T* px = logits.data<T>();
    dispatch_index(target.dtype(), "cross_entropy", [&]<typename I>() {
      const I* pt = target.data<I>();
      parallel_for(P, grain_for(C), [&](int64_t p0, int64_t p1) {
        std::vector<A> e(static_cast<size_t>(C));
        for (int64_t p = p0; p < p1; ++p)
          pl[p] = kept(static_cast<int64_t>(pt[p]), C, ignore_index)
                      ? row_log_sum_exp(px + p * C, C, e.data())
                      : 0.0;
      });
      // The loss sum in position order: one logit per row, serial and reproducible.
      for (int64_t p = 0; p < P; ++p) {
        const auto t = static_cast<int64_t>(pt[p]);
        if (t == ignore_index) continue;
        if (t < 0 || t >= C) {
          if (first_bad < 0) first_bad = p;
          continue;
        }
        total += pl[p] - static_cast<double>(static_cast<A>(px[p * C + t]));
        count += 1;
      }
    });
  });
  double* out = stats.data<double>();
  out[0] = total;
  out[1] = count;
  out[2] = static_cast<double>(first_bad);
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& target, const Tensor& grad, const Tensor& stats,
                            int64_t ignore_index) {
  detail::check_cross_entropy("cross_entropy backward", lse, logits, target);
  detail::check_cross_entropy_stats("cross_entropy backward", stats);
  const double count = stats.data<double>()[1];
  detail::check_cross_entropy_backward(dlogits, logits, grad);
  const int64_t P = logits.size(0), C = logits.size(1);
  const double* pl = lse.data<double>();
  const double scale = count > 0 ? grad.data<double>()[0] / count : 0.0;
  dispatch_floating(logits.dtype(), "cross_entropy backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* px = logits.data<T>();
    T* pd = dlogits.data<T>();
    const auto s = static_cast<A>(scale);
    dispatch_index(target.dtype(), "cross_entropy backward", [&]<typename I>() {
      const I* pt = target.data<I>();
      parallel_for(P, grain_for(C), [&](int64_t p0, int64_t p1) {
        // exp(x - lse) goes through a row of A: the output itself for f32 and f64.
        std::vector<A> scratch(std::is_same_v<T, A> ? 0 : static_cast<size_t>(C));
        for (int64_t p = p0; p < p1; ++p) {
          const auto t = static_cast<int64_t>(pt[p]);
          T* d = pd + p * C;
          // An ignored row is zero, and so is a bad target's (its lse is the forward's 0).
          if (t == ignore_index || t < 0 || t >= C) {
            std::fill(d, d + C, static_cast<T>(0.0f));
            continue;
          }
          A* e = nullptr;
          if constexpr (std::is_same_v<T, A>) {
            e = d;
          } else {
            e = scratch.data();
          }
          row_exp(e, px + p * C, static_cast<A>(pl[p]), C);
          const A prob_t = e[t];  // before e (maybe d) is scaled
          for (int64_t c = 0; c < C; ++c) d[c] = static_cast<T>(e[c] * s);
          // The target's entry rounded once: (softmax - 1) * scale.
          d[t] = static_cast<T>((prob_t - 1) * s);
        }
      });
    });
  });
}

}  // namespace zt::cpu
