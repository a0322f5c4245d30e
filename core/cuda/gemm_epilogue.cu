// cuda::gemm_epilogue_backward: the GELU gradient through the epilogue and the bias
// gradient (column sums) in one pass over dy, deterministic without atomics. Blocks of
// column threads x 8 row lanes walk one chunk of rows each, in double, and write one
// partial sum per chunk and column; a second kernel adds a column's chunk partials (over 8
// lanes, then the lanes in order). Where every row is whole 16-byte runs (n a multiple of
// 16 / sizeof(T), the arrays aligned) a thread takes 16 bytes of a row at a time, in
// blocks of 8 column threads; otherwise one column each, 32 column threads. Either way a
// column's rows are added in the same order, so the bits do not depend on the path. The
// CPU kernel (core/cpu/gemm.cpp) is the specification: the same GELU-gradient formula in
// the same accumulation type (in float the sigmoid form of both, device_math.cuh), the
// same double sums in another order.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int kCols = 32;            // column threads of the one-column path (one warp across)
constexpr int kRunCols = 8;          // column threads of the 16-byte path
constexpr int kRowLanes = 8;         // row lanes per block
constexpr int64_t kChunkRows = 256;  // rows per chunk: a fixed split, whatever the GPU

// Block (kX, kRowLanes) over columns [blockIdx.x * kX * kV, + kX kV), thread x taking kV
// adjacent columns (kV > 1: one 16-byte access per row; n a multiple of kV), and the rows of
// chunks blockIdx.y, + gridDim.y, ... (any number of rows fits the grid): writes dpre (when
// gelu) and, when partial, each chunk's column sums (row lane y adds rows y, y + kRowLanes,
// ... in order, then the lanes add in lane order, whatever kV).
template <typename T, bool kGelu, int kV, int kX>
__global__ void epilogue_backward_kernel(const T* __restrict__ dy, const T* __restrict__ aux,
                                         T* __restrict__ dpre, double* partial, int64_t m,
                                         int64_t n) {
  using A = acc_t<T>;
  __shared__ double sums[kRowLanes][kX * kV];
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kX + threadIdx.x) * kV;
  const int64_t chunks = (m + kChunkRows - 1) / kChunkRows;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {  // uniform per block
    const int64_t r0 = chunk * kChunkRows;
    const int64_t r1 = m < r0 + kChunkRows ? m : r0 + kChunkRows;
    double s[kV] = {};
    if (col < n) {
      // Unrolled so several rows' loads are in flight at once: one 2-byte load a thread at
      // a time kept the memory a few times below its bandwidth.
#pragma unroll 4
      for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
        const int64_t i = r * n + col;
        T v[kV];
        copy_vec<kV>(v, dy + i);
        if constexpr (kGelu) {
          T a[kV];
          copy_vec<kV>(a, aux + i);
#pragma unroll
          for (int e = 0; e < kV; ++e)
            v[e] = convert<T>(gelu_tanh_grad(convert<A>(v[e]), convert<A>(a[e])));
          copy_vec<kV>(dpre + i, v);
        }
#pragma unroll
        for (int e = 0; e < kV; ++e) s[e] += convert<double>(v[e]);
      }
    }
    if (partial == nullptr) continue;
#pragma unroll
    for (int e = 0; e < kV; ++e) sums[threadIdx.y][threadIdx.x * kV + e] = s[e];
    __syncthreads();
    if (threadIdx.y == 0 && col < n) {
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        double t = s[e];
#pragma unroll
        for (int y = 1; y < kRowLanes; ++y) t += sums[y][threadIdx.x * kV + e];
        partial[chunk * n + col + e] = t;
      }
    }
    __syncthreads();
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
    const T* pdy = cptr<T>(dy);
    const T* paux = gelu ? cptr<T>(aux) : nullptr;
    T* pdpre = gelu ? mptr<T>(dpre) : nullptr;
    constexpr int kV = 16 / sizeof(T);
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    auto run = [&]<int kRun, int kX>() {
      const int64_t blocks_x = (n + kX * kRun - 1) / (kX * kRun);
      const dim3 grid(grid_x(blocks_x, "gemm_epilogue_backward"),
                      static_cast<unsigned>(std::min<int64_t>(chunks, 65535)));
      const dim3 block(kX, kRowLanes);
      if (gelu)
        epilogue_backward_kernel<T, true, kRun, kX>
            <<<grid, block, 0, stream>>>(pdy, paux, pdpre, pp, m, n);
      else
        epilogue_backward_kernel<T, false, kRun, kX>
            <<<grid, block, 0, stream>>>(pdy, nullptr, nullptr, pp, m, n);
      CUDA_CHECK_LAUNCH();
    };
    if (n % kV == 0 && aligned(pdy) && (!gelu || (aligned(paux) && aligned(pdpre))))
      run.template operator()<kV, kRunCols>();
    else
      run.template operator()<1, kCols>();
    if (pp) {
      bias_grad_kernel<T>
          <<<grid_x(col_blocks, "bias_grad_kernel"), dim3(kCols, kRowLanes), 0, stream>>>(
              pp, static_cast<T*>(dbias.data_ptr()), chunks, n);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace zt::cuda
