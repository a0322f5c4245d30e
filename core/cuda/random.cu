// Philox random fills on the GPU, identical to core/rng.cpp's Generator: stream
// position p uses Philox4x32-10 block p (key = seed, counter = (0, p)). Uniform draws
// use word 0 (float path) or words 0-1 (f64 path); normal draws use Box-Muller in
// double on words 0-1 (float path) or 0-3 (f64 path), exactly as Generator does, so
// CPU and GPU give the same numbers up to the last bit of the math library.
#include "core/cuda/device_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels.h"

namespace zt::cuda {

namespace {

__device__ __forceinline__ void philox_block(uint64_t key, uint64_t counter, uint32_t out[4]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0;
    uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 += kW0, k1 += kW1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__device__ __forceinline__ double to_unit64(uint32_t a, uint32_t b) {
  uint64_t x = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  return static_cast<double>(x & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ double box_muller(double u1, double u2) {
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

// a + b x rounded twice, as the CPU computes it: nvcc would contract it into one fused
// multiply-add, whose single rounding can differ in the last bit of a double.
__device__ __forceinline__ double scale(double a, double b, double x) {
  return __dadd_rn(a, __dmul_rn(b, x));
}

// out[i] = a + (b - a) U or a + b N at stream position offset + i, computed in double
// and then converted like the CPU path (double -> float -> 16-bit for bf16/f16).
template <typename T>
__global__ void random_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, bool normal,
                              double a, double b) {
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    uint32_t w[4];
    philox_block(seed, offset + static_cast<uint64_t>(i), w);
    double v;
    if constexpr (std::is_same_v<T, double>) {
      if (normal) {
        v = scale(a, b, box_muller(1.0 - to_unit64(w[0], w[1]), to_unit64(w[2], w[3])));
      } else {
        v = scale(a, b - a, to_unit64(w[0], w[1]));
      }
    } else {
      if (normal) {
        double u1 = (static_cast<double>(w[0]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
        double u2 = static_cast<double>(w[1]) * (1.0 / 4294967296.0);
        v = scale(a, b, static_cast<double>(static_cast<float>(box_muller(u1, u2))));
      } else {
        float u = static_cast<float>(w[0] >> 8) * (1.0f / 16777216.0f);
        v = scale(a, b - a, static_cast<double>(u));
      }
    }
    if constexpr (std::is_same_v<T, double>) {
      out[i] = v;
    } else {
      out[i] = convert<T>(static_cast<float>(v));
    }
  }
}

}  // namespace

void random_fill(const Tensor& out, uint64_t seed, uint64_t offset, bool normal, double a,
                 double b) {
  ZT_CHECK(out.is_contiguous(), "random_fill: expects a contiguous tensor");
  check_not_capturing("a random draw (every replay would repeat its numbers)");
  int64_t n = out.numel();
  if (n == 0) return;
  int dev = out.device().index;
  dispatch_device_floating(out.dtype(), "random fill", [&]<typename T>() {
    DeviceGuard g(dev);
    random_kernel<T><<<grid_for(n, dev), kThreads, 0, current_stream(dev)>>>(
        static_cast<T*>(out.data_ptr()), n, seed, offset, normal, a, b);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace zt::cuda
