// CUDA indexing kernels: index_select / embedding rows, gather (as offsets + take), their
// scatter-add gradients, one_hot, argmax / argmin and nearest-neighbour resizing.
// Legend: outer x n x inner the view of a tensor around the indexed dim; M scattered
// rows; planes = N * C and (D, H, W) -> (Do, Ho, Wo) for resizing.
//
// Determinism: a scatter-add (the backward of index_select, gather and nearest resize)
// never uses floating atomics. index_select / gather sort the destination rows (a
// stable radix sort, so equal rows keep their source order), then one thread per
// (destination row, column) adds its sources in that order, rounding to the dtype after
// every add exactly as the CPU loop does: results equal the CPU's bit for bit. Nearest
// resize inverts its monotone index map instead (each input gathers the contiguous
// range of outputs that read it).
//
// Range checks: the kernels check every index themselves, report the first bad one of
// the device (core/cuda/device_error.h: raised at the host's next wait) and keep their
// accesses in bounds, so an index op costs no host synchronization.
#include <cub/cub.cuh>

#include <climits>

#include "core/cuda/allocator.h"
#include "core/cuda/device_error.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

template <typename I>
__device__ __forceinline__ int64_t idx_at(const I* p, int64_t i) {
  return static_cast<int64_t>(p[i]);
}

#define ZT_GRID_LOOP(i, n)                                                               \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ---------------------------------------------------------------- kernels

// One block of 1024 threads: out[0] = min, out[1] = max.
template <typename I>
__global__ void index_range_kernel(int64_t* out, const I* idx, int64_t n) {
  __shared__ int64_t lo[1024], hi[1024];
  int64_t a = LLONG_MAX, b = LLONG_MIN;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    int64_t v = idx_at(idx, i);
    a = v < a ? v : a;
    b = v > b ? v : b;
  }
  lo[threadIdx.x] = a;
  hi[threadIdx.x] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      lo[threadIdx.x] = min(lo[threadIdx.x], lo[threadIdx.x + s]);
      hi[threadIdx.x] = max(hi[threadIdx.x], hi[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = lo[0];
    out[1] = hi[0];
  }
}

// A bad index (outside [0, n)) is reported (device_error.h) and its rows are zero.
template <typename T, typename I>
__global__ void index_rows_kernel(T* out, const T* x, const I* idx, int64_t total, int64_t n,
                                  int64_t n_idx, int64_t inner, DeviceErrorSlot err) {
  ZT_GRID_LOOP(i, total) {
    const int64_t k = i % inner, row = i / inner, j = row % n_idx, o = row / n_idx;
    const int64_t v = idx_at(idx, j);
    if (v >= 0 && v < n) {
      out[i] = x[(o * n + v) * inner + k];
    } else {
      out[i] = T{};
      if (k == 0 && o == 0) report_device_error(err, kIndexOutOfRange, kOpIndexSelect, v, n, j);
    }
  }
}

// rows[m] = destination row of source row m = (o, j): o * n + idx[j]. A bad index is
// clamped into range, so the scatter stays in bounds, and reported when `report` is set
// (bincount; an index_select's forward reported it already).
template <typename I>
__global__ void index_dest_rows_kernel(uint64_t* rows, const I* idx, int64_t M, int64_t n,
                                       int64_t n_idx, bool report, DeviceErrorSlot err) {
  ZT_GRID_LOOP(m, M) {
    const int64_t j = m % n_idx, v = idx_at(idx, j);
    const bool bad = v < 0 || v >= n;
    if (bad && report && m < n_idx)
      report_device_error(err, kIndexOutOfRange, kOpBincount, v, n, j);
    rows[m] = static_cast<uint64_t>((m / n_idx) * n + (v < 0 ? 0 : (v >= n ? n - 1 : v)));
  }
}

__global__ void iota_kernel(int64_t* p, int64_t n) {
  ZT_GRID_LOOP(i, n) {
    p[i] = i;
  }
}

// One thread per (run, column): dst[key * inner + k] += its sources, in source order,
// rounding to T after each add like the CPU.
template <typename T>
__global__ void segment_add_kernel(T* dst, const T* src, const uint64_t* keys,
                                   const int64_t* src_rows, const int* counts, const int* offsets,
                                   const int* num_runs, int64_t inner) {
  const int64_t total = static_cast<int64_t>(*num_runs) * inner;
  ZT_GRID_LOOP(i, total) {
    const int64_t r = i / inner, k = i % inner;
    T* d = dst + static_cast<int64_t>(keys[r]) * inner + k;
    T cur = *d;
    for (int t = offsets[r], end = offsets[r] + counts[r]; t < end; ++t)
      cur = convert<T>(convert<acc_t<T>>(cur) + convert<acc_t<T>>(src[src_rows[t] * inner + k]));
    *d = cur;
  }
}

struct GatherDims {
  int nd;
  int64_t isz[kMaxDims];  // index sizes
  int64_t xst[kMaxDims];  // contiguous x strides
};

// A bad index (outside [0, bound)) is reported and read as 0, so take and put_add stay
// in bounds.
template <typename I>
__global__ void gather_offsets_kernel(int64_t* off, const I* idx, int64_t n, GatherDims g, int dim,
                                      int64_t bound, DeviceErrorSlot err) {
  ZT_GRID_LOOP(i, n) {
    int64_t v = idx_at(idx, i);
    if (v < 0 || v >= bound) {
      report_device_error(err, kIndexOutOfRange, kOpGather, v, bound, i);
      v = 0;
    }
    int64_t rem = i, o = 0;
    for (int d = g.nd - 1; d >= 0; --d) {
      const int64_t c = rem % g.isz[d];
      rem /= g.isz[d];
      o += (d == dim ? v : c) * g.xst[d];
    }
    off[i] = o;
  }
}

template <typename T>
__global__ void take_kernel(T* out, const T* x, const int64_t* off, int64_t n) {
  ZT_GRID_LOOP(i, n) {
    out[i] = x[off[i]];
  }
}

// A bad id (outside [0, classes)) is reported and its row stays zero.
template <typename I>
__global__ void one_hot_kernel(float* out, const I* ids, int64_t n, int64_t classes,
                               DeviceErrorSlot err) {
  ZT_GRID_LOOP(i, n) {
    const int64_t v = idx_at(ids, i);
    if (v >= 0 && v < classes)
      out[i * classes + v] = 1.0f;
    else
      report_device_error(err, kIndexOutOfRange, kOpOneHot, v, classes, i);
  }
}

// Candidate (v, i) against the best so far (bv, bi; bi < 0: none). A NaN is both the max
// and the min, the first of several winning (the CPU's rule, PyTorch's).
template <typename A>
__device__ __forceinline__ bool wins(A v, int64_t i, A bv, int64_t bi, bool want_max) {
  if (bi < 0) return true;
  const bool v_nan = v != v, bv_nan = bv != bv;
  if (v_nan || bv_nan) return v_nan && (!bv_nan || i < bi);
  if (want_max ? v > bv : v < bv) return true;
  return v == bv && i < bi;
}

// Block per row: each thread scans a strided subset, then a tree over the block.
template <typename T>
__global__ void arg_extreme_kernel(int64_t* out, const T* x, int64_t n, bool want_max) {
  using A = acc_t<T>;
  __shared__ A sv[kThreads];
  __shared__ int64_t si[kThreads];
  const T* row = x + static_cast<int64_t>(blockIdx.x) * n;
  A bv = A(0);
  int64_t bi = -1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    A v = convert<A>(row[i]);
    if (wins(v, i, bv, bi, want_max)) {
      bv = v;
      bi = i;
    }
  }
  sv[threadIdx.x] = bv;
  si[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      A v = sv[threadIdx.x + s];
      int64_t i = si[threadIdx.x + s];
      if (i >= 0 && wins(v, i, sv[threadIdx.x], si[threadIdx.x], want_max)) {
        sv[threadIdx.x] = v;
        si[threadIdx.x] = i;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = si[0] < 0 ? 0 : si[0];
}

struct NearestDims {
  int64_t in[3], out[3];
  float scale[3];  // in / out in float, as the CPU computes it
};

// PyTorch's 'nearest' source index along one axis (core/cpu/index.cpp's nearest_indices).
__device__ __forceinline__ int64_t nearest_src(const NearestDims& p, int a, int64_t o) {
  const int64_t in = p.in[a], out = p.out[a];
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const int64_t v = static_cast<int64_t>(floorf(__fmul_rn(static_cast<float>(o), p.scale[a])));
  return v < in - 1 ? v : in - 1;
}

// First output o along axis a whose source index is >= i (the map is monotone): i itself
// for an equal size and 2 i for a doubling (nearest_src's own cases), else by bisection.
__device__ int64_t nearest_first(const NearestDims& p, int a, int64_t i) {
  if (p.out[a] == p.in[a]) return i;
  if (p.out[a] == 2 * p.in[a]) return 2 * i;
  int64_t lo = 0, hi = p.out[a];
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (nearest_src(p, a, mid) >= i) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

template <typename T>
__global__ void nearest_forward_kernel(T* y, const T* x, int64_t total, NearestDims p) {
  const int64_t out_plane = p.out[0] * p.out[1] * p.out[2];
  const int64_t in_plane = p.in[0] * p.in[1] * p.in[2];
  ZT_GRID_LOOP(i, total) {
    const int64_t b = i / out_plane, r = i % out_plane;
    const int64_t od = r / (p.out[1] * p.out[2]), oh = (r / p.out[2]) % p.out[1], ow = r % p.out[2];
    y[i] = x[b * in_plane + (nearest_src(p, 0, od) * p.in[1] + nearest_src(p, 1, oh)) * p.in[2] +
             nearest_src(p, 2, ow)];
  }
}

template <typename T>
__global__ void nearest_backward_kernel(T* gx, const T* gy, int64_t total, NearestDims p) {
  const int64_t out_plane = p.out[0] * p.out[1] * p.out[2];
  const int64_t in_plane = p.in[0] * p.in[1] * p.in[2];
  ZT_GRID_LOOP(i, total) {
    const int64_t b = i / in_plane, r = i % in_plane;
    const int64_t d = r / (p.in[1] * p.in[2]), h = (r / p.in[2]) % p.in[1], w = r % p.in[2];
    const int64_t d0 = nearest_first(p, 0, d), d1 = nearest_first(p, 0, d + 1);
    const int64_t h0 = nearest_first(p, 1, h), h1 = nearest_first(p, 1, h + 1);
    const int64_t w0 = nearest_first(p, 2, w), w1 = nearest_first(p, 2, w + 1);
    const T* src = gy + b * out_plane;
    // Summed in acc_t, rounded once, in the CPU's order.
    acc_t<T> sum = 0;
    for (int64_t od = d0; od < d1; ++od)
      for (int64_t oh = h0; oh < h1; ++oh)
        for (int64_t ow = w0; ow < w1; ++ow)
          sum += convert<acc_t<T>>(src[(od * p.out[1] + oh) * p.out[2] + ow]);
    gx[i] = convert<T>(sum);
  }
}

// ---------------------------------------------------------------- helpers

// Scratch for cub: `bytes` and one spare element, so never empty (a null pointer asks
// cub for the size instead of running).
Tensor scratch_bytes(size_t bytes, Device dev) {
  return device_bytes(bytes + 8, dev);
}

int bits_for(int64_t max_key) {
  int b = 1;
  while (b < 63 && (int64_t{1} << b) <= max_key) ++b;
  return b;
}

// dst (R, inner) += src (M, inner) row m into row rows[m], deterministically (see top).
void scatter_rows_add(const Tensor& dst, const Tensor& src, const Tensor& rows, int64_t M,
                      int64_t inner, int64_t num_rows) {
  if (M == 0 || inner == 0) return;
  ZT_CHECK(M < INT_MAX, "scatter-add: ", M,
           " rows are too many for one pass (at most 2^31 - 2); "
           "split the index");
  const Device dev = dst.device();
  cudaStream_t st = current_stream();
  const int m = static_cast<int>(M);
  const int bits = bits_for(num_rows);
  Tensor keys_out = Tensor::empty({M}, DType::i64, dev);
  Tensor vals_in = Tensor::empty({M}, DType::i64, dev);
  Tensor vals_out = Tensor::empty({M}, DType::i64, dev);
  Tensor unique = Tensor::empty({M}, DType::i64, dev);
  Tensor ints = Tensor::empty({2 * M + 2}, DType::i32, dev);  // counts, offsets, num_runs
  auto* k_in = static_cast<uint64_t*>(rows.data_ptr());
  auto* k_out = static_cast<uint64_t*>(keys_out.data_ptr());
  auto* v_in = static_cast<int64_t*>(vals_in.data_ptr());
  auto* v_out = static_cast<int64_t*>(vals_out.data_ptr());
  auto* uniq = static_cast<uint64_t*>(unique.data_ptr());
  int* counts = static_cast<int*>(ints.data_ptr());
  int* offsets = counts + M;
  int* num_runs = offsets + M;
  iota_kernel<<<grid_for(M, dev.index), kThreads, 0, st>>>(v_in, M);
  CUDA_CHECK_LAUNCH();
  size_t b1 = 0, b2 = 0, b3 = 0;
  CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(nullptr, b1, k_in, k_out, v_in, v_out, m, 0, bits, st));
  CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, b2, k_out, uniq, counts, num_runs, m, st));
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, b3, counts, offsets, m, st));
  size_t bytes = std::max({b1, b2, b3});
  Tensor tmp = scratch_bytes(bytes, dev);
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data_ptr(), b1, k_in, k_out, v_in, v_out, m, 0,
                                             bits, st));
  CUDA_CHECK(
      cub::DeviceRunLengthEncode::Encode(tmp.data_ptr(), b2, k_out, uniq, counts, num_runs, m, st));
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp.data_ptr(), b3, counts, offsets, m, st));
  dispatch_device_floating(dst.dtype(), "scatter-add", [&]<typename T>() {
    segment_add_kernel<T><<<grid_for(M * inner, dev.index), kThreads, 0, st>>>(
        static_cast<T*>(dst.data_ptr()), static_cast<const T*>(src.data_ptr()), uniq, v_out, counts,
        offsets, num_runs, inner);
    CUDA_CHECK_LAUNCH();
  });
}

void check_contiguous(const char* op, std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    ZT_CHECK(t.is_contiguous(), op, ": expects contiguous tensors, got a strided ", t.str());
}

NearestDims nearest_dims(const Shape& in, const Shape& out) {
  ZT_CHECK(in.size() == 3 && out.size() == 3, "nearest: expects (D, H, W) sizes");
  NearestDims p{};
  for (int a = 0; a < 3; ++a) {
    p.in[a] = in[a];
    p.out[a] = out[a];
    p.scale[a] = static_cast<float>(in[a]) / static_cast<float>(out[a]);
  }
  return p;
}

}  // namespace

// ---------------------------------------------------------------- launchers

std::array<int64_t, 2> index_range(const Tensor& index) {
  std::array<int64_t, 2> r{0, -1};
  if (index.numel() == 0) return r;
  check_contiguous("index_range", {index});
  DeviceGuard g(index.device().index);
  Tensor out = Tensor::empty({2}, DType::i64, index.device());
  dispatch_index(index.dtype(), "index", [&]<typename I>() {
    index_range_kernel<I><<<1, 1024, 0, current_stream()>>>(static_cast<int64_t*>(out.data_ptr()),
                                                            static_cast<const I*>(index.data_ptr()),
                                                            index.numel());
    CUDA_CHECK_LAUNCH();
  });
  memcpy_d2h(r.data(), out.data_ptr(), sizeof(r));
  return r;
}

void index_rows(const Tensor& out, const Tensor& x, const Tensor& index, int64_t outer, int64_t n,
                int64_t inner) {
  check_device("index_select", out.device(), {x, index});
  check_contiguous("index_select", {out, x, index});
  const int64_t n_idx = index.numel(), total = outer * n_idx * inner;
  if (total == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_device(out.dtype(), [&]<typename T>() {
    dispatch_index(index.dtype(), "index_select", [&]<typename I>() {
      index_rows_kernel<T, I><<<grid_for(total, dev), kThreads, 0, current_stream()>>>(
          static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()),
          static_cast<const I*>(index.data_ptr()), total, n, n_idx, inner, device_error_record());
      CUDA_CHECK_LAUNCH();
    });
  });
}

void index_rows_add(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t outer,
                    int64_t n, int64_t inner, IndexAddOp op) {
  const char* name = op == IndexAddOp::kBincount ? "bincount" : "index_select backward";
  check_device(name, dst.device(), {src, index});
  check_contiguous(name, {dst, src, index});
  const int64_t n_idx = index.numel(), M = outer * n_idx;
  if (M == 0 || inner == 0) return;
  const int dev = dst.device().index;
  DeviceGuard g(dev);
  Tensor rows = Tensor::empty({M}, DType::i64, dst.device());
  dispatch_index(index.dtype(), name, [&]<typename I>() {
    index_dest_rows_kernel<I><<<grid_for(M, dev), kThreads, 0, current_stream()>>>(
        static_cast<uint64_t*>(rows.data_ptr()), static_cast<const I*>(index.data_ptr()), M, n,
        n_idx, op == IndexAddOp::kBincount, device_error_record());
    CUDA_CHECK_LAUNCH();
  });
  scatter_rows_add(dst, src, rows, M, inner, outer * n);
}

void gather_offsets(const Tensor& offsets, const Tensor& index, const Shape& x_sizes, int64_t dim) {
  check_device("gather", offsets.device(), {index});
  check_contiguous("gather", {offsets, index});
  const int64_t n = index.numel();
  if (n == 0) return;
  ZT_CHECK(index.dim() <= kMaxDims, "gather on CUDA: at most ", kMaxDims, " dims, got ",
           index.dim());
  GatherDims gd{};
  gd.nd = static_cast<int>(index.dim());
  Shape xst = contiguous_strides(x_sizes);
  for (int d = 0; d < gd.nd; ++d) {
    gd.isz[d] = index.size(d);
    gd.xst[d] = xst[d];
  }
  const int dev = offsets.device().index;
  DeviceGuard g(dev);
  dispatch_index(index.dtype(), "gather", [&]<typename I>() {
    gather_offsets_kernel<I><<<grid_for(n, dev), kThreads, 0, current_stream()>>>(
        static_cast<int64_t*>(offsets.data_ptr()), static_cast<const I*>(index.data_ptr()), n, gd,
        static_cast<int>(dim), x_sizes[dim], device_error_record());
    CUDA_CHECK_LAUNCH();
  });
}

void take(const Tensor& out, const Tensor& x, const Tensor& offsets) {
  check_device("gather", out.device(), {x, offsets});
  check_contiguous("gather", {out, x, offsets});
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_device(out.dtype(), [&]<typename T>() {
    take_kernel<T><<<grid_for(n, dev), kThreads, 0, current_stream()>>>(
        static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()),
        static_cast<const int64_t*>(offsets.data_ptr()), n);
    CUDA_CHECK_LAUNCH();
  });
}

void put_add(const Tensor& dst, const Tensor& src, const Tensor& offsets) {
  check_device("gather backward", dst.device(), {src, offsets});
  check_contiguous("gather backward", {dst, src, offsets});
  ZT_CHECK(offsets.dtype() == DType::i64, "put_add: offsets must be i64");
  DeviceGuard g(dst.device().index);
  scatter_rows_add(dst, src, offsets, offsets.numel(), 1, dst.numel());
}

void one_hot(const Tensor& out, const Tensor& ids, int64_t classes) {
  check_device("one_hot", out.device(), {ids});
  check_contiguous("one_hot", {out, ids});
  ZT_CHECK(out.dtype() == DType::f32, "one_hot: output must be f32");
  const int64_t n = ids.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_index(ids.dtype(), "one_hot", [&]<typename I>() {
    one_hot_kernel<I><<<grid_for(n, dev), kThreads, 0, current_stream()>>>(
        static_cast<float*>(out.data_ptr()), static_cast<const I*>(ids.data_ptr()), n, classes,
        device_error_record());
    CUDA_CHECK_LAUNCH();
  });
}

void arg_extreme(const Tensor& out, const Tensor& x, int64_t rows, int64_t n, bool want_max) {
  check_device(want_max ? "argmax" : "argmin", out.device(), {x});
  check_contiguous(want_max ? "argmax" : "argmin", {out, x});
  ZT_CHECK(out.dtype() == DType::i64, "argmax/argmin: output must be i64");
  if (rows == 0) return;
  ZT_CHECK(n > 0, "argmax/argmin over an empty dimension");
  DeviceGuard g(out.device().index);
  dispatch_device(x.dtype(), [&]<typename T>() {
    arg_extreme_kernel<T><<<grid_x(rows, "arg_extreme_kernel"), kThreads, 0, current_stream()>>>(
        static_cast<int64_t*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()), n, want_max);
    CUDA_CHECK_LAUNCH();
  });
}

void nearest_forward(const Tensor& out, const Tensor& x, int64_t planes, const Shape& in_dhw,
                     const Shape& out_dhw) {
  check_device("interpolate_nearest", out.device(), {x});
  check_contiguous("interpolate_nearest", {out, x});
  const int64_t total = out.numel();
  if (total == 0) return;
  NearestDims p = nearest_dims(in_dhw, out_dhw);
  ZT_CHECK(total == planes * shape_numel(out_dhw) && x.numel() == planes * shape_numel(in_dhw),
           "interpolate_nearest: tensor sizes do not match the plan");
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_device(out.dtype(), [&]<typename T>() {
    nearest_forward_kernel<T><<<grid_for(total, dev), kThreads, 0, current_stream()>>>(
        static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()), total, p);
    CUDA_CHECK_LAUNCH();
  });
}

void nearest_backward(const Tensor& gx, const Tensor& gy, int64_t planes, const Shape& in_dhw,
                      const Shape& out_dhw) {
  check_device("interpolate_nearest backward", gx.device(), {gy});
  check_contiguous("interpolate_nearest backward", {gx, gy});
  const int64_t total = gx.numel();
  if (total == 0) return;
  NearestDims p = nearest_dims(in_dhw, out_dhw);
  ZT_CHECK(total == planes * shape_numel(in_dhw) && gy.numel() == planes * shape_numel(out_dhw),
           "interpolate_nearest backward: tensor sizes do not match the plan");
  const int dev = gx.device().index;
  DeviceGuard g(dev);
  dispatch_device_floating(gx.dtype(), "interpolate_nearest backward", [&]<typename T>() {
    nearest_backward_kernel<T><<<grid_for(total, dev), kThreads, 0, current_stream()>>>(
        static_cast<T*>(gx.data_ptr()), static_cast<const T*>(gy.data_ptr()), total, p);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
