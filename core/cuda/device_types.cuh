// Device-side dtypes for the CUDA kernels: the 16-bit types (__nv_bfloat16, __half),
// conversions that match the CPU's (cpu::copy), and the dispatcher from a DType to its
// device type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace zt::cuda {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

/// S -> D exactly as cpu::copy converts: 16-bit floats go through float.
template <typename D, typename S>
__device__ __forceinline__ D convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    return convert<D>(__bfloat162float(x));
  } else if constexpr (std::is_same_v<S, __half>) {
    return convert<D>(__half2float(x));
  } else if constexpr (std::is_same_v<D, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<D, __half>) {
    return __float2half_rn(static_cast<float>(x));
  } else {
    return static_cast<D>(x);
  }
}

/// Calls fn.template operator()<T>() with the device type T of `t` (all dtypes).
template <typename Fn>
void dispatch_device(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    case DType::bf16:
      return fn.template operator()<__nv_bfloat16>();
    case DType::f16:
      return fn.template operator()<__half>();
    case DType::i64:
      return fn.template operator()<int64_t>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::b8:
      return fn.template operator()<bool>();
  }
  ZT_FAIL("unknown dtype");
}

/// Like dispatch_device, floating types only; other types are an error naming `op`.
template <typename Fn>
void dispatch_device_floating(DType t, const char* op, Fn&& fn) {
  ZT_CHECK(is_floating(t), op, ": expected a floating dtype, got ", dtype_name(t));
  dispatch_device(t, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || kIsHalf<T>) fn.template operator()<T>();
  });
}

}  // namespace zt::cuda
