// Fused attention on the GPU: the tiles of core/cuda/flash_tiles.h on a block of a few
// warps, fragments moved from shared memory by ldmatrix and multiplied by mma.sync
// m16n8k16 (bf16 or f16 in, f32 accumulation; sm_80 and newer). A block's task is one
// tile of its own rows (16 or 32 per warp, flash::tile_shape); its warps share the other
// side's staged tiles.
// Launches: one for the forward; for the backward dq (which also writes delta) then dk / dv,
// or under the atomic backward prepare, dk / dv with dq's shares, dq_finish, in stream order.
#include <atomic>

#include "core/cuda/flash_dispatch.h"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

using flash::F2;
using flash::F4;
using flash::U4;

/// The block backend of flash::Tiles on tensor cores: kWarps warps (blockDim.x = 32
/// kWarps); E is __nv_bfloat16 or __half.
template <typename E, int kWarpCount>
struct MmaBlock {
  static constexpr int kWarps = kWarpCount;
  static constexpr bool kBf16 = std::is_same_v<E, __nv_bfloat16>;

  /// A lane's register: each thread holds its own lane's value.
  template <class T>
  struct Reg {
    T v;
    __device__ __forceinline__ T& operator[](int) { return v; }
    __device__ __forceinline__ const T& operator[](int) const { return v; }
  };

  template <typename F>
  static __device__ __forceinline__ void each(F&& f) {
    f(static_cast<int>(threadIdx.x));
  }
  static __device__ __forceinline__ void sync() { __syncthreads(); }

  template <typename F>
  static __device__ __forceinline__ void ldsm(Reg<U4>& r, F&& addr, bool trans) {
    // The block's lane, as the host emulation passes it: the tile loaders pick each warp's
    // rows from it (ln / 32) and the row within the 8 x 8 matrices from ln % 32.
    const auto a =
        static_cast<unsigned>(__cvta_generic_to_shared(addr(static_cast<int>(threadIdx.x))));
    uint32_t* x = r.v.v;
    if (trans)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                   : "r"(a));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                   : "r"(a));
  }

  template <int kHalf>
  static __device__ __forceinline__ void mma(Reg<F4>& d, const Reg<U4>& a, const Reg<U4>& b) {
    float* c = d.v.v;
    const uint32_t* x = a.v.v;
    const uint32_t b0 = b.v.v[2 * kHalf], b1 = b.v.v[2 * kHalf + 1];
    if constexpr (kBf16)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(b0), "r"(b1));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(b0), "r"(b1));
  }

  static __device__ __forceinline__ void shfl_xor(Reg<F2>& x, int mask) {
    x.v.v[0] = __shfl_xor_sync(0xffffffffu, x.v.v[0], mask);
    x.v.v[1] = __shfl_xor_sync(0xffffffffu, x.v.v[1], mask);
  }

  static __device__ __forceinline__ float to_float(uint16_t b) {
    if constexpr (kBf16)
      return __bfloat162float(__ushort_as_bfloat16(b));
    else
      return __half2float(__ushort_as_half(b));
  }
  static __device__ __forceinline__ uint16_t bits(float f) {
    if constexpr (kBf16)
      return __bfloat16_as_ushort(__float2bfloat16_rn(f));
    else
      return __half_as_ushort(__float2half_rn(f));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return static_cast<uint32_t>(bits(lo)) | static_cast<uint32_t>(bits(hi)) << 16;
  }
  static __device__ __forceinline__ void store2(uint16_t* dst, float lo, float hi) {
    *reinterpret_cast<uint32_t*>(dst) = pack(lo, hi);
  }
  template <class T>
  static __device__ __forceinline__ T ld(const T* p, int) {
    return *p;
  }
  template <class T>
  static __device__ __forceinline__ void st(T* p, T v, int) {
    *p = v;
  }
  static __device__ __forceinline__ void copy16(uint16_t* dst, const uint16_t* src) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
  static __device__ __forceinline__ void zero16(uint16_t* dst) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
  /// 16 bytes from global to shared memory without passing through registers; they land
  /// at the thread's wait_async that covers their group.
  static __device__ __forceinline__ void copy16_async(uint16_t* dst, const uint16_t* src) {
    const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" : : "r"(d), "l"(src));
  }
  /// Closes the group of the thread's copies issued since its last commit.
  static __device__ __forceinline__ void commit_async() {
    asm volatile("cp.async.commit_group;\n" : : : "memory");
  }
  /// Waits for every committed group but the newest kPending; kPending 0: for every copy.
  template <int kPending = 0>
  static __device__ __forceinline__ void wait_async() {
    if constexpr (kPending == 0)
      asm volatile("cp.async.wait_all;\n" : : : "memory");
    else
      asm volatile("cp.async.wait_group %0;\n" : : "n"(kPending) : "memory");
  }
  static __device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
  /// 2^x by one MUFU.EX2; results below 2^-126 flush to 0 (exp2f adds a range check and
  /// two multiplies around it to keep them). They are p's and the rescale factors'
  /// smallest values, below 2^-126 of the row maximum's term (1) in every sum they join.
  static __device__ __forceinline__ float exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
  }
  static __device__ __forceinline__ float log2(float x) { return log2f(x); }
};

using flash::Pass;

template <class Tiles, Pass kPass>
__global__ void __launch_bounds__(Tiles::kLanes) flash_kernel(flash::Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 mma.sync needs sm_80; the host refuses older devices before launching
#else
  extern __shared__ __align__(16) unsigned char smem[];  // over 48 KiB for some shapes
  flash::run_task<Tiles, kPass>(p, blockIdx.x,
                                *reinterpret_cast<flash::SmemOf<Tiles, kPass>*>(smem));
#endif
}

// One block per task of the pass (a tile of its own rows, flash::task_rows: queries or
// keys). A kernel's dynamic shared memory past
// 48 KiB must be allowed once per device (cudaFuncSetAttribute).
template <Pass kPass>
void launch(DType dt, int64_t d, const flash::Params& p, int device) {
  flash::with_tiles<kPass, MmaBlock, __nv_bfloat16, __half>(dt, d, [&]<class Tiles>() {
    const int64_t blocks = Tiles::tasks(p, flash::task_rows<kPass>(p));
    if (blocks == 0) return;
    constexpr size_t kSmem = sizeof(flash::SmemOf<Tiles, kPass>);
    if constexpr (kSmem > 48 * 1024) {
      static std::atomic<uint64_t> allowed{0};  // bit i: device i (devices past 63: every call)
      const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
      if (!bit || !(allowed.load() & bit)) {
        CUDA_CHECK(cudaFuncSetAttribute(flash_kernel<Tiles, kPass>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
        allowed.fetch_or(bit);
      }
    }
    flash_kernel<Tiles, kPass>
        <<<grid_x(blocks, "flash_kernel"), Tiles::kLanes, kSmem, current_stream()>>>(p);
    CUDA_CHECK_LAUNCH();
  });
}

void check_flash_device(const char* op, const Tensor& q, std::initializer_list<Tensor> ts) {
  check_device(op, q.device(), ts);
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, q.device().index));
  ZT_CHECK(major >= 8, op, ": needs a GPU of compute capability 8.0 or newer (bf16 tensor cores); ",
           "this one is ", major,
           ".x: use the GEMM path (ZT_ATTENTION=math or train.attention: math)");
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, double scale, bool causal) {
  check_flash_device("flash attention", q, {k, v, out, lse});
  const flash::Params p = flash::params(q, k, v, out, {}, {}, {}, {}, lse, {}, scale, causal);
  DeviceGuard g(q.device().index);
  launch<Pass::forward>(q.dtype(), q.size(3), p, q.device().index);
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& delta, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, double scale, bool causal) {
  check_flash_device("flash attention backward", q, {k, v, out, dout, lse, dq, dk, dv, delta});
  flash::Params p = flash::params(q, k, v, out, dout, dq, dk, dv, lse, delta, scale, causal);
  DeviceGuard g(q.device().index);
  Tensor acc;  // the atomic backward's f32 dq, until its passes are queued
  flash::backward_passes(
      p, [&]<Pass kPass>() { launch<kPass>(q.dtype(), q.size(3), p, q.device().index); },
      [&] {
        acc = Tensor::empty({q.numel()}, DType::f32, q.device());
        CUDA_CHECK(
            cudaMemsetAsync(acc.data_ptr(), 0, acc.numel() * sizeof(float), current_stream()));
        return static_cast<float*>(acc.data_ptr());
      });
}

}  // namespace zt::cuda
