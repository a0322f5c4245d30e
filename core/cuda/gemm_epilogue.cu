// cuda::gemm_epilogue_backward: the GELU gradient through the epilogue and the bias
// gradient (column sums) in one pass over dy, deterministic without atomics. Blocks of
// 32 columns x 8 row lanes walk one chunk of rows each, in double, and write one partial
// sum per chunk and column; a second kernel adds a column's chunk partials (over 8 lanes,
// then the lanes in order). The
// CPU kernel (core/cpu/gemm.cpp) is the specification: the same GELU-gradient formula in
// the same accumulation type, the same double sums in another order.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int kCols = 32;            // columns per block (one warp across)
constexpr int kRowLanes = 8;         // row lanes per block
constexpr int64_t kChunkRows = 256;  // rows per chunk: a fixed split, whatever the GPU

// Block (kCols, kRowLanes) over columns [blockIdx.x * kCols, + kCols) and the rows of
// chunks blockIdx.y, + gridDim.y, ... (any number of rows fits the grid): writes dpre (when
// gelu) and, when partial, each chunk's column sums.
template <typename T, bool kGelu>
__global__ void epilogue_backward_kernel(const T* __restrict__ dy, const T* __restrict__ aux,
                                         T* __restrict__ dpre, double* partial, int64_t m,
                                         int64_t n) {
  using A = acc_t<T>;
  __shared__ double sums[kRowLanes][kCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  const int64_t chunks = (m + kChunkRows - 1) / kChunkRows;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {  // uniform per block
    const int64_t r0 = chunk * kChunkRows;
    const int64_t r1 = m < r0 + kChunkRows ? m : r0 + kChunkRows;
    double s = 0;
    if (col < n) {
      // Unrolled so several rows' loads are in flight at once: one 2-byte load a thread at
      // a time kept the memory a few times below its bandwidth.
#pragma unroll 4
      for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
        const int64_t i = r * n + col;
        T v = dy[i];
        if constexpr (kGelu) {
          v = convert<T>(gelu_tanh_grad(convert<A>(dy[i]), convert<A>(aux[i])));
          dpre[i] = v;
        }
        s += convert<double>(v);
      }
    }
    if (partial == nullptr) continue;
    s = column_lanes_sum(s, sums);
    if (threadIdx.y == 0 && col < n) partial[chunk * n + col] = s;
  }
}

// Block (kCols, kRowLanes): dbias[col] = the chunks' partials for col, lane y adding
// chunks y, y + kRowLanes, ... in order, then the lanes in lane order.
template <typename T>
__global__ void bias_grad_kernel(const double* partial, T* dbias, int64_t chunks, int64_t n) {
  __shared__ double sums[kRowLanes][kCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  double s = 0;
  if (col < n) {
#pragma unroll 4
    for (int64_t c = threadIdx.y; c < chunks; c += kRowLanes) s += partial[c * n + col];
  }
  s = column_lanes_sum(s, sums);
  if (threadIdx.y == 0 && col < n) dbias[col] = convert<T>(static_cast<acc_t<T>>(s));
}

}  // namespace

void gemm_epilogue_backward(int64_t m, int64_t n, const Tensor& dy, const Tensor& aux, bool gelu,
                            const Tensor& dpre, const Tensor& dbias) {
  check_device("gemm_epilogue_backward", dy.device(), {aux, dpre, dbias});
  if (n == 0 || (!gelu && !dbias.defined())) return;
  if (m == 0) {
    if (dbias.defined()) fill(dbias, 0.0);
    return;
  }
  const int dev = dy.device().index;
  const int64_t chunks = (m + kChunkRows - 1) / kChunkRows;
  const int64_t col_blocks = (n + kCols - 1) / kCols;
  dispatch_device_floating(dy.dtype(), "gemm_epilogue_backward", [&]<typename T>() {
    DeviceGuard g(dev);
    cudaStream_t stream = current_stream(dev);
    Tensor partial;
    double* pp = nullptr;
    if (dbias.defined()) {
      partial = Tensor::empty({chunks, n}, DType::f64, dy.device());
      pp = static_cast<double*>(partial.data_ptr());
    }
    const T* pdy = static_cast<const T*>(dy.data_ptr());
    dim3 grid(grid_x(col_blocks, "gemm_epilogue_backward"),
              static_cast<unsigned>(std::min<int64_t>(chunks, 65535)));
    dim3 block(kCols, kRowLanes);
    if (gelu) {
      epilogue_backward_kernel<T, true><<<grid, block, 0, stream>>>(
          pdy, static_cast<const T*>(aux.data_ptr()), static_cast<T*>(dpre.data_ptr()), pp, m, n);
    } else {
      epilogue_backward_kernel<T, false>
          <<<grid, block, 0, stream>>>(pdy, nullptr, nullptr, pp, m, n);
    }
    CUDA_CHECK_LAUNCH();
    if (pp) {
      bias_grad_kernel<T><<<grid_x(col_blocks, "bias_grad_kernel"), block, 0, stream>>>(
          pp, static_cast<T*>(dbias.data_ptr()), chunks, n);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace zt::cuda
