// CUDA LayerNorm kernels: statistics and normalization of each row, and the analytic
// backward. The twin of core/cpu/layer_norm.cpp, with its statistics in two passes (mean,
// then centered squares) in f32 (f64 for f64) where the CPU takes one shifted pass in
// double, and the affine and the input gradient in that type; the parameter gradients are
// summed in double, as on the CPU (16 bytes a load: each lane's rows of a block in f32
// first): same formulas, not the same bits.
// Reductions use fixed trees (block_reduce.cuh): results are bitwise reproducible run to
// run.
// Legend: D elements per row (the normalized dims), rows the other dims together.
//
// Parallel layout. Rows that split into whole 16-byte chunks, at most kMaxWarpChunks a
// lane (D up to 1024 for 16-bit types, 512 for f32), take the warp path for the
// statistics, the normalization and the input gradient: a warp per row holds it in
// registers (one read of x, or of dy and x), reduces with shuffles and never waits on a
// block barrier. Other rows take the block path: one block per row. The parameter
// gradients: blocks of 32 columns (of 32 16-byte chunks where the rows split into them)
// x kSumLanes row lanes, one per block of kLayerNormRowBlock rows, then one block per 32
// columns adding those partial sums in double.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/cuda/row_chunks.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

constexpr int64_t kLayerNormRowBlock = 64;
constexpr int kSumLanes = 8;       // row lanes of the parameter-gradient blocks (blockDim.y)
constexpr int kFinalLanes = 32;    // row-block lanes of the final parameter-gradient sums
constexpr int kWarpRowWarps = 8;   // warps (rows) of a warp-path block
constexpr int kMaxWarpChunks = 4;  // 16-byte chunks a lane holds of a row

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

// A warp per row (kWarpRowWarps rows a block): dx as layer_norm_dx_kernel's, from the
// row's dy and x held in registers.
template <typename T, int C>
__global__ void __launch_bounds__(kWarpRowWarps * 32)
    layer_norm_dx_warp_kernel(T* __restrict__ dx, const T* __restrict__ dy, const T* __restrict__ x,
                              const float* mean, const float* rstd, const T* w, int64_t rows,
                              int64_t D) {
  using Row = WarpRow<T, C>;
  constexpr int kVec = Row::kVec;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowWarps + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp
  const int64_t n = D / kVec;
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(D));
  Row dyr, xr, wr;
  dyr.load(dy + r * D, n);
  xr.load(x + r * D, n);
  if (w) wr.load(w, n);
  const float m = mean[r], rs = rstd[r];
  auto g_at = [&](int k, int e) { return w ? mul_rn(dyr.at(k, e), wr.at(k, e)) : dyr.at(k, e); };
  float sg = 0, sgx = 0;
#pragma unroll
  for (int k = 0; k < C; ++k)
    if (Row::has(n, k))
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float g = g_at(k, e);
        sg = add_rn(sg, g);
        sgx = add_rn(sgx, mul_rn(g, mul_rn(xr.at(k, e) - m, rs)));
      }
  const float c3 = -mul_rn(warp_all_sum(sg), inv_d);
  const float c2 = -mul_rn(warp_all_sum(sgx), inv_d);
#pragma unroll
  for (int k = 0; k < C; ++k) {
    if (!Row::has(n, k)) continue;
    uint4 out;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float xhat = mul_rn(xr.at(k, e) - m, rs);
      reinterpret_cast<T*>(&out)[e] =
          convert<T>(mul_rn(add_rn(add_rn(g_at(k, e), c3), mul_rn(xhat, c2)), rs));
    }
    Row::store(dx + r * D, k, out);
  }
}

// The parameter gradients' partial sums, 16 bytes a load: a block of 32 lanes, each
// taking kVec adjacent columns, x kSumLanes row lanes per block of kLayerNormRowBlock rows
// (as layer_norm_param_partials_kernel, whose layout it shares). Lane y sums rows y,
// y + kSumLanes, ... of the block in f32, then the row lanes add in lane order in
// double. The row blocks stride by gridDim.y.
template <typename T>
__global__ void layer_norm_param_partials_vec_kernel(double* part_w, double* part_b, const T* dy,
                                                     const T* x, const float* mean,
                                                     const float* rstd, int64_t rows, int64_t D) {
  constexpr int kVec = 16 / sizeof(T);
  __shared__ float scratch[2][kSumLanes][32 * kVec];
  const int64_t n = D / kVec, chunk = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t blocks = (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
  for (int64_t blk = blockIdx.y; blk < blocks; blk += gridDim.y) {  // uniform over the block
    const int64_t r0 = blk * kLayerNormRowBlock;
    const int64_t r1 = r0 + kLayerNormRowBlock < rows ? r0 + kLayerNormRowBlock : rows;
    float sw[kVec] = {}, sb[kVec] = {};
    if (chunk < n) {
#pragma unroll 4
      for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumLanes) {
        const uint4 gv = reinterpret_cast<const uint4*>(dy + r * D)[chunk];
        const uint4 xv = reinterpret_cast<const uint4*>(x + r * D)[chunk];
        const float m = mean[r], rs = rstd[r];
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float g = convert<float>(reinterpret_cast<const T*>(&gv)[e]);
          const float xhat = mul_rn(convert<float>(reinterpret_cast<const T*>(&xv)[e]) - m, rs);
          sw[e] = add_rn(sw[e], mul_rn(g, xhat));
          sb[e] = add_rn(sb[e], g);
        }
      }
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      scratch[0][threadIdx.y][threadIdx.x * kVec + e] = sw[e];
      scratch[1][threadIdx.y][threadIdx.x * kVec + e] = sb[e];
    }
    __syncthreads();
    // Thread (x, y) adds column 32 y + x of the block's 32 kVec (and every 32 kSumLanes-th
    // after it) over the row lanes.
    for (int c = threadIdx.y * 32 + threadIdx.x; c < 32 * kVec; c += 32 * kSumLanes) {
      const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 * kVec + c;
      if (j >= D) continue;
      double tw = 0, tb = 0;
#pragma unroll
      for (int y = 0; y < kSumLanes; ++y) {
        tw += static_cast<double>(scratch[0][y][c]);
        tb += static_cast<double>(scratch[1][y][c]);
      }
      part_w[blk * D + j] = tw;
      part_b[blk * D + j] = tb;
    }
    __syncthreads();  // scratch is refilled by the next row block
  }
}

// Whether rows of D elements of T split into whole 16-byte chunks at every pointer given
// (null ones aside): D a multiple of 16 / sizeof(T), each pointer on a 16-byte boundary;
// never for f64 (the 16-byte kernels compute in f32).
template <typename T>
bool rows_of_chunks(int64_t D, std::initializer_list<const void*> ptrs) {
  if constexpr (std::is_same_v<T, double>) return false;
  if (D <= 0 || D % static_cast<int64_t>(16 / sizeof(T)) != 0) return false;
  for (const void* p : ptrs)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// The lane's chunks a row of D elements needs on the warp path (1 to kMaxWarpChunks), or
// 0 where the rows take the block path: not rows_of_chunks, or too long for a warp's
// registers.
template <typename T>
int warp_row_chunks(int64_t D, std::initializer_list<const void*> ptrs) {
  if (!rows_of_chunks<T>(D, ptrs)) return 0;
  const int64_t c = (D / static_cast<int64_t>(16 / sizeof(T)) + 31) / 32;
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
  const int64_t blocks = (rows + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
  const bool params = dweight.defined() || dbias.defined();
  ZT_CHECK(rows < (int64_t{1} << 31), "layer_norm backward: ", rows,
           " rows exceed the CUDA grid (2^31 - 1 blocks); normalize the input in parts");
  dispatch_device_floating(x.dtype(), "layer_norm backward", [&]<typename T>() {
    using A = acc_t<T>;
    DeviceGuard guard(d.index);
    cudaStream_t st = current_stream();
    if (dx.defined() && rows > 0 && D > 0) {
      const int chunks =
          warp_row_chunks<T>(D, {cptr<T>(x), cptr<T>(dy), cptr<T>(dx), cptr<T>(weight)});
      if (chunks > 0) {
        if constexpr (std::is_same_v<A, float>) {
          with_warp_chunks(chunks, [&]<int C>() {
            layer_norm_dx_warp_kernel<T, C>
                <<<blocks_for(rows, kWarpRowWarps, "layer_norm_dx_warp_kernel"), kWarpRowWarps * 32,
                   0, st>>>(mptr<T>(dx), cptr<T>(dy), cptr<T>(x), cptr<A>(mean), cptr<A>(rstd),
                            cptr<T>(weight), rows, D);
          });
        }
      } else {
        layer_norm_dx_kernel<T>
            <<<grid_x(rows, "layer_norm_dx_kernel"), layer_norm_threads(D), 0, st>>>(
                mptr<T>(dx), cptr<T>(dy), cptr<T>(x), cptr<A>(mean), cptr<A>(rstd), cptr<T>(weight),
                D);
      }
      CUDA_CHECK_LAUNCH();
    }
    if (!params || D == 0) return;
    Tensor part_w = Tensor::empty({std::max<int64_t>(blocks * D, 1)}, DType::f64, d);
    Tensor part_b = Tensor::empty({std::max<int64_t>(blocks * D, 1)}, DType::f64, d);
    if (blocks > 0) {
      const unsigned row_blocks = static_cast<unsigned>(std::min<int64_t>(blocks, 65535));
      const dim3 lanes(32, kSumLanes);
      if (rows_of_chunks<T>(D, {cptr<T>(dy), cptr<T>(x)})) {
        if constexpr (!std::is_same_v<T, double>) {
          const int64_t vec = 16 / sizeof(T);
          layer_norm_param_partials_vec_kernel<T>
              <<<dim3(blocks_for(D / vec, 32, "layer_norm_backward"), row_blocks), lanes, 0, st>>>(
                  mptr<double>(part_w), mptr<double>(part_b), cptr<T>(dy), cptr<T>(x),
                  cptr<A>(mean), cptr<A>(rstd), rows, D);
        }
      } else {
        layer_norm_param_partials_kernel<T>
            <<<dim3(blocks_for(D, 32, "layer_norm_backward"), row_blocks), lanes, 0, st>>>(
                mptr<double>(part_w), mptr<double>(part_b), cptr<T>(dy), cptr<T>(x), cptr<A>(mean),
                cptr<A>(rstd), rows, D);
      }
      CUDA_CHECK_LAUNCH();
    }
    layer_norm_param_final_kernel<T>
        <<<blocks_for(D, 32, "layer_norm_backward"), dim3(32, kFinalLanes), 0, st>>>(
            mptr<T>(dweight), mptr<T>(dbias), cptr<double>(part_w), cptr<double>(part_b), blocks,
            D);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
