// CUDA elementwise kernels: unary, binary (incl. backward helpers and comparisons),
// axpy, where, copy, multi_copy, fill and row sums. The CPU kernels of the same names
// (core/cpu/elementwise.cpp) are the specification: same accumulation types (float for
// 16-bit types, double for f64; double for sums), same conversions, the same formulas
// in exact arithmetic (in float, tanh-GELU as x * sigmoid(2u) on both: device_math.cuh).
// Not the same bits for every f32 op: the CPU's exp, sigmoid and GELUs go through lanes.h
// (a Cephes exp, the A&S 7.1.26 erf) where these use expf and erff, so they agree to a few
// ulp. And nvcc fuses a multiply and an add into one FMA where the CPU may round twice:
// axpy with alpha other than 1 and the affine x * p0 + p1 can differ in the last place.
#include <cstring>

#include "core/cuda/block_reduce.cuh"
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernel_checks.h"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

template <typename A>
__device__ A apply_unary(UnaryOp op, A x, A p0, A p1) {
  switch (op) {
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kExp:
      return d_exp(x);
    case UnaryOp::kLog:
      return d_log(x);
    case UnaryOp::kSqrt:
      return d_sqrt(x);
    case UnaryOp::kRsqrt:
      return A(1) / d_sqrt(x);
    case UnaryOp::kAbs:
      return d_abs(x);
    case UnaryOp::kRelu:
      return x > A(0) || x != x ? x : A(0);  // NaN stays, as on the CPU
    case UnaryOp::kSilu:
      return d_silu(x);
    case UnaryOp::kSigmoid:
      return d_sigmoid(x);
    case UnaryOp::kTanh:
      return d_tanh(x);
    case UnaryOp::kGelu:
      return A(0.5) * x * (A(1) + d_erf(x * A(0.70710678118654752440)));
    case UnaryOp::kGeluTanh:
      return gelu_tanh(x);
    case UnaryOp::kPow:
      return p0 == A(2) ? x * x : d_pow(x, p0);
    case UnaryOp::kClamp:
      return x < p0 ? p0 : (x > p1 ? p1 : x);
    case UnaryOp::kAffine:
      return x * p0 + p1;
    case UnaryOp::kSign:
      return x > A(0) ? A(1) : (x < A(0) ? A(-1) : A(0));
  }
  return x;
}

template <typename A>
__device__ A apply_binary(BinaryOp op, A a, A b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kReluGrad:
      return b <= A(0) ? A(0) : a;
    case BinaryOp::kSiluGrad:
      return d_silu_grad(a, b);
    case BinaryOp::kSigmoidGrad:
      return a * b * (A(1) - b);
    case BinaryOp::kTanhGrad:
      return a * (A(1) - b * b);
    case BinaryOp::kGeluGrad: {
      A cdf = A(0.5) * (A(1) + d_erf(b * A(0.70710678118654752440)));
      A pdf = d_exp(A(-0.5) * b * b) * A(0.39894228040143267794);
      return a * (cdf + b * pdf);
    }
    case BinaryOp::kGeluTanhGrad:
      return gelu_tanh_grad(a, b);
    default:
      return a;  // comparisons are handled by CompareFn
  }
}

template <typename A>
__device__ bool apply_compare(BinaryOp op, A a, A b) {
  switch (op) {
    case BinaryOp::kEq:
      return a == b;
    case BinaryOp::kNe:
      return a != b;
    case BinaryOp::kLt:
      return a < b;
    case BinaryOp::kLe:
      return a <= b;
    case BinaryOp::kGt:
      return a > b;
    case BinaryOp::kGe:
      return a >= b;
    default:
      return false;
  }
}

bool is_compare(BinaryOp op) {
  return op >= BinaryOp::kEq && op <= BinaryOp::kGe;
}

// ---------------------------------------------------------------- functors

template <typename T>
struct CompareFn {
  BinaryOp op;
  bool* out;
  const T* a;
  const T* b;
  __device__ void operator()(const int64_t (&off)[3]) const {
    using A = acc_t<T>;
    out[off[0]] = apply_compare(op, convert<A>(a[off[1]]), convert<A>(b[off[2]]));
  }
};

// The formulas of the floating ops, one element in the accumulator type: the vectorized
// path (launch_vectorized, loops.cuh) and the strided one (ValueFn) both apply them.
template <typename A>
struct UnaryValue {
  UnaryOp op;
  A p0, p1;
  __device__ A operator()(const A (&x)[1]) const { return apply_unary(op, x[0], p0, p1); }
};
template <typename A>
struct BinaryValue {
  BinaryOp op;
  __device__ A operator()(const A (&x)[2]) const { return apply_binary(op, x[0], x[1]); }
};
template <typename A>
struct AxpyValue {
  A alpha;
  __device__ A operator()(const A (&x)[2]) const { return x[0] + alpha * x[1]; }
};

template <typename A>
struct AddcmulValue {
  A value;
  __device__ A operator()(const A (&x)[3]) const { return x[0] + value * (x[1] * x[2]); }
};

// Formula `v` of K inputs at any strides (launch_elementwise's functor).
template <typename T, int K, typename V>
struct ValueFn {
  T* out;
  VecInputs<T, K> in;
  V v;
  __device__ void operator()(const int64_t (&off)[K + 1]) const {
    acc_t<T> x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) x[k] = convert<acc_t<T>>(in.p[k][off[k + 1]]);
    out[off[0]] = convert<T>(v(x));
  }
};

// out = v(inputs) elementwise: vectorized where every operand allows it, else strided.
template <typename T, int K, typename V>
void launch_value(const Tensor& out, const std::array<const Tensor*, K>& in, const V& v) {
  if (launch_vectorized<T, K>(out, in, v)) return;
  ValueFn<T, K, V> f{static_cast<T*>(out.data_ptr()), {}, v};
  std::array<const Shape*, K + 1> strides{&out.strides()};
  for (int k = 0; k < K; ++k) {
    f.in.p[k] = static_cast<const T*>(in[k]->data_ptr());
    strides[k + 1] = &in[k]->strides();
  }
  launch_elementwise<K + 1>(out.device().index, out.sizes(), strides, f);
}

template <typename T>
struct WhereFn {
  T* out;
  const bool* cond;
  const T* a;
  const T* b;
  __device__ void operator()(const int64_t (&off)[4]) const {
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

template <typename D, typename S>
struct CopyFn {
  D* out;
  const S* in;
  __device__ void operator()(const int64_t (&off)[2]) const {
    out[off[0]] = convert<D>(in[off[1]]);
  }
};

template <typename T>
struct FillFn {
  T* out;
  T value;
  __device__ void operator()(const int64_t (&off)[1]) const { out[off[0]] = value; }
};

// The value cpu::fill writes, as the device type's bits.
template <typename T>
T fill_value(double v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
    using Host = std::conditional_t<std::is_same_v<T, __half>, f16, bf16>;
    Host h(static_cast<float>(v));
    T t;
    std::memcpy(&t, &h, sizeof(T));
    return t;
  } else {
    return static_cast<T>(v);
  }
}

// ---------------------------------------------------------------- row sums
// Fixed reduction trees, so results are bitwise reproducible run to run.

constexpr int64_t kWarpRowMax = 1024;  // rows up to this long: one warp per row
constexpr int64_t kChunk = 65536;      // longer rows: one block per chunk of this size
constexpr int kWarpsPerBlock = kThreads / 32;

// One warp per row of `in` (rows, inner); lane 0 writes the row's sum.
template <typename In, typename Out>
__global__ void sum_rows_warp_kernel(const In* in, Out* out, int64_t rows, int64_t inner) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const In* p = in + row * inner;
  double s = 0;
  for (int64_t i = lane; i < inner; i += 32) s += convert<double>(p[i]);
  s = warp_reduce_sum(s);
  if (lane == 0) out[row] = convert<Out>(static_cast<acc_t<Out>>(s));
}

// Block (r, y) sums chunks y, y + gridDim.y, ... of row r (grid.y is at most 65535); writes
// out[r] directly when there is one chunk, else partial[r * chunks + c].
template <typename T>
__global__ void sum_rows_chunk_kernel(const T* in, T* out, double* partial, int64_t inner,
                                      int64_t chunks) {
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  const T* p = in + row * inner;
  for (int64_t c = blockIdx.y; c < chunks; c += gridDim.y) {  // uniform over the block
    const int64_t lo = c * kChunk, hi = min(inner, lo + kChunk);
    double s = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) s += convert<double>(p[i]);
    s = block_all_sum(s, scratch);
    if (threadIdx.x == 0) {
      if (chunks == 1) {
        out[row] = convert<T>(static_cast<acc_t<T>>(s));
      } else {
        partial[row * chunks + c] = s;
      }
    }
  }
}

// ---------------------------------------------------------------- multi_copy

constexpr int kMultiCopyPerLaunch = 96;         // pairs per launch (kernel arguments < 4 KB)
constexpr int64_t kMultiCopyBlockElems = 4096;  // elements per block, 16 per thread

// Up to kMultiCopyPerLaunch pairs, passed by value: pair i has n[i] elements, worked on
// by blocks [block0[i], block0[i + 1]).
struct MultiCopyArgs {
  void* dst[kMultiCopyPerLaunch];
  const void* src[kMultiCopyPerLaunch];
  int64_t n[kMultiCopyPerLaunch];
  int64_t block0[kMultiCopyPerLaunch + 1];
  int count;
};
static_assert(sizeof(MultiCopyArgs) <= 4000, "kernel arguments are limited to 4 KB");

// Block b copies (or adds) elements [(b - block0) * kMultiCopyBlockElems, + that) of the
// pair whose block range holds b: kN at a time (16 bytes of the wider type) where both
// arrays lie on kN-element boundaries, then the run's tail one by one.
template <typename D, typename S>
__global__ void multi_copy_kernel(const MultiCopyArgs args, bool accumulate) {
  const int64_t block = blockIdx.x;
  int lo = 0, hi = args.count - 1;  // the last pair with block0 <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (args.block0[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t begin = (block - args.block0[lo]) * kMultiCopyBlockElems;
  const int64_t end =
      begin + kMultiCopyBlockElems < args.n[lo] ? begin + kMultiCopyBlockElems : args.n[lo];
  D* dst = static_cast<D*>(args.dst[lo]);
  const S* src = static_cast<const S*>(args.src[lo]);
  using A = acc_t<D>;
  constexpr int kN = 16 / (sizeof(D) > sizeof(S) ? sizeof(D) : sizeof(S));
  auto step = [&]<int kM>(int64_t i) {
    S sv[kM];
    D dv[kM];
    copy_vec<kM>(sv, src + i);
    if (accumulate) copy_vec<kM>(dv, dst + i);
#pragma unroll
    for (int e = 0; e < kM; ++e) {
      const D v = convert<D>(sv[e]);
      dv[e] = accumulate ? convert<D>(convert<A>(dv[e]) + convert<A>(v)) : v;
    }
    copy_vec<kM>(dst + i, dv);
  };
  block_run<kN>(begin, end,
                reinterpret_cast<uintptr_t>(dst) % (kN * sizeof(D)) == 0 &&
                    reinterpret_cast<uintptr_t>(src) % (kN * sizeof(S)) == 0,
                step);
}

}  // namespace

// ---------------------------------------------------------------- launchers

void unary(UnaryOp op, const Tensor& out, const Tensor& in, double p0, double p1) {
  check_device("unary op", out.device(), {in});
  dispatch_device_floating(in.dtype(), "unary op", [&]<typename T>() {
    using A = acc_t<T>;
    launch_value<T, 1>(out, {&in}, UnaryValue<A>{op, static_cast<A>(p0), static_cast<A>(p1)});
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  check_device("binary op", out.device(), {a, b});
  std::array<const Shape*, 3> st{&out.strides(), &a.strides(), &b.strides()};
  int dev = out.device().index;
  if (is_compare(op)) {
    ZT_CHECK(out.dtype() == DType::b8, "binary: a comparison's output must be bool, got ",
             out.str());
    dispatch_device(a.dtype(), [&]<typename T>() {
      CompareFn<T> f{op, static_cast<bool*>(out.data_ptr()), static_cast<const T*>(a.data_ptr()),
                     static_cast<const T*>(b.data_ptr())};
      launch_elementwise<3>(dev, out.sizes(), st, f);
    });
    return;
  }
  dispatch_device_floating(a.dtype(), "binary op", [&]<typename T>() {
    launch_value<T, 2>(out, {&a, &b}, BinaryValue<acc_t<T>>{op});
  });
}

void axpy(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  check_device("axpy", out.device(), {a, b});
  dispatch_device_floating(out.dtype(), "axpy", [&]<typename T>() {
    launch_value<T, 2>(out, {&a, &b}, AxpyValue<acc_t<T>>{static_cast<acc_t<T>>(alpha)});
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_device("where", out.device(), {cond, a, b});
  ZT_CHECK(cond.dtype() == DType::b8, "where: condition must be bool, got ",
           dtype_name(cond.dtype()));
  dispatch_device(out.dtype(), [&]<typename T>() {
    WhereFn<T> f{static_cast<T*>(out.data_ptr()), static_cast<const bool*>(cond.data_ptr()),
                 static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr())};
    launch_elementwise<4>(out.device().index, out.sizes(),
                          {&out.strides(), &cond.strides(), &a.strides(), &b.strides()}, f);
  });
}

void addcmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, double value) {
  check_device("addcmul", out.device(), {a, b, c});
  dispatch_device_floating(out.dtype(), "addcmul", [&]<typename T>() {
    launch_value<T, 3>(out, {&a, &b, &c}, AddcmulValue<acc_t<T>>{static_cast<acc_t<T>>(value)});
  });
}

void copy(const Tensor& dst, const Tensor& src) {
  ZT_CHECK(dst.sizes() == src.sizes(), "copy: shapes ", shape_str(dst.sizes()), " and ",
           shape_str(src.sizes()), " differ");
  if (dst.numel() == 0) return;
  int dev = dst.device().index;
  if (src.device() != dst.device()) {
    // Another GPU: bring a contiguous copy over (peer copy, staged by the driver when the
    // GPUs cannot reach each other), then convert and scatter locally.
    Tensor s = src.is_contiguous() ? src : Tensor::empty(src.sizes(), src.dtype(), src.device());
    if (!s.same(src)) copy(s, src);
    Tensor local = Tensor::empty(src.sizes(), src.dtype(), dst.device());
    // The peer copy waits for the source's stream (an event: no host wait, and a capture
    // records it as a graph edge).
    Event written = [&] {
      DeviceGuard gs(src.device().index);
      Event e;
      e.record(current_stream(src.device().index));
      return e;
    }();
    DeviceGuard g(dev);
    stream_wait_event(current_stream(dev), written);
    CUDA_CHECK(cudaMemcpyPeerAsync(local.data_ptr(), dev, s.data_ptr(), src.device().index,
                                   s.numel() * dtype_size(s.dtype()), current_stream(dev)));
    // The source's stream waits for the read: the source, or the contiguous copy freed on
    // return, may not be written or reused before the peer copy is done with it.
    Event read;
    read.record(current_stream(dev));
    {
      DeviceGuard gs(src.device().index);
      stream_wait_event(current_stream(src.device().index), read);
    }
    copy(dst, local);
    return;
  }
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    DeviceGuard g(dev);
    CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(),
                               dst.numel() * dtype_size(dst.dtype()), cudaMemcpyDeviceToDevice,
                               current_stream(dev)));
    return;
  }
  dispatch_device(dst.dtype(), [&]<typename D>() {
    dispatch_device(src.dtype(), [&]<typename S>() {
      CopyFn<D, S> f{static_cast<D*>(dst.data_ptr()), static_cast<const S*>(src.data_ptr())};
      launch_elementwise<2>(dev, dst.sizes(), {&dst.strides(), &src.strides()}, f);
    });
  });
}

void multi_copy(const std::vector<Tensor>& dst, const std::vector<Tensor>& src, bool accumulate) {
  ::zt::detail::check_multi_copy(dst, src, accumulate);
  if (dst.empty()) return;
  const int dev = dst[0].device().index;
  DeviceGuard g(dev);
  cudaStream_t stream = current_stream(dev);
  auto run = [&]<typename D, typename S>() {
    MultiCopyArgs args{};
    auto launch = [&] {
      if (args.count == 0) return;
      const auto grid = static_cast<unsigned>(args.block0[args.count]);
      multi_copy_kernel<D, S><<<grid, kThreads, 0, stream>>>(args, accumulate);
      CUDA_CHECK_LAUNCH();
      args.count = 0;
    };
    for (size_t i = 0; i < dst.size(); ++i) {
      const int64_t n = dst[i].numel();
      if (n == 0) continue;
      const int c = args.count;
      args.dst[c] = dst[i].data_ptr();
      args.src[c] = src[i].data_ptr();
      args.n[c] = n;
      args.block0[c + 1] = args.block0[c] + (n + kMultiCopyBlockElems - 1) / kMultiCopyBlockElems;
      args.count = c + 1;
      // Full, or the grid near its 2^31 - 1 blocks.
      if (args.count == kMultiCopyPerLaunch || args.block0[args.count] > 0x3fffffff) launch();
    }
    launch();
  };
  if (!is_floating(dst[0].dtype())) {  // a copy into the same dtype (checked)
    dispatch_device(dst[0].dtype(), [&]<typename T>() { run.template operator()<T, T>(); });
    return;
  }
  dispatch_device_floating(dst[0].dtype(), "multi_copy", [&]<typename D>() {
    dispatch_device_floating(src[0].dtype(), "multi_copy",
                             [&]<typename S>() { run.template operator()<D, S>(); });
  });
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  int dev = dst.device().index;
  dispatch_device(dst.dtype(), [&]<typename T>() {
    T v = fill_value<T>(value);
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    bool zero = true;
    for (unsigned char c : bytes) zero &= c == 0;
    if (zero && dst.is_contiguous()) {
      DeviceGuard g(dev);
      CUDA_CHECK(cudaMemsetAsync(dst.data_ptr(), 0, dst.numel() * sizeof(T), current_stream(dev)));
      return;
    }
    launch_elementwise<1>(dev, dst.sizes(), {&dst.strides()},
                          FillFn<T>{static_cast<T*>(dst.data_ptr()), v});
  });
}

void sum_rows(const Tensor& out, const Tensor& in, int64_t rows, int64_t inner) {
  check_device("sum", out.device(), {in});
  ZT_CHECK(in.is_contiguous() && out.is_contiguous(),
           "sum_rows: expects contiguous tensors, got in ", in.str(),
           (in.is_contiguous() ? "" : " (strided)"), " and out ", out.str(),
           (out.is_contiguous() ? "" : " (strided)"));
  if (rows == 0) return;
  if (inner == 0) {
    fill(out, 0.0);
    return;
  }
  int dev = out.device().index;
  dispatch_device_floating(in.dtype(), "sum", [&]<typename T>() {
    DeviceGuard g(dev);
    cudaStream_t stream = current_stream(dev);
    const T* x = static_cast<const T*>(in.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    if (inner <= kWarpRowMax) {
      int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
      sum_rows_warp_kernel<T, T>
          <<<grid_x(blocks, "sum_rows_warp_kernel"), kThreads, 0, stream>>>(x, o, rows, inner);
      CUDA_CHECK_LAUNCH();
      return;
    }
    // Long rows: fixed-size chunks (independent of the GPU model), then a second pass
    // over the per-chunk partial sums in double.
    int64_t chunks = (inner + kChunk - 1) / kChunk;
    Tensor partial;
    double* pp = nullptr;
    if (chunks > 1) {
      partial = Tensor::empty({rows, chunks}, DType::f64, out.device());
      pp = static_cast<double*>(partial.data_ptr());
    }
    dim3 grid(grid_x(rows, "sum_rows_chunk_kernel"),
              static_cast<unsigned>(std::min<int64_t>(chunks, 65535)));
    sum_rows_chunk_kernel<T><<<grid, kThreads, 0, stream>>>(x, o, pp, inner, chunks);
    CUDA_CHECK_LAUNCH();
    if (chunks > 1) {
      int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
      sum_rows_warp_kernel<double, T>
          <<<grid_x(blocks, "sum_rows_warp_kernel"), kThreads, 0, stream>>>(pp, o, rows, chunks);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace zt::cuda
