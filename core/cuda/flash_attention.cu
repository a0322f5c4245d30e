// Fused attention on the GPU: the tiles of core/cuda/flash_tiles.h on a warp whose
// 16 x 16 x 16 products run on tensor cores through WMMA (bf16 and f16 in, f32
// accumulation; sm_80 and newer). Each block holds a few independent warps, each with
// its own shared-memory tiles; a warp's task is one 16-row tile. Launches: one for the
// forward; dq (which also writes delta) then dk / dv for the backward, in stream order.
#include <mma.h>

#include "core/cuda/flash_tiles.h"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

namespace wmma = nvcuda::wmma;

template <typename E>
__device__ __forceinline__ float bits_to_float(uint16_t b) {
  if constexpr (std::is_same_v<E, __nv_bfloat16>)
    return __bfloat162float(__ushort_as_bfloat16(b));
  else
    return __half2float(__ushort_as_half(b));
}

template <typename E>
__device__ __forceinline__ uint16_t float_to_bits(float f) {
  if constexpr (std::is_same_v<E, __nv_bfloat16>)
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  else
    return __half_as_ushort(__float2half_rn(f));
}

/// The warp backend of flash::Tiles on tensor cores; E is __nv_bfloat16 or __half.
template <typename E>
struct WmmaWarp {
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major>;
  using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major>;
  using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major>;
  using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

  template <typename F>
  static __device__ __forceinline__ void lanes(F&& f) {
    __syncwarp();
    f(static_cast<int>(threadIdx.x % 32));
    __syncwarp();
  }
  template <typename Frag>
  static __device__ __forceinline__ void load(Frag& f, const uint16_t* p, int ld) {
    wmma::load_matrix_sync(f, reinterpret_cast<const E*>(p), static_cast<unsigned>(ld));
  }
  static __device__ __forceinline__ void zero(Acc& a) { wmma::fill_fragment(a, 0.f); }
  template <typename B>
  static __device__ __forceinline__ void mma(Acc& c, const FragA& a, const B& b) {
    wmma::mma_sync(c, a, b, c);
  }
  static __device__ __forceinline__ void store(float* p, const Acc& a, int ld) {
    wmma::store_matrix_sync(p, a, static_cast<unsigned>(ld), wmma::mem_row_major);
  }
  static __device__ __forceinline__ float to_float(uint16_t b) { return bits_to_float<E>(b); }
  static __device__ __forceinline__ uint16_t from_float(float f) { return float_to_bits<E>(f); }
  static __device__ __forceinline__ void copy16(uint16_t* dst, const uint16_t* src) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
  static __device__ __forceinline__ void zero16(uint16_t* dst) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
  static __device__ __forceinline__ float exp(float x) { return expf(x); }
  static __device__ __forceinline__ float log(float x) { return logf(x); }
};

enum Pass { kForward, kDq, kDkDv };

// Two warps per block: with D = 128 their tiles take 43 KB, under the 48 KB of static
// shared memory a block may have.
constexpr int kWarps = 2;

template <class Tiles, Pass kPass>
__global__ void __launch_bounds__(kWarps * 32) flash_kernel(flash::Params p, int64_t tasks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 WMMA needs sm_80; the host refuses older devices before launching
#else
  __shared__ typename Tiles::Smem sm[kWarps];
  const int w = static_cast<int>(threadIdx.x / 32);
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kWarps + w;
  if (task >= tasks) return;  // the whole warp: no block-wide barrier follows
  if constexpr (kPass == kForward)
    Tiles::forward(p, task, sm[w]);
  else if constexpr (kPass == kDq)
    Tiles::backward_dq(p, task, sm[w]);
  else
    Tiles::backward_dkdv(p, task, sm[w]);
#endif
}

template <Pass kPass>
void launch(DType dt, int64_t d, const flash::Params& p, int64_t tasks) {
  if (tasks == 0) return;
  flash::with_tiles<WmmaWarp, __nv_bfloat16, __half>(dt, d, [&]<class Tiles>() {
    const int64_t blocks = (tasks + kWarps - 1) / kWarps;
    flash_kernel<Tiles, kPass>
        <<<static_cast<unsigned>(blocks), kWarps * 32, 0, current_stream()>>>(p, tasks);
    CUDA_CHECK_LAUNCH();
  });
}

void check_flash_device(const char* op, const Tensor& q, std::initializer_list<Tensor> ts) {
  check_device(op, q.device(), ts);
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, q.device().index));
  ZT_CHECK(major >= 8, op, ": needs a GPU of compute capability 8.0 or newer (bf16 tensor cores); ",
           "this one is ", major, ".x: set ZT_ATTENTION=math");
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, double scale, bool causal) {
  check_flash_device("flash attention", q, {k, v, out, lse});
  const flash::Params p = flash::params(q, k, v, out, {}, {}, {}, {}, lse, {}, scale, causal);
  DeviceGuard g(q.device().index);
  launch<kForward>(q.dtype(), q.size(3), p, flash::task_count(q, q.size(2)));
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& delta, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, double scale, bool causal) {
  check_flash_device("flash attention backward", q, {k, v, out, dout, lse, dq, dk, dv, delta});
  const flash::Params p = flash::params(q, k, v, out, dout, dq, dk, dv, lse, delta, scale, causal);
  DeviceGuard g(q.device().index);
  launch<kDq>(q.dtype(), q.size(3), p, flash::task_count(q, q.size(2)));
  launch<kDkDv>(q.dtype(), q.size(3), p, flash::task_count(q, k.size(2)));
}

}  // namespace zt::cuda
