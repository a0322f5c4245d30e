// Division by a divisor fixed before a kernel starts, for the CUDA kernels' index math.
// A 64-bit division is a software routine on the GPU (tens of instructions); an elementwise
// kernel that splits each index into coordinates pays several per element. IntDivider
// precomputes, on the host, a magic multiplier and a shift for a divisor d (the method of
// Granlund and Montgomery, "Division by invariant integers using multiplication", 1994), so
// that n / d = (mulhi(n, magic) + n) >> shift for every n < 2^31: one multiply-high, one add
// and one shift. Pure C++ (the CPU suite checks it against `/`); under nvcc div and divmod
// run on both sides.
#pragma once

#include <cstdint>

#include "core/error.h"

#ifdef __CUDACC__
#define ZT_HD __host__ __device__ __forceinline__
#else
#define ZT_HD inline
#endif

namespace zt::cuda {

/// n / d and n % d for 0 <= n < 2^31, a divisor 1 <= d < 2^31 fixed at construction.
struct IntDivider {
  uint32_t divisor = 1, magic = 0, shift = 0;

  IntDivider() = default;
  explicit IntDivider(int64_t d) {
    ZT_CHECK(d >= 1 && d < (int64_t{1} << 31), "IntDivider: divisor ", d, " outside [1, 2^31)");
    divisor = static_cast<uint32_t>(d);
    while ((uint64_t{1} << shift) < divisor) ++shift;  // shift = ceil(log2(d))
    // magic = floor(2^32 (2^shift - d) / d) + 1, which fits 32 bits since 2^shift < 2 d.
    magic = static_cast<uint32_t>(
        ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - divisor)) / divisor + 1);
  }

  /// n / d for 0 <= n < 2^31.
  ZT_HD uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, magic);
#else
    const auto hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (hi + n) >> shift;  // hi + n < 2^32: hi <= n and n < 2^31
  }
  /// q = n / d, r = n % d.
  ZT_HD void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

}  // namespace zt::cuda
