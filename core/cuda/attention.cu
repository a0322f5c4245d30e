// CUDA softmax for attention scores: scale, causal mask and softmax fused, one warp per
// row (attention rows are short: a block per row would leave most threads idle). The
// twin of core/cpu/attention.cpp: the max in the scores' dtype, the sum of exp(x - max)
// in double, outputs in the scores' dtype; the scaling is not contracted into an FMA,
// so it rounds as on the CPU.
// Legend: R rows (queries of every batch entry), L keys per row.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int kRowsPerBlock = kThreads / 32;

template <typename T>
__global__ void attention_softmax_kernel(T* y, const T* x, int64_t R, int64_t L, T s, bool causal) {
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= R) return;  // whole warps leave together: the shuffles below see full warps
  const T* xr = x + r * L;
  T* yr = y + r * L;
  const int64_t kept = causal ? r % L + 1 : L;  // keys [0, kept) are visible
  T mx = -INFINITY;
  for (int64_t l = lane; l < kept; l += 32) mx = fmax(mx, mul_rn(xr[l], s));
  mx = warp_all_max(mx);
  if (isinf(mx) && mx < T(0)) mx = T(0);  // all -inf: avoid inf - inf
  double sum = 0;
  for (int64_t l = lane; l < kept; l += 32)
    sum += static_cast<double>(d_exp(add_rn(mul_rn(xr[l], s), -mx)));
  sum = warp_reduce_sum(sum);
  sum = __shfl_sync(0xffffffffu, sum, 0);
  const T inv = static_cast<T>(1.0 / sum);
  for (int64_t l = lane; l < L; l += 32)
    yr[l] = l < kept ? mul_rn(d_exp(add_rn(mul_rn(xr[l], s), -mx)), inv) : T(0);
}

}  // namespace

void attention_softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, double scale,
                               bool causal) {
  check_device("attention softmax", x.device(), {y});
  ZT_CHECK(!causal || (L > 0 && R % L == 0), "attention softmax: causal rows (", R,
           ") must be a multiple of the keys per row (", L, ")");
  if (R * L == 0) return;
  dispatch_f32_f64(x.dtype(), "attention softmax", [&]<typename T>() {
    DeviceGuard g(x.device().index);
    const int64_t blocks = (R + kRowsPerBlock - 1) / kRowsPerBlock;
    attention_softmax_kernel<T>
        <<<grid_x(blocks, "attention_softmax_kernel"), kThreads, 0, current_stream()>>>(
            static_cast<T*>(y.data_ptr()), static_cast<const T*>(x.data_ptr()), R, L,
            static_cast<T>(scale), causal);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
