// dtype tables and the f16 conversions.
#include "core/dtype.h"

#include <cmath>

namespace zt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::f16:
      return 2;
    case DType::i64:
      return 8;
    case DType::i32:
      return 4;
    case DType::b8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::i64:
      return "i64";
    case DType::i32:
      return "i32";
    case DType::b8:
      return "bool";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}

// Half conversion by bit manipulation (IEEE 754 binary16), round to nearest even.
f16::f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff) {  // inf or nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    return;
  }
  exp = exp - 127 + 15;
  if (exp >= 0x1f) {  // overflow -> inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (exp <= 0) {  // subnormal or zero
    if (exp < -10) {
      bits = static_cast<uint16_t>(sign);
      return;
    }
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    bits = static_cast<uint16_t>(sign | half);
    return;
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: fine
  bits = static_cast<uint16_t>(half);
}

f16::operator float() const {
  uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalize
      float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace zt
