// CUDA sum of squares in double (the gradient norm's reduction). The CPU kernel of the
// same name (core/cpu/sum_squares.cpp) is the specification of the result; the order
// of the additions differs, so the two agree to double rounding, not bit for bit.
//
// Pass 1: a grid of blocks (its size a function of the element count alone) runs a
// grid-stride loop, each thread squaring its elements in double into two running sums;
// the block adds them with block_all_sum's fixed tree and writes one partial. Pass 2
// (skipped when there is one block): one block adds the partials the same way into out.
// Every step is in a fixed order, so the same input gives the same bits run after run.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int64_t kPerThread = 16;    // elements per thread before a second block is used
constexpr int64_t kMaxBlocks = 1024;  // enough to fill the largest GPUs' memory pipes

// Blocks for n > 0 elements: one per kThreads * kPerThread elements, at most kMaxBlocks.
int64_t partial_blocks(int64_t n) {
  return std::min<int64_t>(kMaxBlocks, blocks_for(n, kThreads * kPerThread, "sum_squares"));
}

// partial[blockIdx.x] = the sum of x[i]^2 over the i this block's threads visit.
template <typename T>
__global__ void sum_squares_partial_kernel(const T* __restrict__ x, int64_t n,
                                           double* __restrict__ partial) {
  __shared__ double scratch[32];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Two independent sums, two loads in flight per thread.
  double s0 = 0.0, s1 = 0.0;
  for (; i + stride < n; i += 2 * stride) {
    const double a = convert<double>(x[i]);
    const double b = convert<double>(x[i + stride]);
    s0 += a * a;
    s1 += b * b;
  }
  if (i < n) {
    const double a = convert<double>(x[i]);
    s0 += a * a;
  }
  const double s = block_all_sum(s0 + s1, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// out[0] = the sum of partial[0, n), each thread adding its share in index order.
__global__ void sum_squares_final_kernel(const double* __restrict__ partial, int64_t n,
                                         double* __restrict__ out) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_all_sum(s, scratch);
  if (threadIdx.x == 0) out[0] = s;
}

}  // namespace

void sum_squares(const Tensor& out, const Tensor& x) {
  check_device("sum_squares", out.device(), {x});
  ZT_CHECK(x.is_contiguous(), "sum_squares: expects a contiguous input, got ", x.str());
  ZT_CHECK(out.numel() == 1 && out.dtype() == DType::f64,
           "sum_squares: expects a one-element f64 output, got ", out.str());
  const int64_t n = x.numel();
  if (n == 0) {
    cuda::fill(out, 0.0);
    return;
  }
  const int dev = out.device().index;
  dispatch_device_floating(x.dtype(), "sum_squares", [&]<typename T>() {
    DeviceGuard g(dev);
    cudaStream_t stream = current_stream(dev);
    const T* px = static_cast<const T*>(x.data_ptr());
    double* po = static_cast<double*>(out.data_ptr());
    const int64_t blocks = partial_blocks(n);
    if (blocks == 1) {
      sum_squares_partial_kernel<T><<<1, kThreads, 0, stream>>>(px, n, po);
      CUDA_CHECK_LAUNCH();
      return;
    }
    // blocks doubles: a few KiB from the caching allocator, freed in stream order.
    Tensor partial = Tensor::empty({blocks}, DType::f64, out.device());
    double* pp = static_cast<double*>(partial.data_ptr());
    sum_squares_partial_kernel<T>
        <<<grid_x(blocks, "sum_squares_partial_kernel"), kThreads, 0, stream>>>(px, n, pp);
    CUDA_CHECK_LAUNCH();
    sum_squares_final_kernel<<<1, kThreads, 0, stream>>>(pp, blocks, po);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
