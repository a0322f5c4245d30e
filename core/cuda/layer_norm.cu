// CUDA LayerNorm kernels: statistics and normalization of each row, and the analytic
// backward. The twin of core/cpu/layer_norm.cpp, with its statistics in two passes (mean,
// then centered squares) in f32 (f64 for f64) where the CPU takes one shifted pass in
// double, and the affine and the input gradient in that type; the parameter gradients are
// summed in double, as on the CPU: same formulas, not the same bits.
// Reductions use fixed trees (block_reduce.cuh): results are bitwise reproducible run to
// run.
// Legend: D elements per row (the normalized dims), rows the other dims together.
//
// Parallel layout. Rows that split into whole 16-byte chunks, at most kMaxWarpChunks a
// lane (D up to 1024 for 16-bit types, 512 for f32), take the warp path: a warp per row
// holds it in registers (one read of x, or of dy and x), reduces with shuffles and never
// waits on a block barrier; the backward's warps also sum their rows' parameter
// gradients in the same pass (one block per kWarpRowBlock rows), in f32 over a warp's
// rows, then in double over the block's warps in warp order. Other rows take the block
// path: one block per row for the statistics, the normalization and the input gradient;
// for the parameter gradients blocks of 32 columns x kSumLanes row lanes, one per block
// of kLayerNormRowBlock rows. Both then add the row blocks' partial sums per column (one
// block per 32 columns), in double.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/cuda/row_chunks.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int64_t kLayerNormRowBlock = 64;
constexpr int kSumLanes = 8;           // row lanes of the parameter-gradient blocks (blockDim.y)
constexpr int kFinalLanes = 32;        // row-block lanes of the final parameter-gradient sums
constexpr int kWarpRowWarps = 8;       // warps of a warp-path forward block
constexpr int kBackwardWarps = 4;      // warps of a warp-path backward block
constexpr int kMaxWarpChunks = 4;      // 16-byte chunks a lane holds of a row
constexpr int64_t kWarpRowBlock = 16;  // rows of a warp-path backward block

// ---------------------------------------------------------------- warp path

// A lane's share of a row: chunks lane, lane + 32, ... (C at most) of its n 16-byte
// chunks, as loaded; the lane's element e of chunk k is column 8 (lane + 32 k) + e for
// 16-bit types (kVec = 16 / sizeof(T) elements a chunk).
template <typename T, int C>
struct WarpRow {
  static constexpr int kVec = 16 / sizeof(T);
  uint4 raw[C];
  __device__ __forceinline__ static bool has(int64_t n, int k) {
    return static_cast<int64_t>(threadIdx.x % 32) + 32 * k < n;
  }
  __device__ __forceinline__ void load(const T* row, int64_t n) {
#pragma unroll
    for (int k = 0; k < C; ++k)
      if (has(n, k)) raw[k] = reinterpret_cast<const uint4*>(row)[threadIdx.x % 32 + 32 * k];
  }
  __device__ __forceinline__ float at(int k, int e) const {
    return convert<float>(reinterpret_cast<const T*>(&raw[k])[e]);
  }
  __device__ __forceinline__ static void store(T* row, int k, const uint4& v) {
    reinterpret_cast<uint4*>(row)[threadIdx.x % 32 + 32 * k] = v;
  }
};

// A warp per row (kWarpRowWarps rows a block): statistics as the block kernel's (mean,
// then centered squares, in f32), from the row held in registers.
template <typename T, int C>
__global__ void __launch_bounds__(kWarpRowWarps * 32)
    layer_norm_forward_warp_kernel(T* __restrict__ y, float* mean, float* rstd,
                                   const T* __restrict__ x, const T* w, const T* b, int64_t rows,
                                   int64_t D, double eps) {
  using Row = WarpRow<T, C>;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowWarps + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp
  const int64_t n = D / Row::kVec;
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(D));
  Row xr;
  xr.load(x + r * D, n);
  float s = 0;
#pragma unroll
  for (int k = 0; k < C; ++k)
    if (Row::has(n, k))
#pragma unroll
      for (int e = 0; e < Row::kVec; ++e) s = add_rn(s, xr.at(k, e));
  const float m = mul_rn(warp_all_sum(s), inv_d);
  float q = 0;
#pragma unroll
  for (int k = 0; k < C; ++k)
    if (Row::has(n, k))
#pragma unroll
      for (int e = 0; e < Row::kVec; ++e) {
        const float d = xr.at(k, e) - m;
        q = add_rn(q, mul_rn(d, d));
      }
  const double var = static_cast<double>(mul_rn(warp_all_sum(q), inv_d));
  const auto rs = static_cast<float>(1.0 / sqrt(var + eps));
  if (threadIdx.x % 32 == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
  Row wr, br;
  if (w) wr.load(w, n);
  if (b) br.load(b, n);
#pragma unroll
  for (int k = 0; k < C; ++k) {
    if (!Row::has(n, k)) continue;
    uint4 out;
#pragma unroll
    for (int e = 0; e < Row::kVec; ++e) {
      float o = mul_rn(xr.at(k, e) - m, rs);
      if (w) o = mul_rn(o, wr.at(k, e));
      if (b) o = add_rn(o, br.at(k, e));
      reinterpret_cast<T*>(&out)[e] = convert<T>(o);
    }
    Row::store(y + r * D, k, out);
  }
}

// A block per kWarpRowBlock rows, its warps taking every kBackwardWarps-th row, the next
// one loaded while this one computes (small blocks, so that enough run at once to keep the
// memory busy: the lanes' registers allow three a multiprocessor). Writes dx as
// layer_norm_dx_kernel does (when dx is not null) and, when part_w is not null, the
// block's partial sums of dy xhat and dy per column (f32 over a warp's rows, then the
// warps added in warp order in double) into row block blockIdx.x of part_w and part_b.
template <typename T, int C>
__global__ void __launch_bounds__(kBackwardWarps * 32)
    layer_norm_backward_warp_kernel(T* __restrict__ dx, double* part_w, double* part_b,
                                    const T* __restrict__ dy, const T* __restrict__ x,
                                    const float* mean, const float* rstd, const T* w, int64_t rows,
                                    int64_t D) {
  using Row = WarpRow<T, C>;
  constexpr int kVec = Row::kVec;
  extern __shared__ double warp_sums[];  // 2 D: the sums of dy xhat, then of dy
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int64_t n = D / kVec;
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(D));
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kWarpRowBlock;
  const int64_t r1 = r0 + kWarpRowBlock < rows ? r0 + kWarpRowBlock : rows;
  Row wr;
  if (w) wr.load(w, n);
  float aw[C][kVec] = {}, ab[C][kVec] = {};
  Row dy_next, x_next;
  int64_t r = r0 + warp;
  if (r < r1) {
    dy_next.load(dy + r * D, n);
    x_next.load(x + r * D, n);
  }
  for (; r < r1; r += kBackwardWarps) {
    const Row dyr = dy_next, xr = x_next;
    if (r + kBackwardWarps < r1) {
      dy_next.load(dy + (r + kBackwardWarps) * D, n);
      x_next.load(x + (r + kBackwardWarps) * D, n);
    }
    const float m = mean[r], rs = rstd[r];
    float sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < C; ++k)
      if (Row::has(n, k))
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float g0 = dyr.at(k, e), xhat = mul_rn(xr.at(k, e) - m, rs);
          const float g = w ? mul_rn(g0, wr.at(k, e)) : g0;
          sg = add_rn(sg, g);
          sgx = add_rn(sgx, mul_rn(g, xhat));
          aw[k][e] = add_rn(aw[k][e], mul_rn(g0, xhat));
          ab[k][e] = add_rn(ab[k][e], g0);
        }
    if (!dx) continue;
    const float c3 = -mul_rn(warp_all_sum(sg), inv_d);
    const float c2 = -mul_rn(warp_all_sum(sgx), inv_d);
#pragma unroll
    for (int k = 0; k < C; ++k) {
      if (!Row::has(n, k)) continue;
      uint4 out;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float g0 = dyr.at(k, e), xhat = mul_rn(xr.at(k, e) - m, rs);
        const float g = w ? mul_rn(g0, wr.at(k, e)) : g0;
        reinterpret_cast<T*>(&out)[e] =
            convert<T>(mul_rn(add_rn(add_rn(g, c3), mul_rn(xhat, c2)), rs));
      }
      Row::store(dx + r * D, k, out);
    }
  }
  if (!part_w) return;
  // The warps' sums added in warp order: warp u adds its own once warps 0..u-1 have.
  for (int u = 0; u < kBackwardWarps; ++u) {
    if (warp == u) {
#pragma unroll
      for (int k = 0; k < C; ++k)
        if (Row::has(n, k))
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            const int64_t j = (threadIdx.x % 32 + 32 * k) * kVec + e;
            warp_sums[j] = (u == 0 ? 0.0 : warp_sums[j]) + static_cast<double>(aw[k][e]);
            warp_sums[D + j] = (u == 0 ? 0.0 : warp_sums[D + j]) + static_cast<double>(ab[k][e]);
          }
    }
    __syncthreads();
  }
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    part_w[blockIdx.x * D + j] = warp_sums[j];
    part_b[blockIdx.x * D + j] = warp_sums[D + j];
  }
}

// The lane's chunks a row of D elements needs on the warp path (1 to kMaxWarpChunks), or
// 0 where the rows take the block path: f64, a row not whole 16-byte chunks, a pointer
// off a 16-byte boundary, or a row too long for a warp's registers.
template <typename T>
int warp_row_chunks(int64_t D, std::initializer_list<const void*> ptrs) {
  constexpr int64_t kVec = 16 / sizeof(T);
  if constexpr (std::is_same_v<T, double>) return 0;
  if (D <= 0 || D % kVec != 0) return 0;
  for (const void* p : ptrs)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return 0;
  const int64_t c = (D / kVec + 31) / 32;
  return c <= kMaxWarpChunks ? static_cast<int>(c) : 0;
}

// fn.template operator()<C>() for C = chunks, 1 <= chunks <= kMaxWarpChunks.
template <typename Fn>
void with_warp_chunks(int chunks, Fn&& fn) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((chunks == I + 1 && (fn.template operator()<I + 1>(), true)) || ...);
  }
  (std::make_integer_sequence<int, kMaxWarpChunks>());
}

// ---------------------------------------------------------------- block path

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

// Block of 32 columns x kFinalLanes lanes: lane y adds the partial sums of row blocks y,
// y + kFinalLanes, ... in order, then the lanes add in lane order, in double.
template <typename T>
__global__ void layer_norm_param_final_kernel(T* dw, T* db, const double* part_w,
                                              const double* part_b, int64_t blocks, int64_t D) {
  __shared__ double scratch[kFinalLanes][32];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  double sw = 0, sb = 0;
  if (j < D) {
#pragma unroll 4
    for (int64_t blk = threadIdx.y; blk < blocks; blk += kFinalLanes) {
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
    cudaStream_t st = current_stream();
    const int chunks =
        warp_row_chunks<T>(D, {cptr<T>(x), cptr<T>(y), cptr<T>(weight), cptr<T>(bias)});
    if constexpr (std::is_same_v<A, float>) {
      if (chunks > 0) {
        with_warp_chunks(chunks, [&]<int C>() {
          layer_norm_forward_warp_kernel<T, C>
              <<<blocks_for(rows, kWarpRowWarps, "layer_norm_forward_warp_kernel"),
                 kWarpRowWarps * 32, 0, st>>>(mptr<T>(y), mptr<A>(mean), mptr<A>(rstd), cptr<T>(x),
                                              cptr<T>(weight), cptr<T>(bias), rows, D, eps);
        });
        CUDA_CHECK_LAUNCH();
        return;
      }
    }
    layer_norm_forward_kernel<T>
        <<<grid_x(rows, "layer_norm_forward_kernel"), layer_norm_threads(D), 0, st>>>(
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
  const bool params = dweight.defined() || dbias.defined();
  ZT_CHECK(rows < (int64_t{1} << 31), "layer_norm backward: ", rows,
           " rows exceed the CUDA grid (2^31 - 1 blocks); normalize the input in parts");
  if (rows == 0 && !params) return;
  dispatch_device_floating(x.dtype(), "layer_norm backward", [&]<typename T>() {
    using A = acc_t<T>;
    DeviceGuard guard(d.index);
    cudaStream_t st = current_stream();
    const int chunks =
        warp_row_chunks<T>(D, {cptr<T>(x), cptr<T>(dy), cptr<T>(dx), cptr<T>(weight)});
    const bool warp_path = std::is_same_v<A, float> && chunks > 0 && rows > 0;
    const int64_t blocks = (rows + (warp_path ? kWarpRowBlock : kLayerNormRowBlock) - 1) /
                           (warp_path ? kWarpRowBlock : kLayerNormRowBlock);
    Tensor part_w, part_b;
    if (params && D > 0) {
      part_w = Tensor::empty({std::max<int64_t>(blocks * D, 1)}, DType::f64, d);
      part_b = Tensor::empty({std::max<int64_t>(blocks * D, 1)}, DType::f64, d);
    }
    if constexpr (std::is_same_v<A, float>) {
      if (warp_path) {
        with_warp_chunks(chunks, [&]<int C>() {
          layer_norm_backward_warp_kernel<T, C>
              <<<grid_x(blocks, "layer_norm_backward_warp_kernel"), kBackwardWarps * 32,
                 part_w.defined() ? 2 * D * sizeof(double) : 0, st>>>(
                  mptr<T>(dx), mptr<double>(part_w), mptr<double>(part_b), cptr<T>(dy), cptr<T>(x),
                  cptr<A>(mean), cptr<A>(rstd), cptr<T>(weight), rows, D);
        });
        CUDA_CHECK_LAUNCH();
      }
    }
    if (!warp_path && dx.defined() && rows > 0 && D > 0) {
      layer_norm_dx_kernel<T>
          <<<grid_x(rows, "layer_norm_dx_kernel"), layer_norm_threads(D), 0, st>>>(
              mptr<T>(dx), cptr<T>(dy), cptr<T>(x), cptr<A>(mean), cptr<A>(rstd), cptr<T>(weight),
              D);
      CUDA_CHECK_LAUNCH();
    }
    if (!part_w.defined()) return;
    const unsigned cols = blocks_for(D, 32, "layer_norm_backward");
    if (!warp_path && blocks > 0) {
      const unsigned row_blocks = static_cast<unsigned>(std::min<int64_t>(blocks, 65535));
      layer_norm_param_partials_kernel<T><<<dim3(cols, row_blocks), dim3(32, kSumLanes), 0, st>>>(
          mptr<double>(part_w), mptr<double>(part_b), cptr<T>(dy), cptr<T>(x), cptr<A>(mean),
          cptr<A>(rstd), rows, D);
      CUDA_CHECK_LAUNCH();
    }
    layer_norm_param_final_kernel<T><<<cols, dim3(32, kFinalLanes), 0, st>>>(
        mptr<T>(dweight), mptr<T>(dbias), cptr<double>(part_w), cptr<double>(part_b), blocks, D);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
