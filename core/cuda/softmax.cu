// CUDA softmax / log-softmax over one dim and the fused cross-entropy kernels (the loss
// and its gradient straight from the logits in their own dtype, no log-probabilities
// stored). The twin of core/cpu/softmax.cpp: the max in the tensor's dtype, sum of
// exp(x - max) in double, log-sum-exp and the outputs in the tensor's dtype;
// cross-entropy in f32 (f64 for f64 logits), bf16 and f16 loaded through float.
// Legend: (R, L, I) the tensor viewed as rows before the softmax dim, the dim, and the
// elements after it; P positions and C classes for the loss.
//
// Layout: I == 1 (softmax over the last dim, the common case) and cross-entropy: one
// block per row, threads striding along L (C). I > 1: one thread per (r, i) column, so
// neighbouring threads read neighbouring elements.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_error.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/cuda/row_chunks.cuh"
#include "core/kernel_checks.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

// All -inf: use 0 as the shift so x - max is -inf, not NaN (as the CPU).
template <typename T>
__device__ __forceinline__ T safe_max(T mx) {
  return (isinf(mx) && mx < T(0)) ? T(0) : mx;
}

template <typename T>
__global__ void softmax_rows_kernel(T* y, const T* x, int64_t L, bool log) {
  __shared__ T tscratch[32];
  __shared__ double dscratch[32];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * L;
  T* yr = y + static_cast<int64_t>(blockIdx.x) * L;
  T mx = -INFINITY;
  for (int64_t l = threadIdx.x; l < L; l += blockDim.x) mx = fmax(mx, xr[l]);
  mx = safe_max(block_all_max(mx, tscratch));
  double sum = 0;
  for (int64_t l = threadIdx.x; l < L; l += blockDim.x)
    sum += static_cast<double>(d_exp(xr[l] - mx));
  sum = block_all_sum(sum, dscratch);
  if (log) {  // (x - max) - log(sum), as the CPU (its top comment says why)
    const T log_sum = static_cast<T>(::log(sum));
    for (int64_t l = threadIdx.x; l < L; l += blockDim.x) yr[l] = (xr[l] - mx) - log_sum;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t l = threadIdx.x; l < L; l += blockDim.x) yr[l] = d_exp(xr[l] - mx) * inv;
  }
}

template <typename T>
__global__ void softmax_cols_kernel(T* y, const T* x, int64_t R, int64_t L, int64_t I, bool log) {
  const int64_t ri = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ri >= R * I) return;
  const int64_t off = (ri / I) * L * I + ri % I;
  const T* xr = x + off;
  T* yr = y + off;
  T mx = -INFINITY;
  for (int64_t l = 0; l < L; ++l) mx = fmax(mx, xr[l * I]);
  mx = safe_max(mx);
  double sum = 0;
  for (int64_t l = 0; l < L; ++l) sum += static_cast<double>(d_exp(xr[l * I] - mx));
  if (log) {  // (x - max) - log(sum), as the CPU
    const T log_sum = static_cast<T>(::log(sum));
    for (int64_t l = 0; l < L; ++l) yr[l * I] = (xr[l * I] - mx) - log_sum;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t l = 0; l < L; ++l) yr[l * I] = d_exp(xr[l * I] - mx) * inv;
  }
}

// log: dx = dy - exp(y) sum(dy); softmax: dx = y (dy - sum(dy y)).
template <typename T>
__global__ void softmax_backward_rows_kernel(T* dx, const T* dy, const T* y, int64_t L, bool log) {
  __shared__ double scratch[32];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * L;
  const T* g = dy + off;
  const T* yr = y + off;
  T* o = dx + off;
  double s = 0;
  for (int64_t l = threadIdx.x; l < L; l += blockDim.x)
    s += log ? static_cast<double>(g[l])
             : mul_rn(static_cast<double>(g[l]), static_cast<double>(yr[l]));
  const T ts = static_cast<T>(block_all_sum(s, scratch));
  for (int64_t l = threadIdx.x; l < L; l += blockDim.x)
    o[l] = log ? add_rn(g[l], -mul_rn(d_exp(yr[l]), ts)) : yr[l] * (g[l] - ts);
}

template <typename T>
__global__ void softmax_backward_cols_kernel(T* dx, const T* dy, const T* y, int64_t R, int64_t L,
                                             int64_t I, bool log) {
  const int64_t ri = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ri >= R * I) return;
  const int64_t off = (ri / I) * L * I + ri % I;
  const T* g = dy + off;
  const T* yr = y + off;
  T* o = dx + off;
  double s = 0;
  for (int64_t l = 0; l < L; ++l)
    s += log ? static_cast<double>(g[l * I])
             : mul_rn(static_cast<double>(g[l * I]), static_cast<double>(yr[l * I]));
  const T ts = static_cast<T>(s);
  for (int64_t l = 0; l < L; ++l)
    o[l * I] = log ? add_rn(g[l * I], -mul_rn(d_exp(yr[l * I]), ts)) : yr[l * I] * (g[l * I] - ts);
}

// ---------------------------------------------------------------- cross-entropy

__device__ __forceinline__ bool ce_kept(int64_t t, int64_t C, int64_t ignore) {
  return t != ignore && t >= 0 && t < C;
}

// One block per row: lse[p] = log(sum_c exp(x[p, c])) for kept rows, 0 otherwise. Each
// thread keeps a running max m and sum of exp(x - m) over its classes (one read of the
// row, 16 bytes a load): m moves once per chunk of a load, to the chunk's max; the terms
// since m last grew sum in A (by d_exp_fast), the sum before in double; the block then
// takes the max M and sums the partial sums rescaled to it. The same max-shifted sum as
// the CPU's two passes, in another order. (Per element the loop is instruction bound:
// expf, a double add and a branch a term took it to a third of the bandwidth.)
template <typename T, typename I>
__global__ void ce_lse_kernel(double* lse, const T* __restrict__ x, const I* target, int64_t C,
                              int64_t ignore) {
  using A = acc_t<T>;
  __shared__ A ascratch[32];
  __shared__ double dscratch[32];
  const int64_t p = blockIdx.x;
  if (!ce_kept(static_cast<int64_t>(target[p]), C, ignore)) {
    if (threadIdx.x == 0) lse[p] = 0.0;
    return;
  }
  const T* xr = x + p * C;
  A m = -INFINITY, recent = 0;  // recent: the terms since m last grew
  double s = 0;
  // Values v[0..n) into (m, recent, s): m moves at most once per call (to their max; fmax
  // skips NaNs), then each adds exp(v - m): 0 for -inf (also when m is -inf), 1 for m itself.
  // A NaN makes the sum NaN, and so does a +inf (the block's step exp(m - M) is then
  // exp(inf - inf)), as on the CPU.
  auto absorb = [&](const A* v, int n) {
    A cm = v[0];
    for (int e = 1; e < n; ++e) cm = fmax(cm, v[e]);
    if (cm > m) {
      s = (s + static_cast<double>(recent)) * static_cast<double>(d_exp(m - cm));
      recent = 0;
      m = cm;
    }
    if (m > A(-INFINITY) && m < A(INFINITY)) {  // the usual case: no term needs a test
      A part = 0;  // exp(-inf - m) is 0, exp(m - m) 1 and exp(NaN - m) NaN without one
      for (int e = 0; e < n; ++e) part += d_exp_fast(v[e] - m);
      recent += part;
      return;
    }
    for (int e = 0; e < n; ++e)
      recent += v[e] == A(-INFINITY) ? A(0) : v[e] == m ? A(1) : d_exp_fast(v[e] - m);
  };
  row_for_each_run<A>(xr, C, absorb);
  s += static_cast<double>(recent);
  const A M = block_all_max(m, ascratch);
  const double part = s == 0.0 ? 0.0 : s * exp(static_cast<double>(m) - static_cast<double>(M));
  const double S = block_all_sum(part, dscratch);
  if (threadIdx.x == 0) lse[p] = ::log(S) + static_cast<double>(safe_max(M));
}

// One block: sums[0] = sum over kept rows of lse[p] - x[p, t_p], sums[1] = their count,
// sums[2] = the first bad position or -1 (also reported as a device error). A fixed tree
// over a fixed partition of p: reproducible.
template <typename T, typename I>
__global__ void ce_sums_kernel(double* sums, const double* lse, const T* x, const I* target,
                               int64_t P, int64_t C, int64_t ignore, DeviceErrorSlot err) {
  using A = acc_t<T>;
  __shared__ double scratch[32];
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ~0ull;
  __syncthreads();
  double total = 0, count = 0;
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    const auto t = static_cast<int64_t>(target[p]);
    if (t == ignore) continue;
    if (t < 0 || t >= C) {
      atomicMin(&first_bad, static_cast<unsigned long long>(p));
      continue;
    }
    total += lse[p] - static_cast<double>(convert<A>(x[p * C + t]));
    count += 1;
  }
  total = block_all_sum(total, scratch);
  count = block_all_sum(count, scratch);
  if (threadIdx.x == 0) {
    sums[0] = total;
    sums[1] = count;
    sums[2] = first_bad == ~0ull ? -1.0 : static_cast<double>(first_bad);
    if (first_bad != ~0ull) {
      const auto p = static_cast<long long>(first_bad);
      report_device_error(err, kTargetOutOfRange, kOpCrossEntropy,
                          static_cast<long long>(target[p]), C, p);
    }
  }
}

// One block per row: d = (exp(x - lse) - onehot(t)) * grad / count, rounded once to T;
// zeros on ignored rows. 16 bytes a load and a store where the rows allow (row_chunks.cuh).
// The one-hot term is the target's element alone, rewritten by one thread after the
// block's pass (the pass tests no index).
template <typename T, typename I>
__global__ void ce_backward_kernel(T* __restrict__ d, const T* __restrict__ x, const double* lse,
                                   const I* target, const double* grad, const double* stats,
                                   int64_t C, int64_t ignore) {
  using A = acc_t<T>;
  const int64_t p = blockIdx.x;
  const auto t = static_cast<int64_t>(target[p]);
  const bool kept = ce_kept(t, C, ignore);  // a target out of range: zeros, as ignored rows
  const double count = stats[1];
  const auto s = static_cast<A>(count > 0 ? grad[0] / count : 0.0);
  const auto m = static_cast<A>(lse[p]);
  auto grad_of = [&](A v, bool is_target) {
    // In 16 bits the hardware exponential's 2 ulp vanish in the rounding to T; not in
    // p - 1 near p = 1, so the target's element (one a row) takes the libm one.
    A e = sizeof(T) == 2 && !is_target ? d_exp_fast(v - m) : d_exp(v - m);
    if (is_target) e = e - A(1);
    return convert<T>(mul_rn(e, s));
  };
  const T* rows[] = {x + p * C};
  row_map<A>(rows, d + p * C, C, [&](int64_t, const A(&v)[1]) {
    return kept ? grad_of(v[0], false) : convert<T>(A(0));
  });
  if (kept) {         // block-uniform
    __syncthreads();  // every thread's stores of the row come first
    if (threadIdx.x == 0) d[p * C + t] = grad_of(convert<A>(x[p * C + t]), true);
  }
}

// Threads per row of the backward: wide rows (vocabularies) get the largest blocks. The
// forward takes kThreads whatever the width: its blocks end in two block reductions, and
// small blocks let other rows' loads run meanwhile (1024 a row ran at a third of the
// bandwidth).
unsigned ce_threads(int64_t C) {
  return C >= 16384 ? 1024u : static_cast<unsigned>(kThreads);
}

}  // namespace

void softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, int64_t I, bool log) {
  check_device(log ? "log_softmax" : "softmax", x.device(), {y});
  if (R * L * I == 0) return;
  dispatch_f32_f64(x.dtype(), log ? "log_softmax" : "softmax", [&]<typename T>() {
    DeviceGuard g(x.device().index);
    T* py = static_cast<T*>(y.data_ptr());
    const T* px = static_cast<const T*>(x.data_ptr());
    if (I == 1) {
      softmax_rows_kernel<T>
          <<<grid_x(R, "softmax_rows_kernel"), kThreads, 0, current_stream()>>>(py, px, L, log);
    } else {
      softmax_cols_kernel<T>
          <<<blocks_for(R * I, kThreads, "softmax"), kThreads, 0, current_stream()>>>(py, px, R, L,
                                                                                      I, log);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void softmax_backward(const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t R, int64_t L,
                      int64_t I, bool log) {
  check_device("softmax backward", y.device(), {dx, dy});
  if (R * L * I == 0) return;
  dispatch_f32_f64(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&]<typename T>() {
    DeviceGuard g(y.device().index);
    T* pdx = static_cast<T*>(dx.data_ptr());
    const T* pdy = static_cast<const T*>(dy.data_ptr());
    const T* py = static_cast<const T*>(y.data_ptr());
    if (I == 1) {
      softmax_backward_rows_kernel<T>
          <<<grid_x(R, "softmax_backward_rows_kernel"), kThreads, 0, current_stream()>>>(
              pdx, pdy, py, L, log);
    } else {
      softmax_backward_cols_kernel<T>
          <<<blocks_for(R * I, kThreads, "softmax backward"), kThreads, 0, current_stream()>>>(
              pdx, pdy, py, R, L, I, log);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_forward(const Tensor& stats, const Tensor& lse, const Tensor& logits,
                           const Tensor& target, int64_t ignore_index) {
  check_device("cross_entropy", logits.device(), {stats, lse, target});
  ::zt::detail::check_cross_entropy("cross_entropy", lse, logits, target);
  ::zt::detail::check_cross_entropy_stats("cross_entropy", stats);
  const int64_t P = logits.size(0), C = logits.size(1);
  DeviceGuard g(logits.device().index);
  dispatch_device_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    dispatch_index(target.dtype(), "cross_entropy", [&]<typename I>() {
      double* pl = static_cast<double*>(lse.data_ptr());
      const T* px = static_cast<const T*>(logits.data_ptr());
      const I* pt = static_cast<const I*>(target.data_ptr());
      if (P > 0) {
        ce_lse_kernel<T, I><<<grid_x(P, "ce_lse_kernel"), kThreads, 0, current_stream()>>>(
            pl, px, pt, C, ignore_index);
        CUDA_CHECK_LAUNCH();
      }
      ce_sums_kernel<T, I><<<1, 1024, 0, current_stream()>>>(static_cast<double*>(stats.data_ptr()),
                                                             pl, px, pt, P, C, ignore_index,
                                                             device_error_record());
      CUDA_CHECK_LAUNCH();
    });
  });
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& target, const Tensor& grad, const Tensor& stats,
                            int64_t ignore_index) {
  check_device("cross_entropy backward", logits.device(), {dlogits, lse, target, grad, stats});
  ::zt::detail::check_cross_entropy("cross_entropy backward", lse, logits, target);
  ::zt::detail::check_cross_entropy_stats("cross_entropy backward", stats);
  ::zt::detail::check_cross_entropy_backward(dlogits, logits, grad);
  const int64_t P = logits.size(0), C = logits.size(1);
  if (P * C == 0) return;
  DeviceGuard g(logits.device().index);
  dispatch_device_floating(logits.dtype(), "cross_entropy backward", [&]<typename T>() {
    dispatch_index(target.dtype(), "cross_entropy backward", [&]<typename I>() {
      ce_backward_kernel<T, I>
          <<<grid_x(P, "ce_backward_kernel"), ce_threads(C), 0, current_stream()>>>(
              static_cast<T*>(dlogits.data_ptr()), static_cast<const T*>(logits.data_ptr()),
              static_cast<const double*>(lse.data_ptr()), static_cast<const I*>(target.data_ptr()),
              static_cast<const double*>(grad.data_ptr()),
              static_cast<const double*>(stats.data_ptr()), C, ignore_index);
      CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace zt::cuda
