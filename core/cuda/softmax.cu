// CUDA softmax / log-softmax over one dim and the negative log-likelihood pieces of
// cross_entropy. The twin of softmax_forward / softmax_backward in core/cpu/norm.cpp:
// the max in the tensor's dtype, sum of exp(x - max) in double, log-sum-exp and the
// outputs in the tensor's dtype.
// Legend: (R, L, I) the tensor viewed as rows before the softmax dim, the dim, and the
// elements after it; P positions and C classes for the loss.
//
// Layout: I == 1 (softmax over the last dim, the common case): one block per row,
// threads striding along L. I > 1: one thread per (r, i) column, so neighbouring threads
// read neighbouring elements.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

__device__ __forceinline__ float d_exp(float x) {
  return expf(x);
}
__device__ __forceinline__ double d_exp(double x) {
  return exp(x);
}

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
  if (log) {
    const T lse = static_cast<T>(::log(sum)) + mx;
    for (int64_t l = threadIdx.x; l < L; l += blockDim.x) yr[l] = xr[l] - lse;
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
  if (log) {
    const T lse = static_cast<T>(::log(sum)) + mx;
    for (int64_t l = 0; l < L; ++l) yr[l * I] = xr[l * I] - lse;
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

// ---------------------------------------------------------------- NLL

// One block: sums[0] = -sum lsm[p, t_p], sums[1] = count (kept positions), sums[2] =
// the first bad position or -1. A fixed tree over a fixed partition of p: reproducible.
template <typename I>
__global__ void nll_sums_kernel(double* sums, const double* lsm, const I* target, int64_t P,
                                int64_t C, int64_t ignore) {
  __shared__ double scratch[32];
  __shared__ unsigned long long first_bad;
  if (threadIdx.x == 0) first_bad = ~0ull;
  __syncthreads();
  double total = 0, count = 0;
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    const int64_t t = static_cast<int64_t>(target[p]);
    if (t == ignore) continue;
    if (t < 0 || t >= C) {
      atomicMin(&first_bad, static_cast<unsigned long long>(p));
      continue;
    }
    total -= lsm[p * C + t];
    count += 1;
  }
  total = block_all_sum(total, scratch);
  count = block_all_sum(count, scratch);
  if (threadIdx.x == 0) {
    sums[0] = total;
    sums[1] = count;
    sums[2] = first_bad == ~0ull ? -1.0 : static_cast<double>(first_bad);
  }
}

template <typename I>
__global__ void nll_backward_kernel(double* d, const double* lsm, const I* target,
                                    const double* grad, double count, int64_t P, int64_t C,
                                    int64_t ignore) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const double scale = count > 0 ? grad[0] / count : 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < P * C;
       i += step) {
    const int64_t p = i / C, c = i % C, t = static_cast<int64_t>(target[p]);
    if (t == ignore) {
      d[i] = 0.0;
      continue;
    }
    double v = exp(lsm[i]) * scale;
    if (c == t) v -= scale;
    d[i] = v;
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
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
          <<<static_cast<unsigned>(R), kThreads, 0, current_stream()>>>(py, px, L, log);
    } else {
      softmax_cols_kernel<T>
          <<<blocks_for(R * I), kThreads, 0, current_stream()>>>(py, px, R, L, I, log);
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
          <<<static_cast<unsigned>(R), kThreads, 0, current_stream()>>>(pdx, pdy, py, L, log);
    } else {
      softmax_backward_cols_kernel<T>
          <<<blocks_for(R * I), kThreads, 0, current_stream()>>>(pdx, pdy, py, R, L, I, log);
    }
    CUDA_CHECK_LAUNCH();
  });
}

std::array<double, 3> nll_sums(const Tensor& lsm, const Tensor& target, int64_t ignore_index) {
  check_device("cross_entropy", lsm.device(), {target});
  ZT_CHECK(lsm.dtype() == DType::f64 && lsm.dim() == 2 && lsm.is_contiguous() &&
               target.is_contiguous() && target.numel() == lsm.size(0),
           "nll_sums: expects lsm (P, C) f64 and target (P), contiguous");
  const int64_t P = lsm.size(0), C = lsm.size(1);
  std::array<double, 3> out{0.0, 0.0, -1.0};
  if (P == 0) return out;
  DeviceGuard g(lsm.device().index);
  Tensor sums = Tensor::empty({3}, DType::f64, lsm.device());
  dispatch_index(target.dtype(), "cross_entropy", [&]<typename I>() {
    nll_sums_kernel<I><<<1, 1024, 0, current_stream()>>>(
        static_cast<double*>(sums.data_ptr()), static_cast<const double*>(lsm.data_ptr()),
        static_cast<const I*>(target.data_ptr()), P, C, ignore_index);
    CUDA_CHECK_LAUNCH();
  });
  CUDA_CHECK(cudaMemcpyAsync(out.data(), sums.data_ptr(), sizeof(out), cudaMemcpyDeviceToHost,
                             current_stream()));
  CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  return out;
}

void nll_backward(const Tensor& d, const Tensor& lsm, const Tensor& target, const Tensor& grad,
                  double count, int64_t ignore_index) {
  check_device("cross_entropy backward", lsm.device(), {d, target, grad});
  ZT_CHECK(grad.dtype() == DType::f64 && grad.numel() == 1 && d.dtype() == DType::f64,
           "nll_backward: expects an f64 scalar gradient and an f64 output");
  const int64_t P = lsm.size(0), C = lsm.size(1);
  if (P * C == 0) return;
  const int dev = lsm.device().index;
  DeviceGuard g(dev);
  dispatch_index(target.dtype(), "cross_entropy backward", [&]<typename I>() {
    nll_backward_kernel<I><<<grid_for(P * C, dev), kThreads, 0, current_stream()>>>(
        static_cast<double*>(d.data_ptr()), static_cast<const double*>(lsm.data_ptr()),
        static_cast<const I*>(target.data_ptr()), static_cast<const double*>(grad.data_ptr()),
        count, P, C, ignore_index);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
