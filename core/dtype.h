// Element types. f32/f64 are computed natively; bf16/f16 are storage types whose
// arithmetic goes through float; i64/i32/bool hold indices and masks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace zt {

enum class DType : uint8_t { f32, f64, bf16, f16, i64, i32, b8 };

/// Bytes per element.
size_t dtype_size(DType t);
/// Lower-case name: "f32", "bf16", ...
const char* dtype_name(DType t);
/// True for f32, f64, bf16, f16.
bool is_floating(DType t);
/// True for the 16-bit floating types, bf16 and f16.
inline bool is_16bit_float(DType t) {
  return t == DType::bf16 || t == DType::f16;
}
/// The gap between 1 and the next value of a floating type (torch.finfo(t).eps):
/// 2^-7 for bf16, 2^-10 for f16, 2^-23 for f32, 2^-52 for f64.
inline double machine_epsilon(DType t) {
  switch (t) {
    case DType::bf16:
      return 0.0078125;
    case DType::f16:
      return 0.0009765625;
    case DType::f64:
      return 2.220446049250313e-16;
    default:
      return 1.1920928955078125e-07;
  }
}

/// bfloat16: the top 16 bits of an IEEE float, rounded to nearest even.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  bf16(float f) {  // NOLINT: implicit by design, like a numeric type
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const {  // NOLINT
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// IEEE half precision, converted through float with round-to-nearest-even.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  f16(float f);            // NOLINT
  operator float() const;  // NOLINT
};

template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct dtype_of<f16> {
  static constexpr DType value = DType::f16;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::b8;
};

/// Calls fn.template operator()<T>() with T the C++ type of `t` (all dtypes).
template <typename Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    case DType::bf16:
      return fn.template operator()<bf16>();
    case DType::f16:
      return fn.template operator()<f16>();
    case DType::i64:
      return fn.template operator()<int64_t>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::b8:
      return fn.template operator()<bool>();
  }
  ZT_FAIL("unknown dtype");
}

/// Like dispatch_all, for floating types only; other types are an error naming `op`.
template <typename Fn>
decltype(auto) dispatch_floating(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    case DType::bf16:
      return fn.template operator()<bf16>();
    case DType::f16:
      return fn.template operator()<f16>();
    default:
      ZT_FAIL(op, ": expected a floating dtype, got ", dtype_name(t));
  }
}

/// For kernels written for f32 and f64 only (the ops convert 16-bit inputs first); any
/// other dtype is an error naming `op`.
template <typename Fn>
decltype(auto) dispatch_f32_f64(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f64:
      return fn.template operator()<double>();
    default:
      ZT_FAIL(op, ": kernel supports f32 and f64, got ", dtype_name(t));
  }
}

/// For index tensors: i64 or i32; any other dtype is an error naming `op`.
template <typename Fn>
decltype(auto) dispatch_index(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::i64:
      return fn.template operator()<int64_t>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    default:
      ZT_FAIL(op, ": indices must be i64 or i32, got ", dtype_name(t));
  }
}

/// Accumulation type, on the CPU and in CUDA code alike (device 16-bit types take the
/// default): double for f64, float for every other floating type, int64 for integers,
/// int for bool (so comparisons and sums of masks do integer arithmetic).
template <typename T>
struct acc_type {
  using type = float;
};
template <>
struct acc_type<double> {
  using type = double;
};
template <>
struct acc_type<int64_t> {
  using type = int64_t;
};
template <>
struct acc_type<int32_t> {
  using type = int64_t;
};
template <>
struct acc_type<bool> {
  using type = int;
};
template <typename T>
using acc_t = typename acc_type<T>::type;

}  // namespace zt
