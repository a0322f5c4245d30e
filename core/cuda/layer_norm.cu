// CUDA LayerNorm kernels: statistics and normalization of each row, and the analytic
// backward. The twin of core/cpu/layer_norm.cpp, with its statistics in two passes (mean,
// then centered squares) in f32 (f64 for f64) where the CPU takes one shifted pass in
// double, and the affine and the input gradient in that type; the parameter gradients are
// summed in double, as on the CPU: same formulas, not the same bits.
// Reductions use fixed trees (block_reduce.cuh): results are bitwise reproducible run to
// run.
// Legend: D elements per row (the normalized dims), rows the other dims together.
//
// Parallel layout: one block per row for the statistics, the normalization and the input
// gradient; for the parameter gradients blocks of 32 columns x kSumLanes row lanes, one
// per block of kLayerNormRowBlock rows, then one per 32 columns over those partial sums.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/cuda/row_chunks.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int64_t kLayerNormRowBlock = 64;
constexpr int kSumLanes = 8;  // row lanes of the parameter-gradient blocks (blockDim.y)

// Block per row: mean, then the mean of centered squares, then y; the row read (and y
// written) 16 bytes at a time where it allows (row_chunks.cuh).
template <typename T>
__global__ void layer_norm_forward_kernel(T* __restrict__ y, acc_t<T>* mean, acc_t<T>* rstd,
                                          const T* __restrict__ x, const T* w, const T* b,
                                          int64_t D, double eps) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int64_t r = blockIdx.x;
  const T* xr[] = {x + r * D};
  const A inv_d = D > 0 ? static_cast<A>(1.0 / static_cast<double>(D)) : A(0);
  A s = 0;
  row_for_each<A>(xr, D, [&](int64_t, const A(&v)[1]) { s = add_rn(s, v[0]); });
  const A m = mul_rn(block_all_sum(s, scratch), inv_d);
  A q = 0;
  row_for_each<A>(xr, D, [&](int64_t, const A(&v)[1]) {
    const A d = v[0] - m;
    q = add_rn(q, mul_rn(d, d));
  });
  const double var = static_cast<double>(mul_rn(block_all_sum(q, scratch), inv_d));
  const A rs = static_cast<A>(1.0 / sqrt(var + eps));
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
  row_map<A>(xr, y + r * D, D, [&](int64_t j, const A(&v)[1]) {
    A o = mul_rn(v[0] - m, rs);
    if (w) o = mul_rn(o, convert<A>(w[j]));
    if (b) o = add_rn(o, convert<A>(b[j]));
    return convert<T>(o);
  });
}

// Block per row: with g = dy w and xhat = (x - mean) rstd,
// dx = rstd (g - mean(g) - xhat mean(g xhat)); dy and x read 16 bytes at a time where the
// rows allow.
template <typename T>
__global__ void layer_norm_dx_kernel(T* __restrict__ dx, const T* __restrict__ dy,
                                     const T* __restrict__ x, const acc_t<T>* mean,
                                     const acc_t<T>* rstd, const T* w, int64_t D) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  const int64_t r = blockIdx.x;
  const T* rows[] = {dy + r * D, x + r * D};  // (dy, x)
  const A m = mean[r], rs = rstd[r];
  const A inv_d = static_cast<A>(1.0 / static_cast<double>(D));
  A sg = 0, sgx = 0;
  row_for_each<A>(rows, D, [&](int64_t j, const A(&v)[2]) {
    const A g = w ? mul_rn(v[0], convert<A>(w[j])) : v[0];
    sg = add_rn(sg, g);
    sgx = add_rn(sgx, mul_rn(g, mul_rn(v[1] - m, rs)));
  });
  const A c3 = -mul_rn(block_all_sum(sg, scratch), inv_d);
  const A c2 = -mul_rn(block_all_sum(sgx, scratch), inv_d);
  row_map<A>(rows, dx + r * D, D, [&](int64_t j, const A(&v)[2]) {
    const A g = w ? mul_rn(v[0], convert<A>(w[j])) : v[0];
    const A xhat = mul_rn(v[1] - m, rs);
    return convert<T>(mul_rn(add_rn(add_rn(g, c3), mul_rn(xhat, c2)), rs));
  });
}

// Block of 32 columns x kSumLanes row lanes per block of kLayerNormRowBlock rows: lane y
// sums rows y, y + kSumLanes, ... of the block in order, then the lanes add in lane order
// (column_lanes_sum); partial sums of dy xhat and dy in double, as on the CPU. The row
// blocks stride by gridDim.y, so any number of rows fits the grid.
template <typename T>
__global__ void layer_norm_param_partials_kernel(double* part_w, double* part_b, const T* dy,
                                                 const T* x, const acc_t<T>* mean,
                                                 const acc_t<T>* rstd, int64_t rows, int64_t D) {
  using A = acc_t<T>;
  __shared__ double scratch[kSumLanes][32];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t blocks = (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
  for (int64_t blk = blockIdx.y; blk < blocks; blk += gridDim.y) {  // uniform over the block
    const int64_t r0 = blk * kLayerNormRowBlock;
    const int64_t r1 = r0 + kLayerNormRowBlock < rows ? r0 + kLayerNormRowBlock : rows;
    double sw = 0, sb = 0;
    if (j < D) {
#pragma unroll 4
      for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumLanes) {
        const double g = convert<double>(dy[r * D + j]);
        const A xhat = mul_rn(convert<A>(x[r * D + j]) - mean[r], rstd[r]);
        sw = add_rn(sw, mul_rn(g, static_cast<double>(xhat)));
        sb = add_rn(sb, g);
      }
    }
    sw = column_lanes_sum(sw, scratch);
    sb = column_lanes_sum(sb, scratch);
    if (threadIdx.y == 0 && j < D) {
      part_w[blk * D + j] = sw;
      part_b[blk * D + j] = sb;
    }
  }
}

// Block of 32 columns x kSumLanes lanes: lane y adds the partial sums of row blocks y,
// y + kSumLanes, ... in order, then the lanes add in lane order, in double.
template <typename T>
__global__ void layer_norm_param_final_kernel(T* dw, T* db, const double* part_w,
                                              const double* part_b, int64_t blocks, int64_t D) {
  __shared__ double scratch[kSumLanes][32];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  double sw = 0, sb = 0;
  if (j < D) {
#pragma unroll 4
    for (int64_t blk = threadIdx.y; blk < blocks; blk += kSumLanes) {
      sw = add_rn(sw, part_w[blk * D + j]);
      sb = add_rn(sb, part_b[blk * D + j]);
    }
  }
  sw = column_lanes_sum(sw, scratch);
  sb = column_lanes_sum(sb, scratch);
  if (threadIdx.y != 0 || j >= D) return;
  if (dw) dw[j] = convert<T>(sw);
  if (db) db[j] = convert<T>(sb);
}

// Threads per LayerNorm row: about 8 elements each, a multiple of 32, at most kThreads.
unsigned layer_norm_threads(int64_t D) {
  const int64_t t = ((D + 8 * 32 - 1) / (8 * 32)) * 32;
  return static_cast<unsigned>(std::min<int64_t>(kThreads, std::max<int64_t>(32, t)));
}

}  // namespace

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t rows, int64_t D,
                        double eps) {
  check_device("layer_norm", x.device(), {y, mean, rstd, weight, bias});
  if (rows == 0) return;
  ZT_CHECK(rows < (int64_t{1} << 31), "layer_norm: ", rows,
           " rows exceed the CUDA grid (2^31 - 1 blocks); normalize the input in parts");
  const int dev = x.device().index;
  dispatch_device_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    DeviceGuard g(dev);
    layer_norm_forward_kernel<T>
        <<<grid_x(rows, "layer_norm_forward_kernel"), layer_norm_threads(D), 0, current_stream()>>>(
            mptr<T>(y), mptr<A>(mean), mptr<A>(rstd), cptr<T>(x), cptr<T>(weight), cptr<T>(bias), D,
            eps);
    CUDA_CHECK_LAUNCH();
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t rows, int64_t D) {
  check_device("layer_norm backward", x.device(), {dx, dweight, dbias, dy, mean, rstd, weight});
  const Device d = x.device();
  const int64_t blocks = (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
  const bool params = dweight.defined() || dbias.defined();
  ZT_CHECK(rows < (int64_t{1} << 31), "layer_norm backward: ", rows,
           " rows exceed the CUDA grid (2^31 - 1 blocks); normalize the input in parts");
  dispatch_device_floating(x.dtype(), "layer_norm backward", [&]<typename T>() {
    using A = acc_t<T>;
    DeviceGuard guard(d.index);
    cudaStream_t st = current_stream();
    if (dx.defined() && rows > 0 && D > 0) {
      layer_norm_dx_kernel<T>
          <<<grid_x(rows, "layer_norm_dx_kernel"), layer_norm_threads(D), 0, st>>>(
              mptr<T>(dx), cptr<T>(dy), cptr<T>(x), cptr<A>(mean), cptr<A>(rstd), cptr<T>(weight),
              D);
      CUDA_CHECK_LAUNCH();
    }
    if (!params || D == 0) return;
    Tensor part_w = Tensor::empty({std::max<int64_t>(blocks * D, 1)}, DType::f64, d);
    Tensor part_b = Tensor::empty({std::max<int64_t>(blocks * D, 1)}, DType::f64, d);
    const unsigned cols = blocks_for(D, 32, "layer_norm_backward");
    const dim3 lanes(32, kSumLanes);
    if (blocks > 0) {
      const unsigned row_blocks = static_cast<unsigned>(std::min<int64_t>(blocks, 65535));
      layer_norm_param_partials_kernel<T><<<dim3(cols, row_blocks), lanes, 0, st>>>(
          mptr<double>(part_w), mptr<double>(part_b), cptr<T>(dy), cptr<T>(x), cptr<A>(mean),
          cptr<A>(rstd), rows, D);
      CUDA_CHECK_LAUNCH();
    }
    layer_norm_param_final_kernel<T><<<cols, lanes, 0, st>>>(
        mptr<T>(dweight), mptr<T>(dbias), cptr<double>(part_w), cptr<double>(part_b), blocks, D);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
