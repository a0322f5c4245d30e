// Elementwise launch machinery for CUDA kernels, the twin of core/cpu/loops.h.
// An op is a functor `f(off)` that reads and writes its operands at per-operand
// element offsets. launch_elementwise coalesces the shape (dims contiguous for every
// operand merge), passes sizes and strides by value (up to kMaxDims dims; more are
// split on the host), and runs a grid-stride loop, with a fast path when every operand is
// contiguous, and 32-bit index math (IntDivider) below 2^31 elements. launch_vectorized runs
// ops over contiguous, aligned operands of one shape 16 bytes a thread. Device-side dtypes,
// conversions and the dtype dispatcher are in device_types.cuh (included here).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/device_types.cuh"
#include "core/cuda/int_divider.h"
#include "core/cuda/stream.h"
#include "core/tensor.h"

namespace zt::cuda {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

/// A grid's x dimension for `blocks` blocks (one per row, say), checked against CUDA's limit
/// of 2^31 - 1: a count cast to unsigned beyond it would launch a wrapped, smaller grid.
inline unsigned grid_x(int64_t blocks, const char* what) {
  ZT_CHECK(blocks >= 0 && blocks < (int64_t{1} << 31), what, ": ", blocks,
           " blocks exceed the CUDA grid (at most 2^31 - 1); split the input");
  return static_cast<unsigned>(blocks);
}

/// The grid for n items at `per_block` items per block: at least one block (a launch
/// over no items still runs, and exits), checked as grid_x checks, naming `what`.
inline unsigned blocks_for(int64_t n, int64_t per_block, const char* what) {
  return grid_x(std::max<int64_t>(1, (n + per_block - 1) / per_block), what);
}

/// Division by an int64 divisor as `/` does it: OffsetCalc's sizes past 2^31 elements
/// (IntDivider, int_divider.h, below).
struct Int64Divider {
  int64_t divisor = 1;
  Int64Divider() = default;
  explicit Int64Divider(int64_t d) : divisor(d) {}
  __device__ void divmod(int64_t n, int64_t& q, int64_t& r) const {
    q = n / divisor;
    r = n - q * divisor;
  }
};

/// Sizes (innermost last) as dividers and per-operand strides, in elements, passed by value.
/// Div is IntDivider below 2^31 elements (a multiply-high and a shift per dim, where a 64-bit
/// division is a software routine per dim and element), else Int64Divider; offsets are
/// 64-bit either way.
template <int N, typename Div>
struct OffsetCalc {
  using Index = std::conditional_t<std::is_same_v<Div, IntDivider>, uint32_t, int64_t>;
  int ndim;
  Index numel;
  int64_t base[N];
  Div sizes[kMaxDims];
  int64_t strides[kMaxDims][N];

  __device__ void get(Index i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = base[k];
    for (int d = ndim - 1; d >= 0; --d) {
      Index q, r;
      sizes[d].divmod(i, q, r);
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(r) * strides[d][k];
    }
  }
};

// A grid-stride loop over calc's elements (for IntDivider: i + step < 2^32, as i < 2^31 and
// the grid holds fewer than 2^31 threads).
template <int N, typename Div, typename F>
__global__ void strided_kernel(OffsetCalc<N, Div> calc, F f) {
  using Index = typename OffsetCalc<N, Div>::Index;
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < calc.numel;
       i += step) {
    int64_t off[N];
    calc.get(i, off);
    f(off);
  }
}

// Every operand contiguous with the same layout: offset = base + i.
template <int N, typename F>
__global__ void contiguous_kernel(int64_t n, std::array<int64_t, N> base, F f) {
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N];
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = base[k] + i;
    f(off);
  }
}

/// Blocks for a grid-stride loop over n elements on `device`.
inline unsigned grid_for(int64_t n, int device) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  int64_t cap = static_cast<int64_t>(sm_count(device)) * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

namespace detail {
struct Coalesced {
  Shape sizes;
  std::vector<Shape> strides;  // per dim, per operand
};

// Drops size-1 dims and merges dims that are contiguous for every operand.
template <int N>
Coalesced coalesce(const Shape& sizes, const std::array<const Shape*, N>& st) {
  Coalesced c;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !c.sizes.empty();
    for (int k = 0; k < N && merge; ++k) merge = c.strides.back()[k] == (*st[k])[d] * sizes[d];
    if (merge) {
      c.sizes.back() *= sizes[d];
      for (int k = 0; k < N; ++k) c.strides.back()[k] = (*st[k])[d];
    } else {
      c.sizes.push_back(sizes[d]);
      Shape s(N);
      for (int k = 0; k < N; ++k) s[k] = (*st[k])[d];
      c.strides.push_back(s);
    }
  }
  return c;
}

template <int N, typename F>
void launch_dims(const Coalesced& c, size_t first, std::array<int64_t, N> base, const F& f,
                 int device, cudaStream_t stream) {
  size_t nd = c.sizes.size() - first;
  if (nd > static_cast<size_t>(kMaxDims)) {  // too many dims: peel the outermost on the host
    for (int64_t i = 0; i < c.sizes[first]; ++i) {
      std::array<int64_t, N> b = base;
      for (int k = 0; k < N; ++k) b[k] += i * c.strides[first][k];
      launch_dims<N>(c, first + 1, b, f, device, stream);
    }
    return;
  }
  int64_t numel = 1;
  for (size_t d = 0; d < nd; ++d) numel *= c.sizes[first + d];
  if (numel == 0) return;
  auto launch = [&]<typename Div>() {
    OffsetCalc<N, Div> calc{};
    calc.ndim = static_cast<int>(nd);
    calc.numel = static_cast<typename OffsetCalc<N, Div>::Index>(numel);
    for (int k = 0; k < N; ++k) calc.base[k] = base[k];
    for (size_t d = 0; d < nd; ++d) {
      calc.sizes[d] = Div(c.sizes[first + d]);
      for (int k = 0; k < N; ++k) calc.strides[d][k] = c.strides[first + d][k];
    }
    strided_kernel<N, Div><<<grid_for(numel, device), kThreads, 0, stream>>>(calc, f);
  };
  if (numel < (int64_t{1} << 31))
    launch.template operator()<IntDivider>();
  else
    launch.template operator()<Int64Divider>();
  CUDA_CHECK_LAUNCH();
}
}  // namespace detail

/// Runs f(off) for every element of `sizes`, where off[k] is the element offset of
/// operand k (strides[k]: its strides) from its data pointer. Launched on the current
/// stream of `device`.
template <int N, typename F>
void launch_elementwise(int device, const Shape& sizes, const std::array<const Shape*, N>& strides,
                        const F& f) {
  std::array<int64_t, N> offsets{};
  int64_t n = shape_numel(sizes);
  if (n == 0) return;
  DeviceGuard g(device);
  cudaStream_t stream = current_stream(device);
  detail::Coalesced c = detail::coalesce<N>(sizes, strides);
  bool contiguous = c.sizes.size() <= 1;
  for (size_t d = 0; d < c.sizes.size() && contiguous; ++d)
    for (int k = 0; k < N; ++k) contiguous &= c.strides[d][k] == 1;
  if (contiguous) {
    contiguous_kernel<N><<<grid_for(n, device), kThreads, 0, stream>>>(n, offsets, f);
    CUDA_CHECK_LAUNCH();
    return;
  }
  detail::launch_dims<N>(c, 0, offsets, f, device, stream);
}

/// kN elements from src to dst as one access of kN sizeof(T) bytes where that is 4, 8 or
/// 16 (the caller checked that both lie on such a boundary), else one by one.
template <int kN, typename T>
__device__ __forceinline__ void copy_vec(T* dst, const T* src) {
  constexpr size_t kBytes = kN * sizeof(T);
  if constexpr (kBytes == 16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (kBytes == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (kBytes == 4) {
    *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
  } else {
#pragma unroll
    for (int e = 0; e < kN; ++e) dst[e] = src[e];
  }
}

/// A block's run [begin, end) of elements, its threads taking kN at a time
/// (step.template operator()<kN>(i) for elements i .. i + kN) where `whole_ok` (every array
/// lies on a kN-element boundary, as does begin), then the elements past the last whole kN
/// one by one (operator()<1>); else all one by one.
template <int kN, typename Step>
__device__ __forceinline__ void block_run(int64_t begin, int64_t end, bool whole_ok, Step&& step) {
  int64_t i = begin + threadIdx.x;
  if (whole_ok) {
    const int64_t whole = begin + (end - begin) / kN * kN;
    for (int64_t j = begin + threadIdx.x * kN; j < whole; j += blockDim.x * kN)
      step.template operator()<kN>(j);
    i = whole + threadIdx.x;
  }
  for (; i < end; i += blockDim.x) step.template operator()<1>(i);
}

/// The K input pointers of vec_kernel, passed by value.
template <typename T, int K>
struct VecInputs {
  const T* p[K];
};

/// Every operand contiguous, of one shape and dtype T, 16-byte aligned: a thread per
/// 16-byte chunk of kVec elements (one element a load leaves 16-bit ops far below the
/// memory's bandwidth), the elements past the last whole chunk one by one. out[i] =
/// v(x), x[k] the inputs' values at i as acc_t<T>.
template <int K, typename T, typename V>
__global__ void vec_kernel(T* __restrict__ out, VecInputs<T, K> in, int64_t n, V v) {
  using A = acc_t<T>;
  constexpr int kVec = 16 / sizeof(T);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunks = n / kVec;
  for (int64_t c = first; c < chunks; c += step) {
    uint4 raw[K], res;
#pragma unroll
    for (int k = 0; k < K; ++k) raw[k] = reinterpret_cast<const uint4*>(in.p[k])[c];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      A x[K];
#pragma unroll
      for (int k = 0; k < K; ++k) x[k] = convert<A>(reinterpret_cast<const T*>(&raw[k])[e]);
      reinterpret_cast<T*>(&res)[e] = convert<T>(v(x));
    }
    reinterpret_cast<uint4*>(out)[c] = res;
  }
  for (int64_t i = chunks * kVec + first; i < n; i += step) {
    A x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) x[k] = convert<A>(in.p[k][i]);
    out[i] = convert<T>(v(x));
  }
}

/// Runs vec_kernel<K, T> when out and every input are contiguous, of out's sizes and
/// dtype and 16-byte aligned (fresh tensors are); false otherwise, with nothing launched,
/// for the caller's general path. Launched on the current stream of out's device.
template <typename T, int K, typename V>
bool launch_vectorized(const Tensor& out, const std::array<const Tensor*, K>& in, const V& v) {
  auto fits = [&](const Tensor& t) {
    return t.is_contiguous() && t.sizes() == out.sizes() && t.dtype() == out.dtype() &&
           reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  };
  if (out.numel() == 0 || !fits(out)) return false;
  VecInputs<T, K> ptrs{};
  for (int k = 0; k < K; ++k) {
    if (!fits(*in[k])) return false;
    ptrs.p[k] = static_cast<const T*>(in[k]->data_ptr());
  }
  const int device = out.device().index;
  DeviceGuard g(device);
  const int64_t n = out.numel(), work = std::max<int64_t>(n / (16 / sizeof(T)), 1);
  vec_kernel<K, T><<<grid_for(work, device), kThreads, 0, current_stream(device)>>>(
      static_cast<T*>(out.data_ptr()), ptrs, n, v);
  CUDA_CHECK_LAUNCH();
  return true;
}

/// Error unless every defined tensor is on `dev` (kernels here run on one GPU).
inline void check_device(const char* op, Device dev, std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    ZT_CHECK(!t.defined() || t.device() == dev, op, ": tensors on ", dev.str(), " and ",
             t.device().str(), "; move them to one GPU first");
}

/// A tensor's data as a kernel argument of device type T (no dtype check: T may be a
/// device type such as __nv_bfloat16), or nullptr for an undefined (optional) tensor.
template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
/// cptr for a tensor the kernel writes.
template <typename T>
T* mptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

}  // namespace zt::cuda
